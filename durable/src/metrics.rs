//! What a [`DurableScheduler`](crate::DurableScheduler) counts
//! ([`DurableMetrics`]), the `tracing` events it emits for the same
//! moments (the `tracing` feature), and what it reports through the
//! `metrics` facade (the `metrics` feature: `chronopool_durable_claimed_total`,
//! `_lease_expired_total`, `_runs_total` by outcome, `_store_errors_total`
//! by operation, the `_lateness_seconds` and `_run_seconds` histograms, all
//! by handler, and the `chronopool_durable_jobs` gauge by state, store-wide,
//! refreshed by the poll at most every 15 s): one place records them all,
//! so that they never disagree.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A snapshot of a scheduler's counters since it was made
/// ([`DurableScheduler::metrics`](crate::DurableScheduler::metrics)).
/// Each counts this process's part only; a cluster's figures are the sums
/// of its processes'. Every claimed run ends in exactly one of
/// `succeeded`, `skipped`, `retried`, `dead`, `released` or `lost`, and is
/// `running` until then.
///
/// ```
/// use chronopool_durable::DurableMetrics;
///
/// let m = DurableMetrics::default();
/// assert_eq!(
///     m.claimed,
///     m.succeeded + m.skipped + m.retried + m.dead + m.released + m.lost + m.running
/// );
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DurableMetrics {
    /// Jobs placed in the executor's timer to fire (each fire time once).
    pub due: u64,
    /// Runs this process claimed in the store.
    pub claimed: u64,
    /// Of those, runs taken over from a scheduler whose lease ended (it
    /// crashed, stalled, or lost the store), this one included.
    pub lease_expired: u64,
    /// Runs of crashed processes whose leases this process ended early,
    /// having seen their owner gone (PostgreSQL: the owner's session lock
    /// vanished with its connection).
    pub reaped: u64,
    /// Claimed runs not ended yet.
    pub running: u64,
    /// Runs that succeeded.
    pub succeeded: u64,
    /// Runs not made because their occurrence was later than its job's
    /// [catch-up window](crate::Job::catch_up).
    pub skipped: u64,
    /// Runs that failed and wait for another attempt (or, for a job no
    /// handler here runs, for a scheduler that has its handler).
    pub retried: u64,
    /// Runs that failed for the last time: their job is dead, or for a
    /// recurring job, their occurrence (the job goes on to its next).
    pub dead: u64,
    /// Claims given back unrun, their attempt not counted: the executor
    /// refused the run (it was shut down), or dropped it unrun.
    pub released: u64,
    /// Runs whose outcome was not stored because the job was no longer
    /// theirs: its lease ended and another run took it over, or it was
    /// cancelled meanwhile. (A run whose job was replaced meanwhile ends
    /// as usual and counts by its own outcome; the new job stands, its
    /// retry or death not applied.)
    pub lost: u64,
    /// Leases this process renewed while its runs were in progress.
    pub renewed: u64,
    /// Done and dead jobs deleted after their retention.
    pub cleaned: u64,
    /// Operations on the store that failed (each is tried again: claims,
    /// finishes and renewals after a back-off, polls at the next poll).
    pub store_errors: u64,
}

/// The live counters behind [`DurableMetrics`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    due: AtomicU64,
    claimed: AtomicU64,
    lease_expired: AtomicU64,
    reaped: AtomicU64,
    succeeded: AtomicU64,
    skipped: AtomicU64,
    retried: AtomicU64,
    dead: AtomicU64,
    released: AtomicU64,
    lost: AtomicU64,
    renewed: AtomicU64,
    cleaned: AtomicU64,
    store_errors: AtomicU64,
}

/// How a claimed run ended, for [`Counters::ended`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Succeeded,
    Skipped,
    Retried,
    Dead,
    Released,
    Lost,
}

impl Outcome {
    /// Its label (`metrics` feature).
    #[cfg(feature = "metrics")]
    fn name(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Skipped => "skipped",
            Outcome::Retried => "retried",
            Outcome::Dead => "dead",
            Outcome::Released => "released",
            Outcome::Lost => "lost",
        }
    }
}

impl Counters {
    pub(crate) fn snapshot(&self) -> DurableMetrics {
        // `running` is derived, so that it is never negative and a
        // snapshot's sums hold: each ended run was claimed first
        // (`claimed` is read last, so it is at least their sum).
        let succeeded = self.succeeded.load(Relaxed);
        let skipped = self.skipped.load(Relaxed);
        let retried = self.retried.load(Relaxed);
        let dead = self.dead.load(Relaxed);
        let released = self.released.load(Relaxed);
        let lost = self.lost.load(Relaxed);
        let claimed = self.claimed.load(Relaxed);
        DurableMetrics {
            due: self.due.load(Relaxed),
            claimed,
            lease_expired: self.lease_expired.load(Relaxed),
            reaped: self.reaped.load(Relaxed),
            running: claimed.saturating_sub(succeeded + skipped + retried + dead + released + lost),
            succeeded,
            skipped,
            retried,
            dead,
            released,
            lost,
            renewed: self.renewed.load(Relaxed),
            cleaned: self.cleaned.load(Relaxed),
            store_errors: self.store_errors.load(Relaxed),
        }
    }

    pub(crate) fn placed(&self, _key: &str, _fire: i64) {
        self.due.fetch_add(1, Relaxed);
        #[cfg(feature = "tracing")]
        tracing::trace!(key = _key, fire_us = _fire, "job due");
    }

    /// A run was claimed, `_late_us` after it was due.
    pub(crate) fn claimed(
        &self,
        _key: &str,
        _name: &str,
        _attempt: u32,
        taken_over: bool,
        _late_us: i64,
    ) {
        #[cfg(feature = "metrics")]
        {
            let handler = _name.to_owned();
            metrics::counter!("chronopool_durable_claimed_total", "handler" => handler.clone())
                .increment(1);
            if taken_over {
                metrics::counter!("chronopool_durable_lease_expired_total", "handler" => handler.clone())
                    .increment(1);
            }
            metrics::histogram!("chronopool_durable_lateness_seconds", "handler" => handler)
                .record(_late_us as f64 / 1e6);
        }
        if taken_over {
            self.lease_expired.fetch_add(1, Relaxed);
            #[cfg(feature = "tracing")]
            tracing::warn!(
                key = _key,
                attempt = _attempt,
                "lease expired: running a job another run had claimed"
            );
        }
        self.claimed.fetch_add(1, Relaxed);
        #[cfg(feature = "tracing")]
        tracing::debug!(key = _key, attempt = _attempt, "job claimed");
    }

    pub(crate) fn reaped(&self, n: u64) {
        self.reaped.fetch_add(n, Relaxed);
        #[cfg(feature = "tracing")]
        if n > 0 {
            tracing::warn!(
                runs = n,
                "leases of runs whose scheduler is gone ended early"
            );
        }
    }

    pub(crate) fn ended(&self, _key: &str, _name: &str, outcome: Outcome, _error: Option<&str>) {
        #[cfg(feature = "metrics")]
        metrics::counter!(
            "chronopool_durable_runs_total",
            "handler" => _name.to_owned(),
            "outcome" => outcome.name()
        )
        .increment(1);
        let counter = match outcome {
            Outcome::Succeeded => &self.succeeded,
            Outcome::Skipped => &self.skipped,
            Outcome::Retried => &self.retried,
            Outcome::Dead => &self.dead,
            Outcome::Released => &self.released,
            Outcome::Lost => &self.lost,
        };
        counter.fetch_add(1, Relaxed);
        #[cfg(feature = "tracing")]
        match outcome {
            Outcome::Succeeded => tracing::debug!(key = _key, "job succeeded"),
            Outcome::Skipped => {
                tracing::info!(
                    key = _key,
                    "occurrence skipped: later than its catch-up window"
                )
            }
            Outcome::Retried => tracing::info!(key = _key, error = _error, "job retried"),
            // For a recurring job, the occurrence (`DurableMetrics::dead`).
            Outcome::Dead => tracing::warn!(key = _key, error = _error, "job dead"),
            Outcome::Released => tracing::debug!(key = _key, "claim released unrun"),
            Outcome::Lost => tracing::warn!(
                key = _key,
                "run not stored: the job is no longer this run's"
            ),
        }
    }

    /// A handler ran for `_ran_for`.
    pub(crate) fn ran(&self, _name: &str, _ran_for: std::time::Duration) {
        #[cfg(feature = "metrics")]
        metrics::histogram!("chronopool_durable_run_seconds", "handler" => _name.to_owned())
            .record(_ran_for.as_secs_f64());
    }

    /// The jobs in each state, store-wide (`metrics` feature: gauges).
    #[cfg(feature = "metrics")]
    pub(crate) fn jobs(&self, counts: &crate::listing::JobCounts) {
        for (state, n) in [
            ("scheduled", counts.scheduled),
            ("paused", counts.paused),
            ("running", counts.running),
            ("dead", counts.dead),
            ("done", counts.done),
        ] {
            metrics::gauge!("chronopool_durable_jobs", "state" => state).set(n as f64);
        }
    }

    pub(crate) fn renewed(&self, n: usize) {
        self.renewed.fetch_add(n as u64, Relaxed);
    }

    pub(crate) fn cleaned(&self, n: u64) {
        self.cleaned.fetch_add(n, Relaxed);
        #[cfg(feature = "tracing")]
        if n > 0 {
            tracing::debug!(rows = n, "done and dead jobs cleaned");
        }
    }

    pub(crate) fn store_error(&self, _what: &'static str, _error: &crate::error::StoreError) {
        self.store_errors.fetch_add(1, Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("chronopool_durable_store_errors_total", "operation" => _what)
            .increment(1);
        #[cfg(feature = "tracing")]
        tracing::error!(operation = _what, error = %_error, "durable store failed");
    }
}

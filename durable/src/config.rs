//! [`Config`]: how a [`DurableScheduler`](crate::DurableScheduler) works,
//! checked when the scheduler is made.

use std::time::Duration;

use chronopool::trigger::Backoff;

use crate::error::DurableError;
use crate::time::duration_micros;

/// How a [`DurableScheduler`](crate::DurableScheduler) works; the defaults
/// suit jobs due from seconds to years ahead. Checked when the scheduler
/// is made: a setting that cannot work is a [`DurableError::Config`]
/// naming it.
///
/// ```
/// use chronopool::trigger::{Backoff, Jitter};
/// use chronopool_durable::Config;
/// use std::time::Duration;
///
/// let mut config = Config::default();
/// config.lease = Duration::from_secs(30);
/// config.retry = Backoff::exponential(Duration::from_secs(5), 3.0, Duration::from_secs(3600))
///     .jitter(Jitter::Full);
/// config.name = Some("billing-7".into());
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// How far ahead the jobs in memory reach (60 s): the jobs due within
    /// it wait in the executor's timer, the rest only in the store.
    pub window: Duration,
    /// How often the store is asked for the next window (10 s; at most
    /// half the window, so that no job is placed late). A poll that finds
    /// a full [`batch`](Config::batch) polls again as soon as half of it
    /// has been claimed.
    pub poll_interval: Duration,
    /// How long a claim lasts before another scheduler may take the job
    /// over; renewed every third of it from the claim until the run's
    /// outcome is stored (60 s). On PostgreSQL a crashed process's runs are
    /// taken over sooner, once the server has seen its connection close.
    pub lease: Duration,
    /// Runs of an occurrence before the job is dead (5); for a recurring
    /// job, that occurrence is, and the job goes on to its next one. A run
    /// counts from its claim, so a handler that kills its process (an
    /// abort, the OOM killer) uses up its attempts too.
    pub max_attempts: u32,
    /// The wait before each retry of a failed run: the `n`-th retry waits
    /// [`Backoff::delay_after`]`(n)` (1 s, doubling, at most 5 min, no
    /// jitter).
    pub retry: Backoff,
    /// How long a due job whose handler this scheduler lacks is left to
    /// the schedulers that have it, before this one records why it waits
    /// and puts it back for as long again (60 s).
    pub unhandled_wait: Duration,
    /// The most jobs a poll places in the executor's timer (10,000).
    pub batch: usize,
    /// The most runs of this scheduler at once (`None`, the default: the
    /// executor's worker threads). A job is claimed only when a run can
    /// start (see [`DurableScheduler`](crate::DurableScheduler)).
    pub concurrency: Option<usize>,
    /// How long a one-shot job that succeeded is kept, as
    /// [`JobState::Done`](crate::JobState::Done), for inspection (zero, the
    /// default: it is deleted by the run's own finish).
    pub keep_done: Duration,
    /// How long a dead job is kept for inspection and a manual
    /// [`retry`](crate::DurableScheduler::retry) before it is deleted (7
    /// days).
    pub keep_dead: Duration,
    /// How many of each job's last runs the history keeps (10; 0 keeps no
    /// history, and spares a write per run): when each started and ended,
    /// which scheduler ran it, its attempt, its outcome and error, read
    /// with [`DurableScheduler::history`](crate::DurableScheduler::history).
    pub keep_runs: usize,
    /// How long a run stays in the history at the most (1 day).
    pub keep_runs_for: Duration,
    /// A readable name for this scheduler, stored beside the runs it
    /// claims, for people (`None`: none). Display only: every scheduler
    /// also draws a unique identity of 128 random bits when it is made,
    /// which is what claims are checked against.
    pub name: Option<String>,
    /// Whether this scheduler listens for other processes' schedules
    /// (true): on PostgreSQL a connection of its own that `LISTEN`s (a job
    /// another process schedules for now is placed within milliseconds);
    /// on SQLite a look at the file's change counter every 25 ms. False:
    /// other processes' schedules are placed at the next
    /// [`poll`](Config::poll_interval) (for a connection pooler that does
    /// not pass `LISTEN` on, such as PgBouncer in transaction mode, or to
    /// spare the connection). This process's own schedules are placed at
    /// once either way, and the polls stay the source of truth.
    pub notifications: bool,
    /// Whether opening the store brings an older schema to this version's
    /// (true). False: an older schema is an error, and nothing is written
    /// (for tools beside running services, such as the CLI: a newer tool
    /// must not upgrade the schema under older services, which would then
    /// refuse to start).
    pub migrate: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            window: Duration::from_secs(60),
            poll_interval: Duration::from_secs(10),
            notifications: true,
            migrate: true,
            lease: Duration::from_secs(60),
            max_attempts: 5,
            retry: Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(300)),
            unhandled_wait: Duration::from_secs(60),
            batch: 10_000,
            concurrency: None,
            keep_done: Duration::ZERO,
            keep_dead: Duration::from_secs(7 * 24 * 3600),
            keep_runs: 10,
            keep_runs_for: Duration::from_secs(24 * 3600),
            name: None,
        }
    }
}

/// The most jobs one poll may place.
const MAX_BATCH: usize = 1_000_000;
/// The shortest lease: a third of it is the renewal period.
const MIN_LEASE: Duration = Duration::from_millis(3);

impl Config {
    /// Checks every setting; the first that cannot work, by name.
    pub(crate) fn validate(&self) -> Result<(), DurableError> {
        let storable = |field: &'static str, d: Duration| {
            duration_micros(d).map(drop).ok_or_else(|| {
                DurableError::config(field, format!("{d:?} is longer than 9,999 years"))
            })
        };
        for (field, d) in [
            ("window", self.window),
            ("poll_interval", self.poll_interval),
            ("lease", self.lease),
            ("unhandled_wait", self.unhandled_wait),
            ("keep_done", self.keep_done),
            ("keep_dead", self.keep_dead),
            ("keep_runs_for", self.keep_runs_for),
        ] {
            storable(field, d)?;
        }
        if self.window.is_zero() {
            return Err(DurableError::config(
                "window",
                "must not be zero: no job would ever be placed",
            ));
        }
        if self.poll_interval.is_zero() {
            return Err(DurableError::config("poll_interval", "must not be zero"));
        }
        if self.poll_interval > self.window / 2 {
            return Err(DurableError::config(
                "poll_interval",
                format!(
                    "{:?} is longer than half the window ({:?}): jobs would be placed late",
                    self.poll_interval, self.window
                ),
            ));
        }
        if self.lease < MIN_LEASE {
            return Err(DurableError::config(
                "lease",
                format!("{:?} is shorter than {MIN_LEASE:?}", self.lease),
            ));
        }
        if self.max_attempts == 0 {
            return Err(DurableError::config("max_attempts", "must be at least 1"));
        }
        if self.unhandled_wait.is_zero() {
            return Err(DurableError::config(
                "unhandled_wait",
                "must not be zero: a job no handler here runs would be claimed again at once",
            ));
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(DurableError::config(
                "batch",
                format!("{} is not in 1..={MAX_BATCH}", self.batch),
            ));
        }
        if self.concurrency == Some(0) {
            return Err(DurableError::config(
                "concurrency",
                "must not be zero: no job would run",
            ));
        }
        if self
            .name
            .as_deref()
            .is_some_and(|n| n.contains('\0') || n.len() > 1024)
        {
            return Err(DurableError::config(
                "name",
                "a NUL byte, or more than 1,024 bytes: PostgreSQL could not store it",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(config: &Config) -> Option<&'static str> {
        match config.validate() {
            Ok(()) => None,
            Err(DurableError::Config { field, .. }) => Some(field),
            Err(e) => panic!("not a config error: {e}"),
        }
    }

    /// A setting broken, and the field the error must name.
    type Case = (&'static str, fn(&mut Config));

    #[test]
    fn every_setting_that_cannot_work_is_named() {
        assert_eq!(field_of(&Config::default()), None);
        let cases: [Case; 12] = [
            ("name", |c| c.name = Some("a\0b".into())),
            ("batch", |c| c.batch = 0),
            ("batch", |c| c.batch = usize::MAX),
            ("lease", |c| c.lease = Duration::ZERO),
            ("lease", |c| c.lease = Duration::MAX),
            ("window", |c| c.window = Duration::ZERO),
            ("poll_interval", |c| c.poll_interval = Duration::ZERO),
            ("poll_interval", |c| c.poll_interval = c.window),
            ("max_attempts", |c| c.max_attempts = 0),
            ("unhandled_wait", |c| c.unhandled_wait = Duration::ZERO),
            ("concurrency", |c| c.concurrency = Some(0)),
            ("keep_dead", |c| c.keep_dead = Duration::MAX),
        ];
        for (field, break_it) in cases {
            let mut config = Config::default();
            break_it(&mut config);
            assert_eq!(field_of(&config), Some(field), "{config:?}");
        }
    }
}

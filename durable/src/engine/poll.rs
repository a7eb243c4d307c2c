//! [`PollLoop`]: the jobs due within the window, placed in the executor's
//! timer; the leases of runs whose scheduler is gone, ended; done and dead
//! jobs past their retention, deleted. On a thread of the scheduler's own
//! (see `engine/mod.rs`), asked to poll by the executor's poll task every
//! `poll_interval`, and by the run loop for a follow-up (`placement.rs`).
//!
//! A poll lists only the jobs of the handlers this scheduler has, so the
//! overdue jobs of others never fill its batch; another handler's jobs are
//! listed once they have waited `unhandled_wait` (see
//! [`Config::unhandled_wait`](crate::Config::unhandled_wait)). Of the runs
//! whose lease ends within the window it places those of other
//! schedulers, and its own only once their lease has ended (its own live
//! runs are renewed by its run loop; one whose lease ended anyway, because
//! the store was away, is renewed by the run loop if its run still holds
//! its fence, and claimed if the fence is gone). A poll that fails
//! is tried again after a back-off (100 ms, doubling up to the poll
//! interval), not only at the next poll.
//!
//! # Jobs scheduled elsewhere, placed at once
//!
//! A job scheduled in this process is placed by its `schedule` call. One
//! scheduled by another process is seen by a *fresh* poll, which asks only
//! for the jobs scheduled since the highest sequence number the last poll
//! saw (an index lookup that usually finds nothing): on PostgreSQL when
//! the listener (`listen.rs`) hears the schedule's notification, on
//! SQLite when the file's `data_version` shows another connection
//! committed, which the loop checks every [`WATCH`] while it waits. The
//! full polls stay the source of truth: a notification lost, or a
//! schedule seen out of order, costs latency, never a job.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronopool::{Busy, PanicPayload};

use super::{Shared, ToPoll};
use crate::error::StoreError;
use crate::store::{Conn, DueQuery, Retention, Role, Store, REAP_CONFIRM};
use crate::time;

/// How often a SQLite poll loop that waits looks whether another
/// connection committed (module doc).
pub(crate) const WATCH: Duration = Duration::from_millis(25);

/// How often, at the most, the jobs-by-state gauges are read (a count of
/// the whole store; `metrics` feature).
#[cfg(feature = "metrics")]
const GAUGES_EVERY: Duration = Duration::from_secs(15);

/// The poll loop (module doc).
pub(crate) struct PollLoop {
    shared: Arc<Shared>,
    store: Arc<dyn Store>,
    rx: Receiver<ToPoll>,
    conn: Option<Box<dyn Conn>>,
    /// Failed polls in a row.
    failures: u32,
    /// The highest sequence number of a schedule the polls have seen
    /// (`None` until a full poll succeeded).
    seen: Option<i64>,
    /// Owners (lock keys) found without their session lock, each with
    /// when it was first found so; a poll at least `store::REAP_CONFIRM`
    /// later that finds it still so ends its leases.
    suspects: HashMap<i64, Instant>,
    recheck_at: Option<Instant>,
    /// When the jobs-by-state gauges were last read (`metrics` feature).
    #[cfg(feature = "metrics")]
    gauges_at: Option<Instant>,
}

/// What one wake-up of the loop asks for.
#[derive(Default)]
struct Asked {
    full: bool,
    fresh: bool,
    /// The guards of the tasks that asked (a manual clock waits for them).
    busy: Vec<Busy>,
}

impl PollLoop {
    pub(crate) fn new(shared: Arc<Shared>, store: Arc<dyn Store>, rx: Receiver<ToPoll>) -> Self {
        PollLoop {
            shared,
            store,
            rx,
            conn: None,
            failures: 0,
            seen: None,
            suspects: HashMap::new(),
            recheck_at: None,
            #[cfg(feature = "metrics")]
            gauges_at: None,
        }
    }

    pub(crate) fn run(mut self) {
        let watch = !self.store.notifies() && self.shared.config.notifications;
        loop {
            let mut wait = if self.failures > 0 {
                Duration::from_millis(100)
                    .saturating_mul(1 << self.failures.min(16))
                    .min(self.shared.config.poll_interval)
            } else if watch {
                WATCH
            } else {
                Duration::MAX
            };
            if let Some(at) = self.recheck_at {
                wait = wait.min(at.saturating_duration_since(Instant::now()));
            }
            let mut asked = Asked::default();
            match self.rx.recv_timeout(wait) {
                Ok(ToPoll::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(message) => asked.add(message),
                // A failed poll is tried again, owners without their lock
                // looked at again; a SQLite file is looked at.
                Err(RecvTimeoutError::Timeout) => {
                    let recheck = self.recheck_at.is_some_and(|at| Instant::now() >= at);
                    asked.full = self.failures > 0 || recheck;
                    asked.fresh = !asked.full && self.changed();
                }
            }
            // What was asked meanwhile is one poll.
            while let Ok(message) = self.rx.try_recv() {
                if matches!(message, ToPoll::Stop) {
                    return;
                }
                asked.add(message);
            }
            // A panic (a driver's bug) must not end the loop.
            let polled = catch_unwind(AssertUnwindSafe(|| {
                if asked.full {
                    self.poll()
                } else if asked.fresh {
                    self.fresh()
                } else {
                    Ok(())
                }
            }))
            .unwrap_or_else(|p| {
                let payload = PanicPayload::from(p);
                Err(StoreError::other(format!("the poll panicked: {payload}")))
            });
            match polled {
                Ok(()) => self.failures = 0,
                Err(e) => {
                    self.failures += 1;
                    self.shared.counters.store_error("poll", &e);
                }
            }
            // Placed: a manual clock may move on.
            drop(asked.busy);
        }
    }

    fn conn(&mut self) -> Result<&mut Box<dyn Conn>, StoreError> {
        if self.conn.is_none() {
            self.conn = Some(self.store.connect(Role::Poll(&self.shared.owner))?);
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    /// True if another connection committed since the last look (SQLite).
    fn changed(&mut self) -> bool {
        self.conn().and_then(|c| c.changed()).unwrap_or(false)
    }

    /// One full poll (module doc).
    fn poll(&mut self) -> Result<(), StoreError> {
        let shared = Arc::clone(&self.shared);
        let config = &shared.config;
        let now = shared.now_micros();
        let names = shared.handler_names();
        let confirmed: Vec<i64> = self
            .suspects
            .iter()
            .filter(|(_, since)| since.elapsed() >= REAP_CONFIRM)
            .map(|(&lock, _)| lock)
            .collect();
        let (reaped, missing) = self.conn()?.reap(now, config.lease, &confirmed)?;
        shared.counters.reaped(reaped);
        let looked = Instant::now();
        let before = std::mem::take(&mut self.suspects);
        self.suspects = missing
            .into_iter()
            .map(|lock| (lock, before.get(&lock).copied().unwrap_or(looked)))
            .collect();
        self.recheck_at = self
            .suspects
            .values()
            .min()
            .map(|&since| since + REAP_CONFIRM);
        let conn = self.conn()?;
        // Read first: what is scheduled during the poll is fresh. And on
        // SQLite, what commits after this look at the file's change
        // counter brings a fresh poll (what committed before it, this poll
        // sees): without it, a commit between the poll and the loop's
        // first look, which only takes the counter's value, waited for the
        // next full poll.
        conn.changed()?;
        let stamp = shared.placements.stamp();
        let seen = conn.last_seq()?;
        let window = time::duration_micros_saturating(config.window);
        let wait = time::duration_micros_saturating(config.unhandled_wait);
        let due = conn.due(&DueQuery {
            until: time::add(now, window),
            names: &names,
            limit: config.batch,
            unhandled_before: now.saturating_sub(wait),
            owner: &shared.owner.id,
            now,
        })?;
        let handled = due.iter().filter(|d| names.contains(&d.name)).count();
        if handled >= config.batch {
            shared.placements.want_follow_up();
        }
        for d in due {
            shared
                .placements
                .place(&shared, &d.key, &d.name, d.fire, d.expired, stamp);
        }
        let before = |keep: Duration| now.saturating_sub(time::duration_micros_saturating(keep));
        let cleaned = self.conn()?.clean(&Retention {
            done_before: before(config.keep_done),
            dead_before: before(config.keep_dead),
            runs_before: before(config.keep_runs_for),
        })?;
        shared.counters.cleaned(cleaned);
        #[cfg(feature = "metrics")]
        if self.gauges_at.is_none_or(|at| at.elapsed() >= GAUGES_EVERY) {
            self.gauges_at = Some(Instant::now());
            let counts = self.conn()?.counts()?;
            shared
                .counters
                .jobs(&crate::listing::JobCounts::of(&counts));
        }
        self.seen = Some(self.seen.map_or(seen, |s| s.max(seen)));
        Ok(())
    }

    /// A fresh poll: the jobs scheduled since the last one saw (module
    /// doc), batch after batch.
    fn fresh(&mut self) -> Result<(), StoreError> {
        let Some(mut seen) = self.seen else {
            return self.poll();
        };
        let shared = Arc::clone(&self.shared);
        let config = &shared.config;
        let names = shared.handler_names();
        loop {
            let until = time::add(
                shared.now_micros(),
                time::duration_micros_saturating(config.window),
            );
            let stamp = shared.placements.stamp();
            let (due, last) = self.conn()?.fresh(seen, until, &names, config.batch)?;
            let full = due.len() >= config.batch;
            for d in due {
                shared
                    .placements
                    .place(&shared, &d.key, &d.name, d.fire, false, stamp);
            }
            seen = last;
            self.seen = Some(seen);
            if !full {
                return Ok(());
            }
        }
    }
}

impl Asked {
    fn add(&mut self, message: ToPoll) {
        match message {
            ToPoll::Poll { busy } => {
                self.full = true;
                self.busy.extend(busy);
            }
            ToPoll::Fresh => self.fresh = true,
            ToPoll::Stop => {}
        }
    }
}

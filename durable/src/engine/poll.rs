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
//! the store was away, is taken over like another's). A poll that fails
//! is tried again after a back-off (100 ms, doubling up to the poll
//! interval), not only at the next poll.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use chronopool::{Busy, PanicPayload};

use super::{Shared, ToPoll};
use crate::error::StoreError;
use crate::store::{Conn, DueQuery, Role, Store};
use crate::time;

/// The poll loop (module doc).
pub(crate) struct PollLoop {
    shared: Arc<Shared>,
    store: Arc<dyn Store>,
    rx: Receiver<ToPoll>,
    conn: Option<Box<dyn Conn>>,
    /// Failed polls in a row.
    failures: u32,
}

impl PollLoop {
    pub(crate) fn new(shared: Arc<Shared>, store: Arc<dyn Store>, rx: Receiver<ToPoll>) -> Self {
        PollLoop {
            shared,
            store,
            rx,
            conn: None,
            failures: 0,
        }
    }

    pub(crate) fn run(mut self) {
        loop {
            let message = if self.failures == 0 {
                self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                let retry = Duration::from_millis(100)
                    .saturating_mul(1 << self.failures.min(16))
                    .min(self.shared.config.poll_interval);
                self.rx.recv_timeout(retry)
            };
            // Polls asked for meanwhile are one poll.
            let mut busy: Vec<Busy> = Vec::new();
            match message {
                Ok(ToPoll::Poll { busy: b }) => busy.extend(b),
                Ok(ToPoll::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {}
            }
            while let Ok(message) = self.rx.try_recv() {
                match message {
                    ToPoll::Poll { busy: b } => busy.extend(b),
                    ToPoll::Stop => return,
                }
            }
            // A panic (a driver's bug) must not end the loop.
            let polled = catch_unwind(AssertUnwindSafe(|| self.poll())).unwrap_or_else(|p| {
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
            drop(busy);
        }
    }

    fn conn(&mut self) -> Result<&mut Box<dyn Conn>, StoreError> {
        if self.conn.is_none() {
            self.conn = Some(self.store.connect(Role::Poll)?);
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    /// One poll (module doc).
    fn poll(&mut self) -> Result<(), StoreError> {
        let shared = Arc::clone(&self.shared);
        let config = &shared.config;
        let now = shared.now_micros();
        let names = shared.handler_names();
        let conn = self.conn()?;
        let reaped = conn.reap(now, config.lease)?;
        shared.counters.reaped(reaped);
        let window = time::duration_micros_saturating(config.window);
        let wait = time::duration_micros_saturating(config.unhandled_wait);
        let due = conn.due(&DueQuery {
            until: time::add(now, window),
            names: &names,
            limit: config.batch,
            unhandled_before: now.saturating_sub(wait),
        })?;
        let handled = due.iter().filter(|d| names.contains(&d.name)).count();
        if handled >= config.batch {
            shared.placements.want_follow_up();
        }
        for d in due {
            if d.expired && d.owner.as_deref() == Some(&shared.owner.id) && d.fire > now {
                continue; // a live run of ours: its lease is renewed
            }
            shared.placements.place(&shared, &d.key, d.fire, d.expired);
        }
        let done_before = now.saturating_sub(time::duration_micros_saturating(config.keep_done));
        let dead_before = now.saturating_sub(time::duration_micros_saturating(config.keep_dead));
        let cleaned = self.conn()?.clean(done_before, dead_before)?;
        shared.counters.cleaned(cleaned);
        Ok(())
    }
}

//! [`JobCount`]: for a pool on a manual clock, the jobs queued or running,
//! which `ManualClock::advance` waits to see at zero (see `time/manual.rs`).
//!
//! A job is counted from just before it is pushed on a queue until its run
//! ends, or until it leaves the queues unrun (taken back by a refused
//! submission, drained by `shutdown_now`, given up by an exiting worker).
//! The job that takes the count to zero notifies the clock. A pool on the
//! monotonic clock counts nothing: its queues' hot paths only test that the
//! count is absent.

use crate::sync::{AtomicUsize, Ordering, StdArc};
use crate::time::manual::ManualState;

/// The jobs of a pool on a manual clock (see the module doc).
#[derive(Debug)]
pub(crate) struct JobCount {
    jobs: AtomicUsize,
    clock: StdArc<ManualState>,
}

impl JobCount {
    pub(crate) fn new(clock: StdArc<ManualState>) -> Self {
        JobCount {
            jobs: AtomicUsize::new(0),
            clock,
        }
    }

    /// A job is about to be pushed. `SeqCst`, as `ended`: `advance` reads
    /// the count and then the timer's state, and the job's own pushes (a
    /// task that schedules another) come before its end.
    pub(crate) fn pushed(&self) {
        self.jobs.fetch_add(1, Ordering::SeqCst);
    }

    /// `n` timer futures' alarms fell due and are about to be rung: they
    /// count as jobs until [`ended`](Self::ended), so that `advance` does
    /// not return before their wakers are woken.
    pub(crate) fn ringing(&self, n: usize) {
        self.jobs.fetch_add(n, Ordering::SeqCst);
    }

    /// `n` jobs ran or left the queues unrun.
    pub(crate) fn ended(&self, n: usize) {
        if n > 0 && self.jobs.fetch_sub(n, Ordering::SeqCst) == n {
            self.clock.notify_quiet();
        }
    }

    /// Wakes an `advance` waiting for quiet, to look again (the pool's
    /// last worker exited).
    pub(crate) fn notify_clock(&self) {
        self.clock.notify_quiet();
    }

    /// Jobs queued or running.
    pub(crate) fn jobs(&self) -> usize {
        self.jobs.load(Ordering::SeqCst)
    }
}

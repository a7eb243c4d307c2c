//! [`JobCount`]: for a pool on a manual clock, the jobs queued or running,
//! which `ManualClock::advance` waits to see at zero (see `time/manual.rs`).
//!
//! A job is counted from just before it is pushed on a queue until its run
//! ends, or until it leaves the queues unrun (taken back by a refused
//! submission, drained by `shutdown_now`, given up by an exiting worker).
//! The job that takes the count to zero notifies the clock. A pool on the
//! monotonic clock counts nothing: its queues' hot paths only test that the
//! count is absent.
//!
//! # Why the word also counts every job ever counted
//!
//! `advance` cannot read the jobs and the timer's state at one instant: it
//! reads the count, then the timer (under its lock). The timer thread may
//! take a due entry out of the timer and count it as a job in between (a
//! task that a run re-armed just before it ended): the count was 0 when
//! read, the entry is gone from the timer when looked at, and `advance`
//! would return with the task still queued (seen: `burst_catches_up_back
//! _to_back` about once in a thousand runs, `delay()` read while the
//! catch-up run waited; the loom model `jump_vs_a_catch_up_handed_over`).
//! So the word ([`Jobs`]) counts, beside the jobs queued or running, every
//! job ever counted (wrapping), and `advance` reads it before and after its
//! look at the timer: if it did not change, no job was counted and none
//! ended in between, and with none queued or running at the first read,
//! none existed meanwhile to re-arm a task or be handed over, so what it
//! saw of the timer holds for the whole window.

use crate::sync::{AtomicU64, Ordering, StdArc};
use crate::time::manual::{Jobs, ManualState};

/// The jobs of a pool on a manual clock (see the module doc).
#[derive(Debug)]
pub(crate) struct JobCount {
    jobs: AtomicU64,
    clock: StdArc<ManualState>,
}

impl JobCount {
    pub(crate) fn new(clock: StdArc<ManualState>) -> Self {
        JobCount {
            jobs: AtomicU64::new(0),
            clock,
        }
    }

    /// A job is about to be pushed. `SeqCst`, as `ended`: `advance` reads
    /// the count and then the timer's state, and the job's own pushes (a
    /// task that schedules another) come before its end.
    pub(crate) fn pushed(&self) {
        self.jobs.fetch_add(Jobs::ONE, Ordering::SeqCst);
    }

    /// `n` timer futures' alarms fell due and are about to be rung: they
    /// count as jobs until [`ended`](Self::ended), so that `advance` does
    /// not return before their wakers are woken.
    pub(crate) fn ringing(&self, n: usize) {
        self.jobs
            .fetch_add(Jobs::ONE.wrapping_mul(n as u64), Ordering::SeqCst);
    }

    /// `n` jobs ran or left the queues unrun (the total keeps them).
    pub(crate) fn ended(&self, n: usize) {
        let n = n as u64;
        if n > 0 && self.jobs.fetch_sub(n, Ordering::SeqCst) & Jobs::LIVE == n {
            self.clock.notify_quiet();
        }
    }

    /// Wakes an `advance` waiting for quiet, to look again (the pool's
    /// last worker exited).
    pub(crate) fn notify_clock(&self) {
        self.clock.notify_quiet();
    }

    /// Jobs queued or running, and every job counted (module doc).
    pub(crate) fn jobs(&self) -> Jobs {
        Jobs(self.jobs.load(Ordering::SeqCst))
    }
}

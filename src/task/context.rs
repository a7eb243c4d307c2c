//! [`TaskContext`]: what a task needs from whatever runs it, so that the
//! task layer knows nothing of the pool (as tokio's task cells know their
//! scheduler only through its `Schedule` trait), and a task cell can be
//! tested against a context of the test's own.
//!
//! It is also where the panics of user code go that no handle reports: a
//! closure dropped unrun, an output nobody joined, a waker. Such code is
//! dropped or called through `drop_reporting`
//! and `wake`: a panic there is caught and shown to
//! the context (the pool's `on_panic` hook), on the thread where it
//! happened, and never unwinds into a worker, the timer thread, or the
//! caller of `cancel`, `shutdown_now` or a `drop`.

use std::task::Waker;

use crate::sync::{CellArc, StdArc};
use crate::time::{Clock, Nanos};

use super::delayed::{Delayed, WallTask};
use super::error::PanicPayload;
use super::state::Header;
use super::unwind::report_panic;

/// What a task needs from the pool that runs it.
pub(crate) trait TaskContext {
    /// Shows a panic of the task's user code to the `on_panic` hook (the
    /// caller keeps the payload: it may go to the task's handle too). A
    /// panic of the hook itself is caught.
    fn show_panic(&self, payload: &PanicPayload);

    /// The clock the task's deadlines are on.
    fn clock(&self) -> &Clock;

    /// The time now, on [`clock`](Self::clock).
    fn now(&self) -> Nanos {
        self.clock().now()
    }

    /// Hands a recurring task that just ran (or was placed again) back to
    /// the timer for its next run, if the pool still takes one (a
    /// `periodic` one, or a one-shot task at a wall time): `reset` (which
    /// makes the task runnable again, or returns false if a cancel or a
    /// reschedule came during the run) runs inside the re-arm's admission,
    /// and `entry` is handed over if it returned true. True if the task was
    /// re-armed.
    fn rearm(
        &self,
        entry: CellArc<dyn Delayed>,
        periodic: bool,
        reset: &mut dyn FnMut() -> bool,
    ) -> bool;

    /// Watches the wall clock for `task`, due at a wall time: after a step
    /// of the wall clock the timer hands over its check job.
    fn watch_wall(&self, task: CellArc<dyn WallTask>);

    /// A task due at a wall time was placed, its deadline computed with
    /// the clocks' `offset` (`task/recurring.rs`): if the wall clock was
    /// stepped since, the timer hands over its check job
    /// (`timer/driver/wall.rs`).
    fn wall_placed(&self, task: CellArc<dyn WallTask>, offset: i128);

    /// Counts, with the timer, the cancel of a task that it may hold (so
    /// that its dead entry is swept out).
    fn note_cancelled(&self);

    /// A scheduled run due at `deadline` starts now: the pool records how
    /// late (its lateness histogram). Nothing by default.
    fn started_late(&self, _deadline: Nanos) {}

    /// A task's time-out won (the pool counts it). Nothing by default.
    fn note_timed_out(&self) {}

    /// A fixed-rate task's `MissedRuns` skipped and delayed runs (the
    /// pool counts them). Nothing by default.
    fn note_missed(&self, _skipped: u64, _delayed: u64) {}
}

impl dyn TaskContext + '_ {
    /// Shows a panic nobody else will see, then drops it (a
    /// [`PanicPayload`] catches a panic of its own destructor).
    pub(crate) fn report(&self, payload: PanicPayload) {
        self.show_panic(&payload);
    }

    /// Drops `value`, which holds user code (a closure, a task's output, a
    /// waker): a panic of its destructor is [reported](Self::report).
    pub(crate) fn drop_reporting<T>(&self, value: T) {
        report_panic(|| drop(value), |payload| self.report(payload));
    }

    /// Drops `value`, user code of the task `header` named `name` (its
    /// closure, given up unrun): a panic of its destructor is reported as
    /// that task's, whichever task runs on this thread.
    pub(crate) fn drop_reporting_as<T>(
        &self,
        header: &Header,
        name: Option<&StdArc<str>>,
        value: T,
    ) {
        report_panic(
            || drop(value),
            |payload| self.report(payload.with_task(header.identity(name))),
        );
    }

    /// Wakes `waker` (user code): a panic of its `wake` is reported.
    pub(crate) fn wake(&self, waker: Waker) {
        report_panic(|| waker.wake(), |payload| self.report(payload));
    }
}

/// The context of a job given up where no pool is at hand (the last-resort
/// `Drop` of a queued job): panics are caught and dropped, and a task is
/// never re-armed.
#[derive(Debug)]
pub(crate) struct NoPool;

impl TaskContext for NoPool {
    fn show_panic(&self, _: &PanicPayload) {}

    fn clock(&self) -> &Clock {
        static CLOCK: std::sync::OnceLock<Clock> = std::sync::OnceLock::new();
        CLOCK.get_or_init(Clock::new)
    }

    fn rearm(&self, _: CellArc<dyn Delayed>, _: bool, _: &mut dyn FnMut() -> bool) -> bool {
        false
    }

    fn watch_wall(&self, _: CellArc<dyn WallTask>) {}

    fn wall_placed(&self, _: CellArc<dyn WallTask>, _: i128) {}

    fn note_cancelled(&self) {}
}

/// A context that records what tasks ask of it, for the task layer's unit
/// tests: the panics shown, the re-arms (refused while `refuse_rearm`),
/// the wall-time tasks watched, the cancels counted, and a manual clock the
/// test moves.
#[cfg(all(test, not(loom)))]
pub(crate) struct TestContext {
    pub(crate) panics: std::sync::Mutex<Vec<Option<String>>>,
    pub(crate) rearmed: std::sync::Mutex<Vec<CellArc<dyn Delayed>>>,
    pub(crate) watched: std::sync::Mutex<Vec<CellArc<dyn WallTask>>>,
    pub(crate) refuse_rearm: std::sync::atomic::AtomicBool,
    pub(crate) cancels: std::sync::atomic::AtomicUsize,
    pub(crate) manual: crate::time::ManualClock,
    clock: Clock,
}

#[cfg(all(test, not(loom)))]
impl Default for TestContext {
    fn default() -> Self {
        let manual = crate::time::ManualClock::new();
        TestContext {
            panics: Default::default(),
            rearmed: Default::default(),
            watched: Default::default(),
            refuse_rearm: Default::default(),
            cancels: Default::default(),
            clock: Clock::manual(StdArc::clone(manual.state())),
            manual,
        }
    }
}

#[cfg(all(test, not(loom)))]
impl TaskContext for TestContext {
    fn show_panic(&self, payload: &PanicPayload) {
        let message = payload.message().map(str::to_owned);
        self.panics.lock().unwrap().push(message);
    }

    fn clock(&self) -> &Clock {
        &self.clock
    }

    fn rearm(&self, entry: CellArc<dyn Delayed>, _: bool, reset: &mut dyn FnMut() -> bool) -> bool {
        if self.refuse_rearm.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        if !reset() {
            return false;
        }
        self.rearmed.lock().unwrap().push(entry);
        true
    }

    fn watch_wall(&self, task: CellArc<dyn WallTask>) {
        self.watched.lock().unwrap().push(task);
    }

    fn wall_placed(&self, _: CellArc<dyn WallTask>, _: i128) {}

    fn note_cancelled(&self) {
        self.cancels
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

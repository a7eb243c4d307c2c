//! A task: the cell that a worker and a handle share, and its state machine.
//!
//! A submitted closure lives in a [`TaskCell`] together with one atomic
//! state word, a slot for its output and a slot for the waker of whoever
//! waits for it. The queues hold the cell as a [`Job`] (through the
//! type-erased `Unit`); the [`TaskHandle`](crate::TaskHandle) holds the
//! same cell through [`Joinable<T>`]. A closure submitted with `execute`
//! has no handle and needs no cell: its `Job` is just the boxed closure.
//!
//! # The state word
//!
//! ```text
//!  bits 0-1: lifecycle   SCHEDULED --claim--> RUNNING --finish--> COMPLETE
//!                            |
//!                            +-------cancel--------------------> CANCELLED
//!  bit 2:    WAITER      a waker is stored in `waiter` and must be woken
//!                        when the lifecycle becomes final
//! ```
//!
//! COMPLETE and CANCELLED are final: a final state never changes again.
//!
//! # Ground rules
//!
//! * **`job`** (the closure) belongs to whoever moves the lifecycle out of
//!   SCHEDULED: the worker that claims it (to RUNNING) or the canceller (to
//!   CANCELLED). Exactly one of them wins that compare-and-swap, so exactly
//!   one of them takes the closure, and it is run or dropped exactly once.
//! * **`output`** is written only by the claiming worker, before it moves
//!   RUNNING -> COMPLETE with `Release`; it is read only by the handle, after
//!   it has seen COMPLETE with `Acquire`. There is one handle, and taking the
//!   output consumes it, so there is one reader.
//! * **`waiter`** is only touched under its lock. A waiter stores its waker
//!   *first* and sets WAITER *second* (a CAS that fails if the state is
//!   already final); the finisher moves to a final state *first* and, if the
//!   old state had WAITER, takes the waker *second*. Both steps are RMWs on
//!   the one state word, so either the finisher sees WAITER and wakes the
//!   stored waker, or the waiter's CAS sees the final state and does not
//!   wait: no lost wake-up.
//! * A [`Job`] dropped without running (a queue dropped with the pool, a
//!   [`PendingTask`](crate::PendingTask) the caller discards) cancels its
//!   task, so no handle ever waits for a task that can no longer run.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::task::Waker;

use crate::error::{PanicPayload, TaskError};
use crate::sync::cell::UnsafeCell;
use crate::sync::{AtomicUsize, Mutex, Ordering, StdArc};

const LIFECYCLE: usize = 0b11;
const SCHEDULED: usize = 0;
const RUNNING: usize = 1;
const COMPLETE: usize = 2;
const CANCELLED: usize = 3;
const WAITER: usize = 0b100;

/// What running a job did, for the worker's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    /// The closure ran and returned.
    Completed,
    /// The closure ran and panicked (the panic was reported and stored).
    Panicked,
    /// The task had been cancelled; nothing ran.
    Skipped,
}

/// Called with every panic of a task, before its handle can see it.
pub(crate) type PanicReporter<'a> = &'a dyn Fn(&PanicPayload);

/// A unit of work in a queue: one boxed trait object (16 bytes, so it moves
/// in registers and packs four to a cache line in the deques).
///
/// Dropping a `Job` that did not run cancels its task (see the module doc).
pub(crate) struct Job(Box<dyn Unit>);

impl Job {
    /// A job without a handle: the closure itself (no allocation if it
    /// captures nothing).
    pub(crate) fn detached<F: FnOnce() + Send + 'static>(f: F) -> Job {
        Job(Box::new(f))
    }

    /// A job that runs the task in `cell` (holding one reference to it).
    pub(crate) fn task<F, T>(cell: StdArc<TaskCell<F, T>>) -> Job
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        Job(Box::new(TaskRef(cell)))
    }

    /// The closure of a job made by [`Job::detached`] with this `F` (for
    /// giving a refused job back to its submitter).
    pub(crate) fn into_detached<F: FnOnce() + Send + 'static>(self) -> Option<F> {
        self.0.into_any().downcast::<F>().ok().map(|f| *f)
    }

    /// Runs the job on the calling thread. Nothing unwinds out of it: a
    /// panic of the job is caught, given to `report`, and stored in its
    /// handle if it has one; a panic of a destructor that runs here (a
    /// detached job's captures, the output of a task whose handle is gone)
    /// is caught and reported too.
    #[inline]
    pub(crate) fn run(self, report: PanicReporter<'_>) -> RunOutcome {
        self.0.run(report)
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}

/// What a queued job can do. Dropping it unrun cancels its task, if it has
/// one (`TaskRef`'s `Drop`).
trait Unit: Send {
    /// Runs it (see [`Job::run`]).
    fn run(self: Box<Self>, report: PanicReporter<'_>) -> RunOutcome;
    /// Unboxes it (to give a refused closure back).
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// A closure from `execute`: nobody waits for it.
impl<F: FnOnce() + Send + 'static> Unit for F {
    fn run(self: Box<Self>, report: PanicReporter<'_>) -> RunOutcome {
        // The captures are dropped inside the call, so inside catch_unwind.
        match catch_unwind(AssertUnwindSafe(*self)) {
            Ok(()) => RunOutcome::Completed,
            Err(payload) => {
                report_and_drop(payload, report);
                RunOutcome::Panicked
            }
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// A task with a handle: the queue's reference to its cell.
struct TaskRef<F, T>(StdArc<TaskCell<F, T>>);

impl<F, T> Unit for TaskRef<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Box<Self>, report: PanicReporter<'_>) -> RunOutcome {
        let outcome = self.0.run(report);
        // If the handle is gone, this drops the task's output.
        match catch_unwind(AssertUnwindSafe(|| drop(self))) {
            Ok(()) => outcome,
            Err(payload) => {
                report_and_drop(payload, report);
                RunOutcome::Panicked
            }
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

impl<F, T> Drop for TaskRef<F, T> {
    /// A task whose job is dropped unrun is cancelled; after a run this
    /// finds the task final and does nothing.
    fn drop(&mut self) {
        if self.0.header.is_final() {
            return;
        }
        // A panic from the closure's destructor has nobody to go to here
        // (and may happen while unwinding): it is swallowed.
        let cell = &self.0;
        let _ = catch_unwind(AssertUnwindSafe(|| cell.cancel()));
    }
}

/// Reports a caught panic, then drops its payload (whose own destructor
/// may panic too: that is swallowed).
#[cold]
fn report_and_drop(payload: Box<dyn Any + Send>, report: PanicReporter<'_>) {
    let payload = PanicPayload::new(payload);
    report(&payload);
    let _ = catch_unwind(AssertUnwindSafe(|| drop(payload)));
}

/// The handle's view of a task cell.
pub(crate) trait Joinable<T>: Send + Sync {
    /// The state word and waiter slot.
    fn header(&self) -> &Header;

    /// Cancels the task if it is still scheduled (true iff this call did).
    fn cancel(&self) -> bool;

    /// The result, once [`Header::is_final`] has returned true. Called at
    /// most once (the handle is consumed or fused by it).
    fn take_output(&self) -> Result<T, TaskError>;
}

/// The part of a task cell that does not depend on its closure or output
/// type: the state word and the waiter slot.
#[derive(Debug, Default)]
pub(crate) struct Header {
    state: AtomicUsize,
    waiter: Mutex<Option<Waker>>,
}

impl Header {
    /// Moves the lifecycle from SCHEDULED to `to`, returning the state it
    /// left, or `None` if it was not SCHEDULED. The winner owns the closure
    /// slot from then on.
    fn leave_scheduled(&self, to: usize) -> Option<usize> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & LIFECYCLE == SCHEDULED).then_some(s | to)
            })
            .ok()
    }

    /// RUNNING -> COMPLETE, then wakes the waiter if one registered.
    fn complete(&self) {
        let prev = self.state.fetch_add(COMPLETE - RUNNING, Ordering::AcqRel);
        debug_assert_eq!(prev & LIFECYCLE, RUNNING);
        if prev & WAITER != 0 {
            self.wake_waiter();
        }
    }

    fn wake_waiter(&self) {
        let waker = self.waiter.lock().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// True once the task completed, panicked or was cancelled (`Acquire`:
    /// after it returns true, the output is visible).
    pub(crate) fn is_final(&self) -> bool {
        self.state.load(Ordering::Acquire) & LIFECYCLE >= COMPLETE
    }

    /// True if the task was cancelled.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) & LIFECYCLE == CANCELLED
    }

    /// Stores `waker` to be woken when the task becomes final. Returns false
    /// (and registers nothing that matters) if it already is final.
    pub(crate) fn register(&self, waker: &Waker) -> bool {
        {
            let mut slot = self.waiter.lock();
            if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
                *slot = Some(waker.clone());
            }
        }
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & LIFECYCLE < COMPLETE).then_some(s | WAITER)
            })
            .is_ok()
    }
}

/// A task with its closure `F` and output `T`.
pub(crate) struct TaskCell<F, T> {
    header: Header,
    job: UnsafeCell<Option<F>>,
    output: UnsafeCell<Option<Result<T, PanicPayload>>>,
}

// SAFETY: the cell is shared between threads through `StdArc`; its two
// `UnsafeCell`s are never accessed concurrently:
// - `job` only by the single winner of `leave_scheduled` (module doc),
// - `output` by the claiming worker before its `Release` publication of
//   COMPLETE, and by the unique handle after its `Acquire` read of it.
// `F` and `T` move between threads (run on a worker, output read by the
// handle's thread), hence the `Send` bounds; no `&F` or `&T` is ever shared.
unsafe impl<F: Send, T: Send> Sync for TaskCell<F, T> {}

impl<F, T> TaskCell<F, T> {
    /// Takes the closure out. Only the winner of `leave_scheduled` calls it.
    fn take_job(&self) -> Option<F> {
        // SAFETY: the caller won `leave_scheduled`, which makes it the only
        // thread that ever touches `job` (module doc, ground rules).
        self.job.with_mut(|job| unsafe { (*job).take() })
    }

    /// Cancels the task if it is still scheduled (true iff this call did),
    /// dropping its closure at once.
    fn cancel(&self) -> bool {
        let Some(prev) = self.header.leave_scheduled(CANCELLED) else {
            return false;
        };
        // Drop the closure now (it may hold large captures), but wake the
        // waiter even if its destructor panics; then let that panic go on.
        // CANCELLED is final, so no waiter can register after the CAS: the
        // WAITER bit it returned is the last word on who to wake.
        let dropped = catch_unwind(AssertUnwindSafe(|| drop(self.take_job())));
        if prev & WAITER != 0 {
            self.header.wake_waiter();
        }
        if let Err(payload) = dropped {
            resume_unwind(payload);
        }
        true
    }
}

impl<F, T> TaskCell<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    pub(crate) fn new(f: F) -> Self {
        TaskCell {
            header: Header::default(),
            job: UnsafeCell::new(Some(f)),
            output: UnsafeCell::new(None),
        }
    }

    /// Takes the closure back out of a task that never ran (its submission
    /// was refused): the task becomes CANCELLED, its handle unused.
    pub(crate) fn reclaim(&self) -> Option<F> {
        self.header.leave_scheduled(CANCELLED)?;
        self.take_job()
    }

    /// Runs the closure if the task is still scheduled; a panic is caught,
    /// reported, and stored as the output.
    fn run(&self, report: PanicReporter<'_>) -> RunOutcome {
        if self.header.leave_scheduled(RUNNING).is_none() {
            return RunOutcome::Skipped;
        }
        let Some(f) = self.take_job() else {
            unreachable!("a scheduled task holds its closure");
        };
        let (outcome, output) = match catch_unwind(AssertUnwindSafe(f)) {
            Ok(value) => (RunOutcome::Completed, Ok(value)),
            Err(payload) => {
                let payload = PanicPayload::new(payload);
                report(&payload);
                (RunOutcome::Panicked, Err(payload))
            }
        };
        // SAFETY: we are RUNNING: nobody reads `output` until we publish
        // COMPLETE below (ground rules).
        self.output.with_mut(|slot| unsafe { *slot = Some(output) });
        self.header.complete();
        outcome
    }
}

impl<F, T> Joinable<T> for TaskCell<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn header(&self) -> &Header {
        &self.header
    }

    fn cancel(&self) -> bool {
        TaskCell::cancel(self)
    }

    fn take_output(&self) -> Result<T, TaskError> {
        if self.header.is_cancelled() {
            return Err(TaskError::Cancelled);
        }
        debug_assert!(self.header.is_final());
        // SAFETY: the caller saw a final state with `Acquire` and it is not
        // CANCELLED, so it is COMPLETE: the worker wrote `output` before its
        // `Release`, and the unique handle is the only reader (ground rules).
        match self.output.with_mut(|slot| unsafe { (*slot).take() }) {
            Some(Ok(value)) => Ok(value),
            Some(Err(payload)) => Err(TaskError::Panicked(payload)),
            None => unreachable!("the output of a task is taken once"),
        }
    }
}

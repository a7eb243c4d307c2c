//! [`TaskCell`]: a one-shot task, its closure `F` and its output `T` in one
//! slot beside its [`Header`] (see `state.rs` for the state word and the
//! ground rules this follows).
//!
//! # The slot: a union the state word tells
//!
//! The closure and the output share one slot, a `union` without a tag of
//! its own: what it holds follows from the lifecycle, which says it
//! already (SCHEDULED: the closure; COMPLETE: the output, until the handle
//! takes it; otherwise nothing). An `enum` would add a tag word wherever
//! the closure and the output leave no niche for it, as for a closure that
//! captures nothing and returns `()`: its slot is 8 bytes (the output's
//! panic payload, one pointer) where the enum's was 16: 8 bytes less per
//! cell, which took a scheduled task's cell from an 80-byte chunk of
//! glibc's malloc to a 64-byte one (a 48-byte one since the header is two
//! words: `state.rs`; `benches/README.md`, `pending_bytes`).
//!
//! * The closure is read out (moved) once, by the winner of
//!   `leave_scheduled`, the one that moves the lifecycle out of SCHEDULED.
//! * The output is written once, by the run, before it publishes COMPLETE;
//!   it is read out once, by the handle ([`Joinable::take_output`]), which
//!   marks it taken in the state word ([`Header::set_taken`]).
//! * The cell's destructor drops what the slot still holds: the closure if
//!   the lifecycle is still SCHEDULED (a cell dropped before it was
//!   queued, or a queue dropped with it cancelled it: then nothing), the
//!   output if COMPLETE and not taken (a handle dropped unjoined, a task
//!   that timed out while running). It runs after the last reference's
//!   `Acquire` fence, so it sees the final state and the taken mark.

use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sync::cell::UnsafeCell;
use crate::sync::{CellArc, StdArc};
use crate::time::Nanos;

use super::context::TaskContext;
use super::error::{PanicPayload, TaskError};
use super::job::{RunOutcome, Runnable};
use super::name::Label;
use super::running;
use super::state::{
    Cancellable, Header, Joinable, TimeOut, CANCELLED, COMPLETE, RUNNING, SCHEDULED,
};
use super::trace::{self, Kind};

/// The slot of a [`TaskCell`]: the closure, then its output (or its
/// panic), or nothing; which one, the state word says (module doc).
union Slot<F, T> {
    job: ManuallyDrop<F>,
    output: ManuallyDrop<Result<T, PanicPayload>>,
}

/// A task with its closure `F` and output `T`, and its name, if it has
/// one, in `L`.
pub(crate) struct TaskCell<F, T, L = ()> {
    header: Header,
    stage: UnsafeCell<Slot<F, T>>,
    label: L,
}

// SAFETY: the cell is shared between threads through `CellArc`; its
// `UnsafeCell` is never accessed concurrently (module doc, ground rules):
// - the closure is taken only by the single winner of `leave_scheduled`,
// - the output is written by the claiming worker before its `Release`
//   publication of COMPLETE, and read by the unique handle after its
//   `Acquire` read of it.
// `F` and `T` move between threads (run on a worker, output read by the
// handle's thread), hence the `Send` bounds; no `&F` or `&T` is ever shared.
// The label is only read.
unsafe impl<F: Send, T: Send, L: Sync> Sync for TaskCell<F, T, L> {}

impl<F, T, L: Label> TaskCell<F, T, L> {
    /// The state word and the extras (id, waiter slot).
    pub(crate) fn header(&self) -> &Header {
        &self.header
    }

    /// The task's name, if it has one.
    pub(crate) fn name(&self) -> Option<&StdArc<str>> {
        self.label.name()
    }

    /// Takes the closure out.
    ///
    /// # Safety
    ///
    /// The caller won `leave_scheduled` (it moved the lifecycle out of
    /// SCHEDULED), and calls this once, right after, before any code that
    /// could unwind (the cell's destructor no longer drops the closure
    /// once the lifecycle left SCHEDULED).
    unsafe fn take_job(&self) -> F {
        // SAFETY: the winner of `leave_scheduled` is the only thread
        // touching the slot until it publishes a final state (ground
        // rules), and the slot holds the closure until this one read: the
        // lifecycle was SCHEDULED (module doc).
        self.stage
            .with_mut(|slot| unsafe { ManuallyDrop::take(&mut (*slot).job) })
    }

    /// Cancels the task if it is still scheduled (true iff this call did):
    /// `counted` runs right after the state change (the bookkeeping of a
    /// cancel, done whatever the user code below does), then the closure
    /// is dropped at once (it may hold large captures) and the waiter
    /// woken, through `ctx`.
    ///
    /// A task that is running is asked to stop instead (its closure sees
    /// `chronopool::cancelled()`), and this returns false: it did not stop
    /// it from starting.
    pub(crate) fn cancel_then(&self, ctx: &dyn TaskContext, counted: impl FnOnce()) -> bool {
        let Some(prev) = self.header.leave_scheduled(CANCELLED) else {
            self.header.request_stop();
            return false;
        };
        // Out of the slot at once: from here on it is a local, dropped
        // even if what follows unwinds.
        // SAFETY: this call won `leave_scheduled`.
        let job = unsafe { self.take_job() };
        counted();
        ctx.drop_reporting_as(&self.header, self.label.name(), job);
        // CANCELLED is final, so no waiter can register after the CAS: the
        // WAITER bit it returned is the last word on who to wake.
        if let Some(waker) = self.header.waiter_of(prev) {
            ctx.wake(waker);
        }
        true
    }
}

impl<F, T, L: Label> TaskCell<F, T, L> {
    /// Times the task out (`deadline.rs`): if it had not started, it never
    /// will, and its closure is dropped; if it runs, it is asked to stop
    /// and settles for its handle now. The waiter is woken either way,
    /// through `ctx`, after `counted` (the bookkeeping, done before the
    /// handle can see the time-out). False if it had finished first.
    pub(crate) fn time_out(&self, ctx: &dyn TaskContext, counted: impl FnOnce()) -> bool {
        let outcome = self.header.time_out();
        // The time-out that left SCHEDULED owns the closure: out of the
        // slot at once, before the user's tracing subscriber runs below.
        // SAFETY: this call's `time_out` won, leaving SCHEDULED.
        let job =
            matches!(outcome, TimeOut::BeforeStart { .. }).then(|| unsafe { self.take_job() });
        if outcome != TimeOut::Lost {
            counted();
            let running = matches!(outcome, TimeOut::WhileRunning { .. });
            trace::timed_out(&self.header, self.label.name(), running);
        }
        let wake = match outcome {
            TimeOut::Lost => return false,
            TimeOut::BeforeStart { wake } => {
                ctx.drop_reporting_as(&self.header, self.label.name(), job);
                wake
            }
            TimeOut::WhileRunning { wake } => wake,
        };
        if wake {
            if let Some(waker) = self.header.take_waiter() {
                ctx.wake(waker);
            }
        }
        true
    }
}

impl<F, T> TaskCell<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    /// An unnamed task.
    #[cfg(test)]
    pub(crate) fn new(f: F) -> Self {
        TaskCell::labelled(f, ())
    }
}

impl<F, T, L> TaskCell<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    /// A task named by `label`.
    pub(crate) fn labelled(f: F, label: L) -> Self {
        TaskCell {
            header: Header::default(),
            stage: UnsafeCell::new(Slot {
                job: ManuallyDrop::new(f),
            }),
            label,
        }
    }

    /// Takes the closure back out of a task that never ran (its submission
    /// was refused): the task becomes CANCELLED, its handle unused.
    pub(crate) fn reclaim(&self) -> Option<F> {
        self.header.leave_scheduled(CANCELLED)?;
        // SAFETY: this call won `leave_scheduled`.
        Some(unsafe { self.take_job() })
    }

    /// Runs the closure if the task is still scheduled; a panic is caught,
    /// reported, and stored as the output. The closure's captures are
    /// dropped inside the call, so a panic of their destructors after the
    /// closure returned is the call's panic: its output, dropped by the
    /// unwinding, is lost (as a closure that panicked before returning).
    ///
    /// A run `due` at a deadline tells the context how late it starts.
    pub(crate) fn run(&self, ctx: &dyn TaskContext, due: Option<Nanos>, kind: Kind) -> RunOutcome {
        if self.header.leave_scheduled(RUNNING).is_none() {
            // Cancelled, or timed out before its start (counted as such).
            return if self.header.is_cancelled() {
                RunOutcome::Cancelled
            } else {
                RunOutcome::Skipped
            };
        }
        // SAFETY: this call won `leave_scheduled`.
        let f = unsafe { self.take_job() };
        if let Some(due) = due {
            ctx.started_late(due);
        }
        let _span = trace::run(kind, &self.header, self.label.name(), || {
            due.map(|due| ctx.now().saturating_sub(due))
        });
        let result = running::run_as(&self.header, self.label.name(), || {
            catch_unwind(AssertUnwindSafe(f)).map_err(PanicPayload::new)
        });
        let (outcome, output) = match result {
            Ok(value) => (RunOutcome::Completed, Ok(value)),
            Err(payload) => {
                ctx.show_panic(&payload);
                (RunOutcome::Panicked, Err(payload))
            }
        };
        // SAFETY: we are RUNNING: nobody reads the slot until we publish
        // COMPLETE below (ground rules); the closure left it (moved out
        // above), so the write overwrites nothing.
        self.stage.with_mut(|slot| unsafe {
            (*slot).output = ManuallyDrop::new(output);
        });
        if let Some(waker) = self.header.complete() {
            ctx.wake(waker);
        }
        outcome
    }
}

impl<F, T, L> Runnable for TaskCell<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    fn run(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        TaskCell::run(this, ctx, None, Kind::Task)
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        if !self.header.is_final() {
            self.cancel_then(ctx, || ());
        }
    }

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        Some((&self.header, self.label.name()))
    }
}

impl<F, T, L> Cancellable for TaskCell<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    fn header(&self) -> &Header {
        TaskCell::header(self)
    }

    fn name(&self) -> Option<&StdArc<str>> {
        TaskCell::name(self)
    }

    fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        self.cancel_then(ctx, || ())
    }
}

impl<F, T, L> Joinable<T> for TaskCell<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    unsafe fn cancellable(
        &self,
        this: &mut Option<CellArc<dyn Joinable<T>>>,
    ) -> CellArc<dyn Cancellable> {
        // SAFETY: `this` holds a reference to `self` (caller).
        unsafe { super::state::cancellable_as::<T, Self>(this) }
    }

    fn take_output(&self) -> Result<T, TaskError> {
        if self.header.is_timed_out() {
            // The run, if any, may still be writing its output: not read.
            return Err(TaskError::TimedOut);
        }
        if self.header.is_cancelled() {
            return Err(TaskError::Cancelled);
        }
        debug_assert!(self.header.is_final());
        assert!(
            !self.header.is_taken(),
            "the output of a task is taken once"
        );
        // SAFETY: the caller saw a final state with `Acquire` and it is not
        // CANCELLED, so it is COMPLETE: the worker wrote the output before
        // its `Release`, and the unique handle is the only reader (ground
        // rules), once (the mark below, read above).
        let output = self
            .stage
            .with_mut(|slot| unsafe { ManuallyDrop::take(&mut (*slot).output) });
        self.header.set_taken();
        output.map_err(TaskError::Panicked)
    }
}

impl<F, T, L> Drop for TaskCell<F, T, L> {
    /// Drops what the slot still holds (module doc).
    fn drop(&mut self) {
        let lifecycle = self.header.lifecycle();
        let taken = self.header.is_taken();
        self.stage.with_mut(|slot| {
            // SAFETY: the last reference is gone (`&mut self`, after the
            // count's `Acquire` fence): nobody else touches the slot, and
            // the lifecycle and the taken mark say what it holds.
            unsafe {
                if lifecycle == SCHEDULED {
                    ManuallyDrop::drop(&mut (*slot).job);
                } else if lifecycle == COMPLETE && !taken {
                    ManuallyDrop::drop(&mut (*slot).output);
                }
            }
        });
    }
}

/// The cell against a context of the test's own ([`TestContext`]): no pool,
/// no threads.
#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::*;
    use crate::task::context::TestContext;
    use crate::task::Job;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A waker that counts its wakes, or panics in `wake` if `hostile`.
    struct CountingWaker {
        wakes: AtomicUsize,
        hostile: bool,
    }

    impl Wake for CountingWaker {
        fn wake(self: StdArc<Self>) {
            self.wakes.fetch_add(1, Ordering::SeqCst);
            if self.hostile {
                panic!("expected: a waker panicked");
            }
        }
    }

    fn waker(hostile: bool) -> (StdArc<CountingWaker>, Waker) {
        let counter = StdArc::new(CountingWaker {
            wakes: AtomicUsize::new(0),
            hostile,
        });
        (counter.clone(), Waker::from(counter))
    }

    #[test]
    fn a_run_completes_the_task_and_a_later_cancel_loses() {
        let ctx = TestContext::default();
        let cell = CellArc::new(TaskCell::new(|| 7));
        assert_eq!(Job::task(cell.clone()).run(&ctx), RunOutcome::Completed);
        assert!(cell.header().is_final());
        assert!(!Cancellable::cancel(&*cell, &ctx));
        assert_eq!(cell.take_output().ok(), Some(7));
    }

    #[test]
    fn a_cancel_before_the_run_wins_drops_the_closure_and_the_run_is_skipped() {
        let ctx = TestContext::default();
        let drops = Arc::new(AtomicUsize::new(0));
        let capture = Counted(drops.clone());
        let cell = CellArc::new(TaskCell::new(move || drop(capture)));
        let job = Job::task(cell.clone());
        let counted = AtomicUsize::new(0);
        assert!(cell.cancel_then(&ctx, || {
            counted.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(counted.load(Ordering::SeqCst), 1, "the cancel was counted");
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the closure was dropped");
        assert_eq!(job.run(&ctx), RunOutcome::Cancelled);
        assert!(cell.take_output().unwrap_err().is_cancelled());
    }

    #[test]
    fn a_panic_is_shown_to_the_context_and_kept_for_the_handle() {
        crate::task::unwind::quiet_expected_panics();
        let ctx = TestContext::default();
        let cell = CellArc::new(TaskCell::new(|| -> u8 { panic!("expected: boom") }));
        assert_eq!(Job::task(cell.clone()).run(&ctx), RunOutcome::Panicked);
        assert_eq!(
            *ctx.panics.lock().unwrap(),
            [Some("expected: boom".to_owned())]
        );
        match cell.take_output() {
            Err(TaskError::Panicked(payload)) => {
                assert_eq!(payload.message(), Some("expected: boom"))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn the_waiter_is_woken_once_and_a_panicking_waker_is_reported() {
        crate::task::unwind::quiet_expected_panics();
        for hostile in [false, true] {
            let ctx = TestContext::default();
            let cell = CellArc::new(TaskCell::new(|| 7));
            let (counter, waker) = waker(hostile);
            let registration = cell.header().register(&waker);
            assert!(registration.registered);
            drop(waker);
            assert_eq!(Job::task(cell.clone()).run(&ctx), RunOutcome::Completed);
            assert_eq!(counter.wakes.load(Ordering::SeqCst), 1);
            assert_eq!(ctx.panics.lock().unwrap().len(), usize::from(hostile));
        }
    }

    #[test]
    fn a_registration_on_a_final_task_takes_its_waker_back() {
        let ctx = TestContext::default();
        let cell = CellArc::new(TaskCell::new(|| 7));
        assert_eq!(Job::task(cell.clone()).run(&ctx), RunOutcome::Completed);
        let (counter, waker) = waker(false);
        let registration = cell.header().register(&waker);
        assert!(!registration.registered);
        assert!(registration.stale[1].is_some(), "the caller drops it");
        drop(registration);
        drop(waker);
        assert_eq!(StdArc::strong_count(&counter), 1, "the cell holds no waker");
    }

    /// A closure whose captures and output count their drops: every path
    /// of a cell drops the closure or the output exactly once, whoever
    /// frees the cell.
    #[test]
    fn every_path_drops_the_closure_or_its_output_once() {
        crate::task::unwind::quiet_expected_panics();
        let ctx = TestContext::default();
        let captures = Arc::new(AtomicUsize::new(0));
        let outputs = Arc::new(AtomicUsize::new(0));
        let make = |panics: bool| {
            let capture = Counted(captures.clone());
            let outputs = outputs.clone();
            CellArc::new(TaskCell::new(move || {
                drop(capture);
                if panics {
                    panic!("expected: the closure panicked");
                }
                Counted(outputs)
            }))
        };
        let counts = || {
            (
                captures.swap(0, Ordering::SeqCst),
                outputs.swap(0, Ordering::SeqCst),
            )
        };
        // Dropped before it was queued: the closure, with the cell.
        drop(make(false));
        assert_eq!(counts(), (1, 0), "never queued");
        // Cancelled: the closure at the cancel, nothing more with the cell.
        let cell = make(false);
        assert!(cell.cancel_then(&ctx, || ()));
        assert_eq!(counts(), (1, 0));
        drop(cell);
        assert_eq!(counts(), (0, 0), "cancelled");
        // Reclaimed (a refused submission): the caller gets the closure.
        let cell = make(false);
        let job = cell.reclaim().expect("still scheduled");
        drop(cell);
        assert_eq!(counts(), (0, 0), "the closure is the caller's");
        drop(job);
        assert_eq!(counts(), (1, 0));
        // Ran, output taken: the handle owns it, the cell drops nothing.
        let cell = make(false);
        assert_eq!(Job::task(cell.clone()).run(&ctx), RunOutcome::Completed);
        assert_eq!(counts(), (1, 0), "the captures went with the call");
        let Ok(output) = cell.take_output() else {
            panic!("its output")
        };
        drop(cell);
        assert_eq!(counts(), (0, 0));
        drop(output);
        assert_eq!(counts(), (0, 1), "taken");
        // Ran, output never taken (the handle dropped unjoined): the cell.
        let cell = make(false);
        assert_eq!(Job::task(cell.clone()).run(&ctx), RunOutcome::Completed);
        drop(cell);
        assert_eq!(counts(), (1, 1), "untaken output");
        // Panicked, payload never taken: the payload with the cell.
        let cell = make(true);
        assert_eq!(Job::task(cell.clone()).run(&ctx), RunOutcome::Panicked);
        assert_eq!(counts(), (1, 0));
        drop(cell);
        assert_eq!(counts(), (0, 0));
        // Timed out while running: the output comes later, unread, and
        // goes with the cell.
        let cell = make(false);
        let job = Job::task(cell.clone());
        assert!(cell.header().leave_scheduled(RUNNING).is_some());
        assert!(cell.time_out(&ctx, || ()));
        assert!(matches!(cell.take_output(), Err(TaskError::TimedOut)));
        // The run was claimed above: finish it as the worker would.
        // SAFETY: the `leave_scheduled` above won.
        let f = unsafe { cell.take_job() };
        let output = f();
        cell.stage.with_mut(|slot| unsafe {
            // SAFETY: RUNNING, the closure moved out (as `run` does).
            (*slot).output = ManuallyDrop::new(Ok(output));
        });
        drop(cell.header().complete());
        drop(job);
        drop(cell);
        assert_eq!(counts(), (1, 1), "timed out while running");
        // Timed out before its start: the closure at the time-out.
        let cell = make(false);
        assert!(cell.time_out(&ctx, || ()));
        assert_eq!(counts(), (1, 0));
        drop(cell);
        assert_eq!(counts(), (0, 0));
    }
}

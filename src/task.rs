//! A task: the cell that a worker and a handle share, and its state machine.
//!
//! A submitted closure lives in a [`TaskCell`] together with one atomic
//! state word and a slot for the waker of whoever waits for it; the closure
//! and, once it ran, its output share one slot (the *stage*: a task never
//! holds both). The queues hold a reference to the cell in a
//! [`Job`](crate::job::Job); the [`TaskHandle`](crate::TaskHandle) holds
//! another through [`Joinable<T>`]. A closure submitted with `execute` has
//! no handle and needs no cell: its job is the closure itself.
//!
//! # The state word
//!
//! ```text
//!  bits 0-1: lifecycle   SCHEDULED --claim--> RUNNING --finish--> COMPLETE
//!                            |
//!                            +-------cancel--------------------> CANCELLED
//!  bit 2:    WAITER      a waker is stored in `waiter` and must be woken
//!                        when the lifecycle becomes final
//!  bit 3:    CANCEL_REQUESTED  (periodic tasks) cancelled during a run
//! ```
//!
//! A periodic task (`periodic.rs`) goes back from RUNNING to SCHEDULED
//! after each run (`try_reset`), unless a cancel arrived during the run
//! (`CANCEL_REQUESTED`), in which case the run ends it (RUNNING ->
//! CANCELLED); a panic ends it as COMPLETE with the payload as its output.
//!
//! COMPLETE and CANCELLED are final: a final state never changes again.
//!
//! # Ground rules
//!
//! * **`stage`** holds the closure until whoever moves the lifecycle out
//!   of SCHEDULED takes it: the worker that claims it (to RUNNING) or the
//!   canceller (to CANCELLED). Exactly one of them wins that
//!   compare-and-swap, so exactly one of them takes the closure, and it is
//!   run or dropped exactly once. The claiming worker then writes the
//!   output into the stage, before it moves RUNNING -> COMPLETE with
//!   `Release`; the output is read only by the handle, after it has seen
//!   COMPLETE with `Acquire`. There is one handle, and taking the output
//!   consumes it, so there is one reader.
//! * **`waiter`** is only touched under its lock. A waiter stores its waker
//!   *first* and sets WAITER *second* (a CAS that fails if the state is
//!   already final); the finisher moves to a final state *first* and, if the
//!   old state had WAITER, takes the waker *second*. Both steps are RMWs on
//!   the one state word, so either the finisher sees WAITER and wakes the
//!   stored waker, or the waiter's CAS sees the final state and does not
//!   wait: no lost wake-up. A waiter whose CAS failed takes its waker back
//!   out, so that a final task holds no waker (a waker is user code: it is
//!   dropped by the thread that registered it, not by whoever frees the
//!   cell).
//! * **User code** in a cell (the closure, the output, the waker) is
//!   dropped or woken outside the state protocol's critical steps and
//!   through [`Hooks`], so a panic in it is reported, never unwound into a
//!   worker or into the caller of `cancel` (see `hooks.rs`).
//! * A job dropped without running (a queue dropped with the pool, a
//!   [`PendingTask`](crate::PendingTask) the caller discards) cancels its
//!   task, so no handle ever waits for a task that can no longer run.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

use crate::error::{PanicPayload, TaskError};
use crate::hooks::Hooks;
use crate::job::{RunOutcome, Runnable};
use crate::pool::Pool;
use crate::sync::cell::UnsafeCell;
use crate::sync::StdArc;
use crate::sync::{AtomicUsize, Mutex, Ordering};

const LIFECYCLE: usize = 0b11;
pub(crate) const SCHEDULED: usize = 0;
pub(crate) const RUNNING: usize = 1;
const COMPLETE: usize = 2;
pub(crate) const CANCELLED: usize = 3;
const WAITER: usize = 0b100;
/// A periodic task was cancelled while it ran: no further run.
const CANCEL_REQUESTED: usize = 0b1000;

/// What [`Header::cancel_periodic`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeriodicCancel {
    /// It was between runs: now CANCELLED, and the caller owns the closure
    /// (to drop it) and must wake the waiter if the flag says so
    /// ([`Header::take_waiter`]).
    Stopped { wake: bool },
    /// It is running: the run finishes, then no further run is queued.
    Requested,
    /// It had already ended, or a cancel already won.
    Lost,
}

/// The handle's view of a task cell.
pub(crate) trait Joinable<T>: Send + Sync {
    /// The state word and waiter slot.
    fn header(&self) -> &Header;

    /// Cancels the task if it is still scheduled (true iff this call did),
    /// dropping its closure and waking its waiter through `pool`'s hooks
    /// (a panic there is reported, never unwound into the caller).
    fn cancel(&self, pool: &Pool) -> bool;

    /// The result, once [`Header::is_final`] has returned true. Called at
    /// most once (the handle is consumed or fused by it).
    fn take_output(&self) -> Result<T, TaskError>;

    /// When a scheduled task is (next) due; `None` for an immediate task.
    fn deadline(&self) -> Option<crate::timer::Nanos> {
        None
    }
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
    pub(crate) fn leave_scheduled(&self, to: usize) -> Option<usize> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & LIFECYCLE == SCHEDULED).then_some(s | to)
            })
            .ok()
    }

    /// RUNNING -> COMPLETE; returns the waiter's waker, to be woken, if
    /// one registered.
    #[must_use = "the waiter must be woken"]
    pub(crate) fn complete(&self) -> Option<Waker> {
        let prev = self.state.fetch_add(COMPLETE - RUNNING, Ordering::AcqRel);
        debug_assert_eq!(prev & LIFECYCLE, RUNNING);
        self.waiter_of(prev)
    }

    /// The registered waker, if the state `prev` that a final transition
    /// left had WAITER.
    fn waiter_of(&self, prev: usize) -> Option<Waker> {
        if prev & WAITER != 0 {
            self.take_waiter()
        } else {
            None
        }
    }

    /// Takes the registered waker out (the caller wakes it).
    pub(crate) fn take_waiter(&self) -> Option<Waker> {
        self.waiter.lock().take()
    }

    /// After a periodic run: RUNNING -> SCHEDULED for the next run, unless
    /// a cancel was requested during the run (false: the caller ends it
    /// with [`finish_cancelled`](Self::finish_cancelled)). `Release`: the
    /// run happens-before the next one, which claims with `Acquire`.
    pub(crate) fn try_reset(&self) -> bool {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                debug_assert_eq!(s & LIFECYCLE, RUNNING);
                (s & CANCEL_REQUESTED == 0).then_some(s & !LIFECYCLE | SCHEDULED)
            })
            .is_ok()
    }

    /// Cancels a periodic task (see [`PeriodicCancel`]).
    pub(crate) fn cancel_periodic(&self) -> PeriodicCancel {
        let mut outcome = PeriodicCancel::Lost;
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                match s & LIFECYCLE {
                    SCHEDULED => {
                        outcome = PeriodicCancel::Stopped {
                            wake: s & WAITER != 0,
                        };
                        Some(s | CANCELLED)
                    }
                    RUNNING if s & CANCEL_REQUESTED == 0 => {
                        outcome = PeriodicCancel::Requested;
                        Some(s | CANCEL_REQUESTED)
                    }
                    _ => {
                        outcome = PeriodicCancel::Lost;
                        None
                    }
                }
            });
        outcome
    }

    /// RUNNING -> CANCELLED (a periodic task that stops after a run);
    /// returns the waiter's waker, to be woken, if one registered.
    #[must_use = "the waiter must be woken"]
    pub(crate) fn finish_cancelled(&self) -> Option<Waker> {
        let prev = self.state.fetch_add(CANCELLED - RUNNING, Ordering::AcqRel);
        debug_assert_eq!(prev & LIFECYCLE, RUNNING);
        self.waiter_of(prev)
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

    /// Stores `waker` to be woken when the task becomes final.
    /// `registered` is false if it already is final (the waker is then
    /// taken back out). The wakers it replaced or took back are handed to
    /// the caller to drop (user code: see the module doc), after the
    /// protocol's steps are done.
    pub(crate) fn register(&self, waker: &Waker) -> Registration {
        let replaced = {
            let mut slot = self.waiter.lock();
            if slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
                None
            } else {
                slot.replace(waker.clone())
            }
        };
        let registered = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & LIFECYCLE < COMPLETE).then_some(s | WAITER)
            })
            .is_ok();
        // Final: nobody will wake what we stored (a finisher that saw an
        // earlier WAITER may have taken it already, and that is fine: the
        // caller sees the final state and does not wait).
        let taken_back = if registered { None } else { self.take_waiter() };
        Registration {
            registered,
            stale: [replaced, taken_back],
        }
    }
}

/// What [`Header::register`] did.
#[derive(Debug)]
#[must_use = "the stale wakers are user code to drop"]
pub(crate) struct Registration {
    /// True if a finisher will wake the waker; false if the task was
    /// already final.
    pub(crate) registered: bool,
    /// Wakers that left the slot, for the caller to drop.
    pub(crate) stale: [Option<Waker>; 2],
}

/// What the stage slot of a [`TaskCell`] holds.
enum Stage<F, T> {
    /// The closure, until a worker claims it or a cancel drops it.
    Pending(F),
    /// The closure's output (or its panic), until the handle takes it.
    Done(Result<T, PanicPayload>),
    /// Neither: taken.
    Empty,
}

/// A task with its closure `F` and output `T`.
pub(crate) struct TaskCell<F, T> {
    header: Header,
    stage: UnsafeCell<Stage<F, T>>,
}

// SAFETY: the cell is shared between threads through `StdArc`; its
// `UnsafeCell` is never accessed concurrently (module doc, ground rules):
// - the closure is taken only by the single winner of `leave_scheduled`,
// - the output is written by the claiming worker before its `Release`
//   publication of COMPLETE, and read by the unique handle after its
//   `Acquire` read of it.
// `F` and `T` move between threads (run on a worker, output read by the
// handle's thread), hence the `Send` bounds; no `&F` or `&T` is ever shared.
unsafe impl<F: Send, T: Send> Sync for TaskCell<F, T> {}

impl<F, T> TaskCell<F, T> {
    /// The state word and waiter slot.
    pub(crate) fn header(&self) -> &Header {
        &self.header
    }

    /// Takes the closure out. Only the winner of `leave_scheduled` calls it.
    fn take_job(&self) -> Option<F> {
        // SAFETY: the caller won `leave_scheduled`, which makes it the only
        // thread touching `stage` until it publishes a final state (module
        // doc, ground rules).
        let stage = self
            .stage
            .with_mut(|stage| unsafe { std::mem::replace(&mut *stage, Stage::Empty) });
        match stage {
            Stage::Pending(f) => Some(f),
            _ => None,
        }
    }

    /// Cancels the task if it is still scheduled (true iff this call did):
    /// `counted` runs right after the state change (the bookkeeping of a
    /// cancel, done whatever the user code below does), then the closure
    /// is dropped at once (it may hold large captures) and the waiter
    /// woken, through `hooks`.
    pub(crate) fn cancel_then(&self, hooks: &Hooks, counted: impl FnOnce()) -> bool {
        let Some(prev) = self.header.leave_scheduled(CANCELLED) else {
            return false;
        };
        counted();
        hooks.drop_reporting(self.take_job());
        // CANCELLED is final, so no waiter can register after the CAS: the
        // WAITER bit it returned is the last word on who to wake.
        if let Some(waker) = self.header.waiter_of(prev) {
            hooks.wake(waker);
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
            stage: UnsafeCell::new(Stage::Pending(f)),
        }
    }

    /// Takes the closure back out of a task that never ran (its submission
    /// was refused): the task becomes CANCELLED, its handle unused.
    pub(crate) fn reclaim(&self) -> Option<F> {
        self.header.leave_scheduled(CANCELLED)?;
        self.take_job()
    }

    /// Runs the closure if the task is still scheduled; a panic is caught,
    /// reported, and stored as the output. The closure's captures are
    /// dropped inside the call, so a panic of their destructors after the
    /// closure returned is the call's panic: its output, dropped by the
    /// unwinding, is lost (as a closure that panicked before returning).
    pub(crate) fn run(&self, hooks: &Hooks) -> RunOutcome {
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
                hooks.show_panic(&payload);
                (RunOutcome::Panicked, Err(payload))
            }
        };
        // SAFETY: we are RUNNING: nobody reads `stage` until we publish
        // COMPLETE below (ground rules).
        self.stage
            .with_mut(|stage| unsafe { *stage = Stage::Done(output) });
        if let Some(waker) = self.header.complete() {
            hooks.wake(waker);
        }
        outcome
    }
}

impl<F, T> Runnable for TaskCell<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(this: &StdArc<Self>, pool: &Pool) -> RunOutcome {
        TaskCell::run(this, pool.hooks())
    }

    fn abandon(&self, hooks: &Hooks) {
        if !self.header.is_final() {
            self.cancel_then(hooks, || ());
        }
    }
}

impl<F, T> Joinable<T> for TaskCell<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn header(&self) -> &Header {
        TaskCell::header(self)
    }

    fn cancel(&self, pool: &Pool) -> bool {
        self.cancel_then(pool.hooks(), || ())
    }

    fn take_output(&self) -> Result<T, TaskError> {
        if self.header.is_cancelled() {
            return Err(TaskError::Cancelled);
        }
        debug_assert!(self.header.is_final());
        // SAFETY: the caller saw a final state with `Acquire` and it is not
        // CANCELLED, so it is COMPLETE: the worker wrote the output before
        // its `Release`, and the unique handle is the only reader (ground
        // rules).
        let stage = self
            .stage
            .with_mut(|stage| unsafe { std::mem::replace(&mut *stage, Stage::Empty) });
        match stage {
            Stage::Done(Ok(value)) => Ok(value),
            Stage::Done(Err(payload)) => Err(TaskError::Panicked(payload)),
            _ => unreachable!("the output of a task is taken once"),
        }
    }
}

/// loom models of the state word (`RUSTFLAGS="--cfg loom"`, see
/// `loom-tests/README.md`), over a [`TaskCell`] alone: its runner (a
/// [`Job`](crate::job::Job) run on one thread), a canceller and the handle
/// on the main thread; no pool threads.
///
/// * `run_vs_cancel_vs_join`: run vs cancel vs a blocking `join`. Exactly
///   one of run and cancel wins (`cancel()` is true iff the closure did not
///   run), `join` returns (a lost wake-up would leave it parked: loom
///   reports the deadlock) with the winner's result, and the closure is
///   dropped exactly once.
/// * `future_woken_by_run_or_cancel`: the handle as a `Future`. It is
///   polled once with a waker that is then replaced (a second poll from
///   a `block_on` whose blocking loom sees) while the task runs or is cancelled: the
///   waker registered last is woken whenever the task became final after
///   it registered (a lost wake-up leaves `block_on` waiting: deadlock), and
///   the output is the winner's.
#[cfg(all(test, loom))]
mod loom_model {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Wake, Waker};

    use super::*;
    use crate::handle::TaskHandle;
    use crate::job::{Job, RunOutcome};
    use crate::loom_support::{bare_pool, block_on, model, DropCounter};
    use crate::sync::{thread, Arc};

    /// A task whose closure counts its runs and holds a drop guard, its
    /// queue job, and the handle.
    fn task(
        drops: &DropCounter,
        ran: &Arc<AtomicUsize>,
    ) -> (StdArc<TaskCell<impl FnOnce() -> u32 + Send, u32>>, Job) {
        let (guard, ran) = (drops.guard(), Arc::clone(ran));
        let cell = StdArc::new(TaskCell::new(move || {
            let _guard = guard;
            ran.fetch_add(1, Ordering::SeqCst);
            7
        }));
        let job = Job::task(StdArc::clone(&cell));
        (cell, job)
    }

    /// A runner and a canceller of a task, and the pool (without
    /// threads) they run it for.
    type Racers = (
        Arc<Pool>,
        thread::JoinHandle<RunOutcome>,
        thread::JoinHandle<bool>,
    );

    /// Runs `job` on one thread while another cancels `cell`.
    fn run_and_cancel<F: FnOnce() -> u32 + Send + 'static>(
        cell: &StdArc<TaskCell<F, u32>>,
        job: Job,
    ) -> Racers {
        let (pool, _) = bare_pool(1, Default::default());
        let runner = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || job.run(&pool))
        };
        let canceller = {
            let (pool, cell) = (Arc::clone(&pool), StdArc::clone(cell));
            thread::spawn(move || Joinable::cancel(&*cell, &pool))
        };
        (pool, runner, canceller)
    }

    #[test]
    fn run_vs_cancel_vs_join() {
        model("task::run_vs_cancel_vs_join", || {
            let (drops, ran) = (DropCounter::new(), Arc::new(AtomicUsize::new(0)));
            let (cell, job) = task(&drops, &ran);
            let (pool, runner, canceller) = run_and_cancel(&cell, job);
            let result = TaskHandle::new(cell, pool).join();
            let cancelled = canceller.join().unwrap();
            let outcome = runner.join().unwrap();

            assert_eq!(ran.load(Ordering::SeqCst), usize::from(!cancelled));
            match result {
                Ok(v) => assert!(!cancelled && v == 7 && outcome == RunOutcome::Completed),
                Err(TaskError::Cancelled) => assert!(cancelled && outcome == RunOutcome::Skipped),
                Err(e) => panic!("unexpected {e}"),
            }
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
        });
    }

    /// A waker that is never woken usefully: the first poll's, replaced by
    /// the second poll's.
    struct Stale;

    impl Wake for Stale {
        fn wake(self: StdArc<Self>) {}
    }

    #[test]
    fn future_woken_by_run_or_cancel() {
        model("task::future_woken_by_run_or_cancel", || {
            let (drops, ran) = (DropCounter::new(), Arc::new(AtomicUsize::new(0)));
            let (cell, job) = task(&drops, &ran);
            let (pool, runner, canceller) = run_and_cancel(&cell, job);
            let mut handle = TaskHandle::new(cell, pool);
            let stale = Waker::from(StdArc::new(Stale));
            let result = match Pin::new(&mut handle).poll(&mut Context::from_waker(&stale)) {
                Poll::Ready(result) => result,
                Poll::Pending => block_on(handle),
            };
            let cancelled = canceller.join().unwrap();
            runner.join().unwrap();

            assert_eq!(ran.load(Ordering::SeqCst), usize::from(!cancelled));
            match result {
                Ok(v) => assert!(!cancelled && v == 7),
                Err(TaskError::Cancelled) => assert!(cancelled),
                Err(e) => panic!("unexpected {e}"),
            }
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
        });
    }
}

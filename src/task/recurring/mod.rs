//! Recurring tasks: run, ask the trigger when to run next, re-arm (the
//! JDK's `runAndReset`, with a [`Trigger`] in place of a fixed period).
//!
//! # Ground rules
//!
//! A recurring task is a cell with the same state word as a one-shot task
//! (`state.rs`). The timer entry that falls due claims it (SCHEDULED ->
//! RUNNING, only if the entry is the task's current placement), the worker
//! runs the closure, asks the trigger for the next deadline, moves the
//! task back to SCHEDULED (`try_reset`, `Release`) and only *then* hands it
//! to the timer again; the next run claims it with `Acquire`. So a run
//! never overlaps the previous one, and each run happens-before the next,
//! on whatever worker it lands.
//!
//! * What a run needs (the closure, the trigger, the history of the runs,
//!   the wall time the task waits for: [`Owned`]) belongs to the thread
//!   that holds RUNNING, or to a canceller that moved SCHEDULED ->
//!   CANCELLED (it drops the closure and the triggers).
//! * A cancel during a run sets CANCEL_REQUESTED and returns true: the run
//!   finishes, `try_reset` fails, and the runner drops the closure and
//!   ends the task as CANCELLED. No further run is queued.
//! * The task ends COMPLETE when a run returns `ControlFlow::Break`, when
//!   the trigger has no next run, or when a run or the trigger panics; the
//!   runner stores the outcome, drops the closure, and publishes COMPLETE.
//! * `deadline` is written only by the holder of RUNNING (before the reset
//!   that publishes it) and at creation; the timer and the handle read it.
//! * User code dropped when the task ends (the closure, the triggers) is
//!   dropped through the task's context: a panic of it goes to `on_panic`
//!   and changes nothing else.
//!
//! # Rooms
//!
//! This file is the task itself: its cell, its state, a run from claim to
//! re-arm, its end. [`body`] holds what a run runs (the three bodies: a
//! periodic closure, one that runs until it breaks, a one-shot at a wall
//! time); [`placement`] where the task goes next (a run's re-arm, a
//! reschedule, a step of the wall clock) and the timer entries that take it
//! there.

mod body;
mod placement;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use body::{Body, OnceView, OneShot, Repeat, Until};
pub(crate) use placement::{reschedulable, reschedule, Placed, Reschedulable, WALL_TOLERANCE};

use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::SystemTime;

use crate::sync::cell::UnsafeCell;
use crate::sync::{AtomicBool, AtomicU64, CellArc, Mutex, Ordering, StdArc};
use crate::time::clock::{nanos, wall_offset};
use crate::time::Nanos;
use crate::trigger::{Ended, History, Next, Trigger, TriggerContext, NONE};

use super::context::TaskContext;
use super::delayed::{erase_wall, Delayed, WallTask};
use super::error::{PanicPayload, TaskError};
use super::job::{Job, RunOutcome, Runnable};
use super::name::Label;
use super::running;
use super::state::{
    Cancellable, Header, Joinable, PeriodicCancel, RescheduleRequest, Reset, PLACEMENTS, RUNNING,
};
use super::trace::{self, Kind};

/// What the holder of RUNNING owns (module doc). `repr(C)`: what a run of
/// a periodic task touches comes first (see [`RecurringTask`]).
#[repr(C)]
struct Owned<B, G> {
    job: Option<B>,
    trigger: Current<G>,
    history: History,
    /// The wall time the current deadline stands for (`None` if it was
    /// not given as one), any that `SystemTime` holds: a task due in 1950
    /// or 2600 waits for that time, not for a clamped one.
    wall_due: Option<SystemTime>,
}

/// The trigger in place.
enum Current<G> {
    /// The one the task was scheduled with.
    Initial(G),
    /// The one the last reschedule handed in.
    Replaced(Box<dyn Trigger>),
    /// None: the task has ended.
    Gone,
}

impl<B, G: Trigger> Owned<B, G> {
    fn records_run_times(&self) -> bool {
        match &self.trigger {
            Current::Initial(trigger) => trigger.records_run_times(),
            Current::Replaced(trigger) => trigger.records_run_times(),
            Current::Gone => false,
        }
    }
}

/// A recurring task (see the module doc): body `B`, trigger `G`.
///
/// `repr(C)`, hot fields first: a run of a periodic task reads and writes
/// the state word, the deadline, the closure, the trigger and the history,
/// which then share the cell's first cache lines; the rest (the outcome,
/// the reschedule slot, the wall-clock watch) is touched once per task or
/// rarely.
#[repr(C)]
pub(crate) struct RecurringTask<B: Body, G, L = ()> {
    pub(crate) header: Header,
    deadline: AtomicU64,
    owned: UnsafeCell<Owned<B, G>>,
    /// False for a one-shot task at a wall time: it is kept at shutdown as
    /// a delayed task, not dropped as a periodic one.
    periodic: bool,
    #[allow(clippy::type_complexity)]
    outcome: UnsafeCell<Option<Result<Ended<B::Output>, PanicPayload>>>,
    /// A trigger handed in by `reschedule`, for the holder of RUNNING.
    replacement: Mutex<Option<Box<dyn Trigger>>>,
    /// Set (`Release`) after a trigger was put in `replacement`, so that a
    /// run looks at the lock only then. A run that missed it is told by
    /// RESCHEDULE_REQUESTED, which `reschedule` sets after this (its
    /// `try_reset` then synchronizes with that and sees this flag).
    replaced: AtomicBool,
    /// The task has been given to the timer's watch of the wall clock.
    watched: AtomicBool,
    /// Its name, if it has one.
    label: L,
}

// SAFETY: shared through `CellArc`; `owned` is touched only by the holder
// of RUNNING or by the canceller that moved SCHEDULED -> CANCELLED,
// `outcome` only by the holder of RUNNING before it publishes COMPLETE
// (`Release`) and by the unique handle after it read COMPLETE (`Acquire`)
// (module doc). The body, the trigger and the output move between
// threads, hence `Send`; they
// are never shared.
unsafe impl<B: Body, G: Send, L: Sync> Sync for RecurringTask<B, G, L> {}

/// Where the next deadline comes from, for [`RecurringTask::place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The trigger (after a run, or a reschedule).
    Trigger,
    /// The wall time the task waits for (the wall clock moved).
    Wall,
}

/// A closure run behind `catch_unwind`.
fn catching<R>(f: impl FnOnce() -> R) -> Result<R, PanicPayload> {
    catch_unwind(AssertUnwindSafe(f)).map_err(PanicPayload::new)
}

impl<B, G, L> RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    /// A task not yet placed: [`first`](Self::first) places it.
    pub(crate) fn new(body: B, trigger: G, periodic: bool, label: L) -> Self {
        RecurringTask {
            header: Header::default(),
            periodic,
            owned: UnsafeCell::new(Owned {
                job: Some(body),
                trigger: Current::Initial(trigger),
                history: History::default(),
                wall_due: None,
            }),
            outcome: UnsafeCell::new(None),
            deadline: AtomicU64::new(0),
            replacement: Mutex::new(None),
            replaced: AtomicBool::new(false),
            watched: AtomicBool::new(false),
            label,
        }
    }

    /// Asks the trigger for the first deadline of a task nobody else sees
    /// yet. `Some` to place it there (the caller inserts it, then, for a
    /// run due at a wall time, calls [`TaskContext::wall_placed`]); `None`
    /// if the trigger ended it at once (or panicked: reported), and the
    /// task is final.
    pub(crate) fn first(this: &CellArc<Self>, ctx: &dyn TaskContext) -> Option<Placed> {
        let claimed = this.header.leave_scheduled(RUNNING).is_some();
        debug_assert!(claimed, "a new task is SCHEDULED");
        match Self::next_deadline(this, ctx) {
            Ok(Some(placed)) => {
                let reset = this.header.try_reset(0);
                debug_assert_eq!(reset, Reset::Done, "nobody else sees the task");
                Some(placed)
            }
            Ok(None) => {
                this.end(ctx, Ok(Ended::ByTrigger));
                None
            }
            Err(payload) => {
                this.end_panicked(ctx, payload);
                None
            }
        }
    }

    /// Takes the body back out of a task that [`first`](Self::first)
    /// placed but the pool refused (nobody else runs or cancels it): the
    /// task ends as cancelled, its triggers dropped through `ctx`.
    pub(crate) fn refuse(this: &CellArc<Self>, ctx: &dyn TaskContext) -> B {
        let claimed = this.header.leave_scheduled(RUNNING).is_some();
        debug_assert!(claimed, "a refused task was never handed to the timer");
        // SAFETY: claimed above (RUNNING): nobody else touches `owned`.
        let body = unsafe { this.with_owned(|owned| owned.job.take()) };
        let body = body.expect("a refused task holds its body");
        this.stop(ctx);
        body
    }

    /// Runs the closure's `f` as the task's code (`running.rs`), catching
    /// a panic.
    fn run_catching<R>(&self, f: impl FnOnce() -> R) -> Result<R, PanicPayload> {
        running::run_as(&self.header, self.label.name(), || catching(f))
    }

    /// Runs `f`, other user code of this task (its trigger), catching a
    /// panic, which is the task's: no thread-local is set for it.
    fn catching<R>(&self, f: impl FnOnce() -> R) -> Result<R, PanicPayload> {
        catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
            PanicPayload::of_task(payload, Some(self.header.identity(self.label.name())))
        })
    }

    /// Runs `f` on the owned part, inside the cell's access (under loom,
    /// checked for the whole of `f`).
    ///
    /// # Safety
    ///
    /// The caller holds RUNNING, or won SCHEDULED -> CANCELLED (module
    /// doc): no other thread touches `owned` until it gives that up, which
    /// it does only after this returns. `f` does not reach `owned` again
    /// (no nested call).
    unsafe fn with_owned<R>(&self, f: impl FnOnce(&mut Owned<B, G>) -> R) -> R {
        self.owned.with_mut(|owned| {
            // SAFETY: the caller's right (above): this is the only access.
            f(unsafe { &mut *owned })
        })
    }

    /// Asks the trigger for the next deadline (the caller holds RUNNING),
    /// taking a trigger a reschedule handed in first. `Ok(None)`: no next
    /// run. Stores the wall time it stands for and watches it.
    #[inline]
    fn next_deadline(
        this: &CellArc<Self>,
        ctx: &dyn TaskContext,
    ) -> Result<Option<Placed>, PanicPayload> {
        this.install_replacement(ctx);
        // SAFETY: the caller holds RUNNING; the trigger and the code below
        // never reach `owned`.
        unsafe { this.with_owned(|owned| Self::next_deadline_of(this, ctx, owned)) }
    }

    /// [`next_deadline`](Self::next_deadline), on the owned part.
    #[inline]
    fn next_deadline_of(
        this: &CellArc<Self>,
        ctx: &dyn TaskContext,
        owned: &mut Owned<B, G>,
    ) -> Result<Option<Placed>, PanicPayload> {
        let Owned {
            trigger,
            history,
            wall_due,
            ..
        } = owned;
        let context = TriggerContext::new(ctx.clock(), history);
        // The trigger the task was scheduled with is called directly (a
        // fixed rate's arithmetic inlines here); a replaced one through
        // its box.
        let next = match trigger {
            Current::Initial(trigger) => this.catching(|| trigger.next(&context))?,
            Current::Replaced(trigger) => this.catching(|| trigger.next(&context))?,
            Current::Gone => None,
        };
        let (skipped, delayed) = context.missed();
        if skipped + delayed > 0 {
            ctx.note_missed(skipped, delayed);
            trace::missed_runs(&this.header, this.label.name(), skipped, delayed);
        }
        let Some(next) = next else {
            return Ok(None);
        };
        let (placed, wall) = match next {
            Next::At(at) => (Placed::monotonic(context.nanos_of(at)), None),
            Next::AtSystemTime(at) => (Self::deadline_of_wall(ctx, at), Some(at)),
        };
        *wall_due = wall;
        this.deadline.store(placed.deadline, Ordering::Relaxed);
        if wall.is_some() && !this.watched.swap(true, Ordering::Relaxed) {
            ctx.watch_wall(erase_wall(CellArc::clone(this)));
        }
        Ok(Some(placed))
    }

    /// The run of the entry of placement `placement` (see the module doc).
    fn run_at(this: &CellArc<Self>, placement: usize, ctx: &dyn TaskContext) -> RunOutcome {
        if !this.header.leave_scheduled_at(placement) {
            return if this.header.is_cancelled() && this.header.placement() == placement {
                // The entry the cancel left: it counts the cancel once.
                RunOutcome::Cancelled
            } else {
                RunOutcome::Skipped
            };
        }
        // SAFETY: claimed above (RUNNING), here to the end.
        let wall = unsafe { this.with_owned(|owned| owned.wall_due) };
        if let Some(at) = wall {
            // Due on the monotonic clock, not yet on the wall clock (it was
            // stepped back, or drifted): wait for it, unless the pool has
            // stopped (the task is run by hand, from `shutdown_now`).
            if ctx.clock().system_time() < at && Self::place(this, ctx, Source::Wall, false, true) {
                return RunOutcome::Skipped;
            }
        }
        let deadline = this.deadline.load(Ordering::Relaxed);
        ctx.started_late(deadline);
        let _span = trace::run(B::KIND, &this.header, this.label.name(), || {
            Some(ctx.now().saturating_sub(deadline))
        });
        // SAFETY: RUNNING is held. The closure may use the task's handle
        // (cancel, reschedule), which never reaches `owned` while RUNNING.
        let (records, start, ran) = unsafe {
            this.with_owned(|owned| {
                let records = owned.records_run_times();
                let start = if records { ctx.now() } else { NONE };
                let Some(job) = owned.job.as_mut() else {
                    unreachable!("a task holds its closure until it ends");
                };
                (records, start, this.run_catching(|| job.call()))
            })
        };
        match ran {
            Err(payload) => {
                this.end_panicked(ctx, payload);
                RunOutcome::Panicked
            }
            Ok(ControlFlow::Break(value)) => {
                this.end(ctx, Ok(Ended::ByClosure(value)));
                RunOutcome::Completed
            }
            Ok(ControlFlow::Continue(())) => {
                let history = |runs| History {
                    runs,
                    last_due: this.deadline.load(Ordering::Relaxed),
                    last_due_wall: wall,
                    last_start: start,
                    last_end: if records { ctx.now() } else { NONE },
                };
                // SAFETY: RUNNING is still held.
                unsafe {
                    this.with_owned(|owned| owned.history = history(owned.history.runs + 1));
                }
                // The closure is dropped (user code) only after the
                // re-arm's admission has ended: `shutdown_now` waits for
                // admitted re-arms, so a destructor that calls it must not
                // run inside one.
                Self::place(this, ctx, Source::Trigger, false, false);
                RunOutcome::Completed
            }
        }
    }

    /// Ends the task (the caller holds RUNNING) with `outcome`: the
    /// closure and the triggers are dropped, then COMPLETE is published.
    fn end(&self, ctx: &dyn TaskContext, outcome: Result<Ended<B::Output>, PanicPayload>) {
        self.drop_user_code(ctx);
        // SAFETY: we hold RUNNING: nobody reads `outcome` until COMPLETE.
        self.outcome
            .with_mut(|slot| unsafe { *slot = Some(outcome) });
        if let Some(waker) = self.header.complete() {
            ctx.wake(waker);
        }
    }

    fn end_panicked(&self, ctx: &dyn TaskContext, payload: PanicPayload) {
        ctx.show_panic(&payload);
        self.end(ctx, Err(payload));
    }

    /// Ends the task as cancelled (the caller holds RUNNING).
    fn stop(&self, ctx: &dyn TaskContext) {
        self.drop_user_code(ctx);
        if let Some(waker) = self.header.finish_cancelled() {
            ctx.wake(waker);
        }
    }

    /// Drops the closure and the triggers. Only their owner (module doc)
    /// calls this.
    fn drop_user_code(&self, ctx: &dyn TaskContext) {
        // SAFETY: only their owner calls this (its callers' doc).
        let user_code = unsafe {
            self.with_owned(|owned| {
                (
                    owned.job.take(),
                    std::mem::replace(&mut owned.trigger, Current::Gone),
                )
            })
        };
        let replacement = self.replacement.lock().take();
        let name = self.label.name();
        ctx.drop_reporting_as(&self.header, name, user_code);
        ctx.drop_reporting_as(&self.header, name, replacement);
    }

    /// Ends a task that `cancel_periodic` stopped between runs: `counted`
    /// (the bookkeeping), then the user code is dropped and the waiter
    /// woken. True if it was stopped or is stopping (a run in progress).
    fn cancel_then(&self, ctx: &dyn TaskContext, counted: impl FnOnce()) -> bool {
        match self.header.cancel_periodic() {
            PeriodicCancel::Stopped { wake } => {
                counted();
                self.drop_user_code(ctx);
                if let Some(waker) = wake.then(|| self.header.take_waiter()).flatten() {
                    ctx.wake(waker);
                }
                true
            }
            PeriodicCancel::Requested => true,
            PeriodicCancel::Lost => false,
        }
    }

    /// A job given up unrun: cancels the task, unless the job is a stale
    /// entry's.
    fn abandon_at(&self, placement: usize, ctx: &dyn TaskContext) {
        if !self.header.is_stale(placement) {
            self.cancel_then(ctx, || ());
        }
    }
}

impl<B, G, L> Runnable for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn run(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        Self::run_at(this, 0, ctx)
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        self.abandon_at(0, ctx);
    }

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        Some((&self.header, self.label.name()))
    }

    fn is_users(&self) -> bool {
        self.header.placement() == 0
    }
}

impl<B, G, L> Cancellable for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn header(&self) -> &Header {
        &self.header
    }

    /// A task stopped between runs leaves a dead entry in the timer: the
    /// cancel is counted there (module doc of `timer::driver::sweep`); a run
    /// in progress ends the task itself and re-arms nothing.
    fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        self.cancel_then(ctx, || ctx.note_cancelled())
    }

    fn deadline(&self) -> Option<Nanos> {
        Some(self.deadline.load(Ordering::Relaxed))
    }

    fn name(&self) -> Option<&StdArc<str>> {
        self.label.name()
    }
}

impl<B, G, L> Joinable<Ended<B::Output>> for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    unsafe fn cancellable(
        &self,
        this: &mut Option<CellArc<dyn Joinable<Ended<B::Output>>>>,
    ) -> CellArc<dyn Cancellable> {
        // SAFETY: `this` holds a reference to `self` (caller).
        unsafe { super::state::cancellable_as::<Ended<B::Output>, Self>(this) }
    }

    fn take_output(&self) -> Result<Ended<B::Output>, TaskError> {
        if self.header.is_cancelled() {
            return Err(TaskError::Cancelled);
        }
        // SAFETY: the caller saw COMPLETE with `Acquire`; the runner wrote
        // `outcome` before publishing it; the unique handle reads it once.
        match self.outcome.with_mut(|slot| unsafe { (*slot).take() }) {
            Some(Ok(ended)) => Ok(ended),
            Some(Err(payload)) => Err(TaskError::Panicked(payload)),
            None => unreachable!("a task completes with an outcome"),
        }
    }
}

impl<B, G, L> Delayed for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn deadline(&self) -> Nanos {
        self.deadline.load(Ordering::Relaxed)
    }

    fn is_final(&self) -> bool {
        self.header.is_stale(0)
    }

    fn is_cancelled_task(&self) -> bool {
        self.header.is_cancelled() && self.header.placement() == 0
    }

    fn is_periodic(&self) -> bool {
        self.periodic
    }

    unsafe fn job(&self, this: &mut Option<CellArc<dyn Delayed>>) -> Job {
        // SAFETY: `this` holds a reference to `self` (caller).
        unsafe { super::delayed::task_job::<Self>(this) }
    }
}

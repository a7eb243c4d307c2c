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
//! # Placing a task again
//!
//! A task that waits in the timer can be *placed again* at another
//! deadline: by [`reschedule`](RecurringTask::reschedule) (a new trigger
//! takes effect from the next run) and by a step of the wall clock (a run
//! due at a wall time, `wall_check`). The timer's entry cannot be found
//! and moved (nothing keeps its key), so whoever places the task again
//! claims it (SCHEDULED -> RUNNING, as a run would), inserts a fresh entry
//! ([`Placement`]) and resets the task to that entry's generation: the old
//! entry is stale from then on (its claim fails, the sweep takes it out as
//! a dead entry, counted like a cancel). A claimer other than the due entry
//! always places a fresh entry, never just gives the claim back: the due
//! entry may have lost its claim to it and been dropped meanwhile.
//!
//! A reschedule that finds a run in progress sets RESCHEDULE_REQUESTED:
//! the run's `try_reset` then fails once and the runner asks the new
//! trigger, so the new schedule takes effect from the next run whichever
//! comes first, and no run is lost or doubled.

use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::SystemTime;

use crate::sync::cell::UnsafeCell;
use crate::sync::{AtomicBool, AtomicU64, Mutex, Ordering, StdArc};
use crate::time::clock::{nanos, wall_offset};
use crate::time::Nanos;
use crate::trigger::{Ended, History, Next, Trigger, TriggerContext, NONE};

use super::context::TaskContext;
use super::entry::{TimerEntry, WallTask};
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

/// What a recurring task runs: a closure, and what a run can end the task
/// with.
pub(crate) trait Body: Send + 'static {
    /// The value a run can end the task with.
    type Output: Send + 'static;
    /// What kind of task runs it, for `tracing`.
    const KIND: Kind;
    /// Runs once: `Break` ends the task with the value.
    fn call(&mut self) -> ControlFlow<Self::Output>;
}

/// A periodic task's closure: it never ends the task itself.
pub(crate) struct Repeat<F>(pub(crate) F);

impl<F: FnMut() + Send + 'static> Body for Repeat<F> {
    type Output = ();
    const KIND: Kind = Kind::Periodic;
    fn call(&mut self) -> ControlFlow<()> {
        (self.0)();
        ControlFlow::Continue(())
    }
}

/// A closure that can end its task with a value.
pub(crate) struct Until<F, T>(pub(crate) F, PhantomData<fn() -> T>);

impl<F, T> Until<F, T> {
    pub(crate) fn new(f: F) -> Self {
        Until(f, PhantomData)
    }
}

impl<F, T> Body for Until<F, T>
where
    F: FnMut() -> ControlFlow<T> + Send + 'static,
    T: Send + 'static,
{
    type Output = T;
    const KIND: Kind = Kind::Trigger;
    fn call(&mut self) -> ControlFlow<T> {
        (self.0)()
    }
}

/// A one-shot closure: its run ends the task with its value.
pub(crate) struct OneShot<F>(pub(crate) Option<F>);

impl<F, T> Body for OneShot<F>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    type Output = T;
    const KIND: Kind = Kind::WallTime;
    fn call(&mut self) -> ControlFlow<T> {
        match self.0.take() {
            Some(f) => ControlFlow::Break(f()),
            None => ControlFlow::Continue(()),
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
    header: Header,
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

// SAFETY: shared through `StdArc`; `owned` is touched only by the holder
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
    pub(crate) fn first(this: &StdArc<Self>, ctx: &dyn TaskContext) -> Option<Placed> {
        let claimed = this.header.leave_scheduled(RUNNING).is_some();
        debug_assert!(claimed, "a new task is SCHEDULED");
        match this.next_deadline(ctx) {
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
    pub(crate) fn refuse(this: &StdArc<Self>, ctx: &dyn TaskContext) -> B {
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
        self: &StdArc<Self>,
        ctx: &dyn TaskContext,
    ) -> Result<Option<Placed>, PanicPayload> {
        self.install_replacement(ctx);
        // SAFETY: the caller holds RUNNING; the trigger and the code below
        // never reach `owned`.
        unsafe { self.with_owned(|owned| self.next_deadline_of(ctx, owned)) }
    }

    /// [`next_deadline`](Self::next_deadline), on the owned part.
    #[inline]
    fn next_deadline_of(
        self: &StdArc<Self>,
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
            Current::Initial(trigger) => self.catching(|| trigger.next(&context))?,
            Current::Replaced(trigger) => self.catching(|| trigger.next(&context))?,
            Current::Gone => None,
        };
        let (skipped, delayed) = context.missed();
        if skipped + delayed > 0 {
            ctx.note_missed(skipped, delayed);
            trace::missed_runs(&self.header, self.label.name(), skipped, delayed);
        }
        let Some(next) = next else {
            return Ok(None);
        };
        let (placed, wall) = match next {
            Next::At(at) => (Placed::monotonic(context.nanos_of(at)), None),
            Next::AtSystemTime(at) => (Self::deadline_of_wall(ctx, at), Some(at)),
        };
        *wall_due = wall;
        self.deadline.store(placed.deadline, Ordering::Relaxed);
        if wall.is_some() && !self.watched.swap(true, Ordering::Relaxed) {
            ctx.watch_wall(self.clone());
        }
        Ok(Some(placed))
    }

    /// The monotonic deadline at which the wall clock reads `at`, as it
    /// runs now (at once if it already does; never if beyond the clock's
    /// range), and the clocks' offset it was computed with.
    fn deadline_of_wall(ctx: &dyn TaskContext, at: SystemTime) -> Placed {
        let (now, wall_now) = (ctx.now(), ctx.clock().system_time());
        let deadline = match at.duration_since(wall_now) {
            Ok(left) => now.saturating_add(nanos(left)),
            Err(_) => now,
        };
        Placed {
            deadline,
            wall_offset: Some(wall_offset(wall_now, now)),
        }
    }

    /// Takes a trigger handed in by `reschedule` (the caller holds
    /// RUNNING); the triggers it replaces are dropped (user code, through
    /// `ctx`).
    fn install_replacement(&self, ctx: &dyn TaskContext) {
        if !self.replaced.load(Ordering::Acquire) {
            return;
        }
        let new = {
            let mut replacement = self.replacement.lock();
            self.replaced.store(false, Ordering::Relaxed);
            replacement.take()
        };
        let Some(new) = new else {
            return;
        };
        // SAFETY: the caller holds RUNNING.
        let old = unsafe {
            self.with_owned(|owned| std::mem::replace(&mut owned.trigger, Current::Replaced(new)))
        };
        ctx.drop_reporting(old);
    }

    /// Places the task (the caller holds RUNNING) at its next deadline,
    /// from the trigger or from its wall time, and re-arms it; ends it if
    /// there is none, if the pool takes no re-arm, or if a cancel came.
    /// `in_timer`: an entry of the task's current placement may still be
    /// in the timer (the caller did not get here through it), so the new
    /// entry is a fresh placement and the old one is counted as dead.
    ///
    /// `keep_if_refused`: if the pool takes no re-arm (it was stopped),
    /// return false and keep RUNNING instead of ending the task (a run due
    /// on the monotonic clock but not yet on the wall clock then runs now:
    /// it is a [`PendingTask`](crate::PendingTask) being run by hand).
    /// True otherwise.
    fn place(
        self: &StdArc<Self>,
        ctx: &dyn TaskContext,
        mut from: Source,
        in_timer: bool,
        keep_if_refused: bool,
    ) -> bool {
        let dead_entry = || {
            if in_timer {
                ctx.note_cancelled();
            }
            true
        };
        loop {
            let mut wall_offset = None;
            match from {
                Source::Trigger => match self.next_deadline(ctx) {
                    Ok(Some(placed)) => wall_offset = placed.wall_offset,
                    Ok(None) => {
                        self.end(ctx, Ok(Ended::ByTrigger));
                        return dead_entry();
                    }
                    Err(payload) => {
                        self.end_panicked(ctx, payload);
                        return dead_entry();
                    }
                },
                Source::Wall => {
                    // SAFETY: the caller holds RUNNING.
                    if let Some(at) = unsafe { self.with_owned(|owned| owned.wall_due) } {
                        let placed = Self::deadline_of_wall(ctx, at);
                        self.deadline.store(placed.deadline, Ordering::Relaxed);
                        wall_offset = placed.wall_offset;
                    }
                }
            }
            let current = self.header.placement();
            let placement = if in_timer {
                match (current + 1) & PLACEMENTS {
                    0 => 1,
                    next => next,
                }
            } else {
                current
            };
            let entry: StdArc<dyn TimerEntry> = if placement == 0 {
                self.clone()
            } else {
                StdArc::new(Placement {
                    task: self.clone(),
                    placement,
                })
            };
            let mut reset = None;
            let rearmed = ctx.rearm(entry, self.periodic, &mut || {
                let outcome = self.header.try_reset(placement);
                reset = Some(outcome);
                outcome == Reset::Done
            });
            if rearmed {
                if let Some(offset) = wall_offset {
                    // Placed and visible: was the wall clock stepped since
                    // the deadline was computed (`timer/driver/wall.rs`)?
                    ctx.wall_placed(self.clone(), offset);
                }
                return dead_entry();
            }
            match reset {
                // A reschedule came: ask the (new) trigger again.
                Some(Reset::Rescheduled) => from = Source::Trigger,
                // The pool takes no re-arm, and the caller will run it.
                None if keep_if_refused && !in_timer => return false,
                // A cancel came, or the pool takes no re-arm (shut down).
                Some(Reset::Cancelled) | Some(Reset::Done) | None => {
                    self.stop(ctx);
                    return dead_entry();
                }
            }
        }
    }

    /// The run of the entry of placement `placement` (see the module doc).
    fn run_at(this: &StdArc<Self>, placement: usize, ctx: &dyn TaskContext) -> RunOutcome {
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
            if ctx.clock().system_time() < at && this.place(ctx, Source::Wall, false, true) {
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
                this.place(ctx, Source::Trigger, false, false);
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

    /// Hands `trigger` to the task: it decides the next run from now on
    /// (module doc). False if the task has ended or is ending.
    pub(crate) fn reschedule(
        this: &StdArc<Self>,
        trigger: Box<dyn Trigger>,
        ctx: &dyn TaskContext,
    ) -> bool {
        let unapplied = {
            let mut replacement = this.replacement.lock();
            this.replaced.store(true, Ordering::Release);
            replacement.replace(trigger)
        };
        ctx.drop_reporting(unapplied);
        match this.header.request_reschedule() {
            RescheduleRequest::Claimed => {
                this.place(ctx, Source::Trigger, true, false);
                true
            }
            RescheduleRequest::Requested => true,
            RescheduleRequest::Lost => {
                let unapplied = this.replacement.lock().take();
                ctx.drop_reporting(unapplied);
                false
            }
        }
    }

    /// After a step of the wall clock: places the task again at the
    /// monotonic deadline its wall time now stands for, if that moved.
    fn wall_check(this: &StdArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        if this.header.is_final() || this.header.leave_scheduled(RUNNING).is_none() {
            // Ended, or running (the run places it again itself).
            return RunOutcome::Skipped;
        }
        // Its wall time is the owner's to read: placed again, at the
        // deadline that wall time stands for now (a fresh entry even if
        // that did not move: the claim cannot be handed back, see the
        // module doc).
        this.place(ctx, Source::Wall, true, false);
        RunOutcome::Skipped
    }
}

/// How far the clocks' offset may move before the tasks due at a wall
/// time are placed again (it is read with two clock reads, so it jitters
/// by a little).
pub(crate) const WALL_TOLERANCE: Nanos = 1_000_000;

/// Where a run was placed: its deadline, and for a run due at a wall time
/// the offset between the clocks it was computed with ([`wall_offset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    pub(crate) deadline: Nanos,
    pub(crate) wall_offset: Option<i128>,
}

impl Placed {
    fn monotonic(deadline: Nanos) -> Self {
        Placed {
            deadline,
            wall_offset: None,
        }
    }
}

impl<B, G, L> Runnable for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn run(this: &StdArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        Self::run_at(this, 0, ctx)
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        self.abandon_at(0, ctx);
    }

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        Some((&self.header, self.label.name()))
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
    fn cancellable(self: StdArc<Self>) -> StdArc<dyn Cancellable> {
        self
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

impl<B, G, L> TimerEntry for RecurringTask<B, G, L>
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

    fn into_job(self: StdArc<Self>) -> Job {
        Job::task(self)
    }
}

impl<B, G, L> WallTask for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn check_job(self: StdArc<Self>) -> Job {
        Job::task(StdArc::new(WallCheck(self)))
    }
}

/// What a task that can be rescheduled offers its handle.
pub(crate) trait Reschedulable: Send + Sync {
    /// See [`RecurringTask::reschedule`].
    fn reschedule(self: StdArc<Self>, trigger: Box<dyn Trigger>, ctx: &dyn TaskContext) -> bool;
}

impl<B, G, L> Reschedulable for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn reschedule(self: StdArc<Self>, trigger: Box<dyn Trigger>, ctx: &dyn TaskContext) -> bool {
        Self::reschedule(&self, trigger, ctx)
    }
}

/// The timer entry of a task placed again (module doc): its placement
/// generation, beside the task.
struct Placement<C> {
    task: StdArc<C>,
    placement: usize,
}

impl<B, G, L> Runnable for Placement<RecurringTask<B, G, L>>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn run(this: &StdArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        RecurringTask::run_at(&this.task, this.placement, ctx)
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        self.task.abandon_at(self.placement, ctx);
    }

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        Some((&self.task.header, self.task.label.name()))
    }
}

impl<B, G, L> TimerEntry for Placement<RecurringTask<B, G, L>>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn deadline(&self) -> Nanos {
        self.task.deadline.load(Ordering::Relaxed)
    }

    fn is_final(&self) -> bool {
        self.task.header.is_stale(self.placement)
    }

    fn is_cancelled_task(&self) -> bool {
        let header = &self.task.header;
        header.is_cancelled() && header.placement() == self.placement
    }

    fn is_periodic(&self) -> bool {
        self.task.periodic
    }

    fn into_job(self: StdArc<Self>) -> Job {
        Job::task(self)
    }
}

/// The job that checks a wall-time task after a step of the wall clock
/// (`RecurringTask::wall_check`). It is not a timer entry: given up
/// unrun, it changes nothing.
struct WallCheck<C>(StdArc<C>);

impl<B, G, L> Runnable for WallCheck<RecurringTask<B, G, L>>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn run(this: &StdArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        RecurringTask::wall_check(&this.0, ctx)
    }

    fn abandon(&self, _: &dyn TaskContext) {}

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        None
    }
}

/// A one-shot task at a wall time (a [`OneShot`] body), seen as a task with
/// output `T`: its run ends it with its value.
pub(crate) struct OnceView<C>(pub(crate) StdArc<C>);

impl<F, G, T, L> Cancellable for OnceView<RecurringTask<OneShot<F>, G, L>>
where
    F: FnOnce() -> T + Send + 'static,
    G: Trigger,
    T: Send + 'static,
    L: Label,
{
    fn header(&self) -> &Header {
        &self.0.header
    }

    fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        Cancellable::cancel(&*self.0, ctx)
    }

    fn deadline(&self) -> Option<Nanos> {
        Cancellable::deadline(&*self.0)
    }

    fn name(&self) -> Option<&StdArc<str>> {
        Cancellable::name(&*self.0)
    }
}

impl<F, G, T, L> Joinable<T> for OnceView<RecurringTask<OneShot<F>, G, L>>
where
    F: FnOnce() -> T + Send + 'static,
    G: Trigger,
    T: Send + 'static,
    L: Label,
{
    fn cancellable(self: StdArc<Self>) -> StdArc<dyn Cancellable> {
        StdArc::clone(&self.0) as StdArc<dyn Cancellable>
    }

    fn take_output(&self) -> Result<T, TaskError> {
        match self.0.take_output()? {
            Ended::ByClosure(value) => Ok(value),
            // A one-shot trigger always gives its run: not reached.
            Ended::ByTrigger => Err(TaskError::Cancelled),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::context::TestContext;
    use crate::trigger::{FixedDelay, FixedRate, MissedRuns};
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    const SECOND: Duration = Duration::from_secs(1);

    /// A task on `trigger` that counts its runs and the drops of its
    /// closure, placed for its first run.
    #[allow(clippy::type_complexity)]
    fn counting<G: Trigger>(
        ctx: &TestContext,
        trigger: G,
    ) -> (
        StdArc<RecurringTask<Repeat<impl FnMut() + Send>, G>>,
        Arc<AtomicUsize>,
        Arc<AtomicUsize>,
    ) {
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (r, capture) = (runs.clone(), Counted(drops.clone()));
        let body = Repeat(move || {
            let _keep = &capture;
            r.fetch_add(1, Ordering::SeqCst);
        });
        let task = StdArc::new(RecurringTask::new(body, trigger, true, ()));
        assert!(RecurringTask::first(&task, ctx).is_some());
        (task, runs, drops)
    }

    fn deadline(task: &impl TimerEntry) -> Duration {
        Duration::from_nanos(task.deadline())
    }

    #[test]
    fn a_run_rearms_through_the_context_at_its_next_deadline() {
        let ctx = TestContext::default();
        let (task, runs, drops) =
            counting(&ctx, FixedRate::new(SECOND * 10).initial_delay(SECOND * 10));
        assert_eq!(deadline(&*task), SECOND * 10);
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Completed);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(ctx.rearmed.lock().unwrap().len(), 1);
        assert_eq!(
            deadline(&*task),
            SECOND * 20,
            "from the due time, not the clock"
        );
        assert!(!task.header.is_final());
        assert_eq!(drops.load(Ordering::SeqCst), 0, "the closure is kept");
    }

    #[test]
    fn a_fixed_delay_counts_from_the_contexts_clock() {
        let ctx = TestContext::default();
        let (task, _, _) = counting(&ctx, FixedDelay::new(SECOND * 7));
        ctx.manual.jump(SECOND * 100);
        Job::task(task.clone()).run(&ctx);
        assert_eq!(deadline(&*task), SECOND * 107);
    }

    #[test]
    fn late_fixed_rate_runs_follow_the_policy() {
        for (missed, next) in [
            (MissedRuns::Burst, 20),
            (MissedRuns::Skip, 50),
            (MissedRuns::Delay, 55),
        ] {
            let ctx = TestContext::default();
            let rate = FixedRate::new(SECOND * 10)
                .initial_delay(SECOND * 10)
                .missed_runs(missed);
            let (task, _, _) = counting(&ctx, rate);
            ctx.manual.jump(SECOND * 45);
            Job::task(task.clone()).run(&ctx);
            assert_eq!(deadline(&*task), SECOND * next, "{missed:?}");
        }
    }

    #[test]
    fn a_refused_rearm_ends_the_task_and_drops_its_closure() {
        let ctx = TestContext::default();
        let (task, runs, drops) = counting(&ctx, FixedRate::new(SECOND));
        ctx.refuse_rearm.store(true, Ordering::SeqCst);
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Completed);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(task.header.is_cancelled());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert!(ctx.rearmed.lock().unwrap().is_empty());
    }

    #[test]
    fn a_cancel_between_runs_is_counted_and_drops_the_closure() {
        let ctx = TestContext::default();
        let (task, runs, drops) = counting(&ctx, FixedRate::new(SECOND));
        assert!(Cancellable::cancel(&*task, &ctx));
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Cancelled);
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        assert!(task.take_output().unwrap_err().is_cancelled());
    }

    #[test]
    fn a_panicking_run_ends_the_task_with_its_payload() {
        crate::task::unwind::quiet_expected_panics();
        let ctx = TestContext::default();
        let body = Repeat(|| panic!("expected: a periodic run panicked"));
        let task = StdArc::new(RecurringTask::new(body, FixedRate::new(SECOND), true, ()));
        assert!(RecurringTask::first(&task, &ctx).is_some());
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Panicked);
        assert_eq!(ctx.panics.lock().unwrap().len(), 1);
        assert!(ctx.rearmed.lock().unwrap().is_empty());
        assert!(task.take_output().unwrap_err().is_panic());
    }

    #[test]
    fn a_reschedule_between_runs_places_a_fresh_entry_and_makes_the_old_one_stale() {
        let ctx = TestContext::default();
        let (task, runs, _) = counting(&ctx, FixedRate::new(SECOND * 60));
        let old: StdArc<dyn TimerEntry> = task.clone();
        assert!(RecurringTask::reschedule(
            &task,
            Box::new(FixedRate::new(SECOND)),
            &ctx
        ));
        assert!(old.is_final(), "the old entry is stale");
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 1, "counted as dead");
        let fresh = ctx.rearmed.lock().unwrap().pop().expect("a fresh entry");
        assert!(!fresh.is_final());
        assert_eq!(Duration::from_nanos(fresh.deadline()), Duration::ZERO);
        assert_eq!(old.clone().into_job().run(&ctx), RunOutcome::Skipped);
        assert_eq!(runs.load(Ordering::SeqCst), 0, "a stale entry runs nothing");
        assert_eq!(fresh.into_job().run(&ctx), RunOutcome::Completed);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(deadline(&*task), SECOND, "the new trigger's period");
    }

    #[test]
    fn a_trigger_that_ends_completes_the_task_by_trigger() {
        let ctx = TestContext::default();
        let twice = |c: &TriggerContext| (c.runs() < 2).then(|| Next::At(c.now()));
        let (task, runs, drops) = counting(&ctx, twice);
        Job::task(task.clone()).run(&ctx);
        let second = ctx.rearmed.lock().unwrap().pop().unwrap();
        second.into_job().run(&ctx);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(task.take_output().unwrap(), Ended::ByTrigger);
    }

    #[test]
    fn a_wall_time_run_waits_for_the_wall_clock() {
        let ctx = TestContext::default();
        let at = ctx.manual.system_time() + SECOND * 10;
        let (task, runs, _) = counting(&ctx, crate::trigger::Once(Next::AtSystemTime(at)));
        assert_eq!(deadline(&*task), SECOND * 10);
        assert_eq!(ctx.watched.lock().unwrap().len(), 1, "watched");
        // The monotonic deadline comes, but the wall clock was set back.
        ctx.manual.jump(SECOND * 10);
        ctx.manual.set_system_time(at - SECOND * 5);
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Skipped);
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        assert_eq!(deadline(&*task), SECOND * 15, "placed again");
    }
}

/// loom models of a recurring task (`RUSTFLAGS="--cfg loom"`, see
/// `loom-tests/README.md`), over a [`RecurringTask`] and a pool without
/// threads.
///
/// `run_and_reset_vs_cancel`: one thread runs the task's first run (a queue
/// job, as a worker would: claim, run, reset, re-arm into the timer's
/// command queue); a second thread takes whatever the timer holds (the
/// timer's own `drain`: it applies the commands, placing the re-armed
/// entry) and runs it, as the next worker would; the main thread cancels,
/// then sets a flag (`SeqCst`) that each run reads when its closure starts
/// and when it ends. Asserted:
///
/// * after `cancel()` returned true no further run starts. A run is
///   claimed before its closure starts, so one closure may start after
///   `cancel()` returned: the run that was claimed, not yet in its closure,
///   when the cancel came (and found it RUNNING). So: at most one closure
///   starts after the flag is set, and none if a closure was running when
///   it was set (that run was the one in progress);
/// * runs never overlap and each happens-before the next: the closure
///   keeps its log in a loom `UnsafeCell` (plain, non-atomic fields), and
///   loom reports a data race unless the previous run's accesses are
///   ordered before the next run's;
/// * `cancel()` is true (one canceller, nothing else ends the task), the
///   task ends CANCELLED, and its closure is dropped exactly once.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom_support::{bare_pool, model, DropCounter, Every};
    use crate::sync::cell::UnsafeCell;
    use crate::sync::{thread, Arc, AtomicBool};
    use crate::trigger::{Next, TriggerContext};

    /// What the runs wrote, in plain fields.
    #[derive(Default)]
    struct Log {
        runs: usize,
        /// Runs whose closure started after `cancel()` returned true.
        started_after_cancel: usize,
        /// Runs whose closure was running when `cancel()` returned true.
        running_at_cancel: usize,
    }

    struct Shared {
        /// Only accessed by runs of the task (and by the main thread once
        /// every run ended): loom checks that these accesses are ordered.
        log: UnsafeCell<Log>,
        /// Set once `cancel()` returned true.
        cancelled: AtomicBool,
    }

    // SAFETY: `log` is only accessed by runs of the task, which the task
    // protocol orders (loom checks that it does), and after they ended.
    unsafe impl Sync for Shared {}

    #[test]
    fn run_and_reset_vs_cancel() {
        model("recurring::run_and_reset_vs_cancel", || {
            let (pool, _) = bare_pool(1, Default::default());
            let shared = Arc::new(Shared {
                log: UnsafeCell::new(Log::default()),
                cancelled: AtomicBool::new(false),
            });
            let drops = DropCounter::new();
            let (s, guard) = (Arc::clone(&shared), drops.guard());
            let cell = StdArc::new(RecurringTask::new(
                Repeat(move || {
                    let _keep = &guard;
                    let before = s.cancelled.load(Ordering::SeqCst);
                    // SAFETY: the task protocol orders the runs, the only
                    // accesses to the log until the model reads it.
                    s.log.with_mut(|log| unsafe { (*log).runs += 1 });
                    let after = s.cancelled.load(Ordering::SeqCst);
                    // SAFETY: as above.
                    s.log.with_mut(|log| unsafe {
                        if before {
                            (*log).started_after_cancel += 1;
                        } else if after {
                            (*log).running_at_cancel += 1;
                        }
                    });
                }),
                Every {
                    first: 0,
                    period: 1,
                },
                true,
                (),
            ));
            assert_eq!(
                RecurringTask::first(&cell, &*pool).map(|p| p.deadline),
                Some(0)
            );
            // The first run: its job, as the timer hands it over when due.
            let first = Job::task(StdArc::clone(&cell));
            let w1 = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    first.run(&*pool);
                })
            };
            let w2 = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    for job in pool.timer.drain(&*pool) {
                        job.run(&*pool);
                    }
                })
            };
            let cancelled = Cancellable::cancel(&*cell, &*pool);
            if cancelled {
                shared.cancelled.store(true, Ordering::SeqCst);
            }
            w1.join().unwrap();
            w2.join().unwrap();

            assert!(cancelled, "nothing but this cancel ends the task");
            assert!(cell.header.is_cancelled());
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
            // SAFETY: every run has ended (the threads were joined).
            let log = shared
                .log
                .with_mut(|log| unsafe { std::mem::take(&mut *log) });
            assert!(log.runs <= 2, "{} runs", log.runs);
            assert!(
                log.started_after_cancel <= 1,
                "a run started after cancel() returned true and another run"
            );
            assert!(
                log.started_after_cancel == 0 || log.running_at_cancel == 0,
                "a run started after the run in progress at cancel() ended"
            );
        });
    }

    /// `reschedule_vs_run`: the task's first run is due (its job is handed
    /// to one thread, as the timer would) while the main thread hands it a
    /// new trigger; the timer's entries are then drained and run, as the
    /// next worker would. The old trigger would place the next run at
    /// `OLD`, the new one at `NEW` after the last due time (or at `FIRST`
    /// if no run has happened). Asserted: `reschedule` returns true (the
    /// task is alive); the runs never overlap (the log is a plain cell);
    /// before the drain, the task's deadline is the new trigger's answer
    /// for the runs so far (never the old trigger's: a run in progress took
    /// the new trigger, whichever came first); exactly one of the drained
    /// entries runs the task (a stale entry runs nothing, and none is
    /// lost); and the count of dead entries covers the stale ones left.
    #[test]
    fn reschedule_vs_run() {
        const OLD: Nanos = 1 << 40;
        const NEW: Nanos = 1 << 20;
        const FIRST: Nanos = 1 << 10;
        model("recurring::reschedule_vs_run", || {
            let (pool, _) = bare_pool(1, Default::default());
            let shared = Arc::new(Shared {
                log: UnsafeCell::new(Log::default()),
                cancelled: AtomicBool::new(false),
            });
            let s = Arc::clone(&shared);
            let cell = StdArc::new(RecurringTask::new(
                Repeat(move || {
                    // SAFETY: the task protocol orders the runs.
                    s.log.with_mut(|log| unsafe { (*log).runs += 1 });
                }),
                Every {
                    first: 0,
                    period: OLD,
                },
                true,
                (),
            ));
            assert_eq!(
                RecurringTask::first(&cell, &*pool).map(|p| p.deadline),
                Some(0)
            );
            let first = Job::task(StdArc::clone(&cell));
            let w1 = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    first.run(&*pool);
                })
            };
            let new = |ctx: &TriggerContext<'_>| {
                let at = ctx.last_due_nanos().map_or(FIRST, |due| due + NEW);
                Some(Next::At(ctx.instant_at(at)))
            };
            assert!(RecurringTask::reschedule(&cell, Box::new(new), &*pool));
            w1.join().unwrap();
            // SAFETY: every run has ended (the thread was joined).
            let runs = shared.log.with_mut(|log| unsafe { (*log).runs });
            let deadline = TimerEntry::deadline(&*cell);
            match runs {
                0 => assert_eq!(deadline, FIRST, "placed by the new trigger"),
                1 => assert_eq!(deadline, NEW, "the run took the new trigger"),
                n => panic!("{n} runs"),
            }
            let dead = pool.timer.dead_count();
            let jobs = pool.timer.drain(&*pool);
            assert!(
                dead + 1 >= jobs.len() as u64,
                "the stale entries are counted"
            );
            for job in jobs {
                job.run(&*pool);
            }
            // SAFETY: as above.
            let after = shared.log.with_mut(|log| unsafe { (*log).runs });
            assert_eq!(after, runs + 1, "exactly one entry ran the task");
        });
    }
}

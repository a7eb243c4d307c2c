//! Placing a recurring task: after a run, after a reschedule, after a
//! step of the wall clock.
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

use super::*;
use crate::task::delayed::erase;

impl<B, G, L> RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    /// The monotonic deadline at which the wall clock reads `at`, as it
    /// runs now (at once if it already does; never if beyond the clock's
    /// range), and the clocks' offset it was computed with.
    pub(super) fn deadline_of_wall(ctx: &dyn TaskContext, at: SystemTime) -> Placed {
        let (now, wall_now) = ctx.clock().now_and_wall();
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
    pub(super) fn install_replacement(&self, ctx: &dyn TaskContext) {
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
    pub(super) fn place(
        this: &CellArc<Self>,
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
                Source::Trigger => match Self::next_deadline(this, ctx) {
                    Ok(Some(placed)) => wall_offset = placed.wall_offset,
                    Ok(None) => {
                        this.end(ctx, Ok(Ended::ByTrigger));
                        return dead_entry();
                    }
                    Err(payload) => {
                        this.end_panicked(ctx, payload);
                        return dead_entry();
                    }
                },
                Source::Wall => {
                    // SAFETY: the caller holds RUNNING.
                    if let Some(at) = unsafe { this.with_owned(|owned| owned.wall_due) } {
                        let placed = Self::deadline_of_wall(ctx, at);
                        this.deadline.store(placed.deadline, Ordering::Relaxed);
                        wall_offset = placed.wall_offset;
                    }
                }
            }
            let current = this.header.placement();
            let placement = if in_timer {
                match (current + 1) & PLACEMENTS {
                    0 => 1,
                    next => next,
                }
            } else {
                current
            };
            let entry = if placement == 0 {
                erase(CellArc::clone(this))
            } else {
                erase(CellArc::new(Placement {
                    task: CellArc::clone(this),
                    placement,
                }))
            };
            let mut reset = None;
            let rearmed = ctx.rearm(entry, this.periodic, &mut || {
                let outcome = this.header.try_reset(placement);
                reset = Some(outcome);
                outcome == Reset::Done
            });
            if rearmed {
                if let Some(offset) = wall_offset {
                    // Placed and visible: was the wall clock stepped since
                    // the deadline was computed (`timer/driver/wall.rs`)?
                    ctx.wall_placed(erase_wall(CellArc::clone(this)), offset);
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
                    this.stop(ctx);
                    return dead_entry();
                }
            }
        }
    }

    /// Hands `trigger` to the task: it decides the next run from now on
    /// (module doc). False if the task has ended or is ending.
    pub(crate) fn reschedule(
        this: &CellArc<Self>,
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
                Self::place(this, ctx, Source::Trigger, true, false);
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
    pub(super) fn wall_check(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        if this.header.is_final() || this.header.leave_scheduled(RUNNING).is_none() {
            // Ended, or running (the run places it again itself).
            return RunOutcome::Skipped;
        }
        // Its wall time is the owner's to read: placed again, at the
        // deadline that wall time stands for now (a fresh entry even if
        // that did not move: the claim cannot be handed back, see the
        // module doc).
        Self::place(this, ctx, Source::Wall, true, false);
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
    pub(super) fn monotonic(deadline: Nanos) -> Self {
        Placed {
            deadline,
            wall_offset: None,
        }
    }
}

impl<B, G, L> WallTask for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    unsafe fn check_job(&self, this: &mut Option<CellArc<dyn WallTask>>) -> Job {
        let this = this.take().expect("the caller's reference");
        // SAFETY: it is a reference to `self` (caller).
        Job::task(CellArc::new(WallCheck(unsafe {
            CellArc::downcast_unchecked::<Self>(this)
        })))
    }
}

/// What a task that can be rescheduled offers its handle.
pub(crate) trait Reschedulable: Send + Sync {
    /// See [`RecurringTask::reschedule`]; `this` holds the caller's
    /// reference (as for `Delayed::job`; call it through [`reschedule`]).
    ///
    /// # Safety
    ///
    /// `this` holds a reference to `self`.
    unsafe fn reschedule(
        &self,
        this: &mut Option<CellArc<dyn Reschedulable>>,
        trigger: Box<dyn Trigger>,
        ctx: &dyn TaskContext,
    ) -> bool;
}

/// Hands `trigger` to `task` ([`Reschedulable::reschedule`]).
pub(crate) fn reschedule(
    task: CellArc<dyn Reschedulable>,
    trigger: Box<dyn Trigger>,
    ctx: &dyn TaskContext,
) -> bool {
    // SAFETY: the slot holds a reference to the task it is called on.
    CellArc::lend(task, |task, this| unsafe {
        task.reschedule(this, trigger, ctx)
    })
}

/// `cell`, as a handle that reschedules it holds it.
pub(crate) fn reschedulable<C: Reschedulable + 'static>(
    cell: CellArc<C>,
) -> CellArc<dyn Reschedulable> {
    // SAFETY: the closure is the unsizing coercion.
    unsafe { CellArc::unsize(cell, |cell| cell as _) }
}

impl<B, G, L> Reschedulable for RecurringTask<B, G, L>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    unsafe fn reschedule(
        &self,
        this: &mut Option<CellArc<dyn Reschedulable>>,
        trigger: Box<dyn Trigger>,
        ctx: &dyn TaskContext,
    ) -> bool {
        let held = this.take().expect("the caller's reference");
        // SAFETY: it is a reference to `self` (caller).
        let task = unsafe { CellArc::downcast_unchecked::<Self>(held) };
        let rescheduled = Self::reschedule(&task, trigger, ctx);
        // Back in the slot: dropped by the caller, after this returned.
        *this = Some(reschedulable(task));
        rescheduled
    }
}

/// The timer entry of a task placed again (module doc): its placement
/// generation, beside the task.
struct Placement<C> {
    task: CellArc<C>,
    placement: usize,
}

impl<B, G, L> Runnable for Placement<RecurringTask<B, G, L>>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn run(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        RecurringTask::run_at(&this.task, this.placement, ctx)
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        self.task.abandon_at(self.placement, ctx);
    }

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        Some((&self.task.header, self.task.label.name()))
    }

    fn is_users(&self) -> bool {
        self.task.header.placement() == self.placement
    }
}

impl<B, G, L> Delayed for Placement<RecurringTask<B, G, L>>
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

    unsafe fn job(&self, this: &mut Option<CellArc<dyn Delayed>>) -> Job {
        // SAFETY: `this` holds a reference to `self` (caller).
        unsafe { crate::task::delayed::task_job::<Self>(this) }
    }
}

/// The job that checks a wall-time task after a step of the wall clock
/// (`RecurringTask::wall_check`). It is not a timer entry: given up
/// unrun, it changes nothing.
struct WallCheck<C>(CellArc<C>);

impl<B, G, L> Runnable for WallCheck<RecurringTask<B, G, L>>
where
    B: Body,
    G: Trigger,
    L: Label,
{
    fn run(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        RecurringTask::wall_check(&this.0, ctx)
    }

    fn abandon(&self, _: &dyn TaskContext) {}

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        None
    }
}

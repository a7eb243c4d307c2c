//! What the timer sees of a task: [`Delayed`], what it holds for one
//! scheduled to run later (the JDK's `Delayed`: it knows when it is due),
//! and [`WallTask`], what it watches for one due at a wall time. Defined
//! here, in the task layer, because the task cells implement them and the
//! timer, a layer up, only holds them.

use crate::sync::CellArc;
use crate::time::Nanos;

use super::context::TaskContext;
use super::job::Job;

/// What the timer holds for a scheduled task.
pub(crate) trait Delayed: Send + Sync + 'static {
    /// When it is due.
    fn deadline(&self) -> Nanos;
    /// True if it was cancelled (or otherwise finished): not worth keeping.
    fn is_final(&self) -> bool;
    /// True for a periodic task.
    fn is_periodic(&self) -> bool {
        false
    }
    /// The job that runs it, made of the caller's reference to this entry
    /// in `this` (moved out of it, never dropped: [`CellArc::lend`]; call
    /// it through [`into_job`]).
    ///
    /// # Safety
    ///
    /// `this` holds a reference to `self`.
    unsafe fn job(&self, this: &mut Option<CellArc<dyn Delayed>>) -> Job;
    /// True if the sweep that removes it removes a task cancelled through
    /// its handle (counted once: not a stale placement, not an alarm).
    fn is_cancelled_task(&self) -> bool {
        false
    }
    /// False for what is no task (a timer future's alarm): it is not
    /// handed to the workers when due but [expired](Self::expire) by the
    /// timer, outside its lock, and `shutdown_now` does not return it.
    fn is_task(&self) -> bool {
        true
    }
    /// Falls due: the job to hand to the workers, or `None` if falling due
    /// was all it needed (done here, through `ctx`). `this` as for
    /// [`job`](Self::job) (call it through [`expire`]).
    ///
    /// # Safety
    ///
    /// `this` holds a reference to `self`.
    unsafe fn expire(
        &self,
        this: &mut Option<CellArc<dyn Delayed>>,
        _ctx: &dyn TaskContext,
    ) -> Option<Job> {
        // SAFETY: `this` holds a reference to `self` (caller).
        Some(unsafe { self.job(this) })
    }
}

/// The job that runs `entry` ([`Delayed::job`]).
pub(crate) fn into_job(entry: CellArc<dyn Delayed>) -> Job {
    // SAFETY: the slot holds a reference to the entry it is called on.
    CellArc::lend(entry, |entry, this| unsafe { entry.job(this) })
}

/// The body of [`Delayed::job`] for a cell of type `C` that runs as
/// a task of its own ([`Job::task`]).
///
/// # Safety
///
/// `this` holds a reference to a `C`.
pub(crate) unsafe fn task_job<C: super::job::Runnable>(
    this: &mut Option<CellArc<dyn Delayed>>,
) -> Job {
    let this = this.take().expect("the caller's reference");
    // SAFETY: it is a `C` (caller).
    Job::task(unsafe { CellArc::downcast_unchecked::<C>(this) })
}

/// `entry` falls due ([`Delayed::expire`]).
pub(crate) fn expire(entry: CellArc<dyn Delayed>, ctx: &dyn TaskContext) -> Option<Job> {
    // SAFETY: the slot holds a reference to the entry it is called on.
    CellArc::lend(entry, |entry, this| unsafe { entry.expire(this, ctx) })
}

/// `cell`, as the timer holds it.
pub(crate) fn erase<C: Delayed>(cell: CellArc<C>) -> CellArc<dyn Delayed> {
    // SAFETY: the closure is the unsizing coercion.
    unsafe { CellArc::unsize(cell, |cell| cell as _) }
}

/// A task due at a wall time, as the timer's watch of the wall clock
/// sees it (`timer::driver::wall`).
pub(crate) trait WallTask: Send + Sync + 'static {
    /// The job that places the task again if the wall clock moved under
    /// its deadline, made of the caller's reference in `this` (as for
    /// [`Delayed::job`]; call it through [`check_job`]).
    ///
    /// # Safety
    ///
    /// `this` holds a reference to `self`.
    unsafe fn check_job(&self, this: &mut Option<CellArc<dyn WallTask>>) -> Job;
}

/// `cell`, as the wall clock's watch holds it.
pub(crate) fn erase_wall<C: WallTask>(cell: CellArc<C>) -> CellArc<dyn WallTask> {
    // SAFETY: the closure is the unsizing coercion.
    unsafe { CellArc::unsize(cell, |cell| cell as _) }
}

/// The job that checks `task`'s placement ([`WallTask::check_job`]).
pub(crate) fn check_job(task: CellArc<dyn WallTask>) -> Job {
    // SAFETY: the slot holds a reference to the task it is called on.
    CellArc::lend(task, |task, this| unsafe { task.check_job(this) })
}

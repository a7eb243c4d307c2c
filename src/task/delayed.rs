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
    /// The job that runs it, made of `this`, the caller's reference to
    /// this entry (call it through [`into_job`]).
    ///
    /// # Safety
    ///
    /// `this` holds `self`.
    unsafe fn job(&self, this: CellArc<dyn Delayed>) -> Job;
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
    /// was all it needed (done here, through `ctx`). `this` is the caller's
    /// reference to this entry (call it through [`expire`]).
    ///
    /// # Safety
    ///
    /// `this` holds `self`.
    unsafe fn expire(&self, this: CellArc<dyn Delayed>, _ctx: &dyn TaskContext) -> Option<Job> {
        // SAFETY: `this` holds `self` (caller).
        Some(unsafe { self.job(this) })
    }
}

/// The job that runs `entry` ([`Delayed::job`]).
pub(crate) fn into_job(entry: CellArc<dyn Delayed>) -> Job {
    let object: *const dyn Delayed = &*entry;
    // SAFETY: `object` is `entry`'s value, which `entry`, moved into the
    // call, keeps alive for as long as the call uses it.
    unsafe { (*object).job(entry) }
}

/// The body of [`Delayed::job`] for a cell of type `C` that runs as
/// a task of its own ([`Job::task`]).
///
/// # Safety
///
/// `this` holds a `C`.
pub(crate) unsafe fn task_job<C: super::job::Runnable>(this: CellArc<dyn Delayed>) -> Job {
    // SAFETY: `this` holds a `C` (caller).
    Job::task(unsafe { CellArc::downcast_unchecked::<C>(this) })
}

/// `entry` falls due ([`Delayed::expire`]).
pub(crate) fn expire(entry: CellArc<dyn Delayed>, ctx: &dyn TaskContext) -> Option<Job> {
    let object: *const dyn Delayed = &*entry;
    // SAFETY: as in `into_job`.
    unsafe { (*object).expire(entry, ctx) }
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
    /// its deadline, made of `this`, the caller's reference to this task
    /// (call it through [`check_job`]).
    ///
    /// # Safety
    ///
    /// `this` holds `self`.
    unsafe fn check_job(&self, this: CellArc<dyn WallTask>) -> Job;
}

/// `cell`, as the wall clock's watch holds it.
pub(crate) fn erase_wall<C: WallTask>(cell: CellArc<C>) -> CellArc<dyn WallTask> {
    // SAFETY: the closure is the unsizing coercion.
    unsafe { CellArc::unsize(cell, |cell| cell as _) }
}

/// The job that checks `task`'s placement ([`WallTask::check_job`]).
pub(crate) fn check_job(task: CellArc<dyn WallTask>) -> Job {
    let object: *const dyn WallTask = &*task;
    // SAFETY: as in `into_job`.
    unsafe { (*object).check_job(task) }
}

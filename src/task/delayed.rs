//! What the timer sees of a task: [`Delayed`], what it holds for one
//! scheduled to run later (the JDK's `Delayed`: it knows when it is due),
//! and [`WallTask`], what it watches for one due at a wall time. Defined
//! here, in the task layer, because the task cells implement them and the
//! timer, a layer up, only holds them.

use crate::sync::StdArc;
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
    /// The job that runs it.
    fn into_job(self: StdArc<Self>) -> Job;
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
    /// was all it needed (done here, through `ctx`).
    fn expire(self: StdArc<Self>, _ctx: &dyn TaskContext) -> Option<Job> {
        Some(self.into_job())
    }
}

/// A task due at a wall time, as the timer's watch of the wall clock
/// sees it (`timer::driver::wall`).
pub(crate) trait WallTask: Send + Sync + 'static {
    /// The job that places the task again if the wall clock moved under
    /// its deadline.
    fn check_job(self: StdArc<Self>) -> Job;
}

//! [`TimerEntry`]: what the timer holds for a task scheduled to run later;
//! [`WallTask`]: what it watches for a task due at a wall time.

use crate::sync::StdArc;
use crate::time::Nanos;

use super::job::Job;

/// What the timer holds for a scheduled task.
pub(crate) trait TimerEntry: Send + Sync + 'static {
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
}

/// A task due at a wall time, as the timer's watch of the wall clock
/// sees it (`timer::driver::wall`).
pub(crate) trait WallTask: Send + Sync + 'static {
    /// The job that places the task again if the wall clock moved under
    /// its deadline.
    fn check_job(self: StdArc<Self>) -> Job;
}

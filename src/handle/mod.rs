//! The handles a submission returns: [`TaskHandle`] (a task that runs now),
//! [`ScheduledHandle`] (one that runs later), [`PeriodicHandle`] (one that
//! runs periodically), [`TriggerHandle`] (one that runs on a trigger), and
//! [`CancelHandle`] (cancel any of them from elsewhere). Each holds its task's cell and the pool, which its cancel
//! and its drops report panics of user code to.

mod cancel;
mod join_timeout;
mod periodic;
mod scheduled;
mod task;
mod trigger;

pub use cancel::CancelHandle;
pub use join_timeout::JoinTimeoutError;
pub use periodic::PeriodicHandle;
pub use scheduled::ScheduledHandle;
pub use task::TaskHandle;
pub use trigger::TriggerHandle;

//! [`PeriodicHandle`]: the handle of a task that runs periodically.

use std::time::{Duration, Instant};

use super::JoinTimeoutError;
use crate::pool::Pool;
use crate::sync::{Arc, CellArc};
use crate::task::{Joinable, Reschedulable, TaskError};
use crate::trigger::{Ended, Trigger};

use super::TriggerHandle;

/// The handle of a periodic task (from
/// [`schedule_at_fixed_rate`](crate::ScheduledExecutor::schedule_at_fixed_rate)
/// or [`schedule_with_fixed_delay`](crate::ScheduledExecutor::schedule_with_fixed_delay)):
/// cancel it, look at it, see when it runs next, or wait for it to end.
///
/// A periodic task runs until it is cancelled, one of its runs panics, or
/// the executor shuts down; it never ends with a value, so
/// [`join`](PeriodicHandle::join) (and `.await`) returns why it ended:
/// `Err(TaskError::Cancelled)` or `Err(TaskError::Panicked(_))` (or
/// `Ok(())` if it was [rescheduled](PeriodicHandle::reschedule) to a
/// trigger that ended it).
///
/// Dropping the handle detaches the task: it goes on running until the
/// executor shuts down. Keep the handle (or a [`CancelHandle`](crate::CancelHandle)) to stop it.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let flush = pool.schedule_with_fixed_delay(|| { /* flush */ }, Duration::from_secs(5), Duration::from_secs(5))?;
/// assert!(flush.delay() <= Duration::from_secs(5));
/// assert!(flush.cancel());
/// assert!(flush.join().unwrap_err().is_cancelled());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping a PeriodicHandle detaches its task: it runs until the executor shuts down"]
pub struct PeriodicHandle {
    handle: TriggerHandle<()>,
}

impl PeriodicHandle {
    pub(crate) fn new<C>(cell: CellArc<C>, pool: Arc<Pool>) -> Self
    where
        C: Joinable<Ended<()>> + Reschedulable + 'static,
    {
        PeriodicHandle {
            handle: TriggerHandle::new(cell, pool),
        }
    }

    /// Waits until the task ends and returns why: cancelled, or a run
    /// panicked. Called on a worker, the wait runs queued work meanwhile
    /// (as [`TaskHandle::join`](crate::TaskHandle::join)).
    ///
    /// # Panics
    ///
    /// If the handle was already polled to completion as a `Future`.
    pub fn join(self) -> Result<(), TaskError> {
        self.handle.join().map(drop)
    }

    /// Like [`join`](Self::join), but gives up after `timeout`, handing the
    /// handle back in [`JoinTimeoutError::TimedOut`].
    ///
    /// # Panics
    ///
    /// If the handle was already polled to completion as a `Future`.
    pub fn join_timeout(self, timeout: Duration) -> Result<(), JoinTimeoutError<Self>> {
        self.handle
            .join_timeout(timeout)
            .map(drop)
            .map_err(|e| e.map_handle(|handle| PeriodicHandle { handle }))
    }

    /// Stops the task: no run starts after this returns true, except that
    /// a run in progress finishes (it is not interrupted). Returns true iff
    /// this call stopped it (false if it had already ended). The closure is
    /// dropped once no run uses it any more: at once between runs, after
    /// the run otherwise; a panic of its destructor goes to the executor's
    /// [`on_panic`](crate::Builder::on_panic) hook.
    pub fn cancel(&self) -> bool {
        self.handle.cancel()
    }

    /// Changes the task's schedule from the next run on: a new period
    /// ([`FixedRate`](crate::trigger::FixedRate),
    /// [`FixedDelay`](crate::trigger::FixedDelay)) or any trigger (see
    /// [`TriggerHandle::reschedule`]). False if the task has ended.
    ///
    /// ```
    /// use chronopool::trigger::FixedRate;
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let renew = pool.schedule_at_fixed_rate(|| {}, Duration::from_secs(60), Duration::from_secs(60))?;
    /// // The lease got shorter: renew every 10 s from now on.
    /// assert!(renew.reschedule(FixedRate::new(Duration::from_secs(10)).initial_delay(Duration::from_secs(10))));
    /// assert!(renew.delay() <= Duration::from_secs(10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reschedule(&self, trigger: impl Trigger) -> bool {
        self.handle.reschedule(trigger)
    }

    /// True once the task has ended (cancelled, or a run panicked).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// True if the task was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.handle.is_cancelled()
    }

    /// The time left until the next run is due (zero while a run is due
    /// or running, and once the task has ended).
    pub fn delay(&self) -> Duration {
        self.handle.delay()
    }

    /// When the next run is due (while a run is in progress: the run after
    /// it, once that run has computed it; after the task ended: the last
    /// deadline it had).
    pub fn deadline(&self) -> Instant {
        self.handle.deadline()
    }
}

built_on_inner_handle!(PeriodicHandle, output = Result<(), TaskError>, ready = |ended| ended.map(drop));

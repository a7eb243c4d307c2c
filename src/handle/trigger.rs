//! [`TriggerHandle`]: the handle of a task scheduled with a trigger.

use std::time::{Duration, Instant};

use super::JoinTimeoutError;
use crate::pool::Pool;
use crate::sync::{Arc, CellArc};
use crate::task::recurring::{reschedulable, reschedule};
use crate::task::{Joinable, Reschedulable, TaskError};
use crate::trigger::{Ended, Trigger};

use super::TaskHandle;

/// The handle of a task scheduled with
/// [`schedule_with_trigger`](crate::ScheduledExecutor::schedule_with_trigger):
/// wait for it to end and learn how, cancel it, change its schedule, or
/// `.await` it.
///
/// The task ends when a run returns `ControlFlow::Break(value)`
/// ([`Ended::ByClosure`]), when its trigger has no next run
/// ([`Ended::ByTrigger`]), when it is cancelled
/// ([`TaskError::Cancelled`]), or when a run or the trigger panics
/// ([`TaskError::Panicked`]). Dropping the handle detaches the task.
///
/// ```
/// use chronopool::trigger::{Ended, FixedDelay};
/// use chronopool::ScheduledExecutor;
/// use std::ops::ControlFlow;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let mut polls = 0;
/// let ready = pool.schedule_with_trigger(
///     move || {
///         polls += 1;
///         if polls == 3 { ControlFlow::Break(polls) } else { ControlFlow::Continue(()) }
///     },
///     FixedDelay::new(Duration::from_millis(1)),
/// )?;
/// assert_eq!(ready.join()?, Ended::ByClosure(3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping a TriggerHandle detaches its task: it runs until it ends or the executor shuts down"]
pub struct TriggerHandle<T> {
    /// Dropped first (fields drop in order): the handle's own reference is
    /// then the last of the two, and its drop reports a panic of the
    /// output's destructor (`TaskHandle`'s `Drop`).
    task: CellArc<dyn Reschedulable>,
    handle: TaskHandle<Ended<T>>,
}

impl<T> TriggerHandle<T> {
    pub(crate) fn new<C>(cell: CellArc<C>, pool: Arc<Pool>) -> Self
    where
        C: Joinable<Ended<T>> + Reschedulable + 'static,
    {
        TriggerHandle {
            task: reschedulable(cell.clone()),
            handle: TaskHandle::new(cell, pool),
        }
    }

    /// Waits until the task ends and returns how (see the type's doc).
    /// Called on a worker, the wait runs queued work meanwhile (as
    /// [`TaskHandle::join`]).
    ///
    /// # Panics
    ///
    /// If the handle was already polled to completion as a `Future`.
    pub fn join(self) -> Result<Ended<T>, TaskError> {
        self.handle.join()
    }

    /// Like [`join`](Self::join), but gives up after `timeout`, handing the
    /// handle back in [`JoinTimeoutError::TimedOut`].
    ///
    /// # Panics
    ///
    /// If the handle was already polled to completion as a `Future`.
    pub fn join_timeout(self, timeout: Duration) -> Result<Ended<T>, JoinTimeoutError<Self>> {
        let task = self.task;
        self.handle
            .join_timeout(timeout)
            .map_err(|e| e.map_handle(|handle| TriggerHandle { handle, task }))
    }

    /// Stops the task: no run starts after this returns true, except that
    /// a run in progress finishes. Returns true iff this call stopped it.
    /// The closure and the trigger are dropped once no run uses them; a
    /// panic of their destructors goes to the
    /// [`on_panic`](crate::Builder::on_panic) hook.
    pub fn cancel(&self) -> bool {
        self.handle.cancel()
    }

    /// Hands the task a new trigger, which decides its runs from the next
    /// one on: a task waiting for its next run is placed again at once, at
    /// the time the new trigger gives (which sees the history of the runs
    /// so far); a run in progress finishes, then asks the new trigger. No
    /// run is lost or doubled, whatever the timing. Returns false if the
    /// task has ended (or is ending: a cancel came), and drops the trigger.
    ///
    /// ```
    /// use chronopool::trigger::FixedRate;
    /// use chronopool::{ManualClock, ScheduledExecutor};
    /// use std::ops::ControlFlow;
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let pool = ScheduledExecutor::builder().clock(clock.clone()).build()?;
    /// let lease = pool.schedule_with_trigger(
    ///     || ControlFlow::<()>::Continue(()),
    ///     FixedRate::new(Duration::from_secs(3600)),
    /// )?;
    /// assert!(lease.reschedule(FixedRate::new(Duration::from_secs(60))));
    /// assert!(lease.delay() <= Duration::from_secs(60));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reschedule(&self, trigger: impl Trigger) -> bool {
        reschedule(
            CellArc::clone(&self.task),
            Box::new(trigger),
            self.handle.context(),
        )
    }

    /// True once the task has ended.
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

    /// When the next run is due, on the monotonic clock (for a run due at a
    /// wall time: where that wall time stood when the run was placed).
    pub fn deadline(&self) -> Instant {
        self.handle.deadline_instant()
    }
}

built_on_inner_handle!(TriggerHandle<T>, output = Result<Ended<T>, TaskError>, ready = |ready| ready);

//! [`ScheduledHandle`]: the handle of a one-shot task that runs later.

use std::time::{Duration, Instant};

use super::JoinTimeoutError;
use crate::pool::Pool;
use crate::sync::{Arc, CellArc};
use crate::task::recurring::{Body, OnceView, OneShot, RecurringTask};
use crate::task::{Delayed, Joinable, Label, TaskError};
use crate::trigger::Trigger;

use super::TaskHandle;

/// The handle of a one-shot task scheduled to run later: everything a
/// [`TaskHandle`] has (join, join with a time-out, cancel, state, `.await`),
/// plus [`delay`](ScheduledHandle::delay), the time left until it runs, and
/// [`deadline`](ScheduledHandle::deadline), when.
///
/// Dropping it detaches the task: it still runs when due.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let later = pool.schedule(|| "ran", Duration::from_millis(20))?;
/// assert!(later.delay() <= Duration::from_millis(20));
/// assert_eq!(later.join()?, "ran");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping a ScheduledHandle detaches its task: it still runs when due, and its result is dropped"]
pub struct ScheduledHandle<T> {
    handle: TaskHandle<T>,
}

impl<T> ScheduledHandle<T> {
    pub(crate) fn new<C>(cell: CellArc<C>, pool: Arc<Pool>) -> Self
    where
        C: Joinable<T> + Delayed,
    {
        ScheduledHandle {
            handle: TaskHandle::new(cell, pool),
        }
    }

    /// The handle of a one-shot task at a wall time.
    pub(crate) fn once<F, G, L>(
        cell: CellArc<RecurringTask<OneShot<F>, G, L>>,
        pool: Arc<Pool>,
    ) -> Self
    where
        F: FnOnce() -> T + Send + 'static,
        G: Trigger,
        T: Send + 'static,
        L: Label,
        OneShot<F>: Body<Output = T>,
    {
        ScheduledHandle {
            handle: TaskHandle::new(CellArc::new(OnceView(cell)), pool),
        }
    }

    /// Waits for the task and returns its value, or why there is none (as
    /// [`TaskHandle::join`], including running queued work meanwhile when
    /// called on a worker).
    ///
    /// # Panics
    ///
    /// If the handle was already polled to completion as a `Future`.
    pub fn join(self) -> Result<T, TaskError> {
        self.handle.join()
    }

    /// Like [`join`](Self::join), but gives up after `timeout`, handing the
    /// handle back in [`JoinTimeoutError::TimedOut`].
    ///
    /// # Panics
    ///
    /// If the handle was already polled to completion as a `Future`.
    pub fn join_timeout(self, timeout: Duration) -> Result<T, JoinTimeoutError<Self>> {
        self.handle
            .join_timeout(timeout)
            .map_err(|e| e.map_handle(|handle| ScheduledHandle { handle }))
    }

    /// Cancels the task if it has not started: returns true iff this call
    /// stopped it from running. Its closure is dropped right away; its
    /// entry in the delayed work queue is swept out once cancelled entries
    /// are half of those the queue holds, or at once after `shutdown` (it
    /// never waits for its deadline), and until then it still counts
    /// towards [`Metrics::scheduled_tasks`](crate::Metrics::scheduled_tasks).
    ///
    /// If dropping the closure panics, the panic goes to the executor's
    /// [`on_panic`](crate::Builder::on_panic) hook; it does not unwind from
    /// here, and the task is cancelled all the same.
    pub fn cancel(&self) -> bool {
        self.handle.cancel()
    }

    /// True once the task returned, panicked or was cancelled.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// True if the task was cancelled before it ran.
    pub fn is_cancelled(&self) -> bool {
        self.handle.is_cancelled()
    }

    /// The time left until the task is due (zero once due, running or
    /// finished).
    pub fn delay(&self) -> Duration {
        self.handle.delay()
    }

    /// When the task is due (or was: it stays the same after the run).
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::{Duration, Instant};
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let before = Instant::now();
    /// let later = pool.schedule(|| (), Duration::from_secs(60))?;
    /// assert!(later.deadline() >= before + Duration::from_secs(60));
    /// later.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn deadline(&self) -> Instant {
        self.handle.deadline_instant()
    }
}

built_on_inner_handle!(ScheduledHandle<T>, output = Result<T, TaskError>, ready = |ready| ready);

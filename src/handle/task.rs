//! [`TaskHandle`]: join, join with a time-out, cancel, state, and `.await`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::JoinTimeoutError;
use crate::pool::{worker, Pool};
use crate::sync::{Arc, CellArc};
use crate::task::state::{cancellable_of, joinable};
use crate::task::{Joinable, TaskContext, TaskError, TaskId};
use crate::time::Nanos;

use super::CancelHandle;

/// The handle of a submitted task: wait for its result, cancel it, look at
/// its state, or `.await` it.
///
/// Dropping a handle *detaches* the task: it still runs, its result is
/// dropped, and a panic of it still reaches the executor's `on_panic` hook.
/// A panic of the result's destructor goes to that hook too, whichever
/// thread drops it last (the worker, or the thread dropping the handle).
///
/// ```
/// use chronopool::ScheduledExecutor;
///
/// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
/// let handle = pool.submit(|| "hello".len())?;
/// assert_eq!(handle.join()?, 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # As a `Future`
///
/// `TaskHandle<T>` is a `Future<Output = Result<T, TaskError>>` that works
/// with any async runtime (it registers the runtime's waker and is woken
/// when the task finishes):
///
/// ```
/// # use chronopool::ScheduledExecutor;
/// # let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let handle = pool.submit(|| 6 * 7)?;
/// let answer = async { handle.await };
/// # let _ = answer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping a TaskHandle detaches its task: it still runs, and its result is dropped"]
pub struct TaskHandle<T> {
    /// The cell; `None` only once the handle is dropped. (Whether it
    /// returned its result as a `Future` is a flag in the cell's header:
    /// a handle is two words and a pointer, not a byte more.)
    task: Option<CellArc<dyn Joinable<T>>>,
    /// Where the panics of the task's user code go (its closure dropped by
    /// `cancel`, its output dropped with the handle, a waker), and the
    /// timer a scheduled task's cancel is counted with.
    pool: Arc<Pool>,
}

impl<T> TaskHandle<T> {
    pub(crate) fn new<C: Joinable<T> + 'static>(cell: CellArc<C>, pool: Arc<Pool>) -> Self {
        TaskHandle {
            task: Some(joinable(cell)),
            pool,
        }
    }

    /// The task's context: the pool, as the task layer sees it.
    pub(crate) fn context(&self) -> &dyn TaskContext {
        &*self.pool
    }

    /// When the task is (next) due, for a scheduled task that has not
    /// handed over its result.
    pub(crate) fn deadline(&self) -> Option<Nanos> {
        self.cell().deadline()
    }

    /// The time left until a scheduled task is (next) due: zero once it is
    /// due, running or finished.
    pub(crate) fn delay(&self) -> Duration {
        if self.is_finished() {
            return Duration::ZERO;
        }
        match self.deadline() {
            Some(deadline) => self.pool.timer.clock.until(deadline),
            None => Duration::ZERO,
        }
    }

    /// When a scheduled task is (next) due, as an `Instant`.
    pub(crate) fn deadline_instant(&self) -> Instant {
        let deadline = self.deadline().unwrap_or(0);
        self.pool.timer.clock.instant_of_saturating(deadline)
    }

    /// A cheap handle that can cancel the task from elsewhere (see
    /// [`CancelHandle`]); it can be cloned and sent to other threads, and
    /// outlives this handle.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let retry = pool.schedule(|| "retried", Duration::from_secs(60))?;
    /// let cancel = retry.cancel_handle();
    /// std::thread::spawn(move || assert!(cancel.cancel())).join().unwrap();
    /// assert!(retry.join().unwrap_err().is_cancelled());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel_handle(&self) -> CancelHandle
    where
        T: 'static,
    {
        CancelHandle::new(
            cancellable_of(CellArc::clone(self.cell())),
            Arc::clone(&self.pool),
        )
    }

    /// The cell, whose output is still to be taken.
    fn task(&self) -> &CellArc<dyn Joinable<T>> {
        let cell = self.cell();
        assert!(
            !cell.header().is_returned(),
            "TaskHandle used after it returned its result as a Future"
        );
        cell
    }

    /// The cell.
    fn cell(&self) -> &CellArc<dyn Joinable<T>> {
        self.task
            .as_ref()
            .expect("a handle holds its task until dropped")
    }

    /// The task's id (see [`TaskId`]).
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let first = pool.submit(|| ())?;
    /// let second = pool.submit(|| ())?;
    /// assert_ne!(first.id(), second.id());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn id(&self) -> TaskId {
        self.cell().header().id()
    }

    /// The task's name, if it was given one (see
    /// [`ScheduledExecutor::task`](crate::ScheduledExecutor::task)).
    pub fn name(&self) -> Option<&str> {
        self.cell().name().map(|name| &**name)
    }

    /// Waits for the task and returns its value, or why there is none.
    ///
    /// Called from inside a task on a worker of any chronopool executor, the
    /// wait runs other queued tasks of that worker's pool (as
    /// `ForkJoinPool::join` does), so tasks that submit and join subtasks
    /// never deadlock the pool, even on one thread.
    ///
    /// # Panics
    ///
    /// If the handle was already polled to completion as a `Future`.
    pub fn join(self) -> Result<T, TaskError> {
        worker::wait_until_final(self.task().header(), None, self.context());
        self.task().take_output()
    }

    /// Like [`join`](Self::join), but gives up after `timeout`, handing the
    /// handle back in [`JoinTimeoutError::TimedOut`].
    ///
    /// On a worker thread the wait runs queued tasks, as `join` does; a
    /// long one can make the call return later than `timeout`.
    ///
    /// ```
    /// use chronopool::{JoinTimeoutError, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let handle = pool.submit(move || rx.recv().is_ok())?;
    /// let handle = match handle.join_timeout(Duration::from_millis(10)) {
    ///     Err(JoinTimeoutError::TimedOut(handle)) => handle,
    ///     other => panic!("expected a time-out, got {other:?}"),
    /// };
    /// tx.send(()).unwrap();
    /// assert!(handle.join()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If the handle was already polled to completion as a `Future`.
    pub fn join_timeout(self, timeout: Duration) -> Result<T, JoinTimeoutError<Self>> {
        let deadline = Instant::now().checked_add(timeout);
        if !worker::wait_until_final(self.task().header(), deadline, self.context()) {
            return Err(JoinTimeoutError::TimedOut(self));
        }
        self.task().take_output().map_err(JoinTimeoutError::Failed)
    }

    /// Cancels the task if it has not started: returns true iff this call
    /// stopped it from running. Its closure is dropped right away and
    /// [`join`](Self::join) returns [`TaskError::Cancelled`]. A running
    /// task is asked to stop ([`chronopool::cancelled`](crate::cancelled)
    /// turns true in it) and runs on until it does (false: it was not
    /// stopped from starting); a finished one is not affected (false).
    ///
    /// If dropping the closure panics, the panic goes to the executor's
    /// [`on_panic`](crate::Builder::on_panic) hook; it does not unwind from
    /// here, and the task is cancelled all the same.
    pub fn cancel(&self) -> bool {
        self.cell().cancel(self.context())
    }

    /// True once the task returned, panicked or was cancelled.
    pub fn is_finished(&self) -> bool {
        self.cell().header().is_final()
    }

    /// True if the task was cancelled before it ran.
    pub fn is_cancelled(&self) -> bool {
        self.cell().header().is_cancelled()
    }
}

impl<T> Future for TaskHandle<T> {
    type Output = Result<T, TaskError>;

    /// A panic of the waker's destructor (a waker this poll replaces) goes
    /// to the executor's `on_panic` hook; a panic of its `clone` unwinds
    /// from here, and the handle can be polled again.
    ///
    /// # Panics
    ///
    /// If polled again after it returned `Poll::Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let header = self.task().header();
        if !header.is_final() {
            let registration = header.register(cx.waker());
            self.context().drop_reporting(registration.stale);
            if registration.registered {
                return Poll::Pending;
            }
        }
        let output = self.task().take_output();
        self.cell().header().set_returned();
        Poll::Ready(output)
    }
}

impl<T> Drop for TaskHandle<T> {
    /// Detaches the task; if this was the last reference to a finished
    /// task, its output is dropped here, and a panic of its destructor goes
    /// to the `on_panic` hook.
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            self.context().drop_reporting(task);
        }
    }
}

impl<T> fmt::Debug for TaskHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("finished", &self.is_finished())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

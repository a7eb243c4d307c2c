//! [`PendingTask`]: a task that [`ScheduledExecutor::shutdown_now`]
//! took out of the queues before it started.
//!
//! [`ScheduledExecutor::shutdown_now`]: crate::ScheduledExecutor::shutdown_now

use std::fmt;

use crate::pool::Pool;
use crate::sync::Arc;
use crate::task::id::TaskIdentity;
use crate::task::{Job, TaskId};

/// A task that never started, handed back by
/// [`ScheduledExecutor::shutdown_now`](crate::ScheduledExecutor::shutdown_now).
///
/// Run it on the calling thread with [`run`](PendingTask::run), or drop it:
/// a dropped task is cancelled, and its handle (if it was submitted with
/// `submit`) resolves to [`TaskError::Cancelled`](crate::TaskError::Cancelled).
/// Its closure is dropped then; a panic of the closure's destructor goes to
/// the executor's [`on_panic`](crate::Builder::on_panic) hook and does not
/// unwind into the caller.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::sync::mpsc;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// // Keep the only worker busy so that the next task stays queued.
/// let (release, blocked) = mpsc::channel::<()>();
/// let (started_tx, started) = mpsc::channel();
/// pool.execute(move || { started_tx.send(()).unwrap(); let _ = blocked.recv(); })?;
/// started.recv()?;
/// let queued = pool.submit(|| 42)?;
///
/// let never_started = pool.shutdown_now();
/// assert_eq!(never_started.len(), 1);
/// release.send(())?;
/// for task in never_started {
///     task.run(); // or drop it: `queued.join()` would then be `Err(Cancelled)`
/// }
/// assert_eq!(queued.join()?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PendingTask {
    /// `None` once it ran.
    job: Option<Job>,
    /// Its task's id and name; `None` for a closure given to `execute`.
    task: Option<TaskIdentity>,
    pool: Arc<Pool>,
}

impl PendingTask {
    pub(crate) fn new(job: Job, pool: Arc<Pool>) -> Self {
        PendingTask {
            task: job.identity(),
            job: Some(job),
            pool,
        }
    }

    /// The task's id (the id its handle shows); `None` for a closure given
    /// to [`execute`](crate::ScheduledExecutor::execute) without a name,
    /// which has none.
    pub fn id(&self) -> Option<TaskId> {
        self.task.as_ref().map(|(id, _)| *id)
    }

    /// The task's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.task.as_ref().and_then(|(_, name)| name.as_deref())
    }

    /// Runs the task on the calling thread. Its result goes to its handle;
    /// a panic is caught and reported as on a worker: to the handle and to
    /// the executor's `on_panic` hook (it does not unwind into the caller).
    pub fn run(mut self) {
        if let Some(job) = self.job.take() {
            job.run(&*self.pool);
        }
    }
}

impl Drop for PendingTask {
    /// Cancels the task (see the type's doc).
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            job.cancel(&*self.pool);
        }
    }
}

impl fmt::Debug for PendingTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingTask")
            .field("id", &self.id())
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

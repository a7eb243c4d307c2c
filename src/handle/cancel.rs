//! [`CancelHandle`]: cancel a task from anywhere, without its handle.

use std::fmt;

use crate::pool::Pool;
use crate::sync::{Arc, CellArc};
use crate::task::{Cancellable, TaskContext};

/// Cancels a task from elsewhere: a cheap, cloneable, `Send + Sync` handle
/// that only cancels and looks (tokio's `AbortHandle`), made by
/// [`TaskHandle::cancel_handle`](crate::TaskHandle::cancel_handle) and the
/// same method of the other handles. It does not detach or join the task,
/// and works whether the task's own handle is still there or not.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let beat = pool.schedule_at_fixed_rate(|| (), Duration::ZERO, Duration::from_secs(1))?;
/// let stop = beat.cancel_handle();
/// let also = stop.clone();
/// assert!(stop.cancel());
/// assert!(!also.cancel(), "a task is cancelled once");
/// assert!(beat.join().unwrap_err().is_cancelled());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CancelHandle {
    /// `None` only once it is dropped.
    task: Option<CellArc<dyn Cancellable>>,
    pool: Arc<Pool>,
}

impl CancelHandle {
    pub(crate) fn new(task: CellArc<dyn Cancellable>, pool: Arc<Pool>) -> Self {
        CancelHandle {
            task: Some(task),
            pool,
        }
    }

    /// The task's context: the pool, as the task layer sees it.
    fn context(&self) -> &dyn TaskContext {
        &*self.pool
    }

    /// Cancels the task as its own handle's `cancel` does: true iff this
    /// call stopped it from running (for a periodic task: from running
    /// again). Its closure is dropped right away; a panic of that goes to
    /// the executor's [`on_panic`](crate::Builder::on_panic) hook.
    pub fn cancel(&self) -> bool {
        self.task().cancel(self.context())
    }

    /// The task's id (see [`TaskId`](crate::TaskId)).
    pub fn id(&self) -> crate::TaskId {
        self.task().header().id()
    }

    /// The task's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.task().name().map(|name| &**name)
    }

    /// The task.
    fn task(&self) -> &CellArc<dyn Cancellable> {
        self.task
            .as_ref()
            .expect("a handle holds its task until dropped")
    }

    /// True once the task returned, panicked or was cancelled.
    pub fn is_finished(&self) -> bool {
        self.task().header().is_final()
    }

    /// True if the task was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.task().header().is_cancelled()
    }
}

impl Drop for CancelHandle {
    /// If this was the last reference to a finished task, its output is
    /// dropped here; a panic of its destructor goes to the `on_panic` hook.
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            self.context().drop_reporting(task);
        }
    }
}

impl fmt::Debug for CancelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelHandle")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("finished", &self.is_finished())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

//! Submitting from inside a task to the executor that runs it, without
//! carrying a handle to that executor: [`submit`], [`execute`] and
//! [`schedule`]; asking whether the running task should stop:
//! [`cancelled`]; and which task this is: [`task_id`], [`task_name`].
//!
//! These find the executor through the worker thread they are called on, so
//! a task tree submitted with `execute` costs no reference counting of the
//! executor per task (a handle holds a reference to it).

use std::time::Duration;

use crate::handle::{ScheduledHandle, TaskHandle};
use crate::pool::{worker, SubmitError, SubmitErrorKind};
use crate::sync::Arc;
use crate::task::{running, TaskId};
use crate::time::clock;

/// Submits `f` to the executor whose worker thread is calling, into that
/// worker's own deque, and returns a handle to its result: the in-pool
/// counterpart of [`ScheduledExecutor::submit`](crate::ScheduledExecutor::submit).
///
/// ```
/// use chronopool::ScheduledExecutor;
///
/// fn sum(values: &'static [u64]) -> u64 {
///     if values.len() <= 2 {
///         return values.iter().sum();
///     }
///     let (left, right) = values.split_at(values.len() / 2);
///     let left = chronopool::submit(move || sum(left)).expect("called on a worker");
///     sum(right) + left.join().expect("no panic")
/// }
///
/// static VALUES: [u64; 100] = { let mut v = [0; 100]; let mut i = 0; while i < 100 { v[i] = i as u64; i += 1; } v };
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// assert_eq!(pool.submit(|| sum(&VALUES))?.join()?, 4950);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`SubmitErrorKind::NotOnWorker`] if the calling thread is not a worker
/// of any executor, [`SubmitErrorKind::Shutdown`] if its executor was shut
/// down; `f` is given back either way.
pub fn submit<F, T>(f: F) -> Result<TaskHandle<T>, SubmitError<F>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    worker::with_current(|ctx| match ctx {
        Some(ctx) => ctx
            .pool
            .submit(Some(ctx), f, ())
            .map(|cell| TaskHandle::new(cell, Arc::clone(&ctx.pool))),
        None => Err(SubmitError::new(f, SubmitErrorKind::NotOnWorker)),
    })
}

/// Like [`submit`], without a handle (fire and forget): the in-pool
/// counterpart of [`ScheduledExecutor::execute`](crate::ScheduledExecutor::execute).
///
/// # Errors
///
/// As for [`submit`].
pub fn execute<F>(f: F) -> Result<(), SubmitError<F>>
where
    F: FnOnce() + Send + 'static,
{
    worker::with_current(|ctx| match ctx {
        Some(ctx) => ctx.pool.execute(Some(ctx), f),
        None => Err(SubmitError::new(f, SubmitErrorKind::NotOnWorker)),
    })
}

/// Schedules `f` to run on the executor whose worker thread is calling,
/// once `delay` has passed: the in-pool counterpart of
/// [`ScheduledExecutor::schedule`](crate::ScheduledExecutor::schedule), for
/// a task that arranges its own retry or follow-up.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let attempt = pool.submit(|| {
///     // Failed: try again in a moment, from the worker.
///     chronopool::schedule(|| "second attempt", Duration::from_millis(5)).expect("on a worker")
/// })?;
/// assert_eq!(attempt.join()?.join()?, "second attempt");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`SubmitErrorKind::NotOnWorker`] if the calling thread is not a worker
/// of any executor; otherwise as for `ScheduledExecutor::schedule`. `f` is
/// given back either way.
pub fn schedule<F, T>(f: F, delay: Duration) -> Result<ScheduledHandle<T>, SubmitError<F>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    worker::with_current(|ctx| match ctx {
        Some(ctx) => {
            let pool = &ctx.pool;
            let now = pool.timer.clock.now();
            pool.schedule(f, now, now.saturating_add(clock::nanos(delay)), ())
                .map(|cell| ScheduledHandle::new(cell, Arc::clone(pool)))
        }
        None => Err(SubmitError::new(f, SubmitErrorKind::NotOnWorker)),
    })
}

/// True if the task running on this thread was asked to stop: its
/// time-out came ([`submit_with_timeout`](crate::ScheduledExecutor::submit_with_timeout)),
/// it was cancelled while running (a `cancel()` that came too late to stop
/// it from starting, which still returns false), or its executor was shut
/// down with [`shutdown_now`](crate::ScheduledExecutor::shutdown_now).
/// Rust has no way to interrupt a thread: a long task that checks this
/// between steps is what stops early. False outside a task.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let (started, wait) = std::sync::mpsc::channel();
/// let crunch = pool.submit(move || {
///     started.send(()).unwrap();
///     while !chronopool::cancelled() {
///         std::thread::yield_now(); // a step of work
///     }
///     "stopped when asked"
/// })?;
/// wait.recv()?;
/// assert!(!crunch.cancel(), "it had started: not stopped from starting");
/// assert_eq!(crunch.join()?, "stopped when asked");
/// assert!(!chronopool::cancelled(), "not in a task here");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn cancelled() -> bool {
    running::stop_requested() == Some(true)
        || worker::with_current(|ctx| ctx.is_some_and(|ctx| ctx.pool.lifecycle.is_stopped()))
}

/// The id of the task whose closure runs on this thread (the innermost
/// one, when a join runs another task meanwhile). `None` outside a task, and in a closure given to
/// [`execute`](crate::ScheduledExecutor::execute) without a name (it has
/// no task cell, so no id).
///
/// ```
/// use chronopool::ScheduledExecutor;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let handle = pool.submit(|| chronopool::task_id())?;
/// let id = handle.id();
/// assert_eq!(handle.join()?, Some(id));
/// assert_eq!(chronopool::task_id(), None, "not in a task here");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn task_id() -> Option<TaskId> {
    running::current().map(|(id, _)| id)
}

/// The name of the task whose code runs on this thread, if it was given
/// one (see [`ScheduledExecutor::task`](crate::ScheduledExecutor::task)
/// and [`task_id`]).
///
/// ```
/// use chronopool::ScheduledExecutor;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let greeting = pool
///     .task()
///     .name("greeter")
///     .submit(|| format!("hello from {}", chronopool::task_name().unwrap()))?;
/// assert_eq!(greeting.join()?, "hello from greeter");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn task_name() -> Option<std::sync::Arc<str>> {
    running::current().and_then(|(_, name)| name)
}

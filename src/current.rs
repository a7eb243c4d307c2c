//! Submitting from inside a task to the executor that runs it, without
//! carrying a handle to that executor: [`submit`] and [`execute`].
//!
//! These find the executor through the worker thread they are called on, so
//! a task tree costs no reference counting of the executor per task.

use crate::handle::TaskHandle;
use crate::pool::{worker, SubmitError, SubmitErrorKind};
use crate::sync::Arc;

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
            .submit(Some(ctx), f)
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

//! What the executor reports about itself: [`Metrics`] (summed from the
//! workers' counters, `pool/stats.rs`).

/// A snapshot of an executor's counters, from
/// [`ScheduledExecutor::metrics`](crate::ScheduledExecutor::metrics).
///
/// The fields are read one after another while the workers run, so they are
/// not all taken at the same instant. A worker counts a run just after it
/// finishes, so a task that was just joined may not be counted yet; after
/// termination every run is.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
/// pool.submit(|| ())?.join()?;
/// pool.shutdown();
/// assert!(pool.await_termination(Duration::from_secs(10)));
/// let m = pool.metrics();
/// assert_eq!(m.worker_threads, 2);
/// assert_eq!(m.completed_tasks, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// Worker threads the executor was built with.
    pub worker_threads: usize,
    /// Workers running a task right now.
    pub active_workers: usize,
    /// Jobs waiting in the queues (not yet started; a cancelled task stays
    /// counted here until a worker reaches it and skips it).
    pub queued_tasks: usize,
    /// Tasks scheduled to run later that the timer still holds (a
    /// cancelled one leaves it promptly, not at its deadline).
    pub scheduled_tasks: usize,
    /// Task runs on the pool's workers that finished, whether they
    /// returned or panicked (not the runs of tasks returned by
    /// `shutdown_now` that the caller runs with `PendingTask::run`).
    pub completed_tasks: u64,
    /// Task runs that panicked (counted in `completed_tasks` too).
    pub panicked_tasks: u64,
}

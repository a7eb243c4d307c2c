//! What the executor reports about itself: [`Metrics`], and the per-worker
//! counters it is summed from.

use crate::sync::{AtomicBool, AtomicU64, Ordering};

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

/// One worker's counters. Only that worker writes them (plain loads and
/// stores, no read-modify-write: nobody else writes), anyone may read.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    busy: AtomicBool,
    completed: AtomicU64,
    panicked: AtomicU64,
}

impl WorkerStats {
    /// The owner starts (true) or ends (false) a task run.
    #[inline]
    pub(crate) fn set_busy(&self, busy: bool) {
        self.busy.store(busy, Ordering::Relaxed);
    }

    /// The owner finished a run; `panicked` if it panicked.
    #[inline]
    pub(crate) fn record_run(&self, panicked: bool) {
        bump(&self.completed);
        if panicked {
            bump(&self.panicked);
        }
    }

    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed)
    }

    pub(crate) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    pub(crate) fn panicked(&self) -> u64 {
        self.panicked.load(Ordering::Relaxed)
    }
}

/// Increments a counter that only the calling thread writes.
#[inline]
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

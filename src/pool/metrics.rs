//! What the executor reports about itself: [`Metrics`] (summed from the
//! workers' counters, `pool/stats.rs`), with [`Lateness`] (merged from
//! the workers' histograms, `pool/lateness.rs`).

use std::time::Duration;

use super::{lateness, Pool};
use crate::sync::Ordering;

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
    /// cancelled one is not counted once `cancel` has returned: `metrics`
    /// sweeps the timer's cancelled entries out before it counts).
    pub scheduled_tasks: usize,
    /// Task runs on the pool's workers that finished, whether they
    /// returned or panicked (not the runs of tasks returned by
    /// `shutdown_now` that the caller runs with `PendingTask::run`).
    pub completed_tasks: u64,
    /// Task runs that panicked (counted in `completed_tasks` too).
    pub panicked_tasks: u64,
    /// Tasks cancelled through their handles before they ran (a recurring
    /// one: between runs). A task the timer held shows here as soon as
    /// `cancel` has returned (`metrics` sweeps the timer's cancelled
    /// entries out first: one pass over the tasks it holds, only when some
    /// were cancelled since the last sweep); one already handed to the
    /// workers, when a worker reaches it and skips it. Tasks a shutdown
    /// discards are not counted.
    pub cancelled_tasks: u64,
    /// Submissions refused (after shutdown, or over `max_scheduled_tasks`).
    pub rejected_tasks: u64,
    /// Tasks whose time-out came before they finished
    /// ([`submit_with_timeout`](crate::ScheduledExecutor::submit_with_timeout)).
    pub timed_out_tasks: u64,
    /// Runs of fixed-rate tasks that [`MissedRuns::Skip`](crate::MissedRuns::Skip)
    /// skipped (they were due while an earlier run was late).
    pub skipped_runs: u64,
    /// Runs of fixed-rate tasks that [`MissedRuns::Delay`](crate::MissedRuns::Delay)
    /// moved later (one per late run that shifted the schedule).
    pub delayed_runs: u64,
    /// How late the scheduled runs started (deadline to start), over the
    /// executor's life.
    pub lateness: Lateness,
}

/// How late scheduled runs started, from their deadline to the start of
/// the run on a worker: the timer's delay and the wait in the queues. From
/// a histogram of log-linear buckets (eight per power of two), so a
/// percentile reads at most an eighth above the true value. Each worker
/// times its first 1,024 scheduled runs, then one in 16 (a clock read is a
/// real part of a periodic run's cost): `runs` counts every run, the
/// percentiles and `max` come from those timed.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// pool.schedule(|| (), Duration::from_millis(5))?.join()?;
/// let late = pool.metrics().lateness;
/// assert_eq!(late.runs, 1);
/// assert!(late.p50 <= late.max);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lateness {
    /// Scheduled runs recorded (one-shot and recurring ones, on the pool's
    /// workers).
    pub runs: u64,
    /// The median.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The latest start among the runs timed.
    pub max: Duration,
}

impl Pool {
    /// A snapshot of the pool's counters, assembled here from the timer's
    /// figures, the pool's own counts and each worker's shard.
    pub(crate) fn metrics(&self) -> Metrics {
        // The cancels since the last sweep: out of the timer and counted,
        // so that a cancel shows as soon as it returned.
        self.timer.sweep_cancelled(self);
        self.give_up_stranded();
        let mut m = Metrics {
            worker_threads: self.workers(),
            queued_tasks: self.queued_jobs(),
            scheduled_tasks: self.timer.pending(),
            cancelled_tasks: self.timer.swept_cancelled(),
            rejected_tasks: self.rejected.load(Ordering::Relaxed),
            timed_out_tasks: self.timed_out.load(Ordering::Relaxed),
            skipped_runs: self.skipped_runs.load(Ordering::Relaxed),
            delayed_runs: self.delayed_runs.load(Ordering::Relaxed),
            ..Metrics::default()
        };
        let mut late = vec![0; lateness::BUCKETS];
        let (mut runs, mut max) = (0, 0);
        for stats in self.worker_stats() {
            m.active_workers += usize::from(stats.is_busy());
            m.completed_tasks += stats.completed();
            m.panicked_tasks += stats.panicked();
            m.cancelled_tasks += stats.cancelled();
            let (shard_runs, shard_max) = stats.lateness.merge_into(&mut late);
            runs += shard_runs;
            max = max.max(shard_max);
        }
        let (p50, p99, max) = lateness::summary(&late, max);
        m.lateness = Lateness {
            runs,
            p50,
            p99,
            max,
        };
        m
    }
}

//! `scheduled-thread-pool` (the pool r2d2 uses): one binary heap under one
//! mutex, workers waiting on a condvar until the head is due.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduled_thread_pool::{JobHandle, OnPoolDropBehavior, ScheduledThreadPool};

use super::{Executor, SpawnInside, Timers};

/// A scheduled thread pool, shared with the tasks that submit more.
pub struct Stp(Arc<ScheduledThreadPool>);

impl Executor for Stp {
    type Config = ();

    fn start(_: &(), threads: usize) -> Result<Self, String> {
        let pool = ScheduledThreadPool::builder()
            .num_threads(threads)
            // The default would keep the workers alive until the last
            // pending task is due (an hour in `idle`).
            .on_drop_behavior(OnPoolDropBehavior::DiscardPendingScheduled)
            .build();
        Ok(Stp(Arc::new(pool)))
    }

    fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), String> {
        // `execute` is `execute_after(0)`: a heap entry and a cancel flag.
        drop(self.0.execute(f));
        Ok(())
    }

    fn shutdown(self) -> Result<(), String> {
        // Dropping the last Arc wakes the workers, which exit without
        // running what is queued. There is no join: `Exec` waits for the
        // thread count instead.
        drop(self.0);
        Ok(())
    }
}

impl SpawnInside for Stp {
    /// No "current pool" in this crate: tasks carry the pool.
    type Ctx = Arc<ScheduledThreadPool>;

    fn ctx(&self) -> Self::Ctx {
        Arc::clone(&self.0)
    }

    fn spawn_inside<F: FnOnce() + Send + 'static>(ctx: &Self::Ctx, f: F) -> Result<(), String> {
        drop(ctx.execute(f));
        Ok(())
    }
}

impl Timers for Stp {
    type Handle = JobHandle;
    type Periodic = JobHandle;

    fn schedule<F: FnOnce() + Send + 'static>(
        &self,
        delay: Duration,
        _due: Instant,
        f: F,
    ) -> Result<JobHandle, String> {
        Ok(self.0.execute_after(delay, f))
    }

    fn cancel(h: JobHandle) {
        // Sets a flag: the entry stays in the heap until it is due.
        h.cancel();
    }

    fn schedule_at_fixed_rate<F: FnMut() + Send + 'static>(
        &self,
        initial_delay: Duration,
        _first_due: Instant,
        period: Duration,
        f: F,
    ) -> Result<JobHandle, String> {
        // The next run is due one period after the previous one was due.
        Ok(self.0.execute_at_fixed_rate(initial_delay, period, f))
    }

    fn cancel_periodic(h: JobHandle) {
        h.cancel();
    }
}

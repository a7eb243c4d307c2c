//! chronopool: work-stealing workers and a timer thread over the delayed
//! work queue chosen by the system's `TimerQueue`.

use std::time::{Duration, Instant};

use chronopool::{PeriodicHandle, ScheduledExecutor, ScheduledHandle};

use super::{Executor, SpawnInside, Timers};

/// A chronopool executor.
pub struct Chronopool(ScheduledExecutor);

impl Executor for Chronopool {
    /// The timer queue backend.
    type Config = super::QueueFn;

    fn start(queue: &Self::Config, threads: usize) -> Result<Self, String> {
        ScheduledExecutor::builder()
            .worker_threads(threads)
            .timer_queue(queue())
            .build()
            .map(Chronopool)
            .map_err(|e| e.to_string())
    }

    fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), String> {
        self.0.execute(f).map_err(|e| e.to_string())
    }

    fn shutdown(self) -> Result<(), String> {
        drop(self.0.shutdown_now());
        if self.0.await_termination(Duration::from_secs(30)) {
            Ok(())
        } else {
            Err("workers still running 30 s after shutdown".into())
        }
    }
}

impl SpawnInside for Chronopool {
    /// `chronopool::execute` finds the worker's pool itself.
    type Ctx = ();

    fn ctx(&self) {}

    fn spawn_inside<F: FnOnce() + Send + 'static>(_: &(), f: F) -> Result<(), String> {
        chronopool::execute(f).map_err(|e| e.to_string())
    }
}

impl Timers for Chronopool {
    type Handle = ScheduledHandle<()>;
    type Periodic = PeriodicHandle;

    fn schedule<F: FnOnce() + Send + 'static>(
        &self,
        delay: Duration,
        _due: Instant,
        f: F,
    ) -> Result<Self::Handle, String> {
        self.0.schedule(f, delay).map_err(|e| e.to_string())
    }

    fn cancel(h: Self::Handle) {
        h.cancel();
    }

    fn schedule_at_fixed_rate<F: FnMut() + Send + 'static>(
        &self,
        initial_delay: Duration,
        _first_due: Instant,
        period: Duration,
        f: F,
    ) -> Result<Self::Periodic, String> {
        // MissedRuns::Burst: late runs are caught up back to back.
        self.0
            .schedule_at_fixed_rate(f, initial_delay, period)
            .map_err(|e| e.to_string())
    }

    fn cancel_periodic(h: Self::Periodic) {
        h.cancel();
    }
}

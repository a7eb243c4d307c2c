//! tokio's multi-thread runtime: work-stealing workers and a hierarchical
//! timer wheel of 1 ms resolution. A timer is a task that sleeps.

use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;
use tokio::time::{self, MissedTickBehavior};

use super::{Executor, SpawnInside, Timers};

/// A tokio runtime with `threads` workers and the time driver.
pub struct Tokio(Runtime);

impl Executor for Tokio {
    type Config = ();

    fn start(_: &(), threads: usize) -> Result<Self, String> {
        Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_time()
            .build()
            .map(Tokio)
            .map_err(|e| e.to_string())
    }

    fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), String> {
        // From outside the runtime: through its inject queue.
        drop(self.0.spawn(async move { f() }));
        Ok(())
    }

    fn shutdown(self) -> Result<(), String> {
        // Drops every task still pending and joins the workers.
        drop(self.0);
        Ok(())
    }
}

impl SpawnInside for Tokio {
    /// `tokio::spawn` finds the runtime through the worker's context.
    type Ctx = ();

    fn ctx(&self) {}

    fn spawn_inside<F: FnOnce() + Send + 'static>(_: &(), f: F) -> Result<(), String> {
        drop(tokio::spawn(async move { f() }));
        Ok(())
    }
}

impl Timers for Tokio {
    type Handle = JoinHandle<()>;
    type Periodic = JoinHandle<()>;

    fn schedule<F: FnOnce() + Send + 'static>(
        &self,
        _delay: Duration,
        due: Instant,
        f: F,
    ) -> Result<Self::Handle, String> {
        let due = time::Instant::from_std(due);
        Ok(self.0.spawn(async move {
            time::sleep_until(due).await;
            f();
        }))
    }

    fn cancel(h: Self::Handle) {
        h.abort();
    }

    fn schedule_at_fixed_rate<F: FnMut() + Send + 'static>(
        &self,
        _initial_delay: Duration,
        first_due: Instant,
        period: Duration,
        mut f: F,
    ) -> Result<Self::Periodic, String> {
        let first_due = time::Instant::from_std(first_due);
        Ok(self.0.spawn(async move {
            let mut ticks = time::interval_at(first_due, period);
            // Burst: tick n stays due at first_due + n × period.
            ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
            loop {
                ticks.tick().await;
                f();
            }
        }))
    }

    fn cancel_periodic(h: Self::Periodic) {
        h.abort();
    }
}

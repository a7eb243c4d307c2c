//! rayon's `ThreadPool`: work-stealing deques, a global injector for
//! submissions from outside. No timers.

use std::sync::Arc;
use std::time::Duration;

use rayon::{ThreadPool, ThreadPoolBuilder};

use super::{Executor, SpawnInside};
use crate::measure::Latch;

/// A rayon pool of its own (not the global one), and a count of its
/// workers that have exited.
pub struct Rayon {
    pool: ThreadPool,
    exited: Arc<Latch>,
    threads: usize,
}

impl Executor for Rayon {
    type Config = ();

    fn start(_: &(), threads: usize) -> Result<Self, String> {
        let exited = Arc::new(Latch::default());
        let on_exit = Arc::clone(&exited);
        let pool = ThreadPoolBuilder::new()
            .num_threads(threads)
            .exit_handler(move |_| on_exit.count_up())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Rayon {
            pool,
            exited,
            threads,
        })
    }

    fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), String> {
        self.pool.spawn(f);
        Ok(())
    }

    fn shutdown(self) -> Result<(), String> {
        // Dropping the pool only asks the workers to stop: wait for them.
        drop(self.pool);
        if self.exited.wait_for(self.threads, Duration::from_secs(30)) {
            Ok(())
        } else {
            Err("rayon workers did not exit within 30 s".into())
        }
    }
}

impl SpawnInside for Rayon {
    /// `rayon::spawn` on a worker uses the worker's pool (its own deque).
    type Ctx = ();

    fn ctx(&self) {}

    fn spawn_inside<F: FnOnce() + Send + 'static>(_: &(), f: F) -> Result<(), String> {
        rayon::spawn(f);
        Ok(())
    }
}

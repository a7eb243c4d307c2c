//! `threadpool`: workers taking boxed jobs from one std channel behind a
//! mutex. No timers.

use super::{Executor, SpawnInside};

/// A `threadpool::ThreadPool`.
pub struct Tp(threadpool::ThreadPool);

impl Executor for Tp {
    type Config = ();

    fn start(_: &(), threads: usize) -> Result<Self, String> {
        Ok(Tp(threadpool::Builder::new().num_threads(threads).build()))
    }

    fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), String> {
        self.0.execute(f);
        Ok(())
    }

    fn shutdown(self) -> Result<(), String> {
        // Waits for the queued jobs; dropping the last sender then closes
        // the channel and the workers exit (no join: `Exec` waits for the
        // thread count).
        self.0.join();
        drop(self.0);
        Ok(())
    }
}

impl SpawnInside for Tp {
    /// Tasks carry a clone of the pool (a channel sender and an Arc).
    type Ctx = threadpool::ThreadPool;

    fn ctx(&self) -> Self::Ctx {
        self.0.clone()
    }

    fn spawn_inside<F: FnOnce() + Send + 'static>(ctx: &Self::Ctx, f: F) -> Result<(), String> {
        ctx.execute(f);
        Ok(())
    }
}

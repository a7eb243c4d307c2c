//! Async handlers: [`Spawn`], the runtime their runs are polled on, and
//! [`AsyncHandler`].
//!
//! An async handler's run starts on one of the executor's workers, as a
//! synchronous one's does: the worker calls the handler, which returns a
//! future, and hands that future to the runtime the handler was
//! registered with. The run holds its claim and lease until the future
//! completes (the scheduler renews the lease meanwhile, as for any run in
//! progress), and the future's output is the run's outcome. A panic while
//! it is polled is a failed attempt; so is a future dropped before it
//! completed (its runtime shut down, or cancelled it): never a run that
//! stays claimed.

use std::future::Future;
use std::pin::Pin;

use crate::job::{JobContext, JobError};

/// A future a [`Spawn`] runs: `Send`, `'static`, with no output.
pub type SpawnedFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What an async handler returns for one run: its outcome, once complete.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'static>>;

/// An async job handler, as the scheduler keeps it (see
/// [`DurableScheduler::register_async`](crate::DurableScheduler::register_async)).
pub type AsyncHandler = dyn Fn(JobContext<'static>) -> HandlerFuture + Send + Sync;

/// The runtime an async handler's runs are polled on: tokio's
/// `runtime::Handle` (feature `tokio`), or any executor that can run a
/// `Send` future to completion.
///
/// It must poll the future until it completes, or drop it (the run is then
/// a failed attempt, retried after the back-off). It must not block the
/// calling thread for long: it is called on one of the executor's workers.
///
/// ```
/// use chronopool_durable::{Spawn, SpawnedFuture};
///
/// /// A thread per run (for a small executor of one's own, say).
/// struct ThreadPerRun;
///
/// impl Spawn for ThreadPerRun {
///     fn spawn(&self, future: SpawnedFuture) {
///         std::thread::spawn(move || futures_lite::future::block_on(future));
///     }
/// }
/// ```
pub trait Spawn: Send + Sync + 'static {
    /// Runs `future` to completion (or drops it unfinished).
    fn spawn(&self, future: SpawnedFuture);
}

#[cfg(feature = "tokio")]
impl Spawn for tokio::runtime::Handle {
    fn spawn(&self, future: SpawnedFuture) {
        // The join handle is not needed: the future reports its own end.
        drop(tokio::runtime::Handle::spawn(self, future));
    }
}

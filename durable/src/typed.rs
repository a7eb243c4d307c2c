//! Typed jobs (feature `serde`): [`JobArgs`], a job's arguments as a Rust
//! type that names its handler, so that scheduling a job and handling it
//! type-check against each other.
//!
//! River (`JobArgs` with a `kind()`, and a worker generic over the args)
//! and apalis (a job type, and a storage typed by it) tie the two together
//! through the type; here the arguments' type is all there is: it names
//! its handler (`NAME`), it is what [`DurableScheduler::register_typed`]'s
//! handler receives, and what [`Job::typed`] and
//! [`DurableScheduler::schedule_typed`] take. The payload is its JSON,
//! so the raw bytes stay readable ([`JobContext::payload`]) and other
//! languages can schedule the same jobs.

use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::job::{Job, JobContext, JobError};
use crate::schedule::Schedule;
use crate::scheduler::DurableScheduler;
use crate::spawn::Spawn;
use crate::DurableError;

/// The arguments of one kind of job, as a Rust type: it names the handler
/// that runs it, and its JSON is the job's payload.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use chronopool_durable::{Config, DurableScheduler, JobArgs, Schedule};
/// use std::time::Duration;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct SendCoupon { customer: u64, percent: u8 }
///
/// impl JobArgs for SendCoupon {
///     const NAME: &'static str = "send-coupon";
/// }
///
/// let dir = tempfile::tempdir()?;
/// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
/// let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default())?;
/// jobs.register_typed(|_job, coupon: SendCoupon| {
///     println!("{}% off for customer {}", coupon.percent, coupon.customer);
///     Ok(())
/// });
/// jobs.start()?;
/// jobs.schedule_typed("coupon-7", &SendCoupon { customer: 7, percent: 10 },
///                     Schedule::After(Duration::from_secs(3600)))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait JobArgs: Serialize + DeserializeOwned + Send + 'static {
    /// The name of the handler that runs jobs of this kind (what
    /// [`DurableScheduler::register`] would be given).
    const NAME: &'static str;
}

impl Job {
    /// The job `key` of kind `A`, with `args` (as JSON) as its payload, on
    /// `schedule`; its handler is the one registered for `A`
    /// ([`DurableScheduler::register_typed`]).
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`] if `args` cannot be written as JSON (a
    /// map with keys that are not strings, say).
    pub fn typed<A: JobArgs>(
        key: impl Into<String>,
        args: &A,
        schedule: Schedule,
    ) -> Result<Job, DurableError> {
        Job::json(key, A::NAME, args, schedule)
    }
}

impl DurableScheduler {
    /// Registers `handler` for the jobs of kind `A` (under [`A::NAME`](JobArgs::NAME)),
    /// as [`register`](Self::register) does; it gets the job's context and
    /// its arguments, read from the payload. A payload that is not an `A`
    /// (stored by other code under the same name) makes the job dead at
    /// once, with the reason as its last error: retrying cannot help (a
    /// recurring job: the occurrence, each time).
    pub fn register_typed<A: JobArgs>(
        &self,
        handler: impl Fn(&JobContext<'_>, A) -> Result<(), JobError> + Send + Sync + 'static,
    ) {
        self.register(A::NAME, move |job| handler(job, job.json::<A>()?));
    }

    /// Registers an async `handler` for the jobs of kind `A`, polled on
    /// `spawn`'s runtime (see [`register_async`](Self::register_async)); it
    /// gets the job's context and its arguments, as
    /// [`register_typed`](Self::register_typed)'s does.
    pub fn register_typed_async<A, F, Fut>(&self, spawn: impl Spawn, handler: F)
    where
        A: JobArgs,
        F: Fn(JobContext<'static>, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), JobError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.register_async(A::NAME, spawn, move |job| {
            let handler = Arc::clone(&handler);
            async move {
                let args = job.json::<A>()?;
                handler(job, args).await
            }
        });
    }

    /// Stores the job `key` of kind `A`, with `args` (see
    /// [`schedule`](Self::schedule)).
    ///
    /// # Errors
    ///
    /// As for [`schedule`](Self::schedule), and [`DurableError::Schedule`]
    /// if `args` cannot be written as JSON.
    pub fn schedule_typed<A: JobArgs>(
        &self,
        key: &str,
        args: &A,
        schedule: Schedule,
    ) -> Result<(), DurableError> {
        self.schedule_all([Job::typed(key, args, schedule)?])
    }
}

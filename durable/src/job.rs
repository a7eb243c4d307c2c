//! The user's side of a job: [`Job`] (one to schedule, alone or in a
//! batch), [`JobContext`] (what its handler sees), [`JobError`] (how a run
//! fails) and [`Handler`].

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chronopool::MissedRuns;

use crate::completion::RunRecord;
use crate::schedule::Schedule;
use crate::store::{IfExists, Row};
use crate::time;

/// A job's handler: it gets the job's context and returns `Err` when the
/// run failed. A [retryable](JobError::retry) failure is retried after a
/// back-off, a [permanent](JobError::permanent) one makes the job dead at
/// once (a recurring job's occurrence: the job goes on to its next). A
/// panic is a retryable failure.
pub type Handler = dyn Fn(&JobContext<'_>) -> Result<(), JobError> + Send + Sync;

/// A job to store: its key, the name of its handler, its payload and its
/// schedule, for [`DurableScheduler::schedule_all`](crate::DurableScheduler::schedule_all).
///
/// ```
/// use chronopool::MissedRuns;
/// use chronopool_durable::{Job, Schedule};
/// use std::time::Duration;
///
/// let job = Job::new("flush-cache", "flush", b"eu-west".to_vec(), Schedule::Every(Duration::from_secs(60)))
///     .missed_runs(MissedRuns::Burst)
///     .catch_up(Duration::from_secs(3600));
/// assert_eq!(job.key(), "flush-cache");
/// ```
#[derive(Clone, Debug)]
pub struct Job {
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) schedule: Schedule,
    pub(crate) missed: MissedRuns,
    pub(crate) catch_up: Option<Duration>,
    pub(crate) if_exists: IfExists,
}

impl Job {
    /// The job `key` (unique: what storing a key again does is
    /// [`IfExists`]'s choice), for the handler `name`, with `payload`, on
    /// `schedule`; its missed runs are [skipped](MissedRuns::Skip) and no
    /// occurrence is too late to run.
    pub fn new(
        key: impl Into<String>,
        name: impl Into<String>,
        payload: impl Into<Vec<u8>>,
        schedule: Schedule,
    ) -> Job {
        Job {
            key: key.into(),
            name: name.into(),
            payload: payload.into(),
            schedule,
            missed: MissedRuns::Skip,
            catch_up: None,
            if_exists: IfExists::KeepSame,
        }
    }

    /// The job with `value` as its payload, in JSON (`serde` feature);
    /// its handler reads it with [`JobContext::json`].
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`](crate::DurableError::Schedule) if `value`
    /// cannot be written as JSON.
    ///
    /// ```
    /// use chronopool_durable::{Job, Schedule};
    /// use std::time::Duration;
    ///
    /// #[derive(serde::Serialize)]
    /// struct Coupon { customer: u64, percent: u8 }
    ///
    /// let job = Job::json("coupon-7", "send-coupon", &Coupon { customer: 7, percent: 10 },
    ///                     Schedule::After(Duration::from_secs(3600)))?;
    /// assert_eq!(job.payload(), br#"{"customer":7,"percent":10}"#);
    /// # Ok::<(), chronopool_durable::DurableError>(())
    /// ```
    #[cfg(feature = "serde")]
    pub fn json<T: serde::Serialize + ?Sized>(
        key: impl Into<String>,
        name: impl Into<String>,
        value: &T,
        schedule: Schedule,
    ) -> Result<Job, crate::DurableError> {
        let payload = serde_json::to_vec(value).map_err(|e| {
            crate::DurableError::Schedule(format!("the payload cannot be written as JSON: {e}"))
        })?;
        Ok(Job::new(key, name, payload, schedule))
    }

    /// The job with `missed` as its policy for the occurrences of a
    /// recurring job missed while no process ran it (the core's
    /// [`MissedRuns`], same meanings): `Skip` (the default) runs the late
    /// occurrence once and goes on at the next one on the schedule after
    /// now; `Burst` runs every missed one in turn; `Delay` runs the late
    /// one and shifts a fixed period to start from it.
    #[must_use]
    pub fn missed_runs(mut self, missed: MissedRuns) -> Job {
        self.missed = missed;
        self
    }

    /// The job with a catch-up window: an occurrence that is claimed more
    /// than `window` after it was due (its processes were down) is not
    /// run; the job goes on to its next occurrence after now, or, if it
    /// has none, is done. Counted in
    /// [`DurableMetrics::skipped`](crate::DurableMetrics::skipped). Without
    /// one (the default), an occurrence runs however late it is.
    #[must_use]
    pub fn catch_up(mut self, window: Duration) -> Job {
        self.catch_up = Some(window);
        self
    }

    /// The job with `mode` for a key that is stored already (see
    /// [`IfExists`]; the default is [`IfExists::KeepSame`]).
    #[must_use]
    pub fn if_exists(mut self, mode: IfExists) -> Job {
        self.if_exists = mode;
        self
    }

    /// Its key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The name of its handler.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }
}

/// What a handler sees of the job it runs. A synchronous handler gets it
/// borrowed for its run; an [async](crate::DurableScheduler::register_async)
/// one gets a `JobContext<'static>` that its future owns.
#[derive(Debug)]
pub struct JobContext<'a> {
    row: RowOf<'a>,
    /// The run's side of [`complete_in`](JobContext::complete_in).
    record: Arc<RunRecord>,
}

/// The row a context shows: borrowed for a synchronous run, shared with
/// the run for an async one.
#[derive(Debug)]
enum RowOf<'a> {
    Borrowed(&'a Row),
    Shared(Arc<Row>),
}

impl<'a> JobContext<'a> {
    pub(crate) fn borrowed(row: &'a Row, record: Arc<RunRecord>) -> Self {
        JobContext {
            row: RowOf::Borrowed(row),
            record,
        }
    }
}

impl JobContext<'static> {
    pub(crate) fn shared(row: Arc<Row>, record: Arc<RunRecord>) -> Self {
        JobContext {
            row: RowOf::Shared(row),
            record,
        }
    }
}

impl JobContext<'_> {
    pub(crate) fn record(&self) -> &RunRecord {
        &self.record
    }

    pub(crate) fn row(&self) -> &Row {
        match &self.row {
            RowOf::Borrowed(row) => row,
            RowOf::Shared(row) => row,
        }
    }

    /// The job's key.
    pub fn key(&self) -> &str {
        &self.row().key
    }

    /// The name of its handler.
    pub fn name(&self) -> &str {
        &self.row().name
    }

    /// Its payload.
    pub fn payload(&self) -> &[u8] {
        &self.row().payload
    }

    /// Its payload read as JSON (`serde` feature). A payload that cannot
    /// be read as a `T` is a [permanent](JobError::permanent) error, so
    /// `job.json()?` makes such a job dead with the reason instead of
    /// retrying what cannot succeed (a recurring job: each occurrence, with
    /// the reason as its last error, until its payload is mended or it is
    /// cancelled).
    ///
    /// # Errors
    ///
    /// A permanent [`JobError`] saying why the payload is not a `T`.
    ///
    /// ```no_run
    /// # fn demo(jobs: &chronopool_durable::DurableScheduler) {
    /// #[derive(serde::Deserialize)]
    /// struct Coupon { customer: u64, percent: u8 }
    ///
    /// jobs.register("send-coupon", |job| {
    ///     let coupon: Coupon = job.json()?;
    ///     println!("{}% off for customer {}", coupon.percent, coupon.customer);
    ///     Ok(())
    /// });
    /// # }
    /// ```
    #[cfg(feature = "serde")]
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, JobError> {
        serde_json::from_slice(&self.row().payload).map_err(|e| {
            JobError::permanent(format!("the payload is not what the handler reads: {e}"))
        })
    }

    /// Which attempt this is: 1 for the first run of an occurrence, more
    /// for retries and for a run taken over after its process crashed (a
    /// handler that sees more than 1 should be idempotent).
    pub fn attempt(&self) -> u32 {
        self.row().attempt
    }

    /// When this run was due (never after it started).
    pub fn due(&self) -> SystemTime {
        time::system_time(self.row().next_fire)
    }
}

/// Why a run failed, as a handler returns it: retryable (the default, as
/// `"message".into()` or `?` on a `String` error gives) or permanent.
///
/// ```
/// use chronopool_durable::JobError;
///
/// let busy: JobError = "the mail server is busy".into();
/// assert!(!busy.is_permanent());
/// let unknown = JobError::permanent("no such customer: 42");
/// assert!(unknown.is_permanent());
/// assert_eq!(unknown.to_string(), "no such customer: 42");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobError {
    message: String,
    permanent: bool,
}

impl JobError {
    /// A failure worth another attempt, after the back-off of
    /// [`Config::retry`](crate::Config::retry) (the job is
    /// dead after [`Config::max_attempts`](crate::Config::max_attempts)).
    pub fn retry(message: impl fmt::Display) -> JobError {
        JobError {
            message: message.to_string(),
            permanent: false,
        }
    }

    /// A failure no retry can mend (a payload the handler cannot read, a
    /// record that is gone): the job is dead at once, kept with `message`
    /// for inspection and a manual
    /// [`retry`](crate::DurableScheduler::retry). For a recurring job only
    /// this occurrence is: the job goes on to its next, `message` kept as
    /// its last error.
    pub fn permanent(message: impl fmt::Display) -> JobError {
        JobError {
            message: message.to_string(),
            permanent: true,
        }
    }

    /// Whether it is [permanent](JobError::permanent).
    pub fn is_permanent(&self) -> bool {
        self.permanent
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JobError {}

impl From<String> for JobError {
    /// A retryable failure.
    fn from(message: String) -> Self {
        JobError::retry(message)
    }
}

impl From<&str> for JobError {
    /// A retryable failure.
    fn from(message: &str) -> Self {
        JobError::retry(message)
    }
}

//! [`SubmitError`]: a submission the pool refused, with the job given back.

use std::fmt;

/// A submission the executor refused, with the job given back.
///
/// ```
/// use chronopool::{ScheduledExecutor, SubmitErrorKind};
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// pool.shutdown();
/// let err = pool.submit(|| 42).unwrap_err();
/// assert_eq!(err.kind(), SubmitErrorKind::Shutdown);
/// let job = err.into_inner();
/// assert_eq!(job(), 42); // the caller can still run it
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SubmitError<F> {
    job: F,
    kind: SubmitErrorKind,
}

/// Why a submission was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitErrorKind {
    /// The executor was shut down (with `shutdown` or `shutdown_now`, or
    /// because every handle to it was dropped); it accepts no new work.
    Shutdown,
    /// A periodic task was given a zero period (or delay).
    ZeroPeriod,
    /// The executor already holds as many tasks scheduled to run later as
    /// [`Builder::max_scheduled_tasks`](crate::Builder::max_scheduled_tasks)
    /// allows.
    TooManyScheduled,
    /// [`chronopool::submit`](crate::submit) or
    /// [`chronopool::execute`](crate::execute) was called on a thread that
    /// is not a worker of any executor.
    NotOnWorker,
}

impl<F> SubmitError<F> {
    pub(crate) fn new(job: F, kind: SubmitErrorKind) -> Self {
        SubmitError { job, kind }
    }

    /// Why the job was refused.
    pub fn kind(&self) -> SubmitErrorKind {
        self.kind
    }

    /// The refused job, unrun.
    pub fn into_inner(self) -> F {
        self.job
    }
}

impl<F> fmt::Debug for SubmitError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubmitError")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl<F> fmt::Display for SubmitError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            SubmitErrorKind::Shutdown => f.write_str("task rejected: the executor is shut down"),
            SubmitErrorKind::TooManyScheduled => {
                f.write_str("task rejected: too many tasks are scheduled to run later")
            }
            SubmitErrorKind::ZeroPeriod => {
                f.write_str("task rejected: the period of a periodic task must not be zero")
            }
            SubmitErrorKind::NotOnWorker => {
                f.write_str("task rejected: the calling thread is not a worker of any executor")
            }
        }
    }
}

impl<F> std::error::Error for SubmitError<F> {}

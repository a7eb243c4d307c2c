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
///
/// It converts into `Box<dyn Error + Send + Sync>` (so `?` works in such
/// functions) for any job that is `Send`, whether or not the job is `Sync`:
/// the job is never shared, only given back.
#[must_use = "the refused job is inside: into_inner() gives it back"]
pub struct SubmitError<F> {
    job: F,
    kind: SubmitErrorKind,
}

// SAFETY: no method takes `&self` to the job: `kind`, `Debug` and `Display`
// read only `kind`, and the job leaves only by value (`into_inner`). So a
// `&SubmitError<F>` shared between threads gives no access to `F`, and
// `F: Sync` is not needed (as `std::sync::Exclusive` reasons).
unsafe impl<F: Send> Sync for SubmitError<F> {}

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
    /// [`chronopool::submit`](crate::submit),
    /// [`chronopool::execute`](crate::execute) or
    /// [`chronopool::schedule`](crate::schedule) was called on a thread
    /// that is not a worker of any executor.
    NotOnWorker,
}

impl fmt::Display for SubmitErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubmitErrorKind::Shutdown => "the executor is shut down",
            SubmitErrorKind::TooManyScheduled => "too many tasks are scheduled to run later",
            SubmitErrorKind::ZeroPeriod => "the period of a periodic task must not be zero",
            SubmitErrorKind::NotOnWorker => "the calling thread is not a worker of any executor",
        })
    }
}

impl std::error::Error for SubmitErrorKind {}

impl<F> SubmitError<F> {
    pub(crate) fn new(job: F, kind: SubmitErrorKind) -> Self {
        SubmitError { job, kind }
    }

    /// The same refusal, of the job `map` makes of this one.
    pub(crate) fn map_job<G>(self, map: impl FnOnce(F) -> G) -> SubmitError<G> {
        SubmitError {
            job: map(self.job),
            kind: self.kind,
        }
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
        write!(f, "task rejected: {}", self.kind)
    }
}

impl<F> std::error::Error for SubmitError<F> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_error_with_a_job_that_is_not_sync_boxes_as_send_and_sync() {
        let (_tx, rx) = std::sync::mpsc::channel::<u8>();
        // `Receiver` is `Send` but not `Sync`, nor is the closure.
        let job = move || rx.try_recv().is_ok();
        let boxed: Box<dyn std::error::Error + Send + Sync> =
            Box::new(SubmitError::new(job, SubmitErrorKind::Shutdown));
        assert_eq!(
            boxed.to_string(),
            "task rejected: the executor is shut down"
        );
    }
}

//! Why a timed join returned without a value: [`JoinTimeoutError`].

use std::fmt;

use crate::task::TaskError;

/// Why a timed join ([`TaskHandle::join_timeout`](crate::TaskHandle::join_timeout),
/// [`ScheduledHandle::join_timeout`](crate::ScheduledHandle::join_timeout),
/// [`PeriodicHandle::join_timeout`](crate::PeriodicHandle::join_timeout))
/// returned without a value. `H` is the handle, given back on a time-out.
pub enum JoinTimeoutError<H> {
    /// The task did not finish in time. The handle is given back: join it
    /// again, cancel it, or drop it to detach the task.
    TimedOut(H),
    /// The task finished without a value (it was cancelled or panicked).
    Failed(TaskError),
}

impl<H> JoinTimeoutError<H> {
    /// True if the wait timed out (the task may still run).
    pub fn is_timeout(&self) -> bool {
        matches!(self, JoinTimeoutError::TimedOut(_))
    }

    /// Gives the handle back in `TimedOut`, turning the other error type.
    pub(crate) fn map_handle<G>(self, f: impl FnOnce(H) -> G) -> JoinTimeoutError<G> {
        match self {
            JoinTimeoutError::TimedOut(h) => JoinTimeoutError::TimedOut(f(h)),
            JoinTimeoutError::Failed(e) => JoinTimeoutError::Failed(e),
        }
    }
}

impl<H: fmt::Debug> fmt::Debug for JoinTimeoutError<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinTimeoutError::TimedOut(h) => f.debug_tuple("TimedOut").field(h).finish(),
            JoinTimeoutError::Failed(e) => f.debug_tuple("Failed").field(e).finish(),
        }
    }
}

impl<H> fmt::Display for JoinTimeoutError<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinTimeoutError::TimedOut(_) => f.write_str("timed out waiting for the task"),
            JoinTimeoutError::Failed(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<H: fmt::Debug> std::error::Error for JoinTimeoutError<H> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JoinTimeoutError::TimedOut(_) => None,
            JoinTimeoutError::Failed(e) => Some(e),
        }
    }
}

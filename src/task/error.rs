//! Why a task produced no value: [`TaskError`], and what a task panicked
//! with, [`PanicPayload`].

use std::any::Any;
use std::fmt;

use crate::sync::Mutex;

use super::unwind::drop_payload;

/// Why a task produced no value.
///
/// Returned by [`TaskHandle::join`](crate::TaskHandle::join) and friends.
///
/// ```
/// use chronopool::{ScheduledExecutor, TaskError};
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let handle = pool.submit(|| -> u32 { panic!("no answer today") })?;
/// match handle.join() {
///     Err(TaskError::Panicked(payload)) => assert_eq!(payload.message(), Some("no answer today")),
///     other => panic!("unexpected: {other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum TaskError {
    /// The task was cancelled before it ran: through
    /// [`TaskHandle::cancel`](crate::TaskHandle::cancel),
    /// or because [`ScheduledExecutor::shutdown_now`](crate::ScheduledExecutor::shutdown_now)
    /// handed it back and the caller dropped it unrun.
    Cancelled,
    /// The task panicked; the payload is what it panicked with.
    Panicked(PanicPayload),
    /// Its time-out came first
    /// ([`submit_with_timeout`](crate::ScheduledExecutor::submit_with_timeout)):
    /// it never started, or it was asked to stop
    /// ([`cancelled`](crate::cancelled)) and its output, if it comes, is
    /// dropped.
    TimedOut,
}

impl TaskError {
    /// True for [`TaskError::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, TaskError::Cancelled)
    }

    /// True for [`TaskError::TimedOut`].
    pub fn is_timed_out(&self) -> bool {
        matches!(self, TaskError::TimedOut)
    }

    /// True for [`TaskError::Panicked`].
    pub fn is_panic(&self) -> bool {
        matches!(self, TaskError::Panicked(_))
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Cancelled => f.write_str("task was cancelled"),
            TaskError::Panicked(p) => write!(f, "task panicked: {p}"),
            TaskError::TimedOut => f.write_str("task timed out"),
        }
    }
}

impl std::error::Error for TaskError {}

/// What a task panicked with: the value given to `panic!`, usually a message.
///
/// [`message`](PanicPayload::message) gives the text of a `panic!("...")`;
/// [`into_inner`](PanicPayload::into_inner) gives the raw payload back, for
/// example to re-raise it with [`std::panic::resume_unwind`].
///
/// Dropping a `PanicPayload` never panics: a payload is any value, and if
/// its destructor panics, that panic is caught (and the payload of that
/// one dropped the same way). The raw payload from `into_inner` has no such
/// guard.
pub struct PanicPayload(Box<Repr>);

/// The two common payloads (`&'static str`, `String`) are kept as text; any
/// other payload sits behind a lock, which only makes it `Sync` (it is only
/// ever locked by its owner) so that [`TaskError`] can be sent as a
/// `Box<dyn Error + Send + Sync>`.
enum Repr {
    Static(&'static str),
    Owned(String),
    Other(Mutex<Box<dyn Any + Send>>),
}

impl PanicPayload {
    pub(crate) fn new(payload: Box<dyn Any + Send>) -> Self {
        let repr = match payload.downcast::<&'static str>() {
            Ok(s) => Repr::Static(*s),
            Err(payload) => match payload.downcast::<String>() {
                Ok(s) => Repr::Owned(*s),
                Err(payload) => Repr::Other(Mutex::new(payload)),
            },
        };
        PanicPayload(Box::new(repr))
    }

    /// The panic message, if the task panicked with text (`panic!("...")`,
    /// with or without format arguments); `None` for any other payload.
    pub fn message(&self) -> Option<&str> {
        match &*self.0 {
            Repr::Static(s) => Some(s),
            Repr::Owned(s) => Some(s),
            Repr::Other(_) => None,
        }
    }

    /// The payload as `std::panic::catch_unwind` would have returned it.
    pub fn into_inner(mut self) -> Box<dyn Any + Send> {
        // What is left behind is dropped by `Drop` with nothing to run.
        match std::mem::replace(&mut *self.0, Repr::Static("")) {
            Repr::Static(s) => Box::new(s),
            Repr::Owned(s) => Box::new(s),
            Repr::Other(m) => m.into_inner(),
        }
    }
}

impl Drop for PanicPayload {
    fn drop(&mut self) {
        if let Repr::Other(m) = &mut *self.0 {
            let payload = std::mem::replace(&mut *m.lock(), Box::new(()));
            drop_payload(payload);
        }
    }
}

impl fmt::Display for PanicPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message().unwrap_or("Box<dyn Any>"))
    }
}

impl fmt::Debug for PanicPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message() {
            Some(m) => f.debug_tuple("PanicPayload").field(&m).finish(),
            None => f.write_str("PanicPayload(..)"),
        }
    }
}

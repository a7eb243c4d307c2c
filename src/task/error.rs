//! Why a task produced no value: [`TaskError`], and what a task panicked
//! with, [`PanicPayload`].

use std::any::Any;
use std::fmt;

use crate::sync::Mutex;

use super::id::{TaskId, TaskIdentity};
use super::running;
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
pub struct PanicPayload(Box<Caught>);

/// A caught panic, and the task whose code panicked.
struct Caught {
    repr: Repr,
    task: Option<TaskIdentity>,
}

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
    /// The payload of a panic caught now, by the task whose code runs on
    /// this thread, if any (`running.rs`).
    pub(crate) fn new(payload: Box<dyn Any + Send>) -> Self {
        Self::of_task(payload, running::current())
    }

    /// The payload of a panic of the code of `task` (its id and name).
    pub(crate) fn of_task(payload: Box<dyn Any + Send>, task: Option<TaskIdentity>) -> Self {
        let repr = match payload.downcast::<&'static str>() {
            Ok(s) => Repr::Static(*s),
            Err(payload) => match payload.downcast::<String>() {
                Ok(s) => Repr::Owned(*s),
                Err(payload) => Repr::Other(Mutex::new(payload)),
            },
        };
        PanicPayload(Box::new(Caught { repr, task }))
    }

    /// The same payload, as a panic of the task `task`.
    pub(crate) fn with_task(mut self, task: TaskIdentity) -> Self {
        self.0.task = Some(task);
        self
    }

    /// The panic message, if the task panicked with text (`panic!("...")`,
    /// with or without format arguments); `None` for any other payload.
    pub fn message(&self) -> Option<&str> {
        match &self.0.repr {
            Repr::Static(s) => Some(s),
            Repr::Owned(s) => Some(s),
            Repr::Other(_) => None,
        }
    }

    /// The id of the task whose code panicked: its closure, its trigger, or
    /// the destructor of its closure when a cancel dropped it. `None` for a
    /// panic of code that belongs to no task (a closure given to
    /// `execute`, a task's output dropped after its run, a waker).
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let hook_seen = seen.clone();
    /// let pool = ScheduledExecutor::builder()
    ///     .worker_threads(1)
    ///     .on_panic(move |panic| {
    ///         let who = (panic.task_id(), panic.task_name().map(str::to_owned));
    ///         hook_seen.lock().unwrap().push(who);
    ///     })
    ///     .build()?;
    /// let handle = pool.task().name("nightly-report").submit(|| -> u32 { panic!("no data") })?;
    /// let id = handle.id();
    /// assert!(handle.join().is_err());
    /// assert_eq!(*seen.lock().unwrap(), [(Some(id), Some("nightly-report".to_owned()))]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn task_id(&self) -> Option<TaskId> {
        self.0.task.as_ref().map(|(id, _)| *id)
    }

    /// The name of the task whose code panicked, if it has one (see
    /// [`task_id`](Self::task_id)).
    pub fn task_name(&self) -> Option<&str> {
        self.0.task.as_ref().and_then(|(_, name)| name.as_deref())
    }

    /// The payload as `std::panic::catch_unwind` would have returned it.
    pub fn into_inner(mut self) -> Box<dyn Any + Send> {
        // What is left behind is dropped by `Drop` with nothing to run.
        match std::mem::replace(&mut self.0.repr, Repr::Static("")) {
            Repr::Static(s) => Box::new(s),
            Repr::Owned(s) => Box::new(s),
            Repr::Other(m) => m.into_inner(),
        }
    }
}

impl From<Box<dyn Any + Send>> for PanicPayload {
    /// Wraps the payload of a panic caught with [`std::panic::catch_unwind`]
    /// (by a library that runs user code of its own), so that dropping it
    /// never panics. It names the task running on this thread, if any.
    ///
    /// ```
    /// use chronopool::PanicPayload;
    ///
    /// let caught = std::panic::catch_unwind(|| panic!("expected: boom")).unwrap_err();
    /// let payload = PanicPayload::from(caught);
    /// assert_eq!(payload.message(), Some("expected: boom"));
    /// ```
    fn from(payload: Box<dyn Any + Send>) -> Self {
        PanicPayload::new(payload)
    }
}

impl Drop for PanicPayload {
    fn drop(&mut self) {
        if let Repr::Other(m) = &mut self.0.repr {
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

//! The crate's error types: why a task produced no value ([`TaskError`],
//! [`PanicPayload`]), why a submission was refused ([`SubmitError`]), why a
//! timed join returned without a value ([`JoinTimeoutError`]), and why a
//! configuration was refused ([`BuildError`]).

use std::any::Any;
use std::fmt;
use std::time::Duration;

use crate::sync::Mutex;

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
pub enum TaskError {
    /// The task was cancelled before it ran: through
    /// [`TaskHandle::cancel`](crate::TaskHandle::cancel),
    /// or because [`ScheduledExecutor::shutdown_now`](crate::ScheduledExecutor::shutdown_now)
    /// handed it back and the caller dropped it unrun.
    Cancelled,
    /// The task panicked; the payload is what it panicked with.
    Panicked(PanicPayload),
}

impl TaskError {
    /// True for [`TaskError::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, TaskError::Cancelled)
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
            crate::unwind::drop_payload(payload);
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

/// Why a timed join ([`TaskHandle::join_timeout`](crate::TaskHandle::join_timeout),
/// [`ScheduledHandle::join_timeout`](crate::ScheduledHandle::join_timeout))
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

/// A configuration that [`Builder::build`](crate::Builder::build) refused,
/// or a worker thread the operating system would not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `worker_threads` was 0, or more than [`MAX_WORKER_THREADS`](crate::MAX_WORKER_THREADS).
    WorkerThreads(usize),
    /// `stack_size` was 0.
    ZeroStackSize,
    /// `max_scheduled_tasks` was 0.
    ZeroMaxScheduledTasks,
    /// A timing wheel's tick was zero or more than
    /// [`MAX_WHEEL_TICK`](crate::MAX_WHEEL_TICK).
    WheelTick(Duration),
    /// A hashed wheel's number of slots was zero or more than
    /// [`MAX_WHEEL_SLOTS`](crate::MAX_WHEEL_SLOTS).
    WheelSlots(usize),
    /// `timer_spin` was more than [`MAX_TIMER_SPIN`](crate::MAX_TIMER_SPIN).
    TimerSpin(Duration),
    /// A worker thread's name (from [`thread_name`](crate::Builder::thread_name)
    /// or [`thread_name_fn`](crate::Builder::thread_name_fn)) contained a
    /// NUL byte, which thread names cannot hold; the name.
    ThreadName(String),
    /// [`thread_name_fn`](crate::Builder::thread_name_fn) panicked; the
    /// payload.
    ThreadNamePanicked(PanicPayload),
    /// The operating system refused to start a worker thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::WorkerThreads(n) => write!(
                f,
                "worker_threads must be between 1 and {}, got {n}",
                crate::MAX_WORKER_THREADS
            ),
            BuildError::ZeroStackSize => f.write_str("stack_size must be greater than 0"),
            BuildError::ZeroMaxScheduledTasks => {
                f.write_str("max_scheduled_tasks must be greater than 0")
            }
            BuildError::WheelTick(tick) => write!(
                f,
                "a timing wheel's tick must be between 1 ns and {:?}, got {tick:?}",
                crate::MAX_WHEEL_TICK
            ),
            BuildError::WheelSlots(slots) => write!(
                f,
                "a hashed wheel's slots must be between 1 and {}, got {slots}",
                crate::MAX_WHEEL_SLOTS
            ),
            BuildError::TimerSpin(spin) => write!(
                f,
                "timer_spin must be at most {:?}, got {spin:?}",
                crate::MAX_TIMER_SPIN
            ),
            BuildError::ThreadName(name) => {
                write!(f, "a thread name must not contain a NUL byte, got {name:?}")
            }
            BuildError::ThreadNamePanicked(payload) => {
                write!(f, "thread_name_fn panicked: {payload}")
            }
            BuildError::Spawn(e) => write!(f, "failed to start a worker thread: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

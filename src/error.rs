//! The errors of the executor's API: why a timed join returned without a
//! value ([`JoinTimeoutError`]) and why a configuration was refused
//! ([`BuildError`]). Why a task produced no value ([`TaskError`],
//! [`PanicPayload`]) is the task layer's (`task/error.rs`); why a
//! submission was refused ([`SubmitError`](crate::SubmitError)) the pool's
//! (`pool/submit_error.rs`).

use std::fmt;
use std::time::Duration;

use crate::task::{PanicPayload, TaskError};

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

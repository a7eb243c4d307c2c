//! Why a configuration was refused ([`BuildError`]). The other errors
//! live with what they describe: why a timed join returned without a value
//! ([`JoinTimeoutError`](crate::JoinTimeoutError)) with the handles
//! (`handle/join_timeout.rs`), why a task produced no value
//! ([`TaskError`](crate::TaskError), [`PanicPayload`](crate::PanicPayload))
//! with the tasks (`task/error.rs`), why a submission was refused
//! ([`SubmitError`](crate::SubmitError)) with the pool
//! (`pool/submit_error.rs`).

use std::fmt;
use std::time::Duration;

use crate::task::PanicPayload;

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

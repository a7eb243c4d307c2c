//! [`DurableError`]: what can go wrong with a durable schedule.

use std::fmt;

/// What can go wrong with a durable schedule.
#[derive(Debug)]
#[non_exhaustive]
pub enum DurableError {
    /// The store failed (the database, its file, its connection).
    Store(String),
    /// A schedule that cannot fire: an invalid cron expression or time
    /// zone, a zero period, or a stored schedule this version cannot read.
    Schedule(String),
    /// The executor refused the work (it was shut down).
    Executor(String),
}

impl fmt::Display for DurableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurableError::Store(e) => write!(f, "durable store: {e}"),
            DurableError::Schedule(e) => write!(f, "schedule: {e}"),
            DurableError::Executor(e) => write!(f, "executor: {e}"),
        }
    }
}

impl std::error::Error for DurableError {}

impl From<rusqlite::Error> for DurableError {
    fn from(e: rusqlite::Error) -> Self {
        DurableError::Store(e.to_string())
    }
}

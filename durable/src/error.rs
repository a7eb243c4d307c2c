//! [`DurableError`]: what can go wrong with a durable schedule, and
//! [`StoreError`]: a failure of the database, with its cause.
//!
//! The store's own error types (rusqlite's, postgres's) are not part of
//! the API: a [`StoreError`] keeps what a caller acts on (the message the
//! database gave, its code, whether trying again can help) and the
//! original error as its [`source`](std::error::Error::source).

use std::error::Error;
use std::fmt;

/// What can go wrong with a durable schedule.
#[derive(Debug)]
#[non_exhaustive]
pub enum DurableError {
    /// The store failed (the database, its file, its connection).
    Store(StoreError),
    /// A [`Config`](crate::Config) setting that cannot work.
    Config {
        /// The field, as named in `Config`.
        field: &'static str,
        /// Why it cannot work.
        reason: String,
    },
    /// A schedule that cannot be stored or cannot fire: an invalid cron
    /// expression or time zone, a zero period, a time outside the years 1
    /// to 9999, a payload that cannot be written, or a stored schedule this
    /// version cannot read.
    Schedule(String),
    /// The executor refused the work (it was shut down, or is gone).
    Executor(String),
}

impl DurableError {
    pub(crate) fn config(field: &'static str, reason: impl Into<String>) -> Self {
        DurableError::Config {
            field,
            reason: reason.into(),
        }
    }

    /// True if trying the same call again may succeed: the store was
    /// busy, or its connection was lost (see [`StoreError::is_transient`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, DurableError::Store(e) if e.is_transient())
    }
}

impl fmt::Display for DurableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurableError::Store(e) => write!(f, "durable store: {e}"),
            DurableError::Config { field, reason } => write!(f, "Config::{field}: {reason}"),
            DurableError::Schedule(e) => write!(f, "schedule: {e}"),
            DurableError::Executor(e) => write!(f, "executor: {e}"),
        }
    }
}

impl Error for DurableError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            DurableError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StoreError> for DurableError {
    fn from(e: StoreError) -> Self {
        DurableError::Store(e)
    }
}

/// A failure of the store: what the database said, its code, and whether
/// it is worth trying again.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use chronopool_durable::{Config, DurableError, DurableScheduler};
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let dir = tempfile::tempdir()?;
/// // A directory is not a database file.
/// let Err(DurableError::Store(e)) = DurableScheduler::sqlite(&pool, dir.path(), Config::default()) else {
///     panic!("a directory opened as a database")
/// };
/// assert!(!e.is_transient());
/// assert!(e.code().is_some());
/// assert!(std::error::Error::source(&e).is_some(), "the driver's error");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct StoreError {
    message: String,
    code: Option<String>,
    transient: bool,
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl StoreError {
    pub(crate) fn new(
        message: impl Into<String>,
        code: Option<String>,
        transient: bool,
        source: Option<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        StoreError {
            message: message.into(),
            code,
            transient,
            source,
        }
    }

    /// A failure of this crate's own making (a schema newer than the
    /// crate's, say), with no driver error behind it.
    pub(crate) fn other(message: impl Into<String>) -> Self {
        StoreError::new(message, None, false, None)
    }

    /// The database's code for the error, if it gave one: PostgreSQL's
    /// SQLSTATE (`"40001"`, `"08006"`, ...), or SQLite's extended result
    /// code name (`"SQLITE_BUSY"`, `"SQLITE_CANTOPEN"`, ...).
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// True if the same operation may succeed later: the store was busy
    /// or locked, its connection was lost or refused, or the server is
    /// starting or shutting down. False for what a retry cannot mend (a
    /// bad connection string, a refused password, a missing database, a
    /// schema newer than this crate's).
    pub fn is_transient(&self) -> bool {
        self.transient
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match &self.code {
            Some(code) if !self.message.contains(code.as_str()) => write!(f, " ({code})"),
            _ => Ok(()),
        }
    }
}

impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

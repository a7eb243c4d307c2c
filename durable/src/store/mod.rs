//! Where durable jobs live: the [`Store`] trait the scheduler works
//! through, and its SQLite implementation (`sqlite.rs`).
//!
//! # The protocol every store keeps
//!
//! A job is one row, keyed by the user's key. Its `state` is
//! *scheduled* (waiting for `next_fire`), *running* (claimed by `owner`
//! until `lease_until`) or *dead* (failed too often; kept for inspection).
//!
//! * **Claim** moves a row to *running*, for one owner and one lease, in
//!   one statement that checks it is due: *scheduled* with `next_fire` at
//!   or before now, or *running* with a lease that has expired (its owner
//!   crashed or stalled). Of any number of processes that try at once,
//!   one wins; the others see no row. The attempt count goes up by one.
//! * **Finish** ends a run in one statement, only if the row is still
//!   *running* for this owner: it deletes a one-shot job, gives a recurring
//!   one its next fire time, schedules a retry, or makes it *dead*. A run
//!   whose lease expired and whose job another process claimed finishes
//!   nothing (its result is the other process's to store).
//! * **Upsert** by key never duplicates: scheduling a key again replaces
//!   the row, and a run in progress of the old one then finishes nothing.
//!
//! So a job runs at least once after its `schedule` call returned, and
//! exactly once while no process crashes or stalls past its lease.

pub(crate) mod postgres;
pub(crate) mod sqlite;

use crate::error::DurableError;
use crate::schedule::Misfire;

/// The state of a stored job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobState {
    /// Waiting for its next fire time.
    Scheduled,
    /// Claimed by a process that runs it.
    Running,
    /// Failed more often than allowed: kept for inspection and a manual
    /// [`retry`](crate::DurableScheduler::retry).
    Dead,
}

impl JobState {
    pub(crate) fn code(self) -> i64 {
        match self {
            JobState::Scheduled => 0,
            JobState::Running => 1,
            JobState::Dead => 2,
        }
    }

    pub(crate) fn from_code(code: i64) -> JobState {
        match code {
            1 => JobState::Running,
            2 => JobState::Dead,
            _ => JobState::Scheduled,
        }
    }
}

/// A job's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) payload: Vec<u8>,
    /// `Recurrence::encode`.
    pub(crate) recurrence: String,
    /// Milliseconds since the epoch.
    pub(crate) next_fire: i64,
    pub(crate) state: JobState,
    pub(crate) attempt: u32,
    pub(crate) misfire: Misfire,
    pub(crate) last_error: Option<String>,
}

/// A job to place: its key, its handler's name, and when it fires.
pub(crate) type Due = (String, String, i64);

/// How a run ends, for [`Store::finish`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// A one-shot job succeeded: the row goes.
    Delete,
    /// A recurring job ran: it waits for `next_fire`, its attempts reset.
    Next { next_fire: i64 },
    /// It failed, or could not run yet: it waits for `next_fire`, keeping
    /// its attempt count less `uncount` (1 for a run that never started,
    /// such as a job whose handler is not registered).
    Retry {
        next_fire: i64,
        error: String,
        uncount: u32,
    },
    /// It failed for the last time.
    Dead { error: String },
}

/// What the scheduler needs of a store (module doc).
pub(crate) trait Store: Send + Sync + 'static {
    /// Inserts the job, or replaces the one with its key.
    fn upsert(&self, row: &Row) -> Result<(), DurableError>;

    /// Up to `limit` jobs to place in memory, with their handler's name and
    /// the time each fires:
    /// scheduled ones due by `until`, and running ones whose lease expired
    /// before `now` (due now).
    fn due(&self, until: i64, now: i64, limit: usize) -> Result<Vec<Due>, DurableError>;

    /// Claims the job `key` for `owner` until `lease_until`, if it is due
    /// at `now` (module doc).
    fn claim(
        &self,
        key: &str,
        owner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<Option<Row>, DurableError>;

    /// Extends `owner`'s lease of `key`; false if it is no longer its.
    fn renew(&self, key: &str, owner: &str, lease_until: i64) -> Result<bool, DurableError>;

    /// Ends `owner`'s run of `key`; false if it was no longer its.
    fn finish(&self, key: &str, owner: &str, finish: &Finish) -> Result<bool, DurableError>;

    /// The job `key`.
    fn get(&self, key: &str) -> Result<Option<Row>, DurableError>;

    /// The jobs in `state`, by key.
    fn list(&self, state: JobState) -> Result<Vec<Row>, DurableError>;

    /// Removes the job `key`; false if there was none.
    fn delete(&self, key: &str) -> Result<bool, DurableError>;

    /// A dead job back to scheduled, due at `now`, its attempts reset.
    fn revive(&self, key: &str, now: i64) -> Result<bool, DurableError>;
}

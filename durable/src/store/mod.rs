//! Where durable jobs live: the [`Store`] trait the scheduler works
//! through, and its SQLite implementation (`sqlite.rs`).
//!
//! # The protocol every store keeps
//!
//! A job is one row, keyed by the user's key. Its `state` is
//! *scheduled* (waiting for `next_fire`), *running* (claimed by `owner`
//! until `lease_until`), *done* (a one-shot job that succeeded, kept for
//! inspection when the scheduler is asked to) or *dead* (failed too often;
//! kept for inspection and a manual retry). Done and dead rows carry
//! `finished_at`, and are deleted once it is older than their retention.
//!
//! * **Claim** moves a row to *running*, for one owner and one lease, in
//!   one statement that checks it is due: *scheduled* with `next_fire` at
//!   or before now, or *running* with a lease that has expired (its owner
//!   crashed or stalled). Of any number of processes that try at once,
//!   one wins; the others see no row. The attempt count goes up by one.
//! * **Finish** ends a run in one statement, only if the row is still
//!   *running* for this owner: it deletes a one-shot job (or makes it
//!   *done*), gives a recurring one its next fire time, schedules a retry,
//!   or makes it *dead*. A run
//!   whose lease expired and whose job another process claimed finishes
//!   nothing (its result is the other process's to store).
//! * **Upsert** by key never duplicates: scheduling a key again replaces
//!   the row, and a run in progress of the old one then finishes nothing.
//!   A batch of upserts is one transaction: all are stored or none.
//! * **Renew** extends the leases of an owner's running jobs, in one
//!   statement for all of them.
//! * Claims and finishes come in batches (`batch.rs`): each row of a batch
//!   keeps the rule above, as if it were alone.
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
    /// Failed more often than allowed, or with a
    /// [permanent](crate::JobError::permanent) error: kept for inspection
    /// and a manual [`retry`](crate::DurableScheduler::retry) until
    /// [`Config::keep_dead`](crate::Config::keep_dead) has passed.
    Dead,
    /// A one-shot job that succeeded, kept for
    /// [`Config::keep_done`](crate::Config::keep_done) (by default it is
    /// deleted at once).
    Done,
}

impl JobState {
    pub(crate) fn code(self) -> i64 {
        match self {
            JobState::Scheduled => 0,
            JobState::Running => 1,
            JobState::Dead => 2,
            JobState::Done => 3,
        }
    }

    pub(crate) fn from_code(code: i64) -> JobState {
        match code {
            1 => JobState::Running,
            2 => JobState::Dead,
            3 => JobState::Done,
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

/// A job to place, from [`Store::due`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) key: String,
    /// Its handler's name.
    pub(crate) name: String,
    /// When it fires (for a running job: when its lease ends).
    pub(crate) fire: i64,
    /// It is another owner's run, to take over if its lease expires.
    pub(crate) expired: bool,
}

/// How a run ends, for [`Store::finish`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// A one-shot job succeeded at `at`: the row goes, or is kept as
    /// *done* if `keep`.
    Done { at: i64, keep: bool },
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
    /// It failed for the last time, at `at`.
    Dead { error: String, at: i64 },
}

/// What the scheduler needs of a store (module doc).
pub(crate) trait Store: Send + Sync + 'static {
    /// Inserts the jobs, or replaces the ones with their keys, in one
    /// transaction (of two rows with one key, the later is stored).
    fn upsert(&self, rows: &[Row]) -> Result<(), DurableError>;

    /// Up to `limit` jobs to place in memory, earliest first, with their
    /// handler's name and the time each fires: scheduled ones due by
    /// `until`, and running ones of other owners whose lease ends by
    /// `until` (due when it ends: if it was not renewed by then, its owner
    /// crashed or stalled, and the job is taken over).
    fn due(&self, until: i64, owner: &str, limit: usize) -> Result<Vec<Due>, DurableError>;

    /// Claims the jobs of `keys` that are due at `now` (module doc) for
    /// `owner` until `lease_until`; the rows claimed.
    fn claim(
        &self,
        keys: &[String],
        owner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<Vec<Row>, DurableError>;

    /// Extends `owner`'s leases of `keys` to `lease_until`; how many were
    /// still its.
    fn renew(&self, keys: &[String], owner: &str, lease_until: i64) -> Result<usize, DurableError>;

    /// Ends `owner`'s runs of `runs`' keys, each as its `Finish` says;
    /// for each, whether it was still `owner`'s (else nothing changed).
    fn finish(&self, owner: &str, runs: &[(String, Finish)]) -> Result<Vec<bool>, DurableError>;

    /// The job `key`.
    fn get(&self, key: &str) -> Result<Option<Row>, DurableError>;

    /// The jobs in `state`, by key.
    fn list(&self, state: JobState) -> Result<Vec<Row>, DurableError>;

    /// Removes the job `key`; false if there was none.
    fn delete(&self, key: &str) -> Result<bool, DurableError>;

    /// A dead job back to scheduled, due at `now`, its attempts reset.
    fn revive(&self, key: &str, now: i64) -> Result<bool, DurableError>;

    /// Deletes the done jobs finished before `done_before` and the dead
    /// ones before `dead_before`; how many.
    fn clean(&self, done_before: i64, dead_before: i64) -> Result<u64, DurableError>;
}

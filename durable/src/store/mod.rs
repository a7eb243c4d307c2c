//! Where durable jobs live: the [`Store`] that opens connections, the
//! [`Conn`] every connection is, and the protocol both stores keep
//! (`sqlite/`, `postgres/`).
//!
//! # The protocol
//!
//! A job is one row, keyed by the user's key. Its `state` is *scheduled*
//! (waiting for `next_fire`), *running* (claimed by a run: its owner, its
//! run number, its lease), *done* (a one-shot job that succeeded, kept for
//! inspection when the scheduler is asked to) or *dead* (failed too often;
//! kept for inspection and a manual retry). Done and dead rows carry
//! `finished_at`, and are deleted once it is older than their retention.
//!
//! * **Claim** moves a row to *running* for one run, in one statement that
//!   checks it is due (and still for the handler it was placed for): *scheduled* with `next_fire` at or before now, or
//!   *running* with a lease that has expired (its owner crashed, stalled,
//!   or lost the store for longer than the lease). Of any number of
//!   schedulers that try at once, one wins; the others see no row. The
//!   claim writes the run's **fence**: the claiming scheduler's owner id
//!   (128 random bits drawn when it was made) and a run number unique to
//!   that owner. The attempt count goes up by one. A claim sent again with
//!   the same fence (its reply was lost) returns the rows it claimed the
//!   first time, without counting them twice, unless a row was replaced
//!   meanwhile: the new job is not that claim's, and waits until the
//!   claim's lease ends and its own time comes.
//! * **Renew** extends the lease of a run, only if the row still carries
//!   its fence: a lease that was taken over is never extended.
//! * **Finish** ends a run, only if the row still carries its fence: it
//!   deletes a one-shot job (or makes it *done*), gives a recurring one its
//!   next fire time, schedules a retry, makes the job *dead*, or releases
//!   the claim (back to *scheduled*, the attempt not counted: a run that
//!   never started). A run whose job was taken over or cancelled meanwhile
//!   finishes nothing: its fence is gone. A run whose job was *replaced*
//!   meanwhile (below) keeps its fence, and its finish only ends it: the
//!   row goes *scheduled* at the new schedule's time, with a new sequence
//!   number (so that polls and listeners see it).
//! * **Upsert** by key never duplicates. What it does to a stored row is
//!   the job's [`IfExists`]: keep it if it is the same job (*scheduled* or
//!   *running*), keep its time and take the new payload, or replace it. A
//!   *running* row that is replaced stays *running* under its run's fence
//!   and lease, marked `replaced`: no other run of the key starts until
//!   that run ends (or its lease ends, and the new schedule is due: a
//!   replaced row whose owner is gone is claimed at its new time, not
//!   before).
//!
//! * **Pause**: a row marked `paused`, or of a handler named in
//!   `chronopool_paused_names`, is neither due nor claimed (a run in
//!   progress goes on). A resume gives the rows new sequence numbers, so
//!   that fresh polls place them.
//! * **Limits**: a claim of jobs of a handler named in `chronopool_limits`
//!   counts that handler's runs whose lease lives and claims at most as
//!   many more as the limit leaves; the rest are held back. On PostgreSQL
//!   the claim first locks the limit's row, so the claims of one handler
//!   take turns across processes; on SQLite the exchange holds the file's
//!   write lock already.
//! * **History**: a run's end that holds its fence writes a row to
//!   `chronopool_runs` (its attempt, claim time, end time, outcome and
//!   error) in the same transaction, before its finish; a release or a job
//!   without its handler here is not a run and writes none.
//!
//! **Transactions.** On both stores, a batch of upserts is one transaction
//! (all are stored or none), and one [`Conn::exchange`] (the finishes,
//! renewals and claims a scheduler's run loop gathered, in that order) is
//! one transaction:
//! each row in it keeps the rules above as if it were alone, and either all
//! of the exchange is stored or none of it.
//!
//! So a job runs at least once after its `schedule` call returned, and
//! exactly once while no process crashes or stalls past its lease.

use std::time::Duration;

use chronopool::MissedRuns;

use crate::error::StoreError;
use crate::owner::Owner;
use crate::time::Micros;
pub(crate) use control::{ListQuery, Retention, RunRow};

#[cfg(feature = "sqlx")]
pub use self::sqlx::SqlxTransaction;
pub use app_transaction::AppTransaction;
pub use if_exists::IfExists;

pub(crate) mod app_transaction;
#[cfg(test)]
mod conformance;
pub(crate) mod control;
mod if_exists;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
#[cfg(feature = "sqlx")]
pub(crate) mod sqlx;

/// The state of a stored job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobState {
    /// Waiting for its next fire time.
    Scheduled,
    /// Claimed by a scheduler that runs it.
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
    /// Its name in the stores' `state` column.
    pub(crate) fn name(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Dead => "dead",
            JobState::Done => "done",
        }
    }

    /// The inverse of [`name`](Self::name).
    pub(crate) fn of_name(name: &str) -> Result<JobState, StoreError> {
        Ok(match name {
            "scheduled" => JobState::Scheduled,
            "running" => JobState::Running,
            "dead" => JobState::Dead,
            "done" => JobState::Done,
            other => {
                return Err(StoreError::other(format!(
                    "a job state it cannot read: {other:?}"
                )))
            }
        })
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
    pub(crate) next_fire: Micros,
    pub(crate) state: JobState,
    pub(crate) attempt: u32,
    pub(crate) missed: MissedRuns,
    pub(crate) catch_up: Option<Micros>,
    pub(crate) last_error: Option<String>,
    /// The running run's owner's readable name, if it has one.
    pub(crate) owner_name: Option<String>,
    /// The running run's lease.
    pub(crate) lease_until: Option<Micros>,
    /// Paused: neither placed nor claimed (by itself; a paused handler
    /// name pauses its jobs too, without marking them).
    pub(crate) paused: bool,
    /// When the occurrence this run belongs to was due: `next_fire`, but
    /// for a retry, whose `next_fire` is the retry's time. A recurring
    /// job's next occurrence follows from it, so a retry never moves the
    /// schedule.
    pub(crate) occurrence: Micros,
}

/// A job to store (upsert).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NewJob {
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) recurrence: String,
    pub(crate) next_fire: Micros,
    pub(crate) missed: MissedRuns,
    pub(crate) catch_up: Option<Micros>,
    /// What to do if the key is stored.
    pub(crate) if_exists: IfExists,
}

/// The jobs of a batch to upsert, in its order, each key once: of two jobs
/// with one key, the later is the one stored, the earlier ignored (on
/// every store alike, whatever their [`IfExists`]).
pub(crate) fn latest_per_key(jobs: &[NewJob]) -> Vec<&NewJob> {
    let mut latest: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        latest.insert(&job.key, i);
    }
    let mut kept: Vec<usize> = latest.into_values().collect();
    kept.sort_unstable();
    kept.into_iter().map(|i| &jobs[i]).collect()
}

/// A job an upsert stored (inserted, replaced or updated), as it now is;
/// a job kept untouched is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) next_fire: Micros,
    /// A run of it is in progress (it was replaced, or kept in time): it
    /// is not to be placed.
    pub(crate) running: bool,
}

/// A job to place, from [`Conn::due`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) key: String,
    /// Its handler's name.
    pub(crate) name: String,
    /// When it fires (for a running job: just after its lease ends).
    pub(crate) fire: Micros,
    /// It is a run whose lease ends: to take over if it is not renewed.
    pub(crate) expired: bool,
}

/// What [`Conn::due`] looks for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DueQuery<'a> {
    /// Jobs due by then (and runs whose lease ends by then).
    pub(crate) until: Micros,
    /// The handlers this scheduler has: only their jobs are listed, so
    /// that the overdue jobs of other handlers never fill the `limit`.
    pub(crate) names: &'a [String],
    /// The most jobs listed.
    pub(crate) limit: usize,
    /// Jobs of other handlers due (or leases ended) before then are
    /// listed too, at most `limit` of them: they have waited
    /// `unhandled_wait` for a scheduler that has their handler.
    pub(crate) unhandled_before: Micros,
    /// The poller: its own runs are listed only once their lease ended
    /// (it renews the others), so that they never fill the `limit`.
    pub(crate) owner: &'a str,
    pub(crate) now: Micros,
}

/// A run's fence: the row it claimed carries its owner's id and this run
/// number until the run ends, is taken over, or the job is cancelled.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Fence {
    pub(crate) key: String,
    pub(crate) run: i64,
}

/// How a run ends, for [`Conn::exchange`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// A one-shot job succeeded (or its occurrence was skipped) at `at`:
    /// the row goes, or is kept as *done* if `keep`.
    Done { at: Micros, keep: bool },
    /// A recurring job ran (or skipped an occurrence): it waits for
    /// `next_fire`, its attempts reset.
    Next { next_fire: Micros },
    /// It failed, or could not run here: it waits for `next_fire` with
    /// `error`, keeping its attempt count (less one if `uncount`: a run
    /// that never started, such as a job whose handler is not here).
    Retry {
        next_fire: Micros,
        error: String,
        uncount: bool,
    },
    /// It failed for the last time, at `at`.
    Dead { error: String, at: Micros },
    /// An occurrence of a recurring job failed for the last time: that
    /// occurrence is dead (so its history and metrics say), and the job
    /// goes on to `next_fire`, its attempts reset, keeping `error` as its
    /// last. One bad occurrence never ends a schedule (db-scheduler's and
    /// Oban's cron do the same).
    DeadOccurrence { next_fire: Micros, error: String },
    /// The claim is given back unrun: *scheduled* again at its fire time,
    /// the attempt not counted (the executor refused the run).
    Release,
}

/// The values a finish writes to a row that stays (every [`Finish`] but
/// a one-shot success not kept, which deletes it): one description of a
/// finish for both stores' statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ending<'a> {
    /// The row's new state.
    pub(crate) state: &'static str,
    /// Its new fire time (`None`: unchanged).
    pub(crate) next_fire: Option<Micros>,
    /// Its attempts reset to 0.
    pub(crate) reset: bool,
    /// Otherwise, attempts taken back (a run that never started).
    pub(crate) uncount: i64,
    /// Its last error (unless `keep_error`).
    pub(crate) error: Option<&'a str>,
    pub(crate) keep_error: bool,
    pub(crate) finished_at: Option<Micros>,
    /// The stored occurrence (`Row::occurrence`): `"keep"` it, `"retry"`
    /// (keep it, or take the fire time being left: the retry's
    /// occurrence), or anything else to clear it (`"next"`: the job goes
    /// on to an occurrence of its own, or ends).
    pub(crate) occurrence: &'static str,
}

impl Finish {
    /// True if it is the finish of a success (the job goes on, or is
    /// done).
    pub(crate) fn succeeded(&self) -> bool {
        matches!(self, Finish::Done { .. } | Finish::Next { .. })
    }

    /// True if it deletes the row: a one-shot success not kept.
    pub(crate) fn deletes(&self) -> bool {
        matches!(self, Finish::Done { keep: false, .. })
    }

    /// What it writes to a row that stays.
    pub(crate) fn ending(&self) -> Ending<'_> {
        let base = Ending {
            state: "scheduled",
            next_fire: None,
            reset: false,
            uncount: 0,
            error: None,
            keep_error: false,
            finished_at: None,
            occurrence: "next",
        };
        match self {
            Finish::Done { at, .. } => Ending {
                state: "done",
                finished_at: Some(*at),
                ..base
            },
            Finish::Next { next_fire } => Ending {
                next_fire: Some(*next_fire),
                reset: true,
                ..base
            },
            Finish::Retry {
                next_fire,
                error,
                uncount,
            } => Ending {
                next_fire: Some(*next_fire),
                uncount: i64::from(*uncount),
                error: Some(error),
                occurrence: "retry",
                ..base
            },
            Finish::Dead { error, at } => Ending {
                state: "dead",
                error: Some(error),
                finished_at: Some(*at),
                ..base
            },
            Finish::DeadOccurrence { next_fire, error } => Ending {
                next_fire: Some(*next_fire),
                reset: true,
                error: Some(error),
                ..base
            },
            Finish::Release => Ending {
                uncount: 1,
                keep_error: true,
                occurrence: "keep",
                ..base
            },
        }
    }
}

/// A claim of due jobs, for [`Conn::exchange`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Claim<'a> {
    /// The keys to claim, each once.
    pub(crate) keys: &'a [String],
    /// For each key, the handler the job was placed for: a job whose
    /// handler changed since is not claimed (it was placed for another).
    pub(crate) names: &'a [String],
    /// The run number of every run this claim starts (a key is claimed at
    /// most once by one claim, so key and number fence each run).
    pub(crate) run: i64,
    pub(crate) now: Micros,
    pub(crate) lease_until: Micros,
}

/// What one transaction of a scheduler's run loop stores (module doc).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange<'a> {
    pub(crate) owner: &'a Owner,
    /// Runs to end, first (they free the rows the claims may want).
    pub(crate) ends: &'a [(Fence, Finish)],
    /// Leases to extend to `.1`, second.
    pub(crate) renew: Option<(&'a [Fence], Micros)>,
    /// Claims, last (after the renewals: a lease of this owner's that
    /// ended under a stall is extended before a claim could take it over
    /// or a limit leave it out).
    pub(crate) claim: Option<Claim<'a>>,
    /// The runs' history: for each end, whether its occurrence was skipped
    /// (too late), and how many runs of each job are kept; `None`: no
    /// history is kept. Written when the end holds its fence, at `now`.
    pub(crate) history: Option<History<'a>>,
    pub(crate) now: Micros,
}

/// What an exchange writes to the history (see [`Exchange::history`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct History<'a> {
    pub(crate) skipped: &'a [bool],
    /// Each job keeps its last `keep` runs: older ones go as a new one is
    /// written.
    pub(crate) keep: usize,
}

/// The outcome a run's end records in the history, `None` for an end that
/// is not a run (a claim released unrun, a job whose handler is not here).
pub(crate) fn outcome_name(finish: &Finish, skipped: bool) -> Option<&'static str> {
    match finish {
        Finish::Done { .. } | Finish::Next { .. } if skipped => Some("skipped"),
        Finish::Done { .. } | Finish::Next { .. } => Some("succeeded"),
        Finish::Retry { uncount: false, .. } => Some("failed"),
        Finish::Dead { .. } | Finish::DeadOccurrence { .. } => Some("dead"),
        Finish::Retry { uncount: true, .. } | Finish::Release => None,
    }
}

/// The error a run's end records with its outcome.
pub(crate) fn error_of(finish: &Finish) -> Option<&str> {
    match finish {
        Finish::Retry { error, .. }
        | Finish::Dead { error, .. }
        | Finish::DeadOccurrence { error, .. } => Some(error),
        _ => None,
    }
}

/// What became of a run's end in an [`Exchange`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// The run held its fence: its finish was stored.
    Stored,
    /// The run held its fence, but its job was replaced meanwhile: the run
    /// ended, and the new job waits for `next_fire` (for the handler
    /// `name`); the finish's outcome was not applied.
    Superseded { name: String, next_fire: Micros },
    /// The run's fence was gone (taken over, or cancelled): nothing stored.
    Lost,
    /// Not stored yet: its row is locked by another transaction (an
    /// application's, on PostgreSQL). Sent again with a later exchange;
    /// its run is still held, and renewed.
    Deferred,
}

impl RunEnd {
    /// True unless the fence was gone.
    #[cfg(test)]
    pub(crate) fn held(&self) -> bool {
        !matches!(self, RunEnd::Lost)
    }
}

/// What an [`Exchange`] did.
#[derive(Debug, Default)]
pub(crate) struct Exchanged {
    /// For each end, what became of it.
    pub(crate) ended: Vec<RunEnd>,
    /// The rows claimed, as they are now (attempt counted).
    pub(crate) claimed: Vec<Row>,
    /// For each fence renewed: whether it still held.
    pub(crate) renewed: Vec<bool>,
    /// The keys to claim (with their handlers) that were not claimed
    /// because their handler was at its limit of runs at once.
    pub(crate) held_back: Vec<(String, String)>,
}

/// What a store's notifications said, in [`Conn::notified`]'s wait (only
/// PostgreSQL's say anything).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) enum Notice {
    /// Nothing.
    None,
    /// Jobs were scheduled: a fresh poll finds them.
    Fresh,
    /// Jobs were scheduled in a transaction of the application's, whose
    /// sequence numbers were drawn before it committed (others may have
    /// committed higher ones meanwhile): a full poll finds them.
    Full,
}

/// The payload of the notification an application's transaction sends
/// when it commits jobs (see [`Notice::Full`]).
#[cfg(feature = "postgres")]
pub(crate) const POLL_NOTICE: &str = "poll";

/// What a connection is for: a store may open it differently.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Role<'a> {
    /// The run loop's (claims, finishes, renewals) for `owner`: on
    /// PostgreSQL it holds the owner's session lock, which tells the other
    /// schedulers it is alive.
    Runs(#[cfg_attr(not(feature = "postgres"), allow(dead_code))] &'a Owner),
    /// The poll loop's (due jobs, take-overs, retention) for `owner`: on
    /// PostgreSQL it holds the owner's session lock too, so that one
    /// connection cut alone does not make a live owner look dead.
    Poll(#[cfg_attr(not(feature = "postgres"), allow(dead_code))] &'a Owner),
    /// The listener's, on a store that [notifies](Store::notifies).
    Listen,
}

/// Opens connections to one store.
pub(crate) trait Store: Send + Sync + std::fmt::Debug {
    /// A new connection for `role` (a PostgreSQL one reconnects by itself
    /// when it is lost: each call that finds it gone tries once to open it
    /// again, and fails with a transient error if it cannot).
    fn connect(&self, role: Role<'_>) -> Result<Box<dyn Conn>, StoreError>;

    /// True if the store tells its listeners when jobs are scheduled
    /// (PostgreSQL's `LISTEN`/`NOTIFY`): see [`Conn::notified`].
    fn notifies(&self) -> bool {
        false
    }

    /// True if a run loop's connection holds a session lock that tells
    /// others its owner is alive (see [`Conn::reap`], [`Conn::keep_alive`]).
    fn session_locks(&self) -> bool {
        false
    }
}

/// How often a run loop that holds runs makes sure its session (and lock)
/// is alive, on a store with session locks; an owner whose lock is missing
/// twice, this far apart or more, is gone.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_millis(100);

/// How long after an owner was first found without its lock a poll looks
/// again, to end its leases if it still is.
pub(crate) const REAP_CONFIRM: Duration = Duration::from_millis(250);

/// One connection to a store: the protocol of the module doc. Each call is
/// one transaction.
pub(crate) trait Conn: Send {
    /// Inserts the jobs, or does to the stored ones with their keys what
    /// their [`IfExists`] says (of two jobs with one key, the later is the
    /// one stored); the jobs stored, as they now are.
    fn upsert(&mut self, jobs: &[NewJob]) -> Result<Vec<Stored>, StoreError>;

    /// Up to `limit` jobs to place in memory, earliest first (see
    /// [`DueQuery`]): scheduled ones due by `until`, and running ones
    /// whose lease ends by `until` (due just after it ends: if it was not
    /// renewed by then, its owner crashed, stalled or lost the store, and
    /// the job is taken over; the poller's own runs included).
    fn due(&mut self, query: &DueQuery<'_>) -> Result<Vec<Due>, StoreError>;

    /// Ends the leases of the runs whose owner the store can tell is gone,
    /// so that they are due at once; how many. On PostgreSQL an owner is
    /// gone when its session lock has vanished (its connection closed) and
    /// stayed away since an earlier look found it missing: `suspects` are
    /// the owners (lock keys) that look found, and the owners missing now
    /// are returned for the next look. (A live owner whose connection broke
    /// takes its lock again within [`KEEP_ALIVE`]: two looks apart by more
    /// than that tell the two cases apart.) Nothing is ended until the
    /// server has been up for longer than `grace` (after a restart every
    /// owner needs a moment to take its lock again). A store that cannot
    /// tell ends nothing.
    fn reap(
        &mut self,
        _now: Micros,
        _grace: Duration,
        _suspects: &[i64],
    ) -> Result<(u64, Vec<i64>), StoreError> {
        Ok((0, Vec::new()))
    }

    /// Keeps the connection's session alive and its lock held (a
    /// connection found closed is opened again, and its lock taken
    /// again); on a store with [session locks](Store::session_locks) the
    /// run loop calls it every [`KEEP_ALIVE`] while it holds runs.
    fn keep_alive(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The jobs scheduled (or revived) after the sequence number `after`
    /// (the highest a poll saw), due by `until`, of the handlers `names`,
    /// at most `limit` of them, in the order they were scheduled; and the
    /// highest sequence number among them (`after` if none). Cheap: what a
    /// poll asks when it is told that jobs were scheduled. A schedule whose
    /// number was drawn before another's but committed after it may be
    /// missed: the next full poll places it.
    fn fresh(
        &mut self,
        after: i64,
        until: Micros,
        names: &[String],
        limit: usize,
    ) -> Result<(Vec<Due>, i64), StoreError>;

    /// The highest sequence number of a schedule so far.
    fn last_seq(&mut self) -> Result<i64, StoreError>;

    /// True if another connection committed to the store since this one
    /// last asked (SQLite's `data_version`): something may have been
    /// scheduled. A store that [notifies](Store::notifies) says false.
    fn changed(&mut self) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// Waits up to `timeout` for the store to say that jobs were
    /// scheduled, and says what it said (a connection opened for
    /// [`Role::Listen`] on a store that [notifies](Store::notifies)).
    fn notified(&mut self, _timeout: Duration) -> Result<Notice, StoreError> {
        Ok(Notice::None)
    }

    /// The run loop's transaction (module doc).
    fn exchange(&mut self, exchange: &Exchange<'_>) -> Result<Exchanged, StoreError>;

    /// The job `key`.
    fn get(&mut self, key: &str) -> Result<Option<Row>, StoreError>;

    /// The jobs `query` asks for, by fire time then key.
    fn query(&mut self, query: &ListQuery<'_>) -> Result<Vec<Row>, StoreError>;

    /// How many jobs there are in each state, paused or not.
    fn counts(&mut self) -> Result<Vec<(JobState, bool, u64)>, StoreError>;

    /// Pauses (or resumes) the job `key`; false if there is none. A resumed
    /// job gets a new sequence number, so that polls and other processes
    /// place it.
    fn set_paused(&mut self, key: &str, paused: bool) -> Result<bool, StoreError>;

    /// Pauses (or resumes) every job of the handler `name`; a resume gives
    /// its scheduled jobs new sequence numbers.
    fn set_name_paused(&mut self, name: &str, paused: bool) -> Result<(), StoreError>;

    /// The handler names paused.
    fn paused_names(&mut self) -> Result<Vec<String>, StoreError>;

    /// A scheduled job due at `now` (a new sequence number); false if
    /// `key` is not a scheduled job.
    fn run_now(&mut self, key: &str, now: Micros) -> Result<bool, StoreError>;

    /// The job `key` on a new schedule (`Recurrence::encode`) from
    /// `next_fire`, its payload and handler kept; a running one is marked
    /// replaced (its run goes on, and the new schedule waits for it). False
    /// if it is not scheduled or running.
    fn reschedule(
        &mut self,
        key: &str,
        recurrence: &str,
        next_fire: Micros,
    ) -> Result<bool, StoreError>;

    /// Sets (or with `None` removes) the handler `name`'s limit of runs at
    /// once, across processes.
    fn set_limit(&mut self, name: &str, limit: Option<u32>) -> Result<(), StoreError>;

    /// The limits, by handler name.
    fn limits(&mut self) -> Result<Vec<(String, u32)>, StoreError>;

    /// The last runs of `key` (or of every job), newest first, at most
    /// `limit`.
    fn runs(&mut self, key: Option<&str>, limit: usize) -> Result<Vec<RunRow>, StoreError>;

    /// How many runs ended since `since`, by outcome.
    fn run_counts(&mut self, since: Micros) -> Result<Vec<(String, u64)>, StoreError>;

    /// Removes the job `key`; false if there was none.
    fn delete(&mut self, key: &str) -> Result<bool, StoreError>;

    /// A dead job back to scheduled, due at `now`, its attempts reset.
    fn revive(&mut self, key: &str, now: Micros) -> Result<bool, StoreError>;

    /// Deletes what `retention` says is old: done and dead jobs (how many
    /// are returned), and runs of the history.
    fn clean(&mut self, retention: &Retention) -> Result<u64, StoreError>;
}

/// The most claims, and the most finishes, one exchange carries: the run
/// loop sends the rest in its next one. (Renewals all go in one: a lease
/// left for a later exchange could end meanwhile.)
pub(crate) const BATCH_LIMIT: usize = 1000;

//! What an operator reads: [`JobQuery`] (which jobs to list),
//! [`JobCounts`], and the history's [`RunInfo`].

use std::time::SystemTime;

use crate::store::{JobState, RunRow};
use crate::time;

/// Which jobs [`DurableScheduler::jobs`](crate::DurableScheduler::jobs)
/// lists: every filter set, ordered by next fire time, then key, a page at
/// a time (100 by default; the next page starts [`after`](JobQuery::after)
/// the last job of this one).
///
/// ```
/// use chronopool_durable::{JobQuery, JobState};
///
/// let late_reports = JobQuery::new()
///     .state(JobState::Scheduled)
///     .handler("report")
///     .key_prefix("report-eu-")
///     .limit(20);
/// # let _ = late_reports;
/// ```
#[derive(Clone, Debug)]
pub struct JobQuery {
    pub(crate) state: Option<JobState>,
    pub(crate) paused: Option<bool>,
    pub(crate) name: Option<String>,
    pub(crate) key_prefix: Option<String>,
    pub(crate) due_before: Option<SystemTime>,
    pub(crate) after: Option<(SystemTime, String)>,
    pub(crate) limit: usize,
}

impl Default for JobQuery {
    fn default() -> Self {
        JobQuery::new()
    }
}

impl JobQuery {
    /// Every job, the first 100.
    pub fn new() -> JobQuery {
        JobQuery {
            state: None,
            paused: None,
            name: None,
            key_prefix: None,
            due_before: None,
            after: None,
            limit: 100,
        }
    }

    /// Only the jobs in `state`.
    #[must_use]
    pub fn state(mut self, state: JobState) -> JobQuery {
        self.state = Some(state);
        self
    }

    /// Only the paused jobs (by themselves or by their handler), or only
    /// the others.
    #[must_use]
    pub fn paused(mut self, paused: bool) -> JobQuery {
        self.paused = Some(paused);
        self
    }

    /// Only the jobs of the handler `name`.
    #[must_use]
    pub fn handler(mut self, name: impl Into<String>) -> JobQuery {
        self.name = Some(name.into());
        self
    }

    /// Only the jobs whose key starts with `prefix`.
    #[must_use]
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> JobQuery {
        self.key_prefix = Some(prefix.into());
        self
    }

    /// Only the jobs whose next fire time is before `t` (with
    /// `state(Scheduled)` and `t` now: the late ones).
    #[must_use]
    pub fn due_before(mut self, t: SystemTime) -> JobQuery {
        self.due_before = Some(t);
        self
    }

    /// The page after the job `key` that fires at `next_fire` (the last
    /// of the page before).
    #[must_use]
    pub fn after(mut self, next_fire: SystemTime, key: impl Into<String>) -> JobQuery {
        self.after = Some((next_fire, key.into()));
        self
    }

    /// At most `limit` jobs.
    #[must_use]
    pub fn limit(mut self, limit: usize) -> JobQuery {
        self.limit = limit;
        self
    }
}

/// How many jobs are in each state
/// ([`DurableScheduler::counts`](crate::DurableScheduler::counts)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobCounts {
    /// Waiting for their next fire time, not paused.
    pub scheduled: u64,
    /// Paused (by themselves or their handler), not running.
    pub paused: u64,
    /// Running.
    pub running: u64,
    /// Dead.
    pub dead: u64,
    /// Done (kept by [`Config::keep_done`](crate::Config::keep_done)).
    pub done: u64,
}

impl JobCounts {
    pub(crate) fn of(counts: &[(JobState, bool, u64)]) -> JobCounts {
        let mut c = JobCounts::default();
        for &(state, paused, n) in counts {
            match state {
                JobState::Running => c.running += n,
                JobState::Dead => c.dead += n,
                JobState::Done => c.done += n,
                JobState::Scheduled if paused => c.paused += n,
                JobState::Scheduled => c.scheduled += n,
            }
        }
        c
    }
}

/// How a run ended, in the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunOutcome {
    /// Its handler succeeded.
    Succeeded,
    /// It failed and will be retried.
    Failed,
    /// It failed for the last time: the job is dead (a recurring job's
    /// occurrence is, and the job goes on to its next).
    Dead,
    /// Its occurrence was later than the job's catch-up window: not run.
    Skipped,
}

impl RunOutcome {
    /// Its name in the store, and in the CLI's output.
    pub fn name(self) -> &'static str {
        match self {
            RunOutcome::Succeeded => "succeeded",
            RunOutcome::Failed => "failed",
            RunOutcome::Dead => "dead",
            RunOutcome::Skipped => "skipped",
        }
    }

    pub(crate) fn of_name(name: &str) -> Option<RunOutcome> {
        [
            RunOutcome::Succeeded,
            RunOutcome::Failed,
            RunOutcome::Dead,
            RunOutcome::Skipped,
        ]
        .into_iter()
        .find(|o| o.name() == name)
    }
}

/// A run that ended, from the history
/// ([`DurableScheduler::history`](crate::DurableScheduler::history)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunInfo {
    /// Its job's key.
    pub key: String,
    /// Its handler's name.
    pub name: String,
    /// The id of the scheduler that ran it (128 random bits, in hex).
    pub owner: String,
    /// That scheduler's readable name ([`Config::name`](crate::Config::name)).
    pub owner_name: Option<String>,
    /// Which attempt it was.
    pub attempt: u32,
    /// When it was due.
    pub due: SystemTime,
    /// When it was claimed.
    pub started_at: Option<SystemTime>,
    /// When it ended.
    pub ended_at: SystemTime,
    /// How it ended (`None`: a name this version does not know).
    pub outcome: Option<RunOutcome>,
    /// Its error, if it failed.
    pub error: Option<String>,
}

impl From<RunRow> for RunInfo {
    fn from(r: RunRow) -> Self {
        RunInfo {
            outcome: RunOutcome::of_name(&r.outcome),
            key: r.key,
            name: r.name,
            owner: r.owner,
            owner_name: r.owner_name,
            attempt: r.attempt,
            due: time::system_time(r.due),
            started_at: r.started_at.map(time::system_time),
            ended_at: time::system_time(r.ended_at),
            error: r.error,
        }
    }
}

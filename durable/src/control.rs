//! The operator's verbs on [`DurableScheduler`]: pause and resume, run
//! now, reschedule, limits, backfill, and the listings (jobs, counts,
//! late jobs, history). Every one is stored, so every process on the store
//! honours it: a pause at its next claim, a resume or a run-now at its next
//! fresh poll (at once with notifications, within `Config::poll_interval`
//! without).

use std::time::{Duration, SystemTime};

use crate::error::DurableError;
use crate::job::Job;
use crate::listing::{JobCounts, JobQuery, RunInfo, RunOutcome};
use crate::schedule::{Recurrence, Schedule};
use crate::scheduler::{DurableScheduler, JobInfo};
use crate::store::ListQuery;
use crate::time;

/// How many periods (rounded up) `span` holds, both positive.
fn periods_in(span: i64, period: i64) -> i64 {
    let periods = span.unsigned_abs().div_ceil(period.unsigned_abs());
    i64::try_from(periods).unwrap_or(i64::MAX)
}

/// The most occurrences one [`backfill`](DurableScheduler::backfill) runs.
pub const MAX_BACKFILL: usize = 10_000;

impl DurableScheduler {
    /// Pauses the job `key`: it keeps its schedule and is neither placed
    /// nor claimed, in any process, until [`resume`](Self::resume)d (a run
    /// in progress goes on). False if there is no such job.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn pause(&self, key: &str) -> Result<bool, DurableError> {
        self.api(|conn| conn.set_paused(key, true))
    }

    /// Resumes the paused job `key`: what it missed meanwhile is handled by
    /// its [`MissedRuns`](chronopool::MissedRuns) policy and catch-up
    /// window, as after downtime. False if there is no such job.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn resume(&self, key: &str) -> Result<bool, DurableError> {
        let resumed = self.api(|conn| conn.set_paused(key, false))?;
        if resumed {
            self.place_now_if_due(key)?;
        }
        Ok(resumed)
    }

    /// Pauses every job of the handler `name`, those scheduled later
    /// included, until [`resume_handler`](Self::resume_handler).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn pause_handler(&self, name: &str) -> Result<(), DurableError> {
        self.api(|conn| conn.set_name_paused(name, true))
    }

    /// Resumes the handler `name`'s jobs (those paused one by one stay
    /// paused).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn resume_handler(&self, name: &str) -> Result<(), DurableError> {
        self.api(|conn| conn.set_name_paused(name, false))?;
        self.shared.poll_now();
        Ok(())
    }

    /// The handlers whose jobs are paused, by name.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn paused_handlers(&self) -> Result<Vec<String>, DurableError> {
        self.api(|conn| conn.paused_names())
    }

    /// Makes the scheduled job `key` due now (its schedule goes on after
    /// this run as after any). False if it is not scheduled (running, dead:
    /// see [`retry`](Self::retry), done, or gone). A paused job stays
    /// paused, and runs when resumed.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn run_now(&self, key: &str) -> Result<bool, DurableError> {
        let now = self.shared.now_micros();
        let made_due = self.api(|conn| conn.run_now(key, now))?;
        if made_due {
            self.place_now_if_due(key)?;
        }
        Ok(made_due)
    }

    /// Puts the job `key` on `schedule`, its handler, payload and policies
    /// kept. A run in progress goes on, and the new schedule waits for it
    /// to end (as for [`IfExists::Replace`](crate::IfExists::Replace)).
    /// False if the job is not scheduled or running (a dead one:
    /// [`retry`](Self::retry)).
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`] for a schedule that cannot fire,
    /// [`DurableError::Store`] if the store failed.
    pub fn reschedule(&self, key: &str, schedule: Schedule) -> Result<bool, DurableError> {
        let now = self.shared.now_micros();
        let (recurrence, first) = schedule.first(now)?;
        let recurrence = match schedule {
            Schedule::At(_) => format!("once at {first}"),
            _ => recurrence.encode(),
        };
        let rescheduled = self.api(|conn| conn.reschedule(key, &recurrence, first))?;
        if rescheduled {
            self.place_now_if_due(key)?;
        }
        Ok(rescheduled)
    }

    /// Limits the runs of the handler `name` at once to `limit`, across
    /// every process on the store (`None`: no limit, the default). A due
    /// job over the limit waits until a run of its handler ends; it is
    /// claimed within a quarter of a second after that. A limit of 0
    /// holds every job of the handler back (as a pause does, but without
    /// pausing them).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn set_limit(&self, name: &str, limit: Option<u32>) -> Result<(), DurableError> {
        self.api(|conn| conn.set_limit(name, limit))?;
        self.shared.poll_now();
        Ok(())
    }

    /// The handlers' limits of runs at once, by name.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn limits(&self) -> Result<Vec<(String, u32)>, DurableError> {
        self.api(|conn| conn.limits())
    }

    /// Runs, once each, the occurrences of the recurring job `key` in
    /// `[from, to)` (a period's in the phase of the job's fire times), as
    /// one-shot jobs due at their occurrences (now, for past ones), keyed
    /// `"{key}@backfill-<µs since the epoch>"`, so that a backfill of the
    /// same range again while they wait adds nothing; each sees its
    /// occurrence's time as [`JobContext::due`](crate::JobContext::due).
    /// The job's own schedule is untouched. How many occurrences there
    /// were.
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`] if `key` is not a recurring job or the
    /// range holds more than [`MAX_BACKFILL`] occurrences,
    /// [`DurableError::Store`] if the store failed.
    pub fn backfill(
        &self,
        key: &str,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<usize, DurableError> {
        let Some(row) = self.api(|conn| conn.get(key))? else {
            return Err(DurableError::Schedule(format!("no job {key:?}")));
        };
        let recurrence = Recurrence::decode(&row.recurrence)?;
        if matches!(recurrence, Recurrence::Once) {
            return Err(DurableError::Schedule(format!(
                "{key:?} is a one-shot job: it has no occurrences to backfill"
            )));
        }
        let (from, to) = (time::micros_saturating(from), time::micros_saturating(to));
        let mut jobs = Vec::new();
        // A period's occurrences keep the job's phase: they are its next
        // occurrence's time (not a retry's) less (or plus) whole periods.
        // A cron expression's are its own.
        let phase = row.occurrence;
        let mut next = match recurrence {
            // The earliest occurrence at or after `from`: whole periods
            // back from the occurrence (rounded down), or forward (up).
            Recurrence::Every(period) if phase >= from => {
                let periods = (phase - from) / period;
                Some(phase - periods.saturating_mul(period))
            }
            Recurrence::Every(period) => {
                let periods = periods_in(from - phase, period);
                Some(time::add(phase, periods.saturating_mul(period)))
            }
            _ => recurrence.next_after(from.saturating_sub(1))?,
        };
        while let Some(at) = next.filter(|&at| at < to) {
            if jobs.len() == MAX_BACKFILL {
                return Err(DurableError::Schedule(format!(
                    "more than {MAX_BACKFILL} occurrences of {key:?} in the range: \
                     backfill a shorter one at a time"
                )));
            }
            jobs.push(
                Job::new(
                    format!("{key}@backfill-{at}"),
                    row.name.clone(),
                    row.payload.clone(),
                    Schedule::At(time::system_time(at)),
                )
                .missed_runs(row.missed),
            );
            next = recurrence.next_after(at)?;
        }
        let n = jobs.len();
        self.schedule_all(jobs)?;
        Ok(n)
    }

    /// The jobs `query` asks for, by next fire time then key.
    ///
    /// ```
    /// # fn demo(jobs: &chronopool_durable::DurableScheduler) -> Result<(), chronopool_durable::DurableError> {
    /// use chronopool_durable::{JobQuery, JobState};
    ///
    /// let mut page = jobs.jobs(&JobQuery::new().state(JobState::Scheduled).limit(50))?;
    /// while let Some(last) = page.last() {
    ///     for job in &page {
    ///         println!("{} at {:?}", job.key, job.next_fire);
    ///     }
    ///     let next = JobQuery::new().state(JobState::Scheduled).limit(50);
    ///     page = jobs.jobs(&next.after(last.next_fire, last.key.clone()))?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn jobs(&self, query: &JobQuery) -> Result<Vec<JobInfo>, DurableError> {
        let q = ListQuery {
            state: query.state,
            paused: query.paused,
            name: query.name.as_deref(),
            key_prefix: query.key_prefix.as_deref(),
            due_before: query.due_before.map(time::micros_saturating),
            after: query
                .after
                .as_ref()
                .map(|(t, key)| (time::micros_saturating(*t), key.as_str())),
            limit: query.limit,
        };
        let rows = self.api(|conn| conn.query(&q))?;
        Ok(rows.into_iter().map(JobInfo::from).collect())
    }

    /// How many jobs are in each state.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn counts(&self) -> Result<JobCounts, DurableError> {
        let counts = self.api(|conn| conn.counts())?;
        Ok(JobCounts::of(&counts))
    }

    /// The scheduled jobs most past their fire time, not paused: the most
    /// late first, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn late_jobs(&self, limit: usize) -> Result<Vec<JobInfo>, DurableError> {
        let now = time::system_time(self.shared.now_micros());
        self.jobs(
            &JobQuery::new()
                .state(crate::JobState::Scheduled)
                .paused(false)
                .due_before(now)
                .limit(limit),
        )
    }

    /// The last runs of the job `key` (`None`: of every job), newest first,
    /// at most `limit` (the history keeps
    /// [`Config::keep_runs`](crate::Config::keep_runs) of each job, for
    /// [`Config::keep_runs_for`](crate::Config::keep_runs_for)).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn history(&self, key: Option<&str>, limit: usize) -> Result<Vec<RunInfo>, DurableError> {
        let rows = self.api(|conn| conn.runs(key, limit))?;
        Ok(rows.into_iter().map(RunInfo::from).collect())
    }

    /// How many runs ended within the last `within`, by outcome (from the
    /// history).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn recent_runs(&self, within: Duration) -> Result<Vec<(RunOutcome, u64)>, DurableError> {
        let since = self
            .shared
            .now_micros()
            .saturating_sub(time::duration_micros_saturating(within));
        let counts = self.api(|conn| conn.run_counts(since))?;
        Ok(counts
            .into_iter()
            .filter_map(|(name, n)| RunOutcome::of_name(&name).map(|o| (o, n)))
            .collect())
    }

    /// Places the job `key` in this scheduler's timer if it is due soon
    /// (the other processes learn of it by their polls or notifications).
    fn place_now_if_due(&self, key: &str) -> Result<(), DurableError> {
        if let Some(row) = self.api(|conn| conn.get(key))? {
            if row.state == crate::JobState::Scheduled && !row.paused {
                let now = self.shared.now_micros();
                self.shared
                    .place_if_near(key, &row.name, row.next_fire, now);
            }
        }
        Ok(())
    }
}

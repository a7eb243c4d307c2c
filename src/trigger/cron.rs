//! [`Cron`]: calendar schedules in a time zone, as a trigger; and
//! [`CronError`]. What users rely on (the forms, daylight saving, missed
//! runs) is in `Cron`'s own doc; this is why it is so.
//!
//! # Who does what
//!
//! The expression is parsed by `croner`, which also finds the next wall
//! time that matches it (Vixie cron's fields, names and ranges, and the
//! six-field form with seconds); the time zone database and the wall time
//! to instant mapping are `jiff`'s (the system's IANA database, else the
//! copy bundled in the binary). Neither is written here.
//! `cron/expression.rs` decides what reaches croner and which field to
//! blame when it refuses; `cron/zone.rs` names the instants of a wall
//! time; this file applies the daylight-saving rule to them.
//!
//! croner has daylight-saving handling of its own, close to the rule in
//! `Cron`'s doc, but it calls a job "fixed-time" only when its second,
//! minute and hour are single values: `"0,30 1 * * *"` would run four
//! times in a repeated hour, and `"30 2,14 * * *"` not at all in a skipped
//! one. So croner searches wall times only (jiff's civil `DateTime`, no
//! zone) and each wall time it finds is resolved here.
//!
//! # Why the hour field decides
//!
//! Daylight saving moves the clock by an hour or so. A job that names its
//! hours is pinned to the wall clock: its user meant "at 01:30", and a day
//! has one 01:30, so it runs once in a fold, and once at the jump for a
//! time the gap took. A job whose hour field is `*` or `*/n` is about
//! elapsed time: "every 15 minutes" should not stop for an hour in spring
//! nor run twice as often in autumn, and by taking every instant its wall
//! times name it runs 15 minutes of real time apart across both. This is
//! Vixie cron's and cronie's split (`cron.8`: fixed-time jobs are moved or
//! not repeated, wildcard jobs run as the clock says), except that they
//! also count a `*` minute under named hours (`"*/15 1 * * *"`) as
//! wildcard, which runs it eight times in a repeated 01:00 hour and never
//! on a day without 02:00; here it is a job at 01:00 to 01:45, as written.
//!
//! # Finding the next occurrence
//!
//! Instants grow with wall times except in a fold: so the next occurrence
//! after `t` is the first instant after `t` of the wall times after `t`'s,
//! searched in wall-time order (a fixed-time job in the second pass of a
//! fold passes over first-pass instants there, at most an hour of them),
//! and, for an interval job in the first pass, also of the second pass,
//! whose wall times start before `t`'s: the nearer of the two searches.
//!
//! # Missed runs
//!
//! The reference for the next occurrence is the later of now and the last
//! run's due time (`Skip`), or the last run's due time (`Burst`): never
//! before the run that was due, so a wall clock stepped back never runs an
//! occurrence twice. Quartz's cron default is the same "fire once now";
//! Spring's `CronTrigger` computes from the last completion, which is
//! `Skip` too. `Delay` shifts a fixed rate by the lateness, but a calendar
//! has no period to shift ("02:30, delayed by 40 minutes" is not a daily
//! schedule), so it does what `Skip` does rather than invent one.

mod error;
mod expression;
mod zone;

#[cfg(all(test, not(loom)))]
mod tests;

use std::fmt;
use std::time::SystemTime;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::{MissedRuns, Next, Trigger, TriggerContext};

pub use error::CronError;
use zone::Instants;

/// A cron schedule in a time zone, as a [`Trigger`]: the task runs at each
/// wall time the expression matches ([`Cron::parse`] lists the forms),
/// read in the zone given by [`in_time_zone`](Cron::in_time_zone) (UTC by
/// default).
///
/// ```
/// use chronopool::trigger::Cron;
/// use chronopool::ScheduledExecutor;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let report = pool.schedule_with_trigger(
///     || std::ops::ControlFlow::<()>::Continue(()), // send the report
///     Cron::parse("0 30 7 * * MON-FRI")?.in_time_zone("Asia/Shanghai")?,
/// )?;
/// assert!(report.cancel());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The trigger answers with wall times ([`Next::AtSystemTime`]): a run is
/// due when the wall clock reads it, so a step of the wall clock moves it
/// (see [wall time](super#wall-time)). The first run is the first
/// occurrence after the task is scheduled; each next one, the first after
/// the run that was due (and, unless [`MissedRuns::Burst`], after now).
/// An expression with no occurrence left ends the task
/// ([`Ended::ByTrigger`](super::Ended::ByTrigger)).
///
/// # Daylight saving
///
/// A time zone maps each wall time to an instant, except where daylight
/// saving makes a wall time happen twice (the clock goes back: a *fold*)
/// or not at all (the clock jumps forward: a *gap*). Then:
///
/// * **A wall time in a gap runs once, at the instant the clock jumps
///   to.** In America/New_York on 2026-03-08 the clock goes from 01:59:59
///   EST to 03:00:00 EDT; `"30 2 * * *"` runs at 03:00 EDT (07:00 UTC)
///   that day. Several skipped wall times (`"0,30 2 * * *"`), or a skipped
///   one and the one the clock jumps to (`"0 2,3 * * *"`), make one run.
/// * **A wall time in a fold runs once, at its first occurrence.** On
///   2026-11-01 New York goes from 01:59:59 EDT back to 01:00:00 EST;
///   `"30 1 * * *"` runs at 01:30 EDT (05:30 UTC), not again at 01:30 EST.
/// * **Interval jobs**, those whose hour field is `*` or `*/n`
///   (`"*/15 * * * *"`, `"0 * * * *"`, `@hourly`, the six-field
///   `"*/15 * * * * *"`), run at every instant their wall times name:
///   both instants of a repeated wall time, none for a skipped one. So
///   they keep real time: every 15 minutes stays 15 minutes apart across
///   both transitions, and `@hourly` runs 23 times on the spring day and
///   25 on the autumn one.
///
/// | New York, 2026 | 03-08 (01:59:59 EST → 03:00 EDT) | 11-01 (01:59:59 EDT → 01:00 EST) |
/// |---|---|---|
/// | `30 2 * * *` | 03:00 EDT | 02:30 EST |
/// | `30 1 * * *` | 01:30 EST | 01:30 EDT only |
/// | `*/15 1 * * *` | 01:00, 01:15, 01:30, 01:45 EST | 01:00 to 01:45 EDT only |
/// | `*/15 2 * * *` | 03:00 EDT, once | 02:00 to 02:45 EST |
/// | `*/15 * * * *` | …, 01:45 EST, 03:00 EDT, … | …, 01:45 EDT, 01:00 EST, …, 01:45 EST, 02:00 EST, … |
///
/// # Missed runs
///
/// A run is late when the pool was busy, the process was suspended, or the
/// wall clock was stepped forward past it. [`missed_runs`](Cron::missed_runs)
/// decides what happens to the occurrences missed meanwhile, drawn for an
/// hourly job whose process is suspended from 10:30 to 13:20:
///
/// ```text
/// due:       10:00      11:00      12:00      13:00      14:00
/// run:        |#|   [ suspended 10:30 to 13:20 ]
/// Skip:                                   |#|            |#|   (13:20, once for 11:00 to 13:00; then 14:00)
/// Burst:                                  |#|#|#|        |#|   (11:00, 12:00, 13:00 back to back; then 14:00)
/// Delay:                                  as Skip
/// ```
///
/// * [`MissedRuns::Skip`] (the default): the late run runs once, and the
///   next is the first occurrence after it ends (Quartz's "fire once now",
///   its default for cron triggers).
/// * [`MissedRuns::Burst`]: every missed occurrence runs, back to back,
///   each the next occurrence after the one before (Quartz's "ignore
///   misfire policy").
/// * [`MissedRuns::Delay`]: as `Skip`. Delaying shifts a fixed rate by
///   the lateness, but a calendar has no period to shift.
///
/// Whatever the policy, an occurrence runs at most once: after a run, a
/// wall clock stepped back makes the next run wait for the wall clock to
/// reach it, and does not run the same occurrence again.
#[derive(Clone)]
pub struct Cron {
    /// The expression as given.
    text: String,
    expression: expression::Expression,
    zone: TimeZone,
    missed: MissedRuns,
}

impl Cron {
    /// Parses a cron expression, in UTC until
    /// [`in_time_zone`](Self::in_time_zone) says otherwise.
    ///
    /// The forms:
    ///
    /// * five fields, to the minute: `minute hour day-of-month month
    ///   day-of-week`, as in a crontab (`"30 2 * * *"`: 02:30 every day);
    /// * six fields, to the second, seconds first: `second minute hour
    ///   day-of-month month day-of-week` (`"*/15 * * * * *"`: every 15
    ///   seconds);
    /// * `@yearly` (or `@annually`), `@monthly`, `@weekly`, `@daily` (or
    ///   `@midnight`) and `@hourly`.
    ///
    /// A field is `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`,
    /// or a list of these separated by commas. Months are 1-12 or
    /// `JAN`-`DEC`, days of the week 0-7 (0 and 7 are Sunday) or
    /// `SUN`-`SAT`, names in any case. When both day fields are given a
    /// day matching either runs, as in Vixie cron. croner's extensions are
    /// accepted too: `L` (last day of the month, last such weekday), `W`
    /// (nearest weekday), `#` (`FRI#2`, the second Friday).
    ///
    /// # Errors
    ///
    /// A [`CronError`] that names the malformed field and says what is
    /// wrong with it.
    ///
    /// ```
    /// use chronopool::trigger::Cron;
    ///
    /// for expr in ["0 * * * *", "*/15 * * * * *", "0 9-17/2 * JAN,JUL MON-FRI", "@weekly"] {
    ///     assert!(Cron::parse(expr).is_ok(), "{expr}");
    /// }
    /// let err = Cron::parse("0 25 * * *").unwrap_err();
    /// assert_eq!(err.field(), Some("hour"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn parse(expr: &str) -> Result<Cron, CronError> {
        Ok(Cron {
            text: expr.to_owned(),
            expression: expression::parse(expr)?,
            zone: TimeZone::UTC,
            missed: MissedRuns::Skip,
        })
    }

    /// The same schedule in the time zone of this IANA name
    /// (`"Europe/Berlin"`, `"America/New_York"`, `"UTC"`), read from the
    /// system's time zone database, or from the copy bundled in the
    /// binary where the system has none.
    ///
    /// # Errors
    ///
    /// A [`CronError`] (with [`is_time_zone`](CronError::is_time_zone)) if
    /// the database has no zone of that name.
    ///
    /// ```
    /// use chronopool::trigger::Cron;
    /// # let utc = |s: &str| std::time::SystemTime::from(s.parse::<jiff::Timestamp>().unwrap());
    ///
    /// let daily = Cron::parse("0 2 * * *")?.in_time_zone("Asia/Shanghai")?;
    /// // 02:00 in Shanghai (UTC+8, no daylight saving) is 18:00 UTC.
    /// assert_eq!(daily.next_after(utc("2026-06-01T12:00:00Z")), Some(utc("2026-06-01T18:00:00Z")));
    /// assert!(Cron::parse("0 2 * * *")?.in_time_zone("Asia/Atlantis").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_time_zone(mut self, name: &str) -> Result<Cron, CronError> {
        self.zone = jiff::tz::db()
            .get(name)
            .map_err(|e| CronError::time_zone(name, e))?;
        Ok(self)
    }

    /// What to do about occurrences missed while a run was late
    /// ([`MissedRuns::Skip`] unless set; see [missed runs](Cron#missed-runs)).
    ///
    /// ```
    /// use chronopool::trigger::{Cron, MissedRuns};
    ///
    /// // Every hour's report, even those due while the machine slept.
    /// let hourly = Cron::parse("@hourly")?.missed_runs(MissedRuns::Burst);
    /// # drop(hourly);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn missed_runs(mut self, missed: MissedRuns) -> Self {
        self.missed = missed;
        self
    }

    /// The first occurrence strictly after `t`, or `None` if there is none
    /// (`"0 0 30 2 *"`, February 30th; or past the year 5000). Pure: what
    /// the trigger answers, for a given reference time.
    ///
    /// ```
    /// use chronopool::trigger::Cron;
    /// # let utc = |s: &str| std::time::SystemTime::from(s.parse::<jiff::Timestamp>().unwrap());
    ///
    /// let ny = Cron::parse("30 2 * * *")?.in_time_zone("America/New_York")?;
    /// // 2026-03-08 has no 02:30 in New York: the run is when the clock
    /// // jumps from 02:00 EST to 03:00 EDT.
    /// assert_eq!(ny.next_after(utc("2026-03-08T05:00:00Z")), Some(utc("2026-03-08T07:00:00Z")));
    /// // Strictly after: from that run, the next day's 02:30 EDT.
    /// assert_eq!(ny.next_after(utc("2026-03-08T07:00:00Z")), Some(utc("2026-03-09T06:30:00Z")));
    ///
    /// assert_eq!(Cron::parse("0 0 30 2 *")?.next_after(utc("2026-01-01T00:00:00Z")), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_after(&self, t: SystemTime) -> Option<SystemTime> {
        let t = Timestamp::try_from(t).ok()?;
        self.next_after_timestamp(t).map(SystemTime::from)
    }

    fn next_after_timestamp(&self, t: Timestamp) -> Option<Timestamp> {
        let wall = self.zone.to_datetime(t);
        let next = self.first_after(wall, false, t);
        if !self.expression.by_elapsed_time {
            // A fixed-time job never runs in the second pass of a fold, so
            // the wall times after `t`'s hold every occurrence after `t`.
            return next;
        }
        // An interval job in the first pass of a fold has the whole second
        // pass ahead, from wall times before `t`'s.
        match zone::second_pass_start(&self.zone, t, wall) {
            None => next,
            Some(back) => match (next, self.first_after(back, true, t)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// The first occurrence after `t` of the wall times the expression
    /// matches from `from` on (`from` itself if `inclusive`), in wall-time
    /// order. Instants grow with wall times except in a fold, where those
    /// of the first pass are at or before `t` and are passed over.
    fn first_after(
        &self,
        mut from: DateTime,
        mut inclusive: bool,
        t: Timestamp,
    ) -> Option<Timestamp> {
        let by_elapsed_time = self.expression.by_elapsed_time;
        loop {
            let wall = self
                .expression
                .schedule
                .find_next_occurrence(&from, inclusive)
                .ok()?;
            let found = match zone::instants(&self.zone, wall)? {
                Instants::Once(at) => Some(at),
                Instants::Twice(first, _) if first > t => Some(first),
                Instants::Twice(_, second) if by_elapsed_time => Some(second),
                Instants::Twice(..) => None,
                Instants::Skipped { jump } => (!by_elapsed_time).then_some(jump),
            };
            match found {
                Some(at) if at > t => return Some(at),
                _ => (from, inclusive) = (wall, false),
            }
        }
    }
}

impl Trigger for Cron {
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next> {
        let after = match (self.missed, ctx.last_due_system_time()) {
            (_, None) => ctx.system_time(),
            (MissedRuns::Burst, Some(due)) => due,
            // Skip and Delay: after now, and never at or before the run
            // that was due (the wall clock may have been stepped back).
            (_, Some(due)) => ctx.system_time().max(due),
        };
        self.next_after(after).map(Next::AtSystemTime)
    }

    fn records_run_times(&self) -> bool {
        false
    }
}

impl fmt::Debug for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cron")
            .field("expression", &self.text)
            .field("time_zone", &self.zone.iana_name().unwrap_or("(unnamed)"))
            .field("missed_runs", &self.missed)
            .finish()
    }
}

//! [`Schedule`]: when a durable job runs; what a recurring job does about
//! the runs it missed while no process ran it is the core's
//! [`MissedRuns`], with the same meanings.
//!
//! A schedule is stored as text beside the job's next fire time
//! ([`Recurrence`]), so that any process can work out the time after that.
//! Every time is a whole microsecond (`time.rs`): a time given with a finer
//! part is rounded up, so a job never runs before the time it was given and
//! a period is never shortened.

use std::time::{Duration, SystemTime};

use chronopool::trigger::Cron;
use chronopool::MissedRuns;

use crate::error::DurableError;
use crate::time::{self, Micros, EARLIEST, LATEST};

/// When a durable job runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Schedule {
    /// Once, at a wall time (rounded up to the microsecond).
    At(SystemTime),
    /// Once, after a delay from when it is scheduled (stored as the wall
    /// time it ends at).
    After(Duration),
    /// Again and again: the first run a period after it is scheduled, then
    /// every period after the previous occurrence's due time (a period is
    /// rounded up to the microsecond). Retries of a failed occurrence run
    /// at their back-off's times and never move the schedule: the next
    /// occurrence is a period after the failed one's.
    Every(Duration),
    /// Again and again, at the times of a cron expression (5 or 6 fields,
    /// or `@daily` and friends) in an IANA time zone (see
    /// [`chronopool::trigger::Cron`]).
    Cron {
        /// The expression.
        expression: String,
        /// The time zone, for instance `"Europe/Berlin"` or `"UTC"`.
        time_zone: String,
    },
}

impl Schedule {
    /// `expression` in `time_zone`, checked now.
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`] if the expression or the zone is invalid.
    ///
    /// ```
    /// use chronopool_durable::Schedule;
    ///
    /// let nightly = Schedule::cron("0 2 * * *", "Asia/Shanghai")?;
    /// assert!(Schedule::cron("0 2 * * *", "Mars/Olympus").is_err());
    /// # Ok::<(), chronopool_durable::DurableError>(())
    /// ```
    pub fn cron(expression: &str, time_zone: &str) -> Result<Self, DurableError> {
        let schedule = Schedule::Cron {
            expression: expression.to_owned(),
            time_zone: time_zone.to_owned(),
        };
        schedule.recurrence()?;
        Ok(schedule)
    }

    /// What is stored of it, and its first fire time after `now`.
    pub(crate) fn first(&self, now: Micros) -> Result<(Recurrence, Micros), DurableError> {
        let recurrence = self.recurrence()?;
        let too_far = || {
            DurableError::Schedule(format!(
                "{self:?} falls after 9999-12-31, the last time a store holds"
            ))
        };
        let first = match self {
            Schedule::At(at) => time::micros(*at).ok_or_else(|| {
                DurableError::Schedule(format!(
                    "{at:?} is outside the years 1 to 9999, which a store holds"
                ))
            })?,
            Schedule::After(delay) => time::duration_micros(*delay)
                .and_then(|d| now.checked_add(d))
                .filter(|&t| t <= time::LATEST)
                .ok_or_else(too_far)?,
            Schedule::Every(_) => {
                let Recurrence::Every(period) = recurrence else {
                    unreachable!("an Every schedule recurs every period")
                };
                now.checked_add(period)
                    .filter(|&t| t <= time::LATEST)
                    .ok_or_else(too_far)?
            }
            Schedule::Cron { .. } => recurrence.next_after(now)?.ok_or_else(|| {
                DurableError::Schedule("the cron expression never fires again".into())
            })?,
        };
        Ok((recurrence, first))
    }

    fn recurrence(&self) -> Result<Recurrence, DurableError> {
        match self {
            Schedule::At(_) | Schedule::After(_) => Ok(Recurrence::Once),
            Schedule::Every(period) if period.is_zero() => {
                Err(DurableError::Schedule("a zero period".into()))
            }
            Schedule::Every(period) => time::duration_micros(*period)
                .map(Recurrence::Every)
                .ok_or_else(|| {
                    DurableError::Schedule(format!(
                        "a period of {period:?} is longer than 9,999 years"
                    ))
                }),
            Schedule::Cron {
                expression,
                time_zone,
            } => {
                Recurrence::cron(expression, time_zone)?;
                Ok(Recurrence::Cron {
                    expression: expression.clone(),
                    time_zone: time_zone.clone(),
                })
            }
        }
    }
}

/// The stored form of a schedule: what comes after a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Recurrence {
    /// Nothing: a one-shot job.
    Once,
    /// A fixed period, in microseconds (at least 1).
    Every(Micros),
    /// A cron expression in a time zone.
    Cron {
        expression: String,
        time_zone: String,
    },
}

impl Recurrence {
    fn cron(expression: &str, time_zone: &str) -> Result<Cron, DurableError> {
        Cron::parse(expression)
            .and_then(|cron| cron.in_time_zone(time_zone))
            .map_err(|e| DurableError::Schedule(e.to_string()))
    }

    /// The text stored in the job's row.
    pub(crate) fn encode(&self) -> String {
        match self {
            Recurrence::Once => "once".to_owned(),
            Recurrence::Every(period) => format!("every {period}us"),
            Recurrence::Cron {
                expression,
                time_zone,
            } => format!("cron {time_zone} {expression}"),
        }
    }

    /// For people: `once`, `every 1h 30m`, `cron 0 2 * * * in UTC`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Recurrence::Once => "once".to_owned(),
            Recurrence::Every(us) => {
                let mut left = *us;
                let mut parts = Vec::new();
                for (unit, size) in [
                    ("d", 86_400_000_000),
                    ("h", 3_600_000_000),
                    ("m", 60_000_000),
                    ("s", 1_000_000),
                    ("ms", 1_000),
                    ("us", 1),
                ] {
                    if left >= size {
                        parts.push(format!("{}{unit}", left / size));
                        left %= size;
                    }
                }
                format!("every {}", parts.join(" "))
            }
            Recurrence::Cron {
                expression,
                time_zone,
            } => format!("cron {expression} in {time_zone}"),
        }
    }

    /// The inverse of [`encode`](Self::encode).
    pub(crate) fn decode(text: &str) -> Result<Recurrence, DurableError> {
        let bad = || DurableError::Schedule(format!("a stored schedule it cannot read: {text:?}"));
        // A one-shot at a wall time keeps its time in its text (`once at
        // <µs>`), so that scheduling the same one again is seen as the same
        // job whatever its next fire time became (a retry's, say).
        if text == "once"
            || text
                .strip_prefix("once at ")
                .is_some_and(|t| t.parse::<i64>().is_ok())
        {
            return Ok(Recurrence::Once);
        }
        if let Some(period) = text.strip_prefix("every ") {
            let period = period.strip_suffix("us").ok_or_else(bad)?;
            return match period.parse() {
                Ok(us) if us > 0 => Ok(Recurrence::Every(us)),
                _ => Err(bad()),
            };
        }
        let rest = text.strip_prefix("cron ").ok_or_else(bad)?;
        let (time_zone, expression) = rest.split_once(' ').ok_or_else(bad)?;
        Ok(Recurrence::Cron {
            expression: expression.to_owned(),
            time_zone: time_zone.to_owned(),
        })
    }

    /// The first occurrence strictly after `t`; `None` for a one-shot job,
    /// and for a job whose next occurrence would fall after the last time a
    /// store holds (a period from `t` saturates there, and an occurrence
    /// at the very last time has none after it: so a job never runs again
    /// and again at the end of time).
    pub(crate) fn next_after(&self, t: Micros) -> Result<Option<Micros>, DurableError> {
        let next = match self {
            Recurrence::Once => None,
            Recurrence::Every(period) => Some(time::add(t, *period)),
            Recurrence::Cron {
                expression,
                time_zone,
            } => Recurrence::cron(expression, time_zone)?
                .next_after(time::system_time(t))
                .map(time::micros_saturating),
        };
        Ok(next.filter(|&next| next > t))
    }

    /// The fire time after a run that was due at `due` and ran at `now`
    /// (`None`: the job has no more occurrences), by `missed`, the core's
    /// [`MissedRuns`] with the same meanings:
    ///
    /// * `Burst`: every missed occurrence runs in turn: the next is the
    ///   one after `due`, even if it is past.
    /// * `Skip`: the missed ones are dropped and the schedule keeps its
    ///   phase: the first occurrence after `now`.
    /// * `Delay`: the schedule shifts: a period after `now` for a fixed
    ///   period (a cron expression has no period: its first occurrence
    ///   after `now`).
    ///
    /// A run on time (no occurrence missed) goes on at `due`'s next under
    /// all three, keeping the rate.
    pub(crate) fn after_run(
        &self,
        due: Micros,
        now: Micros,
        missed: MissedRuns,
    ) -> Result<Option<Micros>, DurableError> {
        let Some(next) = self.next_after(due)? else {
            return Ok(None);
        };
        if next > now || missed == MissedRuns::Burst {
            return Ok(Some(next));
        }
        match (self, missed) {
            (Recurrence::Every(period), MissedRuns::Delay) => Ok(Some(time::add(now, *period))),
            // The next slot on the period's grid after now.
            (Recurrence::Every(period), _) => {
                // Within the storable range (a row another tool wrote may
                // hold any integer), `now - due` and the slots fit.
                let (due, now) = (due.clamp(EARLIEST, LATEST), now.clamp(EARLIEST, LATEST));
                let slots = (now - due) / period + 1;
                Ok(Some(time::add(due, slots.saturating_mul(*period))))
            }
            _ => self.next_after(now),
        }
    }
}

/// The stored name of a [`MissedRuns`] policy.
pub(crate) fn missed_name(missed: MissedRuns) -> &'static str {
    match missed {
        MissedRuns::Burst => "burst",
        MissedRuns::Delay => "delay",
        _ => "skip",
    }
}

/// The inverse of [`missed_name`] (an unknown name reads as `Skip`).
pub(crate) fn missed_of(name: &str) -> MissedRuns {
    match name {
        "burst" => MissedRuns::Burst,
        "delay" => MissedRuns::Delay,
        _ => MissedRuns::Skip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_described_for_people() {
        assert_eq!(Recurrence::Once.describe(), "once");
        assert_eq!(Recurrence::Every(5_400_000_000).describe(), "every 1h 30m");
        assert_eq!(Recurrence::Every(1_500).describe(), "every 1ms 500us");
        let cron = Recurrence::Cron {
            expression: "0 2 * * *".into(),
            time_zone: "Asia/Shanghai".into(),
        };
        assert_eq!(cron.describe(), "cron 0 2 * * * in Asia/Shanghai");
    }

    const S: Micros = 1_000_000;

    #[test]
    fn a_recurrence_reads_back_what_it_wrote() {
        for r in [
            Recurrence::Once,
            Recurrence::Every(1_500),
            Recurrence::Cron {
                expression: "0 2 * * *".into(),
                time_zone: "Europe/Berlin".into(),
            },
        ] {
            assert_eq!(Recurrence::decode(&r.encode()).unwrap(), r);
        }
        for bad in [
            "sometimes",
            "every 0us",
            "every -5us",
            "every 5",
            "cron UTC",
        ] {
            assert!(Recurrence::decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_period_keeps_its_grid_and_missed_runs_follow_the_policy() {
        let every = Recurrence::Every(S);
        // On time: due + period, whatever the policy.
        for missed in [MissedRuns::Burst, MissedRuns::Skip, MissedRuns::Delay] {
            assert_eq!(
                every.after_run(5 * S, 5 * S + 10, missed).unwrap(),
                Some(6 * S)
            );
        }
        // 3.5 periods late.
        let (due, now) = (5 * S, 8 * S + S / 2);
        assert_eq!(
            every.after_run(due, now, MissedRuns::Burst).unwrap(),
            Some(6 * S)
        );
        assert_eq!(
            every.after_run(due, now, MissedRuns::Skip).unwrap(),
            Some(9 * S)
        );
        assert_eq!(
            every.after_run(due, now, MissedRuns::Delay).unwrap(),
            Some(9 * S + S / 2)
        );
        assert_eq!(
            Recurrence::Once
                .after_run(due, now, MissedRuns::Burst)
                .unwrap(),
            None
        );
    }

    #[test]
    fn sub_microsecond_times_and_periods_round_up_never_down() {
        let now = 1_000 * S;
        let (r, first) = Schedule::Every(Duration::from_nanos(1_900_000))
            .first(now)
            .unwrap();
        assert_eq!((r.clone(), first), (Recurrence::Every(1_900), now + 1_900));
        let (_, first) = Schedule::After(Duration::from_nanos(1)).first(now).unwrap();
        assert_eq!(first, now + 1);
    }

    #[test]
    fn what_cannot_be_stored_is_an_error_and_what_is_computed_saturates() {
        let now = 1_000 * S;
        for schedule in [
            Schedule::After(Duration::MAX),
            Schedule::Every(Duration::MAX),
            Schedule::At(time::system_time(time::LATEST) + Duration::from_secs(1)),
            Schedule::At(time::system_time(time::EARLIEST) - Duration::from_secs(1)),
            Schedule::Every(Duration::ZERO),
        ] {
            assert!(
                matches!(schedule.first(now), Err(DurableError::Schedule(_))),
                "{schedule:?}"
            );
        }
        let (r, first) = Schedule::Every(Duration::from_secs(5_000 * 365 * 86_400))
            .first(now)
            .unwrap();
        assert_eq!(r.next_after(first).unwrap(), Some(time::LATEST));
        assert_eq!(
            r.next_after(time::LATEST).unwrap(),
            None,
            "no occurrence after the last"
        );
        // Dates before 1970 are times like any other.
        let (_, first) = Schedule::After(Duration::from_secs(3600))
            .first(-10 * S)
            .unwrap();
        assert_eq!(first, 3590 * S);
    }

    #[test]
    fn cron_schedules_fire_in_their_time_zone() {
        let daily = Schedule::cron("0 2 * * *", "UTC").unwrap();
        let (recurrence, first) = daily.first(0).unwrap();
        assert_eq!(first, 2 * 3600 * S);
        assert_eq!(recurrence.next_after(first).unwrap(), Some(26 * 3600 * S));
        assert!(Schedule::cron("not cron", "UTC").is_err());
        assert!(Schedule::cron("0 2 * * *", "Mars/Olympus").is_err());
        // Before 1970 too.
        let (_, first) = daily.first(-86_400 * S).unwrap();
        assert_eq!(first, -86_400 * S + 2 * 3600 * S);
    }
}

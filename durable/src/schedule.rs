//! [`Schedule`]: when a durable job runs, and [`Misfire`]: what a
//! recurring job does about the runs it missed while no process ran it.
//!
//! A schedule is stored as text beside the job's next fire time, so that
//! any process can work out the time after that (see [`Recurrence`]).

use std::time::{Duration, SystemTime};

use chronopool::trigger::Cron;

use crate::error::DurableError;
use crate::time::{from_millis, millis, millis_of};

/// When a durable job runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Schedule {
    /// Once, at a wall time.
    At(SystemTime),
    /// Once, after a delay from when it is scheduled (stored as the wall
    /// time it ends at).
    After(Duration),
    /// Again and again: the first run a period after it is scheduled, then
    /// every period after the previous run's due time.
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
    pub fn cron(expression: &str, time_zone: &str) -> Result<Self, DurableError> {
        let schedule = Schedule::Cron {
            expression: expression.to_owned(),
            time_zone: time_zone.to_owned(),
        };
        schedule.recurrence()?;
        Ok(schedule)
    }

    /// What is stored of it, and its first fire time after `now`.
    pub(crate) fn first(&self, now: SystemTime) -> Result<(Recurrence, SystemTime), DurableError> {
        let recurrence = self.recurrence()?;
        let first = match self {
            Schedule::At(at) => *at,
            Schedule::After(delay) => now + *delay,
            Schedule::Every(period) => now + *period,
            Schedule::Cron { .. } => recurrence
                .next_after(now)?
                .ok_or_else(|| DurableError::Schedule("the cron expression never fires".into()))?,
        };
        Ok((recurrence, first))
    }

    fn recurrence(&self) -> Result<Recurrence, DurableError> {
        match self {
            Schedule::At(_) | Schedule::After(_) => Ok(Recurrence::Once),
            Schedule::Every(period) if period.is_zero() => {
                Err(DurableError::Schedule("a zero period".into()))
            }
            Schedule::Every(period) => Ok(Recurrence::Every(millis_of(*period).max(1))),
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

/// What a recurring job does about runs it missed (its process was down
/// when they were due).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Misfire {
    /// Run once now for all of them, then go on from now (the default).
    #[default]
    RunOnce,
    /// Run none of them: go on with the next occurrence after now.
    Skip,
    /// Run every one of them, one after the other, then go on.
    RunAll,
}

impl Misfire {
    pub(crate) fn code(self) -> i64 {
        match self {
            Misfire::RunOnce => 0,
            Misfire::Skip => 1,
            Misfire::RunAll => 2,
        }
    }

    pub(crate) fn from_code(code: i64) -> Misfire {
        match code {
            1 => Misfire::Skip,
            2 => Misfire::RunAll,
            _ => Misfire::RunOnce,
        }
    }
}

/// The stored form of a schedule: what comes after a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Recurrence {
    /// Nothing: a one-shot job.
    Once,
    /// A fixed period, in milliseconds.
    Every(i64),
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
            Recurrence::Every(period) => format!("every {period}"),
            Recurrence::Cron {
                expression,
                time_zone,
            } => format!("cron {time_zone} {expression}"),
        }
    }

    /// The inverse of [`encode`](Self::encode).
    pub(crate) fn decode(text: &str) -> Result<Recurrence, DurableError> {
        let bad = || DurableError::Schedule(format!("a stored schedule it cannot read: {text:?}"));
        if text == "once" {
            return Ok(Recurrence::Once);
        }
        if let Some(period) = text.strip_prefix("every ") {
            return period.parse().map(Recurrence::Every).map_err(|_| bad());
        }
        let rest = text.strip_prefix("cron ").ok_or_else(bad)?;
        let (time_zone, expression) = rest.split_once(' ').ok_or_else(bad)?;
        Ok(Recurrence::Cron {
            expression: expression.to_owned(),
            time_zone: time_zone.to_owned(),
        })
    }

    /// The first occurrence strictly after `t`; `None` for a one-shot job
    /// (or a cron expression with no later time).
    pub(crate) fn next_after(&self, t: SystemTime) -> Result<Option<SystemTime>, DurableError> {
        Ok(match self {
            Recurrence::Once => None,
            Recurrence::Every(period) => Some(from_millis(millis(t).saturating_add(*period))),
            Recurrence::Cron {
                expression,
                time_zone,
            } => Recurrence::cron(expression, time_zone)?.next_after(t),
        })
    }

    /// The fire time after a run that was due at `due` and ran at `now`,
    /// under `misfire`: from the due time for `RunAll` (every missed one
    /// runs in turn), else the first occurrence after now. For a fixed
    /// period without misses that is `due + period`, keeping the rate.
    pub(crate) fn after_run(
        &self,
        due: SystemTime,
        now: SystemTime,
        misfire: Misfire,
    ) -> Result<Option<SystemTime>, DurableError> {
        let Some(next) = self.next_after(due)? else {
            return Ok(None);
        };
        if next > now || misfire == Misfire::RunAll {
            return Ok(Some(next));
        }
        match self {
            // The next slot on the period's grid after now.
            Recurrence::Every(period) => {
                let behind = millis(now) - millis(due);
                let slots = behind / period + 1;
                Ok(Some(from_millis(millis(due) + slots * period)))
            }
            _ => self.next_after(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> SystemTime {
        from_millis(ms)
    }

    #[test]
    fn a_recurrence_reads_back_what_it_wrote() {
        for r in [
            Recurrence::Once,
            Recurrence::Every(1500),
            Recurrence::Cron {
                expression: "0 2 * * *".into(),
                time_zone: "Europe/Berlin".into(),
            },
        ] {
            assert_eq!(Recurrence::decode(&r.encode()).unwrap(), r);
        }
        assert!(Recurrence::decode("sometimes").is_err());
    }

    #[test]
    fn a_period_keeps_its_grid_and_misfires_follow_the_policy() {
        let every = Recurrence::Every(1000);
        // On time: due + period.
        assert_eq!(
            every
                .after_run(at(5000), at(5010), Misfire::RunOnce)
                .unwrap(),
            Some(at(6000))
        );
        // 3.5 periods late: RunOnce and Skip go on at the next slot after now,
        // RunAll at the next missed one.
        let (due, now) = (at(5000), at(8500));
        assert_eq!(
            every.after_run(due, now, Misfire::RunOnce).unwrap(),
            Some(at(9000))
        );
        assert_eq!(
            every.after_run(due, now, Misfire::Skip).unwrap(),
            Some(at(9000))
        );
        assert_eq!(
            every.after_run(due, now, Misfire::RunAll).unwrap(),
            Some(at(6000))
        );
        assert_eq!(
            Recurrence::Once
                .after_run(due, now, Misfire::RunAll)
                .unwrap(),
            None
        );
    }

    #[test]
    fn cron_schedules_fire_in_their_time_zone() {
        let daily = Schedule::cron("0 2 * * *", "UTC").unwrap();
        let (recurrence, first) = daily.first(at(0)).unwrap();
        assert_eq!(first, at(2 * 3600 * 1000));
        assert_eq!(
            recurrence.next_after(first).unwrap(),
            Some(at(26 * 3600 * 1000))
        );
        assert!(Schedule::cron("not cron", "UTC").is_err());
        assert!(Schedule::cron("0 2 * * *", "Mars/Olympus").is_err());
    }
}

//! [`FixedRate`] and [`FixedDelay`]: the JDK's periodic schedules, as
//! triggers; and [`MissedRuns`], what a fixed-rate task does about runs it
//! missed.

use std::time::Duration;

use crate::time::Nanos;

use super::{Next, Trigger, TriggerContext};
use crate::time::clock::nanos;

/// What a fixed-rate task does when a run ends after the next one was due
/// (the task ran long, or the pool was busy), drawn for a period of 10
/// time units with the run due at 20 ending at 45:
///
/// ```text
/// due:        0    10    20    30    40    50    60
/// run:        |#|   |#|   |##########|
/// Burst:                             |#|#|#| |#|   (30 and 40 at once, then 50 on time)
/// Skip:                                      |#|   (30 and 40 dropped; 50 on time)
/// Delay:                                       |#|   |#|   (55, 65, ...: the schedule shifts)
/// ```
///
/// A fixed-rate task never runs concurrently with itself, whatever the
/// policy: late runs happen one after another, never in parallel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissedRuns {
    /// Catch up: run the missed runs back to back, each as soon as the
    /// previous one ends, until the task is on schedule again. Run `n` stays
    /// due at `start + n × period`. The JDK's behaviour, and the default of
    /// [`schedule_at_fixed_rate`](crate::ScheduledExecutor::schedule_at_fixed_rate).
    ///
    /// ```
    /// use chronopool::{MissedRuns, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let beat = pool.schedule_at_fixed_rate_with(
    ///     || { /* send a heartbeat */ },
    ///     Duration::ZERO,
    ///     Duration::from_secs(1),
    ///     MissedRuns::Burst,
    /// )?;
    /// beat.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[default]
    Burst,
    /// Drop the missed runs: the next run is at the first `start + n ×
    /// period` after the late run ended. The schedule keeps its phase.
    ///
    /// ```
    /// use chronopool::{MissedRuns, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let sample = pool.schedule_at_fixed_rate_with(
    ///     || { /* sample a gauge */ },
    ///     Duration::ZERO,
    ///     Duration::from_millis(100),
    ///     MissedRuns::Skip,
    /// )?;
    /// sample.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    Skip,
    /// Shift the schedule: the next run is one period after the late run
    /// ended, and the rate continues from there.
    ///
    /// ```
    /// use chronopool::{MissedRuns, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let poll = pool.schedule_at_fixed_rate_with(
    ///     || { /* poll a service */ },
    ///     Duration::ZERO,
    ///     Duration::from_millis(500),
    ///     MissedRuns::Delay,
    /// )?;
    /// poll.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    Delay,
}

/// Runs every `period`, counted from the first run's due time, with a
/// policy for late runs ([`MissedRuns`]): the schedule of
/// [`schedule_at_fixed_rate`](crate::ScheduledExecutor::schedule_at_fixed_rate),
/// as a trigger (for [`reschedule`](crate::PeriodicHandle::reschedule), or
/// to start with a closure that can end the task).
///
/// ```
/// use chronopool::trigger::FixedRate;
/// use chronopool::{MissedRuns, ScheduledExecutor};
/// use std::ops::ControlFlow;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let mut left = 3;
/// let countdown = pool.schedule_with_trigger(
///     move || { left -= 1; if left == 0 { ControlFlow::Break("done") } else { ControlFlow::Continue(()) } },
///     FixedRate::new(Duration::from_millis(1)).missed_runs(MissedRuns::Skip),
/// )?;
/// assert_eq!(countdown.join()?.into_value(), Some("done"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FixedRate {
    period: Nanos,
    initial_delay: Nanos,
    missed: MissedRuns,
}

impl FixedRate {
    /// Every `period`, the first run at once, late runs caught up
    /// ([`MissedRuns::Burst`]).
    ///
    /// # Panics
    ///
    /// If `period` is zero.
    pub fn new(period: Duration) -> Self {
        assert!(!period.is_zero(), "FixedRate: the period must not be zero");
        FixedRate {
            period: nanos(period).max(1),
            initial_delay: 0,
            missed: MissedRuns::Burst,
        }
    }

    /// The first run `delay` after the task is scheduled. (A task that has
    /// run and is [rescheduled](crate::PeriodicHandle::reschedule) to a
    /// fixed rate runs next a period after its last run was due.)
    pub fn initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = nanos(delay);
        self
    }

    /// What to do about runs missed while a run was late.
    pub fn missed_runs(mut self, missed: MissedRuns) -> Self {
        self.missed = missed;
        self
    }

    /// The period, in nanoseconds.
    pub(crate) fn period_nanos(&self) -> Nanos {
        self.period
    }

    /// The deadline after a run that was due at `due` and ended at
    /// `now()`. The clock is read only where the answer depends on it (not
    /// for [`MissedRuns::Burst`]): a clock read costs as much as the rest
    /// of a re-arm.
    #[inline]
    pub(crate) fn after(&self, due: Nanos, now: impl FnOnce() -> Nanos) -> Nanos {
        let (period, missed) = (self.period, self.missed);
        let next = due.saturating_add(period);
        if missed == MissedRuns::Burst {
            return next;
        }
        let now = now();
        if next > now {
            return next;
        }
        match missed {
            MissedRuns::Burst => next,
            MissedRuns::Skip => {
                let missed_periods = (now - due) / period;
                due.saturating_add(period.saturating_mul(missed_periods + 1))
            }
            MissedRuns::Delay => now.saturating_add(period),
        }
    }
}

impl Trigger for FixedRate {
    #[inline]
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next> {
        let at = match ctx.last_due_nanos() {
            None => ctx.now_nanos().saturating_add(self.initial_delay),
            Some(due) => {
                let next = self.after(due, || ctx.now_nanos());
                let on_schedule = due.saturating_add(self.period);
                if next > on_schedule {
                    match self.missed {
                        MissedRuns::Skip => ctx.note_missed((next - on_schedule) / self.period, 0),
                        _ => ctx.note_missed(0, 1),
                    }
                }
                next
            }
        };
        Some(Next::At(ctx.instant_at(at)))
    }

    fn records_run_times(&self) -> bool {
        false
    }
}

/// Runs `delay` after the end of each run: the schedule of
/// [`schedule_with_fixed_delay`](crate::ScheduledExecutor::schedule_with_fixed_delay),
/// as a trigger.
///
/// ```
/// use chronopool::trigger::FixedDelay;
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let poll = pool.schedule_at_fixed_rate(|| {}, Duration::ZERO, Duration::from_secs(1))?;
/// // From the next run on, one minute after each run ends.
/// assert!(poll.reschedule(FixedDelay::new(Duration::from_secs(60))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FixedDelay {
    delay: Nanos,
    initial_delay: Nanos,
}

impl FixedDelay {
    /// `delay` after the end of each run; the first run at once.
    ///
    /// # Panics
    ///
    /// If `delay` is zero.
    pub fn new(delay: Duration) -> Self {
        assert!(!delay.is_zero(), "FixedDelay: the delay must not be zero");
        FixedDelay {
            delay: nanos(delay).max(1),
            initial_delay: 0,
        }
    }

    /// The first run `delay` after the task is scheduled. (A task that has
    /// run and is rescheduled to a fixed delay runs next `delay` after the
    /// reschedule.)
    pub fn initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = nanos(delay);
        self
    }
}

impl Trigger for FixedDelay {
    #[inline]
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next> {
        let at = if ctx.runs() == 0 {
            ctx.now_nanos().saturating_add(self.initial_delay)
        } else {
            ctx.now_nanos().saturating_add(self.delay)
        };
        Some(Next::At(ctx.instant_at(at)))
    }

    fn records_run_times(&self) -> bool {
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn rate(missed: MissedRuns) -> FixedRate {
        FixedRate {
            period: 10,
            initial_delay: 0,
            missed,
        }
    }

    #[test]
    fn on_time_runs_keep_the_rate_whatever_the_policy() {
        for missed in [MissedRuns::Burst, MissedRuns::Skip, MissedRuns::Delay] {
            assert_eq!(rate(missed).after(20, || 25), 30);
            assert_eq!(rate(missed).after(20, || 29), 30);
        }
    }

    #[test]
    fn late_runs_follow_the_policy() {
        // Due at 20, ended at 45 (the timeline in MissedRuns' doc).
        assert_eq!(rate(MissedRuns::Burst).after(20, || 45), 30);
        assert_eq!(rate(MissedRuns::Burst).after(30, || 45), 40);
        assert_eq!(rate(MissedRuns::Burst).after(40, || 45), 50);
        assert_eq!(rate(MissedRuns::Skip).after(20, || 45), 50);
        assert_eq!(
            rate(MissedRuns::Skip).after(20, || 50),
            60,
            "a run ending on a boundary"
        );
        assert_eq!(rate(MissedRuns::Delay).after(20, || 45), 55);
    }

    #[test]
    fn huge_periods_saturate() {
        let p = FixedRate::new(Duration::MAX).missed_runs(MissedRuns::Skip);
        assert_eq!(p.after(5, || 6), u64::MAX);
    }

    #[test]
    #[should_panic(expected = "must not be zero")]
    fn a_zero_period_is_refused() {
        let _ = FixedRate::new(Duration::ZERO);
    }
}

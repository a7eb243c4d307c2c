//! [`Interval`]: ticks at a fixed rate, for a loop in async code.

use std::future::poll_fn;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::trigger::{FixedRate, MissedRuns};

use super::Sleep;

/// Ticks every period, timed by the executor's timer: made by
/// [`ScheduledExecutor::interval`](crate::ScheduledExecutor::interval).
/// The first tick ends at once; tick `n` is due at `start + n × period`.
/// A tick awaited late is handled by its [`MissedRuns`] (by default
/// [`Burst`](MissedRuns::Burst): the missed ticks end at once, one per
/// call, until it is on schedule again), as a fixed-rate task is.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let mut every = pool.interval(Duration::from_millis(5));
/// futures_lite::future::block_on(async {
///     let first = every.tick().await;
///     let second = every.tick().await;
///     assert_eq!(second - first, Duration::from_millis(5));
/// });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// After the executor discards its timers at shutdown, every tick ends at
/// once (see the [module docs](crate::future)): a loop on one should also
/// watch for the end of its work.
#[derive(Debug)]
pub struct Interval {
    sleep: Sleep,
    schedule: FixedRate,
}

impl Interval {
    pub(crate) fn new(sleep: Sleep, period: Duration) -> Self {
        Interval {
            sleep,
            schedule: FixedRate::new(period),
        }
    }

    /// What a late tick does about the ticks it missed.
    pub fn missed_runs(mut self, missed: MissedRuns) -> Self {
        self.schedule = self.schedule.missed_runs(missed);
        self
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.schedule.period_nanos())
    }

    /// Waits for the next tick; returns when it was due.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// [`tick`](Self::tick) as a poll, for hand-written futures: `Ready`
    /// with the tick's due time once it is due (and the next tick set up),
    /// else `Pending`, to be woken when it is.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if self.sleep.poll_sleep(cx).is_pending() {
            return Poll::Pending;
        }
        let due = self.sleep.deadline_nanos();
        let clock = &self.sleep.pool().timer.clock;
        let at = clock.instant_of_saturating(due);
        let next = self.schedule.after(due, || clock.now());
        self.sleep.reset_nanos(next);
        Poll::Ready(at)
    }

    /// Starts again: the next tick is due one period from now.
    pub fn reset(&mut self) {
        let now = self.sleep.pool().timer.clock.now();
        self.sleep
            .reset_nanos(now.saturating_add(self.schedule.period_nanos()));
    }
}

//! [`Sleep`]: a future that ends at a deadline on the executor's clock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::pool::Pool;
use crate::sync::{Arc, CellArc};
use crate::task::{Alarm, Delayed, Rang, TaskContext};
use crate::time::Nanos;
use crate::timer::driver::help;

/// A future that ends at a deadline, timed by the executor's timer: made
/// by [`ScheduledExecutor::sleep`](crate::ScheduledExecutor::sleep) and
/// [`sleep_until`](crate::ScheduledExecutor::sleep_until). It is never
/// early; it registers on its first poll, and dropping it before its
/// deadline takes it out of the timer. See the [module docs](crate::future).
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::{Duration, Instant};
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let start = Instant::now();
/// futures_lite::future::block_on(pool.sleep(Duration::from_millis(20)));
/// assert!(start.elapsed() >= Duration::from_millis(20));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a Sleep does nothing unless awaited or polled"]
pub struct Sleep {
    pool: Arc<Pool>,
    stage: Stage,
}

/// Where a [`Sleep`] is, with its deadline (kept by the alarm while it
/// waits). One enum, not a deadline, an `Option` of the alarm and one of
/// how it ended: a `Sleep` is 24 bytes where it was 32, which puts a boxed
/// one in a 32-byte malloc chunk instead of a 48-byte one
/// (`benches/README.md`, "`sleep-future`: where a sleep's time and bytes
/// go").
enum Stage {
    /// Not registered yet (made, reset, or not polled).
    Unpolled(Nanos),
    /// Registered: the alarm holds the deadline.
    Waiting(CellArc<Alarm>),
    /// Ended, at its deadline or discarded by a shut-down pool.
    Ended(Nanos, Rang),
}

impl Sleep {
    pub(crate) fn new(pool: Arc<Pool>, deadline: Nanos) -> Self {
        Sleep {
            pool,
            stage: Stage::Unpolled(deadline),
        }
    }

    /// When it ends.
    pub fn deadline(&self) -> Instant {
        self.pool
            .timer
            .clock
            .instant_of_saturating(self.deadline_nanos())
    }

    /// True once the deadline has passed (whether or not it was polled
    /// since); false before, and for a sleep the executor discarded at
    /// shutdown before its deadline.
    pub fn is_elapsed(&self) -> bool {
        let rang = match &self.stage {
            Stage::Ended(_, rang) => Some(*rang),
            // Rung but not polled since: how it rang (a sleep discarded by
            // `shutdown_now` is not elapsed, before or after a poll).
            Stage::Waiting(alarm) => alarm.rang(),
            Stage::Unpolled(_) => None,
        };
        match rang {
            Some(rang) => rang == Rang::AtDeadline,
            None => self.pool.timer.clock.now() >= self.deadline_nanos(),
        }
    }

    /// Sets a new deadline, as if this were a new sleep: the old
    /// registration is taken out of the timer, and the next poll registers
    /// the new one.
    pub fn reset(&mut self, deadline: Instant) {
        let deadline = self.pool.timer.clock.nanos_of(deadline);
        self.reset_nanos(deadline);
    }

    pub(crate) fn reset_nanos(&mut self, deadline: Nanos) {
        self.cancel();
        self.stage = Stage::Unpolled(deadline);
    }

    pub(crate) fn deadline_nanos(&self) -> Nanos {
        match &self.stage {
            Stage::Unpolled(deadline) | Stage::Ended(deadline, _) => *deadline,
            Stage::Waiting(alarm) => alarm.deadline(),
        }
    }

    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Takes the registration out of the timer, if it has not rung (the
    /// stage is then `Unpolled` again, with the same deadline).
    fn cancel(&mut self) {
        if matches!(self.stage, Stage::Waiting(_)) {
            let unpolled = Stage::Unpolled(self.deadline_nanos());
            if let Stage::Waiting(alarm) = std::mem::replace(&mut self.stage, unpolled) {
                let ctx: &dyn TaskContext = &*self.pool;
                // SAFETY: this future is the alarm's only poller (`&mut self`).
                unsafe { alarm.cancel(ctx) };
            }
        }
    }

    /// The poll, on `&mut self` (a `Sleep` is `Unpin`).
    pub(crate) fn poll_sleep(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let rang = match &self.stage {
            Stage::Ended(..) => return Poll::Ready(()),
            // SAFETY: this future is the alarm's only poller (`&mut self`).
            Stage::Waiting(alarm) => unsafe { alarm.poll(cx.waker(), &*self.pool) },
            &Stage::Unpolled(deadline) => self.register(deadline, cx.waker()),
        };
        match rang {
            Some(rang) => {
                // Drops the alarm, if it had one: it has rung.
                self.stage = Stage::Ended(self.deadline_nanos(), rang);
                Poll::Ready(())
            }
            None => Poll::Pending,
        }
    }

    /// The first poll: ends at once if the deadline has passed, else
    /// registers with the timer; then, still pending, rings what is due if
    /// the timer is behind (`timer::driver::help`). Only the first poll
    /// helps: it has read the clock already, where a re-poll would pay a
    /// read for it (11–15 ns a re-poll became 36–49 ns when every poll
    /// helped; `benches/README.md`, "A poll helps").
    fn register(&mut self, deadline: Nanos, waker: &Waker) -> Option<Rang> {
        let now = self.pool.timer.clock.now();
        if now >= deadline {
            return Some(Rang::AtDeadline);
        }
        // Registered before the timer sees it (`task/alarm.rs`): no locked
        // instruction for the waker.
        let (alarm, entry) = CellArc::pair(Alarm::waiting(deadline, waker.clone()));
        if !self.pool.set_alarm(entry) {
            // Shut down: no timer left to wait for (module doc).
            // SAFETY: the pool dropped its reference: the alarm is ours.
            unsafe { alarm.refused(&*self.pool) };
            return Some(Rang::Discarded);
        }
        // The timer may have rung it already.
        let rang = alarm.rang();
        self.stage = Stage::Waiting(alarm);
        if rang.is_none() && !self.pool.timer.clock.is_manual() {
            help::help(&*self.pool, now);
        }
        rang
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_sleep(cx)
    }
}

impl Drop for Sleep {
    /// Takes the registration out of the timer if it has not rung; the
    /// waker it holds is dropped here, never woken.
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline())
            .field("registered", &matches!(self.stage, Stage::Waiting(_)))
            .field("elapsed", &self.is_elapsed())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::ScheduledExecutor;
    use std::time::Duration;

    /// 24 bytes: a boxed `Sleep` is a 32-byte malloc chunk (`Stage`).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_sleep_is_three_words() {
        assert_eq!(std::mem::size_of::<Sleep>(), 24);
    }

    /// The deadline is read from each stage: made, registered, ended,
    /// reset, and registered again after a reset.
    #[test]
    fn the_deadline_survives_every_stage() {
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .build()
            .unwrap();
        let start = Instant::now();
        let mut sleep = pool.sleep_until(start + Duration::from_millis(30));
        let due = sleep.deadline();
        assert!(!sleep.is_elapsed());
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: std::sync::Arc<Self>) {}
        }
        // Not `Waker::noop`: newer than the crate's minimum Rust version.
        let waker = Waker::from(std::sync::Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        assert!(sleep.poll_sleep(&mut cx).is_pending());
        assert!(matches!(sleep.stage, Stage::Waiting(_)));
        assert_eq!(sleep.deadline(), due);
        futures_lite::future::block_on(&mut sleep);
        assert!(matches!(sleep.stage, Stage::Ended(_, Rang::AtDeadline)));
        assert_eq!(sleep.deadline(), due);
        assert!(sleep.is_elapsed());
        assert!(start.elapsed() >= Duration::from_millis(30));

        let later = Instant::now() + Duration::from_secs(3600);
        sleep.reset(later);
        assert!(!sleep.is_elapsed());
        assert!(sleep.poll_sleep(&mut cx).is_pending());
        let pool_of_sleep = sleep.pool.clone();
        let clock = &pool_of_sleep.timer.clock;
        assert_eq!(
            sleep.deadline_nanos(),
            clock.nanos_of(later),
            "from the alarm"
        );
        // Back to `Unpolled` with the new deadline, the alarm cancelled.
        let other = later + Duration::from_secs(60);
        sleep.reset(other);
        assert!(matches!(sleep.stage, Stage::Unpolled(_)));
        assert_eq!(sleep.deadline_nanos(), clock.nanos_of(other));
        drop(sleep);
        assert_eq!(pool.metrics().scheduled_tasks, 0);
    }
}

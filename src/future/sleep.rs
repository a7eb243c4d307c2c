//! [`Sleep`]: a future that ends at a deadline on the executor's clock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::pool::Pool;
use crate::sync::{Arc, CellArc};
use crate::task::{Alarm, Rang, TaskContext};
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
    deadline: Nanos,
    /// The registration, from the first poll until the end.
    alarm: Option<CellArc<Alarm>>,
    /// How it ended, once it has.
    ended: Option<Rang>,
}

impl Sleep {
    pub(crate) fn new(pool: Arc<Pool>, deadline: Nanos) -> Self {
        Sleep {
            pool,
            deadline,
            alarm: None,
            ended: None,
        }
    }

    /// When it ends.
    pub fn deadline(&self) -> Instant {
        self.pool.timer.clock.instant_of_saturating(self.deadline)
    }

    /// True once the deadline has passed (whether or not it was polled
    /// since); false before, and for a sleep the executor discarded at
    /// shutdown before its deadline.
    pub fn is_elapsed(&self) -> bool {
        match self.ended {
            Some(rang) => rang == Rang::AtDeadline,
            None => self.pool.timer.clock.now() >= self.deadline,
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
        self.deadline = deadline;
        self.ended = None;
    }

    pub(crate) fn deadline_nanos(&self) -> Nanos {
        self.deadline
    }

    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Takes the registration out of the timer, if it has not rung.
    fn cancel(&mut self) {
        if let Some(alarm) = self.alarm.take() {
            let ctx: &dyn TaskContext = &*self.pool;
            // SAFETY: this future is the alarm's only poller (`&mut self`).
            unsafe { alarm.cancel(ctx) };
        }
    }

    /// The poll, on `&mut self` (a `Sleep` is `Unpin`).
    pub(crate) fn poll_sleep(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.ended.is_some() {
            return Poll::Ready(());
        }
        let rang = match &self.alarm {
            // SAFETY: this future is the alarm's only poller (`&mut self`).
            Some(alarm) => unsafe { alarm.poll(cx.waker(), &*self.pool) },
            None => self.register(cx.waker()),
        };
        match rang {
            Some(rang) => {
                self.ended = Some(rang);
                self.alarm = None;
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
    fn register(&mut self, waker: &Waker) -> Option<Rang> {
        let now = self.pool.timer.clock.now();
        if now >= self.deadline {
            return Some(Rang::AtDeadline);
        }
        // Registered before the timer sees it (`task/alarm.rs`): no locked
        // instruction for the waker.
        let (alarm, entry) = CellArc::pair(Alarm::waiting(self.deadline, waker.clone()));
        if !self.pool.set_alarm(entry) {
            // Shut down: no timer left to wait for (module doc).
            // SAFETY: the pool dropped its reference: the alarm is ours.
            unsafe { alarm.refused(&*self.pool) };
            return Some(Rang::Discarded);
        }
        // The timer may have rung it already.
        let rang = alarm.rang();
        self.alarm = Some(alarm);
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
            .field("registered", &self.alarm.is_some())
            .field("elapsed", &self.is_elapsed())
            .finish()
    }
}

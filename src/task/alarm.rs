//! [`Alarm`]: the timer's side of a timer future (`sleep`, `timeout`,
//! `interval`): a deadline and the waker of the future that waits for it,
//! around an ordinary [`Header`] (see `state.rs` for the state word and
//! the waiter protocol it follows).
//!
//! An alarm has nothing to run. When it falls due the timer thread moves
//! it SCHEDULED -> COMPLETE and wakes the waiter right there, through the
//! timer's [`TaskContext`] (a panic of the waker goes to `on_panic`): no
//! job, no worker, no thread crossing but the wake itself. A future dropped
//! before its deadline cancels its alarm (SCHEDULED -> CANCELLED), which
//! counts the cancel with the timer, so the sweep takes the entry out long
//! before the deadline, as it does for a cancelled task; the waker it
//! registered is taken back and dropped by the dropping thread, so it is
//! never woken after the drop. The pool's shutdown policies cancel alarms
//! as they cancel delayed tasks; the future then sees CANCELLED.
//!
//! The state word decides every race here: whichever of the timer's
//! expiry and the future's drop leaves SCHEDULED first wins, and the other
//! does nothing. A poll stores its waker first and sets WAITER second (a
//! CAS that fails once the state is final), so either the expiry sees
//! WAITER and wakes the stored waker, or the poll sees the final state and
//! returns at once: no lost wake-up (loom: `alarm::poll_vs_expiry`).

use std::task::Waker;

use crate::sync::{CellArc, StdArc};
use crate::time::Nanos;

use super::context::TaskContext;
use super::delayed::Delayed;
use super::job::{Job, RunOutcome, Runnable};
use super::state::{Header, CANCELLED, COMPLETE};

/// How an alarm ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rang {
    /// Its deadline came.
    AtDeadline,
    /// The pool discarded it (shut down without keeping delayed work).
    Discarded,
}

/// A deadline and the waker of the future that waits for it.
#[derive(Debug)]
pub(crate) struct Alarm {
    header: Header,
    deadline: Nanos,
}

impl Alarm {
    pub(crate) fn new(deadline: Nanos) -> Self {
        Alarm {
            header: Header::default(),
            deadline,
        }
    }

    /// How it ended, if it has.
    pub(crate) fn rang(&self) -> Option<Rang> {
        if !self.header.is_final() {
            None
        } else if self.header.is_cancelled() {
            Some(Rang::Discarded)
        } else {
            Some(Rang::AtDeadline)
        }
    }

    /// Registers `waker` to be woken when the alarm ends, unless it has:
    /// then returns how. The wakers the registration replaced are dropped
    /// through `ctx` (user code).
    pub(crate) fn poll(&self, waker: &Waker, ctx: &dyn TaskContext) -> Option<Rang> {
        if let Some(rang) = self.rang() {
            return Some(rang);
        }
        let registration = self.header.register(waker);
        let registered = registration.registered;
        ctx.drop_reporting(registration.stale);
        if registered {
            None
        } else {
            self.rang()
        }
    }

    /// SCHEDULED -> COMPLETE, waking the waiter through `ctx`. False if
    /// it had already ended (its future dropped it, or the pool discarded
    /// it).
    pub(crate) fn ring(&self, ctx: &dyn TaskContext) -> bool {
        self.end(COMPLETE, ctx)
    }

    /// SCHEDULED -> CANCELLED, for the future dropped before its deadline:
    /// counted with the timer, so the sweep takes the entry out. The
    /// waker, if one was registered, is dropped unwoken, through `ctx`.
    pub(crate) fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        let Some(prev) = self.header.leave_scheduled(CANCELLED) else {
            return false;
        };
        ctx.note_cancelled();
        ctx.drop_reporting(self.header.waiter_of(prev));
        true
    }

    /// SCHEDULED -> CANCELLED by the pool (a shutdown that discards
    /// delayed work): the waiter is woken, to see that it will not ring.
    fn discard(&self, ctx: &dyn TaskContext) -> bool {
        self.end(CANCELLED, ctx)
    }

    /// SCHEDULED -> `to` (final), waking the waiter through `ctx`.
    fn end(&self, to: usize, ctx: &dyn TaskContext) -> bool {
        let Some(prev) = self.header.leave_scheduled(to) else {
            return false;
        };
        if let Some(waker) = self.header.waiter_of(prev) {
            ctx.wake(waker);
        }
        true
    }
}

impl Delayed for Alarm {
    fn deadline(&self) -> Nanos {
        self.deadline
    }

    fn is_final(&self) -> bool {
        self.header.is_final()
    }

    /// A job that rings the alarm (it only ever goes to a shutdown path,
    /// which cancels it: then it is discarded).
    unsafe fn job(&self, this: &mut Option<CellArc<dyn Delayed>>) -> Job {
        // SAFETY: `this` holds a reference to `self` (caller).
        unsafe { super::delayed::task_job::<Self>(this) }
    }

    /// Rings it here, on the timer's thread: there is nothing to run.
    unsafe fn expire(
        &self,
        _this: &mut Option<CellArc<dyn Delayed>>,
        ctx: &dyn TaskContext,
    ) -> Option<Job> {
        self.ring(ctx);
        None
    }

    fn is_task(&self) -> bool {
        false
    }
}

impl Runnable for Alarm {
    fn run(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        if this.ring(ctx) {
            RunOutcome::Completed
        } else {
            RunOutcome::Skipped
        }
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        self.discard(ctx);
    }

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        None
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;
    use crate::task::context::TestContext;
    use crate::task::delayed::{erase, expire, into_job};

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: StdArc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (StdArc<Counting>, Waker) {
        let counter = StdArc::new(Counting::default());
        (counter.clone(), Waker::from(counter))
    }

    #[test]
    fn expiry_rings_it_on_the_calling_thread_and_wakes_the_last_waker_once() {
        let ctx = TestContext::default();
        let alarm = CellArc::new(Alarm::new(42));
        let (first, first_waker) = counting();
        let (second, second_waker) = counting();
        assert_eq!(alarm.poll(&first_waker, &ctx), None);
        assert_eq!(
            alarm.poll(&second_waker, &ctx),
            None,
            "a new waker replaces it"
        );
        assert!(
            expire(erase(alarm.clone()), &ctx).is_none(),
            "nothing to hand over"
        );
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert_eq!(alarm.poll(&second_waker, &ctx), Some(Rang::AtDeadline));
        assert!(!alarm.cancel(&ctx), "a rung alarm is not cancelled");
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_cancel_counts_with_the_timer_and_never_wakes() {
        let ctx = TestContext::default();
        let alarm = CellArc::new(Alarm::new(42));
        let (counter, waker) = counting();
        assert_eq!(alarm.poll(&waker, &ctx), None);
        drop(waker);
        assert!(alarm.cancel(&ctx));
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 1);
        assert!(Delayed::is_final(&*alarm), "the sweep takes it out");
        assert!(expire(erase(alarm.clone()), &ctx).is_none());
        assert_eq!(counter.0.load(Ordering::SeqCst), 0, "never woken");
        assert_eq!(StdArc::strong_count(&counter), 1, "the waker was dropped");
    }

    #[test]
    fn a_discarded_alarm_wakes_its_future_to_say_so() {
        let ctx = TestContext::default();
        let alarm = CellArc::new(Alarm::new(42));
        let (counter, waker) = counting();
        assert_eq!(alarm.poll(&waker, &ctx), None);
        into_job(erase(alarm.clone())).cancel(&ctx);
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert_eq!(alarm.rang(), Some(Rang::Discarded));
    }
}

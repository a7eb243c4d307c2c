//! loom models (`RUSTFLAGS="--cfg loom"`, see `loom-tests/README.md`) of
//! an alarm alone: its future on the main thread, the timer's expiry on
//! another.
//!
//! * `poll_vs_expiry`: the future polls with one waker, then with a new
//!   one (a re-poll), while the timer rings the alarm; then it blocks
//!   until woken. Asserted: it ends rung (a lost wake-up would leave it
//!   blocked: loom reports the deadlock), and the first waker, replaced,
//!   is never woken after its replacement registered.
//! * `drop_vs_expiry`: the future registers, then is dropped (its alarm
//!   cancelled) while the timer rings it. Asserted: exactly one of the
//!   two wins, the cancel is counted iff it won, and the waker is woken
//!   iff the expiry won.

use std::task::{Context, Poll, Wake};

use crate::loom_model::support::{bare_pool, block_on, model};
use crate::sync::{thread, Arc, AtomicUsize, Ordering};
use crate::sync::{CellArc, StdArc};
use crate::task::alarm::*;
use crate::task::context::TaskContext;
use crate::task::delayed::{erase, expire};
use std::task::Waker;

/// A waker that counts its wakes.
struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The alarm as a future, polled through the pool's context.
struct Waiting<'a>(&'a Alarm, &'a dyn TaskContext);

impl std::future::Future for Waiting<'_> {
    type Output = Rang;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Rang> {
        // SAFETY: this future is the alarm's only poller (`&mut self`).
        match unsafe { self.0.poll(cx.waker(), self.1) } {
            Some(rang) => Poll::Ready(rang),
            None => Poll::Pending,
        }
    }
}

#[test]
fn poll_vs_expiry() {
    model("alarm::poll_vs_expiry", || {
        let (pool, _) = bare_pool(1, Default::default());
        let alarm = CellArc::new(Alarm::new(5));
        let timer = {
            let (pool, alarm) = (Arc::clone(&pool), erase(CellArc::clone(&alarm)));
            thread::spawn(move || expire(alarm, &*pool).is_none())
        };
        let replaced = StdArc::new(Counting(AtomicUsize::new(0)));
        let first = Waker::from(StdArc::clone(&replaced));
        // SAFETY: the main thread is the alarm's only poller.
        let early = unsafe { alarm.poll(&first, &*pool) };
        drop(first);
        let rang = match early {
            Some(rang) => rang,
            None => block_on(Waiting(&alarm, &*pool)),
        };
        assert!(timer.join().unwrap());
        assert_eq!(rang, Rang::AtDeadline);
        // Woken at most once, only if the expiry came before the
        // second poll replaced it.
        assert!(replaced.0.load(Ordering::SeqCst) <= 1);
    });
}

#[test]
fn drop_vs_expiry() {
    model("alarm::drop_vs_expiry", || {
        let (pool, _) = bare_pool(1, Default::default());
        let alarm = CellArc::new(Alarm::new(5));
        let counter = StdArc::new(Counting(AtomicUsize::new(0)));
        let waker = Waker::from(StdArc::clone(&counter));
        // SAFETY: the main thread is the alarm's only poller.
        assert_eq!(unsafe { alarm.poll(&waker, &*pool) }, None);
        drop(waker);
        let timer = {
            let (pool, alarm) = (Arc::clone(&pool), CellArc::clone(&alarm));
            thread::spawn(move || alarm.ring(&*pool))
        };
        // SAFETY: as above (the future's drop).
        let cancelled = unsafe { alarm.cancel(&*pool) };
        let rung = timer.join().unwrap();
        assert!(cancelled != rung, "exactly one wins");
        assert_eq!(counter.0.load(Ordering::SeqCst), usize::from(rung));
        assert_eq!(StdArc::strong_count(&counter), 1, "no waker is kept");
    });
}

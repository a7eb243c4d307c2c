//! [`Alarm`]: the timer's side of a timer future (`sleep`, `timeout`,
//! `interval`): a deadline, the waker of the future that waits for it, and
//! a state word of its own, 32 bytes in all.
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
//! # Why not a task's [`Header`](super::state::Header)
//!
//! A task's waiter slot sits behind a lock (in its extras, made on first
//! use), since a task's waker is registered by its handle and taken by
//! whichever of a worker, a canceller or the timer ends it, and a task
//! carries an id and flags an alarm never uses. An alarm has one waiter,
//! its future, which is also the only one to poll it: the slot needs no
//! lock, only an owner at
//! every moment, which the WAITER bit names (tokio's join waker protocol).
//! The alarm is 32 bytes where it was 40, and with its counts a 40-byte
//! block, a 48-byte chunk of the allocator where it was 64: a million
//! pending sleeps hold 16 MB less (`benches/README.md`, `sleep-future`).
//! A first registration costs no locked instruction (the waker goes in
//! before the alarm is shared), a re-poll two compare-and-swaps where a
//! lock, its release and the WAITER compare-and-swap were three.
//!
//! # The state word
//!
//! ```text
//!  bits 0-1: SCHEDULED, then COMPLETE (rung) or CANCELLED (dropped by its
//!            future, or discarded by the pool): final, never changes again
//!  bit 2:    WAITER: the slot holds a waker, and whoever ends the alarm
//!            takes it
//! ```
//!
//! # Invariant: who owns the waiter slot
//!
//! * WAITER set and SCHEDULED: the slot is the enders' (the timer's ring,
//!   a shutdown's discard, the future's cancel): whichever moves the state
//!   to final, and reads WAITER in the state it left, takes the waker.
//!   The future does not touch the slot: to replace its waker it first
//!   clears WAITER (a compare-and-swap that fails once the state is final).
//! * WAITER clear: the slot is the future's (the only poller: `poll` and
//!   `cancel` take `&mut` of the future, so never two at once). An ender
//!   that finds WAITER clear does not touch it. The future stores its waker
//!   *first* and sets WAITER *second* (a compare-and-swap that fails once
//!   the state is final; it then takes its waker back out): either the
//!   ender sees WAITER and wakes the stored waker, or the future sees the
//!   final state and does not wait. No lost wake-up.
//! * Between polls the slot is empty unless WAITER is set (or an ender is
//!   taking it), so a final alarm holds no waker once its ender returned:
//!   a waker is user code, dropped or woken through a [`TaskContext`] by
//!   the thread that took it, never by whoever frees the block.
//!
//! The future's clone of a new waker (user code) is made with the slot
//! empty and WAITER clear: if it panics, the alarm is simply not
//! registered, as if that poll had not happened. loom:
//! `alarm::poll_vs_expiry` (a re-poll with a new waker against the ring),
//! `alarm::drop_vs_expiry`.

use std::task::Waker;

use crate::sync::cell::UnsafeCell;
use crate::sync::{AtomicU32, CellArc, Ordering, StdArc};
use crate::time::Nanos;

use super::context::TaskContext;
use super::delayed::Delayed;
use super::job::{Job, RunOutcome, Runnable};
use super::state::Header;

/// The lifecycle bits of the state word.
const LIFECYCLE: u32 = 0b11;
const SCHEDULED: u32 = 0;
const COMPLETE: u32 = 2;
const CANCELLED: u32 = 3;
/// The slot holds a waker that whoever ends the alarm takes (module doc).
const WAITER: u32 = 0b100;

/// How an alarm ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rang {
    /// Its deadline came.
    AtDeadline,
    /// The pool discarded it (shut down without keeping delayed work).
    Discarded,
}

/// A deadline and the waker of the future that waits for it.
pub(crate) struct Alarm {
    waiter: UnsafeCell<Option<Waker>>,
    deadline: Nanos,
    state: AtomicU32,
}

// SAFETY: `waiter` is reached only by the owner the state word names
// (module doc, invariant): the future while WAITER is clear, the one ender
// that left SCHEDULED with WAITER set otherwise; the compare-and-swaps on
// the word order one owner's accesses before the next's. A `Waker` is
// `Send + Sync`.
unsafe impl Sync for Alarm {}

impl std::fmt::Debug for Alarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alarm")
            .field("deadline", &self.deadline)
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// How the alarm in state `s` ended, if it has.
fn rang_in(s: u32) -> Option<Rang> {
    match s & LIFECYCLE {
        COMPLETE => Some(Rang::AtDeadline),
        CANCELLED => Some(Rang::Discarded),
        _ => None,
    }
}

impl Alarm {
    /// An alarm with no waiter yet (the tests' and models' first poll; a
    /// sleep registers as it makes its alarm: [`waiting`](Self::waiting)).
    #[cfg(test)]
    pub(crate) fn new(deadline: Nanos) -> Self {
        Alarm {
            waiter: UnsafeCell::new(None),
            deadline,
            state: AtomicU32::new(SCHEDULED),
        }
    }

    /// An alarm whose future waits with `waker` already: the first poll's
    /// registration, made before the alarm is shared (no locked
    /// instruction).
    pub(crate) fn waiting(deadline: Nanos, waker: Waker) -> Self {
        Alarm {
            waiter: UnsafeCell::new(Some(waker)),
            deadline,
            state: AtomicU32::new(SCHEDULED | WAITER),
        }
    }

    /// How it ended, if it has.
    pub(crate) fn rang(&self) -> Option<Rang> {
        rang_in(self.state.load(Ordering::Acquire))
    }

    /// Runs `f` on the waiter slot.
    ///
    /// # Safety
    ///
    /// The caller owns the slot (module doc, invariant).
    unsafe fn with_slot<R>(&self, f: impl FnOnce(&mut Option<Waker>) -> R) -> R {
        // SAFETY: the caller owns the slot: no other reference to it exists
        // meanwhile.
        self.waiter.with_mut(|slot| f(unsafe { &mut *slot }))
    }

    /// Registers `waker` to be woken when the alarm ends, unless it has:
    /// then returns how. The wakers the registration replaced are dropped
    /// through `ctx` (user code).
    ///
    /// # Safety
    ///
    /// Only the alarm's future calls it, and [`cancel`](Self::cancel),
    /// never two at once (the future's `&mut self`): it owns the slot while
    /// WAITER is clear (module doc).
    pub(crate) unsafe fn poll(&self, waker: &Waker, ctx: &dyn TaskContext) -> Option<Rang> {
        let s = self.state.load(Ordering::Acquire);
        if let Some(rang) = rang_in(s) {
            return Some(rang);
        }
        if s & WAITER != 0 {
            // Take the slot back from the enders; fails only once final
            // (then the ender that saw WAITER takes the waker).
            if let Err(s) =
                self.state
                    .compare_exchange(s, s & !WAITER, Ordering::AcqRel, Ordering::Acquire)
            {
                return rang_in(s);
            }
        }
        // SAFETY: WAITER is clear and we are the future: the slot is ours.
        let same =
            unsafe { self.with_slot(|slot| slot.as_ref().is_some_and(|w| w.will_wake(waker))) };
        if !same {
            // SAFETY: as above.
            ctx.drop_reporting(unsafe { self.with_slot(Option::take) });
            // User code: if the clone panics, the slot is empty and WAITER
            // clear, as for an alarm never polled.
            let new = waker.clone();
            // SAFETY: as above.
            unsafe { self.with_slot(|slot| *slot = Some(new)) };
        }
        match self.state.compare_exchange(
            SCHEDULED,
            SCHEDULED | WAITER,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => None,
            Err(s) => {
                // Ended while the slot was ours: no ender took the waker.
                // SAFETY: WAITER is clear: the slot is still ours.
                ctx.drop_reporting(unsafe { self.with_slot(Option::take) });
                rang_in(s)
            }
        }
    }

    /// Drops the waker of an alarm the pool refused (shut down), through
    /// `ctx`.
    ///
    /// # Safety
    ///
    /// Nobody else holds the alarm.
    pub(crate) unsafe fn refused(&self, ctx: &dyn TaskContext) {
        // SAFETY: nobody else reaches the slot (caller).
        ctx.drop_reporting(unsafe { self.with_slot(Option::take) });
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
    ///
    /// # Safety
    ///
    /// As for [`poll`](Self::poll): only the alarm's future calls it.
    pub(crate) unsafe fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        let Some(_) = self.leave_scheduled(CANCELLED) else {
            return false;
        };
        ctx.note_cancelled();
        // SAFETY: we left SCHEDULED: with WAITER set the slot is ours as
        // its ender, with WAITER clear ours as the future.
        ctx.drop_reporting(unsafe { self.with_slot(Option::take) });
        true
    }

    /// SCHEDULED -> CANCELLED by the pool (a shutdown that discards
    /// delayed work): the waiter is woken, to see that it will not ring.
    fn discard(&self, ctx: &dyn TaskContext) -> bool {
        self.end(CANCELLED, ctx)
    }

    /// SCHEDULED -> `to` (final), waking the waiter through `ctx`.
    fn end(&self, to: u32, ctx: &dyn TaskContext) -> bool {
        let Some(prev) = self.leave_scheduled(to) else {
            return false;
        };
        if prev & WAITER != 0 {
            // SAFETY: we left SCHEDULED with WAITER set: the slot is ours.
            if let Some(waker) = unsafe { self.with_slot(Option::take) } {
                ctx.wake(waker);
            }
        }
        true
    }

    /// SCHEDULED -> `to` (final, WAITER kept: it tells who owns the slot);
    /// the state it left, or `None` if it had ended.
    fn leave_scheduled(&self, to: u32) -> Option<u32> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & LIFECYCLE == SCHEDULED).then_some(s | to)
            })
            .ok()
    }
}

impl Delayed for Alarm {
    fn deadline(&self) -> Nanos {
        self.deadline
    }

    fn is_final(&self) -> bool {
        self.rang().is_some()
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

    /// The test is the alarm's future: its only poller.
    fn poll(alarm: &Alarm, waker: &Waker, ctx: &dyn TaskContext) -> Option<Rang> {
        // SAFETY: one poll at a time, on the test's thread.
        unsafe { alarm.poll(waker, ctx) }
    }

    /// The future's drop.
    fn cancel(alarm: &Alarm, ctx: &dyn TaskContext) -> bool {
        // SAFETY: as for `poll`.
        unsafe { alarm.cancel(ctx) }
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
        assert_eq!(poll(&alarm, &first_waker, &ctx), None);
        assert_eq!(
            poll(&alarm, &second_waker, &ctx),
            None,
            "a new waker replaces it"
        );
        assert!(
            expire(erase(alarm.clone()), &ctx).is_none(),
            "nothing to hand over"
        );
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll(&alarm, &second_waker, &ctx), Some(Rang::AtDeadline));
        assert!(!cancel(&alarm, &ctx), "a rung alarm is not cancelled");
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_cancel_counts_with_the_timer_and_never_wakes() {
        let ctx = TestContext::default();
        let alarm = CellArc::new(Alarm::new(42));
        let (counter, waker) = counting();
        assert_eq!(poll(&alarm, &waker, &ctx), None);
        drop(waker);
        assert!(cancel(&alarm, &ctx));
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
        assert_eq!(poll(&alarm, &waker, &ctx), None);
        into_job(erase(alarm.clone())).cancel(&ctx);
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert_eq!(alarm.rang(), Some(Rang::Discarded));
    }

    /// A waker whose `clone` panics and whose drop counts (a `RawWaker`
    /// of the test's own: `Wake` cannot make a clone panic).
    mod hostile {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::task::{RawWaker, RawWakerVTable, Waker};

        pub(super) static DROPS: AtomicUsize = AtomicUsize::new(0);

        fn clone(_: *const ()) -> RawWaker {
            panic!("expected: a waker's clone panicked")
        }
        fn noop(_: *const ()) {}
        fn drop(_: *const ()) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
        static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, drop);

        pub(super) fn waker() -> Waker {
            // SAFETY: the vtable's functions ignore the data pointer.
            unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
        }
    }

    #[test]
    fn a_waker_whose_clone_panics_leaves_the_alarm_unregistered() {
        crate::task::unwind::quiet_expected_panics();
        let ctx = TestContext::default();
        let alarm = CellArc::new(Alarm::new(42));
        let (first, first_waker) = counting();
        assert_eq!(poll(&alarm, &first_waker, &ctx), None);
        let bad = hostile::waker();
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll(&alarm, &bad, &ctx)));
        assert!(polled.is_err(), "the clone's panic is the poll's");
        drop(first_waker);
        assert_eq!(
            StdArc::strong_count(&first),
            1,
            "the replaced waker was dropped before the clone"
        );
        assert!(alarm.ring(&ctx), "it still rings");
        assert_eq!(first.0.load(Ordering::SeqCst), 0, "nobody was registered");
        assert_eq!(poll(&alarm, &bad, &ctx), Some(Rang::AtDeadline));
        // A poll after that panic registers as a first one does.
        let again = CellArc::new(Alarm::new(42));
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll(&again, &bad, &ctx)));
        let (second, second_waker) = counting();
        assert_eq!(poll(&again, &second_waker, &ctx), None);
        assert!(again.ring(&ctx));
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert!(ctx.panics.lock().unwrap().is_empty());
    }

    #[test]
    fn a_first_registration_needs_no_poll_and_a_refused_alarm_drops_its_waker() {
        let ctx = TestContext::default();
        let (counter, waker) = counting();
        let alarm = CellArc::new(Alarm::waiting(42, waker.clone()));
        assert!(expire(erase(alarm.clone()), &ctx).is_none());
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "woken once");
        assert_eq!(alarm.rang(), Some(Rang::AtDeadline));
        let refused = Alarm::waiting(42, waker);
        // SAFETY: nobody else holds it.
        unsafe { refused.refused(&ctx) };
        assert_eq!(StdArc::strong_count(&counter), 1, "no waker is kept");
    }

    #[test]
    fn a_repoll_with_the_same_waker_keeps_it_and_a_cancel_after_it_drops_it() {
        let ctx = TestContext::default();
        let alarm = CellArc::new(Alarm::new(42));
        let (counter, waker) = counting();
        for _ in 0..3 {
            assert_eq!(poll(&alarm, &waker, &ctx), None);
        }
        assert_eq!(
            StdArc::strong_count(&counter),
            3,
            "ours, the test's, the slot's"
        );
        assert!(cancel(&alarm, &ctx));
        assert_eq!(StdArc::strong_count(&counter), 2, "the slot's is dropped");
        assert!(!alarm.ring(&ctx));
        assert_eq!(counter.0.load(Ordering::SeqCst), 0);
    }

    /// The waiter slot, the deadline and a 4-byte state word: 32 bytes; a
    /// 40-byte block with the counts, a 48-byte chunk of glibc's malloc.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_alarm_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Alarm>(), 32);
    }
}

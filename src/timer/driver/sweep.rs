//! Cancelled entries: a cancel only counts itself, and the timer thread
//! sweeps the dead entries out in one pass once they are half of what it
//! holds.
//!
//! # Cancelled entries: counted, then swept
//!
//! A cancel sends nothing. The canceller moves the task's state to
//! CANCELLED (dropping its closure at once: `task/cell.rs`) and adds one to
//! the count of cancels in `dead`; the entry, now dead weight, stays in the
//! backend until the timer thread *sweeps* the dead entries out in one
//! O(n) pass ([`DelayQueue::remove_where`]). It sweeps when the count
//! reaches `sweep_at`, half the entries it held at its last turn, so a
//! sweep of n entries pays for n/2 cancels (O(1) per cancel, amortised),
//! at most half of what the backend holds is dead, and the last of a
//! million cancels still leads to a sweep (`sweep_at` is at least 1). A
//! cancelled task never holds up termination: once only dead entries are
//! left, they are more than half.
//!
//! `dead` packs the count (low 40 bits) and `sweep_at` (high 24 bits) in one
//! word, so that a cancel reads the threshold in the same read-modify-write
//! that counts it: the canceller's `fetch_add` and the timer thread's
//! publication of `sweep_at` (or its read of the word before it sleeps) are
//! ordered by the word's modification order. Either the timer thread's read
//! comes later and sees the count (it sweeps before it sleeps), or the
//! cancel comes later and sees the threshold the timer thread sleeps with
//! (and wakes it if the count reached it). The count only goes down by what
//! a sweep read (`Acquire`, against the cancel's `Release`: every counted
//! cancel's state change is visible to that sweep). A sweep applies the
//! queued commands after it read the count and before it removes: a task
//! is cancelled through the handle its scheduling returned, after its
//! insert command was pushed, so the entry of every cancel the sweep
//! counted is in the backend by then (or was handed over), and is removed.
//! So the count is never less than the dead entries the backend holds; it
//! may be more (a dead entry that fell due before a sweep was handed over,
//! and the worker skipped it), which only brings a sweep forward.
//!
//! A cancelled entry is still counted in `pending` (and against
//! `max_scheduled_tasks`) until it is swept; `reserve` sweeps before it
//! refuses a task, so the limit counts live tasks only. A sweep gives its
//! slots back (`pending`) before it lowers the count (`Release`), so a
//! `reserve` that reads the count at 0 (`Acquire`) then finds them free,
//! and one that reads it above 0 sweeps itself, after any sweep in progress.
//!
//! # Invariant
//!
//! The dead entries the backend holds are at most the count in `dead`,
//! and the timer thread never sleeps with that count at or above
//! `sweep_at` (see above).
//!
//! [`DelayQueue::remove_where`]: crate::timer::queue::DelayQueue::remove_where

use crate::sync::Ordering;
use crate::task::context::TaskContext;
use crate::time::Nanos;

use super::{Entry, Queue, Timer};

/// `Timer::dead`: the bits of the count of cancels not yet swept.
const DEAD_COUNT_BITS: u32 = 40;
/// `Timer::dead`: the mask of the count.
const DEAD_COUNT: u64 = (1 << DEAD_COUNT_BITS) - 1;
/// `Timer::dead`: the largest `sweep_at` (with more entries than twice
/// this, a sweep pays for fewer cancels than half of them, still many).
const MAX_SWEEP_AT: u64 = (1 << (64 - DEAD_COUNT_BITS)) - 1;

/// The count and `sweep_at` in a `Timer::dead` word.
fn unpack_dead(word: u64) -> (u64, u64) {
    (word & DEAD_COUNT, word >> DEAD_COUNT_BITS)
}

/// A `Timer::dead` word with no cancel counted and `sweep_at` 1: the timer
/// starts empty.
pub(super) const DEAD_AT_START: u64 = 1 << DEAD_COUNT_BITS;

impl Timer {
    /// The count of cancels not yet swept (for the loom models).
    #[cfg(all(test, loom))]
    pub(crate) fn dead_count(&self) -> u64 {
        unpack_dead(self.dead.load(Ordering::SeqCst)).0
    }

    /// Sweeps the dead entries out now if a cancel (or a placement made
    /// stale) was counted since the last sweep: `metrics()` reads exact
    /// counts. One pass over what the timer holds, under its lock, only
    /// when something was cancelled; nothing otherwise.
    pub(crate) fn sweep_cancelled(&self, ctx: &dyn TaskContext) {
        let mut swept = Vec::new();
        self.sweep_for_room(&mut swept);
        drop_swept(swept, ctx);
    }

    /// Before `reserve` tries again after a refusal: sweeps the cancelled
    /// entries out on the calling thread if any cancel is counted, so that
    /// the limit counts live tasks only (module doc).
    /// What it removes goes to `swept`, for the caller to drop after the
    /// lock and outside any admission ([`drop_swept`]).
    pub(super) fn sweep_for_room(&self, swept: &mut Vec<Entry>) {
        // A count of 0 read here comes after the last sweep's decrement, so
        // after the slots that sweep gave back (`sweep`): the try below sees
        // them. A count above 0 is swept here (after any sweep in progress,
        // under the lock) before that try.
        let (cancels, _) = unpack_dead(self.dead.load(Ordering::Acquire));
        if cancels > 0 {
            self.sweep_here(swept);
        }
    }

    /// Sweeps on the calling thread (applying the queued commands first:
    /// `sweep`) and wakes the timer thread (see `commands`: a command
    /// applied here may be due before it would wake). What it removed goes
    /// to `swept`.
    fn sweep_here(&self, swept: &mut Vec<Entry>) {
        {
            let mut queue = self.queue.lock();
            self.sweep(&mut queue, self.clock.now(), swept);
        }
        self.wake_waiter();
    }

    /// Counts a cancel of a task the timer may hold (its state is already
    /// CANCELLED), and wakes the timer thread to sweep if the count reached
    /// `sweep_at` (module doc). `Release`: the sweep that reads the count
    /// sees the state.
    pub(crate) fn note_cancelled(&self) {
        let word = self.dead.fetch_add(1, Ordering::AcqRel) + 1;
        let (cancels, sweep_at) = unpack_dead(word);
        if cancels >= sweep_at {
            self.wake_waiter();
        }
    }

    /// True if the count of cancels reached `sweep_at` (module doc).
    pub(super) fn sweep_is_due(&self) -> bool {
        let (cancels, sweep_at) = unpack_dead(self.dead.load(Ordering::Acquire));
        cancels > 0 && cancels >= sweep_at
    }

    /// Sweeps the cancelled entries out if the count reached `sweep_at`,
    /// into `swept`, for the caller to drop after the lock
    /// ([`drop_swept`]).
    pub(super) fn sweep_if_due(&self, queue: &mut Queue, now: Nanos, swept: &mut Vec<Entry>) {
        if self.sweep_is_due() {
            self.sweep(queue, now, swept);
        }
    }

    /// Removes every cancelled entry from the backend and takes the cancels
    /// it read off the count (module doc). The commands queued when it read
    /// the count are applied first (`now`: as for `apply_commands`), so that
    /// the entry of every cancel it counted is in the backend. Its slots are
    /// given back (`pending`) before the count goes down, so that `reserve`,
    /// which reads the count after a refusal, finds them.
    ///
    /// The entries it removes go to `swept`, to be dropped after the lock:
    /// an entry can be the last reference to a task that ended with an
    /// output nobody joined (a placement left stale by a reschedule or a
    /// step of the wall clock), whose destructor is user code; under the
    /// lock, its panic unwound out of the caller, and a destructor that
    /// dropped the last executor handle locked the backend again.
    fn sweep(&self, queue: &mut Queue, now: Nanos, swept: &mut Vec<Entry>) {
        let (cancels, _) = unpack_dead(self.dead.load(Ordering::Acquire));
        self.apply_commands(queue, now);
        let mut cancelled = 0;
        let removed = queue.remove_where(&mut |entry| entry.is_final(), &mut |entry| {
            cancelled += u64::from(entry.is_cancelled_task());
            swept.push(entry);
        });
        if removed > 0 {
            self.pending.fetch_sub(removed, Ordering::SeqCst);
        }
        if cancelled > 0 {
            // Sweeps are serialised by the backend lock: one writer.
            let total = self.swept_cancelled.load(Ordering::Relaxed);
            self.swept_cancelled
                .store(total + cancelled, Ordering::Relaxed);
        }
        self.dead.fetch_sub(cancels, Ordering::Release);
    }

    /// Publishes the count of cancels at which a cancel wakes the timer
    /// thread to sweep: half the `held` entries (at least 1). True if the
    /// count already reached it: sweep before sleeping (module doc).
    pub(super) fn publish_sweep_at(&self, held: usize) -> bool {
        let sweep_at = (held as u64 / 2).clamp(1, MAX_SWEEP_AT);
        let mut word = self.dead.load(Ordering::Acquire);
        if unpack_dead(word).1 != sweep_at {
            let publish = |w: u64| Some(w & DEAD_COUNT | sweep_at << DEAD_COUNT_BITS);
            word = self
                .dead
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, publish)
                .expect("the update always applies");
        }
        unpack_dead(word).0 >= sweep_at
    }
}

/// Drops the entries a sweep removed, after the backend lock (and, for a
/// scheduler's sweep, after its admission: a destructor may shut the pool
/// down, which waits for the admissions), each destructor's panic reported
/// through `ctx` (`sweep`'s doc).
pub(crate) fn drop_swept(swept: Vec<Entry>, ctx: &dyn TaskContext) {
    for entry in swept {
        ctx.drop_reporting(entry);
    }
}

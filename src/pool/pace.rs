//! [`Pace`]: how long the due tasks a leading worker took ran, and so
//! whether its turns share them (see `timer/driver/lead.rs`).
//!
//! A leader that takes one due task per turn and runs it keeps the other
//! workers asleep: a wake-up and a steal cost more than a short task. Tasks
//! that run long are worth sharing, and the leader learns that they do from
//! the time between a turn that took tasks and its next turn.
//!
//! One slow batch is not enough to tell. On a machine with more threads
//! than cores, the leader is preempted now and then (the timer thread's
//! watch wakes once a millisecond while a leader is awake), and one task of
//! a microsecond then reads as tens of microseconds. When one slow batch
//! was enough, the wheels' leaders shared the whole tick's batch of
//! `periodic` (about a thousand tasks) at almost every tick: 1,554–2,045
//! shared turns a repetition of 2,000 ticks, both workers running the tasks
//! and missing on their cells, against 3–42 with [`SLOW_BATCHES`] in a row
//! (measured: `benches/README.md`, "Sharing after slow batches in a row").
//! A task that does run long costs the leader that many turns, one task
//! each, before it shares; a late task is shared at once all the same (the
//! lead's `SHARE_IF_LATE`).

use std::cell::Cell;

use crate::time::Nanos;
use crate::timer::driver::lead::Share;

/// A leading worker shares the due tasks of a turn when those it took last
/// ran this long each (on average, with whatever else it ran meanwhile),
/// in [`SLOW_BATCHES`] batches in a row; shorter, it takes one at a time.
pub(crate) const SHARE_AFTER: Nanos = 20_000;

/// How many slow batches in a row make a leader share (module doc).
pub(crate) const SLOW_BATCHES: u8 = 3;

/// A leading worker's record of its batches (module doc). Thread-local:
/// only its worker reads and writes it.
#[derive(Debug)]
pub(crate) struct Pace {
    /// The last batch of due tasks it took (when, how many), until its next
    /// turn measures how long they took.
    last_batch: Cell<Option<(Nanos, usize)>>,
    /// The slow batches in a row, up to [`SLOW_BATCHES`].
    slow: Cell<u8>,
}

impl Pace {
    /// A worker that has not led yet shares: it knows nothing of the
    /// tasks' lengths, and a wake-up too many costs less than long tasks
    /// run in turn.
    pub(crate) fn new() -> Self {
        Pace {
            last_batch: Cell::new(None),
            slow: Cell::new(SLOW_BATCHES),
        }
    }

    /// How many due tasks the next turn takes.
    pub(crate) fn share(&self) -> Share {
        if self.slow.get() >= SLOW_BATCHES {
            Share::All
        } else {
            Share::One
        }
    }

    /// A turn read the clock at `at`: the batch taken before it, if any,
    /// ran until then.
    pub(crate) fn turned(&self, at: Nanos) {
        if let Some((taken_at, n)) = self.last_batch.take() {
            let each = SHARE_AFTER.saturating_mul(n as u64);
            let slow = if at.saturating_sub(taken_at) >= each {
                self.slow.get().saturating_add(1).min(SLOW_BATCHES)
            } else {
                0
            };
            self.slow.set(slow);
        }
    }

    /// The turn at `at` took `n` due tasks. A turn that only rang alarms
    /// (`n` is 0) ran nothing of its own: there is no batch to measure.
    pub(crate) fn took(&self, at: Nanos, n: usize) {
        if n > 0 {
            self.last_batch.set(Some((at, n)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one batch of `n` tasks taken at `at` that ran `ran` ns.
    fn batch(pace: &Pace, at: Nanos, n: usize, ran: Nanos) -> Nanos {
        pace.took(at, n);
        pace.turned(at + ran);
        at + ran
    }

    #[test]
    fn a_new_worker_shares() {
        assert_eq!(Pace::new().share(), Share::All);
    }

    #[test]
    fn one_fast_batch_stops_sharing() {
        let pace = Pace::new();
        batch(&pace, 1_000, 1, 1_000);
        assert_eq!(pace.share(), Share::One);
    }

    #[test]
    fn slow_batches_share_only_in_a_row() {
        let pace = Pace::new();
        let mut at = batch(&pace, 1_000, 1, 500);
        // One preempted run among fast ones does not share.
        at = batch(&pace, at, 1, SHARE_AFTER * 5);
        assert_eq!(pace.share(), Share::One, "one slow batch");
        at = batch(&pace, at, 1, 500);
        for _ in 1..SLOW_BATCHES {
            // A preempted run: slow, but alone.
            at = batch(&pace, at, 1, SHARE_AFTER * 5);
            assert_eq!(pace.share(), Share::One);
        }
        at = batch(&pace, at, 1, 500);
        assert_eq!(pace.share(), Share::One, "a fast batch starts again");
        for i in 1..=SLOW_BATCHES {
            at = batch(&pace, at, 1, SHARE_AFTER);
            let want = if i == SLOW_BATCHES {
                Share::All
            } else {
                Share::One
            };
            assert_eq!(pace.share(), want, "after {i} slow batches");
        }
        // It stays shared while they stay slow, and stops at a fast one.
        for _ in 0..300 {
            at = batch(&pace, at, 1, SHARE_AFTER);
        }
        assert_eq!(pace.share(), Share::All);
        batch(&pace, at, 1, SHARE_AFTER - 1);
        assert_eq!(pace.share(), Share::One);
    }

    #[test]
    fn a_batch_is_slow_by_its_length_per_task() {
        let pace = Pace::new();
        let mut at = batch(&pace, 0, 1, 0);
        for _ in 0..SLOW_BATCHES {
            // 40 tasks in 30 µs each: slow.
            at = batch(&pace, at, 40, 40 * 30_000);
        }
        assert_eq!(pace.share(), Share::All);
        // 40 tasks in 10 µs each: fast, though the batch took 400 µs.
        batch(&pace, at, 40, 40 * 10_000);
        assert_eq!(pace.share(), Share::One);
    }

    #[test]
    fn turns_that_only_rang_alarms_are_not_batches() {
        let pace = Pace::new();
        batch(&pace, 0, 1, 10);
        let mut at = 10;
        for _ in 0..2 * SLOW_BATCHES {
            at = batch(&pace, at, 0, 1_000_000);
        }
        assert_eq!(pace.share(), Share::One);
    }

    #[test]
    fn a_turn_without_a_batch_changes_nothing() {
        let pace = Pace::new();
        batch(&pace, 0, 1, 10);
        // Turns that took nothing, however far apart (the leader slept).
        pace.turned(u64::MAX);
        pace.turned(5);
        assert_eq!(pace.share(), Share::One);
        // The end of time: a clock at its last value, nothing wraps.
        pace.took(u64::MAX - 1, usize::MAX);
        pace.turned(u64::MAX);
        assert_eq!(pace.share(), Share::One);
        pace.took(u64::MAX, 1);
        pace.turned(0);
        assert_eq!(pace.share(), Share::One, "a clock read before the batch");
    }
}

//! The hashed timing wheel backend: Netty's `HashedWheelTimer`, improved.
//!
//! # Design
//!
//! Time is cut into ticks of `tick` nanoseconds. An entry is due at its
//! deadline rounded *up* to a tick boundary: its *due tick* is
//! `ceil(deadline / tick)`, kept in the entry as an absolute tick number
//! (the equivalent of Netty's `remainingRounds`). The wheel is a ring of
//! `slots` buckets, a power of two; an entry goes to the tail of bucket
//! `due tick mod slots`. A bucket thus mixes entries of several *rounds*
//! (revolutions of the wheel); those whose round is not reached stay in it,
//! untouched.
//!
//! The bucket lists are intrusive and doubly linked through slab indices:
//! each entry of the [`Slab`] holds its value, its due tick and its `prev`
//! and `next` (`u32`); a bucket is a head and a tail (`u32`). An occupancy
//! bitmap (one bit per bucket, in `u64` words) tells which buckets hold
//! anything, so that empty ones are skipped 64 at a time.
//!
//! # What changes from Netty
//!
//! * **No wake-up per tick.** Netty's worker thread sleeps one tick, walks
//!   one bucket, and again, whether or not anything is due. Here the wheel
//!   keeps its earliest due tick in a cache (below); `next_due` reports it,
//!   so the timer thread sleeps until then, and `pop_due` takes the due
//!   entries straight from it: it never walks the elapsed ticks one by one,
//!   so `now` jumping by an hour costs no more than the entries now due.
//! * **Cancel unlinks at once, in O(1).** Netty queues cancellations and
//!   unlinks them at its next tick; here a [`Key`] (slab slot and
//!   generation) addresses the entry, which leaves its bucket immediately
//!   and gives its slot back. A stale key is recognised and removes nothing.
//! * **Memory is given back.** No boxed node per entry: entries live in the
//!   slab, which frees its slots when the wheel empties. Only the bucket
//!   array (8 bytes per bucket) and the bitmap (1 bit per bucket) are fixed.
//!
//! # The earliest-tick cache
//!
//! Two [`Cell`]s (so that `next_due` can refresh them through `&self`): a
//! tick that is a lower bound of every entry's due tick, and the slab index
//! of the first entry of that tick in its bucket, when the cache is
//! *fresh*; then the bound is the earliest due tick. An insert earlier than
//! the bound becomes the cache (O(1)); removing or popping the cached entry
//! makes the cache *stale*, keeping the bound (popping moves it past the
//! tick once that tick has no entry left). The next `next_due` or `pop_due`
//! recomputes it: it visits the occupied buckets (found with the bitmap) in
//! lap order, from the bound's bucket, for one revolution, and stops at the
//! first entry whose due tick is less than one revolution past the bound:
//! that is the earliest. A bucket whose entries all belong to later rounds
//! is scanned to its end on the way. If the revolution holds no entry, the
//! lap has scanned every entry, and the earliest of them is taken.
//!
//! A recompute thus costs `slots / 64` bitmap words plus the entries it
//! scans. That is usually few: when delays are shorter than a revolution
//! (`tick × slots`), the next occupied bucket holds the next due entries,
//! near its head since a list keeps insertion order. In the worst case it
//! is every entry: when buckets are crowded with entries many rounds ahead
//! (delays much longer than a revolution, or a small wheel), or when all
//! remaining entries lie more than one revolution past the last minimum;
//! popping entries that are each more than a revolution apart is then
//! quadratic. This is the hashed wheel's known weak spot (Netty walks every
//! entry of a bucket each time its cursor passes it); the heap suits long,
//! scattered delays better.
//!
//! # Complexity
//!
//! * `insert`: O(1).
//! * `remove` (cancel): O(1).
//! * `pop_due`: O(1) per entry popped, plus, once per due tick, a scan of
//!   the rest of that tick's bucket (for its next entry of the same tick)
//!   and a recompute of the cache (above).
//! * `next_due`: O(1) when the cache is fresh, which it always is after
//!   `pop_due` returned `None`; a recompute otherwise.
//! * `drain`: O(n log n) (the entries are sorted by due tick).
//! * `len`: O(1), exact.
//!
//! # Order and lateness
//!
//! * An entry is never popped before its deadline, and at most `tick - 1`
//!   nanoseconds after it (its deadline rounded up to the tick), whatever
//!   its delay: `max_lateness` is `tick - 1`, exact for a tick of 1 ns.
//! * A deadline already past pops at the next `pop_due`, unless it lies in
//!   the tick now under way: it then waits for that tick's end (still at
//!   most `tick - 1` after its deadline). Placing it in an earlier tick
//!   instead would let it overtake an entry with the same deadline that was
//!   inserted before it.
//! * Entries pop in due-tick order, and within a tick in insertion order
//!   (they share a bucket, appended in order): so equal deadlines keep
//!   insertion order, while distinct deadlines within one tick come out in
//!   insertion order, not deadline order.
//!
//! # When to use it
//!
//! Many timers with short, similar delays (I/O or request time-outs,
//! retries, heartbeats), often cancelled before they fire: insert and
//! cancel are O(1) where the heap's are O(log n), and a coarse tick is
//! fine. Not for exact deadlines, nor for many delays spanning many
//! revolutions (see the cost of a recompute above): use the heap.

use std::cell::Cell;

use super::{DelayQueue, Key, Nanos, Slab};

/// The default tick: 1 ms.
pub(crate) const DEFAULT_TICK: Nanos = 1_000_000;

/// The default number of buckets: 512 (Netty's default `ticksPerWheel`).
pub(crate) const DEFAULT_SLOTS: usize = 512;

/// The most buckets a wheel may have (2^20: 8 MiB of buckets).
pub(crate) const MAX_SLOTS: usize = 1 << 20;

/// No entry: the end of a bucket list, an empty bucket, a stale cache.
const NIL: u32 = u32::MAX;

/// One entry, stored in the slab and linked into its bucket.
#[derive(Debug)]
struct Entry<T> {
    value: T,
    /// The tick at whose start the entry is due: `ceil(deadline / tick)`.
    due: u64,
    /// The previous entry in the bucket (`NIL`: this is the head).
    prev: u32,
    /// The next entry in the bucket (`NIL`: this is the tail).
    next: u32,
}

/// One bucket: a doubly-linked list of entries in insertion order.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    head: u32,
    tail: u32,
}

impl Bucket {
    const EMPTY: Bucket = Bucket {
        head: NIL,
        tail: NIL,
    };
}

/// The hashed timing wheel (see the module doc).
#[derive(Debug)]
pub(crate) struct HashedWheel<T> {
    /// Nanoseconds per tick (at least 1).
    tick: Nanos,
    /// `slots - 1`: the bucket of due tick `t` is `t & mask`.
    mask: u64,
    buckets: Box<[Bucket]>,
    /// Bit `b % 64` of word `b / 64` is set if and only if bucket `b` is
    /// not empty.
    occupied: Box<[u64]>,
    slab: Slab<Entry<T>>,
    /// A lower bound of every entry's due tick; the earliest due tick while
    /// the cache is fresh (see the module doc).
    earliest: Cell<u64>,
    /// The first entry of due tick `earliest` in its bucket while the cache
    /// is fresh; `NIL` while it is stale.
    earliest_at: Cell<u32>,
}

impl<T> Default for HashedWheel<T> {
    /// A wheel of [`DEFAULT_SLOTS`] buckets of [`DEFAULT_TICK`].
    fn default() -> Self {
        Self::new(DEFAULT_TICK, DEFAULT_SLOTS)
    }
}

impl<T> HashedWheel<T> {
    /// An empty wheel of `slots` buckets of `tick` nanoseconds each; the
    /// caller has checked that `tick >= 1` and that `slots` is a power of
    /// two no greater than [`MAX_SLOTS`].
    pub(crate) fn new(tick: Nanos, slots: usize) -> Self {
        debug_assert!(tick >= 1, "a tick lasts at least 1 ns");
        debug_assert!(
            slots.is_power_of_two() && slots <= MAX_SLOTS,
            "{slots} buckets: not a power of two in 1..=2^20"
        );
        HashedWheel {
            tick,
            mask: slots as u64 - 1,
            buckets: vec![Bucket::EMPTY; slots].into_boxed_slice(),
            occupied: vec![0; slots.div_ceil(64)].into_boxed_slice(),
            slab: Slab::default(),
            earliest: Cell::new(0),
            earliest_at: Cell::new(NIL),
        }
    }

    /// The due tick of `deadline`: rounded up, never down.
    #[inline]
    fn due_tick(&self, deadline: Nanos) -> u64 {
        // No overflow: a remainder means a tick of at least 2.
        deadline / self.tick + u64::from(deadline % self.tick != 0)
    }

    /// When due tick `due` starts; `u64::MAX` if that is past the end of
    /// time (the last, partial tick).
    #[inline]
    fn start_of(&self, due: u64) -> Nanos {
        due.saturating_mul(self.tick)
    }

    /// The bucket of due tick `due`.
    #[inline]
    fn bucket_of(&self, due: u64) -> usize {
        (due & self.mask) as usize
    }

    /// The first occupied bucket in `from..end`, found with the bitmap.
    fn next_occupied(&self, from: usize, end: usize) -> Option<usize> {
        if from >= end {
            return None;
        }
        let mut word_index = from / 64;
        let mut word = self.occupied[word_index] & (u64::MAX << (from % 64));
        loop {
            if word != 0 {
                let bucket = word_index * 64 + word.trailing_zeros() as usize;
                return (bucket < end).then_some(bucket);
            }
            word_index += 1;
            if word_index * 64 >= end {
                return None;
            }
            word = self.occupied[word_index];
        }
    }

    /// The earliest due tick and the first entry of that tick in its
    /// bucket (recomputing a stale cache); `None` if the wheel is empty.
    fn earliest(&self) -> Option<(u64, u32)> {
        if self.slab.len() == 0 {
            return None;
        }
        if self.earliest_at.get() == NIL {
            self.recompute_earliest();
        }
        Some((self.earliest.get(), self.earliest_at.get()))
    }

    /// Refreshes the stale cache of a non-empty wheel: one lap over the
    /// occupied buckets from the bound's bucket (see the module doc).
    fn recompute_earliest(&self) {
        let bound = self.earliest.get();
        let start = self.bucket_of(bound);
        // The earliest entry seen, should the lap find none in its
        // revolution (then it has seen them all).
        let mut seen = (u64::MAX, NIL);
        for (from, end) in [(start, self.buckets.len()), (0, start)] {
            let mut at = from;
            while let Some(bucket) = self.next_occupied(at, end) {
                let mut index = self.buckets[bucket].head;
                while index != NIL {
                    let entry = self.slab.at(index);
                    debug_assert!(entry.due >= bound, "the cache is a lower bound");
                    if entry.due - bound <= self.mask {
                        // Within one revolution of the bound, and no bucket
                        // before this one in lap order held such an entry:
                        // the earliest, and the first of its tick here.
                        self.earliest.set(entry.due);
                        self.earliest_at.set(index);
                        return;
                    }
                    if seen.1 == NIL || entry.due < seen.0 {
                        seen = (entry.due, index);
                    }
                    index = entry.next;
                }
                at = bucket + 1;
            }
        }
        debug_assert!(seen.1 != NIL, "a non-empty wheel holds an entry");
        self.earliest.set(seen.0);
        self.earliest_at.set(seen.1);
    }

    /// Unlinks `entry`, just taken out of slab slot `index`, from its
    /// bucket; the cache goes stale if it was the cached entry.
    fn unlink(&mut self, index: u32, entry: &Entry<T>) {
        let bucket = self.bucket_of(entry.due);
        if entry.prev == NIL {
            self.buckets[bucket].head = entry.next;
        } else {
            self.slab.at_mut(entry.prev).next = entry.next;
        }
        if entry.next == NIL {
            self.buckets[bucket].tail = entry.prev;
        } else {
            self.slab.at_mut(entry.next).prev = entry.prev;
        }
        if self.buckets[bucket].head == NIL {
            self.occupied[bucket / 64] &= !(1 << (bucket % 64));
        }
        if self.earliest_at.get() == index {
            // `earliest` stays a lower bound.
            self.earliest_at.set(NIL);
        }
    }
}

impl<T> DelayQueue<T> for HashedWheel<T> {
    fn insert(&mut self, _now: Nanos, deadline: Nanos, value: T) -> Key {
        let due = self.due_tick(deadline);
        let bucket = self.bucket_of(due);
        let tail = self.buckets[bucket].tail;
        let key = self.slab.insert(Entry {
            value,
            due,
            prev: tail,
            next: NIL,
        });
        let index = key.slot;
        if tail == NIL {
            self.buckets[bucket].head = index;
            self.occupied[bucket / 64] |= 1 << (bucket % 64);
        } else {
            self.slab.at_mut(tail).next = index;
        }
        self.buckets[bucket].tail = index;
        if self.slab.len() == 1 || due < self.earliest.get() {
            // The only entry, or earlier than a lower bound of all others:
            // the earliest, fresh. (An entry of the cached tick goes after
            // the cached one, which stays the first of its tick.)
            self.earliest.set(due);
            self.earliest_at.set(index);
        }
        key
    }

    fn remove(&mut self, key: Key) -> Option<T> {
        let entry = self.slab.remove(key)?;
        self.unlink(key.slot, &entry);
        Some(entry.value)
    }

    fn pop_due(&mut self, now: Nanos) -> Option<(Key, T)> {
        let (due, index) = self.earliest()?;
        if self.start_of(due) > now {
            return None;
        }
        let key = self.slab.key_at(index);
        let entry = self.slab.remove(key).expect("the cached entry is live");
        self.unlink(index, &entry);
        // Every other entry of this tick follows it in the same bucket.
        let mut next = entry.next;
        while next != NIL {
            let candidate = self.slab.at(next);
            if candidate.due == due {
                self.earliest_at.set(next);
                break;
            }
            next = candidate.next;
        }
        if next == NIL {
            // None left of this tick: the bound moves past it (saturating:
            // the wheel is empty if `due` was the last tick of all).
            self.earliest.set(due.saturating_add(1));
        }
        Some((key, entry.value))
    }

    fn next_due(&self) -> Option<Nanos> {
        self.earliest().map(|(due, _)| self.start_of(due))
    }

    fn len(&self) -> usize {
        self.slab.len()
    }

    fn drain(&mut self) -> Vec<T> {
        let mut all = Vec::with_capacity(self.len());
        let mut at = 0;
        while let Some(bucket) = self.next_occupied(at, self.buckets.len()) {
            let mut index = self.buckets[bucket].head;
            while index != NIL {
                let key = self.slab.key_at(index);
                let entry = self.slab.remove(key).expect("linked entries are live");
                index = entry.next;
                all.push((entry.due, entry.value));
            }
            self.buckets[bucket] = Bucket::EMPTY;
            at = bucket + 1;
        }
        self.occupied.fill(0);
        self.earliest_at.set(NIL);
        // Stable: within a due tick, bucket order, that is insertion order.
        all.sort_by_key(|&(due, _)| due);
        all.into_iter().map(|(_, value)| value).collect()
    }

    fn slots(&self) -> usize {
        self.slab.slot_count()
    }

    fn key_in_slot_if(&self, slot: usize, pred: &mut dyn FnMut(&T) -> bool) -> Option<Key> {
        self.slab.key_in_slot_if(slot, |entry| pred(&entry.value))
    }

    #[cfg(all(test, not(loom)))]
    fn max_lateness(&self, _delay: Nanos) -> Nanos {
        self.tick - 1
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::mem::size_of;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::super::SlabSlot;
    use super::*;

    /// Pops every entry due at `now`, values only, in pop order.
    fn pop_all<T>(q: &mut HashedWheel<T>, now: Nanos) -> Vec<T> {
        std::iter::from_fn(|| q.pop_due(now).map(|(_, v)| v)).collect()
    }

    /// The values in bucket `b`, head to tail, checking its links both ways
    /// and its bit in the bitmap.
    fn bucket<T: Copy>(q: &HashedWheel<T>, b: usize) -> Vec<T> {
        let mut values = Vec::new();
        let mut prev = NIL;
        let mut index = q.buckets[b].head;
        while index != NIL {
            let entry = q.slab.at(index);
            assert_eq!(entry.prev, prev, "back link");
            assert_eq!(q.bucket_of(entry.due), b, "entry in its own bucket");
            values.push(entry.value);
            prev = index;
            index = entry.next;
        }
        assert_eq!(q.buckets[b].tail, prev, "tail");
        let bit = (q.occupied[b / 64] >> (b % 64)) & 1 == 1;
        assert_eq!(bit, !values.is_empty(), "occupancy bit of bucket {b}");
        values
    }

    #[test]
    fn pops_in_due_tick_order_then_insertion_order() {
        // 4 buckets of 10 ns: one revolution is 40 ns.
        let mut q = HashedWheel::new(10, 4);
        // Due ticks: 10, 2, 2, 6, 2, 2, 0, 20.
        for (i, d) in [95u64, 11, 20, 55, 15, 20, 0, 200].into_iter().enumerate() {
            q.insert(0, d, i);
        }
        assert_eq!(q.len(), 8);
        assert_eq!(q.next_due(), Some(0));
        assert_eq!(pop_all(&mut q, 0), [6]);
        assert_eq!(q.next_due(), Some(20), "11 rounded up to its tick");
        assert!(q.pop_due(19).is_none());
        // Several revolutions at once: due-tick order, and within tick 2
        // insertion order (11, 20, 15, 20), not deadline order.
        assert_eq!(pop_all(&mut q, 1_000), [1, 2, 4, 5, 3, 0, 7]);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn entries_rounds_ahead_stay_in_their_bucket() {
        // 8 buckets of 10 ns: one revolution is 80 ns.
        let mut q = HashedWheel::new(10, 8);
        // Due ticks 17, 9 and 1: all in bucket 1, the farthest first.
        q.insert(0, 165, "third");
        q.insert(0, 85, "second");
        q.insert(0, 1, "first");
        assert_eq!(bucket(&q, 1), ["third", "second", "first"]);
        assert_eq!(q.next_due(), Some(10));
        assert!(q.pop_due(9).is_none());
        assert_eq!(pop_all(&mut q, 10), ["first"]);
        assert_eq!(bucket(&q, 1), ["third", "second"]);
        // One revolution later the cursor passes bucket 1 again: only the
        // entry of that round is due.
        assert_eq!(q.next_due(), Some(90));
        assert!(pop_all(&mut q, 89).is_empty());
        assert_eq!(pop_all(&mut q, 90), ["second"]);
        assert_eq!(q.next_due(), Some(170));
        assert!(pop_all(&mut q, 169).is_empty());
        assert_eq!(pop_all(&mut q, 170), ["third"]);
        assert_eq!(bucket(&q, 1), [] as [&str; 0]);
    }

    #[test]
    fn past_deadlines_pop_at_once_unless_in_the_current_tick() {
        let mut q = HashedWheel::new(1_000, 8);
        let now = 10_500;
        q.insert(now, 3_000, "past");
        q.insert(now, 10_200, "this tick");
        q.insert(now, now, "now");
        assert_eq!(q.next_due(), Some(3_000));
        assert_eq!(pop_all(&mut q, now), ["past"]);
        assert_eq!(q.next_due(), Some(11_000));
        assert_eq!(pop_all(&mut q, 11_000), ["this tick", "now"]);
    }

    #[test]
    fn cancel_unlinks_from_the_middle_head_and_tail_of_a_bucket() {
        let mut q = HashedWheel::new(1, 4);
        // Due ticks 2, 6, 10, 14, 18: all in bucket 2.
        let keys: Vec<Key> = (0..5u64).map(|i| q.insert(0, 2 + 4 * i, i)).collect();
        assert_eq!(bucket(&q, 2), [0, 1, 2, 3, 4]);
        assert_eq!(q.remove(keys[2]), Some(2), "middle");
        assert_eq!(bucket(&q, 2), [0, 1, 3, 4]);
        assert_eq!(q.remove(keys[0]), Some(0), "head, the cached earliest");
        assert_eq!(bucket(&q, 2), [1, 3, 4]);
        assert_eq!(q.remove(keys[4]), Some(4), "tail");
        assert_eq!(bucket(&q, 2), [1, 3]);
        assert_eq!(q.len(), 2);
        assert_eq!(q.next_due(), Some(6));
        let after = q.insert(0, 22, 5);
        assert_eq!(bucket(&q, 2), [1, 3, 5], "appended after the new tail");
        assert_eq!(q.remove(keys[1]), Some(1));
        assert_eq!(q.next_due(), Some(14));
        assert_eq!(q.remove(keys[3]), Some(3));
        assert_eq!(q.remove(after), Some(5));
        assert_eq!(bucket(&q, 2), [] as [u64; 0], "empty: bit cleared");
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn stale_keys_remove_nothing() {
        let mut q = HashedWheel::new(1_000, 8);
        let a = q.insert(0, 5_000, 'a');
        let b = q.insert(0, 5_000, 'b');
        assert_eq!(q.remove(a), Some('a'));
        assert_eq!(q.remove(a), None, "removed twice");
        assert_eq!(q.pop_due(5_000), Some((b, 'b')));
        assert_eq!(q.remove(b), None, "already popped");
        // The slab emptied and starts afresh: its new slot 0 must not
        // answer to the old keys.
        let c = q.insert(5_000, 6_000, 'c');
        assert_eq!((q.remove(a), q.remove(b)), (None, None));
        assert_eq!(q.len(), 1);
        assert_eq!(q.drain(), ['c']);
        assert_eq!(q.remove(c), None, "drained");
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_huge_jump_of_now_does_not_walk_the_ticks() {
        // A 1 ns tick: 10^12 ticks elapse, ~2 billion revolutions.
        let mut q = HashedWheel::new(1, 512);
        let far = 1_000_000_000_000u64;
        for (i, d) in [far, 3, far - 1, far / 2, far + 1].into_iter().enumerate() {
            q.insert(0, d, i);
        }
        let started = Instant::now();
        assert_eq!(pop_all(&mut q, far), [1, 3, 2, 0]);
        assert_eq!(q.next_due(), Some(far + 1));
        assert_eq!(pop_all(&mut q, u64::MAX / 2), [4]);
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    }

    #[test]
    fn deadlines_at_the_end_of_time_neither_overflow_nor_pop_early() {
        for (tick, slots) in [(1, 1), (7, 64), (1_000, 8), (DEFAULT_TICK, DEFAULT_SLOTS)] {
            let mut q = HashedWheel::new(tick, slots);
            q.insert(0, u64::MAX, "never");
            q.insert(0, u64::MAX - 1, "almost");
            q.insert(0, u64::MAX / 2, "half");
            let half = q.next_due().unwrap();
            assert!((u64::MAX / 2..=u64::MAX / 2 + (tick - 1)).contains(&half));
            assert!(pop_all(&mut q, half - 1).is_empty());
            assert_eq!(pop_all(&mut q, half), ["half"]);
            assert!(pop_all(&mut q, u64::MAX - 2).is_empty());
            if (u64::MAX - 1) % tick == 0 {
                // u64::MAX - 1 starts a tick (ticks 1 and 7); u64::MAX lies
                // in the last, partial tick, which "starts" at u64::MAX.
                assert_eq!(q.next_due(), Some(u64::MAX - 1), "tick {tick}");
                assert_eq!(pop_all(&mut q, u64::MAX - 1), ["almost"]);
                assert_eq!(q.next_due(), Some(u64::MAX));
                assert_eq!(pop_all(&mut q, u64::MAX), ["never"]);
            } else {
                // Both in the last, partial tick: insertion order.
                assert_eq!(q.next_due(), Some(u64::MAX), "tick {tick}");
                assert!(pop_all(&mut q, u64::MAX - 1).is_empty());
                assert_eq!(pop_all(&mut q, u64::MAX), ["never", "almost"]);
            }
            assert_eq!(q.len(), 0);
        }
    }

    #[test]
    fn next_due_finds_entries_rounds_ahead() {
        // 8 buckets of 1 µs: one revolution is 8 µs.
        let mut q = HashedWheel::new(1_000, 8);
        q.insert(0, 1_000_000, "far"); // tick 1000, bucket 0
        q.insert(0, 3_000_000, "farther"); // tick 3000, bucket 0
        let near = q.insert(0, 50_500, "near"); // tick 51, bucket 3
        assert_eq!(q.next_due(), Some(51_000));
        // Nothing within a revolution of tick 51 is left: the recompute
        // scans every entry and takes the earliest.
        assert_eq!(q.remove(near), Some("near"));
        assert_eq!(q.next_due(), Some(1_000_000));
        // An entry behind a farther one in the same bucket.
        q.insert(0, 1_008_000, "next lap"); // tick 1008, bucket 0
        assert_eq!(bucket(&q, 0), ["far", "farther", "next lap"]);
        assert!(pop_all(&mut q, 999_999).is_empty());
        assert_eq!(pop_all(&mut q, 1_000_000), ["far"]);
        // The recompute passes "farther" (many rounds ahead) to find it.
        assert_eq!(q.next_due(), Some(1_008_000));
        assert_eq!(pop_all(&mut q, 2_000_000), ["next lap"]);
        assert_eq!(q.next_due(), Some(3_000_000));
        // An insert earlier than the cached tick becomes it at once.
        q.insert(2_000_000, 2_500_000, "sooner");
        assert_eq!(q.next_due(), Some(2_500_000));
        assert_eq!(pop_all(&mut q, u64::MAX), ["sooner", "farther"]);
    }

    #[test]
    fn drain_takes_everything_in_due_order_without_moving_time() {
        let mut q = HashedWheel::new(10, 4);
        let now = 500;
        assert!(pop_all(&mut q, now).is_empty());
        // Due ticks 30, 12, 10, 30, 100000, 10.
        for (i, d) in [300u64, 120, 95, 300, 1_000_000, 99]
            .into_iter()
            .enumerate()
        {
            q.insert(now, d, i);
        }
        assert_eq!(q.drain(), [2, 5, 1, 0, 3, 4]);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
        assert!(q.occupied.iter().all(|&word| word == 0));
        assert!((0..4).all(|b| bucket(&q, b).is_empty()));
        // Still usable at the same `now`.
        q.insert(now, now, 9);
        q.insert(now, now + 10, 10);
        assert_eq!(q.next_due(), Some(now));
        assert_eq!(pop_all(&mut q, now), [9]);
        assert_eq!(q.next_due(), Some(now + 10));
    }

    #[test]
    fn emptied_wheel_gives_its_memory_back() {
        let mut q = HashedWheel::default();
        // Spread over ~1.5 revolutions of the default wheel.
        let keys: Vec<Key> = (0..100_000u64).map(|i| q.insert(0, i * 7_919, i)).collect();
        assert_eq!(q.len(), 100_000);
        for (i, key) in keys.into_iter().enumerate() {
            assert_eq!(q.remove(key), Some(i as u64));
        }
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
        assert_eq!(q.slab.slots.capacity(), 0, "the slab holds no memory");
        assert!(q.occupied.iter().all(|&word| word == 0));
        assert!(q.buckets.iter().all(|b| b.head == NIL && b.tail == NIL));
        // The same through pops.
        for i in 0..100_000u64 {
            q.insert(0, i * 7_919, i);
        }
        assert_eq!(pop_all(&mut q, u64::MAX).len(), 100_000);
        assert_eq!(q.slab.slots.capacity(), 0);
        assert!(q.occupied.iter().all(|&word| word == 0));
    }

    #[test]
    fn an_entry_costs_forty_bytes_for_a_fat_arc() {
        type Fat = Arc<dyn std::any::Any + Send + Sync>;
        assert_eq!(size_of::<Fat>(), 16);
        // The value, the due tick, two links and the slab's generation.
        assert_eq!(size_of::<SlabSlot<Entry<Fat>>>(), 40);
        assert_eq!(size_of::<Bucket>(), 8);
    }
}

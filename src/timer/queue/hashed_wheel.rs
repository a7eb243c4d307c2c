//! The hashed timing wheel backend: Netty's `HashedWheelTimer`, improved.
//!
//! # Design
//!
//! Time is cut into ticks of `tick` nanoseconds. An entry is due at its
//! deadline rounded *up* to a tick boundary: its *due tick* is
//! `ceil(deadline / tick)`, kept as an absolute tick number (the equivalent
//! of Netty's `remainingRounds`). The wheel is a ring of `slots` buckets, a
//! power of two; an entry goes to the end of bucket `due tick mod slots`.
//! A bucket thus mixes entries of several *rounds* (revolutions of the
//! wheel); those whose round is not reached stay in it, untouched.
//!
//! **Buckets are arrays, not linked lists.** Each bucket keeps its entries
//! in a vector of *items* (the entry's slot in the [`Slab`] that holds the
//! values, and its due tick: 12 bytes) in insertion order (the item store
//! both wheels share, [`Items`], with its head and its count of holes). So an insert appends to a vector, and every walk
//! over a bucket (finding the next entry of a tick, finding the earliest
//! entry) is a sequential pass over items that never reads the slab. Entries linked
//! through the slab in intrusive lists, as Netty links its entry objects,
//! would make each walk pay a cache miss per entry (measured: see
//! `benches/README.md`, "The wheels: arrays, not intrusive lists").
//!
//! An item whose entry left out of insertion order (popped while an entry
//! of a later round stays before it) becomes a *hole* (its slot is replaced
//! by a marker): walks step over it without reading the slab. Holes at the front are dropped at once (a
//! `head` index moves past them); a bucket whose holes outnumber its
//! entries is compacted, so a bucket never holds more than twice its
//! entries plus a few. An occupancy bitmap (one bit per bucket, in `u64`
//! words) tells which buckets hold an entry, so that empty ones are skipped
//! 64 at a time.
//!
//! # What changes from Netty
//!
//! * **No wake-up per tick.** Netty's worker thread sleeps one tick, walks
//!   one bucket, and again, whether or not anything is due. Here the wheel
//!   keeps its earliest due tick in a cache (below); `next_due` reports it,
//!   so the timer thread sleeps until then, and `pop_due` takes the due
//!   entries straight from it: it never walks the elapsed ticks one by one,
//!   so `now` jumping by an hour costs no more than the entries now due.
//! * **Cancels leave together.** Netty queues cancellations and unlinks
//!   them one by one at its next tick; here the timer counts them and
//!   sweeps them out in one pass ([`DelayQueue::remove_where`]: the slab in
//!   slot order, then each occupied bucket once).
//! * **Memory is given back.** No object per entry: entries live in the
//!   slab, which frees its slots when the wheel empties, and an emptied
//!   bucket keeps room for at most 256 items.
//!
//! # The earliest-tick cache
//!
//! Two [`Cell`]s (so that `next_due` can refresh them through `&self`): a
//! tick that is a lower bound of every entry's due tick, and the position
//! in its bucket of the first entry of that tick, when the cache is
//! *fresh*; then the bound is the earliest due tick. An insert earlier than
//! the bound becomes the cache (O(1)). Popping the cached entry moves the
//! cache to the next entry of the same tick, found by walking on through
//! the bucket; when there is none, the bound moves past the tick and the
//! cache goes *stale*. Compacting its bucket, or a sweep, makes it stale
//! too, keeping the bound. The next `next_due` or `pop_due`
//! recomputes it: it visits the occupied buckets (found with the bitmap) in
//! lap order, from the bound's bucket, for one revolution, and stops at the
//! first entry whose due tick is less than one revolution past the bound:
//! that is the earliest. A bucket whose entries all belong to later rounds
//! is walked to its end on the way. If the revolution holds no entry, the
//! lap has seen every entry, and the earliest of them is taken.
//!
//! A recompute thus costs `slots / 64` bitmap words plus the items it walks.
//! That is usually few: when delays are shorter than a revolution
//! (`tick × slots`), the next occupied bucket holds the next due entries,
//! near its front since a bucket keeps insertion order. In the worst case it
//! is every item: when buckets are crowded with entries many rounds ahead
//! (delays much longer than a revolution, or a small wheel), or when all
//! remaining entries lie more than one revolution past the last minimum;
//! popping entries that are each more than a revolution apart is then
//! quadratic. This is the hashed wheel's known weak spot (Netty walks every
//! entry of a bucket each time its cursor passes it); the arrays make each
//! walk a sequential read of 12-byte items, and the hierarchical wheel or
//! the heap suit long, scattered delays better.
//!
//! # Complexity
//!
//! * `insert`: O(1).
//! * `remove_where` (the sweep of cancelled entries): O(slab slots +
//!   items).
//! * `pop_due`: O(1) per entry popped, plus, once per due tick, a walk over
//!   the rest of that tick's bucket (for its next entry of the same tick)
//!   and a recompute of the cache (above).
//! * `next_due`: O(1) when the cache is fresh, which it always is after
//!   `pop_due` returned `None`; a recompute otherwise.
//! * `drain`: O(n log n) (the entries are sorted by due tick).
//! * `len`: O(1), exact.
//! * Memory: 32 bytes per bucket (a vector and two counters) and one bit;
//!   per entry one slab slot (the value alone: 16 bytes for a value such
//!   as `Arc<dyn Trait>`, whose null niche marks a vacant slot) and one
//!   12-byte item, plus the vectors' spare room.
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
//! retries, heartbeats), often cancelled before they fire: insert is O(1)
//! where the heap's is O(log n), and a coarse tick is fine. Not for exact
//! deadlines, nor for many delays spanning many revolutions (see the cost
//! of a recompute above): use the heap or the hierarchical wheel.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};

use super::slab::NO_SLOT;
use super::{DelayQueue, Hole, Items, Nanos, Slab};

/// The default tick: 1 ms.
pub(crate) const DEFAULT_TICK: Nanos = 1_000_000;

/// The default number of buckets: 512 (Netty's default `ticksPerWheel`).
pub(crate) const DEFAULT_SLOTS: usize = 512;

/// The most buckets a wheel may have (2^20: 32 MiB of buckets).
pub(crate) const MAX_SLOTS: usize = 1 << 20;

/// No position: a stale cache.
const NIL: u32 = u32::MAX;

/// The slot of a hole: an item whose entry left. No slab slot has this
/// index.
const HOLE: u32 = NO_SLOT;

/// How many items ahead a pop asks for the slab entry it will need.
const PREFETCH_AHEAD: usize = 8;

/// One entry in a bucket: its slab slot (or `HOLE`) and its due tick, the
/// tick at whose start it is due: `ceil(deadline / tick)`.
///
/// 12 bytes, not 16: packed to 4-byte alignment, which leaves the `u64`
/// unaligned in every other item (a plain load on the targets this runs
/// on; the compiler refuses a reference to a packed field).
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct Item {
    slot: u32,
    due: u64,
}

impl Hole for Item {
    #[inline]
    fn is_hole(&self) -> bool {
        self.slot == HOLE
    }

    #[inline]
    fn make_hole(&mut self) {
        self.slot = HOLE;
    }
}

/// The position of an item, as the earliest-tick cache keeps it.
#[inline]
fn position(index: usize) -> u32 {
    // A bucket holds at most twice its entries plus `MIN_COMPACTED` items,
    // and a slab fewer than 2^32 entries: beyond that memory runs out first.
    u32::try_from(index).expect("a bucket holds fewer than 2^32 items")
}

/// The hashed timing wheel (see the module doc).
#[derive(Debug)]
pub(crate) struct HashedWheel<T> {
    /// Nanoseconds per tick (at least 1).
    tick: Nanos,
    /// `slots - 1`: the bucket of due tick `t` is `t & mask`.
    mask: u64,
    /// Each bucket's items in insertion order, with holes.
    buckets: Box<[Items<Item>]>,
    /// Bit `b % 64` of word `b / 64` is set if and only if bucket `b` holds
    /// an entry.
    occupied: Box<[u64]>,
    slab: Slab<T>,
    /// A lower bound of every entry's due tick; the earliest due tick while
    /// the cache is fresh (see the module doc).
    earliest: Cell<u64>,
    /// The position, in its bucket, of the first entry of due tick
    /// `earliest` while the cache is fresh; `NIL` while it is stale.
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
            buckets: (0..slots).map(|_| Items::default()).collect(),
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

    /// The earliest due tick and the position of the first entry of that
    /// tick in its bucket (recomputing a stale cache); `None` if the wheel
    /// is empty.
    fn earliest(&self) -> Option<(u64, usize)> {
        if self.slab.len() == 0 {
            return None;
        }
        if self.earliest_at.get() == NIL {
            self.recompute_earliest();
        }
        Some((self.earliest.get(), self.earliest_at.get() as usize))
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
            while let Some(b) = self.next_occupied(at, end) {
                let bucket = &self.buckets[b];
                for (pos, item) in bucket.all().iter().enumerate().skip(bucket.head()) {
                    if item.is_hole() {
                        continue;
                    }
                    debug_assert!(item.due >= bound, "the cache is a lower bound");
                    if item.due - bound <= self.mask {
                        // Within one revolution of the bound, and no bucket
                        // before this one in lap order held such an entry:
                        // the earliest, and the first of its tick here.
                        self.earliest.set(item.due);
                        self.earliest_at.set(position(pos));
                        return;
                    }
                    if seen.1 == NIL || item.due < seen.0 {
                        seen = (item.due, position(pos));
                    }
                }
                at = b + 1;
            }
        }
        debug_assert!(seen.1 != NIL, "a non-empty wheel holds an entry");
        self.earliest.set(seen.0);
        self.earliest_at.set(seen.1);
    }

    /// Marks the cache stale if it points into bucket `b` (whose items are
    /// about to move); the bound stays.
    fn forget_earliest_in(&self, b: usize) {
        if self.earliest_at.get() != NIL && self.bucket_of(self.earliest.get()) == b {
            self.earliest_at.set(NIL);
        }
    }

    /// Records that the item at `pos` in bucket `b` left (its entry is out
    /// of the slab): empties the bucket if that was its last entry, and
    /// compacts it if its holes now outnumber its entries.
    fn take_item(&mut self, b: usize, pos: usize) {
        let bucket = &mut self.buckets[b];
        bucket.take(pos);
        if bucket.live() == 0 {
            bucket.clear();
            self.occupied[b / 64] &= !(1 << (b % 64));
        } else if bucket.needs_compaction() {
            self.forget_earliest_in(b);
            self.compact(b, |_| false);
        }
    }

    /// Drops the holes of bucket `b`, and the items `also_drop` selects
    /// (whose entries the caller took out of the slab); returns the items
    /// left. Amortised O(1) per hole when called once they outnumber the
    /// entries.
    fn compact(&mut self, b: usize, mut also_drop: impl FnMut(&Item) -> bool) -> usize {
        let bucket = &mut self.buckets[b];
        bucket.retain(|item| !item.is_hole() && !also_drop(item));
        bucket.end()
    }

    /// The position of the next entry of due tick `due` after `pos` in
    /// bucket `b`, if any; prefetches the slab entry of an item further on,
    /// which the pops of the same tick will likely need.
    fn next_of_tick(&self, b: usize, pos: usize, due: u64) -> Option<usize> {
        let items = self.buckets[b].all();
        let mut later = items[pos + 1..].iter();
        let next = pos + 1 + later.position(|item| item.due == due && !item.is_hole())?;
        if let Some(ahead) = items.get(next + PREFETCH_AHEAD) {
            self.slab.prefetch(ahead.slot);
        }
        Some(next)
    }
}

impl<T> DelayQueue<T> for HashedWheel<T> {
    fn insert(&mut self, _now: Nanos, deadline: Nanos, value: T) {
        let due = self.due_tick(deadline);
        let b = self.bucket_of(due);
        let pos = self.buckets[b].end();
        let slot = self.slab.insert(value);
        let bucket = &mut self.buckets[b];
        if bucket.live() == 0 {
            self.occupied[b / 64] |= 1 << (b % 64);
        }
        bucket.push(Item { slot, due });
        if self.slab.len() == 1 || due < self.earliest.get() {
            // The only entry, or earlier than a lower bound of all others:
            // the earliest, fresh. (An entry of the cached tick goes after
            // the cached one, which stays the first of its tick.)
            self.earliest.set(due);
            self.earliest_at.set(position(pos));
        }
    }

    fn pop_due(&mut self, now: Nanos) -> Option<T> {
        let (due, pos) = self.earliest()?;
        if self.start_of(due) > now {
            return None;
        }
        let b = self.bucket_of(due);
        let slot = self.buckets[b].all()[pos].slot;
        let value = self.slab.remove(slot);
        // Every other entry of this tick follows it in the same bucket.
        match self.next_of_tick(b, pos, due) {
            Some(next) => self.earliest_at.set(position(next)),
            None => {
                // None left of this tick: the bound moves past it
                // (saturating: the wheel is empty if `due` was the last
                // tick of all).
                self.earliest.set(due.saturating_add(1));
                self.earliest_at.set(NIL);
            }
        }
        self.take_item(b, pos);
        Some(value)
    }

    fn granularity(&self) -> Nanos {
        self.tick
    }

    fn peek_next(&self) -> Option<&T> {
        let (due, pos) = self.earliest()?;
        self.slab
            .get(self.buckets[self.bucket_of(due)].all()[pos].slot)
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
        while let Some(b) = self.next_occupied(at, self.buckets.len()) {
            let bucket = &mut self.buckets[b];
            for item in bucket.pending() {
                if !item.is_hole() {
                    let value = self.slab.remove(item.slot);
                    all.push((item.due, value));
                }
            }
            bucket.clear();
            at = b + 1;
        }
        self.occupied.fill(0);
        self.earliest_at.set(NIL);
        // Stable: within a due tick, bucket order, that is insertion order.
        all.sort_by_key(|&(due, _)| due);
        all.into_iter().map(|(_, value)| value).collect()
    }

    /// Two sequential passes. The first walks the slab in slot order,
    /// removing each dead entry and noting its slot in a bitmap of one bit
    /// per slot: slots, like the tasks they point to, were mostly filled in
    /// insertion order, so the reads stream through memory. The second
    /// walks each occupied bucket's items, dropping the holes and the items
    /// of noted slots, keeping the others in order. Walking bucket by
    /// bucket instead would read the slab and
    /// the tasks in a bucket's order, a cache miss per entry (measured: see
    /// `benches/README.md`, "The wheels' sweeps: in slab-slot order").
    ///
    /// A bucket left with more than twice the room it needs (plus 256
    /// items) is shrunk; a bucket it empties frees its vector, and so does
    /// every bucket once the wheel is empty. Allocates the bitmap (slots / 8
    /// bytes, freed before it returns). O(slots of the slab + items).
    fn remove_where(
        &mut self,
        dead: &mut dyn FnMut(&T) -> bool,
        removed: &mut dyn FnMut(T),
    ) -> usize {
        let mut gone = self.slab.removal_set();
        // A panic in `removed` (a task's drop) is held until the items of
        // the slots emptied so far are gone too: an item must not name a
        // slot the slab may hand out again.
        let swept = panic::catch_unwind(AssertUnwindSafe(|| {
            self.slab
                .remove_where(&mut gone, |value| dead(value), removed)
        }));
        if self.slab.len() == 0 {
            // Swept empty (a mass cancel): no bucket keeps any room either.
            // A small vector left here and there would pin the allocator's
            // heap above the freed tasks, and their memory would not go
            // back to the system.
            self.buckets.iter_mut().for_each(Items::release);
            self.occupied.fill(0);
            self.earliest_at.set(NIL);
        } else if gone.count > 0 {
            let mut at = 0;
            while let Some(b) = self.next_occupied(at, self.buckets.len()) {
                at = b + 1;
                if self.compact(b, |item| gone.contains(item.slot)) == 0 {
                    self.buckets[b].release();
                    self.occupied[b / 64] &= !(1 << (b % 64));
                }
                self.forget_earliest_in(b);
            }
        }
        if let Err(panic) = swept {
            panic::resume_unwind(panic);
        }
        gone.count
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

    use super::*;
    use crate::timer::queue::items::MIN_COMPACTED;
    use crate::timer::queue::slab::SlabSlot;

    /// Pops every entry due at `now`, values only, in pop order.
    fn pop_all<T: Copy>(q: &mut HashedWheel<T>, now: Nanos) -> Vec<T> {
        let popped = std::iter::from_fn(|| q.pop_due(now)).collect();
        check_invariants(q);
        popped
    }

    /// The values in bucket `b`, in order, checking the bucket's structure:
    /// each item's entry is in the slab, the holes are counted, the head is
    /// not a hole, an empty bucket holds nothing, and its bit in the bitmap
    /// says whether it holds an entry.
    fn bucket<T: Copy>(q: &HashedWheel<T>, b: usize) -> Vec<T> {
        let queue = &q.buckets[b];
        let head = queue.head();
        let mut values = Vec::new();
        let mut holes = 0;
        for (pos, item) in queue.all().iter().enumerate().skip(head) {
            if item.is_hole() {
                assert_ne!(pos, head, "a hole at the head of bucket {b}");
                holes += 1;
                continue;
            }
            let value = q.slab.get(item.slot).expect("an item's entry is live");
            assert_eq!(q.bucket_of(item.due), b, "due tick of bucket {b}");
            values.push(*value);
        }
        assert_eq!(queue.dead(), holes, "holes of bucket {b}");
        if values.is_empty() {
            assert!(queue.all().is_empty() && head == 0, "empty bucket {b}");
        }
        let bit = (q.occupied[b / 64] >> (b % 64)) & 1 == 1;
        assert_eq!(bit, !values.is_empty(), "occupancy bit of bucket {b}");
        values
    }

    /// Sweeps out the entries whose values are in `values` (a cancel of
    /// each); how many it removed.
    fn sweep<T: Copy + PartialEq>(q: &mut HashedWheel<T>, values: &[T]) -> usize {
        let count = q.remove_where(&mut |v| values.contains(v), &mut drop);
        check_invariants(q);
        count
    }

    /// Checks every bucket, that they hold exactly `len` entries, and the
    /// cache: a lower bound of every due tick, and when fresh the earliest
    /// one, pointing at the first entry of that tick in its bucket.
    fn check_invariants<T: Copy>(q: &HashedWheel<T>) {
        let count: usize = (0..q.buckets.len()).map(|b| bucket(q, b).len()).sum();
        assert_eq!(count, q.len());
        let items = q.buckets.iter().flat_map(|b| b.pending());
        let live: Vec<&Item> = items.filter(|item| !item.is_hole()).collect();
        // Without generations, two items naming one slot would pop one
        // entry twice: every slot is named once.
        let slots: std::collections::HashSet<u32> = live.iter().map(|item| item.slot).collect();
        assert_eq!(slots.len(), live.len(), "two items name one slab slot");
        let Some(min) = live.iter().map(|item| item.due).min() else {
            return;
        };
        assert!(q.earliest.get() <= min, "the cache is a lower bound");
        if q.earliest_at.get() != NIL {
            assert_eq!(q.earliest.get(), min, "a fresh cache is the earliest");
            let bucket = &q.buckets[q.bucket_of(min)];
            let pos = q.earliest_at.get() as usize;
            let first = bucket
                .pending()
                .iter()
                .position(|item| !item.is_hole() && item.due == min)
                .map(|i| i + bucket.head());
            assert_eq!(first, Some(pos), "the first entry of the earliest tick");
        }
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
    fn a_sweep_removes_from_the_middle_head_and_tail_of_a_bucket() {
        let mut q = HashedWheel::new(1, 4);
        // Due ticks 2, 6, 10, 14, 18: all in bucket 2.
        for i in 0..5u64 {
            q.insert(0, 2 + 4 * i, i);
        }
        assert_eq!(bucket(&q, 2), [0, 1, 2, 3, 4]);
        assert_eq!(sweep(&mut q, &[2]), 1, "middle");
        assert_eq!(bucket(&q, 2), [0, 1, 3, 4]);
        assert_eq!(sweep(&mut q, &[0]), 1, "head, the cached earliest");
        assert_eq!(bucket(&q, 2), [1, 3, 4]);
        assert_eq!(sweep(&mut q, &[4]), 1, "tail");
        assert_eq!(bucket(&q, 2), [1, 3]);
        assert_eq!(q.len(), 2);
        assert_eq!(q.next_due(), Some(6));
        q.insert(0, 22, 5);
        assert_eq!(bucket(&q, 2), [1, 3, 5], "appended after the new tail");
        assert_eq!(sweep(&mut q, &[1]), 1);
        assert_eq!(q.next_due(), Some(14));
        assert_eq!(sweep(&mut q, &[3, 5, 1]), 2, "1 was swept before");
        assert_eq!(bucket(&q, 2), [] as [u64; 0], "empty: bit cleared");
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn a_swept_or_popped_entry_is_not_swept_again() {
        let mut q = HashedWheel::new(1_000, 8);
        q.insert(0, 5_000, 'a');
        q.insert(0, 5_000, 'b');
        assert_eq!(sweep(&mut q, &['a']), 1);
        assert_eq!(sweep(&mut q, &['a']), 0, "swept twice");
        q.insert(0, 5_000, 'd');
        assert_eq!(q.slab.slots.len(), 2, "d reuses a's slab slot");
        assert_eq!(q.pop_due(5_000), Some('b'));
        assert_eq!(q.pop_due(5_000), Some('d'));
        assert_eq!(sweep(&mut q, &['b']), 0, "already popped");
        q.insert(5_000, 6_000, 'c');
        assert_eq!(q.len(), 1);
        assert_eq!(q.drain(), ['c']);
        assert_eq!(sweep(&mut q, &['c']), 0, "drained");
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
        q.insert(0, 50_500, "near"); // tick 51, bucket 3
        assert_eq!(q.next_due(), Some(51_000));
        // Nothing within a revolution of tick 51 is left: the recompute
        // scans every entry and takes the earliest.
        assert_eq!(sweep(&mut q, &["near"]), 1);
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
        for i in 0..100_000u64 {
            q.insert(0, i * 7_919, i);
        }
        assert_eq!(q.len(), 100_000);
        assert_eq!(q.remove_where(&mut |_| true, &mut drop), 100_000);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
        assert_eq!(q.slab.slots.capacity(), 0, "the slab holds no memory");
        assert!(q.occupied.iter().all(|&word| word == 0));
        assert!(q.buckets.iter().all(|b| b.all().is_empty()));
        // The same through pops.
        for i in 0..100_000u64 {
            q.insert(0, i * 7_919, i);
        }
        assert_eq!(pop_all(&mut q, u64::MAX).len(), 100_000);
        assert_eq!(q.slab.slots.capacity(), 0);
        assert!(q.occupied.iter().all(|&word| word == 0));
        // The same through a sweep (the executor's mass cancel), after pops
        // that emptied some buckets (which keep some room): not even that
        // room is left.
        for i in 0..100_000u64 {
            q.insert(0, i * 7_919, i);
        }
        let popped = pop_all(&mut q, 100_000 * 7_919 * 3 / 5).len();
        assert!(q
            .buckets
            .iter()
            .any(|b| b.all().is_empty() && b.capacity() > 0));
        let swept = q.remove_where(&mut |_| true, &mut drop);
        assert_eq!(popped + swept, 100_000);
        assert_eq!(q.slab.slots.capacity(), 0);
        assert!(q.buckets.iter().all(|b| b.capacity() == 0));
    }

    #[test]
    fn pops_out_of_insertion_order_leave_holes_that_are_compacted() {
        // One bucket of 1 ns: every entry shares it, each its own round.
        let mut q = HashedWheel::new(1, 1);
        q.insert(0, 1_000_000, u64::MAX);
        // 100 entries behind the far one, due in turn: each pop leaves a
        // hole behind the head (the far entry), and the holes are compacted
        // once they outnumber the entries.
        for i in 0..100u64 {
            q.insert(0, 10 + i, i);
        }
        for i in 0..100u64 {
            assert_eq!(pop_all(&mut q, 10 + i), [i]);
            let b = &q.buckets[0];
            assert!(b.end() <= 2 * b.live() + MIN_COMPACTED + 1, "{i}");
        }
        assert_eq!(bucket(&q, 0), [u64::MAX]);
        assert_eq!(q.next_due(), Some(1_000_000));
        // New entries go after the far one, in order.
        q.insert(0, 500, 500);
        q.insert(0, 400, 400);
        assert_eq!(bucket(&q, 0), [u64::MAX, 500, 400]);
        assert_eq!(pop_all(&mut q, 999_999), [400, 500]);
        assert_eq!(sweep(&mut q, &[u64::MAX]), 1);
        assert_eq!(q.len(), 0);
        assert!(q.buckets[0].all().is_empty());
    }

    #[test]
    fn compaction_keeps_the_cached_earliest_entry() {
        // One bucket: a far entry at its head, then 100 entries of one tick
        // and 100 of the next round. Popping the tick leaves holes behind
        // the head, compacted halfway, while the cache points at the next
        // entry of the tick.
        let mut q = HashedWheel::new(1, 1);
        q.insert(0, 1_000_000, u64::MAX);
        for i in 0..100u64 {
            q.insert(0, 10, i);
            q.insert(0, 11, 1_000 + i);
        }
        assert_eq!(pop_all(&mut q, 10), (0..100).collect::<Vec<_>>());
        // A sweep of most of the next tick's entries rewrites the bucket
        // while the cache points into it.
        for i in 0..300u64 {
            q.insert(0, 12, 2_000 + i);
        }
        let swept: Vec<u64> = (2_010..2_299).collect();
        assert_eq!(sweep(&mut q, &swept), 289);
        assert!(q.buckets[0].end() < 300, "compacted");
        assert_eq!(q.next_due(), Some(11));
        let rest = (1_000..1_100).chain(2_000..2_010).chain([2_299]);
        let rest = rest.collect::<Vec<_>>();
        assert_eq!(pop_all(&mut q, 12), rest);
        assert_eq!(bucket(&q, 0), [u64::MAX]);
    }

    /// Random operations with every structural invariant checked after
    /// each one (shared with the other wheel: `model_test`).
    #[test]
    fn random_operations_keep_the_structure_sound() {
        for (tick, slots) in [(1, 1), (3, 4), (1_000, 64)] {
            super::super::model_test::random_operations_keep_the_structure_sound(
                HashedWheel::new(tick, slots),
                check_invariants,
            );
        }
    }

    /// A task's drop that panics in the middle of a sweep: the slots
    /// emptied up to it lose their items before the panic goes on, so the
    /// entries that reuse those slots pop once each, and nothing else.
    #[test]
    fn a_panic_while_handing_out_a_sweep_leaves_no_item_on_an_emptied_slot() {
        super::super::model_test::a_panic_in_a_sweep_leaves_the_queue_whole(
            HashedWheel::new(1_000, 8),
            check_invariants,
        );
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_entry_costs_28_bytes_for_a_fat_arc() {
        type Fat = Arc<dyn std::any::Any + Send + Sync>;
        assert_eq!(size_of::<Fat>(), 16);
        // The value alone; then its item in the bucket: its slab slot and
        // due tick.
        assert_eq!(size_of::<SlabSlot<Fat>>(), 16);
        assert_eq!(size_of::<Item>(), 12);
        assert_eq!(size_of::<Items<Item>>(), 32, "a bucket");
    }
}

//! The hierarchical timing wheel backend: levels of 64 slots, each level's
//! slots 64 times coarser than the level below (tokio's layout), with an
//! occupancy bitmap per level, and cascading.
//!
//! # Design
//!
//! Time is counted in *ticks* of a fixed length (`tick` ns, 1 ms by
//! default). A deadline is rounded **up** to its tick (never down: nothing
//! is popped before its deadline). The wheel keeps its own time, `elapsed`
//! (in ticks, never ahead of the `now` it was given), and places an entry
//! due at tick `t` by the highest 6-bit group in which `elapsed` and `t`
//! differ: that group is the level, `t`'s bits in that group the slot. So
//! level 0 holds the entries due in the current 64 ticks, slot by tick;
//! level 1 those due in the current 64² ticks, 64 ticks per slot; and so on.
//! Eleven levels cover every `u64` tick (the top one uses 16 of its slots),
//! so every deadline up to `u64::MAX` ns has a place for every tick, with no
//! overflow list and no wrap-around; a level whose bitmap is 0 costs nothing.
//!
//! * **Cascading**: when the wheel's time reaches a slot of level `L > 0`,
//!   its entries move, in order, to the levels below, where they now
//!   differ from the wheel's time in a lower group. An entry moves at most
//!   once per level (at most 10 times in its life, about
//!   log₆₄(delay / tick) times in practice), and is popped from level 0 at
//!   its own tick: at most one tick late (see *Lateness*), unlike Linux's
//!   non-cascading wheel (since 4.8), whose lateness grows with the delay.
//! * **No empty ticks**: each level has a `u64` occupancy bitmap, and one
//!   more word marks the occupied levels, so the next non-empty slot is a
//!   couple of `trailing_zeros`. [`pop_due`](DelayQueue::pop_due) jumps
//!   straight to it, whatever the distance (an hour at a 1 ns tick is as
//!   cheap as one tick). No rotation is needed: the levels reach every tick,
//!   so an occupied slot never lies behind the wheel's current slot of its
//!   level (tokio rotates because its top level wraps).
//! * **Slots are arrays, not linked lists**: each slot keeps its entries in
//!   a vector of *items* (the entry's slot in the [`Slab`] that holds the
//!   values, and a copy of its tick: 12 bytes), appended to in insertion
//!   order (the item store both wheels share, [`Items`], with its head). So placing an entry
//!   writes to the end of its slot's vector (a line the cache holds: a few
//!   hundred slots are in use at a time), and a cascade is one sequential
//!   pass that never reads the slab. Entries linked through the slab in
//!   intrusive lists would make a cascade walk a million-entry list one
//!   cache miss at a time: under a million timers a second, every 64th tick
//!   would stall the wheel (measured: see `benches/README.md`, "The wheels:
//!   arrays, not intrusive lists"). A pop reads its value from the slab,
//!   and asks the CPU to fetch the entry of the item eight places on (a
//!   prefetch), so that the pops of one tick overlap their cache misses
//!   (measured: the same section).
//! * **O(1) insert; cancels leave together**: the timer counts its
//!   cancels and sweeps them out in one pass
//!   ([`remove_where`](DelayQueue::remove_where)), which rewrites every
//!   slot it removes from and gives back the room it no longer needs, so
//!   a slot holds its entries and nothing else (a pop takes its front, a
//!   cascade moves it whole). An entry does not store its level and slot:
//!   like tokio, the wheel derives them from the entry's tick and its own
//!   time (the placement rule above gives the same answer until the wheel
//!   reaches the slot, when it cascades it). A timer a year out costs what
//!   one a second out costs.
//! * **Exact `next_due`**: the earliest entry is in the first occupied slot
//!   of the lowest occupied level (see [`HierarchicalWheel::first_occupied`]
//!   for why). On level 0 that slot's tick is exact. On a coarser level the
//!   slot spans many ticks, and its start is only a cascade point: reporting
//!   it (as tokio's and Kafka's wheels do) would wake the timer thread for
//!   nothing. Instead each coarse slot keeps its minimum tick, set by its
//!   first entry and lowered by later ones in O(1), and found again by a
//!   sweep that removes entries from the slot.
//! * **FIFO among equal deadlines**: entries with equal deadlines in the
//!   wheel together have equal ticks (an overdue one gets the wheel's time,
//!   which cannot have passed an entry still in the wheel), hence the same
//!   slot; slots are appended to, and a cascade moves a whole slot in
//!   order before the wheel's time enters the slot's span, that is before a later
//!   entry of the same tick could be placed below it. Entries are placed
//!   relative to the wheel's time, which an insert never advances. Within
//!   one sequence of `pop_due` calls, entries come out by tick, within a
//!   tick in insertion order.
//!
//! # Compared with Kafka and tokio
//!
//! Kafka's `TimingWheel` skips empty ticks by putting every non-empty bucket
//! in a `java.util.concurrent.DelayQueue` (a heap: O(log buckets) per bucket
//! and a wake-up at each bucket's start, cascade points included), builds
//! its overflow wheels on demand, and allocates an entry object per timer.
//! Here two bit scans find the next bucket, the levels are fixed, and
//! entries live in one slab. Tokio's wheel (six levels, 1 ms) reaches
//! 2³⁶ ms (~2.2 years) and folds later deadlines into its top level; its
//! next expiration is the start of the first occupied slot, so its driver
//! wakes at cascade points. Here every `u64` deadline has its exact place,
//! and `next_due` is the earliest entry's own tick.
//!
//! # Costs
//!
//! With `n` entries:
//!
//! * `insert`: O(1) (a division, an xor and a leading-zero count to place
//!   the entry, a vector push, two bitmap words). There is no removal of
//!   one entry: a cancel is counted and swept (`remove_where`, below), as
//!   the timer does for every backend.
//! * `pop_due`: O(1) per entry popped, plus the cascades of the slots it
//!   reaches (each entry at most once per level: O(levels) per entry over
//!   its life, not per call). Time jumps cost nothing.
//! * `next_due`: O(1) (two bit scans and the slot's kept minimum). (One
//!   minimum per level would be lost at each cascade: with a million
//!   timers over a second, each 64 ms slot of level 1 would need a scan of
//!   ~64,000 entries when it became the earliest, which makes the
//!   `timer-fire` workload's tasks late by far more than a tick; measured:
//!   see `benches/README.md`, "The hierarchical wheel: a minimum per
//!   coarse slot".)
//! * `drain`: O(n + occupied slots). `len`: O(1).
//! * Memory: fixed, 11 × 64 slots of 32 bytes (22 KiB) and their kept
//!   minima (16 bytes each, 11 KiB), 11 bitmap words and a few words of
//!   state; per entry one slab slot (the value alone: 16 bytes for a
//!   value such as `Arc<dyn Trait>`) and one 12-byte item, plus the
//!   vectors' spare room (at most as much again).
//!   An emptied slot keeps room for at most 256 items (3 KiB); the slab
//!   frees its slots when the wheel empties.
//!
//! # Lateness
//!
//! An entry with deadline `d` is popped by the first `pop_due(now)` with
//! `now ≥ ⌈d / tick⌉ · tick` (or `now == u64::MAX`), so at most `tick − 1` ns
//! after its deadline, whatever its delay; `next_due` reports exactly that
//! time for the earliest entry. An entry inserted already overdue, behind
//! the wheel's time, is due at once and popped by the next `pop_due`.
//!
//! # When to use it
//!
//! Many timers over wide spans (timeouts, retries, leases), most cancelled
//! before they fire, where O(1) insert and pop matter more than sub-tick
//! precision. With few timers, or when the exact deadline matters, the
//! heap is simpler and exact.

use std::cell::Cell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use super::{DelayQueue, Items, Nanos, Slab};

/// Bits of a tick each level resolves: 64 slots per level.
const SLOT_BITS: u32 = 6;

/// Slots per level.
const SLOTS: usize = 1 << SLOT_BITS;

/// Levels: enough for every `u64` tick (11 × 6 = 66 ≥ 64 bits).
const LEVELS: usize = (u64::BITS as usize).div_ceil(SLOT_BITS as usize);

/// How many items ahead a pop asks for the slab entry it will need.
const PREFETCH_AHEAD: usize = 8;

/// One entry in a slot's queue: its slot in the slab (which holds the
/// value) and its tick, so that placing, cascading and scanning never read
/// the slab. The tick is the entry's deadline rounded up to the tick, or
/// the wheel's time if that was later when it was inserted; with the
/// wheel's time it determines the entry's level and slot.
///
/// 12 bytes, not 16: packed to 4-byte alignment, which leaves the `u64`
/// unaligned in every other item (a plain load on the targets this runs
/// on; the compiler refuses a reference to a packed field).
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct Item {
    slot: u32,
    tick: u64,
}

/// The hierarchical timing wheel (see the module doc).
pub(crate) struct HierarchicalWheel<T> {
    /// The length of a tick, in ns (at least 1).
    tick: Nanos,
    /// The wheel's time, in ticks: where entries are placed from. Never
    /// ahead of the last `now` given to `pop_due`.
    elapsed: u64,
    /// `LEVELS × SLOTS` slots, level by level: each slot's items in
    /// insertion order.
    slots: Box<[Items<Item>]>,
    /// Per level, bit `s` set iff slot `s` of that level holds an entry.
    occupied: [u64; LEVELS],
    /// Bit `l` set iff `occupied[l] != 0`.
    occupied_levels: u16,
    /// Per slot of the levels above 0 (a level-0 slot is a single tick),
    /// the earliest tick of its entries when known (`None`: unknown, or
    /// empty). Kept by every insert in O(1) (a slot's first entry sets it,
    /// later ones lower it) and by a sweep (which scans the slots it
    /// removes from).
    slot_min: Box<[Cell<Option<u64>>]>,
    slab: Slab<T>,
}

impl<T> fmt::Debug for HierarchicalWheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HierarchicalWheel")
            .field("tick", &self.tick)
            .field("elapsed", &self.elapsed)
            .field("len", &self.slab.len())
            .field("occupied", &self.occupied)
            .finish_non_exhaustive()
    }
}

impl<T> Default for HierarchicalWheel<T> {
    /// A wheel with the default tick, [`DEFAULT_TICK`](Self::DEFAULT_TICK).
    fn default() -> Self {
        Self::new(Self::DEFAULT_TICK)
    }
}

/// The level of an entry due at `tick` while the wheel is at `elapsed`: the
/// highest 6-bit group in which they differ (0 if they differ only in the
/// lowest group, or not at all).
#[inline]
fn level_for(elapsed: u64, tick: u64) -> usize {
    let significant = u64::BITS - 1 - ((elapsed ^ tick) | (SLOTS as u64 - 1)).leading_zeros();
    (significant / SLOT_BITS) as usize
}

/// The slot of an entry due at `tick` on `level`: its bits in that group.
#[inline]
fn slot_for(tick: u64, level: usize) -> usize {
    ((tick >> (SLOT_BITS * level as u32)) as usize) & (SLOTS - 1)
}

impl<T> HierarchicalWheel<T> {
    /// The default tick: 1 ms, as tokio's.
    pub(crate) const DEFAULT_TICK: Nanos = 1_000_000;

    /// An empty wheel whose time starts at 0, with ticks of `tick` ns (the
    /// caller checked `tick >= 1`).
    pub(crate) fn new(tick: Nanos) -> Self {
        debug_assert!(tick >= 1, "a tick of 0 ns");
        HierarchicalWheel {
            tick,
            elapsed: 0,
            slots: (0..LEVELS * SLOTS).map(|_| Items::default()).collect(),
            occupied: [0; LEVELS],
            occupied_levels: 0,
            slot_min: (0..LEVELS * SLOTS).map(|_| Cell::new(None)).collect(),
            slab: Slab::default(),
        }
    }

    /// The tick a deadline is due at: rounded up (cannot overflow: for a
    /// tick of 1 the remainder is 0, else the quotient is at most half).
    #[inline]
    fn tick_of_deadline(&self, deadline: Nanos) -> u64 {
        deadline / self.tick + u64::from(deadline % self.tick != 0)
    }

    /// The last tick that has fully begun at `now`: rounded down, except
    /// that `u64::MAX` (the end of time) reaches every deadline's tick.
    #[inline]
    fn tick_of_now(&self, now: Nanos) -> u64 {
        if now == Nanos::MAX {
            self.tick_of_deadline(now)
        } else {
            now / self.tick
        }
    }

    /// The time a tick begins (saturating: with a tick that does not divide
    /// `u64::MAX`, the last tick would begin after it).
    #[inline]
    fn time_of(&self, tick: u64) -> Nanos {
        tick.saturating_mul(self.tick)
    }

    /// The level and slot of an entry due at `tick`, given the wheel's
    /// current time (the placement rule of the module doc).
    #[inline]
    fn position(&self, tick: u64) -> (usize, usize) {
        let level = level_for(self.elapsed, tick);
        (level, slot_for(tick, level))
    }

    /// The first tick of `slot` on `level`, given the wheel's current time:
    /// the wheel's time above the level, the slot in the level's group,
    /// zeros below.
    #[inline]
    fn slot_start(&self, level: usize, slot: usize) -> u64 {
        let shift = SLOT_BITS * level as u32;
        let above = shift + SLOT_BITS;
        let prefix = self.elapsed.checked_shr(above).map_or(0, |p| p << above);
        prefix | ((slot as u64) << shift)
    }

    /// The first occupied slot of the lowest occupied level, as (level,
    /// slot): where the earliest entry is.
    ///
    /// Why: an entry on level `L` agrees with the wheel's time above group
    /// `L` and is later in group `L`, so its tick is at least the start of
    /// the wheel's next level-`L` slot; an entry on a level below `L` agrees
    /// with the wheel's time in group `L` and above, so its tick is before
    /// that. Hence every entry of a lower level is earlier than every entry
    /// of a higher one, and within a level the slots follow the ticks.
    ///
    /// The same reasoning shows that no occupied slot lies behind the
    /// wheel's current slot of its level (on levels above 0 not even on it),
    /// so no rotation is needed before `trailing_zeros`.
    #[inline]
    fn first_occupied(&self) -> Option<(usize, usize)> {
        if self.occupied_levels == 0 {
            return None;
        }
        let level = self.occupied_levels.trailing_zeros() as usize;
        let bitmap = self.occupied[level];
        let current = slot_for(self.elapsed, level) as u32;
        let behind = if level == 0 {
            (1u64 << current) - 1
        } else {
            u64::MAX >> (u64::BITS - 1 - current)
        };
        debug_assert_eq!(bitmap & behind, 0, "a slot behind the wheel's time");
        Some((level, bitmap.trailing_zeros() as usize))
    }

    /// Appends `item` to the slot its tick places it in.
    #[inline]
    fn link(&mut self, item: Item) {
        let (level, slot) = self.position(item.tick);
        let index = level * SLOTS + slot;
        let queue = &mut self.slots[index];
        let was_empty = queue.live() == 0;
        queue.push(item);
        if was_empty {
            self.occupied[level] |= 1 << slot;
            self.occupied_levels |= 1 << level;
        }
        if level > 0 {
            let min = &self.slot_min[index];
            if was_empty {
                min.set(Some(item.tick));
            } else if let Some(known) = min.get() {
                min.set(Some(known.min(item.tick)));
            }
        }
    }

    /// Empties `slot` of `level` (its entries left) and marks it so.
    fn clear_slot(&mut self, level: usize, slot: usize) {
        self.slots[level * SLOTS + slot].clear();
        self.slot_min[level * SLOTS + slot].set(None);
        self.occupied[level] &= !(1 << slot);
        if self.occupied[level] == 0 {
            self.occupied_levels &= !(1 << level);
        }
    }

    /// Moves the entries of `slot` on `level` (> 0), which the wheel's time
    /// just reached, to the levels below, in order. A sequential pass over
    /// the slot's items that does not read the slab.
    fn cascade(&mut self, level: usize, slot: usize) {
        let index = level * SLOTS + slot;
        let mut queue = std::mem::take(&mut self.slots[index]);
        self.clear_slot(level, slot);
        for item in queue.pending() {
            debug_assert!(self.position(item.tick).0 < level, "a cascade moves down");
            self.link(*item);
        }
        // Give the slot its storage back.
        queue.clear();
        self.slots[index] = queue;
    }

    /// The earliest tick in `slot` of `level` (> 0): cached, or found by a
    /// scan of its items and cached.
    fn earliest_in(&self, level: usize, slot: usize) -> u64 {
        let cached = &self.slot_min[level * SLOTS + slot];
        if let Some(min) = cached.get() {
            return min;
        }
        let tick = self.slots[level * SLOTS + slot]
            .pending()
            .iter()
            .map(|item| item.tick)
            .min()
            .unwrap_or(u64::MAX);
        cached.set(Some(tick));
        tick
    }

    /// Pops the first entry of the level-0 `slot` (which holds one).
    fn pop_front(&mut self, slot: usize) -> T {
        let queue = &mut self.slots[slot];
        let at = queue.head();
        let slot_of_entry = queue.pop_front().slot;
        if let Some(ahead) = queue.all().get(at + PREFETCH_AHEAD) {
            self.slab.prefetch(ahead.slot);
        }
        let value = self.slab.remove(slot_of_entry);
        if self.slots[slot].live() == 0 {
            self.clear_slot(0, slot);
        }
        value
    }
}

impl<T> DelayQueue<T> for HierarchicalWheel<T> {
    fn insert(&mut self, now: Nanos, deadline: Nanos, value: T) {
        debug_assert!(self.tick_of_now(now) >= self.elapsed, "now went back");
        // Overdue (behind the wheel's time): due at the wheel's time.
        let tick = self.tick_of_deadline(deadline).max(self.elapsed);
        let slot = self.slab.insert(value);
        self.link(Item { slot, tick });
    }

    fn pop_due(&mut self, now: Nanos) -> Option<T> {
        let now_tick = self.tick_of_now(now);
        loop {
            match self.first_occupied() {
                Some((level, slot)) if self.slot_start(level, slot) <= now_tick => {
                    // The wheel's time jumps to the slot (no empty ticks).
                    debug_assert!(self.slot_start(level, slot) >= self.elapsed);
                    self.elapsed = self.slot_start(level, slot);
                    if level > 0 {
                        self.cascade(level, slot);
                        continue;
                    }
                    // A level-0 slot is one tick, now due: its first entry.
                    return Some(self.pop_front(slot));
                }
                _ => {
                    // Nothing due. The wheel's time may move up to `now`
                    // (not into the first occupied slot, which starts later:
                    // every entry stays where the placement rule puts it),
                    // so that later inserts land on finer levels.
                    self.elapsed = self.elapsed.max(now_tick);
                    return None;
                }
            }
        }
    }

    fn granularity(&self) -> Nanos {
        self.tick
    }

    fn peek_next(&self) -> Option<&T> {
        match self.first_occupied()? {
            (0, slot) => self.slab.get(self.slots[slot].pending().first()?.slot),
            // A cascade decides which comes first.
            _ => None,
        }
    }

    fn next_due(&self) -> Option<Nanos> {
        let (level, slot) = self.first_occupied()?;
        let tick = if level == 0 {
            self.slot_start(0, slot)
        } else {
            self.earliest_in(level, slot)
        };
        Some(self.time_of(tick))
    }

    fn len(&self) -> usize {
        self.slab.len()
    }

    fn drain(&mut self) -> Vec<T> {
        // Level by level, slot by slot: earliest first, except within a
        // slot of a coarse level (insertion order there).
        let mut all = Vec::with_capacity(self.len());
        while let Some((level, slot)) = self.first_occupied() {
            let queue = std::mem::take(&mut self.slots[level * SLOTS + slot]);
            self.clear_slot(level, slot);
            let values = queue
                .pending()
                .iter()
                .map(|item| self.slab.remove(item.slot));
            all.extend(values);
        }
        all
    }

    /// Two sequential passes, as in the hashed wheel: the slab in slot
    /// order (mostly the order the entries, and their tasks, were
    /// allocated in), removing each dead entry and noting its slot in a
    /// bitmap; then each occupied slot's items, keeping, in order, those
    /// not noted (without reading the slab). Walking slot by slot instead
    /// would read the slab in
    /// a slot's order, a cache miss per entry (measured: see
    /// `benches/README.md`, "The wheels' sweeps: in slab-slot order").
    ///
    /// A slot's vector left with more than twice the room it needs (plus
    /// 256 items) is shrunk; a slot it empties frees its vector, and so does
    /// every slot once the wheel is empty. Allocates the bitmap (slots / 8
    /// bytes, freed before it returns).
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
        if gone.count > 0 {
            for level in 0..LEVELS {
                let mut bitmap = self.occupied[level];
                while bitmap != 0 {
                    let slot = bitmap.trailing_zeros() as usize;
                    bitmap &= bitmap - 1;
                    let index = level * SLOTS + slot;
                    self.slots[index].retain(|item| !gone.contains(item.slot));
                    let queue = &self.slots[index];
                    if queue.pending().is_empty() {
                        self.clear_slot(level, slot);
                        self.slots[index].release();
                    } else if level > 0 {
                        let min = queue.pending().iter().map(|item| item.tick).min();
                        self.slot_min[index].set(min);
                    }
                }
            }
        }
        if self.slab.len() == 0 {
            // Swept empty (a mass cancel): no slot keeps any room either
            // (small vectors left here and there would pin the allocator's
            // heap above the freed tasks: see the hashed wheel).
            self.slots.iter_mut().for_each(Items::release);
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
    use super::*;

    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const SECOND: Nanos = 1_000_000_000;

    /// Checks every structural invariant: each live entry has one item, in
    /// the slot its tick places it in, with its tick; no slot holds a dead
    /// item; an empty slot holds no items; the bitmaps match the
    /// slots; no slot lies behind the wheel's time; the cached minima are
    /// exact; and the slots hold exactly `len` entries.
    fn check_invariants<T>(q: &HierarchicalWheel<T>) {
        let mut seen = std::collections::HashSet::new();
        for level in 0..LEVELS {
            for slot in 0..SLOTS {
                let queue = &q.slots[level * SLOTS + slot];
                let bit = q.occupied[level] & (1 << slot) != 0;
                assert_eq!(queue.live() > 0, bit, "bitmap of {level}/{slot}");
                if queue.live() == 0 {
                    assert!(
                        queue.all().is_empty() && queue.head() == 0,
                        "{level}/{slot}"
                    );
                }
                let mut min = u64::MAX;
                for item in queue.pending() {
                    assert!(q.slab.get(item.slot).is_some(), "{:?} is live", item.slot);
                    assert_eq!(
                        q.position(item.tick),
                        (level, slot),
                        "place of {:?}",
                        item.slot
                    );
                    assert!(item.tick >= q.elapsed, "{:?} behind the wheel", item.slot);
                    assert!(seen.insert(item.slot), "{:?} listed twice", item.slot);
                    min = min.min(item.tick);
                }
                if let Some(cached) = q.slot_min[level * SLOTS + slot].get() {
                    assert!(level > 0, "a cached minimum on level 0");
                    assert_eq!(cached, min, "cached minimum of {level}/{slot}");
                }
            }
            assert_eq!(
                q.occupied_levels & (1 << level) != 0,
                q.occupied[level] != 0,
                "level bitmap of {level}"
            );
        }
        assert_eq!(seen.len(), q.len());
        q.first_occupied(); // its debug assertion: nothing behind
    }

    /// Sweeps out the entries whose values are in `values` (a cancel of
    /// each); how many it removed.
    fn sweep<T: PartialEq>(q: &mut HierarchicalWheel<T>, values: &[T]) -> usize {
        let count = q.remove_where(&mut |v| values.contains(v), &mut drop);
        check_invariants(q);
        count
    }

    /// Pops everything due at `now`.
    fn pop_all<T>(q: &mut HierarchicalWheel<T>, now: Nanos) -> Vec<T> {
        let popped = std::iter::from_fn(|| q.pop_due(now)).collect();
        check_invariants(q);
        popped
    }

    /// The level entries due at `deadline` are on (all in one slot).
    fn level_of<T>(q: &HierarchicalWheel<T>, deadline: Nanos) -> usize {
        q.position(q.tick_of_deadline(deadline)).0
    }

    #[test]
    fn places_entries_by_the_highest_differing_group() {
        assert_eq!(level_for(0, 0), 0);
        assert_eq!(level_for(0, 63), 0);
        assert_eq!(level_for(0, 64), 1);
        assert_eq!(level_for(100, 127), 0);
        assert_eq!(level_for(100, 128), 1);
        assert_eq!(level_for(0, 64 * 64), 2);
        assert_eq!(level_for(0, u64::MAX), LEVELS - 1);
        assert_eq!(slot_for(u64::MAX, LEVELS - 1), 15);
        assert_eq!(LEVELS, 11);
    }

    #[test]
    fn an_entry_three_levels_up_cascades_down_and_fires_within_a_tick() {
        let tick = 1_000;
        let mut q = HierarchicalWheel::new(tick);
        // Due at tick 64³ + 3·64² + 5·64 + 7, not a multiple of the tick.
        let due_tick = 262_144 + 3 * 4_096 + 5 * 64 + 7;
        let deadline = (due_tick - 1) * tick + 345;
        let due = due_tick * tick;
        q.insert(0, deadline, "far");
        q.insert(0, 5 * tick, "near");
        assert_eq!(level_of(&q, deadline), 3);
        assert_eq!(q.next_due(), Some(5 * tick));
        assert_eq!(pop_all(&mut q, 5 * tick), ["near"]);
        assert_eq!(sweep(&mut q, &["near"]), 0, "popped");
        assert_eq!(q.next_due(), Some(due), "the entry's own tick");
        // Through its cascade points: never early, one level down at each.
        let mut levels = Vec::new();
        for now_tick in [262_144, 262_144 + 3 * 4_096, 262_144 + 3 * 4_096 + 5 * 64] {
            assert!(
                pop_all(&mut q, now_tick * tick).is_empty(),
                "early at {now_tick}"
            );
            levels.push(level_of(&q, deadline));
            assert_eq!(q.next_due(), Some(due));
        }
        assert_eq!(levels, [2, 1, 0]);
        assert!(pop_all(&mut q, due - 1).is_empty(), "early");
        assert!(due - deadline < tick, "at most a tick late");
        assert_eq!(pop_all(&mut q, due), ["far"]);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn one_jump_over_several_levels_pops_in_deadline_then_insertion_order() {
        let mut q = HierarchicalWheel::new(1);
        let deadlines = [300_000u64, 5, 70, 5_000, 70, 300_000, 64 * 64, 0, 5];
        for (i, d) in deadlines.into_iter().enumerate() {
            q.insert(0, d, i);
        }
        check_invariants(&q);
        assert_eq!(q.next_due(), Some(0));
        assert_eq!(pop_all(&mut q, 1_000_000), [7, 1, 8, 2, 4, 6, 3, 0, 5]);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn equal_deadlines_keep_insertion_order_across_cascades() {
        let mut q = HierarchicalWheel::new(1);
        q.insert(0, 5_000, "a");
        assert_eq!(level_of(&q, 5_000), 2);
        assert!(pop_all(&mut q, 4_000).is_empty());
        q.insert(4_000, 5_000, "b");
        assert!(pop_all(&mut q, 4_096).is_empty()); // a and b cascade
        assert_eq!(level_of(&q, 5_000), 1);
        q.insert(4_096, 5_000, "c");
        assert!(pop_all(&mut q, 4_999).is_empty()); // a, b and c cascade
        assert_eq!(level_of(&q, 5_000), 0);
        q.insert(4_999, 5_000, "d");
        assert_eq!(pop_all(&mut q, 5_000), ["a", "b", "c", "d"]);
    }

    #[test]
    fn a_sweep_removes_from_the_head_middle_and_tail_of_a_slot() {
        let mut q = HierarchicalWheel::new(1);
        // One level-2 slot (4096..8191) and one level-0 slot.
        for i in 0..5 {
            q.insert(0, 5_000 + i, i);
        }
        for i in 10..14 {
            q.insert(0, 7, i);
        }
        check_invariants(&q);
        // The middle, head and tail of each slot.
        assert_eq!(sweep(&mut q, &[2, 0, 4, 13, 10, 11]), 6);
        assert_eq!(q.len(), 3);
        assert_eq!(pop_all(&mut q, 10_000), [12, 1, 3]);
        assert_eq!(q.occupied_levels, 0);
    }

    #[test]
    fn a_sweep_after_a_cascade_finds_the_slot_minimum_again() {
        let mut q = HierarchicalWheel::new(1);
        for i in 0..4 {
            q.insert(0, 5_000 + 100 * i, i);
        }
        assert_eq!(level_of(&q, 5_000), 2);
        assert!(pop_all(&mut q, 4_096).is_empty());
        assert_eq!(level_of(&q, 5_000), 1);
        assert_eq!(sweep(&mut q, &[0]), 1);
        assert_eq!(q.next_due(), Some(5_100));
        assert_eq!(pop_all(&mut q, 5_150), [1]);
        assert_eq!(sweep(&mut q, &[2, 1]), 1, "1 was popped");
        assert_eq!(pop_all(&mut q, 6_000), [3]);
    }

    #[test]
    fn a_swept_slab_slot_is_reused_and_what_left_is_not_swept_again() {
        let mut q = HierarchicalWheel::new(1_000);
        q.insert(0, 10_000, 'a');
        q.insert(0, 10_000_000, 'b');
        assert_eq!(sweep(&mut q, &['a']), 1);
        assert_eq!(sweep(&mut q, &['a']), 0, "swept twice");
        q.insert(0, 20_000, 'c');
        assert_eq!(q.slab.slots.len(), 2, "c reuses a's slab slot");
        assert_eq!(pop_all(&mut q, 20_000), ['c']);
        assert_eq!(sweep(&mut q, &['c']), 0, "popped");
        assert_eq!(q.drain(), ['b']);
        assert_eq!(sweep(&mut q, &['b']), 0, "drained");
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn an_hour_jump_with_a_1ns_tick_is_instant() {
        let hour = 3_600 * SECOND;
        let mut q = HierarchicalWheel::new(1);
        for i in 0..1_000 {
            q.insert(0, hour - i * 3_600_000, i);
        }
        let start = Instant::now();
        assert!(pop_all(&mut q, hour / 2).is_empty());
        let expected: Vec<u64> = (0..1_000).rev().collect();
        assert_eq!(pop_all(&mut q, hour), expected);
        // Ticking through 3.6e12 empty ticks would take hours.
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(q.len(), 0);
        assert_eq!(q.elapsed, hour);
    }

    #[test]
    fn deadlines_up_to_u64_max_neither_overflow_nor_fire_early() {
        for tick in [1, 7, 1_000_000, u64::MAX] {
            let mut q = HierarchicalWheel::new(tick);
            q.insert(0, u64::MAX, "max");
            q.insert(0, u64::MAX - 1, "max - 1");
            q.insert(0, u64::MAX / 2, "half");
            check_invariants(&q);
            let half = q.time_of(q.tick_of_deadline(u64::MAX / 2));
            assert!(half >= u64::MAX / 2);
            assert_eq!(q.next_due(), Some(half), "tick {tick}");
            assert_eq!(pop_all(&mut q, u64::MAX / 2 - 1), Vec::<&str>::new());
            let popped = pop_all(&mut q, u64::MAX - 2);
            assert!(popped.iter().all(|v| *v == "half"), "tick {tick}");
            let popped = pop_all(&mut q, u64::MAX - 1);
            assert!(!popped.contains(&"max"), "tick {tick}");
            assert!(q.next_due().unwrap() >= u64::MAX - 1);
            pop_all(&mut q, u64::MAX);
            assert_eq!(q.len(), 0, "tick {tick}");
            // The end of time is a usable time.
            q.insert(u64::MAX, u64::MAX, "again");
            q.insert(u64::MAX, 3, "overdue");
            assert_eq!(q.next_due(), Some(u64::MAX));
            assert_eq!(pop_all(&mut q, u64::MAX), ["again", "overdue"]);
        }
    }

    #[test]
    fn next_due_is_the_exact_tick_of_an_entry_on_a_coarse_level() {
        let tick = 1_000;
        let mut q = HierarchicalWheel::new(tick);
        q.insert(0, 5_000_000_123, 'l');
        assert!(level_of(&q, 5_000_000_123) >= 2);
        assert_eq!(
            q.next_due(),
            Some(5_000_001_000),
            "rounded up, not the slot start"
        );
        // An earlier entry in the same slot lowers the cached minimum...
        q.insert(0, 5_000_000_000 - 7, 'e');
        assert_eq!(level_of(&q, 5_000_000_000), level_of(&q, 5_000_000_123));
        assert_eq!(q.next_due(), Some(5_000_000_000));
        // ... a later one does not ...
        q.insert(0, 5_000_050_000, 'x');
        assert_eq!(q.next_due(), Some(5_000_000_000));
        check_invariants(&q);
        // ... and sweeping the minimum out recomputes it.
        assert_eq!(sweep(&mut q, &['e']), 1);
        assert_eq!(q.next_due(), Some(5_000_001_000));
        assert_eq!(sweep(&mut q, &['l']), 1);
        assert_eq!(q.next_due(), Some(5_000_050_000));
        // A finer level in front takes precedence, and leaves the coarse
        // level's cache alone.
        q.insert(0, 3_000, 'n');
        assert_eq!(q.next_due(), Some(3_000));
        assert_eq!(pop_all(&mut q, 3_000), ['n']);
        assert_eq!(q.next_due(), Some(5_000_050_000));
        check_invariants(&q);
    }

    #[test]
    fn overdue_entries_pop_at_the_next_pop_due() {
        let mut q = HierarchicalWheel::new(10);
        q.insert(0, 1_000, 1);
        assert_eq!(pop_all(&mut q, 1_000), [1]);
        q.insert(1_005, 500, 2); // behind the wheel's time
        q.insert(1_005, 1_000, 3);
        q.insert(1_005, 1_001, 4); // not yet due at 1_005
        assert_eq!(q.next_due(), Some(1_000));
        assert_eq!(pop_all(&mut q, 1_005), [2, 3]);
        assert_eq!(q.next_due(), Some(1_010));
        assert_eq!(pop_all(&mut q, 1_010), [4]);
    }

    #[test]
    fn drain_takes_everything_without_moving_time() {
        let mut q = HierarchicalWheel::new(1_000);
        pop_all(&mut q, 50_000);
        let deadlines = [60_000u64, 10_000_000, 51_000, 3 * SECOND, 60_000];
        for (i, d) in deadlines.into_iter().enumerate() {
            q.insert(50_000, d, i);
        }
        let elapsed = q.elapsed;
        assert_eq!(q.drain(), [2, 0, 4, 1, 3], "earliest first across slots");
        assert_eq!((q.len(), q.next_due(), q.elapsed), (0, None, elapsed));
        check_invariants(&q);
        q.insert(50_000, 51_000, 7);
        assert_eq!(pop_all(&mut q, 50_999), []);
        assert_eq!(pop_all(&mut q, 51_000), [7]);
    }

    #[test]
    fn a_year_out_timer_is_placed_and_swept_at_once() {
        let year = 365 * 24 * 3_600 * SECOND;
        let mut q = HierarchicalWheel::default();
        q.insert(0, year, "year");
        q.insert(0, SECOND, "second");
        assert_eq!(level_of(&q, year), 5);
        assert_eq!(q.next_due(), Some(SECOND));
        assert_eq!(sweep(&mut q, &["year", "second"]), 2);
        q.insert(0, year, "year");
        assert!(pop_all(&mut q, year - 1).is_empty());
        assert_eq!(q.next_due(), Some(year));
        assert_eq!(sweep(&mut q, &["year"]), 1, "after cascading");
        q.insert(year - 1, year, "year");
        assert_eq!(pop_all(&mut q, year), ["year"]);
    }

    #[test]
    fn emptied_wheel_gives_its_memory_back() {
        let mut q = HierarchicalWheel::new(1_000);
        for i in 0..100_000u64 {
            q.insert(0, 1_000 + i * 997, ());
        }
        check_invariants(&q);
        assert_eq!(q.remove_where(&mut |_| true, &mut drop), 100_000);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
        assert_eq!(q.occupied_levels, 0);
        assert_eq!(q.slab.slots.capacity(), 0, "the slab holds no memory");
        // Through pops that empty some slots (which keep some room), then
        // a sweep of the rest (the executor's mass cancel): no room left.
        for i in 0..100_000u64 {
            q.insert(0, 1_000 + i * 997, ());
        }
        let popped = pop_all(&mut q, 60_000 * 997).len();
        assert!(q
            .slots
            .iter()
            .any(|s| s.all().is_empty() && s.capacity() > 0));
        assert_eq!(popped + q.remove_where(&mut |_| true, &mut drop), 100_000);
        assert_eq!(q.slab.slots.capacity(), 0);
        assert!(q.slots.iter().all(|s| s.capacity() == 0));
    }

    /// A task's drop that panics in the middle of a sweep: the slots
    /// emptied up to it lose their items before the panic goes on, so the
    /// entries that reuse those slots pop once each, and nothing else.
    #[test]
    fn a_panic_while_handing_out_a_sweep_leaves_no_item_on_an_emptied_slot() {
        super::super::model_test::a_panic_in_a_sweep_leaves_the_queue_whole(
            HierarchicalWheel::new(1_000),
            check_invariants,
        );
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_entry_costs_28_bytes_for_a_fat_arc() {
        type Fat = Arc<dyn Fn() + Send + Sync>;
        let slab = std::mem::size_of::<crate::timer::queue::slab::SlabSlot<Fat>>();
        let item = std::mem::size_of::<Item>();
        println!("slab slot for Arc<dyn Trait>: {slab} bytes, item {item} bytes");
        assert_eq!((slab, item), (16, 12));
        assert_eq!(std::mem::size_of::<Items<Item>>(), 32, "a slot");
    }

    /// Random operations with every structural invariant checked after
    /// each one (shared with the other wheel: `model_test`).
    #[test]
    fn random_operations_keep_the_structure_sound() {
        for tick in [1, 3, 1_000] {
            super::super::model_test::random_operations_keep_the_structure_sound(
                HierarchicalWheel::new(tick),
                check_invariants,
            );
        }
    }
}

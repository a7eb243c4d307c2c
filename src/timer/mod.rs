//! The delayed work queue: the ordering of tasks that run later.
//!
//! A *backend* ([`DelayQueue`]) is a plain single-threaded data structure,
//! driven by an explicit `now`: no threads, no clock inside, so it can be
//! unit-tested and property-tested against a reference model (`model_test`).
//! Every backend passes the same property test unchanged.
//!
//! # The contract of a backend
//!
//! * Entries are addressed by a [`Key`] (a slot and a generation), so that
//!   removal is direct (no search) and a key that outlived its entry is
//!   recognised as stale instead of removing an unrelated entry.
//! * An entry is never popped before its deadline. It may be popped *later*
//!   by at most [`DelayQueue::max_lateness`] of its delay (a wheel rounds a
//!   deadline up to its tick, never down; the heap is exact).
//! * Among entries with equal deadlines, insertion order is kept.
//! * Time is `u64` nanoseconds on the executor's monotonic clock; the
//!   largest value means "never" in practice (~584 years).

use std::time::Duration;

use crate::clock;
use crate::error::BuildError;

pub(crate) mod driver;
pub(crate) mod hashed_wheel;
pub(crate) mod heap;
pub(crate) mod hierarchical_wheel;
mod waiting;

#[cfg(all(test, not(loom)))]
mod model_test;

/// Nanoseconds since the executor's clock origin.
pub(crate) type Nanos = u64;

/// The address of one entry in a backend: a slot and that slot's
/// generation when the entry was inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    slot: u32,
    generation: u32,
}

/// Which delayed work queue an executor uses, chosen with
/// [`Builder::timer_queue`](crate::Builder::timer_queue).
///
/// ```
/// use chronopool::{ScheduledExecutor, TimerQueue};
///
/// let pool = ScheduledExecutor::builder().timer_queue(TimerQueue::heap()).build()?;
/// # Ok::<(), chronopool::BuildError>(())
/// ```
///
/// A wheel's settings are checked by
/// [`Builder::build`](crate::Builder::build): a tick of zero or of more
/// than [`MAX_WHEEL_TICK`], or a number of slots of zero or more than
/// [`MAX_WHEEL_SLOTS`], is a [`BuildError`](crate::BuildError).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerQueue(Backend);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Backend {
    #[default]
    Heap,
    HashedWheel {
        tick: Duration,
        slots: usize,
    },
    HierarchicalWheel {
        tick: Duration,
    },
}

/// The largest tick a timing wheel accepts: one hour (a coarser wheel
/// would round every deadline by hours; it also keeps a revolution of the
/// largest hashed wheel within the clock's range).
pub const MAX_WHEEL_TICK: Duration = Duration::from_secs(3600);

/// The most slots a hashed wheel accepts: 2^20 (8 MiB of bucket heads).
pub const MAX_WHEEL_SLOTS: usize = hashed_wheel::MAX_SLOTS;

impl TimerQueue {
    /// An indexed 4-ary heap (the JDK's `DelayedWorkQueue`, improved):
    /// exact deadlines (no tick), insertion order among equal deadlines,
    /// O(log n) insert and cancel. The default.
    pub fn heap() -> Self {
        TimerQueue(Backend::Heap)
    }

    /// A hashed timing wheel (Netty's `HashedWheelTimer`, improved) with a
    /// 1 ms tick and 512 slots: O(1) insert and cancel; deadlines rounded
    /// up to the tick (a task may run up to one tick late, never early).
    /// Best for many short, similar time-outs (up to a few revolutions of
    /// 512 ms); see [`hashed_wheel_with`](Self::hashed_wheel_with).
    ///
    /// ```
    /// use chronopool::{ScheduledExecutor, TimerQueue};
    ///
    /// let pool = ScheduledExecutor::builder()
    ///     .timer_queue(TimerQueue::hashed_wheel())
    ///     .build()?;
    /// # Ok::<(), chronopool::BuildError>(())
    /// ```
    pub fn hashed_wheel() -> Self {
        TimerQueue(Backend::HashedWheel {
            tick: Duration::from_nanos(hashed_wheel::DEFAULT_TICK),
            slots: hashed_wheel::DEFAULT_SLOTS,
        })
    }

    /// A hashed timing wheel with the given tick and number of slots, the
    /// latter rounded up to a power of two (as Netty does). One revolution
    /// is `tick × slots`; entries further out wait in their slot for later
    /// revolutions, which makes finding the next deadline slower, so pick
    /// a revolution longer than most delays.
    ///
    /// ```
    /// use chronopool::{BuildError, ScheduledExecutor, TimerQueue};
    /// use std::time::Duration;
    ///
    /// let wheel = TimerQueue::hashed_wheel_with(Duration::from_micros(100), 1000);
    /// let pool = ScheduledExecutor::builder().timer_queue(wheel).build()?;
    ///
    /// let zero_tick = TimerQueue::hashed_wheel_with(Duration::ZERO, 512);
    /// let refused = ScheduledExecutor::builder().timer_queue(zero_tick).build();
    /// assert!(matches!(refused, Err(BuildError::WheelTick(_))));
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn hashed_wheel_with(tick: Duration, slots: usize) -> Self {
        TimerQueue(Backend::HashedWheel { tick, slots })
    }

    /// A hierarchical timing wheel (Linux's, tokio's, Kafka's overflow
    /// wheels) with a 1 ms tick: levels of 64 slots, each 64 times coarser
    /// than the one below, found through occupancy bitmaps; O(1) insert and
    /// cancel for any delay (a timer a year out costs what one a second
    /// out does); deadlines rounded up to the tick (a task may run up to
    /// one tick late, never early). Best for many timers over wide spans.
    ///
    /// Its cost under a heavy load: each time the wheel enters a new span
    /// of 64 ticks, the timers due in that span move to the finest level
    /// in one sequential pass, and tasks falling due meanwhile wait for it.
    /// Measured on the wheel alone (`cargo bench --features bench-internals
    /// --bench ticks`), the slowest ticks take up to 16 µs at ten thousand
    /// timers due a second, 36 µs at a hundred thousand, and about 0.4 ms
    /// at a million.
    ///
    /// ```
    /// use chronopool::{ScheduledExecutor, TimerQueue};
    ///
    /// let pool = ScheduledExecutor::builder()
    ///     .timer_queue(TimerQueue::hierarchical_wheel())
    ///     .build()?;
    /// # Ok::<(), chronopool::BuildError>(())
    /// ```
    pub fn hierarchical_wheel() -> Self {
        TimerQueue(Backend::HierarchicalWheel {
            tick: Duration::from_nanos(hierarchical_wheel::HierarchicalWheel::<()>::DEFAULT_TICK),
        })
    }

    /// A hierarchical timing wheel with the given tick (the finest level's
    /// slot; the lateness bound).
    ///
    /// ```
    /// use chronopool::{ScheduledExecutor, TimerQueue};
    /// use std::time::Duration;
    ///
    /// let fine = TimerQueue::hierarchical_wheel_with(Duration::from_micros(10));
    /// let pool = ScheduledExecutor::builder().timer_queue(fine).build()?;
    /// # Ok::<(), chronopool::BuildError>(())
    /// ```
    pub fn hierarchical_wheel_with(tick: Duration) -> Self {
        TimerQueue(Backend::HierarchicalWheel { tick })
    }

    /// Checks the settings (see the type doc).
    pub(crate) fn validate(self) -> Result<(), BuildError> {
        let check_tick = |tick: Duration| {
            if tick.is_zero() || tick > MAX_WHEEL_TICK {
                Err(BuildError::WheelTick(tick))
            } else {
                Ok(())
            }
        };
        match self.0 {
            Backend::Heap => Ok(()),
            Backend::HashedWheel { tick, slots } => {
                check_tick(tick)?;
                if slots == 0 || slots > MAX_WHEEL_SLOTS {
                    return Err(BuildError::WheelSlots(slots));
                }
                Ok(())
            }
            Backend::HierarchicalWheel { tick } => check_tick(tick),
        }
    }

    /// A fresh, empty backend of this kind (the settings were validated).
    pub(crate) fn build<T: Send + 'static>(self) -> Box<dyn DelayQueue<T> + Send> {
        match self.0 {
            Backend::Heap => Box::new(heap::IndexedHeap::default()),
            Backend::HashedWheel { tick, slots } => Box::new(hashed_wheel::HashedWheel::new(
                clock::nanos(tick),
                slots.next_power_of_two(),
            )),
            Backend::HierarchicalWheel { tick } => Box::new(
                hierarchical_wheel::HierarchicalWheel::new(clock::nanos(tick)),
            ),
        }
    }
}

/// A delayed work queue backend (see the module doc for the contract).
pub(crate) trait DelayQueue<T> {
    /// Adds `value`, due at `deadline`; `now` is the current time (a wheel
    /// places the entry relative to it).
    fn insert(&mut self, now: Nanos, deadline: Nanos, value: T) -> Key;

    /// Removes the entry `key` addresses; `None` if it is no longer there.
    fn remove(&mut self, key: Key) -> Option<T>;

    /// Removes and returns one entry that is due at `now`, earliest first
    /// (insertion order among equal deadlines); `None` if none is due.
    fn pop_due(&mut self, now: Nanos) -> Option<(Key, T)>;

    /// The time at which the next entry becomes due (at or after its
    /// deadline), or `None` if the queue is empty.
    fn next_due(&self) -> Option<Nanos>;

    /// The number of entries.
    fn len(&self) -> usize;

    /// Removes and returns every entry, due or not, earliest first where
    /// the backend knows the order cheaply. Time does not move: entries may
    /// be inserted again afterwards with the same `now`.
    fn drain(&mut self) -> Vec<T>;

    /// The number of storage slots, live or free (entries are addressed by
    /// slot: see [`Key`]).
    fn slots(&self) -> usize;

    /// The key of the entry in `slot` if there is one and `pred` is true
    /// for it.
    fn key_in_slot_if(&self, slot: usize, pred: &mut dyn FnMut(&T) -> bool) -> Option<Key>;

    /// Removes every entry for which `dead` is true and hands each to
    /// `removed` as it leaves (in no particular order), keeping the others
    /// as they were: same deadlines, same order among equal deadlines.
    /// Returns how many it removed. O(n) plus one removal per entry, and no
    /// allocation: a sweep of a million entries leaves no large temporary
    /// block behind in the allocator.
    fn remove_where(
        &mut self,
        dead: &mut dyn FnMut(&T) -> bool,
        removed: &mut dyn FnMut(T),
    ) -> usize {
        let mut count = 0;
        let mut slot = 0;
        // `slots()` is read each time: it drops to 0 when the last entry
        // leaves.
        while slot < self.slots() {
            if let Some(key) = self.key_in_slot_if(slot, dead) {
                removed(self.remove(key).expect("the key was just read"));
                count += 1;
            }
            slot += 1;
        }
        count
    }

    /// How late, at most, an entry inserted `delay` before its deadline may
    /// be popped after it (0 for an exact backend). Checked by the property
    /// test.
    #[cfg(all(test, not(loom)))]
    fn max_lateness(&self, delay: Nanos) -> Nanos;
}

/// The most items a wheel's bucket or slot keeps room for once it is empty
/// (4 KiB of 16-byte items): the busy buckets of a steady load do not
/// reallocate at every turn, and an emptied one never pins more than that.
pub(crate) const RETAINED_ITEMS: usize = 256;

/// Empties a wheel's bucket or slot vector, keeping room for at most
/// [`RETAINED_ITEMS`].
pub(crate) fn empty_keeping_little<T>(items: &mut Vec<T>) {
    if items.capacity() > RETAINED_ITEMS {
        *items = Vec::new();
    } else {
        items.clear();
    }
}

/// Keeps, in order, the items of `items[from..]` that `keep` selects,
/// dropping those before `from` (a wheel's bucket or slot after its head
/// moved); a vector left with more than twice the room it needs (plus
/// [`RETAINED_ITEMS`]) is shrunk, which gives back the room of the items
/// that left.
pub(crate) fn retain_from<T>(items: &mut Vec<T>, from: usize, keep: impl FnMut(&T) -> bool) {
    items.drain(..from);
    items.retain(keep);
    if items.capacity() > 2 * items.len() + RETAINED_ITEMS {
        items.shrink_to_fit();
    }
}

/// Asks the CPU to bring `items[index]` into the cache (a hint: it does
/// nothing if `index` is out of range or on other targets).
#[inline]
pub(crate) fn prefetch<T>(items: &[T], index: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(item) = items.get(index) {
        // SAFETY: a prefetch is a hint; it never faults and does not
        // access memory observably. The pointer is to a live element.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (item as *const T).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (items, index);
}

/// The slots a [`Slab::remove_where`] emptied.
#[derive(Debug)]
pub(crate) struct RemovedSlots {
    bits: Vec<u64>,
    /// How many.
    pub(crate) count: usize,
}

impl RemovedSlots {
    /// True if the entry in `slot` was removed.
    #[inline]
    pub(crate) fn contains(&self, slot: u32) -> bool {
        self.bits[slot as usize / 64] & (1 << (slot % 64)) != 0
    }
}

/// Slots with generations and a free list: the storage behind a backend's
/// keys. A slot's generation is bumped each time it is reused, so an old key
/// never matches a newer entry of the same slot.
///
/// When the last entry leaves, the slots themselves are freed (a million
/// cancelled timers must not pin their memory); fresh slots then start
/// above every generation handed out before, which keeps old keys stale.
#[derive(Debug)]
pub(crate) struct Slab<E> {
    slots: Vec<SlabSlot<E>>,
    /// Head of the free list (`NO_SLOT`: empty).
    free: u32,
    len: usize,
    /// Generation of the next fresh slot: above all generations used so far.
    fresh_generation: u32,
}

#[derive(Debug)]
enum SlabSlot<E> {
    Occupied { entry: E, generation: u32 },
    Vacant { next_free: u32, generation: u32 },
}

const NO_SLOT: u32 = u32::MAX;

impl<E> Default for Slab<E> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: NO_SLOT,
            len: 0,
            fresh_generation: 0,
        }
    }
}

impl<E> Slab<E> {
    /// Stores `entry`, returning its key.
    pub(crate) fn insert(&mut self, entry: E) -> Key {
        self.len += 1;
        let (slot, generation) = if self.free != NO_SLOT {
            let slot = self.free;
            let SlabSlot::Vacant {
                next_free,
                generation,
            } = self.slots[slot as usize]
            else {
                unreachable!("the free list holds vacant slots");
            };
            self.free = next_free;
            (slot, generation.wrapping_add(1))
        } else {
            let slot = self.slots.len() as u32;
            assert!(
                slot != NO_SLOT,
                "a delay queue holds fewer than 2^32 - 1 entries"
            );
            self.slots.push(SlabSlot::Vacant {
                next_free: NO_SLOT,
                generation: 0,
            });
            (slot, self.fresh_generation)
        };
        self.fresh_generation = self.fresh_generation.max(generation.wrapping_add(1));
        self.slots[slot as usize] = SlabSlot::Occupied { entry, generation };
        Key { slot, generation }
    }

    /// Takes the entry `key` addresses out, if it is still there.
    pub(crate) fn remove(&mut self, key: Key) -> Option<E> {
        let slot = self.slots.get_mut(key.slot as usize)?;
        if !matches!(slot, SlabSlot::Occupied { generation, .. } if *generation == key.generation) {
            return None;
        }
        let vacant = SlabSlot::Vacant {
            next_free: self.free,
            generation: key.generation,
        };
        let SlabSlot::Occupied { entry, .. } = std::mem::replace(slot, vacant) else {
            unreachable!("checked above");
        };
        self.free = key.slot;
        self.len -= 1;
        if self.len == 0 {
            // Every slot is vacant: free them all (see the type doc).
            self.slots = Vec::new();
            self.free = NO_SLOT;
        }
        Some(entry)
    }

    /// Removes every entry `dead` selects, walking the slots in order
    /// (mostly the order the entries were inserted in, so the reads
    /// stream), and hands each to `removed`. Returns the slots it emptied,
    /// for a backend to drop its own references to them in a second
    /// sequential pass (the wheels' sweeps). Allocates the set (one bit per
    /// slot, freed with it).
    pub(crate) fn remove_where(
        &mut self,
        mut dead: impl FnMut(&E) -> bool,
        mut removed: impl FnMut(E),
    ) -> RemovedSlots {
        let mut gone = RemovedSlots {
            bits: vec![0; self.slots.len().div_ceil(64)],
            count: 0,
        };
        let mut slot = 0;
        // `slot_count()` is read each time: it drops to 0 when the last
        // entry leaves.
        while slot < self.slot_count() {
            if let Some(key) = self.key_in_slot_if(slot, &mut dead) {
                removed(self.remove(key).expect("the key was just read"));
                gone.bits[slot / 64] |= 1 << (slot % 64);
                gone.count += 1;
            }
            slot += 1;
        }
        gone
    }

    /// The number of slots, occupied or vacant.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The key of the entry in `slot` if it is occupied and `pred` is true
    /// for its entry.
    pub(crate) fn key_in_slot_if(&self, slot: usize, pred: impl FnOnce(&E) -> bool) -> Option<Key> {
        match self.slots.get(slot)? {
            SlabSlot::Occupied { entry, generation } if pred(entry) => Some(Key {
                slot: slot as u32,
                generation: *generation,
            }),
            _ => None,
        }
    }

    /// The entry `key` addresses, if it is still there.
    #[inline]
    pub(crate) fn get(&self, key: Key) -> Option<&E> {
        match self.slots.get(key.slot as usize)? {
            SlabSlot::Occupied { entry, generation } if *generation == key.generation => {
                Some(entry)
            }
            _ => None,
        }
    }

    /// Asks the CPU to bring the slot `slot` into the cache (a hint: it
    /// does nothing if `slot` is out of range or on other targets).
    #[inline]
    pub(crate) fn prefetch(&self, slot: u32) {
        prefetch(&self.slots, slot as usize);
    }

    /// The entry in `slot`, which the caller knows to be occupied.
    pub(crate) fn at_mut(&mut self, slot: u32) -> &mut E {
        match &mut self.slots[slot as usize] {
            SlabSlot::Occupied { entry, .. } => entry,
            SlabSlot::Vacant { .. } => unreachable!("slot {slot} is occupied"),
        }
    }

    /// The key of the entry in `slot`, which the caller knows to be occupied.
    pub(crate) fn key_at(&self, slot: u32) -> Key {
        match &self.slots[slot as usize] {
            SlabSlot::Occupied { generation, .. } => Key {
                slot,
                generation: *generation,
            },
            SlabSlot::Vacant { .. } => unreachable!("slot {slot} is occupied"),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(all(test, not(loom)))]
mod slab_tests {
    use super::*;

    #[test]
    fn stale_keys_never_match_newer_entries() {
        let mut slab = Slab::default();
        let a = slab.insert("a");
        assert_eq!(slab.remove(a), Some("a"));
        // The slab is empty and its slots were freed; a fresh slot 0 must
        // not answer to the old key.
        let b = slab.insert("b");
        assert_eq!(b.slot, a.slot);
        assert_ne!(b, a);
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get(b), Some(&"b"));
        // Reuse through the free list bumps the generation too.
        let c = slab.insert("c");
        assert_eq!(slab.remove(b), Some("b"));
        let d = slab.insert("d");
        assert_eq!(d.slot, b.slot);
        assert_eq!(slab.remove(b), None);
        assert_eq!(slab.len(), 2);
        assert_eq!((slab.remove(c), slab.remove(d)), (Some("c"), Some("d")));
        assert_eq!(slab.len(), 0);
        assert_eq!(slab.slots.capacity(), 0, "an empty slab holds no memory");
    }
}

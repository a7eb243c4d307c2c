//! The slab the wheels keep their entries in: an entry's slot index
//! addresses it directly, and a vacant slot links to the next free one.
//!
//! No generations: a wheel's item is the only holder of a slot's index,
//! and it leaves the wheel with its entry (a pop, a drain, a sweep's
//! second pass), so no index outlives the entry it named. Without them a
//! slot is the value alone (16 bytes for a fat pointer, whose null niche
//! marks a vacant slot; 24 with a generation).

use super::prefetch;

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

/// Slots and a free list: the storage behind the wheels' items.
///
/// When the last entry leaves, the slots themselves are freed (a million
/// cancelled timers must not pin their memory).
#[derive(Debug)]
pub(crate) struct Slab<E> {
    pub(super) slots: Vec<SlabSlot<E>>,
    /// Head of the free list (`NO_SLOT`: empty).
    free: u32,
    len: usize,
}

#[derive(Debug)]
pub(crate) enum SlabSlot<E> {
    Occupied(E),
    /// The next free slot (`NO_SLOT`: none).
    Vacant(u32),
}

/// The end of the free list; never a slot's index (a slab holds fewer
/// than `u32::MAX` slots), so a wheel may use it as a marker too.
pub(crate) const NO_SLOT: u32 = u32::MAX;

impl<E> Default for Slab<E> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: NO_SLOT,
            len: 0,
        }
    }
}

impl<E> Slab<E> {
    /// Stores `entry`, returning its slot.
    pub(crate) fn insert(&mut self, entry: E) -> u32 {
        self.len += 1;
        if self.free != NO_SLOT {
            let slot = self.free;
            let SlabSlot::Vacant(next_free) = self.slots[slot as usize] else {
                unreachable!("the free list holds vacant slots");
            };
            self.free = next_free;
            self.slots[slot as usize] = SlabSlot::Occupied(entry);
            slot
        } else {
            let slot = self.slots.len() as u32;
            assert!(
                slot != NO_SLOT,
                "a delay queue holds fewer than 2^32 - 1 entries"
            );
            self.slots.push(SlabSlot::Occupied(entry));
            slot
        }
    }

    /// Takes the entry out of `slot`, which holds one (the caller's item
    /// named it, and items leave with their entries: the module doc).
    pub(crate) fn remove(&mut self, slot: u32) -> E {
        let place = &mut self.slots[slot as usize];
        // Checked before the slot is touched: a vacant one keeps its link.
        assert!(
            matches!(place, SlabSlot::Occupied(_)),
            "slab slot {slot} is vacant: an item outlived its entry"
        );
        let SlabSlot::Occupied(entry) = std::mem::replace(place, SlabSlot::Vacant(self.free))
        else {
            unreachable!("checked above");
        };
        self.free = slot;
        self.len -= 1;
        if self.len == 0 {
            // Every slot is vacant: free them all (see the type doc).
            self.slots = Vec::new();
            self.free = NO_SLOT;
        }
        entry
    }

    /// An empty set of removed slots, one bit for each of its slots, for
    /// [`remove_where`](Self::remove_where) (allocated here, freed with it).
    pub(crate) fn removal_set(&self) -> RemovedSlots {
        RemovedSlots {
            bits: vec![0; self.slots.len().div_ceil(64)],
            count: 0,
        }
    }

    /// Removes every entry `dead` selects, walking the slots in order
    /// (mostly the order the entries were inserted in, so the reads
    /// stream), and hands each to `removed`, noting its slot in `gone`
    /// (from [`removal_set`](Self::removal_set)) first: for a backend to
    /// drop its own references to those slots in a second sequential pass
    /// (the wheels' sweeps). If `removed` panics, `gone` holds every slot
    /// emptied so far, that one included, and the backend's pass must
    /// still run before a slot can be reused (the wheels catch the panic
    /// for it).
    pub(crate) fn remove_where(
        &mut self,
        gone: &mut RemovedSlots,
        mut dead: impl FnMut(&E) -> bool,
        mut removed: impl FnMut(E),
    ) {
        let mut slot = 0;
        // The length is read each time: the slots are freed when the last
        // entry leaves.
        while slot < self.slots.len() {
            if matches!(&self.slots[slot], SlabSlot::Occupied(entry) if dead(entry)) {
                gone.bits[slot / 64] |= 1 << (slot % 64);
                gone.count += 1;
                removed(self.remove(slot as u32));
            }
            slot += 1;
        }
    }

    /// The entry in `slot`, if it is occupied.
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> Option<&E> {
        match self.slots.get(slot as usize)? {
            SlabSlot::Occupied(entry) => Some(entry),
            SlabSlot::Vacant(_) => None,
        }
    }

    /// Asks the CPU to bring the slot `slot` into the cache (a hint: it
    /// does nothing if `slot` is out of range or on other targets).
    #[inline]
    pub(crate) fn prefetch(&self, slot: u32) {
        prefetch(&self.slots, slot as usize);
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(all(test, not(loom)))]
mod slab_tests {
    use super::*;

    #[test]
    fn vacant_slots_are_reused_and_freed_with_the_last_entry() {
        let mut slab = Slab::default();
        let a = slab.insert("a");
        let b = slab.insert("b");
        let c = slab.insert("c");
        assert_eq!(slab.remove(b), "b");
        assert_eq!(slab.get(b), None);
        // The free list hands the vacant slot out first.
        assert_eq!(slab.insert("d"), b);
        assert_eq!(slab.get(b), Some(&"d"));
        assert_eq!(slab.len(), 3);
        assert_eq!(slab.slots.len(), 3);
        assert_eq!((slab.remove(a), slab.remove(c)), ("a", "c"));
        assert_eq!(slab.remove(b), "d");
        assert_eq!(slab.len(), 0);
        assert_eq!(slab.slots.capacity(), 0, "an empty slab holds no memory");
        assert_eq!(slab.insert("e"), 0, "it starts again at slot 0");
    }

    #[test]
    #[should_panic(expected = "vacant")]
    fn removing_a_vacant_slot_is_a_bug_caught() {
        let mut slab = Slab::default();
        let a = slab.insert(1);
        slab.insert(2);
        slab.remove(a);
        slab.remove(a);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_slot_is_the_value_alone() {
        type Fat = std::sync::Arc<dyn std::any::Any + Send + Sync>;
        assert_eq!(std::mem::size_of::<SlabSlot<Fat>>(), 16);
    }

    #[test]
    fn a_sweep_reports_the_slots_it_emptied() {
        let mut slab = Slab::default();
        let slots: Vec<u32> = (0..130).map(|v| slab.insert(v)).collect();
        let mut gone = slab.removal_set();
        let mut removed = Vec::new();
        slab.remove_where(&mut gone, |v| v % 3 == 0, |v| removed.push(v));
        assert_eq!(gone.count, 44);
        assert_eq!(removed, (0..130).step_by(3).collect::<Vec<_>>());
        for (v, &slot) in slots.iter().enumerate() {
            assert_eq!(gone.contains(slot), v % 3 == 0);
            assert_eq!(slab.get(slot).is_some(), v % 3 != 0);
        }
        assert_eq!(slab.len(), 86);
        // Every entry swept: the slab ends empty and frees its slots.
        let mut all = slab.removal_set();
        slab.remove_where(&mut all, |_| true, drop);
        assert_eq!((all.count, slab.len(), slab.slots.capacity()), (86, 0, 0));
    }

    #[test]
    fn a_panic_while_handing_out_leaves_the_emptied_slots_noted() {
        let mut slab = Slab::default();
        for v in 0..200 {
            slab.insert(v);
        }
        let mut gone = slab.removal_set();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            slab.remove_where(
                &mut gone,
                |v| v % 2 == 0,
                |v| {
                    if v == 70 {
                        panic!("expected: a removed entry's drop panicked");
                    }
                },
            )
        }));
        assert!(outcome.is_err());
        // 0, 2, ..., 70 left and are noted, the one that panicked too; the
        // rest were not reached.
        assert_eq!(gone.count, 36);
        for slot in 0..200u32 {
            let emptied = slot % 2 == 0 && slot <= 70;
            assert_eq!(gone.contains(slot), emptied, "{slot}");
            assert_eq!(slab.get(slot).is_none(), emptied, "{slot}");
        }
        assert_eq!(slab.len(), 164);
    }
}

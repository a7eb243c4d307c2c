//! The generational slab the backends keep their entries in: a key (slot
//! and generation) addresses an entry directly, and a key that outlived
//! its entry is recognised as stale.

use super::{prefetch, Key};

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
    pub(super) slots: Vec<SlabSlot<E>>,
    /// Head of the free list (`NO_SLOT`: empty).
    free: u32,
    len: usize,
    /// Generation of the next fresh slot: above all generations used so far.
    fresh_generation: u32,
}

#[derive(Debug)]
pub(crate) enum SlabSlot<E> {
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

    /// The entry `key` addresses, if it is still there (the tests').
    #[cfg(all(test, not(loom)))]
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

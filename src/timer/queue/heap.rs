//! The indexed heap backend: a 4-ary min-heap whose entries know their
//! position, the JDK's `DelayedWorkQueue` improved.
//!
//! * **Exact**: entries are popped at their deadline, not rounded to a tick.
//! * **FIFO among equal deadlines**: the heap orders by `(deadline, seq)`,
//!   `seq` counting insertions (the JDK's tie-break; the JDK 25 delay
//!   scheduler has none). `seq` is 32 bits: before it would wrap, the
//!   entries are renumbered in their order (once per 2^32 inserts, O(n log
//!   n), no allocation), so the order among equal deadlines never breaks.
//! * **Removal in O(log n)** by [`Key`]: each entry's position in the heap
//!   array is recorded (the JDK's `heapIndex`, kept in a dense array of its
//!   own), so an entry leaves from the middle of the heap at once instead
//!   of waiting for its deadline.
//! * **4-ary**: half the depth of a binary heap, and the four children of a
//!   node sit in one or two cache lines; the heap array holds the ordering
//!   keys inline (`deadline`, `seq`, slot: 16 bytes, so four siblings
//!   span 64 bytes), so sifting compares without touching the entries.
//! * **A sift down selects, it does not branch**: which of four children
//!   is earliest is a coin toss, so it is found by selects (no mispredicted
//!   branch), and the children of all four are prefetched, since the CPU no
//!   longer guesses the winner and loads its children early (measured
//!   against a sift down that branches: `benches/README.md`, "The heap: a
//!   sift down that selects").
//! * Memory is given back: the array shrinks when it is mostly empty, and
//!   the slab frees its slots when the last entry leaves.

use super::{DelayQueue, Key, Nanos, Slab};

/// Children per node.
const ARITY: usize = 4;

/// One heap position: the ordering key and where the entry lives.
#[derive(Clone, Copy, Debug)]
struct Item {
    deadline: Nanos,
    seq: u32,
    slot: u32,
}

impl Item {
    /// The ordering key, `(deadline, seq)` as one number: comparing two
    /// of them is a subtraction with borrow, not a branch on the deadlines
    /// being equal.
    #[inline]
    fn key(&self) -> u128 {
        (self.deadline as u128) << 64 | self.seq as u128
    }

    #[inline]
    fn before(&self, other: &Item) -> bool {
        self.key() < other.key()
    }
}

/// The indexed 4-ary heap (see the module doc).
#[derive(Debug)]
pub(crate) struct IndexedHeap<T> {
    heap: Vec<Item>,
    slab: Slab<T>,
    /// For each slab slot, the index of its item in the heap array (the
    /// JDK's `heapIndex`). Kept apart from the slab, 4 bytes a slot: a
    /// sift writes one position per level, and in this dense array those
    /// writes hit the cache, where a write into the slab's entries would
    /// first load a random line of it.
    positions: Vec<u32>,
    /// The `seq` of the next insert; never `u32::MAX` once an insert
    /// took it (see [`renumber`](Self::renumber)).
    next_seq: u32,
}

impl<T> Default for IndexedHeap<T> {
    fn default() -> Self {
        IndexedHeap {
            heap: Vec::new(),
            slab: Slab::default(),
            positions: Vec::new(),
            next_seq: 0,
        }
    }
}

impl<T> IndexedHeap<T> {
    /// Puts `item` at `pos` and tells its entry.
    #[inline]
    fn place(&mut self, pos: usize, item: Item) {
        self.heap[pos] = item;
        self.positions[item.slot as usize] = pos as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        let item = self.heap[pos];
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            if !item.before(&self.heap[parent]) {
                break;
            }
            let moved = self.heap[parent];
            self.place(pos, moved);
            pos = parent;
        }
        self.place(pos, item);
    }

    fn sift_down(&mut self, mut pos: usize) {
        let item = self.heap[pos];
        let len = self.heap.len();
        loop {
            let first = pos * ARITY + 1;
            if first >= len {
                break;
            }
            let best = if first + ARITY <= len {
                self.prefetch_grandchildren(first);
                self.earliest_of_four(first)
            } else {
                self.earliest_of_some(first, len)
            };
            if !self.heap[best].before(&item) {
                break;
            }
            let moved = self.heap[best];
            self.place(pos, moved);
            pos = best;
        }
        self.place(pos, item);
    }

    /// Asks for the children of the four items from `first` (sixteen
    /// items, four or five cache lines), one of which the next level of a sift
    /// reads: without it, the select below would make each level wait for
    /// memory in turn (a branch lets the CPU guess the winner and load its
    /// children early; a select does not).
    ///
    /// One prefetch per cache line's worth of items (64 bytes apart), and
    /// one for the last: an item left out starts in the line of a
    /// prefetched item before or after it, so every line an item starts in
    /// is asked for.
    #[inline]
    fn prefetch_grandchildren(&self, first: usize) {
        const ITEMS_PER_LINE: usize = 64 / std::mem::size_of::<Item>();
        let from = first * ARITY + 1;
        let last = from + ARITY * ARITY - 1;
        for index in (from..last).step_by(ITEMS_PER_LINE) {
            super::prefetch(&self.heap, index);
        }
        super::prefetch(&self.heap, last);
    }

    /// The position of the earliest of the four items from `first`: a
    /// tournament of three comparisons, the first two independent, each a
    /// select rather than a branch (which child wins is a coin toss, so a
    /// branch would be mispredicted half the time: measured with
    /// `expire_all/heap` in `benches/backends.rs`).
    #[inline]
    fn earliest_of_four(&self, first: usize) -> usize {
        let four = &self.heap[first..first + ARITY];
        let left = usize::from(four[1].key() < four[0].key());
        let right = 2 + usize::from(four[3].key() < four[2].key());
        let winner = if four[right].key() < four[left].key() {
            right
        } else {
            left
        };
        first + winner
    }

    /// The position of the earliest item in `first..len` (the last node's
    /// one to three children).
    #[cold]
    fn earliest_of_some(&self, first: usize, len: usize) -> usize {
        (first + 1..len).fold(first, |best, child| {
            if self.heap[child].before(&self.heap[best]) {
                child
            } else {
                best
            }
        })
    }

    /// Gives the items the sequence numbers `0..len` in their order, so
    /// that `seq` does not wrap (it would put a later insert before an
    /// earlier one with the same deadline). A sorted array is a heap, so
    /// the heap stays valid; sorting in place allocates nothing.
    #[cold]
    fn renumber(&mut self) {
        self.heap.sort_unstable_by_key(Item::key);
        for pos in 0..self.heap.len() {
            let mut item = self.heap[pos];
            item.seq = pos as u32;
            self.place(pos, item);
        }
        self.next_seq = self.heap.len() as u32;
    }

    /// Removes the item at `pos` from the heap array (its entry is already
    /// out of the slab).
    fn remove_at(&mut self, pos: usize) {
        let last = self.heap.pop().expect("the heap holds the item");
        if pos < self.heap.len() {
            self.heap[pos] = last;
            if pos > 0 && last.before(&self.heap[(pos - 1) / ARITY]) {
                self.sift_up(pos);
            } else {
                self.sift_down(pos);
            }
        }
        if self.heap.capacity() > 64 && self.heap.len() < self.heap.capacity() / 4 {
            self.heap.shrink_to(self.heap.capacity() / 2);
        }
    }
}

impl<T> DelayQueue<T> for IndexedHeap<T> {
    fn insert(&mut self, _now: Nanos, deadline: Nanos, value: T) -> Key {
        let pos = self.heap.len();
        let key = self.slab.insert(value);
        if self.positions.len() < self.slab.slot_count() {
            self.positions.resize(self.slab.slot_count(), 0);
        }
        if self.next_seq == u32::MAX {
            self.renumber();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Item {
            deadline,
            seq,
            slot: key.slot,
        });
        self.sift_up(pos);
        key
    }

    fn remove(&mut self, key: Key) -> Option<T> {
        let value = self.slab.remove(key)?;
        self.remove_at(self.positions[key.slot as usize] as usize);
        if self.slab.slot_count() == 0 {
            // The slab freed its slots (it was emptied): so do the positions.
            self.positions = Vec::new();
        }
        Some(value)
    }

    fn pop_due(&mut self, now: Nanos) -> Option<(Key, T)> {
        let top = *self.heap.first()?;
        if top.deadline > now {
            return None;
        }
        let key = self.slab.key_at(top.slot);
        let value = self.remove(key)?;
        Some((key, value))
    }

    fn next_due(&self) -> Option<Nanos> {
        self.heap.first().map(|item| item.deadline)
    }

    fn len(&self) -> usize {
        self.slab.len()
    }

    fn drain(&mut self) -> Vec<T> {
        let mut all = Vec::with_capacity(self.len());
        while let Some(top) = self.heap.first() {
            let key = self.slab.key_at(top.slot);
            all.extend(self.remove(key));
        }
        all
    }

    fn slots(&self) -> usize {
        self.slab.slot_count()
    }

    fn key_in_slot_if(&self, slot: usize, pred: &mut dyn FnMut(&T) -> bool) -> Option<Key> {
        self.slab.key_in_slot_if(slot, |value| pred(value))
    }

    #[cfg(all(test, not(loom)))]
    fn max_lateness(&self, _delay: Nanos) -> Nanos {
        0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pops_in_deadline_order_then_insertion_order() {
        let mut q = IndexedHeap::default();
        for (i, d) in [50u64, 10, 30, 10, 20, 10].into_iter().enumerate() {
            q.insert(0, d, i);
        }
        assert_eq!(q.next_due(), Some(10));
        assert!(q.pop_due(9).is_none());
        let order: Vec<usize> = std::iter::from_fn(|| q.pop_due(100).map(|(_, v)| v)).collect();
        assert_eq!(order, [1, 3, 5, 4, 2, 0]);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn removal_by_key_keeps_the_heap_valid_and_ignores_stale_keys() {
        let mut q = IndexedHeap::default();
        let keys: Vec<Key> = (0..100u64)
            .map(|i| q.insert(0, (i * 37) % 101, i))
            .collect();
        for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
            assert_eq!(q.remove(*k), Some(i as u64));
            assert_eq!(q.remove(*k), None, "removing twice");
        }
        let mut last = 0;
        while let Some((_, v)) = q.pop_due(u64::MAX) {
            assert_ne!(v % 3, 0);
            let d = (v * 37) % 101;
            assert!(d >= last);
            last = d;
        }
    }

    #[test]
    fn an_item_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Item>(), 16);
    }

    #[test]
    fn insertion_order_among_equal_deadlines_survives_the_renumbering() {
        let mut q = IndexedHeap::default();
        // Entries from before the renumbering, due at 10 and 20.
        for i in 0..6u64 {
            q.insert(0, 10 + (i % 2) * 10, i);
        }
        let early = q.insert(0, 5, 100);
        q.next_seq = u32::MAX - 3;
        // Three inserts with the last sequence numbers, then the ones
        // after the renumbering, all due at 10 or 20 like the first.
        for i in 6..12u64 {
            q.insert(0, 10 + (i % 2) * 10, i);
        }
        assert!(q.next_seq < 100, "renumbered: next seq {}", q.next_seq);
        assert_eq!(q.remove(early), Some(100), "keys stay valid");
        let order: Vec<u64> = std::iter::from_fn(|| q.pop_due(100).map(|(_, v)| v)).collect();
        assert_eq!(order, [0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11]);
    }

    #[test]
    fn emptied_queue_gives_its_memory_back() {
        let mut q = IndexedHeap::default();
        let keys: Vec<Key> = (0..100_000u64)
            .map(|i| q.insert(0, 1_000 + i, ()))
            .collect();
        for k in keys {
            q.remove(k);
        }
        assert_eq!(q.len(), 0);
        assert_eq!(q.positions.capacity(), 0, "positions freed with the slab");
        assert!(
            q.heap.capacity() <= 64,
            "heap capacity {}",
            q.heap.capacity()
        );
    }
}

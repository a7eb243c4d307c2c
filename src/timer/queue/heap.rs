//! The heap backend: a 4-ary min-heap, the JDK's `DelayedWorkQueue`
//! improved.
//!
//! * **Exact**: entries are popped at their deadline, not rounded to a tick.
//! * **FIFO among equal deadlines**: the heap orders by `(deadline, seq)`,
//!   `seq` counting insertions (the JDK's tie-break; the JDK 25 delay
//!   scheduler has none). `seq` is 32 bits: before it would wrap, the
//!   entries are renumbered in their order (once per 2^32 inserts, an
//!   in-place heapsort, O(n log n), no allocation), so the order among
//!   equal deadlines never breaks.
//! * **The entries live in the heap**, in an array beside the ordering
//!   keys and moved with them: an entry costs 12 bytes of key and its own
//!   size (16 for the timer's `CellArc<dyn Delayed>`), 28 bytes, and a pop
//!   reads no other memory. There is no removal by key: the timer never
//!   removes one entry (a cancel is counted, and a sweep takes the dead
//!   entries out in one pass, [`DelayQueue::remove_where`], then rebuilds
//!   the heap in O(n)). Until issue 35 the entries lived in a slab and the
//!   heap recorded each one's position for a removal by key nothing made:
//!   44 bytes an entry (a 16-byte item, a 24-byte slot, a 4-byte position)
//!   and a slab line read at every pop.
//! * **4-ary**: half the depth of a binary heap, and the four children of a
//!   node sit in one or two cache lines; the ordering keys are an array of
//!   their own (`deadline`, `seq`: 12 bytes, packed, so four siblings span
//!   48 bytes), so a sift compares without reading the entries: it moves
//!   one per level, beside its key.
//! * **A sift down selects, it does not branch**: which of four children
//!   is earliest is a coin toss, so it is found by selects (no mispredicted
//!   branch), and the children of all four are prefetched, since the CPU no
//!   longer guesses the winner and loads its children early (measured
//!   against a sift down that branches: `benches/README.md`, "The heap: a
//!   sift down that selects").
//! * Memory is given back: both arrays shrink when they are mostly empty.

use super::{DelayQueue, Nanos};

/// Children per node.
const ARITY: usize = 4;

/// The ordering key of one heap position.
///
/// 12 bytes, not 16: packed to 4-byte alignment, which leaves the
/// deadline unaligned in every other item (a plain load on the targets
/// this runs on; the compiler refuses a reference to a packed field).
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct Item {
    deadline: Nanos,
    seq: u32,
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

/// The 4-ary heap (see the module doc). `heap[i]` orders `values[i]`: the
/// two arrays always have the same length, and every move of an item moves
/// its value with it.
#[derive(Debug)]
pub(crate) struct Heap<T> {
    heap: Vec<Item>,
    values: Vec<T>,
    /// The `seq` of the next insert; never `u32::MAX` once an insert
    /// took it (see [`renumber`](Self::renumber)).
    next_seq: u32,
}

impl<T> Default for Heap<T> {
    fn default() -> Self {
        Heap {
            heap: Vec::new(),
            values: Vec::new(),
            next_seq: 0,
        }
    }
}

impl<T> Heap<T> {
    /// Moves the item at `pos` up to its place.
    fn sift_up(&mut self, mut pos: usize) {
        let item = self.heap[pos];
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            if !item.before(&self.heap[parent]) {
                break;
            }
            self.heap[pos] = self.heap[parent];
            self.values.swap(pos, parent);
            pos = parent;
        }
        self.heap[pos] = item;
    }

    /// Moves the item at `pos` down to its place among the first `len`.
    fn sift_down(&mut self, mut pos: usize, len: usize) {
        let item = self.heap[pos];
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
            self.heap[pos] = self.heap[best];
            self.values.swap(pos, best);
            pos = best;
        }
        self.heap[pos] = item;
    }

    /// Asks for the children of the four items from `first` (sixteen
    /// items, three or four cache lines), one of which the next level of a sift
    /// reads: without it, the select below would make each level wait for
    /// memory in turn (a branch lets the CPU guess the winner and load its
    /// children early; a select does not).
    ///
    /// One prefetch per cache line's worth of whole items (five, 60 bytes
    /// apart), and one for the last: an item left out starts in the line
    /// of a prefetched item before or after it, so every line an item
    /// starts in is asked for (the few bytes of a last item that straddles
    /// into a further line are not).
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

    /// Makes the first `len` items a heap (Floyd's: sift down every inner
    /// node, the last first; O(len)).
    fn heapify(&mut self, len: usize) {
        if len > 1 {
            for pos in (0..=(len - 2) / ARITY).rev() {
                self.sift_down(pos, len);
            }
        }
    }

    /// Gives the items the sequence numbers `0..len` in their order, so
    /// that `seq` does not wrap (it would put a later insert before an
    /// earlier one with the same deadline). A heapsort in place (each
    /// earliest item moved behind the shrinking heap, then the array
    /// reversed: sorted, so a heap), which allocates nothing.
    #[cold]
    fn renumber(&mut self) {
        let len = self.heap.len();
        for end in (1..len).rev() {
            self.heap.swap(0, end);
            self.values.swap(0, end);
            self.sift_down(0, end);
        }
        self.heap.reverse();
        self.values.reverse();
        for (seq, item) in self.heap.iter_mut().enumerate() {
            item.seq = seq as u32;
        }
        self.next_seq = len as u32;
    }

    /// Removes the earliest item and returns its value (the heap is not
    /// empty): the last item takes its place and sifts down.
    fn pop_first(&mut self) -> T {
        self.heap.swap_remove(0);
        let value = self.values.swap_remove(0);
        if !self.heap.is_empty() {
            self.sift_down(0, self.heap.len());
        }
        self.give_back();
        value
    }

    /// Shrinks both arrays to twice their length when they are less than
    /// a quarter full (an emptied heap frees them).
    fn give_back(&mut self) {
        let capacity = self.heap.capacity();
        if capacity > 64 && self.heap.len() < capacity / 4 {
            self.heap.shrink_to(self.heap.len() * 2);
            self.values.shrink_to(self.heap.len() * 2);
        }
    }
}

impl<T> DelayQueue<T> for Heap<T> {
    fn insert(&mut self, _now: Nanos, deadline: Nanos, value: T) {
        if self.next_seq == u32::MAX {
            self.renumber();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let pos = self.heap.len();
        self.heap.push(Item { deadline, seq });
        self.values.push(value);
        self.sift_up(pos);
    }

    fn pop_due(&mut self, now: Nanos) -> Option<T> {
        if self.heap.first()?.deadline > now {
            return None;
        }
        Some(self.pop_first())
    }

    fn peek_next(&self) -> Option<&T> {
        self.values.first()
    }

    fn next_due(&self) -> Option<Nanos> {
        self.heap.first().map(|item| item.deadline)
    }

    fn len(&self) -> usize {
        self.heap.len()
    }

    fn drain(&mut self) -> Vec<T> {
        let mut all = Vec::with_capacity(self.len());
        while !self.heap.is_empty() {
            all.push(self.pop_first());
        }
        all
    }

    /// One pass that moves the live entries to the front (`dead` is the
    /// crate's own check, which does not panic),
    /// a heap rebuilt over them (O(n)), then the dead ones handed out from
    /// the back: by then the heap is whole, so a panic in `removed` leaves
    /// it valid (the vector's drain drops the rest).
    fn remove_where(
        &mut self,
        dead: &mut dyn FnMut(&T) -> bool,
        removed: &mut dyn FnMut(T),
    ) -> usize {
        let len = self.heap.len();
        let mut kept = 0;
        for pos in 0..len {
            if !dead(&self.values[pos]) {
                self.heap.swap(kept, pos);
                self.values.swap(kept, pos);
                kept += 1;
            }
        }
        self.heap.truncate(kept);
        self.heapify(kept);
        for value in self.values.drain(kept..) {
            removed(value);
        }
        self.give_back();
        len - kept
    }

    #[cfg(all(test, not(loom)))]
    fn max_lateness(&self, _delay: Nanos) -> Nanos {
        0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn pop_all<T>(q: &mut Heap<T>, now: Nanos) -> Vec<T> {
        std::iter::from_fn(|| q.pop_due(now)).collect()
    }

    #[test]
    fn pops_in_deadline_order_then_insertion_order() {
        let mut q = Heap::default();
        for (i, d) in [50u64, 10, 30, 10, 20, 10].into_iter().enumerate() {
            q.insert(0, d, i);
        }
        assert_eq!(q.next_due(), Some(10));
        assert!(q.pop_due(9).is_none());
        assert_eq!(pop_all(&mut q, 100), [1, 3, 5, 4, 2, 0]);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn a_sweep_keeps_the_heap_valid_and_hands_out_each_dead_entry_once() {
        let mut q = Heap::default();
        for i in 0..1_000u64 {
            q.insert(0, (i * 37) % 101, i);
        }
        let mut out = Vec::new();
        let swept = q.remove_where(&mut |v| v % 3 == 0, &mut |v| out.push(v));
        out.sort_unstable();
        assert_eq!(swept, 334);
        assert_eq!(out, (0..1_000).filter(|v| v % 3 == 0).collect::<Vec<_>>());
        let mut last = (0, 0);
        for v in pop_all(&mut q, u64::MAX) {
            assert_ne!(v % 3, 0);
            let at = ((v * 37) % 101, v);
            assert!(at > last, "{at:?} after {last:?}");
            last = at;
        }
    }

    #[test]
    fn a_panic_while_handing_out_a_sweep_leaves_the_heap_valid() {
        let mut q = Heap::default();
        for i in 0..100u64 {
            q.insert(0, 100 - i, i);
        }
        let swept = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            q.remove_where(&mut |v| v % 2 == 0, &mut |v| {
                if v == 10 {
                    panic!("expected: a removed entry's drop panicked")
                }
            })
        }));
        assert!(swept.is_err());
        assert_eq!(q.len(), 50);
        let order = pop_all(&mut q, u64::MAX);
        assert_eq!(
            order,
            (0..100).rev().filter(|v| v % 2 == 1).collect::<Vec<_>>()
        );
    }

    /// The timer's entry: a 12-byte key beside a 16-byte `CellArc<dyn
    /// Delayed>`, nothing else.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_timer_entry_is_28_bytes() {
        use crate::sync::CellArc;
        use crate::task::delayed::Delayed;
        let entry = std::mem::size_of::<Item>() + std::mem::size_of::<CellArc<dyn Delayed>>();
        assert_eq!(entry, 28);
    }

    #[test]
    fn insertion_order_among_equal_deadlines_survives_the_renumbering() {
        let mut q = Heap::default();
        // Entries from before the renumbering, due at 10 and 20.
        for i in 0..6u64 {
            q.insert(0, 10 + (i % 2) * 10, i);
        }
        q.insert(0, 5, 100);
        q.next_seq = u32::MAX - 3;
        // Three inserts with the last sequence numbers, then the ones
        // after the renumbering, all due at 10 or 20 like the first.
        for i in 6..12u64 {
            q.insert(0, 10 + (i % 2) * 10, i);
        }
        assert!(q.next_seq < 100, "renumbered: next seq {}", q.next_seq);
        assert_eq!(
            pop_all(&mut q, 100),
            [100, 0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11]
        );
    }

    #[test]
    fn emptied_queue_gives_its_memory_back() {
        let mut q = Heap::default();
        for i in 0..100_000u64 {
            q.insert(0, 1_000 + i, i);
        }
        assert_eq!(q.remove_where(&mut |_| true, &mut drop), 100_000);
        assert_eq!(q.len(), 0);
        assert!(
            q.heap.capacity() <= 64,
            "heap capacity {}",
            q.heap.capacity()
        );
        for i in 0..100_000u64 {
            q.insert(0, 1_000 + i, i);
        }
        assert_eq!(pop_all(&mut q, u64::MAX).len(), 100_000);
        assert!(
            q.heap.capacity() <= 64,
            "heap capacity {}",
            q.heap.capacity()
        );
        assert!(q.values.capacity() <= 64);
    }
}

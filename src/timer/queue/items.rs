//! The item store of both timing wheels: the entries of one bucket (hashed
//! wheel) or slot (hierarchical wheel), in insertion order, as an
//! append-only vector of small items with a head and a count of dead
//! items ([`Items`]); and a prefetch hint for the slab.
//!
//! An *item* is what a wheel keeps of an entry in its bucket or slot: the
//! entry's slot in the wheel's [`Slab`](super::Slab) and its tick (12
//! bytes), so that walking, cascading and compacting never read the slab.
//! The store never moves an item on its own: positions are indexes into
//! the vector, stable until the store is compacted or swept.
//!
//! An item becomes *dead* when its entry leaves the slab out of order (a
//! pop that is not at the head, in the hashed wheel, where a bucket holds
//! entries of several rounds; the hierarchical wheel pops only at the head
//! of a slot, and its sweep rewrites the slots it removes from). The
//! hashed wheel marks a dead item in place (a *hole*: [`Hole`]); the store
//! counts it, a pop at the head drops it, an emptied store is cleared, and
//! a store whose dead items outnumber its live ones (and
//! [`MIN_COMPACTED`]) is compacted: so it never holds more than twice its
//! entries plus a few items, however long time stands still.

/// The most items a wheel's bucket or slot keeps room for once it is empty
/// (3 KiB of 12-byte items): the busy buckets of a steady load do not
/// reallocate at every turn, and an emptied one never pins more than that.
pub(crate) const RETAINED_ITEMS: usize = 256;

/// Dead items (holes) a hashed wheel's bucket may hold before it is
/// compacted, however few its entries (compacting a tiny one at every pop
/// out of order would be wasted work).
pub(crate) const MIN_COMPACTED: usize = 32;

/// The items of one bucket or slot, in insertion order (module doc).
///
/// The items from `head` on are in the bucket or slot; those before it
/// left in order (popped). `head` and `dead` are 32 bits, which keeps a
/// store at 32 bytes: a store holds at most twice its entries plus
/// [`MIN_COMPACTED`] items beyond its head, and items before the head only
/// until it empties; 2^32 items of 12 bytes is 48 GiB, where memory runs
/// out first.
#[derive(Debug)]
pub(crate) struct Items<I> {
    items: Vec<I>,
    head: u32,
    /// Dead items from `head` on.
    dead: u32,
}

impl<I> Default for Items<I> {
    fn default() -> Self {
        Items {
            items: Vec::new(),
            head: 0,
            dead: 0,
        }
    }
}

/// The item type of a wheel that marks its dead items in place (the hashed
/// wheel's holes), so that walks step over them without reading the slab.
pub(crate) trait Hole {
    /// True if the item is marked dead.
    fn is_hole(&self) -> bool;
    /// Marks the item dead.
    fn make_hole(&mut self);
}

impl<I> Items<I> {
    /// The live items (entries): dead ones not counted.
    #[inline]
    pub(crate) fn live(&self) -> usize {
        self.items.len() - self.head as usize - self.dead as usize
    }

    /// The position of the first item still in the store.
    #[inline]
    pub(crate) fn head(&self) -> usize {
        self.head as usize
    }

    /// The dead items from the head on (the tests').
    #[cfg(all(test, not(loom)))]
    pub(crate) fn dead(&self) -> usize {
        self.dead as usize
    }

    /// Every item, those before the head included, indexed by position.
    #[inline]
    pub(crate) fn all(&self) -> &[I] {
        &self.items
    }

    /// The items still in the store (from the head on), dead ones included.
    #[inline]
    pub(crate) fn pending(&self) -> &[I] {
        &self.items[self.head as usize..]
    }

    /// The position the next [`push`](Self::push) puts its item at.
    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.items.len()
    }

    /// Appends `item` (a new entry).
    #[inline]
    pub(crate) fn push(&mut self, item: I) {
        if self.items.len() == self.items.capacity() {
            self.grow();
        }
        self.items.push(item);
    }

    /// Doubles the room (as `Vec::push` would), in a fresh allocation
    /// rather than by `realloc`.
    ///
    /// Why by hand: glibc's `realloc` grows a block in the arena the block
    /// came from, and a store's small block can come from the scheduling
    /// thread's arena through a worker's thread cache (glibc's tcache),
    /// which the task cells a worker frees refill. Grown there to a large
    /// size, it makes glibc consolidate that arena's fast bins, which
    /// after a burst hold every freed cell: with 48-byte cells,
    /// `timer-fire` on the hierarchical wheel stalled a leader's cascade
    /// for 156–232 ms in 14 of 42 repetitions (`perf probe` on
    /// `malloc_consolidate`: a worker, in `pop_due`'s `grow_one`, on the
    /// main arena), none with the tcache off, and none in 18 grown this
    /// way (`benches/README.md`, "What a pending timer holds"). A fresh
    /// allocation comes from the growing thread's own arena. What it gives
    /// up: `realloc`'s in-place growth and, for a vector glibc mapped on
    /// its own, `mremap`: growing copies (at most twice the final size in
    /// all, as doubling does), which the same runs did not show.
    #[cold]
    fn grow(&mut self) {
        let mut bigger = Vec::with_capacity((self.items.capacity() * 2).max(4));
        bigger.append(&mut self.items);
        self.items = bigger;
    }

    /// Moves the head past its item and returns it (the caller pops its
    /// entry: the item at the head is never dead). Panics if the store
    /// holds no item from the head on.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> I
    where
        I: Copy,
    {
        let item = self.items[self.head as usize];
        self.head += 1;
        item
    }

    /// True if the dead items outnumber the live ones (and
    /// [`MIN_COMPACTED`]): time to compact.
    #[inline]
    pub(crate) fn needs_compaction(&self) -> bool {
        self.dead as usize > self.live().max(MIN_COMPACTED)
    }

    /// Keeps, in order, the items from the head on that `keep` selects
    /// (which must reject every dead one), dropping those before the head;
    /// the kept items take positions from 0. A vector left with more than
    /// twice the room it needs (plus [`RETAINED_ITEMS`]) is shrunk, which
    /// gives back the room of the items that left.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&I) -> bool) {
        self.items.drain(..self.head as usize);
        self.items.retain(keep);
        if self.items.capacity() > 2 * self.items.len() + RETAINED_ITEMS {
            self.items.shrink_to_fit();
        }
        self.head = 0;
        self.dead = 0;
    }

    /// Empties the store, keeping room for at most [`RETAINED_ITEMS`].
    pub(crate) fn clear(&mut self) {
        if self.items.capacity() > RETAINED_ITEMS {
            self.items = Vec::new();
        } else {
            self.items.clear();
        }
        self.head = 0;
        self.dead = 0;
    }

    /// Empties the store and frees its vector.
    pub(crate) fn release(&mut self) {
        *self = Items::default();
    }

    /// The room of the vector, in items.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn capacity(&self) -> usize {
        self.items.capacity()
    }
}

impl<I: Hole> Items<I> {
    /// Records that the entry of the item at `pos` (from the head on, not
    /// a hole) left: the vector drops the item if it is the last (with the
    /// holes before it), the head moves past it (and past the holes behind
    /// it) if it is the first, or it becomes a hole. So the item at the
    /// head, if any, is never a hole.
    pub(crate) fn take(&mut self, pos: usize) {
        if pos + 1 == self.items.len() {
            self.items.pop();
            while self.items.len() > self.head as usize && self.items.last().is_some_and(I::is_hole)
            {
                self.items.pop();
                self.dead -= 1;
            }
        } else if pos == self.head as usize {
            self.head += 1;
            while let Some(item) = self.items.get(self.head as usize) {
                if !item.is_hole() {
                    break;
                }
                self.head += 1;
                self.dead -= 1;
            }
        } else {
            self.items[pos].make_hole();
            self.dead += 1;
        }
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

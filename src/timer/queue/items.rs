//! What both timing wheels do with the item vectors of their buckets and
//! slots: empty one keeping a little room, compact one after its head
//! moved, and prefetch an item.

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

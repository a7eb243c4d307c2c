//! The delayed work queue backends: the ordering of tasks that run later.
//!
//! A *backend* ([`DelayQueue`]) is a plain single-threaded data structure,
//! driven by an explicit `now`: no threads, no clock inside, so it can be
//! unit-tested and property-tested against a reference model (`model_test`).
//! Every backend passes the same property test unchanged.
//!
//! # The contract of a backend
//!
//! * An entry is never popped before its deadline. It may be popped *later*
//!   by at most `DelayQueue::max_lateness` of its delay (a wheel rounds a
//!   deadline up to its tick, never down; the heap is exact).
//! * Among entries with equal deadlines, insertion order is kept.
//! * Entries leave by a pop, a drain, or a sweep ([`DelayQueue::remove_where`]):
//!   the timer never removes one entry by its address (a cancel is counted,
//!   and the sweep takes the dead ones out together: `timer::driver::sweep`).
//!   The wheels keep their entries in a [`Slab`] and address them by its
//!   slot index, inside; the heap holds its entries in its own array.
//! * Time is `u64` nanoseconds on the executor's monotonic clock; the
//!   largest value means "never" in practice (~584 years).

pub(crate) mod hashed_wheel;
pub(crate) mod heap;
pub(crate) mod hierarchical_wheel;
pub(crate) mod items;
pub(crate) mod slab;

#[cfg(all(test, not(loom)))]
mod model_test;

pub(crate) use items::{prefetch, Hole, Items};
pub(crate) use slab::Slab;

use crate::time::Nanos;

/// A delayed work queue backend (see the module doc for the contract).
pub(crate) trait DelayQueue<T> {
    /// Adds `value`, due at `deadline`; `now` is the current time (a wheel
    /// places the entry relative to it).
    fn insert(&mut self, now: Nanos, deadline: Nanos, value: T);

    /// Removes and returns one entry that is due at `now`, earliest first
    /// (insertion order among equal deadlines); `None` if none is due.
    fn pop_due(&mut self, now: Nanos) -> Option<T>;

    /// The time at which the next entry becomes due (at or after its
    /// deadline), or `None` if the queue is empty.
    fn next_due(&self) -> Option<Nanos>;

    /// The entry the next [`pop_due`](Self::pop_due) would return once it
    /// is due, where the backend finds it without moving anything; `None`
    /// where it would have to (a wheel's cascade) or if empty. A hint: the
    /// leader asks the CPU to fetch that task's cell while it runs the one
    /// before (`timer/driver/lead.rs`).
    fn peek_next(&self) -> Option<&T>;

    /// The number of entries.
    fn len(&self) -> usize;

    /// How coarse its deadlines are: an entry may fall due up to this
    /// much after its deadline (a wheel's tick; 0 for exact deadlines).
    fn granularity(&self) -> Nanos {
        0
    }

    /// Removes and returns every entry, due or not, earliest first where
    /// the backend knows the order cheaply. Time does not move: entries may
    /// be inserted again afterwards with the same `now`.
    fn drain(&mut self) -> Vec<T>;

    /// Removes every entry for which `dead` is true and hands each to
    /// `removed` as it leaves (in no particular order), keeping the others
    /// as they were: same deadlines, same order among equal deadlines.
    /// Returns how many it removed. O(n), and no allocation the size of
    /// the queue: a sweep of a million entries leaves no large temporary
    /// block behind in the allocator.
    fn remove_where(
        &mut self,
        dead: &mut dyn FnMut(&T) -> bool,
        removed: &mut dyn FnMut(T),
    ) -> usize;

    /// How late, at most, an entry inserted `delay` before its deadline may
    /// be popped after it (0 for an exact backend). Checked by the property
    /// test.
    #[cfg(all(test, not(loom)))]
    fn max_lateness(&self, delay: Nanos) -> Nanos;
}

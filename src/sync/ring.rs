//! A bounded lock-free queue that never allocates after it is made, and
//! whose consumers never spin on a producer that was preempted mid-push.
//!
//! The timer's command queue (`timer/driver/commands.rs`) is one of these. It is
//! Dmitry Vyukov's bounded MPMC queue, the algorithm of crossbeam-queue's
//! `ArrayQueue`, written here for one difference: when a consumer reaches a
//! slot that a producer has claimed but not yet filled, `ArrayQueue::pop`
//! spins (without yielding) until it is filled. If that producer was
//! preempted, by the very thread that now pops, for instance (the timer
//! thread waking on a busy core), the consumer spins for the rest of its
//! time slice. With `ArrayQueue` as the command queue, the timer thread
//! lost much of its command-applying time in that spin, and periodic tasks
//! ran later (measured: see `benches/README.md`, "The ring: a consumer
//! that yields"). Here a consumer backs off and yields
//! ([`Backoff::snooze`]) instead, which lets the producer finish.
//!
//! # The protocol
//!
//! Positions count up forever (wrapping); position `p` lives in slot
//! `p % capacity`. Each slot has a *sequence* number that says what it is
//! ready for:
//!
//! * `sequence == p`: empty, ready to be filled by the producer of `p`;
//! * `sequence == p + 1`: filled with the value of `p`, ready for its
//!   consumer;
//! * after that consumer took the value, `sequence == p + capacity`: empty,
//!   ready for position `p + capacity`, one lap later.
//!
//! A producer claims position `tail` by a compare-and-swap of `tail` to
//! `tail + 1`, only when the slot's sequence says it is ready for it (else
//! the queue is full: the slot still holds the value of the previous lap).
//! It then writes the value and publishes it by storing `sequence = p + 1`
//! (`Release`). A consumer claims position `head` the same way, only when
//! the sequence says the value is there (`Acquire`: the write is visible),
//! reads it and hands the slot to the next lap (`Release`: the read is done
//! before a producer can overwrite it).
//!
//! Invariant: between its claim (the winning compare-and-swap) and its
//! publication (the sequence store), a slot's value is accessed by the one
//! thread that claimed it, and by no other: the sequence is the only way to
//! reach it, and it says "ready" for one position at a time. The loom model
//! below checks it (loom's `UnsafeCell` reports any two unsynchronised
//! accesses).

use std::mem::MaybeUninit;

use crate::sync::cell::UnsafeCell;
use crate::sync::{AtomicUsize, Backoff, CachePadded, Ordering};

/// How far ahead of its push a producer prefetches a slot (see
/// `prefetch_for_write`): two 64-byte lines of 32-byte slots.
const PREFETCH_AHEAD: usize = 4;

/// One slot: its sequence number and its value (see the module doc).
struct Slot<T> {
    sequence: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A bounded multi-producer multi-consumer queue (see the module doc).
pub(crate) struct Ring<T> {
    /// The next position to pop.
    head: CachePadded<AtomicUsize>,
    /// The next position to push.
    tail: CachePadded<AtomicUsize>,
    slots: Box<[Slot<T>]>,
    /// `capacity - 1` (the capacity is a power of two).
    mask: usize,
}

// SAFETY: a `Ring` moves values of `T` between threads (hence `T: Send`),
// and hands each value to exactly one thread at a time: the producer that
// claimed its slot, then the consumer that claimed it (module doc). No `&T`
// is ever shared, so `T: Sync` is not needed.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> std::fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.slots.len())
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .finish()
    }
}

/// `a - b` for positions that may have wrapped: negative if `a` is behind.
#[inline]
fn distance(a: usize, b: usize) -> isize {
    a.wrapping_sub(b) as isize
}

impl<T> Ring<T> {
    /// An empty queue of `capacity` slots, rounded up to a power of two (at
    /// least 2: with one slot, "filled with the value of `p`" and "ready
    /// for `p + capacity`" would be the same sequence number).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(2).next_power_of_two();
        Ring {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            slots: (0..capacity)
                .map(|i| Slot {
                    sequence: AtomicUsize::new(i),
                    value: UnsafeCell::new(MaybeUninit::uninit()),
                })
                .collect(),
            mask: capacity - 1,
        }
    }

    /// Appends `value` and returns its position, or gives it back if the
    /// queue is full.
    pub(crate) fn push(&self, value: T) -> Result<usize, T> {
        let mut position = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[position & self.mask];
            let sequence = slot.sequence.load(Ordering::Acquire);
            match distance(sequence, position) {
                0 => match self.tail.compare_exchange_weak(
                    position,
                    position.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: the compare-and-swap claimed `position`,
                        // whose slot was empty (its sequence said so, and
                        // the `Acquire` load saw the previous consumer's
                        // read finished); no other thread touches the value
                        // until the `Release` store below publishes it.
                        slot.value.with_mut(|v| unsafe { (*v).write(value) });
                        slot.sequence
                            .store(position.wrapping_add(1), Ordering::Release);
                        self.prefetch_for_write(position.wrapping_add(PREFETCH_AHEAD));
                        return Ok(position);
                    }
                    Err(now) => position = now,
                },
                // The slot still holds the value of the previous lap.
                d if d < 0 => return Err(value),
                // Another producer claimed `position`: try the next one.
                _ => position = self.tail.load(Ordering::Relaxed),
            }
        }
    }

    /// Takes the oldest value, or `None` if the queue is empty. If a
    /// producer has claimed the next position but not filled it yet, waits
    /// for it, yielding the processor (module doc).
    pub(crate) fn pop(&self) -> Option<T> {
        let backoff = Backoff::new();
        let mut position = self.head.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[position & self.mask];
            let sequence = slot.sequence.load(Ordering::Acquire);
            match distance(sequence, position.wrapping_add(1)) {
                0 => match self.head.compare_exchange_weak(
                    position,
                    position.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: the compare-and-swap claimed `position`,
                        // whose value its producer published (the `Acquire`
                        // load of the sequence saw its `Release` store); no
                        // other thread touches the slot until the store
                        // below hands it to the next lap's producer. The
                        // value is read out once: the slot is then empty.
                        let value = slot.value.with_mut(|v| unsafe { (*v).assume_init_read() });
                        slot.sequence.store(
                            position.wrapping_add(self.mask).wrapping_add(1),
                            Ordering::Release,
                        );
                        return Some(value);
                    }
                    Err(now) => position = now,
                },
                d if d < 0 => {
                    if self.tail.load(Ordering::Relaxed) == position {
                        return None;
                    }
                    // Claimed, not yet filled: let its producer run.
                    backoff.snooze();
                    position = self.head.load(Ordering::Relaxed);
                }
                // Another consumer took `position`: try the next one.
                _ => position = self.head.load(Ordering::Relaxed),
            }
        }
    }

    /// The positions from the next one to pop up to `position` (one a
    /// producer was given): a hint (`Relaxed`) of the backlog it saw.
    pub(crate) fn backlog_at(&self, position: usize) -> usize {
        position.wrapping_sub(self.head.load(Ordering::Relaxed))
    }

    /// The positions claimed and not yet popped: a hint (`Relaxed`).
    pub(crate) fn len_hint(&self) -> usize {
        self.tail
            .load(Ordering::Relaxed)
            .wrapping_sub(self.head.load(Ordering::Relaxed))
    }

    /// Asks the processor to fetch the slot of `position` into this core's
    /// cache, owned for writing, so that the push of that position finds it
    /// there. Each slot's line is last written by the consumer (its
    /// sequence, a lap earlier); without this the producer reads it from
    /// the consumer's core and then asks again to own it, and the first
    /// locked instruction after the push (the scheduler's fence) waits for
    /// both. `PREFETCH_AHEAD` positions ahead the consumer is long done
    /// with the slot unless the queue is nearly full. A hint only: no
    /// effect on what any thread reads.
    #[inline]
    fn prefetch_for_write(&self, position: usize) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        {
            let slot: *const Slot<T> = &self.slots[position & self.mask];
            // SAFETY: a prefetch has no effect on memory, only on the
            // cache, and `slot` points into `self.slots`.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(slot.cast())
            };
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        let _ = position;
    }

    /// True if no position is claimed beyond the last one popped (a value
    /// claimed but not yet written counts: it is on its way). `Relaxed`:
    /// the caller orders it with a fence (see `timer/driver/commands.rs`).
    pub(crate) fn is_empty(&self) -> bool {
        self.tail.load(Ordering::Relaxed) == self.head.load(Ordering::Relaxed)
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // Drop the values still in the queue (`&mut self`: nobody is
        // pushing, so no slot is claimed and not filled).
        while self.pop().is_some() {}
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_up_to_capacity_then_full() {
        let ring = Ring::with_capacity(3);
        assert_eq!(ring.slots.len(), 4, "rounded up to a power of two");
        assert!(ring.is_empty());
        for i in 0..4 {
            assert_eq!(ring.push(i), Ok(i), "its position");
        }
        assert_eq!(ring.push(4), Err(4), "full");
        assert!(!ring.is_empty());
        assert_eq!(ring.pop(), Some(0));
        assert_eq!(ring.push(4), Ok(4), "room again");
        assert_eq!(ring.backlog_at(4), 3, "1, 2 and 3 ahead of position 4");
        assert_eq!(
            std::iter::from_fn(|| ring.pop()).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert!(ring.is_empty());
        assert_eq!(ring.pop(), None);
    }

    #[test]
    fn one_slot_asked_for_makes_two() {
        let ring = Ring::with_capacity(1);
        assert_eq!(ring.slots.len(), 2);
        assert_eq!((ring.push('a'), ring.push('b')), (Ok(0), Ok(1)));
        assert_eq!(ring.push('c'), Err('c'), "full, 'a' not overwritten");
        assert_eq!(
            (ring.pop(), ring.pop(), ring.pop()),
            (Some('a'), Some('b'), None)
        );
    }

    #[test]
    fn many_laps_keep_order() {
        let ring = Ring::with_capacity(8);
        let mut expected = 0;
        for i in 0..10_000u32 {
            ring.push(i).unwrap();
            if i % 3 == 2 {
                while let Some(v) = ring.pop() {
                    assert_eq!(v, expected);
                    expected += 1;
                }
            }
        }
        while let Some(v) = ring.pop() {
            assert_eq!(v, expected);
            expected += 1;
        }
        assert_eq!(expected, 10_000);
    }

    #[test]
    fn values_left_in_it_are_dropped_with_it() {
        let value = Arc::new(());
        let ring = Ring::with_capacity(4);
        for _ in 0..3 {
            ring.push(Arc::clone(&value)).unwrap();
        }
        drop(ring.pop());
        assert_eq!(Arc::strong_count(&value), 3);
        drop(ring);
        assert_eq!(Arc::strong_count(&value), 1);
    }

    /// Four producers push 100,000 numbers each through 64 slots while one
    /// consumer pops: every number arrives once, each producer's in order.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "spinning threads: too slow under Miri; loom models the race"
    )]
    fn concurrent_producers_lose_nothing_and_keep_their_order() {
        const PRODUCERS: usize = 4;
        const EACH: usize = 100_000;
        let ring = Ring::with_capacity(64);
        std::thread::scope(|s| {
            for p in 0..PRODUCERS {
                let ring = &ring;
                s.spawn(move || {
                    for i in 0..EACH {
                        let mut value = (p, i);
                        while let Err(back) = ring.push(value) {
                            value = back;
                            std::thread::yield_now();
                        }
                    }
                });
            }
            let mut next = [0; PRODUCERS];
            let mut received = 0;
            while received < PRODUCERS * EACH {
                match ring.pop() {
                    Some((p, i)) => {
                        assert_eq!(i, next[p], "producer {p}'s order");
                        next[p] += 1;
                        received += 1;
                    }
                    None => std::thread::yield_now(),
                }
            }
            assert_eq!(next, [EACH; PRODUCERS]);
        });
        assert!(ring.is_empty());
    }
}

/// loom model of the protocol (`RUSTFLAGS="--cfg loom"`).
///
/// * `pushes_race_a_pop_through_two_slots`: a ring of two slots holds one
///   value; two threads push one value each (one may find the ring full)
///   while the main thread pops twice (the first pop frees a slot that a
///   push may reuse a lap later; the second may find its slot claimed but
///   not yet filled, and waits for it). Asserted: the first value comes out
///   first, every accepted value comes out exactly once and nothing else
///   does, at least one push is accepted, and loom's `UnsafeCell` finds no
///   unsynchronised access to a slot's value (a claim or a publication in
///   the wrong order would be one).
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom_model::support::model;
    use crate::sync::{thread, Arc};

    #[test]
    fn pushes_race_a_pop_through_two_slots() {
        model("ring::pushes_race_a_pop_through_two_slots", || {
            let ring = Arc::new(Ring::with_capacity(2));
            ring.push(0).unwrap();
            let producers: Vec<_> = (1..=2)
                .map(|value| {
                    let ring = Arc::clone(&ring);
                    thread::spawn(move || ring.push(value).is_ok().then_some(value))
                })
                .collect();
            assert_eq!(ring.pop(), Some(0), "the first value first");
            let second = ring.pop();
            let mut accepted: Vec<i32> = producers
                .into_iter()
                .filter_map(|p| p.join().unwrap())
                .collect();
            assert!(!accepted.is_empty(), "one slot was free all along");
            let mut popped: Vec<i32> = second.into_iter().collect();
            popped.extend(std::iter::from_fn(|| ring.pop()));
            popped.sort_unstable();
            accepted.sort_unstable();
            assert_eq!(popped, accepted, "each accepted value once");
            assert!(ring.is_empty());
        });
    }
}

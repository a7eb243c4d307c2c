//! The property test every delay-queue backend runs through unchanged:
//! random sequences of insert, remove (cancel) and advance, checked against
//! a reference model that only knows the contract (module doc of `timer`):
//!
//! * the entries popped at an advance are exactly those the model holds
//!   whose deadline has passed, except that one may be held back for at
//!   most the backend's stated lateness; none is popped before its deadline;
//! * among entries with equal deadlines, insertion order is kept;
//! * a cancel (a sweep that selects one entry) removes it once, and
//!   nothing after it was popped or removed;
//! * `drain` takes out exactly the live entries, and time does not move;
//! * `remove_where` takes out exactly the live entries it selects and
//!   leaves the others in order;
//! * `next_due` is never before the earliest deadline, and never later
//!   than that deadline plus its lateness;
//! * `peek_next`, where it names an entry, names the one the next pop
//!   returns, and names none in an empty queue;
//! * `len` agrees.
//!
//! To add a backend: one line in `backends!` at the bottom.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{DelayQueue, Nanos};

/// A removed entry's drop that panics in the middle of a sweep of `q`:
/// the panic goes on, and the queue is whole. `check` (a backend's
/// structural invariants) holds, the entries handed out before the panic
/// and the one that panicked are gone, the others stay, and entries
/// inserted afterwards (on the wheels, in the slab slots just emptied) pop
/// once each, with nothing else.
pub(super) fn a_panic_in_a_sweep_leaves_the_queue_whole<Q: DelayQueue<u64>>(
    mut q: Q,
    check: impl Fn(&Q),
) {
    for v in 0..100u64 {
        q.insert(0, 70_000 * (v % 20 + 1), v);
    }
    let mut handed = Vec::new();
    let swept = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        q.remove_where(&mut |v| v % 2 == 0, &mut |v| {
            handed.push(v);
            if handed.len() == 6 {
                panic!("expected: a removed entry's drop panicked");
            }
        })
    }));
    assert!(swept.is_err(), "the panic goes on");
    check(&q);
    assert_eq!(q.len(), 94, "six left, the rest stay");
    for v in 100..106u64 {
        q.insert(0, 1_000, v);
    }
    check(&q);
    let mut popped: Vec<u64> = std::iter::from_fn(|| q.pop_due(u64::MAX)).collect();
    check(&q);
    popped.sort_unstable();
    let expected: Vec<u64> = (0..106).filter(|v| !handed.contains(v)).collect();
    assert_eq!(popped, expected);
}

/// Random operations (a fixed-seed generator) on `q`, with `check` (a
/// backend's structural invariants) called after each one: the wheels'
/// structural test. The property test below checks behaviour; this one
/// reaches deadlines near the end of time, jumps of every size and sweeps.
pub(super) fn random_operations_keep_the_structure_sound<Q: DelayQueue<u64>>(
    mut q: Q,
    check: impl Fn(&Q),
) {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    // Ids never repeat: a cancel selects one entry.
    let (mut ids, mut next_id) = (Vec::new(), 0u64);
    let mut now = 0u64;
    // Pops whose entry `peek_next` named before (the test must see some).
    let mut peeks = 0;
    for _ in 0..5_000 {
        match random(10) {
            0..=3 => {
                let delay = match random(4) {
                    0 => random(100),
                    1 => random(100_000),
                    2 => random(1 << 40),
                    _ => u64::MAX - now - random(3),
                };
                q.insert(now, now + delay, next_id);
                ids.push(next_id);
                next_id += 1;
            }
            4..=5 if !ids.is_empty() => {
                // One cancel, swept alone (live, popped or swept before).
                let id = ids.swap_remove(random(ids.len() as u64) as usize);
                q.remove_where(&mut |v| *v == id, &mut drop);
            }
            6..=8 => {
                let scale = random(32);
                now += random(1 << scale);
                let next = q.next_due();
                let mut popped = 0;
                loop {
                    let peeked = q.peek_next().copied();
                    let Some(v) = q.pop_due(now) else { break };
                    if let Some(peeked) = peeked {
                        assert_eq!(peeked, v, "peek_next named another entry");
                        peeks += 1;
                    }
                    popped += 1;
                }
                if next.is_some_and(|n| n <= now) {
                    assert!(popped > 0, "next_due {next:?} but nothing at {now}");
                }
            }
            9 if random(8) == 0 => {
                // A sweep: every third value.
                let before = q.len();
                let mut swept = 0;
                let count = q.remove_where(&mut |v| v % 3 == 0, &mut |v| {
                    assert_eq!(v % 3, 0);
                    swept += 1;
                });
                assert_eq!((count, q.len()), (swept, before - swept));
            }
            _ => {
                q.next_due();
            }
        }
        check(&q);
    }
    assert!(
        peeks > 100,
        "peek_next named the popped entry only {peeks} times"
    );
}

#[derive(Clone, Debug)]
enum Op {
    /// Insert an entry due `delay` from now.
    Insert { delay: Nanos },
    /// Remove the `nth` entry inserted so far (mod their number), by a
    /// sweep that selects it alone: live, already popped, or already
    /// removed (a cancel).
    Remove { nth: usize },
    /// Move time forward and pop everything due.
    Advance { by: Nanos },
    /// Take every entry out, due or not, without moving time.
    Drain,
    /// Remove every entry whose id is `rest` modulo `modulus`, without
    /// moving time (the timer's sweep of cancelled entries).
    RemoveWhere { modulus: u64, rest: u64 },
}

/// Delays and steps on several scales, with many equal deadlines.
fn op() -> impl Strategy<Value = Op> {
    let delay = prop_oneof![
        Just(0u64),
        0u64..8,
        0u64..2_000,
        0u64..5_000_000,
        Just(1_000),
        (0u64..4).prop_map(|k| k * 1_000_000),
        Just(u64::MAX / 2),
    ];
    prop_oneof![
        4 => delay.prop_map(|delay| Op::Insert { delay }),
        2 => any::<usize>().prop_map(|nth| Op::Remove { nth }),
        3 => prop_oneof![0u64..3, 0u64..1_500, 0u64..3_000_000].prop_map(|by| Op::Advance { by }),
        1 => Just(Op::Drain),
        1 => (1u64..4, 0u64..4).prop_map(|(modulus, rest)| Op::RemoveWhere { modulus, rest }),
    ]
}

/// What the model knows of a live entry.
#[derive(Clone, Copy, Debug)]
struct Live {
    deadline: Nanos,
    /// The latest moment it may still be pending.
    latest: Nanos,
    seq: u64,
}

/// Runs `ops` on `queue` and on the model, checking after every step.
fn check<Q: DelayQueue<u64>>(mut queue: Q, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut now: Nanos = 0;
    let mut live: BTreeMap<u64, Live> = BTreeMap::new();
    let mut next_id = 0u64;
    for op in ops {
        match *op {
            Op::Insert { delay } => {
                let deadline = now.saturating_add(delay);
                let id = next_id;
                next_id += 1;
                queue.insert(now, deadline, id);
                let latest = deadline.saturating_add(queue.max_lateness(delay));
                live.insert(
                    id,
                    Live {
                        deadline,
                        latest,
                        seq: id,
                    },
                );
            }
            Op::Remove { nth } => {
                if next_id == 0 {
                    continue;
                }
                let id = (nth % next_id as usize) as u64;
                let expected = live.remove(&id).map(|_| id);
                let mut removed = None;
                let count = queue.remove_where(&mut |v| *v == id, &mut |v| removed = Some(v));
                prop_assert_eq!(count, usize::from(expected.is_some()));
                prop_assert_eq!(removed, expected, "remove {}", id);
            }
            Op::Advance { by } => {
                now = now.saturating_add(by);
                let mut popped: Vec<u64> = Vec::new();
                loop {
                    let peeked = queue.peek_next().copied();
                    let Some(id) = queue.pop_due(now) else { break };
                    if let Some(peeked) = peeked {
                        prop_assert_eq!(peeked, id, "peek_next named another entry");
                    }
                    popped.push(id);
                }
                check_popped(&popped, &mut live, now)?;
            }
            Op::Drain => {
                let mut drained = queue.drain();
                drained.sort_unstable();
                let expected: Vec<u64> = std::mem::take(&mut live).into_keys().collect();
                prop_assert_eq!(drained, expected, "drain");
            }
            Op::RemoveWhere { modulus, rest } => {
                let selected = |id: &u64| id % modulus == rest % modulus;
                let mut removed = Vec::new();
                let count = queue.remove_where(&mut |id| selected(id), &mut |id| removed.push(id));
                prop_assert_eq!(count, removed.len());
                removed.sort_unstable();
                let expected: Vec<u64> = live.keys().copied().filter(selected).collect();
                live.retain(|id, _| !selected(id));
                prop_assert_eq!(removed, expected, "remove_where");
            }
        }
        prop_assert_eq!(queue.len(), live.len());
        if let Some(earliest) = live.values().min_by_key(|l| (l.deadline, l.seq)) {
            let next = queue.next_due();
            prop_assert!(next.is_some(), "next_due is None with {} live", live.len());
            let next = next.unwrap();
            prop_assert!(
                next >= earliest.deadline,
                "next_due {} before deadline {}",
                next,
                earliest.deadline
            );
            let latest = live.values().map(|l| l.latest).min().unwrap();
            prop_assert!(
                next <= latest,
                "next_due {} after the latest allowed {}",
                next,
                latest
            );
        } else {
            prop_assert_eq!(queue.next_due(), None);
            prop_assert_eq!(queue.peek_next(), None);
        }
    }
    Ok(())
}

fn check_popped(
    popped: &[u64],
    live: &mut BTreeMap<u64, Live>,
    now: Nanos,
) -> Result<(), TestCaseError> {
    let mut seen: Vec<Live> = Vec::new();
    for &id in popped {
        let entry = live.remove(&id);
        prop_assert!(entry.is_some(), "popped {} which is not live", id);
        let entry = entry.unwrap();
        prop_assert!(
            entry.deadline <= now,
            "{} popped at {} before its deadline {}",
            id,
            now,
            entry.deadline
        );
        seen.push(entry);
    }
    // Equal deadlines come out in insertion order.
    for (i, a) in seen.iter().enumerate() {
        for b in &seen[i + 1..] {
            if a.deadline == b.deadline {
                prop_assert!(a.seq < b.seq, "equal deadlines out of insertion order");
            }
        }
    }
    // Nothing overdue stays behind.
    for (id, l) in live.iter() {
        prop_assert!(
            l.latest > now,
            "{} still pending at {}, latest allowed {}",
            id,
            now,
            l.latest
        );
    }
    Ok(())
}

/// One property test per backend, each over the same operations.
macro_rules! backends {
    ($($name:ident => $make:expr),* $(,)?) => {$(
        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
            #[test]
            fn $name(ops in proptest::collection::vec(op(), 1..400)) {
                check($make, &ops)?;
            }
        }
    )*};
}

backends! {
    heap_matches_the_model => super::heap::Heap::<u64>::default(),
    hashed_wheel_1ns_1_slot_matches_the_model => super::hashed_wheel::HashedWheel::<u64>::new(1, 1),
    hashed_wheel_1us_8_slots_matches_the_model => super::hashed_wheel::HashedWheel::<u64>::new(1_000, 8),
    hashed_wheel_default_matches_the_model => super::hashed_wheel::HashedWheel::<u64>::default(),
    hashed_wheel_7ns_64_slots_matches_the_model => super::hashed_wheel::HashedWheel::<u64>::new(7, 64),
    hierarchical_wheel_1ns_matches_the_model => super::hierarchical_wheel::HierarchicalWheel::<u64>::new(1),
    hierarchical_wheel_7ns_matches_the_model => super::hierarchical_wheel::HierarchicalWheel::<u64>::new(7),
    hierarchical_wheel_1us_matches_the_model => super::hierarchical_wheel::HierarchicalWheel::<u64>::new(1_000),
    hierarchical_wheel_1ms_matches_the_model => super::hierarchical_wheel::HierarchicalWheel::<u64>::default(),
}

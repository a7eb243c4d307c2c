//! The cost of each tick of expiry, per backend alone (no threads): a
//! million entries due uniformly over one second, popped one millisecond
//! at a time, as the timer thread would at a 1 ms tick. The median tick
//! shows the cost per popped entry; the slowest ticks show the stalls: the
//! hierarchical wheel's cascades (every 64th tick, its level-1 slot's
//! entries move to level 0 in one go), during which the timer thread hands
//! nothing over.
//!
//! ```text
//! cargo bench -p chronopool-benches --bench ticks
//! TICKS_ENTRIES=10000 cargo bench -p chronopool-benches --bench ticks
//! ```
//!
//! Prints, per backend, the median, p99 and slowest tick and the ticks
//! that took over 1 ms. Deadlines from xorshift64* (seed 42), as in the
//! workloads.

use std::time::Instant;

use chronopool::bench_internals::Backend;
use chronopool::TimerQueue;

/// Entries in the backend at the start, unless `TICKS_ENTRIES` says.
const ENTRIES: u64 = 1_000_000;
/// One tick of expiry, and the earliest deadline.
const TICK_NS: u64 = 1_000_000;
/// The deadlines span [TICK_NS, SPAN_NS).
const SPAN_NS: u64 = 1_000_000_000;

/// xorshift64*, the workloads' generator.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// The nanoseconds each tick's pops took, and how many entries it popped.
fn tick_costs(queue: TimerQueue, entries: u64) -> Vec<(u64, usize)> {
    let mut backend = Backend::new(queue);
    let mut state = 42;
    for value in 0..entries {
        let deadline = TICK_NS + (next_random(&mut state) >> 11) % (SPAN_NS - TICK_NS);
        backend.insert(0, deadline, value);
    }
    let mut ticks = Vec::new();
    let mut now = 0;
    while !backend.is_empty() {
        now += TICK_NS;
        let start = Instant::now();
        let mut popped = 0;
        while backend.pop_due(now).is_some() {
            popped += 1;
        }
        ticks.push((start.elapsed().as_nanos() as u64, popped));
    }
    ticks
}

/// Makes one kind of backend.
type MakeQueue = fn() -> TimerQueue;

fn main() {
    let entries = match std::env::var("TICKS_ENTRIES") {
        Ok(v) => v.parse().expect("TICKS_ENTRIES: a number of entries"),
        Err(_) => ENTRIES,
    };
    println!("{entries} entries due over 1 s, popped every 1 ms");
    let queues: [(&str, MakeQueue); 3] = [
        ("heap", TimerQueue::heap),
        ("hashed_wheel", TimerQueue::hashed_wheel),
        ("hierarchical_wheel", TimerQueue::hierarchical_wheel),
    ];
    for (name, queue) in queues {
        let ticks = tick_costs(queue(), entries);
        let mut sorted: Vec<u64> = ticks.iter().map(|&(ns, _)| ns).collect();
        sorted.sort_unstable();
        let us = |ns: u64| ns as f64 / 1e3;
        let slow: Vec<usize> = (0..ticks.len()).filter(|&i| ticks[i].0 > TICK_NS).collect();
        println!(
            "{name}: {} ticks, median {:.0} µs, p99 {:.0} µs, slowest {:.0} µs; ticks over 1 ms: {slow:?}",
            ticks.len(),
            us(sorted[sorted.len() / 2]),
            us(sorted[sorted.len() * 99 / 100]),
            us(sorted[sorted.len() - 1]),
        );
    }
}

//! Micro-benchmarks of the delayed work queue backends alone (no threads):
//! insert, sweep and expire-all with 10^3 … 10^7 entries pending,
//! so that the growth of each operation with the queue's size is visible.
//!
//! ```text
//! cargo bench -p chronopool-benches --bench backends
//! cargo bench -p chronopool-benches --bench backends -- 'insert/heap'
//! ```
//!
//! `BACKENDS_MAX_EXP=6` stops at 10^6 pending (10^7 needs ~3 GB and a few
//! minutes per backend).
//!
//! Deadlines are uniform in [1 ms, 10 s) after the clock (xorshift64*,
//! seed 42): the queue holds `n` entries, `insert` adds a batch of at most
//! `BATCH` on top and then pops as many, so the size stays within
//! [n, n + BATCH].

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use chronopool::bench_internals::Backend;
use chronopool::TimerQueue;
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};

/// Makes one kind of backend.
type MakeQueue = fn() -> TimerQueue;

/// The backends measured.
const QUEUES: &[(&str, MakeQueue)] = &[
    ("heap", TimerQueue::heap),
    ("hashed_wheel", TimerQueue::hashed_wheel),
    ("hierarchical_wheel", TimerQueue::hierarchical_wheel),
];

/// Operations measured per timed batch.
const BATCH: usize = 1_000;

/// Deadlines from 1 ms to 10 s.
const SPAN_LO: u64 = 1_000_000;
const SPAN_HI: u64 = 10_000_000_000;

/// xorshift64*, as in the workloads.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn deadline(&mut self) -> u64 {
        SPAN_LO + self.next() % (SPAN_HI - SPAN_LO)
    }
}

/// The pending sizes: 10^3 up to 10^`BACKENDS_MAX_EXP` (default 7).
fn sizes() -> Vec<usize> {
    let max_exp: u32 = std::env::var("BACKENDS_MAX_EXP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    (3..=max_exp).map(|e| 10usize.pow(e)).collect()
}

/// A backend holding `n` entries.
fn filled(queue: TimerQueue, n: usize, rng: &mut Rng) -> Backend {
    let mut backend = Backend::new(queue);
    for i in 0..n {
        backend.insert(0, rng.deadline(), i as u64);
    }
    backend
}

/// The time `op` takes, summed over `iters` runs, each on a fresh backend
/// holding `n` entries (filled untimed, dropped untimed).
fn timed_on_filled(
    queue: MakeQueue,
    n: usize,
    iters: u64,
    mut op: impl FnMut(&mut Backend),
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let mut backend = filled(queue(), n, &mut Rng(42));
        let t0 = Instant::now();
        op(&mut backend);
        total += t0.elapsed();
    }
    total
}

/// Fewer, longer samples for the big sizes (each setup is expensive).
fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(2));
}

/// Takes the `count` earliest entries out, moving `now` to their
/// deadlines: the steady state of a timer, where what falls due leaves as
/// new entries come.
fn pop_earliest(backend: &mut Backend, now: &mut u64, count: usize) {
    let mut left = count;
    while left > 0 {
        let Some(next) = backend.next_due() else {
            return;
        };
        *now = (*now).max(next);
        let before = left;
        while left > 0 {
            let Some(value) = backend.pop_due(*now) else {
                break;
            };
            black_box(value);
            left -= 1;
        }
        assert!(left < before, "next_due {next}, but nothing due at {now}");
    }
}

/// Insert at `n` pending: batches of `BATCH` inserts due from 1 ms to 10 s
/// after `now`, each followed (untimed) by the pops of the `BATCH`
/// earliest entries, which moves `now` to their deadlines: the size stays
/// put, as in a timer whose load is steady. (Before issue 35 the batch was
/// removed by key on a clock that stood still; the backends no longer
/// remove by key: the timer sweeps.)
fn insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("insert");
    configure(&mut group);
    group.throughput(Throughput::Elements(1));
    for &(name, queue) in QUEUES {
        for n in sizes() {
            let mut rng = Rng(42);
            let mut backend = filled(queue(), n, &mut rng);
            let mut now = 0;
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut left = iters as usize;
                    while left > 0 {
                        let batch = left.min(BATCH);
                        left -= batch;
                        let t0 = Instant::now();
                        for i in 0..batch {
                            backend.insert(now, now + rng.deadline(), i as u64);
                        }
                        total += t0.elapsed();
                        pop_earliest(&mut backend, &mut now, batch);
                    }
                    total
                })
            });
            drop(backend);
        }
    }
    group.finish();
}

/// Expire all: `n` entries, then time moves past the last deadline in
/// 1 ms steps and every entry is popped; the cost per entry.
fn expire_all(c: &mut Criterion) {
    let mut group = c.benchmark_group("expire_all");
    configure(&mut group);
    for &(name, queue) in QUEUES {
        for n in sizes() {
            group.throughput(Throughput::Elements(n as u64));
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_custom(|iters| {
                    timed_on_filled(queue, n, iters, |backend| {
                        let mut now = 0;
                        while !backend.is_empty() {
                            now += 1_000_000;
                            while let Some(v) = backend.pop_due(now) {
                                black_box(v);
                            }
                        }
                    })
                })
            });
        }
    }
    group.finish();
}

/// Sweep (`remove_where`, the timer thread's removal of cancelled tasks):
/// `n` entries, then one sweep that removes every second one (`half`: the
/// sweep the timer thread makes when half its entries are cancelled) or
/// every one (`all`: after a mass cancel); the cost per entry held.
fn sweep(c: &mut Criterion) {
    let mut group = c.benchmark_group("sweep");
    configure(&mut group);
    for &(name, queue) in QUEUES {
        for n in sizes() {
            group.throughput(Throughput::Elements(n as u64));
            for (part, modulus) in [("half", 2), ("all", 1)] {
                let id = BenchmarkId::new(format!("{name}/{part}"), n);
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        timed_on_filled(queue, n, iters, |backend| {
                            black_box(backend.remove_where(|v| v % modulus == 0));
                        })
                    })
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, insert, sweep, expire_all);
criterion_main!(benches);

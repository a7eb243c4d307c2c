//! Micro-benchmarks of the executor's own paths (criterion):
//!
//! * `round_trip`: submit one task from outside and join it (the latency of
//!   one hand-off to an idle pool and back);
//! * `spawn/outside`: a batch of `execute`s from a thread outside the pool,
//!   until all ran (throughput of the injector path);
//! * `spawn/outside_large`: the same with closures of 40 bytes, stored out
//!   of the job's inline word (in a recycled block);
//! * `spawn/inside`: the same batch submitted from inside a task, into the
//!   worker's own deque (`chronopool::execute`);
//! * `timers/schedule`: a batch of `schedule`s from a thread outside the
//!   pool, due in an hour (the caller's side of an insert, while the timer
//!   thread places the entries), each then cancelled untimed;
//! * `timers/cancel`: the same batch scheduled untimed, then cancelled
//!   through its handles (and the handles dropped), timed.
//! * `timers/fire`: a batch of one-shot tasks due at the same instant of a
//!   `ManualClock`, scheduled untimed; timed: `advance` to that instant,
//!   which hands them all to the two workers (the timer's hand-over path),
//!   runs them and returns when the pool is quiet (per task: the fire path
//!   without the timer thread's wait).
//! * `timers/rearm`: a batch of fixed-rate tasks with one period and one
//!   phase on a `ManualClock`; timed: `advance` by one period, in which each
//!   runs once and re-arms (per run: hand-over, run, the trigger, the
//!   re-arm through the command queue, its placement in the heap).
//!
//! ```text
//! cargo bench -p chronopool-benches --bench executor
//! ```

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronopool::{ManualClock, ScheduledExecutor};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Tasks per measured batch in the spawn benchmarks.
const BATCH: u64 = 10_000;

fn pool() -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .expect("start the pool")
}

/// Waits (spinning, then yielding) until `done` reaches `target`.
fn wait_for(done: &AtomicU64, target: u64) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::Acquire) < target {
        assert!(Instant::now() < give_up, "tasks did not finish within 60 s");
        std::thread::yield_now();
    }
}

fn round_trip(c: &mut Criterion) {
    let pool = pool();
    c.bench_function("round_trip", |b| {
        b.iter(|| pool.submit(|| 1u64).unwrap().join().unwrap())
    });
}

fn spawn(c: &mut Criterion) {
    let mut group = c.benchmark_group("spawn");
    group.throughput(Throughput::Elements(BATCH));
    let pool = pool();
    let done = Arc::new(AtomicU64::new(0));
    group.bench_function("outside", |b| {
        b.iter(|| {
            let start = done.load(Ordering::Acquire);
            for _ in 0..BATCH {
                let done = Arc::clone(&done);
                pool.execute(move || {
                    done.fetch_add(1, Ordering::Release);
                })
                .unwrap();
            }
            wait_for(&done, start + BATCH);
        })
    });
    group.bench_function("outside_large", |b| {
        b.iter(|| {
            let start = done.load(Ordering::Acquire);
            for i in 0..BATCH {
                let (done, payload) = (Arc::clone(&done), [i; 4]);
                pool.execute(move || {
                    done.fetch_add(1 + payload[3] - i, Ordering::Release);
                })
                .unwrap();
            }
            wait_for(&done, start + BATCH);
        })
    });
    group.bench_function("inside", |b| {
        b.iter(|| {
            let start = done.load(Ordering::Acquire);
            let inner = Arc::clone(&done);
            pool.execute(move || {
                for _ in 0..BATCH {
                    let done = Arc::clone(&inner);
                    chronopool::execute(move || {
                        done.fetch_add(1, Ordering::Release);
                    })
                    .unwrap();
                }
            })
            .unwrap();
            wait_for(&done, start + BATCH);
        })
    });
    group.finish();
}

/// Far enough that no timer of `timers` ever fires.
const HOUR: Duration = Duration::from_secs(3600);

fn timers(c: &mut Criterion) {
    let mut group = c.benchmark_group("timers");
    group.throughput(Throughput::Elements(BATCH));
    let pool = pool();
    let mut handles = Vec::with_capacity(BATCH as usize);
    let schedule_batch = |handles: &mut Vec<_>| {
        for _ in 0..BATCH {
            handles.push(pool.schedule(|| (), HOUR).unwrap());
        }
    };
    group.bench_function("schedule", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                schedule_batch(&mut handles);
                total += t0.elapsed();
                handles.drain(..).for_each(|h| assert!(h.cancel()));
            }
            total
        })
    });
    group.bench_function("cancel", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                schedule_batch(&mut handles);
                let t0 = Instant::now();
                handles.drain(..).for_each(|h| assert!(h.cancel()));
                total += t0.elapsed();
            }
            total
        })
    });
    group.finish();
}

/// A pool of two workers on a manual clock of its own.
fn manual_pool() -> (ScheduledExecutor, ManualClock) {
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()
        .expect("start the pool");
    (pool, clock)
}

fn manual_timers(c: &mut Criterion) {
    let mut group = c.benchmark_group("timers");
    group.throughput(Throughput::Elements(BATCH));
    let (pool, clock) = manual_pool();
    let ran = Arc::new(AtomicU64::new(0));
    group.bench_function("fire", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let before = ran.load(Ordering::Relaxed);
                for _ in 0..BATCH {
                    let ran = ran.clone();
                    let _detached = pool.schedule(
                        move || {
                            ran.fetch_add(1, Ordering::Relaxed);
                        },
                        Duration::from_millis(1),
                    );
                }
                let t0 = Instant::now();
                clock.advance(Duration::from_millis(1));
                total += t0.elapsed();
                assert_eq!(ran.load(Ordering::Relaxed), before + BATCH);
            }
            total
        })
    });
    let (pool, clock) = manual_pool();
    const PERIOD: Duration = Duration::from_millis(10);
    let runs = Arc::new(AtomicU64::new(0));
    // All in one phase: `advance` stops at one deadline per period (a
    // deadline of its own for each task would time the manual clock's
    // stops, not the re-arms).
    let tasks: Vec<_> = (0..BATCH)
        .map(|_| {
            let runs = runs.clone();
            pool.schedule_at_fixed_rate(
                move || {
                    runs.fetch_add(1, Ordering::Relaxed);
                },
                PERIOD,
                PERIOD,
            )
            .expect("schedule")
        })
        .collect();
    clock.advance(PERIOD);
    group.bench_function("rearm", |b| {
        b.iter_custom(|iters| {
            let before = runs.load(Ordering::Relaxed);
            let t0 = Instant::now();
            for _ in 0..iters {
                clock.advance(PERIOD);
            }
            let took = t0.elapsed();
            assert_eq!(runs.load(Ordering::Relaxed), before + iters * BATCH);
            took
        })
    });
    for task in tasks {
        task.cancel();
    }
    group.finish();
}

criterion_group!(benches, round_trip, spawn, timers, manual_timers);
criterion_main!(benches);

//! Stress tests (issue 5): several threads schedule, cancel and let fire
//! many tasks on every delayed-queue backend, with exact accounting at the
//! end. Bounded in time (not loom): each test runs for at most a few
//! seconds in a release build and a fraction of that in a debug build,
//! where the counts are smaller (`scale`).
//!
//! The randomness is a small xorshift generator seeded from the clock; the
//! seed is printed (run with `--nocapture` to see it) and is in every
//! failure message, and `STRESS_SEED=<n>` replays it (as far as the thread
//! interleaving allows).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use chronopool::{
    JoinTimeoutError, MissedRuns, PeriodicHandle, ScheduledExecutor, ScheduledHandle,
    SubmitErrorKind, TaskError, TaskHandle, TimerQueue,
};
use common::{eventually, pool, DropCounter, PATIENCE};

/// The release figure in an optimised build, the debug figure otherwise
/// (`cargo test`, the README's command, builds without optimisations).
const fn scale(release: usize, debug: usize) -> usize {
    if cfg!(debug_assertions) {
        debug
    } else {
        release
    }
}

/// A xorshift64 generator: fast, and good enough to pick delays and plans.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // Spread small seeds (seed + thread index) over the state; never 0.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform enough in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn micros_below(&mut self, n: u64) -> Duration {
        Duration::from_micros(self.below(n))
    }
}

/// The seed of this test: `STRESS_SEED` if set, else from the clock.
fn seed(test: &str) -> u64 {
    let seed = std::env::var("STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("{test}: STRESS_SEED={seed}");
    seed
}

// ---------------------------------------------------------------------------
// 1. schedule / cancel / fire

/// When a test thread cancels one of its tasks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Never: it must run.
    Keep,
    /// Right after scheduling it (usually before its deadline).
    Now,
    /// After the whole batch was scheduled and a short random sleep.
    AfterSleep,
    /// Just before joining it, after joining the tasks before it (usually
    /// after its deadline, often racing it).
    Late,
}

/// One task of a batch: its id, handle, plan, and whether a cancel of it
/// returned true.
struct Probe {
    id: usize,
    handle: ScheduledHandle<usize>,
    plan: Plan,
    cancelled: bool,
}

/// Four threads each schedule their share of one-shot tasks (about
/// 1,000,000 in all in a release build, 50,000 in a debug build), in
/// batches, with random delays of 0 to 20 ms: a quarter of them zero, some
/// equal (a few fixed delays, and a deadline shared by the batch through
/// `schedule_at`, which is in the past for the batch's later tasks). About
/// half are cancelled: at once, after a short sleep, or just before the
/// join (racing the deadline). Asserted, per task: it ran exactly once
/// XOR a cancel of it returned true (never both, never neither, never
/// twice: checked again after the pool terminated); a second cancel
/// returns false; `is_cancelled` and the join agree with the cancel
/// (`Ok(id)` or `Err(Cancelled)`; no join waits longer than `PATIENCE`,
/// so no task is lost); and at the end the pool counted exactly the runs
/// that happened, and holds nothing.
fn schedule_cancel_fire_accounting(queue: TimerQueue) {
    const THREADS: usize = 4;
    const TASKS: usize = scale(1_000_000, 50_000);
    const BATCH: usize = scale(5_000, 2_500);
    const PER_THREAD: usize = TASKS / THREADS;
    let seed = seed("schedule_cancel_fire_accounting");
    let pool = pool(queue, 2);
    let runs: Arc<[AtomicU8]> = (0..TASKS).map(|_| AtomicU8::new(0)).collect();
    let cancelled: Vec<AtomicBool> = (0..TASKS).map(|_| AtomicBool::new(false)).collect();

    thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, runs, cancelled) = (&pool, &runs, &cancelled);
            s.spawn(move || {
                let mut rng = Rng::new(seed.wrapping_add(t as u64));
                let ids = t * PER_THREAD..(t + 1) * PER_THREAD;
                let mut next = ids.start;
                while next < ids.end {
                    let batch = next..(next + BATCH).min(ids.end);
                    next = batch.end;
                    let shared_deadline = Instant::now() + Duration::from_millis(3);
                    let mut probes = Vec::with_capacity(batch.len());
                    for id in batch {
                        let r = runs.clone();
                        let task = move || {
                            r[id].fetch_add(1, SeqCst);
                            id
                        };
                        let handle = match rng.below(8) {
                            0 | 1 => pool.schedule(task, Duration::ZERO),
                            2 => {
                                let equal = [1, 5, 10][rng.below(3) as usize];
                                pool.schedule(task, Duration::from_millis(equal))
                            }
                            3 => pool.schedule_at(task, shared_deadline),
                            _ => pool.schedule(task, rng.micros_below(20_000)),
                        }
                        .unwrap_or_else(|_| panic!("seed {seed}: task {id} refused"));
                        let plan = match rng.below(6) {
                            0 => Plan::Now,
                            1 => Plan::AfterSleep,
                            2 => Plan::Late,
                            _ => Plan::Keep,
                        };
                        let cancelled = plan == Plan::Now && handle.cancel();
                        probes.push(Probe {
                            id,
                            handle,
                            plan,
                            cancelled,
                        });
                    }
                    thread::sleep(rng.micros_below(3_000));
                    for p in probes.iter_mut().filter(|p| p.plan == Plan::AfterSleep) {
                        p.cancelled = p.handle.cancel();
                    }
                    for mut p in probes {
                        let id = p.id;
                        if p.plan == Plan::Late {
                            p.cancelled = p.handle.cancel();
                        }
                        if p.plan != Plan::Keep {
                            assert!(
                                !p.handle.cancel(),
                                "seed {seed}: task {id}: a second cancel won"
                            );
                        }
                        assert_eq!(
                            p.handle.is_cancelled(),
                            p.cancelled,
                            "seed {seed}: task {id}: is_cancelled disagrees with cancel"
                        );
                        cancelled[id].store(p.cancelled, SeqCst);
                        match (p.cancelled, p.handle.join_timeout(PATIENCE)) {
                            (false, Ok(out)) => {
                                assert_eq!(out, id, "seed {seed}: task {id}: wrong output");
                                assert_eq!(runs[id].load(SeqCst), 1, "seed {seed}: task {id}");
                            }
                            (true, Err(JoinTimeoutError::Failed(TaskError::Cancelled))) => {
                                assert_eq!(
                                    runs[id].load(SeqCst),
                                    0,
                                    "seed {seed}: task {id} ran although its cancel returned true"
                                );
                            }
                            (_, Err(JoinTimeoutError::TimedOut(_))) => panic!(
                                "seed {seed}: task {id} (cancel returned {}) neither ran nor \
                                 was cancelled within {PATIENCE:?}: lost",
                                p.cancelled
                            ),
                            (c, other) => panic!(
                                "seed {seed}: task {id}: cancel returned {c}, join gave {other:?}"
                            ),
                        }
                    }
                }
            });
        }
    });

    pool.shutdown();
    assert!(pool.await_termination(PATIENCE), "seed {seed}");
    let mut ran = 0u64;
    for (id, (r, c)) in runs.iter().zip(&cancelled).enumerate() {
        let (r, c) = (r.load(SeqCst), c.load(SeqCst));
        assert_eq!(
            u8::from(!c),
            r,
            "seed {seed}: task {id}: cancel returned {c}, ran {r} times"
        );
        ran += u64::from(r);
    }
    let m = pool.metrics();
    assert_eq!(m.completed_tasks, ran, "seed {seed}: {m:?}");
    assert_eq!(m.panicked_tasks, 0, "seed {seed}: {m:?}");
    assert_eq!(
        (m.queued_tasks, m.scheduled_tasks),
        (0, 0),
        "seed {seed}: {m:?}"
    );
    eprintln!("{TASKS} tasks: {ran} ran, {} cancelled", TASKS as u64 - ran);
}

// ---------------------------------------------------------------------------
// 2. periodic tasks never overlap themselves

/// What one periodic task's runs record.
#[derive(Default)]
struct Beat {
    /// Set for the duration of a run.
    in_run: AtomicBool,
    /// Runs started, and ended.
    starts: AtomicUsize,
    ends: AtomicUsize,
    /// Cancels of it that returned true.
    cancel_wins: AtomicUsize,
    /// `starts` just after a cancel returned true.
    starts_at_cancel: AtomicUsize,
    /// Drops of its closure.
    drops: Arc<AtomicUsize>,
}

/// Sixty-four (48 in a debug build) periodic tasks with periods of 100 µs
/// to 1 ms on two workers, far more than they can keep up with: fixed-rate
/// ones under each `MissedRuns` policy (the `Burst` ones sometimes sleep
/// for two to three periods, to force catch-up runs) and fixed-delay ones;
/// two other threads each cancel every task, at random times over about
/// 1.5 s (0.8 s in debug). Asserted: no run ever started while another run
/// of the same task was in progress (an in-run flag, seen through a shared
/// `overlap_seen` rather than a panic in the task), and each run saw the
/// state the previous one left in the closure; exactly one of the two
/// cancels of each task returned true; its join then says `Cancelled`;
/// once joined, no run is in progress and at most one run started after
/// the winning cancel returned (the one already claimed, not yet in its
/// closure), none starts later (checked again after a pause of many
/// periods), and its closure was dropped exactly once.
fn periodic_tasks_never_overlap_and_stop_when_cancelled(queue: TimerQueue) {
    const TASKS: usize = scale(64, 48);
    let window = Duration::from_millis(scale(1_500, 800) as u64);
    let seed = seed("periodic_tasks_never_overlap_and_stop_when_cancelled");
    let mut rng = Rng::new(seed);
    let pool = pool(queue, 2);
    let overlap_seen = Arc::new(AtomicBool::new(false));
    let state_broken = Arc::new(AtomicBool::new(false));
    let beats: Vec<Arc<Beat>> = (0..TASKS).map(|_| Arc::default()).collect();

    let handles: Vec<PeriodicHandle> = beats
        .iter()
        .enumerate()
        .map(|(i, beat)| {
            let period = Duration::from_micros(100 + rng.below(901));
            let initial = rng.micros_below(2_000);
            let burst = i % 4 == 0;
            let (beat, overlap, broken) =
                (beat.clone(), overlap_seen.clone(), state_broken.clone());
            let mut own_runs = 0usize; // the closure's own state, run to run
            let mut body_rng = Rng::new(seed ^ ((i as u64 + 1) << 32));
            let guard = DropCounter(beat.drops.clone());
            let body = move || {
                let _keep = &guard;
                if beat.in_run.swap(true, SeqCst) {
                    overlap.store(true, SeqCst);
                }
                let started_before = beat.starts.fetch_add(1, SeqCst);
                own_runs += 1;
                if own_runs != started_before + 1 {
                    broken.store(true, SeqCst);
                }
                let work = if burst && body_rng.below(8) == 0 {
                    period * (2 + body_rng.below(2) as u32)
                } else {
                    body_rng.micros_below(40)
                };
                if work >= Duration::from_micros(100) {
                    thread::sleep(work);
                } else {
                    let until = Instant::now() + work;
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
                beat.ends.fetch_add(1, SeqCst);
                beat.in_run.store(false, SeqCst);
            };
            match i % 4 {
                0 => pool.schedule_at_fixed_rate_with(body, initial, period, MissedRuns::Burst),
                1 => pool.schedule_at_fixed_rate_with(body, initial, period, MissedRuns::Skip),
                2 => pool.schedule_at_fixed_rate_with(body, initial, period, MissedRuns::Delay),
                _ => pool.schedule_with_fixed_delay(body, initial, period),
            }
            .unwrap()
        })
        .collect();

    thread::scope(|s| {
        for c in 0..2u64 {
            let (handles, beats) = (&handles, &beats);
            s.spawn(move || {
                let mut rng = Rng::new(seed.wrapping_add(1000 + c));
                let mut order: Vec<usize> = (0..TASKS).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.below(i as u64 + 1) as usize);
                }
                let mean_gap = window.as_micros() as u64 / TASKS as u64;
                for i in order {
                    thread::sleep(rng.micros_below(2 * mean_gap));
                    if handles[i].cancel() {
                        let beat = &beats[i];
                        beat.starts_at_cancel
                            .store(beat.starts.load(SeqCst), SeqCst);
                        beat.cancel_wins.fetch_add(1, SeqCst);
                    }
                }
            });
        }
    });

    let mut after_join = Vec::with_capacity(TASKS);
    for (i, handle) in handles.into_iter().enumerate() {
        let beat = &beats[i];
        assert_eq!(
            beat.cancel_wins.load(SeqCst),
            1,
            "seed {seed}: task {i}: cancels that returned true"
        );
        match handle.join_timeout(PATIENCE) {
            Err(JoinTimeoutError::Failed(TaskError::Cancelled)) => {}
            other => panic!("seed {seed}: task {i}: join gave {other:?}"),
        }
        let (starts, ends) = (beat.starts.load(SeqCst), beat.ends.load(SeqCst));
        assert_eq!(
            starts, ends,
            "seed {seed}: task {i}: a run is still in progress after the join"
        );
        assert_eq!(
            beat.drops.load(SeqCst),
            1,
            "seed {seed}: task {i}: closure drops after the join"
        );
        let at_cancel = beat.starts_at_cancel.load(SeqCst);
        assert!(
            starts <= at_cancel + 1,
            "seed {seed}: task {i}: {at_cancel} runs had started at the cancel, {starts} at the join"
        );
        after_join.push(starts);
    }
    thread::sleep(Duration::from_millis(20));
    for (i, beat) in beats.iter().enumerate() {
        assert_eq!(
            beat.starts.load(SeqCst),
            after_join[i],
            "seed {seed}: task {i} ran after its cancel and join"
        );
    }
    assert!(
        !overlap_seen.load(SeqCst),
        "seed {seed}: a periodic run overlapped another run of its task"
    );
    assert!(
        !state_broken.load(SeqCst),
        "seed {seed}: a run did not see the previous run's state"
    );
    let total: usize = after_join.iter().sum();
    eprintln!("{TASKS} periodic tasks: {total} runs");
    assert!(total > 0, "seed {seed}: nothing ran");
    let m = pool.metrics();
    assert_eq!(m.panicked_tasks, 0, "seed {seed}: {m:?}");
    assert!(
        eventually(|| pool.metrics().scheduled_tasks == 0),
        "seed {seed}: the timer still holds cancelled tasks: {:?}",
        pool.metrics()
    );
}

// ---------------------------------------------------------------------------
// 3. panics do not kill workers

/// 100,000 tasks (15,000 in a debug build) on two workers, a mix of kinds:
/// immediate (`submit`, `execute`), delayed (`schedule`) and periodic
/// (fixed rate, panicking on their 1st to 4th run); half of each kind
/// panics (with a message starting with "expected", kept quiet), half does
/// not; 40 well-behaved periodic tasks run throughout. Asserted: each
/// panicking handle reports `TaskError::Panicked` with the task's message;
/// a periodic task that panics on its k-th run ran exactly k times; every
/// normal task ran (its join gives its value; every `execute` counted);
/// the well-behaved periodic tasks keep running after all the panics; the
/// `on_panic` hook and `metrics().panicked_tasks` saw every panic exactly
/// once; the worker count is unchanged (`metrics`), no worker thread
/// stopped, and both workers are still alive (two tasks that can only
/// finish together, each waiting for the other, do finish).
fn panics_do_not_kill_workers(queue: TimerQueue) {
    const TASKS: usize = scale(100_000, 15_000);
    const WORKERS: usize = 2;
    common::quiet_expected_panics();
    let seed = seed("panics_do_not_kill_workers");
    let mut rng = Rng::new(seed);
    let hook_seen = Arc::new(AtomicUsize::new(0));
    let (started, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (h, st, sp) = (hook_seen.clone(), started.clone(), stopped.clone());
    let pool = ScheduledExecutor::builder()
        .worker_threads(WORKERS)
        .timer_queue(queue)
        .on_panic(move |p| {
            assert!(
                p.message().is_some_and(|m| m.starts_with("expected")),
                "{p}"
            );
            h.fetch_add(1, SeqCst);
        })
        .on_thread_start(move || {
            st.fetch_add(1, SeqCst);
        })
        .on_thread_stop(move || {
            sp.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    assert!(eventually(|| started.load(SeqCst) == WORKERS));

    // Well-behaved periodic tasks, running throughout.
    let steady: Vec<(Arc<AtomicUsize>, PeriodicHandle)> = (0..40)
        .map(|_| {
            let runs = Arc::new(AtomicUsize::new(0));
            let r = runs.clone();
            let period = Duration::from_micros(200 + rng.below(800));
            let h = pool
                .schedule_with_fixed_delay(
                    move || {
                        r.fetch_add(1, SeqCst);
                    },
                    Duration::ZERO,
                    period,
                )
                .unwrap();
            (runs, h)
        })
        .collect();

    let executed = Arc::new(AtomicUsize::new(0));
    let mut expected_panics = 0u64;
    let mut executes = 0usize;
    let mut panicking_now: Vec<(usize, TaskHandle<usize>)> = Vec::new();
    let mut panicking_later: Vec<(usize, ScheduledHandle<usize>)> = Vec::new();
    let mut normal_now: Vec<(usize, TaskHandle<usize>)> = Vec::new();
    let mut normal_later: Vec<(usize, ScheduledHandle<usize>)> = Vec::new();
    // (task, k, its run count, its handle): it panics on its k-th run.
    let mut periodic: Vec<(usize, usize, Arc<AtomicUsize>, PeriodicHandle)> = Vec::new();
    for i in 0..TASKS {
        let delay = rng.micros_below(5_000);
        match i % 8 {
            0 => panicking_now.push((
                i,
                pool.submit(move || -> usize { panic!("expected: task {i}") })
                    .unwrap(),
            )),
            1 => pool.execute(move || panic!("expected: task {i}")).unwrap(),
            2 => panicking_later.push((
                i,
                pool.schedule(move || -> usize { panic!("expected: task {i}") }, delay)
                    .unwrap(),
            )),
            3 => {
                let k = 1 + rng.below(4) as usize;
                let runs = Arc::new(AtomicUsize::new(0));
                let r = runs.clone();
                let period = Duration::from_micros(100 + rng.below(900));
                let h = pool
                    .schedule_at_fixed_rate(
                        move || {
                            if r.fetch_add(1, SeqCst) + 1 == k {
                                panic!("expected: task {i} run {k}");
                            }
                        },
                        delay,
                        period,
                    )
                    .unwrap();
                periodic.push((i, k, runs, h));
            }
            4 => normal_now.push((i, pool.submit(move || i).unwrap())),
            5 => {
                let e = executed.clone();
                pool.execute(move || {
                    e.fetch_add(1, SeqCst);
                })
                .unwrap();
                executes += 1;
            }
            6 => normal_later.push((i, pool.schedule(move || i, delay).unwrap())),
            _ => {
                // Half of them at an instant already past.
                let now = Instant::now();
                let at = if rng.below(2) == 0 {
                    now + delay
                } else {
                    now.checked_sub(delay).unwrap_or(now)
                };
                normal_later.push((i, pool.schedule_at(move || i, at).unwrap()));
            }
        }
        if i % 8 < 4 {
            expected_panics += 1;
        }
    }

    for (i, h) in panicking_now {
        assert_panicked(
            settle(h.join_timeout(PATIENCE), i, seed),
            &format!("expected: task {i}"),
            seed,
        );
    }
    for (i, h) in panicking_later {
        assert_panicked(
            settle(h.join_timeout(PATIENCE), i, seed),
            &format!("expected: task {i}"),
            seed,
        );
    }
    let mut periodic_runs = 0;
    let mut ended_periodic = Vec::with_capacity(periodic.len());
    for (i, k, runs, h) in periodic {
        let joined = settle(h.join_timeout(PATIENCE), i, seed);
        assert_panicked(joined, &format!("expected: task {i} run {k}"), seed);
        assert_eq!(
            runs.load(SeqCst),
            k,
            "seed {seed}: task {i} ran on after its panic"
        );
        periodic_runs += k;
        ended_periodic.push((i, k, runs));
    }
    for (i, h) in normal_now {
        assert_eq!(
            settle(h.join_timeout(PATIENCE), i, seed).ok(),
            Some(i),
            "seed {seed}: task {i}"
        );
    }
    for (i, h) in normal_later {
        assert_eq!(
            settle(h.join_timeout(PATIENCE), i, seed).ok(),
            Some(i),
            "seed {seed}: task {i}"
        );
    }
    assert!(
        eventually(|| executed.load(SeqCst) == executes),
        "seed {seed}: {} of {executes} executed tasks ran",
        executed.load(SeqCst)
    );

    // The well-behaved periodic tasks still run after all those panics.
    let before: Vec<usize> = steady.iter().map(|(runs, _)| runs.load(SeqCst)).collect();
    assert!(
        eventually(|| steady
            .iter()
            .zip(&before)
            .all(|((runs, _), b)| runs.load(SeqCst) >= b + 2)),
        "seed {seed}: periodic tasks stopped running"
    );
    for (i, (_, h)) in steady.iter().enumerate() {
        assert!(h.cancel(), "seed {seed}: steady task {i} had ended");
    }

    // Both workers are alive: two tasks that finish only together do.
    assert_eq!(pool.metrics().worker_threads, WORKERS, "seed {seed}");
    assert_eq!(
        started.load(SeqCst),
        WORKERS,
        "seed {seed}: a worker was restarted"
    );
    assert_eq!(
        stopped.load(SeqCst),
        0,
        "seed {seed}: a worker thread stopped"
    );
    let arrived = Arc::new(AtomicUsize::new(0));
    let meet: Vec<_> = (0..WORKERS)
        .map(|_| {
            let a = arrived.clone();
            pool.submit(move || {
                a.fetch_add(1, SeqCst);
                let deadline = Instant::now() + PATIENCE;
                while a.load(SeqCst) < WORKERS {
                    if Instant::now() > deadline {
                        return false;
                    }
                    thread::yield_now();
                }
                true
            })
            .unwrap()
        })
        .collect();
    for h in meet {
        assert_eq!(
            settle(h.join_timeout(2 * PATIENCE), 0, seed).ok(),
            Some(true),
            "seed {seed}: the workers could not run two tasks at once: one is gone"
        );
    }

    pool.shutdown();
    assert!(pool.await_termination(PATIENCE), "seed {seed}");
    assert_eq!(stopped.load(SeqCst), WORKERS, "seed {seed}");
    let steady_runs: usize = steady.iter().map(|(runs, _)| runs.load(SeqCst)).sum();
    for (_, h) in steady {
        assert!(matches!(
            settle(h.join_timeout(PATIENCE), 0, seed),
            Err(TaskError::Cancelled)
        ));
    }
    for (i, k, runs) in &ended_periodic {
        assert_eq!(
            runs.load(SeqCst),
            *k,
            "seed {seed}: task {i} ran on after its panic"
        );
    }
    let m = pool.metrics();
    assert_eq!(m.worker_threads, WORKERS, "seed {seed}");
    assert_eq!(m.panicked_tasks, expected_panics, "seed {seed}: {m:?}");
    assert_eq!(
        hook_seen.load(SeqCst) as u64,
        expected_panics,
        "seed {seed}"
    );
    let one_shots = TASKS - ended_periodic.len();
    assert_eq!(
        m.completed_tasks,
        (one_shots + periodic_runs + steady_runs + WORKERS) as u64,
        "seed {seed}: {m:?}"
    );
}

/// The result of a join with a time-out; a time-out fails the test (the
/// task was lost).
fn settle<T, H>(
    joined: Result<T, JoinTimeoutError<H>>,
    task: usize,
    seed: u64,
) -> Result<T, TaskError> {
    match joined {
        Ok(value) => Ok(value),
        Err(JoinTimeoutError::Failed(e)) => Err(e),
        Err(JoinTimeoutError::TimedOut(_)) => {
            panic!("seed {seed}: task {task} did not finish within {PATIENCE:?}: lost")
        }
    }
}

/// `joined` is the panic with `message`. (The failure messages here start
/// with "seed": a message starting with "expected" would be silenced.)
fn assert_panicked<T: std::fmt::Debug>(joined: Result<T, TaskError>, message: &str, seed: u64) {
    match joined {
        Err(TaskError::Panicked(p)) => assert_eq!(p.message(), Some(message), "seed {seed}"),
        other => panic!("seed {seed}: {message:?}: no panic but {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// 4. shutdown_now under load

/// Per task id: its runs, the drops of its closure, whether its submission
/// was accepted; and the next id to hand out.
struct Ledger {
    runs: Vec<AtomicU8>,
    drops: Vec<AtomicU8>,
    accepted: Vec<AtomicBool>,
    next: AtomicUsize,
}

impl Ledger {
    fn new(capacity: usize) -> Self {
        Ledger {
            runs: (0..capacity).map(|_| AtomicU8::new(0)).collect(),
            drops: (0..capacity).map(|_| AtomicU8::new(0)).collect(),
            accepted: (0..capacity).map(|_| AtomicBool::new(false)).collect(),
            next: AtomicUsize::new(0),
        }
    }
}

/// What a task closure captures: running it counts a run of its id,
/// dropping it (run or not) a drop.
struct Ticket {
    ledger: Arc<Ledger>,
    id: usize,
}

impl Ticket {
    fn punch(&self) -> usize {
        self.ledger.runs[self.id].fetch_add(1, SeqCst);
        self.id
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.ledger.drops[self.id].fetch_add(1, SeqCst);
    }
}

/// An accepted submission, with its handle if it has one.
enum Accepted {
    Now(usize, TaskHandle<usize>),
    Later(usize, ScheduledHandle<usize>),
    Detached,
}

/// A refused submission gave its job back, unrun and not yet dropped.
fn check_refused<F>(ledger: &Ledger, id: usize, refused: chronopool::SubmitError<F>) {
    assert_eq!(refused.kind(), SubmitErrorKind::Shutdown, "task {id}");
    let job = refused.into_inner();
    assert_eq!(
        ledger.drops[id].load(SeqCst),
        0,
        "task {id}: the refused job was dropped"
    );
    drop(job);
    assert_eq!(
        ledger.drops[id].load(SeqCst),
        1,
        "task {id}: into_inner gave another job"
    );
    assert_eq!(
        ledger.runs[id].load(SeqCst),
        0,
        "task {id}: a refused job ran"
    );
}

/// Submits tasks of every kind (immediate and delayed) until the pool
/// refuses one or the ledger is full; returns the accepted ones.
fn submit_until_refused(
    pool: &ScheduledExecutor,
    ledger: &Arc<Ledger>,
    mut rng: Rng,
) -> Vec<Accepted> {
    let mut accepted = Vec::new();
    loop {
        let id = ledger.next.fetch_add(1, SeqCst);
        if id >= ledger.runs.len() {
            return accepted;
        }
        let ticket = Ticket {
            ledger: ledger.clone(),
            id,
        };
        let task = move || ticket.punch();
        let outcome = match rng.below(5) {
            0 => pool
                .submit(task)
                .map(|h| Accepted::Now(id, h))
                .map_err(|e| check_refused(ledger, id, e)),
            1 => pool
                .execute(move || {
                    task();
                })
                .map(|()| Accepted::Detached)
                .map_err(|e| check_refused(ledger, id, e)),
            2 => pool
                .schedule(task, Duration::ZERO)
                .map(|h| Accepted::Later(id, h))
                .map_err(|e| check_refused(ledger, id, e)),
            3 => pool
                .schedule(task, rng.micros_below(20_000))
                .map(|h| Accepted::Later(id, h))
                .map_err(|e| check_refused(ledger, id, e)),
            _ => pool
                .schedule_at(task, Instant::now() + rng.micros_below(2_000))
                .map(|h| Accepted::Later(id, h))
                .map_err(|e| check_refused(ledger, id, e)),
        };
        match outcome {
            Ok(a) => {
                ledger.accepted[id].store(true, SeqCst);
                accepted.push(a);
            }
            Err(()) => return accepted,
        }
    }
}

/// Rounds of: three threads submit tasks (`submit`, `execute`, `schedule`
/// with no delay and with delays up to 20 ms, `schedule_at` up to 2 ms
/// ahead) as fast as they can
/// while the main thread calls `shutdown_now` at a point of their run that
/// moves from round to round (up to 300,000 ids per round, 8 rounds;
/// 100,000 and 6 rounds in a debug build). Asserted, per round: every refused
/// submission gave its job back through `into_inner`, unrun; after
/// `await_termination`, the runs on the workers plus the tasks
/// `shutdown_now` returned equal the accepted submissions exactly, and
/// `metrics` counted those runs; of the returned tasks, the half run here
/// ran and the half dropped did not; no task ran twice, no refused task
/// ran, every closure was dropped exactly once; each handle says `Ok(id)`
/// if its task ran, `Cancelled` if not (no join times out).
fn shutdown_now_accounts_for_every_accepted_task(queue: TimerQueue) {
    const ROUNDS: usize = scale(8, 6);
    const CAP: usize = scale(300_000, 100_000);
    const SUBMITTERS: usize = 3;
    let seed = seed("shutdown_now_accounts_for_every_accepted_task");
    let mut rng = Rng::new(seed);
    for round in 0..ROUNDS {
        let ledger = Arc::new(Ledger::new(CAP));
        let pool = pool(queue, 2);
        let (returned, handles) = thread::scope(|s| {
            let submitters: Vec<_> = (0..SUBMITTERS)
                .map(|t| {
                    let (pool, ledger) = (&pool, &ledger);
                    let rng = Rng::new(seed ^ (((round * SUBMITTERS + t) as u64 + 1) << 20));
                    s.spawn(move || submit_until_refused(pool, ledger, rng))
                })
                .collect();
            let threshold = CAP * (round + 1) / (ROUNDS + 2);
            assert!(
                eventually(|| ledger.next.load(SeqCst) >= threshold),
                "seed {seed}, round {round}: the submitters did not get going"
            );
            thread::sleep(rng.micros_below(500));
            let returned = pool.shutdown_now();
            let handles: Vec<Accepted> = submitters
                .into_iter()
                .flat_map(|submitter| submitter.join().unwrap())
                .collect();
            (returned, handles)
        });
        assert!(
            pool.await_termination(PATIENCE),
            "seed {seed}, round {round}"
        );

        let issued = ledger.next.load(SeqCst).min(CAP);
        let total_runs = || -> usize {
            ledger.runs[..issued]
                .iter()
                .map(|r| usize::from(r.load(SeqCst)))
                .sum()
        };
        let on_workers = total_runs();
        let accepted = ledger.accepted[..issued]
            .iter()
            .filter(|a| a.load(SeqCst))
            .count();
        let n_returned = returned.len();
        assert_eq!(
            on_workers + n_returned,
            accepted,
            "seed {seed}, round {round}: {on_workers} ran, {n_returned} returned, {accepted} accepted"
        );
        assert_eq!(
            pool.metrics().completed_tasks,
            on_workers as u64,
            "seed {seed}, round {round}"
        );

        // Run half of the returned tasks here, drop the others.
        let mut run_here = returned;
        let dropped = run_here.split_off(n_returned / 2);
        let n_run_here = run_here.len();
        for task in run_here {
            task.run();
        }
        drop(dropped);
        assert_eq!(
            total_runs(),
            on_workers + n_run_here,
            "seed {seed}, round {round}"
        );

        let per_task = ledger.runs.iter().zip(&ledger.drops).zip(&ledger.accepted);
        for (id, ((runs, drops), accepted)) in per_task.take(issued).enumerate() {
            let (runs, drops) = (runs.load(SeqCst), drops.load(SeqCst));
            let accepted = accepted.load(SeqCst);
            assert!(
                runs <= u8::from(accepted),
                "seed {seed}, round {round}: task {id} (accepted: {accepted}) ran {runs} times"
            );
            assert_eq!(
                drops, 1,
                "seed {seed}, round {round}: task {id}'s closure dropped {drops} times"
            );
        }
        let mut cancelled = 0;
        for a in handles {
            let (id, joined) = match a {
                Accepted::Now(id, h) => (id, settle(h.join_timeout(PATIENCE), id, seed)),
                Accepted::Later(id, h) => (id, settle(h.join_timeout(PATIENCE), id, seed)),
                Accepted::Detached => continue,
            };
            let runs = ledger.runs[id].load(SeqCst);
            match joined {
                Ok(out) => assert_eq!(
                    (out, runs),
                    (id, 1),
                    "seed {seed}, round {round}: task {id}"
                ),
                Err(TaskError::Cancelled) => {
                    assert_eq!(runs, 0, "seed {seed}, round {round}: task {id}");
                    cancelled += 1;
                }
                Err(e) => panic!("seed {seed}, round {round}: task {id}: {e}"),
            }
        }
        assert!(
            cancelled <= n_returned - n_run_here,
            "seed {seed}, round {round}"
        );
        eprintln!(
            "round {round}: {issued} submitted, {accepted} accepted, {on_workers} ran on the \
             workers, {n_returned} returned ({n_run_here} run here)"
        );
    }
}

common::backend_suites! {
    // A small wheel: 8 slots of 50 µs, so most delays span many revolutions.
    small_hashed_wheel: TimerQueue::hashed_wheel_with(Duration::from_micros(50), 8),
    // A fine tick: the delays cross several levels.
    fine_hierarchical_wheel: TimerQueue::hierarchical_wheel_with(Duration::from_micros(10)),
    tests: [
        schedule_cancel_fire_accounting,
        periodic_tasks_never_overlap_and_stop_when_cancelled,
        panics_do_not_kill_workers,
        shutdown_now_accounts_for_every_accepted_task,
    ],
}

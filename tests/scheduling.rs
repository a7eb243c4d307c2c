//! Tasks that run later: the behaviour suite, written once and run against
//! every delayed-queue backend (`common::backend_suites!` at the bottom).
//!
//! The scheduling properties (order, never early, exact run times and
//! counts, `delay()` and `deadline()`, the `MissedRuns` policies, fixed-delay
//! spacing, cancellation before a deadline) are checked on a
//! [`ManualClock`]: time moves only when the test says, so they assert exact
//! manual times and counts, sleep for no real time, and do not depend on the
//! machine's load. The tests that stay on the real clock are those about
//! real time on purpose: the timer thread's own sleeping and re-arming, real
//! races between a deadline and a cancel, `join_timeout` and
//! `await_termination` time-outs, the CPU an idle timer uses, and the real
//! length of a run (which manual time cannot give: it never moves during a
//! run).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool::{
    ManualClock, MissedRuns, PeriodicHandle, ScheduledExecutor, SubmitErrorKind, TaskError,
    TimerQueue,
};
use common::{block_on, eventually, manual_pool, pool, DropCounter, PATIENCE};

/// The suite's small hashed wheel: 4 slots of 50 µs, so most delays span
/// many revolutions.
fn small_hashed_wheel() -> TimerQueue {
    TimerQueue::hashed_wheel_with(Duration::from_micros(50), 4)
}

/// The suite's fine hierarchical wheel: a 100 ns tick, so the delays of
/// the suite cross several levels.
fn fine_hierarchical_wheel() -> TimerQueue {
    TimerQueue::hierarchical_wheel_with(Duration::from_nanos(100))
}

/// The tick of `queue`, one of the suite's backends: a task waiting in it
/// runs when its deadline, rounded up to a whole number of ticks since the
/// clock's origin, comes (the heap is exact: 1 ns). Deadlines in whole
/// milliseconds since a manual clock's start are whole ticks of all of
/// them, so those run exactly on time on every backend.
fn tick_of(queue: TimerQueue) -> Duration {
    if queue == TimerQueue::heap() {
        Duration::from_nanos(1)
    } else if queue == TimerQueue::hashed_wheel() || queue == TimerQueue::hierarchical_wheel() {
        Duration::from_millis(1)
    } else if queue == small_hashed_wheel() {
        Duration::from_micros(50)
    } else if queue == fine_hierarchical_wheel() {
        Duration::from_nanos(100)
    } else {
        panic!("not a backend of this suite: {queue:?}")
    }
}

/// A one-worker pool whose `on_panic` hook counts the panics it sees
/// (the panics tests provoke stay quiet); on `clock` if given.
fn pool_counting_panics(
    queue: TimerQueue,
    clock: Option<&ManualClock>,
) -> (ScheduledExecutor, Arc<AtomicUsize>) {
    common::quiet_expected_panics();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let mut builder = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .on_panic(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
        });
    if let Some(clock) = clock {
        builder = builder.clock(clock.clone());
    }
    (builder.build().unwrap(), seen)
}

/// Manual times (since the clock's start) at which something ran, in
/// order.
type ManualRuns = Arc<Mutex<Vec<Duration>>>;

/// A closure that records, at each run, the manual time since `start`.
fn manual_recorder(
    clock: &ManualClock,
    start: Instant,
) -> (ManualRuns, impl FnMut() + Send + 'static) {
    let runs: ManualRuns = Arc::default();
    let (r, clock) = (runs.clone(), clock.clone());
    (runs, move || r.lock().unwrap().push(clock.now() - start))
}

const MS: Duration = Duration::from_millis(1);

/// 200 tasks with delays of 0 to 40 ms, scheduled at manual instants a few
/// microseconds apart (so that their deadlines fall anywhere in a tick),
/// each returning the manual time it ran at: none runs before its due
/// instant, and each runs exactly when its deadline rounded up to the
/// backend's tick comes (at once if its delay is zero), not a tick later.
fn never_runs_before_its_due_instant(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 2);
    let start = clock.now();
    let tick = tick_of(queue).as_nanos();
    let handles: Vec<_> = (0..200u64)
        .map(|i| {
            clock.advance(Duration::from_micros(i % 7 * 3));
            let delay = Duration::from_micros((i * 7919) % 40_000);
            let c = clock.clone();
            let h = pool.schedule(move || c.now(), delay).unwrap();
            (clock.now() + delay, delay, h)
        })
        .collect();
    clock.advance(Duration::from_millis(50));
    for (due, delay, h) in handles {
        assert!(h.is_finished(), "not run by {:?}", due - start);
        let ran = h.join().unwrap();
        assert!(ran >= due, "ran {:?} before its due instant", due - ran);
        let on_time = if delay.is_zero() {
            due
        } else {
            let ticks = (due - start).as_nanos().div_ceil(tick);
            start + Duration::from_nanos((ticks * tick) as u64)
        };
        assert_eq!(ran, on_time, "due at {:?}", due - start);
    }
}

fn zero_delays_and_past_instants_run_at_once(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let now = pool.schedule(|| 1, Duration::ZERO).unwrap();
    let past = pool
        .schedule_at(|| 2, Instant::now() - Duration::from_secs(1))
        .unwrap();
    assert_eq!(now.join_timeout(PATIENCE).unwrap(), 1);
    assert_eq!(past.join_timeout(PATIENCE).unwrap(), 2);
}

/// Delays beyond the clock's range (`u64::MAX` ns, ~584 years) saturate
/// to it: `delay()` says exactly that, or exactly the delay below it; the
/// tasks can be cancelled, and a short task scheduled after them runs at
/// its own deadline, to the nanosecond.
fn huge_delays_saturate_and_can_be_cancelled(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 1);
    let start = clock.now();
    let end_of_time = Duration::from_nanos(u64::MAX);
    for delay in [
        Duration::MAX,
        Duration::from_secs(u64::MAX / 2),
        Duration::from_secs(3600 * 24 * 365 * 100),
    ] {
        let h = pool.schedule(|| unreachable!("never due"), delay).unwrap();
        assert_eq!(h.delay(), delay.min(end_of_time));
        assert!(!h.is_finished());
        assert!(h.cancel());
        assert!(matches!(h.join(), Err(TaskError::Cancelled)));
    }
    // A later, short task is not held up by them.
    let c = clock.clone();
    let short = pool.schedule(move || c.now() - start, MS).unwrap();
    clock.advance(MS);
    assert!(short.is_finished());
    assert_eq!(short.join().unwrap(), MS);
}

/// 200 tasks due at one manual instant, 30 ms ahead, on one worker: none
/// runs a millisecond before it; at it, all run, in the order they were
/// scheduled. (On the real clock, a machine slow enough to take 30 ms over
/// the scheduling could hand the later tasks, then due at once, to the
/// worker ahead of the earlier ones still in the timer.)
fn equal_deadlines_run_in_submission_order(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 1);
    let start = clock.now();
    let order = Arc::new(Mutex::new(Vec::new()));
    let at = start + 30 * MS;
    let handles: Vec<_> = (0..200)
        .map(|i| {
            let (order, c) = (order.clone(), clock.clone());
            pool.schedule_at(move || order.lock().unwrap().push((i, c.now() - start)), at)
                .unwrap()
        })
        .collect();
    clock.advance(29 * MS);
    assert_eq!(order.lock().unwrap().len(), 0, "ran before the deadline");
    clock.advance(MS);
    for h in handles {
        assert!(h.is_finished());
        h.join().unwrap();
    }
    let expected: Vec<_> = (0..200).map(|i| (i, 30 * MS)).collect();
    assert_eq!(*order.lock().unwrap(), expected);
}

/// Five tasks scheduled out of order, due 10 ms apart on one worker: they
/// run in deadline order, each exactly at its deadline.
fn earlier_deadlines_run_first(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 1);
    let start = clock.now();
    let order = Arc::new(Mutex::new(Vec::new()));
    let base = start + 20 * MS;
    let handles: Vec<_> = [5u32, 1, 4, 2, 3]
        .into_iter()
        .map(|k| {
            let (order, c) = (order.clone(), clock.clone());
            pool.schedule_at(
                move || order.lock().unwrap().push((k, c.now() - start)),
                base + k * 10 * MS,
            )
            .unwrap()
        })
        .collect();
    clock.advance(70 * MS);
    for h in handles {
        assert!(h.is_finished());
        h.join().unwrap();
    }
    let expected: Vec<_> = (1..=5u32).map(|k| (k, 20 * MS + k * 10 * MS)).collect();
    assert_eq!(*order.lock().unwrap(), expected);
}

fn an_earlier_task_rearms_the_timer(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let far = pool.schedule(|| (), Duration::from_secs(3600)).unwrap();
    std::thread::sleep(Duration::from_millis(20)); // the timer now sleeps for an hour
    let start = Instant::now();
    pool.schedule(|| (), Duration::from_millis(10))
        .unwrap()
        .join_timeout(PATIENCE)
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the timer slept past the earlier deadline"
    );
    assert!(far.cancel());
}

/// A cancel before the deadline wins, drops the closure at once, and the
/// task never runs, not at its deadline nor an hour after it; a cancel
/// after the run loses.
fn cancel_wins_before_the_deadline_and_drops_the_closure_at_once(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 1);
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let (guard, r) = (DropCounter(drops.clone()), ran.clone());
    let h = pool
        .schedule(
            move || {
                let _keep = &guard;
                r.fetch_add(1, Ordering::SeqCst);
            },
            Duration::from_millis(50),
        )
        .unwrap();
    assert!(h.cancel());
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the closure is dropped by cancel, not at the deadline"
    );
    assert!(!h.cancel());
    assert!(h.is_cancelled() && h.is_finished());
    assert_eq!(h.delay(), Duration::ZERO);
    clock.advance(50 * MS);
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a cancelled task never runs");
    clock.advance(Duration::from_secs(3600));
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a cancelled task never runs");
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));

    let done = pool.schedule(|| 7, MS).unwrap();
    clock.advance(MS);
    assert!(done.is_finished());
    assert!(!done.cancel(), "cancel after the run loses");
    assert_eq!(done.join().unwrap(), 7);
}

fn cancelled_tasks_leave_the_timer_promptly(queue: TimerQueue) {
    let pool = pool(queue, 2);
    const N: usize = 200_000;
    let drops = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let guard = DropCounter(drops.clone());
            pool.schedule(
                move || drop(guard),
                Duration::from_secs(3600 + i as u64 % 600),
            )
            .unwrap()
        })
        .collect();
    assert!(eventually(|| pool.metrics().scheduled_tasks == N));
    for h in &handles {
        assert!(h.cancel());
    }
    assert_eq!(drops.load(Ordering::SeqCst), N);
    drop(handles);
    assert!(
        eventually(|| pool.metrics().scheduled_tasks == 0),
        "entries still held: {}",
        pool.metrics().scheduled_tasks
    );
}

fn cancelled_tasks_do_not_hold_up_termination(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let handles: Vec<_> = (0..10)
        .map(|_| pool.schedule(|| (), Duration::from_secs(3600)).unwrap())
        .collect();
    assert!(eventually(|| pool.metrics().scheduled_tasks == 10));
    // Fewer than half: the timer may keep these entries until a sweep.
    for h in &handles[..3] {
        assert!(h.cancel());
    }
    // Delayed tasks are kept after `shutdown`: the pool waits for the rest.
    pool.shutdown();
    assert!(!pool.await_termination(Duration::from_millis(20)));
    for h in &handles[3..] {
        assert!(h.cancel());
    }
    assert!(
        pool.await_termination(PATIENCE),
        "cancelled entries held: {}",
        pool.metrics().scheduled_tasks
    );
    assert_eq!(pool.metrics().scheduled_tasks, 0);
}

fn cancel_races_the_deadline_exactly_one_wins(queue: TimerQueue) {
    let pool = pool(queue, 2);
    for i in 0..1_000u64 {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let h = pool
            .schedule(
                move || {
                    r.fetch_add(1, Ordering::SeqCst);
                },
                Duration::from_micros(i % 200),
            )
            .unwrap();
        std::thread::sleep(Duration::from_micros(i % 150));
        let cancelled = h.cancel();
        let result = h.join_timeout(PATIENCE);
        assert_eq!(cancelled, result.is_err());
        assert_eq!(ran.load(Ordering::SeqCst), usize::from(!cancelled));
    }
    assert!(eventually(|| pool.metrics().scheduled_tasks == 0));
}

fn a_scheduled_panic_is_isolated_and_reported(queue: TimerQueue) {
    let (pool, seen) = pool_counting_panics(queue, None);
    let h = pool
        .schedule(
            || -> u8 { panic!("expected: delayed panic") },
            Duration::from_millis(5),
        )
        .unwrap();
    match h.join_timeout(PATIENCE) {
        Err(chronopool::JoinTimeoutError::Failed(TaskError::Panicked(p))) => {
            assert_eq!(p.message(), Some("expected: delayed panic"))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(
        pool.schedule(|| 1, Duration::ZERO).unwrap().join().unwrap(),
        1
    );
}

/// `delay()` is exactly the manual time left until the deadline, and
/// `deadline()` the instant it is due, as time moves; zero once cancelled.
fn delay_counts_down(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 1);
    let start = clock.now();
    let minute = Duration::from_secs(60);
    let h = pool.schedule(|| (), minute).unwrap();
    assert_eq!(h.delay(), minute);
    assert_eq!(h.deadline(), start + minute);
    clock.advance(20 * MS);
    assert_eq!(h.delay(), minute - 20 * MS);
    clock.advance(minute - 21 * MS);
    assert_eq!(h.delay(), MS);
    assert_eq!(h.deadline(), start + minute);
    assert!(!h.is_finished());
    assert!(h.cancel());
    assert_eq!(h.delay(), Duration::ZERO);
}

fn a_scheduled_handle_is_a_future(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let h = pool
        .schedule(|| "later", Duration::from_millis(10))
        .unwrap();
    assert_eq!(block_on(h).unwrap(), "later");
}

fn join_timeout_gives_the_scheduled_handle_back(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let h = pool.schedule(|| 9, Duration::from_millis(200)).unwrap();
    let h = match h.join_timeout(Duration::from_millis(5)) {
        Err(chronopool::JoinTimeoutError::TimedOut(h)) => h,
        other => panic!("expected a time-out, got {other:?}"),
    };
    assert!(h.delay() > Duration::ZERO);
    assert_eq!(h.join_timeout(PATIENCE).unwrap(), 9);
}

/// A delayed task is kept by `shutdown` (the default): the pool does not
/// terminate before it ran, and it runs at its deadline. (On the real
/// clock, a 5 ms `await_termination` that came back 50 ms late would see
/// the task run and fail; here the task is not due until the test says.)
fn delayed_tasks_still_run_after_shutdown_by_default(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 1);
    let start = clock.now();
    let ran = Arc::new(AtomicUsize::new(0));
    let (r, c) = (ran.clone(), clock.clone());
    let h = pool
        .schedule(
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                c.now() - start
            },
            50 * MS,
        )
        .unwrap();
    pool.shutdown();
    assert!(
        matches!(pool.schedule(|| Duration::ZERO, Duration::ZERO), Err(e) if e.kind() == SubmitErrorKind::Shutdown)
    );
    assert!(
        !pool.await_termination(Duration::from_millis(5)),
        "waits for the kept task"
    );
    clock.advance(49 * MS);
    assert!(!pool.is_terminated(), "waits for the kept task");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    clock.advance(MS);
    assert!(pool.await_termination(PATIENCE));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(h.join().unwrap(), 50 * MS, "ran at its deadline");
}

fn delayed_tasks_can_be_cancelled_by_shutdown(queue: TimerQueue) {
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .keep_delayed_tasks_on_shutdown(false)
        .build()
        .unwrap();
    let h = pool.schedule(|| (), Duration::from_secs(3600)).unwrap();
    pool.shutdown();
    assert!(pool.await_termination(PATIENCE));
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
}

fn shutdown_now_returns_delayed_tasks(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let handles: Vec<_> = (0..10)
        .map(|i| pool.schedule(move || i, Duration::from_secs(3600)).unwrap())
        .collect();
    assert!(eventually(|| pool.metrics().scheduled_tasks == 10));
    let returned = pool.shutdown_now();
    assert_eq!(returned.len(), 10);
    assert_eq!(pool.metrics().scheduled_tasks, 0);
    assert!(pool.await_termination(PATIENCE));
    for (i, task) in returned.into_iter().enumerate() {
        if i % 2 == 0 {
            task.run();
        }
    }
    let values: Vec<_> = handles.into_iter().map(|h| h.join().ok()).collect();
    assert_eq!(values.iter().filter(|v| v.is_some()).count(), 5);
    assert_eq!(values.iter().filter(|v| v.is_none()).count(), 5);
}

/// The CPU time of the executor's own threads (/proc/self/task), in ticks.
/// The CPU ticks (user and system, 10 ms each) used so far by the threads
/// whose name starts with `prefix`.
fn cpu_ticks_of_threads_named(prefix: &str) -> u64 {
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = entry.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            ticks += f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
        }
    }
    ticks
}

/// An executor holding a hundred thousand timers due in an hour uses no
/// CPU while it waits: its three threads (workers and timer thread, named
/// after a prefix no other executor of this binary has) together use at
/// most 10 ticks in a second, where a timer thread that woke every tick
/// would use about 100.
fn many_timers_far_away_cost_no_cpu(queue: TimerQueue) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    if !cfg!(target_os = "linux") {
        return; // reads /proc
    }
    let prefix = format!("idle{}", NEXT.fetch_add(1, Ordering::SeqCst));
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .thread_name(prefix.clone())
        .timer_queue(queue)
        .build()
        .unwrap();
    for _ in 0..100_000 {
        drop(pool.schedule(|| (), Duration::from_secs(3600)).unwrap());
    }
    assert!(eventually(|| pool.metrics().scheduled_tasks == 100_000));
    std::thread::sleep(Duration::from_millis(100));
    let before = cpu_ticks_of_threads_named(&prefix);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks_of_threads_named(&prefix) - before;
    assert!(
        used <= 10,
        "idle executor threads used {used} ticks (10 ms each) in 1 s"
    );
}

/// A fixed-rate task first due at 10 ms, of period 15 ms: run `n` happens
/// exactly at 10 ms + n × 15 ms (eight runs by 115 ms, none early, none
/// late), and then `deadline()` and `delay()` name the ninth.
fn fixed_rate_run_n_is_due_at_start_plus_n_periods(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 2);
    let start = clock.now();
    let (runs, f) = manual_recorder(&clock, start);
    let (first, period) = (10 * MS, 15 * MS);
    let h = pool.schedule_at_fixed_rate(f, first, period).unwrap();
    clock.advance(first + 7 * period);
    let expected: Vec<Duration> = (0..8).map(|n| first + n * period).collect();
    assert_eq!(*runs.lock().unwrap(), expected);
    assert_eq!(h.deadline(), start + first + 8 * period);
    assert_eq!(h.delay(), period);
    assert!(h.cancel());
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
}

/// On the real clock, because only real time can give a run a length (a
/// manual clock never moves during a run, so a run's start and end are one
/// manual instant): each run lasts 5 ms, and the next one starts no sooner
/// than the delay after the previous one *ended*, not after it started.
/// Never-early only, so a loaded machine cannot fail it. The exact spacing
/// is checked in manual time by
/// `fixed_delay_runs_exactly_its_delay_after_each_run_even_a_late_one`.
fn fixed_delay_counts_from_the_end_of_each_run(queue: TimerQueue) {
    let pool = pool(queue, 2);
    let ends: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
    let e = ends.clone();
    let delay = Duration::from_millis(10);
    let h = pool
        .schedule_with_fixed_delay(
            move || {
                let start = Instant::now();
                std::thread::sleep(Duration::from_millis(5));
                e.lock().unwrap().push((start, Instant::now()));
            },
            Duration::ZERO,
            delay,
        )
        .unwrap();
    assert!(eventually(|| ends.lock().unwrap().len() >= 5));
    assert!(h.cancel());
    let ends = ends.lock().unwrap();
    for pair in ends.windows(2) {
        let (_, previous_end) = pair[0];
        let (next_start, _) = pair[1];
        assert!(
            next_start >= previous_end + delay,
            "the next run started too early"
        );
    }
}

/// A fixed-rate task of period 100 µs on four workers, stalled for 300
/// periods (`jump`): the 300 runs due meanwhile are all late and due at
/// once, so they come back to back (`MissedRuns::Burst`), each re-armed
/// the moment the previous one ends, with three idle workers to take it.
/// Exactly 301 runs (the first, at 0, and the 300 late ones, all at 30 ms),
/// no two overlapping, each seeing the state the previous one left in the
/// closure.
fn a_periodic_task_never_overlaps_itself_and_keeps_its_state(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 4);
    let start = clock.now();
    let in_run = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let total = Arc::new(AtomicUsize::new(0));
    let times: ManualRuns = Arc::default();
    let (flag, bad, t) = (in_run.clone(), overlaps.clone(), total.clone());
    let (at, c) = (times.clone(), clock.clone());
    let mut own_count = 0u64; // plain state of the FnMut: each run sees the previous one's
    let period = Duration::from_micros(100);
    let h = pool
        .schedule_at_fixed_rate(
            move || {
                if flag.swap(true, Ordering::SeqCst) {
                    bad.fetch_add(1, Ordering::SeqCst);
                }
                own_count += 1;
                assert_eq!(own_count as usize, t.fetch_add(1, Ordering::SeqCst) + 1);
                at.lock().unwrap().push(c.now() - start);
                // Give the other workers the processor while in the run: a
                // next run released too soon would start meanwhile.
                for _ in 0..20 {
                    std::thread::yield_now();
                }
                flag.store(false, Ordering::SeqCst);
            },
            Duration::ZERO,
            period,
        )
        .unwrap();
    clock.jump(300 * period);
    assert_eq!(total.load(Ordering::SeqCst), 301);
    let mut expected = vec![300 * period; 301];
    expected[0] = Duration::ZERO;
    assert_eq!(*times.lock().unwrap(), expected);
    assert!(h.cancel());
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "a run overlapped the previous one"
    );
}

/// The period of the `MissedRuns` tests.
const PERIOD: Duration = Duration::from_millis(40);

/// A fixed-rate task of period 40 ms, first due at 40 ms, whose first run
/// ends 4.5 periods after it was due, at 220 ms: the pool was stalled
/// until then (`jump`), and the run ends at the manual instant it starts,
/// which `MissedRuns` cannot tell from a run due at 40 ms that took 180 ms.
/// Then three periods more (`advance` to 340 ms). Returns the manual times
/// of the runs, and the task's `delay()` once the late run and any
/// catch-up are over (at 220 ms). What follows the late run depends on
/// the policy (the timeline in `MissedRuns`' doc).
fn late_runs(queue: TimerQueue, missed: MissedRuns) -> (Vec<Duration>, Duration) {
    let (pool, clock) = manual_pool(queue, 2);
    let start = clock.now();
    let (runs, f) = manual_recorder(&clock, start);
    let h = pool
        .schedule_at_fixed_rate_with(f, PERIOD, PERIOD, missed)
        .unwrap();
    clock.jump(PERIOD * 11 / 2);
    let delay_after_the_late_run = h.delay();
    clock.advance(3 * PERIOD);
    assert!(h.cancel());
    let runs = runs.lock().unwrap().clone();
    (runs, delay_after_the_late_run)
}

fn burst_catches_up_back_to_back(queue: TimerQueue) {
    let (runs, delay) = late_runs(queue, MissedRuns::Burst);
    // The runs due at 80, 120, 160 and 200 ms were due when the late run
    // ended: they run at once after it, back to back, at 220 ms; run n
    // stays due at 40 + 40n ms, so the next one is on time at 240 ms.
    let ms = |m: u64| Duration::from_millis(m);
    assert_eq!(
        runs,
        [220, 220, 220, 220, 220, 240, 280, 320].map(ms),
        "{runs:?}"
    );
    for (n, ran) in runs.iter().enumerate() {
        assert!(*ran >= PERIOD * (n as u32 + 1), "run {n} early");
    }
    assert_eq!(delay, ms(20), "the next run is due at 240 ms");
}

fn skip_drops_missed_runs_and_keeps_the_phase(queue: TimerQueue) {
    let (runs, delay) = late_runs(queue, MissedRuns::Skip);
    // The late run ends at 220 ms: the runs due at 80..200 ms are dropped;
    // the next is the first on the original grid after 220 ms, at 240 ms,
    // then 280, 320.
    let ms = |m: u64| Duration::from_millis(m);
    assert_eq!(runs, [220, 240, 280, 320].map(ms), "{runs:?}");
    assert_eq!(delay, ms(20), "the next run is due at 240 ms");
}

fn delay_shifts_the_schedule(queue: TimerQueue) {
    let (runs, delay) = late_runs(queue, MissedRuns::Delay);
    // The late run ends at 220 ms: the next is a period after it, at
    // 260 ms, and the rate goes on from there: 300, 340.
    let ms = |m: u64| Duration::from_millis(m);
    assert_eq!(runs, [220, 260, 300, 340].map(ms), "{runs:?}");
    assert_eq!(
        delay, PERIOD,
        "the next run is due a period after the late one"
    );
}

/// A fixed-delay task, delay 10 ms, first run at once: the next run is due
/// exactly 10 ms after the manual instant the previous run ended, also
/// after a run that was late (the pool stalled, `jump`, from 10 to 35 ms:
/// the run due at 20 ms runs at 35 ms, and the next one is due at 45 ms,
/// where a fixed rate would have had its 40 ms run).
fn fixed_delay_runs_exactly_its_delay_after_each_run_even_a_late_one(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 2);
    let start = clock.now();
    let (runs, f) = manual_recorder(&clock, start);
    let delay = 10 * MS;
    let h = pool
        .schedule_with_fixed_delay(f, Duration::ZERO, delay)
        .unwrap();
    clock.advance(delay);
    clock.jump(25 * MS);
    assert_eq!(h.deadline(), start + 45 * MS);
    clock.advance(30 * MS);
    let ms = |m: u64| Duration::from_millis(m);
    assert_eq!(
        *runs.lock().unwrap(),
        [0, 10, 35, 45, 55, 65].map(ms),
        "{runs:?}"
    );
    assert_eq!(h.delay(), delay);
    assert!(h.cancel());
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
}

/// A cancel during a run returns true, lets the run finish, and stops the
/// task: no run in the thousand periods after it.
fn cancelling_a_running_periodic_task_lets_the_run_finish_and_stops_it(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 1);
    let (started_tx, started) = std::sync::mpsc::channel();
    let gate = common::Gate::new();
    let g = gate.waiter();
    let runs = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let (r, fin) = (runs.clone(), finished.clone());
    let h = pool
        .schedule_at_fixed_rate(
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                let _ = started_tx.send(());
                g.wait();
                fin.fetch_add(1, Ordering::SeqCst);
            },
            Duration::ZERO,
            Duration::from_millis(1),
        )
        .unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    assert!(h.cancel(), "cancel during a run stops further runs");
    assert!(!h.cancel());
    gate.open();
    assert!(matches!(
        h.join_timeout(PATIENCE),
        Err(chronopool::JoinTimeoutError::Failed(TaskError::Cancelled))
    ));
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the current run finished"
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "no further run");
    assert_eq!(pool.metrics().scheduled_tasks, 0);
}

/// A fixed-delay task (1 ms) whose third run panics: runs at 0, 1 and
/// 2 ms, the handle reports the panic, the hook saw it once, and no run
/// follows in the thousand delays after it.
fn a_panic_ends_a_periodic_task_and_is_reported(queue: TimerQueue) {
    let clock = ManualClock::new();
    let (pool, seen) = pool_counting_panics(queue, Some(&clock));
    let start = clock.now();
    let (times, mut record) = manual_recorder(&clock, start);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let h = pool
        .schedule_with_fixed_delay(
            move || {
                record();
                if r.fetch_add(1, Ordering::SeqCst) == 2 {
                    panic!("expected: third run panics");
                }
            },
            Duration::ZERO,
            MS,
        )
        .unwrap();
    clock.advance(2 * MS);
    assert!(h.is_finished());
    match h.join() {
        Err(TaskError::Panicked(p)) => {
            assert_eq!(p.message(), Some("expected: third run panics"))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(*times.lock().unwrap(), [Duration::ZERO, MS, 2 * MS]);
    clock.advance(Duration::from_secs(1));
    assert_eq!(runs.load(Ordering::SeqCst), 3, "no run after the panic");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(
        pool.schedule(|| 1, Duration::ZERO).unwrap().join().unwrap(),
        1,
        "the worker lives"
    );
}

fn a_zero_period_is_an_error_that_gives_the_job_back(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let err = pool
        .schedule_at_fixed_rate(|| (), Duration::ZERO, Duration::ZERO)
        .unwrap_err();
    assert_eq!(err.kind(), SubmitErrorKind::ZeroPeriod);
    (err.into_inner())();
    let err = pool
        .schedule_with_fixed_delay(|| (), Duration::from_secs(1), Duration::ZERO)
        .unwrap_err();
    assert_eq!(err.kind(), SubmitErrorKind::ZeroPeriod);
    // Huge periods are fine: they saturate (at the end of the clock's
    // range, `u64::MAX` ns: in manual time, exactly that after the run at
    // 0).
    let (pool, clock) = manual_pool(queue, 1);
    let h = pool
        .schedule_at_fixed_rate(|| (), Duration::ZERO, Duration::MAX)
        .unwrap();
    clock.advance(Duration::ZERO);
    assert_eq!(h.delay(), Duration::from_nanos(u64::MAX));
    assert!(h.cancel());
}

/// A fixed-rate task due at once that counts its runs.
fn counting_fixed_rate(
    pool: &ScheduledExecutor,
    period: Duration,
) -> (Arc<AtomicUsize>, PeriodicHandle) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let h = pool
        .schedule_at_fixed_rate(
            move || {
                r.fetch_add(1, Ordering::SeqCst);
            },
            Duration::ZERO,
            period,
        )
        .unwrap();
    (runs, h)
}

/// A fixed-rate task (2 ms) runs at 0 and 2 ms; `shutdown` cancels it (the
/// default), the pool terminates without waiting for it, and it never
/// runs again.
fn shutdown_cancels_periodic_tasks_by_default(queue: TimerQueue) {
    let (pool, clock) = manual_pool(queue, 1);
    let (runs, h) = counting_fixed_rate(&pool, 2 * MS);
    clock.advance(2 * MS);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    pool.shutdown();
    assert!(
        pool.await_termination(PATIENCE),
        "periodic tasks do not hold termination"
    );
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
    clock.advance(Duration::from_secs(1));
    assert_eq!(runs.load(Ordering::SeqCst), 2, "no run after the shutdown");
}

/// With `keep_periodic_tasks_on_shutdown(true)`, a fixed-rate task (2 ms)
/// keeps its schedule after `shutdown`: exactly three more runs in 6 ms,
/// and the pool terminates only once it is cancelled.
fn periodic_tasks_can_be_kept_after_shutdown(queue: TimerQueue) {
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .keep_periodic_tasks_on_shutdown(true)
        .clock(clock.clone())
        .build()
        .unwrap();
    let (runs, h) = counting_fixed_rate(&pool, 2 * MS);
    clock.advance(Duration::ZERO);
    let before = runs.load(Ordering::SeqCst);
    assert_eq!(before, 1, "the run due at once");
    pool.shutdown();
    clock.advance(6 * MS);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        before + 3,
        "it keeps running, on schedule"
    );
    assert!(!pool.is_terminated());
    assert!(h.cancel());
    assert!(pool.await_termination(PATIENCE));
}

fn shutdown_now_returns_periodic_tasks(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let h = pool
        .schedule_with_fixed_delay(|| (), Duration::from_secs(3600), Duration::from_secs(1))
        .unwrap();
    assert!(eventually(|| pool.metrics().scheduled_tasks == 1));
    let returned = pool.shutdown_now();
    assert_eq!(returned.len(), 1);
    drop(returned);
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
    assert!(pool.await_termination(PATIENCE));
}

fn the_scheduled_task_limit_refuses_and_gives_the_job_back(queue: TimerQueue) {
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .max_scheduled_tasks(10)
        .build()
        .unwrap();
    let held: Vec<_> = (0..10)
        .map(|_| pool.schedule(|| 0, Duration::from_secs(3600)).unwrap())
        .collect();
    let err = pool.schedule(|| 4, Duration::from_secs(3600)).unwrap_err();
    assert_eq!(err.kind(), SubmitErrorKind::TooManyScheduled);
    assert_eq!((err.into_inner())(), 4);
    let err = pool
        .schedule_with_fixed_delay(|| (), Duration::ZERO, Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(err.kind(), SubmitErrorKind::TooManyScheduled);
    // Tasks due now do not wait in the timer: not limited.
    assert_eq!(
        pool.schedule(|| 5, Duration::ZERO).unwrap().join().unwrap(),
        5
    );
    // Room comes back as soon as a task is cancelled: the limit counts live
    // tasks, whether or not the timer swept the cancelled entry out yet.
    assert!(held[0].cancel());
    let sixth = pool.schedule(|| 6, Duration::from_secs(3600));
    assert!(sixth.is_ok(), "refused after a cancel: {sixth:?}");
    for h in &held {
        h.cancel();
    }
    // A periodic task's later runs do not count as new tasks: every re-arm
    // is admitted (five runs in 4 ms, in manual time).
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .max_scheduled_tasks(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let (runs, h) = counting_fixed_rate(&pool, MS);
    clock.advance(4 * MS);
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    assert!(h.cancel());
}

common::backend_suites! {
    // A tiny wheel: most delays span many revolutions.
    small_hashed_wheel: small_hashed_wheel(),
    // A fine tick: the delays of the suite cross several levels.
    fine_hierarchical_wheel: fine_hierarchical_wheel(),
    tests: [
        never_runs_before_its_due_instant,
        zero_delays_and_past_instants_run_at_once,
        huge_delays_saturate_and_can_be_cancelled,
        equal_deadlines_run_in_submission_order,
        earlier_deadlines_run_first,
        an_earlier_task_rearms_the_timer,
        cancel_wins_before_the_deadline_and_drops_the_closure_at_once,
        cancelled_tasks_leave_the_timer_promptly,
        cancelled_tasks_do_not_hold_up_termination,
        cancel_races_the_deadline_exactly_one_wins,
        a_scheduled_panic_is_isolated_and_reported,
        delay_counts_down,
        a_scheduled_handle_is_a_future,
        join_timeout_gives_the_scheduled_handle_back,
        delayed_tasks_still_run_after_shutdown_by_default,
        delayed_tasks_can_be_cancelled_by_shutdown,
        shutdown_now_returns_delayed_tasks,
        many_timers_far_away_cost_no_cpu,
        fixed_rate_run_n_is_due_at_start_plus_n_periods,
        fixed_delay_counts_from_the_end_of_each_run,
        fixed_delay_runs_exactly_its_delay_after_each_run_even_a_late_one,
        a_periodic_task_never_overlaps_itself_and_keeps_its_state,
        burst_catches_up_back_to_back,
        skip_drops_missed_runs_and_keeps_the_phase,
        delay_shifts_the_schedule,
        cancelling_a_running_periodic_task_lets_the_run_finish_and_stops_it,
        a_panic_ends_a_periodic_task_and_is_reported,
        a_zero_period_is_an_error_that_gives_the_job_back,
        shutdown_cancels_periodic_tasks_by_default,
        periodic_tasks_can_be_kept_after_shutdown,
        shutdown_now_returns_periodic_tasks,
        the_scheduled_task_limit_refuses_and_gives_the_job_back,
    ],
}

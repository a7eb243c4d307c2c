//! Tasks that run later: the behaviour suite, written once and run against
//! every delayed-queue backend (`common::backend_suites!` at the bottom).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool::{PeriodicHandle, ScheduledExecutor, SubmitErrorKind, TaskError, TimerQueue};
use common::{block_on, eventually, pool, DropCounter, PATIENCE};

/// A one-worker pool whose `on_panic` hook counts the panics it sees
/// (the panics tests provoke stay quiet).
fn pool_counting_panics(queue: TimerQueue) -> (ScheduledExecutor, Arc<AtomicUsize>) {
    common::quiet_expected_panics();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .on_panic(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    (pool, seen)
}

fn never_runs_before_its_due_instant(queue: TimerQueue) {
    let pool = pool(queue, 2);
    let handles: Vec<_> = (0..200u64)
        .map(|i| {
            let delay = Duration::from_micros((i * 7919) % 40_000);
            let submitted = Instant::now();
            let h = pool.schedule(Instant::now, delay).unwrap();
            (submitted + delay, h)
        })
        .collect();
    for (due, h) in handles {
        let ran = h.join_timeout(PATIENCE).unwrap();
        assert!(ran >= due, "ran {:?} before its due instant", due - ran);
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

fn huge_delays_saturate_and_can_be_cancelled(queue: TimerQueue) {
    let pool = pool(queue, 1);
    for delay in [
        Duration::MAX,
        Duration::from_secs(u64::MAX / 2),
        Duration::from_secs(3600 * 24 * 365 * 100),
    ] {
        let h = pool.schedule(|| unreachable!("never due"), delay).unwrap();
        assert!(h.delay() > Duration::from_secs(3600 * 24 * 365 * 99));
        assert!(!h.is_finished());
        assert!(h.cancel());
        assert!(matches!(h.join(), Err(TaskError::Cancelled)));
    }
    // A later, short task is not held up by them.
    assert_eq!(
        pool.schedule(|| 3, Duration::from_millis(1))
            .unwrap()
            .join_timeout(PATIENCE)
            .unwrap(),
        3
    );
}

fn equal_deadlines_run_in_submission_order(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let at = Instant::now() + Duration::from_millis(30);
    let handles: Vec<_> = (0..200)
        .map(|i| {
            let order = order.clone();
            pool.schedule_at(move || order.lock().unwrap().push(i), at)
                .unwrap()
        })
        .collect();
    for h in handles {
        h.join_timeout(PATIENCE).unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..200).collect::<Vec<_>>());
}

fn earlier_deadlines_run_first(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let base = Instant::now() + Duration::from_millis(20);
    let handles: Vec<_> = [5u64, 1, 4, 2, 3]
        .into_iter()
        .map(|k| {
            let order = order.clone();
            pool.schedule_at(
                move || order.lock().unwrap().push(k),
                base + Duration::from_millis(k * 10),
            )
            .unwrap()
        })
        .collect();
    for h in handles {
        h.join_timeout(PATIENCE).unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [1, 2, 3, 4, 5]);
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

fn cancel_wins_before_the_deadline_and_drops_the_closure_at_once(queue: TimerQueue) {
    let pool = pool(queue, 1);
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
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a cancelled task never runs");
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));

    let done = pool.schedule(|| 7, Duration::from_millis(1)).unwrap();
    while !done.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
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
    let (pool, seen) = pool_counting_panics(queue);
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

fn delay_counts_down(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let h = pool.schedule(|| (), Duration::from_secs(60)).unwrap();
    let first = h.delay();
    assert!(first <= Duration::from_secs(60) && first > Duration::from_secs(50));
    std::thread::sleep(Duration::from_millis(20));
    assert!(h.delay() < first);
    assert!(h.cancel());
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

fn delayed_tasks_still_run_after_shutdown_by_default(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h = pool
        .schedule(
            move || {
                r.fetch_add(1, Ordering::SeqCst);
            },
            Duration::from_millis(50),
        )
        .unwrap();
    pool.shutdown();
    assert!(
        matches!(pool.schedule(|| (), Duration::ZERO), Err(e) if e.kind() == SubmitErrorKind::Shutdown)
    );
    assert!(
        !pool.await_termination(Duration::from_millis(5)),
        "waits for the kept task"
    );
    assert!(pool.await_termination(PATIENCE));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(h.join().is_ok());
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

/// Run instants of a periodic task, in order.
type Runs = Arc<Mutex<Vec<Instant>>>;

fn recorder() -> (Runs, impl FnMut() + Send + 'static) {
    let runs: Runs = Arc::default();
    let r = runs.clone();
    (runs, move || r.lock().unwrap().push(Instant::now()))
}

fn wait_for_runs(runs: &Runs, n: usize) {
    assert!(
        eventually(|| runs.lock().unwrap().len() >= n),
        "fewer than {n} runs"
    );
}

fn fixed_rate_run_n_is_due_at_start_plus_n_periods(queue: TimerQueue) {
    let pool = pool(queue, 2);
    let (runs, f) = recorder();
    let period = Duration::from_millis(15);
    let start = Instant::now();
    let h = pool
        .schedule_at_fixed_rate(f, Duration::from_millis(10), period)
        .unwrap();
    wait_for_runs(&runs, 8);
    assert!(h.cancel());
    let first_due = start + Duration::from_millis(10);
    for (n, ran) in runs.lock().unwrap().iter().enumerate() {
        let due = first_due + period * n as u32;
        assert!(*ran >= due, "run {n} was {:?} early", due - *ran);
    }
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
}

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

fn a_periodic_task_never_overlaps_itself_and_keeps_its_state(queue: TimerQueue) {
    let pool = pool(queue, 4);
    let in_run = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let total = Arc::new(AtomicUsize::new(0));
    let (flag, bad, t) = (in_run.clone(), overlaps.clone(), total.clone());
    let mut own_count = 0u64; // plain state of the FnMut: each run sees the previous one's
    let h = pool
        .schedule_at_fixed_rate(
            move || {
                if flag.swap(true, Ordering::SeqCst) {
                    bad.fetch_add(1, Ordering::SeqCst);
                }
                own_count += 1;
                assert_eq!(own_count as usize, t.fetch_add(1, Ordering::SeqCst) + 1);
                std::thread::sleep(Duration::from_micros(300)); // longer than the period: always late
                flag.store(false, Ordering::SeqCst);
            },
            Duration::ZERO,
            Duration::from_micros(100),
        )
        .unwrap();
    assert!(eventually(|| total.load(Ordering::SeqCst) >= 300));
    assert!(h.cancel());
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "a run overlapped the previous one"
    );
}

/// A first run that takes 4.5 periods, then quick runs: what follows
/// depends on the policy (the timeline in `MissedRuns`' doc).
fn late_runs(queue: TimerQueue, missed: chronopool::MissedRuns) -> (Instant, Vec<Instant>) {
    let pool = pool(queue, 1);
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let period = Duration::from_millis(40);
    let start = Instant::now();
    let h = pool
        .schedule_at_fixed_rate_with(
            move || {
                let mut runs = r.lock().unwrap();
                runs.push(Instant::now());
                if runs.len() == 1 {
                    drop(runs);
                    std::thread::sleep(period * 9 / 2);
                }
            },
            Duration::ZERO,
            period,
            missed,
        )
        .unwrap();
    wait_for_runs(&runs, 7);
    assert!(h.cancel());
    let runs = runs.lock().unwrap().clone();
    (start, runs)
}

fn burst_catches_up_back_to_back(queue: TimerQueue) {
    let (start, runs) = late_runs(queue, chronopool::MissedRuns::Burst);
    let period = Duration::from_millis(40);
    // Runs 1-4 were due during the long first run: they run at once after
    // it, back to back, long before run 5 is due at 200 ms.
    for (n, ran) in runs.iter().enumerate() {
        assert!(*ran >= start + period * n as u32, "run {n} early");
    }
    assert!(
        runs[4] < start + period * 5,
        "runs 1-4 did not catch up before run 5's due time"
    );
}

fn skip_drops_missed_runs_and_keeps_the_phase(queue: TimerQueue) {
    let (start, runs) = late_runs(queue, chronopool::MissedRuns::Skip);
    let period = Duration::from_millis(40);
    // The first run ends at ~180 ms: runs due at 40..160 are dropped; the
    // next is on the original grid, at 200 ms, then 240, 280...
    assert!(
        runs[1] >= start + period * 5,
        "the run after the late one came before the next boundary"
    );
    for pair in runs[1..].windows(2) {
        assert!(pair[1] >= pair[0] + period / 2, "skip ran a burst");
    }
}

fn delay_shifts_the_schedule(queue: TimerQueue) {
    let (_, runs) = late_runs(queue, chronopool::MissedRuns::Delay);
    let period = Duration::from_millis(40);
    let first_end = runs[0] + period * 9 / 2;
    assert!(
        runs[1] >= first_end + period,
        "delay did not wait a period after the late run"
    );
    for (n, pair) in runs[1..].windows(2).enumerate() {
        assert!(
            pair[1] >= pair[0] + period / 2,
            "run {} followed too closely",
            n + 2
        );
    }
}

fn cancelling_a_running_periodic_task_lets_the_run_finish_and_stops_it(queue: TimerQueue) {
    let pool = pool(queue, 1);
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
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "no further run");
    assert!(eventually(|| pool.metrics().scheduled_tasks == 0));
}

fn a_panic_ends_a_periodic_task_and_is_reported(queue: TimerQueue) {
    let (pool, seen) = pool_counting_panics(queue);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let h = pool
        .schedule_with_fixed_delay(
            move || {
                if r.fetch_add(1, Ordering::SeqCst) == 2 {
                    panic!("expected: third run panics");
                }
            },
            Duration::ZERO,
            Duration::from_millis(1),
        )
        .unwrap();
    match h.join_timeout(PATIENCE) {
        Err(chronopool::JoinTimeoutError::Failed(TaskError::Panicked(p))) => {
            assert_eq!(p.message(), Some("expected: third run panics"))
        }
        other => panic!("unexpected {other:?}"),
    }
    std::thread::sleep(Duration::from_millis(20));
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
    // Huge periods are fine: they saturate.
    let h = pool
        .schedule_at_fixed_rate(|| (), Duration::ZERO, Duration::MAX)
        .unwrap();
    assert!(eventually(
        || h.delay() > Duration::from_secs(3600 * 24 * 365)
    ));
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

fn shutdown_cancels_periodic_tasks_by_default(queue: TimerQueue) {
    let pool = pool(queue, 1);
    let (runs, h) = counting_fixed_rate(&pool, Duration::from_millis(2));
    assert!(eventually(|| runs.load(Ordering::SeqCst) >= 2));
    pool.shutdown();
    assert!(
        pool.await_termination(PATIENCE),
        "periodic tasks do not hold termination"
    );
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
}

fn periodic_tasks_can_be_kept_after_shutdown(queue: TimerQueue) {
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .keep_periodic_tasks_on_shutdown(true)
        .build()
        .unwrap();
    let (runs, h) = counting_fixed_rate(&pool, Duration::from_millis(2));
    pool.shutdown();
    let before = runs.load(Ordering::SeqCst);
    assert!(
        eventually(|| runs.load(Ordering::SeqCst) >= before + 3),
        "it keeps running"
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
    // A periodic task's later runs do not count as new tasks.
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .max_scheduled_tasks(1)
        .build()
        .unwrap();
    let (runs, h) = counting_fixed_rate(&pool, Duration::from_millis(1));
    assert!(eventually(|| runs.load(Ordering::SeqCst) >= 5));
    assert!(h.cancel());
}

common::backend_suites! {
    // A tiny wheel: most delays span many revolutions.
    small_hashed_wheel: TimerQueue::hashed_wheel_with(Duration::from_micros(50), 4),
    // A fine tick: the delays of the suite cross several levels.
    fine_hierarchical_wheel: TimerQueue::hierarchical_wheel_with(Duration::from_nanos(100)),
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

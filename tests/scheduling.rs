//! Tasks that run later: the behaviour suite, written once and run against
//! every delayed-queue backend (`backend_suite!` at the bottom).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool::{ScheduledExecutor, SubmitErrorKind, TaskError, TimerQueue};
use common::{block_on, eventually, DropCounter, PATIENCE};

fn pool(queue: TimerQueue, threads: usize) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(threads)
        .timer_queue(queue)
        .build()
        .unwrap()
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

/// Process-independent: the CPU time of the executor's own threads.
#[cfg(target_os = "linux")]
fn pool_threads_cpu_ticks() -> u64 {
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = entry.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with("idle-pool") && !comm.starts_with("chronopool-tim") {
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

#[cfg(target_os = "linux")]
fn many_timers_far_away_cost_no_cpu(queue: TimerQueue) {
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .thread_name("idle-pool")
        .timer_queue(queue)
        .build()
        .unwrap();
    for _ in 0..100_000 {
        drop(pool.schedule(|| (), Duration::from_secs(3600)).unwrap());
    }
    assert!(eventually(|| pool.metrics().scheduled_tasks == 100_000));
    std::thread::sleep(Duration::from_millis(100));
    // Other executors in this test binary have timer threads too; a
    // spinning timer would use ~100 ticks, so the bound has room for them.
    let before = pool_threads_cpu_ticks();
    std::thread::sleep(Duration::from_secs(1));
    let used = pool_threads_cpu_ticks() - before;
    assert!(
        used <= 10,
        "idle executor threads used {used} ticks (10 ms each) in 1 s"
    );
}

/// Instantiates the whole suite for one backend.
macro_rules! backend_suite {
    ($module:ident, $queue:expr) => {
        mod $module {
            use super::*;
            #[test]
            fn never_runs_before_its_due_instant() {
                super::never_runs_before_its_due_instant($queue)
            }
            #[test]
            fn zero_delays_and_past_instants_run_at_once() {
                super::zero_delays_and_past_instants_run_at_once($queue)
            }
            #[test]
            fn huge_delays_saturate_and_can_be_cancelled() {
                super::huge_delays_saturate_and_can_be_cancelled($queue)
            }
            #[test]
            fn equal_deadlines_run_in_submission_order() {
                super::equal_deadlines_run_in_submission_order($queue)
            }
            #[test]
            fn earlier_deadlines_run_first() {
                super::earlier_deadlines_run_first($queue)
            }
            #[test]
            fn an_earlier_task_rearms_the_timer() {
                super::an_earlier_task_rearms_the_timer($queue)
            }
            #[test]
            fn cancel_wins_before_the_deadline_and_drops_the_closure_at_once() {
                super::cancel_wins_before_the_deadline_and_drops_the_closure_at_once($queue)
            }
            #[test]
            fn cancelled_tasks_leave_the_timer_promptly() {
                super::cancelled_tasks_leave_the_timer_promptly($queue)
            }
            #[test]
            fn cancel_races_the_deadline_exactly_one_wins() {
                super::cancel_races_the_deadline_exactly_one_wins($queue)
            }
            #[test]
            fn a_scheduled_panic_is_isolated_and_reported() {
                super::a_scheduled_panic_is_isolated_and_reported($queue)
            }
            #[test]
            fn delay_counts_down() {
                super::delay_counts_down($queue)
            }
            #[test]
            fn a_scheduled_handle_is_a_future() {
                super::a_scheduled_handle_is_a_future($queue)
            }
            #[test]
            fn join_timeout_gives_the_scheduled_handle_back() {
                super::join_timeout_gives_the_scheduled_handle_back($queue)
            }
            #[test]
            fn delayed_tasks_still_run_after_shutdown_by_default() {
                super::delayed_tasks_still_run_after_shutdown_by_default($queue)
            }
            #[test]
            fn delayed_tasks_can_be_cancelled_by_shutdown() {
                super::delayed_tasks_can_be_cancelled_by_shutdown($queue)
            }
            #[test]
            fn shutdown_now_returns_delayed_tasks() {
                super::shutdown_now_returns_delayed_tasks($queue)
            }
            #[cfg(target_os = "linux")]
            #[test]
            fn many_timers_far_away_cost_no_cpu() {
                super::many_timers_far_away_cost_no_cpu($queue)
            }
        }
    };
}

backend_suite!(heap, TimerQueue::heap());

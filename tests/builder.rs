//! Configuration: errors instead of panics, thread names, stack size, hooks.
//!
//! The wheel settings are checked on a [`ManualClock`](chronopool::ManualClock)
//! (exact manual run times, no real waiting); `timer_spin` stays on the real
//! clock, since what it sets is the timer thread's real busy wait.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use std::time::Duration;

use chronopool::{
    BuildError, ManualClock, ScheduledExecutor, TimerQueue, MAX_TIMER_SPIN, MAX_WHEEL_SLOTS,
    MAX_WHEEL_TICK, MAX_WORKER_THREADS,
};
use common::PATIENCE;

#[test]
fn invalid_settings_are_errors_not_panics() {
    let err = ScheduledExecutor::builder()
        .worker_threads(0)
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::WorkerThreads(0)));
    assert!(err.to_string().contains("worker_threads"));
    let too_many = MAX_WORKER_THREADS + 1;
    assert!(matches!(
        ScheduledExecutor::builder().worker_threads(too_many).build(),
        Err(BuildError::WorkerThreads(n)) if n == too_many
    ));
    assert!(matches!(
        ScheduledExecutor::builder()
            .worker_threads(1)
            .stack_size(0)
            .build(),
        Err(BuildError::ZeroStackSize)
    ));
}

#[test]
fn invalid_wheel_settings_are_errors() {
    let build = |queue| {
        ScheduledExecutor::builder()
            .worker_threads(1)
            .timer_queue(queue)
            .build()
    };
    let too_long = MAX_WHEEL_TICK + Duration::from_nanos(1);
    for tick in [Duration::ZERO, too_long, Duration::MAX] {
        let err = build(TimerQueue::hashed_wheel_with(tick, 512)).unwrap_err();
        assert!(
            matches!(err, BuildError::WheelTick(t) if t == tick),
            "{err}"
        );
        assert!(err.to_string().contains("tick"));
        let err = build(TimerQueue::hierarchical_wheel_with(tick)).unwrap_err();
        assert!(matches!(err, BuildError::WheelTick(t) if t == tick));
    }
    for slots in [0, MAX_WHEEL_SLOTS + 1, usize::MAX] {
        let err = build(TimerQueue::hashed_wheel_with(
            Duration::from_millis(1),
            slots,
        ));
        assert!(matches!(err, Err(BuildError::WheelSlots(s)) if s == slots));
    }
    // The limits themselves are accepted (`runs_at` unwraps the build)
    // and work: on a manual clock (ticks count from its start), a task 1 ms
    // ahead on a 1 h tick waits for the next full hour, to the nanosecond.
    let hour = MAX_WHEEL_TICK;
    for queue in [
        TimerQueue::hashed_wheel_with(MAX_WHEEL_TICK, MAX_WHEEL_SLOTS),
        TimerQueue::hierarchical_wheel_with(MAX_WHEEL_TICK),
    ] {
        let ran = runs_at(queue, &[Duration::from_millis(1)], &[hour]);
        assert_eq!(ran, [hour], "{queue:?}");
    }
    // A 1 ns tick, or slots not a power of two (rounded up, as Netty
    // does), work: on a manual clock, tasks due within the first revolution
    // and many revolutions on (1,000 and 1,024 slots of 1 ms) run exactly
    // at their deadlines, not a nanosecond early or late.
    let ms = Duration::from_millis;
    let delays = [ms(1), ms(999), ms(1000), ms(1024), ms(1500), ms(5001)];
    for queue in [
        TimerQueue::hierarchical_wheel_with(Duration::from_nanos(1)),
        TimerQueue::hashed_wheel_with(Duration::from_nanos(1), 1),
        TimerQueue::hashed_wheel_with(Duration::from_millis(1), 1000),
    ] {
        assert_eq!(runs_at(queue, &delays, &delays), delays, "{queue:?}");
    }
}

/// Builds a one-worker pool with `queue` on a manual clock (the build must
/// succeed) and schedules a task at each of `delays`; moves the clock to a
/// nanosecond before each of `due` (ascending), asserting that the task
/// due then has not run, and then past the last; returns the manual time
/// (since the start) each task ran at. (Each move goes through every
/// deadline on the way, so a task runs at the time its queue says it is
/// due, not at the end of a move.)
fn runs_at(queue: TimerQueue, delays: &[Duration], due: &[Duration]) -> Vec<Duration> {
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .timer_queue(queue)
        .clock(clock.clone())
        .build()
        .unwrap();
    let start = clock.now();
    let handles: Vec<_> = delays
        .iter()
        .map(|&delay| {
            let c = clock.clone();
            pool.schedule(move || c.now() - start, delay).unwrap()
        })
        .collect();
    for (handle, &due) in handles.iter().zip(due) {
        clock.advance(
            (start + due - Duration::from_nanos(1)).saturating_duration_since(clock.now()),
        );
        assert!(!handle.is_finished(), "{queue:?}: ran before {due:?}");
    }
    clock.advance(2 * MAX_WHEEL_TICK);
    handles
        .into_iter()
        .map(|h| {
            assert!(h.is_finished(), "{queue:?}: not run");
            h.join().unwrap()
        })
        .collect()
}

#[test]
fn a_timer_spin_past_the_limit_is_an_error_and_with_any_other_no_task_runs_early() {
    let build = |spin| {
        ScheduledExecutor::builder()
            .worker_threads(1)
            .timer_spin(spin)
            .build()
    };
    for spin in [MAX_TIMER_SPIN + Duration::from_nanos(1), Duration::MAX] {
        let err = build(spin).unwrap_err();
        assert!(matches!(err, BuildError::TimerSpin(s) if s == spin));
        assert!(err.to_string().contains("timer_spin"), "{err}");
    }
    // A spin as long as the limit, none, and the default: a few timers, each
    // waited for long enough that the timer thread spins before it (if the
    // setting lets it), never start early. On the real clock on purpose:
    // the spin is the timer thread's real busy wait before a deadline,
    // which a manual clock (whose timer thread never waits) never reaches.
    for spin in [MAX_TIMER_SPIN, Duration::ZERO, Duration::from_micros(100)] {
        let pool = build(spin).unwrap();
        for delay_ms in [1, 3, 6] {
            let delay = Duration::from_millis(delay_ms);
            let scheduled = std::time::Instant::now();
            let ran = pool
                .schedule(std::time::Instant::now, delay)
                .unwrap()
                .join_timeout(PATIENCE)
                .unwrap();
            assert!(
                ran >= scheduled + delay,
                "{spin:?}: ran before its deadline"
            );
        }
    }
}

#[test]
fn a_thread_the_os_refuses_is_an_error_and_started_ones_are_stopped() {
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    let (s1, s2) = (started.clone(), stopped.clone());
    let result = ScheduledExecutor::builder()
        .worker_threads(2)
        .stack_size(1 << 62) // no machine has that much address space
        .on_thread_start(move || {
            s1.fetch_add(1, Ordering::SeqCst);
        })
        .on_thread_stop(move || {
            s2.fetch_add(1, Ordering::SeqCst);
        })
        .build();
    match result {
        Err(BuildError::Spawn(e)) => assert!(!e.to_string().is_empty()),
        other => panic!("expected a spawn error, got {other:?}"),
    }
    assert_eq!(
        started.load(Ordering::SeqCst),
        stopped.load(Ordering::SeqCst)
    );
}

#[test]
fn default_worker_count_is_the_cpu_count() {
    let pool = ScheduledExecutor::new().unwrap();
    assert_eq!(pool.metrics().worker_threads, num_cpus::get());
}

fn names(pool: &ScheduledExecutor, threads: usize) -> Vec<String> {
    // Occupy every worker at once so that each reports its own name.
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let b = barrier.clone();
            pool.submit(move || {
                b.wait();
                std::thread::current().name().unwrap().to_owned()
            })
            .unwrap()
        })
        .collect();
    let mut names: Vec<_> = handles
        .into_iter()
        .map(|h| h.join_timeout(PATIENCE).unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn threads_are_named_by_prefix_or_by_function() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .thread_name("app-worker")
        .build()
        .unwrap();
    assert_eq!(names(&pool, 2), ["app-worker-0", "app-worker-1"]);
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .thread_name_fn(|i| format!("timer #{i}"))
        .build()
        .unwrap();
    assert_eq!(names(&pool, 2), ["timer #0", "timer #1"]);
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    assert_eq!(names(&pool, 1), ["chronopool-0"]);
}

#[test]
fn stack_size_is_applied() {
    // A task that needs ~6 MiB of stack runs on 16 MiB workers.
    fn deep(n: u32) -> u32 {
        let pad = std::hint::black_box([0u8; 1024]);
        if n == 0 {
            u32::from(pad[0])
        } else {
            deep(n - 1) + u32::from(pad[1])
        }
    }
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .stack_size(16 << 20)
        .build()
        .unwrap();
    assert_eq!(pool.submit(|| deep(6_000)).unwrap().join().unwrap(), 0);
}

#[test]
fn start_and_stop_hooks_run_once_per_thread_on_that_thread() {
    let started = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stopped = Arc::new(AtomicUsize::new(0));
    let (s1, s2) = (started.clone(), stopped.clone());
    let pool = ScheduledExecutor::builder()
        .worker_threads(3)
        .thread_name("hooked")
        .on_thread_start(move || {
            s1.lock()
                .unwrap()
                .push(std::thread::current().name().unwrap().to_owned())
        })
        .on_thread_stop(move || {
            s2.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    assert!(common::eventually(|| started.lock().unwrap().len() == 3));
    let mut names = started.lock().unwrap().clone();
    names.sort();
    assert_eq!(names, ["hooked-0", "hooked-1", "hooked-2"]);
    pool.shutdown();
    assert!(pool.await_termination(PATIENCE));
    assert_eq!(stopped.load(Ordering::SeqCst), 3);
}

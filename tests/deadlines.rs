//! Tasks with a time-out (`submit_with_timeout`, `submit_with_timeout_or`)
//! and the cooperative stop (`chronopool::cancelled`): a time-out before
//! the start, during the run, after the end, and racing the start; the
//! fallback; a late `cancel()` and `shutdown_now` seen by the running
//! task. Real clock, with bounds that hold on a loaded machine (a time-out
//! is never early; nothing here waits for a time-out it should not).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use chronopool::{ScheduledExecutor, TaskError, TimerQueue};
use common::{eventually, quiet_expected_panics, PATIENCE};

const MS: Duration = Duration::from_millis(1);

fn pool(threads: usize) -> ScheduledExecutor {
    common::pool(TimerQueue::heap(), threads)
}

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Occupies the pool's only worker until the returned sender is dropped
/// (or sent to); returns once the worker is taken.
fn occupy(pool: &ScheduledExecutor) -> mpsc::Sender<()> {
    let (release, released) = mpsc::channel::<()>();
    let (started, start) = mpsc::channel();
    drop(pool.execute(move || {
        started.send(()).unwrap();
        let _ = released.recv();
    }));
    start.recv().unwrap();
    release
}

#[test]
fn a_task_not_started_by_its_time_out_never_runs_and_its_closure_is_dropped_then() {
    let pool = pool(1);
    let release = occupy(&pool);
    let (ran, drops) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (r, capture) = (ran.clone(), Counted(drops.clone()));
    let start = Instant::now();
    let handle = pool
        .submit_with_timeout(
            move || {
                let _capture = capture;
                r.store(true, Ordering::SeqCst);
            },
            20 * MS,
        )
        .unwrap();
    // The worker is still busy: the join returns on the time-out alone.
    assert!(matches!(handle.join(), Err(TaskError::TimedOut)));
    assert!(start.elapsed() >= 20 * MS, "never early");
    // Dropped by the time-out, just after it settled the task.
    assert!(eventually(|| drops.load(Ordering::SeqCst) == 1));
    drop(release);
    assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
    assert!(!ran.load(Ordering::SeqCst), "it never ran");
}

#[test]
fn a_running_task_is_asked_to_stop_and_its_handle_settles_at_once() {
    let pool = pool(1);
    let (saw_stop, output_drops) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (seen, drops) = (saw_stop.clone(), output_drops.clone());
    let (started, start) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let handle = pool
        .submit_with_timeout(
            move || {
                started.send(()).unwrap();
                while !chronopool::cancelled() {
                    std::thread::sleep(MS);
                }
                seen.store(true, Ordering::SeqCst);
                // Holds the run until the test has seen the handle settle.
                let _ = released.recv();
                Counted(drops)
            },
            20 * MS,
        )
        .unwrap();
    start.recv().unwrap();
    let joined = Instant::now();
    assert!(matches!(handle.join(), Err(TaskError::TimedOut)));
    assert!(joined.elapsed() < PATIENCE);
    assert!(
        eventually(|| saw_stop.load(Ordering::SeqCst)),
        "cancelled() turned true"
    );
    assert_eq!(output_drops.load(Ordering::SeqCst), 0, "still running");
    drop(release);
    assert!(
        eventually(|| output_drops.load(Ordering::SeqCst) == 1),
        "the late output is dropped"
    );
}

#[test]
fn a_task_done_before_its_time_out_leaves_nothing_in_the_timer() {
    let pool = pool(2);
    let handles: Vec<_> = (0..1000)
        .map(|i| {
            pool.submit_with_timeout(move || i, Duration::from_secs(3600))
                .unwrap()
        })
        .collect();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 999 * 1000 / 2);
    // The time-outs are swept out, not kept for an hour...
    assert!(eventually(|| pool.metrics().scheduled_tasks == 0));
    // ...so a graceful shutdown does not wait for them.
    pool.shutdown();
    assert!(pool.await_termination(PATIENCE));
}

#[test]
fn the_fallback_gives_the_value_of_a_timed_out_task_and_only_then() {
    quiet_expected_panics();
    let pool = pool(1);
    let release = occupy(&pool);
    let fallbacks = Arc::new(AtomicUsize::new(0));
    let f = fallbacks.clone();
    let late = pool
        .submit_with_timeout_or(
            || 1,
            10 * MS,
            move || {
                f.fetch_add(1, Ordering::SeqCst);
                2
            },
        )
        .unwrap();
    assert_eq!(late.join().unwrap(), 2);
    let panicking = pool
        .submit_with_timeout_or(
            || 1,
            10 * MS,
            || -> u8 { panic!("expected: a fallback panicked") },
        )
        .unwrap();
    match panicking.join() {
        Err(TaskError::Panicked(p)) => {
            assert_eq!(p.message(), Some("expected: a fallback panicked"))
        }
        other => panic!("unexpected {other:?}"),
    }
    drop(release);
    let f = fallbacks.clone();
    let quick = pool
        .submit_with_timeout_or(
            || 3,
            Duration::from_secs(3600),
            move || {
                f.fetch_add(1, Ordering::SeqCst);
                4
            },
        )
        .unwrap();
    assert_eq!(quick.join().unwrap(), 3);
    assert_eq!(
        fallbacks.load(Ordering::SeqCst),
        1,
        "only the timed-out one"
    );
}

#[test]
fn a_time_out_racing_the_start_is_settled_one_way_exactly() {
    for queue in [TimerQueue::heap(), TimerQueue::hierarchical_wheel()] {
        let pool = common::pool(queue, 2);
        const N: usize = 5000;
        let (ran, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let (ran, capture) = (ran.clone(), Counted(drops.clone()));
                let handle = pool
                    .submit_with_timeout(
                        move || {
                            let _capture = capture;
                            ran.fetch_add(1, Ordering::SeqCst);
                            i
                        },
                        Duration::from_micros((i % 50) as u64),
                    )
                    .unwrap();
                (i, handle)
            })
            .collect();
        let (mut ok, mut timed_out) = (0, 0);
        for (i, handle) in handles {
            match handle.join() {
                Ok(v) => {
                    assert_eq!(v, i);
                    ok += 1;
                }
                Err(TaskError::TimedOut) => timed_out += 1,
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert_eq!(ok + timed_out, N);
        let ran = ran.load(Ordering::SeqCst);
        assert!(ran >= ok, "every Ok ran");
        assert!(ran <= N);
        assert!(
            eventually(|| drops.load(Ordering::SeqCst) == N),
            "each closure dropped once"
        );
        assert!(eventually(|| pool.metrics().scheduled_tasks == 0));
    }
}

#[test]
fn a_late_cancel_and_shutdown_now_ask_the_running_task_to_stop() {
    let pool = pool(1);
    let (started, start) = mpsc::channel();
    let task = pool
        .submit(move || {
            started.send(()).unwrap();
            while !chronopool::cancelled() {
                std::thread::yield_now();
            }
            "stopped"
        })
        .unwrap();
    start.recv().unwrap();
    assert!(!task.cancel(), "it had started");
    assert_eq!(task.join().unwrap(), "stopped");

    let (started, start) = mpsc::channel();
    let stopped = Arc::new(AtomicBool::new(false));
    let s = stopped.clone();
    pool.execute(move || {
        // Before the test may call shutdown_now.
        assert!(!chronopool::cancelled(), "not yet");
        started.send(()).unwrap();
        while !chronopool::cancelled() {
            std::thread::yield_now();
        }
        s.store(true, Ordering::SeqCst);
    })
    .unwrap();
    start.recv().unwrap();
    assert!(pool.shutdown_now().is_empty());
    assert!(pool.await_termination(PATIENCE));
    assert!(stopped.load(Ordering::SeqCst));
    assert!(!chronopool::cancelled(), "false outside a task");
}

#[test]
fn a_periodic_task_cancelled_during_its_run_sees_it() {
    let pool = pool(1);
    let (started, start) = mpsc::channel();
    let saw = Arc::new(AtomicBool::new(false));
    let s = saw.clone();
    let beat = pool
        .schedule_at_fixed_rate(
            move || {
                let _ = started.send(());
                let begun = Instant::now();
                while !chronopool::cancelled() && begun.elapsed() < PATIENCE {
                    std::thread::yield_now();
                }
                s.store(chronopool::cancelled(), Ordering::SeqCst);
            },
            Duration::ZERO,
            Duration::from_secs(3600),
        )
        .unwrap();
    start.recv().unwrap();
    assert!(beat.cancel(), "no further run");
    assert!(beat.join().unwrap_err().is_cancelled());
    assert!(saw.load(Ordering::SeqCst));
}

#[test]
fn a_closure_that_panics_on_drop_at_its_time_out_is_reported() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("expected: a closure's capture panicked on drop");
        }
    }
    let (pool, panics) = common::counting_panics(ScheduledExecutor::builder().worker_threads(1));
    let release = occupy(&pool);
    let bomb = Bomb;
    let handle = pool
        .submit_with_timeout(
            move || {
                let _bomb = &bomb;
            },
            5 * MS,
        )
        .unwrap();
    assert!(handle.join().unwrap_err().is_timed_out());
    assert!(eventually(|| panics.load(Ordering::SeqCst) == 1));
    drop(release);
    assert_eq!(pool.submit(|| 9).unwrap().join().unwrap(), 9);
}

//! A panicking task never takes its worker down; every panic is reported.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use chronopool::{ScheduledExecutor, TaskError};
use common::{eventually, PATIENCE};

/// The ids of the threads that run `rounds` tasks on `pool` (each task
/// sleeps a little so that both workers take part).
fn worker_ids(pool: &ScheduledExecutor, rounds: usize) -> HashSet<ThreadId> {
    let handles: Vec<_> = (0..rounds)
        .map(|_| {
            pool.submit(|| {
                std::thread::sleep(std::time::Duration::from_millis(2));
                std::thread::current().id()
            })
            .unwrap()
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join_timeout(PATIENCE).unwrap())
        .collect()
}

#[test]
fn a_hundred_thousand_panics_leave_the_same_two_workers_running() {
    common::quiet_expected_panics();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .on_panic(move |p| {
            assert_eq!(p.message(), Some("expected: task panic"));
            s.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let before = worker_ids(&pool, 64);
    assert_eq!(before.len(), 2);

    const N: usize = 100_000;
    let mut handles = Vec::new();
    for i in 0..N {
        match i % 3 {
            // Fire and forget.
            0 => pool.execute(|| panic!("expected: task panic")).unwrap(),
            // A handle that is dropped at once.
            1 => drop(
                pool.submit(|| -> u8 { panic!("expected: task panic") })
                    .unwrap(),
            ),
            // A handle that is joined.
            _ => handles.push(
                pool.submit(|| -> u8 { panic!("expected: task panic") })
                    .unwrap(),
            ),
        }
    }
    for h in handles {
        match h.join() {
            Err(TaskError::Panicked(p)) => assert_eq!(p.message(), Some("expected: task panic")),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        eventually(|| seen.load(Ordering::SeqCst) == N),
        "every panic reached the hook"
    );
    assert!(eventually(|| pool.metrics().panicked_tasks == N as u64));

    let after = worker_ids(&pool, 64);
    assert_eq!(after, before, "the same two threads still run tasks");
    assert_eq!(pool.metrics().worker_threads, 2);
}

#[test]
fn a_panicking_hook_does_not_kill_the_worker() {
    common::quiet_expected_panics();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .on_panic(|_| panic!("expected: hook panic"))
        .build()
        .unwrap();
    let err = pool
        .submit(|| -> u8 { panic!("expected: task panic") })
        .unwrap()
        .join();
    assert!(matches!(err, Err(TaskError::Panicked(_))));
    assert_eq!(pool.submit(|| 5).unwrap().join().unwrap(), 5);
}

struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("expected: output destructor panic");
    }
}

#[test]
fn a_panic_dropping_an_unwanted_output_is_reported_not_fatal() {
    common::quiet_expected_panics();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .on_panic(move |p| s.lock().unwrap().push(p.message().map(str::to_owned)))
        .build()
        .unwrap();
    // The handle is dropped, so the worker drops the output, which panics.
    let gate = common::Gate::new();
    let g = gate.waiter();
    let handle = pool
        .submit(move || {
            g.wait();
            PanicsOnDrop
        })
        .unwrap();
    drop(handle);
    gate.open();
    assert!(eventually(|| !seen.lock().unwrap().is_empty()));
    assert_eq!(
        seen.lock().unwrap()[0].as_deref(),
        Some("expected: output destructor panic")
    );
    assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
}

#[test]
fn a_panicking_thread_start_hook_still_leaves_a_working_pool() {
    common::quiet_expected_panics();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .on_thread_start(|| panic!("expected: start hook panic"))
        .build()
        .unwrap();
    assert_eq!(worker_ids(&pool, 16).len(), 2);
}

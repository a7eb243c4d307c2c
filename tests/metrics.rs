//! `ScheduledExecutor::metrics`.

mod common;

use std::sync::mpsc;

use chronopool::ScheduledExecutor;
use common::{eventually, Gate, PATIENCE};

#[test]
fn metrics_count_workers_activity_queue_completions_and_panics() {
    common::quiet_expected_panics();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    let m = pool.metrics();
    assert_eq!(
        (m.worker_threads, m.active_workers, m.queued_tasks),
        (2, 0, 0)
    );
    assert_eq!((m.completed_tasks, m.panicked_tasks), (0, 0));

    // Two busy workers, five queued tasks.
    let gate = Gate::new();
    let (started_tx, started) = mpsc::channel();
    for _ in 0..2 {
        let (g, tx) = (gate.waiter(), started_tx.clone());
        pool.execute(move || {
            tx.send(()).unwrap();
            g.wait();
        })
        .unwrap();
    }
    started.recv_timeout(PATIENCE).unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    let queued: Vec<_> = (0..5).map(|_| pool.submit(|| ()).unwrap()).collect();
    let m = pool.metrics();
    assert_eq!(m.active_workers, 2);
    assert_eq!(m.queued_tasks, 5);

    gate.open();
    for h in queued {
        h.join().unwrap();
    }
    let _ = pool
        .submit(|| panic!("expected: counted panic"))
        .unwrap()
        .join();
    assert!(eventually(|| {
        let m = pool.metrics();
        m.completed_tasks == 8
            && m.panicked_tasks == 1
            && m.active_workers == 0
            && m.queued_tasks == 0
    }));

    // A cancelled task never runs and is not counted.
    let gate = Gate::new();
    let g = gate.waiter();
    pool.execute(move || g.wait()).unwrap();
    let g = gate.waiter();
    pool.execute(move || g.wait()).unwrap();
    let cancelled = pool.submit(|| ()).unwrap();
    assert!(cancelled.cancel());
    gate.open();
    assert!(eventually(
        || pool.metrics().completed_tasks == 10 && pool.metrics().queued_tasks == 0
    ));
}

#[test]
fn a_worker_helping_a_join_stays_active() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let gate = Gate::new();
    let g = gate.waiter();
    let (tx, rx) = mpsc::channel();
    let parent = pool
        .submit(move || {
            // Runs on the only worker; the join helps by running the child.
            let child = chronopool::submit(|| ()).unwrap();
            child.join().unwrap();
            tx.send(()).unwrap();
            g.wait();
        })
        .unwrap();
    rx.recv_timeout(PATIENCE).unwrap();
    let active = pool.metrics().active_workers;
    gate.open();
    parent.join().unwrap();
    assert_eq!(active, 1, "the parent was still running");
}

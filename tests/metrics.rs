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

/// The lateness histogram reads back a lateness the manual clock injects:
/// tasks due at 10 ms, and a jump to 50 ms (a suspended process waking),
/// start 40 ms late, every one; those run on time by `advance` add zeros.
#[test]
fn lateness_reads_back_an_injected_lateness() {
    use std::time::Duration;
    let (pool, clock) = common::manual_pool(chronopool::TimerQueue::heap(), 2);
    const MS: Duration = Duration::from_millis(1);
    let late: Vec<_> = (0..99)
        .map(|_| pool.schedule(|| (), 10 * MS).unwrap())
        .collect();
    clock.jump(50 * MS);
    for task in late {
        task.join().unwrap();
    }
    let m = pool.metrics().lateness;
    assert_eq!(m.runs, 99);
    assert_eq!(m.max, 40 * MS, "exact");
    for (name, p) in [("p50", m.p50), ("p99", m.p99)] {
        assert!(
            p >= 40 * MS && p <= 45 * MS,
            "{name} {p:?} within an eighth above 40 ms"
        );
    }
    // 101 more, on time: the median drops to zero, the p99 stays late.
    let on_time: Vec<_> = (0..101)
        .map(|_| pool.schedule(|| (), MS).unwrap())
        .collect();
    clock.advance(MS);
    for task in on_time {
        task.join().unwrap();
    }
    let m = pool.metrics().lateness;
    assert_eq!(m.runs, 200);
    assert_eq!(m.p50, Duration::ZERO);
    assert!(m.p99 >= 40 * MS && m.max == 40 * MS);
    // Periodic runs are recorded too.
    let beat = pool.schedule_at_fixed_rate(|| (), 5 * MS, 5 * MS).unwrap();
    clock.advance(20 * MS);
    beat.cancel();
    assert_eq!(pool.metrics().lateness.runs, 204);
}

#[test]
fn rejections_and_time_outs_are_counted() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let gate = Gate::new();
    let waiter = gate.waiter();
    let (started, start) = mpsc::channel();
    pool.execute(move || {
        started.send(()).unwrap();
        waiter.wait();
    })
    .unwrap();
    start.recv().unwrap();
    let late = pool
        .submit_with_timeout(|| (), std::time::Duration::from_millis(5))
        .unwrap();
    assert!(late.join().unwrap_err().is_timed_out());
    // Counted by the timer thread as it times the task out.
    assert!(eventually(|| pool.metrics().timed_out_tasks == 1));
    gate.open();
    pool.shutdown();
    assert!(pool.submit(|| ()).is_err());
    assert!(pool
        .schedule(|| (), std::time::Duration::from_secs(1))
        .is_err());
    assert_eq!(pool.metrics().rejected_tasks, 2);
    assert!(pool.await_termination(PATIENCE));
    assert!(eventually(|| pool.metrics().active_workers == 0));
}

/// A fixed-rate task late by 35 ms: with `Skip` the runs due meanwhile are
/// counted skipped, with `Delay` the shift is one delayed run, with `Burst`
/// neither (it catches up).
#[test]
fn missed_runs_are_counted_by_policy() {
    use chronopool::MissedRuns;
    use std::time::Duration;
    const MS: Duration = Duration::from_millis(1);
    for (missed, skipped, delayed) in [
        (MissedRuns::Skip, 3, 0),
        (MissedRuns::Delay, 0, 1),
        (MissedRuns::Burst, 0, 0),
    ] {
        let (pool, clock) = common::manual_pool(chronopool::TimerQueue::heap(), 1);
        let beat = pool
            .schedule_at_fixed_rate_with(|| (), 10 * MS, 10 * MS, missed)
            .unwrap();
        // Due at 10; runs at 45; Skip goes on at 50 (20, 30, 40 skipped),
        // Delay at 55, Burst at 20 at once.
        clock.jump(45 * MS);
        beat.cancel();
        let m = pool.metrics();
        assert_eq!(
            (m.skipped_runs, m.delayed_runs),
            (skipped, delayed),
            "{missed:?}"
        );
    }
}

/// Cancels through handles are counted once each, whether the timer sweeps
/// the task out or a worker reaches it; stale entries of a rescheduled task
/// and discards by a shutdown are not cancels.
#[test]
fn cancels_through_handles_are_counted_once() {
    use std::time::Duration;
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    // In the timer: swept out.
    let far: Vec<_> = (0..100)
        .map(|_| pool.schedule(|| (), Duration::from_secs(3600)).unwrap())
        .collect();
    for handle in &far[..60] {
        assert!(handle.cancel());
    }
    assert!(eventually(|| pool.metrics().cancelled_tasks == 60));
    // In the queue: skipped by the worker.
    let gate = Gate::new();
    let waiter = gate.waiter();
    pool.execute(move || waiter.wait()).unwrap();
    let queued: Vec<_> = (0..10).map(|_| pool.submit(|| ()).unwrap()).collect();
    for handle in &queued {
        assert!(handle.cancel());
    }
    gate.open();
    assert!(eventually(|| pool.metrics().cancelled_tasks == 70));
    // A periodic task rescheduled (its old entry goes stale), then
    // cancelled between runs: one cancel. (Its new trigger starts in two
    // hours: one that started at once could be running when the cancel
    // comes, a cancel during a run, which `cancelled_tasks` does not count.)
    let beat = pool
        .schedule_at_fixed_rate(|| (), Duration::from_secs(3600), Duration::from_secs(3600))
        .unwrap();
    let two_hours = Duration::from_secs(7200);
    assert!(
        beat.reschedule(chronopool::trigger::FixedRate::new(two_hours).initial_delay(two_hours))
    );
    assert!(beat.cancel());
    assert!(eventually(|| pool.metrics().cancelled_tasks == 71));
    // A shutdown that discards the remaining 40 does not count them.
    drop(far);
    let m = pool.metrics();
    pool.shutdown_now();
    assert!(pool.await_termination(PATIENCE));
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(pool.metrics().cancelled_tasks, m.cancelled_tasks);
}

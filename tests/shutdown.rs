//! Shutting down loses nothing: queued work runs (shutdown) or comes back
//! (shutdown_now), later submissions get their job back, drop joins.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use chronopool::{ScheduledExecutor, SubmitErrorKind, TaskError};
use common::{eventually, Gate, PATIENCE};

fn pool(threads: usize) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(threads)
        .build()
        .unwrap()
}

/// Occupies every worker of `pool` until the returned gate opens.
fn block_workers(pool: &ScheduledExecutor, threads: usize) -> Gate {
    let gate = Gate::new();
    let (started_tx, started) = mpsc::channel();
    for _ in 0..threads {
        let (g, tx) = (gate.waiter(), started_tx.clone());
        pool.execute(move || {
            tx.send(()).unwrap();
            g.wait();
        })
        .unwrap();
    }
    for _ in 0..threads {
        started.recv_timeout(PATIENCE).unwrap();
    }
    gate
}

#[test]
fn shutdown_lets_queued_work_finish_then_terminates() {
    let pool = pool(2);
    let gate = block_workers(&pool, 2);
    let ran = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..100)
        .map(|_| {
            let ran = ran.clone();
            pool.submit(move || ran.fetch_add(1, Ordering::SeqCst))
                .unwrap()
        })
        .collect();
    pool.shutdown();
    assert!(pool.is_shutdown());
    assert!(!pool.is_terminated());
    assert!(
        !pool.await_termination(Duration::from_millis(20)),
        "work is still queued"
    );
    gate.open();
    assert!(pool.await_termination(PATIENCE));
    assert!(pool.is_terminated());
    assert_eq!(ran.load(Ordering::SeqCst), 100);
    for h in handles {
        assert!(h.join().is_ok());
    }
    pool.shutdown(); // again: nothing happens
}

#[test]
fn a_submission_after_shutdown_gets_its_job_back() {
    let pool = pool(1);
    pool.shutdown();
    let err = pool.submit(|| 41 + 1).unwrap_err();
    assert_eq!(err.kind(), SubmitErrorKind::Shutdown);
    assert!(err.to_string().contains("shut down"));
    assert_eq!((err.into_inner())(), 42);

    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let err = pool.execute(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    let job = err.unwrap_err().into_inner();
    job();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(pool.await_termination(PATIENCE));
}

#[test]
fn a_submission_from_inside_after_shutdown_gets_its_job_back() {
    let pool = pool(1);
    let (tx, rx) = mpsc::channel();
    let gate = Gate::new();
    let g = gate.waiter();
    pool.execute(move || {
        g.wait();
        let refused = chronopool::submit(|| 3).unwrap_err();
        tx.send((refused.kind(), (refused.into_inner())())).unwrap();
    })
    .unwrap();
    pool.shutdown();
    gate.open();
    assert_eq!(
        rx.recv_timeout(PATIENCE).unwrap(),
        (SubmitErrorKind::Shutdown, 3)
    );
    assert!(pool.await_termination(PATIENCE));
}

#[test]
fn shutdown_now_returns_what_never_started_and_running_tasks_finish() {
    let pool = pool(2);
    let gate = block_workers(&pool, 2);
    let ran = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..50)
        .map(|i| {
            let ran = ran.clone();
            pool.submit(move || {
                ran.fetch_add(1, Ordering::SeqCst);
                i
            })
            .unwrap()
        })
        .collect();
    let detached = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        let d = detached.clone();
        pool.execute(move || {
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    let pending = pool.shutdown_now();
    assert_eq!(pending.len(), 60);
    assert!(pool.is_shutdown());
    assert!(matches!(pool.submit(|| 0), Err(e) if e.kind() == SubmitErrorKind::Shutdown));

    // Run half of them here, drop the rest.
    let mut pending = pending;
    let dropped = pending.split_off(30);
    for task in pending {
        task.run();
    }
    drop(dropped);
    gate.open();
    assert!(pool.await_termination(PATIENCE));

    let (mut ok, mut cancelled) = (0, 0);
    for h in handles {
        match h.join() {
            Ok(_) => ok += 1,
            Err(TaskError::Cancelled) => cancelled += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    let total_ran = ran.load(Ordering::SeqCst) + detached.load(Ordering::SeqCst);
    assert_eq!(total_ran, 30, "exactly the tasks run by the caller ran");
    assert_eq!(ok, ran.load(Ordering::SeqCst));
    assert_eq!(ok + cancelled, 50);
}

#[test]
fn a_returned_task_that_panics_reports_to_its_handle_and_the_hook() {
    common::quiet_expected_panics();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .on_panic(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let gate = block_workers(&pool, 1);
    let handle = pool
        .submit(|| -> u8 { panic!("expected: returned task panics") })
        .unwrap();
    let pending = pool.shutdown_now();
    assert_eq!(pending.len(), 1);
    for task in pending {
        task.run(); // does not unwind into the caller
    }
    assert!(matches!(handle.join(), Err(TaskError::Panicked(_))));
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    gate.open();
    assert!(pool.await_termination(PATIENCE));
}

/// Exact accounting for the race between submitters (outside and inside the
/// pool) and `shutdown_now`: every task whose submission was accepted runs
/// exactly once, on a worker or by the caller of `shutdown_now`; no refused
/// one runs.
#[test]
fn every_accepted_task_runs_exactly_once_or_is_returned_under_shutdown_now() {
    const OUTER: usize = 100_000;
    struct Ledger {
        next: AtomicUsize,
        accepted: Vec<AtomicUsize>,
        runs: Vec<AtomicUsize>,
    }
    for round in 0..10 {
        let ledger = Arc::new(Ledger {
            next: AtomicUsize::new(0),
            accepted: (0..2 * OUTER).map(|_| AtomicUsize::new(0)).collect(),
            runs: (0..2 * OUTER).map(|_| AtomicUsize::new(0)).collect(),
        });
        let pool = pool(2);
        let submitters: Vec<_> = (0..2)
            .map(|_| {
                let (pool, ledger) = (pool.clone(), ledger.clone());
                std::thread::spawn(move || loop {
                    let id = ledger.next.fetch_add(1, Ordering::SeqCst);
                    if id >= OUTER {
                        return;
                    }
                    let l = ledger.clone();
                    let job = move || {
                        l.runs[id].fetch_add(1, Ordering::SeqCst);
                        let inner = OUTER + id;
                        let l2 = l.clone();
                        let accepted = chronopool::execute(move || {
                            l2.runs[inner].fetch_add(1, Ordering::SeqCst);
                        });
                        if accepted.is_ok() {
                            l.accepted[inner].store(1, Ordering::SeqCst);
                        }
                    };
                    match pool.execute(job) {
                        Ok(()) => ledger.accepted[id].store(1, Ordering::SeqCst),
                        Err(_) => return,
                    }
                })
            })
            .collect();
        // Let the submitters get going (on a loaded machine they may start
        // late), then shut down at a varying point of their run.
        assert!(eventually(|| ledger.next.load(Ordering::SeqCst) > 1_000));
        std::thread::sleep(Duration::from_micros(200 * round as u64));
        let returned = pool.shutdown_now();
        for s in submitters {
            s.join().unwrap();
        }
        assert!(pool.await_termination(PATIENCE), "round {round}");
        let n_returned = returned.len();
        for task in returned {
            task.run();
        }
        let n_accepted: usize = ledger
            .accepted
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .sum();
        eprintln!("round {round}: {n_accepted} accepted, {n_returned} returned by shutdown_now");
        for id in 0..2 * OUTER {
            let (accepted, runs) = (
                ledger.accepted[id].load(Ordering::SeqCst),
                ledger.runs[id].load(Ordering::SeqCst),
            );
            assert_eq!(
                runs, accepted,
                "round {round}: task {id} accepted {accepted}, ran {runs} times"
            );
        }
    }
}

#[test]
fn dropping_the_last_handle_shuts_down_and_joins_the_workers() {
    let stopped = Arc::new(AtomicUsize::new(0));
    let s = stopped.clone();
    let pool = ScheduledExecutor::builder()
        .worker_threads(3)
        .on_thread_stop(move || {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        let r = ran.clone();
        pool.execute(move || {
            std::thread::sleep(Duration::from_micros(100));
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    let clone = pool.clone();
    drop(pool);
    assert_eq!(
        stopped.load(Ordering::SeqCst),
        0,
        "a clone keeps it running"
    );
    drop(clone);
    // Drop returned only after the workers were joined: no waiting here.
    assert_eq!(stopped.load(Ordering::SeqCst), 3);
    assert_eq!(ran.load(Ordering::SeqCst), 100, "queued work ran first");
}

#[test]
fn dropping_the_last_handle_from_inside_a_task_does_not_deadlock() {
    let stopped = Arc::new(AtomicUsize::new(0));
    let s = stopped.clone();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .on_thread_stop(move || {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let inner = pool.clone();
    pool.execute(move || {
        let last = inner;
        rx.recv().unwrap();
        drop(last); // the last handle: joins the other worker, not itself
    })
    .unwrap();
    drop(pool);
    tx.send(()).unwrap();
    assert!(eventually(|| stopped.load(Ordering::SeqCst) == 2));
}

#[test]
fn await_termination_without_shutdown_times_out() {
    let pool = pool(1);
    assert!(!pool.await_termination(Duration::from_millis(20)));
    assert!(!pool.is_terminated());
}

/// `shutdown_now` returns each task once. A task due at a wall time is
/// placed again when the wall clock is stepped, and the entry it leaves
/// behind stays in the timer until a sweep: before, `shutdown_now`
/// returned that stale entry as a second `PendingTask` (the fault matrix
/// saw it once under load, where a preempted read of the two clocks looks
/// like a step). On all three queues.
#[test]
fn shutdown_now_returns_a_task_placed_again_once() {
    use chronopool::TimerQueue;

    for queue in [
        TimerQueue::heap(),
        TimerQueue::hashed_wheel(),
        TimerQueue::hierarchical_wheel(),
    ] {
        let (pool, clock) = common::manual_pool(queue, 2);
        let noon = clock.system_time() + Duration::from_secs(12 * 3600);
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let lunch = pool
            .schedule_at_system_time(move || r.fetch_add(1, Ordering::SeqCst), noon)
            .unwrap();
        // Ten monotonic tasks beside it, so that no sweep (at half the
        // entries dead) takes the stale entries out first.
        let _later: Vec<_> = (0..10)
            .map(|_| pool.schedule(|| (), Duration::from_secs(3600)).unwrap())
            .collect();
        // Two steps: two stale entries.
        clock.set_system_time(clock.system_time() + Duration::from_secs(3600));
        clock.set_system_time(clock.system_time() - Duration::from_secs(1800));
        let pending = pool.shutdown_now();
        assert_eq!(pending.len(), 11, "{queue:?}: the wall task and the others");
        for task in pending {
            task.run();
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1, "{queue:?}");
        assert_eq!(lunch.join().unwrap(), 0, "{queue:?}");
        assert!(pool.await_termination(PATIENCE), "{queue:?}");
    }
}

/// Nor does it return the job that checks a wall task's placement after a
/// step, queued behind a busy worker: that job is no task of the user's.
#[test]
fn shutdown_now_returns_no_wall_check() {
    use chronopool::TimerQueue;

    let (pool, clock) = common::manual_pool(TimerQueue::heap(), 1);
    let noon = clock.system_time() + Duration::from_secs(12 * 3600);
    let lunch = pool.schedule_at_system_time(|| "lunch", noon).unwrap();
    let gate = block_workers(&pool, 1);
    // The step queues the check behind the blocked worker, and waits for
    // quiet: on a thread of its own.
    let c = clock.clone();
    let step = std::thread::spawn(move || {
        c.set_system_time(c.system_time() + Duration::from_secs(3600));
    });
    assert!(
        eventually(|| pool.metrics().queued_tasks == 1),
        "the check is queued: {:?}",
        pool.metrics()
    );
    let pending = pool.shutdown_now();
    assert_eq!(pending.len(), 1, "the wall task only");
    drop(pending);
    gate.open();
    step.join().unwrap();
    assert!(matches!(lunch.join(), Err(TaskError::Cancelled)));
    assert!(pool.await_termination(PATIENCE));
}

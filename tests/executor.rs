//! Submitting, joining, cancelling and awaiting tasks.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use chronopool::{JoinTimeoutError, ScheduledExecutor, SubmitErrorKind, TaskError};
use common::{block_on, eventually, DropCounter, Gate, PATIENCE};

fn pool(threads: usize) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(threads)
        .build()
        .unwrap()
}

#[test]
fn submit_returns_the_value() {
    let pool = pool(2);
    let handle = pool.submit(|| 6 * 7).unwrap();
    assert_eq!(handle.join().unwrap(), 42);
}

#[test]
fn many_tasks_from_outside_all_run_once() {
    let pool = pool(2);
    let handles: Vec<_> = (0..10_000u64)
        .map(|i| pool.submit(move || i * 2).unwrap())
        .collect();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 2 * (0..10_000u64).sum::<u64>());
}

#[test]
fn execute_runs_fire_and_forget_tasks() {
    let pool = pool(2);
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..1000 {
        let ran = ran.clone();
        pool.execute(move || {
            ran.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    assert!(eventually(|| ran.load(Ordering::SeqCst) == 1000));
}

#[test]
fn dropping_a_handle_detaches_the_task() {
    let pool = pool(1);
    let gate = Gate::new();
    let ran = Arc::new(AtomicUsize::new(0));
    let (g, r) = (gate.waiter(), ran.clone());
    drop(pool.submit(move || {
        g.wait();
        r.fetch_add(1, Ordering::SeqCst);
    }));
    gate.open();
    assert!(eventually(|| ran.load(Ordering::SeqCst) == 1));
}

#[test]
fn a_task_submitted_from_inside_goes_to_its_workers_own_deque() {
    // One worker: inside a task, submissions go to the worker's LIFO deque,
    // so the last one submitted runs first; from outside they are FIFO.
    let pool = pool(1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    pool.submit(move || {
        for i in 0..3 {
            let o = o.clone();
            chronopool::execute(move || o.lock().unwrap().push(i)).unwrap();
        }
    })
    .unwrap()
    .join()
    .unwrap();
    assert!(eventually(|| order.lock().unwrap().len() == 3));
    assert_eq!(*order.lock().unwrap(), vec![2, 1, 0]);

    let order = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate::new();
    let g = gate.waiter();
    pool.execute(move || g.wait()).unwrap();
    for i in 0..3 {
        let o = order.clone();
        pool.execute(move || o.lock().unwrap().push(i)).unwrap();
    }
    gate.open();
    assert!(eventually(|| order.lock().unwrap().len() == 3));
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
}

#[test]
fn pool_submit_from_inside_uses_the_local_deque_too() {
    let pool = pool(1);
    let inner = pool.clone();
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    pool.submit(move || {
        for i in 0..3 {
            let o = o.clone();
            inner.execute(move || o.lock().unwrap().push(i)).unwrap();
        }
    })
    .unwrap()
    .join()
    .unwrap();
    assert!(eventually(|| order.lock().unwrap().len() == 3));
    assert_eq!(*order.lock().unwrap(), vec![2, 1, 0]);
}

#[test]
fn in_pool_submission_outside_a_worker_is_an_error() {
    let err = chronopool::submit(|| 1).unwrap_err();
    assert_eq!(err.kind(), SubmitErrorKind::NotOnWorker);
    assert_eq!((err.into_inner())(), 1);
    let err = chronopool::execute(|| ()).unwrap_err();
    assert_eq!(err.kind(), SubmitErrorKind::NotOnWorker);
}

#[test]
fn a_task_that_submits_and_joins_a_child_completes_on_one_thread() {
    let pool = pool(1);
    let handle = pool
        .submit(|| {
            let child = chronopool::submit(|| 20).unwrap();
            child.join().unwrap() + 22
        })
        .unwrap();
    assert_eq!(handle.join_timeout(PATIENCE).unwrap(), 42);
}

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let left = chronopool::submit(move || fib(n - 1)).unwrap();
    let right = fib(n - 2);
    left.join().unwrap() + right
}

#[test]
fn recursive_submit_and_join_does_not_deadlock() {
    for threads in [1, 2, 4] {
        let pool = pool(threads);
        let handle = pool.submit(|| fib(18)).unwrap();
        assert_eq!(
            handle.join_timeout(PATIENCE).unwrap(),
            2584,
            "{threads} threads"
        );
    }
}

#[test]
fn join_from_a_worker_of_another_pool_waits_and_helps_its_own() {
    let a = pool(1);
    let b = pool(1);
    let (b2, gate) = (b.clone(), Gate::new());
    let g = gate.waiter();
    let handle = a
        .submit(move || {
            let on_b = b2.submit(move || {
                g.wait();
                7
            });
            on_b.unwrap().join().unwrap()
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    gate.open();
    assert_eq!(handle.join_timeout(PATIENCE).unwrap(), 7);
}

#[test]
fn join_timeout_gives_the_handle_back_and_join_still_works() {
    let pool = pool(1);
    let gate = Gate::new();
    let g = gate.waiter();
    let handle = pool
        .submit(move || {
            g.wait();
            5
        })
        .unwrap();
    let handle = match handle.join_timeout(Duration::from_millis(30)) {
        Err(JoinTimeoutError::TimedOut(handle)) => handle,
        other => panic!("expected a time-out, got {other:?}"),
    };
    assert!(!handle.is_finished());
    gate.open();
    assert_eq!(handle.join_timeout(PATIENCE).unwrap(), 5);
}

#[test]
fn a_timed_join_on_a_worker_helps_even_past_its_deadline() {
    // The child is queued behind its parent on the only worker; the
    // parent's timed join runs it (helping) and so sees it finish, even
    // though that takes longer than the time-out (documented).
    let pool = pool(1);
    let gate = Gate::new();
    let g = gate.waiter();
    let handle = pool
        .submit(move || {
            let child = chronopool::submit(move || {
                g.wait();
                9
            })
            .unwrap();
            child.join_timeout(Duration::from_millis(10)).ok()
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    gate.open();
    assert_eq!(handle.join_timeout(PATIENCE).unwrap(), Some(9));
}

#[test]
fn join_timeout_reports_a_failure() {
    common::quiet_expected_panics();
    let pool = pool(1);
    let handle = pool
        .submit(|| -> u8 { panic!("expected: failing task") })
        .unwrap();
    match handle.join_timeout(PATIENCE) {
        Err(JoinTimeoutError::Failed(TaskError::Panicked(p))) => {
            assert_eq!(p.message(), Some("expected: failing task"))
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn cancel_before_it_runs_wins_and_drops_the_closure_at_once() {
    let pool = pool(1);
    let gate = Gate::new();
    let g = gate.waiter();
    pool.execute(move || g.wait()).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let (counter, r) = (DropCounter(drops.clone()), ran.clone());
    let handle = pool
        .submit(move || {
            let _keep = &counter;
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    assert!(handle.cancel());
    assert_eq!(drops.load(Ordering::SeqCst), 1, "closure dropped by cancel");
    assert!(!handle.cancel(), "only the first cancel wins");
    assert!(handle.is_cancelled() && handle.is_finished());
    gate.open();
    assert!(matches!(handle.join(), Err(TaskError::Cancelled)));
    // Let the queue drain: the cancelled job is skipped.
    pool.submit(|| ()).unwrap().join().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn cancel_after_it_ran_or_while_it_runs_loses() {
    let pool = pool(1);
    let done = pool.submit(|| 1).unwrap();
    while !done.is_finished() {
        std::thread::yield_now();
    }
    assert!(!done.cancel());
    assert_eq!(done.join().unwrap(), 1);

    let (started_tx, started) = mpsc::channel();
    let gate = Gate::new();
    let g = gate.waiter();
    let running = pool
        .submit(move || {
            started_tx.send(()).unwrap();
            g.wait();
            2
        })
        .unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    assert!(!running.cancel());
    assert!(!running.is_cancelled());
    gate.open();
    assert_eq!(running.join().unwrap(), 2);
}

#[test]
fn cancel_races_run_exactly_one_wins() {
    let pool = pool(2);
    for _ in 0..2_000 {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let handle = pool
            .submit(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        let cancelled = handle.cancel();
        let result = handle.join();
        assert_eq!(cancelled, result.is_err());
        assert_eq!(ran.load(Ordering::SeqCst), usize::from(!cancelled));
    }
}

#[test]
fn a_handle_is_a_future() {
    let pool = pool(2);
    let handle = pool.submit(|| "awaited".to_string()).unwrap();
    assert_eq!(block_on(handle).unwrap(), "awaited");

    // Registered before the task can run: the waker is woken on completion.
    let gate = Gate::new();
    let g = gate.waiter();
    let handle = pool
        .submit(move || {
            g.wait();
            3
        })
        .unwrap();
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        gate.open();
    });
    assert_eq!(block_on(handle).unwrap(), 3);
    opener.join().unwrap();

    let cancelled = pool.submit(|| ()).unwrap();
    cancelled.cancel();
    let _ = block_on(cancelled);
}

#[test]
fn futures_await_many_handles_concurrently() {
    let pool = pool(2);
    let handles: Vec<_> = (0..200u32)
        .map(|i| pool.submit(move || i).unwrap())
        .collect();
    let total = block_on(async move {
        let mut total = 0;
        for h in handles {
            total += h.await.unwrap();
        }
        total
    });
    assert_eq!(total, (0..200).sum::<u32>());
}

#[test]
fn task_errors_are_std_errors_with_messages() {
    common::quiet_expected_panics();
    let pool = pool(1);
    let err = pool
        .submit(|| -> () { panic!("expected: {} apples", 3) })
        .unwrap()
        .join()
        .unwrap_err();
    assert!(err.is_panic() && !err.is_cancelled());
    assert_eq!(err.to_string(), "task panicked: expected: 3 apples");
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
    assert!(boxed.to_string().contains("3 apples"));

    let odd = pool
        .submit(|| std::panic::panic_any(17u8))
        .unwrap()
        .join()
        .unwrap_err();
    // (the default hook prints this one: its payload is not text)
    match odd {
        TaskError::Panicked(p) => {
            assert_eq!(p.message(), None);
            assert_eq!(*p.into_inner().downcast::<u8>().unwrap(), 17);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(TaskError::Cancelled.to_string(), "task was cancelled");
}

/// Re-submits itself from its worker until `stop`: that worker's own deque
/// always holds the next link, so it never runs dry.
fn chain(stop: Arc<AtomicBool>, links: Arc<AtomicUsize>) {
    links.fetch_add(1, Ordering::Relaxed);
    if !stop.load(Ordering::Relaxed) {
        let (s, l) = (Arc::clone(&stop), Arc::clone(&links));
        chronopool::execute(move || chain(s, l)).unwrap();
    }
}

/// A job that re-submits itself keeps its worker's own deque from ever
/// running dry. Work submitted from outside the pool and timers that fall
/// due still run on that worker: it looks at the shared queue every so
/// many jobs (as tokio's workers do), not only when its deque is empty.
#[test]
fn a_job_that_resubmits_itself_does_not_starve_other_work() {
    for queue in common::queues() {
        let pool = common::pool(queue, 1);
        let stop = Arc::new(AtomicBool::new(false));
        let links = Arc::new(AtomicUsize::new(0));
        let (s, l) = (Arc::clone(&stop), Arc::clone(&links));
        pool.execute(move || chain(s, l)).unwrap();
        assert!(eventually(|| links.load(Ordering::Relaxed) > 1_000));

        let outside = pool.submit(|| 7).unwrap().join_timeout(PATIENCE);
        let timer = pool
            .schedule(|| 8, Duration::from_millis(2))
            .unwrap()
            .join_timeout(PATIENCE);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(
            outside.ok(),
            Some(7),
            "{queue:?}: work from outside starved"
        );
        assert_eq!(timer.ok(), Some(8), "{queue:?}: a due timer starved");
    }
}

/// The same on the worker's own deque: a job submitted from inside the
/// pool before a chain starts is older than every link of the chain, which
/// the worker takes newest first. With one worker no thief takes it; the
/// worker takes its own oldest job at the look that finds the shared queue
/// empty.
#[test]
fn a_job_that_resubmits_itself_does_not_starve_its_older_siblings() {
    let pool = pool(1);
    let stop = Arc::new(AtomicBool::new(false));
    let links = Arc::new(AtomicUsize::new(0));
    let (s, l) = (Arc::clone(&stop), Arc::clone(&links));
    let (tx, rx) = mpsc::channel();
    pool.execute(move || {
        let seen = Arc::clone(&l);
        chronopool::execute(move || tx.send(seen.load(Ordering::Relaxed)).unwrap()).unwrap();
        chronopool::execute(move || chain(s, l)).unwrap();
    })
    .unwrap();
    let ran = rx.recv_timeout(PATIENCE);
    stop.store(true, Ordering::Relaxed);
    let links_then = ran.expect("the older sibling starved");
    assert!(links_then > 0, "it ran after the chain had started");
    assert!(links.load(Ordering::Relaxed) >= links_then);
}

/// A join's wait runs only what was submitted after the task that joins
/// (its own descendants) while its worker's deque holds them: an older
/// job might need what the joining task holds. Here the older job finds
/// the lock the joining task holds across 200 joins; had it run inside
/// one of them (the look at the oldest job every 61 jobs, taken in the
/// wait), it would find the lock taken on its own thread.
#[test]
fn a_join_does_not_run_an_older_job_inside_its_wait() {
    let pool = pool(1);
    let lock = Arc::new(Mutex::new(()));
    let inside = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let (l, i) = (Arc::clone(&lock), Arc::clone(&inside));
    pool.execute(move || {
        let (l2, i2) = (Arc::clone(&l), Arc::clone(&i));
        // The older job, below the joining task in the deque.
        chronopool::execute(move || {
            if l2.try_lock().is_err() {
                i2.store(true, Ordering::SeqCst);
            }
        })
        .unwrap();
        chronopool::execute(move || {
            let _held = l.lock().unwrap();
            let sum: u64 = (0..200u64)
                .map(|k| chronopool::submit(move || k).unwrap().join().unwrap())
                .sum();
            tx.send(sum).unwrap();
        })
        .unwrap();
    })
    .unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE), Ok((0..200).sum()));
    assert!(eventually(|| lock.try_lock().is_ok()));
    assert!(!inside.load(Ordering::SeqCst), "it ran inside a join");
}

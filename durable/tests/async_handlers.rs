//! Async handlers on a tokio runtime (`register_async`), on both stores:
//! a run holds its lease while its future is pending (a second scheduler
//! does not take it over), its output is its outcome; a future that
//! panics, a handler that panics before returning one, and a future
//! dropped unfinished by a runtime shut down are failed attempts, never a
//! run left claimed; a process killed (SIGKILL) while its run's future is
//! pending leaves the job to another process once the lease ends. The
//! scheduler's blocking API works from async code too (PostgreSQL's
//! client blocks on a runtime of its own).

mod common;
mod stores;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronopool_durable::{Config, JobError, JobState, Schedule};
use stores::{
    child_part, eventually, open_described, pool, real_config, spawn_child, wait_for_line, Store,
    BOTH,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// Retries 50 ms apart, three attempts.
fn quick_retries() -> Config {
    let mut config = real_config();
    config.retry = chronopool::trigger::Backoff::exponential(
        Duration::from_millis(50),
        1.0,
        Duration::from_millis(50),
    );
    config.max_attempts = 3;
    config
}

/// Two schedulers on one store, both with the async handler; a run that
/// takes 2.5 times its lease, awaiting, runs once: its lease is renewed
/// while its future is pending.
#[test]
fn a_pending_run_keeps_its_lease_and_its_output_is_its_outcome() {
    let rt = runtime();
    for kind in BOTH {
        let store = Store::new(kind);
        let (pool_a, pool_b) = (pool(2), pool(2));
        let (a, b) = (
            store.open(&pool_a, real_config()),
            store.open(&pool_b, real_config()),
        );
        let runs = Arc::new(Mutex::new(Vec::new()));
        for jobs in [&a, &b] {
            let r = runs.clone();
            jobs.register_async("slow", rt.handle().clone(), move |job| {
                let r = r.clone();
                async move {
                    let payload = String::from_utf8(job.payload().to_vec()).unwrap();
                    r.lock().unwrap().push((payload, job.attempt()));
                    tokio::time::sleep(Duration::from_millis(2_500)).await;
                    Ok(())
                }
            });
        }
        a.start().unwrap();
        b.start().unwrap();
        a.schedule("k", "slow", "once", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("it ends", || a.job("k").unwrap().is_none());
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(*runs.lock().unwrap(), [("once".to_owned(), 1)], "{kind:?}");
        let (ma, mb) = (a.metrics(), b.metrics());
        assert_eq!(ma.succeeded + mb.succeeded, 1, "{kind:?}");
        assert!(
            ma.renewed + mb.renewed >= 1,
            "{kind:?}: renewed while pending"
        );
        assert_eq!(ma.lost + mb.lost, 0, "{kind:?}");
    }
}

/// A future that panics on its first attempt (after an await), and a
/// handler that panics before returning a future on its first attempt:
/// each a failed attempt, retried, then done.
#[test]
fn panics_in_a_future_or_in_the_handler_are_failed_attempts() {
    let rt = runtime();
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, quick_retries());
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        jobs.register_async("flaky", rt.handle().clone(), move |job| {
            if job.payload() == b"handler" && job.attempt() == 1 {
                panic!("no future this time");
            }
            let d = d.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if job.attempt() == 1 {
                    panic!("the future panics");
                }
                d.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        });
        jobs.start().unwrap();
        for key in ["future", "handler"] {
            jobs.schedule(key, "flaky", key, Schedule::After(Duration::ZERO))
                .unwrap();
        }
        eventually("both are done", || {
            jobs.job("future").unwrap().is_none() && jobs.job("handler").unwrap().is_none()
        });
        assert_eq!(done.load(Ordering::SeqCst), 2, "{kind:?}");
        let m = jobs.metrics();
        assert_eq!((m.retried, m.succeeded), (2, 2), "{kind:?}: {m:?}");
    }
}

/// The runtime the handler was registered with shuts down while a run's
/// future is pending: the future is dropped, and the run is a failed
/// attempt; later attempts find the runtime gone too, and the job ends
/// dead with the reason: never left claimed.
#[test]
fn a_future_dropped_by_its_runtime_is_a_failed_attempt() {
    for kind in BOTH {
        let rt = runtime();
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, quick_retries());
        let started = Arc::new(AtomicUsize::new(0));
        let s = started.clone();
        jobs.register_async("stuck", rt.handle().clone(), move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Err(JobError::retry("never"))
            }
        });
        jobs.start().unwrap();
        jobs.schedule("k", "stuck", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the run starts", || started.load(Ordering::SeqCst) == 1);
        rt.shutdown_background();
        eventually("the job is dead", || {
            jobs.job("k")
                .unwrap()
                .is_some_and(|job| job.state == JobState::Dead)
        });
        let job = jobs.job("k").unwrap().unwrap();
        let error = job.last_error.unwrap();
        assert!(
            error.contains("dropped before it completed"),
            "{kind:?}: {error}"
        );
        assert_eq!(jobs.metrics().running, 0, "{kind:?}");
    }
}

/// The scheduler made, used and dropped inside async code, on a runtime of
/// each flavour: `postgres`'s client, which blocks on a runtime of its
/// own, is moved off the runtime's thread, so nothing panics.
#[test]
fn the_blocking_api_works_from_async_code() {
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    for rt in [runtime(), current] {
        for kind in BOTH {
            let store = Store::new(kind);
            let pool = pool(1);
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            rt.block_on(async {
                let jobs = store.open(&pool, real_config());
                jobs.register("work", move |_| {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
                jobs.start().unwrap();
                jobs.schedule("now", "work", b"", Schedule::After(Duration::ZERO))
                    .unwrap();
                jobs.schedule(
                    "later",
                    "work",
                    b"",
                    Schedule::After(Duration::from_secs(60)),
                )
                .unwrap();
                while jobs.job("now").unwrap().is_some() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert_eq!(ran.load(Ordering::SeqCst), 1, "{kind:?}");
                assert_eq!(
                    jobs.job("later").unwrap().unwrap().state,
                    JobState::Scheduled
                );
                assert!(jobs.cancel("later").unwrap());
                assert!(jobs.dead_jobs().unwrap().is_empty());
                assert!(jobs.shutdown(Duration::from_secs(10)));
                drop(jobs);
            });
        }
    }
}

/// The children's bodies: only when a parent runs this test as one.
#[test]
#[ignore = "run by the other tests of this file as a child process"]
fn child() {
    let Some((part, store)) = child_part() else {
        return;
    };
    assert_eq!(part, "pending");
    let rt = runtime();
    let pool = pool(1);
    let jobs = open_described(&store, &pool, real_config());
    // Its future says it runs, then never completes.
    jobs.register_async("work", rt.handle().clone(), |_| async {
        println!("RUNNING");
        std::future::pending::<()>().await;
        Ok(())
    });
    jobs.start().unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn a_process_killed_while_its_future_is_pending_leaves_the_job_to_another() {
    let rt = runtime();
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(1);
        let jobs = store.open(&pool, real_config());
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let a = attempts.clone();
        jobs.register_async("work", rt.handle().clone(), move |job| {
            a.lock().unwrap().push(job.attempt());
            async { Ok(()) }
        });
        jobs.schedule("j", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        let mut child = spawn_child("pending", &store);
        wait_for_line(&mut child, "RUNNING");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            jobs.job("j").unwrap().unwrap().state,
            JobState::Running,
            "{kind:?}: the killed run's claim stands until its lease ends"
        );
        jobs.start().unwrap();
        eventually("taken over and done", || jobs.job("j").unwrap().is_none());
        assert_eq!(*attempts.lock().unwrap(), [2], "{kind:?}");
        assert!(jobs.metrics().lease_expired + jobs.metrics().reaped >= 1);
    }
}

/// A payload whose drop panics too (outside an unwind).
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("expected: the payload's drop panics too");
        }
    }
}

/// A future that is ready at once with a success, and whose drop panics
/// with a [`Bomb`].
struct ReadyThenBomb;

impl std::future::Future for ReadyThenBomb {
    type Output = Result<(), JobError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl Drop for ReadyThenBomb {
    fn drop(&mut self) {
        std::panic::panic_any(Bomb);
    }
}

/// A finished future whose drop panics, with a payload whose own drop
/// panics: its outcome (a success) stands, stored once, never retried.
#[test]
fn a_finished_future_whose_drop_panics_keeps_its_outcome() {
    let rt = runtime();
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, quick_retries());
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        jobs.register_async("bomb", rt.handle().clone(), move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            ReadyThenBomb
        });
        jobs.start().unwrap();
        jobs.schedule("k", "bomb", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the run is stored", || {
            jobs.job("k").unwrap().is_none() && jobs.metrics().running == 0
        });
        std::thread::sleep(Duration::from_millis(300));
        let m = jobs.metrics();
        assert_eq!(
            (runs.load(Ordering::SeqCst), m.retried, m.succeeded),
            (1, 0, 1),
            "{kind:?}: {m:?}"
        );
    }
}

//! Shutting down loses nothing and leaves nothing stuck: jobs placed when
//! the executor shuts down are not claimed (they run at once, as attempt
//! 1, in the next process), runs in progress end and store their
//! outcomes, and runs the executor dropped unrun give their claims back.
//! On both stores.

mod common;
mod stores;

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool_durable::{Config, Job, JobState, Schedule};
use stores::{eventually, pool, real_config, Store, BOTH};

/// The default lease (60 s): a job left claimed would wait that long.
fn long_lease() -> Config {
    let mut config = real_config();
    config.lease = Duration::from_secs(60);
    config
}

#[test]
fn jobs_placed_when_the_executor_shuts_down_are_not_claimed() {
    for kind in BOTH {
        let store = Store::new(kind);
        {
            let pool = pool(2);
            let jobs = store.open(&pool, long_lease());
            jobs.register("work", |_| Ok(()));
            jobs.start().unwrap();
            for n in 0..20 {
                jobs.schedule(
                    &format!("j{n}"),
                    "work",
                    b"",
                    Schedule::After(Duration::from_millis(400)),
                )
                .unwrap();
            }
            // Placed in the executor's timer; then the executor stops, and
            // runs its due tasks (the placements) first.
            std::thread::sleep(Duration::from_millis(100));
            pool.shutdown();
            assert!(pool.await_termination(Duration::from_secs(10)));
            assert_eq!(jobs.metrics().claimed, 0, "{kind:?}: nothing claimed");
        }
        let pool = pool(2);
        let jobs = store.open(&pool, long_lease());
        for n in 0..20 {
            let job = jobs.job(&format!("j{n}")).unwrap().unwrap();
            assert_eq!(
                (job.state, job.attempt),
                (JobState::Scheduled, 0),
                "{kind:?}"
            );
        }
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let a = attempts.clone();
        jobs.register("work", move |job| {
            a.lock().unwrap().push(job.attempt());
            Ok(())
        });
        let restarted = Instant::now();
        jobs.start().unwrap();
        eventually("every job runs", || attempts.lock().unwrap().len() == 20);
        assert!(
            restarted.elapsed() < Duration::from_secs(10),
            "not after a lease"
        );
        assert!(attempts.lock().unwrap().iter().all(|&a| a == 1), "{kind:?}");
    }
}

#[test]
fn runs_in_progress_end_and_store_their_outcomes_through_a_shutdown() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, long_lease());
        let (started_tx, started) = mpsc::channel();
        let (release, gate) = mpsc::channel::<()>();
        let (started_tx, gate) = (Mutex::new(started_tx), Mutex::new(gate));
        jobs.register("work", move |job| {
            started_tx
                .lock()
                .unwrap()
                .send(job.key().to_owned())
                .unwrap();
            gate.lock().unwrap().recv().unwrap();
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule("a", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        jobs.schedule("b", "work", b"", Schedule::Every(Duration::from_millis(10)))
            .unwrap();
        for _ in 0..2 {
            started.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        // The scheduler stops while both run; so does the executor.
        let stopping = std::thread::scope(|s| {
            let stopping = s.spawn(|| jobs.shutdown(Duration::from_secs(30)));
            pool.shutdown();
            std::thread::sleep(Duration::from_millis(200));
            assert!(!stopping.is_finished(), "it waits for the runs");
            release.send(()).unwrap();
            release.send(()).unwrap();
            stopping.join().unwrap()
        });
        assert!(stopping, "{kind:?}: every outcome stored");
        assert!(jobs.job("a").unwrap().is_none(), "{kind:?}: a is done");
        let b = jobs.job("b").unwrap().unwrap();
        assert_eq!((b.state, b.attempt), (JobState::Scheduled, 0), "{kind:?}");
        let m = jobs.metrics();
        assert_eq!((m.claimed, m.succeeded, m.running), (2, 2, 0), "{kind:?}");
    }
}

/// `shutdown(Duration::MAX)` waits for as long as the runs take: a wait
/// past the clock's range is no deadline, not a panic (it panicked adding
/// the wait to `Instant::now()`, after the scheduler had already stopped).
#[test]
fn a_shutdown_that_waits_for_ever_waits_for_the_runs() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, long_lease());
        let (started_tx, started) = mpsc::channel();
        let started_tx = Mutex::new(started_tx);
        jobs.register("work", move |_| {
            started_tx.lock().unwrap().send(()).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule("a", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        started.recv_timeout(Duration::from_secs(30)).unwrap();
        assert!(
            jobs.shutdown(Duration::MAX),
            "{kind:?}: every outcome stored"
        );
        assert!(jobs.job("a").unwrap().is_none(), "{kind:?}: a is done");
        assert!(jobs.shutdown(Duration::MAX), "{kind:?}: a second call");
    }
}

/// `shutdown_now` hands back the runs not started; dropped, they give
/// their claims back: the jobs are due again at once, their attempts not
/// counted.
#[test]
fn runs_dropped_unrun_give_their_claims_back() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(1);
        let mut config = long_lease();
        config.concurrency = Some(5);
        let jobs = store.open(&pool, config);
        let (started_tx, started) = mpsc::channel();
        let (release, gate) = mpsc::channel::<()>();
        let (started_tx, gate) = (Mutex::new(started_tx), Mutex::new(gate));
        jobs.register("work", move |job| {
            started_tx
                .lock()
                .unwrap()
                .send(job.key().to_owned())
                .unwrap();
            let _ = gate.lock().unwrap().recv();
            Ok(())
        });
        jobs.start().unwrap();
        // All five due at one instant: their placements (tasks on the one
        // worker) all run before the first run does.
        let at = std::time::SystemTime::now() + Duration::from_millis(300);
        jobs.schedule_all((0..5).map(|n| Job::new(format!("j{n}"), "work", "", Schedule::At(at))))
            .unwrap();
        let first = started.recv_timeout(Duration::from_secs(30)).unwrap();
        eventually("all five claimed", || jobs.metrics().claimed == 5);
        // Four runs wait for the one worker (and the poll task waits for
        // its next turn).
        let pending = pool.shutdown_now();
        assert!(pending.len() >= 4, "{kind:?}: {}", pending.len());
        drop(pending);
        eventually("four released", || jobs.metrics().released == 4);
        release.send(()).unwrap();
        assert!(jobs.shutdown(Duration::from_secs(30)), "{kind:?}");
        for n in 0..5 {
            let key = format!("j{n}");
            let job = jobs.job(&key).unwrap();
            if key == first {
                assert!(job.is_none(), "{kind:?}: the run that started ended");
            } else {
                let job = job.unwrap();
                assert_eq!(
                    (job.state, job.attempt),
                    (JobState::Scheduled, 0),
                    "{kind:?}"
                );
            }
        }
    }
}

/// A handler (sync, and an async one's future) that shuts its own
/// scheduler down, waiting for ever: the call returns at once with false
/// (its own run is still going), the handler's outcome is stored, and the
/// scheduler's threads end. It waited for itself before: for ever.
#[test]
fn a_handler_that_shuts_its_own_scheduler_down_is_not_waited_for() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    for kind in BOTH {
        for is_async in [false, true] {
            let store = Store::new(kind);
            let pool = pool(2);
            let jobs = Arc::new(store.open(&pool, long_lease()));
            let me = Arc::downgrade(&jobs);
            let (returned_tx, returned) = mpsc::channel();
            let returned_tx = Mutex::new(returned_tx);
            let shut_down = move || {
                let jobs = me.upgrade().expect("the test holds it");
                let waited = Instant::now();
                let all = jobs.shutdown(Duration::MAX);
                let _ = returned_tx.lock().unwrap().send((all, waited.elapsed()));
            };
            if is_async {
                let shut_down = Arc::new(shut_down);
                jobs.register_async("stop", rt.handle().clone(), move |_| {
                    let shut_down = Arc::clone(&shut_down);
                    async move {
                        shut_down();
                        Ok(())
                    }
                });
            } else {
                jobs.register("stop", move |_| {
                    shut_down();
                    Ok(())
                });
            }
            jobs.start().unwrap();
            jobs.schedule("k", "stop", b"", Schedule::After(Duration::ZERO))
                .unwrap();
            let Ok((all, waited)) = returned.recv_timeout(Duration::from_secs(20)) else {
                // A panic would hang in the drops (the pool waits for the
                // stuck handler): end the test binary with the reason.
                // (Written past the harness's capture, which the exit loses.)
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("{kind:?}, async {is_async}: shutdown never returned\n").as_bytes(),
                );
                std::process::exit(101);
            };
            assert!(!all, "{kind:?}, async {is_async}: its own run was going");
            assert!(
                waited < Duration::from_secs(5),
                "{kind:?}, async {is_async}: waited {waited:?}"
            );
            eventually("the outcome is stored", || jobs.job("k").unwrap().is_none());
            assert!(jobs.shutdown(Duration::MAX), "{kind:?}: a second call");
        }
    }
}

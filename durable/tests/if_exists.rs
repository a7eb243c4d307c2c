//! What scheduling a key that is stored already does ([`IfExists`]), end to
//! end on both stores: the same job at every start keeps its first run, a
//! debounced job keeps its time and takes the latest payload, and a job
//! replaced while it runs never runs beside that run, even in another
//! process, and runs after it.

mod common;
mod stores;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool_durable::{DurableScheduler, IfExists, Job, Schedule};
use stores::{eventually, pool, real_config, Store, BOTH};

const HOUR: Duration = Duration::from_secs(3600);

/// A service that schedules its hourly job at every start, restarted
/// twice: the job's first run stays where the first start put it. A new
/// period replaces it.
#[test]
fn scheduling_the_same_job_at_every_start_keeps_its_first_run() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let first = {
            let jobs = store.open(&pool, real_config());
            jobs.schedule("hourly", "report", b"", Schedule::Every(HOUR))
                .unwrap();
            jobs.job("hourly").unwrap().unwrap().next_fire
        };
        for _ in 0..2 {
            std::thread::sleep(Duration::from_millis(20));
            let jobs = store.open(&pool, real_config());
            jobs.start().unwrap();
            jobs.schedule("hourly", "report", b"", Schedule::Every(HOUR))
                .unwrap();
            let again = jobs.job("hourly").unwrap().unwrap();
            assert_eq!(again.next_fire, first, "{kind:?}: not pushed back");
            assert!(jobs.shutdown(Duration::from_secs(5)));
        }
        let jobs = store.open(&pool, real_config());
        jobs.schedule("hourly", "report", b"", Schedule::Every(2 * HOUR))
            .unwrap();
        let replaced = jobs.job("hourly").unwrap().unwrap().next_fire;
        assert!(
            replaced > first + HOUR / 2,
            "{kind:?}: a new period replaces it"
        );
        // Replace, asked for, resets even the same job.
        std::thread::sleep(Duration::from_millis(20));
        let again = Job::new("hourly", "report", "", Schedule::Every(2 * HOUR))
            .if_exists(IfExists::Replace);
        jobs.schedule_all([again]).unwrap();
        assert!(jobs.job("hourly").unwrap().unwrap().next_fire > replaced);
    }
}

/// Three schedules of one debounced notification: it keeps the first one's
/// time, and runs once, with the last payload.
#[test]
fn a_debounced_job_keeps_its_time_and_runs_once_with_the_last_payload() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = Arc::new(Mutex::new(Vec::new()));
        let r = runs.clone();
        jobs.register("digest", move |job| {
            r.lock().unwrap().push(job.payload().to_vec());
            Ok(())
        });
        jobs.start().unwrap();
        let digest = |text: &str| {
            Job::new(
                "d",
                "digest",
                text,
                Schedule::After(Duration::from_millis(600)),
            )
            .if_exists(IfExists::KeepTime)
        };
        jobs.schedule_all([digest("1 comment")]).unwrap();
        let due = jobs.job("d").unwrap().unwrap().next_fire;
        std::thread::sleep(Duration::from_millis(100));
        jobs.schedule_all([digest("2 comments")]).unwrap();
        jobs.schedule_all([digest("3 comments")]).unwrap();
        let stored = jobs.job("d").unwrap().unwrap();
        assert_eq!(
            (stored.next_fire, stored.payload.as_slice()),
            (due, &b"3 comments"[..]),
            "{kind:?}"
        );
        eventually("it runs", || jobs.job("d").unwrap().is_none());
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(*runs.lock().unwrap(), [b"3 comments".to_vec()], "{kind:?}");
    }
}

/// Two schedulers on one store (two processes, as far as the store can
/// tell). A job runs slowly on one of them; the other schedules its key
/// again, due at once. The new job never runs beside the run in flight,
/// on either scheduler: it starts after that run ended, once.
#[test]
fn a_job_replaced_while_it_runs_waits_for_that_run_in_every_process() {
    for kind in BOTH {
        let store = Store::new(kind);
        let (pool_a, pool_b) = (pool(2), pool(2));
        let (a, b) = (
            store.open(&pool_a, real_config()),
            store.open(&pool_b, real_config()),
        );
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::<(String, Instant, Instant)>::new()));
        let register = |jobs: &DurableScheduler| {
            let (running, most, log) = (running.clone(), most.clone(), log.clone());
            jobs.register("work", move |job| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let start = Instant::now();
                if job.payload() == b"slow" {
                    std::thread::sleep(Duration::from_millis(800));
                }
                running.fetch_sub(1, Ordering::SeqCst);
                let payload = String::from_utf8(job.payload().to_vec()).unwrap();
                log.lock().unwrap().push((payload, start, Instant::now()));
                Ok(())
            });
        };
        register(&a);
        register(&b);
        a.start().unwrap();
        b.start().unwrap();
        a.schedule("k", "work", "slow", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the slow run starts", || {
            running.load(Ordering::SeqCst) == 1
        });
        b.schedule("k", "work", "quick", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("both ran", || log.lock().unwrap().len() == 2);
        eventually("the job is done", || a.job("k").unwrap().is_none());
        std::thread::sleep(Duration::from_millis(300));
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 2, "{kind:?}: {log:?}");
        assert_eq!((log[0].0.as_str(), log[1].0.as_str()), ("slow", "quick"));
        assert!(
            log[1].1 >= log[0].2,
            "{kind:?}: the new run started after the old ended"
        );
        assert_eq!(most.load(Ordering::SeqCst), 1, "{kind:?}");
        assert_eq!(a.metrics().lost + b.metrics().lost, 0, "{kind:?}");
    }
}

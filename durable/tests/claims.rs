//! What a scheduler claims: its own handlers' jobs even when others'
//! overdue jobs are many, only as many as it can start (so an idle
//! scheduler on the same store gets the rest), and a backlog larger than a
//! poll's batch without waiting a poll interval per batch. On both stores.

mod common;
mod stores;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use chronopool_durable::{Job, Schedule};
use stores::{eventually, pool, real_config, Store, BOTH};

/// 20,000 overdue jobs of a handler this scheduler lacks do not keep its
/// own due job waiting for `unhandled_wait`.
#[test]
fn other_handlers_overdue_jobs_do_not_starve_this_schedulers_own() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.batch = 1_000;
        config.unhandled_wait = Duration::from_secs(3600);
        let jobs = store.open(&pool, config);
        let long_ago = SystemTime::now() - Duration::from_secs(60);
        for chunk in 0..20 {
            jobs.schedule_all((0..1_000).map(|i| {
                Job::new(
                    format!("other-{chunk}-{i}"),
                    "other",
                    "",
                    Schedule::At(long_ago),
                )
            }))
            .unwrap();
        }
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        jobs.register("mine", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        jobs.schedule("mine", "mine", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        let started = Instant::now();
        jobs.start().unwrap();
        eventually("its own job runs", || ran.load(Ordering::SeqCst) == 1);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{kind:?}: {:?}",
            started.elapsed()
        );
        assert_eq!(jobs.metrics().claimed, 1, "{kind:?}: none of the others'");
    }
}

/// Four two-second jobs due at once, a scheduler with two workers that
/// finds them first, and one with three workers that starts a moment
/// later: the first claimed only the two jobs it could start, so the other
/// runs the two left at once; all four end in about two seconds (four if
/// the first had claimed all four).
#[test]
fn a_busy_scheduler_claims_only_what_it_can_start() {
    for kind in BOTH {
        let store = Store::new(kind);
        let (two, three) = (pool(2), pool(3));
        let busy = store.open(&two, real_config());
        let idle = store.open(&three, real_config());
        let ran: Arc<Mutex<Vec<&'static str>>> = Arc::default();
        for (jobs, who) in [(&busy, "busy"), (&idle, "idle")] {
            let r = ran.clone();
            jobs.register("slow", move |_| {
                std::thread::sleep(Duration::from_secs(2));
                r.lock().unwrap().push(who);
                Ok(())
            });
        }
        let soon = SystemTime::now() + Duration::from_millis(500);
        busy.schedule_all(
            (0..4).map(|i| Job::new(format!("j{i}"), "slow", "", Schedule::At(soon))),
        )
        .unwrap();
        busy.start().unwrap();
        std::thread::sleep(Duration::from_millis(800));
        idle.start().unwrap();
        eventually("all four ran", || ran.lock().unwrap().len() == 4);
        let by_busy = ran.lock().unwrap().iter().filter(|w| **w == "busy").count();
        assert_eq!(
            by_busy, 2,
            "{kind:?}: the two-worker scheduler ran {by_busy} of 4"
        );
        let took = SystemTime::now().duration_since(soon).unwrap();
        assert!(took < Duration::from_millis(3_400), "{kind:?}: {took:?}");
    }
}

/// 3,000 overdue jobs, a batch of 100 per poll and a poll every 2.5 s:
/// the backlog runs at the speed of claims, not of 30 polls (75 s).
#[test]
fn a_backlog_larger_than_a_batch_runs_without_waiting_for_polls() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.batch = 100;
        config.poll_interval = Duration::from_millis(2_500);
        let jobs = store.open(&pool, config);
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        jobs.schedule_all(
            (0..3_000).map(|i| Job::new(format!("j{i}"), "work", "", Schedule::At(long_ago))),
        )
        .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        jobs.register("work", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        let started = Instant::now();
        jobs.start().unwrap();
        eventually("the backlog runs", || ran.load(Ordering::SeqCst) == 3_000);
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{kind:?}: {:?}",
            started.elapsed()
        );
    }
}

/// In manual time, a backlog of 100 jobs due at one instant and a batch of
/// 10 per poll: one `advance` runs them all (the follow-up polls take part
/// in it, as the runs do).
#[test]
fn a_backlog_runs_within_one_manual_advance() {
    for kind in BOTH {
        let store = Store::new(kind);
        let clock = chronopool::ManualClock::new();
        let pool = chronopool::ScheduledExecutor::builder()
            .worker_threads(2)
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut config = chronopool_durable::Config::default();
        config.batch = 10;
        config.window = Duration::from_secs(24 * 3600);
        config.poll_interval = Duration::from_secs(12 * 3600);
        let jobs = store.open(&pool, config);
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        jobs.register("work", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        let at = clock.system_time() + Duration::from_secs(3600);
        jobs.schedule_all(
            (0..100).map(|i| Job::new(format!("j{i}"), "work", "", Schedule::At(at))),
        )
        .unwrap();
        jobs.start().unwrap();
        clock.advance(Duration::from_secs(2 * 3600));
        assert_eq!(ran.load(Ordering::SeqCst), 100, "{kind:?}");
    }
}

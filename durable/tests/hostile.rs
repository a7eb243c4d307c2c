//! Handlers are user code: a panic whose payload panics again when it is
//! dropped, a back-off so long it overflows any clock, a handler that
//! blocks for longer than the lease. None of them leaves a job stuck
//! `Running` or a worker dead. On both stores.

mod common;
mod stores;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronopool::trigger::Backoff;
use chronopool_durable::{JobState, Schedule};
use stores::{eventually, pool, real_config, Store, BOTH};

/// A panic payload whose drop panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("expected: the payload's drop panics too");
        }
    }
}

#[test]
fn a_panic_payload_that_panics_on_drop_is_a_failed_attempt() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.retry =
            Backoff::exponential(Duration::from_millis(50), 1.0, Duration::from_millis(50));
        let jobs = store.open(&pool, config);
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        jobs.register("work", move |_| {
            if r.fetch_add(1, Ordering::SeqCst) == 0 {
                std::panic::panic_any(Bomb);
            }
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule("k", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        // The outcome is counted after it is stored: the job can be gone a
        // moment before `succeeded` counts it.
        eventually("the retry succeeds", || {
            jobs.job("k").unwrap().is_none() && jobs.metrics().running == 0
        });
        let m = jobs.metrics();
        assert_eq!(
            (runs.load(Ordering::SeqCst), m.retried, m.succeeded),
            (2, 1, 1),
            "{kind:?}"
        );
        // The workers live on.
        assert_eq!(pool.submit(|| 7).unwrap().join().unwrap(), 7);
    }
}

/// A back-off near `Duration::MAX` overflows every clock: it saturates
/// (the core's back-off at about 584 years, the store's times at the year
/// 9999), and the job waits, neither panicking nor stuck.
#[test]
fn a_back_off_past_the_end_of_time_saturates() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.retry = Backoff::exponential(Duration::MAX / 2, 2.0, Duration::MAX);
        let jobs = store.open(&pool, config);
        jobs.register("work", |_| Err("down".into()));
        jobs.start().unwrap();
        jobs.schedule("k", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the failure is stored", || jobs.metrics().retried == 1);
        let k = jobs.job("k").unwrap().unwrap();
        assert_eq!(
            (k.state, k.attempt, k.last_error.as_deref()),
            (JobState::Scheduled, 1, Some("down")),
            "{kind:?}"
        );
        let centuries = std::time::SystemTime::now() + Duration::from_secs(500 * 365 * 86_400);
        assert!(k.next_fire >= centuries, "{kind:?}: {:?}", k.next_fire);
    }
}

/// A handler that blocks for three leases keeps its job: the lease is
/// renewed by the scheduler's own thread, and a second scheduler polling
/// all the while never takes it.
#[test]
fn a_handler_that_blocks_past_its_lease_keeps_its_job() {
    for kind in BOTH {
        let store = Store::new(kind);
        let mut config = real_config();
        config.lease = Duration::from_millis(300);
        let (pool_a, pool_b) = (pool(1), pool(2));
        let a = store.open(&pool_a, config.clone());
        let b = store.open(&pool_b, config);
        let runs = Arc::new(AtomicUsize::new(0));
        for jobs in [&a, &b] {
            let r = runs.clone();
            jobs.register("work", move |_| {
                r.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(900));
                Ok(())
            });
        }
        a.start().unwrap();
        a.schedule("k", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("it runs", || runs.load(Ordering::SeqCst) == 1);
        b.start().unwrap();
        eventually("it is done", || a.job("k").unwrap().is_none());
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{kind:?}: run once");
        assert_eq!(b.metrics().claimed, 0, "{kind:?}");
    }
}

/// 1,500 runs held at once (a concurrency far above the two workers, so
/// most wait in the executor's queue for longer than their lease): every
/// lease is renewed, so a second scheduler polling all the while takes
/// none of them over, and each job runs once.
#[test]
fn many_runs_held_at_once_all_keep_their_leases() {
    for kind in BOTH {
        let store = Store::new(kind);
        let mut config = real_config();
        config.lease = Duration::from_millis(600);
        config.concurrency = Some(2_000);
        let (pool_a, pool_b) = (pool(2), pool(1));
        let a = store.open(&pool_a, config.clone());
        let b = store.open(&pool_b, real_config());
        let runs = Arc::new(AtomicUsize::new(0));
        for jobs in [&a, &b] {
            let r = runs.clone();
            jobs.register("work", move |_| {
                r.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(4));
                Ok(())
            });
        }
        let now = std::time::SystemTime::now();
        a.schedule_all(
            (0..1_500).map(|i| {
                chronopool_durable::Job::new(format!("j{i}"), "work", "", Schedule::At(now))
            }),
        )
        .unwrap();
        a.start().unwrap();
        eventually("all claimed", || a.metrics().claimed == 1_500);
        b.start().unwrap();
        eventually("all ran", || a.metrics().succeeded == 1_500);
        assert_eq!(runs.load(Ordering::SeqCst), 1_500, "{kind:?}: each once");
        assert_eq!(b.metrics().claimed, 0, "{kind:?}");
    }
}

const HOUR: Duration = Duration::from_secs(3600);

/// A scheduler on `store` under a manual clock of its own (every time
/// exact), that retries a failed run a second later, up to `max_attempts`
/// runs of an occurrence; with its executor, which it needs alive.
fn on_a_manual_clock(
    store: &Store,
    max_attempts: u32,
) -> (
    chronopool::ManualClock,
    chronopool::ScheduledExecutor,
    chronopool_durable::DurableScheduler,
) {
    let clock = chronopool::ManualClock::new();
    let pool = chronopool::ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut config = chronopool_durable::Config::default();
    config.window = 24 * HOUR;
    config.poll_interval = 12 * HOUR;
    config.max_attempts = max_attempts;
    config.retry = Backoff::exponential(Duration::from_secs(1), 1.0, Duration::from_secs(1));
    let jobs = store.open(&pool, config);
    (clock, pool, jobs)
}

/// One occurrence of a recurring job whose every attempt fails (the last
/// with a permanent error, or a service away for longer than the retries
/// last) is dead, and only it: the job goes on to its next occurrence, its
/// attempts reset and the failure kept as its `last_error`, as
/// db-scheduler's recurring tasks and Oban's cron do. Before, the whole
/// job was dead: no later occurrence ever ran, and `keep_dead` later
/// deleted the schedule. Under a manual clock, so every time is exact.
#[test]
fn a_dead_occurrence_never_ends_a_recurring_job() {
    use chronopool_durable::JobError;
    use std::sync::Mutex;
    use std::time::SystemTime;

    for kind in BOTH {
        let store = Store::new(kind);
        let (clock, _pool, jobs) = on_a_manual_clock(&store, 3);
        // (the occurrence it was told, its attempt) per run.
        let runs = Arc::new(Mutex::new(Vec::<(SystemTime, u32)>::new()));
        let r = runs.clone();
        jobs.register("hourly", move |job| {
            let mut runs = r.lock().unwrap();
            runs.push((job.due(), job.attempt()));
            match runs.len() {
                // The first occurrence: every attempt fails.
                1..=3 => Err("the service is away".into()),
                // The second: a permanent error ends its first attempt.
                4 => Err(JobError::permanent("this input can never work")),
                _ => Ok(()),
            }
        });
        jobs.start().unwrap();
        // On the hour, so retries seconds late never shift the schedule.
        let start = clock.system_time();
        jobs.schedule(
            "h",
            "hourly",
            b"",
            chronopool_durable::Schedule::cron("0 * * * *", "UTC").unwrap(),
        )
        .unwrap();
        clock.advance(HOUR + 10 * Duration::from_secs(1));
        let first = runs.lock().unwrap().clone();
        assert_eq!(
            first.iter().map(|r| r.1).collect::<Vec<_>>(),
            [1, 2, 3],
            "{kind:?}: three attempts of the first occurrence"
        );
        let after_first = jobs.job("h").unwrap().unwrap();
        assert_eq!(
            (after_first.state, after_first.attempt),
            (JobState::Scheduled, 0),
            "{kind:?}: the job goes on, its attempts reset: {after_first:?}"
        );
        assert_eq!(
            after_first.last_error.as_deref(),
            Some("the service is away"),
            "{kind:?}"
        );
        assert_eq!(
            after_first.next_fire,
            first[0].0 + HOUR,
            "{kind:?}: its next occurrence, on the hour"
        );
        clock.advance(3 * HOUR);
        let runs = runs.lock().unwrap().clone();
        let dues: Vec<SystemTime> = runs[3..].iter().map(|r| r.0).collect();
        assert_eq!(
            dues,
            [
                first[0].0 + HOUR,
                first[0].0 + 2 * HOUR,
                first[0].0 + 3 * HOUR
            ],
            "{kind:?}: the permanent error ended its occurrence only"
        );
        assert!(runs[3..].iter().all(|r| r.1 == 1), "{kind:?}: {runs:?}");
        assert!(first[0].0 > start && first[0].0 <= start + HOUR, "{kind:?}");
        let metrics = jobs.metrics();
        assert_eq!(
            (metrics.dead, metrics.retried, metrics.succeeded),
            (2, 2, 2),
            "{kind:?}: {metrics:?}"
        );
        assert!(jobs.dead_jobs().unwrap().is_empty(), "{kind:?}");
        let dead_runs = jobs
            .history(Some("h"), 100)
            .unwrap()
            .into_iter()
            .filter(|run| run.outcome == Some(chronopool_durable::RunOutcome::Dead))
            .count();
        assert_eq!(dead_runs, 2, "{kind:?}: the history keeps both");
        assert!(jobs.shutdown(Duration::from_secs(10)), "{kind:?}");
    }
}

/// Retries never move a fixed period's schedule: an hourly job whose
/// occurrence succeeds on its second attempt, a second late, runs next on
/// the hour, not an hour after the retry. Before, the retry's time
/// replaced the occurrence's, and every failure shifted the schedule by
/// its back-off for good. Under a manual clock.
#[test]
fn a_retry_never_moves_a_periodic_schedule() {
    use chronopool::MissedRuns;
    use chronopool_durable::Job;
    use std::sync::Mutex;
    use std::time::SystemTime;

    for kind in BOTH {
        for missed in [MissedRuns::Skip, MissedRuns::Burst, MissedRuns::Delay] {
            let store = Store::new(kind);
            let (clock, _pool, jobs) = on_a_manual_clock(&store, 5);
            let dues = Arc::new(Mutex::new(Vec::<(SystemTime, u32)>::new()));
            let d = dues.clone();
            jobs.register("hourly", move |job| {
                d.lock().unwrap().push((job.due(), job.attempt()));
                // Every occurrence fails once, then succeeds.
                if job.attempt() == 1 {
                    Err("once".into())
                } else {
                    Ok(())
                }
            });
            jobs.start().unwrap();
            let start = clock.system_time();
            jobs.schedule_all(vec![
                Job::new("h", "hourly", "", Schedule::Every(HOUR)).missed_runs(missed)
            ])
            .unwrap();
            // The first occurrence's first attempt failed: it waits for its
            // retry, a second later. A backfill follows the schedule's
            // phase, not the retry's.
            clock.advance(HOUR);
            let backfill = |at: SystemTime| {
                let micros = at
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_micros();
                format!("h@backfill-{micros}")
            };
            if missed == MissedRuns::Skip {
                let (from, to) = (start + 5 * HOUR, start + 7 * HOUR);
                assert_eq!(jobs.backfill("h", from, to).unwrap(), 2, "{kind:?}");
                for at in [from, from + HOUR] {
                    let key = backfill(at);
                    assert!(jobs.job(&key).unwrap().is_some(), "{kind:?}: {key}");
                    assert!(jobs.cancel(&key).unwrap(), "{kind:?}");
                }
            }
            clock.advance(2 * HOUR + Duration::from_secs(10));
            let second = Duration::from_secs(1);
            let expected: Vec<(SystemTime, u32)> = (1..=3)
                .flat_map(|n| [(start + n * HOUR, 1), (start + n * HOUR + second, 2)])
                .collect();
            assert_eq!(*dues.lock().unwrap(), expected, "{kind:?}, {missed:?}");
            let h = jobs.job("h").unwrap().unwrap();
            assert_eq!(h.next_fire, start + 4 * HOUR, "{kind:?}, {missed:?}");
            assert!(jobs.shutdown(Duration::from_secs(10)), "{kind:?}");
        }
    }
}

/// An occurrence that dies after its retries hands the schedule on from
/// its own due time, not from its last retry's: an hourly job that always
/// fails still tries on the hour, each policy alike.
#[test]
fn a_dead_occurrence_keeps_a_periodic_schedule() {
    use chronopool::MissedRuns;
    use chronopool_durable::Job;
    use std::sync::Mutex;
    use std::time::SystemTime;

    for kind in BOTH {
        for missed in [MissedRuns::Skip, MissedRuns::Burst, MissedRuns::Delay] {
            let store = Store::new(kind);
            let (clock, _pool, jobs) = on_a_manual_clock(&store, 2);
            let dues = Arc::new(Mutex::new(Vec::<(SystemTime, u32)>::new()));
            let d = dues.clone();
            jobs.register("hourly", move |job| {
                d.lock().unwrap().push((job.due(), job.attempt()));
                Err("always".into())
            });
            jobs.start().unwrap();
            let start = clock.system_time();
            jobs.schedule_all(vec![
                Job::new("h", "hourly", "", Schedule::Every(HOUR)).missed_runs(missed)
            ])
            .unwrap();
            clock.advance(2 * HOUR + Duration::from_secs(10));
            let second = Duration::from_secs(1);
            let expected: Vec<(SystemTime, u32)> = (1..=2)
                .flat_map(|n| [(start + n * HOUR, 1), (start + n * HOUR + second, 2)])
                .collect();
            assert_eq!(*dues.lock().unwrap(), expected, "{kind:?}, {missed:?}");
            let h = jobs.job("h").unwrap().unwrap();
            assert_eq!(
                (h.state, h.next_fire),
                (JobState::Scheduled, start + 3 * HOUR),
                "{kind:?}, {missed:?}"
            );
            assert_eq!(jobs.metrics().dead, 2, "{kind:?}, {missed:?}");
            assert!(jobs.shutdown(Duration::from_secs(10)), "{kind:?}");
        }
    }
}

//! Durable jobs on a real SQLite file: one-shot, keyed, recurring and cron
//! schedules under a manual clock, failures and dead jobs, a restart on the
//! same file, an unregistered handler, and a crashed run's lease taken over
//! by another scheduler.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chronopool::MissedRuns;
use chronopool::{ManualClock, ScheduledExecutor, MANUAL_CLOCK_START};
use chronopool_durable::{Config, DurableScheduler, Job, JobState, Schedule};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// A pool on a manual clock of its own.
fn manual_pool() -> (ScheduledExecutor, ManualClock) {
    let clock = ManualClock::new();
    (pool_on(&clock), clock)
}

/// A pool on `clock` (a process of a test that restarts on one clock).
fn pool_on(clock: &ManualClock) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// A config for a manual clock: a day's window, polled twice a day (so a
/// manual year costs 730 polls).
fn manual_config() -> Config {
    let mut config = Config::default();
    config.window = DAY;
    config.poll_interval = DAY / 2;
    config.retry = chronopool::trigger::Backoff::exponential(
        Duration::from_secs(60),
        2.0,
        Duration::from_secs(300),
    );
    config
}

/// Every run a handler saw: its key, its attempt, when it was due, and the
/// executor's time when it ran.
type Runs = Arc<Mutex<Vec<(String, u32, SystemTime, SystemTime)>>>;

fn recording(jobs: &DurableScheduler, pool: &ScheduledExecutor, name: &str) -> Runs {
    let runs: Runs = Arc::default();
    let (r, weak) = (runs.clone(), pool.downgrade());
    jobs.register(name, move |job| {
        let now = weak.upgrade().map(|p| p.system_time()).unwrap();
        r.lock()
            .unwrap()
            .push((job.key().to_owned(), job.attempt(), job.due(), now));
        Ok(())
    });
    runs
}

#[test]
fn a_one_shot_job_runs_once_at_its_time_and_leaves_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let jobs =
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), manual_config()).unwrap();
    let runs = recording(&jobs, &pool, "remind");
    jobs.start().unwrap();
    let at = SystemTime::UNIX_EPOCH + MANUAL_CLOCK_START + 3 * HOUR;
    jobs.schedule("r1", "remind", b"", Schedule::At(at))
        .unwrap();
    clock.advance(2 * HOUR);
    assert!(runs.lock().unwrap().is_empty(), "not before its time");
    assert_eq!(jobs.job("r1").unwrap().unwrap().state, JobState::Scheduled);
    clock.advance(2 * HOUR);
    assert_eq!(*runs.lock().unwrap(), [("r1".to_owned(), 1, at, at)]);
    assert!(
        jobs.job("r1").unwrap().is_none(),
        "a finished one-shot job is deleted"
    );
    clock.advance(DAY);
    assert_eq!(runs.lock().unwrap().len(), 1);
}

#[test]
fn scheduling_a_key_again_replaces_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let jobs =
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), manual_config()).unwrap();
    let payloads = Arc::new(Mutex::new(Vec::new()));
    let p = payloads.clone();
    jobs.register("mail", move |job| {
        p.lock().unwrap().push(job.payload().to_vec());
        Ok(())
    });
    jobs.start().unwrap();
    jobs.schedule("k", "mail", b"first", Schedule::After(HOUR))
        .unwrap();
    jobs.schedule("k", "mail", b"second", Schedule::After(2 * HOUR))
        .unwrap();
    clock.advance(3 * HOUR);
    assert_eq!(*payloads.lock().unwrap(), [b"second".to_vec()]);
}

/// A manual year of mixed schedules: every fire at its time, none missed
/// or doubled.
#[test]
fn a_year_of_mixed_schedules_fires_every_occurrence_at_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let jobs =
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), manual_config()).unwrap();
    let runs = recording(&jobs, &pool, "tick");
    jobs.start().unwrap();
    let daily = Schedule::cron("0 2 * * *", "Europe/Berlin").unwrap();
    jobs.schedule("daily", "tick", b"", daily).unwrap();
    jobs.schedule("weekly", "tick", b"", Schedule::Every(7 * DAY))
        .unwrap();
    jobs.schedule("half-year", "tick", b"", Schedule::After(182 * DAY))
        .unwrap();
    jobs.schedule(
        "in-ten-minutes",
        "tick",
        b"",
        Schedule::After(Duration::from_secs(600)),
    )
    .unwrap();
    clock.advance(365 * DAY);
    let runs = runs.lock().unwrap();
    let count = |key: &str| runs.iter().filter(|r| r.0 == key).count();
    assert_eq!(count("daily"), 365);
    assert_eq!(count("weekly"), 52);
    assert_eq!((count("half-year"), count("in-ten-minutes")), (1, 1));
    for (key, attempt, due, ran) in runs.iter() {
        assert_eq!((attempt, due), (&1, ran), "{key} ran at its due time, once");
    }
}

#[test]
fn failures_are_retried_then_dead_and_a_dead_job_can_be_retried() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let mut config = manual_config();
    config.max_attempts = 3;
    let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), config).unwrap();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let healthy = Arc::new(AtomicUsize::new(0));
    let (a, h) = (attempts.clone(), healthy.clone());
    jobs.register("flaky", move |job| {
        a.lock().unwrap().push(job.attempt());
        if h.load(Ordering::SeqCst) == 1 {
            Ok(())
        } else {
            Err(format!("down at attempt {}", job.attempt()).into())
        }
    });
    jobs.start().unwrap();
    jobs.schedule("f", "flaky", b"", Schedule::After(HOUR))
        .unwrap();
    clock.advance(2 * HOUR);
    assert_eq!(*attempts.lock().unwrap(), [1, 2, 3]);
    let dead = jobs.dead_jobs().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_error.as_deref(), Some("down at attempt 3"));
    clock.advance(DAY);
    assert_eq!(attempts.lock().unwrap().len(), 3, "the dead do not run");
    healthy.store(1, Ordering::SeqCst);
    assert!(jobs.retry("f").unwrap());
    clock.advance(Duration::ZERO);
    assert_eq!(*attempts.lock().unwrap(), [1, 2, 3, 1]);
    assert!(jobs.job("f").unwrap().is_none());
}

#[test]
fn jobs_survive_a_restart_on_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let clock = ManualClock::new();
    {
        let pool = pool_on(&clock);
        let jobs = DurableScheduler::sqlite(&pool, &path, manual_config()).unwrap();
        jobs.schedule("later", "tick", b"x", Schedule::After(3 * DAY))
            .unwrap();
        jobs.schedule("hourly", "tick", b"", Schedule::Every(HOUR))
            .unwrap();
        // The process ends before either is due.
    }
    clock.advance(2 * DAY);
    let pool = pool_on(&clock);
    let jobs = DurableScheduler::sqlite(&pool, &path, manual_config()).unwrap();
    let runs = recording(&jobs, &pool, "tick");
    jobs.start().unwrap();
    clock.advance(2 * DAY);
    let runs = runs.lock().unwrap();
    assert_eq!(runs.iter().filter(|r| r.0 == "later").count(), 1);
    // The hourly job missed 47 runs while no process ran: it runs once for
    // them (the default misfire policy), then every hour: 1 + 48.
    assert_eq!(runs.iter().filter(|r| r.0 == "hourly").count(), 49);
}

/// The core's `MissedRuns`, same meanings, and a catch-up window.
#[test]
fn missed_runs_follow_their_policy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let clock = ManualClock::new();
    {
        let pool = pool_on(&clock);
        let jobs = DurableScheduler::sqlite(&pool, &path, manual_config()).unwrap();
        let hourly = |key: &str| Job::new(key, "tick", "", Schedule::Every(HOUR));
        jobs.schedule_all([
            hourly("skip").missed_runs(MissedRuns::Skip),
            hourly("burst").missed_runs(MissedRuns::Burst),
            hourly("delay").missed_runs(MissedRuns::Delay),
            hourly("none-late").catch_up(HOUR / 2),
        ])
        .unwrap();
    }
    // Down for 10 hours and a half: 10 runs missed (the first due at 1 h,
    // the last at 10 h).
    clock.advance(10 * HOUR + HOUR / 2);
    let pool = pool_on(&clock);
    let jobs = DurableScheduler::sqlite(&pool, &path, manual_config()).unwrap();
    let runs = recording(&jobs, &pool, "tick");
    jobs.start().unwrap();
    clock.advance(Duration::ZERO);
    let count = |key: &str| runs.lock().unwrap().iter().filter(|r| r.0 == key).count();
    let counts = || {
        (
            count("skip"),
            count("burst"),
            count("delay"),
            count("none-late"),
        )
    };
    assert_eq!(counts(), (1, 10, 1, 0));
    assert_eq!(jobs.metrics().skipped, 1);
    // Skip keeps the phase (11 h); Delay shifts it (11.5 h).
    clock.advance(HOUR / 2);
    assert_eq!(counts(), (2, 11, 1, 1));
    clock.advance(HOUR / 2);
    assert_eq!(counts(), (2, 11, 2, 1));
}

#[test]
fn a_job_without_a_handler_waits_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let jobs =
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), manual_config()).unwrap();
    jobs.start().unwrap();
    jobs.schedule("n", "from-a-newer-version", b"", Schedule::After(HOUR))
        .unwrap();
    // Left to other schedulers for a minute past its time; the poll after
    // that (every 12 manual hours here) claims it to say why it waits.
    clock.advance(13 * HOUR);
    let waiting = jobs.job("n").unwrap().unwrap();
    assert_eq!((waiting.state, waiting.attempt), (JobState::Scheduled, 0));
    assert!(waiting
        .last_error
        .unwrap()
        .contains("no handler is registered for \"from-a-newer-version\""));
    let runs = recording(&jobs, &pool, "from-a-newer-version");
    clock.advance(DAY);
    assert_eq!(runs.lock().unwrap().len(), 1);
}

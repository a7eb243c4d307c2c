//! Durable jobs on a real PostgreSQL server that the tests start
//! (`common::PgServer`): the behaviour of the SQLite tests, a server
//! restarted while jobs run, and a cluster of three processes sharing one
//! schedule, with and without one of them killed half-way.

#![cfg(unix)]

mod common;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chronopool::{ManualClock, MissedRuns, ScheduledExecutor};
use chronopool_durable::{
    Config, DurableError, DurableScheduler, Job, JobError, JobState, Schedule,
};
use common::PgServer;

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);
const PATIENCE: Duration = Duration::from_secs(60);

fn manual_config() -> Config {
    let mut config = Config::default();
    config.window = DAY;
    config.poll_interval = DAY / 2;
    config.retry = chronopool::trigger::Backoff::exponential(
        Duration::from_secs(60),
        2.0,
        Duration::from_secs(300),
    );
    config.max_attempts = 2;
    // Dead jobs stay for the whole test (the default is 7 days).
    config.keep_dead = 365 * DAY;
    config
}

fn real_config() -> Config {
    let mut config = Config::default();
    config.window = Duration::from_secs(5);
    config.poll_interval = Duration::from_millis(100);
    config.lease = Duration::from_secs(1);
    config
}

#[test]
fn keyed_recurring_failing_and_unhandled_jobs_on_postgres() {
    let server = PgServer::start();
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()
        .unwrap();
    let jobs = DurableScheduler::postgres(&pool, &server.params(), manual_config()).unwrap();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let r = runs.clone();
    jobs.register("tick", move |job| {
        r.lock()
            .unwrap()
            .push((job.key().to_owned(), job.payload().to_vec()));
        if job.key() == "flaky" {
            Err("always down".into())
        } else {
            Ok(())
        }
    });
    jobs.start().unwrap();
    jobs.schedule("k", "tick", b"first", Schedule::After(HOUR))
        .unwrap();
    jobs.schedule("k", "tick", b"second", Schedule::After(2 * HOUR))
        .unwrap();
    jobs.schedule(
        "daily",
        "tick",
        b"",
        Schedule::cron("30 6 * * *", "America/New_York").unwrap(),
    )
    .unwrap();
    jobs.schedule("flaky", "tick", b"", Schedule::After(HOUR))
        .unwrap();
    jobs.schedule("orphan", "nobody", b"", Schedule::After(HOUR))
        .unwrap();
    clock.advance(30 * DAY);
    let runs = runs.lock().unwrap();
    let count = |key: &str| runs.iter().filter(|r| r.0 == key).count();
    assert_eq!(count("k"), 1);
    assert!(runs.contains(&("k".to_owned(), b"second".to_vec())));
    assert_eq!(count("daily"), 30);
    assert_eq!(count("flaky"), 2, "max_attempts");
    assert_eq!(jobs.dead_jobs().unwrap()[0].key, "flaky");
    let orphan = jobs.job("orphan").unwrap().unwrap();
    assert_eq!(orphan.state, JobState::Scheduled);
    assert!(orphan.last_error.unwrap().contains("no handler"));
}

/// The store's own SQL for batches (one `unnest` insert), retention and
/// permanent failures, as `tests/features.rs` checks it on SQLite.
#[test]
fn batches_retention_and_permanent_failures_on_postgres() {
    let server = PgServer::start();
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut config = manual_config();
    config.keep_done = DAY;
    config.keep_dead = 3 * DAY;
    let jobs = DurableScheduler::postgres(&pool, &server.params(), config).unwrap();
    let runs = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let r = runs.clone();
    jobs.register("work", move |job| {
        *r.lock().unwrap().entry(job.key().to_owned()).or_default() += 1;
        if job.payload() == b"poison" {
            Err(JobError::permanent("cannot read the payload"))
        } else {
            Ok(())
        }
    });
    jobs.start().unwrap();
    let batch = (1..=1000u64)
        .map(|i| {
            let due = Schedule::After(Duration::from_secs(60 * i));
            Job::new(format!("j{i}"), "work", i.to_string(), due)
        })
        .chain([Job::new("j7", "work", "poison", Schedule::After(HOUR))]);
    jobs.schedule_all(batch).unwrap();
    let bad = [
        Job::new("b1", "work", "", Schedule::After(HOUR)),
        Job::new("b2", "work", "", Schedule::Every(Duration::ZERO)),
    ];
    assert!(matches!(
        jobs.schedule_all(bad),
        Err(DurableError::Schedule(_))
    ));
    assert!(jobs.job("b1").unwrap().is_none(), "none of a bad batch");

    clock.advance(DAY);
    {
        let runs = runs.lock().unwrap();
        assert_eq!(runs.len(), 1000);
        assert!(runs.values().all(|&n| n == 1));
    }
    assert_eq!(jobs.job("j1").unwrap().unwrap().state, JobState::Done);
    let dead = jobs.job("j7").unwrap().unwrap();
    assert_eq!((dead.state, dead.attempt), (JobState::Dead, 1));
    clock.advance(2 * DAY);
    assert!(jobs.job("j1").unwrap().is_none(), "done: kept a day");
    assert!(jobs.job("j7").unwrap().is_some(), "dead: kept 3 days");
    clock.advance(2 * DAY);
    assert!(jobs.job("j7").unwrap().is_none());
    assert_eq!(jobs.metrics().cleaned, 1000);
}

#[test]
fn a_server_restarted_while_jobs_run_loses_none() {
    let server = PgServer::start();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    // A lease longer than the restart: the runs caught by it finish after
    // the reconnection, within their lease.
    let mut config = real_config();
    config.lease = Duration::from_secs(10);
    let jobs = DurableScheduler::postgres(&pool, &server.params(), config).unwrap();
    let ran = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let r = ran.clone();
    jobs.register("work", move |job| {
        *r.lock().unwrap().entry(job.key().to_owned()).or_default() += 1;
        Ok(())
    });
    jobs.start().unwrap();
    for n in 0..300u64 {
        let delay = Duration::from_millis(n * 7 % 2_000);
        jobs.schedule(&format!("job-{n}"), "work", b"", Schedule::After(delay))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(700));
    server.restart();
    let deadline = Instant::now() + PATIENCE;
    while ran.lock().unwrap().len() < 300 {
        assert!(
            Instant::now() < deadline,
            "{} of 300 ran",
            ran.lock().unwrap().len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let twice = ran.lock().unwrap().values().filter(|&&n| n > 1).count();
    assert!(
        twice <= 2,
        "{twice} ran twice: only runs caught by the restart may"
    );
}

// The cluster: child processes of this test binary.

/// Appends a line (a small `O_APPEND` write: whole or not at all).
fn append(path: &Path, line: &str) {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

fn millis(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis()
}

/// A cluster member: runs the jobs of the database in
/// `CHRONOPOOL_DURABLE_PG`, logging `key due pid` per run to the file in
/// `CHRONOPOOL_DURABLE_LOG`, until killed.
#[test]
#[ignore = "run by the cluster tests as a child process"]
fn cluster_member() {
    let (Ok(params), Ok(log)) = (
        std::env::var("CHRONOPOOL_DURABLE_PG"),
        std::env::var("CHRONOPOOL_DURABLE_LOG"),
    ) else {
        return;
    };
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    let jobs = DurableScheduler::postgres(&pool, &params, real_config()).unwrap();
    let log = Mutex::new(std::path::PathBuf::from(log));
    jobs.register("work", move |job| {
        append(
            &log.lock().unwrap(),
            &format!("{} {} {}", job.key(), millis(job.due()), std::process::id()),
        );
        Ok(())
    });
    jobs.start().unwrap();
    std::thread::sleep(PATIENCE * 2);
}

fn member(params: &str, log: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["cluster_member", "--exact", "--ignored", "--quiet"])
        .env("CHRONOPOOL_DURABLE_PG", params)
        .env("CHRONOPOOL_DURABLE_LOG", log)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// The runs of a cluster test: per one-shot key and per recurring (key,
/// due), and the killed member's runs (keys, in order), if one was killed.
struct Runs {
    once: HashMap<String, usize>,
    every: HashMap<(String, String), usize>,
    killed: Vec<String>,
}

/// 10,000 one-shot jobs due over 3 s and 50 recurring ones every 400 ms,
/// run by three processes; `kill_one`: one of them is killed 1.5 s in.
fn cluster(kill_one: bool) -> Runs {
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs");
    let params = server.params();
    // This process only schedules (it never starts its loop).
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let jobs = DurableScheduler::postgres(&pool, &params, real_config()).unwrap();
    for n in 0..10_000u64 {
        let delay = Duration::from_millis(500 + n.wrapping_mul(2_654_435_761) % 3_000);
        jobs.schedule(&format!("once-{n}"), "work", b"", Schedule::After(delay))
            .unwrap();
    }
    // RunAll: a late occurrence still runs, so every one is in the log.
    for n in 0..50 {
        let every = Schedule::Every(Duration::from_millis(400));
        jobs.schedule_with(&format!("every-{n}"), "work", b"", every, MissedRuns::Burst)
            .unwrap();
    }
    let mut members: Vec<Child> = (0..3).map(|_| member(&params, &log)).collect();
    std::thread::sleep(Duration::from_millis(1_500));
    let killed_pid = members[0].id().to_string();
    if kill_one {
        members[0].kill().unwrap();
        members[0].wait().unwrap();
    }
    // Wait for every one-shot job to have run (and left the store).
    let deadline = Instant::now() + PATIENCE;
    loop {
        let once_done =
            (0..10_000).all(|n| n % 500 != 0 || jobs.job(&format!("once-{n}")).unwrap().is_none());
        let ran = fs::read_to_string(&log).unwrap_or_default();
        let once_lines = ran.lines().filter(|l| l.starts_with("once-")).count();
        if once_done && once_lines >= 10_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{once_lines} of 10,000 one-shot runs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The recurring ones for a while longer, then stop the members. Their
    // last occurrences may be in flight: only occurrences due before the
    // stop count.
    std::thread::sleep(Duration::from_secs(3));
    let stop = millis(SystemTime::now());
    for member in &mut members {
        let _ = member.kill();
        let _ = member.wait();
    }
    let mut runs = Runs {
        once: HashMap::new(),
        every: HashMap::new(),
        killed: Vec::new(),
    };
    for line in fs::read_to_string(&log).unwrap().lines() {
        let mut fields = line.split(' ');
        let (key, due, pid) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        );
        if kill_one && pid == killed_pid {
            runs.killed.push(key.to_owned());
        }
        if key.starts_with("once-") {
            *runs.once.entry(key.to_owned()).or_default() += 1;
        } else if due.parse::<u128>().unwrap() + 1_000 < stop {
            let occurrence = (key.to_owned(), due.to_owned());
            *runs.every.entry(occurrence).or_default() += 1;
        }
    }
    runs
}

#[test]
fn three_processes_run_every_job_exactly_once() {
    let Runs { once, every, .. } = cluster(false);
    assert_eq!(once.len(), 10_000);
    assert!(once.values().all(|&n| n == 1), "a one-shot job ran twice");
    assert!(every.values().all(|&n| n == 1), "an occurrence fired twice");
    assert_every_occurrence(&every);
}

#[test]
fn with_one_process_killed_every_job_still_runs() {
    let Runs {
        once,
        every,
        killed,
    } = cluster(true);
    assert_eq!(once.len(), 10_000, "every one-shot job ran");
    // A run is in flight from its claim to the commit of its finish. The
    // finishes go in batches of at most 1,000 per transaction, but more
    // than a batch can wait for the store when it is slow (a loaded
    // machine): only the killed process's runs may run again, never
    // another's.
    let in_flight = &killed[..];
    let twice: Vec<&String> = once
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(key, _)| key)
        .chain(
            every
                .iter()
                .filter(|(_, &n)| n > 1)
                .map(|((key, _), _)| key),
        )
        .collect();
    assert!(
        twice.iter().all(|key| in_flight.contains(key)),
        "{twice:?} ran twice: only the killed process's runs in flight may"
    );
    assert!(once.values().chain(every.values()).all(|&n| n <= 2));
    assert_every_occurrence(&every);
}

/// Each recurring job fired at every 400 ms step from its first run on
/// (none skipped), at least 3 times.
fn assert_every_occurrence(every: &HashMap<(String, String), usize>) {
    let mut dues: HashMap<&str, Vec<u128>> = HashMap::new();
    for (key, due) in every.keys() {
        dues.entry(key).or_default().push(due.parse().unwrap());
    }
    assert_eq!(dues.len(), 50, "every recurring job fired");
    for (key, mut times) in dues {
        times.sort_unstable();
        assert!(times.len() >= 3, "{key} fired {} times", times.len());
        for pair in times.windows(2) {
            assert_eq!(pair[1] - pair[0], 400, "{key}: an occurrence is missing");
        }
    }
}

//! Crashes: a child process (this test binary, run again as
//! `child_schedules_and_runs`) schedules 10,000 jobs due over the next
//! seconds, on a SQLite file or on a PostgreSQL server the test starts,
//! and runs them, and is killed with SIGKILL at a point chosen by the
//! parent: while it schedules, or while it runs. A new scheduler on the
//! same store then runs what is left. Every job whose
//! `schedule` call had returned runs at least once; a job runs twice only
//! if the kill caught its run in flight: between its claim and the commit
//! of its finish, which the scheduler sends in batches (so it is among the
//! child's last runs).

#![cfg(unix)]

mod common;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler, Schedule};

const JOBS: usize = 10_000;
const CHILD_WORKERS: usize = 2;
/// How recent a run must be, counted back from the child's last, to have
/// been in flight at the kill: its finish was in the batch being sent or
/// queued behind it (a batch carries at most 1,000; runs come at about
/// 3,000 a second here, and a finish takes a millisecond or two).
const IN_FLIGHT: usize = 1_000;
const PATIENCE: Duration = Duration::from_secs(60);

fn config() -> Config {
    let mut config = Config::default();
    config.window = Duration::from_secs(5);
    config.poll_interval = Duration::from_millis(100);
    config.lease = Duration::from_secs(1);
    config
}

/// Appends `key` to the file at `path`, one line per run (a small
/// `O_APPEND` write: whole or not at all at a kill).
fn append(path: &Path, key: &str) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(format!("{key}\n").as_bytes())
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A scheduler whose handler logs every run to `dir`'s `runs`, on the
/// PostgreSQL database `pg` names, else on `dir`'s SQLite file.
fn scheduler(pool: &ScheduledExecutor, dir: &Path, pg: Option<&str>) -> DurableScheduler {
    let jobs = match pg {
        Some(params) => DurableScheduler::postgres(pool, params, config()),
        None => DurableScheduler::sqlite(pool, dir.join("jobs.db"), config()),
    }
    .unwrap();
    let runs = Mutex::new(dir.join("runs"));
    jobs.register("work", move |job| {
        let runs = runs.lock().unwrap();
        append(&runs, job.key()).map_err(chronopool_durable::JobError::retry)
    });
    jobs
}

/// The child's body: only when the parent runs it, with its directory in
/// `CHRONOPOOL_DURABLE_CHILD` (and the database in `CHRONOPOOL_DURABLE_PG`
/// for PostgreSQL).
#[test]
#[ignore = "run by the crash tests as a child process"]
fn child_schedules_and_runs() {
    let Ok(dir) = std::env::var("CHRONOPOOL_DURABLE_CHILD") else {
        return;
    };
    let dir = Path::new(&dir);
    let pool = ScheduledExecutor::builder()
        .worker_threads(CHILD_WORKERS)
        .build()
        .unwrap();
    let pg = std::env::var("CHRONOPOOL_DURABLE_PG").ok();
    let jobs = scheduler(&pool, dir, pg.as_deref());
    jobs.start().unwrap();
    let scheduled = dir.join("scheduled");
    for n in 0..JOBS {
        let key = format!("job-{n}");
        // Due over the next 3 s, spread by a multiplicative hash.
        let delay = Duration::from_millis((n as u64).wrapping_mul(2_654_435_761) % 3_000);
        jobs.schedule(&key, "work", b"", Schedule::After(delay))
            .unwrap();
        append(&scheduled, &key).unwrap();
    }
    // Run until killed.
    std::thread::sleep(PATIENCE);
}

/// Kills the child `after` its start, then lets a new scheduler finish,
/// on the PostgreSQL database `pg` names, else on a SQLite file.
fn crash_and_recover(after: Duration, pg: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "child_schedules_and_runs",
            "--exact",
            "--ignored",
            "--quiet",
        ])
        .env("CHRONOPOOL_DURABLE_CHILD", dir.path())
        .stdout(Stdio::null());
    if let Some(params) = pg {
        child.env("CHRONOPOOL_DURABLE_PG", params);
    }
    let mut child = child.spawn().unwrap();
    std::thread::sleep(after);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let scheduled = lines(&dir.path().join("scheduled"));
    let before = lines(&dir.path().join("runs"));
    let ran_before = before.len();

    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    let jobs = scheduler(&pool, dir.path(), pg);
    jobs.start().unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let runs = lines(&dir.path().join("runs"));
        let mut count: HashMap<&str, usize> = HashMap::new();
        for key in &runs {
            *count.entry(key).or_default() += 1;
        }
        let missing = scheduled
            .iter()
            .filter(|k| !count.contains_key(k.as_str()))
            .count();
        if missing == 0 {
            let twice: Vec<_> = count.iter().filter(|(_, &n)| n > 1).collect();
            let recent = &before[before.len().saturating_sub(IN_FLIGHT)..];
            assert!(
                twice
                    .iter()
                    .all(|(key, &n)| n == 2 && recent.iter().any(|r| r == *key)),
                "only runs in flight at the kill run again: {twice:?}"
            );
            eprintln!(
                "{} killed after {after:?}: {} scheduled, {ran_before} ran before the kill, \
                 {} in all, {} twice",
                if pg.is_some() { "PostgreSQL" } else { "SQLite" },
                scheduled.len(),
                runs.len(),
                twice.len()
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{missing} of {} scheduled jobs never ran",
            scheduled.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn killed_while_scheduling() {
    crash_and_recover(Duration::from_millis(150), None);
}

#[test]
fn killed_while_running() {
    crash_and_recover(Duration::from_millis(2_500), None);
}

#[test]
fn killed_while_scheduling_and_running() {
    crash_and_recover(Duration::from_millis(800), None);
}

/// The same three kills on one PostgreSQL server, a database each.
#[test]
fn killed_at_three_points_on_postgres() {
    let server = common::PgServer::start();
    for (n, after) in [150, 800, 2_500].into_iter().enumerate() {
        let params = server.database(&format!("crash{n}"));
        crash_and_recover(Duration::from_millis(after), Some(&params));
    }
}

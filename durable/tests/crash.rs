//! Processes that die, stall or start together, on both stores: child
//! processes (this test binary, run again as `child`, its part chosen by
//! `CHRONOPOOL_DURABLE_CHILD`) killed with SIGKILL, stopped with SIGSTOP,
//! restarted with the PID the killed one had, killed by their own handler.
//!
//! * **A kill**: a child schedules 10,000 jobs due over the next seconds
//!   and runs them, and is killed while it schedules, while it runs, or in
//!   between; a new scheduler runs what is left. Every job whose
//!   `schedule` call returned runs at least once; a job runs twice only if
//!   the kill caught its run in flight (between its claim and the commit
//!   of its outcome, so among the child's last runs).
//! * **The same PID**: the killed child and the one after it both run as
//!   PID 1 (each in a PID namespace of its own, as containers do): the new
//!   one must take the old one's runs over, not mistake them for its own.
//! * **A stall**: a child is stopped (SIGSTOP: a pause of the whole
//!   process) while it runs a job; its lease ends, another scheduler runs
//!   the job; the child, continued, stores nothing.
//! * **A poison job**: a handler that aborts its process, started again
//!   and again: the job is dead after `max_attempts` runs.
//! * **Opening together**: six processes open one new store at once.

#![cfg(unix)]

mod common;
mod stores;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler, JobState, Schedule};
use stores::{eventually, open_described, pool, Kind, Store, BOTH};

const JOBS: usize = 10_000;
/// How recent a run must be, counted back from the child's last, to have
/// been in flight at the kill: claimed (a claim takes at most 1,000) or
/// waiting for its outcome's commit.
const IN_FLIGHT: usize = 2_000;
const PATIENCE: Duration = Duration::from_secs(60);

fn config() -> Config {
    let mut config = Config::default();
    config.window = Duration::from_secs(5);
    config.poll_interval = Duration::from_millis(100);
    config.lease = Duration::from_secs(1);
    config
}

/// Appends `line` to the file at `path` (a small `O_APPEND` write: whole
/// or not at all at a kill).
fn append(path: &Path, line: &str) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A scheduler on the described store whose handler logs every run's key
/// to `dir`'s `runs`.
fn logging(pool: &ScheduledExecutor, dir: &Path, store: &str, config: Config) -> DurableScheduler {
    let jobs = open_described(store, pool, config);
    let runs = Mutex::new(dir.join("runs"));
    jobs.register("work", move |job| {
        let runs = runs.lock().unwrap();
        append(&runs, job.key()).map_err(chronopool_durable::JobError::retry)
    });
    jobs
}

/// The children's bodies: only when a parent runs this test as one.
#[test]
#[ignore = "run by the other tests of this file as a child process"]
fn child() {
    let (Ok(part), Ok(dir), Ok(store)) = (
        std::env::var("CHRONOPOOL_DURABLE_CHILD"),
        std::env::var("CHRONOPOOL_DURABLE_DIR"),
        std::env::var("CHRONOPOOL_DURABLE_STORE"),
    ) else {
        return;
    };
    let dir = Path::new(&dir);
    let pool = pool(2);
    match part.as_str() {
        "schedule_and_run" => {
            let jobs = logging(&pool, dir, &store, config());
            jobs.start().unwrap();
            for n in 0..JOBS {
                let key = format!("job-{n}");
                // Due over the next 3 s, spread by a multiplicative hash.
                let delay = Duration::from_millis((n as u64).wrapping_mul(2_654_435_761) % 3_000);
                jobs.schedule(&key, "work", b"", Schedule::After(delay))
                    .unwrap();
                append(&dir.join("scheduled"), &key).unwrap();
            }
            std::thread::sleep(PATIENCE);
        }
        "run" => {
            let jobs = logging(&pool, dir, &store, config());
            jobs.start().unwrap();
            std::thread::sleep(PATIENCE);
        }
        "poison" => {
            let mut config = config();
            config.max_attempts = 3;
            config.lease = Duration::from_millis(500);
            let jobs = open_described(&store, &pool, config);
            let runs = dir.join("runs");
            jobs.register("poison", move |_| {
                append(&runs, "run").unwrap();
                std::process::abort();
            });
            jobs.start().unwrap();
            std::thread::sleep(Duration::from_secs(20));
        }
        "stall" => {
            let jobs = open_described(&store, &pool, config());
            jobs.register("work", |job| {
                println!("STARTED {}", job.attempt());
                std::thread::sleep(Duration::from_secs(2));
                println!("ENDED");
                Ok(())
            });
            jobs.start().unwrap();
            std::thread::sleep(PATIENCE);
        }
        "open" => {
            let go = dir.join("go");
            while !go.exists() {
                std::thread::sleep(Duration::from_micros(200));
            }
            let opened = match store.split_once(':') {
                Some(("postgres", params)) => DurableScheduler::postgres(&pool, params, config()),
                _ => DurableScheduler::sqlite(&pool, store.trim_start_matches("sqlite:"), config()),
            };
            match opened {
                Ok(_) => println!("RESULT OPENED"),
                Err(e) => println!("RESULT FAILED {e}"),
            }
        }
        other => panic!("no child part {other:?}"),
    }
}

/// A child running `part` on `store`, its files in `dir`; as PID 1 of a
/// PID namespace of its own if `own_pid_1` (killing the `unshare` that
/// holds it kills it too).
fn spawn_child(part: &str, dir: &Path, store: &Store, own_pid_1: bool) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut command = if own_pid_1 {
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--kill-child=KILL"]).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    command
        .args(["child", "--exact", "--ignored", "--quiet", "--nocapture"])
        .env("CHRONOPOOL_DURABLE_CHILD", part)
        .env("CHRONOPOOL_DURABLE_DIR", dir)
        .env("CHRONOPOOL_DURABLE_STORE", store.describe())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the child (with `unshare` from util-linux, as root, for PID namespaces)")
}

/// Reads the child's stdout until a line starting with `prefix`.
fn wait_for_line(child: &mut Child, prefix: &str) -> String {
    let out = child.stdout.as_mut().unwrap();
    let mut reader = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the child ended before {prefix}"
        );
        if line.starts_with(prefix) {
            return line.trim().to_owned();
        }
    }
}

/// Kills the child `after` its start, then lets a new scheduler run what
/// is left: a scheduler in this process, or (`same_pid`) a second child
/// that, like the first, is PID 1 of a namespace of its own.
fn crash_and_recover(kind: Kind, after: Duration, same_pid: bool) {
    let store = Store::new(kind);
    let dir = store.dir.path();
    let mut child = spawn_child("schedule_and_run", dir, &store, same_pid);
    std::thread::sleep(after);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let scheduled = lines(&dir.join("scheduled"));
    let before = lines(&dir.join("runs"));

    let (_pool, _jobs, mut second) = if same_pid {
        (None, None, Some(spawn_child("run", dir, &store, true)))
    } else {
        let pool = pool(2);
        let jobs = logging(&pool, dir, &store.describe(), config());
        jobs.start().unwrap();
        (Some(pool), Some(jobs), None)
    };
    let deadline = Instant::now() + PATIENCE;
    loop {
        let runs = lines(&dir.join("runs"));
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
                "{kind:?}: only runs in flight at the kill run again: {twice:?}"
            );
            eprintln!(
                "{kind:?}{} killed after {after:?}: {} scheduled, {} ran before the kill, \
                 {} in all, {} twice",
                if same_pid {
                    " (PID 1, restarted as PID 1)"
                } else {
                    ""
                },
                scheduled.len(),
                before.len(),
                runs.len(),
                twice.len()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{kind:?}: {missing} of {} scheduled jobs never ran",
            scheduled.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(second) = &mut second {
        second.kill().unwrap();
        second.wait().unwrap();
    }
}

#[test]
fn killed_while_scheduling() {
    for kind in BOTH {
        crash_and_recover(kind, Duration::from_millis(150), false);
    }
}

#[test]
fn killed_while_running() {
    for kind in BOTH {
        crash_and_recover(kind, Duration::from_millis(2_500), false);
    }
}

#[test]
fn killed_while_scheduling_and_running() {
    for kind in BOTH {
        crash_and_recover(kind, Duration::from_millis(800), false);
    }
}

/// As containers run them: the killed process was PID 1, and so is the one
/// that replaces it.
#[test]
fn killed_and_restarted_with_the_same_pid() {
    for kind in BOTH {
        crash_and_recover(kind, Duration::from_millis(1_500), true);
    }
}

/// A child stopped (SIGSTOP) while its handler runs: its lease ends,
/// another scheduler takes the job over and finishes it; the child,
/// continued (SIGCONT), ends its run and stores nothing.
#[test]
fn a_stalled_process_loses_its_run_and_stores_nothing_when_it_wakes() {
    for kind in BOTH {
        let store = Store::new(kind);
        let mut child = spawn_child("stall", store.dir.path(), &store, false);
        let pool = pool(2);
        let jobs = store.open(&pool, config());
        jobs.schedule("j", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        assert_eq!(wait_for_line(&mut child, "STARTED"), "STARTED 1");
        let pid = child.id().to_string();
        let signal = |name: &str| {
            let status = Command::new("kill").args([name, &pid]).status().unwrap();
            assert!(status.success());
        };
        signal("-STOP");
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        jobs.register("work", move |job| {
            assert_eq!(job.attempt(), 2, "taken over");
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        jobs.start().unwrap();
        eventually("taken over and done", || jobs.job("j").unwrap().is_none());
        assert_eq!(jobs.metrics().lease_expired, 1, "{kind:?}");
        signal("-CONT");
        assert_eq!(wait_for_line(&mut child, "ENDED"), "ENDED");
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            jobs.job("j").unwrap().is_none(),
            "{kind:?}: the woken run stored nothing"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 1, "{kind:?}");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// A handler that aborts its process: each new process claims the job
/// again (its attempt counted at the claim), until it is past
/// `max_attempts` (3): then it is dead, and says why.
#[test]
fn a_poison_job_is_dead_after_its_attempts() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(1);
        let jobs = store.open(&pool, config());
        jobs.schedule("p", "poison", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        let mut restarts = 0;
        while jobs.job("p").unwrap().unwrap().state != JobState::Dead {
            restarts += 1;
            assert!(
                restarts <= 8,
                "{kind:?}: still not dead after {restarts} processes"
            );
            let mut child = spawn_child("poison", store.dir.path(), &store, false);
            let started = Instant::now();
            while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            child.wait().unwrap();
        }
        let dead = jobs.job("p").unwrap().unwrap();
        assert_eq!(lines(&store.dir.path().join("runs")).len(), 3, "{kind:?}");
        assert_eq!(dead.attempt, 4, "{kind:?}");
        assert!(dead.last_error.unwrap().contains("never ended"), "{kind:?}");
    }
}

/// Six processes open one new store at the same moment: all of them do.
#[test]
fn processes_that_open_a_new_store_together_all_open_it() {
    for kind in BOTH {
        let store = Store::new(kind);
        let dir = store.dir.path();
        let mut children: Vec<Child> = (0..6)
            .map(|_| spawn_child("open", dir, &store, false))
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        fs::write(dir.join("go"), b"").unwrap();
        for child in &mut children {
            let line = wait_for_line(child, "RESULT");
            assert_eq!(line, "RESULT OPENED", "{kind:?}");
            child.wait().unwrap();
        }
    }
}

//! Chaos on one PostgreSQL server: three member processes (this test
//! binary run again as `member`, each PID 1 of a PID namespace of its own,
//! as containers run) share one schedule while the test reschedules
//! one-shot jobs as they fall due and run, kills a member with SIGKILL
//! and starts another in its place (twice), and restarts the server once.
//!
//! At the end: every job as last acknowledged (each schedule call that
//! returned, with the version in its payload) ran; no run started before
//! its due time; a job (or an occurrence of a recurring one) ran twice
//! only if one of its runs was in a killed member shortly before the kill
//! (in flight: claimed, its outcome not yet committed); no occurrence of a
//! recurring job was skipped; and no job is left stuck.

#![cfg(unix)]

mod common;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chronopool::{MissedRuns, ScheduledExecutor};
use chronopool_durable::{Config, DurableScheduler, Job, Schedule};
use common::PgServer;

const ONCE: usize = 2_000;
const EVERY: usize = 20;
const PERIOD: Duration = Duration::from_millis(500);
/// A run this long before its member's kill may have been in flight.
const IN_FLIGHT: Duration = Duration::from_secs(2);

fn config() -> Config {
    let mut config = Config::default();
    config.window = Duration::from_secs(5);
    config.poll_interval = Duration::from_millis(100);
    config.lease = Duration::from_secs(2);
    config
}

fn micros(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap().as_micros()
}

/// A member: runs the jobs of the database in `CHRONOPOOL_DURABLE_PG`,
/// logging `key payload due_us start_us member` per run to the file in
/// `CHRONOPOOL_DURABLE_LOG`, until killed.
#[test]
#[ignore = "run by the chaos test as a child process"]
fn member() {
    let (Ok(params), Ok(log), Ok(me)) = (
        std::env::var("CHRONOPOOL_DURABLE_PG"),
        std::env::var("CHRONOPOOL_DURABLE_LOG"),
        std::env::var("CHRONOPOOL_DURABLE_MEMBER"),
    ) else {
        return;
    };
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    // The server may be restarting as a member starts: try for a while.
    let give_up = Instant::now() + Duration::from_secs(30);
    let jobs = loop {
        match DurableScheduler::postgres(&pool, &params, config()) {
            Ok(jobs) => break jobs,
            Err(e) if e.is_transient() && Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("{e}"),
        }
    };
    let log = Mutex::new(log);
    jobs.register("work", move |job| {
        let start = micros(SystemTime::now());
        let line = format!(
            "{} {} {} {start} {me}\n",
            job.key(),
            String::from_utf8_lossy(job.payload()),
            micros(job.due())
        );
        let log = log.lock().unwrap();
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&*log)
            .unwrap();
        file.write_all(line.as_bytes()).unwrap();
        Ok(())
    });
    jobs.start().unwrap();
    std::thread::sleep(Duration::from_secs(300));
}

fn start_member(params: &str, log: &Path, name: &str) -> Child {
    Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child=KILL"])
        .arg(std::env::current_exe().unwrap())
        .args(["member", "--exact", "--ignored", "--quiet"])
        .env("CHRONOPOOL_DURABLE_PG", params)
        .env("CHRONOPOOL_DURABLE_LOG", log)
        .env("CHRONOPOOL_DURABLE_MEMBER", name)
        .stdout(Stdio::null())
        .spawn()
        .expect("a member (with `unshare` from util-linux, as root)")
}

/// One run, as its member logged it.
struct Run {
    key: String,
    payload: String,
    due: u128,
    start: u128,
    member: String,
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

#[test]
fn three_members_a_kill_a_restart_and_reschedules_lose_nothing() {
    let server = PgServer::start();
    let params = server.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs");
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    // This process schedules only (it never starts its loops).
    let admin = DurableScheduler::postgres(&pool, &params, config()).unwrap();
    let begin = SystemTime::now();
    let mut acknowledged: HashMap<String, (u32, SystemTime)> = HashMap::new();
    let mut rng = Rng(0x5eed);
    let mut batch = Vec::new();
    for n in 0..ONCE {
        let due = begin + Duration::from_millis(1_000 + rng.below(8_000));
        batch.push(Job::new(
            format!("once-{n}"),
            "work",
            "v1",
            Schedule::At(due),
        ));
        acknowledged.insert(format!("once-{n}"), (1, due));
    }
    admin.schedule_all(batch).unwrap();
    for n in 0..EVERY {
        let job = Job::new(
            format!("every-{n}"),
            "work",
            "every",
            Schedule::Every(PERIOD),
        )
        .missed_runs(MissedRuns::Burst);
        admin.schedule_all([job]).unwrap();
    }
    let mut members: Vec<(String, Child)> = (0..3)
        .map(|i| {
            let name = format!("m{i}");
            let child = start_member(&params, &log, &name);
            (name, child)
        })
        .collect();
    let mut kills: HashMap<String, u128> = HashMap::new();
    let mut generation = 3;
    let started = Instant::now();
    let mut restarted_server = false;
    let mut kills_done = 0;
    while started.elapsed() < Duration::from_secs(10) {
        // Reschedule some one-shot jobs: a new version, due soon.
        for _ in 0..20 {
            let n = rng.below(ONCE as u64);
            let key = format!("once-{n}");
            let version = acknowledged[&key].0 + 1;
            let due = SystemTime::now() + Duration::from_millis(200 + rng.below(3_000));
            let job = Job::new(
                key.clone(),
                "work",
                format!("v{version}"),
                Schedule::At(due),
            );
            if admin.schedule_all([job]).is_ok() {
                acknowledged.insert(key, (version, due));
            }
        }
        let at = started.elapsed();
        if (kills_done == 0 && at > Duration::from_secs(3))
            || (kills_done == 1 && at > Duration::from_secs(7))
        {
            let victim = rng.below(members.len() as u64) as usize;
            let (name, mut child) = members.remove(victim);
            child.kill().unwrap();
            child.wait().unwrap();
            kills.insert(name, micros(SystemTime::now()));
            kills_done += 1;
            std::thread::sleep(Duration::from_millis(300));
            let name = format!("m{generation}");
            generation += 1;
            let child = start_member(&params, &log, &name);
            members.push((name, child));
        }
        if !restarted_server && at > Duration::from_secs(5) {
            server.restart();
            restarted_server = true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Every one-shot job runs and leaves the store.
    let deadline = Instant::now() + Duration::from_secs(90);
    let left = || {
        let mut client = postgres::Client::connect(&params, postgres::NoTls).unwrap();
        let row = client
            .query_one(
                "SELECT count(*) FROM chronopool_jobs WHERE key LIKE 'once-%'",
                &[],
            )
            .unwrap();
        row.get::<_, i64>(0)
    };
    while left() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} one-shot jobs never ran",
            left()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let stop = micros(SystemTime::now());
    for (_, child) in &mut members {
        let _ = child.kill();
        let _ = child.wait();
    }

    let runs: Vec<Run> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            Run {
                key: f[0].into(),
                payload: f[1].into(),
                due: f[2].parse().unwrap(),
                start: f[3].parse().unwrap(),
                member: f[4].into(),
            }
        })
        .collect();
    // None early.
    let early: Vec<&Run> = runs.iter().filter(|r| r.start < r.due).collect();
    assert!(
        early.is_empty(),
        "{} runs started before they were due",
        early.len()
    );
    // Every acknowledged job, as last acknowledged, ran (not before the
    // time it was given).
    for (key, (version, due)) in &acknowledged {
        let payload = format!("v{version}");
        let ran = runs
            .iter()
            .any(|r| &r.key == key && r.payload == payload && r.start >= micros(*due));
        assert!(ran, "{key} {payload} never ran");
    }
    // Duplicates only for runs in flight at a kill.
    let mut by_run: HashMap<(&str, &str, u128), Vec<&Run>> = HashMap::new();
    for r in &runs {
        let id = if r.key.starts_with("every-") {
            (r.key.as_str(), "", r.due)
        } else {
            (r.key.as_str(), r.payload.as_str(), 0)
        };
        by_run.entry(id).or_default().push(r);
    }
    let mut twice = 0;
    for (id, rs) in &by_run {
        if rs.len() < 2 {
            continue;
        }
        twice += 1;
        assert_eq!(rs.len(), 2, "{id:?} ran {} times", rs.len());
        let in_flight = rs.iter().any(|r| {
            kills
                .get(&r.member)
                .is_some_and(|&k| r.start <= k && k - r.start < IN_FLIGHT.as_micros())
        });
        assert!(in_flight, "{id:?} ran twice, neither in flight at a kill");
    }
    // Every occurrence of each recurring job, from its first run to the
    // stop, ran (Burst: none skipped).
    for n in 0..EVERY {
        let key = format!("every-{n}");
        let mut dues: Vec<u128> = runs
            .iter()
            .filter(|r| r.key == key && r.due + 1_000_000 < stop)
            .map(|r| r.due)
            .collect();
        dues.sort_unstable();
        dues.dedup();
        assert!(dues.len() >= 10, "{key} ran {} times", dues.len());
        for pair in dues.windows(2) {
            assert_eq!(
                pair[1] - pair[0],
                PERIOD.as_micros(),
                "{key}: an occurrence is missing"
            );
        }
    }
    eprintln!(
        "chaos: {} runs, {} acknowledged one-shot jobs, {} kills, {} ran twice",
        runs.len(),
        acknowledged.len(),
        kills.len(),
        twice
    );
}

//! Both stores for one test: a SQLite file in a temporary directory, or a
//! fresh database on the test binary's PostgreSQL server (`common`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler};

use crate::common::PgServer;

/// Which store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// Both, for tests that run on each.
pub const BOTH: [Kind; 2] = [Kind::Sqlite, Kind::Postgres];

/// A store of one kind, new and empty.
pub struct Store {
    pub kind: Kind,
    /// The SQLite file's directory (and a place for a test's files).
    pub dir: tempfile::TempDir,
    /// The PostgreSQL database's connection string.
    pub params: Option<String>,
}

impl Store {
    pub fn new(kind: Kind) -> Store {
        let params = (kind == Kind::Postgres).then(|| PgServer::shared().fresh_database());
        Store {
            kind,
            dir: tempfile::tempdir().unwrap(),
            params,
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("jobs.db")
    }

    /// A scheduler on this store.
    pub fn open(&self, pool: &ScheduledExecutor, config: Config) -> DurableScheduler {
        match &self.params {
            Some(params) => DurableScheduler::postgres(pool, params, config),
            None => DurableScheduler::sqlite(pool, self.path(), config),
        }
        .unwrap()
    }

    /// This store, for a child process: `sqlite:<path>` or
    /// `postgres:<params>` (see [`open_described`]).
    pub fn describe(&self) -> String {
        match &self.params {
            Some(params) => format!("postgres:{params}"),
            None => format!("sqlite:{}", self.path().display()),
        }
    }
}

/// A scheduler on the store `describe` described.
pub fn open_described(
    described: &str,
    pool: &ScheduledExecutor,
    config: Config,
) -> DurableScheduler {
    match described.split_once(':') {
        Some(("postgres", params)) => DurableScheduler::postgres(pool, params, config),
        Some(("sqlite", path)) => DurableScheduler::sqlite(pool, path, config),
        _ => panic!("not a store: {described}"),
    }
    .unwrap()
}

/// A config for real time: a short window, fast polls, a 1 s lease.
pub fn real_config() -> Config {
    let mut config = Config::default();
    config.window = Duration::from_secs(5);
    config.poll_interval = Duration::from_millis(100);
    config.lease = Duration::from_secs(1);
    config
}

/// Retries `every` apart, always (no growth, no jitter).
pub fn retry_every(every: Duration) -> chronopool::trigger::Backoff {
    chronopool::trigger::Backoff::exponential(every, 1.0, every)
}

pub fn pool(workers: usize) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(workers)
        .build()
        .unwrap()
}

/// Waits until `done` holds, for at most 30 s.
pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < give_up, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// This test binary run again as a child process, to run only its test
/// `child` (ignored otherwise) with `CHRONOPOOL_DURABLE_CHILD` set to
/// `part` and `CHRONOPOOL_DURABLE_STORE` to the store; its stdout piped.
pub fn spawn_child(part: &str, store: &Store) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["child", "--exact", "--ignored", "--quiet", "--nocapture"])
        .env("CHRONOPOOL_DURABLE_CHILD", part)
        .env("CHRONOPOOL_DURABLE_STORE", store.describe())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// In a child process: its part and its store, if it is one.
pub fn child_part() -> Option<(String, String)> {
    Some((
        std::env::var("CHRONOPOOL_DURABLE_CHILD").ok()?,
        std::env::var("CHRONOPOOL_DURABLE_STORE").ok()?,
    ))
}

/// Reads the child's stdout until a line that is `line`.
pub fn wait_for_line(child: &mut std::process::Child, line: &str) {
    use std::io::BufRead;
    let out = child.stdout.as_mut().unwrap();
    let mut reader = std::io::BufReader::new(out);
    let mut read = String::new();
    loop {
        read.clear();
        assert!(
            reader.read_line(&mut read).unwrap() > 0,
            "the child ended before {line}"
        );
        if read.trim() == line {
            return;
        }
    }
}

//! The systems measured, each behind [`System`]: chronopool-durable
//! (`chronopool.rs`), apalis with its SQL storage (`apalis.rs`) and River
//! (`river.rs`), each on SQLite and on PostgreSQL.

pub mod apalis;
pub mod chronopool;
pub mod river;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::slots::Slots;

/// Where a system keeps its jobs: always a fresh, empty store.
#[derive(Clone, Debug)]
pub enum Store {
    /// A SQLite file that does not exist yet.
    Sqlite(PathBuf),
    /// A PostgreSQL database just created: its libpq connection string
    /// and its URL (the same database).
    Postgres { params: String, url: String },
}

impl Store {
    /// The store as two environment variables, for a child process.
    pub fn to_env(&self) -> [(&'static str, String); 2] {
        match self {
            Store::Sqlite(path) => [
                ("DURABLE_BENCH_SQLITE", path.display().to_string()),
                ("DURABLE_BENCH_PG_URL", String::new()),
            ],
            Store::Postgres { params, url } => [
                ("DURABLE_BENCH_SQLITE", params.clone()),
                ("DURABLE_BENCH_PG_URL", url.clone()),
            ],
        }
    }

    /// The store [`to_env`](Self::to_env) described.
    pub fn from_env() -> Store {
        let first = std::env::var("DURABLE_BENCH_SQLITE").expect("DURABLE_BENCH_SQLITE");
        match std::env::var("DURABLE_BENCH_PG_URL") {
            Ok(url) if !url.is_empty() => Store::Postgres { params: first, url },
            _ => Store::Sqlite(PathBuf::from(first)),
        }
    }
}

/// One job of a plan: its index (the slot its handler records into) and
/// when it is due.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    pub index: usize,
    pub due: SystemTime,
}

impl Job {
    /// `due` in milliseconds since the epoch.
    pub fn due_ms(&self) -> i64 {
        crate::slots::millis(self.due)
    }

    /// What its payload carries for [`Slots::record`]: the due time in
    /// whole milliseconds, as microseconds.
    pub fn since_us(&self) -> i64 {
        self.due_ms() * 1000
    }
}

/// Runs `insert(i, t)` for `i` in `0..n`, the `i`-th at `gap * i` after
/// the first (later if an insert is slower than `gap`), `t` the wall time
/// in µs since the epoch just before the call: the immediate workload's
/// inserts.
pub fn paced(n: usize, gap: Duration, mut insert: impl FnMut(usize, i64)) {
    let start = std::time::Instant::now();
    for i in 0..n {
        let at = start + gap * u32::try_from(i).expect("fewer than 2^32 jobs");
        std::thread::sleep(at.saturating_duration_since(std::time::Instant::now()));
        insert(i, crate::slots::now_us());
    }
}

/// The pause between storing the burn-down's jobs and starting the
/// workers, so that every due time has passed, even the whole-second due
/// times apalis stores (its SQLite query runs a job once `run_at < now` in
/// whole seconds).
pub const BURNDOWN_PAUSE: Duration = Duration::from_millis(1100);

/// The batches of a plan: `delays_ms.len()` jobs in batches of `batch`,
/// each batch's jobs due `delay` after the moment that batch is handed to
/// the system (so a slow insert does not make the later jobs late before
/// they are stored).
pub fn batches(delays_ms: &[u64], batch: usize) -> impl Iterator<Item = Vec<Job>> + '_ {
    delays_ms.chunks(batch).enumerate().map(move |(b, chunk)| {
        let base = SystemTime::now();
        chunk
            .iter()
            .enumerate()
            .map(|(i, &d)| Job {
                index: b * batch + i,
                due: base + Duration::from_millis(d),
            })
            .collect()
    })
}

/// What the `durable` workload measured of one repetition.
pub struct DurableRun {
    /// Wall time of scheduling all the jobs.
    pub insert: Duration,
    /// The handlers' records.
    pub slots: Arc<Slots>,
    /// The jobs scheduled.
    pub jobs: usize,
}

/// What a recovery measured.
pub struct Recovery {
    /// From the new scheduler's opening to the last remaining job's run.
    pub elapsed: Duration,
    /// Jobs left in the store at the kill (not run, or not finished).
    pub remaining: usize,
    /// Of those, the ones claimed (running, under a lease) at the kill.
    pub in_flight: usize,
    /// Whether all the remaining ones ran before the deadline.
    pub complete: bool,
    /// The new scheduler's runs (their lateness past their due time).
    pub slots: Arc<Slots>,
}

/// What the burn-down workload measured.
pub struct BurnDown {
    /// Wall time of storing the jobs (no worker running).
    pub insert: Duration,
    /// From starting the workers to the last job's run.
    pub elapsed: Duration,
    /// Whether every job ran before the deadline.
    pub complete: bool,
    /// The runs (the lateness recorded is from each job's store).
    pub slots: Arc<Slots>,
}

/// A system under measurement.
pub trait System: Sync {
    /// Its name in the results.
    fn name(&self) -> &'static str;

    /// Its exact settings, for stderr and the README.
    fn settings(&self) -> String;

    /// Whether it runs on PostgreSQL.
    fn postgres(&self) -> bool;

    /// The `durable` workload (in this process): opens `store`, starts
    /// its worker, schedules the jobs due `delays_ms` from their batch's
    /// start, waits (at most `patience` after the last batch) until all
    /// ran with the no-op handler.
    fn durable(
        &self,
        store: &Store,
        delays_ms: &[u64],
        batch: usize,
        patience: Duration,
    ) -> DurableRun;

    /// In a fresh child process: opens `store` with its worker running,
    /// schedules the jobs, and returns the trimmed RSS in MB (measured
    /// while the system is open) and how long scheduling took.
    fn rss(&self, store: &Store, delays_ms: &[u64], batch: usize) -> (f64, Duration);

    /// The burn-down workload (in this process): stores `jobs` jobs due
    /// now, in batches of `batch` (one transaction each where the system
    /// has them), with no worker running; waits [`BURNDOWN_PAUSE`]; then
    /// starts the workers with the no-op handler and waits (at most
    /// `patience`) until all ran. `None` where the system cannot.
    fn burndown(
        &self,
        _store: &Store,
        _jobs: usize,
        _batch: usize,
        _patience: Duration,
    ) -> Option<BurnDown> {
        None
    }

    /// The immediate workload's worker (in this process): opens `store`,
    /// starts the workers with the no-op handler recording into `slots`
    /// (the payload's time is when the job was handed to the system), runs
    /// `during` (which has another process insert the jobs and waits for
    /// their runs), then closes. False where the system cannot.
    fn with_worker(&self, _store: &Store, _slots: &Arc<Slots>, _during: &mut dyn FnMut()) -> bool {
        false
    }

    /// [`with_worker`](Self::with_worker), the worker told of nothing: it
    /// finds the other process's jobs by polling alone, as often as apalis
    /// polls ([`POLLED_INTERVAL`]). False where the system cannot choose.
    fn with_polling_worker(
        &self,
        _store: &Store,
        _slots: &Arc<Slots>,
        _during: &mut dyn FnMut(),
    ) -> bool {
        false
    }

    /// The immediate workload's other process: opens `store` with no
    /// worker and inserts `n` jobs due now, one at a time, `gap` apart
    /// ([`paced`]), each payload carrying its index and the wall time just
    /// before its insert call.
    fn insert_now(&self, _store: &Store, _n: usize, _gap: Duration) {
        unimplemented!("{} has no immediate workload", self.name())
    }

    /// Whether [`recovery_child`](Self::recovery_child) and
    /// [`recovery`](Self::recovery) are implemented.
    fn recovers(&self) -> bool {
        false
    }

    /// In a child process to be killed: opens `store`, starts, schedules
    /// the jobs, prints `READY` on stdout, and waits to be killed.
    fn recovery_child(&self, _store: &Store, _delays_ms: &[u64], _batch: usize) -> ! {
        unimplemented!("{} has no recovery workload", self.name())
    }

    /// After the child's kill: a fresh scheduler on `store` runs what is
    /// left of the `jobs` jobs.
    fn recovery(&self, _store: &Store, _jobs: usize, _patience: Duration) -> Recovery {
        unimplemented!("{} has no recovery workload", self.name())
    }
}

/// How often a worker told of nothing polls, in the immediate workload's
/// second measure: apalis's poll interval.
pub const POLLED_INTERVAL: Duration = Duration::from_millis(100);

/// Every system, in the order of the results.
pub fn all() -> Vec<Box<dyn System>> {
    vec![
        Box::new(chronopool::ChronopoolDurable { postgres: false }),
        Box::new(chronopool::ChronopoolDurable { postgres: true }),
        Box::new(apalis::Apalis { postgres: false }),
        Box::new(apalis::Apalis { postgres: true }),
        Box::new(river::River { postgres: false }),
        Box::new(river::River { postgres: true }),
    ]
}

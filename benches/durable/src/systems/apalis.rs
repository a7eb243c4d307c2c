//! apalis 0.7 with its SQL storage (apalis-sql 0.7, sqlx 0.8): a worker on
//! a two-thread tokio runtime, its jobs in SQLite or PostgreSQL, scheduled
//! with `Storage::schedule(job, unix_seconds)`: one call (one statement,
//! its own transaction) per job, since apalis-sql 0.7 has no batch or
//! transaction API for pushing jobs.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use apalis::prelude::{Data, Storage, WorkerBuilder, WorkerFactoryFn};
use apalis_sql::context::SqlContext;
use apalis_sql::postgres::{PgPool, PostgresStorage};
use apalis_sql::sqlite::SqliteStorage;
use apalis_sql::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use apalis_sql::Config;
use serde::{Deserialize, Serialize};

use super::{batches, paced, BurnDown, DurableRun, Recovery, Store, System, BURNDOWN_PAUSE};
use crate::slots::Slots;

/// The job: its index and the time its lateness counts from (µs since the
/// epoch: its due time, which apalis stores in whole seconds, or when it
/// was handed to apalis).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchJob {
    i: u32,
    since_us: i64,
}

/// apalis on SQLite (`postgres: false`) or PostgreSQL.
pub struct Apalis {
    pub postgres: bool,
}

/// apalis-sql's `buffer_size` here: `APALIS_BUFFER_SIZE`, else 1,000
/// (apalis's default, 10, fetches at most 10 jobs per 100 ms poll: 100
/// jobs/s, so 100,000 jobs due in 10 s would take 1,000 s to run; see
/// README.md).
pub fn buffer_size() -> usize {
    std::env::var("APALIS_BUFFER_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

/// The concurrent tasks of the burn-down's fill on PostgreSQL (sqlx's
/// pool has 10 connections at most).
const FILL_TASKS: usize = 10;

fn config() -> Config {
    Config::new("chronopool-durable-bench").set_buffer_size(buffer_size())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

async fn noop(job: BenchJob, slots: Data<Arc<Slots>>) {
    slots.record(job.i as usize, job.since_us);
}

/// The jobs' due time as apalis takes it, whole seconds since the epoch:
/// the earliest that never runs the job before it is due. apalis runs a
/// job once `run_at < now`: on SQLite both in whole seconds (so the due
/// time rounded down is never early), on PostgreSQL `now()` to the
/// microsecond (so only the due time rounded up is never early; rounded
/// down, most jobs would run up to 1 s early).
fn due_seconds(due: std::time::SystemTime, postgres: bool) -> i64 {
    let d = due.duration_since(UNIX_EPOCH).expect("after 1970");
    let up = postgres && d.subsec_nanos() > 0;
    d.as_secs() as i64 + i64::from(up)
}

/// Schedules the plan on `storage`, one `schedule` per job; returns how
/// long that took.
async fn schedule<S>(storage: &mut S, delays_ms: &[u64], batch: usize, postgres: bool) -> Duration
where
    S: Storage<Job = BenchJob, Context = SqlContext>,
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    for chunk in batches(delays_ms, batch) {
        for job in chunk {
            let bench_job = BenchJob {
                i: u32::try_from(job.index).expect("fewer than 2^32 jobs"),
                since_us: job.since_us(),
            };
            storage
                .schedule(bench_job, due_seconds(job.due, postgres))
                .await
                .expect("apalis schedule");
        }
    }
    start.elapsed()
}

/// A storage of either kind, with its worker running on the runtime.
enum Opened {
    Sqlite(SqliteStorage<BenchJob>),
    Postgres(PostgresStorage<BenchJob>),
}

impl Opened {
    /// The storage on `store` (migrated), without a worker.
    async fn connect(store: &Store) -> Opened {
        match store {
            Store::Sqlite(path) => {
                let options = SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Normal);
                let pool = SqlitePoolOptions::new()
                    .connect_with(options)
                    .await
                    .expect("apalis: SQLite pool");
                SqliteStorage::setup(&pool)
                    .await
                    .expect("apalis: SQLite migrations");
                Opened::Sqlite(SqliteStorage::new_with_config(pool, config()))
            }
            Store::Postgres { url, .. } => {
                let pool = PgPool::connect(url).await.expect("apalis: PostgreSQL pool");
                PostgresStorage::setup(&pool)
                    .await
                    .expect("apalis: PostgreSQL migrations");
                Opened::Postgres(PostgresStorage::new_with_config(pool, config()))
            }
        }
    }

    /// The storage on `store`, with a worker running the no-op handler
    /// into `slots`.
    async fn open(store: &Store, slots: &Arc<Slots>) -> Opened {
        let opened = Opened::connect(store).await;
        opened.work(slots);
        opened
    }

    /// Starts a worker running the no-op handler into `slots` (on the
    /// current runtime).
    fn work(&self, slots: &Arc<Slots>) {
        // A worker id per process: a new process's worker is another
        // worker, and the jobs a killed one held are orphans.
        let id = format!("chronopool-durable-bench-{}", std::process::id());
        let worker = WorkerBuilder::new(id).data(Arc::clone(slots));
        match self {
            Opened::Sqlite(storage) => {
                tokio::spawn(worker.backend(storage.clone()).build_fn(noop).run());
            }
            Opened::Postgres(storage) => {
                tokio::spawn(worker.backend(storage.clone()).build_fn(noop).run());
            }
        }
    }

    /// Stores `jobs` jobs due at their batch's insert time (whole seconds,
    /// rounded down: due at or before it), one `Storage::schedule` per job;
    /// returns how long that took. The burn-down's fill, not timed: on
    /// PostgreSQL, where each call is a transaction synced to disk, the
    /// batches are shared among [`FILL_TASKS`] concurrent tasks (the
    /// pool's size), else a million jobs would take about half an hour;
    /// SQLite has one writer, so one task.
    async fn fill(&mut self, jobs: usize, batch: usize) -> Duration {
        let start = Instant::now();
        let tasks = match self {
            Opened::Sqlite(_) => 1,
            Opened::Postgres(_) => FILL_TASKS,
        };
        let mut running = tokio::task::JoinSet::new();
        for task in 0..tasks {
            let mut storage = match self {
                Opened::Sqlite(s) => Opened::Sqlite(s.clone()),
                Opened::Postgres(s) => Opened::Postgres(s.clone()),
            };
            running.spawn(async move {
                for first in (task * batch..jobs).step_by(batch * tasks) {
                    let now = std::time::SystemTime::now();
                    let since_us = crate::slots::now_us();
                    let run_at = due_seconds(now, false);
                    for i in first..jobs.min(first + batch) {
                        let job = BenchJob {
                            i: u32::try_from(i).expect("fewer than 2^32 jobs"),
                            since_us,
                        };
                        match &mut storage {
                            Opened::Sqlite(s) => s.schedule(job, run_at).await.map(|_| ()),
                            Opened::Postgres(s) => s.schedule(job, run_at).await.map(|_| ()),
                        }
                        .expect("apalis schedule");
                    }
                }
            });
        }
        while let Some(done) = running.join_next().await {
            done.expect("a fill task");
        }
        start.elapsed()
    }

    /// One job due now: `Storage::push`.
    async fn push(&mut self, job: BenchJob) {
        match self {
            Opened::Sqlite(s) => s.push(job).await.map(|_| ()),
            Opened::Postgres(s) => s.push(job).await.map(|_| ()),
        }
        .expect("apalis push");
    }

    async fn schedule(&mut self, delays_ms: &[u64], batch: usize) -> Duration {
        match self {
            Opened::Sqlite(s) => schedule(s, delays_ms, batch, false).await,
            Opened::Postgres(s) => schedule(s, delays_ms, batch, true).await,
        }
    }

    /// Jobs not done, and of those the ones running (held by a worker).
    async fn unfinished(&self) -> (usize, usize) {
        let (left, running) = match self {
            Opened::Sqlite(s) => (
                count(s.pool(), "SELECT COUNT(*) FROM Jobs WHERE status != 'Done'").await,
                count(
                    s.pool(),
                    "SELECT COUNT(*) FROM Jobs WHERE status = 'Running'",
                )
                .await,
            ),
            Opened::Postgres(s) => (
                count(
                    s.pool(),
                    "SELECT COUNT(*) FROM apalis.jobs WHERE status != 'Done'",
                )
                .await,
                count(
                    s.pool(),
                    "SELECT COUNT(*) FROM apalis.jobs WHERE status = 'Running'",
                )
                .await,
            ),
        };
        (left, running)
    }

    async fn close(self) {
        match self {
            Opened::Sqlite(s) => s.pool().close().await,
            Opened::Postgres(s) => s.pool().close().await,
        }
    }
}

async fn count<'c, E>(executor: E, sql: &str) -> usize
where
    E: apalis_sql::sqlx::Executor<'c>,
    i64: apalis_sql::sqlx::Type<E::Database> + for<'r> apalis_sql::sqlx::Decode<'r, E::Database>,
    (i64,): for<'r> apalis_sql::sqlx::FromRow<'r, <E::Database as apalis_sql::sqlx::Database>::Row>,
    for<'q> <E::Database as apalis_sql::sqlx::Database>::Arguments<'q>:
        apalis_sql::sqlx::IntoArguments<'q, E::Database>,
{
    let (n,): (i64,) = apalis_sql::sqlx::query_as(sql)
        .fetch_one(executor)
        .await
        .expect("a count of apalis's jobs");
    usize::try_from(n).unwrap_or(0)
}

impl System for Apalis {
    fn name(&self) -> &'static str {
        if self.postgres {
            "apalis-postgres"
        } else {
            "apalis-sqlite"
        }
    }

    fn settings(&self) -> String {
        let store = if self.postgres {
            "PostgreSQL: sqlx PgPool::connect (10 connections at most), the server's defaults"
        } else {
            "SQLite (sqlx, bundled libsqlite3-sys): SqlitePoolOptions default (10 connections \
             at most), SqliteConnectOptions journal_mode=WAL, synchronous=NORMAL (set on \
             every connection; apalis's setup() sets the same, plus temp_store=2 and \
             cache_size=64000, on one of them), busy_timeout 5 s (sqlx's default)"
        };
        let c = Config::default();
        format!(
            "apalis 0.7.4 + apalis-sql 0.7.4 (sqlx 0.8), one worker on a tokio multi-thread \
             runtime of 2 worker threads, concurrency not limited (the default); apalis_sql::Config: \
             poll_interval {:?} (default), buffer_size {} (default {}), keep_alive {:?}, \
             reenqueue_orphaned_after 300 s (defaults); {store}; one Storage::schedule call \
             per job (no batch or transaction API); due times in whole seconds (SQLite: rounded down, PostgreSQL: rounded up, the earliest that never runs a job early)",
            c.poll_interval(),
            buffer_size(),
            c.buffer_size(),
            c.keep_alive(),
        )
    }

    fn postgres(&self) -> bool {
        self.postgres
    }

    fn durable(
        &self,
        store: &Store,
        delays_ms: &[u64],
        batch: usize,
        patience: Duration,
    ) -> DurableRun {
        let rt = runtime();
        let slots = Arc::new(Slots::new(delays_ms.len()));
        let mut opened = rt.block_on(Opened::open(store, &slots));
        let insert = rt.block_on(opened.schedule(delays_ms, batch));
        if !slots.wait_for(delays_ms.len(), Instant::now() + patience) {
            eprintln!(
                "  {}: only {} of {} jobs ran in time",
                self.name(),
                slots.ran(),
                delays_ms.len()
            );
        }
        rt.block_on(opened.close());
        rt.shutdown_timeout(Duration::from_secs(5));
        DurableRun {
            insert,
            slots,
            jobs: delays_ms.len(),
        }
    }

    fn rss(&self, store: &Store, delays_ms: &[u64], batch: usize) -> (f64, Duration) {
        let rt = runtime();
        let slots = Arc::new(Slots::new(0));
        let mut opened = rt.block_on(Opened::open(store, &slots));
        let insert = rt.block_on(opened.schedule(delays_ms, batch));
        let rss = crate::rss::trimmed_rss_mb();
        drop(opened);
        (rss, insert)
    }

    /// The jobs stored with no worker running (apalis-sql has no batch
    /// API: one `Storage::schedule` per job, due at its batch's insert
    /// time in whole seconds rounded down); then a worker started, timed.
    fn burndown(
        &self,
        store: &Store,
        jobs: usize,
        batch: usize,
        patience: Duration,
    ) -> Option<BurnDown> {
        let rt = runtime();
        let slots = Arc::new(Slots::new(jobs));
        let mut opened = rt.block_on(Opened::connect(store));
        let insert = rt.block_on(opened.fill(jobs, batch));
        std::thread::sleep(BURNDOWN_PAUSE);
        let started = Instant::now();
        {
            let _entered = rt.enter();
            opened.work(&slots);
        }
        let complete = slots.wait_for(jobs, started + patience);
        let elapsed = slots.last_run().saturating_duration_since(started);
        rt.block_on(opened.close());
        rt.shutdown_timeout(Duration::from_secs(5));
        Some(BurnDown {
            insert,
            elapsed,
            complete,
            slots,
        })
    }

    fn with_worker(&self, store: &Store, slots: &Arc<Slots>, during: &mut dyn FnMut()) -> bool {
        let rt = runtime();
        let opened = rt.block_on(Opened::open(store, slots));
        during();
        rt.block_on(opened.close());
        rt.shutdown_timeout(Duration::from_secs(5));
        true
    }

    /// A storage with no worker; each job one `Storage::push` (due now).
    fn insert_now(&self, store: &Store, n: usize, gap: Duration) {
        let rt = runtime();
        let mut opened = rt.block_on(Opened::connect(store));
        paced(n, gap, |i, since_us| {
            rt.block_on(opened.push(BenchJob {
                i: u32::try_from(i).expect("fewer than 2^32 jobs"),
                since_us,
            }));
        });
        rt.block_on(opened.close());
    }

    fn recovers(&self) -> bool {
        true
    }

    fn recovery_child(&self, store: &Store, delays_ms: &[u64], batch: usize) -> ! {
        let rt = runtime();
        let slots = Arc::new(Slots::new(delays_ms.len()));
        let mut opened = rt.block_on(Opened::open(store, &slots));
        rt.block_on(opened.schedule(delays_ms, batch));
        let mut out = std::io::stdout();
        writeln!(out, "READY")
            .and_then(|()| out.flush())
            .expect("stdout");
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    }

    /// apalis has no lease: a new worker, as it starts, puts back the jobs
    /// that workers not seen since then were running (up to ten times
    /// `buffer_size`); later, those of workers not seen for
    /// `reenqueue_orphaned_after` (5 min).
    fn recovery(&self, store: &Store, n: usize, patience: Duration) -> Recovery {
        let rt = runtime();
        let (remaining, in_flight) = rt.block_on(async {
            let opened = Opened::connect(store).await;
            let counts = opened.unfinished().await;
            opened.close().await;
            counts
        });
        let slots = Arc::new(Slots::new(n));
        let start = Instant::now();
        let opened = rt.block_on(Opened::open(store, &slots));
        let complete = slots.wait_for(remaining, start + patience);
        let elapsed = if remaining == 0 {
            Duration::ZERO
        } else {
            slots.last_run().saturating_duration_since(start)
        };
        rt.block_on(opened.close());
        rt.shutdown_timeout(Duration::from_secs(5));
        Recovery {
            elapsed,
            remaining,
            in_flight,
            complete,
            slots,
        }
    }
}

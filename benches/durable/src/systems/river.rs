//! River for Rust (`riverqueue` 0.5, sqlx 0.9): a client working one queue
//! on a two-thread tokio runtime, its jobs in SQLite or PostgreSQL, River's
//! own migrations (`riverqueue::migrate`) applied first. A future due time
//! is River's `InsertOpts::with_scheduled_at`; a batch is one
//! `Client::insert_many` (atomic: one transaction). River's defaults
//! except `max_workers` (River has none: see [`MAX_WORKERS`]) and, in the
//! recovery workload, `rescue_after` (see [`RECOVERY_RESCUE_AFTER`]).

use std::convert::Infallible;
use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use riverqueue::jiff::Timestamp;
use riverqueue::migrate::{PostgresMigrator, SqliteMigrator};
use riverqueue::sqlx::postgres::PgPool;
use riverqueue::sqlx::sqlite::SqlitePoolOptions;
use riverqueue::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool};
use riverqueue::{
    Client, InsertOpts, Job, JobArgs, MaintenanceConfig, QueueConfig, Retention, RunHandle,
    WorkContext, WorkOutcome, Workers,
};
use serde::{Deserialize, Serialize};

use super::{batches, paced, BurnDown, DurableRun, Recovery, Store, System, BURNDOWN_PAUSE};
use crate::slots::Slots;

/// The job: its index and the time its lateness counts from (µs since the
/// epoch: its due time, or when it was handed to River).
#[derive(Clone, Debug, Deserialize, JobArgs, Serialize)]
#[river(kind = "bench_noop")]
pub struct BenchJob {
    i: u32,
    since_us: i64,
}

/// The queue's `max_workers`, the most jobs it runs at once and so the
/// most one fetch claims. River has no default (`QueueConfig::new` takes
/// it; its README's example has 10, its SQLite example 4): 1,000, the
/// number of jobs apalis fetches at once here (its `buffer_size`). A fetch
/// is at most every `fetch_cooldown` (100 ms), so 10 would cap River at
/// 100 jobs/s, as apalis's default buffer would.
pub const MAX_WORKERS: usize = 1000;

/// The recovery workload's `MaintenanceConfig::rescue_after` (the default
/// is 1 hour): how long a job stays `running` before the leader's rescuer
/// takes it back, the same 2 s as chronopool-durable's lease there. River
/// refuses a `rescue_after` shorter than the job timeout (default 1 min),
/// so the job timeout is 2 s as well (the no-op handler takes microseconds).
pub const RECOVERY_RESCUE_AFTER: Duration = Duration::from_secs(2);

/// River on SQLite (`postgres: false`) or PostgreSQL.
pub struct River {
    pub postgres: bool,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn timestamp(t: SystemTime) -> Timestamp {
    let d = t.duration_since(UNIX_EPOCH).expect("after 1970");
    Timestamp::new(
        i64::try_from(d.as_secs()).expect("in range"),
        i32::try_from(d.subsec_nanos()).expect("in range"),
    )
    .expect("a timestamp")
}

/// A pool on the store, River's migrations applied.
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Pool {
    /// SQLite as River's README and SQLite example open it: WAL and a busy
    /// timeout of 5 s ("for a file database, enable WAL and a busy
    /// timeout"), sqlx's default pool (10 connections at most); River sets
    /// no PRAGMA itself. PostgreSQL: `PgPool::connect` (10 at most), as in
    /// River's quick start.
    async fn open(store: &Store) -> Pool {
        match store {
            Store::Sqlite(path) => {
                let options =
                    SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
                        .expect("a SQLite URL")
                        .create_if_missing(true)
                        .journal_mode(SqliteJournalMode::Wal)
                        .busy_timeout(Duration::from_secs(5));
                let pool = SqlitePoolOptions::new()
                    .connect_with(options)
                    .await
                    .expect("River: SQLite pool");
                SqliteMigrator::new(pool.clone())
                    .migrate_up()
                    .await
                    .expect("River: SQLite migrations");
                Pool::Sqlite(pool)
            }
            Store::Postgres { url, .. } => {
                let pool = PgPool::connect(url).await.expect("River: PostgreSQL pool");
                PostgresMigrator::new(pool.clone())
                    .migrate_up()
                    .await
                    .expect("River: PostgreSQL migrations");
                Pool::Postgres(pool)
            }
        }
    }

    fn builder(&self) -> riverqueue::ClientBuilder {
        match self {
            Pool::Sqlite(pool) => Client::builder(pool.clone()),
            Pool::Postgres(pool) => Client::builder(pool.clone()),
        }
    }

    /// A client that only inserts (no queue, no worker).
    fn inserter(&self) -> Client {
        self.builder()
            .build()
            .expect("River: an insert-only client")
    }

    /// A client working the default queue with the no-op handler into
    /// `slots`; `recovery`: [`RECOVERY_RESCUE_AFTER`].
    fn worker(&self, slots: &Arc<Slots>, recovery: bool) -> Client {
        let mut workers = Workers::new();
        let slots = Arc::clone(slots);
        workers
            .add_fn(move |_context: WorkContext, job: Job<BenchJob>| {
                slots.record(job.args.i as usize, job.args.since_us);
                async { Ok::<_, Infallible>(WorkOutcome::Complete) }
            })
            .expect("River: the handler");
        let mut builder = self
            .builder()
            .workers(workers)
            .queue(riverqueue::QUEUE_DEFAULT, QueueConfig::new(MAX_WORKERS));
        if recovery {
            builder = builder
                .job_timeout(RECOVERY_RESCUE_AFTER)
                .maintenance(MaintenanceConfig::default().with_rescue_after(RECOVERY_RESCUE_AFTER));
        }
        builder.build().expect("River: a client")
    }

    /// Jobs not finalized, and of those the ones running.
    async fn unfinished(&self) -> (usize, usize) {
        let sql =
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state = 'running' THEN 1 ELSE 0 END), 0) \
                   FROM river_job WHERE state NOT IN ('completed', 'cancelled', 'discarded')";
        let (left, running): (i64, i64) = match self {
            Pool::Sqlite(pool) => riverqueue::sqlx::query_as(sql).fetch_one(pool).await,
            Pool::Postgres(pool) => riverqueue::sqlx::query_as(sql).fetch_one(pool).await,
        }
        .expect("a count of River's jobs");
        (
            usize::try_from(left).unwrap_or(0),
            usize::try_from(running).unwrap_or(0),
        )
    }

    async fn close(self) {
        match self {
            Pool::Sqlite(pool) => pool.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }
}

/// Schedules the plan, one `insert_many` (one transaction) per batch, each
/// job at its due time (`with_scheduled_at`); returns how long that took.
async fn schedule(client: &Client, delays_ms: &[u64], batch: usize) -> Duration {
    let start = Instant::now();
    for chunk in batches(delays_ms, batch) {
        let jobs: Vec<(BenchJob, InsertOpts)> = chunk
            .iter()
            .map(|job| {
                (
                    BenchJob {
                        i: u32::try_from(job.index).expect("fewer than 2^32 jobs"),
                        since_us: job.since_us(),
                    },
                    InsertOpts::default().with_scheduled_at(timestamp(job.due)),
                )
            })
            .collect();
        client.insert_many(jobs).await.expect("River: insert_many");
    }
    start.elapsed()
}

async fn start(client: &Client) -> RunHandle {
    client.start().expect("River: start")
}

async fn stop(mut run: RunHandle, pool: Pool) {
    let _ = run.stop().await;
    pool.close().await;
}

impl System for River {
    fn name(&self) -> &'static str {
        if self.postgres {
            "river-postgres"
        } else {
            "river-sqlite"
        }
    }

    fn settings(&self) -> String {
        let store = if self.postgres {
            "PostgreSQL: sqlx PgPool::connect (10 connections at most; River's LISTEN/NOTIFY \
             listener on a connection of its own), the server's defaults"
        } else {
            "SQLite (sqlx 0.9, the bundled libsqlite3-sys) as River's README and SQLite example \
             open it: SqliteConnectOptions journal_mode=WAL, busy_timeout 5 s, SqlitePoolOptions \
             default (10 connections at most); River sets no PRAGMA itself"
        };
        let m = MaintenanceConfig::default();
        let q = QueueConfig::new(MAX_WORKERS);
        format!(
            "riverqueue 0.5.0 (features postgres, sqlite; sqlx 0.9), migrations by \
             riverqueue::migrate ({{Postgres,Sqlite}}Migrator::migrate_up); one client on a tokio \
             multi-thread runtime of 2 worker threads working queue \"default\" with \
             max_workers {MAX_WORKERS} (River has no default: the most one fetch claims, as \
             apalis's buffer_size here); River's defaults otherwise: fetch_cooldown {:?}, \
             fetch_poll_interval {:?}, job_timeout {:?}, scheduler_interval {:?} (jobs due \
             within it are made available ahead, then fetched once due), elect_interval {:?}, \
             rescuer_interval {:?}, rescue_after 1 h ({:?}, with job_timeout {:?}, in the \
             recovery workload), completed jobs kept {}; {store}; each batch of jobs is one \
             insert_many (one transaction), a due time is InsertOpts::with_scheduled_at (a job \
             so inserted is `scheduled` until the leader's scheduler makes it available); the \
             burn-down and immediate jobs are inserted with no scheduled_at (`available` at once)",
            riverqueue::FETCH_COOLDOWN_DEFAULT,
            q.fetch_poll_interval(),
            riverqueue::JOB_TIMEOUT_DEFAULT,
            m.scheduler_interval(),
            m.elect_interval(),
            m.rescuer_interval(),
            RECOVERY_RESCUE_AFTER,
            RECOVERY_RESCUE_AFTER,
            match m.completed_job_retention() {
                Retention::DeleteAfter(d) => format!("{d:?}"),
                Retention::Keep => "forever".to_owned(),
            },
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
        let pool = rt.block_on(Pool::open(store));
        let client = pool.worker(&slots, false);
        let run = rt.block_on(start(&client));
        let insert = rt.block_on(schedule(&client, delays_ms, batch));
        if !slots.wait_for(delays_ms.len(), Instant::now() + patience) {
            eprintln!(
                "  {}: only {} of {} jobs ran in time",
                self.name(),
                slots.ran(),
                delays_ms.len()
            );
        }
        rt.block_on(stop(run, pool));
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
        let pool = rt.block_on(Pool::open(store));
        let client = pool.worker(&slots, false);
        let run = rt.block_on(start(&client));
        let insert = rt.block_on(schedule(&client, delays_ms, batch));
        let rss = crate::rss::trimmed_rss_mb();
        drop(run);
        (rss, insert)
    }

    fn burndown(
        &self,
        store: &Store,
        jobs: usize,
        batch: usize,
        patience: Duration,
    ) -> Option<BurnDown> {
        let rt = runtime();
        let slots = Arc::new(Slots::new(jobs));
        let pool = rt.block_on(Pool::open(store));
        let inserter = pool.inserter();
        let insert = rt.block_on(async {
            let start = Instant::now();
            for first in (0..jobs).step_by(batch) {
                let since_us = crate::slots::now_us();
                let chunk: Vec<BenchJob> = (first..jobs.min(first + batch))
                    .map(|i| BenchJob {
                        i: u32::try_from(i).expect("fewer than 2^32 jobs"),
                        since_us,
                    })
                    .collect();
                inserter
                    .insert_many(chunk)
                    .await
                    .expect("River: insert_many");
            }
            start.elapsed()
        });
        std::thread::sleep(BURNDOWN_PAUSE);
        let client = pool.worker(&slots, false);
        let started = Instant::now();
        let run = rt.block_on(start(&client));
        let complete = slots.wait_for(jobs, started + patience);
        let elapsed = slots.last_run().saturating_duration_since(started);
        rt.block_on(stop(run, pool));
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
        let pool = rt.block_on(Pool::open(store));
        let client = pool.worker(slots, false);
        let run = rt.block_on(start(&client));
        during();
        rt.block_on(stop(run, pool));
        rt.shutdown_timeout(Duration::from_secs(5));
        true
    }

    fn insert_now(&self, store: &Store, n: usize, gap: Duration) {
        let rt = runtime();
        let pool = rt.block_on(Pool::open(store));
        let inserter = pool.inserter();
        paced(n, gap, |i, since_us| {
            let job = BenchJob {
                i: u32::try_from(i).expect("fewer than 2^32 jobs"),
                since_us,
            };
            rt.block_on(async { inserter.insert(job).await })
                .expect("River: insert");
        });
        rt.block_on(pool.close());
    }

    fn recovers(&self) -> bool {
        true
    }

    fn recovery_child(&self, store: &Store, delays_ms: &[u64], batch: usize) -> ! {
        let rt = runtime();
        let slots = Arc::new(Slots::new(delays_ms.len()));
        let pool = rt.block_on(Pool::open(store));
        let client = pool.worker(&slots, true);
        let _run = rt.block_on(start(&client));
        rt.block_on(schedule(&client, delays_ms, batch));
        let mut out = std::io::stdout();
        writeln!(out, "READY")
            .and_then(|()| out.flush())
            .expect("stdout");
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    }

    /// A new client, as it starts, works the jobs already `available`; the
    /// `scheduled` ones wait for a leader's scheduler, and the killed
    /// client was the leader until its lease ends (elect_interval + 10 s);
    /// the jobs the kill left `running` wait for the rescuer
    /// ([`RECOVERY_RESCUE_AFTER`], every `rescuer_interval`), which makes
    /// them retryable after River's retry back-off.
    fn recovery(&self, store: &Store, n: usize, patience: Duration) -> Recovery {
        let rt = runtime();
        let (remaining, in_flight) = rt.block_on(async {
            let pool = Pool::open(store).await;
            let counts = pool.unfinished().await;
            pool.close().await;
            counts
        });
        let slots = Arc::new(Slots::new(n));
        let opened = Instant::now();
        let pool = rt.block_on(Pool::open(store));
        let client = pool.worker(&slots, true);
        let run = rt.block_on(start(&client));
        let complete = slots.wait_for(remaining, opened + patience);
        let elapsed = if remaining == 0 {
            Duration::ZERO
        } else {
            slots.last_run().saturating_duration_since(opened)
        };
        rt.block_on(stop(run, pool));
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

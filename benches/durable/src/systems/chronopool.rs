//! chronopool-durable: a `DurableScheduler` on a two-worker
//! `ScheduledExecutor`, its jobs in SQLite or PostgreSQL, each batch one
//! `schedule_all` (one transaction).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler, Job as DurableJob, Schedule};

use super::{
    batches, paced, BurnDown, DurableRun, Recovery, Store, System, BURNDOWN_PAUSE, POLLED_INTERVAL,
};
use crate::slots::Slots;

/// The lease of the recovery workload (the default is 60 s).
pub const RECOVERY_LEASE: Duration = Duration::from_secs(2);

/// chronopool-durable on SQLite (`postgres: false`) or PostgreSQL.
pub struct ChronopoolDurable {
    pub postgres: bool,
}

/// The job of index `i`'s key.
fn key(i: usize) -> String {
    format!("job-{i}")
}

/// Its payload: the index (u32) and the time its lateness counts from (µs
/// since the epoch, i64), little-endian.
fn payload(index: usize, since_us: i64) -> Vec<u8> {
    let mut p = Vec::with_capacity(12);
    p.extend_from_slice(
        &u32::try_from(index)
            .expect("fewer than 2^32 jobs")
            .to_le_bytes(),
    );
    p.extend_from_slice(&since_us.to_le_bytes());
    p
}

fn read_payload(p: &[u8]) -> Option<(usize, i64)> {
    let index = u32::from_le_bytes(p.get(..4)?.try_into().ok()?);
    let due = i64::from_le_bytes(p.get(4..12)?.try_into().ok()?);
    Some((index as usize, due))
}

fn executor() -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .expect("a ScheduledExecutor")
}

impl ChronopoolDurable {
    fn open(
        &self,
        pool: &ScheduledExecutor,
        store: &Store,
        mut config: Config,
    ) -> DurableScheduler {
        // `KEEP_RUNS` (the run history's length, `Config::keep_runs`; 10
        // by default, 0 keeps none): what the history costs.
        if let Some(keep) = std::env::var("KEEP_RUNS").ok().and_then(|k| k.parse().ok()) {
            config.keep_runs = keep;
        }
        match store {
            Store::Sqlite(path) => DurableScheduler::sqlite(pool, path, config),
            Store::Postgres { params, .. } => DurableScheduler::postgres(pool, params, config),
        }
        .expect("chronopool-durable opens its store")
    }

    /// The immediate workload's worker, with `config`.
    fn worker(
        &self,
        store: &Store,
        config: Config,
        slots: &Arc<Slots>,
        during: &mut dyn FnMut(),
    ) -> bool {
        let pool = executor();
        let jobs = self.open(&pool, store, config);
        Self::register(&jobs, slots);
        jobs.start().expect("start");
        during();
        drop(jobs);
        drop(pool);
        true
    }

    /// Registers the no-op handler that records into `slots`.
    fn register(jobs: &DurableScheduler, slots: &Arc<Slots>) {
        let slots = Arc::clone(slots);
        jobs.register("noop", move |job| {
            if let Some((index, since_us)) = read_payload(job.payload()) {
                slots.record(index, since_us);
            }
            Ok(())
        });
    }

    /// Schedules the plan, one `schedule_all` per batch; returns how long
    /// that took.
    fn schedule(jobs: &DurableScheduler, delays_ms: &[u64], batch: usize) -> Duration {
        let start = Instant::now();
        for chunk in batches(delays_ms, batch) {
            jobs.schedule_all(chunk.iter().map(|job| {
                DurableJob::new(
                    key(job.index),
                    "noop",
                    payload(job.index, job.since_us()),
                    Schedule::At(job.due),
                )
            }))
            .expect("schedule_all");
        }
        start.elapsed()
    }
}

impl System for ChronopoolDurable {
    fn name(&self) -> &'static str {
        if self.postgres {
            "chronopool-durable-postgres"
        } else {
            "chronopool-durable-sqlite"
        }
    }

    fn settings(&self) -> String {
        let c = Config::default();
        let store = if self.postgres {
            "PostgreSQL: the synchronous `postgres` crate's connections, as the crate opens them"
        } else {
            "SQLite (bundled, through rusqlite): the crate's own settings (the PRAGMAs it runs \
             and the connections it opens are traced and printed below)"
        };
        format!(
            "chronopool-durable (path dependency, this checkout) on chronopool's \
             ScheduledExecutor::builder().worker_threads(2); Config::default(): window {:?}, \
             poll_interval {:?}, lease {:?} ({:?} in the recovery workload), max_attempts {}, \
             batch {}; {store}; each batch of jobs is one schedule_all (one transaction)",
            c.window, c.poll_interval, c.lease, RECOVERY_LEASE, c.max_attempts, c.batch,
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
        let pool = executor();
        let jobs = self.open(&pool, store, Config::default());
        let slots = Arc::new(Slots::new(delays_ms.len()));
        Self::register(&jobs, &slots);
        jobs.start().expect("start");
        let insert = Self::schedule(&jobs, delays_ms, batch);
        if !slots.wait_for(delays_ms.len(), Instant::now() + patience) {
            eprintln!(
                "  {}: only {} of {} jobs ran in time",
                self.name(),
                slots.ran(),
                delays_ms.len()
            );
        }
        drop(jobs);
        drop(pool);
        DurableRun {
            insert,
            slots,
            jobs: delays_ms.len(),
        }
    }

    fn rss(&self, store: &Store, delays_ms: &[u64], batch: usize) -> (f64, Duration) {
        let pool = executor();
        let jobs = self.open(&pool, store, Config::default());
        let slots = Arc::new(Slots::new(0));
        Self::register(&jobs, &slots);
        jobs.start().expect("start");
        let insert = Self::schedule(&jobs, delays_ms, batch);
        let rss = crate::rss::trimmed_rss_mb();
        drop(jobs);
        (rss, insert)
    }

    /// The jobs stored by a scheduler that is not started (it runs
    /// nothing), `Schedule::At` the batch's insert time; then `register` and
    /// `start()` on that scheduler, timed.
    fn burndown(
        &self,
        store: &Store,
        jobs: usize,
        batch: usize,
        patience: Duration,
    ) -> Option<BurnDown> {
        let pool = executor();
        let scheduler = self.open(&pool, store, Config::default());
        let slots = Arc::new(Slots::new(jobs));
        let start = Instant::now();
        for first in (0..jobs).step_by(batch) {
            let now = SystemTime::now();
            let since_us = crate::slots::now_us();
            scheduler
                .schedule_all((first..jobs.min(first + batch)).map(|i| {
                    DurableJob::new(key(i), "noop", payload(i, since_us), Schedule::At(now))
                }))
                .expect("schedule_all");
        }
        let insert = start.elapsed();
        std::thread::sleep(BURNDOWN_PAUSE);
        let started = Instant::now();
        Self::register(&scheduler, &slots);
        scheduler.start().expect("start");
        let complete = slots.wait_for(jobs, started + patience);
        let elapsed = slots.last_run().saturating_duration_since(started);
        drop(scheduler);
        drop(pool);
        Some(BurnDown {
            insert,
            elapsed,
            complete,
            slots,
        })
    }

    fn with_worker(&self, store: &Store, slots: &Arc<Slots>, during: &mut dyn FnMut()) -> bool {
        self.worker(store, Config::default(), slots, during)
    }

    /// `Config::notifications` off, polls every `POLLED_INTERVAL`.
    fn with_polling_worker(
        &self,
        store: &Store,
        slots: &Arc<Slots>,
        during: &mut dyn FnMut(),
    ) -> bool {
        let mut config = Config::default();
        config.notifications = false;
        config.poll_interval = POLLED_INTERVAL;
        self.worker(store, config, slots, during)
    }

    /// A scheduler that is not started (it runs nothing), each job one
    /// `schedule_all` of one job, `Schedule::At(SystemTime::now())`.
    fn insert_now(&self, store: &Store, n: usize, gap: Duration) {
        let pool = executor();
        let jobs = self.open(&pool, store, Config::default());
        paced(n, gap, |i, since_us| {
            jobs.schedule_all([DurableJob::new(
                key(i),
                "noop",
                payload(i, since_us),
                Schedule::At(SystemTime::now()),
            )])
            .expect("schedule_all");
        });
        drop(jobs);
    }

    fn recovers(&self) -> bool {
        true
    }

    fn recovery_child(&self, store: &Store, delays_ms: &[u64], batch: usize) -> ! {
        let pool = executor();
        let mut config = Config::default();
        config.lease = RECOVERY_LEASE;
        let jobs = self.open(&pool, store, config);
        let slots = Arc::new(Slots::new(delays_ms.len()));
        Self::register(&jobs, &slots);
        jobs.start().expect("start");
        Self::schedule(&jobs, delays_ms, batch);
        let mut out = std::io::stdout();
        writeln!(out, "READY")
            .and_then(|()| out.flush())
            .expect("stdout");
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    }

    fn recovery(&self, store: &Store, n: usize, patience: Duration) -> Recovery {
        let pool = executor();
        let mut config = Config::default();
        config.lease = RECOVERY_LEASE;
        // What the kill left, in one query on chronopool-durable's table
        // (`job(key)` for each key would take long enough for the jobs
        // left to fall due meanwhile). A running job is claimed, under a
        // lease.
        let sql =
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state = 'running' THEN 1 ELSE 0 END), 0) \
                   FROM chronopool_jobs";
        let (remaining, in_flight): (i64, i64) = match store {
            Store::Sqlite(path) => rusqlite::Connection::open(path)
                .and_then(|c| c.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?))))
                .expect("a count of the jobs left"),
            Store::Postgres { params, .. } => {
                let mut client =
                    postgres::Client::connect(params, postgres::NoTls).expect("a connection");
                let row = client
                    .query_one(sql, &[])
                    .expect("a count of the jobs left");
                (row.get(0), row.get(1))
            }
        };
        let (remaining, in_flight) = (remaining as usize, in_flight as usize);
        let slots = Arc::new(Slots::new(n));
        let opened = Instant::now();
        let jobs = self.open(&pool, store, config);
        Self::register(&jobs, &slots);
        jobs.start().expect("start");
        let complete = slots.wait_for(remaining, opened + patience);
        let elapsed = if remaining == 0 {
            Duration::ZERO
        } else {
            slots.last_run().saturating_duration_since(opened)
        };
        drop(jobs);
        Recovery {
            elapsed,
            remaining,
            in_flight,
            complete,
            slots,
        }
    }
}

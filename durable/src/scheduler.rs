//! [`DurableScheduler`]: named handlers, stored schedules, and the API
//! over them; the work on the store is the engine's (`engine/`).

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use chronopool::{MissedRuns, ScheduledExecutor};

use crate::config::Config;
use crate::engine::{self, Channels, Engine, Registered, Shared};
use crate::error::{DurableError, StoreError};
use crate::job::{Job, JobContext, JobError};
use crate::listing::JobQuery;
use crate::metrics::DurableMetrics;
use crate::schedule::{Recurrence, Schedule};
use crate::spawn::{HandlerFuture, Spawn};
use crate::store::app_transaction::Rows;
use crate::store::{AppTransaction, Conn, JobState, NewJob, Row, Store};
use crate::time;

/// How long an API call keeps trying a store that fails transiently (its
/// connection lost, its file locked) before it returns the error.
const API_RETRY_FOR: Duration = Duration::from_secs(10);

/// A job as the store holds it, for inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobInfo {
    /// Its key.
    pub key: String,
    /// The name of its handler.
    pub name: String,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Its state.
    pub state: JobState,
    /// Its schedule, for people: `once`, `every 1h 30m`, or `cron 0 2 * * *
    /// in Asia/Shanghai`.
    pub schedule: String,
    /// When it fires next (for a running job: when the run was due; for a
    /// dead or done job: when it last was due).
    pub next_fire: SystemTime,
    /// The attempts of its current occurrence so far.
    pub attempt: u32,
    /// Why its last run failed, if it did.
    pub last_error: Option<String>,
    /// For a running job: the readable name of the scheduler that runs it
    /// ([`Config::name`]), if it has one.
    pub owner_name: Option<String>,
    /// For a running job: when its lease ends, unless renewed.
    pub lease_until: Option<SystemTime>,
    /// It is paused by itself ([`DurableScheduler::pause`]; a job whose
    /// handler is paused says false here, see
    /// [`paused_handlers`](DurableScheduler::paused_handlers)).
    pub paused: bool,
}

impl From<Row> for JobInfo {
    fn from(row: Row) -> Self {
        JobInfo {
            key: row.key,
            name: row.name,
            payload: row.payload,
            schedule: Recurrence::decode(&row.recurrence)
                .map(|r| r.describe())
                .unwrap_or(row.recurrence),
            state: row.state,
            next_fire: time::system_time(row.next_fire),
            attempt: row.attempt,
            last_error: row.last_error,
            owner_name: row.owner_name,
            lease_until: row.lease_until.map(time::system_time),
            paused: row.paused,
        }
    }
}

/// Durable jobs run on a [`ScheduledExecutor`] (see the crate docs).
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use chronopool_durable::{Config, DurableScheduler, JobError, Schedule};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let dir = tempfile::tempdir()?;
/// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
/// let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default())?;
/// let (sent, coupons) = mpsc::channel();
/// let sent = std::sync::Mutex::new(sent);
/// jobs.register("send-coupons", move |job| {
///     sent.lock().unwrap().send(job.payload().to_vec()).map_err(JobError::retry)
/// });
/// jobs.start()?;
/// jobs.schedule("coupons-for-ada", "send-coupons", b"ada", Schedule::After(Duration::from_millis(10)))?;
/// assert_eq!(coupons.recv_timeout(Duration::from_secs(10))?, b"ada");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DurableScheduler {
    pub(crate) shared: Arc<Shared>,
    store: Arc<dyn Store>,
    /// The API's connection.
    api: Mutex<Box<dyn Conn>>,
    /// The loops' channels until `start`, then the loops until `shutdown`.
    state: Mutex<Lifecycle>,
}

enum Lifecycle {
    Made(Channels),
    Started(Engine),
    Stopped,
}

impl DurableScheduler {
    /// A scheduler on `executor`, its jobs in the SQLite file at `path`
    /// (created, readable by its owner only, if need be).
    ///
    /// # Errors
    ///
    /// [`DurableError::Config`] for a setting of `config` that cannot work;
    /// [`DurableError::Store`] if the file cannot be opened or migrated.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(
        executor: &ScheduledExecutor,
        path: impl AsRef<std::path::Path>,
        config: Config,
    ) -> Result<Self, DurableError> {
        config.validate()?;
        let (store, api) =
            crate::store::sqlite::SqliteStore::open_migrating(path.as_ref(), config.migrate)?;
        Ok(Self::with_store(executor, Arc::new(store), api, config))
    }

    /// A scheduler on `executor`, its jobs in the PostgreSQL database
    /// `params` names (a libpq connection string, `"host=db user=app
    /// dbname=app"`, or a URL, `"postgres://app@db/app"`; no TLS), shared
    /// with every other scheduler on that database: each job runs in one
    /// of them.
    ///
    /// # Errors
    ///
    /// [`DurableError::Config`] for a setting of `config` that cannot work;
    /// [`DurableError::Store`] if `params` cannot be read, or the database
    /// cannot be reached or migrated (a transient error if it may be
    /// reached later: the server refused the connection, say).
    #[cfg(feature = "postgres")]
    pub fn postgres(
        executor: &ScheduledExecutor,
        params: &str,
        config: Config,
    ) -> Result<Self, DurableError> {
        config.validate()?;
        let (store, api) = crate::store::postgres::PgStore::open_migrating(params, config.migrate)?;
        Ok(Self::with_store(executor, Arc::new(store), api, config))
    }

    fn with_store(
        executor: &ScheduledExecutor,
        store: Arc<dyn Store>,
        api: Box<dyn Conn>,
        config: Config,
    ) -> Self {
        let (shared, channels) = Shared::new(executor, config);
        DurableScheduler {
            shared,
            store,
            api: Mutex::new(api),
            state: Mutex::new(Lifecycle::Made(channels)),
        }
    }

    /// Registers `handler` for the jobs named `name` (replacing one
    /// registered before). Register every handler before [`start`](Self::start).
    /// A due job whose name no handler here claims is left to the other
    /// schedulers on the store for [`Config::unhandled_wait`]; then it is
    /// claimed, its `last_error` says why it waits, and it waits as long
    /// again.
    ///
    /// The handler returns a [`JobError`] when the run failed: a retryable
    /// one (`Err("why".into())`, or `?` on a `String` error) is retried
    /// after a back-off, a [permanent](JobError::permanent) one makes the
    /// job dead at once. A panic is retryable. For a recurring job, only
    /// the failing occurrence is dead: the job goes on to its next one.
    pub fn register(
        &self,
        name: &str,
        handler: impl Fn(&JobContext<'_>) -> Result<(), JobError> + Send + Sync + 'static,
    ) {
        self.handle(name, Registered::Sync(Box::new(handler)));
    }

    /// Registers an async `handler` for the jobs named `name`, whose runs
    /// are polled on `spawn`'s runtime (a `tokio::runtime::Handle` with the
    /// `tokio` feature, or any [`Spawn`]). As [`register`](Self::register)
    /// otherwise: the run holds its claim and lease until the future
    /// completes, its output is the run's outcome, and a panic while it is
    /// polled, or the future dropped unfinished (its runtime shut down, or
    /// cancelled it), is a failed attempt, retried after the back-off. An
    /// async run counts against [`Config::concurrency`] as a synchronous
    /// one does, until its future completes.
    ///
    /// ```no_run
    /// # #[cfg(feature = "tokio")]
    /// # fn demo(jobs: &chronopool_durable::DurableScheduler, runtime: &tokio::runtime::Runtime) {
    /// jobs.register_async("send-mail", runtime.handle().clone(), |job| async move {
    ///     let to = String::from_utf8_lossy(job.payload()).into_owned();
    ///     // An async client would be awaited here.
    ///     println!("mail to {to}");
    ///     Ok(())
    /// });
    /// # }
    /// ```
    pub fn register_async<F, Fut>(&self, name: &str, spawn: impl Spawn, handler: F)
    where
        F: Fn(JobContext<'static>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), JobError>> + Send + 'static,
    {
        let handler = move |job| Box::pin(handler(job)) as HandlerFuture;
        self.handle(
            name,
            Registered::Async {
                spawn: Arc::new(spawn),
                handler: Box::new(handler),
            },
        );
    }

    fn handle(&self, name: &str, handler: Registered) {
        self.shared
            .handlers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), Arc::new(handler));
    }

    fn state(&self) -> MutexGuard<'_, Lifecycle> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the scheduler's two threads (one claims, runs and finishes
    /// jobs, one polls the store) and its poll task on the executor, which
    /// places the first window at once. Until then nothing is placed or
    /// run here. Calling it again does nothing.
    ///
    /// # Errors
    ///
    /// [`DurableError::Executor`] if the executor is shut down or gone, a
    /// thread cannot be started, or the scheduler was shut down.
    pub fn start(&self) -> Result<(), DurableError> {
        let mut state = self.state();
        match std::mem::replace(&mut *state, Lifecycle::Stopped) {
            Lifecycle::Made(channels) => {
                match engine::start(&self.shared, Arc::clone(&self.store), channels) {
                    Ok(engine) => {
                        *state = Lifecycle::Started(engine);
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            started @ Lifecycle::Started(_) => {
                *state = started;
                Ok(())
            }
            Lifecycle::Stopped => Err(DurableError::Executor("the scheduler was shut down".into())),
        }
    }

    /// Stops this scheduler: nothing more is placed or claimed here (the
    /// jobs placed in the executor's timer are cancelled: they stay in the
    /// store, for the next process), and the runs in progress go on until
    /// their handlers return, their outcomes stored. Waits up to `timeout`
    /// for that; true if every run in progress had its outcome stored (the
    /// scheduler's threads then have ended), false if some were still
    /// going (they go on, and the scheduler's run thread stores their
    /// outcomes and ends after them); a `timeout` past the clock's range
    /// (`Duration::MAX`) waits for as long as the runs take. Called from
    /// one of this scheduler's own handlers (on the thread that runs it, or
    /// polls its future), it does not wait (its run is one of those in
    /// progress): it returns false at once, and the scheduler's threads end
    /// after that handler returns. From a thread or task the handler waits
    /// for, it cannot tell: give it a finite `timeout` there. The executor
    /// is not shut down. Calling it again does nothing and returns true.
    ///
    /// Dropping the scheduler does the same without waiting.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use chronopool_durable::{Config, DurableScheduler};
    /// use std::time::Duration;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
    /// let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default())?;
    /// jobs.start()?;
    /// assert!(jobs.shutdown(Duration::from_secs(5)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(&self, timeout: Duration) -> bool {
        let engine = match std::mem::replace(&mut *self.state(), Lifecycle::Stopped) {
            Lifecycle::Started(engine) => engine,
            Lifecycle::Made(_) | Lifecycle::Stopped => return true,
        };
        engine.stop(&self.shared, timeout)
    }

    /// Runs `f` on the API's connection; a transient failure is tried
    /// again after a back-off for up to [`API_RETRY_FOR`].
    pub(crate) fn api<R>(
        &self,
        mut f: impl FnMut(&mut dyn Conn) -> Result<R, StoreError>,
    ) -> Result<R, DurableError> {
        let mut conn = self.api.lock().unwrap_or_else(|p| p.into_inner());
        let give_up = Instant::now() + API_RETRY_FOR;
        let mut backoff = Duration::from_millis(10);
        loop {
            match f(&mut **conn) {
                Ok(value) => return Ok(value),
                Err(e) if e.is_transient() && Instant::now() + backoff < give_up => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Stores the job `key` for the handler `name`, with `payload`, on
    /// `schedule`. Once this returns, the job runs at least once, in this
    /// process or another on the same store, even across crashes. A key is
    /// never stored twice: if it is stored already, the same job is kept
    /// untouched (so calling this at every start changes nothing) and a
    /// different one replaces it, a run in progress going on undisturbed
    /// ([`IfExists::KeepSame`](crate::IfExists::KeepSame); for the other
    /// choices, schedule a [`Job`] with [`Job::if_exists`] through
    /// [`schedule_all`](Self::schedule_all)).
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`] for a schedule that cannot fire or whose
    /// times a store cannot hold (after the year 9999, say),
    /// [`DurableError::Store`] if the store failed.
    pub fn schedule(
        &self,
        key: &str,
        name: &str,
        payload: impl AsRef<[u8]>,
        schedule: Schedule,
    ) -> Result<(), DurableError> {
        self.schedule_all([Job::new(key, name, payload.as_ref(), schedule)])
    }

    /// [`schedule`](Self::schedule), with a policy for the occurrences a
    /// recurring job misses while no process runs it (see
    /// [`Job::missed_runs`]).
    ///
    /// # Errors
    ///
    /// As for [`schedule`](Self::schedule).
    pub fn schedule_with(
        &self,
        key: &str,
        name: &str,
        payload: impl AsRef<[u8]>,
        schedule: Schedule,
        missed: MissedRuns,
    ) -> Result<(), DurableError> {
        self.schedule_all([Job::new(key, name, payload.as_ref(), schedule).missed_runs(missed)])
    }

    /// [`schedule`](Self::schedule) with `value` as the payload, in JSON
    /// (`serde` feature); the handler reads it with [`JobContext::json`].
    ///
    /// # Errors
    ///
    /// As for [`schedule`](Self::schedule), and
    /// [`DurableError::Schedule`] if `value` cannot be written as JSON.
    #[cfg(feature = "serde")]
    pub fn schedule_json<T: serde::Serialize + ?Sized>(
        &self,
        key: &str,
        name: &str,
        value: &T,
        schedule: Schedule,
    ) -> Result<(), DurableError> {
        self.schedule_all([Job::json(key, name, value, schedule)?])
    }

    /// Stores `jobs` in one transaction: all of them or, on an error, none
    /// (of two jobs with one key, the later is stored). Much faster than
    /// one [`schedule`](Self::schedule) per job: a batch of a thousand
    /// costs about what a few single schedules do.
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`] for a schedule that cannot fire or be
    /// stored (nothing is stored), [`DurableError::Store`] if the store
    /// failed.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use chronopool_durable::{Config, DurableScheduler, Job, Schedule};
    /// use std::time::Duration;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
    /// let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default())?;
    /// let reminders = (1..=1000).map(|user| {
    ///     let key = format!("remind-{user}");
    ///     Job::new(key, "remind", user.to_string(), Schedule::After(Duration::from_secs(3600)))
    /// });
    /// jobs.schedule_all(reminders)?;
    /// assert!(jobs.job("remind-500")?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn schedule_all(&self, jobs: impl IntoIterator<Item = Job>) -> Result<(), DurableError> {
        let now = self.shared.now_micros();
        let rows = new_jobs(jobs, now)?;
        if rows.is_empty() {
            return Ok(());
        }
        let stored = self.api(|conn| conn.upsert(&rows))?;
        // Placed here: what was stored and waits (a job kept untouched is
        // placed already, and a running one is placed when its run ends).
        for job in stored.iter().filter(|job| !job.running) {
            self.shared
                .place_if_near(&job.key, &job.name, job.next_fire, now);
        }
        Ok(())
    }

    /// Stores `jobs` in `tx`, a transaction of the application's own on
    /// the scheduler's store (a `rusqlite::Transaction` on the same file,
    /// or a `postgres::Transaction` on the same database), beside the
    /// application's own writes: an order written and its reminder
    /// scheduled, together. If `tx` commits, the jobs exist and run, as
    /// after [`schedule_all`](Self::schedule_all) (what a stored key does
    /// is each job's [`IfExists`](crate::IfExists)); if it rolls back (or
    /// is dropped), they never existed. Nothing is placed before the
    /// commit: the schedulers of every process on the store learn of the
    /// jobs when it is visible (PostgreSQL: a notification delivered at
    /// the commit; SQLite: the file's change counter), and the polls stay
    /// the source of truth.
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`] for a schedule that cannot fire or be
    /// stored (nothing is written), [`DurableError::Store`] if a statement
    /// failed (on PostgreSQL the transaction is then aborted, as after any
    /// failed statement: roll it back). No statement is tried again: the
    /// transaction is the application's.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use chronopool_durable::{Config, DurableScheduler, Job, Schedule};
    /// use std::time::Duration;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("shop.db");
    /// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
    /// let jobs = DurableScheduler::sqlite(&pool, &path, Config::default())?;
    ///
    /// let mut db = rusqlite::Connection::open(&path)?;
    /// db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)", [])?;
    /// let tx = db.transaction()?;
    /// tx.execute("INSERT INTO orders (id) VALUES (7)", [])?;
    /// let remind = Job::new("remind-7", "remind", "7", Schedule::After(Duration::from_secs(3 * 86_400)));
    /// let mut tx = tx;
    /// jobs.schedule_in(&mut tx, [remind])?;
    /// tx.commit()?; // the order and its reminder, or neither
    /// assert!(jobs.job("remind-7")?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn schedule_in<T: AppTransaction + ?Sized>(
        &self,
        tx: &mut T,
        jobs: impl IntoIterator<Item = Job>,
    ) -> Result<(), DurableError> {
        let rows = new_jobs(jobs, self.shared.now_micros())?;
        if rows.is_empty() {
            return Ok(());
        }
        tx.upsert_jobs(Rows(&rows))?;
        Ok(())
    }

    /// [`schedule_in`](Self::schedule_in), in an sqlx transaction of the
    /// application's (`sqlx::Transaction<'_, Postgres>` or
    /// `sqlx::Transaction<'_, Sqlite>`, on the scheduler's store; feature
    /// `sqlx`), awaited on the application's runtime.
    ///
    /// # Errors
    ///
    /// As for [`schedule_in`](Self::schedule_in).
    ///
    /// ```no_run
    /// # async fn demo(jobs: &chronopool_durable::DurableScheduler, db: &sqlx::PgPool)
    /// #     -> Result<(), Box<dyn std::error::Error>> {
    /// use chronopool_durable::{Job, Schedule};
    /// use std::time::Duration;
    ///
    /// let mut tx = db.begin().await?;
    /// sqlx::query("INSERT INTO orders (id) VALUES (7)").execute(&mut *tx).await?;
    /// let remind = Job::new("remind-7", "remind", "7", Schedule::After(Duration::from_secs(3 * 86_400)));
    /// jobs.schedule_in_sqlx(&mut tx, [remind]).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sqlx")]
    pub async fn schedule_in_sqlx<T: crate::store::SqlxTransaction + ?Sized>(
        &self,
        tx: &mut T,
        jobs: impl IntoIterator<Item = Job>,
    ) -> Result<(), DurableError> {
        let rows = new_jobs(jobs, self.shared.now_micros())?;
        if rows.is_empty() {
            return Ok(());
        }
        tx.upsert_jobs(Rows(&rows)).await?;
        Ok(())
    }

    /// Removes the job `key`; false if there was none. A run in progress
    /// finishes, and stores nothing.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn cancel(&self, key: &str) -> Result<bool, DurableError> {
        self.api(|conn| conn.delete(key))
    }

    /// The job `key`, as stored.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn job(&self, key: &str) -> Result<Option<JobInfo>, DurableError> {
        Ok(self.api(|conn| conn.get(key))?.map(JobInfo::from))
    }

    /// What this scheduler has counted since it was made.
    pub fn metrics(&self) -> DurableMetrics {
        self.shared.counters.snapshot()
    }

    /// The jobs that failed `max_attempts` times, or with a permanent
    /// error, by key. A recurring job is here only once it has no
    /// occurrence left: an occurrence that dies is in the job's history
    /// and its `last_error`, and the job goes on.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn dead_jobs(&self) -> Result<Vec<JobInfo>, DurableError> {
        self.jobs(&JobQuery::new().state(JobState::Dead).limit(usize::MAX))
    }

    /// Runs the dead job `key` again, now, its attempts reset; false if it
    /// is not dead.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn retry(&self, key: &str) -> Result<bool, DurableError> {
        let now = self.shared.now_micros();
        let revived = self.api(|conn| conn.revive(key, now))?;
        if revived {
            if let Some(row) = self.api(|conn| conn.get(key))? {
                self.shared.place_if_near(key, &row.name, now, now);
            }
        }
        Ok(revived)
    }
}

impl Drop for DurableScheduler {
    /// [`shutdown`](DurableScheduler::shutdown) without waiting: the runs
    /// in progress go on, and the scheduler's run thread stores their
    /// outcomes, then ends.
    fn drop(&mut self) {
        self.shutdown(Duration::ZERO);
    }
}

impl std::fmt::Debug for DurableScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableScheduler")
            .field("owner", &self.shared.owner.id)
            .field("config", &self.shared.config)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// `jobs` as rows to store, their first fire times from `now`.
fn new_jobs(
    jobs: impl IntoIterator<Item = Job>,
    now: time::Micros,
) -> Result<Vec<NewJob>, DurableError> {
    jobs.into_iter()
        .map(|job| {
            let (recurrence, first) = job.schedule.first(now)?;
            let catch_up = job
                .catch_up
                .map(|w| {
                    time::duration_micros(w).ok_or_else(|| {
                        DurableError::Schedule(format!(
                            "a catch-up window of {w:?} is longer than 9,999 years"
                        ))
                    })
                })
                .transpose()?;
            Ok(NewJob {
                key: job.key,
                name: job.name,
                payload: job.payload,
                // A one-shot at a wall time keeps that time in its text
                // (`Recurrence::decode`): `IfExists::KeepSame` compares it.
                recurrence: match job.schedule {
                    Schedule::At(_) => format!("once at {first}"),
                    _ => recurrence.encode(),
                },
                next_fire: first,
                missed: job.missed,
                catch_up,
                if_exists: job.if_exists,
            })
        })
        .collect()
}

//! [`DurableScheduler`]: named handlers, stored schedules, and the loop
//! that moves the jobs about to fall due from the store into the
//! executor's timer.
//!
//! # Memory holds a window, the store holds the rest
//!
//! Every `poll_interval` a task on the executor asks the store for the
//! jobs due within `window` (and the running ones whose lease expired),
//! and places each in the executor's timer at its fire time (at a wall
//! time: `schedule_at_system_time`), unless it is placed there already. A
//! job scheduled inside the window goes straight in. So the timer holds a
//! window's worth of jobs, however many the store has.
//!
//! # A fire
//!
//! When a placement falls due, a worker *claims* the job in the store (one
//! statement for every job that fell due meanwhile: `batch.rs`,
//! `store/mod.rs`), a worker runs its handler with a lease the lease
//! thread renews while the handler runs, and the run is *finished* (in a
//! batch too): deletes a one-shot job, gives
//! a recurring one its next fire time (placing it if that is inside the
//! window), retries a failure after a back-off, or makes the job dead after
//! `max_attempts`. A placement whose claim fails (another process has the
//! job, or it was scheduled again for a later time) does nothing.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use chronopool::{PeriodicHandle, ScheduledExecutor, WeakExecutor};

use crate::batch::Batcher;
use crate::error::DurableError;
use crate::job::{Handler, Job, JobContext, JobError};
use crate::lease::Leases;
use crate::metrics::{Counters, DurableMetrics, Outcome};
use crate::schedule::{Misfire, Recurrence, Schedule};
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{Due, Finish, JobState, Row, Store};
use crate::time::{from_millis, millis, millis_of};

/// How a [`DurableScheduler`] works; the defaults suit jobs due from
/// seconds to years ahead.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// How far ahead the jobs in memory reach (60 s).
    pub window: Duration,
    /// How often the store is asked for the next window (10 s; at most
    /// half the window, so that no job is placed late).
    pub poll_interval: Duration,
    /// How long a claim lasts before another process may take the job
    /// over; renewed every third of it while the handler runs (60 s).
    pub lease: Duration,
    /// Runs of an occurrence before the job is dead (5).
    pub max_attempts: u32,
    /// The first retry's delay, doubled for each later one (1 s) ...
    pub retry_initial: Duration,
    /// ... up to this (5 min).
    pub retry_max: Duration,
    /// How long a job whose handler is not registered waits before it is
    /// looked at again (60 s).
    pub unhandled_wait: Duration,
    /// The most jobs a poll places (10,000).
    pub batch: usize,
    /// How long a one-shot job that succeeded is kept, as
    /// [`JobState::Done`], for inspection (zero, the default: it is
    /// deleted by the run's own finish).
    pub keep_done: Duration,
    /// How long a dead job is kept for inspection and a manual
    /// [`retry`](DurableScheduler::retry) before it is deleted (7 days).
    pub keep_dead: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            window: Duration::from_secs(60),
            poll_interval: Duration::from_secs(10),
            lease: Duration::from_secs(60),
            max_attempts: 5,
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(300),
            unhandled_wait: Duration::from_secs(60),
            batch: 10_000,
            keep_done: Duration::ZERO,
            keep_dead: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// A job as the store holds it, for inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo {
    /// Its key.
    pub key: String,
    /// The name of its handler.
    pub name: String,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Its state.
    pub state: JobState,
    /// When it fires next (for a dead or done job: when it last was due).
    pub next_fire: SystemTime,
    /// The attempts of its current occurrence so far.
    pub attempt: u32,
    /// Why its last run failed, if it did.
    pub last_error: Option<String>,
}

impl From<Row> for JobInfo {
    fn from(row: Row) -> Self {
        JobInfo {
            key: row.key,
            name: row.name,
            payload: row.payload,
            state: row.state,
            next_fire: from_millis(row.next_fire),
            attempt: row.attempt,
            last_error: row.last_error,
        }
    }
}

/// Durable jobs run on a [`ScheduledExecutor`] (module doc).
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
    inner: Arc<Inner>,
}

struct Inner {
    store: Box<dyn Store>,
    executor: WeakExecutor,
    handlers: RwLock<HashMap<String, Arc<Handler>>>,
    /// Who claims: unique per scheduler (process id, then a counter).
    owner: String,
    config: Config,
    /// The jobs placed in the executor's timer, and the fire time each was
    /// placed for.
    placed: Mutex<HashMap<String, i64>>,
    poller: Mutex<Option<PeriodicHandle>>,
    /// `start` was called: until then nothing is placed or run here.
    started: std::sync::atomic::AtomicBool,
    /// The runs in progress here, whose leases `renewer` renews.
    leases: Arc<Leases>,
    renewer: Mutex<Option<std::thread::JoinHandle<()>>>,
    counters: Counters,
    /// Due jobs to claim, and runs to finish, in batches (`batch.rs`).
    claims: Batcher<Claim>,
    endings: Batcher<Ending>,
}

/// A placement that fell due: a job to claim.
struct Claim {
    key: String,
    /// It is a run whose lease expired.
    expired: bool,
}

/// A run that ended: how to finish it.
struct Ending {
    key: String,
    name: String,
    finish: Finish,
}

/// The most claims or finishes one statement carries.
const BATCH_LIMIT: usize = 1000;

impl DurableScheduler {
    /// A scheduler on `executor`, its jobs in the SQLite file at `path`
    /// (created if need be).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the file cannot be opened or migrated.
    pub fn sqlite(
        executor: &ScheduledExecutor,
        path: impl AsRef<std::path::Path>,
        config: Config,
    ) -> Result<Self, DurableError> {
        Ok(Self::with_store(
            executor,
            Box::new(SqliteStore::open(path)?),
            config,
        ))
    }

    /// A scheduler on `executor`, its jobs in the PostgreSQL database
    /// `params` names (a libpq connection string), shared with every other
    /// scheduler on that database: each job runs in one of them.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the database cannot be reached or
    /// migrated.
    pub fn postgres(
        executor: &ScheduledExecutor,
        params: &str,
        config: Config,
    ) -> Result<Self, DurableError> {
        Ok(Self::with_store(
            executor,
            Box::new(PgStore::connect(params)?),
            config,
        ))
    }

    fn with_store(executor: &ScheduledExecutor, store: Box<dyn Store>, config: Config) -> Self {
        static SCHEDULERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = SCHEDULERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        DurableScheduler {
            inner: Arc::new(Inner {
                store,
                executor: executor.downgrade(),
                handlers: RwLock::default(),
                owner: format!("{}-{n}", std::process::id()),
                config,
                placed: Mutex::default(),
                poller: Mutex::default(),
                started: std::sync::atomic::AtomicBool::new(false),
                leases: Arc::default(),
                renewer: Mutex::default(),
                counters: Counters::default(),
                claims: Batcher::new(BATCH_LIMIT),
                endings: Batcher::new(BATCH_LIMIT),
            }),
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
    /// job dead at once. A panic is retryable.
    pub fn register(
        &self,
        name: &str,
        handler: impl Fn(&JobContext<'_>) -> Result<(), JobError> + Send + Sync + 'static,
    ) {
        self.inner
            .handlers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), Arc::new(handler));
    }

    /// Starts the loop that places due jobs in the executor's timer (and
    /// places the first window at once), and the thread that renews the
    /// leases of the runs in progress (`lease.rs`). Calling it again does
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`DurableError::Executor`] if the executor is shut down or the
    /// renewal thread cannot be started.
    pub fn start(&self) -> Result<(), DurableError> {
        let mut poller = self.inner.poller.lock().unwrap_or_else(|p| p.into_inner());
        if poller.is_some() {
            return Ok(());
        }
        let executor = self.inner.executor()?;
        let every = (self.inner.config.lease / 3).max(Duration::from_millis(1));
        let (leases, weak) = (Arc::clone(&self.inner.leases), Arc::downgrade(&self.inner));
        let renewer = std::thread::Builder::new()
            .name("chronopool-durable-lease".into())
            .spawn(move || Inner::renew_leases(&leases, &weak, every))
            .map_err(|e| DurableError::Executor(format!("the lease thread: {e}")))?;
        *self.inner.renewer.lock().unwrap_or_else(|p| p.into_inner()) = Some(renewer);
        self.inner
            .started
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let weak = Arc::downgrade(&self.inner);
        let handle = executor
            .task()
            .name("chronopool-durable-poll")
            .schedule_with_fixed_delay(
                move || {
                    if let Some(inner) = weak.upgrade() {
                        inner.poll();
                    }
                },
                Duration::ZERO,
                self.inner.config.poll_interval,
            )
            .map_err(|e| DurableError::Executor(e.to_string()))?;
        *poller = Some(handle);
        Ok(())
    }

    /// Stores the job `key` (replacing the job of that key, if any: a key
    /// is never scheduled twice), for the handler `name`, with `payload`,
    /// on `schedule`. Once this returns, the job runs at least once, in
    /// this process or another on the same store, even across crashes.
    ///
    /// # Errors
    ///
    /// [`DurableError::Schedule`] for a schedule that cannot fire,
    /// [`DurableError::Store`] if the store failed.
    pub fn schedule(
        &self,
        key: &str,
        name: &str,
        payload: impl AsRef<[u8]>,
        schedule: Schedule,
    ) -> Result<(), DurableError> {
        self.schedule_with(key, name, payload, schedule, Misfire::default())
    }

    /// [`schedule`](Self::schedule), with a policy for the runs a
    /// recurring job misses while no process runs it.
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
        misfire: Misfire,
    ) -> Result<(), DurableError> {
        self.schedule_all([Job::new(key, name, payload.as_ref(), schedule).misfire(misfire)])
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
    /// [`DurableError::Schedule`] for a schedule that cannot fire (nothing
    /// is stored), [`DurableError::Store`] if the store failed.
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
        let now = self.inner.now()?;
        let rows = jobs
            .into_iter()
            .map(|job| {
                let (recurrence, first) = job.schedule.first(now)?;
                Ok(Row {
                    key: job.key,
                    name: job.name,
                    payload: job.payload,
                    recurrence: recurrence.encode(),
                    next_fire: millis(first),
                    state: JobState::Scheduled,
                    attempt: 0,
                    misfire: job.misfire,
                    last_error: None,
                })
            })
            .collect::<Result<Vec<Row>, DurableError>>()?;
        if rows.is_empty() {
            return Ok(());
        }
        self.inner.store.upsert(&rows)?;
        for row in &rows {
            self.inner
                .place_if_near(&row.key, &row.name, row.next_fire, millis(now));
        }
        Ok(())
    }

    /// Removes the job `key`; false if there was none. A run in progress
    /// finishes, and stores nothing.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn cancel(&self, key: &str) -> Result<bool, DurableError> {
        self.inner.store.delete(key)
    }

    /// The job `key`, as stored.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn job(&self, key: &str) -> Result<Option<JobInfo>, DurableError> {
        Ok(self.inner.store.get(key)?.map(JobInfo::from))
    }

    /// What this scheduler has counted since it was made.
    pub fn metrics(&self) -> DurableMetrics {
        self.inner.counters.snapshot()
    }

    /// The jobs that failed `max_attempts` times, or with a permanent
    /// error, by key.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn dead_jobs(&self) -> Result<Vec<JobInfo>, DurableError> {
        Ok(self
            .inner
            .store
            .list(JobState::Dead)?
            .into_iter()
            .map(JobInfo::from)
            .collect())
    }

    /// Runs the dead job `key` again, now, its attempts reset; false if it
    /// is not dead.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store failed.
    pub fn retry(&self, key: &str) -> Result<bool, DurableError> {
        let now = millis(self.inner.now()?);
        let revived = self.inner.store.revive(key, now)?;
        if let (true, Some(row)) = (revived, self.inner.store.get(key)?) {
            self.inner.place_if_near(key, &row.name, now, now);
        }
        Ok(revived)
    }
}

impl Drop for DurableScheduler {
    /// Stops the loop and the lease thread (and waits for it); jobs
    /// placed in the executor's timer find the scheduler gone and do
    /// nothing (they stay in the store). A handler still running keeps its
    /// lease until it ends or the lease expires.
    fn drop(&mut self) {
        if let Some(poller) = self
            .inner
            .poller
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            poller.cancel();
        }
        self.inner.leases.stop();
        let renewer = self
            .inner
            .renewer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(renewer) = renewer {
            // The thread holds no strong reference between renewals, and
            // its store calls end (a PostgreSQL reconnect gives up after
            // about 10 s), so this wait ends.
            let _ = renewer.join();
        }
    }
}

impl std::fmt::Debug for DurableScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableScheduler")
            .field("owner", &self.inner.owner)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn executor(&self) -> Result<ScheduledExecutor, DurableError> {
        self.executor
            .upgrade()
            .ok_or_else(|| DurableError::Executor("the executor is gone".into()))
    }

    fn now(&self) -> Result<SystemTime, DurableError> {
        Ok(self.executor()?.system_time())
    }

    /// Counts and reports a failed store operation, and drops its error
    /// (its work is done again later: module doc).
    fn ok<T>(&self, what: &str, result: Result<T, DurableError>) -> Option<T> {
        result.map_err(|e| self.counters.store_error(what, &e)).ok()
    }

    /// Places the job `key` if it fires within the window from `now` and
    /// this scheduler was started.
    /// (A job no handler here can run is left to the poll: see `poll`.)
    fn place_if_near(self: &Arc<Self>, key: &str, name: &str, fire: i64, now: i64) {
        let started = self.started.load(std::sync::atomic::Ordering::SeqCst);
        let near = fire <= now.saturating_add(millis_of(self.config.window));
        if started && near && self.has_handler(name) {
            self.place(key, fire, false);
        }
    }

    fn has_handler(&self, name: &str) -> bool {
        self.handlers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(name)
    }

    /// Places the job `key` in the executor's timer at `fire`, unless it
    /// is placed for that time already. `expired`: it is a run whose
    /// lease expired, to take over.
    fn place(self: &Arc<Self>, key: &str, fire: i64, expired: bool) {
        {
            let mut placed = self.placed.lock().unwrap_or_else(|p| p.into_inner());
            if placed.get(key) == Some(&fire) {
                return;
            }
            placed.insert(key.to_owned(), fire);
        }
        let Ok(executor) = self.executor() else {
            return;
        };
        self.counters.placed(key, fire);
        let (weak, owned_key) = (Arc::downgrade(self), key.to_owned());
        let placed = executor.schedule_at_system_time(
            move || {
                if let Some(inner) = Weak::upgrade(&weak) {
                    inner.fire(&owned_key, fire, expired);
                }
            },
            from_millis(fire),
        );
        if placed.is_err() {
            // Shut down: the job stays in the store for the next process.
            self.unplace(key, fire);
        }
    }

    fn unplace(&self, key: &str, fire: i64) {
        let mut placed = self.placed.lock().unwrap_or_else(|p| p.into_inner());
        if placed.get(key) == Some(&fire) {
            placed.remove(key);
        }
    }

    /// One turn of the loop: places the jobs due within the window, and
    /// deletes the done and dead jobs past their retention.
    fn poll(self: &Arc<Self>) {
        let Ok(now) = self.now().map(millis) else {
            return;
        };
        let until = now.saturating_add(millis_of(self.config.window));
        // A store that fails now is asked again at the next turn.
        let due = self.store.due(until, &self.owner, self.config.batch);
        let Some(due) = self.ok("due", due) else {
            return;
        };
        let unhandled_wait = millis_of(self.config.unhandled_wait);
        for Due {
            key,
            name,
            fire,
            expired,
        } in due
        {
            // A job no handler here can run is left to the schedulers that
            // can, for `unhandled_wait`; then this one claims it to record
            // why it waits (and to retry it later).
            if self.has_handler(&name) || fire.saturating_add(unhandled_wait) <= now {
                self.place(&key, fire, expired);
            }
        }
        let done_before = now.saturating_sub(millis_of(self.config.keep_done));
        let dead_before = now.saturating_sub(millis_of(self.config.keep_dead));
        if let Some(n) = self.ok("clean", self.store.clean(done_before, dead_before)) {
            self.counters.cleaned(n);
        }
    }

    /// A placement fell due: claim it, in a batch with the others due
    /// meanwhile (`batch.rs`), then run and finish it (module doc).
    fn fire(self: &Arc<Self>, key: &str, fire: i64, expired: bool) {
        self.unplace(key, fire);
        let claim = Claim {
            key: key.to_owned(),
            expired,
        };
        self.claims.push(claim, |batch| self.claim_batch(batch));
    }

    /// Claims a batch of due jobs in one statement, and hands each run to
    /// a worker. A job not claimed (another process has it, it moved, or
    /// it was cancelled) does nothing.
    fn claim_batch(self: &Arc<Self>, batch: Vec<Claim>) {
        let Ok(executor) = self.executor() else {
            return;
        };
        let now = executor.system_time();
        let lease_until = millis(now).saturating_add(millis_of(self.config.lease));
        let keys: Vec<String> = batch.iter().map(|c| c.key.clone()).collect();
        let Some(rows) = self.ok(
            "claim",
            self.store
                .claim(&keys, &self.owner, millis(now), lease_until),
        ) else {
            return;
        };
        let expired: std::collections::HashSet<&str> = batch
            .iter()
            .filter(|c| c.expired)
            .map(|c| c.key.as_str())
            .collect();
        for row in rows {
            let taken_over = expired.contains(row.key.as_str());
            self.counters.claimed(&row.key, row.attempt, taken_over);
            // Renewed from the claim to the stored finish: while the run
            // waits for a worker, runs, and waits for its finish's batch.
            self.leases.hold(&row.key);
            let handler = self
                .handlers
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(&row.name)
                .cloned();
            let Some(handler) = handler else {
                let finish = Finish::Retry {
                    next_fire: millis(now).saturating_add(millis_of(self.config.unhandled_wait)),
                    error: format!("no handler is registered for {:?}", row.name),
                    uncount: 1,
                };
                self.end(row.key, row.name, finish);
                continue;
            };
            let (inner, key) = (Arc::clone(self), row.key.clone());
            let handed = executor.execute(move || {
                let finish = inner.run(&row, &*handler, now);
                inner.end(row.key, row.name, finish);
            });
            if handed.is_err() {
                // Shut down: the claim stays, and its lease expires.
                self.leases.release(&key);
                self.counters.finished(&key, Outcome::Lost, None);
            }
        }
    }

    /// A run ended: store how, in a batch with the others ending meanwhile.
    fn end(self: &Arc<Self>, key: String, name: String, finish: Finish) {
        let ending = Ending { key, name, finish };
        self.endings.push(ending, |batch| self.finish_batch(batch));
    }

    /// Stores a batch of finishes, counts them, and places the next fire
    /// of each recurring or retried job that falls inside the window.
    fn finish_batch(self: &Arc<Self>, batch: Vec<Ending>) {
        let mut runs = Vec::with_capacity(batch.len());
        let mut names = Vec::with_capacity(batch.len());
        for Ending { key, name, finish } in batch {
            runs.push((key, finish));
            names.push(name);
        }
        // A finish the store refused (the job is another's now) or could
        // not take (its lease expires, and the job runs again) is lost.
        let stored = self
            .ok("finish", self.store.finish(&self.owner, &runs))
            .unwrap_or_else(|| vec![false; runs.len()]);
        let now = self.now().map(millis);
        for (((key, finish), name), stored) in runs.iter().zip(&names).zip(stored) {
            self.leases.release(key);
            let (outcome, next, error) = match finish {
                Finish::Done { .. } => (Outcome::Succeeded, None, None),
                Finish::Next { next_fire } => (Outcome::Succeeded, Some(*next_fire), None),
                Finish::Retry {
                    next_fire, error, ..
                } => (Outcome::Retried, Some(*next_fire), Some(error.as_str())),
                Finish::Dead { error, .. } => (Outcome::Dead, None, Some(error.as_str())),
            };
            if !stored {
                self.counters.finished(key, Outcome::Lost, error);
                continue;
            }
            self.counters.finished(key, outcome, error);
            if let (Some(next), Ok(now)) = (next, &now) {
                self.place_if_near(key, name, next, *now);
            }
        }
    }

    /// Runs `row`'s handler, and says how the run ends.
    fn run(&self, row: &Row, handler: &Handler, now: SystemTime) -> Finish {
        let recurrence = match Recurrence::decode(&row.recurrence) {
            Ok(recurrence) => recurrence,
            Err(e) => {
                return Finish::Dead {
                    error: e.to_string(),
                    at: millis(now),
                }
            }
        };
        let due = from_millis(row.next_fire);
        let skip = row.misfire == Misfire::Skip
            && row.attempt == 1
            && recurrence != Recurrence::Once
            && recurrence
                .next_after(due)
                .ok()
                .flatten()
                .is_some_and(|next| next <= now);
        let outcome = if skip {
            Ok(())
        } else {
            let context = JobContext { row, due };
            catch_unwind(AssertUnwindSafe(|| handler(&context)))
                .unwrap_or_else(|_| Err(JobError::retry("the handler panicked")))
        };
        let after = self.now().unwrap_or(now);
        match outcome {
            Ok(()) => match recurrence.after_run(due, after, row.misfire) {
                Ok(Some(next)) => Finish::Next {
                    next_fire: millis(next),
                },
                Ok(None) => Finish::Done {
                    at: millis(after),
                    keep: !self.config.keep_done.is_zero(),
                },
                Err(e) => Finish::Dead {
                    error: e.to_string(),
                    at: millis(after),
                },
            },
            Err(error) if error.is_permanent() || row.attempt >= self.config.max_attempts => {
                Finish::Dead {
                    error: error.message().to_owned(),
                    at: millis(after),
                }
            }
            Err(error) => {
                let doublings = row.attempt.saturating_sub(1).min(30);
                let delay = self
                    .config
                    .retry_initial
                    .saturating_mul(1 << doublings)
                    .min(self.config.retry_max);
                Finish::Retry {
                    next_fire: millis(after + delay),
                    error: error.message().to_owned(),
                    uncount: 0,
                }
            }
        }
    }

    /// The lease thread's loop (`lease.rs`): every `every`, while runs are
    /// in progress, extends their leases by a lease from now. It holds the
    /// scheduler only while it renews, so that the scheduler can go.
    fn renew_leases(leases: &Leases, weak: &Weak<Inner>, every: Duration) {
        while let Some(keys) = leases.next_renewal(every) {
            let Some(inner) = weak.upgrade() else {
                return;
            };
            if let Ok(now) = inner.now() {
                let until = millis(now).saturating_add(millis_of(inner.config.lease));
                if let Some(n) = inner.ok("renew", inner.store.renew(&keys, &inner.owner, until)) {
                    inner.counters.renewed(n);
                }
            }
        }
    }
}

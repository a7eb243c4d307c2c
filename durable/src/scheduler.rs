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
//! statement: `store/mod.rs`), runs its handler with a lease it renews
//! while the handler runs, and *finishes* it: deletes a one-shot job, gives
//! a recurring one its next fire time (placing it if that is inside the
//! window), retries a failure after a back-off, or makes the job dead after
//! `max_attempts`. A placement whose claim fails (another process has the
//! job, or it was scheduled again for a later time) does nothing.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use chronopool::{PeriodicHandle, ScheduledExecutor, WeakExecutor};

use crate::error::DurableError;
use crate::schedule::{Misfire, Recurrence, Schedule};
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{Finish, JobState, Row, Store};
use crate::time::{from_millis, millis, millis_of};

/// A job's handler: it gets the job's context and returns `Err` with a
/// message when the run failed (the job is then retried). A panic is a
/// failure too.
pub type Handler = dyn Fn(&JobContext<'_>) -> Result<(), String> + Send + Sync;

/// What a handler sees of the job it runs.
#[derive(Debug)]
pub struct JobContext<'a> {
    row: &'a Row,
    due: SystemTime,
}

impl JobContext<'_> {
    /// The job's key.
    pub fn key(&self) -> &str {
        &self.row.key
    }

    /// The name of its handler.
    pub fn name(&self) -> &str {
        &self.row.name
    }

    /// Its payload.
    pub fn payload(&self) -> &[u8] {
        &self.row.payload
    }

    /// Which attempt this is: 1 for the first run of an occurrence, more
    /// for retries and for a run taken over after its process crashed (a
    /// handler that sees more than 1 should be idempotent).
    pub fn attempt(&self) -> u32 {
        self.row.attempt
    }

    /// When this run was due.
    pub fn due(&self) -> SystemTime {
        self.due
    }
}

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
    /// When it fires next (for a dead job: when it last was due).
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
/// use chronopool_durable::{Config, DurableScheduler, Schedule};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let dir = tempfile::tempdir()?;
/// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
/// let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default())?;
/// let (sent, coupons) = mpsc::channel();
/// let sent = std::sync::Mutex::new(sent);
/// jobs.register("send-coupons", move |job| {
///     sent.lock().unwrap().send(job.payload().to_vec()).map_err(|e| e.to_string())
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
}

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
            }),
        }
    }

    /// Registers `handler` for the jobs named `name` (replacing one
    /// registered before). Register every handler before [`start`](Self::start).
    /// A due job whose name no handler here claims is left to the other
    /// schedulers on the store for [`Config::unhandled_wait`]; then it is
    /// claimed, its `last_error` says why it waits, and it waits as long
    /// again.
    pub fn register(
        &self,
        name: &str,
        handler: impl Fn(&JobContext<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) {
        self.inner
            .handlers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), Arc::new(handler));
    }

    /// Starts the loop that places due jobs in the executor's timer (and
    /// places the first window at once). Calling it again does nothing.
    ///
    /// # Errors
    ///
    /// [`DurableError::Executor`] if the executor is shut down.
    pub fn start(&self) -> Result<(), DurableError> {
        let mut poller = self.inner.poller.lock().unwrap_or_else(|p| p.into_inner());
        if poller.is_some() {
            return Ok(());
        }
        let executor = self.inner.executor()?;
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
        let now = self.inner.now()?;
        let (recurrence, first) = schedule.first(now)?;
        let row = Row {
            key: key.to_owned(),
            name: name.to_owned(),
            payload: payload.as_ref().to_vec(),
            recurrence: recurrence.encode(),
            next_fire: millis(first),
            state: JobState::Scheduled,
            attempt: 0,
            misfire,
            last_error: None,
        };
        self.inner.store.upsert(&row)?;
        self.inner
            .place_if_near(key, name, row.next_fire, millis(now));
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

    /// The jobs that failed `max_attempts` times, by key.
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
    /// Stops the loop; jobs placed in the executor's timer find the
    /// scheduler gone and do nothing (they stay in the store).
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

    /// Places the job `key` if it fires within the window from `now` and
    /// this scheduler was started.
    /// (A job no handler here can run is left to the poll: see `poll`.)
    fn place_if_near(self: &Arc<Self>, key: &str, name: &str, fire: i64, now: i64) {
        let started = self.started.load(std::sync::atomic::Ordering::SeqCst);
        let near = fire <= now.saturating_add(millis_of(self.config.window));
        if started && near && self.has_handler(name) {
            self.place(key, fire);
        }
    }

    fn has_handler(&self, name: &str) -> bool {
        self.handlers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(name)
    }

    /// Places the job `key` in the executor's timer at `fire`, unless it
    /// is placed for that time already.
    fn place(self: &Arc<Self>, key: &str, fire: i64) {
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
        let (weak, owned_key) = (Arc::downgrade(self), key.to_owned());
        let placed = executor.schedule_at_system_time(
            move || {
                if let Some(inner) = Weak::upgrade(&weak) {
                    inner.fire(&owned_key, fire);
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

    /// One turn of the loop: places the jobs due within the window.
    fn poll(self: &Arc<Self>) {
        let Ok(now) = self.now().map(millis) else {
            return;
        };
        let until = now.saturating_add(millis_of(self.config.window));
        // A store that fails now is asked again at the next turn.
        let Ok(due) = self.store.due(until, now, self.config.batch) else {
            return;
        };
        let unhandled_wait = millis_of(self.config.unhandled_wait);
        for (key, name, fire) in due {
            // A job no handler here can run is left to the schedulers that
            // can, for `unhandled_wait`; then this one claims it to record
            // why it waits (and to retry it later).
            if self.has_handler(&name) || fire.saturating_add(unhandled_wait) <= now {
                self.place(&key, fire);
            }
        }
    }

    /// A placement fell due: claim, run, finish (module doc).
    fn fire(self: &Arc<Self>, key: &str, fire: i64) {
        self.unplace(key, fire);
        let Ok(executor) = self.executor() else {
            return;
        };
        let now = executor.system_time();
        let lease = millis_of(self.config.lease);
        let claimed = self.store.claim(
            key,
            &self.owner,
            millis(now),
            millis(now).saturating_add(lease),
        );
        let Ok(Some(row)) = claimed else {
            return; // another process has it, or it moved, or the store failed
        };
        let handler = self
            .handlers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&row.name)
            .cloned();
        let finish = match handler {
            None => Finish::Retry {
                next_fire: millis(now).saturating_add(millis_of(self.config.unhandled_wait)),
                error: format!("no handler is registered for {:?}", row.name),
                uncount: 1,
            },
            Some(handler) => self.run(&executor, &row, &*handler, now),
        };
        let name = row.name;
        let next = match &finish {
            Finish::Next { next_fire } | Finish::Retry { next_fire, .. } => Some(*next_fire),
            _ => None,
        };
        if let Ok(true) = self.store.finish(key, &self.owner, &finish) {
            if let Some(next) = next {
                self.place_if_near(key, &name, next, millis(executor.system_time()));
            }
        }
    }

    /// Runs `row`'s handler under a renewed lease, and says how the run
    /// ends.
    fn run(
        self: &Arc<Self>,
        executor: &ScheduledExecutor,
        row: &Row,
        handler: &Handler,
        now: SystemTime,
    ) -> Finish {
        let recurrence = match Recurrence::decode(&row.recurrence) {
            Ok(recurrence) => recurrence,
            Err(e) => {
                return Finish::Dead {
                    error: e.to_string(),
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
            let renewal = self.renew_while_running(executor, &row.key);
            let context = JobContext { row, due };
            let outcome = catch_unwind(AssertUnwindSafe(|| handler(&context)))
                .unwrap_or_else(|_| Err("the handler panicked".to_owned()));
            if let Some(renewal) = renewal {
                renewal.cancel();
            }
            outcome
        };
        let after = executor.system_time();
        match outcome {
            Ok(()) => match recurrence.after_run(due, after, row.misfire) {
                Ok(Some(next)) => Finish::Next {
                    next_fire: millis(next),
                },
                Ok(None) => Finish::Delete,
                Err(e) => Finish::Dead {
                    error: e.to_string(),
                },
            },
            Err(error) if row.attempt >= self.config.max_attempts => Finish::Dead { error },
            Err(error) => {
                let doublings = row.attempt.saturating_sub(1).min(30);
                let delay = self
                    .config
                    .retry_initial
                    .saturating_mul(1 << doublings)
                    .min(self.config.retry_max);
                Finish::Retry {
                    next_fire: millis(after + delay),
                    error,
                    uncount: 0,
                }
            }
        }
    }

    /// Renews the lease of `key` every third of a lease until cancelled.
    fn renew_while_running(
        self: &Arc<Self>,
        executor: &ScheduledExecutor,
        key: &str,
    ) -> Option<PeriodicHandle> {
        let every = self.config.lease / 3;
        if every.is_zero() {
            return None;
        }
        let (weak, key) = (Arc::downgrade(self), key.to_owned());
        executor
            .schedule_at_fixed_rate(
                move || {
                    if let Some(inner) = weak.upgrade() {
                        if let Ok(now) = inner.now() {
                            let until = millis(now).saturating_add(millis_of(inner.config.lease));
                            let _ = inner.store.renew(&key, &inner.owner, until);
                        }
                    }
                },
                every,
                every,
            )
            .ok()
    }
}

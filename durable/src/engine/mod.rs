//! The scheduler's own threads: all of its store work happens on them, so
//! that the executor's workers run handlers and nothing else.
//!
//! * **The run loop** (`runs.rs`, thread `chronopool-durable-runs`) owns
//!   one connection. Everything that moves a run goes through its channel:
//!   placements that fell due (to claim), runs that ended (to finish), and
//!   its own timer for renewals. Each turn drains the channel and stores
//!   what it found in one transaction: the finishes, the claims, the
//!   renewals. Draining is the batch: when jobs fall due or end faster than
//!   a round trip, they share one; one alone is sent at once.
//! * **The poll loop** (`poll.rs`, thread `chronopool-durable-poll`) owns
//!   another: it asks for the jobs due within the window and places them
//!   in the executor's timer (`placement.rs`), ends the leases of runs
//!   whose scheduler is gone, and deletes done and dead jobs past their
//!   retention.
//!
//! The executor's part is small: a periodic task that asks the poll loop
//! to poll, the placements (each a timer task that tells the run loop its
//! job fell due), and the runs themselves (`run.rs`), which tell the run
//! loop how they ended. A store that is slow or away (a PostgreSQL restart,
//! a SQLite file locked by another process) holds up only these threads:
//! the runs already claimed go on, their outcomes wait in the run loop, and
//! its leases are renewed as soon as the store is back.
//!
//! # Manual time
//!
//! A message that carries work on from a task (a placement that fell due,
//! a run that ended, a poll) carries a [`Busy`] of the executor, dropped
//! once the loop has done that work: on a
//! [`ManualClock`](chronopool::ManualClock), `advance` waits for it, so a
//! job claimed, run and finished in manual time places its next occurrence
//! before time moves on, as if the loops were workers.

mod listen;
mod placement;
mod poll;
mod run;
mod runs;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use chronopool::{Busy, PeriodicHandle, ScheduledExecutor, WeakExecutor};

use crate::completion::Completed;
use crate::config::Config;
use crate::error::DurableError;
use crate::metrics::Counters;
use crate::owner::Owner;
use crate::store::{Fence, Finish, Store};
use crate::time::{self, Micros};

pub(crate) use placement::Placements;
pub(crate) use run::Registered;

/// What the scheduler, its loops and its runs share.
pub(crate) struct Shared {
    pub(crate) executor: WeakExecutor,
    pub(crate) config: Config,
    pub(crate) owner: Owner,
    pub(crate) handlers: RwLock<HashMap<String, Arc<Registered>>>,
    pub(crate) placements: Placements,
    pub(crate) counters: Counters,
    /// To the run loop: placements that fell due, runs that ended.
    runs: Sender<ToRuns>,
    /// To the poll loop.
    polls: Sender<ToPoll>,
    /// `start` was called: jobs are placed and run.
    pub(crate) started: AtomicBool,
}

/// What the run loop is told.
pub(crate) enum ToRuns {
    /// A placement fell due: claim its job.
    Fire {
        key: String,
        /// The handler it was placed for: a job given to another handler
        /// meanwhile is not claimed by this placement.
        name: String,
        fire: Micros,
        /// It is a run whose lease ended, to take over.
        expired: bool,
        busy: Option<Busy>,
    },
    /// A run ended: store how.
    Ended(Ended),
    /// Claim nothing more; end once every run held has its outcome stored.
    Stop,
}

/// A run that ended (or was given back unrun), from `run.rs`.
pub(crate) struct Ended {
    pub(crate) fence: Fence,
    pub(crate) name: String,
    pub(crate) finish: Finish,
    /// How long its handler ran (`None`: it never started).
    pub(crate) ran_for: Option<Duration>,
    /// Its occurrence was later than the job's catch-up window.
    pub(crate) skipped: bool,
    /// The end its handler stored in a transaction of its own (which may
    /// have rolled back): see `completion.rs`.
    pub(crate) completed: Option<Completed>,
    pub(crate) busy: Option<Busy>,
}

/// What the poll loop is told.
pub(crate) enum ToPoll {
    /// A full poll.
    Poll {
        busy: Option<Busy>,
    },
    /// Jobs were scheduled elsewhere: a fresh poll (`poll.rs`).
    Fresh,
    Stop,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// The loops of a started scheduler.
pub(crate) struct Engine {
    poller: PeriodicHandle,
    threads: Threads,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Shared {
    /// The shared state of a scheduler on `executor`, and the receiving
    /// ends of its loops' channels (for [`start`]).
    pub(crate) fn new(executor: &ScheduledExecutor, config: Config) -> (Arc<Shared>, Channels) {
        let (runs, runs_rx) = mpsc::channel();
        let (polls, polls_rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            executor: executor.downgrade(),
            placements: Placements::new(config.batch),
            owner: Owner::new(config.name.clone()),
            config,
            handlers: RwLock::default(),
            counters: Counters::default(),
            runs,
            polls,
            started: AtomicBool::new(false),
        });
        (shared, Channels { runs_rx, polls_rx })
    }

    pub(crate) fn executor(&self) -> Result<ScheduledExecutor, DurableError> {
        self.executor
            .upgrade()
            .ok_or_else(|| DurableError::Executor("the executor is gone".into()))
    }

    /// The time on the executor's clock (the system's once it is gone).
    pub(crate) fn now(&self) -> SystemTime {
        self.executor
            .upgrade()
            .map_or_else(SystemTime::now, |e| e.system_time())
    }

    /// [`now`](Self::now), in microseconds (saturating).
    pub(crate) fn now_micros(&self) -> Micros {
        time::micros_saturating(self.now())
    }

    /// A guard that holds the executor busy for a manual clock while a
    /// loop works on (module doc); `None` once it is gone.
    fn busy(&self) -> Option<Busy> {
        self.executor.upgrade().map(|e| e.busy())
    }

    /// True if runs are written to the history (`Config::keep_runs`).
    pub(crate) fn keeps_runs(&self) -> bool {
        self.config.keep_runs > 0
    }

    pub(crate) fn handler(&self, name: &str) -> Option<Arc<Registered>> {
        self.handlers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    fn handler_names(&self) -> Vec<String> {
        self.handlers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Places the job `key` if it fires within the window from `now`,
    /// this scheduler was started, and it has the job's handler (a job no
    /// handler here runs is left to the poll: see `poll.rs`).
    pub(crate) fn place_if_near(
        self: &Arc<Self>,
        key: &str,
        name: &str,
        fire: Micros,
        now: Micros,
    ) {
        let window = time::duration_micros_saturating(self.config.window);
        let near = fire <= time::add(now, window);
        if near && self.started.load(Ordering::SeqCst) && self.handler(name).is_some() {
            let stamp = self.placements.stamp();
            self.placements.place(self, key, name, fire, false, stamp);
        }
    }

    /// A placement fell due (on a worker): hand it to the run loop.
    fn fired(&self, key: String, name: String, fire: Micros, expired: bool) {
        let busy = self.busy();
        let _ = self.runs.send(ToRuns::Fire {
            key,
            name,
            fire,
            expired,
            busy,
        });
    }

    /// A run ended (on a worker, or wherever its guard was dropped).
    fn ended(&self, ended: Ended) {
        let _ = self.runs.send(ToRuns::Ended(ended));
    }

    /// Asks the poll loop for a full poll now.
    pub(crate) fn poll_now(&self) {
        let busy = self.busy();
        let _ = self.polls.send(ToPoll::Poll { busy });
    }
}

/// The receiving ends of a scheduler's loops' channels, until they start.
pub(crate) struct Channels {
    runs_rx: mpsc::Receiver<ToRuns>,
    polls_rx: mpsc::Receiver<ToPoll>,
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels").finish_non_exhaustive()
    }
}

/// Starts the loops and the executor's poll task.
pub(crate) fn start(
    shared: &Arc<Shared>,
    store: Arc<dyn Store>,
    channels: Channels,
) -> Result<Engine, DurableError> {
    let executor = shared.executor()?;
    let workers = executor.metrics().worker_threads;
    let mut threads = Threads::default();
    let runs_loop = runs::RunLoop::new(
        Arc::clone(shared),
        Arc::clone(&store),
        channels.runs_rx,
        workers,
    );
    let started = Thread::spawn("chronopool-durable-runs", move || runs_loop.run())
        .map(|t| threads.runs = Some(t))
        .and_then(|()| {
            let poll_loop =
                poll::PollLoop::new(Arc::clone(shared), Arc::clone(&store), channels.polls_rx);
            Thread::spawn("chronopool-durable-poll", move || poll_loop.run())
        })
        .map(|t| threads.poll = Some(t))
        .and_then(|()| {
            if !store.notifies() || !shared.config.notifications {
                return Ok(());
            }
            let stop = Arc::new(AtomicBool::new(false));
            let (listening, flag) = (Arc::clone(shared), Arc::clone(&stop));
            let thread = Thread::spawn("chronopool-durable-listen", move || {
                listen::listen(listening, store, flag)
            })?;
            threads.listener = Some((thread, stop));
            Ok(())
        });
    if let Err(e) = started {
        threads.stop(shared, None);
        return Err(e);
    }
    shared.started.store(true, Ordering::SeqCst);
    let weak = Arc::downgrade(shared);
    let poller = executor
        .task()
        .name("chronopool-durable-poll")
        .schedule_with_fixed_delay(
            move || {
                if let Some(shared) = weak.upgrade() {
                    shared.poll_now();
                }
            },
            Duration::ZERO,
            shared.config.poll_interval,
        );
    match poller {
        Ok(poller) => Ok(Engine { poller, threads }),
        Err(e) => {
            shared.started.store(false, Ordering::SeqCst);
            threads.stop(shared, None);
            Err(DurableError::Executor(e.to_string()))
        }
    }
}

impl Engine {
    /// Stops placing and claiming: cancels the poll task and the
    /// placements, and tells the loops to stop. Waits up to `wait` for
    /// them to end (the run loop ends once the runs in progress have their
    /// outcomes stored); those that have not are left to end on their own.
    /// True if every loop ended.
    ///
    /// Called from one of its own handlers, it does not wait: the run loop
    /// ends only after that very run, which goes on once this returns.
    pub(crate) fn stop(self, shared: &Shared, wait: Duration) -> bool {
        self.poller.cancel();
        shared.started.store(false, Ordering::SeqCst);
        shared.placements.cancel_all();
        let wait = if run::in_handler_of(shared) {
            Duration::ZERO
        } else {
            wait
        };
        self.threads.stop(shared, Some(wait))
    }
}

/// A loop's thread, and a channel that disconnects when the loop ends (so
/// that a stop can wait for it with a bound).
struct Thread {
    handle: std::thread::JoinHandle<()>,
    ended: mpsc::Receiver<()>,
}

impl Thread {
    fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<Thread, DurableError> {
        let (alive, ended) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _alive = alive;
                body();
            })
            .map_err(|e| DurableError::Executor(format!("the {name} thread: {e}")))?;
        Ok(Thread { handle, ended })
    }

    /// Joins the thread if it ends by `deadline` (`None`: whenever it
    /// ends); true if it did. The calling thread itself is never waited
    /// for.
    fn join_by(self, deadline: Option<Instant>) -> bool {
        if self.handle.thread().id() == std::thread::current().id() {
            return false;
        }
        let ended = match deadline {
            Some(at) => matches!(
                self.ended
                    .recv_timeout(at.saturating_duration_since(Instant::now())),
                Err(mpsc::RecvTimeoutError::Disconnected)
            ),
            None => self.ended.recv().is_err(),
        };
        if ended {
            let _ = self.handle.join();
        }
        ended
    }
}

/// The loops' threads.
#[derive(Default)]
struct Threads {
    runs: Option<Thread>,
    poll: Option<Thread>,
    /// The listener, on a store that notifies, and its stop.
    listener: Option<(Thread, Arc<AtomicBool>)>,
}

impl Threads {
    /// Tells the loops to stop, and waits up to `wait` (`None`: however
    /// long it takes) for them to end. A loop waiting on a store that does
    /// not answer (a server frozen, a network cut) may take longer; it is
    /// left to end on its own. True if every loop ended.
    fn stop(self, shared: &Shared, wait: Option<Duration>) -> bool {
        let _ = shared.polls.send(ToPoll::Stop);
        let _ = shared.runs.send(ToRuns::Stop);
        if let Some((_, stop)) = &self.listener {
            stop.store(true, Ordering::Release);
        }
        // A wait past the clock's range (`Duration::MAX`) is no deadline.
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let mut all = true;
        for thread in [self.listener.map(|(t, _)| t), self.poll, self.runs]
            .into_iter()
            .flatten()
        {
            // Each is waited for, whether or not the one before ended.
            all &= thread.join_by(deadline);
        }
        all
    }
}

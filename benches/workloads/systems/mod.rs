//! The systems under test: what a system must provide, and the list.
//!
//! A system implements [`Executor`] (immediate tasks from an outside
//! thread: `spawn`), and where it can, [`SpawnInside`] (tasks submitting
//! tasks: `spawn-tree`) and [`Timers`] (one-shot and fixed-rate delayed
//! tasks with cancel handles: `timer-fire`, `cancel`, `periodic`, `idle`,
//! `latency`). The timers of `sleep-future` are systems of their own
//! ([`SleepTimer`]: a sleep future polled by a tokio runtime). A workload
//! a system cannot do is not registered for it, so
//! it prints no line. The workloads are generic over these traits: task
//! closures reach each system unboxed, as user code would pass them.

use std::time::{Duration, Instant};

use chronopool::TimerQueue;

use crate::workload::{Metrics, Params, Workload};
use crate::{sleeps, spawn, timers};

mod chronopool_sys;
mod rayon_peer;
mod sleep_timers;
mod stp_peer;
mod threadpool_peer;
mod tokio_peer;

/// Makes the timer queue of a chronopool system.
type QueueFn = fn() -> TimerQueue;

/// The chronopool systems, one per timer queue backend: adding a backend
/// is one line here.
const CHRONOPOOL: &[(&str, QueueFn)] = &[
    // (system name, timer queue backend)
    ("chronopool-heap", TimerQueue::heap),
    ("chronopool-hashed-wheel", TimerQueue::hashed_wheel),
    (
        "chronopool-hierarchical-wheel",
        TimerQueue::hierarchical_wheel,
    ),
];

/// The sleep-future systems of chronopool: its executor's timer futures,
/// on each timer queue.
const CHRONOPOOL_SLEEP: &[(&str, QueueFn)] = &[
    ("chronopool-heap-sleep", TimerQueue::heap),
    ("chronopool-hashed-wheel-sleep", TimerQueue::hashed_wheel),
    (
        "chronopool-hierarchical-wheel-sleep",
        TimerQueue::hierarchical_wheel,
    ),
];

/// Every system, in output order: chronopool's, then the peers (named as
/// in the shared peer harness, so that figures are comparable).
pub fn all() -> Vec<Entry> {
    let mut all = executors();
    all.extend(CHRONOPOOL_SLEEP.iter().map(|&(name, queue)| {
        sleep_entry::<sleep_timers::ChronopoolSleep>(name, Kind::Chronopool, queue)
    }));
    all.push(sleep_entry::<sleep_timers::TokioSleep>(
        "tokio-sleep",
        Kind::Peer,
        (),
    ));
    all.push(sleep_entry::<sleep_timers::AsyncIoTimer>(
        "async-io-timer",
        Kind::Peer,
        (),
    ));
    all
}

/// A sleep-future system: it does `sleep-future` only.
fn sleep_entry<S: SleepTimer>(name: &'static str, kind: Kind, config: S::Config) -> Entry {
    let run: RunFn = Box::new(move |p| sleeps::sleep_future::<S>(&config, p));
    Entry {
        name,
        kind,
        runs: vec![(Workload::SleepFuture, run)],
    }
}

/// The executors: chronopool's, then the peers.
fn executors() -> Vec<Entry> {
    let ours = CHRONOPOOL.iter().map(|&(name, queue)| {
        Register::<chronopool_sys::Chronopool>::new(name, Kind::Chronopool, queue)
            .tree()
            .timers()
            .into()
    });
    let peers = [
        Register::<tokio_peer::Tokio>::new("tokio", Kind::Peer, ())
            .tree()
            .timers()
            .into(),
        Register::<stp_peer::Stp>::new("scheduled-thread-pool", Kind::Peer, ())
            .tree()
            .timers()
            .into(),
        Register::<rayon_peer::Rayon>::new("rayon", Kind::Peer, ())
            .tree()
            .into(),
        Register::<threadpool_peer::Tp>::new("threadpool", Kind::Peer, ())
            .tree()
            .into(),
    ];
    ours.chain(peers).collect()
}

/// An executor of one system, fresh for each repetition.
pub trait Executor: Sized + 'static {
    /// What tells systems of one implementation apart (chronopool's timer
    /// queue); `()` for the peers.
    type Config: Copy + 'static;

    /// Starts an executor with `threads` worker threads.
    fn start(config: &Self::Config, threads: usize) -> Result<Self, String>;

    /// Submits an immediate task from a thread outside the pool.
    fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), String>;

    /// Stops the executor, discarding what is still pending, and waits for
    /// its threads where the system offers a way to.
    fn shutdown(self) -> Result<(), String>;
}

/// A timer's sleep future (`sleep-future`), polled by a tokio runtime.
pub trait SleepTimer: Sized + 'static {
    /// What tells systems of one implementation apart (chronopool's timer
    /// queue); `()` for the peers.
    type Config: Copy + 'static;
    /// Its sleep future.
    type Sleep: std::future::Future<Output = ()> + Send + 'static;

    /// Starts the timer (an executor with `threads` workers, where it
    /// takes one).
    fn start(config: &Self::Config, threads: usize) -> Result<Self, String>;

    /// A sleep until `deadline`; called inside the polling runtime.
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep;

    /// Stops the timer.
    fn shutdown(self) -> Result<(), String>;
}

/// Submitting from inside a running task (`spawn-tree`).
pub trait SpawnInside: Executor {
    /// What a task needs to submit more: `()` for systems that find their
    /// pool through a thread-local, a cloned handle otherwise.
    type Ctx: Clone + Send + 'static;

    /// The context tasks of this executor carry.
    fn ctx(&self) -> Self::Ctx;

    /// Submits `f` from inside a task running on a worker.
    fn spawn_inside<F: FnOnce() + Send + 'static>(ctx: &Self::Ctx, f: F) -> Result<(), String>;
}

/// One-shot and fixed-rate delayed tasks with cancellation.
pub trait Timers: Executor {
    /// The cancel handle of a one-shot task.
    type Handle: 'static;
    /// The cancel handle of a periodic task.
    type Periodic: 'static;

    /// Runs `f` once after `delay`; `due` is `Instant::now() + delay`
    /// taken just before the call (for systems that take an instant).
    fn schedule<F: FnOnce() + Send + 'static>(
        &self,
        delay: Duration,
        due: Instant,
        f: F,
    ) -> Result<Self::Handle, String>;

    /// Cancels a one-shot task through its handle (then dropped).
    fn cancel(h: Self::Handle);

    /// Runs `f` at `first_due` (`initial_delay` from now), then at a fixed
    /// rate: run n is due at `first_due + n × period`, late runs are
    /// caught up back to back.
    fn schedule_at_fixed_rate<F: FnMut() + Send + 'static>(
        &self,
        initial_delay: Duration,
        first_due: Instant,
        period: Duration,
        f: F,
    ) -> Result<Self::Periodic, String>;

    /// Cancels a periodic task through its handle (then dropped).
    fn cancel_periodic(h: Self::Periodic);
}

/// Whose system it is: the summary compares chronopool's with the peers'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A configuration of this crate.
    Chronopool,
    /// An existing executor measured beside it.
    Peer,
}

/// One repetition of one workload on one system.
pub type RunFn = Box<dyn Fn(&Params) -> Result<Metrics, String>>;

/// One system: its name, whose it is, and the workloads it can do.
pub struct Entry {
    /// The `system` field of the output.
    pub name: &'static str,
    /// Chronopool's or a peer.
    pub kind: Kind,
    runs: Vec<(Workload, RunFn)>,
}

impl Entry {
    /// The run of workload `w`, if the system can do it.
    pub fn run(&self, w: Workload) -> Option<&RunFn> {
        self.runs.iter().find(|(x, _)| *x == w).map(|(_, f)| f)
    }
}

/// Builds an [`Entry`] from the traits `S` implements.
pub struct Register<S: Executor> {
    entry: Entry,
    config: S::Config,
}

/// A workload generic over a system, given that system's configuration.
type Generic<S> = fn(&<S as Executor>::Config, &Params) -> Result<Metrics, String>;

impl<S: Executor> Register<S> {
    /// A system doing `spawn`.
    pub fn new(name: &'static str, kind: Kind, config: S::Config) -> Self {
        let runs = Vec::new();
        Register {
            entry: Entry { name, kind, runs },
            config,
        }
        .with(Workload::Spawn, spawn::spawn::<S>)
    }

    /// Adds workload `w`, run by `f` with this system's configuration.
    fn with(mut self, w: Workload, f: Generic<S>) -> Self {
        let config = self.config;
        self.entry.runs.push((w, Box::new(move |p| f(&config, p))));
        self
    }
}

impl<S: SpawnInside> Register<S> {
    /// Adds `spawn-tree`.
    pub fn tree(self) -> Self {
        self.with(Workload::SpawnTree, spawn::spawn_tree::<S>)
    }
}

impl<S: Timers> Register<S> {
    /// Adds `timer-fire`, `cancel`, `periodic`, `idle` and `latency`.
    pub fn timers(self) -> Self {
        self.with(Workload::TimerFire, timers::timer_fire::<S>)
            .with(Workload::Cancel, timers::cancel::<S>)
            .with(Workload::Periodic, timers::periodic::<S>)
            .with(Workload::Idle, timers::idle::<S>)
            .with(Workload::Latency, timers::latency::<S>)
    }
}

impl<S: Executor> From<Register<S>> for Entry {
    fn from(r: Register<S>) -> Entry {
        r.entry
    }
}

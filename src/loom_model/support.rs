//! What the component loom models (in this folder, and the `loom_model`
//! modules beside the protocols that need only their module) share: a
//! `loom::model` that counts and prints the interleavings
//! it explored, a pool without threads (each model starts the threads it
//! needs), and small probes (drop counters, an expected panic).
//!
//! Built only for `cargo test` with `RUSTFLAGS="--cfg loom"`; see
//! `loom-tests/README.md` for the list of models and how to run them.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
use std::sync::Once;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use crate::handle::{PeriodicHandle, ScheduledHandle, TaskHandle};
use crate::pool::hooks::Hooks;
use crate::pool::{worker, Pool, SubmitError};
use crate::sync::deque::Worker;
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{Arc, Ordering, StdArc};
use crate::task::{Job, Repeat};
use crate::time::manual::ManualState;
use crate::time::{Clock, ManualClock, Nanos};
use crate::timer::driver::{ShutdownPolicy, Timer};
use crate::trigger::{Next, Trigger, TriggerContext};

/// Runs `f` under `loom::model` (bounded by `LOOM_MAX_PREEMPTIONS`), then
/// prints how many interleavings it explored and how long it took, as
/// `loom model <name>: <n> interleavings, <t> s` (see the README).
pub(crate) fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    model_with(name, loom::model::Builder::new(), f);
}

/// [`model`] with at most `preemptions` preemptions, whatever
/// `LOOM_MAX_PREEMPTIONS` says: for a model whose bug needs fewer than the
/// suite's bound and whose threads would take it past its time at that
/// bound (say which, beside the model).
pub(crate) fn model_bounded(name: &str, preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    model_with(name, builder, f);
}

fn model_with(name: &str, builder: loom::model::Builder, f: impl Fn() + Sync + Send + 'static) {
    let explored = std::sync::Arc::new(AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&explored);
    let start = Instant::now();
    builder.check(move || {
        count.fetch_add(1, StdOrdering::Relaxed);
        f();
    });
    eprintln!(
        "loom model {name}: {} interleavings, {:.1} s",
        explored.load(StdOrdering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}

/// The default shutdown policy of the builder: delayed tasks are kept,
/// periodic ones are not.
pub(crate) const DEFAULT_POLICY: ShutdownPolicy = ShutdownPolicy {
    keep_delayed: true,
    keep_periodic: false,
};

/// A pool of one worker on a fresh manual clock, no thread started: the
/// clock's state, the pool, and its worker's deque.
pub(crate) fn manual_pool() -> (StdArc<ManualState>, Arc<Pool>, Vec<Worker<Job>>) {
    let state = StdArc::clone(ManualClock::new().state());
    let timer = Timer::with_clock(
        Default::default(),
        DEFAULT_POLICY,
        usize::MAX,
        Clock::manual(StdArc::clone(&state)),
    );
    let (pool, deques) = Pool::new(1, Default::default(), timer);
    (state, Arc::new(pool), deques)
}

/// A pool of `workers` workers with no thread started (neither the workers
/// nor the timer thread), and the deques its workers would own.
pub(crate) fn bare_pool(workers: usize, hooks: Hooks) -> (Arc<Pool>, Vec<Worker<Job>>) {
    let timer = Timer::new(Default::default(), DEFAULT_POLICY, usize::MAX);
    let (pool, deques) = Pool::new(workers, hooks, timer);
    (Arc::new(pool), deques)
}

/// Submits `f` from a thread outside the pool, as
/// `ScheduledExecutor::submit` does.
pub(crate) fn submit<F, T>(pool: &Arc<Pool>, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let cell = pool.submit(None, f, ())?;
    Ok(TaskHandle::new(cell, Arc::clone(pool)))
}

/// Schedules `f` at `deadline`, the time being `now`, as
/// `ScheduledExecutor::schedule` does (admission, `reserve`,
/// `insert_reserved`).
pub(crate) fn schedule<F, T>(
    pool: &Arc<Pool>,
    f: F,
    now: Nanos,
    deadline: Nanos,
) -> Result<ScheduledHandle<T>, SubmitError<F>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let cell = pool.schedule(f, now, deadline, ())?;
    Ok(ScheduledHandle::new(cell, Arc::clone(pool)))
}

/// A fixed rate at explicit times (loom does not model the clock): first
/// at `first`, then every `period` after the last due time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Every {
    pub(crate) first: Nanos,
    pub(crate) period: Nanos,
}

impl Trigger for Every {
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next> {
        let at = match ctx.last_due_nanos() {
            None => self.first,
            Some(due) => due.saturating_add(self.period),
        };
        Some(Next::At(ctx.instant_at(at)))
    }

    fn records_run_times(&self) -> bool {
        false
    }
}

/// Schedules the periodic task `f`, first due at `first`, then every
/// `period`.
pub(crate) fn schedule_periodic<F>(
    pool: &Arc<Pool>,
    f: F,
    first: Nanos,
    period: Nanos,
) -> Result<PeriodicHandle, SubmitError<F>>
where
    F: FnMut() + Send + 'static,
{
    let every = Every { first, period };
    let cell = pool
        .schedule_recurring(Repeat(f), every, true, ())
        .map_err(|e| e.map_job(|Repeat(f)| f))?;
    Ok(PeriodicHandle::new(cell, Arc::clone(pool)))
}

/// Starts the real worker threads (`worker::run`) for the deques of
/// `bare_pool`; no timer thread.
pub(crate) fn spawn_workers(pool: &Arc<Pool>, deques: Vec<Worker<Job>>) -> Vec<JoinHandle<()>> {
    deques
        .into_iter()
        .enumerate()
        .map(|(index, local)| {
            let pool = Arc::clone(pool);
            thread::spawn(move || worker::run(pool, index, local))
        })
        .collect()
}

/// Joins threads, propagating a panic of any of them.
pub(crate) fn join_all(threads: Vec<JoinHandle<()>>) {
    for t in threads {
        t.join().unwrap();
    }
}

/// Counts how many times the values it hands out were dropped.
#[derive(Clone, Debug, Default)]
pub(crate) struct DropCounter(Arc<crate::sync::AtomicUsize>);

/// Bumps its [`DropCounter`] when dropped.
#[derive(Debug)]
pub(crate) struct DropGuard(Arc<crate::sync::AtomicUsize>);

impl DropCounter {
    pub(crate) fn new() -> Self {
        DropCounter(Arc::new(crate::sync::AtomicUsize::new(0)))
    }

    pub(crate) fn guard(&self) -> DropGuard {
        DropGuard(Arc::clone(&self.0))
    }

    pub(crate) fn drops(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The payload of the panics the models provoke on purpose.
#[derive(Debug)]
pub(crate) struct ExpectedPanic;

/// Panics with [`ExpectedPanic`], without printing it: the panic hook is
/// replaced (once) by one that stays silent for this payload and hands any
/// other panic, such as a failed assertion, to the previous hook.
pub(crate) fn expected_panic() -> ! {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<ExpectedPanic>() {
                previous(info);
            }
        }));
    });
    std::panic::panic_any(ExpectedPanic)
}

/// A waker that wakes a thread blocked in [`block_on`].
struct NotifyWaker(loom::sync::Notify);

impl Wake for NotifyWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.notify();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.notify();
    }
}

/// Polls `future` to completion on the calling thread, blocking (in a way
/// loom sees) between polls until its waker is woken: a lost wake-up is a
/// deadlock that loom reports. (`loom::future::block_on` without loom's
/// `futures` feature.)
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let notify = std::sync::Arc::new(NotifyWaker(loom::sync::Notify::new()));
    let waker = Waker::from(std::sync::Arc::clone(&notify));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        notify.0.wait();
    }
}

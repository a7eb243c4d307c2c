//! Fault injection: a panic at every place where user code runs, and the
//! pool survives each one.
//!
//! User code runs in many places besides a task's body: the destructors of
//! a closure's captures (after its run, or when the task is given up unrun
//! by a cancel, by the caller of `shutdown_now`, by the shutdown policies or
//! by the executor's drop), the destructor of an output nobody joined and of
//! a panic payload, the hooks, the wakers of handles polled as futures, and
//! the trigger of a task scheduled with one (its `next`, and its destructor
//! when a cancel ends the task or a reschedule replaces it).
//! The crate's policy is that a panic in any of them is caught: a task's own
//! panic goes to its handle, to `on_panic` and to the panic counter; a panic
//! that no handle reports goes to `on_panic`, on the thread where it
//! happened, and never unwinds into the caller.
//!
//! The matrix is `Place × Fault × Context × Queue` (plus, in one group, a
//! panicking `on_panic` hook). Each case builds a fresh pool, injects one
//! fault at one place, and then checks that:
//!
//! * nothing unwound into the test: the case runs under `catch_unwind`, and
//!   a provoked panic that reaches it fails the case;
//! * the pool still runs a new task (while it is running);
//! * every accepted task is accounted for exactly once: each closure holds a
//!   [`Token`] that records, when it is dropped, whether the closure ran;
//!   every token is recorded (ran + dropped unrun = accepted), with the
//!   fate the place implies, and each handle's join result agrees with its
//!   token (returned or panicked: ran; cancelled: a one-shot task never ran);
//! * `on_panic` saw what the policy says it sees: exactly that for a plain
//!   panic, at least that for a payload whose drop panics again (the second
//!   panic may be reported too), and no panic that was not provoked;
//! * `shutdown()` and `await_termination(30 s)` return true, and every thread
//!   of the pool (its workers and its timer thread, by the pool's unique
//!   thread-name prefix) is gone from `/proc/self/task` (Linux only).
//!
//! A second family drops the *last* executor clone from each of those
//! places (a closure, an output, a payload, a hook, a waker): nothing may
//! hang, and the pool's threads must exit, joined by the dropping thread or
//! on their own when it is one of the pool's.
//!
//! Every case runs on a helper thread and fails if it does not finish
//! within [`CASE_LIMIT`]: a hang is a failure, not a stuck CI. The tests of
//! this file are serialized ([`SERIAL`]), so that at most one pool of this
//! binary exists at a time and the thread counts are unambiguous. A group
//! reports every failing combination by name, not just the first.
//!
//! `CHRONOPOOL_FAULTS_FULL=1` runs the exhaustive sweep: every timer queue
//! for the immediate contexts too, every fault with the panicking
//! `on_panic` hook, and each case three times.

mod common;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::ops::ControlFlow;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, Once};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use chronopool::trigger::{Ended, Next, TriggerContext};
use chronopool::{
    BuildError, Builder, JoinTimeoutError, PanicPayload, PeriodicHandle, ScheduledExecutor,
    ScheduledHandle, SubmitError, TaskError, TaskHandle, TimerQueue, TriggerHandle,
};
use common::{eventually, Gate, GateWaiter, PATIENCE};

/// How long one case may take before it counts as hung (every wait inside
/// a case gives up after [`PATIENCE`], half of it).
const CASE_LIMIT: Duration = Duration::from_secs(60);

/// A group stops after this many hung cases: each leaves a pool behind and
/// costs [`CASE_LIMIT`].
const MAX_HANGS: usize = 3;

/// Worker threads of every pool: two, so that one can be blocked (or join)
/// while the other works.
const WORKERS: usize = 2;

/// The delay of a task that is to run during the case.
const SOON: Duration = Duration::from_millis(1);

/// The delay of a task that is never due during the case: it is cancelled,
/// returned by `shutdown_now`, or dropped by a shutdown.
const FAR: Duration = Duration::from_secs(3600);

/// The period of periodic tasks (and the delay between the runs of a
/// [`Context::Triggered`] task).
const PERIOD: Duration = Duration::from_millis(1);

/// The name a pool's timer thread has when its workers are named by a
/// function, as `/proc/<tid>/comm` shows it (15 bytes: `chronopool-timer`
/// truncated).
const TIMER_COMM: &str = "chronopool-time";

/// At most one pool of this binary at a time (see the module doc).
static SERIAL: Mutex<()> = Mutex::new(());

/// Numbers the pools, for their workers' unique name prefixes.
static NEXT_POOL: AtomicUsize = AtomicUsize::new(0);

/// Takes [`SERIAL`], also after another test panicked holding it.
fn serial() -> MutexGuard<'static, ()> {
    lock(&SERIAL)
}

/// Locks `mutex`, recovering from poisoning (a failing case panics with
/// locks held; later cases must still run).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// True with `CHRONOPOOL_FAULTS_FULL=1`: the exhaustive sweep.
fn full_sweep() -> bool {
    std::env::var("CHRONOPOOL_FAULTS_FULL").is_ok_and(|v| v == "1")
}

// ---------------------------------------------------------------------------
// Faults, and the values that carry them
// ---------------------------------------------------------------------------

/// How user code panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `panic!("expected: ...")`.
    Plain,
    /// `panic_any(PayloadThatPanicsOnDrop)`: whoever drops the payload gets
    /// a second panic.
    PayloadPanicsOnDrop,
}

impl Fault {
    const ALL: [Fault; 2] = [Fault::Plain, Fault::PayloadPanicsOnDrop];

    /// Panics with this fault; `place` names where, for the message.
    fn raise(self, place: &str) -> ! {
        match self {
            Fault::Plain => panic!("expected: {place}"),
            Fault::PayloadPanicsOnDrop => panic::panic_any(PayloadThatPanicsOnDrop),
        }
    }
}

/// A panic payload whose drop panics (with a plain message, whose payload
/// drops quietly).
struct PayloadThatPanicsOnDrop;

impl Drop for PayloadThatPanicsOnDrop {
    fn drop(&mut self) {
        panic!("expected: the drop of a panic payload");
    }
}

/// A panic payload that holds an executor clone (see [`Holder`]).
struct ExecutorPayload {
    _executor: ScheduledExecutor,
}

/// A value whose drop panics with `fault`: a closure's capture or a task's
/// output.
struct Bomb {
    fault: Fault,
    place: &'static str,
}

impl Bomb {
    fn new(fault: Fault, place: &'static str) -> Self {
        Bomb { fault, place }
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.fault.raise(self.place);
    }
}

/// True for the panics this file provokes: its payload types, and messages
/// that start with "expected".
fn is_provoked(payload: &(dyn Any + Send)) -> bool {
    payload.is::<PayloadThatPanicsOnDrop>()
        || payload.is::<ExecutorPayload>()
        || message_of(payload).is_some_and(|m| m.starts_with("expected"))
}

/// The text of a panic payload, if it is text.
fn message_of(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// A panic payload, described for a failure message.
fn describe(payload: &(dyn Any + Send)) -> String {
    if payload.is::<PayloadThatPanicsOnDrop>() {
        "PayloadThatPanicsOnDrop".to_owned()
    } else if payload.is::<ExecutorPayload>() {
        "ExecutorPayload".to_owned()
    } else {
        message_of(payload)
            .unwrap_or("a non-text payload")
            .to_owned()
    }
}

/// Replaces the panic hook, once for the whole binary, by one that stays
/// quiet about the provoked panics ([`is_provoked`]) and passes every other
/// panic to the previous hook.
fn quiet_provoked_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !is_provoked(info.payload()) {
                previous(info);
            }
        }));
    });
}

/// Drops `value` on this thread, catching a panic of its drop, then the
/// payload of that panic the same way (at most 8 times, then it leaks): how
/// the test gets rid of values that hold provoked faults (a joined panic
/// payload, a refused closure).
fn dispose<T>(value: T) {
    let mut escaped = panic::catch_unwind(AssertUnwindSafe(move || drop(value))).err();
    for _ in 0..8 {
        match escaped {
            Some(payload) => {
                escaped = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))).err();
            }
            None => return,
        }
    }
    std::mem::forget(escaped);
}

/// A refused submission, as a failure; the closure it gives back is
/// disposed of (it may hold a fault).
fn refused<F>(err: SubmitError<F>) -> String {
    let why = format!("the pool refused a task: {err}");
    dispose(err.into_inner());
    why
}

// ---------------------------------------------------------------------------
// Accounting: tokens, the ledger, the on_panic reports
// ---------------------------------------------------------------------------

/// What became of a task's closure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// It ran (at least once, for a periodic task).
    Ran,
    /// It was dropped without running.
    Unrun,
}

/// One entry per accepted task: its [`Token`]'s record.
#[derive(Default)]
struct Ledger {
    entries: Mutex<Vec<LedgerEntry>>,
}

struct LedgerEntry {
    what: &'static str,
    expected: Option<Fate>,
    fate: Option<Fate>,
}

impl Ledger {
    /// A token for a new task described by `what`, which should end with
    /// `expected` (`None`: either).
    fn token(self: &Arc<Self>, what: &'static str, expected: Option<Fate>) -> Token {
        let mut entries = lock(&self.entries);
        entries.push(LedgerEntry {
            what,
            expected,
            fate: None,
        });
        Token {
            ledger: Arc::clone(self),
            id: entries.len() - 1,
            ran: false,
        }
    }

    fn record(&self, id: usize, fate: Fate) {
        if let Some(entry) = lock(&self.entries).get_mut(id) {
            entry.fate = Some(fate);
        }
    }

    fn fate(&self, id: usize) -> Option<Fate> {
        lock(&self.entries).get(id).and_then(|entry| entry.fate)
    }

    /// Every token was recorded (ran + dropped unrun = accepted), each with
    /// the fate expected of it. Waits for the tokens still held by closures
    /// being dropped on other threads.
    fn check(&self) -> Result<(), String> {
        eventually(|| lock(&self.entries).iter().all(|e| e.fate.is_some()));
        let entries = lock(&self.entries);
        let mut problems = Vec::new();
        for (id, entry) in entries.iter().enumerate() {
            match (entry.fate, entry.expected) {
                (None, _) => problems.push(format!(
                    "task #{id} ({}) neither ran nor was dropped (leaked or lost)",
                    entry.what
                )),
                (Some(fate), Some(expected)) if fate != expected => problems.push(format!(
                    "task #{id} ({}): {fate:?}, not {expected:?}",
                    entry.what
                )),
                _ => {}
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        let count = |fate| entries.iter().filter(|e| e.fate == Some(fate)).count();
        Err(format!(
            "{} tasks accepted, {} ran, {} dropped unrun: {}",
            entries.len(),
            count(Fate::Ran),
            count(Fate::Unrun),
            problems.join("; ")
        ))
    }

    /// A handle's join result agrees with its task's token: a task that
    /// returned or panicked ran; a cancelled one-shot task never ran (a
    /// cancelled periodic task may have run before).
    fn agrees(&self, id: usize, outcome: Outcome, periodic: bool) -> Result<(), String> {
        eventually(|| self.fate(id).is_some());
        let Some(fate) = self.fate(id) else {
            return Err(format!(
                "join gave {outcome:?}, but the task's closure was never dropped"
            ));
        };
        let agrees = match (outcome, periodic) {
            (Outcome::Returned, false) | (Outcome::Panicked, _) => fate == Fate::Ran,
            (Outcome::Cancelled, false) => fate == Fate::Unrun,
            (Outcome::Cancelled, true) => true,
            (Outcome::Returned, true) => false,
        };
        if agrees {
            Ok(())
        } else {
            Err(format!(
                "join gave {outcome:?}, but the task's token says {fate:?}"
            ))
        }
    }
}

/// Held by a task's closure; records in the [`Ledger`], when dropped,
/// whether the closure ran.
struct Token {
    ledger: Arc<Ledger>,
    id: usize,
    ran: bool,
}

impl Token {
    fn mark_ran(&mut self) {
        self.ran = true;
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        let fate = if self.ran { Fate::Ran } else { Fate::Unrun };
        self.ledger.record(self.id, fate);
    }
}

/// An executor clone parked where user code (a hook) takes and drops it.
#[derive(Default)]
struct Handover(Mutex<Option<ScheduledExecutor>>);

impl Handover {
    fn put(&self, executor: ScheduledExecutor) {
        *lock(&self.0) = Some(executor);
    }

    /// Drops the clone held, if any, outside the lock.
    fn drop_held(&self) {
        let held = lock(&self.0).take();
        drop(held);
    }
}

/// What the `on_panic` hook saw.
struct Reports {
    seen: AtomicUsize,
    /// Reported panics that were not provoked (a bug somewhere).
    strange: Mutex<Vec<String>>,
    /// The hook itself panics with this after counting.
    hook_fault: Option<Fault>,
    /// A clone the hook drops at its next call (`Holder::OnPanicHook`).
    handover: Handover,
}

impl Reports {
    fn new(hook_fault: Option<Fault>) -> Self {
        Reports {
            seen: AtomicUsize::new(0),
            strange: Mutex::new(Vec::new()),
            hook_fault,
            handover: Handover::default(),
        }
    }

    /// The `on_panic` hook.
    fn on_panic(&self, payload: &PanicPayload) {
        self.seen.fetch_add(1, SeqCst);
        if let Some(message) = payload.message() {
            if !message.starts_with("expected") {
                lock(&self.strange).push(message.to_owned());
            }
        }
        self.handover.drop_held();
        if let Some(fault) = self.hook_fault {
            fault.raise("the on_panic hook");
        }
    }

    fn seen(&self) -> usize {
        self.seen.load(SeqCst)
    }

    /// Waits until the hook saw at least `n` panics.
    fn wait_for(&self, n: usize) -> Result<(), String> {
        if eventually(|| self.seen() >= n) {
            Ok(())
        } else {
            Err(format!("on_panic saw {} panics, not {n}", self.seen()))
        }
    }

    /// The hook saw `expected` panics (at least that many unless `exact`),
    /// all of them provoked.
    fn check(&self, expected: usize, exact: bool) -> Result<(), String> {
        self.wait_for(expected)?;
        let seen = self.seen();
        if exact && seen != expected {
            return Err(format!("on_panic saw {seen} panics, not {expected}"));
        }
        let strange = lock(&self.strange);
        if !strange.is_empty() {
            return Err(format!("on_panic saw panics nobody provoked: {strange:?}"));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The pool's threads, as /proc/self/task shows them
// ---------------------------------------------------------------------------

/// The threads of this process: id and name (`comm`, at most 15 bytes).
/// Empty where there is no `/proc/self/task`.
fn threads() -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let tid = entry.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
        Some((tid, comm.trim_end().to_owned()))
    })
    .collect()
}

/// The threads of one pool: named `<prefix>-<i>` (its workers) and
/// `<prefix>-timer` (its timer thread), the prefix unique to the pool.
struct PoolThreads {
    prefix: String,
}

impl PoolThreads {
    /// The threads of a pool just built with the thread name `prefix`.
    /// Waits until each thread has named itself (a thread names itself as
    /// it starts). No-op off Linux.
    fn started(prefix: String) -> Result<Self, String> {
        let pool = PoolThreads { prefix };
        if !cfg!(target_os = "linux") {
            return Ok(pool);
        }
        let timer = format!("{}-timer", pool.prefix);
        let mut live = Vec::new();
        let all_there = eventually(|| {
            live = pool.live_names();
            live.len() == WORKERS + 1 && live.contains(&timer)
        });
        if !all_there {
            return Err(format!(
                "the pool's threads did not show up: {live:?} (expected {WORKERS} workers and {timer})"
            ));
        }
        Ok(pool)
    }

    /// The names of the pool's threads still alive.
    fn live_names(&self) -> Vec<String> {
        let ours = format!("{}-", self.prefix);
        threads()
            .into_iter()
            .filter(|(_, comm)| comm.starts_with(&ours))
            .map(|(_, comm)| comm)
            .collect()
    }

    /// The pool's threads still alive, with their ids.
    fn live(&self) -> Vec<String> {
        let ours = format!("{}-", self.prefix);
        threads()
            .into_iter()
            .filter(|(_, comm)| comm.starts_with(&ours))
            .map(|(tid, comm)| format!("{comm} (tid {tid})"))
            .collect()
    }

    /// Waits until every thread of the pool has exited (detached threads
    /// exit asynchronously). No-op off Linux.
    fn exited(&self) -> Result<(), String> {
        if !cfg!(target_os = "linux") || eventually(|| self.live().is_empty()) {
            return Ok(());
        }
        Err(format!(
            "threads of the pool still alive 30 s after it was dropped: {:?}",
            self.live()
        ))
    }
}

// ---------------------------------------------------------------------------
// The dimensions of the matrix
// ---------------------------------------------------------------------------

/// How a task is given to the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Context {
    /// `submit`: now, with a handle.
    Submit,
    /// `execute`: now, without a handle.
    Execute,
    /// `schedule`: once, later.
    Schedule,
    /// `schedule_at_fixed_rate`.
    FixedRate,
    /// `schedule_with_fixed_delay`.
    FixedDelay,
    /// `schedule_with_trigger`, with a closure trigger that fires as a
    /// fixed delay of [`PERIOD`] would ([`delay_trigger`]); the body
    /// returns `ControlFlow::Continue`, so the task is periodic (it ends by
    /// a cancel or a panic, never by itself). Its handle is a
    /// `TriggerHandle`.
    Triggered,
    /// `schedule_at_system_time`: once, at a wall time (`SystemTime::now()`
    /// plus the delay); a one-shot delayed task, kept at shutdown as one,
    /// with a `ScheduledHandle`.
    AtSystemTime,
    /// `submit_with_timeout`, the time-out [`FAR`]: a task now, with a
    /// handle, whose cell is also an entry of the timer (swept out once it
    /// ends, discarded by the shutdown policies without touching the task).
    WithTimeout,
}

impl Context {
    const ALL: [Context; 8] = [
        Context::Submit,
        Context::Execute,
        Context::Schedule,
        Context::FixedRate,
        Context::FixedDelay,
        Context::Triggered,
        Context::AtSystemTime,
        Context::WithTimeout,
    ];
    /// The contexts with a handle.
    const HANDLED: [Context; 7] = [
        Context::Submit,
        Context::Schedule,
        Context::FixedRate,
        Context::FixedDelay,
        Context::Triggered,
        Context::AtSystemTime,
        Context::WithTimeout,
    ];
    const TIMED: [Context; 5] = [
        Context::Schedule,
        Context::FixedRate,
        Context::FixedDelay,
        Context::Triggered,
        Context::AtSystemTime,
    ];
    const PERIODIC: [Context; 3] = [Context::FixedRate, Context::FixedDelay, Context::Triggered];
    const ONE_SHOT_HANDLED: [Context; 4] = [
        Context::Submit,
        Context::Schedule,
        Context::AtSystemTime,
        Context::WithTimeout,
    ];
    /// The contexts with a trigger of the user's.
    const TRIGGERED: [Context; 1] = [Context::Triggered];
    /// The contexts whose output a place drops. (`AtSystemTime` is a
    /// regression test: the timer's watch of the wall clock once kept the
    /// last reference to a finished wall-time task and dropped its output
    /// on the timer thread, uncaught, killing it.)
    const OUTPUT: [Context; 4] = [
        Context::Submit,
        Context::Schedule,
        Context::AtSystemTime,
        Context::WithTimeout,
    ];
    /// The contexts whose task `shutdown_now` returns runs with
    /// `PendingTask::run`. (`AtSystemTime` is a regression test: a
    /// wall-time task returned before its time once ended `Cancelled`
    /// there, its body never called.)
    const PENDING_RUN: [Context; 8] = [
        Context::Submit,
        Context::Execute,
        Context::Schedule,
        Context::FixedRate,
        Context::FixedDelay,
        Context::Triggered,
        Context::AtSystemTime,
        Context::WithTimeout,
    ];

    /// True if the task goes through the timer (and each queue is tried).
    fn is_timed(self) -> bool {
        matches!(
            self,
            Context::Schedule
                | Context::FixedRate
                | Context::FixedDelay
                | Context::Triggered
                | Context::AtSystemTime
        )
    }

    fn is_periodic(self) -> bool {
        matches!(
            self,
            Context::FixedRate | Context::FixedDelay | Context::Triggered
        )
    }
}

/// When a timed task is due (immediate contexts ignore it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    /// [`SOON`]: it runs during the case.
    Soon,
    /// [`FAR`]: it never comes due during the case.
    Far,
}

/// The delayed work queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    Heap,
    HashedWheel,
    HierarchicalWheel,
}

impl Queue {
    const ALL: [Queue; 3] = [Queue::Heap, Queue::HashedWheel, Queue::HierarchicalWheel];

    fn timer_queue(self) -> TimerQueue {
        match self {
            Queue::Heap => TimerQueue::heap(),
            Queue::HashedWheel => TimerQueue::hashed_wheel(),
            Queue::HierarchicalWheel => TimerQueue::hierarchical_wheel(),
        }
    }

    /// The queues tried for `context`: all of them for a timed task; for an
    /// immediate one, which never meets the timer, the heap alone (all of
    /// them in the full sweep).
    fn for_context(context: Context) -> &'static [Queue] {
        if context.is_timed() || full_sweep() {
            &Queue::ALL
        } else {
            &[Queue::Heap]
        }
    }
}

/// Where user code panics (see each variant), in the tasks of the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The closure's body (a periodic task's second run), the handle
    /// joined (`execute`: none).
    Body,
    /// The closure's body, its handle dropped before it ran: the panic's
    /// payload is the pool's to drop.
    BodyDetached,
    /// The body of a task that `shutdown_now` returned, run by the caller
    /// with `PendingTask::run`.
    BodyInPendingRun,
    /// The closure's captures, dropped after it ran: inside the call for a
    /// one-shot task (the task's own panic); when a periodic task that ran
    /// is cancelled.
    CapturesAfterRun,
    /// The closure of a task that never ran, dropped by `cancel()`.
    ClosureOnCancel,
    /// The closure of a task that `shutdown_now` returned, dropped with
    /// its `PendingTask`.
    ClosureOnShutdownNow,
    /// The closure dropped by the shutdown policies at `shutdown()`: a
    /// one-shot task with `keep_delayed_tasks_on_shutdown(false)`, a
    /// periodic task (it ran before).
    ClosureOnShutdownPolicy,
    /// The closure of a delayed task dropped with the last executor handle.
    ClosureOnPoolDrop,
    /// The output of a task whose handle was dropped before it completed
    /// (the worker drops it).
    OutputBeforeCompletion,
    /// The output of a completed task, dropped with its handle by the test.
    OutputAfterCompletion,
    /// The `wake` of a waker the handle was polled with, woken when the
    /// task completes (a periodic task: when a cancel during a run ends it).
    WakerWakeOnCompletion,
    /// The same, woken by `cancel()`.
    WakerWakeOnCancel,
    /// The drop of that waker, after the worker woke it.
    WakerDropOnCompletion,
    /// The drop of that waker, after `cancel()` woke it.
    WakerDropOnCancel,
    /// The drop of that waker when a second poll replaces it.
    WakerDropOnRepoll,
    /// The drop of that waker when a blocking `join()` replaces it (a
    /// periodic task is ended by a panic of its body).
    WakerDropOnJoin,
    /// The same, `join()` called by a task on a worker.
    WakerDropOnJoinInPool,
    /// A trigger's `next`, at its first call after a run: the task ends
    /// as panicked (the run itself returned), the handle joined.
    TriggerNext,
    /// A trigger's captures, dropped by `cancel()` (the task never ran).
    TriggerDropOnCancel,
    /// A trigger's captures, dropped when `reschedule` installs a new
    /// trigger (the task waits for its first run); the task goes on, on
    /// the new trigger.
    TriggerDropOnReschedule,
}

impl Place {
    const BODIES: [Place; 3] = [Place::Body, Place::BodyDetached, Place::BodyInPendingRun];
    const CLOSURE_DROPS: [Place; 5] = [
        Place::CapturesAfterRun,
        Place::ClosureOnCancel,
        Place::ClosureOnShutdownNow,
        Place::ClosureOnShutdownPolicy,
        Place::ClosureOnPoolDrop,
    ];
    const OUTPUT_DROPS: [Place; 2] = [Place::OutputBeforeCompletion, Place::OutputAfterCompletion];
    const WAKERS: [Place; 7] = [
        Place::WakerWakeOnCompletion,
        Place::WakerWakeOnCancel,
        Place::WakerDropOnCompletion,
        Place::WakerDropOnCancel,
        Place::WakerDropOnRepoll,
        Place::WakerDropOnJoin,
        Place::WakerDropOnJoinInPool,
    ];
    const TRIGGERS: [Place; 3] = [
        Place::TriggerNext,
        Place::TriggerDropOnCancel,
        Place::TriggerDropOnReschedule,
    ];

    /// Every place.
    fn all() -> Vec<Place> {
        [
            &Place::BODIES[..],
            &Place::CLOSURE_DROPS,
            &Place::OUTPUT_DROPS,
            &Place::WAKERS,
            &Place::TRIGGERS,
        ]
        .concat()
    }

    /// The contexts in which the place exists.
    fn contexts(self) -> &'static [Context] {
        match self {
            Place::Body | Place::CapturesAfterRun | Place::ClosureOnShutdownNow => &Context::ALL,
            Place::BodyInPendingRun => &Context::PENDING_RUN,
            Place::ClosureOnShutdownPolicy | Place::ClosureOnPoolDrop => &Context::TIMED,
            Place::OutputBeforeCompletion | Place::OutputAfterCompletion => &Context::OUTPUT,
            Place::TriggerNext | Place::TriggerDropOnCancel | Place::TriggerDropOnReschedule => {
                &Context::TRIGGERED
            }
            _ => &Context::HANDLED,
        }
    }

    /// The pool's configuration for the place.
    fn configure(self, builder: Builder) -> Builder {
        match self {
            // A cancel must give the task's slot back.
            Place::ClosureOnCancel | Place::TriggerDropOnCancel => builder.max_scheduled_tasks(1),
            Place::ClosureOnShutdownPolicy => builder.keep_delayed_tasks_on_shutdown(false),
            _ => builder,
        }
    }
}

/// One combination of the matrix.
#[derive(Clone, Copy, Debug)]
struct Case {
    place: Place,
    fault: Fault,
    context: Context,
    queue: Queue,
    /// The `on_panic` hook panics too, with this.
    hook_fault: Option<Fault>,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} × {:?} × {:?} × {:?}",
            self.place, self.fault, self.context, self.queue
        )?;
        if let Some(hook) = self.hook_fault {
            write!(f, " (on_panic hook panics: {hook:?})")?;
        }
        Ok(())
    }
}

/// Every combination of `places × faults × their contexts × queues ×
/// hook_faults`.
fn matrix(places: &[Place], faults: &[Fault], hook_faults: &[Option<Fault>]) -> Vec<Case> {
    let mut cases = Vec::new();
    for &place in places {
        for &fault in faults {
            for &context in place.contexts() {
                for &queue in Queue::for_context(context) {
                    for &hook_fault in hook_faults {
                        cases.push(Case {
                            place,
                            fault,
                            context,
                            queue,
                            hook_fault,
                        });
                    }
                }
            }
        }
    }
    cases
}

// ---------------------------------------------------------------------------
// Running cases: the hang guard, and the report of a group
// ---------------------------------------------------------------------------

/// How a case failed.
enum Failure {
    Failed(String),
    Hung,
}

/// Runs `case` on a helper thread: a panic that reaches it is a failure
/// (a provoked one means the pool let it unwind into the caller), and so is
/// a case that does not finish within [`CASE_LIMIT`] (its thread is then
/// abandoned).
fn guarded(case: impl FnOnce() -> Result<(), String> + Send + 'static) -> Result<(), Failure> {
    let (done, outcome) = mpsc::channel();
    let runner = thread::Builder::new()
        .name("fault-case".to_owned())
        .spawn(move || {
            let result = match panic::catch_unwind(AssertUnwindSafe(case)) {
                Ok(result) => result,
                Err(payload) => {
                    let what = describe(&*payload);
                    let provoked = is_provoked(&*payload);
                    dispose(payload);
                    Err(if provoked {
                        format!("a provoked panic unwound into the test: {what}")
                    } else {
                        format!("the case panicked: {what}")
                    })
                }
            };
            let _ = done.send(result);
        })
        .map_err(|e| Failure::Failed(format!("cannot start the case's thread: {e}")))?;
    match outcome.recv_timeout(CASE_LIMIT) {
        Ok(result) => {
            let _ = runner.join();
            result.map_err(Failure::Failed)
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Failure::Hung),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(Failure::Failed("the case's thread died".to_owned()))
        }
    }
}

/// Runs every case of `cases` with `run` (three times each in the full
/// sweep), under [`SERIAL`], and fails listing every failing combination.
fn run_group<C>(group: &str, cases: &[C], run: fn(C) -> Result<(), String>)
where
    C: fmt::Display + Copy + Send + 'static,
{
    let _serial = serial();
    quiet_provoked_panics();
    let rounds = if full_sweep() { 3 } else { 1 };
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut hangs = 0;
    'rounds: for round in 0..rounds {
        for &case in cases {
            let tag = if rounds > 1 {
                format!("{case} [round {}]", round + 1)
            } else {
                case.to_string()
            };
            match guarded(move || run(case)) {
                Ok(()) => {}
                Err(Failure::Failed(why)) => failures.push(format!("{tag}: {why}")),
                Err(Failure::Hung) => {
                    failures.push(format!(
                        "{tag}: hung (did not finish within {CASE_LIMIT:?})"
                    ));
                    hangs += 1;
                    if hangs == MAX_HANGS {
                        failures.push(format!(
                            "(stopped after {MAX_HANGS} hung cases; the rest did not run)"
                        ));
                        break 'rounds;
                    }
                }
            }
        }
    }
    eprintln!(
        "{group}: {} cases × {rounds} in {:.1?}",
        cases.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{group}: {} of {} cases failed:\n  {}",
        failures.len(),
        cases.len() * rounds,
        failures.join("\n  ")
    );
}

// ---------------------------------------------------------------------------
// A pool under test, its tasks, their handles
// ---------------------------------------------------------------------------

/// What a finished case must have seen.
struct Expect {
    /// Panics the `on_panic` hook sees.
    reports: usize,
    /// `reports` exactly (a plain fault), or at least (a payload whose drop
    /// panics, which may be reported as a second panic).
    exact: bool,
    /// `metrics().panicked_tasks` after termination, if checked.
    panicked_tasks: Option<u64>,
}

impl Expect {
    fn reports(fault: Fault, reports: usize) -> Self {
        Expect {
            reports,
            exact: fault == Fault::Plain,
            panicked_tasks: None,
        }
    }

    fn panicked(mut self, tasks: u64) -> Self {
        self.panicked_tasks = Some(tasks);
        self
    }
}

/// A pool of [`WORKERS`] workers with a unique name prefix, whose
/// `on_panic` hook counts into `reports`, and the accounting of its tasks.
struct Fixture {
    /// `None` once the case dropped it.
    executor: Option<ScheduledExecutor>,
    reports: Arc<Reports>,
    ledger: Arc<Ledger>,
    threads: PoolThreads,
}

impl Fixture {
    /// Builds the pool: `configure` adds to the builder (it may use the
    /// reports, e.g. their `handover`).
    fn build(
        queue: Queue,
        hook_fault: Option<Fault>,
        configure: impl FnOnce(Builder, &Arc<Reports>) -> Builder,
    ) -> Result<Fixture, String> {
        let prefix = format!("cpf{}", NEXT_POOL.fetch_add(1, SeqCst));
        let reports = Arc::new(Reports::new(hook_fault));
        let hook = Arc::clone(&reports);
        let builder = ScheduledExecutor::builder()
            .worker_threads(WORKERS)
            .thread_name(prefix.clone())
            .timer_queue(queue.timer_queue())
            .on_panic(move |payload| hook.on_panic(payload));
        let executor = configure(builder, &reports)
            .build()
            .map_err(|e| format!("build() failed: {e}"))?;
        let threads = PoolThreads::started(prefix)?;
        Ok(Fixture {
            executor: Some(executor),
            reports,
            ledger: Arc::default(),
            threads,
        })
    }

    fn executor(&self) -> &ScheduledExecutor {
        self.executor
            .as_ref()
            .expect("the case still holds the executor")
    }

    /// Drops the case's executor handle (the last one, unless a task, an
    /// output, a hook or a waker holds a clone).
    fn drop_executor(&mut self) {
        drop(self.executor.take());
    }

    /// A script for a new task that should end with `fate`.
    fn script(&self, what: &'static str, fate: Fate) -> Script {
        Script::new(self.ledger.token(what, Some(fate)))
    }

    /// The pool still runs a new task.
    fn probe(&self) -> Result<(), String> {
        probe(self.executor(), &self.ledger)
    }

    /// Occupies every worker until the returned gate opens (or is
    /// dropped), so that tasks submitted meanwhile stay queued.
    fn block_workers(&self) -> Result<Gate, String> {
        let gate = Gate::new();
        let (started_tx, started) = mpsc::channel();
        for _ in 0..WORKERS {
            let mut token = self.ledger.token("blocks a worker", Some(Fate::Ran));
            let (wait, started_tx) = (gate.waiter(), started_tx.clone());
            self.executor()
                .execute(move || {
                    token.mark_ran();
                    let _ = started_tx.send(());
                    wait.wait();
                })
                .map_err(refused)?;
        }
        for _ in 0..WORKERS {
            started
                .recv_timeout(PATIENCE)
                .map_err(|_| "the blocking tasks did not start".to_owned())?;
        }
        Ok(gate)
    }

    /// Gives `script` to the pool in `context`, due `when`.
    fn accept(&self, context: Context, when: When, script: Script) -> Result<Handle, String> {
        let executor = self.executor();
        let delay = match when {
            When::Soon => SOON,
            When::Far => FAR,
        };
        let mut script = script;
        Ok(match context {
            Context::Submit => Handle::Task(
                executor
                    .submit(move || script.run_once())
                    .map_err(refused)?,
            ),
            Context::Execute => {
                executor
                    .execute(move || drop(script.run_once()))
                    .map_err(refused)?;
                Handle::Detached
            }
            Context::Schedule => Handle::Once(
                executor
                    .schedule(move || script.run_once(), delay)
                    .map_err(refused)?,
            ),
            Context::FixedRate => Handle::Periodic(
                executor
                    .schedule_at_fixed_rate(move || drop(script.run()), delay, PERIOD)
                    .map_err(refused)?,
            ),
            Context::FixedDelay => Handle::Periodic(
                executor
                    .schedule_with_fixed_delay(move || drop(script.run()), delay, PERIOD)
                    .map_err(refused)?,
            ),
            Context::Triggered => {
                let trigger = delay_trigger(
                    delay,
                    script.trigger_fault.take(),
                    std::mem::take(&mut script.trigger_captured),
                );
                Handle::Triggered(
                    executor
                        .schedule_with_trigger(
                            move || {
                                drop(script.run());
                                ControlFlow::Continue(())
                            },
                            trigger,
                        )
                        .map_err(refused)?,
                )
            }
            Context::AtSystemTime => Handle::Once(
                executor
                    .schedule_at_system_time(move || script.run_once(), SystemTime::now() + delay)
                    .map_err(refused)?,
            ),
            Context::WithTimeout => Handle::Task(
                executor
                    .submit_with_timeout(move || script.run_once(), FAR)
                    .map_err(refused)?,
            ),
        })
    }

    /// Joins `handle`: it gives `want`, which agrees with the token `id`.
    fn expect_join(&self, handle: Handle, want: Outcome, id: usize) -> Result<(), String> {
        let periodic = handle.is_periodic();
        let got = handle.join()?;
        if got != want {
            return Err(format!("join() gave {got:?}, not {want:?}"));
        }
        self.ledger.agrees(id, got, periodic)
    }

    /// The checks every case ends with (see the module doc): a pool still
    /// held is probed, shut down and awaited; then the threads must be
    /// gone, every task accounted for, and the reports as `expect`s.
    fn finish(mut self, expect: Expect) -> Result<(), String> {
        if let Some(executor) = self.executor.take() {
            if !executor.is_shutdown() {
                probe(&executor, &self.ledger)?;
            }
            executor.shutdown();
            if !executor.await_termination(PATIENCE) {
                let why = format!(
                    "await_termination(30 s) after shutdown() returned false: {:?}",
                    executor.metrics()
                );
                // Its drop would join threads that do not exit: a hang
                // instead of this message.
                std::mem::forget(executor);
                return Err(why);
            }
            if let Some(expected) = expect.panicked_tasks {
                let panicked = executor.metrics().panicked_tasks;
                if panicked != expected {
                    return Err(format!(
                        "metrics().panicked_tasks is {panicked}, not {expected}"
                    ));
                }
            }
            drop(executor);
        }
        self.threads.exited()?;
        self.ledger.check()?;
        self.reports.check(expect.reports, expect.exact)
    }
}

impl Drop for Fixture {
    /// Breaks the cycle executor → hook → reports → handover → executor
    /// if a case failed before the hook dropped the clone it was handed.
    fn drop(&mut self) {
        self.reports.handover.drop_held();
    }
}

/// `executor` still runs a new task (one with a token in `ledger`).
fn probe(executor: &ScheduledExecutor, ledger: &Arc<Ledger>) -> Result<(), String> {
    let mut token = ledger.token("probe", Some(Fate::Ran));
    let handle = executor
        .submit(move || {
            token.mark_ran();
            7
        })
        .map_err(refused)?;
    match handle.join_timeout(PATIENCE) {
        Ok(7) => Ok(()),
        other => Err(format!("the pool no longer runs new tasks: {other:?}")),
    }
}

/// Waits until a task counted `n` runs in `runs` (the count goes up as a
/// run starts).
fn wait_runs(runs: &AtomicUsize, n: usize) -> Result<(), String> {
    if eventually(|| runs.load(SeqCst) >= n) {
        Ok(())
    } else {
        Err(format!("the task ran {} times, not {n}", runs.load(SeqCst)))
    }
}

/// What a task's closure does, and what it holds.
struct Script {
    token: Token,
    /// Counts the runs, as they start.
    runs: Arc<AtomicUsize>,
    /// Each run waits for it to open first.
    gate: Option<GateWaiter>,
    /// Run `n` panics (once) with this.
    raise_on_run: Option<(usize, Raise)>,
    /// What the (first) run returns.
    output: Option<Cargo>,
    /// Called by each run, after the gate.
    on_run: Option<Box<dyn FnMut() + Send>>,
    /// [`Context::Triggered`]: the trigger's first call after a run panics
    /// with this (the trigger's, not the closure's).
    trigger_fault: Option<Fault>,
    /// [`Context::Triggered`]: held by the trigger until it is dropped.
    trigger_captured: Cargo,
    /// Held until the closure is dropped; last, so dropped last.
    captured: Cargo,
}

impl Script {
    fn new(token: Token) -> Self {
        Script {
            token,
            runs: Arc::default(),
            gate: None,
            raise_on_run: None,
            output: None,
            on_run: None,
            trigger_fault: None,
            trigger_captured: Cargo::Nothing,
            captured: Cargo::Nothing,
        }
    }

    fn id(&self) -> usize {
        self.token.id
    }

    /// One run: marks the token, counts, waits for the gate, calls
    /// `on_run`, panics if this is the run to, and returns the output.
    fn run(&mut self) -> Cargo {
        self.token.mark_ran();
        let run = self.runs.fetch_add(1, SeqCst) + 1;
        if let Some(gate) = &self.gate {
            gate.wait();
        }
        if let Some(on_run) = &mut self.on_run {
            on_run();
        }
        if self.raise_on_run.as_ref().is_some_and(|(at, _)| *at == run) {
            if let Some((_, raise)) = self.raise_on_run.take() {
                raise.raise();
            }
        }
        self.output.take().unwrap_or_default()
    }

    /// The run of a one-shot task: the script (with its captures) is
    /// dropped at the end of the call, as a closure's captures are.
    fn run_once(self) -> Cargo {
        let mut script = self;
        script.run()
    }
}

/// The trigger of [`Context::Triggered`] tasks, as a fixed delay: the
/// first run `delay` from now, each next one [`PERIOD`] after the last run
/// ended. Its first call after a run panics with `fault`, if any; it holds
/// `captured` until it is dropped.
fn delay_trigger(
    delay: Duration,
    fault: Option<Fault>,
    captured: Cargo,
) -> impl FnMut(&TriggerContext<'_>) -> Option<Next> + Send + 'static {
    let mut fault = fault;
    move |ctx: &TriggerContext<'_>| {
        let _held = &captured;
        if ctx.runs() > 0 {
            if let Some(fault) = fault.take() {
                fault.raise("a trigger's next");
            }
        }
        let wait = if ctx.runs() == 0 { delay } else { PERIOD };
        Some(Next::At(ctx.now() + wait))
    }
}

/// What a run panics with.
enum Raise {
    Fault(Fault, &'static str),
    Executor(ScheduledExecutor),
}

impl Raise {
    fn raise(self) -> ! {
        match self {
            Raise::Fault(fault, place) => fault.raise(place),
            Raise::Executor(executor) => panic::panic_any(ExecutorPayload {
                _executor: executor,
            }),
        }
    }
}

/// A task's output or a closure's capture: held only to be dropped.
#[derive(Default)]
#[allow(dead_code)] // The fields are never read: only their drop matters.
enum Cargo {
    #[default]
    Nothing,
    Bomb(Bomb),
    Executor(ScheduledExecutor),
    /// Opens the gate (releasing blocked workers), then drops the clone:
    /// the drop of a last clone on a thread outside the pool joins the
    /// workers, which must be free to exit.
    OpenerThenExecutor(Gate, ScheduledExecutor),
}

/// How a joined task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Returned,
    Panicked,
    Cancelled,
}

/// Classifies a join result, disposing of the value or payload.
fn settle(result: Result<Cargo, TaskError>) -> Outcome {
    let outcome = match &result {
        Ok(_) => Outcome::Returned,
        Err(TaskError::Cancelled) => Outcome::Cancelled,
        Err(TaskError::Panicked(_)) => Outcome::Panicked,
        Err(other) => panic!("a task ended in a way this file does not know: {other}"),
    };
    dispose(result);
    outcome
}

/// A join with a time-out, as a failure on time-out.
fn timed<T, H>(result: Result<T, JoinTimeoutError<H>>) -> Result<Result<T, TaskError>, String> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(JoinTimeoutError::Failed(err)) => Ok(Err(err)),
        Err(JoinTimeoutError::TimedOut(handle)) => {
            dispose(handle);
            Err("join() did not return within 30 s".to_owned())
        }
    }
}

/// The handle of an accepted task, whatever its context.
enum Handle {
    /// `execute`: none.
    Detached,
    Task(TaskHandle<Cargo>),
    Once(ScheduledHandle<Cargo>),
    Periodic(PeriodicHandle),
    /// A task on a trigger; its body never ends it ([`Context::Triggered`]).
    Triggered(TriggerHandle<Cargo>),
}

/// How a task on a trigger ended, as the output of a task: its value, or
/// nothing if the trigger ended it. Either way a periodic task returned,
/// which its accounting takes for a failure ([`Ledger::agrees`]): the
/// tasks of this file never end by themselves.
fn ended(ended: Ended<Cargo>) -> Cargo {
    ended.into_value().unwrap_or_default()
}

impl Handle {
    fn is_periodic(&self) -> bool {
        matches!(self, Handle::Periodic(_) | Handle::Triggered(_))
    }

    fn cancel(&self) -> bool {
        match self {
            Handle::Detached => false,
            Handle::Task(h) => h.cancel(),
            Handle::Once(h) => h.cancel(),
            Handle::Periodic(h) => h.cancel(),
            Handle::Triggered(h) => h.cancel(),
        }
    }

    fn is_finished(&self) -> bool {
        match self {
            Handle::Detached => false,
            Handle::Task(h) => h.is_finished(),
            Handle::Once(h) => h.is_finished(),
            Handle::Periodic(h) => h.is_finished(),
            Handle::Triggered(h) => h.is_finished(),
        }
    }

    /// Polls the handle as a `Future`, with `waker`.
    fn poll(&mut self, waker: &Waker) -> Poll<Result<Cargo, TaskError>> {
        let mut cx = TaskContext::from_waker(waker);
        match self {
            Handle::Detached => panic!("a task without a handle cannot be polled"),
            Handle::Task(h) => Pin::new(h).poll(&mut cx),
            Handle::Once(h) => Pin::new(h).poll(&mut cx),
            Handle::Periodic(h) => Pin::new(h)
                .poll(&mut cx)
                .map(|result| result.map(|()| Cargo::Nothing)),
            Handle::Triggered(h) => Pin::new(h).poll(&mut cx).map(|result| result.map(ended)),
        }
    }

    /// Joins (within [`PATIENCE`]).
    fn join_raw(self) -> Result<Result<Cargo, TaskError>, String> {
        match self {
            Handle::Detached => Err("a task without a handle cannot be joined".to_owned()),
            Handle::Task(h) => timed(h.join_timeout(PATIENCE)),
            Handle::Once(h) => timed(h.join_timeout(PATIENCE)),
            Handle::Periodic(h) => timed(h.join_timeout(PATIENCE).map(|()| Cargo::Nothing)),
            Handle::Triggered(h) => timed(h.join_timeout(PATIENCE).map(ended)),
        }
    }

    fn join(self) -> Result<Outcome, String> {
        self.join_raw().map(settle)
    }
}

/// A hand-written waker (`std::task::Wake`) that counts its wakes and may
/// panic in `wake` or in its drop, or hold things to drop (an opener, then
/// an executor clone).
struct TestWaker {
    wakes: Arc<AtomicUsize>,
    wake_fault: Option<Fault>,
    drop_fault: Option<Fault>,
    opener: Option<Gate>,
    holding: Option<ScheduledExecutor>,
}

impl TestWaker {
    fn benign() -> Self {
        TestWaker {
            wakes: Arc::default(),
            wake_fault: None,
            drop_fault: None,
            opener: None,
            holding: None,
        }
    }

    fn waker(self) -> Waker {
        Waker::from(Arc::new(self))
    }
}

impl Wake for TestWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, SeqCst);
        if let Some(fault) = self.wake_fault {
            fault.raise("a waker's wake");
        }
    }
}

impl Drop for TestWaker {
    fn drop(&mut self) {
        if let Some(fault) = self.drop_fault {
            fault.raise("a waker's drop");
        }
    }
}

/// Sets its flag when dropped (also while unwinding).
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

/// Polls `handle` once with `waker`, which must register (the task is not
/// final yet); the test's own reference to the waker is then dropped, so
/// that the pool holds the only one and user code in it runs on the pool's
/// side.
fn poll_pending(handle: &mut Handle, waker: Waker) -> Result<(), String> {
    let polled = handle.poll(&waker);
    if polled.is_pending() {
        drop(waker);
        return Ok(());
    }
    dispose(polled);
    dispose(waker);
    Err("the handle was ready before its task could end".to_owned())
}

// ---------------------------------------------------------------------------
// The places
// ---------------------------------------------------------------------------

/// Runs one case of the matrix (see [`Place`] for each place).
fn run_case(case: Case) -> Result<(), String> {
    let mut fx = Fixture::build(case.queue, case.hook_fault, |builder, _| {
        case.place.configure(builder)
    })?;
    let expect = match case.place {
        Place::Body | Place::BodyDetached => body(&fx, case)?,
        Place::BodyInPendingRun => body_in_pending_run(&fx, case)?,
        Place::CapturesAfterRun => captures_after_run(&fx, case)?,
        Place::ClosureOnCancel | Place::TriggerDropOnCancel => closure_on_cancel(&fx, case)?,
        Place::ClosureOnShutdownNow => closure_on_shutdown_now(&fx, case)?,
        Place::ClosureOnShutdownPolicy => closure_on_shutdown_policy(&fx, case)?,
        Place::ClosureOnPoolDrop => closure_on_pool_drop(&mut fx, case)?,
        Place::OutputBeforeCompletion => output_before_completion(&fx, case)?,
        Place::OutputAfterCompletion => output_after_completion(&fx, case)?,
        Place::TriggerNext => trigger_next(&fx, case)?,
        Place::TriggerDropOnReschedule => trigger_drop_on_reschedule(&fx, case)?,
        _ => waker(&fx, case)?,
    };
    fx.finish(expect)
}

/// [`Place::Body`], [`Place::BodyDetached`]: the task's panic reaches its
/// handle (if kept), `on_panic` and the counter.
fn body(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let mut script = fx.script("its body panics", Fate::Ran);
    let at = if case.context.is_periodic() { 2 } else { 1 };
    script.raise_on_run = Some((at, Raise::Fault(case.fault, "a task's body")));
    let id = script.id();
    let handle = fx.accept(case.context, When::Soon, script)?;
    match handle {
        Handle::Detached => fx.reports.wait_for(1)?,
        handle if case.place == Place::BodyDetached => {
            drop(handle);
            fx.reports.wait_for(1)?;
        }
        handle => fx.expect_join(handle, Outcome::Panicked, id)?,
    }
    fx.probe()?;
    Ok(Expect::reports(case.fault, 1).panicked(1))
}

/// [`Place::BodyInPendingRun`]: `PendingTask::run` catches the panic and
/// reports it as a worker would; it does not unwind into the caller.
fn body_in_pending_run(fx: &Fixture, case: Case) -> Result<Expect, String> {
    fx.probe()?;
    let blocked = (!case.context.is_timed())
        .then(|| fx.block_workers())
        .transpose()?;
    let mut script = fx.script("run by the caller of shutdown_now; panics", Fate::Ran);
    script.raise_on_run = Some((1, Raise::Fault(case.fault, "a task run from shutdown_now")));
    let id = script.id();
    let handle = fx.accept(case.context, When::Far, script)?;
    let pending = fx.executor().shutdown_now();
    if pending.len() != 1 {
        let n = pending.len();
        dispose(pending);
        return Err(format!("shutdown_now() returned {n} tasks, not 1"));
    }
    for task in pending {
        task.run();
    }
    fx.reports.wait_for(1)?;
    drop(blocked);
    if !matches!(handle, Handle::Detached) {
        fx.expect_join(handle, Outcome::Panicked, id)?;
    }
    // Runs outside a worker are not in the worker counters.
    Ok(Expect::reports(case.fault, 1))
}

/// [`Place::CapturesAfterRun`].
fn captures_after_run(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let mut script = fx.script("its captures panic when dropped", Fate::Ran);
    script.captured = Cargo::Bomb(Bomb::new(case.fault, "a closure's captures, after its run"));
    let (id, runs) = (script.id(), Arc::clone(&script.runs));
    let handle = fx.accept(case.context, When::Soon, script)?;
    if case.context.is_periodic() {
        // Cancelled between runs, the closure is dropped by cancel(); during
        // one, by the worker after it.
        wait_runs(&runs, 1)?;
        if !handle.cancel() {
            return Err("cancel() of a running periodic task returned false".to_owned());
        }
        fx.expect_join(handle, Outcome::Cancelled, id)?;
        fx.reports.wait_for(1)?;
        fx.probe()?;
        return Ok(Expect::reports(case.fault, 1).panicked(0));
    }
    // One-shot: the captures drop inside the call, so the call panicked.
    match handle {
        Handle::Detached => fx.reports.wait_for(1)?,
        handle => fx.expect_join(handle, Outcome::Panicked, id)?,
    }
    fx.probe()?;
    Ok(Expect::reports(case.fault, 1).panicked(1))
}

/// [`Place::ClosureOnCancel`], [`Place::TriggerDropOnCancel`]: `cancel()`
/// returns true without unwinding, the drop's panic (the closure's, or the
/// trigger's) is reported once, and the cancel is counted (the
/// `max_scheduled_tasks(1)` slot is free again).
fn closure_on_cancel(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let blocked = (!case.context.is_timed())
        .then(|| fx.block_workers())
        .transpose()?;
    let mut script;
    if case.place == Place::TriggerDropOnCancel {
        script = fx.script("cancelled; its trigger panics when dropped", Fate::Unrun);
        script.trigger_captured =
            Cargo::Bomb(Bomb::new(case.fault, "a trigger dropped by cancel()"));
    } else {
        script = fx.script("cancelled; its closure panics when dropped", Fate::Unrun);
        script.captured = Cargo::Bomb(Bomb::new(case.fault, "a closure dropped by cancel()"));
    }
    let id = script.id();
    let handle = fx.accept(case.context, When::Far, script)?;
    if !handle.cancel() {
        return Err("cancel() returned false".to_owned());
    }
    fx.reports.wait_for(1)?;
    fx.expect_join(handle, Outcome::Cancelled, id)?;
    if case.context.is_timed() {
        let mut token = fx.ledger.token("takes the cancelled task's slot", None);
        let again = fx
            .executor()
            .schedule(move || token.mark_ran(), FAR)
            .map_err(|e| {
                format!("the cancelled task's max_scheduled_tasks slot was not given back: {e}")
            })?;
        again.cancel();
    }
    drop(blocked);
    fx.probe()?;
    Ok(Expect::reports(case.fault, 1).panicked(0))
}

/// [`Place::ClosureOnShutdownNow`]: dropping the `PendingTask` does not
/// unwind; the handle resolves to `Cancelled`.
fn closure_on_shutdown_now(fx: &Fixture, case: Case) -> Result<Expect, String> {
    fx.probe()?;
    let blocked = (!case.context.is_timed())
        .then(|| fx.block_workers())
        .transpose()?;
    let mut script = fx.script("returned by shutdown_now and dropped", Fate::Unrun);
    script.captured = Cargo::Bomb(Bomb::new(
        case.fault,
        "a closure dropped with its PendingTask",
    ));
    let id = script.id();
    let handle = fx.accept(case.context, When::Far, script)?;
    let pending = fx.executor().shutdown_now();
    if pending.len() != 1 {
        let n = pending.len();
        dispose(pending);
        return Err(format!("shutdown_now() returned {n} tasks, not 1"));
    }
    drop(pending);
    fx.reports.wait_for(1)?;
    drop(blocked);
    if !matches!(handle, Handle::Detached) {
        fx.expect_join(handle, Outcome::Cancelled, id)?;
    }
    Ok(Expect::reports(case.fault, 1).panicked(0))
}

/// [`Place::ClosureOnShutdownPolicy`]: with
/// `keep_delayed_tasks_on_shutdown(false)`, `shutdown()` cancels a delayed
/// task; it cancels a periodic one whatever that setting.
fn closure_on_shutdown_policy(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let periodic = case.context.is_periodic();
    let (fate, when) = if periodic {
        (Fate::Ran, When::Soon)
    } else {
        (Fate::Unrun, When::Far)
    };
    let mut script = fx.script("dropped by the shutdown policies", fate);
    script.captured = Cargo::Bomb(Bomb::new(
        case.fault,
        "a closure dropped by the shutdown policies",
    ));
    let (id, runs) = (script.id(), Arc::clone(&script.runs));
    let handle = fx.accept(case.context, when, script)?;
    if periodic {
        wait_runs(&runs, 1)?;
    }
    fx.probe()?;
    fx.executor().shutdown();
    fx.expect_join(handle, Outcome::Cancelled, id)?;
    fx.reports.wait_for(1)?;
    Ok(Expect::reports(case.fault, 1).panicked(0))
}

/// [`Place::ClosureOnPoolDrop`]: dropping the last executor handle cancels
/// the delayed tasks (their closures dropped by the timer thread) and joins
/// the pool's threads.
fn closure_on_pool_drop(fx: &mut Fixture, case: Case) -> Result<Expect, String> {
    let mut script = fx.script("dropped with the executor", Fate::Unrun);
    script.captured = Cargo::Bomb(Bomb::new(case.fault, "a closure dropped with the executor"));
    let id = script.id();
    let handle = fx.accept(case.context, When::Far, script)?;
    fx.probe()?;
    fx.drop_executor();
    fx.reports.wait_for(1)?;
    fx.expect_join(handle, Outcome::Cancelled, id)?;
    Ok(Expect::reports(case.fault, 1))
}

/// [`Place::OutputBeforeCompletion`]: the worker drops the output of a
/// task whose handle is gone; the panic goes to `on_panic`.
fn output_before_completion(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let gate = Gate::new();
    let mut script = fx.script("its unjoined output panics when dropped", Fate::Ran);
    script.gate = Some(gate.waiter());
    script.output = Some(Cargo::Bomb(Bomb::new(
        case.fault,
        "an output dropped by the worker",
    )));
    let handle = fx.accept(case.context, When::Soon, script)?;
    drop(handle);
    gate.open();
    fx.reports.wait_for(1)?;
    fx.probe()?;
    Ok(Expect::reports(case.fault, 1).panicked(0))
}

/// [`Place::OutputAfterCompletion`]: the test drops the handle of a
/// completed task, and with it the output; that drop does not unwind.
fn output_after_completion(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let mut script = fx.script("its output panics when dropped", Fate::Ran);
    script.output = Some(Cargo::Bomb(Bomb::new(
        case.fault,
        "an output dropped with its handle",
    )));
    let handle = fx.accept(case.context, When::Soon, script)?;
    // The worker counts the run after it let go of the task: from then on
    // the handle holds the output alone.
    if !eventually(|| handle.is_finished() && fx.executor().metrics().completed_tasks >= 1) {
        return Err("the task did not complete".to_owned());
    }
    drop(handle);
    fx.reports.wait_for(1)?;
    fx.probe()?;
    Ok(Expect::reports(case.fault, 1).panicked(0))
}

/// [`Place::TriggerNext`]: the trigger panics when asked for the run after
/// the first: the task ends as panicked (the payload goes to its handle,
/// and to `on_panic` once), with no run after. The run itself returned, so
/// it is not a panicked run in the metrics (`panicked_tasks` counts "task
/// runs that panicked").
fn trigger_next(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let mut script = fx.script("its trigger panics after its first run", Fate::Ran);
    script.trigger_fault = Some(case.fault);
    let (id, runs) = (script.id(), Arc::clone(&script.runs));
    let handle = fx.accept(case.context, When::Soon, script)?;
    fx.expect_join(handle, Outcome::Panicked, id)?;
    let ran = runs.load(SeqCst);
    if ran != 1 {
        return Err(format!(
            "the task ran {ran} times, not once (its trigger panicked after the first run)"
        ));
    }
    fx.probe()?;
    Ok(Expect::reports(case.fault, 1).panicked(0))
}

/// [`Place::TriggerDropOnReschedule`]: `reschedule` of a task waiting for
/// its first run installs the new trigger at once, on the calling thread,
/// and drops the old one there: it returns true without unwinding, the
/// drop's panic is reported once, and the task runs on the new trigger
/// (then is cancelled).
fn trigger_drop_on_reschedule(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let mut script = fx.script(
        "rescheduled; its old trigger panics when dropped",
        Fate::Ran,
    );
    script.trigger_captured =
        Cargo::Bomb(Bomb::new(case.fault, "a trigger replaced by reschedule()"));
    let (id, runs) = (script.id(), Arc::clone(&script.runs));
    let handle = fx.accept(case.context, When::Far, script)?;
    let Handle::Triggered(triggered) = &handle else {
        return Err("the task has no trigger to replace".to_owned());
    };
    if !triggered.reschedule(delay_trigger(SOON, None, Cargo::Nothing)) {
        return Err("reschedule() returned false".to_owned());
    }
    fx.reports.wait_for(1)?;
    // The old trigger's first run was an hour away: these are the new one's.
    wait_runs(&runs, 2)?;
    if !handle.cancel() {
        return Err("cancel() of a running triggered task returned false".to_owned());
    }
    fx.expect_join(handle, Outcome::Cancelled, id)?;
    fx.probe()?;
    Ok(Expect::reports(case.fault, 1).panicked(0))
}

/// The waker places: the handle is polled with a [`TestWaker`] that panics
/// in `wake` or in its drop; the pool wakes, replaces or drops it, and the
/// panic goes to `on_panic` without unwinding into anyone.
fn waker(fx: &Fixture, case: Case) -> Result<Expect, String> {
    let periodic = case.context.is_periodic();
    let in_wake = matches!(
        case.place,
        Place::WakerWakeOnCompletion | Place::WakerWakeOnCancel
    );
    let by_cancel = matches!(
        case.place,
        Place::WakerWakeOnCancel | Place::WakerDropOnCancel
    );
    let by_join = matches!(
        case.place,
        Place::WakerDropOnJoin | Place::WakerDropOnJoinInPool
    );
    // A blocking join cannot cancel: a periodic task is ended by a panic.
    let ends_by_panic = periodic && by_join;
    let blocked = (by_cancel && !case.context.is_timed())
        .then(|| fx.block_workers())
        .transpose()?;
    let gate = Gate::new();
    let (fate, when) = if by_cancel {
        (Fate::Unrun, When::Far)
    } else {
        (Fate::Ran, When::Soon)
    };
    let mut script = fx.script("polled with a panicking waker", fate);
    if !by_cancel {
        script.gate = Some(gate.waiter());
    }
    if ends_by_panic {
        script.raise_on_run = Some((1, Raise::Fault(Fault::Plain, "ends the periodic task")));
    }
    let (id, runs) = (script.id(), Arc::clone(&script.runs));
    let mut handle = fx.accept(case.context, when, script)?;
    if !by_cancel {
        // Its first run waits at the gate, on a worker (so that a join on
        // the other worker finds nothing to help with, and waits).
        wait_runs(&runs, 1)?;
    }
    let wakes = Arc::new(AtomicUsize::new(0));
    let mut faulty = TestWaker::benign();
    faulty.wakes = Arc::clone(&wakes);
    faulty.wake_fault = in_wake.then_some(case.fault);
    faulty.drop_fault = (!in_wake).then_some(case.fault);
    poll_pending(&mut handle, faulty.waker())?;
    let mut want = match (periodic, by_cancel) {
        (_, true) | (true, false) => Outcome::Cancelled,
        (false, false) => Outcome::Returned,
    };
    match case.place {
        Place::WakerWakeOnCancel | Place::WakerDropOnCancel => {
            if !handle.cancel() {
                return Err("cancel() returned false".to_owned());
            }
        }
        Place::WakerDropOnRepoll => {
            let benign = TestWaker::benign().waker();
            if handle.poll(&benign).is_ready() {
                return Err("the handle was ready before its task could end".to_owned());
            }
            if periodic && !handle.cancel() {
                return Err("cancel() of a running periodic task returned false".to_owned());
            }
            gate.open();
        }
        Place::WakerDropOnJoin | Place::WakerDropOnJoinInPool => {
            if ends_by_panic {
                want = Outcome::Panicked;
            }
            // The gate opens once the join replaced the waker: when the
            // replaced waker's panic is reported (or, a defect, the joining
            // task's own panic), or when the join is over anyway.
            let join_over = Arc::new(AtomicBool::new(false));
            let opener = {
                let (reports, over) = (Arc::clone(&fx.reports), Arc::clone(&join_over));
                thread::spawn(move || {
                    eventually(|| reports.seen() >= 1 || over.load(SeqCst));
                    gate.open();
                })
            };
            let over = SetOnDrop(join_over);
            let got = if case.place == Place::WakerDropOnJoin {
                handle.join()?
            } else {
                let joiner = fx
                    .executor()
                    .submit(move || handle.join())
                    .map_err(refused)?;
                match timed(joiner.join_timeout(PATIENCE))? {
                    Ok(joined) => joined?,
                    Err(err) => {
                        let why = format!("the join on a worker unwound: {err}");
                        dispose(err);
                        return Err(why);
                    }
                }
            };
            drop(over);
            let _ = opener.join();
            if got != want {
                return Err(format!("join() gave {got:?}, not {want:?}"));
            }
            fx.ledger.agrees(id, got, periodic)?;
            fx.reports.wait_for(1)?;
            fx.probe()?;
            let reports = 1 + usize::from(ends_by_panic);
            return Ok(Expect::reports(case.fault, reports).panicked(u64::from(ends_by_panic)));
        }
        _ => {
            // Completion: a periodic task is cancelled during its run, and
            // the worker ends it after the run.
            if periodic && !handle.cancel() {
                return Err("cancel() of a running periodic task returned false".to_owned());
            }
            gate.open();
        }
    }
    // A join before the task ended would replace the waker under test.
    if !eventually(|| handle.is_finished()) {
        return Err("the task did not end".to_owned());
    }
    fx.expect_join(handle, want, id)?;
    fx.reports.wait_for(1)?;
    if case.place != Place::WakerDropOnRepoll && wakes.load(SeqCst) == 0 {
        return Err("the waker was never woken".to_owned());
    }
    drop(blocked);
    fx.probe()?;
    Ok(Expect::reports(case.fault, 1).panicked(0))
}

// ---------------------------------------------------------------------------
// The last executor clone, dropped by user code
// ---------------------------------------------------------------------------

/// Where the last executor clone is when it is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    /// A closure's captures, after its run (a worker; for a periodic task,
    /// the cancel that ends it). The run also checks that
    /// `await_termination` on a worker returns false at once.
    ClosureAfterRun,
    /// A closure dropped by `cancel()` (the test thread).
    ClosureOnCancel,
    /// A closure returned by `shutdown_now`, dropped with its
    /// `PendingTask` (the test thread).
    PendingTaskDrop,
    /// A delayed task that `shutdown()` cancels (the timer thread; a
    /// one-shot task with `keep_delayed_tasks_on_shutdown(false)`).
    TimerAtShutdown,
    /// A periodic task that runs at `shutdown()` (a worker or the timer
    /// thread: the defect reproduced by the last test of this file).
    PeriodicAtShutdown,
    /// An output whose handle was dropped before completion (a worker).
    OutputDroppedByWorker,
    /// An output dropped with the handle after completion (the test).
    OutputDroppedWithHandle,
    /// An output joined, then dropped by the test.
    OutputJoined,
    /// A panic payload whose handle was dropped (a worker).
    PayloadDroppedByWorker,
    /// A panic payload joined, then dropped by the test.
    PayloadJoined,
    /// The `on_panic` hook, which takes the clone out of a shared slot (a
    /// worker).
    OnPanicHook,
    /// The `on_thread_stop` hook, the same way (a worker, at shutdown).
    OnThreadStopHook,
    /// A waker, woken when the task completes (a worker).
    WakerOnCompletion,
    /// A waker, woken by `cancel()` (the test thread).
    WakerOnCancel,
    /// A waker replaced by a second poll (the test thread).
    WakerOnRepoll,
}

impl Holder {
    const ALL: [Holder; 15] = [
        Holder::ClosureAfterRun,
        Holder::ClosureOnCancel,
        Holder::PendingTaskDrop,
        Holder::TimerAtShutdown,
        Holder::PeriodicAtShutdown,
        Holder::OutputDroppedByWorker,
        Holder::OutputDroppedWithHandle,
        Holder::OutputJoined,
        Holder::PayloadDroppedByWorker,
        Holder::PayloadJoined,
        Holder::OnPanicHook,
        Holder::OnThreadStopHook,
        Holder::WakerOnCompletion,
        Holder::WakerOnCancel,
        Holder::WakerOnRepoll,
    ];

    fn contexts(self) -> &'static [Context] {
        match self {
            Holder::ClosureAfterRun | Holder::PendingTaskDrop | Holder::PayloadDroppedByWorker => {
                &Context::ALL
            }
            Holder::TimerAtShutdown => &Context::TIMED,
            Holder::PeriodicAtShutdown => &Context::PERIODIC,
            Holder::OutputDroppedByWorker
            | Holder::OutputDroppedWithHandle
            | Holder::OutputJoined
            | Holder::OnPanicHook => &Context::ONE_SHOT_HANDLED,
            Holder::OnThreadStopHook => &[Context::Submit],
            Holder::ClosureOnCancel
            | Holder::PayloadJoined
            | Holder::WakerOnCompletion
            | Holder::WakerOnCancel
            | Holder::WakerOnRepoll => &Context::HANDLED,
        }
    }
}

/// One case of the last-clone family.
#[derive(Clone, Copy, Debug)]
struct HolderCase {
    holder: Holder,
    context: Context,
    queue: Queue,
}

impl fmt::Display for HolderCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "last clone in {:?} × {:?} × {:?}",
            self.holder, self.context, self.queue
        )
    }
}

/// The cases of the last-clone family.
fn holder_cases() -> Vec<HolderCase> {
    let mut cases = Vec::new();
    for holder in Holder::ALL {
        for &context in holder.contexts() {
            for &queue in Queue::for_context(context) {
                cases.push(HolderCase {
                    holder,
                    context,
                    queue,
                });
            }
        }
    }
    cases
}

/// What `await_termination` on a worker returned, and how long it took.
type Awaited = Arc<Mutex<Option<(bool, Duration)>>>;

/// Runs one case of the last-clone family: the case's own handle is
/// dropped while user code holds a clone; then that user code drops it.
/// Nothing may hang (the guard), and the pool's threads must exit.
fn run_holder(case: HolderCase) -> Result<(), String> {
    let mut fx = Fixture::build(case.queue, None, |builder, reports| match case.holder {
        Holder::TimerAtShutdown => builder.keep_delayed_tasks_on_shutdown(false),
        Holder::OnThreadStopHook => {
            let reports = Arc::clone(reports);
            builder.on_thread_stop(move || reports.handover.drop_held())
        }
        _ => builder,
    })?;
    fx.probe()?;
    let context = case.context;
    let periodic = context.is_periodic();
    let clone = fx.executor().clone();
    let gate = Gate::new();
    let mut reports = 0;
    match case.holder {
        Holder::ClosureAfterRun if periodic => {
            let mut script = fx.script("holds the last clone; cancelled", Fate::Ran);
            script.captured = Cargo::Executor(clone);
            let (id, runs) = (script.id(), Arc::clone(&script.runs));
            let handle = fx.accept(context, When::Soon, script)?;
            wait_runs(&runs, 1)?;
            fx.drop_executor();
            if !handle.cancel() {
                return Err("cancel() of a running periodic task returned false".to_owned());
            }
            fx.expect_join(handle, Outcome::Cancelled, id)?;
        }
        Holder::ClosureAfterRun => {
            let awaited: Awaited = Arc::default();
            let mut script = fx.script("holds the last clone", Fate::Ran);
            script.gate = Some(gate.waiter());
            let (executor, record) = (clone.clone(), Arc::clone(&awaited));
            script.on_run = Some(Box::new(move || {
                let start = Instant::now();
                let terminated = executor.await_termination(FAR);
                *lock(&record) = Some((terminated, start.elapsed()));
            }));
            script.captured = Cargo::Executor(clone);
            let id = script.id();
            let handle = fx.accept(context, When::Soon, script)?;
            fx.drop_executor();
            gate.open();
            if !matches!(handle, Handle::Detached) {
                fx.expect_join(handle, Outcome::Returned, id)?;
            }
            eventually(|| lock(&awaited).is_some());
            let awaited = *lock(&awaited);
            match awaited {
                Some((false, took)) if took < PATIENCE => {}
                other => {
                    return Err(format!(
                        "await_termination on a worker gave (terminated, took) = {other:?}, \
                         not false at once"
                    ))
                }
            }
        }
        Holder::ClosureOnCancel => {
            let mut script = fx.script("holds the last clone; cancelled", Fate::Unrun);
            script.captured = if context.is_timed() {
                Cargo::Executor(clone)
            } else {
                Cargo::OpenerThenExecutor(fx.block_workers()?, clone)
            };
            let id = script.id();
            let handle = fx.accept(context, When::Far, script)?;
            fx.drop_executor();
            if !handle.cancel() {
                return Err("cancel() returned false".to_owned());
            }
            fx.expect_join(handle, Outcome::Cancelled, id)?;
        }
        Holder::PendingTaskDrop => {
            let blocked = (!context.is_timed())
                .then(|| fx.block_workers())
                .transpose()?;
            let mut script = fx.script("holds the last clone; returned", Fate::Unrun);
            script.captured = Cargo::Executor(clone);
            let id = script.id();
            let handle = fx.accept(context, When::Far, script)?;
            let pending = fx.executor().shutdown_now();
            drop(blocked);
            fx.drop_executor();
            if pending.len() != 1 {
                let n = pending.len();
                drop(pending);
                return Err(format!("shutdown_now() returned {n} tasks, not 1"));
            }
            drop(pending);
            if !matches!(handle, Handle::Detached) {
                fx.expect_join(handle, Outcome::Cancelled, id)?;
            }
        }
        Holder::TimerAtShutdown | Holder::PeriodicAtShutdown => {
            let running = case.holder == Holder::PeriodicAtShutdown;
            let (fate, when) = if running {
                (Fate::Ran, When::Soon)
            } else {
                (Fate::Unrun, When::Far)
            };
            let mut script = fx.script("holds the last clone at shutdown", fate);
            script.captured = Cargo::Executor(clone);
            let (id, runs) = (script.id(), Arc::clone(&script.runs));
            let handle = fx.accept(context, when, script)?;
            if running {
                wait_runs(&runs, 1)?;
            }
            fx.executor().shutdown();
            fx.drop_executor();
            fx.expect_join(handle, Outcome::Cancelled, id)?;
        }
        Holder::OutputDroppedByWorker => {
            let mut script = fx.script("returns the last clone", Fate::Ran);
            script.gate = Some(gate.waiter());
            script.output = Some(Cargo::Executor(clone));
            let handle = fx.accept(context, When::Soon, script)?;
            drop(handle);
            fx.drop_executor();
            gate.open();
        }
        Holder::OutputDroppedWithHandle => {
            let mut script = fx.script("returns the last clone", Fate::Ran);
            script.output = Some(Cargo::Executor(clone));
            let handle = fx.accept(context, When::Soon, script)?;
            // The probe's run and this one counted: the worker let go.
            if !eventually(|| handle.is_finished() && fx.executor().metrics().completed_tasks >= 2)
            {
                return Err("the task did not complete".to_owned());
            }
            fx.drop_executor();
            drop(handle);
        }
        Holder::OutputJoined => {
            let mut script = fx.script("returns the last clone", Fate::Ran);
            script.output = Some(Cargo::Executor(clone));
            let handle = fx.accept(context, When::Soon, script)?;
            let output = handle.join_raw()?;
            fx.drop_executor();
            if !matches!(output, Ok(Cargo::Executor(_))) {
                let why = format!("join() gave {:?}, not the clone", output.map(|_| ()));
                return Err(why);
            }
            drop(output);
        }
        Holder::PayloadDroppedByWorker | Holder::PayloadJoined => {
            reports = 1;
            let mut script = fx.script("panics with the last clone", Fate::Ran);
            script.gate = Some(gate.waiter());
            script.raise_on_run = Some((1, Raise::Executor(clone)));
            let id = script.id();
            let handle = fx.accept(context, When::Soon, script)?;
            fx.drop_executor();
            if case.holder == Holder::PayloadDroppedByWorker {
                drop(handle);
                gate.open();
            } else {
                gate.open();
                let periodic = handle.is_periodic();
                let result = handle.join_raw()?;
                let outcome = match &result {
                    Err(TaskError::Panicked(_)) => Outcome::Panicked,
                    Err(TaskError::Cancelled) => Outcome::Cancelled,
                    Ok(_) => Outcome::Returned,
                    Err(other) => return Err(format!("join() gave {other}")),
                };
                drop(result);
                if outcome != Outcome::Panicked {
                    return Err(format!("join() gave {outcome:?}, not Panicked"));
                }
                fx.ledger.agrees(id, outcome, periodic)?;
            }
        }
        Holder::OnPanicHook => {
            reports = 1;
            let mut script = fx.script("its panic makes on_panic drop the last clone", Fate::Ran);
            script.gate = Some(gate.waiter());
            script.raise_on_run = Some((1, Raise::Fault(Fault::Plain, "a panic seen by on_panic")));
            let id = script.id();
            let handle = fx.accept(context, When::Soon, script)?;
            fx.reports.handover.put(clone);
            fx.drop_executor();
            gate.open();
            fx.expect_join(handle, Outcome::Panicked, id)?;
        }
        Holder::OnThreadStopHook => {
            fx.reports.handover.put(clone);
            fx.executor().shutdown();
            fx.drop_executor();
        }
        Holder::WakerOnCompletion | Holder::WakerOnCancel | Holder::WakerOnRepoll => {
            let by_cancel = case.holder == Holder::WakerOnCancel;
            let (fate, when) = if by_cancel {
                (Fate::Unrun, When::Far)
            } else {
                (Fate::Ran, When::Soon)
            };
            let mut script = fx.script("polled with a waker that holds the last clone", fate);
            let mut holding = TestWaker::benign();
            holding.holding = Some(clone);
            if by_cancel {
                if !context.is_timed() {
                    holding.opener = Some(fx.block_workers()?);
                }
            } else {
                script.gate = Some(gate.waiter());
            }
            let (id, runs) = (script.id(), Arc::clone(&script.runs));
            let mut handle = fx.accept(context, when, script)?;
            if !by_cancel {
                // Started: the drop of the last clone would cancel a
                // delayed task not yet due (the policy of that drop).
                wait_runs(&runs, 1)?;
            }
            let mut gate = Some(gate);
            if case.holder == Holder::WakerOnRepoll {
                // The waker's drop opens the gate, then drops the clone:
                // the join in that drop waits for the task.
                holding.opener = gate.take();
            }
            poll_pending(&mut handle, holding.waker())?;
            fx.drop_executor();
            let want = if periodic || by_cancel {
                Outcome::Cancelled
            } else {
                Outcome::Returned
            };
            match case.holder {
                Holder::WakerOnCancel => {
                    if !handle.cancel() {
                        return Err("cancel() returned false".to_owned());
                    }
                }
                Holder::WakerOnRepoll => {
                    let polled = handle.poll(&TestWaker::benign().waker());
                    dispose(polled);
                }
                _ => {
                    if periodic && !handle.cancel() {
                        return Err("cancel() of a running periodic task returned false".to_owned());
                    }
                    drop(gate);
                }
            }
            // A join before the task ended would replace the waker.
            if !eventually(|| handle.is_finished()) {
                return Err("the task did not end".to_owned());
            }
            fx.expect_join(handle, want, id)?;
        }
    }
    fx.finish(Expect {
        reports,
        exact: true,
        panicked_tasks: None,
    })
}

// ---------------------------------------------------------------------------
// Thread hooks and names
// ---------------------------------------------------------------------------

/// A panic in a worker's lifecycle hooks or in its name.
#[derive(Clone, Copy, Debug)]
enum ThreadCase {
    /// `on_thread_start` panics on every worker.
    StartHook(Fault),
    /// `on_thread_stop` panics on every worker.
    StopHook(Fault),
    /// `thread_name_fn` panics for worker `.1`.
    NameFn(Fault, usize),
    /// `thread_name` with a NUL byte.
    NulInPrefix,
    /// `thread_name_fn` returns a NUL byte for worker 1.
    NulFromNameFn,
}

impl fmt::Display for ThreadCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

fn thread_cases() -> Vec<ThreadCase> {
    let mut cases = Vec::new();
    for fault in Fault::ALL {
        cases.push(ThreadCase::StartHook(fault));
        cases.push(ThreadCase::StopHook(fault));
        cases.push(ThreadCase::NameFn(fault, 0));
        cases.push(ThreadCase::NameFn(fault, 1));
    }
    cases.push(ThreadCase::NulInPrefix);
    cases.push(ThreadCase::NulFromNameFn);
    cases
}

/// A panicking lifecycle hook is caught: the workers go on (they run an
/// immediate and a delayed task) and stop; a panicking or NUL-bearing
/// thread name fails `build()` with the right error and starts no thread.
fn run_thread_case(case: ThreadCase) -> Result<(), String> {
    let calls = Arc::new(AtomicUsize::new(0));
    let hook = |fault: Fault, place: &'static str| {
        let calls = Arc::clone(&calls);
        move || {
            calls.fetch_add(1, SeqCst);
            fault.raise(place);
        }
    };
    match case {
        ThreadCase::StartHook(fault) | ThreadCase::StopHook(fault) => {
            let start = matches!(case, ThreadCase::StartHook(_));
            let fx = Fixture::build(Queue::Heap, None, |builder, _| {
                if start {
                    builder.on_thread_start(hook(fault, "the on_thread_start hook"))
                } else {
                    builder.on_thread_stop(hook(fault, "the on_thread_stop hook"))
                }
            })?;
            fx.probe()?;
            let later = fx.script("a delayed task", Fate::Ran);
            let id = later.id();
            let handle = fx.accept(Context::Schedule, When::Soon, later)?;
            fx.expect_join(handle, Outcome::Returned, id)?;
            fx.finish(Expect::reports(Fault::Plain, 0).panicked(0))?;
            let called = calls.load(SeqCst);
            if called != WORKERS {
                return Err(format!("the hook ran {called} times, not {WORKERS}"));
            }
            Ok(())
        }
        ThreadCase::NameFn(..) | ThreadCase::NulInPrefix | ThreadCase::NulFromNameFn => {
            let prefix = format!("cpf{}", NEXT_POOL.fetch_add(1, SeqCst));
            let builder = ScheduledExecutor::builder().worker_threads(WORKERS);
            let builder = match case {
                ThreadCase::NameFn(fault, at) => {
                    let prefix = prefix.clone();
                    builder.thread_name_fn(move |i| {
                        if i == at {
                            fault.raise("thread_name_fn");
                        }
                        format!("{prefix}-{i}")
                    })
                }
                ThreadCase::NulInPrefix => builder.thread_name(format!("{prefix}\0")),
                _ => {
                    let prefix = prefix.clone();
                    builder.thread_name_fn(move |i| {
                        if i == 1 {
                            format!("{prefix}-\0")
                        } else {
                            format!("{prefix}-{i}")
                        }
                    })
                }
            };
            let built = builder.build();
            let verdict = match (&built, case) {
                (Err(BuildError::ThreadNamePanicked(payload)), ThreadCase::NameFn(fault, _)) => {
                    match (fault, payload.message()) {
                        (Fault::Plain, Some("expected: thread_name_fn"))
                        | (Fault::PayloadPanicsOnDrop, None) => Ok(()),
                        _ => Err(format!("the error holds the wrong payload: {payload:?}")),
                    }
                }
                (Err(BuildError::ThreadName(name)), _) if name.contains('\0') => Ok(()),
                (Ok(_), _) => Err("build() succeeded".to_owned()),
                (Err(e), _) => Err(format!("build() failed with the wrong error: {e}")),
            };
            dispose(built);
            verdict?;
            // A thread names itself as it starts: give one a moment.
            thread::sleep(Duration::from_millis(5));
            let started: Vec<_> = threads()
                .into_iter()
                // No other pool of this binary is alive (`SERIAL`): any
                // timer thread would be this build's.
                .filter(|(_, comm)| comm.starts_with(&prefix) || comm.starts_with(TIMER_COMM))
                .collect();
            if started.is_empty() {
                Ok(())
            } else {
                Err(format!("a failed build() left threads behind: {started:?}"))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

/// The panics of the matrix, without a panicking `on_panic` hook.
fn run_places(group: &str, places: &[Place]) {
    run_group(group, &matrix(places, &Fault::ALL, &[None]), run_case);
}

#[test]
fn panics_in_task_bodies_are_caught_and_reported() {
    run_places("panics in task bodies", &Place::BODIES);
}

#[test]
fn panics_dropping_closures_are_reported_never_unwound() {
    run_places("panics dropping closures", &Place::CLOSURE_DROPS);
}

#[test]
fn panics_dropping_outputs_are_reported_never_unwound() {
    run_places("panics dropping outputs", &Place::OUTPUT_DROPS);
}

#[test]
fn panics_in_wakers_are_reported_never_unwound() {
    run_places("panics in wakers", &Place::WAKERS);
}

#[test]
fn panics_in_triggers_are_reported_never_unwound() {
    run_places("panics in triggers", &Place::TRIGGERS);
}

/// Every place again, with an `on_panic` hook that panics after counting
/// (a plain panic at each place, on the heap; every fault and queue in the
/// full sweep).
#[test]
fn a_panicking_on_panic_hook_changes_nothing() {
    let faults: &[Fault] = if full_sweep() {
        &Fault::ALL
    } else {
        &[Fault::Plain]
    };
    let mut cases = matrix(
        &Place::all(),
        faults,
        &[Some(Fault::Plain), Some(Fault::PayloadPanicsOnDrop)],
    );
    if !full_sweep() {
        cases.retain(|case| case.queue == Queue::Heap);
    }
    run_group("panics in the on_panic hook", &cases, run_case);
}

#[test]
fn panics_in_thread_hooks_and_names_are_contained() {
    run_group(
        "panics in thread hooks and names",
        &thread_cases(),
        run_thread_case,
    );
}

#[test]
fn dropping_the_last_executor_clone_in_user_code_never_hangs() {
    run_group(
        "the last executor clone dropped by user code",
        &holder_cases(),
        run_holder,
    );
}

/// The defect this file was written for: a periodic task holding an
/// executor clone, `shutdown()`, then the user's handle dropped. The last
/// clone goes with the periodic task's closure, on a worker or the timer
/// thread, which must not join itself; the two workers and the timer
/// thread must exit.
#[test]
fn a_periodic_task_holding_a_clone_lets_the_pool_exit_after_shutdown() {
    #[derive(Clone, Copy)]
    struct Repro;
    impl fmt::Display for Repro {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("periodic task holding a clone, shutdown, drop")
        }
    }
    run_group("defect reproduction", &[Repro], |Repro| {
        let prefix = format!("cpf{}", NEXT_POOL.fetch_add(1, SeqCst));
        let pool = ScheduledExecutor::builder()
            .worker_threads(WORKERS)
            .thread_name(prefix.clone())
            .build()
            .map_err(|e| e.to_string())?;
        let threads = PoolThreads::started(prefix)?;
        let p2 = pool.clone();
        let _h = pool
            .schedule_at_fixed_rate(
                move || {
                    let _ = p2.execute(|| ());
                },
                Duration::ZERO,
                Duration::from_millis(1),
            )
            .map_err(refused)?;
        thread::sleep(Duration::from_millis(10));
        pool.shutdown();
        drop(pool);
        threads.exited()
    });
}

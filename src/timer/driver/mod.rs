//! The timer: who waits for time, and how due tasks reach the workers.
//!
//! Each executor has one timer thread (`<prefix>-timer`, after the pool's
//! `thread_name`) and one delayed work queue (the backend, behind a lock
//! that whoever turns takes: rarely contended). Whoever holds the *lead*
//! waits for the next deadline and takes the turns that hand due tasks
//! over (`lead`): an idle worker, which runs what falls due itself, or the
//! timer thread, which pushes each due task on the pool's injector and
//! wakes an idle worker (the sleep protocol's `notify_work`, which wakes
//! nobody while a worker is searching; see `hand_over_due`). The timer
//! thread holds the lead at the start, after a shutdown, on a manual clock
//! and while the leading worker is stuck in a long task; otherwise it
//! watches the leader. Tasks run on workers, never on the timer thread.
//!
//! # One protocol per file
//!
//! * `commands`: schedulers hand tasks to the timer thread through a
//!   bounded lock-free queue, wake it only when it must see a command
//!   before it would wake anyway, and wait for room when the queue is full.
//! * `sweep`: a cancel only counts itself; the timer thread sweeps the
//!   cancelled entries out in one pass once they are half of what it holds.
//! * `shutdown`: what `shutdown` and `shutdown_now` do with the tasks the
//!   timer holds, and why no user code runs under the backend lock.
//! * `lead`: an idle worker waits for time and runs what falls due; the
//!   timer thread watches it, and takes the lead back when it is stuck.
//! * `help`: a timer future first polled while the holder of the lead is
//!   behind its deadline hands over what is due itself, and rings the
//!   alarms on the polling thread.
//! * `waiting`: how the holder of the lead waits for its next deadline
//!   (its timer slack, and the short spin that finishes a long wait).
//! * `wall`: the watch of the wall clock, for tasks due at a wall time.
//!
//! This file holds what they share: the [`Timer`], the [`Workers`] it hands
//! due tasks to, and the timer thread's loop (`turn`, `hand_over_due`).
//!
//! # Invariants
//!
//! * `pending` counts scheduled tasks not yet handed to the workers, not
//!   removed as cancelled and not drained by `shutdown_now`. It goes up
//!   inside the submission's admission (see `lifecycle`), before the insert
//!   command is pushed, and down only after the task left the timer (a
//!   handed-over task is on the injector first, or taken by the leading
//!   worker). So a worker that sees the pool shut down, no submission in
//!   flight and `pending == 0` knows that no delayed task can still appear
//!   in the queues.
//! * Due tasks are pushed on the injector (or on the leading worker's
//!   deque, or taken by it to run) while the backend lock is held, and
//!   `shutdown_now` takes that lock to drain the backend before it drains
//!   the injector and the deques: a task is either drained from the
//!   backend or already in a queue (or running), never lost between them.
//! * No empty ticks: the holder of the lead parks until the next deadline
//!   the backend reports, or without a deadline when there is none. With
//!   few timers it may instead park until a short window before that
//!   deadline and spin on the clock for the rest (`waiting`); a spin ends
//!   at the same deadline as the park it replaces, and sooner if a command
//!   arrives, so the wake-up protocol of `commands` holds unchanged. While
//!   a worker leads, the timer thread wakes a `GRACE` after the leader's
//!   deadline, and once a `GRACE` while the leader is awake (`lead`).

use std::time::Instant;

use crate::sync::parker::Parker;
use crate::sync::ring::Ring;
use crate::sync::{
    fence, AtomicBool, AtomicU64, AtomicUsize, CachePadded, CellArc, Condvar, Mutex, Ordering,
    StdArc,
};
use crate::task::delayed;
use crate::task::{Delayed, Job, TaskContext};
use crate::time::{Clock, Nanos};

use super::queue::DelayQueue;
use super::TimerQueue;
use commands::{Insert, COMMANDS_CAPACITY};
use waiting::{Wait, Waiting};

pub(crate) use shutdown::ShutdownPolicy;

pub(crate) mod commands;
pub(crate) mod help;
pub(crate) mod lead;
pub(crate) mod shutdown;
pub(crate) mod sweep;
pub(crate) mod waiting;
pub(crate) mod wall;

/// The backend, type-erased.
pub(crate) type Queue = Box<dyn DelayQueue<CellArc<dyn Delayed>> + Send>;

/// A scheduled task as the timer holds it.
pub(crate) type Entry = CellArc<dyn Delayed>;

/// The timer of one pool (see the module doc). Its fields are private to
/// the driver: each protocol's file reaches those it needs.
pub(crate) struct Timer {
    /// The executor's clock.
    pub(crate) clock: Clock,
    /// The insert commands, from the schedulers to the timer thread (see
    /// `commands`).
    commands: Ring<Insert>,
    /// The count of cancels not yet swept and `sweep_at` (see `sweep`).
    /// Each of the three counters the schedulers, cancellers and the timer
    /// thread all touch (`dead`, `armed`, `pending`) has a cache line of
    /// its own, away from the backend's lock, which the timer thread takes
    /// at every turn.
    dead: CachePadded<AtomicU64>,
    /// Cancel the tasks still pending instead of waiting for them (the
    /// executor was dropped, or `keep_delayed_tasks_on_shutdown(false)`).
    discard_on_shutdown: AtomicBool,
    /// Keep periodic tasks running after `shutdown`
    /// (`keep_periodic_tasks_on_shutdown`).
    keep_periodic_on_shutdown: bool,
    /// Which entries the shutdown policies have already taken out of the
    /// backend (`KEEP_ALL`, `DROP_PERIODIC`, `DROP_ALL`), so that entries
    /// placed later are filtered as they arrive and the backend is purged
    /// once per policy, not at every turn. Only touched under the queue
    /// lock (hence `Relaxed`).
    shutdown_filter: AtomicUsize,
    /// The deadline the timer thread sleeps until; 0 while it is awake;
    /// `u64::MAX` while it sleeps without a deadline.
    pub(crate) armed: CachePadded<AtomicU64>,
    /// Where the timer thread sleeps, and is woken.
    parker: StdArc<Parker>,
    /// Scheduled tasks the timer still holds (see the invariants above).
    pending: CachePadded<AtomicUsize>,
    /// The most scheduled tasks `reserve` admits.
    max_pending: usize,
    /// The backend, behind the lock described in the module doc.
    pub(crate) queue: Mutex<Queue>,
    /// Entries the shutdown policies dropped, to be cancelled outside the
    /// lock (see `shutdown`). Only touched under the `queue` lock.
    doomed: Mutex<Vec<Entry>>,
    /// Signalled, under the `queue` lock, each time commands are taken out
    /// of the command queue, and when the timer thread exits: a scheduler
    /// that found the command queue full waits on it (see `commands`).
    room: Condvar,
    /// The timer thread has exited: a scheduler that finds the command
    /// queue full applies it itself. Only written under the `queue` lock.
    exited: AtomicBool,
    /// `shutdown_now` waits for the submissions in flight: a scheduler that
    /// finds the command queue full applies it itself (the timer thread may
    /// be the caller, from user code it runs). Only written under the
    /// `queue` lock.
    schedulers_apply: AtomicBool,
    /// The tasks due at a wall time, and the clocks' offset (see `wall`).
    wall: wall::WallWatch,
    /// Tasks cancelled through their handles that sweeps removed (for
    /// `metrics()`; written under the backend lock).
    swept_cancelled: AtomicU64,
    /// Who waits for time: [`lead::TIMER_THREAD`] or a worker's index
    /// (see `lead`).
    lead: CachePadded<AtomicUsize>,
    /// Turns taken, by whoever leads (only written under the backend lock:
    /// the timer thread's watch compares two readings; see `lead`).
    turns: AtomicU64,
    /// Until when the timer thread sleeps (`u64::MAX`: without a deadline),
    /// for a leading worker that wakes (see `lead`).
    watch_until: CachePadded<AtomicU64>,
    /// The workers' parkers, by index (a leading worker sleeps on its own).
    worker_parkers: Box<[StdArc<Parker>]>,
    /// The timer thread's last turn found many timers: workers do not take
    /// the lead (see `lead`).
    crowded: AtomicBool,
    /// Whether idle workers may take the lead (not on a manual clock, whose
    /// time moves only by `advance`).
    workers_lead: bool,
    /// The spin window before a deadline with few timers (`waiting`).
    spin: Nanos,
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("pending", &self.pending())
            .finish_non_exhaustive()
    }
}

impl Timer {
    /// A timer of the backend kind `kind`, with the shutdown policies
    /// `policy`, that admits at most `max_pending` scheduled tasks
    /// (`reserve`). Its thread is started by the pool ([`run`]).
    #[cfg(test)]
    pub(crate) fn new(kind: TimerQueue, policy: ShutdownPolicy, max_pending: usize) -> Self {
        Self::with_clock(kind, policy, max_pending, Clock::new())
    }

    /// [`new`](Self::new), reading the time from `clock`.
    pub(crate) fn with_clock(
        kind: TimerQueue,
        policy: ShutdownPolicy,
        max_pending: usize,
        clock: Clock,
    ) -> Self {
        Timer {
            commands: Ring::with_capacity(COMMANDS_CAPACITY),
            dead: CachePadded::new(AtomicU64::new(sweep::DEAD_AT_START)),
            discard_on_shutdown: AtomicBool::new(!policy.keep_delayed),
            keep_periodic_on_shutdown: policy.keep_periodic,
            shutdown_filter: AtomicUsize::new(shutdown::KEEP_ALL),
            armed: CachePadded::new(AtomicU64::new(0)),
            parker: StdArc::new(Parker::new()),
            pending: CachePadded::new(AtomicUsize::new(0)),
            max_pending,
            queue: Mutex::new(kind.build()),
            doomed: Mutex::new(Vec::new()),
            room: Condvar::new(),
            exited: AtomicBool::new(false),
            schedulers_apply: AtomicBool::new(false),
            wall: wall::WallWatch::default(),
            swept_cancelled: AtomicU64::new(0),
            lead: CachePadded::new(AtomicUsize::new(lead::TIMER_THREAD)),
            turns: AtomicU64::new(0),
            watch_until: CachePadded::new(AtomicU64::new(u64::MAX)),
            worker_parkers: Box::new([]),
            crowded: AtomicBool::new(false),
            workers_lead: !clock.is_manual() && !cfg!(loom),
            spin: 0,
            clock,
        }
    }

    /// The parkers of the pool's workers (by index): a leading worker
    /// sleeps on its own (see `lead`).
    pub(crate) fn attach_workers(&mut self, parkers: Box<[StdArc<Parker>]>) {
        self.worker_parkers = parkers;
    }

    /// The spin window before a deadline (`waiting`), for the timer
    /// thread and a leading worker alike.
    pub(crate) fn set_spin(&mut self, spin: Nanos) {
        self.spin = if self.clock.is_manual() { 0 } else { spin };
    }

    /// Lets (or not) idle workers take the lead (a loom model chooses).
    #[cfg(all(test, loom))]
    pub(crate) fn set_workers_lead(&mut self, lead: bool) {
        self.workers_lead = lead && !self.clock.is_manual();
    }

    /// True if periodic tasks go on after `shutdown`.
    pub(crate) fn keeps_periodic_on_shutdown(&self) -> bool {
        self.keep_periodic_on_shutdown
    }

    /// Tasks cancelled through their handles that sweeps removed.
    pub(crate) fn swept_cancelled(&self) -> u64 {
        self.swept_cancelled.load(Ordering::Relaxed)
    }

    /// Scheduled tasks the timer still holds (see the module doc).
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Wakes the timer thread to look at the pool's state (shutdown), even
    /// while a worker leads (see [`wake_waiter`](Self::wake_waiter)).
    pub(crate) fn wake(&self) {
        self.parker.unpark();
    }

    /// The timer thread sleeps until `next` (nanoseconds on the clock), or
    /// until woken; without a deadline if `None`, or if the clock is manual
    /// (its time moves only by `ManualClock::advance`, which hands over the
    /// tasks due itself). (Under loom a deadline never passes: a model wakes
    /// it with [`wake`](Self::wake).)
    pub(crate) fn sleep_until(&self, next: Option<Nanos>) {
        let wake_at: Option<Instant> = next
            .filter(|_| !self.clock.is_manual())
            .and_then(|n| self.clock.instant_of(n));
        self.parker.park_until(wake_at);
    }

    /// For a manual clock's `advance`: applies the queued commands and
    /// hands every task due at `now` to `pool`'s workers, as a turn of the
    /// timer thread does (under the same lock).
    ///
    /// An entry the shutdown policies drop as its command is applied here
    /// is left in `doomed` for the timer thread, which `place` wakes for
    /// it: its cancel runs user code (a closure's `Drop` may drop the last
    /// executor handle, whose drop joins the workers, which wait for that
    /// very cancel), and only a thread of the pool may run it (`shutdown`).
    pub(crate) fn hand_over_at(&self, pool: &impl Workers, now: Nanos) {
        self.check_wall(pool, now);
        let rung = {
            let mut queue = self.queue.lock();
            while !self.apply_commands(&mut queue, now) {}
            hand_over_due(pool, &mut queue, now, usize::MAX)
        };
        ring(rung, pool);
        if pool.is_shut_down() && self.pending() == 0 {
            // Idle workers may wait for the last delayed work: wake them,
            // as every turn of the timer thread does (`turn_locked`); on
            // this clock it sleeps without a deadline. A task handed over
            // here is on the injector before it leaves `pending`, so the
            // worker woken for it may run it, find `pending` still above 0
            // and sleep again before the hand-over takes it off (loom:
            // `the_last_hand_over_wakes_the_workers`). An alarm leaves no
            // job whose end would wake them.
            pool.wake_all();
        }
    }

    /// For a manual clock's `advance`: true if no command waits and
    /// nothing the timer holds is due at `now`.
    pub(crate) fn idle_at(&self, now: Nanos) -> bool {
        let queue = self.queue.lock();
        self.commands.is_empty() && queue.next_due().is_none_or(|next| next > now)
    }

    /// The earliest deadline the timer holds (commands not yet applied
    /// aside).
    pub(crate) fn next_deadline(&self) -> Option<Nanos> {
        self.queue.lock().next_due()
    }

    /// The timer thread spins until `until` on the clock `now`, or until a
    /// command arrives (it may be due sooner). Only ever asked for one spin
    /// window (`waiting`), at most `MAX_TIMER_SPIN`, so it does not watch
    /// for other wake-ups: one that comes meanwhile (shutdown) leaves a
    /// token in the parker, and the next turn sees its cause.
    fn spin_until(&self, until: Nanos, now: impl Fn() -> Nanos) {
        while now() < until && self.commands.is_empty() {
            std::hint::spin_loop();
        }
    }
}

/// What the timer thread needs of the workers it hands tasks to: the
/// pool, which owns the timer (`timer`). A trait, so that the timer layer
/// does not import the pool layer, which imports it.
pub(crate) trait Workers: TaskContext {
    /// The timer these workers are fed by.
    fn timer(&self) -> &Timer;
    /// Pushes a task that fell due where the workers take their work,
    /// without waking one (see [`notify`](Self::notify)).
    fn hand_over(&self, job: Job);
    /// Wakes an idle worker for the tasks handed over, unless one is
    /// looking for work already.
    fn notify(&self);
    /// Wakes every idle worker (to look at the shutdown and `pending`).
    fn wake_all(&self);
    /// True after `shutdown_now`.
    fn is_stopped(&self) -> bool;
    /// True after `shutdown` or `shutdown_now`.
    fn is_shut_down(&self) -> bool;
    /// True once every worker has exited.
    fn all_exited(&self) -> bool;
    /// Gives up the jobs left in the queues once every worker has exited
    /// (nobody will run them).
    fn give_up_stranded(&self);
    /// Whether some worker sleeps (a racy hint, for the spin before a
    /// deadline).
    fn some_worker_sleeps(&self) -> bool;
    /// `n` alarms fell due and will be rung after the lock: on a manual
    /// clock they count as jobs until [`rung`](Self::rung), so `advance`
    /// waits for their wakes.
    fn ringing(&self, n: usize);
    /// The alarms announced by [`ringing`](Self::ringing) were rung.
    fn rung(&self, n: usize);
}

/// The body of the timer thread of `pool`, which spins for at most the
/// timer's spin window before a deadline (`waiting`). The pool marks the
/// thread as its own before it calls this.
pub(crate) fn run(pool: &impl Workers) {
    let _ = TIMER_THREAD.try_with(|mark| mark.set(true));
    let timer = pool.timer();
    let clock = timer.clock.clone();
    run_with_clock(pool, || clock.now(), Waiting::new(timer.spin));
}

crate::sync::thread_local! {
    /// True on a timer thread ([`run`]): user code it runs (a destructor, a
    /// waker) that schedules must not wait for the room that only its turn
    /// makes (`commands`).
    static TIMER_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True on a timer thread.
pub(super) fn is_timer_thread() -> bool {
    TIMER_THREAD.try_with(std::cell::Cell::get).unwrap_or(false)
}

/// The timer thread's loop, reading the time from `now` (the executor's
/// clock; a model's explicit time under loom, which does not model time:
/// there `waiting` never spins).
pub(crate) fn run_with_clock(pool: &impl Workers, now: impl Fn() -> Nanos, mut waiting: Waiting) {
    let timer = pool.timer();
    let mut watch = lead::Watch::default();
    loop {
        if timer.worker_leads() && !pool.is_shut_down() {
            // A worker waits for time: watch over it (`lead`).
            lead::watch(pool, &now, &mut watch);
            continue;
        }
        match turn(pool, &now) {
            Turn::Exit => {
                timer.timer_thread_exits();
                // What this thread handed over as the last worker left.
                pool.give_up_stranded();
                break;
            }
            Turn::Again => continue,
            Turn::Sleep { next, held } => {
                match waiting.plan(next, held, &now, || pool.some_worker_sleeps()) {
                    Wait::Park(until) => timer.sleep_until(until),
                    Wait::Spin(until) => timer.spin_until(until, &now),
                }
            }
        }
    }
}

/// What one [`turn`] of the timer thread decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The timer thread is done (the pool stopped or terminated).
    Exit,
    /// A command arrived after `armed` was published: turn again at once.
    Again,
    /// Sleep until `next` (without a deadline if `None`); the backend holds
    /// `held` entries. `armed` is published.
    Sleep { next: Option<Nanos>, held: usize },
}

/// One turn of the timer thread: apply the commands, hand over the tasks
/// due at `now()`, do the shutdown duties, then publish the deadline it
/// will sleep until (`armed`) and look for commands once more (see
/// `commands`).
/// Entries the shutdown policies dropped are cancelled after the lock is
/// released, and the turn is taken again (`pending` changed).
pub(crate) fn turn(pool: &impl Workers, now: impl Fn() -> Nanos) -> Turn {
    let timer = pool.timer();
    let watching_wall = timer.check_wall(pool, now());
    let (mut rung, mut swept) = (Vec::new(), Vec::new());
    let (locked, doomed) = {
        let mut queue = timer.queue.lock();
        // `armed` is written only by the holder of the lead, under this
        // lock (see `lead`); a worker that took it waits for time now.
        if !timer.timer_thread_holds_lead(pool.is_shut_down()) {
            return Turn::Again;
        }
        timer.armed.store(0, Ordering::SeqCst);
        timer.count_turn();
        let locked = turn_locked(pool, &mut queue, &now, &mut rung, &mut swept).map(|mut rest| {
            if watching_wall {
                let check_by = now().saturating_add(wall::MAX_WALL_WAIT);
                rest.next = Some(rest.next.map_or(check_by, |next| next.min(check_by)));
            }
            let armed = rest.next.unwrap_or(u64::MAX);
            timer
                .crowded
                .store(rest.held > lead::LEAD_MAX_TIMERS / 2, Ordering::Relaxed);
            timer.armed.store(armed, Ordering::SeqCst);
            timer.watch_until.store(armed, Ordering::SeqCst);
            rest
        });
        (locked, timer.take_doomed())
    };
    ring(rung, pool);
    sweep::drop_swept(swept, pool);
    if !doomed.is_empty() {
        timer.cancel_doomed(doomed, pool);
        if locked.is_some() {
            return Turn::Again;
        }
    }
    let Some(Rest {
        next,
        held,
        sweep_again,
    }) = locked
    else {
        return Turn::Exit;
    };
    fence(Ordering::SeqCst);
    if sweep_again || !timer.commands.is_empty() || timer.worker_leads() {
        return Turn::Again;
    }
    Turn::Sleep { next, held }
}

/// How a turn that does not exit goes on after the lock (`turn_locked`).
struct Rest {
    /// The next deadline the backend holds.
    next: Option<Nanos>,
    /// The entries it holds.
    held: usize,
    /// The count of cancels already reached the `sweep_at` just published.
    sweep_again: bool,
}

/// The part of a [`turn`] under the backend lock: `None` if the timer
/// thread exits, else what the rest of the turn needs.
fn turn_locked(
    pool: &impl Workers,
    queue: &mut Queue,
    now: impl Fn() -> Nanos,
    rung: &mut Vec<Entry>,
    swept: &mut Vec<Entry>,
) -> Option<Rest> {
    let timer = pool.timer();
    timer.apply_commands(queue, now());
    *rung = hand_over_due(pool, queue, now(), usize::MAX);
    timer.sweep_if_due(queue, now(), swept);
    // Shut down first, stopped second: the state only moves forward, so
    // "shut down and not stopped" means a `shutdown` came before the
    // second read, and its policies apply. Read the other way round, a
    // `shutdown_now` between the two reads looked like a `shutdown`, and
    // its policies cancelled the periodic tasks that `shutdown_now` was to
    // return (loom: `shutdown_now_while_a_worker_leads`).
    if pool.is_shut_down() {
        if pool.is_stopped() {
            return None;
        }
        timer.cancel_on_shutdown(queue, now(), swept);
        if timer.pending() == 0 {
            // Idle workers may have been waiting for the last delayed
            // task: they may exit now.
            pool.wake_all();
        }
        // Workers exit once nothing is left to run, pending delayed tasks
        // included; until then a running periodic task may still re-arm,
        // so the timer thread stays as long as they do (the last one to
        // exit wakes it).
        if pool.all_exited() {
            return None;
        }
    }
    let held = queue.len();
    Some(Rest {
        next: queue.next_due(),
        held,
        sweep_again: timer.publish_sweep_at(held),
    })
}

/// Pushes every due task on the injector (at most `most` due entries, for
/// a poll's help: `help`; under the backend lock: see the module doc's
/// invariants) and wakes a worker for them: right after the
/// first push, so that the workers start on a large batch (a wheel's tick
/// can hold thousands) while the rest is still being popped, and once more
/// after the last, in case the first woken worker went back to sleep
/// meanwhile.
/// (Each call wakes a worker only if none is searching and one sleeps; a
/// worker that takes a batch from the injector announces the rest.)
///
/// A cancelled task that fell due before a sweep took it out is pushed
/// too, and the worker skips it: looking at its state here would cost the
/// timer thread a cache miss on every task it hands over.
///
/// Returns the due entries that are no task (timer futures' alarms), for
/// [`ring`] once the lock is released: ringing one wakes a waker, user
/// code, which may schedule (and wait for room in the command queue,
/// under this lock) or do anything else.
fn hand_over_due(pool: &impl Workers, queue: &mut Queue, now: Nanos, most: usize) -> Vec<Entry> {
    let mut rung = Vec::new();
    let mut handed = 0;
    let mut popped = 0;
    while popped < most {
        let Some(entry) = queue.pop_due(now) else {
            break;
        };
        popped += 1;
        if !entry.is_task() {
            rung.push(entry);
            continue;
        }
        pool.hand_over(delayed::into_job(entry));
        handed += 1;
        if handed == 1 {
            pool.notify();
        }
    }
    if !rung.is_empty() {
        pool.ringing(rung.len());
    }
    if popped > 0 {
        // Only after the pushes: a task leaves `pending` once it is on the
        // injector (module doc); an alarm once it is out of the backend.
        pool.timer().pending.fetch_sub(popped, Ordering::SeqCst);
        if handed > 1 {
            pool.notify();
        }
    }
    rung
}

/// Expires the alarms [`hand_over_due`] found due, on this thread, without
/// the backend lock: each wakes its future's waker (a panic of which goes
/// to the `on_panic` hook through `ctx`). A timer future that a waker
/// polls meanwhile does not help (`help::ringing`).
fn ring(rung: Vec<Entry>, pool: &impl Workers) {
    let n = rung.len();
    if n == 0 {
        return;
    }
    help::ringing(|| {
        for entry in rung {
            if let Some(job) = delayed::expire(entry, pool) {
                unreachable!("only alarms are rung, and they have no job: {job:?}");
            }
        }
    });
    pool.rung(n);
}

/// An entry that is never handed over: only its identity matters.
#[cfg(test)]
pub(crate) struct Probe(pub(crate) Nanos);

#[cfg(test)]
impl Delayed for Probe {
    fn deadline(&self) -> Nanos {
        self.0
    }
    fn is_final(&self) -> bool {
        false
    }
    unsafe fn job(&self, _: &mut Option<CellArc<dyn Delayed>>) -> Job {
        unreachable!("no timer thread hands it over")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The address of an entry, to compare identities across trait objects.
    pub(super) fn address<T: ?Sized>(entry: &CellArc<T>) -> *const () {
        CellArc::as_ptr(entry).cast()
    }

    pub(super) fn keep_delayed() -> ShutdownPolicy {
        ShutdownPolicy {
            keep_delayed: true,
            keep_periodic: false,
        }
    }

    /// Schedules each entry on `timer`.
    pub(super) fn insert_all(timer: &Timer, entries: &[CellArc<Probe>]) {
        for entry in entries {
            assert!(timer.reserve(&mut Vec::new()));
            timer.insert_reserved(delayed::erase(entry.clone()));
        }
    }

    #[test]
    fn a_spin_ends_at_its_deadline_or_when_a_command_arrives() {
        let timer = Timer::new(TimerQueue::heap(), keep_delayed(), usize::MAX);
        let clock = std::cell::Cell::new(0);
        timer.spin_until(1_000, || {
            clock.set(clock.get() + 1);
            clock.get()
        });
        assert_eq!(clock.get(), 1_000);
        // A stopped clock: only the command ends the spin.
        insert_all(&timer, &[CellArc::new(Probe(7))]);
        timer.spin_until(1_000, || 0);
    }
}

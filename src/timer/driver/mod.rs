//! The timer thread: the one thread that waits for time.
//!
//! Each executor has one timer thread (`chronopool-timer`). It alone owns
//! the delayed work queue (the backend, behind a lock that only
//! `shutdown_now`, a scheduler that finds the command queue full and one
//! at the `max_scheduled_tasks` limit ever contend for) and hands each task that falls due to
//! the workers, by pushing it on the pool's injector and waking an idle
//! worker (the sleep protocol's `notify_work`, which wakes nobody while a
//! worker is searching; see `hand_over_due`). Tasks run on workers, never
//! on the timer thread.
//!
//! # Feeding it without a lock
//!
//! Scheduling and cancelling threads do not touch the backend while the
//! timer thread keeps up. A scheduler pushes an insert command on a bounded
//! lock-free queue (a [`Ring`]) and wakes the timer thread only when it
//! must see the command before it would wake anyway:
//!
//! * An insert wakes it if its deadline is earlier than the one the timer
//!   thread is sleeping until (`armed`). The timer thread publishes `armed`,
//!   then `fence(SeqCst)`, then looks for commands before it parks; the
//!   scheduler pushes, then `fence(SeqCst)`, then reads `armed`. Of the two
//!   fences one is first, so either the timer thread sees the command (and
//!   does not park), or the scheduler sees the deadline it sleeps until (and
//!   wakes it if its own is earlier). So the timer thread never sleeps past
//!   the earliest deadline, and it does not wake for a later one.
//! * While it is awake, `armed` is 0: nobody wakes it; it reads the
//!   commands before it sleeps again.
//! * A push that brings the backlog to `BACKLOG_WAKE` (half the queue)
//!   also wakes it, so that the queue rarely fills.
//! * **A scheduler that finds the queue full waits for room.** It wakes
//!   the timer thread, takes the backend lock, tries again and, if the
//!   queue is still full, waits on `room`, a condition variable of that
//!   lock. Every taking of commands out of the queue (`apply_commands`)
//!   happens under that lock and signals `room` before releasing it, so a
//!   scheduler's last failed try and its wait are never separated by one:
//!   no wake-up is lost. Once the timer thread has exited (the pool
//!   stopped; `exited`, set and signalled under the lock), a scheduler
//!   that finds the queue full applies it itself instead, reading the
//!   clock under the lock (so never behind a `now` the timer thread used);
//!   `shutdown_now` drains the backend after it.
//! * `reserve` at the `max_scheduled_tasks` limit sweeps on the calling
//!   thread (a sweep applies the queue first), then wakes the timer
//!   thread: a command
//!   it applied may be due before the deadline the timer thread sleeps
//!   until, and that command's own scheduler, having seen the timer thread
//!   awake (`armed` 0) or its look at the queue still to come, did not
//!   wake it; the queue that look finds may now be empty.
//!
//! Why schedulers wait rather than apply the queue themselves (as they did
//! before): the memory a backend grows into must belong to the timer
//! thread. A vector that a scheduler's insert grew comes from the
//! scheduler's allocator arena, the one its tasks come from too; glibc
//! keeps the freed tasks of that arena in its fastbins until a large
//! allocation or free there consolidates them all at once, under the
//! arena's lock. At the end of the `timer-fire` workload (a million tasks
//! freed by the workers) the timer thread's first growth or release of
//! such a vector did that: one `malloc_consolidate` of 84–182 ms (perf
//! probes on it), during which no task was handed over, in 3 of 42
//! repetitions. With every vector in the timer thread's own arena: 1 of
//! 120 (`benches/results/2026-11-21-commands-wait.txt`).
//!
//! Why bounded: the queue never allocates (4,096 commands of 24 bytes and
//! their sequence numbers, 128 KiB, allocated with the timer). crossbeam's
//! unbounded `Injector`, used before, allocated a 2 KiB block every 63
//! pushes, which the timer thread freed: under a burst the two threads took turns at
//! glibc's arena lock, and perf found both asleep on it. And a burst can
//! run at most 4,096 commands ahead of the timer thread, so the tasks that
//! fall due during it are not held up behind a backlog of a million
//! inserts. Measured with the `timer-fire` and `cancel` workloads (a
//! million timers; `benches/results/2026-11-21-bounded-commands.txt`).
//!
//! # Cancelled entries: counted, then swept
//!
//! A cancel sends nothing. The canceller moves the task's state to
//! CANCELLED (dropping its closure at once: `task/cell.rs`) and adds one to the
//! count of cancels in `dead`; the entry, now dead weight, stays in the
//! backend until the timer thread *sweeps* the dead entries out in one
//! O(n) pass ([`DelayQueue::remove_where`]). It sweeps when the count
//! reaches `sweep_at`, half the entries it held at its last turn, so a
//! sweep of n entries pays for n/2 cancels (O(1) per cancel, amortised),
//! at most half of what the backend holds is dead, and the last of a
//! million cancels still leads to a sweep (`sweep_at` is at least 1). A
//! cancelled task never holds up termination: once only dead entries are
//! left, they are more than half.
//!
//! `dead` packs the count (low 40 bits) and `sweep_at` (high 24 bits) in one
//! word, so that a cancel reads the threshold in the same read-modify-write
//! that counts it: the canceller's `fetch_add` and the timer thread's
//! publication of `sweep_at` (or its read of the word before it sleeps) are
//! ordered by the word's modification order. Either the timer thread's read
//! comes later and sees the count (it sweeps before it sleeps), or the
//! cancel comes later and sees the threshold the timer thread sleeps with
//! (and wakes it if the count reached it). The count only goes down by what
//! a sweep read (`Acquire`, against the cancel's `Release`: every counted
//! cancel's state change is visible to that sweep). A sweep applies the
//! queued commands after it read the count and before it removes: a task
//! is cancelled through the handle its scheduling returned, after its
//! insert command was pushed, so the entry of every cancel the sweep
//! counted is in the backend by then (or was handed over), and is removed.
//! So the count is never less than the dead entries the backend holds; it
//! may be more (a dead entry that fell due before a sweep was handed over,
//! and the worker skipped it), which only brings a sweep forward.
//!
//! A cancelled entry is still counted in `pending` (and against
//! `max_scheduled_tasks`) until it is swept; `reserve` sweeps before it
//! refuses a task, so the limit counts live tasks only. A sweep gives its
//! slots back (`pending`) before it lowers the count (`Release`), so a
//! `reserve` that reads the count at 0 (`Acquire`) then finds them free,
//! and one that reads it above 0 sweeps itself, after any sweep in progress.
//!
//! # No user code under the lock
//!
//! Cancelling a task runs user code (its closure's destructor, its waker),
//! which may panic, block, schedule or cancel on this very pool, call
//! `shutdown_now`, or drop the last handle to the executor. None of that
//! may happen under the backend lock (a re-entrant schedule or
//! `shutdown_now` would deadlock on it) or while a scheduler is admitted
//! (`shutdown_now` waits for admitted submissions). So an entry that the
//! shutdown policies drop is not cancelled where it is found: it moves to
//! `doomed`, still counted in `pending`, and the timer thread cancels it
//! after its turn has released the lock, then takes it off `pending` (so
//! the workers, which wait for `pending` to reach 0, wait for the cancel
//! too). `shutdown_now`'s drain takes whatever `doomed` still holds with
//! the rest, under the lock, and returns it; each entry is taken once.
//! Sweeps and the purge drop only entries that are already final, whose
//! cells hold no user code any more (a cancel took the closure; a waiter
//! takes its waker back from a final task).
//!
//! # Invariants
//!
//! * `pending` counts scheduled tasks not yet handed to the workers, not
//!   removed as cancelled and not drained by `shutdown_now`. It goes up
//!   inside the submission's admission (see `lifecycle`), before the insert
//!   command is pushed, and down only after the task left the timer (a
//!   handed-over task is on the injector first). So a worker that sees the
//!   pool shut down, no submission in flight and `pending == 0` knows that
//!   no delayed task can still appear in the queues.
//! * The dead entries the backend holds are at most the count in `dead`,
//!   and the timer thread never sleeps with that count at or above
//!   `sweep_at` (see above).
//! * Due tasks are pushed on the injector while the backend lock is held,
//!   and `shutdown_now` takes that lock to drain the backend before it
//!   drains the injector: a task is either drained from the backend or
//!   already on the injector, never lost between the two.
//! * No empty ticks: the timer thread parks until the next deadline the
//!   backend reports, or without a deadline when there is none. With few
//!   timers it may instead park until a short window before that deadline
//!   and spin on the clock for the rest ([`waiting`](super::waiting)); a
//!   spin ends at the same deadline as the park it replaces, and sooner if
//!   a command arrives, so the wake-up protocol above holds unchanged.

use std::time::Instant;

use crate::sync::parker::Parker;
use crate::sync::ring::Ring;
use crate::sync::{fence, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering, StdArc};
use crate::task::{Job, TaskContext, TimerEntry};
use crate::time::{Clock, Nanos};

use super::queue::DelayQueue;
use super::TimerQueue;
use waiting::{Wait, Waiting};

mod waiting;

/// The most commands the queue holds (module doc); 2 under loom, so that
/// the models reach a full queue.
#[cfg(not(loom))]
const COMMANDS_CAPACITY: usize = 4096;
#[cfg(loom)]
const COMMANDS_CAPACITY: usize = 2;

/// A push that brings the backlog to this wakes the timer thread: half the
/// queue (never under loom: the models' queue fills instead).
const BACKLOG_WAKE: usize = if cfg!(loom) {
    usize::MAX
} else {
    COMMANDS_CAPACITY / 2
};

/// `Timer::dead`: the bits of the count of cancels not yet swept.
const DEAD_COUNT_BITS: u32 = 40;
/// `Timer::dead`: the mask of the count.
const DEAD_COUNT: u64 = (1 << DEAD_COUNT_BITS) - 1;
/// `Timer::dead`: the largest `sweep_at` (with more entries than twice
/// this, a sweep pays for fewer cancels than half of them, still many).
const MAX_SWEEP_AT: u64 = (1 << (64 - DEAD_COUNT_BITS)) - 1;

/// The count and `sweep_at` in a `Timer::dead` word.
fn unpack_dead(word: u64) -> (u64, u64) {
    (word & DEAD_COUNT, word >> DEAD_COUNT_BITS)
}

/// `Timer::shutdown_filter`: nothing is dropped (running, or the policies
/// keep every task).
const KEEP_ALL: usize = 0;
/// `Timer::shutdown_filter`: periodic tasks are dropped.
const DROP_PERIODIC: usize = 1;
/// `Timer::shutdown_filter`: every task is dropped.
const DROP_ALL: usize = 2;

/// A task for the timer thread to place. The deadline travels with it, so
/// that placing it does not read the task (a cache line another core wrote).
struct Insert {
    deadline: Nanos,
    entry: StdArc<dyn TimerEntry>,
}

/// What `shutdown` does with the tasks the timer holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShutdownPolicy {
    /// One-shot delayed tasks still run (the JDK's default: true).
    pub(crate) keep_delayed: bool,
    /// Periodic tasks go on (the JDK's default: false).
    pub(crate) keep_periodic: bool,
}

/// The backend, type-erased.
type Queue = Box<dyn DelayQueue<StdArc<dyn TimerEntry>> + Send>;

/// A scheduled task as the timer holds it.
type Entry = StdArc<dyn TimerEntry>;

/// The timer of one pool (see the module doc).
pub(crate) struct Timer {
    pub(crate) clock: Clock,
    commands: Ring<Insert>,
    backlog: AtomicUsize,
    /// The count of cancels not yet swept and `sweep_at` (module doc).
    dead: AtomicU64,
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
    armed: AtomicU64,
    parker: StdArc<Parker>,
    pending: AtomicUsize,
    /// The most scheduled tasks `reserve` admits.
    max_pending: usize,
    queue: Mutex<Queue>,
    /// Entries the shutdown policies dropped, to be cancelled outside the
    /// lock (module doc). Only touched under the `queue` lock.
    doomed: Mutex<Vec<Entry>>,
    /// Signalled, under the `queue` lock, each time commands are taken out
    /// of the command queue, and when the timer thread exits: a scheduler
    /// that found the command queue full waits on it (module doc).
    room: Condvar,
    /// The timer thread has exited: a scheduler that finds the command
    /// queue full applies it itself. Only written under the `queue` lock.
    exited: AtomicBool,
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("pending", &self.pending())
            .finish_non_exhaustive()
    }
}

impl Timer {
    pub(crate) fn new(kind: TimerQueue, policy: ShutdownPolicy, max_pending: usize) -> Self {
        Timer {
            clock: Clock::new(),
            commands: Ring::with_capacity(COMMANDS_CAPACITY),
            backlog: AtomicUsize::new(0),
            dead: AtomicU64::new(1 << DEAD_COUNT_BITS),
            discard_on_shutdown: AtomicBool::new(!policy.keep_delayed),
            keep_periodic_on_shutdown: policy.keep_periodic,
            shutdown_filter: AtomicUsize::new(KEEP_ALL),
            armed: AtomicU64::new(0),
            parker: StdArc::new(Parker::new()),
            pending: AtomicUsize::new(0),
            max_pending,
            queue: Mutex::new(kind.build()),
            doomed: Mutex::new(Vec::new()),
            room: Condvar::new(),
            exited: AtomicBool::new(false),
        }
    }

    /// True if periodic tasks go on after `shutdown`.
    pub(crate) fn keeps_periodic_on_shutdown(&self) -> bool {
        self.keep_periodic_on_shutdown
    }

    /// Scheduled tasks the timer still holds (see the module doc).
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Counts a new scheduled task against the limit; false (and nothing
    /// counted) if the timer already holds `max_pending` live tasks (it
    /// sweeps the cancelled ones out before it says so). Called inside the
    /// submission's admission (see the module doc on `pending`); a `true`
    /// must be followed by [`insert_reserved`](Self::insert_reserved).
    pub(crate) fn reserve(&self) -> bool {
        if self.try_reserve() {
            return true;
        }
        // A count of 0 read here comes after the last sweep's decrement, so
        // after the slots that sweep gave back (`sweep`): the try below sees
        // them. A count above 0 is swept here (after any sweep in progress,
        // under the lock) before that try.
        let (cancels, _) = unpack_dead(self.dead.load(Ordering::Acquire));
        if cancels > 0 {
            self.sweep_here();
        }
        self.try_reserve()
    }

    /// Sweeps on the calling thread (applying the queued commands first:
    /// `sweep`) and wakes the timer thread (see the module doc: a command
    /// applied here may be due before it would wake).
    fn sweep_here(&self) {
        {
            let mut queue = self.queue.lock();
            self.sweep(&mut queue, self.clock.now());
        }
        self.parker.unpark();
    }

    /// Pushes `insert` on the full command queue once the timer thread has
    /// taken commands out: waits on `room` under the backend lock, which
    /// every taking of commands holds and signals (so a wait never misses
    /// one). If the timer thread has exited (the pool stopped), applies the
    /// queue here instead, as nobody else will before `shutdown_now`
    /// drains it.
    #[cold]
    fn push_when_there_is_room(&self, mut insert: Insert) {
        let mut queue = self.queue.lock();
        loop {
            match self.commands.push(insert) {
                Ok(()) => return,
                Err(back) => insert = back,
            }
            if self.exited.load(Ordering::Relaxed) {
                self.apply_commands(&mut queue, self.clock.now());
            } else {
                // The timer thread is most likely awake already (the
                // backlog woke it at `BACKLOG_WAKE`); this makes sure.
                self.parker.unpark();
                queue = self.room.wait(queue);
            }
        }
    }

    /// Called by the timer thread as it exits: from now on a scheduler
    /// that finds the command queue full applies it itself, and one that
    /// waits for room is woken to do so.
    fn timer_thread_exits(&self) {
        let _queue = self.queue.lock();
        self.exited.store(true, Ordering::Relaxed);
        self.room.notify_all();
    }

    fn try_reserve(&self) -> bool {
        if self.pending.fetch_add(1, Ordering::SeqCst) < self.max_pending {
            return true;
        }
        self.pending.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Hands `entry`, counted by `reserve`, to the timer thread (waiting
    /// for room if the command queue is full: module doc).
    pub(crate) fn insert_reserved(&self, entry: StdArc<dyn TimerEntry>) {
        let deadline = entry.deadline();
        if let Err(insert) = self.commands.push(Insert { deadline, entry }) {
            self.push_when_there_is_room(insert);
        }
        let backlog = self.backlog.fetch_add(1, Ordering::Relaxed) + 1;
        fence(Ordering::SeqCst);
        if deadline < self.armed.load(Ordering::SeqCst) || backlog == BACKLOG_WAKE {
            self.parker.unpark();
        }
    }

    /// Hands back a periodic task after a run (counted again, whatever the
    /// limit: it was admitted when it was first scheduled).
    pub(crate) fn reinsert(&self, entry: StdArc<dyn TimerEntry>) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        self.insert_reserved(entry);
    }

    /// Counts a cancel of a task the timer may hold (its state is already
    /// CANCELLED), and wakes the timer thread to sweep if the count reached
    /// `sweep_at` (module doc). `Release`: the sweep that reads the count
    /// sees the state.
    pub(crate) fn note_cancelled(&self) {
        let word = self.dead.fetch_add(1, Ordering::AcqRel) + 1;
        let (cancels, sweep_at) = unpack_dead(word);
        if cancels >= sweep_at {
            self.parker.unpark();
        }
    }

    /// Sweeps the cancelled entries out if the count reached `sweep_at`.
    fn sweep_if_due(&self, queue: &mut Queue, now: Nanos) {
        let (cancels, sweep_at) = unpack_dead(self.dead.load(Ordering::Acquire));
        if cancels > 0 && cancels >= sweep_at {
            self.sweep(queue, now);
        }
    }

    /// Removes every cancelled entry from the backend and takes the cancels
    /// it read off the count (module doc). The commands queued when it read
    /// the count are applied first (`now`: as for `apply_commands`), so that
    /// the entry of every cancel it counted is in the backend. Its slots are
    /// given back (`pending`) before the count goes down, so that `reserve`,
    /// which reads the count after a refusal, finds them.
    fn sweep(&self, queue: &mut Queue, now: Nanos) {
        let (cancels, _) = unpack_dead(self.dead.load(Ordering::Acquire));
        self.apply_commands(queue, now);
        // Each entry is dropped as it leaves (freeing its task), before the
        // backend frees its own storage once empty.
        let swept = queue.remove_where(&mut |entry| entry.is_final(), &mut drop);
        if swept > 0 {
            self.pending.fetch_sub(swept, Ordering::SeqCst);
        }
        self.dead.fetch_sub(cancels, Ordering::Release);
    }

    /// Publishes the count of cancels at which a cancel wakes the timer
    /// thread to sweep: half the `held` entries (at least 1). True if the
    /// count already reached it: sweep before sleeping (module doc).
    fn publish_sweep_at(&self, held: usize) -> bool {
        let sweep_at = (held as u64 / 2).clamp(1, MAX_SWEEP_AT);
        let mut word = self.dead.load(Ordering::Acquire);
        if unpack_dead(word).1 != sweep_at {
            let publish = |w: u64| Some(w & DEAD_COUNT | sweep_at << DEAD_COUNT_BITS);
            word = self
                .dead
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, publish)
                .expect("the update always applies");
        }
        unpack_dead(word).0 >= sweep_at
    }

    /// From now on, tasks still pending at shutdown are cancelled, not
    /// waited for (the last handle to the executor is being dropped).
    pub(crate) fn discard_on_shutdown(&self) {
        self.discard_on_shutdown.store(true, Ordering::SeqCst);
        self.parker.unpark();
    }

    /// Wakes the timer thread to look at the pool's state (shutdown).
    pub(crate) fn wake(&self) {
        self.parker.unpark();
    }

    /// The timer thread sleeps until `next` (nanoseconds on the clock), or
    /// until woken; without a deadline if `None`. (Under loom a deadline
    /// never passes: a model wakes it with [`wake`](Self::wake).)
    fn sleep_until(&self, next: Option<Nanos>) {
        let wake_at: Option<Instant> = next.and_then(|n| self.clock.instant_of(n));
        self.parker.park_until(wake_at);
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

    /// Applies the queued commands to the backend; `now` is one clock read
    /// for the whole batch: a wheel places entries relative to it, and a few
    /// microseconds of staleness only make it place them slightly coarser
    /// (never early: deadlines are absolute).
    ///
    /// At most `COMMANDS_CAPACITY` commands per call, so that a scheduler
    /// that keeps the queue filled cannot keep the timer thread applying
    /// (and not handing over) for the whole of its burst: the turn hands
    /// over the due tasks, sees the queue still holds commands, and turns
    /// again. Returns true if it emptied the queue.
    fn apply_commands(&self, queue: &mut Queue, now: Nanos) -> bool {
        self.backlog.store(0, Ordering::Relaxed);
        let mut applied = 0;
        while applied < COMMANDS_CAPACITY {
            let Some(Insert { deadline, entry }) = self.commands.pop() else {
                break;
            };
            self.place(queue, deadline, entry, now);
            applied += 1;
        }
        if applied > 0 {
            // Schedulers waiting for room (cheap when there are none).
            self.room.notify_all();
        }
        applied < COMMANDS_CAPACITY
    }

    /// Puts `entry` in the backend (an insert, or an entry put back after
    /// `shutdown`), unless the shutdown policies drop it. An entry cancelled
    /// meanwhile goes in too: its cancel was counted, and a sweep takes it
    /// out (module doc); not looking saves reading the task here.
    fn place(&self, queue: &mut Queue, deadline: Nanos, entry: StdArc<dyn TimerEntry>, now: Nanos) {
        if self.dropped_on_shutdown(&*entry) {
            self.cancel_dropped(entry);
            return;
        }
        queue.insert(now, deadline, entry);
    }

    /// An entry left the timer without being handed over.
    fn discard(&self, entry: StdArc<dyn TimerEntry>) {
        drop(entry);
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// True if the shutdown policies in force drop `entry` (see
    /// `shutdown_filter`).
    fn dropped_on_shutdown(&self, entry: &dyn TimerEntry) -> bool {
        match self.shutdown_filter.load(Ordering::Relaxed) {
            DROP_ALL => true,
            DROP_PERIODIC => entry.is_periodic(),
            _ => false,
        }
    }

    /// An entry the shutdown policies drop: cancelled later, outside the
    /// lock (module doc). The caller holds the `queue` lock.
    fn cancel_dropped(&self, entry: Entry) {
        self.doomed.lock().push(entry);
    }

    /// Takes the entries the shutdown policies dropped (the caller holds
    /// the `queue` lock), for [`cancel_doomed`](Self::cancel_doomed).
    fn take_doomed(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.doomed.lock())
    }

    /// Cancels entries taken by `take_doomed`, without the lock, reporting
    /// panics of their user code through `ctx`, then takes them off
    /// `pending`.
    fn cancel_doomed(&self, doomed: Vec<Entry>, ctx: &dyn TaskContext) {
        let n = doomed.len();
        for entry in doomed {
            entry.into_job().cancel(ctx);
        }
        self.pending.fetch_sub(n, Ordering::SeqCst);
    }

    /// After `shutdown`: cancels the tasks the policies do not keep (all of
    /// them once the executor is dropped). The backend is purged once per
    /// policy (an O(n) pass); entries placed afterwards are filtered by
    /// `place`.
    fn cancel_on_shutdown(&self, queue: &mut Queue, now: Nanos) {
        let filter = if self.discard_on_shutdown.load(Ordering::SeqCst) {
            DROP_ALL
        } else if self.keep_periodic_on_shutdown {
            KEEP_ALL
        } else {
            DROP_PERIODIC
        };
        if self.shutdown_filter.load(Ordering::Relaxed) == filter {
            return;
        }
        self.shutdown_filter.store(filter, Ordering::Relaxed);
        let mut kept = Vec::new();
        for entry in queue.drain() {
            if entry.is_final() {
                self.discard(entry);
            } else if self.dropped_on_shutdown(&*entry) {
                self.cancel_dropped(entry);
            } else {
                kept.push(entry);
            }
        }
        // Put back in the order `drain` gave them (earliest first where the
        // backend knows it cheaply).
        for entry in kept {
            self.place(queue, entry.deadline(), entry, now);
        }
    }

    /// Takes every task out (for `shutdown_now`): those in the backend,
    /// those still in the command queue, and those the shutdown policies
    /// dropped that the timer thread has not cancelled yet.
    pub(crate) fn drain(&self) -> Vec<Job> {
        let mut queue = self.queue.lock();
        while !self.apply_commands(&mut queue, self.clock.now()) {}
        let mut entries = queue.drain();
        entries.append(&mut self.take_doomed());
        self.pending.fetch_sub(entries.len(), Ordering::SeqCst);
        entries.into_iter().map(|entry| entry.into_job()).collect()
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
    /// Whether some worker sleeps (a racy hint, for the spin before a
    /// deadline).
    fn some_worker_sleeps(&self) -> bool;
}

/// The body of the timer thread of `pool`, which spins for at most `spin`
/// nanoseconds before a deadline (`waiting`). The pool marks the thread as
/// its own before it calls this.
pub(crate) fn run(pool: &impl Workers, spin: Nanos) {
    let clock = pool.timer().clock;
    run_with_clock(pool, || clock.now(), Waiting::new(spin));
}

/// The timer thread's loop, reading the time from `now` (the executor's
/// clock; a model's explicit time under loom, which does not model time:
/// there `waiting` never spins).
fn run_with_clock(pool: &impl Workers, now: impl Fn() -> Nanos, mut waiting: Waiting) {
    let timer = pool.timer();
    loop {
        match turn(pool, &now) {
            Turn::Exit => {
                timer.timer_thread_exits();
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
enum Turn {
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
/// will sleep until (`armed`) and look for commands once more (module doc).
/// Entries the shutdown policies dropped are cancelled after the lock is
/// released, and the turn is taken again (`pending` changed).
fn turn(pool: &impl Workers, now: impl Fn() -> Nanos) -> Turn {
    let timer = pool.timer();
    timer.armed.store(0, Ordering::SeqCst);
    let (locked, doomed) = {
        let mut queue = timer.queue.lock();
        let locked = turn_locked(pool, &mut queue, now);
        (locked, timer.take_doomed())
    };
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
    timer
        .armed
        .store(next.unwrap_or(u64::MAX), Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if sweep_again || !timer.commands.is_empty() {
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
fn turn_locked(pool: &impl Workers, queue: &mut Queue, now: impl Fn() -> Nanos) -> Option<Rest> {
    let timer = pool.timer();
    timer.apply_commands(queue, now());
    hand_over_due(pool, queue, now());
    timer.sweep_if_due(queue, now());
    if pool.is_stopped() {
        return None;
    }
    if pool.is_shut_down() {
        timer.cancel_on_shutdown(queue, now());
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

/// Pushes every due task on the injector (under the backend lock: see the
/// module doc) and wakes a worker for them: right after the first push, so
/// that the workers start on a large batch (a wheel's tick can hold
/// thousands) while the rest is still being popped, and once more after
/// the last, in case the first woken worker went back to sleep meanwhile.
/// (Each call wakes a worker only if none is searching and one sleeps; a
/// worker that takes a batch from the injector announces the rest.)
///
/// A cancelled task that fell due before a sweep took it out is pushed
/// too, and the worker skips it: looking at its state here would cost the
/// timer thread a cache miss on every task it hands over.
fn hand_over_due(pool: &impl Workers, queue: &mut Queue, now: Nanos) {
    let mut handed = 0;
    while let Some((_, entry)) = queue.pop_due(now) {
        pool.hand_over(entry.into_job());
        handed += 1;
        if handed == 1 {
            pool.notify();
        }
    }
    if handed > 0 {
        // Only after the pushes: a task leaves `pending` once it is on the
        // injector (module doc).
        pool.timer().pending.fetch_sub(handed, Ordering::SeqCst);
        if handed > 1 {
            pool.notify();
        }
    }
}

/// An entry that is never handed over: only its identity matters.
#[cfg(test)]
struct Probe(Nanos);

#[cfg(test)]
impl TimerEntry for Probe {
    fn deadline(&self) -> Nanos {
        self.0
    }
    fn is_final(&self) -> bool {
        false
    }
    fn into_job(self: StdArc<Self>) -> Job {
        unreachable!("no timer thread hands it over")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The address of an entry, to compare identities across trait objects.
    fn address<T: ?Sized>(entry: &StdArc<T>) -> *const () {
        StdArc::as_ptr(entry).cast()
    }

    fn keep_delayed() -> ShutdownPolicy {
        ShutdownPolicy {
            keep_delayed: true,
            keep_periodic: false,
        }
    }

    /// Schedules each entry on `timer`.
    fn insert_all(timer: &Timer, entries: &[StdArc<Probe>]) {
        for entry in entries {
            assert!(timer.reserve());
            timer.insert_reserved(entry.clone());
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
        insert_all(&timer, &[StdArc::new(Probe(7))]);
        timer.spin_until(1_000, || 0);
    }

    #[test]
    fn a_scheduler_waits_for_the_timer_thread_to_make_room() {
        let timer = StdArc::new(Timer::new(TimerQueue::heap(), keep_delayed(), usize::MAX));
        // Equal deadlines, so the backend keeps the order they were applied in.
        let count = 3 * COMMANDS_CAPACITY + 5;
        let entries: Vec<StdArc<Probe>> = (0..count).map(|_| StdArc::new(Probe(7))).collect();
        let scheduler = {
            let (timer, entries) = (StdArc::clone(&timer), entries.clone());
            std::thread::spawn(move || insert_all(&timer, &entries))
        };
        // The scheduler fills the queue, then waits: it places nothing in
        // the backend itself (the memory a backend grows into belongs to
        // the timer thread: module doc).
        while timer.backlog.load(Ordering::Relaxed) < COMMANDS_CAPACITY
            && timer.queue.lock().len() == 0
            && !scheduler.is_finished()
        {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(timer.queue.lock().len(), 0, "the scheduler applied nothing");
        assert!(!scheduler.is_finished(), "it waits for room");
        // Here the test plays the timer thread.
        let mut placed = 0;
        while placed < count {
            let mut queue = timer.queue.lock();
            timer.apply_commands(&mut queue, timer.clock.now());
            placed = queue.len();
        }
        scheduler.join().unwrap();
        assert_eq!(timer.pending(), count);
        let placed: Vec<_> = timer.queue.lock().drain().iter().map(address).collect();
        let submitted: Vec<_> = entries.iter().map(address).collect();
        assert_eq!(placed, submitted, "submission order");
    }

    #[test]
    fn once_the_timer_thread_exited_a_full_command_queue_is_applied_by_its_scheduler() {
        let timer = Timer::new(TimerQueue::heap(), keep_delayed(), usize::MAX);
        timer.timer_thread_exits();
        let count = 3 * COMMANDS_CAPACITY + 5;
        let entries: Vec<StdArc<Probe>> = (0..count).map(|_| StdArc::new(Probe(7))).collect();
        insert_all(&timer, &entries);
        assert_eq!(timer.pending(), count);
        let mut queue = timer.queue.lock();
        assert_eq!(
            queue.len(),
            3 * COMMANDS_CAPACITY,
            "three full queues applied"
        );
        timer.apply_commands(&mut queue, timer.clock.now());
        let placed: Vec<_> = queue.drain().iter().map(address).collect();
        let submitted: Vec<_> = entries.iter().map(address).collect();
        assert_eq!(placed, submitted, "submission order");
    }
}

/// loom models of the timer thread's protocols (`RUSTFLAGS="--cfg loom"`,
/// see `loom-tests/README.md`). loom does not model time: the timer thread
/// runs its real turns ([`turn`], [`run_with_clock`]) on an explicit clock,
/// its timed sleep ends only when it is woken, and a model that lets time
/// pass moves its clock and then wakes the timer thread (which is what the
/// end of a timed wait does). Deadlines are far beyond the wall clock, so
/// that nothing depends on it.
///
/// * `earlier_deadline_rearms_the_waiter`: the timer thread sleeps until a
///   task's deadline while a task due earlier is scheduled. Asserted: it
///   does not stay asleep past the earlier deadline: it is woken, or sees
///   the command before it parks, and re-arms for the earlier deadline (if
///   it slept on, loom would report the deadlock); nothing is handed over
///   early; `pending` counts both tasks.
/// * `full_queue_waits_for_the_timer_thread`: the timer thread sleeps
///   until a placed task's deadline, with one command queued, while one
///   thread schedules an earlier task and another a later one; the second
///   of them to push may find the command queue (2 commands under loom)
///   full and wait for room. Asserted: the timer thread re-arms for the
///   earlier deadline, and every waiting scheduler is let through (a lost
///   signal of `room`, or a scheduler that waits without waking the timer
///   thread, is a deadlock); `pending` is 4.
/// * `full_queue_vs_shutdown_now`: the command queue is full when the
///   timer thread starts, and a third task is scheduled while
///   `shutdown_now` stops the pool: its scheduler may wait for room while
///   the timer thread exits. Asserted: it is let through (it applies the
///   queue itself once the timer thread has exited; waiting on would be a
///   deadlock, as `shutdown_now` waits for it), and `shutdown_now` returns
///   every admitted task exactly once, with `pending` back to 0.
/// * `full_queue_as_the_timer_thread_exits`: three inserts (one more than
///   the command queue holds) while the timer thread exits without taking
///   any. Asserted: the third is let through (it applies the queue itself,
///   if need be after waking from its wait: a scheduler that waits on
///   after the exit, or an exit that does not signal `room`, is a
///   deadlock), and all three are in the backend or the queue.
/// * `due_task_is_handed_to_a_worker_once`: a task scheduled for later
///   falls due (the model's clock passes its deadline, then it wakes the
///   timer thread), and the timer thread hands it to a real worker thread
///   (the injector, then the sleep protocol's wake-up). Asserted: the
///   caller's `join` sees its result, it ran exactly once, `pending` is
///   back to 0 (a second hand-over would take it below), and after
///   `shutdown` the worker and the timer thread exit.
/// * `due_task_vs_shutdown_now`: the timer thread hands a task that fell
///   due to the injector while `shutdown_now` drains the timer, then the
///   injector (no worker: nothing else takes it). Asserted: the task is
///   returned exactly once (from the backend, the command queue or the
///   injector: never lost between them, never both) and `pending` is 0.
/// * `periodic_rearm_vs_shutdown`: a periodic task, due at once, runs on a
///   real worker and re-arms while the main thread calls `shutdown` (which
///   does not keep periodic tasks). Asserted: it runs at most once, ends
///   CANCELLED (its join says so), its closure is dropped once, `pending`
///   is 0, and the worker and the timer thread exit (a re-armed entry that
///   nobody removes would keep them waiting: deadlock).
/// * `cancel_vs_sweep`: a cancel races with the timer thread's turn (its
///   placing of the entry, its publication of `sweep_at` and its last look
///   at the count before it sleeps). Asserted: the entry is swept out
///   either way (the timer thread runs until the backend is empty; a
///   missed sweep would leave it asleep: deadlock), `pending` is exactly 0
///   and the closure was dropped once.
/// * `cancel_vs_shutdown_keeping_delayed`: the same race after `shutdown`,
///   when the first turn after it takes the kept delayed tasks out and
///   puts them back (`cancel_on_shutdown`'s purge). Asserted as above. (A
///   regression model from the earlier removal-by-key protocol, where a
///   cancel that read a key the purge had just made stale left its entry,
///   and `pending`, until its deadline.)
/// * `discarded_at_shutdown_before_the_workers_exit`: the shutdown
///   policies discard a delayed task (as when the last executor handle is
///   dropped) while a real worker waits to exit. The timer thread moves
///   the entry to `doomed` under the lock and cancels it after releasing
///   the lock, its closure's destructor (user code) running outside it.
///   Asserted: the worker exits only after the closure was dropped (the
///   entry stays counted in `pending` until it is cancelled), the handle
///   says cancelled, `pending` is 0, and both threads exit.
/// * `discarded_at_shutdown_vs_shutdown_now`: the same discard races with
///   `shutdown_now`, whose drain also takes what `doomed` holds. Asserted:
///   the task is cancelled by the timer thread or returned by
///   `shutdown_now`, exactly one of the two; its closure is dropped once;
///   `pending` is 0.
/// * `reserve_after_cancel_at_the_limit`: room for one task; it is
///   scheduled and cancelled, and another scheduled, while the timer thread
///   takes a turn (placing the first entry, sweeping). Asserted: the second
///   is admitted whatever the interleaving (a sweep that counted the cancel
///   before its entry was placed, or lowered the count before giving the
///   slot back, made `reserve` refuse it), and `pending` is 1.
/// * `two_cancels_reach_sweep_at`: four entries (so `sweep_at` is 2), two
///   of them cancelled by two threads at once while the timer thread turns.
///   Asserted: the second cancel to be counted leads to a sweep (the timer
///   thread runs until it holds two entries: a lost wake-up is a
///   deadlock), the two live entries stay, and `pending` is 2.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom_support::{
        bare_pool, join_all, model, schedule_periodic, spawn_workers, DropCounter, DEFAULT_POLICY,
    };
    use crate::pool::Pool;
    use crate::scheduled::ScheduledHandle;
    use crate::sync::{thread, Arc};

    /// Deadlines no wall clock reaches (about 146 and 292 years).
    const EARLIER: Nanos = 1 << 62;
    const LATER: Nanos = 1 << 63;

    /// Schedules `f` at `deadline`, the time being `now` (the real
    /// submission path: admission, `reserve`, `insert_reserved`).
    fn schedule<T: Send + 'static>(
        pool: &Arc<Pool>,
        f: impl FnOnce() -> T + Send + 'static,
        now: Nanos,
        deadline: Nanos,
    ) -> ScheduledHandle<T> {
        crate::loom_support::schedule(pool, f, now, deadline).expect("the pool accepts it")
    }

    /// Runs the timer thread's turns at time 0 until `done` says so after
    /// a turn that would sleep; sleeps otherwise.
    fn turns_until(pool: &Pool, mut done: impl FnMut(Option<Nanos>, usize) -> bool) {
        loop {
            match turn(pool, || 0) {
                Turn::Exit => panic!("the timer thread exits only when the pool stops"),
                Turn::Again => continue,
                Turn::Sleep { next, held } => {
                    if done(next, held) {
                        return;
                    }
                    pool.timer.sleep_until(next);
                }
            }
        }
    }

    #[test]
    fn earlier_deadline_rearms_the_waiter() {
        model("timer::earlier_deadline_rearms_the_waiter", || {
            let (pool, _) = bare_pool(1, Default::default());
            let _later = schedule(&pool, || (), 0, LATER);
            let timer = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || turns_until(&pool, |next, _| next == Some(EARLIER)))
            };
            let _earlier = schedule(&pool, || (), 0, EARLIER);
            timer.join().unwrap();
            assert_eq!(pool.timer.armed.load(Ordering::SeqCst), EARLIER);
            assert_eq!(pool.timer.pending(), 2);
            assert!(pool.injector.is_empty(), "nothing is due yet");
        });
    }

    #[test]
    fn full_queue_waits_for_the_timer_thread() {
        model("timer::full_queue_waits_for_the_timer_thread", || {
            let (pool, _) = bare_pool(1, Default::default());
            let _placed = schedule(&pool, || (), 0, LATER);
            turns_until(&pool, |next, _| next == Some(LATER));
            // One command queued (capacity 2 under loom): of the two
            // inserts below, the second finds the queue full unless the
            // timer thread took a command first, and waits for room.
            let _queued = schedule(&pool, || (), 0, LATER);
            let timer = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || turns_until(&pool, |next, _| next == Some(EARLIER)))
            };
            let earlier = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || drop(schedule(&pool, || (), 0, EARLIER)))
            };
            let _last = schedule(&pool, || (), 0, LATER);
            earlier.join().unwrap();
            timer.join().unwrap();
            assert_eq!(pool.timer.pending(), 4);
            assert!(pool.injector.is_empty(), "nothing is due yet");
        });
    }

    #[test]
    fn full_queue_vs_shutdown_now() {
        model("timer::full_queue_vs_shutdown_now", || {
            let (pool, _) = bare_pool(1, Default::default());
            // Two commands: the queue is full (capacity 2 under loom).
            let _first = schedule(&pool, || (), 0, LATER);
            let _second = schedule(&pool, || (), 0, LATER);
            let timer = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
            };
            let third = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || crate::loom_support::schedule(&pool, || (), 0, LATER).is_ok())
            };
            let returned = pool.shutdown_now();
            let admitted = third.join().unwrap();
            timer.join().unwrap();
            assert_eq!(returned.len(), 2 + usize::from(admitted), "each once");
            assert_eq!(pool.timer.pending(), 0);
        });
    }

    #[test]
    fn full_queue_as_the_timer_thread_exits() {
        model("timer::full_queue_as_the_timer_thread_exits", || {
            let timer = Arc::new(Timer::new(TimerQueue::heap(), DEFAULT_POLICY, usize::MAX));
            let exit = {
                let timer = Arc::clone(&timer);
                thread::spawn(move || timer.timer_thread_exits())
            };
            for _ in 0..3 {
                assert!(timer.reserve());
                timer.insert_reserved(StdArc::new(Probe(LATER)));
            }
            exit.join().unwrap();
            assert_eq!(timer.pending(), 3);
            let mut queue = timer.queue.lock();
            assert!(timer.apply_commands(&mut queue, 0), "the queue empties");
            assert_eq!(queue.len(), 3);
        });
    }

    #[test]
    fn due_task_is_handed_to_a_worker_once() {
        model("timer::due_task_is_handed_to_a_worker_once", || {
            const DUE: Nanos = 5;
            let (pool, deques) = bare_pool(1, Default::default());
            let clock = Arc::new(AtomicU64::new(0));
            let workers = spawn_workers(&pool, deques);
            let timer = {
                let (pool, clock) = (Arc::clone(&pool), Arc::clone(&clock));
                thread::spawn(move || {
                    run_with_clock(&*pool, || clock.load(Ordering::SeqCst), Waiting::new(0))
                })
            };
            let ran = Arc::new(AtomicUsize::new(0));
            let r = Arc::clone(&ran);
            let handle = schedule(
                &pool,
                move || {
                    r.fetch_add(1, Ordering::SeqCst);
                    7
                },
                0,
                DUE,
            );
            // The deadline passes: what ends the timer thread's timed wait.
            clock.store(DUE, Ordering::SeqCst);
            pool.timer.wake();
            assert_eq!(handle.join().ok(), Some(7));
            pool.shutdown();
            join_all(workers);
            timer.join().unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 1);
            assert_eq!(pool.timer.pending(), 0);
        });
    }

    #[test]
    fn due_task_vs_shutdown_now() {
        model("timer::due_task_vs_shutdown_now", || {
            const DUE: Nanos = 5;
            let (pool, _) = bare_pool(1, Default::default());
            let task = schedule(&pool, || 7, 0, DUE);
            let timer = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || run_with_clock(&*pool, || DUE, Waiting::new(0)))
            };
            let returned = pool.shutdown_now();
            timer.join().unwrap();
            assert_eq!(returned.len(), 1, "returned exactly once");
            assert_eq!(pool.timer.pending(), 0);
            assert!(!pool.has_visible_work());
            drop(returned);
            assert!(task.is_cancelled());
        });
    }

    #[test]
    fn periodic_rearm_vs_shutdown() {
        model("timer::periodic_rearm_vs_shutdown", || {
            let (pool, deques) = bare_pool(1, Default::default());
            let (runs, drops) = (Arc::new(AtomicUsize::new(0)), DropCounter::new());
            let (r, guard) = (Arc::clone(&runs), drops.guard());
            let period = crate::task::Period::FixedRate {
                period: LATER,
                missed: crate::task::MissedRuns::Burst,
            };
            let task = schedule_periodic(
                &pool,
                move || {
                    let _keep = &guard;
                    r.fetch_add(1, Ordering::SeqCst);
                },
                0,
                period,
            )
            .expect("the pool accepts it");
            let workers = spawn_workers(&pool, deques);
            let timer = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
            };
            pool.shutdown();
            join_all(workers);
            timer.join().unwrap();
            assert!(runs.load(Ordering::SeqCst) <= 1);
            assert!(task.join().is_err_and(|e| e.is_cancelled()));
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
            assert_eq!(pool.timer.pending(), 0);
        });
    }

    /// A cancel racing with the timer thread's placing of the entry; with
    /// `shut_down`, after `shutdown` (see the module doc).
    fn race_cancel_with_place(shut_down: bool) {
        let (pool, _) = bare_pool(1, Default::default());
        let drops = DropCounter::new();
        let guard = drops.guard();
        let handle = schedule(&pool, move || drop(guard), 0, LATER);
        if shut_down {
            pool.shutdown();
        }
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || turns_until(&pool, |_, held| held == 0))
        };
        assert!(handle.cancel());
        timer.join().unwrap();
        // A removal the timer thread did not need may still be queued.
        assert!(pool.timer.drain().is_empty());
        assert_eq!(pool.timer.pending(), 0);
        assert_eq!(drops.drops(), 1);
    }

    #[test]
    fn cancel_vs_sweep() {
        model("timer::cancel_vs_sweep", || race_cancel_with_place(false));
    }

    #[test]
    fn reserve_after_cancel_at_the_limit() {
        model("timer::reserve_after_cancel_at_the_limit", || {
            let timer = Timer::new(TimerQueue::heap(), DEFAULT_POLICY, 1);
            let pool = Arc::new(Pool::new(1, Default::default(), timer).0);
            let first = schedule(&pool, || (), 0, LATER);
            let turning = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let _ = turn(&*pool, || 0);
                })
            };
            assert!(first.cancel());
            let second = crate::loom_support::schedule(&pool, || (), 0, LATER);
            turning.join().unwrap();
            assert!(second.is_ok(), "the cancelled task's slot is free");
            assert_eq!(pool.timer.pending(), 1);
        });
    }

    #[test]
    fn two_cancels_reach_sweep_at() {
        model("timer::two_cancels_reach_sweep_at", || {
            let (pool, _) = bare_pool(1, Default::default());
            // Two at a time (the command queue holds two under loom); the
            // timer thread places them and publishes `sweep_at` = 2.
            let mut handles: Vec<_> = (0..2).map(|_| schedule(&pool, || (), 0, LATER)).collect();
            turns_until(&pool, |_, held| held == 2);
            handles.extend((0..2).map(|_| schedule(&pool, || (), 0, LATER)));
            turns_until(&pool, |_, held| held == 4);
            let mut handles = handles.into_iter();
            let cancellers: Vec<_> = handles
                .by_ref()
                .take(2)
                .map(|h| thread::spawn(move || assert!(h.cancel())))
                .collect();
            let timer = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || turns_until(&pool, |_, held| held == 2))
            };
            join_all(cancellers);
            timer.join().unwrap();
            assert_eq!(pool.timer.pending(), 2);
            assert!(handles.all(|h| !h.is_finished()), "the live entries stay");
        });
    }

    #[test]
    fn discarded_at_shutdown_before_the_workers_exit() {
        model(
            "timer::discarded_at_shutdown_before_the_workers_exit",
            || {
                let (pool, deques) = bare_pool(1, Default::default());
                pool.timer.discard_on_shutdown();
                let drops = DropCounter::new();
                let guard = drops.guard();
                let task = schedule(&pool, move || drop(guard), 0, LATER);
                let workers = spawn_workers(&pool, deques);
                let timer = {
                    let pool = Arc::clone(&pool);
                    thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
                };
                pool.shutdown();
                join_all(workers);
                assert_eq!(drops.drops(), 1, "the worker exited after the cancel");
                timer.join().unwrap();
                assert!(task.is_cancelled());
                assert_eq!(pool.timer.pending(), 0);
            },
        );
    }

    #[test]
    fn discarded_at_shutdown_vs_shutdown_now() {
        model("timer::discarded_at_shutdown_vs_shutdown_now", || {
            let (pool, _) = bare_pool(1, Default::default());
            pool.timer.discard_on_shutdown();
            let drops = DropCounter::new();
            let guard = drops.guard();
            let task = schedule(&pool, move || drop(guard), 0, LATER);
            let timer = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
            };
            pool.shutdown();
            let returned = pool.shutdown_now();
            let returned_count = returned.len();
            for job in returned {
                job.cancel(&*pool);
            }
            timer.join().unwrap();
            assert!(returned_count <= 1);
            assert!(task.is_cancelled());
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
            assert_eq!(pool.timer.pending(), 0);
        });
    }

    #[test]
    fn cancel_vs_shutdown_keeping_delayed() {
        model("timer::cancel_vs_shutdown_keeping_delayed", || {
            race_cancel_with_place(true)
        });
    }
}

//! The command queue: how schedulers hand tasks to the timer thread
//! without its lock, when they wake it, and how they wait for room.
//!
//! # Feeding it without a lock
//!
//! Scheduling and cancelling threads do not touch the backend while the
//! timer thread keeps up. A scheduler pushes an insert command on a bounded
//! lock-free queue (a [`Ring`]) and wakes the timer thread only when it
//! must see the command before it would wake anyway. (Here the timer
//! thread stands for whoever holds the lead: a leading worker publishes
//! `armed` and is woken the same way, on its own parker; see `lead`.)
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
//! * A push that finds the backlog at `BACKLOG_WAKE` (half the queue) or
//!   more also wakes it, so that the queue rarely fills. Only one push in
//!   `BACKLOG_CHECK` looks, at the distance between its own position and
//!   the consumer's: no counter of its own, which would be one more locked
//!   instruction per insert.
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
//! Why schedulers wait rather than apply the queue themselves: the memory
//! a backend grows into must belong to the timer thread. A vector that a
//! scheduler's insert grew would come from the scheduler's allocator arena,
//! the one its tasks come from too; glibc keeps the freed tasks of that
//! arena in its fastbins until a large allocation or free there
//! consolidates them all at once, under the arena's lock. After a million
//! tasks freed by the workers (the `timer-fire` workload), the timer
//! thread's first growth or release of such a vector does that: one long
//! `malloc_consolidate`, during which no task is handed over (measured:
//! see `benches/README.md`, "The command queue: schedulers wait for room,
//! and it is bounded").
//!
//! Why bounded: the queue never allocates (4,096 commands of 24 bytes and
//! their sequence numbers, 128 KiB, allocated with the timer). An
//! unbounded queue such as crossbeam's `Injector` allocates a 2 KiB block
//! every 63 pushes, which the timer thread frees: under a burst the two
//! threads take turns at glibc's arena lock (measured: the same section).
//! And a burst can run at most 4,096 commands ahead of the timer
//! thread, so the tasks that fall due during it are not held up behind a
//! backlog of a million inserts.
//!
//! [`Ring`]: crate::sync::ring::Ring

use crate::sync::{fence, CellArc, Ordering};
use crate::task::Delayed;
use crate::time::Nanos;

use super::{Entry, Queue, Timer};

/// The most commands the queue holds (module doc); 2 under loom, so that
/// the models reach a full queue.
#[cfg(not(loom))]
pub(crate) const COMMANDS_CAPACITY: usize = 4096;
#[cfg(loom)]
pub(crate) const COMMANDS_CAPACITY: usize = 2;

/// A push that finds a backlog of this wakes the timer thread: half the
/// queue (never under loom: the models' queue fills instead).
pub(super) const BACKLOG_WAKE: usize = COMMANDS_CAPACITY / 2;

/// One push in this many (by position) looks at the backlog: often enough
/// that a burst is seen long before the queue fills, rarely enough that
/// the look (a read of the consumer's position, a line the timer thread
/// writes) costs nothing per insert.
const BACKLOG_CHECK: usize = 64;

/// A task for the timer thread to place. The deadline travels with it, so
/// that placing it does not read the task (a cache line another core wrote).
pub(crate) struct Insert {
    deadline: Nanos,
    entry: CellArc<dyn Delayed>,
}

impl Timer {
    /// Counts a new scheduled task against the limit; false (and nothing
    /// counted) if the timer already holds `max_pending` live tasks (it
    /// sweeps the cancelled ones out before it says so). Called inside the
    /// submission's admission (see the driver's doc on `pending`); a `true`
    /// must be followed by [`insert_reserved`](Self::insert_reserved).
    /// What a sweep removed goes to `swept`, for the caller to drop once
    /// its admission ended ([`drop_swept`](super::sweep::drop_swept)).
    pub(crate) fn reserve(&self, swept: &mut Vec<Entry>) -> bool {
        if self.try_reserve() {
            return true;
        }
        // Sweeps the cancelled tasks out if a cancel is counted (see
        // `sweep`): the try below then sees their slots.
        self.sweep_for_room(swept);
        self.try_reserve()
    }

    /// Pushes `insert` on the full command queue once the timer thread has
    /// taken commands out: waits on `room` under the backend lock, which
    /// every taking of commands holds and signals (so a wait never misses
    /// one). If the timer thread has exited (the pool stopped), applies the
    /// queue here instead, as nobody else will before `shutdown_now`
    /// drains it; so does a thread that would wait for itself: a timer
    /// thread (user code it runs: a destructor, a waker) or one ringing
    /// alarms (a waker that schedules), whose turn makes the room.
    #[cold]
    fn push_when_there_is_room(&self, mut insert: Insert) {
        let mut queue = self.queue.lock();
        let makes_the_room = super::is_timer_thread() || super::help::is_ringing();
        loop {
            match self.commands.push(insert) {
                Ok(_) => return,
                Err(back) => insert = back,
            }
            if makes_the_room
                || self.exited.load(Ordering::Relaxed)
                || self.schedulers_apply.load(Ordering::Relaxed)
            {
                self.apply_commands(&mut queue, self.clock.now());
            } else {
                // The timer thread is most likely awake already (the
                // backlog woke it at `BACKLOG_WAKE`); this makes sure.
                self.wake_waiter();
                self.parker.unpark();
                queue = self.room.wait(queue);
            }
        }
    }

    /// The timer thread, while a worker leads, applies a backlog of
    /// commands (a burst the leader, busy, has not taken) so that its
    /// schedulers do not wait for room, then wakes the leader: a command
    /// applied here may be due before the deadline it sleeps until (as
    /// for `reserve`'s sweep, module doc).
    pub(super) fn apply_backlog(&self) {
        {
            let mut queue = self.queue.lock();
            self.apply_commands(&mut queue, self.clock.now());
        }
        self.wake_waiter();
    }

    /// Called by the timer thread as it exits: from now on a scheduler
    /// that finds the command queue full applies it itself, and one that
    /// waits for room is woken to do so.
    pub(crate) fn timer_thread_exits(&self) {
        let _queue = self.queue.lock();
        self.exited.store(true, Ordering::Relaxed);
        self.room.notify_all();
    }

    /// Called by `shutdown_now` before it waits for the submissions in
    /// flight: from now on a scheduler that finds the command queue full
    /// applies it itself, and one waiting for room is woken to do so. (The
    /// caller may be the timer thread, from a waker or a destructor it
    /// runs: it would make no room while it waits for them.)
    pub(crate) fn schedulers_apply(&self) {
        let _queue = self.queue.lock();
        self.schedulers_apply.store(true, Ordering::Relaxed);
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
    pub(crate) fn insert_reserved(&self, entry: CellArc<dyn Delayed>) {
        let deadline = entry.deadline();
        // Every `BACKLOG_CHECK`th position looks at the backlog (module
        // doc): a hint, read without a counter of its own.
        let sampled = match self.commands.push(Insert { deadline, entry }) {
            Ok(position) => Some(position).filter(|p| p % BACKLOG_CHECK == 0),
            Err(insert) => {
                self.push_when_there_is_room(insert);
                None
            }
        };
        fence(Ordering::SeqCst);
        if deadline < self.armed.load(Ordering::SeqCst)
            || (!cfg!(loom) && sampled.is_some_and(|p| self.commands.backlog_at(p) >= BACKLOG_WAKE))
        {
            self.wake_waiter();
        }
    }

    /// Hands back a periodic task after a run (counted again, whatever the
    /// limit: it was admitted when it was first scheduled).
    pub(crate) fn reinsert(&self, entry: CellArc<dyn Delayed>) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        self.insert_reserved(entry);
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
    pub(crate) fn apply_commands(&self, queue: &mut Queue, now: Nanos) -> bool {
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
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::tests::{address, insert_all, keep_delayed};
    use super::super::{Probe, TimerQueue};
    use super::*;

    #[test]
    fn a_scheduler_waits_for_the_timer_thread_to_make_room() {
        let timer = std::sync::Arc::new(Timer::new(TimerQueue::heap(), keep_delayed(), usize::MAX));
        // Equal deadlines, so the backend keeps the order they were applied in.
        let count = 3 * COMMANDS_CAPACITY + 5;
        let entries: Vec<CellArc<Probe>> = (0..count).map(|_| CellArc::new(Probe(7))).collect();
        let scheduler = {
            let (timer, entries) = (std::sync::Arc::clone(&timer), entries.clone());
            std::thread::spawn(move || insert_all(&timer, &entries))
        };
        // The scheduler fills the queue, then waits: it places nothing in
        // the backend itself (the memory a backend grows into belongs to
        // the timer thread: module doc).
        while timer.commands.len_hint() < COMMANDS_CAPACITY
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
        let entries: Vec<CellArc<Probe>> = (0..count).map(|_| CellArc::new(Probe(7))).collect();
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

//! Leader-follower timing: an idle worker waits for time itself.
//!
//! # Why
//!
//! With a timer thread alone, every task that falls due crosses threads
//! twice: the timer thread wakes at its deadline and pushes it on the
//! injector, then wakes a worker to run it; a periodic task's next run is
//! a command back to the timer thread. With 10,000 periodic tasks (the
//! `periodic` workload) those wake-ups are most of the CPU the pool uses.
//! So, as in the JDK's `DelayedWorkQueue` (its *leader*), an idle worker
//! waits for the next deadline itself and runs what falls due; unlike the
//! JDK's leader it keeps the lead while it runs what it took, so a dense
//! schedule never leaves the worker that holds the timer and no thread is
//! woken to hand a task over (measured: `benches/README.md`, lever 5).
//!
//! # The lead
//!
//! `Timer::lead` says who waits for time: the timer thread
//! ([`TIMER_THREAD`]) or one worker. Only the holder takes turns that
//! publish `armed` (the deadline schedulers compare theirs with, see
//! `commands`); a scheduler that must wake the waiter wakes the holder
//! ([`Timer::wake_waiter`]).
//!
//! * **Taking it.** A worker that finds no work takes the lead from the
//!   timer thread by compare-and-swap (never from another worker), then
//!   takes a turn ([`lead_turn`]): under the backend lock it applies the
//!   commands and moves what is due into its own deque (alarms are rung
//!   after the lock). If it took tasks, it runs them and turns again when
//!   it runs out: it keeps the lead. If nothing was due, it publishes
//!   `armed` and sleeps as an idle worker does (on its own parker, in the
//!   sleepers list, so new work wakes it), until the deadline.
//! * **Giving it back.** The timer thread takes the lead back, under the
//!   backend lock, when the pool is shut down (the shutdown duties stay on
//!   the timer thread) and when the leading worker is stuck: awake, and
//!   without a turn for a whole [`GRACE`] (it runs a long task), while
//!   that holds something up: an entry is due, a command waits (which
//!   the leader applies only at a turn; a scheduler wakes nobody while
//!   `armed` is 0), or a sweep is due. A leader that holds nothing up
//!   keeps the lead for an [`IDLE_GRACE`]: a busy pool with no timers
//!   went through a rescue and a take-back every few milliseconds
//!   (`benches/README.md`); after that, the timer thread takes it all the
//!   same, so that it sleeps without a deadline instead of looking once a
//!   `GRACE` for as long as a long task runs. Then it
//!   hands due tasks over to the injector as it always did, until a
//!   worker takes the lead again: an idle one, or a busy one as it takes
//!   its next job from a queue ([`Timer::lead_is_free`]; it resets
//!   `armed` as a leader that wakes does, and turns after that job). With
//!   idle workers only, a steady stream of due tasks (never an idle
//!   worker) left the timer thread leading for good after one rescue, at
//!   the costs lever 5 removes (`benches/README.md`, "A rescue that
//!   lasts"). So a long task delays the timer by at most about two
//!   `GRACE`s. The watch costs the timer thread one wake-up
//!   a `GRACE` past each of the leader's deadlines, and one a `GRACE`
//!   while the leader is awake (for an `IDLE_GRACE` at most, unless it
//!   takes turns): none while the pool is idle.
//! * **Sharing.** A leader takes one due task per turn and runs it, so a
//!   stream of short tasks stays on one thread: no other worker sees them,
//!   none is woken or drawn into stealing them. It takes every due task of
//!   a turn (into its deque, waking an idle worker to share them) when the
//!   first is late by [`SHARE_IF_LATE`] (it does not keep up alone) or
//!   when the tasks it took ran long in a few batches in a row (one slow
//!   batch may be a preemption: `pool/pace.rs`).
//! * **The next cell, fetched ahead.** When a turn takes one task, it asks
//!   the CPU to fetch the cell of the task after it
//!   ([`DelayQueue::peek_next`](crate::timer::queue::DelayQueue::peek_next),
//!   a prefetch), so that the miss on that cell overlaps the run of this
//!   one. Ten thousand periodic cells do not stay in the cache between
//!   runs 10 ms apart: the first touch of a cell's state was 17% of the
//!   `periodic` workload's samples on the hierarchical wheel, 4% with the
//!   prefetch (measured: `benches/README.md`, "The next cell, fetched
//!   ahead").
//!
//! # Where the timer thread leads
//!
//! With more than [`LEAD_MAX_TIMERS`] timers the timer thread leads, and
//! workers take the lead again once it holds half as many. A backend that
//! large grows and shrinks by large blocks, and with glibc the thread that
//! frees one consolidates its allocator arena's free small blocks first:
//! on a worker that had freed a million task cells, that stalled every
//! timer for 160–175 ms at the end of one `timer-fire` repetition in
//! five (measured: `benches/README.md`, lever 5). On the timer thread,
//! which frees nothing else, it does not show; and a million timers due
//! over a second keep a leader busy with inserts that the timer thread
//! would apply beside the workers.
//!
//! # Invariants
//!
//! * **One writer of `armed`.** `armed` is only written under the backend
//!   lock, by a thread that holds the lead at that moment. The lead moves
//!   to a worker without the lock (the compare-and-swap), but that worker
//!   then turns under the lock, after any turn of the timer thread that
//!   read the old holder: the last value written is always the current
//!   holder's. (A stale `armed` left by a former holder would let a
//!   scheduler skip a wake-up the new holder needs.)
//! * **No lost wake-up of the waiter.** The commands protocol is the one
//!   of `commands`, with the holder as the sleeper: the holder publishes
//!   `armed`, `fence(SeqCst)`, looks at the commands; a scheduler pushes,
//!   `fence(SeqCst)`, reads `armed`, then reads `lead` and unparks that
//!   holder. If it saw a holder's `armed`, the lead it reads is that
//!   holder or a later one, which turns (and so applies the command, or
//!   publishes its own `armed` before the scheduler's fence) before it
//!   sleeps.
//! * **The watch never sleeps through a stuck leader.** A leading worker
//!   that goes from sleeping to running (it woke, or found work after it
//!   published `armed`) stores `armed = 0`, `fence(SeqCst)`, and reads
//!   `watch_until`, the time the timer thread sleeps until; the timer
//!   thread publishes `watch_until`, `fence(SeqCst)`, reads `armed`. So
//!   either the timer thread sees the leader awake (and sleeps a `GRACE`
//!   only), or the leader sees how long it sleeps and wakes it if that is
//!   beyond a `GRACE` from now. A worker that takes the lead does the
//!   same, against the timer thread's own sleep (which it publishes in
//!   `watch_until` too, and which ends when it sees the lead gone).
//! * **Each due task is taken once.** Every turn (the leader's, the timer
//!   thread's) pops under the backend lock, as does a timer future's poll
//!   that helps (`help`); the leader pushes what it took
//!   on its deque under that lock, so `shutdown_now`, which drains the
//!   backend under it and then every deque, finds each task in one place.
//!
//! Accepted, and why:
//!
//! * The due task a leader takes to run is in no queue from the moment
//!   its turn releases the lock (and while it rings the turn's alarms):
//!   a `shutdown_now` then neither returns it nor finds it started, and
//!   it runs, as a job a worker has just popped from its deque does.
//! * A leading worker sets its own thread's timer slack as the timer
//!   thread does (`waiting`): 1 µs with few timers. User tasks run on it
//!   afterwards with that slack (their timed waits end closer to their
//!   deadlines, at a little more CPU).
//!
//! Not led by workers: a pool on a manual clock (its time moves only by
//! `advance`, which hands over the due tasks itself), and the loom models
//! that do not ask for it.

use std::time::Instant;

use crate::sync::{fence, CellArc, Ordering};
use crate::task::{delayed, Job};
use crate::time::Nanos;

use super::{ring, wall, Timer, Workers};

/// `Timer::lead` while the timer thread waits for time.
pub(crate) const TIMER_THREAD: usize = usize::MAX;

/// A leading worker gives the lead back to the timer thread when the
/// backend holds more timers than this, and workers take it again once
/// the timer thread's turn finds half as many (module doc).
pub(crate) const LEAD_MAX_TIMERS: usize = 1 << 16;

/// How long a leading worker may stay awake without a turn before the
/// timer thread takes the lead back (module doc): the extra lateness a
/// long task can cause the timer, at most about twice this.
pub(crate) const GRACE: Nanos = 1_000_000;

/// How long the watch leaves the lead to a leader that is awake without a
/// turn but holds nothing up (module doc). Then it takes it back all the
/// same, so that it can sleep without a deadline rather than look once a
/// `GRACE` for as long as a long task runs; a busy pool with no timers
/// goes through a rescue and a take-back once in this long.
pub(crate) const IDLE_GRACE: Nanos = 100 * GRACE;

/// A due task this late when a leading worker takes it (beyond the
/// backend's granularity: a wheel's tick of tasks falls due at once)
/// means the leader does not keep up alone: it takes every due task of
/// that turn, to share (module doc).
pub(crate) const SHARE_IF_LATE: Nanos = 100_000;

/// How many due tasks a leading worker takes in a turn ([`lead_turn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Share {
    /// The first (and all of them if it is late): the leader runs it.
    One,
    /// All of them: the leader runs the first and shares the rest.
    All,
}

/// What a leading worker's turn decided ([`lead_turn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeadTurn {
    /// The caller does not lead (another does, or the pool is shut down):
    /// it looks for work and sleeps as any idle worker.
    Follow,
    /// It took this many due tasks into its deque, and keeps the lead.
    Took(usize),
    /// Alarms were rung, a command arrived after `armed` was published, or
    /// the count of cancels reached `sweep_at`: turn again at once (the
    /// caller does, before anything else: `armed` may be published).
    Again,
    /// Nothing is due: `armed` is published; wait until `next` (without a
    /// deadline if `None`). The backend holds `held` entries.
    Wait { next: Option<Nanos>, held: usize },
}

impl Timer {
    /// Worker `index` has found no work: true if it leads (it held the
    /// lead, or took it from the timer thread now). Not once it has seen
    /// the pool shut down (a shutdown that comes after this look is seen
    /// by its turn, under the lock), on a manual clock, or under a loom
    /// model that did not ask.
    /// `shut_down` is asked only if workers may lead (a loom model that
    /// did not ask for it sees no extra operation).
    pub(crate) fn take_lead(&self, index: usize, shut_down: impl FnOnce() -> bool) -> bool {
        if !self.workers_lead || shut_down() {
            return false;
        }
        let lead = self.lead.load(Ordering::Relaxed);
        if lead == index {
            return true;
        }
        if lead != TIMER_THREAD
            || self.crowded.load(Ordering::Relaxed)
            || self
                .lead
                .compare_exchange(TIMER_THREAD, index, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        // The timer thread may sleep until a far deadline: it must watch.
        self.cover_awake_leader();
        true
    }

    /// True if the timer thread holds the lead and a worker may take it
    /// (`take_lead` decides): the look of a busy worker at each job it
    /// takes from a queue, one load on its hot path (a cache line of its
    /// own, written only when the lead moves). Nothing if workers do not
    /// lead (a loom model that did not ask sees no extra operation).
    #[inline]
    pub(crate) fn lead_is_free(&self) -> bool {
        self.workers_lead
            && self.lead.load(Ordering::Relaxed) == TIMER_THREAD
            && !self.crowded.load(Ordering::Relaxed)
    }

    /// The worker that holds the lead; `None`: the timer thread (for the
    /// tests of `executor.rs`).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn leader(&self) -> Option<usize> {
        Some(self.lead.load(Ordering::SeqCst)).filter(|&lead| lead != TIMER_THREAD)
    }

    /// Worker `index`, which led and published `armed`, goes on running
    /// (it woke, or found work): `armed` 0 again if it still holds the
    /// lead (under the backend lock: the timer thread may have taken it
    /// back and published its own), and the timer thread woken if it
    /// sleeps for longer than a [`GRACE`] (module doc).
    pub(crate) fn leader_awake(&self, index: usize) {
        {
            let _queue = self.queue.lock();
            if self.lead.load(Ordering::SeqCst) != index {
                return;
            }
            self.armed.store(0, Ordering::SeqCst);
        }
        self.cover_awake_leader();
    }

    fn cover_awake_leader(&self) {
        fence(Ordering::SeqCst);
        let until = self.watch_until.load(Ordering::SeqCst);
        if until > self.clock.now().saturating_add(GRACE) {
            self.parker.unpark();
        }
    }

    /// Wakes whoever waits for time: the leading worker, or the timer
    /// thread (module doc).
    pub(crate) fn wake_waiter(&self) {
        match self.lead.load(Ordering::SeqCst) {
            TIMER_THREAD => self.parker.unpark(),
            worker => self.worker_parkers[worker].unpark(),
        }
    }

    /// True if a worker holds the lead.
    pub(crate) fn worker_leads(&self) -> bool {
        self.lead.load(Ordering::SeqCst) != TIMER_THREAD
    }

    /// Under the backend lock: the timer thread takes the lead back (the
    /// pool is shut down). True if it holds it now.
    pub(super) fn timer_thread_holds_lead(&self, shut_down: bool) -> bool {
        if self.lead.load(Ordering::SeqCst) == TIMER_THREAD {
            return true;
        }
        if shut_down {
            self.lead.store(TIMER_THREAD, Ordering::SeqCst);
            return true;
        }
        false
    }

    /// Counts a turn (under the backend lock: a plain increment).
    pub(super) fn count_turn(&self) {
        let turns = self.turns.load(Ordering::Relaxed);
        self.turns.store(turns.wrapping_add(1), Ordering::SeqCst);
    }

    /// The timer thread takes the lead from a worker that has taken no
    /// turn since the watch read `seen` turns, `overdue_for` ago (at least
    /// a `GRACE`), while it was awake or late for its deadline, if that
    /// holds something up at `now` (an entry due, a command waiting, a
    /// sweep due) or has lasted an [`IDLE_GRACE`] (module doc). True if it
    /// took it.
    pub(crate) fn rescue(&self, seen: u64, now: Nanos, overdue_for: Nanos) -> bool {
        let queue = self.queue.lock();
        if self.lead.load(Ordering::SeqCst) == TIMER_THREAD
            || self.turns.load(Ordering::SeqCst) != seen
        {
            return false;
        }
        let held_up = !self.commands.is_empty()
            || queue.next_due().is_some_and(|due| due <= now)
            || self.sweep_is_due();
        if !held_up && overdue_for < IDLE_GRACE {
            return false;
        }
        self.lead.store(TIMER_THREAD, Ordering::SeqCst);
        true
    }

    /// Turns taken so far (the watch's reading, for the loom models).
    #[cfg(all(test, loom))]
    pub(crate) fn turns_taken(&self) -> u64 {
        self.turns.load(Ordering::SeqCst)
    }

    /// The parker worker `index` sleeps on (for the loom models).
    #[cfg(all(test, loom))]
    pub(crate) fn worker_parker(
        &self,
        index: usize,
    ) -> &crate::sync::StdArc<crate::sync::parker::Parker> {
        &self.worker_parkers[index]
    }

    /// A leading worker spins until `until` on the clock, or until a
    /// command arrives or `stop` says so (work to run).
    pub(crate) fn lead_spin_until(&self, until: Nanos, stop: impl Fn() -> bool) {
        while self.clock.now() < until && self.commands.is_empty() && !stop() {
            std::hint::spin_loop();
        }
    }

    /// The instant a leading worker sleeps until for `next`.
    pub(crate) fn instant_of(&self, next: Option<Nanos>) -> Option<Instant> {
        next.and_then(|n| self.clock.instant_of(n))
    }

    /// The spin window before a deadline (`waiting`).
    pub(crate) fn spin(&self) -> Nanos {
        self.spin
    }

    /// True if no command waits (a leading worker's last look before it
    /// parks).
    pub(crate) fn no_commands(&self) -> bool {
        self.commands.is_empty()
    }
}

/// A turn of worker `index`, if it holds the lead (module doc): applies
/// the commands and gives the first due task to `take` (every due task,
/// with `Share::All` or if the first is late by [`SHARE_IF_LATE`]), under
/// the backend lock; rings the due alarms after it;
/// sweeps if due; if nothing was due, publishes `armed`.
///
/// Also returns the time the turn read (0 if it did not lead).
pub(crate) fn lead_turn(
    pool: &impl Workers,
    index: usize,
    share: Share,
    take: &mut dyn FnMut(Job),
) -> (LeadTurn, Nanos) {
    let timer = pool.timer();
    let (mut rung, mut swept) = (Vec::new(), Vec::new());
    let mut took = 0;
    let now;
    let rest = {
        let mut queue = timer.queue.lock();
        if timer.lead.load(Ordering::SeqCst) != index {
            return (LeadTurn::Follow, 0);
        }
        if pool.is_shut_down() {
            // The shutdown duties are the timer thread's.
            timer.lead.store(TIMER_THREAD, Ordering::SeqCst);
            drop(queue);
            timer.wake();
            return (LeadTurn::Follow, 0);
        }
        timer.armed.store(0, Ordering::SeqCst);
        timer.count_turn();
        now = timer.clock.now();
        timer.apply_commands(&mut queue, now);
        if queue.len() > LEAD_MAX_TIMERS {
            // Many timers: the timer thread's (module doc).
            timer.crowded.store(true, Ordering::Relaxed);
            timer.lead.store(TIMER_THREAD, Ordering::SeqCst);
            drop(queue);
            timer.wake();
            return (LeadTurn::Follow, now);
        }
        let mut popped = 0;
        // One at a time, unless the first is late: then the leader does
        // not keep up alone (module doc).
        let all = share == Share::All
            || queue.next_due().is_some_and(|due| {
                now.saturating_sub(due) >= SHARE_IF_LATE.saturating_add(queue.granularity())
            });
        while let Some(entry) = queue.pop_due(now) {
            popped += 1;
            if entry.is_task() {
                take(delayed::into_job(entry));
                took += 1;
                if !all {
                    // The next task's cell comes into the cache while
                    // this one runs (module doc).
                    if let Some(next) = queue.peek_next() {
                        CellArc::prefetch(next);
                    }
                    break;
                }
            } else {
                rung.push(entry);
            }
        }
        if !rung.is_empty() {
            pool.ringing(rung.len());
        }
        if popped > 0 {
            // After the pushes (the driver's invariant on `pending`).
            timer.pending.fetch_sub(popped, Ordering::SeqCst);
        }
        timer.sweep_if_due(&mut queue, now, &mut swept);
        if popped > 0 {
            None
        } else {
            let held = queue.len();
            let sweep_again = timer.publish_sweep_at(held);
            let next = queue.next_due();
            timer
                .armed
                .store(next.unwrap_or(u64::MAX), Ordering::SeqCst);
            Some((next, held, sweep_again))
        }
    };
    ring(rung, pool);
    super::sweep::drop_swept(swept, pool);
    let Some((next, held, sweep_again)) = rest else {
        let turn = if took > 0 {
            LeadTurn::Took(took)
        } else {
            LeadTurn::Again
        };
        return (turn, now);
    };
    fence(Ordering::SeqCst);
    if sweep_again || !timer.commands.is_empty() {
        return (LeadTurn::Again, now);
    }
    (LeadTurn::Wait { next, held }, now)
}

/// What the timer thread remembers between two looks of its watch.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// The turns counted, and the time, at the first look that found the
    /// leader overdue (awake, or asleep past its deadline) since its last
    /// turn.
    overdue_since: Option<(u64, Nanos)>,
}

/// One look of the timer thread's watch over a leading worker (module
/// doc): takes the lead back if the worker has been overdue (awake, or
/// asleep past its deadline) without a turn for a whole `GRACE`; else
/// sleeps until the next look (a `GRACE` from now while the leader is
/// overdue, a `GRACE` past its deadline while it sleeps) or until woken.
/// Applies the commands if a burst has filled half of their queue (the
/// leader may be busy), and checks the wall clock, as a turn does.
pub(crate) fn watch(pool: &impl Workers, now: impl Fn() -> Nanos, last: &mut Watch) {
    let timer = pool.timer();
    let watching_wall = timer.check_wall(pool, now());
    if !cfg!(loom) && timer.commands.len_hint() >= super::commands::BACKLOG_WAKE {
        timer.apply_backlog();
    }
    let turns = timer.turns.load(Ordering::SeqCst);
    let armed = timer.armed.load(Ordering::SeqCst);
    let at = now();
    let overdue = armed == 0 || armed.saturating_add(GRACE) <= at;
    let mut until = if overdue {
        match last.overdue_since {
            Some((seen, since)) if seen == turns => {
                let overdue_for = at.saturating_sub(since);
                if overdue_for >= GRACE && timer.rescue(turns, at, overdue_for) {
                    last.overdue_since = None;
                    return;
                }
            }
            _ => last.overdue_since = Some((turns, at)),
        }
        at.saturating_add(GRACE)
    } else {
        last.overdue_since = None;
        armed.saturating_add(GRACE)
    };
    if watching_wall {
        until = until.min(at.saturating_add(wall::MAX_WALL_WAIT));
    }
    timer.watch_until.store(until, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if (armed != 0 && timer.armed.load(Ordering::SeqCst) == 0)
        || !timer.worker_leads()
        || pool.is_shut_down()
    {
        return;
    }
    timer.sleep_until((until != u64::MAX).then_some(until));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::handle::ScheduledHandle;
    use crate::pool::Pool;
    use crate::sync::Arc;
    use crate::timer::driver::shutdown::ShutdownPolicy;

    /// An hour, in nanoseconds.
    const HOUR: Nanos = 3_600_000_000_000;

    /// A pool (no thread started) whose worker 0 leads and is awake
    /// without a turn since the watch read the count it returns; the timer
    /// holds one task, due in an hour, whose handle it returns too.
    fn awake_leader() -> (Arc<Pool>, ScheduledHandle<()>, u64) {
        let policy = ShutdownPolicy {
            keep_delayed: true,
            keep_periodic: false,
        };
        let timer = Timer::new(Default::default(), policy, usize::MAX);
        let pool = Arc::new(Pool::new(1, Default::default(), timer).0);
        let now = pool.timer.clock.now();
        let cell = pool.schedule(|| (), now, now + HOUR, ()).unwrap();
        let later = ScheduledHandle::new(cell, Arc::clone(&pool));
        assert!(pool.timer.take_lead(0, || false));
        loop {
            let mut take = |job: Job| panic!("nothing is due: {job:?}");
            match lead_turn(&*pool, 0, Share::One, &mut take).0 {
                LeadTurn::Again => continue,
                LeadTurn::Wait { .. } => break,
                other => panic!("the worker leads: {other:?}"),
            }
        }
        pool.timer.leader_awake(0);
        let seen = pool.timer.turns.load(Ordering::SeqCst);
        (pool, later, seen)
    }

    #[test]
    fn a_leader_that_holds_nothing_up_keeps_the_lead_for_an_idle_grace() {
        let (pool, _later, seen) = awake_leader();
        let now = pool.timer.clock.now();
        assert!(!pool.timer.rescue(seen, now, GRACE));
        assert!(!pool.timer.rescue(seen, now, IDLE_GRACE - 1));
        assert!(pool.timer.worker_leads());
        assert!(pool.timer.rescue(seen, now, IDLE_GRACE));
        assert!(!pool.timer.worker_leads());
    }

    #[test]
    fn a_leader_is_rescued_when_an_entry_falls_due() {
        let (pool, _later, seen) = awake_leader();
        let now = pool.timer.clock.now();
        assert!(pool.timer.rescue(seen, now + HOUR, GRACE));
    }

    #[test]
    fn a_leader_is_rescued_when_a_command_waits() {
        let (pool, _later, seen) = awake_leader();
        let now = pool.timer.clock.now();
        let _second = pool.schedule(|| (), now, now + HOUR, ()).unwrap();
        assert!(pool.timer.rescue(seen, now, GRACE));
    }

    #[test]
    fn a_leader_is_rescued_when_a_sweep_is_due() {
        let (pool, later, seen) = awake_leader();
        // One entry held: `sweep_at` is 1, and this cancel reaches it.
        assert!(later.cancel());
        assert!(pool.timer.rescue(seen, pool.timer.clock.now(), GRACE));
    }

    #[test]
    fn a_leader_that_took_a_turn_is_not_rescued() {
        let (pool, _later, seen) = awake_leader();
        let now = pool.timer.clock.now();
        assert!(!pool
            .timer
            .rescue(seen.wrapping_sub(1), now + HOUR, IDLE_GRACE));
    }
}

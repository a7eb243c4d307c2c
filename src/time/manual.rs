//! [`ManualClock`]: time that moves only when a test moves it, for whole
//! pools with any number of workers.
//!
//! A pool built with [`Builder::clock`](crate::Builder::clock) reads every
//! time from its manual clock: deadlines, `delay()` and `deadline()`, the
//! end of a fixed-delay run, the wall time of wall-clock schedules. Time
//! never moves on its own (no auto-advance): only [`ManualClock::advance`]
//! and [`ManualClock::jump`] move it, and [`ManualClock::set_system_time`]
//! moves the wall clock alone.
//!
//! # How `advance` moves time
//!
//! `advance(d)` walks to the target through every deadline on the way, in
//! order. At each one it hands the tasks due to the workers itself (the
//! pools' timer threads never sleep until a manual deadline: there is no
//! real time to sleep for) and waits until every pool on the clock is
//! *quiet*: no job queued or running, no command waiting for the timer,
//! nothing due. Only then does it look for the next deadline, so tasks
//! scheduled or submitted by the runs take part if they fall due within
//! the target, and a run never sees time move under it.
//!
//! Quiet is known without polling: a pool on a manual clock counts its jobs
//! from the moment they are queued until their run ends, and the one that
//! takes the count to zero notifies the clock, under the lock `advance`
//! waits with (so the notification is never lost between `advance`'s look
//! and its wait). A pool that has no job running cannot make progress
//! without `advance`, so what is not quiet then (a command, a due entry) is
//! `advance`'s own work: it does it and looks again, without waiting.

use std::sync::Weak;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::cell::Cell;

use crate::sync::{AtomicU64, Condvar, Mutex, Ordering, StdArc};

use super::clock::nanos;
use super::{Nanos, LAST_INSTANT};

crate::sync::thread_local! {
    /// The clock this thread is moving (the address of its state; 0 when
    /// none), so that a move from inside a move (a waker or a drop that
    /// the move ran on this thread) panics instead of waiting for itself.
    static MOVING: Cell<usize> = const { Cell::new(0) };
}

/// This thread moves a clock until dropped (see [`MOVING`]).
struct Moving(usize);

impl Drop for Moving {
    fn drop(&mut self) {
        MOVING.with(|moving| moving.set(self.0));
    }
}

/// The wall time a [`ManualClock::new`] starts at: 2026-01-01 00:00:00 UTC.
pub const MANUAL_CLOCK_START: Duration = Duration::from_secs(1_767_225_600);

/// What `advance` needs of a pool on the clock (the pool implements it).
pub(crate) trait Driven: Send + Sync {
    /// Applies the commands waiting for the timer and hands every task due
    /// at `now` to the workers.
    fn hand_over_due(&self, now: Nanos);
    /// Jobs queued or running, and every job counted (`job_count.rs`:
    /// two equal reads mean no job began or ended between them).
    fn jobs(&self) -> Jobs;
    /// True if no command waits for the timer and nothing is due at `now`.
    fn timer_idle(&self, now: Nanos) -> bool;
    /// The earliest deadline the timer holds.
    fn next_deadline(&self) -> Option<Nanos>;
    /// True if the calling thread is one of the pool's.
    fn is_own_thread(&self) -> bool;
}

/// What a pool on a manual clock says of its jobs (`pool/job_count.rs`):
/// the jobs queued or running (low half) and every job it ever counted
/// (high half, wrapping). Two equal reads mean that no job began or ended
/// between them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Jobs(pub(crate) u64);

impl Jobs {
    /// The live count's bits (more than 2^32 jobs queued at once would
    /// carry into the total: not on a test's manual clock).
    pub(crate) const LIVE: u64 = (1 << 32) - 1;
    /// One job counted: one more live, one more in the total.
    pub(crate) const ONE: u64 = (1 << 32) + 1;

    /// Jobs queued or running.
    pub(crate) fn live(self) -> u64 {
        self.0 & Self::LIVE
    }
}

/// The state a [`ManualClock`] and its clones share.
pub(crate) struct ManualState {
    /// What `Instant` the time 0 is (the clock's `Instant`s are this plus
    /// [`now`](Self::now)).
    origin: Instant,
    /// The time, in nanoseconds since `origin`; only goes up.
    now: AtomicU64,
    /// The wall time at the time `.1` (set by `set_system_time`).
    wall: Mutex<(SystemTime, Nanos)>,
    /// The pools on the clock.
    pools: Mutex<Vec<Weak<dyn Driven>>>,
    /// Held for the whole of an `advance` or `jump`: one at a time.
    moving: Mutex<()>,
    /// Where `advance` waits for a pool's jobs to end; notified, under it,
    /// by the job that takes a pool's count to zero.
    quiet: Mutex<()>,
    quiet_changed: Condvar,
}

impl std::fmt::Debug for ManualState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualState")
            .field("now", &self.now())
            .finish_non_exhaustive()
    }
}

impl ManualState {
    fn new(wall: SystemTime) -> Self {
        ManualState {
            origin: Instant::now(),
            now: AtomicU64::new(0),
            wall: Mutex::new((wall, 0)),
            pools: Mutex::new(Vec::new()),
            moving: Mutex::new(()),
            quiet: Mutex::new(()),
            quiet_changed: Condvar::new(),
        }
    }

    /// The origin of the clock's `Instant`s.
    pub(crate) fn origin(&self) -> Instant {
        self.origin
    }

    /// The time, in nanoseconds since the origin.
    pub(crate) fn now(&self) -> Nanos {
        self.now.load(Ordering::Acquire)
    }

    /// The wall time now.
    pub(crate) fn system_time(&self) -> SystemTime {
        let (wall, at) = *self.wall.lock();
        let since = self.now().saturating_sub(at);
        wall.checked_add(Duration::from_nanos(since))
            .unwrap_or(wall)
    }

    /// The time and the wall time at one instant: `now` is read once,
    /// under the wall clock's lock, so a move of the time meanwhile (an
    /// `advance` on another thread) cannot show as a step of the wall
    /// clock (`timer/driver/wall.rs` compares their offset exactly).
    pub(crate) fn now_and_wall(&self) -> (Nanos, SystemTime) {
        let (wall, at) = *self.wall.lock();
        let now = self.now();
        let since = now.saturating_sub(at);
        let wall = wall
            .checked_add(Duration::from_nanos(since))
            .unwrap_or(wall);
        (now, wall)
    }

    /// Steps the wall clock to `wall`, the monotonic time staying.
    pub(crate) fn set_wall(&self, wall: SystemTime) {
        *self.wall.lock() = (wall, self.now());
    }

    /// Adds a pool to those `advance` drives. (Under loom the builder
    /// attaches none: a pool lives in loom's `Arc`, which has no `Weak`;
    /// the models drive pools through `advance_through`.)
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn attach(&self, pool: Weak<dyn Driven>) {
        let mut pools = self.pools.lock();
        pools.retain(|p| p.strong_count() > 0);
        pools.push(pool);
    }

    /// A job of a pool on this clock ended and its pool has none left:
    /// wakes an `advance` waiting for quiet (see the module doc).
    pub(crate) fn notify_quiet(&self) {
        let _quiet = self.quiet.lock();
        self.quiet_changed.notify_all();
    }

    /// Moves the time to `to` (at most [`LAST_INSTANT`]: a deadline past
    /// it is never due) unless it already is there or later.
    fn move_to(&self, to: Nanos) {
        self.now.fetch_max(to.min(LAST_INSTANT), Ordering::AcqRel);
    }

    /// Panics if this thread is moving this clock already: from a waker
    /// or a drop that `advance` ran, a second move would wait for the
    /// first, which waits for it.
    fn assert_not_moving(&self) {
        let this = self as *const Self as usize;
        if MOVING.with(Cell::get) == this {
            panic!(
                "ManualClock::advance (or jump, or set_system_time) was called on a \
                 thread that is moving that clock already (from a waker or a drop run \
                 by advance): it would wait for itself"
            );
        }
    }

    /// Panics if this thread may not move the clock: it is moving it
    /// already, or it is a thread of one of `pools` (see
    /// [`enter`](Self::enter)).
    fn refuse_move_from_within(&self, pools: &[&dyn Driven]) {
        self.assert_not_moving();
        assert!(
            !pools.iter().any(|p| p.is_own_thread()),
            "ManualClock::advance was called on a thread of a pool on that clock: \
             it would wait for its own task to end"
        );
    }

    /// Marks this thread as moving this clock until the guard is dropped,
    /// after refusing a move from a thread of one of `pools`.
    ///
    /// Both refusals come before the move takes `moving`: a task or a
    /// waker that a move in progress runs (on a worker, or on a timer
    /// thread that rang an alarm) would otherwise wait for `moving`, held
    /// by the move that waits for it to end (tests/manual_clock.rs:
    /// `advance_from_a_task_that_advance_runs_is_refused_not_hung`).
    fn enter(&self, pools: &[&dyn Driven]) -> Moving {
        self.refuse_move_from_within(pools);
        let this = self as *const Self as usize;
        Moving(MOVING.with(|moving| moving.replace(this)))
    }

    /// The pools alive on the clock.
    fn pools(&self) -> Vec<StdArc<dyn Driven>> {
        self.pools.lock().iter().filter_map(Weak::upgrade).collect()
    }

    /// `advance` over `pools` (see the module doc).
    pub(crate) fn advance_through(&self, pools: &[&dyn Driven], by: Duration) {
        let _entered = self.enter(pools);
        let _one = self.moving.lock();
        let target = self.now().saturating_add(nanos(by)).min(LAST_INSTANT);
        loop {
            self.settle(pools);
            let next = pools.iter().filter_map(|p| p.next_deadline()).min();
            match next {
                Some(next) if next <= target => self.move_to(next),
                _ => break,
            }
        }
        self.move_to(target);
        self.settle(pools);
    }

    /// `jump` over `pools`: straight to the target, then quiet.
    pub(crate) fn jump_through(&self, pools: &[&dyn Driven], by: Duration) {
        let _entered = self.enter(pools);
        let _one = self.moving.lock();
        self.settle(pools);
        self.move_to(self.now().saturating_add(nanos(by)));
        self.settle(pools);
    }

    /// `set_system_time` over `pools`: the wall clock steps under
    /// `moving`, as `advance` and `jump` move the time, so a step never
    /// lands in the middle of a move on another thread (the tasks of one
    /// `advance` all see one wall clock), then quiet. Refused, as a move
    /// is, before the wall clock changes.
    pub(crate) fn step_wall_through(&self, pools: &[&dyn Driven], wall: SystemTime) {
        let _entered = self.enter(pools);
        let _one = self.moving.lock();
        self.set_wall(wall);
        self.settle(pools);
    }

    /// Hands over what is due now and waits until every pool is quiet (see
    /// the module doc).
    fn settle(&self, pools: &[&dyn Driven]) {
        loop {
            let now = self.now();
            for pool in pools {
                pool.hand_over_due(now);
            }
            let quiet = self.quiet.lock();
            let jobs: Vec<Jobs> = pools.iter().map(|p| p.jobs()).collect();
            if jobs.iter().any(|j| j.live() > 0) {
                // The job that takes a count to zero notifies under `quiet`,
                // which this wait releases atomically: not lost.
                drop(self.quiet_changed.wait(quiet));
                continue;
            }
            drop(quiet);
            // Quiet only if no job began or ended while it looked at the
            // timers (`job_count.rs`: a job handed over meanwhile left the
            // timer before the look and was counted after the first read).
            if pools.iter().all(|p| p.timer_idle(now))
                && pools.iter().map(|p| p.jobs()).eq(jobs.iter().copied())
            {
                return;
            }
        }
    }
}

/// A clock that moves only when told to, for tests: a whole pool, with any
/// number of workers, runs a day of schedule in milliseconds.
///
/// Give it to a pool with [`Builder::clock`](crate::Builder::clock); clones
/// share one time. Its monotonic time ([`now`](Self::now)) and its wall
/// time ([`system_time`](Self::system_time)) move together; the wall clock
/// starts at [`MANUAL_CLOCK_START`] (2026-01-01 00:00:00 UTC) unless given
/// with [`starting_at`](Self::starting_at).
///
/// ```
/// use chronopool::{ManualClock, ScheduledExecutor};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let pool = ScheduledExecutor::builder().worker_threads(2).clock(clock.clone()).build()?;
/// let runs = Arc::new(AtomicUsize::new(0));
/// let r = runs.clone();
/// let every_minute = pool.schedule_at_fixed_rate(
///     move || { r.fetch_add(1, Ordering::SeqCst); },
///     Duration::from_secs(60),
///     Duration::from_secs(60),
/// )?;
/// clock.advance(Duration::from_secs(3600)); // an hour, in a few milliseconds
/// assert_eq!(runs.load(Ordering::SeqCst), 60);
/// assert_eq!(every_minute.delay(), Duration::from_secs(60));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Waits in real time stay real: `join_timeout` and `await_termination`
/// measure real time, and a task that blocks (on a channel, a lock, a real
/// sleep) blocks [`advance`](Self::advance) until it returns.
#[derive(Clone)]
pub struct ManualClock {
    state: StdArc<ManualState>,
}

impl ManualClock {
    /// A clock whose wall time starts at [`MANUAL_CLOCK_START`].
    pub fn new() -> Self {
        Self::starting_at(UNIX_EPOCH + MANUAL_CLOCK_START)
    }

    /// A clock whose wall time starts at `wall`.
    pub fn starting_at(wall: SystemTime) -> Self {
        ManualClock {
            state: StdArc::new(ManualState::new(wall)),
        }
    }

    pub(crate) fn state(&self) -> &StdArc<ManualState> {
        &self.state
    }

    /// The time now, as an `Instant` (for `schedule_at` and for comparing
    /// with a handle's `deadline()`).
    pub fn now(&self) -> Instant {
        self.state.origin + Duration::from_nanos(self.state.now())
    }

    /// The wall time now: it moves with [`now`](Self::now), and jumps with
    /// [`set_system_time`](Self::set_system_time).
    pub fn system_time(&self) -> SystemTime {
        self.state.system_time()
    }

    /// Moves the time forward by `by`, through every deadline on the way,
    /// in order; at each one the tasks due run, and it waits until every
    /// pool on the clock is quiet (nothing queued, nothing running) before
    /// it moves on. Tasks that those runs schedule or submit take part if
    /// they fall due by the target. It returns when the time is the target
    /// and the pools are quiet.
    ///
    /// So a fixed-rate task of period one minute, advanced by an hour, has
    /// run 60 times when this returns (61 with a zero initial delay), and a
    /// fixed-delay task's next run is its delay after the manual instant its
    /// run ended.
    ///
    /// The clock holds about 584 years from its start: `advance` by more
    /// (by `Duration::MAX`) stops at its last instant, and a deadline past
    /// that instant is *never*: a task due there stays pending (a fixed
    /// rate of 300 years runs once, a yearly cron once a year, then
    /// neither again), and `advance` returns. A pool that has shut down
    /// takes no part once its workers have exited: its tasks no longer
    /// run, and the other pools on the clock keep their time.
    ///
    /// # Panics
    ///
    /// If called from a thread of a pool on this clock (a task, a hook):
    /// it would wait for that very task to end. If called on the thread
    /// that is moving this clock already (from a waker or a `Drop` that
    /// `advance` ran there): it would wait for itself. A waker's panic is
    /// reported to the pool's [`on_panic`](crate::Builder::on_panic) hook
    /// as any waker's is, and the outer `advance` goes on.
    pub fn advance(&self, by: Duration) {
        let pools = self.state.pools();
        let pools: Vec<&dyn Driven> = pools.iter().map(|p| &**p).collect();
        self.state.advance_through(&pools, by);
    }

    /// Moves the time forward by `by` at once, as if the process had been
    /// suspended: every task due meanwhile runs late, after the jump (and
    /// the periodic ones follow their [`MissedRuns`](crate::MissedRuns)
    /// policy). Returns when the pools are quiet.
    ///
    /// # Panics
    ///
    /// As [`advance`](Self::advance).
    pub fn jump(&self, by: Duration) {
        let pools = self.state.pools();
        let pools: Vec<&dyn Driven> = pools.iter().map(|p| &**p).collect();
        self.state.jump_through(&pools, by);
    }

    /// Sets the wall clock to `wall` without moving the monotonic time, as
    /// an NTP step or a change by hand does: wall-clock schedules see it,
    /// monotonic deadlines do not. Returns when the pools are quiet: a task
    /// due at a wall time the step passed has run (as after
    /// [`advance`](Self::advance) by zero), a step of a nanosecond as of a
    /// year. On a timing wheel, which rounds every deadline up to its tick,
    /// that is once the time is on a tick: a step made between two ticks
    /// runs what it passed when the time reaches the next one, as an
    /// `advance` to a deadline between two ticks does. A step from another thread
    /// waits for an `advance` or `jump` in progress: every task that one
    /// move runs sees one wall clock.
    ///
    /// # Panics
    ///
    /// As [`advance`](Self::advance).
    pub fn set_system_time(&self, wall: SystemTime) {
        let pools = self.state.pools();
        let pools: Vec<&dyn Driven> = pools.iter().map(|p| &**p).collect();
        self.state.step_wall_through(&pools, wall);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock")
            .field("elapsed", &Duration::from_nanos(self.state.now()))
            .field("system_time", &self.system_time())
            .finish()
    }
}

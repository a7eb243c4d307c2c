//! The watch of the wall clock, for tasks due at a wall time.
//!
//! A task due at a wall time waits in the backend like any other, at the
//! monotonic deadline its wall time stood for when it was placed (the
//! backends know one clock). If the wall clock is then stepped (an NTP
//! step, a change by hand, `ManualClock::set_system_time`), that deadline
//! is wrong: too late after a step forward, too early after a step back.
//! So while any such task exists the timer thread reads the offset between
//! the two clocks (wall minus monotonic) at each of its turns, and sleeps
//! at most [`MAX_WALL_WAIT`] between turns; when the offset has moved by
//! more than [`WALL_TOLERANCE`] since the tasks were placed (by any amount
//! on a manual clock, whose two times are read as one), it hands each
//! watched task's check job to the workers, which place the task again at
//! its new deadline (`task/recurring.rs`). A run is also checked against
//! the wall clock when it falls due (a slow drift never makes it early).
//!
//! # A placement that straddles a step
//!
//! A task's deadline is computed from one reading of both clocks; the step
//! may come after that reading and before the task can be claimed by a
//! check (before it is placed and back to SCHEDULED). So the placer, once
//! the task is placed and claimable, reads the clocks' offset again
//! ([`Timer::wall_placed`]) and hands the task's check job over itself if
//! it moved since the deadline was computed. Either the step came before
//! that second reading (the placer sees it and hands the check over), or
//! after it: then the task was in the watch (it is pushed before it is
//! placed) and claimable before the step, and the turn that notices the
//! step hands its check over (on a manual clock, `set_system_time` runs
//! that turn itself after it wrote the new wall time, under the lock the
//! second reading takes). A task is thus never left at a deadline its
//! wall time no longer stands for. (loom: `placement_vs_wall_step`.)
//!
//! Monotonic tasks cost nothing here: the watch is one relaxed load per
//! turn while nothing is watched. The watch holds its tasks *weakly*: it
//! never keeps a task (its closure, its output, what they capture) alive,
//! and never drops the last reference to one, which would run user code on
//! the timer thread. The references to tasks gone are pruned at most once
//! per [`MAX_WALL_WAIT`] of the clock's time, and whenever the watch has
//! doubled since its last pruning (an idle manual clock, on which tasks
//! are scheduled and cancelled, holds at most twice its live tasks); a
//! check job holds the task it checks, and is dropped on the worker that
//! runs it, behind the worker's unwind boundary (or by `shutdown_now`,
//! which gives queued checks up on its caller's thread, their drops
//! reported as any given-up job's).

use crate::sync::{AtomicUsize, CellArc, CellWeak, Mutex, Ordering};
use crate::task::delayed::check_job;
use crate::task::recurring::WALL_TOLERANCE;
use crate::task::WallTask;
use crate::time::clock::wall_offset;
use crate::time::{Clock, Nanos};

use super::{Timer, Workers};

/// The longest the timer thread sleeps while it watches the wall clock.
pub(super) const MAX_WALL_WAIT: Nanos = 1_000_000_000;

/// What the timer keeps for its watch of the wall clock.
#[derive(Default)]
pub(super) struct WallWatch {
    /// How many tasks are watched (a hint, read at every turn).
    count: AtomicUsize,
    state: Mutex<Watched>,
}

#[derive(Default)]
struct Watched {
    tasks: Vec<CellWeak<dyn WallTask>>,
    /// The offset between the clocks when the tasks were last placed.
    offset: Option<i128>,
    /// When the ended tasks were last dropped from `tasks`.
    pruned_at: Nanos,
    /// How many `tasks` may hold before the ended ones are dropped
    /// whatever the time (twice what was left at the last pruning).
    prune_at_len: usize,
}

/// The least `Watched::prune_at_len`.
const PRUNE_AT_LEAST: usize = 64;

impl Watched {
    /// Drops the references to tasks gone; returns how many are left.
    fn prune(&mut self) -> usize {
        self.tasks.retain(|task| task.strong_count() > 0);
        self.prune_at_len = (2 * self.tasks.len()).max(PRUNE_AT_LEAST);
        self.tasks.len()
    }
}

/// How far the clocks' offset may move unseen: [`WALL_TOLERANCE`] for the
/// real clocks (their reads jitter), none for a manual clock (its two
/// times are read as one: any move is a step, however small).
fn tolerance(clock: &Clock) -> u128 {
    if clock.is_manual() {
        0
    } else {
        u128::from(WALL_TOLERANCE)
    }
}

/// The wall clock minus the monotonic clock, in nanoseconds, now.
fn offset(clock: &Clock) -> i128 {
    let (now, wall) = clock.now_and_wall();
    wall_offset(wall, now)
}

impl Timer {
    /// Watches the wall clock for `task` (module doc).
    pub(crate) fn watch_wall(&self, task: CellArc<dyn WallTask>) {
        let mut watched = self.wall.state.lock();
        if watched.offset.is_none() {
            watched.offset = Some(offset(&self.clock));
        }
        if watched.tasks.len() >= watched.prune_at_len {
            let left = watched.prune();
            self.wall.count.store(left, Ordering::Relaxed);
        }
        watched.tasks.push(CellArc::downgrade(&task));
        if self.wall.count.fetch_add(1, Ordering::Relaxed) == 0 {
            // The timer thread may sleep without a deadline: from now on it
            // turns at least once per `MAX_WALL_WAIT`.
            self.parker.unpark();
        }
    }

    /// `task` was placed, and is claimable by its check job, at a deadline
    /// computed with the clocks' offset `placed`: if the offset moved since,
    /// the wall clock was stepped under the placement, and the task's check
    /// job is handed over (module doc).
    pub(crate) fn wall_placed(
        &self,
        pool: &impl Workers,
        task: CellArc<dyn WallTask>,
        placed: i128,
    ) {
        if offset(&self.clock).abs_diff(placed) > tolerance(&self.clock) {
            pool.hand_over(check_job(task));
            pool.notify();
        }
    }

    /// One look at the wall clock (module doc), at time `now`: hands the
    /// check jobs of the watched tasks to `pool`'s workers if it was
    /// stepped. True if tasks are watched (the caller sleeps at most
    /// [`MAX_WALL_WAIT`]).
    pub(super) fn check_wall(&self, pool: &impl Workers, now: Nanos) -> bool {
        if self.wall.count.load(Ordering::Relaxed) == 0 || pool.all_exited() {
            // Nothing watched, or nobody left to run a check.
            return false;
        }
        let mut watched = self.wall.state.lock();
        if now.saturating_sub(watched.pruned_at) >= MAX_WALL_WAIT {
            watched.pruned_at = now;
            let left = watched.prune();
            self.wall.count.store(left, Ordering::Relaxed);
            if watched.tasks.is_empty() {
                watched.offset = None;
                return false;
            }
        }
        let offset = offset(&self.clock);
        let stepped = watched
            .offset
            .is_none_or(|placed| placed.abs_diff(offset) > tolerance(&self.clock));
        if stepped {
            watched.offset = Some(offset);
            // Each check job takes the strong reference it was made from:
            // none is dropped here.
            let jobs: Vec<_> = watched
                .tasks
                .iter()
                .filter_map(CellWeak::upgrade)
                .map(check_job)
                .collect();
            drop(watched);
            for job in jobs {
                pool.hand_over(job);
            }
            pool.notify();
        }
        true
    }
}

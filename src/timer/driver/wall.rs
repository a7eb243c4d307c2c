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
//! more than [`WALL_TOLERANCE`] since the tasks were placed, it hands each
//! watched task's check job to the workers, which place the task again at
//! its new deadline (`task/recurring.rs`). A run is also checked against
//! the wall clock when it falls due (a slow drift never makes it early).
//!
//! Monotonic tasks cost nothing here: the watch is one relaxed load per
//! turn while nothing is watched. The watch holds its tasks *weakly*: it
//! never keeps a task (its closure, its output, what they capture) alive,
//! and never drops the last reference to one, which would run user code on
//! the timer thread. The references to tasks gone are pruned at most once
//! per [`MAX_WALL_WAIT`]; a check job holds the task it checks, and is
//! dropped on the worker that runs it, behind the worker's unwind boundary.

use std::time::UNIX_EPOCH;

use std::sync::Weak;

use crate::sync::{AtomicUsize, Mutex, Ordering, StdArc};
use crate::task::recurring::WALL_TOLERANCE;
use crate::task::WallTask;
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
    tasks: Vec<Weak<dyn WallTask>>,
    /// The offset between the clocks when the tasks were last placed.
    offset: Option<i128>,
    /// When the ended tasks were last dropped from `tasks`.
    pruned_at: Nanos,
}

/// The wall clock minus the monotonic clock, in nanoseconds.
fn offset(clock: &Clock, now: Nanos) -> i128 {
    let wall = match clock.system_time().duration_since(UNIX_EPOCH) {
        Ok(since) => since.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    };
    wall - i128::from(now)
}

impl Timer {
    /// Watches the wall clock for `task` (module doc).
    pub(crate) fn watch_wall(&self, task: StdArc<dyn WallTask>) {
        let mut watched = self.wall.state.lock();
        if watched.offset.is_none() {
            watched.offset = Some(offset(&self.clock, self.clock.now()));
        }
        watched.tasks.push(StdArc::downgrade(&task));
        if self.wall.count.fetch_add(1, Ordering::Relaxed) == 0 {
            // The timer thread may sleep without a deadline: from now on it
            // turns at least once per `MAX_WALL_WAIT`.
            self.parker.unpark();
        }
    }

    /// One look at the wall clock (module doc), at time `now`: hands the
    /// check jobs of the watched tasks to `pool`'s workers if it was
    /// stepped. True if tasks are watched (the caller sleeps at most
    /// [`MAX_WALL_WAIT`]).
    pub(super) fn check_wall(&self, pool: &impl Workers, now: Nanos) -> bool {
        if self.wall.count.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut watched = self.wall.state.lock();
        if now.saturating_sub(watched.pruned_at) >= MAX_WALL_WAIT {
            watched.pruned_at = now;
            watched.tasks.retain(|task| task.strong_count() > 0);
            self.wall
                .count
                .store(watched.tasks.len(), Ordering::Relaxed);
            if watched.tasks.is_empty() {
                watched.offset = None;
                return false;
            }
        }
        let offset = offset(&self.clock, now);
        let stepped = watched
            .offset
            .is_none_or(|placed| placed.abs_diff(offset) > u128::from(WALL_TOLERANCE));
        if stepped {
            watched.offset = Some(offset);
            // Each check job takes the strong reference it was made from:
            // none is dropped here.
            let jobs: Vec<_> = watched
                .tasks
                .iter()
                .filter_map(Weak::upgrade)
                .map(WallTask::check_job)
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

//! [`Busy`]: work for an executor done outside its workers, which a
//! [`ManualClock`](crate::ManualClock)'s `advance` waits for.
//!
//! `advance` moves time from one deadline to the next only once every pool
//! on the clock is quiet (no job queued or running: `time/manual.rs`), so
//! that the tasks a run schedules take part. A library that hands part of
//! a task's work to a thread of its own (a store thread that claims the
//! job a timer task announced, then submits its handler) would break that:
//! the task ends, the pool is quiet, and `advance` moves on before the
//! thread has submitted anything. A `Busy` counts as one job of the pool
//! while it lives, so `advance` waits for the thread as it waits for a
//! worker. On the system clock a pool counts no jobs and a `Busy` costs
//! one reference count.

use crate::pool::Pool;
use crate::sync::Arc;

/// Holds its executor busy for a [`ManualClock`](crate::ManualClock):
/// while it lives, `advance` and `jump` wait as they wait for a running
/// task (made by [`ScheduledExecutor::busy`](crate::ScheduledExecutor::busy)).
/// On the system clock it has no effect. It may be sent to, and dropped
/// on, any thread.
///
/// ```
/// use chronopool::{ManualClock, ScheduledExecutor};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let pool = ScheduledExecutor::builder().clock(clock.clone()).build()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// // A thread of our own does the work a timer task hands it, and
/// // schedules the next step: `advance` waits for it.
/// let weak = pool.downgrade();
/// std::thread::spawn(move || {
///     for busy in rx {
///         if let Some(pool) = weak.upgrade() {
///             pool.schedule(|| println!("the next step"), Duration::from_secs(1)).unwrap();
///         }
///         drop(busy);
///     }
/// });
/// let p = pool.downgrade();
/// pool.schedule(move || { let _ = tx.send(p.upgrade().unwrap().busy()); }, Duration::from_secs(1))?;
/// clock.advance(Duration::from_secs(5)); // runs the task, then the next step
/// assert_eq!(pool.metrics().scheduled_tasks, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the executor is busy only while the guard lives"]
pub struct Busy {
    pool: Arc<Pool>,
}

impl Busy {
    pub(crate) fn new(pool: Arc<Pool>) -> Busy {
        pool.job_pushed();
        Busy { pool }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.pool.jobs_ended(1);
    }
}

impl std::fmt::Debug for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Busy").finish_non_exhaustive()
    }
}

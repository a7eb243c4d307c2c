//! Model: the last executor handle dropped on one of the pool's own
//! threads, through the public API (a whole pool: one worker and the timer
//! thread).
//!
//! A periodic task, first due at once, holds a clone of its executor; the
//! main thread calls `shutdown` and drops its own handle. Whoever drops the
//! task's closure drops the last handle: the timer thread, when the
//! shutdown policy discards the task between runs (it cancels the closure
//! after its turn released the backend lock), or the worker, when a run in
//! progress finds the pool shut down and ends the task. The executor's
//! `Drop` then runs on that thread, where it must not join the pool's
//! threads (one of them is the caller; the workers wait for the timer
//! thread's cancel). Asserted: no deadlock (loom runs every thread, the
//! detached ones included, to its end, and reports one that never ends),
//! the task ends cancelled, and its closure is dropped once (its guard
//! checks that it is not dropped twice; loom reports the guard's `Arc` as
//! leaked if it is never dropped). The closure may be dropped after the
//! join returned: a cancel publishes the final state before it drops the
//! closure it won.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chronopool::ScheduledExecutor;
use loom::sync::Arc;

/// Interleavings explored (printed at the end; see the README).
static EXPLORED: AtomicUsize = AtomicUsize::new(0);

/// Counts its drops, and fails on a second one.
struct DropGuard(Arc<loom::sync::atomic::AtomicUsize>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        assert_eq!(self.0.fetch_add(1, Ordering::SeqCst), 0, "dropped twice");
    }
}

#[test]
fn last_handle_dropped_on_a_pool_thread() {
    let start = Instant::now();
    loom::model(|| {
        EXPLORED.fetch_add(1, Ordering::Relaxed);
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .build()
            .unwrap();
        let drops = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let (guard, executor) = (DropGuard(drops.clone()), pool.clone());
        let task = pool
            .schedule_at_fixed_rate(
                move || {
                    let _keep = (&guard, &executor);
                },
                Duration::ZERO,
                Duration::from_secs(3600),
            )
            .unwrap();
        pool.shutdown();
        drop(pool);
        assert!(task.join().unwrap_err().is_cancelled());
    });
    eprintln!(
        "last_handle_dropped_on_a_pool_thread: {} interleavings, {:.1} s",
        EXPLORED.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}

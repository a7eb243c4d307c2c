//! Model: a task's state machine under run vs cancel vs join.
//!
//! One worker runs the task while another thread cancels it and the main
//! thread joins it. In every interleaving exactly one of "ran" and
//! "cancelled" wins, `cancel()` returns true iff the task did not run,
//! `join` returns (it is never left waiting) with the matching result, and
//! the closure is dropped exactly once.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use chronopool::{ScheduledExecutor, TaskError};
use loom::sync::Arc;

struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Interleavings explored (printed at the end; see the README).
static EXPLORED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn run_vs_cancel_vs_join() {
    let start = Instant::now();
    loom::model(|| {
        EXPLORED.fetch_add(1, Ordering::Relaxed);
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .build()
            .unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let (guard, r) = (CountDrop(drops.clone()), ran.clone());
        let handle = Arc::new(
            pool.submit(move || {
                let _guard = guard;
                r.fetch_add(1, Ordering::SeqCst);
                7
            })
            .unwrap(),
        );
        let canceller = {
            let handle = handle.clone();
            loom::thread::spawn(move || handle.cancel())
        };
        let cancelled = canceller.join().unwrap();
        let handle = Arc::try_unwrap(handle).unwrap();
        let result = handle.join();

        assert_eq!(ran.load(Ordering::SeqCst), usize::from(!cancelled));
        match result {
            Ok(v) => assert!(!cancelled && v == 7),
            Err(TaskError::Cancelled) => assert!(cancelled),
            Err(e) => panic!("unexpected {e}"),
        }
        drop(pool); // shuts down and joins the worker
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "the closure is dropped exactly once"
        );
    });
    eprintln!(
        "run_vs_cancel_vs_join: {} interleavings, {:.1} s",
        EXPLORED.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}

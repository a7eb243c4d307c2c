//! Model: an outside submission racing with `shutdown`, through the public
//! API (a whole pool: one worker and the timer thread).
//!
//! A thread submits a task while the main thread calls `shutdown` and then
//! `await_termination` (without a time-out). In every interleaving the
//! submission is either accepted, and then the task runs and its handle
//! returns its value, or refused with the closure given back; and the pool
//! terminates (a worker left asleep would make `await_termination` wait
//! forever: loom reports the deadlock). This is the public-API form of the
//! component model `pool::loom_model::submit_vs_shutdown`, the regression
//! test of the refused-submission wake-up fix.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chronopool::{ScheduledExecutor, SubmitErrorKind};

/// Interleavings explored (printed at the end; see the README).
static EXPLORED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn submit_vs_shutdown() {
    let start = Instant::now();
    loom::model(|| {
        EXPLORED.fetch_add(1, Ordering::Relaxed);
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .build()
            .unwrap();
        let submitter = {
            let pool = pool.clone();
            loom::thread::spawn(move || match pool.submit(|| 7) {
                Ok(handle) => Some(handle),
                Err(refused) => {
                    assert_eq!(refused.kind(), SubmitErrorKind::Shutdown);
                    assert_eq!(refused.into_inner()(), 7, "the closure comes back");
                    None
                }
            })
        };
        pool.shutdown();
        let accepted = submitter.join().unwrap();
        assert!(pool.await_termination(Duration::MAX));
        if let Some(handle) = accepted {
            assert_eq!(handle.join().ok(), Some(7));
        }
    });
    eprintln!(
        "submit_vs_shutdown: {} interleavings, {:.1} s",
        EXPLORED.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}

//! Model: panic isolation through the public API (a whole pool: one worker
//! and the timer thread).
//!
//! A task panics on the only worker while the main thread submits another
//! one. In every interleaving the worker survives and runs the second task
//! (its handle returns its value), the `on_panic` hook sees the panic
//! exactly once, the metrics count it, and the pool terminates after
//! `shutdown`.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use chronopool::ScheduledExecutor;
use loom::sync::Arc;

/// Interleavings explored (printed at the end; see the README).
static EXPLORED: AtomicUsize = AtomicUsize::new(0);

/// The payload of the task's panic; the panic hook keeps quiet about it.
struct Expected;

fn quiet_expected_panics() {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Expected>() {
                previous(info);
            }
        }));
    });
}

#[test]
fn panic_isolation() {
    quiet_expected_panics();
    let start = Instant::now();
    loom::model(|| {
        EXPLORED.fetch_add(1, Ordering::Relaxed);
        let seen = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let hook_seen = seen.clone();
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .on_panic(move |payload| {
                assert!(payload.message().is_none());
                hook_seen.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        pool.execute(|| std::panic::panic_any(Expected)).unwrap();
        let after = pool.submit(|| 7).unwrap();
        assert_eq!(after.join().ok(), Some(7));
        pool.shutdown();
        assert!(pool.await_termination(Duration::MAX));
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!(pool.metrics().panicked_tasks, 1);
    });
    eprintln!(
        "panic_isolation: {} interleavings, {:.1} s",
        EXPLORED.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}

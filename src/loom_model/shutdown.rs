//! loom models of the shutdown policies (see `timer.rs` here for
//! how the models treat time).
//!
//! * `periodic_rearm_vs_shutdown`: a periodic task, due at once, runs on a
//!   real worker and re-arms while the main thread calls `shutdown` (which
//!   does not keep periodic tasks). Asserted: it runs at most once, ends
//!   CANCELLED (its join says so), its closure is dropped once, `pending`
//!   is 0, and the worker and the timer thread exit (a re-armed entry that
//!   nobody removes would keep them waiting: deadlock).
//! * `discarded_at_shutdown_before_the_workers_exit`: the shutdown
//!   policies discard a delayed task (as when the last executor handle is
//!   dropped) while a real worker waits to exit. The timer thread moves
//!   the entry to `doomed` under the lock and cancels it after releasing
//!   the lock, its closure's destructor (user code) running outside it.
//!   Asserted: the worker exits only after the closure was dropped (the
//!   entry stays counted in `pending` until it is cancelled), the handle
//!   says cancelled, `pending` is 0, and both threads exit.
//! * `discarded_at_shutdown_vs_shutdown_now`: the same discard races with
//!   `shutdown_now`, whose drain also takes what `doomed` holds. Asserted:
//!   the task is cancelled by the timer thread or returned by
//!   `shutdown_now`, exactly one of the two; its closure is dropped once;
//!   `pending` is 0.

use super::timer::{schedule, LATER};
use crate::loom_model::support::{
    bare_pool, join_all, model, schedule_periodic, spawn_workers, DropCounter,
};
use crate::sync::Ordering;
use crate::sync::{thread, Arc, AtomicUsize};
use crate::timer::driver::run_with_clock;
use crate::timer::driver::waiting::Waiting;

#[test]
fn periodic_rearm_vs_shutdown() {
    model("timer::periodic_rearm_vs_shutdown", || {
        let (pool, deques) = bare_pool(1, Default::default());
        let (runs, drops) = (Arc::new(AtomicUsize::new(0)), DropCounter::new());
        let (r, guard) = (Arc::clone(&runs), drops.guard());
        let period = LATER;
        let task = schedule_periodic(
            &pool,
            move || {
                let _keep = &guard;
                r.fetch_add(1, Ordering::SeqCst);
            },
            0,
            period,
        )
        .expect("the pool accepts it");
        let workers = spawn_workers(&pool, deques);
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
        };
        pool.shutdown();
        join_all(workers);
        timer.join().unwrap();
        assert!(runs.load(Ordering::SeqCst) <= 1);
        assert!(task.join().is_err_and(|e| e.is_cancelled()));
        assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
        assert_eq!(pool.timer.pending(), 0);
    });
}

#[test]
fn discarded_at_shutdown_before_the_workers_exit() {
    model(
        "timer::discarded_at_shutdown_before_the_workers_exit",
        || {
            let (pool, deques) = bare_pool(1, Default::default());
            pool.timer.discard_on_shutdown();
            let drops = DropCounter::new();
            let guard = drops.guard();
            let task = schedule(&pool, move || drop(guard), 0, LATER);
            let workers = spawn_workers(&pool, deques);
            let timer = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
            };
            pool.shutdown();
            join_all(workers);
            assert_eq!(drops.drops(), 1, "the worker exited after the cancel");
            timer.join().unwrap();
            assert!(task.is_cancelled());
            assert_eq!(pool.timer.pending(), 0);
        },
    );
}

#[test]
fn discarded_at_shutdown_vs_shutdown_now() {
    model("timer::discarded_at_shutdown_vs_shutdown_now", || {
        let (pool, _) = bare_pool(1, Default::default());
        pool.timer.discard_on_shutdown();
        let drops = DropCounter::new();
        let guard = drops.guard();
        let task = schedule(&pool, move || drop(guard), 0, LATER);
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
        };
        pool.shutdown();
        let returned = pool.shutdown_now();
        let returned_count = returned.len();
        for job in returned {
            job.cancel(&*pool);
        }
        timer.join().unwrap();
        assert!(returned_count <= 1);
        assert!(task.is_cancelled());
        assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
        assert_eq!(pool.timer.pending(), 0);
    });
}

//! loom models of the timer thread's protocols (`RUSTFLAGS="--cfg loom"`,
//! see `loom-tests/README.md`). loom does not model time: the timer thread
//! runs its real turns ([`turn`], [`run_with_clock`]) on an explicit clock,
//! its timed sleep ends only when it is woken, and a model that lets time
//! pass moves its clock and then wakes the timer thread (which is what the
//! end of a timed wait does). Deadlines are far beyond the wall clock, so
//! that nothing depends on it.
//!
//! The models of each of the driver's protocols are in files of their own
//! (`commands`, `sweep`, `shutdown`, `wall`) and share the helpers here. Those of the hand-over:
//!
//! * `due_task_is_handed_to_a_worker_once`: a task scheduled for later
//!   falls due (the model's clock passes its deadline, then it wakes the
//!   timer thread), and the timer thread hands it to a real worker thread
//!   (the injector, then the sleep protocol's wake-up). Asserted: the
//!   caller's `join` sees its result, it ran exactly once, `pending` is
//!   back to 0 (a second hand-over would take it below), and after
//!   `shutdown` the worker and the timer thread exit.
//! * `due_task_vs_shutdown_now`: the timer thread hands a task that fell
//!   due to the injector while `shutdown_now` drains the timer, then the
//!   injector (no worker: nothing else takes it). Asserted: the task is
//!   returned exactly once (from the backend, the command queue or the
//!   injector: never lost between them, never both) and `pending` is 0.

use crate::handle::ScheduledHandle;
use crate::loom_model::support::{bare_pool, join_all, model, spawn_workers};
use crate::pool::Pool;
use crate::sync::{thread, Arc};
use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use crate::time::Nanos;
use crate::timer::driver::waiting::Waiting;
use crate::timer::driver::*;

/// Deadlines no wall clock reaches (about 146 and 292 years).
pub(super) const EARLIER: Nanos = 1 << 62;
pub(super) const LATER: Nanos = 1 << 63;

/// Schedules `f` at `deadline`, the time being `now` (the real
/// submission path: admission, `reserve`, `insert_reserved`).
pub(super) fn schedule<T: Send + 'static>(
    pool: &Arc<Pool>,
    f: impl FnOnce() -> T + Send + 'static,
    now: Nanos,
    deadline: Nanos,
) -> ScheduledHandle<T> {
    crate::loom_model::support::schedule(pool, f, now, deadline).expect("the pool accepts it")
}

/// Runs the timer thread's turns at time 0 until `done` says so after
/// a turn that would sleep; sleeps otherwise.
pub(super) fn turns_until(pool: &Pool, mut done: impl FnMut(Option<Nanos>, usize) -> bool) {
    loop {
        match turn(pool, || 0) {
            Turn::Exit => panic!("the timer thread exits only when the pool stops"),
            Turn::Again => continue,
            Turn::Sleep { next, held } => {
                if done(next, held) {
                    return;
                }
                pool.timer.sleep_until(next);
            }
        }
    }
}

#[test]
fn due_task_is_handed_to_a_worker_once() {
    model("timer::due_task_is_handed_to_a_worker_once", || {
        const DUE: Nanos = 5;
        let (pool, deques) = bare_pool(1, Default::default());
        let clock = Arc::new(AtomicU64::new(0));
        let workers = spawn_workers(&pool, deques);
        let timer = {
            let (pool, clock) = (Arc::clone(&pool), Arc::clone(&clock));
            thread::spawn(move || {
                run_with_clock(&*pool, || clock.load(Ordering::SeqCst), Waiting::new(0))
            })
        };
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let handle = schedule(
            &pool,
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                7
            },
            0,
            DUE,
        );
        // The deadline passes: what ends the timer thread's timed wait.
        clock.store(DUE, Ordering::SeqCst);
        pool.timer.wake();
        assert_eq!(handle.join().ok(), Some(7));
        pool.shutdown();
        join_all(workers);
        timer.join().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(pool.timer.pending(), 0);
    });
}

#[test]
fn due_task_vs_shutdown_now() {
    model("timer::due_task_vs_shutdown_now", || {
        const DUE: Nanos = 5;
        let (pool, _) = bare_pool(1, Default::default());
        let task = schedule(&pool, || 7, 0, DUE);
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || run_with_clock(&*pool, || DUE, Waiting::new(0)))
        };
        let returned = pool.shutdown_now();
        timer.join().unwrap();
        assert_eq!(returned.len(), 1, "returned exactly once");
        assert_eq!(pool.timer.pending(), 0);
        assert!(!pool.has_visible_work());
        drop(returned);
        assert!(task.is_cancelled());
    });
}

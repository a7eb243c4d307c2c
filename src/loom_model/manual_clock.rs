//! loom model of `advance` (`RUSTFLAGS="--cfg loom"`, see
//! `loom-tests/README.md`), over a pool on a manual clock with one real
//! worker thread and its real timer thread (`timer::driver::run`, which on
//! a manual clock parks without a deadline).
//!
//! `advance_vs_the_timer_thread`: a task is scheduled for time 5 and the
//! main thread advances the clock by 5 while the timer thread turns (woken
//! by the insert) and the worker runs what is handed over. The task itself
//! schedules a second one, due at once (its deadline, 5, is the time now:
//! it goes straight to the workers). Asserted: `advance` returns (a lost
//! notification of the job count, or a quiet seen while a job was still
//! queued, would leave it waiting or return early: loom reports the
//! deadlock, the asserts the early return); when it returns both tasks
//! have run exactly once, no job is counted and the time is 5; after
//! `shutdown` the worker and the timer thread exit.
//!
//! `the_last_task_after_shutdown_lets_the_worker_exit`: a task due at 5
//! is kept by `shutdown`, then `advance` hands it over. Asserted: it ran,
//! and the worker and the timer thread exit (a worker left asleep once
//! the last task is off `pending` would be a deadlock loom reports). The
//! path of `time_edges`'s stopped pool, which CI once saw not terminate
//! (2026-11-29): this model, bounded at two preemptions, finds no such
//! interleaving (the timer thread, woken by the shutdown, wakes the
//! worker at its turn). Four parallel runs of that test file then caught
//! it, and a diagnostic build printed the state: both workers asleep,
//! `pending` 0, the pool shut down. The next model shows how.
//!
//! `the_last_hand_over_wakes_the_workers`: the same without a timer
//! thread (on a manual clock it sleeps without a deadline, and may have
//! turned for the last time). Asserted: the task ran, and the worker
//! exits. The worker woken for the task `advance` hands over may run it
//! before the hand-over takes it off `pending`, see `pending` at 1, and
//! sleep again; `hand_over_at` used to wake the workers of a shut-down
//! pool only after alarms, and this model deadlocks with that code.
//!
//! `a_rearm_dropped_in_advance_is_cancelled`: a periodic task due at 0
//! runs and re-arms while `shutdown` (which keeps no periodic task) and
//! then `advance` by zero come; the re-arm's command may be applied by `advance`'s
//! hand-over after the timer thread's turn set the shutdown filter and
//! looked at the commands. Asserted: the task ran at most once, ends
//! cancelled, its closure is dropped once, `pending` is 0, and the worker
//! and the timer thread exit. (Such an entry waits in `doomed` for the
//! timer thread, which sleeps without a deadline on this clock; `place`
//! now wakes it for the cancel. Found by reading, not seen in a run: the
//! model passes without that wake too, at two preemptions and at three
//! (2,574,906 interleavings in 25 minutes, too long for the suite, which
//! runs it at two).)
//!
//! `jump_vs_a_catch_up_handed_over`: a task due at 2, and a jump to 5: it
//! runs at 5 and queues a second task due at 4 through the timer's
//! commands (as a periodic task re-arms for a catch-up run), which wake
//! the timer thread. Asserted: when the jump returns, the second task has
//! run too.
//! (Before the job word counted every job, `advance` read no job, then the
//! timer thread took the re-armed entry out and queued it, then `advance`
//! found the timer idle and returned with the run still queued: this
//! model fails so.)

use crate::loom_model::support::{
    join_all, manual_pool, model, model_bounded, schedule, schedule_periodic, spawn_workers,
    DropCounter,
};
use crate::pool::Pool;
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{Arc, AtomicUsize};
use crate::sync::{Ordering, StdArc};
use crate::time::manual::*;
use std::time::Duration;

/// A pool on a fresh manual clock with its real worker and timer thread
/// started: the clock's state, the pool, the worker, the timer thread.
fn running_manual_pool() -> (
    StdArc<ManualState>,
    Arc<Pool>,
    Vec<JoinHandle<()>>,
    JoinHandle<()>,
) {
    let (state, pool, deques) = manual_pool();
    let workers = spawn_workers(&pool, deques);
    let timer_thread = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || crate::timer::driver::run(&*pool))
    };
    (state, pool, workers, timer_thread)
}

/// Schedules a task at 5 on `pool` (the time being 0), shuts the pool
/// down (which keeps delayed tasks), advances the clock to 5 and asserts
/// that the task ran.
fn run_a_kept_task_after_shutdown(state: &ManualState, pool: &Arc<Pool>) {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    let _kept = schedule(
        pool,
        move || {
            r.fetch_add(1, Ordering::SeqCst);
        },
        0,
        5,
    )
    .expect("the pool accepts it");
    pool.shutdown();
    state.advance_through(&[&**pool as &dyn Driven], Duration::from_nanos(5));
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the kept task ran");
}

#[test]
fn advance_vs_the_timer_thread() {
    model("time::advance_vs_the_timer_thread", || {
        let (state, pool, workers, timer_thread) = running_manual_pool();
        let ran = Arc::new(AtomicUsize::new(0));
        let (r, p) = (Arc::clone(&ran), Arc::clone(&pool));
        let _first = schedule(
            &pool,
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                let r = Arc::clone(&r);
                let _second = schedule(&p, move || r.fetch_add(1, Ordering::SeqCst), 5, 5);
            },
            0,
            5,
        )
        .expect("the pool accepts it");
        state.advance_through(&[&*pool as &dyn Driven], Duration::from_nanos(5));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            2,
            "both tasks ran before advance returned"
        );
        assert_eq!(Driven::jobs(&*pool).live(), 0);
        assert_eq!(state.now(), 5);
        pool.shutdown();
        join_all(workers);
        timer_thread.join().unwrap();
    });
}

#[test]
fn jump_vs_a_catch_up_handed_over() {
    // Two preemptions find the race (checked: with the second read of the
    // job word removed it fails); three took 418 s, a third of the suite.
    model_bounded("time::jump_vs_a_catch_up_handed_over", 2, || {
        let (state, pool, workers, timer_thread) = running_manual_pool();
        let ran = Arc::new(AtomicUsize::new(0));
        let (r, p) = (Arc::clone(&ran), Arc::clone(&pool));
        let _first = schedule(
            &pool,
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                // As a re-arm: through the timer's commands (the time read
                // before the run), due already at the time now.
                let r = Arc::clone(&r);
                let _second = schedule(&p, move || r.fetch_add(1, Ordering::SeqCst), 2, 4);
            },
            0,
            2,
        )
        .expect("the pool accepts it");
        state.jump_through(&[&*pool as &dyn Driven], Duration::from_nanos(5));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            2,
            "the task due at 2 and the one it queued, due at 4, ran before the jump returned"
        );
        assert_eq!(Driven::jobs(&*pool).live(), 0);
        pool.shutdown();
        join_all(workers);
        timer_thread.join().unwrap();
    });
}

#[test]
fn the_last_task_after_shutdown_lets_the_worker_exit() {
    model_bounded(
        "time::the_last_task_after_shutdown_lets_the_worker_exit",
        2,
        || {
            let (state, pool, workers, timer_thread) = running_manual_pool();
            run_a_kept_task_after_shutdown(&state, &pool);
            join_all(workers);
            timer_thread.join().unwrap();
        },
    );
}

#[test]
fn a_rearm_dropped_in_advance_is_cancelled() {
    model_bounded("time::a_rearm_dropped_in_advance_is_cancelled", 2, || {
        let (state, pool, workers, timer_thread) = running_manual_pool();
        let (runs, drops) = (Arc::new(AtomicUsize::new(0)), DropCounter::new());
        let (r, guard) = (Arc::clone(&runs), drops.guard());
        let task = schedule_periodic(
            &pool,
            move || {
                let _keep = &guard;
                r.fetch_add(1, Ordering::SeqCst);
            },
            0,
            5,
        )
        .expect("the pool accepts it");
        pool.shutdown();
        // By zero: the hand-over applies the re-arm's command (due at 5)
        // and runs nothing more.
        state.advance_through(&[&*pool as &dyn Driven], Duration::ZERO);
        join_all(workers);
        timer_thread.join().unwrap();
        assert!(runs.load(Ordering::SeqCst) <= 1);
        assert!(task.join().is_err_and(|e| e.is_cancelled()));
        assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
        assert_eq!(pool.timer.pending(), 0);
    });
}

#[test]
fn the_last_hand_over_wakes_the_workers() {
    model_bounded("time::the_last_hand_over_wakes_the_workers", 2, || {
        let (state, pool, deques) = manual_pool();
        let workers = spawn_workers(&pool, deques);
        run_a_kept_task_after_shutdown(&state, &pool);
        join_all(workers);
    });
}

//! loom models of the count-and-sweep protocol (see `timer.rs`
//! here for how the models treat time).
//!
//! * `cancel_vs_sweep`: a cancel races with the timer thread's turn (its
//!   placing of the entry, its publication of `sweep_at` and its last look
//!   at the count before it sleeps). Asserted: the entry is swept out
//!   either way (the timer thread runs until the backend is empty; a
//!   missed sweep would leave it asleep: deadlock), `pending` is exactly 0
//!   and the closure was dropped once.
//! * `cancel_vs_shutdown_keeping_delayed`: the same race after `shutdown`,
//!   when the first turn after it takes the kept delayed tasks out and
//!   puts them back (`cancel_on_shutdown`'s purge). Asserted as above: a
//!   cancel does not depend on where its entry is (a cancel that removed
//!   its entry by key would miss one the purge moved, and leave it, and
//!   `pending`, until its deadline).
//! * `reserve_after_cancel_at_the_limit`: room for one task; it is
//!   scheduled and cancelled, and another scheduled, while the timer thread
//!   takes a turn (placing the first entry, sweeping). Asserted: the second
//!   is admitted whatever the interleaving (a sweep that counted the cancel
//!   before its entry was placed, or lowered the count before giving the
//!   slot back, would make `reserve` refuse it), and `pending` is 1.
//! * `two_cancels_reach_sweep_at`: four entries (so `sweep_at` is 2), two
//!   of them cancelled by two threads at once while the timer thread turns.
//!   Asserted: the second cancel to be counted leads to a sweep (the timer
//!   thread runs until it holds two entries: a lost wake-up is a
//!   deadlock), the two live entries stay, and `pending` is 2.

use super::timer::{schedule, turns_until, LATER};
use crate::loom_model::support::{bare_pool, join_all, model, DropCounter, DEFAULT_POLICY};
use crate::pool::Pool;
use crate::sync::{thread, Arc};
use crate::timer::driver::turn;
use crate::timer::driver::Timer;
use crate::timer::TimerQueue;

/// A cancel racing with the timer thread's placing of the entry; with
/// `shut_down`, after `shutdown` (see `shutdown`).
fn race_cancel_with_place(shut_down: bool) {
    let (pool, _) = bare_pool(1, Default::default());
    let drops = DropCounter::new();
    let guard = drops.guard();
    let handle = schedule(&pool, move || drop(guard), 0, LATER);
    if shut_down {
        pool.shutdown();
    }
    let timer = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || turns_until(&pool, |_, held| held == 0))
    };
    assert!(handle.cancel());
    timer.join().unwrap();
    // A removal the timer thread did not need may still be queued.
    assert!(pool.timer.drain(&*pool).is_empty());
    assert_eq!(pool.timer.pending(), 0);
    assert_eq!(drops.drops(), 1);
}

#[test]
fn cancel_vs_sweep() {
    model("timer::cancel_vs_sweep", || race_cancel_with_place(false));
}

#[test]
fn cancel_vs_shutdown_keeping_delayed() {
    model("timer::cancel_vs_shutdown_keeping_delayed", || {
        race_cancel_with_place(true)
    });
}

#[test]
fn reserve_after_cancel_at_the_limit() {
    model("timer::reserve_after_cancel_at_the_limit", || {
        let timer = Timer::new(TimerQueue::heap(), DEFAULT_POLICY, 1);
        let pool = Arc::new(Pool::new(1, Default::default(), timer).0);
        let first = schedule(&pool, || (), 0, LATER);
        let turning = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let _ = turn(&*pool, || 0);
            })
        };
        assert!(first.cancel());
        let second = crate::loom_model::support::schedule(&pool, || (), 0, LATER);
        turning.join().unwrap();
        assert!(second.is_ok(), "the cancelled task's slot is free");
        assert_eq!(pool.timer.pending(), 1);
    });
}

#[test]
fn two_cancels_reach_sweep_at() {
    model("timer::two_cancels_reach_sweep_at", || {
        let (pool, _) = bare_pool(1, Default::default());
        // Two at a time (the command queue holds two under loom); the
        // timer thread places them and publishes `sweep_at` = 2.
        let mut handles: Vec<_> = (0..2).map(|_| schedule(&pool, || (), 0, LATER)).collect();
        turns_until(&pool, |_, held| held == 2);
        handles.extend((0..2).map(|_| schedule(&pool, || (), 0, LATER)));
        turns_until(&pool, |_, held| held == 4);
        let mut handles = handles.into_iter();
        let cancellers: Vec<_> = handles
            .by_ref()
            .take(2)
            .map(|h| thread::spawn(move || assert!(h.cancel())))
            .collect();
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || turns_until(&pool, |_, held| held == 2))
        };
        join_all(cancellers);
        timer.join().unwrap();
        assert_eq!(pool.timer.pending(), 2);
        assert!(handles.all(|h| !h.is_finished()), "the live entries stay");
    });
}

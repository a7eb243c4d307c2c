//! loom models of the command queue's protocols: the wake-up (`armed`), the
//! wait for room, and the timer thread's exit (see `timer.rs`
//! here for how the models treat time).
//!
//! * `earlier_deadline_rearms_the_waiter`: the timer thread sleeps until a
//!   task's deadline while a task due earlier is scheduled. Asserted: it
//!   does not stay asleep past the earlier deadline: it is woken, or sees
//!   the command before it parks, and re-arms for the earlier deadline (if
//!   it slept on, loom would report the deadlock); nothing is handed over
//!   early; `pending` counts both tasks.
//! * `full_queue_waits_for_the_timer_thread`: the timer thread sleeps
//!   until a placed task's deadline, with one command queued, while one
//!   thread schedules an earlier task and another a later one; the second
//!   of them to push may find the command queue (2 commands under loom)
//!   full and wait for room. Asserted: the timer thread re-arms for the
//!   earlier deadline, and every waiting scheduler is let through (a lost
//!   signal of `room`, or a scheduler that waits without waking the timer
//!   thread, is a deadlock); `pending` is 4.
//! * `full_queue_vs_shutdown_now`: the command queue is full when the
//!   timer thread starts, and a third task is scheduled while
//!   `shutdown_now` stops the pool: its scheduler may wait for room while
//!   the timer thread exits. Asserted: it is let through (it applies the
//!   queue itself once the timer thread has exited; waiting on would be a
//!   deadlock, as `shutdown_now` waits for it), and `shutdown_now` returns
//!   every admitted task exactly once, with `pending` back to 0.
//! * `full_queue_as_the_timer_thread_exits`: three inserts (one more than
//!   the command queue holds) while the timer thread exits without taking
//!   any. Asserted: the third is let through (it applies the queue itself,
//!   if need be after waking from its wait: a scheduler that waits on
//!   after the exit, or an exit that does not signal `room`, is a
//!   deadlock), and all three are in the backend or the queue.

use super::timer::{schedule, turns_until, EARLIER, LATER};
use crate::loom_model::support::{bare_pool, model, DEFAULT_POLICY};
use crate::sync::{thread, Arc};
use crate::sync::{CellArc, Ordering};
use crate::timer::driver::waiting::Waiting;
use crate::timer::driver::Timer;
use crate::timer::driver::{run_with_clock, Probe};
use crate::timer::TimerQueue;

#[test]
fn earlier_deadline_rearms_the_waiter() {
    model("timer::earlier_deadline_rearms_the_waiter", || {
        let (pool, _) = bare_pool(1, Default::default());
        let _later = schedule(&pool, || (), 0, LATER);
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || turns_until(&pool, |next, _| next == Some(EARLIER)))
        };
        let _earlier = schedule(&pool, || (), 0, EARLIER);
        timer.join().unwrap();
        assert_eq!(pool.timer.armed.load(Ordering::SeqCst), EARLIER);
        assert_eq!(pool.timer.pending(), 2);
        assert!(!pool.has_visible_work(), "nothing is due yet");
    });
}

#[test]
fn full_queue_waits_for_the_timer_thread() {
    model("timer::full_queue_waits_for_the_timer_thread", || {
        let (pool, _) = bare_pool(1, Default::default());
        let _placed = schedule(&pool, || (), 0, LATER);
        turns_until(&pool, |next, _| next == Some(LATER));
        // One command queued (capacity 2 under loom): of the two
        // inserts below, the second finds the queue full unless the
        // timer thread took a command first, and waits for room.
        let _queued = schedule(&pool, || (), 0, LATER);
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || turns_until(&pool, |next, _| next == Some(EARLIER)))
        };
        let earlier = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || drop(schedule(&pool, || (), 0, EARLIER)))
        };
        let _last = schedule(&pool, || (), 0, LATER);
        earlier.join().unwrap();
        timer.join().unwrap();
        assert_eq!(pool.timer.pending(), 4);
        assert!(!pool.has_visible_work(), "nothing is due yet");
    });
}

#[test]
fn full_queue_vs_shutdown_now() {
    model("timer::full_queue_vs_shutdown_now", || {
        let (pool, _) = bare_pool(1, Default::default());
        // Two commands: the queue is full (capacity 2 under loom).
        let _first = schedule(&pool, || (), 0, LATER);
        let _second = schedule(&pool, || (), 0, LATER);
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
        };
        let third = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                crate::loom_model::support::schedule(&pool, || (), 0, LATER).is_ok()
            })
        };
        let returned = pool.shutdown_now();
        let admitted = third.join().unwrap();
        timer.join().unwrap();
        assert_eq!(returned.len(), 2 + usize::from(admitted), "each once");
        assert_eq!(pool.timer.pending(), 0);
    });
}

#[test]
fn full_queue_as_the_timer_thread_exits() {
    model("timer::full_queue_as_the_timer_thread_exits", || {
        let timer = Arc::new(Timer::new(TimerQueue::heap(), DEFAULT_POLICY, usize::MAX));
        let exit = {
            let timer = Arc::clone(&timer);
            thread::spawn(move || timer.timer_thread_exits())
        };
        for _ in 0..3 {
            assert!(timer.reserve(&mut Vec::new()));
            timer.insert_reserved(crate::task::delayed::erase(CellArc::new(Probe(LATER))));
        }
        exit.join().unwrap();
        assert_eq!(timer.pending(), 3);
        let mut queue = timer.queue.lock();
        assert!(timer.apply_commands(&mut queue, 0), "the queue empties");
        assert_eq!(queue.len(), 3);
    });
}

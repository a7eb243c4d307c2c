//! loom model of a poll that helps the timer (`timer::driver::help`),
//! `RUSTFLAGS="--cfg loom"`, see `loom-tests/README.md`.
//!
//! * `help_vs_a_turn`: an alarm placed in the backend falls due; the timer
//!   thread takes its real turn at that time while another thread, a
//!   future's poll, helps at the same time. Asserted: the alarm is rung
//!   once (its waker woken once, from whichever thread took it), `pending`
//!   is back to 0 (a second hand-over would take it below), and the
//!   backend holds nothing.
//! * `help_vs_shutdown_now`: a task placed in the backend falls due and a
//!   poll helps (it hands the task to the injector) while `shutdown_now`
//!   drains the backend, then the injector. Asserted: the task is returned
//!   exactly once (never lost between the two, never both) and `pending`
//!   is 0.

use std::task::{Wake, Waker};

use crate::loom_model::support::{bare_pool, model};
use crate::sync::{thread, Arc, AtomicUsize, CellArc, Ordering, StdArc};
use crate::task::alarm::{Alarm, Rang};
use crate::time::Nanos;
use crate::timer::driver::help::help;
use crate::timer::driver::{turn, Turn};

/// Turns at time 0 until the timer would sleep (the entries sent to it
/// are placed), and checks that it would sleep until `due`.
fn place(pool: &crate::pool::Pool, due: Nanos) {
    loop {
        match turn(pool, || 0) {
            Turn::Again => continue,
            Turn::Sleep { next, .. } => break assert_eq!(next, Some(due)),
            Turn::Exit => unreachable!("the pool runs"),
        }
    }
}

/// A waker that counts its wakes.
struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn help_vs_a_turn() {
    model("help::help_vs_a_turn", || {
        const DUE: Nanos = 5;
        let (pool, _) = bare_pool(1, Default::default());
        let wakes = StdArc::new(Counting(AtomicUsize::new(0)));
        let waker = Waker::from(StdArc::clone(&wakes));
        // Registered before it is shared, as a sleep's first poll does.
        let (alarm, entry) = CellArc::pair(Alarm::waiting(DUE, waker));
        assert!(pool.set_alarm(entry));
        // The timer thread places it (a turn at 0: it sleeps until DUE).
        place(&pool, DUE);
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                // Its sleep until DUE ended: the turn at DUE.
                while let Turn::Again = turn(&*pool, || DUE) {}
            })
        };
        help(&*pool, DUE);
        timer.join().unwrap();
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "woken once");
        assert_eq!(alarm.rang(), Some(Rang::AtDeadline));
        assert_eq!(pool.timer.pending(), 0);
        assert_eq!(pool.timer.queue.lock().len(), 0);
    });
}

#[test]
fn help_vs_shutdown_now() {
    model("help::help_vs_shutdown_now", || {
        const DUE: Nanos = 5;
        let (pool, _) = bare_pool(1, Default::default());
        let task =
            crate::loom_model::support::schedule(&pool, || 7, 0, DUE).expect("the pool accepts it");
        place(&pool, DUE);
        let stopper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.shutdown_now())
        };
        help(&*pool, DUE);
        let returned = stopper.join().unwrap();
        assert_eq!(returned.len(), 1, "returned exactly once");
        assert_eq!(pool.timer.pending(), 0);
        assert!(!pool.has_visible_work());
        drop(returned);
        assert!(task.is_cancelled());
    });
}

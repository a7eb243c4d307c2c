//! loom model (`RUSTFLAGS="--cfg loom"`, see `loom-tests/README.md`) of a
//! task with a time-out: its runner (the job run on one thread), the timer
//! timing it out on another, and the handle joining on the main thread.
//!
//! * `time_out_vs_run_vs_join`: asserted: `join` returns (a lost wake-up
//!   would leave it parked: loom reports the deadlock); `Ok` only if the
//!   closure ran and the time-out lost; `TimedOut` otherwise, the closure
//!   then having run at most once (it had started); the closure and its
//!   output are dropped exactly once, after both threads are done.
//! * `submit_with_a_due_time_out_vs_shutdown`: a task submitted with a
//!   time-out due at once while the pool shuts down and the timer turns:
//!   the time-out may settle the task between its insert and the refused
//!   push. Asserted: the submission neither panics nor loses the closure:
//!   it is refused with the closure given back, or accepted (then its
//!   handle ends), and the closure is dropped exactly once. Before the
//!   fix, `give_back` reached `unreachable!` when the time-out had taken
//!   the closure first.

use crate::handle::TaskHandle;
use crate::loom_model::support::{bare_pool, model, DropCounter};
use crate::sync::{thread, Arc, AtomicUsize};
use crate::sync::{CellArc, Ordering};
use crate::task::deadline::*;
use crate::task::delayed::{erase, expire};
use crate::task::error::TaskError;
use crate::task::job::Job;
use crate::timer::driver::{turn, Turn};

#[test]
fn time_out_vs_run_vs_join() {
    model("deadline::time_out_vs_run_vs_join", || {
        let (pool, _) = bare_pool(1, Default::default());
        let (drops, ran) = (DropCounter::new(), Arc::new(AtomicUsize::new(0)));
        let (guard, r) = (drops.guard(), Arc::clone(&ran));
        let cell = DeadlineTask::new(
            move || {
                let _guard = guard;
                r.fetch_add(1, Ordering::SeqCst);
                7
            },
            5,
            None::<fn() -> u32>,
            (),
        );
        let runner = {
            let (pool, job) = (Arc::clone(&pool), Job::task(CellArc::clone(&cell)));
            thread::spawn(move || job.run(&*pool))
        };
        let timer = {
            let (pool, entry) = (Arc::clone(&pool), erase(cell.timeout_entry()));
            thread::spawn(move || expire(entry, &*pool).is_none())
        };
        let result = TaskHandle::new(cell, Arc::clone(&pool)).join();
        runner.join().unwrap();
        assert!(timer.join().unwrap());
        let ran = ran.load(Ordering::SeqCst);
        match result {
            Ok(v) => assert!(v == 7 && ran == 1),
            Err(TaskError::TimedOut) => assert!(ran <= 1),
            Err(e) => panic!("unexpected {e}"),
        }
        assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
    });
}

#[test]
fn submit_with_a_due_time_out_vs_shutdown() {
    model("deadline::submit_with_a_due_time_out_vs_shutdown", || {
        let (pool, _) = bare_pool(1, Default::default());
        let drops = DropCounter::new();
        let guard = drops.guard();
        let stopper = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.shutdown())
        };
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || while let Turn::Again = turn(&*pool, || 0) {})
        };
        let submitted = pool.submit_with_deadline(
            None,
            move || {
                let _guard = guard;
                7
            },
            0,
            None::<fn() -> u32>,
            (),
        );
        stopper.join().unwrap();
        timer.join().unwrap();
        match submitted {
            Ok(cell) => {
                // Shut down without workers: whatever queued it is given up
                // (the job was refused, or a shutdown drain cancels it).
                drop(pool.shutdown_now());
                let result = TaskHandle::new(cell, Arc::clone(&pool)).join();
                assert!(
                    matches!(result, Err(TaskError::TimedOut | TaskError::Cancelled)),
                    "{result:?}"
                );
            }
            Err(refused) => drop(refused.into_inner()),
        }
        assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
    });
}

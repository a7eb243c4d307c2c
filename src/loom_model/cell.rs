//! loom models of the state word (`RUSTFLAGS="--cfg loom"`, see
//! `loom-tests/README.md`), over a [`TaskCell`] alone: its runner (a
//! [`Job`](crate::job::Job) run on one thread), a canceller and the handle
//! on the main thread; no pool threads.
//!
//! * `run_vs_cancel_vs_join`: run vs cancel vs a blocking `join`. Exactly
//!   one of run and cancel wins (`cancel()` is true iff the closure did not
//!   run), `join` returns (a lost wake-up would leave it parked: loom
//!   reports the deadlock) with the winner's result, and the closure is
//!   dropped exactly once.
//! * `future_woken_by_run_or_cancel`: the handle as a `Future`. It is
//!   polled once with a waker that is then replaced (a second poll from
//!   a `block_on` whose blocking loom sees) while the task runs or is cancelled: the
//!   waker registered last is woken whenever the task became final after
//!   it registered (a lost wake-up leaves `block_on` waiting: deadlock), and
//!   the output is the winner's.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use crate::handle::TaskHandle;
use crate::loom_model::support::{bare_pool, block_on, model, DropCounter};
use crate::pool::Pool;
use crate::sync::{thread, Arc, AtomicUsize, Ordering};
use crate::sync::{CellArc, StdArc};
use crate::task::cell::*;
use crate::task::error::TaskError;
use crate::task::job::RunOutcome;
use crate::task::state::Cancellable;
use crate::task::Job;

/// A task whose closure counts its runs and holds a drop guard, its
/// queue job, and the handle.
fn task(
    drops: &DropCounter,
    ran: &Arc<AtomicUsize>,
) -> (CellArc<TaskCell<impl FnOnce() -> u32 + Send, u32>>, Job) {
    let (guard, ran) = (drops.guard(), Arc::clone(ran));
    let cell = CellArc::new(TaskCell::new(move || {
        let _guard = guard;
        ran.fetch_add(1, Ordering::SeqCst);
        7
    }));
    let job = Job::task(CellArc::clone(&cell));
    (cell, job)
}

/// A runner and a canceller of a task, and the pool (without
/// threads) they run it for.
type Racers = (
    Arc<Pool>,
    thread::JoinHandle<RunOutcome>,
    thread::JoinHandle<bool>,
);

/// Runs `job` on one thread while another cancels `cell`.
fn run_and_cancel<F: FnOnce() -> u32 + Send + 'static>(
    cell: &CellArc<TaskCell<F, u32>>,
    job: Job,
) -> Racers {
    let (pool, _) = bare_pool(1, Default::default());
    let runner = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || job.run(&*pool))
    };
    let canceller = {
        let (pool, cell) = (Arc::clone(&pool), CellArc::clone(cell));
        thread::spawn(move || Cancellable::cancel(&*cell, &*pool))
    };
    (pool, runner, canceller)
}

#[test]
fn run_vs_cancel_vs_join() {
    model("task::run_vs_cancel_vs_join", || {
        let (drops, ran) = (DropCounter::new(), Arc::new(AtomicUsize::new(0)));
        let (cell, job) = task(&drops, &ran);
        let (pool, runner, canceller) = run_and_cancel(&cell, job);
        let result = TaskHandle::new(cell, pool).join();
        let cancelled = canceller.join().unwrap();
        let outcome = runner.join().unwrap();

        assert_eq!(ran.load(Ordering::SeqCst), usize::from(!cancelled));
        match result {
            Ok(v) => assert!(!cancelled && v == 7 && outcome == RunOutcome::Completed),
            Err(TaskError::Cancelled) => assert!(cancelled && outcome == RunOutcome::Cancelled),
            Err(e) => panic!("unexpected {e}"),
        }
        assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
    });
}

/// A waker that is never woken usefully: the first poll's, replaced by
/// the second poll's.
struct Stale;

impl Wake for Stale {
    fn wake(self: StdArc<Self>) {}
}

#[test]
fn future_woken_by_run_or_cancel() {
    model("task::future_woken_by_run_or_cancel", || {
        let (drops, ran) = (DropCounter::new(), Arc::new(AtomicUsize::new(0)));
        let (cell, job) = task(&drops, &ran);
        let (pool, runner, canceller) = run_and_cancel(&cell, job);
        let mut handle = TaskHandle::new(cell, pool);
        let stale = Waker::from(StdArc::new(Stale));
        let result = match Pin::new(&mut handle).poll(&mut Context::from_waker(&stale)) {
            Poll::Ready(result) => result,
            Poll::Pending => block_on(handle),
        };
        let cancelled = canceller.join().unwrap();
        runner.join().unwrap();

        assert_eq!(ran.load(Ordering::SeqCst), usize::from(!cancelled));
        match result {
            Ok(v) => assert!(!cancelled && v == 7),
            Err(TaskError::Cancelled) => assert!(cancelled),
            Err(e) => panic!("unexpected {e}"),
        }
        assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
    });
}

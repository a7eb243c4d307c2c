//! [`DeadlineTask`]: a one-shot task with a time-out (`submit_with_timeout`),
//! an ordinary task cell (`cell.rs`) that is also its own timer entry.
//!
//! The task goes to the workers as any submitted task does; the same cell
//! goes to the timer as an entry that is no task: when the time-out comes
//! the timer thread times the task out itself ([`Header::time_out`]):
//!
//! * not started: it is cancelled (it never runs), its closure dropped;
//! * running: the run is asked to stop (`chronopool::cancelled()` turns
//!   true in it) and the task settles for its handle at once, with
//!   [`TaskError::TimedOut`] or the fallback's value; the run's output,
//!   when it comes, is dropped unread with the cell;
//! * finished first: nothing.
//!
//! The timer holds the task through a [`TimeoutEntry`], a weak reference:
//! the last strong reference to the cell, which drops its closure or its
//! output (user code), is always the handle's or the job's, never the
//! timer's (a sweep drops the entries it removes under the timer's lock).
//!
//! One state word decides: of the worker's claim and the time-out, the
//! first to move it wins (loom: `deadline::time_out_vs_run_vs_join`). A
//! task that ends before its time-out counts its entry as a cancel with
//! the timer, which sweeps it out: nothing waits in the timer until the
//! deadline of a task long done, and a graceful shutdown does not wait
//! for it.

use crate::sync::cell::UnsafeCell;
use crate::sync::{AtomicBool, CellArc, CellWeak, Ordering, StdArc};
use crate::time::Nanos;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::cell::TaskCell;
use super::context::TaskContext;
use super::delayed::Delayed;
use super::error::{PanicPayload, TaskError};
use super::job::{Job, RunOutcome, Runnable};
use super::name::Label;
use super::state::{Cancellable, Header, Joinable};
use super::trace::Kind;

/// A task with a time-out at `deadline`, and the fallback that gives its
/// value if the time-out wins.
pub(crate) struct DeadlineTask<F, T, G, L = ()> {
    task: TaskCell<F, T, L>,
    fallback: UnsafeCell<Option<G>>,
    /// Its entry in the timer (which holds it weakly), told when the task
    /// ends first so that the sweep can take it out.
    entry: CellArc<TimeoutEntry<Self>>,
}

// SAFETY: the task cell is `Sync` by its own ground rules; `fallback` is
// only touched by the unique handle, in `take_output` (called once), or
// dropped with the cell.
unsafe impl<F: Send, T: Send, G: Send, L: Sync> Sync for DeadlineTask<F, T, G, L> {}

impl<F, T, G, L> DeadlineTask<F, T, G, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    G: FnOnce() -> T + Send + 'static,
    L: Label,
{
    /// The task (named by `label`), and its entry for the timer.
    pub(crate) fn new(f: F, deadline: Nanos, fallback: Option<G>, label: L) -> CellArc<Self> {
        CellArc::new_cyclic(|task| DeadlineTask {
            task: TaskCell::labelled(f, label),
            fallback: UnsafeCell::new(fallback),
            entry: CellArc::new(TimeoutEntry {
                task: task.clone(),
                done: AtomicBool::new(false),
                deadline,
            }),
        })
    }

    /// The timer's entry for its time-out.
    pub(crate) fn timeout_entry(&self) -> CellArc<TimeoutEntry<Self>> {
        CellArc::clone(&self.entry)
    }

    /// The task ended before its time-out: its entry is dead; the timer is
    /// told, to sweep it out.
    fn ended_first(&self, ctx: &dyn TaskContext) {
        self.entry.done.store(true, Ordering::Release);
        ctx.note_cancelled();
    }

    /// Takes the closure back out of a task whose submission was refused.
    pub(crate) fn reclaim(&self) -> Option<F> {
        self.task.reclaim()
    }
}

impl<F, T, G, L> Runnable for DeadlineTask<F, T, G, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    G: FnOnce() -> T + Send + 'static,
    L: Label,
{
    fn run(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        let outcome = this.task.run(ctx, None, Kind::WithTimeout);
        let ran = matches!(outcome, RunOutcome::Completed | RunOutcome::Panicked);
        if ran && !this.task.header().is_timed_out() {
            this.ended_first(ctx);
        }
        outcome
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        if !self.task.header().is_final() {
            self.task.cancel_then(ctx, || self.ended_first(ctx));
        }
    }

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        Some((self.task.header(), self.task.name()))
    }
}

impl<F, T, G, L> Cancellable for DeadlineTask<F, T, G, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    G: FnOnce() -> T + Send + 'static,
    L: Label,
{
    fn header(&self) -> &Header {
        self.task.header()
    }

    fn name(&self) -> Option<&StdArc<str>> {
        self.task.name()
    }

    fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        self.task.cancel_then(ctx, || self.ended_first(ctx))
    }
}

impl<F, T, G, L> Joinable<T> for DeadlineTask<F, T, G, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    G: FnOnce() -> T + Send + 'static,
    L: Label,
{
    fn take_output(&self) -> Result<T, TaskError> {
        if !self.task.header().is_timed_out() {
            return self.task.take_output();
        }
        // SAFETY: the unique handle calls this once (trait doc); nothing
        // else touches the fallback before the cell is dropped.
        let fallback = self.fallback.with_mut(|slot| unsafe { (*slot).take() });
        match fallback {
            None => Err(TaskError::TimedOut),
            Some(fallback) => catch_unwind(AssertUnwindSafe(fallback))
                .map_err(|payload| TaskError::Panicked(PanicPayload::new(payload))),
        }
    }

    unsafe fn cancellable(
        &self,
        this: &mut Option<CellArc<dyn Joinable<T>>>,
    ) -> CellArc<dyn Cancellable> {
        // SAFETY: `this` holds a reference to `self` (caller).
        unsafe { super::state::cancellable_as::<T, Self>(this) }
    }
}

/// The timer's entry for the time-out of a [`DeadlineTask`]: a weak
/// reference to it (module doc), and whether it ended first, which the
/// sweep reads without upgrading the reference (an upgrade under the
/// timer's lock could turn out the last strong reference, and drop the
/// task's output there).
pub(crate) struct TimeoutEntry<C> {
    task: CellWeak<C>,
    done: AtomicBool,
    deadline: Nanos,
}

impl<F, T, G, L> Delayed for TimeoutEntry<DeadlineTask<F, T, G, L>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    G: FnOnce() -> T + Send + 'static,
    L: Label,
{
    fn deadline(&self) -> Nanos {
        self.deadline
    }

    fn is_final(&self) -> bool {
        self.done.load(Ordering::Acquire) || self.task.strong_count() == 0
    }

    fn is_task(&self) -> bool {
        false
    }

    /// The time-out, on the timer's thread (outside its lock). The strong
    /// reference taken for it may turn out the last one: it is dropped
    /// through `ctx`.
    unsafe fn expire(
        &self,
        _this: &mut Option<CellArc<dyn Delayed>>,
        ctx: &dyn TaskContext,
    ) -> Option<Job> {
        if let Some(task) = self.task.upgrade() {
            task.task.time_out(ctx, || ctx.note_timed_out());
            ctx.drop_reporting(task);
        }
        None
    }

    /// The time-out given up (a shutdown discarding delayed work): the task
    /// itself is not touched; it runs or is cancelled as the pool's other
    /// tasks are.
    unsafe fn job(&self, this: &mut Option<CellArc<dyn Delayed>>) -> Job {
        let this = this.take().expect("the caller's reference");
        Job::detached(move || drop(this))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::context::TestContext;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Counts its drops (a capture of the closure or of the fallback).
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// A task with a time-out whose closure and fallback each capture a
    /// `Counted`.
    fn counted_task(
        drops: &Arc<AtomicUsize>,
    ) -> CellArc<DeadlineTask<impl FnOnce() -> u32, u32, impl FnOnce() -> u32>> {
        let (run, fall) = (Counted(drops.clone()), Counted(drops.clone()));
        DeadlineTask::new(
            move || {
                let _ = &run;
                7
            },
            100,
            Some(move || {
                let _ = &fall;
                8
            }),
            (),
        )
    }

    /// The task's own field holds the last reference to its timer entry,
    /// so the entry's weak reference to the task is dropped inside the
    /// task's destructor: `CellWeak`'s drop must not borrow the block
    /// while that destructor borrows the value (`cargo miri test` reported
    /// it under Stacked Borrows before `release_weak`).
    #[test]
    fn a_task_whose_timer_entry_is_gone_frees_both_from_its_own_destructor() {
        let drops = Arc::new(AtomicUsize::new(0));
        let task = counted_task(&drops);
        drop(task);
        assert_eq!(drops.load(SeqCst), 2, "the closure and the fallback");
    }

    /// The timer's entry outlives the task: it sees the task gone (final,
    /// for the sweep), its time-out does nothing, and its last drop frees
    /// the task's block.
    #[test]
    fn a_timer_entry_that_outlives_its_task_is_final_and_frees_the_block() {
        let ctx = TestContext::default();
        let drops = Arc::new(AtomicUsize::new(0));
        let task = counted_task(&drops);
        let entry = task.timeout_entry();
        assert!(!Delayed::is_final(&*entry));
        drop(task);
        assert_eq!(drops.load(SeqCst), 2);
        assert!(Delayed::is_final(&*entry), "the task is gone");
        // SAFETY: `this` is `None`: `expire` does not use it here.
        assert!(unsafe { entry.expire(&mut None, &ctx) }.is_none());
        assert!(ctx.panics.lock().unwrap().is_empty());
        drop(entry);
    }

    /// A task that ran before its time-out: its output is its closure's,
    /// its entry is final and counted with the timer, and the time-out
    /// that comes after changes nothing.
    #[test]
    fn a_task_that_ends_first_leaves_a_final_entry_and_its_output() {
        let ctx = TestContext::default();
        let drops = Arc::new(AtomicUsize::new(0));
        let task = counted_task(&drops);
        let entry = task.timeout_entry();
        assert_eq!(Runnable::run(&task, &ctx), RunOutcome::Completed);
        assert_eq!(drops.load(SeqCst), 1, "the closure, once run");
        assert!(Delayed::is_final(&*entry));
        assert_eq!(ctx.cancels.load(SeqCst), 1, "counted for the sweep");
        // SAFETY: `this` is `None`: `expire` does not use it here.
        assert!(unsafe { entry.expire(&mut None, &ctx) }.is_none());
        assert_eq!(Joinable::take_output(&*task).ok(), Some(7));
        drop(entry);
        drop(task);
        assert_eq!(drops.load(SeqCst), 2, "and the fallback, with the cell");
    }
}

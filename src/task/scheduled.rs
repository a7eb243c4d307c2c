//! [`ScheduledTask`]: a one-shot task that runs later, an ordinary task
//! cell (`cell.rs`: its state word, closure, output and waiter) plus its
//! deadline.
//!
//! Cancelling it moves its state to CANCELLED, counts the cancel with the
//! timer (through the context), whose sweeps take the dead entries out of
//! the delayed work queue, and drops the closure at once, so that neither
//! the closure nor the entry is kept until the deadline. The count comes
//! before the closure's destructor, which is user code: whatever it does,
//! the cancel is counted.

use crate::sync::{CellArc, StdArc};
use crate::time::Nanos;

use super::cell::TaskCell;
use super::context::TaskContext;
use super::delayed::Delayed;
use super::error::TaskError;
use super::job::{Job, RunOutcome, Runnable};
use super::name::Label;
use super::state::{Cancellable, Header, Joinable};
use super::trace::Kind;

/// A one-shot task with a deadline (and a name in `L`, if it has one).
pub(crate) struct ScheduledTask<F, T, L = ()> {
    task: TaskCell<F, T, L>,
    deadline: Nanos,
}

impl<F, T> ScheduledTask<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    /// An unnamed task.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn new(f: F, deadline: Nanos) -> Self {
        ScheduledTask::labelled(f, deadline, ())
    }
}

impl<F, T, L> ScheduledTask<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    /// A task named by `label`.
    pub(crate) fn labelled(f: F, deadline: Nanos, label: L) -> Self {
        ScheduledTask {
            task: TaskCell::labelled(f, label),
            deadline,
        }
    }
}

impl<F, T, L> Runnable for ScheduledTask<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    fn run(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        this.task.run(ctx, Some(this.deadline), Kind::Scheduled)
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        self.task.abandon(ctx);
    }

    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)> {
        Some((self.task.header(), self.task.name()))
    }
}

impl<F, T, L> Cancellable for ScheduledTask<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    fn header(&self) -> &Header {
        self.task.header()
    }

    fn name(&self) -> Option<&StdArc<str>> {
        self.task.name()
    }

    fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        self.task.cancel_then(ctx, || ctx.note_cancelled())
    }

    fn deadline(&self) -> Option<Nanos> {
        Some(self.deadline)
    }
}

impl<F, T, L> Joinable<T> for ScheduledTask<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    fn take_output(&self) -> Result<T, TaskError> {
        self.task.take_output()
    }

    unsafe fn cancellable(
        &self,
        this: &mut Option<CellArc<dyn Joinable<T>>>,
    ) -> CellArc<dyn Cancellable> {
        // SAFETY: `this` holds a reference to `self` (caller).
        unsafe { super::state::cancellable_as::<T, Self>(this) }
    }
}

impl<F, T, L> Delayed for ScheduledTask<F, T, L>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
    L: Label,
{
    fn deadline(&self) -> Nanos {
        self.deadline
    }

    fn is_final(&self) -> bool {
        self.task.header().is_final()
    }

    fn is_cancelled_task(&self) -> bool {
        self.task.header().is_cancelled()
    }

    unsafe fn job(&self, this: &mut Option<CellArc<dyn Delayed>>) -> Job {
        // SAFETY: `this` holds a reference to `self` (caller).
        unsafe { super::delayed::task_job::<Self>(this) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::context::TestContext;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_cancel_is_counted_with_the_timer_and_the_entry_becomes_final() {
        let ctx = TestContext::default();
        let task = CellArc::new(ScheduledTask::new(|| 7, 42));
        assert_eq!(Delayed::deadline(&*task), 42);
        assert!(Cancellable::cancel(&*task, &ctx));
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 1);
        assert!(Delayed::is_final(&*task));
        assert!(!Cancellable::cancel(&*task, &ctx), "a cancel wins once");
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_due_task_runs_through_its_job() {
        let ctx = TestContext::default();
        let task = CellArc::new(ScheduledTask::new(|| 7, 42));
        let entry = crate::task::delayed::erase(task.clone());
        assert_eq!(
            crate::task::delayed::into_job(entry).run(&ctx),
            RunOutcome::Completed
        );
        assert_eq!(task.take_output().ok(), Some(7));
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 0);
    }

    /// The cell of a scheduled task whose closure captures nothing and
    /// returns `()`: the header (16 bytes: the state word and the extras'
    /// pointer, `state.rs`), one slot for the closure or its output (8: a
    /// panic payload, with no tag: `cell.rs`), the deadline (8). With the
    /// `CellArc` counts that is 40 bytes, a 48-byte chunk of glibc's malloc
    /// (its size word and 16-byte rounding); 8 bytes more would make it a
    /// 64-byte chunk, as it was with the id and the waiter inline.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_scheduled_task_cell_stays_small() {
        fn cell_size<F: FnOnce() + Send + 'static>(_: &F) -> usize {
            std::mem::size_of::<ScheduledTask<F, ()>>()
        }
        assert_eq!(cell_size(&|| ()), 32);
    }
}

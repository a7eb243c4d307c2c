//! What a recurring task runs: the [`Body`] trait and its three bodies,
//! [`Repeat`] (a periodic closure), [`Until`] (one that runs until it
//! breaks with a value) and [`OneShot`] (a closure due once at a wall
//! time), with [`OnceView`], the one-shot seen as a task with a plain
//! output by its handle.

use super::*;

/// What a recurring task runs: a closure, and what a run can end the task
/// with.
pub(crate) trait Body: Send + 'static {
    /// The value a run can end the task with.
    type Output: Send + 'static;
    /// What kind of task runs it, for `tracing`.
    const KIND: Kind;
    /// Runs once: `Break` ends the task with the value.
    fn call(&mut self) -> ControlFlow<Self::Output>;
}

/// A periodic task's closure: it never ends the task itself.
pub(crate) struct Repeat<F>(pub(crate) F);

impl<F: FnMut() + Send + 'static> Body for Repeat<F> {
    type Output = ();
    const KIND: Kind = Kind::Periodic;
    fn call(&mut self) -> ControlFlow<()> {
        (self.0)();
        ControlFlow::Continue(())
    }
}

/// A closure that can end its task with a value.
pub(crate) struct Until<F, T>(pub(crate) F, PhantomData<fn() -> T>);

impl<F, T> Until<F, T> {
    pub(crate) fn new(f: F) -> Self {
        Until(f, PhantomData)
    }
}

impl<F, T> Body for Until<F, T>
where
    F: FnMut() -> ControlFlow<T> + Send + 'static,
    T: Send + 'static,
{
    type Output = T;
    const KIND: Kind = Kind::Trigger;
    fn call(&mut self) -> ControlFlow<T> {
        (self.0)()
    }
}

/// A one-shot closure: its run ends the task with its value.
pub(crate) struct OneShot<F>(pub(crate) Option<F>);

impl<F, T> Body for OneShot<F>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    type Output = T;
    const KIND: Kind = Kind::WallTime;
    fn call(&mut self) -> ControlFlow<T> {
        match self.0.take() {
            Some(f) => ControlFlow::Break(f()),
            None => ControlFlow::Continue(()),
        }
    }
}

/// A one-shot task at a wall time (a [`OneShot`] body), seen as a task with
/// output `T`: its run ends it with its value.
pub(crate) struct OnceView<C>(pub(crate) CellArc<C>);

impl<F, G, T, L> Cancellable for OnceView<RecurringTask<OneShot<F>, G, L>>
where
    F: FnOnce() -> T + Send + 'static,
    G: Trigger,
    T: Send + 'static,
    L: Label,
{
    fn header(&self) -> &Header {
        &self.0.header
    }

    fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        Cancellable::cancel(&*self.0, ctx)
    }

    fn deadline(&self) -> Option<Nanos> {
        Cancellable::deadline(&*self.0)
    }

    fn name(&self) -> Option<&StdArc<str>> {
        Cancellable::name(&*self.0)
    }
}

impl<F, G, T, L> Joinable<T> for OnceView<RecurringTask<OneShot<F>, G, L>>
where
    F: FnOnce() -> T + Send + 'static,
    G: Trigger,
    T: Send + 'static,
    L: Label,
{
    unsafe fn cancellable(
        &self,
        _this: &mut Option<CellArc<dyn Joinable<T>>>,
    ) -> CellArc<dyn Cancellable> {
        crate::task::state::cancellable(CellArc::clone(&self.0))
    }

    fn take_output(&self) -> Result<T, TaskError> {
        match self.0.take_output()? {
            Ended::ByClosure(value) => Ok(value),
            // A one-shot trigger always gives its run: not reached.
            Ended::ByTrigger => Err(TaskError::Cancelled),
        }
    }
}

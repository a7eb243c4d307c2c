//! The task running on this thread, for `chronopool::cancelled()`,
//! `task_id()` and `task_name()`, and for the panics its closure reports:
//! a thread-local pointer to its [`Header`] and to its name, set for the
//! length of its run. (A panic of its other user code, its trigger or its
//! closure dropped unrun, is named after the task by whoever catches it,
//! without the thread-local: a cancel stays as cheap as it was.)

use std::cell::Cell;
use std::ptr::NonNull;

use crate::sync::StdArc;

use super::id::TaskIdentity;
use super::state::Header;

/// What the thread-local points at while a task's code runs.
#[derive(Clone, Copy)]
struct Current {
    header: NonNull<Header>,
    name: Option<NonNull<StdArc<str>>>,
}

crate::sync::thread_local! {
    /// The task whose code runs on this thread; `None` between tasks.
    static RUNNING: Cell<Option<Current>> = const { Cell::new(None) };
}

/// Runs `f` as the run of the task whose header is `header` and whose name
/// is `name`: while it runs, the functions below read them. Nested runs (a
/// join that helps by running another task) restore the outer one after.
pub(crate) fn run_as<R>(header: &Header, name: Option<&StdArc<str>>, f: impl FnOnce() -> R) -> R {
    /// Restores the outer task, also if `f` unwinds.
    struct Restore(Option<Current>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0;
            RUNNING.with(|running| running.set(outer));
        }
    }
    let current = Current {
        header: NonNull::from(header),
        name: name.map(NonNull::from),
    };
    let _restore = Restore(RUNNING.with(|running| running.replace(Some(current))));
    f()
}

/// Calls `f` with the running task's header and name, if a task's code
/// runs on this thread.
fn with_current<R>(f: impl FnOnce(&Header, Option<&StdArc<str>>) -> R) -> Option<R> {
    let current = RUNNING.with(Cell::get)?;
    // SAFETY: the pointers were set by `run_as` from references that
    // outlive its call (the task's cell is held by whoever runs its code),
    // and are reset before `run_as` returns or unwinds; only this thread
    // reads them, within that call.
    let (header, name) = unsafe { (current.header.as_ref(), current.name.map(|n| n.as_ref())) };
    Some(f(header, name))
}

/// Whether the task running on this thread was asked to stop; `None` if
/// no task runs here.
pub(crate) fn stop_requested() -> Option<bool> {
    with_current(|header, _| header.stop_requested())
}

/// The id and name of the task running on this thread.
pub(crate) fn current() -> Option<TaskIdentity> {
    with_current(|header, name| header.identity(name))
}

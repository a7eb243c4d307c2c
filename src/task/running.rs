//! The task running on this thread, for `chronopool::cancelled()`: a
//! thread-local pointer to its [`Header`], set for the length of its run.

use std::cell::Cell;
use std::ptr;

use super::state::Header;

crate::sync::thread_local! {
    /// The header of the task running on this thread; null between tasks.
    static RUNNING: Cell<*const Header> = const { Cell::new(ptr::null()) };
}

/// Runs `f` as the run of the task whose header is `header`: while it
/// runs, [`stop_requested`] reads that header. Nested runs (a join that
/// helps by running another task) restore the outer one after.
pub(crate) fn run_as<R>(header: &Header, f: impl FnOnce() -> R) -> R {
    /// Restores the outer task, also if `f` unwinds.
    struct Restore(*const Header);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0;
            RUNNING.with(|running| running.set(outer));
        }
    }
    let _restore = Restore(RUNNING.with(|running| running.replace(header)));
    f()
}

/// Whether the task running on this thread was asked to stop; `None` if
/// no task runs here.
pub(crate) fn stop_requested() -> Option<bool> {
    let header = RUNNING.with(Cell::get);
    // SAFETY: a non-null pointer was set by `run_as` from a `&Header` that
    // outlives the call (the task's cell is held by the job running it),
    // and is reset before `run_as` returns or unwinds; only this thread
    // reads it.
    (!header.is_null()).then(|| unsafe { &*header }.stop_requested())
}

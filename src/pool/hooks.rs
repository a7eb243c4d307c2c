//! The user's callbacks ([`Hooks`]). Every hook is user code: a panic of
//! one is caught, and the thread goes on. The panics of user code that no
//! handle reports reach `on_panic` through the pool's task context
//! (`task/context.rs`).

use crate::task::unwind::ignore_panic;
use crate::task::PanicPayload;

/// A hook that sees every task panic.
pub(crate) type PanicHook = dyn Fn(&PanicPayload) + Send + Sync;
/// A hook run on each worker thread as it starts or stops.
pub(crate) type ThreadHook = dyn Fn() + Send + Sync;

/// The user's callbacks.
#[derive(Default)]
pub(crate) struct Hooks {
    pub(crate) on_panic: Option<Box<PanicHook>>,
    pub(crate) on_thread_start: Option<Box<ThreadHook>>,
    pub(crate) on_thread_stop: Option<Box<ThreadHook>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("on_panic", &self.on_panic.is_some())
            .field("on_thread_start", &self.on_thread_start.is_some())
            .field("on_thread_stop", &self.on_thread_stop.is_some())
            .finish()
    }
}

impl Hooks {
    /// Shows a task's panic to the `on_panic` hook; the caller keeps the
    /// payload (for the task's handle). A panic of the hook is caught.
    pub(crate) fn show_panic(&self, payload: &PanicPayload) {
        if let Some(hook) = &self.on_panic {
            ignore_panic(|| hook(payload));
        }
    }

    /// Runs the `on_thread_start` hook, if any; a panic of it is caught.
    pub(crate) fn thread_started(&self) {
        if let Some(hook) = &self.on_thread_start {
            ignore_panic(hook);
        }
    }

    /// Runs the `on_thread_stop` hook, if any; a panic of it is caught.
    pub(crate) fn thread_stopping(&self) {
        if let Some(hook) = &self.on_thread_stop {
            ignore_panic(hook);
        }
    }
}

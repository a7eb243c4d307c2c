//! The user's callbacks ([`Hooks`]), and where the panics of user code go.
//!
//! User code that runs for a task but whose panic has no handle to go to (a
//! closure dropped unrun, an output nobody joined, a waker) is dropped or
//! called through [`Hooks::drop_reporting`] and [`Hooks::wake`]: a panic
//! there is caught and handed to the `on_panic` hook, on the thread where
//! it happened, and never unwinds into the pool's threads or into the
//! caller of `cancel`, `shutdown_now` or a `drop`. Code that has no pool at
//! hand (the last-resort `Drop` of a queued job) uses [`Hooks::NONE`].

use std::task::Waker;

use crate::error::PanicPayload;
use crate::unwind::{ignore_panic, report_panic};

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
    /// No hooks: panics are caught and dropped (the default panic hook of
    /// `std` has printed them).
    pub(crate) const NONE: Hooks = Hooks {
        on_panic: None,
        on_thread_start: None,
        on_thread_stop: None,
    };

    /// Shows a task's panic to the `on_panic` hook; the caller keeps the
    /// payload (for the task's handle). A panic of the hook is caught.
    pub(crate) fn show_panic(&self, payload: &PanicPayload) {
        if let Some(hook) = &self.on_panic {
            ignore_panic(|| hook(payload));
        }
    }

    /// Shows a panic nobody else will see to the `on_panic` hook, then
    /// drops it (a `PanicPayload` catches a panic of its destructor).
    pub(crate) fn report(&self, payload: PanicPayload) {
        self.show_panic(&payload);
    }

    /// Drops `value`, which holds user code (a closure, a task's output, a
    /// waker): a panic of its destructor is [reported](Self::report).
    pub(crate) fn drop_reporting<T>(&self, value: T) {
        report_panic(|| drop(value), |payload| self.report(payload));
    }

    /// Wakes `waker` (user code): a panic of its `wake` is reported.
    pub(crate) fn wake(&self, waker: Waker) {
        report_panic(|| waker.wake(), |payload| self.report(payload));
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

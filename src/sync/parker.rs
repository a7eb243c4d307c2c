//! Blocking one thread until another wakes it.
//!
//! A [`Parker`] is a one-token semaphore: [`unpark`](Parker::unpark) leaves a
//! token (at most one), [`park`](Parker::park) blocks until there is one and
//! takes it. A token given before the `park` is not lost, which is what makes
//! "check, then park" free of lost wake-ups as long as the waker first makes
//! the checked condition true and then unparks.
//!
//! It is built from the `sync` shim's `Mutex` and `Condvar` (not
//! `std::thread::park`) so that loom can model it, and so that an unpark that
//! arrives late (after its waiter stopped caring) only leaves a token that
//! the next `park` consumes as a spurious wake-up: every caller parks in a
//! loop that re-checks its condition.
//!
//! A `Parker` is also a `std::task::Waker` (through `std::task::Wake`): a
//! thread that blocks on a task hands its parker to the task as the waker.

use std::cell::OnceCell;
use std::task::Wake;
use std::time::Instant;

use crate::sync::{AtomicUsize, Condvar, Mutex, Ordering, StdArc};

/// No token, nobody parked.
const EMPTY: usize = 0;
/// The owner is blocked (or about to block) on the condvar.
const PARKED: usize = 1;
/// A token is waiting to be taken.
const NOTIFIED: usize = 2;

/// A one-token semaphore that one thread parks on and any thread unparks.
///
/// Invariant: only the owning thread calls `park`/`park_timeout`; `state`
/// moves EMPTY -> PARKED only under `lock`, and an unparker that sees PARKED
/// takes `lock` before notifying, so the notification cannot fall between
/// the owner's state change and its wait.
#[derive(Debug, Default)]
pub(crate) struct Parker {
    state: AtomicUsize,
    lock: Mutex<()>,
    cvar: Condvar,
}

impl Parker {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Blocks until a token is available or `deadline` passes. Returns true
    /// if a token was taken. (Under loom a deadline never passes.)
    pub(crate) fn park_until(&self, deadline: Option<Instant>) -> bool {
        // loom does not model time, and a wall-clock deadline would make a
        // model's executions differ between runs (one already past returns
        // at once: with a model's own clock for the timer thread, a busy
        // loop). Under loom the wait ends only by `unpark`.
        #[cfg(loom)]
        let deadline: Option<Instant> = {
            let _ = deadline;
            None
        };
        // Fast path: a token is already there.
        if self
            .state
            .compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return true;
        }
        let mut guard = self.lock.lock();
        if self
            .state
            .compare_exchange(EMPTY, PARKED, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            // A token arrived between the fast path and the lock: take it.
            self.state.swap(EMPTY, Ordering::Acquire);
            return true;
        }
        loop {
            guard = match deadline {
                None => self.cvar.wait(guard),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        // Give up; take a token that raced with the timeout.
                        return self.state.swap(EMPTY, Ordering::Acquire) == NOTIFIED;
                    }
                    self.cvar.wait_timeout(guard, d - now)
                }
            };
            if self
                .state
                .compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
            // Spurious wake-up or timeout: wait again (the loop re-checks the deadline).
        }
    }

    /// Leaves a token and wakes the owner if it is parked.
    pub(crate) fn unpark(&self) {
        match self.state.swap(NOTIFIED, Ordering::Release) {
            EMPTY | NOTIFIED => {}
            _ => {
                // The owner is parked or between setting PARKED and waiting
                // (it holds the lock then): taking the lock orders our notify
                // after its wait began.
                drop(self.lock.lock());
                self.cvar.notify_one();
            }
        }
    }
}

impl Wake for Parker {
    fn wake(self: StdArc<Self>) {
        self.unpark();
    }

    fn wake_by_ref(self: &StdArc<Self>) {
        self.unpark();
    }
}

crate::sync::thread_local! {
    /// The calling thread's parker: a worker installs its pool's parker for
    /// it when it starts; any other thread gets a fresh one on first use.
    static THREAD_PARKER: OnceCell<StdArc<Parker>> = OnceCell::new();
}

/// The calling thread's own parker.
pub(crate) fn current() -> StdArc<Parker> {
    THREAD_PARKER.with(|p| p.get_or_init(|| StdArc::new(Parker::new())).clone())
}

/// Makes `parker` the calling thread's parker (a worker thread, at start).
pub(crate) fn install(parker: StdArc<Parker>) {
    THREAD_PARKER.with(|p| {
        let installed = p.set(parker).is_ok();
        debug_assert!(installed, "a worker thread's parker is installed once");
    });
}

//! The executor's lifecycle, and the admission of submissions from threads
//! outside the pool.
//!
//! ```text
//!   RUNNING --shutdown()--> SHUTDOWN --shutdown_now()--> STOP
//!      |                                                  ^
//!      +-------------------shutdown_now()-----------------+
//!   and, once the last worker thread has exited: terminated
//! ```
//!
//! One atomic word holds the state (low two bits) and the number of
//! outside submissions *in flight* (the rest): admitted, but their job not
//! yet pushed. A submission from outside increments the count and reads the
//! state in one RMW; if the state is not RUNNING it backs out and is
//! rejected. So once a thread has seen SHUTDOWN or STOP together with a
//! zero count, every admitted outside submission has finished its push
//! (`Release` on leaving, `Acquire` on reading): the queues show all of
//! them. Workers rely on that before they exit, and `shutdown_now` before it
//! drains. Submissions from inside the pool are not counted here; they use
//! their worker's own deque and re-check the state after pushing (see
//! `Pool::push`).

use std::time::{Duration, Instant};

use crate::sync::{AtomicUsize, Condvar, Mutex, Ordering};

const STATE: usize = 0b11;
const RUNNING: usize = 0;
const SHUTDOWN: usize = 1;
const STOP: usize = 2;
const ONE_IN_FLIGHT: usize = 0b100;

/// The lifecycle of one pool (see the module doc).
#[derive(Debug)]
pub(crate) struct Lifecycle {
    ctl: AtomicUsize,
    /// Worker threads that have not exited yet.
    live_workers: Mutex<usize>,
    terminated: Condvar,
}

impl Lifecycle {
    pub(crate) fn new(workers: usize) -> Self {
        Lifecycle {
            ctl: AtomicUsize::new(RUNNING),
            live_workers: Mutex::new(workers),
            terminated: Condvar::new(),
        }
    }

    /// True until `shutdown` or `shutdown_now`.
    #[inline]
    pub(crate) fn is_running(&self) -> bool {
        self.ctl.load(Ordering::SeqCst) & STATE == RUNNING
    }

    /// True after `shutdown` or `shutdown_now`.
    pub(crate) fn is_shut_down(&self) -> bool {
        !self.is_running()
    }

    /// True after `shutdown_now`.
    pub(crate) fn is_stopped(&self) -> bool {
        self.ctl.load(Ordering::Acquire) & STATE == STOP
    }

    /// Admits an outside submission (true) or refuses it (false). An
    /// admitted one must call [`leave`](Self::leave) after its push.
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        let prev = self.ctl.fetch_add(ONE_IN_FLIGHT, Ordering::SeqCst);
        if prev & STATE == RUNNING {
            return true;
        }
        self.ctl.fetch_sub(ONE_IN_FLIGHT, Ordering::SeqCst);
        false
    }

    /// Ends an admitted submission. Returns true if the pool was shut down
    /// meanwhile: the caller must then wake the workers, which may be
    /// waiting for the in-flight count to drop before they exit.
    #[inline]
    pub(crate) fn leave(&self) -> bool {
        let prev = self.ctl.fetch_sub(ONE_IN_FLIGHT, Ordering::SeqCst);
        prev & STATE != RUNNING
    }

    /// RUNNING -> SHUTDOWN. True if this call made the change.
    pub(crate) fn shutdown(&self) -> bool {
        self.ctl
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
                (c & STATE == RUNNING).then_some(c | SHUTDOWN)
            })
            .is_ok()
    }

    /// Any state -> STOP.
    pub(crate) fn stop(&self) {
        let _ = self
            .ctl
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
                Some(c & !STATE | STOP)
            });
    }

    /// Waits (spinning, then yielding) until no outside submission is in
    /// flight. Only called after `stop`, when no new one can be admitted, so
    /// it waits for at most one push per submitting thread.
    pub(crate) fn wait_no_submissions_in_flight(&self) {
        let backoff = crate::sync::Backoff::new();
        while self.ctl.load(Ordering::Acquire) >= ONE_IN_FLIGHT {
            backoff.snooze();
        }
    }

    /// True if an idle worker may exit once it sees no queued work: after
    /// `shutdown_now`, or after `shutdown` with no outside submission in
    /// flight (see the module doc for why the queues are then complete).
    pub(crate) fn idle_worker_may_exit(&self) -> bool {
        let c = self.ctl.load(Ordering::SeqCst);
        c & STATE == STOP || c == SHUTDOWN
    }

    /// A worker thread exits; the last one marks the pool terminated.
    pub(crate) fn worker_exited(&self) {
        let mut live = self.live_workers.lock();
        *live -= 1;
        if *live == 0 {
            self.terminated.notify_all();
        }
    }

    /// True once every worker thread has exited.
    pub(crate) fn is_terminated(&self) -> bool {
        *self.live_workers.lock() == 0
    }

    /// Waits until terminated or until `timeout` passed; true if terminated.
    pub(crate) fn await_termination(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut live = self.live_workers.lock();
        while *live != 0 {
            match deadline {
                None => live = self.terminated.wait(live),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    live = self.terminated.wait_timeout(live, d - now);
                }
            }
        }
        true
    }
}

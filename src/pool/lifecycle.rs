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
//! Two atomic words, on separate cache lines: the `state`, which workers
//! read whenever they run out of work, and the number of outside
//! submissions *in flight* (admitted, but their job not yet pushed), which
//! only submitters write. (In one word, every outside submission's RMW
//! would steal the line from the idle workers reading the state.)
//!
//! # Admission
//!
//! A submission from outside increments `in_flight`, then reads `state`;
//! if that is not RUNNING it decrements and is refused. A shutdown writes
//! `state`, then reads `in_flight`. All four are `SeqCst`, so in their single
//! total order either the submitter's read comes after the shutdown's write
//! (and it is refused), or the shutdown's read comes after the increment
//! (and it sees the submission in flight). Hence once a thread has read a
//! non-RUNNING state and *then* a zero count, every admitted outside
//! submission has finished its push (`Release` on leaving, `SeqCst` on
//! reading): the queues show all of them. Workers rely on that before they
//! exit, and `shutdown_now` before it drains.
//!
//! An idle worker that reads SHUTDOWN and a count above zero goes to sleep
//! until the count drops, so whoever decrements it after a shutdown wakes
//! the workers (the worker announced itself as a sleeper before it read
//! the count, and the wake-up takes the sleepers' lock after the
//! decrement, so it finds the worker): an admitted submission when it
//! leaves (`leave` returns true), and a refused one too, which was counted
//! for a moment (`Pool::enter`).
//!
//! Submissions from inside the pool are not counted here; they use their
//! worker's own deque and re-check the state after pushing (see
//! `Pool::push`).

use std::time::{Duration, Instant};

use crate::sync::{AtomicUsize, CachePadded, Condvar, Mutex, Ordering};

const RUNNING: usize = 0;
const SHUTDOWN: usize = 1;
const STOP: usize = 2;

/// The lifecycle of one pool (see the module doc).
#[derive(Debug)]
pub(crate) struct Lifecycle {
    state: CachePadded<AtomicUsize>,
    in_flight: CachePadded<AtomicUsize>,
    /// Worker threads that have not exited yet.
    live_workers: Mutex<usize>,
    terminated: Condvar,
}

impl Lifecycle {
    pub(crate) fn new(workers: usize) -> Self {
        Lifecycle {
            state: CachePadded::new(AtomicUsize::new(RUNNING)),
            in_flight: CachePadded::new(AtomicUsize::new(0)),
            live_workers: Mutex::new(workers),
            terminated: Condvar::new(),
        }
    }

    /// True until `shutdown` or `shutdown_now`.
    #[inline]
    pub(crate) fn is_running(&self) -> bool {
        self.state.load(Ordering::SeqCst) == RUNNING
    }

    /// True after `shutdown` or `shutdown_now`.
    pub(crate) fn is_shut_down(&self) -> bool {
        !self.is_running()
    }

    /// True after `shutdown_now`.
    pub(crate) fn is_stopped(&self) -> bool {
        self.state.load(Ordering::Acquire) == STOP
    }

    /// Admits an outside submission (true) or refuses it (false). An
    /// admitted one must call [`leave`](Self::leave) after its push; a
    /// refused one was counted in flight for a moment, so its caller must
    /// then wake the workers, as after a `leave` that returned true (module
    /// doc).
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) == RUNNING {
            return true;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Admits the re-arming of a periodic task after a run: like `enter`,
    /// but also after `shutdown` (the policy for periodic tasks decides
    /// then); only `shutdown_now` refuses it (and after it no worker waits
    /// for the count, so a refusal wakes nobody).
    pub(crate) fn enter_rearm(&self) -> bool {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) != STOP {
            return true;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Ends an admitted submission. Returns true if the pool was shut down
    /// meanwhile: the caller must then wake the workers, which may be
    /// waiting for the in-flight count to drop before they exit. (Decrement
    /// then read the state: a shutdown that writes the state and then sees
    /// a count above zero is answered by this wake-up.)
    #[inline]
    pub(crate) fn leave(&self) -> bool {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.state.load(Ordering::SeqCst) != RUNNING
    }

    /// RUNNING -> SHUTDOWN. True if this call made the change.
    pub(crate) fn shutdown(&self) -> bool {
        self.state
            .compare_exchange(RUNNING, SHUTDOWN, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Any state -> STOP.
    pub(crate) fn stop(&self) {
        self.state.swap(STOP, Ordering::SeqCst);
    }

    /// Waits (spinning, then yielding) until no outside submission is in
    /// flight. Only called after `stop`, when no new one can be admitted, so
    /// it waits for at most one push per submitting thread.
    pub(crate) fn wait_no_submissions_in_flight(&self) {
        let backoff = crate::sync::Backoff::new();
        while self.in_flight.load(Ordering::SeqCst) != 0 {
            backoff.snooze();
        }
    }

    /// True if an idle worker may exit once it sees no queued work: after
    /// `shutdown_now`, or after `shutdown` with no outside submission in
    /// flight (see the module doc for why the queues are then complete).
    pub(crate) fn idle_worker_may_exit(&self) -> bool {
        match self.state.load(Ordering::SeqCst) {
            RUNNING => false,
            SHUTDOWN => self.in_flight.load(Ordering::SeqCst) == 0,
            _ => true,
        }
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

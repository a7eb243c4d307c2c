//! The shutdown policies: what `shutdown` and `shutdown_now` do with the
//! tasks the timer holds.
//!
//! After `shutdown` the timer thread cancels the tasks the policies do not
//! keep ([`ShutdownPolicy`]; all of them once the executor is dropped): it
//! purges the backend once per policy, and filters the entries placed
//! afterwards as they arrive (`shutdown_filter`). `shutdown_now` takes
//! every task out ([`Timer::drain`]) and returns them.
//!
//! # No user code under the lock
//!
//! Cancelling a task runs user code (its closure's destructor, its waker),
//! which may panic, block, schedule or cancel on this very pool, call
//! `shutdown_now`, or drop the last handle to the executor. None of that
//! may happen under the backend lock (a re-entrant schedule or
//! `shutdown_now` would deadlock on it) or while a scheduler is admitted
//! (`shutdown_now` waits for admitted submissions). So an entry that the
//! shutdown policies drop is not cancelled where it is found: it moves to
//! `doomed`, still counted in `pending`, and the timer thread cancels it
//! after its turn has released the lock, then takes it off `pending` (so
//! the workers, which wait for `pending` to reach 0, wait for the cancel
//! too). `shutdown_now`'s drain takes whatever `doomed` still holds with
//! the rest, under the lock, and returns it; each entry is taken once.
//! Sweeps and the purge take out only entries that are already final, and
//! drop them after the lock (the caller's `swept`): a final cell holds no
//! closure (a cancel took it) nor waker (a waiter takes its back), but it
//! can hold an output nobody joined, whose last reference a stale
//! placement was; its destructor is user code, its panic reported.
//!
//! # Who cancels
//!
//! Only the timer thread, a thread of the pool: a cancel's user code may
//! drop the last executor handle, whose drop joins the workers unless it
//! runs on a thread of the pool (`executor.rs`), and the workers wait for
//! that very cancel (`pending`). The purge is the timer thread's own, in
//! its turn; but whoever applies the commands may drop an entry as it
//! arrives (`place`): the timer thread, a manual clock's `advance` in its
//! hand-over, a sweep run by `reserve`. So a drop in `place` wakes the
//! timer thread, whose next turn cancels what `doomed` holds. (Without
//! that wake, a re-arm pushed while the timer thread was in its turn, and
//! applied by `advance` before that turn looked at the command queue
//! again, would stay in `doomed` and `pending` with the timer thread
//! asleep without a deadline, and the workers would never exit: found by
//! reading, not seen in a run; the loom model
//! `a_rearm_dropped_in_advance_is_cancelled` covers the path.)

use crate::sync::{CellArc, Ordering};
use crate::task::delayed::into_job;
use crate::task::{Delayed, Job, TaskContext};
use crate::time::Nanos;

use super::{Entry, Queue, Timer};

/// `Timer::shutdown_filter`: nothing is dropped (running, or the policies
/// keep every task).
pub(super) const KEEP_ALL: usize = 0;
/// `Timer::shutdown_filter`: periodic tasks are dropped.
const DROP_PERIODIC: usize = 1;
/// `Timer::shutdown_filter`: every task is dropped.
const DROP_ALL: usize = 2;

/// What `shutdown` does with the tasks the timer holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShutdownPolicy {
    /// One-shot delayed tasks still run (the JDK's default: true).
    pub(crate) keep_delayed: bool,
    /// Periodic tasks go on (the JDK's default: false).
    pub(crate) keep_periodic: bool,
}

impl Timer {
    /// From now on, tasks still pending at shutdown are cancelled, not
    /// waited for (the last handle to the executor is being dropped).
    pub(crate) fn discard_on_shutdown(&self) {
        self.discard_on_shutdown.store(true, Ordering::SeqCst);
        self.parker.unpark();
    }

    /// Puts `entry` in the backend (an insert, or an entry put back after
    /// `shutdown`), unless the shutdown policies drop it. An entry cancelled
    /// meanwhile goes in too: its cancel was counted, and a sweep takes it
    /// out (see `sweep`); not looking saves reading the task here.
    pub(super) fn place(
        &self,
        queue: &mut Queue,
        deadline: Nanos,
        entry: CellArc<dyn Delayed>,
        now: Nanos,
    ) {
        if self.dropped_on_shutdown(&*entry) {
            self.cancel_dropped(entry);
            // The caller may be another thread than the timer thread,
            // after the timer thread's turn looked at the commands: wake
            // it to cancel the entry (module doc, "Who cancels").
            self.parker.unpark();
            return;
        }
        queue.insert(now, deadline, entry);
    }

    /// True if the shutdown policies in force drop `entry` (see
    /// `shutdown_filter`).
    fn dropped_on_shutdown(&self, entry: &dyn Delayed) -> bool {
        match self.shutdown_filter.load(Ordering::Relaxed) {
            DROP_ALL => true,
            DROP_PERIODIC => entry.is_periodic(),
            _ => false,
        }
    }

    /// An entry the shutdown policies drop: cancelled later, outside the
    /// lock (module doc). The caller holds the `queue` lock.
    fn cancel_dropped(&self, entry: Entry) {
        self.doomed.lock().push(entry);
    }

    /// Takes the entries the shutdown policies dropped (the caller holds
    /// the `queue` lock), for [`cancel_doomed`](Self::cancel_doomed).
    pub(super) fn take_doomed(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.doomed.lock())
    }

    /// Cancels entries taken by `take_doomed`, without the lock, reporting
    /// panics of their user code through `ctx`, then takes them off
    /// `pending`.
    pub(super) fn cancel_doomed(&self, doomed: Vec<Entry>, ctx: &dyn TaskContext) {
        let n = doomed.len();
        for entry in doomed {
            into_job(entry).cancel(ctx);
        }
        self.pending.fetch_sub(n, Ordering::SeqCst);
    }

    /// After `shutdown`: cancels the tasks the policies do not keep (all of
    /// them once the executor is dropped). The backend is purged once per
    /// policy (an O(n) pass); entries placed afterwards are filtered by
    /// `place`.
    ///
    /// The final entries it takes out go to `swept`, dropped by the caller
    /// after the lock: one can be the last reference to a task that ended
    /// with an output nobody joined (a stale placement), whose destructor
    /// is user code (`sweep`'s doc).
    pub(super) fn cancel_on_shutdown(&self, queue: &mut Queue, now: Nanos, swept: &mut Vec<Entry>) {
        let filter = if self.discard_on_shutdown.load(Ordering::SeqCst) {
            DROP_ALL
        } else if self.keep_periodic_on_shutdown {
            KEEP_ALL
        } else {
            DROP_PERIODIC
        };
        if self.shutdown_filter.load(Ordering::Relaxed) == filter {
            return;
        }
        self.shutdown_filter.store(filter, Ordering::Relaxed);
        let mut kept = Vec::new();
        for entry in queue.drain() {
            if entry.is_final() {
                swept.push(entry);
                self.pending.fetch_sub(1, Ordering::SeqCst);
            } else if self.dropped_on_shutdown(&*entry) {
                self.cancel_dropped(entry);
            } else {
                kept.push(entry);
            }
        }
        // Put back in the order `drain` gave them (earliest first where the
        // backend knows it cheaply).
        for entry in kept {
            self.place(queue, entry.deadline(), entry, now);
        }
    }

    /// Takes every task out (for `shutdown_now`): those in the backend,
    /// those still in the command queue, and those the shutdown policies
    /// dropped that the timer thread has not cancelled yet. Timer futures'
    /// alarms are discarded instead (their futures woken, through `ctx`,
    /// after the lock is released): they are no task to return.
    pub(crate) fn drain(&self, ctx: &dyn TaskContext) -> Vec<Job> {
        let entries = {
            let mut queue = self.queue.lock();
            while !self.apply_commands(&mut queue, self.clock.now()) {}
            let mut entries = queue.drain();
            entries.append(&mut self.take_doomed());
            self.pending.fetch_sub(entries.len(), Ordering::SeqCst);
            entries
        };
        let (tasks, alarms): (Vec<Entry>, Vec<Entry>) =
            entries.into_iter().partition(|entry| entry.is_task());
        for alarm in alarms {
            into_job(alarm).cancel(ctx);
        }
        tasks.into_iter().map(into_job).collect()
    }
}

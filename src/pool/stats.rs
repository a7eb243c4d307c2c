//! [`WorkerStats`]: one worker's counters, which the executor's
//! `metrics()` adds up.

use crate::sync::{AtomicBool, AtomicU64, Ordering};

use super::lateness::LatenessShard;

/// One worker's counters. Only that worker writes them (plain loads and
/// stores, no read-modify-write: nobody else writes), anyone may read.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    busy: AtomicBool,
    completed: AtomicU64,
    panicked: AtomicU64,
    /// Cancelled tasks this worker reached and skipped.
    cancelled: AtomicU64,
    /// How late its scheduled runs started.
    pub(crate) lateness: LatenessShard,
}

impl WorkerStats {
    /// The owner starts (true) or ends (false) a task run.
    #[inline]
    pub(crate) fn set_busy(&self, busy: bool) {
        self.busy.store(busy, Ordering::Relaxed);
    }

    /// The owner finished a run; `panicked` if it panicked.
    #[inline]
    pub(crate) fn record_run(&self, panicked: bool) {
        bump(&self.completed);
        if panicked {
            bump(&self.panicked);
        }
    }

    /// The owner skipped a task cancelled through its handle.
    #[inline]
    pub(crate) fn record_cancelled(&self) {
        bump(&self.cancelled);
    }

    pub(crate) fn cancelled(&self) -> u64 {
        self.cancelled.load(Ordering::Relaxed)
    }

    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed)
    }

    pub(crate) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    pub(crate) fn panicked(&self) -> u64 {
        self.panicked.load(Ordering::Relaxed)
    }
}

/// Increments a counter that only the calling thread writes.
#[inline]
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

//! The delayed work queue backends on their own, for the micro-benchmarks
//! of the `chronopool-benches` crate (`benches/backends.rs`,
//! `benches/ticks.rs`). Behind the `bench-internals` feature and hidden
//! from the docs: not part of the public API, no stability promised.

use crate::timer::queue::DelayQueue;
use crate::timer::TimerQueue;

/// One backend of the kind a [`TimerQueue`] names, holding `u64` values,
/// behind the same dynamic dispatch the timer thread uses.
pub struct Backend(Box<dyn DelayQueue<u64> + Send>);

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").field("len", &self.len()).finish()
    }
}

impl Backend {
    /// An empty backend of the kind `queue` names.
    pub fn new(queue: TimerQueue) -> Self {
        Backend(queue.build())
    }

    /// Adds `value`, due at `deadline` (nanoseconds; `now` is the current
    /// time and never decreases between calls).
    pub fn insert(&mut self, now: u64, deadline: u64, value: u64) {
        self.0.insert(now, deadline, value)
    }

    /// Removes one entry due at `now`, earliest first.
    pub fn pop_due(&mut self, now: u64) -> Option<u64> {
        self.0.pop_due(now)
    }

    /// Removes every entry whose value `dead` selects (the timer thread's
    /// sweep of cancelled tasks); returns how many it removed.
    pub fn remove_where(&mut self, mut dead: impl FnMut(u64) -> bool) -> usize {
        self.0.remove_where(&mut |v| dead(*v), &mut drop)
    }

    /// When the next entry is due.
    pub fn next_due(&self) -> Option<u64> {
        self.0.next_due()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there is no entry.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

//! The leases of the runs in progress, renewed by a thread of the
//! scheduler's own.
//!
//! A lease is renewed every third of [`Config::lease`](crate::Config::lease)
//! while its handler runs. The renewal cannot be a task on the executor:
//! when every worker runs a long handler, a task would wait behind them,
//! the leases would expire under runs still going, and other processes
//! would run the same jobs again. So one thread per scheduler renews all
//! of its running leases in one statement, and sleeps while none runs.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// The keys of the runs in progress here, for the renewal thread.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Each key running here, with how many runs of it (a key can be run
    /// again here while an older run of it, no longer its owner's,
    /// finishes).
    running: HashMap<String, usize>,
    stopped: bool,
}

impl Leases {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A run of `key` started: renew its lease until [`release`](Self::release).
    pub(crate) fn hold(&self, key: &str) {
        let mut state = self.state();
        *state.running.entry(key.to_owned()).or_default() += 1;
        if state.running.len() == 1 {
            self.changed.notify_all();
        }
    }

    /// A run of `key` ended.
    pub(crate) fn release(&self, key: &str) {
        let mut state = self.state();
        if let Some(runs) = state.running.get_mut(key) {
            *runs -= 1;
            if *runs == 0 {
                state.running.remove(key);
            }
        }
    }

    /// Ends [`next_renewal`](Self::next_renewal)'s waits: the renewal
    /// thread returns.
    pub(crate) fn stop(&self) {
        self.state().stopped = true;
        self.changed.notify_all();
    }

    /// Waits `every`, and then while nothing runs; the keys to renew, or
    /// `None` once stopped.
    pub(crate) fn next_renewal(&self, every: Duration) -> Option<Vec<String>> {
        let mut state = self.state();
        let mut slept = false;
        loop {
            if state.stopped {
                return None;
            }
            if slept && !state.running.is_empty() {
                return Some(state.running.keys().cloned().collect());
            }
            if state.running.is_empty() {
                // Nothing to renew: sleep until a run starts, then give
                // it a third of its lease before the first renewal.
                state = self
                    .changed
                    .wait_while(state, |s| s.running.is_empty() && !s.stopped)
                    .unwrap_or_else(|p| p.into_inner());
            }
            state = self
                .changed
                .wait_timeout_while(state, every, |s| !s.stopped)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            slept = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn renews_what_runs_and_stops() {
        let leases = Arc::new(Leases::default());
        leases.hold("a");
        leases.hold("a");
        leases.hold("b");
        leases.release("a");
        leases.release("b");
        assert_eq!(
            leases.next_renewal(Duration::from_millis(1)),
            Some(vec!["a".to_owned()])
        );
        leases.release("a");
        let waiting = Arc::clone(&leases);
        let renewer = std::thread::spawn(move || waiting.next_renewal(Duration::from_millis(1)));
        std::thread::sleep(Duration::from_millis(20));
        leases.stop();
        assert_eq!(renewer.join().unwrap(), None, "idle until stopped");
    }
}

//! [`Placements`]: the jobs placed in the executor's timer, each at the
//! fire time it was placed for.
//!
//! A job is *placed* from the moment a timer task is scheduled for it until
//! the run loop has dealt with its claim (claimed it, or found it not due
//! or another's): so a poll that lists it again meanwhile does not place it
//! twice. Placing a job again at another time cancels the task placed for
//! the old one.
//!
//! Each placement carries a *stamp*: when what it knows was read. A
//! schedule's and a finished run's placements are stamped after their
//! commit; a poll's with the stamp it took before it read the store. A
//! placement never replaces one with a later stamp: a poll that read a job
//! before it was scheduled again would otherwise put back its old time over
//! the new one (the old time falls due, its claim finds the job not due,
//! and the job waits for the next full poll).
//!
//! A poll that finds a full batch cannot place the rest of what is due; it
//! asks for a *follow-up*, which the run loop sends as soon as half of the
//! batch has been dealt with (so catching up after downtime runs as fast as
//! the jobs can be claimed, not a batch per poll interval), and which
//! carries a `Busy` of the executor like every message from a task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use chronopool::ScheduledHandle;

use super::Shared;
use crate::time::{self, Micros};

/// The jobs placed in the executor's timer (module doc).
pub(crate) struct Placements {
    placed: Mutex<HashMap<String, Placed>>,
    /// A poll found a full batch: poll again once half of it is dealt with.
    follow_up: AtomicBool,
    batch: usize,
    /// The last stamp drawn (module doc).
    stamps: AtomicU64,
}

struct Placed {
    fire: Micros,
    /// The timer task, to cancel when the job is placed elsewhere or the
    /// scheduler stops (`None` until it is scheduled).
    task: Option<ScheduledHandle<()>>,
    /// When what placed it was read (module doc).
    stamp: u64,
}

impl Placements {
    pub(crate) fn new(batch: usize) -> Self {
        Placements {
            placed: Mutex::default(),
            follow_up: AtomicBool::new(false),
            batch,
            stamps: AtomicU64::new(0),
        }
    }

    fn placed(&self) -> MutexGuard<'_, HashMap<String, Placed>> {
        self.placed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A stamp for what is read (or was committed) from now on (module
    /// doc): later than every stamp drawn before.
    pub(crate) fn stamp(&self) -> u64 {
        self.stamps.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Places the job `key` of the handler `name` in the executor's timer
    /// at `fire`, unless it is placed for that time already, or by what
    /// was read later than `stamp` (module doc). `expired`: it is a run
    /// whose lease ends then, to take over.
    pub(crate) fn place(
        &self,
        shared: &Arc<Shared>,
        key: &str,
        name: &str,
        fire: Micros,
        expired: bool,
        stamp: u64,
    ) {
        let old = {
            let mut placed = self.placed();
            if placed
                .get(key)
                .is_some_and(|p| p.fire == fire || p.stamp > stamp)
            {
                return;
            }
            let new = Placed {
                fire,
                task: None,
                stamp,
            };
            placed.insert(key.to_owned(), new)
        };
        if let Some(task) = old.and_then(|p| p.task) {
            task.cancel();
        }
        let Ok(executor) = shared.executor() else {
            self.unplace(key, fire);
            return;
        };
        shared.counters.placed(key, fire);
        let (weak, owned_key, name) = (Arc::downgrade(shared), key.to_owned(), name.to_owned());
        let task = executor.schedule_at_system_time(
            move || {
                if let Some(shared) = weak.upgrade() {
                    shared.fired(owned_key, name, fire, expired);
                }
            },
            time::system_time(fire),
        );
        match task {
            Ok(task) => {
                if let Some(p) = self.placed().get_mut(key).filter(|p| p.fire == fire) {
                    p.task = Some(task);
                }
            }
            // Shut down: the job stays in the store for the next process.
            Err(_) => {
                self.unplace(key, fire);
            }
        }
    }

    /// The placement of `key` at `fire` was dealt with; true if the poll
    /// should now run its follow-up (see the module doc).
    pub(crate) fn unplace(&self, key: &str, fire: Micros) -> bool {
        let left = {
            let mut placed = self.placed();
            if placed.get(key).is_some_and(|p| p.fire == fire) {
                placed.remove(key);
            }
            placed.len()
        };
        left <= self.batch / 2 && self.follow_up.swap(false, Ordering::AcqRel)
    }

    /// The last poll found a full batch (see the module doc).
    pub(crate) fn want_follow_up(&self) {
        self.follow_up.store(true, Ordering::Release);
    }

    /// Cancels every placement (the scheduler stops: the jobs stay in the
    /// store).
    pub(crate) fn cancel_all(&self) {
        let placed = std::mem::take(&mut *self.placed());
        for task in placed.into_values().filter_map(|p| p.task) {
            task.cancel();
        }
    }
}

impl std::fmt::Debug for Placements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placements")
            .field("placed", &self.placed().len())
            .finish_non_exhaustive()
    }
}

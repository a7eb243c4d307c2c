//! The listener: on a store that notifies (PostgreSQL's `LISTEN` and
//! `NOTIFY`), a thread of the scheduler's own waits on a connection of its
//! own for the notification every schedule sends at its commit, and asks
//! the poll loop for a fresh poll (`poll.rs`): a job another process
//! scheduled for now is placed within milliseconds, not at the next poll.
//!
//! A notification is a hint, never the source of truth: a connection lost
//! (the server restarted) may lose some, so once the listener is connected
//! again it asks for a full poll. It looks every [`LISTEN_WAIT`] whether
//! the scheduler stopped, so that it ends soon after.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Shared, ToPoll};
use crate::store::{Conn, Notice, Role, Store};

/// How long one wait for a notification lasts.
pub(crate) const LISTEN_WAIT: Duration = Duration::from_millis(100);

/// The listener's loop, until `stop`.
pub(crate) fn listen(shared: Arc<Shared>, store: Arc<dyn Store>, stop: Arc<AtomicBool>) {
    let mut conn: Option<Box<dyn Conn>> = None;
    let mut failures = 0u32;
    while !stop.load(Ordering::Acquire) {
        let heard = match &mut conn {
            Some(conn) => conn.notified(LISTEN_WAIT),
            None => store.connect(Role::Listen).map(|c| {
                conn = Some(c);
                Notice::None
            }),
        };
        match heard {
            Ok(heard) => {
                if failures > 0 {
                    // Notifications may have been lost meanwhile.
                    failures = 0;
                    let _ = shared.polls.send(ToPoll::Poll { busy: None });
                }
                match heard {
                    Notice::None => {}
                    Notice::Fresh => {
                        let _ = shared.polls.send(ToPoll::Fresh);
                    }
                    Notice::Full => {
                        let _ = shared.polls.send(ToPoll::Poll { busy: None });
                    }
                }
            }
            Err(e) => {
                if failures == 0 {
                    shared.counters.store_error("listen", &e);
                }
                failures += 1;
                let back_off = Duration::from_millis(10)
                    .saturating_mul(1 << failures.min(7))
                    .min(Duration::from_secs(1));
                std::thread::sleep(back_off.min(LISTEN_WAIT));
            }
        }
    }
}

//! [`Batcher`]: store operations that arrive while one is in flight are
//! sent together, as one statement, by the thread that is already sending.
//!
//! Every claim and every finish is a round trip to the store and, on its
//! own, a commit. When jobs fall due faster than one round trip, they wait
//! for each other. So the first thread to find the batcher idle becomes
//! its sender: it takes everything queued, sends it as one batch, and goes
//! on while more has arrived meanwhile; the others queue their item and
//! return at once (their workers are free for handlers). An item that
//! arrives alone is sent alone, at once: batching adds no delay, and a
//! batch is as large as the load makes it (the group commit of databases).

use std::sync::{Mutex, MutexGuard};

/// A queue whose items one thread at a time sends in batches.
#[derive(Debug)]
pub(crate) struct Batcher<T> {
    state: Mutex<State<T>>,
    /// The most items one batch takes.
    limit: usize,
}

#[derive(Debug)]
struct State<T> {
    queued: Vec<T>,
    /// A thread is sending: it will take what is queued.
    sending: bool,
}

impl<T> Batcher<T> {
    pub(crate) fn new(limit: usize) -> Self {
        Batcher {
            state: Mutex::new(State {
                queued: Vec::new(),
                sending: false,
            }),
            limit: limit.max(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item`; if no thread is sending, this one sends every batch
    /// with `send` until the queue is empty.
    ///
    /// Invariant: an item queued while `sending` is true is taken by the
    /// sender, because the sender sets `sending` to false only under the
    /// lock and only when it finds the queue empty. `send` may panic (it
    /// runs user code): the guard then hands the role back, and the items
    /// queued meanwhile are sent by the next thread that queues one.
    pub(crate) fn push(&self, item: T, mut send: impl FnMut(Vec<T>)) {
        {
            let mut state = self.state();
            state.queued.push(item);
            if state.sending {
                return;
            }
            state.sending = true;
        }
        struct Sending<'a, T>(&'a Batcher<T>);
        impl<T> Drop for Sending<'_, T> {
            fn drop(&mut self) {
                self.0.state().sending = false;
            }
        }
        let _sending = Sending(self);
        loop {
            let batch = {
                let mut state = self.state();
                if state.queued.is_empty() {
                    return; // `_sending` resets the flag under the lock
                }
                let take = state.queued.len().min(self.limit);
                let rest = state.queued.split_off(take);
                std::mem::replace(&mut state.queued, rest)
            };
            send(batch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn items_arriving_while_one_is_sent_go_together() {
        let batcher = Arc::new(Batcher::new(100));
        let batches = Arc::new(Mutex::new(Vec::new()));
        let (b, record) = (batcher.clone(), batches.clone());
        batcher.push(0, |batch| {
            // While the first batch is "in flight", two more arrive.
            if batch == [0] {
                b.push(1, |_| unreachable!("the sender takes it"));
                b.push(2, |_| unreachable!("the sender takes it"));
            }
            record.lock().unwrap().push(batch);
        });
        assert_eq!(*batches.lock().unwrap(), [vec![0], vec![1, 2]]);
    }

    #[test]
    fn every_item_is_sent_once_across_threads() {
        let batcher = Arc::new(Batcher::new(7));
        let sent = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (batcher, sent) = (batcher.clone(), sent.clone());
                std::thread::spawn(move || {
                    for i in 0..10_000 {
                        batcher.push(i, |batch| {
                            assert!(batch.len() <= 7);
                            sent.fetch_add(batch.len(), Ordering::Relaxed);
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(sent.load(Ordering::Relaxed), 40_000);
    }

    #[test]
    fn a_panicking_send_hands_the_role_back() {
        let batcher = Batcher::new(10);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            batcher.push(1, |_| panic!("user code"));
        }));
        assert!(panicked.is_err());
        let mut sent = Vec::new();
        batcher.push(2, |batch| sent.extend(batch));
        assert_eq!(sent, [2]);
    }
}

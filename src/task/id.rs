//! [`TaskId`]: the number that tells one task from another, and
//! [`IdSlot`], the word of a task's extras that holds it.
//!
//! A task gets its id the first time anyone asks for it (its handle's
//! `id()` or `Debug`, the task itself through `chronopool::task_id()`, a
//! panic it reports), not when it is submitted: submitting stays as cheap
//! as it was, and a task nobody looks at never draws one. The slot lives in
//! the task's extras, made on the same first ask (`state.rs`), not in its
//! header: a task nobody looks at has a cell 16 bytes smaller. It is 32
//! bits so that it fits beside the waiter's lock byte in the extras.
//!
//! Ids are drawn from a process-wide counter in blocks of [`BLOCK`] per
//! thread, so that drawing one touches no shared cache line but once per
//! block. The counter wraps after 2³² − 1 ids: like tokio's, an id tells
//! apart the tasks that exist at the same time (unless one of them lives
//! through four billion others), not every task the process ever ran.
//!
//! The slot's protocol: it is 0 until an id is drawn; whoever draws one
//! publishes it with a compare-and-swap from 0, and a loser takes the
//! winner's id instead of its own, so every reader sees one id, forever.

use std::cell::Cell;
use std::fmt;
use std::num::NonZeroU32;

use crate::sync::{AtomicU32, Ordering};

/// A task's id: unique among the tasks that exist at the same time.
///
/// Every task made with `submit`, `schedule` or one of the periodic and
/// trigger methods has one; a closure given to `execute` has none (it is a
/// bare closure in a queue, with no task cell to hold one) unless it was
/// named through [`ScheduledExecutor::task`](crate::ScheduledExecutor::task).
/// Read it from a handle, from [`PanicPayload::task_id`](crate::PanicPayload::task_id)
/// or, inside the task, from [`chronopool::task_id`](crate::task_id).
///
/// ```
/// use chronopool::ScheduledExecutor;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let handle = pool.submit(|| chronopool::task_id())?;
/// let id = handle.id();
/// assert_eq!(handle.join()?, Some(id), "the task sees the id its handle shows");
/// println!("task {id} done");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(NonZeroU32);

impl TaskId {
    /// The id as a number (never 0).
    pub fn as_u64(self) -> u64 {
        u64::from(self.0.get())
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({})", self.0)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A task's id and its name, if it has one: who a panic, a pending task
/// or a running closure belongs to.
pub(crate) type TaskIdentity = (TaskId, Option<crate::sync::StdArc<str>>);

/// How many ids a thread takes from the shared counter at a time.
const BLOCK: u32 = 1024;

/// The number of blocks handed out so far (wrapping).
static BLOCKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

std::thread_local! {
    /// The ids left in this thread's block: the next one, and the end.
    static LEFT: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// A fresh id, from this thread's block (a new block when it is used up).
///
/// The counter is a plain `fetch_add`, with nothing to order: only its
/// uniqueness matters. A thread-local of std's, also under loom, whose
/// threads share one: ids are drawn in turn there, still unique.
fn draw() -> NonZeroU32 {
    LEFT.with(|left| {
        let (mut next, mut end) = left.get();
        if next == end {
            let block = BLOCKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            next = block.wrapping_mul(BLOCK);
            end = next.wrapping_add(BLOCK);
        }
        // 0 means "no id yet": the block that wraps around to it skips it.
        let id = NonZeroU32::new(next).unwrap_or(NonZeroU32::MIN);
        left.set((id.get().wrapping_add(1), end));
        id
    })
}

/// The id word of a task's extras (module doc).
#[derive(Debug, Default)]
pub(crate) struct IdSlot(AtomicU32);

impl IdSlot {
    /// The task's id, drawn now if nobody asked before.
    pub(crate) fn get(&self) -> TaskId {
        // `Acquire`/`Release` only so that the id is one value: it guards
        // no other data.
        if let Some(id) = NonZeroU32::new(self.0.load(Ordering::Acquire)) {
            return TaskId(id);
        }
        let drawn = draw();
        match self
            .0
            .compare_exchange(0, drawn.get(), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => TaskId(drawn),
            Err(winner) => TaskId(NonZeroU32::new(winner).expect("a published id is not 0")),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_drawn_once_and_kept() {
        let slot = IdSlot::default();
        let first = slot.get();
        assert_eq!(slot.get(), first);
        assert_ne!(IdSlot::default().get(), first);
    }

    #[test]
    fn threads_draw_from_blocks_of_their_own_and_never_collide() {
        let ids: Vec<Vec<u64>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..3 * BLOCK)
                            .map(|_| IdSlot::default().get().as_u64())
                            .collect()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut all: Vec<u64> = ids.concat();
        let drawn = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), drawn, "no id was drawn twice");
        assert!(all.iter().all(|&id| id != 0));
    }
}

/// The slot's protocol under loom: two threads that ask at once see one id.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::sync::Arc;

    #[test]
    fn racing_first_reads_agree() {
        crate::loom_model::support::model("id::racing_first_reads_agree", || {
            let slot = Arc::new(IdSlot::default());
            let other = Arc::clone(&slot);
            let t = loom::thread::spawn(move || other.get());
            let here = slot.get();
            assert_eq!(t.join().unwrap(), here);
            assert_eq!(slot.get(), here);
        });
    }
}

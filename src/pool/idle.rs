//! Parking idle workers, and waking one worker per newly available task.
//!
//! # States
//!
//! A worker is *running* (executing a task, or taking one from its own
//! deque or the injector on the fast path), *searching* (its fast path came
//! up empty and it is looking through every queue, spinning a little), or
//! *sleeping* (announced in the sleepers list and parked, or about to park).
//! One atomic word counts the searching and the sleeping workers; the list
//! of sleepers (a stack: the last to sleep is the first woken, its cache is
//! the warmest) sits behind a lock that every sleep/wake transition takes.
//!
//! # Protocol
//!
//! * **Making work visible** (after a push): `fence(SeqCst)`, then read the
//!   counts. If a worker is searching, it will find the task; if none
//!   sleeps, every worker is running and will get to it. Only otherwise take
//!   the lock and wake one sleeper, counting it as searching *on its
//!   behalf*, so that the next push sees a searcher and wakes nobody more.
//!   So a burst of pushes wakes one worker, not one per push.
//! * **Stopping searching** (a searcher found a task): decrement the
//!   searching count; if that was the last searcher and workers sleep,
//!   `fence(SeqCst)` and look whether work is still visible; if so, wake one.
//!   Pushers that skipped waking because this worker was searching are
//!   covered by it: the chain goes on as long as there is work.
//! * **Going to sleep**: under the lock, push yourself on the sleepers list
//!   and move yourself from searching to sleeping; then `fence(SeqCst)` and
//!   look once more for work (and for whatever else the caller waits for).
//!   Park only if there is none.
//!
//! # Invariant: no lost wake-up
//!
//! Both sides write first and read second, with a `SeqCst` fence between:
//! the pusher writes the queue and reads the counts, the sleeper writes the
//! counts and reads the queue. In the single total order of `SeqCst` fences
//! one fence comes first, and the side whose fence is second sees the other
//! side's write: either the pusher sees the sleeper (and wakes a sleeper),
//! or the sleeper sees the task (and does not park). The same holds between
//! a pusher and the last searcher leaving the searching state. A wake-up
//! that finds its target not yet parked leaves a token in its
//! [`Parker`], so the park that follows returns at once.
//!
//! A woken worker (or one whose park returned for any other reason, such as
//! a joined task finishing) leaves through [`Sleep::sleep`]'s epilogue: it
//! takes itself off the list if a waker has not already done so, and in
//! either case comes back counted as searching.

use std::time::Instant;

use crate::sync::parker::Parker;
use crate::sync::{fence, AtomicUsize, Mutex, Ordering, StdArc};

/// One sleeping worker in the state word (low half).
const ONE_SLEEPING: usize = 1;
/// One searching worker in the state word (high half).
const ONE_SEARCHING: usize = 1 << 16;
const COUNT_MASK: usize = 0xFFFF;

fn sleeping(state: usize) -> usize {
    state & COUNT_MASK
}

fn searching(state: usize) -> usize {
    (state >> 16) & COUNT_MASK
}

/// The sleep/wake protocol of one pool (see the module doc).
#[derive(Debug)]
pub(crate) struct Idle {
    /// `searching << 16 | sleeping`.
    state: AtomicUsize,
    /// Indices of the workers that sleep (or are about to).
    sleepers: Mutex<Vec<usize>>,
    /// One parker per worker, by index.
    parkers: Box<[StdArc<Parker>]>,
}

impl Idle {
    /// The protocol for `workers` workers (at most `COUNT_MASK`).
    pub(crate) fn new(workers: usize) -> Self {
        assert!(workers <= COUNT_MASK);
        Idle {
            state: AtomicUsize::new(0),
            sleepers: Mutex::new(Vec::with_capacity(workers)),
            parkers: (0..workers).map(|_| StdArc::new(Parker::new())).collect(),
        }
    }

    /// Every worker's parker, by index (the timer wakes a leading worker
    /// on its own: `timer/driver/lead.rs`).
    pub(crate) fn parkers(&self) -> Box<[StdArc<Parker>]> {
        self.parkers.clone()
    }

    /// The parker of worker `index`.
    pub(crate) fn parker(&self, index: usize) -> &StdArc<Parker> {
        &self.parkers[index]
    }

    /// Call after a task became visible in a queue: wakes one sleeper
    /// unless a worker is searching or none sleeps.
    #[inline]
    pub(crate) fn notify_work(&self) {
        fence(Ordering::SeqCst);
        let state = self.state.load(Ordering::SeqCst);
        if searching(state) == 0 && sleeping(state) != 0 {
            self.wake_one();
        }
    }

    /// Whether some worker sleeps (a racy hint: it may wake or fall asleep
    /// right after).
    pub(crate) fn some_worker_sleeps(&self) -> bool {
        sleeping(self.state.load(Ordering::Relaxed)) != 0
    }

    /// Wakes the most recent sleeper, unless a worker started searching
    /// meanwhile (it will find the work: see the module doc).
    #[cold]
    fn wake_one(&self) {
        let index = {
            let mut sleepers = self.sleepers.lock();
            if searching(self.state.load(Ordering::SeqCst)) != 0 {
                return;
            }
            let Some(index) = sleepers.pop() else {
                return;
            };
            // Sleeping -> searching, on the woken worker's behalf.
            self.state
                .fetch_add(ONE_SEARCHING - ONE_SLEEPING, Ordering::SeqCst);
            index
        };
        self.parkers[index].unpark();
    }

    /// Wakes every sleeper (shutdown, or a change every worker must see).
    pub(crate) fn wake_all(&self) {
        let woken: Vec<usize> = {
            let mut sleepers = self.sleepers.lock();
            let n = sleepers.len();
            self.state
                .fetch_add(n * (ONE_SEARCHING - ONE_SLEEPING), Ordering::SeqCst);
            sleepers.drain(..).collect()
        };
        for index in woken {
            self.parkers[index].unpark();
        }
    }

    /// The calling worker starts searching.
    pub(crate) fn start_searching(&self) {
        self.state.fetch_add(ONE_SEARCHING, Ordering::SeqCst);
    }

    /// The calling worker stops searching (it found work, or it leaves).
    /// If it was the last searcher while others sleep and `has_work` still
    /// sees work, one sleeper is woken to take it.
    pub(crate) fn stop_searching(&self, has_work: impl FnOnce() -> bool) {
        let prev = self.state.fetch_sub(ONE_SEARCHING, Ordering::SeqCst);
        debug_assert!(searching(prev) > 0);
        if searching(prev) == 1 && sleeping(prev) != 0 {
            fence(Ordering::SeqCst);
            if has_work() {
                self.wake_one();
            }
        }
    }

    /// Worker `index` goes to sleep: announces itself, looks once more with
    /// `wake_condition` (work, shutdown, a joined task finishing...), and
    /// parks until woken or until `deadline`. `searching` says whether the
    /// caller is counted as searching; it always returns counted as
    /// searching.
    pub(crate) fn sleep(
        &self,
        index: usize,
        searching: bool,
        wake_condition: impl FnOnce() -> bool,
        deadline: Option<Instant>,
    ) {
        {
            let mut sleepers = self.sleepers.lock();
            sleepers.push(index);
            let delta = if searching {
                ONE_SLEEPING.wrapping_sub(ONE_SEARCHING)
            } else {
                ONE_SLEEPING
            };
            self.state.fetch_add(delta, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
        if !wake_condition() {
            self.parkers[index].park_until(deadline);
        }
        self.leave_sleepers(index);
    }

    /// Takes worker `index` off the sleepers list if a waker did not
    /// already, counting it as searching either way.
    fn leave_sleepers(&self, index: usize) {
        let mut sleepers = self.sleepers.lock();
        if let Some(pos) = sleepers.iter().rposition(|&i| i == index) {
            sleepers.remove(pos);
            self.state
                .fetch_add(ONE_SEARCHING - ONE_SLEEPING, Ordering::SeqCst);
        }
    }

    /// (searching, sleeping) right now, for tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let s = self.state.load(Ordering::SeqCst);
        (searching(s), sleeping(s))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_sleeper_is_woken_by_new_work_and_comes_back_searching() {
        let idle = Arc::new(Idle::new(1));
        let work = Arc::new(AtomicBool::new(false));
        idle.start_searching();
        let t = {
            let (idle, work) = (idle.clone(), work.clone());
            std::thread::spawn(move || {
                idle.sleep(0, true, || work.load(Ordering::SeqCst), None);
                assert!(work.load(Ordering::SeqCst));
            })
        };
        // Wait until it announced itself, then publish work and notify.
        while idle.counts() != (0, 1) {
            std::thread::yield_now();
        }
        work.store(true, Ordering::SeqCst);
        idle.notify_work();
        t.join().unwrap();
        assert_eq!(idle.counts(), (1, 0));
    }

    #[test]
    fn notify_wakes_nobody_while_a_worker_searches() {
        let idle = Idle::new(2);
        idle.start_searching();
        // Worker 1 "sleeps" with its wake condition already true.
        idle.sleep(1, false, || true, None);
        assert_eq!(idle.counts(), (2, 0));
        idle.stop_searching(|| false);
        idle.stop_searching(|| false);
        assert_eq!(idle.counts(), (0, 0));
    }

    #[test]
    fn a_deadline_ends_the_sleep() {
        let idle = Idle::new(1);
        let t0 = Instant::now();
        idle.sleep(0, false, || false, Some(t0 + Duration::from_millis(20)));
        assert!(t0.elapsed() >= Duration::from_millis(20));
        assert_eq!(idle.counts(), (1, 0));
    }
}

/// loom models of the sleep/wake protocol (`RUSTFLAGS="--cfg loom"`, see
/// `loom-tests/README.md`): [`Sleep`] and a queue, with workers that go
/// through the protocol as the worker loop does (take a task; else start
/// searching and look once more; else go to sleep with "the queue is not
/// empty" as the wake condition) and a pusher that pushes and then calls
/// `notify_work`. A lost wake-up leaves a task queued while every worker is
/// parked and the pusher has finished: loom reports that as a deadlock.
/// Asserted besides: every task is taken exactly once, and the counts
/// return to "nobody searching, nobody sleeping".
///
/// The queue is not the `sync` shim's deque (a mutex under loom, which
/// would order the two sides by itself) but a stand-in with the memory
/// orderings of crossbeam-deque's `Worker`/`Stealer`: the owner publishes a
/// push with a `Release` store, and `is_empty` reads with `Acquire` loads
/// around a `SeqCst` fence. So the model depends on the protocol's own
/// fences (without the one in `notify_work`, loom finds the lost wake-up).
///
/// * `push_while_last_worker_goes_to_sleep`: one worker, one task (the
///   sleepy-worker race).
/// * `two_workers_two_tasks`: two workers, two tasks pushed one after the
///   other: the wake-up of one sleeper per push, the searcher that covers
///   for a skipped wake-up, and the last searcher that wakes the next one
///   when it stops searching.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom_model::support::model;
    use crate::sync::{thread, Arc};

    /// A queue of indistinguishable tasks with crossbeam-deque's orderings
    /// (see the module doc): one pusher, any number of takers.
    #[derive(Default)]
    struct Queue {
        /// Tasks pushed so far (written by the pusher only).
        pushed: AtomicUsize,
        /// Tasks taken so far.
        taken: AtomicUsize,
    }

    impl Queue {
        fn push(&self) {
            let n = self.pushed.load(Ordering::Relaxed);
            self.pushed.store(n + 1, Ordering::Release);
        }

        fn is_empty(&self) -> bool {
            let taken = self.taken.load(Ordering::Acquire);
            fence(Ordering::SeqCst);
            self.pushed.load(Ordering::Acquire) <= taken
        }

        /// Takes one task, if any.
        fn take(&self) -> bool {
            loop {
                let taken = self.taken.load(Ordering::Acquire);
                fence(Ordering::SeqCst);
                if self.pushed.load(Ordering::Acquire) <= taken {
                    return false;
                }
                if self
                    .taken
                    .compare_exchange(taken, taken + 1, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    return true;
                }
            }
        }
    }

    /// What the workers share.
    struct World {
        idle: Idle,
        queue: Queue,
        /// Tasks the workers finished with.
        done: AtomicUsize,
        /// Tasks the model pushes in all.
        tasks: usize,
    }

    impl World {
        fn has_work(&self) -> bool {
            !self.queue.is_empty()
        }

        fn all_done(&self) -> bool {
            self.done.load(Ordering::SeqCst) == self.tasks
        }
    }

    /// Worker `index`: `main_loop`'s use of the protocol, until every task
    /// was taken. Whoever finishes the last task wakes the others (as a
    /// shutdown does) so that they can leave.
    fn worker(world: &World, index: usize) {
        let idle = &world.idle;
        let mut searching = false;
        loop {
            // The fast path, then (as a searcher) one more look.
            let found = world.queue.take() || {
                if !searching {
                    searching = true;
                    idle.start_searching();
                }
                world.queue.take()
            };
            if found {
                if searching {
                    searching = false;
                    idle.stop_searching(|| world.has_work());
                }
                if world.done.fetch_add(1, Ordering::SeqCst) + 1 == world.tasks {
                    idle.wake_all();
                }
                continue;
            }
            if world.all_done() {
                break;
            }
            idle.sleep(index, true, || world.has_work() || world.all_done(), None);
            searching = true;
        }
        idle.stop_searching(|| world.has_work());
    }

    fn run(workers: usize, tasks: usize) {
        let world = Arc::new(World {
            idle: Idle::new(workers),
            queue: Queue::default(),
            done: AtomicUsize::new(0),
            tasks,
        });
        let threads: Vec<_> = (0..workers)
            .map(|index| {
                let world = Arc::clone(&world);
                thread::spawn(move || worker(&world, index))
            })
            .collect();
        for _ in 0..tasks {
            world.queue.push();
            world.idle.notify_work();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(world.queue.taken.load(Ordering::SeqCst), tasks);
        assert_eq!(world.done.load(Ordering::SeqCst), tasks);
        let state = world.idle.state.load(Ordering::SeqCst);
        assert_eq!((searching(state), sleeping(state)), (0, 0));
        assert!(world.idle.sleepers.lock().is_empty());
    }

    #[test]
    fn push_while_last_worker_goes_to_sleep() {
        model("idle::push_while_last_worker_goes_to_sleep", || run(1, 1));
    }

    #[test]
    fn two_workers_two_tasks() {
        model("idle::two_workers_two_tasks", || run(2, 2));
    }
}

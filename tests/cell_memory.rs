//! What a task cell costs the global allocator: on a warm pool, nothing.
//! The crate recycles the blocks of its task cells (`src/sync/recycle.rs`):
//! a cell freed on one thread (a worker, the timer thread's sweep) comes
//! back to the thread that schedules. Alone in its file: it counts every
//! allocation of the whole process (a counting global allocator).
//!
//! And every path that frees a cell, on each timer queue: run, cancelled,
//! swept, given up by a shutdown, dropped with its handle before or after
//! the run, a periodic task, a timer future (and every path of its alarm:
//! rung, reset, dropped, timed out, discarded). Each closure's captures are
//! dropped exactly once, and the process keeps no bytes per round.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use chronopool::{ScheduledExecutor, TimerQueue};
use common::{block_on, queues, DropCounter};

struct Counting;

/// Bytes held by the whole process.
static LIVE: AtomicIsize = AtomicIsize::new(0);
thread_local! {
    /// Allocations made by this thread.
    static MINE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// SAFETY: forwards to the system allocator, counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        MINE.with(|m| m.set(m.get() + 1));
        LIVE.fetch_add(layout.size() as isize, SeqCst);
        // SAFETY: the caller's contract is `GlobalAlloc::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, SeqCst);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        MINE.with(|m| m.set(m.get() + 1));
        LIVE.fetch_add(new_size as isize - layout.size() as isize, SeqCst);
        // SAFETY: the caller's contract is `GlobalAlloc::realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test at a time: each counts the whole process.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn pool(queue: TimerQueue) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(2)
        .timer_queue(queue)
        .build()
        .unwrap()
}

/// Runs `round` once to warm up, then three times more: the bytes the
/// process holds after each of those, over what it held after the first.
fn kept_after_rounds(round: impl Fn()) -> Vec<isize> {
    round();
    let before = LIVE.load(SeqCst);
    (0..3)
        .map(|_| {
            round();
            LIVE.load(SeqCst) - before
        })
        .collect()
}

/// Schedules `n` tasks due within 100 µs, keeping at most 64 in flight
/// (the oldest is joined): each cell is freed by a worker after its run or
/// by this thread with its handle, whichever lets go last.
fn steady_churn(pool: &ScheduledExecutor, n: usize) {
    let mut handles = std::collections::VecDeque::with_capacity(65);
    for i in 0..n {
        let delay = Duration::from_micros((i % 100) as u64);
        handles.push_back(pool.schedule(|| (), delay).unwrap());
        if handles.len() > 64 {
            handles.pop_front().unwrap().join().unwrap();
        }
    }
    for handle in handles {
        handle.join().unwrap();
    }
}

#[test]
fn a_warm_pool_schedules_without_the_global_allocator() {
    let _alone = ALONE.lock().unwrap();
    const N: usize = 20_000;
    for queue in queues() {
        let pool = pool(queue);
        // Warm: the queue's storage grows, the caches fill.
        steady_churn(&pool, N);
        let mine = MINE.with(|m| m.get());
        steady_churn(&pool, N);
        let fresh = MINE.with(|m| m.get()) - mine;
        // Without recycling each insert allocates its cell: N. With it, a
        // cell comes from this thread's cache or from the depot, where the
        // workers put the magazines of cells they free. (The timer thread
        // still allocates now and then: its queue's storage.)
        assert!(
            fresh < N / 100,
            "{queue:?}: the scheduling thread allocated {fresh} times for {N} warm inserts"
        );
        pool.shutdown();
        assert!(pool.await_termination(Duration::from_secs(10)));
    }
}

/// What the recycling may hold of one size class between rounds, as the
/// threads' timing leaves it: at most the depot's 2,048 blocks and 64 in
/// each live thread's cache; with 48-byte blocks and four threads (the
/// hostile test's closures), 108 KiB (`src/sync/recycle.rs`). Each size
/// class has a depot of its own, so a test whose cells span several
/// classes may in theory keep more without a leak; the every-path test's
/// rounds kept at most 14,424 bytes, about a ninth of it.
const RECYCLING_MAY_KEEP: isize = 128 << 10;

/// Tasks of each path per round of the test below: enough that a leak on
/// one path alone keeps more than [`RECYCLING_MAY_KEEP`] a round, even on
/// a path that only some of them take. Of the cancelled tasks, the timer's
/// sweep frees some (the shutdown's drain frees the rest): a leak of
/// those alone, planted in the sweep, kept 29-63 KB a round with 5,000
/// of each; with 25,000 it failed both bounds on every queue (at least
/// 177 KB after the first round, 100 KB more after the third), where
/// rounds without it kept -7,576 to 14,424 bytes. A periodic task runs
/// every [`PERIODIC_EVERY`]th turn of the loop; the timer futures' paths
/// have their own test (below), so they run four times a round here.
const CELLS_PER_PATH: usize = 25_000;

/// One periodic task per this many turns of the every-path loop: 1,250 a
/// round. A leak of their cells (one reference forgotten at each cancel,
/// planted) kept about 245 KB a round and failed the test.
const PERIODIC_EVERY: usize = 20;

#[test]
fn every_path_that_frees_a_cell_drops_its_closure_once_and_keeps_no_bytes() {
    let _alone = ALONE.lock().unwrap();
    for queue in queues() {
        let round = || {
            let drops = &Arc::new(AtomicUsize::new(0));
            let pool = pool(queue);
            let mut made = 0;
            let mut kept = Vec::new();
            for i in 0..CELLS_PER_PATH {
                made += 1;
                let guard = DropCounter(drops.clone());
                // Run now, result read.
                let now = pool.submit(move || drop(guard)).unwrap();
                made += 1;
                let guard = DropCounter(drops.clone());
                // Run later, handle dropped before the run.
                drop(
                    pool.schedule(move || drop(guard), Duration::from_millis(1))
                        .unwrap(),
                );
                made += 1;
                let guard = DropCounter(drops.clone());
                // Cancelled: dropped at the cancel, cell swept.
                let cancelled = pool.schedule(move || drop(guard), Duration::from_secs(3600));
                assert!(cancelled.unwrap().cancel());
                made += 1;
                let guard = DropCounter(drops.clone());
                // Given up by the shutdown below (kept delayed tasks are
                // cancelled by shutdown_now).
                kept.push(
                    pool.schedule(move || drop(guard), Duration::from_secs(3600))
                        .unwrap(),
                );
                if i % PERIODIC_EVERY == 0 {
                    made += 1;
                    let guard = DropCounter(drops.clone());
                    let runs = Arc::new(AtomicUsize::new(0));
                    let counted = runs.clone();
                    let beat = pool
                        .schedule_at_fixed_rate(
                            move || {
                                let _ = &guard;
                                counted.fetch_add(1, SeqCst);
                            },
                            Duration::ZERO,
                            Duration::from_micros(10),
                        )
                        .unwrap();
                    // Re-armed at least once, then cancelled.
                    while runs.load(SeqCst) < 2 {
                        std::thread::yield_now();
                    }
                    assert!(beat.cancel());
                }
                if i % (CELLS_PER_PATH / 4) == 0 {
                    // A timer future, completed and one dropped early.
                    block_on(pool.sleep(Duration::from_millis(1)));
                    drop(pool.sleep(Duration::from_secs(3600)));
                }
                now.join().unwrap();
            }
            let given_up = pool.shutdown_now();
            drop(given_up);
            assert!(pool.await_termination(Duration::from_secs(10)));
            for handle in kept {
                assert!(handle.join().unwrap_err().is_cancelled());
            }
            assert_eq!(
                drops.load(SeqCst),
                made,
                "{queue:?}: each closure dropped once"
            );
        };
        let grown = kept_after_rounds(round);
        let least = *grown.iter().min().unwrap();
        assert!(
            least < RECYCLING_MAY_KEEP,
            "{queue:?}: bytes kept after each round: {grown:?}"
        );
        assert!(
            grown[2] - grown[0] < RECYCLING_MAY_KEEP,
            "{queue:?}: bytes kept grow from round to round: {grown:?}"
        );
    }
}

/// A closure too large for a job's inline word (it captures 40 bytes) is
/// stored in a recycled block, freed by the worker that runs it: on a warm
/// pool, `execute` takes nothing from the global allocator for it. What the
/// submitting thread still allocates is the injector's: crossbeam's
/// `Injector` takes a block for every 63 pushes.
#[test]
fn a_warm_pool_executes_large_closures_without_the_global_allocator() {
    let _alone = ALONE.lock().unwrap();
    const N: usize = 20_000;
    let pool = pool(TimerQueue::heap());
    let ran = Arc::new(AtomicUsize::new(0));
    let churn = || {
        let base = ran.load(SeqCst);
        let done = || ran.load(SeqCst) - base;
        for i in 0..N {
            let (ran, payload) = (ran.clone(), [i as u64; 4]);
            pool.execute(move || {
                assert_eq!(payload[3], i as u64);
                ran.fetch_add(1, SeqCst);
            })
            .unwrap();
            // At most 64 in flight, as in `steady_churn`.
            while i + 1 - done() > 64 {
                std::thread::yield_now();
            }
        }
        while done() < N {
            std::thread::yield_now();
        }
    };
    // Warm: the caches fill.
    churn();
    let mine = MINE.with(|m| m.get());
    churn();
    let fresh = MINE.with(|m| m.get()) - mine;
    assert_eq!(ran.load(SeqCst), 2 * N);
    // Without recycling: a block per closure, N, and the injector's.
    assert!(
        fresh <= N / 63 + 32,
        "the submitting thread allocated {fresh} times for {N} warm executes"
    );
    pool.shutdown();
    assert!(pool.await_termination(Duration::from_secs(10)));
}

/// A capture whose destructor panics (unless it runs while a panic
/// unwinds: a second panic would abort).
struct PanicsOnDrop([u64; 4]);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("expected: a capture's destructor panics");
        }
    }
}

/// Hostile closures stored out of line (40 bytes of captures): a body
/// that panics, a capture whose destructor panics after the body, and
/// closures given up unrun by `shutdown_now` whose captures panic as they
/// are dropped. Each panic reaches the hook once, each block goes back, and
/// what the process keeps does not grow from round to round.
#[test]
fn hostile_large_closures_give_their_blocks_back() {
    let _alone = ALONE.lock().unwrap();
    const RUN: usize = 6_000;
    const GIVEN_UP: usize = 2_000;
    let round = || {
        let (pool, panics) =
            common::counting_panics(ScheduledExecutor::builder().worker_threads(2));
        let ran = Arc::new(AtomicUsize::new(0));
        for i in 0..RUN {
            let (ran, capture) = (ran.clone(), PanicsOnDrop([i as u64; 4]));
            pool.execute(move || {
                // The whole capture moves in (a field alone would be copied).
                let capture = capture;
                assert_eq!(capture.0[3], i as u64);
                ran.fetch_add(1, SeqCst);
                if i % 2 == 0 {
                    panic!("expected: the body panics");
                }
            })
            .unwrap();
        }
        assert!(common::eventually(|| ran.load(SeqCst) == RUN));
        assert!(common::eventually(|| panics.load(SeqCst) == RUN));
        // Both workers held, then closures queued behind them and given up.
        let gate = common::Gate::new();
        for _ in 0..2 {
            let waiter = gate.waiter();
            pool.execute(move || waiter.wait()).unwrap();
        }
        for i in 0..GIVEN_UP {
            let capture = PanicsOnDrop([i as u64; 4]);
            pool.execute(move || drop(capture)).unwrap();
        }
        let given_up = pool.shutdown_now();
        gate.open();
        drop(given_up);
        assert!(pool.await_termination(Duration::from_secs(10)));
        assert_eq!(ran.load(SeqCst), RUN, "a given-up closure never runs");
        assert_eq!(
            panics.load(SeqCst),
            RUN + GIVEN_UP,
            "each panic reported once"
        );
    };
    let grown = kept_after_rounds(round);
    // Each closure's block is 48 bytes: one kept per closure would be
    // 375 KiB more after each round, over what the recycling may keep.
    let least = *grown.iter().min().unwrap();
    assert!(
        least < RECYCLING_MAY_KEEP,
        "bytes kept after each round: {grown:?}"
    );
    assert!(
        grown[2] - grown[0] < RECYCLING_MAY_KEEP,
        "bytes kept grow from round to round: {grown:?}"
    );
}

/// Every path of a timer future's alarm, on each queue: rung and read,
/// reset while registered (the old alarm cancelled) and rung, reset again
/// and again then dropped, a timeout whose future never ends, an interval
/// dropped between ticks, and one left registered when `shutdown_now`
/// discards it. The timer holds nothing once they are gone, and the
/// process keeps no bytes per round.
/// Rounds of each path of a timer future per round of the test below:
/// enough that a leak on one path alone shows above what rounds keep
/// without one.
const PER_PATH: usize = 400;

#[test]
fn every_path_of_a_timer_future_frees_its_alarm_and_keeps_no_bytes() {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};
    let _alone = ALONE.lock().unwrap();
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let poll = |sleep: &mut chronopool::future::Sleep| {
        Pin::new(sleep).poll(&mut Context::from_waker(&waker))
    };
    for queue in queues() {
        let round = || {
            let pool = pool(queue);
            for i in 0..PER_PATH {
                // Registered, reset to soon (the first alarm cancelled),
                // rung.
                let mut sleep = pool.sleep(Duration::from_secs(3600));
                assert!(poll(&mut sleep).is_pending());
                sleep.reset(std::time::Instant::now() + Duration::from_micros(200));
                block_on(&mut sleep);
                assert!(sleep.is_elapsed());
                // Reset while registered, five times, then dropped.
                let mut sleep = pool.sleep(Duration::from_secs(3600));
                for k in 0..5 {
                    assert!(poll(&mut sleep).is_pending());
                    sleep.reset(std::time::Instant::now() + Duration::from_secs(3600 + k));
                }
                assert!(poll(&mut sleep).is_pending());
                drop(sleep);
                // A timeout whose future never ends.
                let pending = std::future::pending::<()>();
                assert!(block_on(pool.timeout(Duration::from_micros(100), pending)).is_err());
                if i % 80 == 0 {
                    // An interval, two ticks, then dropped while waiting.
                    let mut ticks = pool.interval(Duration::from_micros(300));
                    block_on(ticks.tick());
                    block_on(ticks.tick());
                    let mut next = std::pin::pin!(ticks.tick());
                    let _ = next.as_mut().poll(&mut Context::from_waker(&waker));
                }
            }
            assert_eq!(
                pool.metrics().scheduled_tasks,
                0,
                "{queue:?}: the timer holds no alarm"
            );
            // Left registered: discarded by the shutdown, then read.
            let mut kept = pool.sleep(Duration::from_secs(3600));
            assert!(poll(&mut kept).is_pending());
            drop(pool.shutdown_now());
            assert!(pool.await_termination(Duration::from_secs(10)));
            assert_eq!(poll(&mut kept), Poll::Ready(()));
            assert!(!kept.is_elapsed(), "{queue:?}: discarded, not elapsed");
        };
        let grown = kept_after_rounds(round);
        // A leak on any one path keeps PER_PATH alarms a round, 40 bytes
        // or more each: 16,000. Rounds without one kept 24-10,848 bytes
        // (the recycling depots, the queues' storage), and as little as
        // -7,576 in the every-path test: so a leak's first round alone may
        // read under 16,000, and the growth over two rounds (32,000 with
        // a leak) is checked too.
        let least = *grown.iter().min().unwrap();
        assert!(
            least < 16_000,
            "{queue:?}: bytes kept after each round: {grown:?}"
        );
        assert!(
            grown[2] - grown[0] < 16_000,
            "{queue:?}: bytes kept grow from round to round: {grown:?}"
        );
    }
}

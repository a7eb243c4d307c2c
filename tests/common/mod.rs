//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// Generous: tests must not flake on a loaded 2-core machine.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// An executor with `threads` workers and the timer queue `queue`.
pub fn pool(queue: chronopool::TimerQueue, threads: usize) -> chronopool::ScheduledExecutor {
    chronopool::ScheduledExecutor::builder()
        .worker_threads(threads)
        .timer_queue(queue)
        .build()
        .unwrap()
}

/// An executor with `threads` workers and the timer queue `queue`, on a
/// [`ManualClock`](chronopool::ManualClock) of its own, returned with it:
/// time moves only when the test moves it, so a test on it asserts exact
/// manual times and counts, whatever the machine's load.
pub fn manual_pool(
    queue: chronopool::TimerQueue,
    threads: usize,
) -> (chronopool::ScheduledExecutor, chronopool::ManualClock) {
    let clock = chronopool::ManualClock::new();
    let pool = chronopool::ScheduledExecutor::builder()
        .worker_threads(threads)
        .timer_queue(queue)
        .clock(clock.clone())
        .build()
        .unwrap();
    (pool, clock)
}

/// Builds `builder` with an `on_panic` hook that counts the panics it sees,
/// and returns the executor with the count (and quiets the panics tests
/// provoke on purpose).
pub fn counting_panics(
    builder: chronopool::Builder,
) -> (
    chronopool::ScheduledExecutor,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    quiet_expected_panics();
    let panics = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = panics.clone();
    let pool = builder
        .on_panic(move |_| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
        .build()
        .unwrap();
    (pool, panics)
}

/// Polls `cond` until it holds or `PATIENCE` runs out; true if it held.
pub fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(1));
    }
    cond()
}

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// A minimal executor for one future: the runtime-agnostic way to `.await`
/// a handle in a test.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

/// Replaces the default panic hook with one that stays quiet about the
/// panics tests provoke on purpose (messages starting with "expected").
pub fn quiet_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(install_quiet_hook);
}

fn install_quiet_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str));
        if !message.is_some_and(|m| m.starts_with("expected")) {
            default(info);
        }
    }));
}

/// A latch tasks block on until the test opens it. The test keeps the
/// `Gate` and hands out [`GateWaiter`]s; dropping the `Gate` opens it, so a
/// failing assertion (a panic) releases blocked workers instead of hanging
/// the test in the pool's drop.
pub struct Gate(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

/// What a task waits on (see [`Gate`]).
#[derive(Clone)]
pub struct GateWaiter(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    pub fn new() -> Self {
        Gate(Arc::default())
    }

    pub fn waiter(&self) -> GateWaiter {
        GateWaiter(self.0.clone())
    }

    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
    }
}

impl GateWaiter {
    pub fn wait(&self) {
        let mut open = self.0 .0.lock().unwrap();
        while !*open {
            open = self.0 .1.wait(open).unwrap();
        }
    }
}

/// Counts drops of the value it is captured in.
pub struct DropCounter(pub Arc<std::sync::atomic::AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Instantiates test functions that take a `TimerQueue` once per backend
/// configuration: a module each for `heap`, `hashed_wheel`,
/// `small_hashed_wheel`, `hierarchical_wheel` and
/// `fine_hierarchical_wheel`, one `#[test]` per function in each. The
/// caller gives the two small configurations, sized for its delays.
#[allow(unused_macros)]
macro_rules! backend_suites {
    (
        small_hashed_wheel: $small:expr,
        fine_hierarchical_wheel: $fine:expr,
        tests: [$($test:ident),* $(,)?] $(,)?
    ) => {
        $crate::common::backend_suites!(@one heap, chronopool::TimerQueue::heap(), [$($test),*]);
        $crate::common::backend_suites!(
            @one hashed_wheel, chronopool::TimerQueue::hashed_wheel(), [$($test),*]
        );
        $crate::common::backend_suites!(@one small_hashed_wheel, $small, [$($test),*]);
        $crate::common::backend_suites!(
            @one hierarchical_wheel, chronopool::TimerQueue::hierarchical_wheel(), [$($test),*]
        );
        $crate::common::backend_suites!(@one fine_hierarchical_wheel, $fine, [$($test),*]);
    };
    (@one $module:ident, $queue:expr, [$($test:ident),*]) => {
        mod $module {
            // For the caller's queue expression (the other modules name
            // `chronopool::TimerQueue` in full).
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $test() {
                    super::$test($queue)
                }
            )*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use backend_suites;

/// The three timer queues, with their default settings.
pub fn queues() -> [chronopool::TimerQueue; 3] {
    [
        chronopool::TimerQueue::heap(),
        chronopool::TimerQueue::hashed_wheel(),
        chronopool::TimerQueue::hierarchical_wheel(),
    ]
}

/// A pool of two workers on `queue`, driven by `clock` (which other
/// pools may share).
pub fn pool_on_clock(
    clock: &chronopool::ManualClock,
    queue: chronopool::TimerQueue,
) -> chronopool::ScheduledExecutor {
    chronopool::ScheduledExecutor::builder()
        .worker_threads(2)
        .timer_queue(queue)
        .clock(clock.clone())
        .build()
        .unwrap()
}

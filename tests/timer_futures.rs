//! The timer futures (`chronopool::future`): `sleep`, `sleep_until`,
//! `timeout` and `interval`, under a hand-written poller that counts wakes,
//! on a manual clock (exact times), and under two real runtimes (tokio and
//! smol) on the real clock (bounds that hold on a loaded machine: never
//! early, and done long before a generous deadline).
#![cfg(not(loom))]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use chronopool::future::Sleep;
use chronopool::{MissedRuns, ScheduledExecutor, TimerQueue};
use common::{eventually, manual_pool};

const QUEUES: [fn() -> TimerQueue; 3] = [
    TimerQueue::heap,
    TimerQueue::hashed_wheel,
    TimerQueue::hierarchical_wheel,
];

const MS: Duration = Duration::from_millis(1);
const HOUR: Duration = Duration::from_secs(3600);

/// A waker that counts its wakes.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Counting {
    fn wakes(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn counting() -> (Arc<Counting>, Waker) {
    let counter = Arc::new(Counting::default());
    (counter.clone(), Waker::from(counter))
}

/// A waker nobody watches (`Waker::noop` is newer than the crate's
/// minimum Rust version).
fn noop_waker() -> Waker {
    Waker::from(Arc::new(Counting::default()))
}

/// One poll of `future` with `waker`.
fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(waker))
}

#[test]
fn one_wake_per_expiry_on_the_manual_clock_and_none_after_the_end() {
    for queue in QUEUES {
        let (pool, clock) = manual_pool(queue(), 1);
        let mut sleep = pool.sleep(10 * MS);
        let (counter, waker) = counting();
        assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
        clock.advance(9 * MS);
        assert_eq!(counter.wakes(), 0, "never early");
        assert!(!sleep.is_elapsed());
        clock.advance(MS);
        assert_eq!(counter.wakes(), 1, "woken by `advance`, on its thread");
        assert!(sleep.is_elapsed());
        assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()));
        assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()), "fused");
        drop(sleep);
        clock.advance(100 * MS);
        assert_eq!(counter.wakes(), 1, "exactly one wake");
        assert_eq!(pool.metrics().scheduled_tasks, 0);
    }
}

#[test]
fn a_repoll_with_a_new_waker_wakes_only_the_new_one() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let mut sleep = pool.sleep(5 * MS);
    let (old, old_waker) = counting();
    let (new, new_waker) = counting();
    assert_eq!(poll_once(&mut sleep, &old_waker), Poll::Pending);
    assert_eq!(poll_once(&mut sleep, &new_waker), Poll::Pending);
    drop((old_waker, new_waker));
    clock.advance(5 * MS);
    assert_eq!((old.wakes(), new.wakes()), (0, 1));
    assert_eq!(Arc::strong_count(&old), 1, "the replaced waker was dropped");
    assert_eq!(Arc::strong_count(&new), 1, "the woken one too");
}

#[test]
fn a_sleep_dropped_before_its_deadline_leaves_the_timer_and_is_never_woken() {
    for queue in QUEUES {
        let (pool, clock) = manual_pool(queue(), 1);
        let counters: Vec<_> = (0..1000)
            .map(|i| {
                let mut sleep = pool.sleep(Duration::from_secs(3600 + i));
                let (counter, waker) = counting();
                assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
                (sleep, counter)
            })
            .collect();
        assert_eq!(pool.metrics().scheduled_tasks, 1000);
        let counters: Vec<_> = counters
            .into_iter()
            .map(|(sleep, counter)| {
                drop(sleep);
                counter
            })
            .collect();
        // The timer sweeps the dropped entries out (long before their
        // deadlines, which the manual clock never reaches here).
        assert!(eventually(|| pool.metrics().scheduled_tasks == 0));
        for counter in &counters {
            assert_eq!(Arc::strong_count(counter), 1, "no waker is kept");
        }
        clock.advance(Duration::from_secs(2 * 3600));
        assert!(counters.iter().all(|c| c.wakes() == 0));
    }
}

#[test]
fn a_sleep_first_polled_after_its_deadline_ends_without_registering() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let mut sleep = pool.sleep(MS);
    clock.advance(MS);
    let (counter, waker) = counting();
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()));
    assert_eq!(counter.wakes(), 0);
    assert_eq!(pool.metrics().scheduled_tasks, 0);
    let mut zero = pool.sleep(Duration::ZERO);
    assert_eq!(poll_once(&mut zero, &waker), Poll::Ready(()));
}

#[test]
fn sleep_until_and_reset_follow_the_executor_clock() {
    let (pool, clock) = manual_pool(TimerQueue::hierarchical_wheel(), 1);
    let start = clock.now();
    let mut sleep = pool.sleep_until(start + 20 * MS);
    assert_eq!(sleep.deadline(), start + 20 * MS);
    let (counter, waker) = counting();
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
    sleep.reset(start + 50 * MS);
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
    clock.advance(20 * MS);
    assert_eq!(counter.wakes(), 0, "the old deadline is gone");
    clock.advance(30 * MS);
    assert_eq!(counter.wakes(), 1);
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()));
}

#[test]
fn a_timeout_gives_the_inner_output_or_elapsed_at_its_deadline() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let (_, waker) = counting();
    let mut quick = Box::pin(pool.timeout(10 * MS, async { 7 }));
    assert_eq!(
        quick.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(Ok(7))
    );
    let (counter, waker) = counting();
    let mut never = Box::pin(pool.timeout(10 * MS, std::future::pending::<u8>()));
    assert!(never
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    clock.advance(9 * MS);
    assert_eq!(counter.wakes(), 0);
    clock.advance(MS);
    assert_eq!(counter.wakes(), 1);
    match never.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(Err(elapsed)) => assert_eq!(elapsed.to_string(), "the deadline has elapsed"),
        other => panic!("unexpected {other:?}"),
    }
}

/// Polls `interval.tick()` once with `waker`.
fn tick(interval: &mut chronopool::future::Interval, waker: &Waker) -> Poll<Instant> {
    interval.poll_tick(&mut Context::from_waker(waker))
}

#[test]
fn an_interval_ticks_at_once_then_every_period_and_handles_missed_ticks() {
    for (missed, after_gap) in [
        // A gap of 35 ms after the tick due at 10 (now 45): the tick due
        // at 20 ends at once, late; then Burst catches up with 30 and 40,
        // Skip goes on at 50, Delay a period after the late tick.
        (MissedRuns::Burst, vec![20, 30, 40, 50]),
        (MissedRuns::Skip, vec![20, 50, 60]),
        (MissedRuns::Delay, vec![20, 55]),
    ] {
        let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
        let start = clock.now();
        let at = |ms: u32| start + MS * ms;
        let mut interval = pool.interval(10 * MS).missed_runs(missed);
        let (counter, waker) = counting();
        assert_eq!(tick(&mut interval, &waker), Poll::Ready(at(0)), "at once");
        assert_eq!(tick(&mut interval, &waker), Poll::Pending);
        clock.advance(10 * MS);
        assert_eq!(counter.wakes(), 1);
        assert_eq!(tick(&mut interval, &waker), Poll::Ready(at(10)));
        clock.advance(35 * MS); // now 45
        let mut seen = Vec::new();
        while seen.len() < after_gap.len() {
            match tick(&mut interval, &waker) {
                Poll::Ready(due) => seen.push((due - start).as_millis() as u64),
                Poll::Pending => clock.advance(5 * MS),
            }
        }
        assert_eq!(seen, after_gap, "{missed:?}");
    }
}

#[test]
fn shutdown_discards_or_keeps_timer_futures_as_it_does_delayed_tasks() {
    // shutdown_now: a registered sleep ends at once, not elapsed, and is
    // not returned as a task.
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let mut sleep = pool.sleep(Duration::from_secs(60));
    let (counter, waker) = counting();
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
    assert!(pool.shutdown_now().is_empty(), "a timer future is no task");
    assert_eq!(counter.wakes(), 1, "woken to see it");
    assert!(pool.await_termination(common::PATIENCE));
    // Past its deadline and not polled since the discard: not elapsed.
    clock.advance(Duration::from_secs(61));
    assert!(!sleep.is_elapsed());
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()));
    assert!(!sleep.is_elapsed());
    // First polled after shutdown: ends at once.
    let mut late = pool.sleep(Duration::from_secs(60));
    assert_eq!(poll_once(&mut late, &waker), Poll::Ready(()));
    assert!(!late.is_elapsed());

    // Graceful shutdown keeps delayed work by default: the sleep still
    // ends at its deadline, and the pool waits for it.
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let mut sleep = pool.sleep(10 * MS);
    let (counter, waker) = counting();
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
    pool.shutdown();
    assert!(!pool.await_termination(Duration::from_millis(50)));
    clock.advance(10 * MS);
    assert_eq!(counter.wakes(), 1);
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()));
    assert!(sleep.is_elapsed());
    assert!(pool.await_termination(common::PATIENCE));

    // An executor that discards delayed work at shutdown discards them.
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .keep_delayed_tasks_on_shutdown(false)
        .build()
        .unwrap();
    let mut sleep = pool.sleep(Duration::from_secs(60));
    let (counter, waker) = counting();
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
    pool.shutdown();
    assert!(eventually(|| counter.wakes() == 1));
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()));
    assert!(!sleep.is_elapsed());
    assert!(pool.await_termination(common::PATIENCE));
}

/// A waker whose `wake` panics, and one whose `wake` drops the last
/// handle to the executor.
#[test]
fn hostile_wakers_do_not_hurt_the_timer() {
    struct Panicking;
    impl Wake for Panicking {
        fn wake(self: Arc<Self>) {
            panic!("expected: a timer future's waker panicked");
        }
    }
    let (pool, panics) = common::counting_panics(ScheduledExecutor::builder().worker_threads(1));
    // 20 ms, not 1: a first poll after the deadline ends without
    // registering, and a loaded machine can hold this thread 1 ms between
    // the two lines (seen: 1 run in 38 beside the other tests).
    let mut sleep = pool.sleep(20 * MS);
    let waker = Waker::from(Arc::new(Panicking));
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
    assert!(eventually(|| panics.load(Ordering::SeqCst) == 1));
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()));
    // The timer still works.
    assert_eq!(pool.schedule(|| 5, MS).unwrap().join().unwrap(), 5);

    struct DropsThePool(std::sync::Mutex<Option<ScheduledExecutor>>);
    impl Wake for DropsThePool {
        fn wake(self: Arc<Self>) {
            drop(self.0.lock().unwrap().take());
        }
    }
    let waker_state = Arc::new(DropsThePool(std::sync::Mutex::new(Some(pool.clone()))));
    let mut sleep = pool.sleep(20 * MS);
    let waker = Waker::from(waker_state.clone());
    assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending);
    drop(pool);
    // The waker, on the timer thread, drops the last handle: the pool
    // shuts down (it discards its timers, so the sleep has ended either way).
    assert!(eventually(|| waker_state.0.lock().unwrap().is_none()));
}

/// A waker whose `clone` panics, at a sleep's first poll (the clone the
/// alarm keeps), on every queue: the poll unwinds into its caller before
/// anything is registered, the sleep keeps its deadline, and a later poll
/// with a sound waker registers it and ends it at that deadline.
#[test]
fn a_waker_whose_clone_panics_leaves_the_sleep_unregistered_and_usable() {
    use std::task::{RawWaker, RawWakerVTable};
    fn clone(_: *const ()) -> RawWaker {
        panic!("expected: a waker's clone panicked");
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    common::quiet_expected_panics();
    // SAFETY: the vtable's functions ignore the data pointer.
    let hostile = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    for queue in QUEUES {
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .timer_queue(queue())
            .build()
            .unwrap();
        let mut sleep = pool.sleep(30 * MS);
        let due = sleep.deadline();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            poll_once(&mut sleep, &hostile)
        }));
        assert!(
            unwound.is_err(),
            "{queue:?}: the clone's panic unwinds to the poller"
        );
        assert_eq!(sleep.deadline(), due, "{queue:?}");
        assert_eq!(
            pool.metrics().scheduled_tasks,
            0,
            "{queue:?}: nothing registered"
        );
        let (counter, waker) = counting();
        assert_eq!(poll_once(&mut sleep, &waker), Poll::Pending, "{queue:?}");
        assert!(eventually(|| counter.wakes() == 1), "{queue:?}: woken once");
        assert!(Instant::now() >= due, "{queue:?}: never early");
        assert_eq!(poll_once(&mut sleep, &waker), Poll::Ready(()), "{queue:?}");
        assert_eq!(sleep.deadline(), due, "{queue:?}");
        assert!(sleep.is_elapsed(), "{queue:?}");
    }
}

/// The name of the calling thread.
fn this_thread() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_owned()
}

/// A waker that, the first time it is woken, says on which thread and
/// then holds that thread until `release` is set.
struct Holding {
    woken_on: std::sync::Mutex<Option<String>>,
    release: std::sync::atomic::AtomicBool,
}

impl Wake for Holding {
    fn wake(self: Arc<Self>) {
        let name = this_thread();
        *self.woken_on.lock().unwrap() = Some(name);
        while !self.release.load(Ordering::SeqCst) {
            std::thread::sleep(MS);
        }
    }
}

/// A waker that records the thread it was woken on.
#[derive(Default)]
struct WokenOn(std::sync::Mutex<Vec<String>>);

impl Wake for WokenOn {
    fn wake(self: Arc<Self>) {
        let name = this_thread();
        self.0.lock().unwrap().push(name);
    }
}

/// How long the sleep that holds the timer thread takes ([`HeldTimer`]),
/// and the sleeps the tests make due while it is held: far enough apart
/// that a loaded machine does not reorder them (a first poll later than
/// the deadline ends the sleep without registering it; a registration
/// that took longer than `DUE - HELD` would let the timer thread ring the
/// others before it is held).
const HELD: Duration = Duration::from_millis(20);
const DUE: Duration = Duration::from_millis(200);

/// The timer thread of a pool of one worker, held: the worker kept busy
/// (so no idle worker takes the lead and the timer thread rings alarms
/// itself), then a sleep of [`HELD`] whose [`Holding`] waker holds the thread
/// that rings it ([`hold`](Self::hold)). Dropped, it lets both go (also
/// when a test fails: else the pool's drop would wait for them).
struct HeldTimer {
    holding: Arc<Holding>,
    busy: Arc<std::sync::atomic::AtomicBool>,
}

impl HeldTimer {
    /// Keeps `pool`'s only worker busy.
    fn new(pool: &ScheduledExecutor) -> Self {
        let busy = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let b = busy.clone();
        drop(pool.submit(move || {
            while b.load(Ordering::SeqCst) {
                std::thread::sleep(MS);
            }
        }));
        let holding = Arc::new(Holding {
            woken_on: Default::default(),
            release: Default::default(),
        });
        HeldTimer { holding, busy }
    }

    /// Registers a sleep of [`HELD`] whose waker holds the thread that rings
    /// it, waits until it does, and checks that it is the timer thread.
    /// Register the other sleeps first: a poll of this thread after the
    /// deadline would help, ring it here, and be held.
    fn hold(&self, pool: &ScheduledExecutor) -> Sleep {
        let mut sleep = pool.sleep(HELD);
        assert!(poll_once(&mut sleep, &Waker::from(self.holding.clone())).is_pending());
        assert!(eventually(|| self
            .holding
            .woken_on
            .lock()
            .unwrap()
            .is_some()));
        let holder = self.holding.woken_on.lock().unwrap().clone().unwrap();
        assert!(holder.ends_with("-timer"), "rung on {holder}");
        sleep
    }
}

impl Drop for HeldTimer {
    fn drop(&mut self) {
        self.holding.release.store(true, Ordering::SeqCst);
        self.busy.store(false, Ordering::SeqCst);
    }
}

/// Polls a new sleep once (a first poll, which helps a timer that is
/// behind) every 5 ms until `done`, for at most 10 s: 2,000 sleeps, fewer
/// than the timer's command queue holds, so that with the timer thread
/// held and no help a test fails here instead of waiting for room in it.
fn helped_until(pool: &ScheduledExecutor, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..2_000 {
        assert!(poll_once(&mut pool.sleep(HOUR), &noop_waker()).is_pending());
        if done() {
            return true;
        }
        std::thread::sleep(5 * MS);
    }
    done()
}

#[test]
fn a_first_poll_rings_what_is_due_while_the_timer_thread_is_held() {
    for queue in QUEUES {
        // The only worker is busy, so the timer thread leads (no idle
        // worker takes the lead) and rings the first alarm itself.
        let (pool, panics) = common::counting_panics(
            ScheduledExecutor::builder()
                .worker_threads(1)
                .timer_queue(queue()),
        );
        let held = HeldTimer::new(&pool);
        let woken_on = Arc::new(WokenOn::default());
        let waker = Waker::from(woken_on.clone());
        // A third, due just before the second, whose waker panics: rung by
        // the same poll, its panic goes to the `on_panic` hook, not into the
        // poll.
        struct Panicking;
        impl Wake for Panicking {
            fn wake(self: Arc<Self>) {
                panic!("expected: a waker rung by a poll's help panicked");
            }
        }
        let mut third = pool.sleep(DUE);
        assert!(poll_once(&mut third, &Waker::from(Arc::new(Panicking))).is_pending());
        let mut second = pool.sleep(DUE);
        assert!(poll_once(&mut second, &waker).is_pending());
        let mut first = held.hold(&pool);
        // The second falls due while the timer thread is held: the first
        // poll of a new sleep after its deadline rings it on the polling
        // thread (a re-poll does not help: `Sleep::register`).
        let start = Instant::now();
        let ready = helped_until(&pool, || poll_once(&mut second, &waker).is_ready());
        assert!(ready, "{:?}: the second sleep never ended", queue());
        assert!(start.elapsed() < Duration::from_secs(5));
        let here = this_thread();
        assert_eq!(
            *woken_on.0.lock().unwrap(),
            [here],
            "{:?}: woken once, here",
            queue()
        );
        assert!(eventually(|| panics.load(Ordering::SeqCst) == 1));
        assert_eq!(poll_once(&mut third, &noop_waker()), Poll::Ready(()));
        // Let the timer thread go: the pool still times tasks.
        drop(held);
        assert_eq!(pool.schedule(|| 5, MS).unwrap().join().unwrap(), 5);
        assert_eq!(poll_once(&mut first, &noop_waker()), Poll::Ready(()));
    }
}

#[test]
fn a_waker_that_polls_a_sleep_does_not_make_the_help_nest() {
    // Wakers rung by a poll's help that poll a new sleep (a first poll,
    // which helps): that poll must not help again from inside the ring
    // (each nested help would ring the next waker, one stack frame deeper
    // per due sleep).
    std::thread_local! {
        static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    struct PollsANewSleep {
        pool: ScheduledExecutor,
        deepest: Arc<AtomicUsize>,
        woken: Arc<AtomicUsize>,
    }
    impl Wake for PollsANewSleep {
        fn wake(self: Arc<Self>) {
            let depth = DEPTH.with(|d| {
                d.set(d.get() + 1);
                d.get()
            });
            self.deepest.fetch_max(depth, Ordering::SeqCst);
            let _ = poll_once(&mut self.pool.sleep(HOUR), &noop_waker());
            DEPTH.with(|d| d.set(d.get() - 1));
            self.woken.fetch_add(1, Ordering::SeqCst);
        }
    }
    const SLEEPS: usize = 500;
    let pool = common::pool(TimerQueue::heap(), 1);
    let held = HeldTimer::new(&pool);
    let (deepest, woken) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut sleeps = Vec::new();
    for _ in 0..SLEEPS {
        let waker = Waker::from(Arc::new(PollsANewSleep {
            pool: pool.clone(),
            deepest: deepest.clone(),
            woken: woken.clone(),
        }));
        let mut sleep = pool.sleep(DUE);
        assert!(poll_once(&mut sleep, &waker).is_pending());
        sleeps.push(sleep);
    }
    // The timer thread held, first polls of new sleeps ring the rest, 64
    // at most a poll.
    let _first = held.hold(&pool);
    assert!(helped_until(&pool, || woken.load(Ordering::SeqCst) == SLEEPS));
    assert_eq!(
        deepest.load(Ordering::SeqCst),
        1,
        "no ring nested in a ring"
    );
    drop(sleeps);
}

#[test]
fn a_sleep_dropped_as_it_expires_is_woken_at_most_once_and_accounted() {
    for queue in QUEUES {
        let pool = common::pool(queue(), 2);
        const N: usize = 2000;
        let start = Instant::now();
        let sleeps: Vec<(Sleep, Arc<Counting>)> = (0..N)
            .map(|i| {
                let mut sleep =
                    pool.sleep_until(start + Duration::from_micros(500 * (i % 8) as u64));
                let (counter, waker) = counting();
                let _ = poll_once(&mut sleep, &waker);
                (sleep, counter)
            })
            .collect();
        // Dropped from another thread while they fall due.
        let barrier = Arc::new(Barrier::new(2));
        let dropper = {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                sleeps
                    .into_iter()
                    .map(|(sleep, counter)| {
                        drop(sleep);
                        counter
                    })
                    .collect::<Vec<_>>()
            })
        };
        barrier.wait();
        let counters = dropper.join().unwrap();
        assert!(eventually(|| pool.metrics().scheduled_tasks == 0));
        // A due alarm leaves the count as it leaves the backend, and is
        // rung (its waker woken and dropped) just after.
        assert!(eventually(|| counters
            .iter()
            .all(|c| Arc::strong_count(c) == 1)));
        for counter in &counters {
            assert!(counter.wakes() <= 1, "woken at most once");
        }
    }
}

/// Never early, on the real clock, from a runtime's task.
async fn sleeps_then_times_out(pool: ScheduledExecutor) {
    let start = Instant::now();
    pool.sleep(20 * MS).await;
    assert!(start.elapsed() >= 20 * MS, "never early");
    let late = pool
        .timeout(10 * MS, async { pool.sleep(Duration::from_secs(60)).await })
        .await;
    assert!(late.is_err());
    assert_eq!(
        pool.timeout(Duration::from_secs(60), async { 3 }).await,
        Ok(3)
    );
    let mut interval = pool.interval(5 * MS);
    let first = interval.tick().await;
    let third = {
        interval.tick().await;
        interval.tick().await
    };
    assert_eq!(third - first, 10 * MS);
    assert!(Instant::now() >= third);
}

#[test]
fn works_under_tokio() {
    let pool = common::pool(TimerQueue::heap(), 2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    runtime.block_on(sleeps_then_times_out(pool.clone()));
    // Ten thousand sleeps as tokio tasks, each never early.
    let late = runtime.block_on(async {
        let tasks: Vec<_> = (0..10_000u64)
            .map(|i| {
                let pool = pool.clone();
                tokio::spawn(async move {
                    let deadline = Instant::now() + Duration::from_micros(i % 2000);
                    pool.sleep_until(deadline).await;
                    Instant::now() >= deadline
                })
            })
            .collect();
        let mut on_time = 0;
        for task in tasks {
            on_time += usize::from(task.await.unwrap());
        }
        on_time
    });
    assert_eq!(late, 10_000, "every sleep ended at or after its deadline");
    assert!(eventually(|| pool.metrics().scheduled_tasks == 0));
}

#[test]
fn works_under_smol() {
    let pool = common::pool(TimerQueue::hierarchical_wheel(), 2);
    smol::block_on(sleeps_then_times_out(pool.clone()));
    let executor = smol::Executor::new();
    let done = smol::block_on(executor.run(async {
        let tasks: Vec<_> = (0..1000u64)
            .map(|i| {
                let pool = pool.clone();
                executor.spawn(async move {
                    pool.sleep(Duration::from_micros(i * 3)).await;
                    1
                })
            })
            .collect();
        let mut done = 0;
        for task in tasks {
            done += task.await;
        }
        done
    }));
    assert_eq!(done, 1000);
}

#[test]
fn works_under_a_minimal_block_on() {
    let pool = common::pool(TimerQueue::hashed_wheel(), 1);
    common::block_on(sleeps_then_times_out(pool));
}

/// Time at its edges, on every queue: a sleep of `Duration::MAX` registers,
/// is not elapsed, resets to `Duration::MAX` again while registered and
/// leaves the timer when dropped; a sleep until an instant before the
/// executor was built (before its clock's origin) ends at its first poll,
/// elapsed, and its deadline reads back no later than that poll.
#[test]
fn sleeps_at_the_edges_of_time() {
    for queue in QUEUES {
        let before_the_pool = Instant::now();
        std::thread::sleep(MS);
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .timer_queue(queue())
            .build()
            .unwrap();
        let waker = noop_waker();
        let mut forever = pool.sleep(Duration::MAX);
        assert_eq!(poll_once(&mut forever, &waker), Poll::Pending, "{queue:?}");
        assert!(!forever.is_elapsed(), "{queue:?}");
        assert!(forever.deadline() > Instant::now() + HOUR, "{queue:?}");
        forever.reset(forever.deadline());
        assert_eq!(poll_once(&mut forever, &waker), Poll::Pending, "{queue:?}");
        assert_eq!(pool.metrics().scheduled_tasks, 1, "{queue:?}: one alarm");
        drop(forever);
        assert_eq!(pool.metrics().scheduled_tasks, 0, "{queue:?}");

        let mut late = pool.sleep_until(before_the_pool);
        assert_eq!(poll_once(&mut late, &waker), Poll::Ready(()), "{queue:?}");
        assert!(late.is_elapsed(), "{queue:?}");
        assert!(late.deadline() <= Instant::now(), "{queue:?}");
        assert_eq!(poll_once(&mut late, &waker), Poll::Ready(()), "{queue:?}");
    }
}

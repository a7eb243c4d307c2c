//! The `Backoff` trigger end to end: retry loops on a pool on a
//! `ManualClock`, with the manual times of their tries asserted exactly
//! (the heap queue) or to the 1 ms tick of the wheels.

mod common;

use std::ops::ControlFlow;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use chronopool::trigger::{Backoff, Ended, Jitter};
use chronopool::{ManualClock, TimerQueue};
use common::{manual_pool, PATIENCE};

const MS: Duration = Duration::from_millis(1);
const HOUR: Duration = Duration::from_secs(3600);

fn queues() -> [TimerQueue; 3] {
    [
        TimerQueue::heap(),
        TimerQueue::hashed_wheel(),
        TimerQueue::hierarchical_wheel(),
    ]
}

/// A call that fails `failures` times, then returns `Ok(tries)`; each try
/// records how much manual time has passed since `start`.
fn flaky(
    clock: &ManualClock,
    failures: usize,
) -> (
    Arc<Mutex<Vec<Duration>>>,
    impl FnMut() -> ControlFlow<usize> + Send + 'static,
) {
    let tries = Arc::new(Mutex::new(Vec::new()));
    let (t, clock, start) = (tries.clone(), clock.clone(), clock.now());
    let call = move || {
        let mut tries = t.lock().unwrap();
        tries.push(clock.now() - start);
        if tries.len() > failures {
            ControlFlow::Break(tries.len())
        } else {
            ControlFlow::Continue(())
        }
    };
    (tries, call)
}

/// `join`, but failing the test instead of hanging it if the task has not
/// ended within `PATIENCE`.
fn join_within_patience<T: Send + 'static>(
    join: impl FnOnce() -> Result<Ended<T>, chronopool::TaskError> + Send + 'static,
) -> Ended<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(join());
    });
    rx.recv_timeout(PATIENCE)
        .expect("the task did not end")
        .expect("the task failed")
}

/// The gaps between successive tries.
fn gaps(tries: &[Duration]) -> Vec<Duration> {
    tries.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn a_flaky_call_is_retried_after_100_200_400_ms_until_it_succeeds() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 2);
    let (tries, call) = flaky(&clock, 3);
    let handle = pool
        .schedule_with_trigger(
            call,
            Backoff::exponential(100 * MS, 2.0, Duration::from_secs(10)),
        )
        .unwrap();
    clock.advance(HOUR);
    let ended = join_within_patience(move || handle.join());
    assert_eq!(ended, Ended::ByClosure(4), "succeeded on the 4th try");
    let tries = tries.lock().unwrap().clone();
    assert_eq!(tries, [0, 100, 300, 700].map(|ms| ms * MS));
    assert_eq!(gaps(&tries), [100, 200, 400].map(|ms| ms * MS));
}

#[test]
fn the_spacing_holds_on_every_timer_queue() {
    for queue in queues() {
        let (pool, clock) = manual_pool(queue, 2);
        let (tries, call) = flaky(&clock, 7);
        let handle = pool
            .schedule_with_trigger(
                call,
                Backoff::exponential(100 * MS, 2.0, Duration::from_secs(1)),
            )
            .unwrap();
        clock.advance(HOUR);
        let ended = join_within_patience(move || handle.join());
        assert_eq!(ended, Ended::ByClosure(8), "{queue:?}");
        let tries = tries.lock().unwrap().clone();
        assert_eq!(tries[0], Duration::ZERO, "{queue:?}: the first try at once");
        // 100, 200, 400, 800, then the cap: 1000, 1000, 1000. A wheel rounds
        // each deadline up to its 1 ms tick; never early.
        let expected = [100, 200, 400, 800, 1000, 1000, 1000].map(|ms| ms * MS);
        for (gap, due) in gaps(&tries).into_iter().zip(expected) {
            assert!(
                gap >= due && gap <= due + MS,
                "{queue:?}: {gap:?} after {due:?}"
            );
        }
    }
}

#[test]
fn a_call_that_never_succeeds_ends_by_the_trigger_after_max_runs() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 2);
    let (tries, call) = flaky(&clock, usize::MAX);
    let handle = pool
        .schedule_with_trigger(
            call,
            Backoff::exponential(100 * MS, 2.0, Duration::from_secs(10)).max_runs(5),
        )
        .unwrap();
    clock.advance(HOUR);
    let ended = join_within_patience(move || handle.join());
    assert_eq!(ended, Ended::ByTrigger);
    assert_eq!(
        *tries.lock().unwrap(),
        [0, 100, 300, 700, 1500].map(|ms| ms * MS)
    );
}

#[test]
fn max_elapsed_ends_the_retries_at_the_time_budget() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 2);
    let (tries, call) = flaky(&clock, usize::MAX);
    let handle = pool
        .schedule_with_trigger(
            call,
            Backoff::exponential(100 * MS, 2.0, Duration::from_secs(10))
                .max_elapsed(Duration::from_secs(1)),
        )
        .unwrap();
    clock.advance(HOUR);
    let ended = join_within_patience(move || handle.join());
    assert_eq!(ended, Ended::ByTrigger);
    // The next try would have been at 1500 ms, past the 1 s budget.
    assert_eq!(*tries.lock().unwrap(), [0, 100, 300, 700].map(|ms| ms * MS));
}

/// Runs `tasks` retry loops of `retries` retries each on `backoff` (cloned)
/// and returns the gaps between the tries of each.
fn jittered_gaps(
    queue: TimerQueue,
    backoff: Backoff,
    tasks: usize,
    retries: u64,
) -> Vec<Vec<Duration>> {
    let (pool, clock) = manual_pool(queue, 2);
    let started: Vec<_> = (0..tasks)
        .map(|_| {
            let (tries, call) = flaky(&clock, usize::MAX);
            let trigger = backoff.clone().max_runs(retries + 1);
            (tries, pool.schedule_with_trigger(call, trigger).unwrap())
        })
        .collect();
    clock.advance(HOUR);
    started
        .into_iter()
        .map(|(tries, handle)| {
            let ended = join_within_patience(move || handle.join());
            assert_eq!(ended, Ended::ByTrigger);
            let tries = tries.lock().unwrap().clone();
            assert_eq!(tries.len() as u64, retries + 1);
            gaps(&tries)
        })
        .collect()
}

#[test]
fn jittered_delays_stay_within_their_bounds_and_differ_between_tasks() {
    let exponential = || Backoff::exponential(100 * MS, 2.0, Duration::from_secs(1));
    // The unjittered delays: 100, 200, 400, 800, 1000, 1000 ms.
    let delays = [100, 200, 400, 800, 1000, 1000].map(|ms| ms * MS);
    for queue in queues() {
        for (jitter, floor) in [(Jitter::Full, 0.0), (Jitter::Partial(0.5), 0.5)] {
            let all = jittered_gaps(queue, exponential().jitter(jitter), 20, 6);
            for gaps in &all {
                for (&gap, &d) in gaps.iter().zip(&delays) {
                    // A wheel may add up to its 1 ms tick.
                    assert!(
                        gap >= d.mul_f64(floor) && gap <= d + MS,
                        "{queue:?}, {jitter:?}: {gap:?} for a delay of {d:?}"
                    );
                }
            }
            // Twenty tasks retrying on clones of one back-off do not retry
            // in step (the point of the jitter).
            let first = &all[0];
            assert!(
                all.iter().any(|gaps| gaps != first),
                "{queue:?}, {jitter:?}: every task drew the same delays"
            );
        }
    }
}

#[test]
fn seeded_jitter_repeats_its_delays() {
    let seeded = Backoff::exponential(100 * MS, 2.0, Duration::from_secs(1))
        .jitter(Jitter::Full)
        .seed(7);
    let once = jittered_gaps(TimerQueue::heap(), seeded.clone(), 1, 6);
    let again = jittered_gaps(TimerQueue::heap(), seeded, 1, 6);
    assert_eq!(once, again);
}

#[test]
fn the_first_try_is_at_once_without_moving_time() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 2);
    let (tries, call) = flaky(&clock, 0);
    let handle = pool
        .schedule_with_trigger(
            call,
            Backoff::exponential(Duration::from_secs(60), 2.0, HOUR).jitter(Jitter::Full),
        )
        .unwrap();
    clock.advance(Duration::ZERO);
    let ended = join_within_patience(move || handle.join());
    assert_eq!(ended, Ended::ByClosure(1));
    assert_eq!(*tries.lock().unwrap(), [Duration::ZERO]);
}

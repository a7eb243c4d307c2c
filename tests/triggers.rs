//! Tasks on triggers, in manual time: how they end (by their closure, by
//! their trigger, by a panic of either), wall-clock one-shots under steps
//! of the wall clock, and `reschedule` between runs and during one. Every
//! test runs on each timer queue and asserts exact manual times.

mod common;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use chronopool::trigger::{Ended, FixedDelay, FixedRate, Next, TriggerContext};
use chronopool::{ManualClock, ScheduledExecutor, SubmitErrorKind, TaskError, TimerQueue};
use common::{manual_pool, PATIENCE};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

fn queues() -> [TimerQueue; 3] {
    [
        TimerQueue::heap(),
        TimerQueue::hashed_wheel(),
        TimerQueue::hierarchical_wheel(),
    ]
}

/// Manual times (since `start`) at which something ran.
type Runs = Arc<Mutex<Vec<Duration>>>;

/// A closure that records the manual time of each run and goes on.
fn recorder(clock: &ManualClock) -> (Runs, impl FnMut() -> ControlFlow<()> + Send + 'static) {
    let runs: Runs = Arc::default();
    let (r, clock, start) = (runs.clone(), clock.clone(), clock.now());
    (runs, move || {
        r.lock().unwrap().push(clock.now() - start);
        ControlFlow::Continue(())
    })
}

/// A one-worker pool on `clock` whose `on_panic` hook counts what it sees.
fn pool_counting_panics(clock: &ManualClock) -> (ScheduledExecutor, Arc<AtomicUsize>) {
    common::counting_panics(
        ScheduledExecutor::builder()
            .worker_threads(1)
            .clock(clock.clone()),
    )
}

/// A value whose destructor panics.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("expected: a destructor panicked");
    }
}

fn minutes(list: &[u64]) -> Vec<Duration> {
    list.iter().map(|m| MINUTE * *m as u32).collect()
}

#[test]
fn a_closure_ends_its_task_with_a_value() {
    for queue in queues() {
        let (pool, clock) = manual_pool(queue, 2);
        let start = clock.now();
        let c = clock.clone();
        let mut runs = 0;
        let task = pool
            .schedule_with_trigger(
                move || {
                    runs += 1;
                    if runs == 5 {
                        ControlFlow::Break(c.now() - start)
                    } else {
                        ControlFlow::Continue(())
                    }
                },
                FixedRate::new(MINUTE).initial_delay(MINUTE),
            )
            .unwrap();
        clock.advance(HOUR);
        assert!(task.is_finished(), "{queue:?}");
        assert_eq!(task.join().unwrap(), Ended::ByClosure(MINUTE * 5));
    }
}

#[test]
fn a_trigger_ends_its_task() {
    for queue in queues() {
        let (pool, clock) = manual_pool(queue, 2);
        let (runs, f) = recorder(&clock);
        let task = pool
            .schedule_with_trigger(f, |ctx: &TriggerContext| {
                let last = ctx.last_due().unwrap_or(ctx.now());
                (ctx.runs() < 3).then(|| Next::At(last + MINUTE * 2))
            })
            .unwrap();
        clock.advance(HOUR);
        assert_eq!(task.join().unwrap(), Ended::ByTrigger, "{queue:?}");
        assert_eq!(*runs.lock().unwrap(), minutes(&[2, 4, 6]));
        assert_eq!(pool.metrics().scheduled_tasks, 0);
    }
}

#[test]
fn a_trigger_sees_the_history_of_the_runs() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let start = clock.now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    // Manual time stands still during a run: it starts and ends when due.
    let _task = pool
        .schedule_with_trigger(
            || ControlFlow::<()>::Continue(()),
            move |ctx: &TriggerContext| {
                s.lock().unwrap().push((
                    ctx.runs(),
                    ctx.last_due().map(|d| d - start),
                    ctx.last_start().map(|d| d - start),
                    ctx.last_end().map(|d| d - start),
                    ctx.now() - start,
                ));
                (ctx.runs() < 2).then(|| Next::At(ctx.now() + MINUTE))
            },
        )
        .unwrap();
    clock.advance(HOUR);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (0, None, None, None, Duration::ZERO),
            (1, Some(MINUTE), Some(MINUTE), Some(MINUTE), MINUTE),
            (
                2,
                Some(MINUTE * 2),
                Some(MINUTE * 2),
                Some(MINUTE * 2),
                MINUTE * 2
            ),
        ]
    );
}

#[test]
fn a_trigger_without_a_first_run_ends_the_task_at_once() {
    let (pool, _clock) = manual_pool(TimerQueue::heap(), 1);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let task = pool
        .schedule_with_trigger(
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                ControlFlow::<()>::Continue(())
            },
            |_: &TriggerContext| None,
        )
        .unwrap();
    assert!(task.is_finished());
    assert_eq!(task.join().unwrap(), Ended::ByTrigger);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    pool.shutdown();
    assert!(pool.await_termination(PATIENCE));
}

#[test]
fn a_panicking_trigger_ends_the_task_as_a_panic() {
    for first in [true, false] {
        let clock = ManualClock::new();
        let (pool, panics) = pool_counting_panics(&clock);
        let task = pool
            .schedule_with_trigger(
                || ControlFlow::<()>::Continue(()),
                move |ctx: &TriggerContext| {
                    if first || ctx.runs() == 1 {
                        panic!("expected: a trigger panicked");
                    }
                    Some(Next::At(ctx.now() + MINUTE))
                },
            )
            .unwrap();
        clock.advance(HOUR);
        assert!(task.join().unwrap_err().is_panic());
        assert_eq!(panics.load(Ordering::SeqCst), 1);
        assert!(
            pool.submit(|| 1).unwrap().join().is_ok(),
            "the pool survives"
        );
    }
}

#[test]
fn the_scheduled_task_limit_counts_triggered_tasks() {
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .clock(clock.clone())
        .max_scheduled_tasks(1)
        .build()
        .unwrap();
    // The first run waits in the timer. (A first run due at once would
    // leave the timer for a worker, and a periodic task does not count
    // during its run: the second could then be admitted.)
    let later = || FixedDelay::new(MINUTE).initial_delay(MINUTE);
    let first = pool
        .schedule_with_trigger(|| ControlFlow::<()>::Continue(()), later())
        .unwrap();
    let refused = pool
        .schedule_with_trigger(|| ControlFlow::<u8>::Break(7), later())
        .unwrap_err();
    assert_eq!(refused.kind(), SubmitErrorKind::TooManyScheduled);
    assert_eq!(refused.into_inner()(), ControlFlow::Break(7));
    assert!(first.cancel());
    assert!(pool
        .schedule_with_trigger(|| ControlFlow::<()>::Break(()), FixedDelay::new(MINUTE))
        .is_ok());
}

#[test]
fn a_wall_clock_one_shot_follows_steps_of_the_wall_clock() {
    for queue in queues() {
        // Stepped forward past its time: it runs at once.
        let (pool, clock) = manual_pool(queue, 2);
        let start = clock.now();
        let noon = clock.system_time() + HOUR * 12;
        let c = clock.clone();
        let lunch = pool
            .schedule_at_system_time(move || (c.now() - start, c.system_time()), noon)
            .unwrap();
        clock.advance(HOUR);
        assert!(!lunch.is_finished());
        clock.set_system_time(noon + MINUTE);
        assert!(
            lunch.is_finished(),
            "{queue:?}: runs at once after the step"
        );
        assert_eq!(lunch.join().unwrap(), (HOUR, noon + MINUTE));

        // Stepped back: it waits for the new wall time, not the old
        // monotonic deadline.
        let (pool, clock) = manual_pool(queue, 2);
        let start = clock.now();
        let noon = clock.system_time() + HOUR * 12;
        let c = clock.clone();
        let lunch = pool
            .schedule_at_system_time(move || c.now() - start, noon)
            .unwrap();
        clock.set_system_time(clock.system_time() - HOUR * 2);
        clock.advance(HOUR * 12);
        assert!(!lunch.is_finished(), "{queue:?}: ran by the old deadline");
        clock.advance(HOUR * 2);
        assert!(lunch.is_finished(), "{queue:?}");
        assert_eq!(lunch.join().unwrap(), HOUR * 14);
    }
}

#[test]
fn a_wall_clock_one_shot_in_the_past_runs_at_once_and_is_kept_at_shutdown() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let past = pool
        .schedule_at_system_time(|| 1, clock.system_time() - HOUR)
        .unwrap();
    clock.advance(Duration::ZERO);
    assert_eq!(past.join().unwrap(), 1);
    let later = pool
        .schedule_at_system_time(|| 2, clock.system_time() + HOUR)
        .unwrap();
    pool.shutdown();
    clock.advance(HOUR);
    assert_eq!(later.join().unwrap(), 2);
    assert!(pool.await_termination(PATIENCE));
}

#[test]
fn reschedule_between_runs_takes_effect_from_the_next_run() {
    for queue in queues() {
        let (pool, clock) = manual_pool(queue, 2);
        let (runs, f) = recorder(&clock);
        let task = pool.schedule_with_trigger(f, FixedRate::new(HOUR)).unwrap();
        clock.advance(Duration::ZERO);
        assert_eq!(*runs.lock().unwrap(), minutes(&[0]));
        assert!(task.reschedule(FixedRate::new(MINUTE * 10)));
        assert_eq!(task.delay(), MINUTE * 10, "{queue:?}");
        clock.advance(HOUR);
        // Every 10 minutes from the run at 0; nothing at the old hour's
        // deadline but the run that falls there anyway.
        assert_eq!(*runs.lock().unwrap(), minutes(&[0, 10, 20, 30, 40, 50, 60]));
        assert!(task.cancel());
        assert!(!task.reschedule(FixedRate::new(MINUTE)));
        pool.shutdown();
        assert!(
            pool.await_termination(PATIENCE),
            "{queue:?}: stale entries hold nothing up"
        );
    }
}

#[test]
fn a_reschedule_during_a_run_is_taken_by_that_run() {
    for queue in queues() {
        let (pool, clock) = manual_pool(queue, 2);
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        let (runs, mut record) = recorder(&clock);
        let task = pool
            .schedule_with_trigger(
                move || {
                    let r = record();
                    // Only the first run waits: the receiver is gone after.
                    if entered_tx.send(()).is_ok() {
                        release_rx.lock().unwrap().recv().unwrap();
                    }
                    r
                },
                FixedRate::new(HOUR).initial_delay(MINUTE),
            )
            .unwrap();
        let mover = {
            let clock = clock.clone();
            std::thread::spawn(move || clock.advance(MINUTE))
        };
        entered.recv_timeout(PATIENCE).expect("the run started");
        assert!(task.reschedule(FixedDelay::new(MINUTE * 5)));
        drop(entered);
        release.send(()).unwrap();
        mover.join().unwrap();
        assert_eq!(
            task.delay(),
            MINUTE * 5,
            "{queue:?}: the run asked the new trigger"
        );
        clock.advance(MINUTE * 11);
        assert_eq!(*runs.lock().unwrap(), minutes(&[1, 6, 11]), "{queue:?}");
    }
}

#[test]
fn a_periodic_handle_can_be_rescheduled_and_ended_by_a_trigger() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let task = pool
        .schedule_at_fixed_rate(
            move || {
                c.fetch_add(1, Ordering::SeqCst);
            },
            MINUTE,
            MINUTE,
        )
        .unwrap();
    clock.advance(MINUTE * 3);
    assert_eq!(count.load(Ordering::SeqCst), 3);
    let stop_after = |ctx: &TriggerContext| (ctx.runs() < 5).then(|| Next::At(ctx.now() + MINUTE));
    assert!(task.reschedule(stop_after));
    clock.advance(HOUR);
    assert_eq!(count.load(Ordering::SeqCst), 5);
    assert!(task.join().is_ok());
}

#[test]
fn a_cancelled_triggered_task_reports_it() {
    let (pool, clock) = manual_pool(TimerQueue::hashed_wheel(), 1);
    let (runs, f) = recorder(&clock);
    let task = pool
        .schedule_with_trigger(f, FixedDelay::new(MINUTE))
        .unwrap();
    clock.advance(MINUTE * 2);
    assert!(task.cancel());
    clock.advance(HOUR);
    assert_eq!(runs.lock().unwrap().len(), 3);
    assert!(matches!(task.join(), Err(TaskError::Cancelled)));
}

/// A trigger is user code: it may shut the pool down from `next`, and its
/// destructor may panic when the task ends; neither hangs nor unwinds.
#[test]
fn hostile_triggers_neither_hang_nor_unwind() {
    let clock = ManualClock::new();
    let (pool, panics) = pool_counting_panics(&clock);

    // Its destructor panics when a cancel drops it.
    let guard = PanicOnDrop;
    let task = pool
        .schedule_with_trigger(
            || ControlFlow::<()>::Continue(()),
            move |ctx: &TriggerContext| {
                let _keep = &guard;
                Some(Next::At(ctx.now() + MINUTE))
            },
        )
        .unwrap();
    clock.advance(MINUTE * 2);
    assert!(task.cancel());
    assert_eq!(panics.load(Ordering::SeqCst), 1);

    // `next` shuts the pool down, when it is asked for the first run and
    // after a run: nothing waits for itself.
    let weak = pool.downgrade();
    let stopper = pool
        .schedule_with_trigger(
            || ControlFlow::<()>::Continue(()),
            move |ctx: &TriggerContext| {
                if let Some(pool) = weak.upgrade() {
                    drop(pool.shutdown_now());
                }
                Some(Next::At(ctx.now() + MINUTE))
            },
        )
        .unwrap_err();
    assert_eq!(stopper.kind(), SubmitErrorKind::Shutdown);
    assert!(pool.await_termination(PATIENCE));
}

/// `shutdown_now` hands back a wall-time task not yet due; running it by
/// hand runs its body (it is not placed again on the stopped pool).
#[test]
fn a_wall_time_task_handed_back_by_shutdown_now_runs_by_hand() {
    let (pool, clock) = manual_pool(TimerQueue::heap(), 1);
    let later = pool
        .schedule_at_system_time(|| "ran", clock.system_time() + HOUR)
        .unwrap();
    let pending = pool.shutdown_now();
    assert_eq!(pending.len(), 1);
    for task in pending {
        task.run();
    }
    assert_eq!(later.join().unwrap(), "ran");
}

/// The timer's watch of the wall clock holds its tasks weakly: the output
/// of a finished wall-time task whose handle was dropped unjoined is
/// dropped with the handle (here, a panic of its destructor reaches
/// `on_panic` at once), and the timer goes on.
#[test]
fn a_finished_wall_time_task_is_not_kept_by_the_timer() {
    let clock = ManualClock::new();
    let (pool, panics) = pool_counting_panics(&clock);
    let bomb = pool
        .schedule_at_system_time(|| PanicOnDrop, clock.system_time() + MINUTE)
        .unwrap();
    clock.advance(MINUTE);
    assert!(bomb.is_finished());
    drop(bomb);
    assert_eq!(panics.load(Ordering::SeqCst), 1, "dropped with the handle");
    // The timer still hands over, through a step of the wall clock too.
    let after = pool.schedule(|| 7, MINUTE).unwrap();
    clock.set_system_time(clock.system_time() + HOUR);
    clock.advance(MINUTE);
    assert_eq!(after.join().unwrap(), 7);
    pool.shutdown();
    assert!(pool.await_termination(PATIENCE));
}

/// A task ended by its closure with a value whose destructor panics, its
/// handle dropped unjoined: the panic goes to `on_panic`, never out of the
/// handle's `drop` (the handle's second reference to the task, its
/// reschedule side, was dropped last, outside the handle's catch).
#[test]
fn an_unjoined_output_whose_destructor_panics_goes_to_on_panic() {
    let clock = ManualClock::new();
    let (pool, panics) = pool_counting_panics(&clock);
    let task = pool
        .schedule_with_trigger(|| ControlFlow::Break(PanicOnDrop), FixedRate::new(MINUTE))
        .unwrap();
    clock.advance(Duration::ZERO);
    assert!(task.is_finished());
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(task)));
    assert!(dropped.is_ok(), "the output's panic came out of drop");
    assert_eq!(panics.load(Ordering::SeqCst), 1);
}

/// Leaves a task that ended with `output()` held by a placement a
/// reschedule left behind (as far as the queue keeps it: a wheel may let
/// it go in its turn, and the handle's drop then drops the output): 1,000
/// other timers first, so that one dead entry does not reach the sweep's
/// count; the task due in an hour, rescheduled to run now, run, its handle
/// dropped unjoined. Returns the other timers' handles.
fn finished_behind_a_stale_placement<T: Send + 'static>(
    pool: &ScheduledExecutor,
    clock: &ManualClock,
    mut output: impl FnMut() -> T + Send + 'static,
) -> Vec<chronopool::ScheduledHandle<()>> {
    let others = (0..1_000)
        .map(|_| pool.schedule(|| (), HOUR * 24).unwrap())
        .collect();
    let task = pool
        .schedule_with_trigger(
            move || ControlFlow::Break(output()),
            FixedRate::new(HOUR).initial_delay(HOUR),
        )
        .unwrap();
    assert!(task.reschedule(FixedRate::new(HOUR)));
    clock.advance(Duration::ZERO);
    assert!(task.is_finished());
    drop(task);
    others
}

/// A placement left behind by a reschedule is the last reference to a
/// task that ended with an output nobody joined: the sweep that removes it
/// (here `metrics()`'s) drops the output after the timer's lock, and its
/// destructor's panic goes to `on_panic`, never out of the sweep's caller
/// (on the hashed wheel it came out of `metrics()`).
#[test]
fn a_stale_placement_swept_drops_its_task_s_output_outside_the_lock() {
    for queue in queues() {
        let clock = ManualClock::new();
        let (pool, panics) = common::counting_panics(
            ScheduledExecutor::builder()
                .worker_threads(1)
                .timer_queue(queue)
                .clock(clock.clone()),
        );
        let others = finished_behind_a_stale_placement(&pool, &clock, || PanicOnDrop);
        let swept = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.metrics()));
        assert!(
            swept.is_ok(),
            "{queue:?}: the output's panic came out of metrics()"
        );
        assert_eq!(panics.load(Ordering::SeqCst), 1, "{queue:?}");
        drop(others);
    }
}

/// As above, but the stale placement leaves the timer in `shutdown`'s
/// purge, which drops it after the timer's lock: the panic is reported,
/// and the pool terminates. (Under the lock, the panic would unwind the
/// timer thread; this setup did not get the purge there before the fix.)
#[test]
fn a_stale_placement_purged_at_shutdown_drops_its_task_s_output_outside_the_lock() {
    for queue in queues() {
        let clock = ManualClock::new();
        let (pool, panics) = common::counting_panics(
            ScheduledExecutor::builder()
                .worker_threads(1)
                .timer_queue(queue)
                .clock(clock.clone())
                .keep_delayed_tasks_on_shutdown(false),
        );
        let others = finished_behind_a_stale_placement(&pool, &clock, || PanicOnDrop);
        drop(others);
        pool.shutdown();
        assert!(
            pool.await_termination(PATIENCE),
            "{queue:?}: never terminated"
        );
        assert_eq!(panics.load(Ordering::SeqCst), 1, "{queue:?}");
    }
}

/// What a task ended with: shuts its pool down when dropped.
struct ShutsDown(ScheduledExecutor);

impl Drop for ShutsDown {
    fn drop(&mut self) {
        let _ = self.0.shutdown_now();
    }
}

/// A schedule at the `max_scheduled_tasks` limit sweeps a stale placement
/// out, the last reference to an output whose destructor shuts the pool
/// down: the destructor runs after the schedule's admission, so
/// `shutdown_now` does not wait for the very call that runs it. (This
/// setup did not reach that wait before the fix either.)
#[test]
fn a_sweep_at_the_limit_drops_what_it_removed_after_the_admission() {
    for queue in queues() {
        let clock = ManualClock::new();
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .timer_queue(queue)
            .clock(clock.clone())
            .max_scheduled_tasks(1_001)
            .build()
            .unwrap();
        let p = pool.clone();
        let _others =
            finished_behind_a_stale_placement(&pool, &clock, move || ShutsDown(p.clone()));
        let (done_tx, done) = mpsc::channel();
        let p = pool.clone();
        std::thread::spawn(move || {
            let _ = p.schedule(|| (), HOUR);
            let _ = done_tx.send(());
        });
        if done.recv_timeout(PATIENCE).is_err() {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("{queue:?}: the schedule at the limit never returned\n").as_bytes(),
            );
            std::process::exit(101);
        }
    }
}

//! Task ids and names: what the task, its handle, its `Debug`, the
//! `on_panic` hook, its panic payload and `shutdown_now`'s pending tasks
//! see of them, for every way of submitting a task.

mod common;

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chronopool::trigger::FixedDelay;
use chronopool::{ScheduledExecutor, TaskError, TaskId};
use common::{quiet_expected_panics, Gate, PATIENCE};

/// What the running task saw of itself.
type SeenInside = (Option<TaskId>, Option<String>);

fn inside() -> SeenInside {
    (
        chronopool::task_id(),
        chronopool::task_name().map(|n| n.to_string()),
    )
}

/// What the `on_panic` hook saw: the id, the name and the message.
type SeenByHook = Arc<Mutex<Vec<(Option<TaskId>, Option<String>, Option<String>)>>>;

fn pool_with_hook(threads: usize) -> (ScheduledExecutor, SeenByHook) {
    quiet_expected_panics();
    let seen: SeenByHook = Arc::default();
    let hook_seen = seen.clone();
    let pool = ScheduledExecutor::builder()
        .worker_threads(threads)
        .on_panic(move |panic| {
            hook_seen.lock().unwrap().push((
                panic.task_id(),
                panic.task_name().map(str::to_owned),
                panic.message().map(str::to_owned),
            ));
        })
        .build()
        .unwrap();
    (pool, seen)
}

#[test]
fn every_task_has_an_id_its_handle_its_run_and_its_debug_agree_on() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    let handles: Vec<_> = (0..100).map(|_| pool.submit(inside).unwrap()).collect();
    let ids: Vec<TaskId> = handles.iter().map(|h| h.id()).collect();
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        100,
        "ids are unique"
    );
    for (handle, id) in handles.into_iter().zip(ids) {
        assert!(format!("{handle:?}").contains(&format!("id: {id:?}")));
        assert_eq!(handle.join().unwrap(), (Some(id), None));
    }
    assert_eq!(inside(), (None, None), "the test's own thread runs no task");
}

#[test]
fn a_name_reaches_the_task_and_its_handle_through_every_method() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    let named = |name: &str| pool.task().name(name);
    let expect = |seen: SeenInside, id: TaskId, name: &str| {
        assert_eq!(seen, (Some(id), Some(name.to_owned())), "{name}");
    };

    let h = named("submit").submit(inside).unwrap();
    let (id, name) = (h.id(), h.name().map(str::to_owned));
    assert_eq!(name.as_deref(), Some("submit"));
    expect(h.join().unwrap(), id, "submit");

    let h = named("timeout")
        .submit_with_timeout(inside, PATIENCE)
        .unwrap();
    let id = h.id();
    expect(h.join().unwrap(), id, "timeout");

    let h = named("timeout-or")
        .submit_with_timeout_or(inside, PATIENCE, || (None, None))
        .unwrap();
    let id = h.id();
    expect(h.join().unwrap(), id, "timeout-or");

    let h = named("schedule")
        .schedule(inside, Duration::from_millis(1))
        .unwrap();
    assert_eq!(h.name(), Some("schedule"));
    let id = h.id();
    expect(h.join().unwrap(), id, "schedule");

    let at = std::time::Instant::now() + Duration::from_millis(1);
    let h = named("schedule-at").schedule_at(inside, at).unwrap();
    let id = h.id();
    expect(h.join().unwrap(), id, "schedule-at");

    let h = named("wall")
        .schedule_at_system_time(inside, SystemTime::now())
        .unwrap();
    let id = h.id();
    expect(h.join().unwrap(), id, "wall");

    // A recurring task keeps its id and name from run to run.
    let ms = Duration::from_millis(1);
    let three_runs = |rx: mpsc::Receiver<SeenInside>, id: TaskId, name: &str| {
        for _ in 0..3 {
            expect(rx.recv_timeout(PATIENCE).unwrap(), id, name);
        }
    };
    let (tx, rx) = mpsc::channel();
    let rate = named("rate")
        .schedule_at_fixed_rate(move || drop(tx.send(inside())), ms, ms)
        .unwrap();
    assert_eq!(rate.name(), Some("rate"));
    three_runs(rx, rate.id(), "rate");
    rate.cancel();

    let (tx, rx) = mpsc::channel();
    let delay = named("delay")
        .schedule_with_fixed_delay(move || drop(tx.send(inside())), ms, ms)
        .unwrap();
    assert!(format!("{delay:?}").contains("name: Some(\"delay\")"));
    three_runs(rx, delay.id(), "delay");
    delay.cancel();

    let (tx, rx) = mpsc::channel();
    let mut runs = 0;
    let trigger = named("trigger")
        .schedule_with_trigger(
            move || {
                let _ = tx.send(inside());
                runs += 1;
                if runs == 3 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
            FixedDelay::new(ms),
        )
        .unwrap();
    assert_eq!(trigger.name(), Some("trigger"));
    three_runs(rx, trigger.id(), "trigger");
    assert!(trigger.join().is_ok());

    // A named `execute` gets a cell, so an id and the name.
    let (tx, rx) = mpsc::channel();
    named("execute")
        .execute(move || {
            let _ = tx.send(inside());
        })
        .unwrap();
    let (id, name) = rx.recv_timeout(PATIENCE).unwrap();
    assert!(id.is_some());
    assert_eq!(name.as_deref(), Some("execute"));

    // An unnamed one has neither: it is a bare closure in a queue.
    let (tx, rx) = mpsc::channel();
    pool.task()
        .execute(move || {
            let _ = tx.send(inside());
        })
        .unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), (None, None));
}

#[test]
fn the_panic_hook_and_the_handle_see_the_name_of_the_task_that_panicked() {
    let (pool, seen) = pool_with_hook(1);
    let h = pool
        .task()
        .name("nightly-report")
        .submit(|| -> u8 { panic!("expected: no data") })
        .unwrap();
    let id = h.id();
    match h.join() {
        Err(TaskError::Panicked(payload)) => {
            assert_eq!(payload.task_id(), Some(id));
            assert_eq!(payload.task_name(), Some("nightly-report"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let periodic = pool
        .task()
        .name("heartbeat")
        .schedule_at_fixed_rate(
            || panic!("expected: heart stopped"),
            Duration::ZERO,
            Duration::from_millis(1),
        )
        .unwrap();
    let periodic_id = periodic.id();
    assert!(periodic.join().unwrap_err().is_panic());
    let (tx, rx) = mpsc::channel::<()>();
    pool.task()
        .name("fire-and-forget")
        .execute(move || {
            let _keep = tx;
            panic!("expected: lost")
        })
        .unwrap();
    let _ = rx.recv_timeout(PATIENCE); // the sender drops when it panicked
    pool.execute(|| panic!("expected: anonymous")).unwrap();
    pool.shutdown();
    assert!(pool.await_termination(PATIENCE));

    let seen = seen.lock().unwrap().clone();
    let of = |message: &str| {
        seen.iter()
            .find(|(_, _, m)| m.as_deref() == Some(message))
            .cloned()
            .unwrap_or_else(|| panic!("the hook did not see {message:?} in {seen:?}"))
    };
    assert_eq!(
        of("expected: no data"),
        (
            Some(id),
            Some("nightly-report".into()),
            Some("expected: no data".into())
        )
    );
    let (heart_id, heart_name, _) = of("expected: heart stopped");
    assert_eq!(
        (heart_id, heart_name.as_deref()),
        (Some(periodic_id), Some("heartbeat"))
    );
    let (lost_id, lost_name, _) = of("expected: lost");
    assert!(lost_id.is_some());
    assert_eq!(lost_name.as_deref(), Some("fire-and-forget"));
    let (anon_id, anon_name, _) = of("expected: anonymous");
    assert_eq!((anon_id, anon_name), (None, None));
}

/// A closure whose destructor panics: a cancel drops it on the
/// cancelling thread, inside another task; the hook still names the
/// cancelled task, and the canceller is itself again after.
#[test]
fn a_panic_of_a_dropped_closure_is_the_cancelled_tasks_not_the_cancellers() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("expected: dropped");
        }
    }
    let (pool, seen) = pool_with_hook(1);
    let capture = PanicsOnDrop;
    let victim = pool
        .task()
        .name("victim")
        .schedule(
            move || {
                let _keep = &capture;
            },
            Duration::from_secs(3600),
        )
        .unwrap();
    let victim_id = victim.id();
    let cancel = victim.cancel_handle();
    assert_eq!(cancel.id(), victim_id);
    assert_eq!(cancel.name(), Some("victim"));
    let canceller = pool
        .task()
        .name("canceller")
        .submit(move || {
            assert!(cancel.cancel());
            inside()
        })
        .unwrap();
    let canceller_id = canceller.id();
    assert_eq!(
        canceller.join().unwrap(),
        (Some(canceller_id), Some("canceller".into()))
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            Some(victim_id),
            Some("victim".into()),
            Some("expected: dropped".into())
        )]
    );
}

#[test]
fn shutdown_now_hands_back_tasks_with_their_ids_and_names() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let gate = Gate::new();
    let (started_tx, started) = mpsc::channel();
    let waiter = gate.waiter();
    pool.execute(move || {
        started_tx.send(()).unwrap();
        waiter.wait();
    })
    .unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    let named = pool.task().name("queued").submit(|| 1).unwrap();
    let unnamed = pool.submit(|| 2).unwrap();
    pool.execute(|| ()).unwrap();
    let pending = pool.shutdown_now();
    gate.open();
    let seen: Vec<_> = pending
        .iter()
        .map(|p| (p.id(), p.name().map(str::to_owned)))
        .collect();
    assert!(
        seen.contains(&(Some(named.id()), Some("queued".into()))),
        "{seen:?}"
    );
    assert!(seen.contains(&(Some(unnamed.id()), None)), "{seen:?}");
    assert!(
        seen.contains(&(None, None)),
        "the `execute` closure: {seen:?}"
    );
    assert!(format!("{pending:?}").contains("name: Some(\"queued\")"));
    // Run by hand, they complete their handles.
    for task in pending {
        task.run();
    }
    assert_eq!(named.join().unwrap(), 1);
    assert_eq!(unnamed.join().unwrap(), 2);
}

/// A join on a worker runs other queued tasks while it waits: each sees
/// its own id, and the joining task is itself again afterwards.
#[test]
fn a_task_run_inside_a_join_restores_the_joining_task() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let outer = pool
        .task()
        .name("outer")
        .submit(|| {
            let inner = chronopool::submit(inside).unwrap();
            let inner_id = inner.id();
            let inner_seen = inner.join().unwrap();
            (inner_id, inner_seen, inside())
        })
        .unwrap();
    let outer_id = outer.id();
    let (inner_id, inner_seen, after) = outer.join().unwrap();
    assert_eq!(inner_seen, (Some(inner_id), None));
    assert_eq!(after, (Some(outer_id), Some("outer".into())));
}

/// A handle awaited as a `Future` keeps its id; used again, it panics.
#[test]
fn a_handle_keeps_its_id_after_returning_its_result_as_a_future() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let mut handle = pool.task().name("awaited").submit(|| 7).unwrap();
    let id = handle.id();
    assert_eq!(common::block_on(&mut handle).unwrap(), 7);
    assert_eq!((handle.id(), handle.name()), (id, Some("awaited")));
    assert!(handle.is_finished());
    assert!(format!("{handle:?}").contains(&format!("{id:?}")));
    quiet_expected_panics();
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.join()));
    assert!(again.is_err(), "the result was already returned");
}

//! Time at its edges, on every timer queue: `advance(Duration::MAX)`, wall
//! times before 1970 and after 2554, an `advance` from a waker it rang, a
//! clock that outlives a pool on it, a wall-clock step racing wall-time
//! schedules, and cancels in `metrics()`. Each of these hung, ran early or
//! repeatedly, or miscounted once; a hang fails the test after a real-time
//! bound instead of hanging the suite.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::thread;
use std::time::{Duration, SystemTime};

use chronopool::{ManualClock, MissedRuns, ScheduledExecutor};
use common::{pool_on_clock, queues};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);
const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Runs `f` on a thread of its own and fails if it has not returned within
/// `limit` of real time (it hung: the thread is left behind, the test fails).
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(_) => panic!("{what} did not return within {limit:?}"),
    }
}

fn counter() -> (Arc<AtomicUsize>, impl FnMut() + Send + 'static) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    (runs, move || {
        r.fetch_add(1, Ordering::SeqCst);
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` (years 1 to 9999) as a `SystemTime`, by the
/// days-from-civil arithmetic of the proleptic Gregorian calendar (no time
/// zone library: the tests without the `cron` feature use it too).
fn at(s: &str) -> SystemTime {
    let field = |range: std::ops::Range<usize>| -> i64 { s[range].parse().expect(s) };
    let (y, m, d) = (field(0..4), field(5..7), field(8..10));
    let (hh, mm, ss) = (field(11..13), field(14..16), field(17..19));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

#[test]
fn the_civil_dates_of_these_tests_are_right() {
    let secs = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(secs(at("1970-01-01T00:00:00Z")), 0);
    assert_eq!(secs(at("2026-01-01T00:00:00Z")), 1_767_225_600);
    assert_eq!(secs(at("2000-03-01T12:30:15Z")), 951_913_815);
    let before = SystemTime::UNIX_EPOCH
        .duration_since(at("1950-06-01T00:00:00Z"))
        .unwrap();
    assert_eq!(before.as_secs(), 7_154 * 86_400);
}

// ---------------------------------------------------------------------------
// 1. advance(Duration::MAX) and jump(Duration::MAX) return: a deadline past
//    the clock's last instant is never.

#[test]
fn advance_by_max_returns_with_periodic_tasks_beyond_the_clock() {
    for queue in queues() {
        let clock = ManualClock::new();
        let pool = pool_on_clock(&clock, queue);
        let (rate_runs, f) = counter();
        let rate = pool
            .schedule_at_fixed_rate(f, 300 * YEAR, 300 * YEAR)
            .unwrap();
        let (delay_runs, f) = counter();
        let delay = pool
            .schedule_with_fixed_delay(f, 400 * YEAR, 400 * YEAR)
            .unwrap();
        let c = clock.clone();
        within(Duration::from_secs(30), "advance(MAX)", move || {
            c.advance(Duration::MAX)
        });
        // The clock holds about 584 years: one run of each, then never.
        assert_eq!(rate_runs.load(Ordering::SeqCst), 1, "{queue:?}");
        assert_eq!(delay_runs.load(Ordering::SeqCst), 1, "{queue:?}");
        assert!(!rate.is_finished() && !delay.is_finished(), "{queue:?}");
        let c = clock.clone();
        within(Duration::from_secs(10), "advance(MAX) again", move || {
            c.advance(Duration::MAX);
            c.jump(Duration::MAX);
            c.advance(HOUR);
        });
        assert_eq!(rate_runs.load(Ordering::SeqCst), 1, "{queue:?}");
        assert_eq!(delay_runs.load(Ordering::SeqCst), 1, "{queue:?}");
        assert!(rate.cancel() && delay.cancel());
    }
}

#[test]
fn jump_by_max_runs_a_skipping_hourly_task_once_then_never() {
    for queue in queues() {
        let clock = ManualClock::new();
        let pool = pool_on_clock(&clock, queue);
        let (runs, f) = counter();
        let hourly = pool
            .schedule_at_fixed_rate_with(f, HOUR, HOUR, MissedRuns::Skip)
            .unwrap();
        let c = clock.clone();
        within(Duration::from_secs(30), "jump(MAX)", move || {
            c.jump(Duration::MAX);
            c.advance(Duration::MAX);
        });
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{queue:?}: once, late");
        assert!(!hourly.is_finished());
        assert!(hourly.cancel());
    }
}

#[cfg(feature = "cron")]
#[test]
fn advance_by_max_runs_a_yearly_cron_once_a_year_and_returns() {
    use chronopool::trigger::Cron;
    use std::ops::ControlFlow;
    for queue in queues() {
        let clock = ManualClock::new();
        let pool = pool_on_clock(&clock, queue);
        let walls = Arc::new(Mutex::new(Vec::new()));
        let (w, c) = (walls.clone(), clock.clone());
        let yearly = pool
            .schedule_with_trigger(
                move || {
                    w.lock().unwrap().push(c.system_time());
                    ControlFlow::<()>::Continue(())
                },
                Cron::parse("0 0 1 1 *").unwrap(),
            )
            .unwrap();
        let c = clock.clone();
        within(Duration::from_secs(60), "advance(MAX)", move || {
            c.advance(Duration::MAX)
        });
        let walls = walls.lock().unwrap().clone();
        // From 2026-01-01 (the start, not after it) to about 2610: one run
        // each 1 January, each at midnight exactly.
        let end = clock.system_time();
        let years = walls.len();
        assert!((583..=585).contains(&years), "{queue:?}: {years} runs");
        for (i, wall) in walls.iter().enumerate() {
            let want = at(&format!("{}-01-01T00:00:00Z", 2027 + i));
            assert_eq!(*wall, want, "{queue:?}: run {i}");
        }
        assert!(walls.last().copied().unwrap() <= end);
        assert!(!yearly.is_finished());
        assert!(yearly.cancel());
    }
}

// ---------------------------------------------------------------------------
// 2. Wall times outside 1970-2554 are honoured, not clamped.

#[test]
fn a_one_shot_in_2569_runs_in_2569() {
    for queue in queues() {
        let clock = ManualClock::starting_at(at("2568-12-31T00:00:00Z"));
        let pool = pool_on_clock(&clock, queue);
        let due = at("2569-01-01T00:00:00Z");
        let c = clock.clone();
        let task = pool
            .schedule_at_system_time(move || c.system_time(), due)
            .unwrap();
        // A step of the wall clock places it again, from its wall time.
        clock.set_system_time(clock.system_time() + Duration::from_secs(60));
        clock.advance(DAY - Duration::from_secs(61));
        assert!(!task.is_finished(), "{queue:?}: ran early");
        clock.advance(Duration::from_secs(1));
        assert_eq!(task.join().unwrap(), due, "{queue:?}");
    }
}

#[test]
fn a_one_shot_in_1950_runs_an_hour_later() {
    for queue in queues() {
        let clock = ManualClock::starting_at(at("1950-06-01T00:00:00Z"));
        let pool = pool_on_clock(&clock, queue);
        let due = at("1950-06-01T01:00:00Z");
        let c = clock.clone();
        let task = pool
            .schedule_at_system_time(move || c.system_time(), due)
            .unwrap();
        clock.set_system_time(clock.system_time() + Duration::from_secs(60));
        clock.advance(HOUR - Duration::from_secs(60) - Duration::from_nanos(1));
        assert!(!task.is_finished(), "{queue:?}: ran early");
        clock.advance(Duration::from_nanos(1));
        assert_eq!(task.join().unwrap(), due, "{queue:?}");
    }
}

#[test]
fn a_one_shot_at_year_one_runs_at_once_and_one_in_9999_never_early() {
    for queue in queues() {
        let clock = ManualClock::starting_at(at("9999-12-30T00:00:00Z"));
        let pool = pool_on_clock(&clock, queue);
        let past = pool
            .schedule_at_system_time(|| 1, at("0001-01-01T00:00:00Z"))
            .unwrap();
        let due = at("9999-12-30T12:00:00Z");
        let c = clock.clone();
        let late = pool
            .schedule_at_system_time(move || c.system_time(), due)
            .unwrap();
        clock.set_system_time(clock.system_time() + Duration::from_secs(60));
        assert_eq!(past.join().unwrap(), 1, "{queue:?}");
        clock.advance(12 * HOUR - Duration::from_secs(61));
        assert!(!late.is_finished(), "{queue:?}: ran early");
        clock.advance(Duration::from_secs(1));
        assert_eq!(late.join().unwrap(), due, "{queue:?}");
    }
}

#[cfg(feature = "cron")]
#[test]
fn crons_run_on_time_in_1950_and_in_2599() {
    use chronopool::trigger::Cron;
    use std::ops::ControlFlow;
    for queue in queues() {
        for (start, expr, step_by, runs_in_a_day) in [
            ("1950-06-01T00:00:00Z", "0 * * * *", None, 24),
            (
                "2599-06-01T00:00:30Z",
                "0 0 * * *",
                Some(Duration::from_secs(60)),
                1,
            ),
        ] {
            let clock = ManualClock::starting_at(at(start));
            let pool = pool_on_clock(&clock, queue);
            let walls = Arc::new(Mutex::new(Vec::new()));
            let (w, c) = (walls.clone(), clock.clone());
            let cron = pool
                .schedule_with_trigger(
                    move || {
                        w.lock().unwrap().push(c.system_time());
                        ControlFlow::<()>::Continue(())
                    },
                    Cron::parse(expr).unwrap(),
                )
                .unwrap();
            if let Some(step) = step_by {
                // Small steps of the wall clock run nothing.
                for _ in 0..10 {
                    clock.set_system_time(clock.system_time() + step);
                }
                assert!(walls.lock().unwrap().is_empty(), "{queue:?} {start}");
            }
            clock.advance(DAY);
            let walls = walls.lock().unwrap().clone();
            assert_eq!(walls.len(), runs_in_a_day, "{queue:?} {start}: {walls:?}");
            let parsed = Cron::parse(expr).unwrap();
            let mut want = at(start);
            for wall in &walls {
                want = parsed.next_after(want).unwrap();
                assert_eq!(*wall, want, "{queue:?} {start}");
            }
            assert!(cron.cancel());
        }
    }
}

// ---------------------------------------------------------------------------
// 3. advance from a waker that advance itself rang: a panic (reported as the
//    waker's), never a hang.

struct AdvancingWaker {
    clock: ManualClock,
    woken: AtomicUsize,
}

impl Wake for AdvancingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
        self.clock.advance(HOUR);
    }
}

#[test]
fn advance_from_a_waker_it_rang_panics_instead_of_hanging() {
    for queue in queues() {
        let clock = ManualClock::new();
        let panics = Arc::new(Mutex::new(Vec::new()));
        let p = panics.clone();
        let pool = ScheduledExecutor::builder()
            .worker_threads(1)
            .timer_queue(queue)
            .clock(clock.clone())
            .on_panic(move |payload| {
                p.lock()
                    .unwrap()
                    .push(payload.message().unwrap_or("").to_string())
            })
            .build()
            .unwrap();
        let waker = Arc::new(AdvancingWaker {
            clock: clock.clone(),
            woken: AtomicUsize::new(0),
        });
        let mut sleep = pin!(pool.sleep(Duration::from_secs(1)));
        let std_waker = Waker::from(waker.clone());
        assert!(sleep
            .as_mut()
            .poll(&mut Context::from_waker(&std_waker))
            .is_pending());
        let c = clock.clone();
        within(Duration::from_secs(10), "advance", move || {
            c.advance(Duration::from_secs(1))
        });
        assert_eq!(waker.woken.load(Ordering::SeqCst), 1, "{queue:?}");
        let panics = panics.lock().unwrap().clone();
        assert_eq!(panics.len(), 1, "{queue:?}: {panics:?}");
        assert!(panics[0].contains("advance"), "{queue:?}: {panics:?}");
        assert!(sleep
            .as_mut()
            .poll(&mut Context::from_waker(&std_waker))
            .is_ready());
        // The clock still moves.
        let (runs, f) = counter();
        let _every = pool
            .schedule_at_fixed_rate(f, Duration::ZERO, HOUR)
            .unwrap();
        let c = clock.clone();
        within(Duration::from_secs(10), "advance", move || c.advance(HOUR));
        assert_eq!(runs.load(Ordering::SeqCst), 2, "{queue:?}");
    }
}

// ---------------------------------------------------------------------------
// 4. A pool that stopped leaves the clock's settling; the others on the
//    clock keep their time.

#[test]
fn a_stopped_pool_holding_wall_tasks_never_stops_the_clock() {
    for queue in queues() {
        let clock = ManualClock::new();
        let pool = pool_on_clock(&clock, queue);
        let one_shot = pool
            .schedule_at_system_time(|| 7, clock.system_time() + HOUR)
            .unwrap();
        #[cfg(feature = "cron")]
        let _cron = pool
            .schedule_with_trigger(
                || std::ops::ControlFlow::<()>::Continue(()),
                chronopool::trigger::Cron::parse("*/5 * * * *").unwrap(),
            )
            .unwrap();
        pool.shutdown();
        let c = clock.clone();
        within(
            Duration::from_secs(10),
            "set_system_time after shutdown",
            move || c.set_system_time(c.system_time() + Duration::from_secs(600)),
        );
        let c = clock.clone();
        within(
            Duration::from_secs(10),
            "advance after shutdown",
            move || c.advance(HOUR),
        );
        // The delayed one-shot kept by `shutdown` ran; the pool ended.
        assert_eq!(one_shot.join().unwrap(), 7, "{queue:?}");
        assert!(
            pool.await_termination(Duration::from_secs(10)),
            "{queue:?}: {:?}",
            pool.metrics()
        );
        let c = clock.clone();
        within(
            Duration::from_secs(10),
            "set_system_time after termination",
            move || {
                c.set_system_time(c.system_time() + DAY);
                c.advance(HOUR);
            },
        );
        assert_eq!(pool.metrics().queued_tasks, 0, "{queue:?}");
    }
}

#[test]
fn shutdown_now_of_a_pool_with_wall_tasks_never_stops_the_clock() {
    for round in 0..60u64 {
        let queue = queues()[round as usize % 3];
        let clock = ManualClock::new();
        let pool = pool_on_clock(&clock, queue);
        let other = pool_on_clock(&clock, queue);
        let (other_runs, f) = counter();
        let _other_every = other
            .schedule_at_fixed_rate(f, Duration::ZERO, Duration::from_secs(60))
            .unwrap();
        let mut tasks = Vec::new();
        for i in 0..50u64 {
            let wall = clock.system_time() + Duration::from_secs(i * 30);
            tasks.push(
                pool.schedule_at_system_time(|| (), wall)
                    .unwrap()
                    .cancel_handle(),
            );
            let rate = Duration::from_secs(10 + i);
            tasks.push(
                pool.schedule_at_fixed_rate(|| {}, Duration::ZERO, rate)
                    .unwrap()
                    .cancel_handle(),
            );
        }
        let c = clock.clone();
        let advancing = thread::spawn(move || {
            for i in 0..200 {
                if i % 2 == 0 {
                    c.advance(Duration::from_secs(15));
                } else {
                    c.set_system_time(c.system_time() + Duration::from_secs(15));
                }
            }
        });
        thread::sleep(Duration::from_micros(round * 100));
        let left = pool.shutdown_now();
        drop(left);
        within(
            Duration::from_secs(30),
            "advance racing shutdown_now",
            move || advancing.join().unwrap(),
        );
        assert!(pool.await_termination(Duration::from_secs(10)), "{queue:?}");
        assert_eq!(pool.metrics().queued_tasks, 0, "{queue:?}");
        // The other pool's time goes on: one run a minute.
        let before = other_runs.load(Ordering::SeqCst);
        let c = clock.clone();
        within(
            Duration::from_secs(10),
            "advance after shutdown_now",
            move || c.advance(HOUR),
        );
        assert_eq!(other_runs.load(Ordering::SeqCst) - before, 60, "{queue:?}");
    }
}

// ---------------------------------------------------------------------------
// 5. A wall-clock step racing wall-time schedules: every task the step
//    passed runs.

#[test]
fn a_wall_step_racing_wall_schedules_misses_none() {
    for queue in queues() {
        let clock = ManualClock::new();
        let pool = pool_on_clock(&clock, queue);
        let ran = Arc::new(AtomicUsize::new(0));
        let scheduled: Arc<Mutex<Vec<SystemTime>>> = Arc::default();
        let per_thread = 10_000;
        let schedulers: Vec<_> = (0..4)
            .map(|_| {
                let (pool, clock, ran, scheduled) =
                    (pool.clone(), clock.clone(), ran.clone(), scheduled.clone());
                thread::spawn(move || {
                    let mut mine = Vec::with_capacity(per_thread);
                    for _ in 0..per_thread {
                        let due = clock.system_time() + HOUR;
                        let ran = ran.clone();
                        let _task = pool
                            .schedule_at_system_time(
                                move || {
                                    ran.fetch_add(1, Ordering::SeqCst);
                                },
                                due,
                            )
                            .unwrap();
                        mine.push(due);
                    }
                    scheduled.lock().unwrap().extend(mine);
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(2));
        clock.set_system_time(clock.system_time() + 10 * DAY);
        for s in schedulers {
            s.join().unwrap();
        }
        let c = clock.clone();
        within(Duration::from_secs(30), "advance", move || {
            c.advance(Duration::ZERO)
        });
        let now = clock.system_time();
        let passed = scheduled
            .lock()
            .unwrap()
            .iter()
            .filter(|due| **due <= now)
            .count();
        assert_eq!(ran.load(Ordering::SeqCst), passed, "{queue:?}");
        // The rest run an hour after the step, none before.
        clock.advance(HOUR - Duration::from_secs(1));
        assert_eq!(ran.load(Ordering::SeqCst), passed, "{queue:?}");
        clock.advance(Duration::from_secs(2));
        assert_eq!(ran.load(Ordering::SeqCst), 4 * per_thread, "{queue:?}");
    }
}

// ---------------------------------------------------------------------------
// 7. Cancels show in `metrics()` as soon as `cancel` returns.

#[test]
fn cancels_show_in_metrics_at_once() {
    for queue in queues() {
        for manual in [false, true] {
            let clock = ManualClock::new();
            let mut builder = ScheduledExecutor::builder()
                .worker_threads(2)
                .timer_queue(queue);
            if manual {
                builder = builder.clock(clock.clone());
            }
            let pool = builder.build().unwrap();
            let handles: Vec<_> = (0..1000)
                .map(|_| pool.schedule(|| (), HOUR).unwrap())
                .collect();
            for h in handles.iter().step_by(100) {
                assert!(h.cancel());
            }
            let m = pool.metrics();
            assert_eq!(m.cancelled_tasks, 10, "{queue:?} manual {manual}");
            assert_eq!(m.scheduled_tasks, 990, "{queue:?} manual {manual}");
            // Counted once, whatever comes next.
            for h in handles.iter().step_by(100) {
                assert!(!h.cancel());
            }
            let m = pool.metrics();
            assert_eq!(m.cancelled_tasks, 10, "{queue:?} manual {manual}");
            assert_eq!(m.scheduled_tasks, 990, "{queue:?} manual {manual}");
        }
    }
}

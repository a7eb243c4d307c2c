//! Cron triggers on a whole pool in manual time: a day of hourly runs at
//! the exact wall times, weeks, seconds, both daylight-saving transitions
//! in New York, steps of the wall clock, and missed runs. Each run records
//! the wall time it ran at.

#![cfg(feature = "cron")]

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chronopool::trigger::{Cron, Ended, MissedRuns};
use chronopool::{ManualClock, ScheduledExecutor, TimerQueue, TriggerHandle};

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// A UTC time written as RFC 3339 (`"2026-03-08T07:00:00Z"`).
fn utc(s: &str) -> SystemTime {
    SystemTime::from(s.parse::<jiff::Timestamp>().expect(s))
}

fn utcs(times: &[&str]) -> Vec<SystemTime> {
    times.iter().map(|s| utc(s)).collect()
}

fn cron(expr: &str) -> Cron {
    Cron::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn new_york(expr: &str) -> Cron {
    cron(expr).in_time_zone("America/New_York").unwrap()
}

fn manual_pool(clock: &ManualClock, queue: TimerQueue) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(2)
        .timer_queue(queue)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// The wall times of the runs of a task.
type Runs = Arc<Mutex<Vec<SystemTime>>>;

/// Schedules `trigger` on `pool` with a closure that records the wall time
/// of each of its runs.
fn record(
    pool: &ScheduledExecutor,
    clock: &ManualClock,
    trigger: Cron,
) -> (Runs, TriggerHandle<()>) {
    let runs = Runs::default();
    let (r, clock) = (runs.clone(), clock.clone());
    let handle = pool
        .schedule_with_trigger(
            move || {
                r.lock().unwrap().push(clock.system_time());
                ControlFlow::Continue(())
            },
            trigger,
        )
        .unwrap();
    (runs, handle)
}

fn taken(runs: &Runs) -> Vec<SystemTime> {
    std::mem::take(&mut *runs.lock().unwrap())
}

fn gaps(runs: &[SystemTime]) -> Vec<Duration> {
    runs.windows(2)
        .map(|pair| pair[1].duration_since(pair[0]).unwrap())
        .collect()
}

#[test]
fn hourly_over_a_manual_day_runs_24_times_at_the_exact_wall_times() {
    // The heap is exact; a wheel rounds a deadline up to its 1 ms tick,
    // never early.
    for (queue, exact) in [
        (TimerQueue::heap(), true),
        (TimerQueue::hashed_wheel(), false),
        (TimerQueue::hierarchical_wheel(), false),
    ] {
        let start = utc("2026-01-01T00:00:00Z");
        let clock = ManualClock::starting_at(start);
        let pool = manual_pool(&clock, queue);
        let (runs, task) = record(&pool, &clock, cron("0 * * * *"));
        clock.advance(DAY);
        let runs = taken(&runs);
        assert_eq!(runs.len(), 24, "{queue:?}");
        for (n, at) in runs.iter().enumerate() {
            let due = start + HOUR * (n as u32 + 1);
            let late = at
                .duration_since(due)
                .unwrap_or_else(|_| panic!("{queue:?}: run {n} early"));
            assert!(
                late <= Duration::from_millis(1),
                "{queue:?}: run {n} {late:?} late"
            );
            assert!(!exact || *at == due, "{queue:?}: run {n} at {at:?}");
        }
        assert!(task.cancel());
    }
}

#[test]
fn weekly_on_saturday_noon() {
    // 2026-01-01 is a Thursday.
    let clock = ManualClock::starting_at(utc("2026-01-01T00:00:00Z"));
    let pool = manual_pool(&clock, TimerQueue::heap());
    let (runs, _task) = record(&pool, &clock, cron("0 12 * * SAT"));
    clock.advance(4 * 7 * DAY);
    assert_eq!(
        taken(&runs),
        utcs(&[
            "2026-01-03T12:00:00Z",
            "2026-01-10T12:00:00Z",
            "2026-01-17T12:00:00Z",
            "2026-01-24T12:00:00Z"
        ])
    );
}

#[test]
fn every_15_seconds_over_an_hour_is_240_runs() {
    let start = utc("2026-01-01T00:00:00Z");
    let clock = ManualClock::starting_at(start);
    let pool = manual_pool(&clock, TimerQueue::heap());
    let (runs, _task) = record(&pool, &clock, cron("*/15 * * * * *"));
    clock.advance(HOUR);
    let runs = taken(&runs);
    assert_eq!(runs.len(), 240);
    assert_eq!(runs[0], start + 15 * SECOND);
    assert_eq!(runs[239], start + HOUR);
    assert!(gaps(&runs).iter().all(|gap| *gap == 15 * SECOND));
}

#[test]
fn shanghai_daily_at_two_runs_at_six_pm_utc() {
    let clock = ManualClock::starting_at(utc("2026-03-07T00:00:00Z"));
    let pool = manual_pool(&clock, TimerQueue::heap());
    let shanghai = cron("0 2 * * *").in_time_zone("Asia/Shanghai").unwrap();
    let (runs, _task) = record(&pool, &clock, shanghai);
    clock.advance(3 * DAY);
    assert_eq!(
        taken(&runs),
        utcs(&[
            "2026-03-07T18:00:00Z",
            "2026-03-08T18:00:00Z",
            "2026-03-09T18:00:00Z"
        ])
    );
}

#[test]
fn new_york_spring_forward() {
    // 2026-03-08: 01:59:59 EST (06:59:59Z) is followed by 03:00 EDT (07:00Z).
    let clock = ManualClock::starting_at(utc("2026-03-07T05:00:00Z")); // 00:00 EST
    let pool = manual_pool(&clock, TimerQueue::heap());
    let (at_2_30, _a) = record(&pool, &clock, new_york("30 2 * * *"));
    let (quarterly, _b) = record(&pool, &clock, new_york("*/15 * * * *"));
    let (hourly, _c) = record(&pool, &clock, new_york("0 * * * *"));
    clock.advance(HOUR * 24 + HOUR * 23 + HOUR * 24); // 03-07, 03-08, 03-09, local
    assert_eq!(
        taken(&at_2_30),
        utcs(&[
            "2026-03-07T07:30:00Z", // 02:30 EST
            "2026-03-08T07:00:00Z", // no 02:30 that day: 03:00 EDT, once
            "2026-03-09T06:30:00Z", // 02:30 EDT
        ])
    );
    let quarterly = taken(&quarterly);
    assert_eq!(quarterly.len(), 4 * (24 + 23 + 24));
    assert!(gaps(&quarterly).iter().all(|gap| *gap == 15 * MINUTE));
    assert!(quarterly.contains(&utc("2026-03-08T06:45:00Z"))); // 01:45 EST
    assert!(quarterly.contains(&utc("2026-03-08T07:00:00Z"))); // 03:00 EDT
    let hourly = taken(&hourly);
    let on_the_8th =
        |t: &&SystemTime| **t >= utc("2026-03-08T05:00:00Z") && **t < utc("2026-03-09T04:00:00Z");
    assert_eq!(hourly.iter().filter(on_the_8th).count(), 23);
    assert!(gaps(&hourly).iter().all(|gap| *gap == HOUR));
}

#[test]
fn new_york_fall_back() {
    // 2026-11-01: 01:59:59 EDT (05:59:59Z) is followed by 01:00 EST (06:00Z).
    let clock = ManualClock::starting_at(utc("2026-10-31T04:00:00Z")); // 00:00 EDT
    let pool = manual_pool(&clock, TimerQueue::heap());
    let (at_1_30, _a) = record(&pool, &clock, new_york("30 1 * * *"));
    let (quarterly, _b) = record(&pool, &clock, new_york("*/15 * * * *"));
    let (hourly, _c) = record(&pool, &clock, new_york("0 * * * *"));
    clock.advance(HOUR * 24 + HOUR * 25 + HOUR * 24); // 10-31, 11-01, 11-02, local
    assert_eq!(
        taken(&at_1_30),
        utcs(&[
            "2026-10-31T05:30:00Z", // 01:30 EDT
            "2026-11-01T05:30:00Z", // 01:30 EDT, and not again at 01:30 EST
            "2026-11-02T06:30:00Z", // 01:30 EST
        ])
    );
    let quarterly = taken(&quarterly);
    assert_eq!(quarterly.len(), 4 * (24 + 25 + 24));
    assert!(gaps(&quarterly).iter().all(|gap| *gap == 15 * MINUTE));
    let hourly = taken(&hourly);
    let on_the_1st =
        |t: &&SystemTime| **t >= utc("2026-11-01T04:00:00Z") && **t < utc("2026-11-02T05:00:00Z");
    assert_eq!(hourly.iter().filter(on_the_1st).count(), 25);
    assert!(gaps(&hourly).iter().all(|gap| *gap == HOUR));
}

#[test]
fn a_wall_clock_stepped_forward_past_a_run_runs_it_once_at_once() {
    let clock = ManualClock::starting_at(utc("2026-01-01T10:00:00Z"));
    let pool = manual_pool(&clock, TimerQueue::heap());
    let (runs, _task) = record(&pool, &clock, cron("0 * * * *"));
    clock.advance(30 * MINUTE);
    assert!(taken(&runs).is_empty());
    // Past 11:00, 12:00 and 13:00: one run, at once.
    clock.set_system_time(utc("2026-01-01T13:30:00Z"));
    assert_eq!(taken(&runs), utcs(&["2026-01-01T13:30:00Z"]));
    clock.advance(29 * MINUTE);
    assert!(taken(&runs).is_empty());
    clock.advance(MINUTE);
    assert_eq!(taken(&runs), utcs(&["2026-01-01T14:00:00Z"]));
}

#[test]
fn a_wall_clock_stepped_back_makes_the_next_run_wait_and_runs_nothing_again() {
    let clock = ManualClock::starting_at(utc("2026-01-01T10:00:00Z"));
    let pool = manual_pool(&clock, TimerQueue::heap());
    let (runs, _task) = record(&pool, &clock, cron("0 * * * *"));
    clock.advance(30 * MINUTE);
    // Back an hour before the 11:00 run: it waits for the wall clock.
    clock.set_system_time(utc("2026-01-01T09:30:00Z"));
    clock.advance(HOUR);
    assert!(taken(&runs).is_empty(), "the wall clock reads 10:30");
    clock.advance(30 * MINUTE);
    assert_eq!(taken(&runs), utcs(&["2026-01-01T11:00:00Z"]));
    // Back 15 minutes after the 11:00 run: 11:00 does not run again.
    clock.set_system_time(utc("2026-01-01T10:45:00Z"));
    clock.advance(30 * MINUTE);
    assert!(taken(&runs).is_empty(), "the wall clock reads 11:15");
    clock.advance(45 * MINUTE);
    assert_eq!(taken(&runs), utcs(&["2026-01-01T12:00:00Z"]));
}

#[test]
fn a_jump_over_three_runs_runs_once_by_default_and_three_times_with_burst() {
    for (missed, late_runs) in [
        (None, 1),
        (Some(MissedRuns::Skip), 1),
        (Some(MissedRuns::Delay), 1),
        (Some(MissedRuns::Burst), 3),
    ] {
        let clock = ManualClock::starting_at(utc("2026-01-01T10:00:00Z"));
        let pool = manual_pool(&clock, TimerQueue::heap());
        let hourly = match missed {
            None => cron("0 * * * *"),
            Some(missed) => cron("0 * * * *").missed_runs(missed),
        };
        let (runs, _task) = record(&pool, &clock, hourly);
        // Suspended from 10:00 to 13:00: 11:00, 12:00 and 13:00 are due.
        clock.jump(3 * HOUR);
        let late = taken(&runs);
        assert_eq!(late.len(), late_runs, "{missed:?}");
        assert!(
            late.iter().all(|at| *at == utc("2026-01-01T13:00:00Z")),
            "{missed:?}"
        );
        // Then on schedule.
        clock.advance(HOUR);
        assert_eq!(taken(&runs), utcs(&["2026-01-01T14:00:00Z"]), "{missed:?}");
    }
}

#[test]
fn an_expression_with_no_occurrence_ends_the_task() {
    let clock = ManualClock::new();
    let pool = manual_pool(&clock, TimerQueue::heap());
    let (runs, task) = record(&pool, &clock, cron("0 0 30 2 *"));
    clock.advance(DAY);
    assert!(taken(&runs).is_empty());
    assert!(task.is_finished());
    assert!(matches!(task.join(), Ok(Ended::ByTrigger)));
}

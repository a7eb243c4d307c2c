//! `next_after` on every form of expression and across daylight saving,
//! the trigger's missed-run policies, and the errors.

use std::error::Error as _;
use std::time::{Duration, SystemTime};

use super::*;
use crate::time::{Clock, ManualClock};
use crate::trigger::History;

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// A UTC time written as RFC 3339 (`"2026-03-08T07:00:00Z"`).
fn utc(s: &str) -> SystemTime {
    SystemTime::from(s.parse::<Timestamp>().expect(s))
}

fn cron(expr: &str) -> Cron {
    Cron::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn zoned(expr: &str, zone: &str) -> Cron {
    cron(expr).in_time_zone(zone).unwrap()
}

/// The first `n` occurrences after `from`, each strictly after the last.
fn next_n(cron: &Cron, from: SystemTime, n: usize) -> Vec<SystemTime> {
    let mut at = from;
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        at = cron.next_after(at).expect("an occurrence");
        all.push(at);
    }
    all
}

/// Every occurrence in `[from, to)`.
fn between(cron: &Cron, from: SystemTime, to: SystemTime) -> Vec<SystemTime> {
    let mut all = Vec::new();
    let mut at = from - Duration::from_nanos(1);
    while let Some(next) = cron.next_after(at).filter(|next| *next < to) {
        all.push(next);
        at = next;
    }
    all
}

fn utcs(times: &[&str]) -> Vec<SystemTime> {
    times.iter().map(|s| utc(s)).collect()
}

// ---- Forms of expression (UTC) -------------------------------------------

#[test]
fn five_fields_are_to_the_minute() {
    let c = cron("30 2 * * *");
    assert_eq!(
        next_n(&c, utc("2026-01-01T00:00:00Z"), 2),
        utcs(&["2026-01-01T02:30:00Z", "2026-01-02T02:30:00Z"])
    );
    assert_eq!(
        next_n(&cron("* * * * *"), utc("2026-01-01T00:00:30Z"), 2),
        utcs(&["2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"])
    );
}

#[test]
fn the_next_occurrence_is_strictly_after() {
    let c = cron("0 * * * *");
    assert_eq!(
        c.next_after(utc("2026-01-01T05:00:00Z")),
        Some(utc("2026-01-01T06:00:00Z"))
    );
    let just_before = utc("2026-01-01T05:59:59.999999999Z");
    assert_eq!(c.next_after(just_before), Some(utc("2026-01-01T06:00:00Z")));
    let just_after = utc("2026-01-01T06:00:00.000000001Z");
    assert_eq!(c.next_after(just_after), Some(utc("2026-01-01T07:00:00Z")));
}

#[test]
fn ranges_steps_and_lists() {
    let from = utc("2026-01-01T00:00:00Z");
    assert_eq!(
        next_n(&cron("0 9-17/4 * * *"), from, 4),
        utcs(&[
            "2026-01-01T09:00:00Z",
            "2026-01-01T13:00:00Z",
            "2026-01-01T17:00:00Z",
            "2026-01-02T09:00:00Z"
        ])
    );
    assert_eq!(
        next_n(&cron("5,10 * * * *"), from, 3),
        utcs(&[
            "2026-01-01T00:05:00Z",
            "2026-01-01T00:10:00Z",
            "2026-01-01T01:05:00Z"
        ])
    );
    assert_eq!(
        next_n(&cron("*/20 * * * *"), from, 3),
        utcs(&[
            "2026-01-01T00:20:00Z",
            "2026-01-01T00:40:00Z",
            "2026-01-01T01:00:00Z"
        ])
    );
    assert_eq!(
        next_n(&cron("0 0 1,15 * *"), from, 3),
        utcs(&[
            "2026-01-15T00:00:00Z",
            "2026-02-01T00:00:00Z",
            "2026-02-15T00:00:00Z"
        ])
    );
    assert_eq!(
        next_n(&cron("0 0 1 1,7 *"), from, 2),
        utcs(&["2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"])
    );
    assert_eq!(
        next_n(&cron("10-12 3 * * *"), from, 4),
        utcs(&[
            "2026-01-01T03:10:00Z",
            "2026-01-01T03:11:00Z",
            "2026-01-01T03:12:00Z",
            "2026-01-02T03:10:00Z"
        ])
    );
}

#[test]
fn names_of_months_and_days_in_any_case() {
    // 2026-01-01 is a Thursday.
    let from = utc("2026-01-01T00:00:00Z");
    assert_eq!(
        next_n(&cron("0 8 * * MON-FRI"), from, 3),
        utcs(&[
            "2026-01-01T08:00:00Z",
            "2026-01-02T08:00:00Z",
            "2026-01-05T08:00:00Z"
        ])
    );
    assert_eq!(
        next_n(&cron("0 0 1 jan,Jul *"), from, 2),
        utcs(&["2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"])
    );
    assert_eq!(
        next_n(&cron("0 0 * FEB sun"), from, 2),
        utcs(&["2026-02-01T00:00:00Z", "2026-02-08T00:00:00Z"])
    );
    // Sunday is 0 and 7.
    assert_eq!(
        cron("0 0 * * 7").next_after(from),
        cron("0 0 * * 0").next_after(from)
    );
}

#[test]
fn both_day_fields_given_match_either() {
    // The 13th, or a Friday (Vixie cron): Fri 2, Fri 9, Tue 13, Fri 16.
    assert_eq!(
        next_n(&cron("0 0 13 * FRI"), utc("2026-01-01T00:00:00Z"), 4),
        utcs(&[
            "2026-01-02T00:00:00Z",
            "2026-01-09T00:00:00Z",
            "2026-01-13T00:00:00Z",
            "2026-01-16T00:00:00Z"
        ])
    );
}

#[test]
fn shorthands() {
    let from = utc("2026-01-01T10:20:00Z"); // a Thursday
    let first = |expr: &str| cron(expr).next_after(from).unwrap();
    assert_eq!(first("@hourly"), utc("2026-01-01T11:00:00Z"));
    assert_eq!(first("@daily"), utc("2026-01-02T00:00:00Z"));
    assert_eq!(first("@midnight"), utc("2026-01-02T00:00:00Z"));
    assert_eq!(first("@weekly"), utc("2026-01-04T00:00:00Z")); // Sunday
    assert_eq!(first("@monthly"), utc("2026-02-01T00:00:00Z"));
    assert_eq!(first("@yearly"), utc("2027-01-01T00:00:00Z"));
    assert_eq!(first("@annually"), utc("2027-01-01T00:00:00Z"));
    assert_eq!(first(" @HOURLY "), utc("2026-01-01T11:00:00Z"));
}

#[test]
fn six_fields_have_seconds_first() {
    let c = cron("*/15 * * * * *");
    let from = utc("2026-01-01T00:00:00Z");
    assert_eq!(
        next_n(&c, from, 5),
        utcs(&[
            "2026-01-01T00:00:15Z",
            "2026-01-01T00:00:30Z",
            "2026-01-01T00:00:45Z",
            "2026-01-01T00:01:00Z",
            "2026-01-01T00:01:15Z"
        ])
    );
    assert_eq!(between(&c, from, from + HOUR).len(), 240);
    assert_eq!(
        cron("30 0 12 * * *").next_after(from),
        Some(utc("2026-01-01T12:00:30Z"))
    );
}

#[test]
fn weekly_on_saturday_noon() {
    assert_eq!(
        next_n(&cron("0 12 * * SAT"), utc("2026-01-01T00:00:00Z"), 3),
        utcs(&[
            "2026-01-03T12:00:00Z",
            "2026-01-10T12:00:00Z",
            "2026-01-17T12:00:00Z"
        ])
    );
}

#[test]
fn an_expression_with_no_occurrence_has_no_next() {
    let feb30 = cron("0 0 30 2 *");
    let started = std::time::Instant::now();
    assert_eq!(feb30.next_after(utc("2026-01-01T00:00:00Z")), None);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        cron("0 0 29 2 *").next_after(utc("2026-01-01T00:00:00Z")),
        Some(utc("2028-02-29T00:00:00Z"))
    );
}

// ---- Time zones and daylight saving -------------------------------------

#[test]
fn shanghai_daily_at_two_is_six_pm_utc_every_day() {
    let c = zoned("0 2 * * *", "Asia/Shanghai");
    let runs = next_n(&c, utc("2026-01-01T00:00:00Z"), 366);
    assert_eq!(runs[0], utc("2026-01-01T18:00:00Z"));
    for pair in runs.windows(2) {
        assert_eq!(pair[1].duration_since(pair[0]).unwrap(), 24 * HOUR);
    }
}

#[test]
fn new_york_spring_forward_runs_a_skipped_time_once_when_the_clock_jumps() {
    // 2026-03-08: 01:59:59 EST (06:59:59Z) is followed by 03:00 EDT (07:00Z).
    let c = zoned("30 2 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc("2026-03-06T12:00:00Z"), 4),
        utcs(&[
            "2026-03-07T07:30:00Z", // 02:30 EST
            "2026-03-08T07:00:00Z", // no 02:30: 03:00 EDT, the jump
            "2026-03-09T06:30:00Z", // 02:30 EDT
            "2026-03-10T06:30:00Z",
        ])
    );
    // Several skipped times, and the time jumped to, make one run.
    for expr in ["0,30 2 * * *", "0 2,3 * * *", "*/15 2 * * *"] {
        let c = zoned(expr, "America/New_York");
        let day = between(&c, utc("2026-03-08T05:00:00Z"), utc("2026-03-09T04:00:00Z"));
        assert_eq!(day, utcs(&["2026-03-08T07:00:00Z"]), "{expr}");
    }
    // A time before the gap is not moved.
    assert_eq!(
        zoned("30 1 * * *", "America/New_York").next_after(utc("2026-03-08T05:00:00Z")),
        Some(utc("2026-03-08T06:30:00Z"))
    );
}

#[test]
fn new_york_fall_back_runs_a_repeated_time_once_at_its_first_occurrence() {
    // 2026-11-01: 01:59:59 EDT (05:59:59Z) is followed by 01:00 EST (06:00Z).
    let c = zoned("30 1 * * *", "America/New_York");
    assert_eq!(
        next_n(&c, utc("2026-10-31T12:00:00Z"), 3),
        utcs(&[
            "2026-11-01T05:30:00Z", // 01:30 EDT; not again at 01:30 EST
            "2026-11-02T06:30:00Z", // 01:30 EST
            "2026-11-03T06:30:00Z",
        ])
    );
    // From inside the second pass, including right after 01:30 EST.
    for from in [
        "2026-11-01T06:00:00Z",
        "2026-11-01T06:10:00Z",
        "2026-11-01T06:30:00Z",
    ] {
        assert_eq!(
            c.next_after(utc(from)),
            Some(utc("2026-11-02T06:30:00Z")),
            "{from}"
        );
    }
    // A fixed-time job with several times in the repeated hour: first pass only.
    let c = zoned("*/15 1 * * *", "America/New_York");
    assert_eq!(
        between(&c, utc("2026-11-01T04:00:00Z"), utc("2026-11-01T08:00:00Z")),
        utcs(&[
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:15:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T05:45:00Z"
        ])
    );
}

#[test]
fn every_15_minutes_keeps_real_time_across_both_transitions() {
    let c = zoned("*/15 * * * *", "America/New_York");
    for (from, to, expected) in [
        // Spring: 01:45 EST (06:45Z) then 03:00 EDT (07:00Z).
        ("2026-03-08T05:00:00Z", "2026-03-08T09:00:00Z", 16),
        // Autumn: 01:45 EDT (05:45Z), 01:00 EST (06:00Z), ..., 02:00 EST (07:00Z).
        ("2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z", 16),
    ] {
        let runs = between(&c, utc(from), utc(to));
        assert_eq!(runs.len(), expected, "{from}");
        assert_eq!(runs[0], utc(from));
        for pair in runs.windows(2) {
            assert_eq!(
                pair[1].duration_since(pair[0]).unwrap(),
                15 * MINUTE,
                "{from}"
            );
        }
    }
    // From any instant of the first pass, the second pass comes next.
    assert_eq!(
        c.next_after(utc("2026-11-01T05:50:00Z")),
        Some(utc("2026-11-01T06:00:00Z"))
    );
    assert_eq!(
        c.next_after(utc("2026-11-01T05:59:59.5Z")),
        Some(utc("2026-11-01T06:00:00Z"))
    );
    assert_eq!(
        c.next_after(utc("2026-11-01T05:00:00Z")),
        Some(utc("2026-11-01T05:15:00Z"))
    );
}

#[test]
fn hourly_runs_23_times_in_spring_and_25_in_autumn() {
    let c = zoned("0 * * * *", "America/New_York");
    // Local midnight to local midnight.
    let spring = between(&c, utc("2026-03-08T05:00:00Z"), utc("2026-03-09T04:00:00Z"));
    let autumn = between(&c, utc("2026-11-01T04:00:00Z"), utc("2026-11-02T05:00:00Z"));
    assert_eq!((spring.len(), autumn.len()), (23, 25));
    for runs in [spring, autumn] {
        for pair in runs.windows(2) {
            assert_eq!(pair[1].duration_since(pair[0]).unwrap(), HOUR);
        }
    }
}

#[test]
fn berlin_both_transitions() {
    // 2026-03-29: 02:00 CET (01:00Z) jumps to 03:00 CEST.
    // 2026-10-25: 03:00 CEST (01:00Z) goes back to 02:00 CET.
    let c = zoned("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        next_n(&c, utc("2026-03-28T12:00:00Z"), 2),
        utcs(&["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"])
    );
    assert_eq!(
        next_n(&c, utc("2026-10-24T12:00:00Z"), 2),
        utcs(&["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"])
    );
    let every_half_hour = zoned("*/30 * * * *", "Europe/Berlin");
    assert_eq!(
        between(
            &every_half_hour,
            utc("2026-10-25T00:00:00Z"),
            utc("2026-10-25T02:00:00Z")
        ),
        utcs(&[
            "2026-10-25T00:00:00Z", // 02:00 CEST
            "2026-10-25T00:30:00Z", // 02:30 CEST
            "2026-10-25T01:00:00Z", // 02:00 CET
            "2026-10-25T01:30:00Z", // 02:30 CET
        ])
    );
}

#[test]
fn utc_is_the_default_zone() {
    assert_eq!(
        cron("0 2 * * *").next_after(utc("2026-03-08T00:00:00Z")),
        zoned("0 2 * * *", "UTC").next_after(utc("2026-03-08T00:00:00Z"))
    );
}

// ---- The trigger ---------------------------------------------------------

/// What `next` answers with the wall clock at `now`, after `runs` runs the
/// last of which was due at `last_due`.
fn answer(
    c: &mut Cron,
    now: SystemTime,
    runs: u64,
    last_due: Option<SystemTime>,
) -> Option<SystemTime> {
    let clock = Clock::manual(ManualClock::starting_at(now).state().clone());
    let history = History {
        runs,
        last_due_wall: last_due,
        ..History::default()
    };
    match c.next(&TriggerContext::new(&clock, &history))? {
        Next::AtSystemTime(at) => Some(at),
        other => panic!("a cron trigger answered {other:?}"),
    }
}

#[test]
fn the_first_answer_is_the_first_occurrence_after_now() {
    let mut c = cron("0 * * * *");
    assert_eq!(
        answer(&mut c, utc("2026-01-01T10:20:00Z"), 0, None),
        Some(utc("2026-01-01T11:00:00Z"))
    );
    assert_eq!(
        answer(
            &mut cron("0 0 30 2 *"),
            utc("2026-01-01T10:20:00Z"),
            0,
            None
        ),
        None
    );
    assert!(!c.records_run_times());
}

#[test]
fn missed_runs_skip_burst_and_delay() {
    // The 11:00 run of an hourly job ran at 13:20 (the process slept).
    let (now, due) = (
        utc("2026-01-01T13:20:00Z"),
        Some(utc("2026-01-01T11:00:00Z")),
    );
    let mut skip = cron("0 * * * *");
    assert_eq!(
        answer(&mut skip, now, 5, due),
        Some(utc("2026-01-01T14:00:00Z"))
    );
    let mut delay = cron("0 * * * *").missed_runs(MissedRuns::Delay);
    assert_eq!(
        answer(&mut delay, now, 5, due),
        Some(utc("2026-01-01T14:00:00Z"))
    );
    let mut burst = cron("0 * * * *").missed_runs(MissedRuns::Burst);
    assert_eq!(
        answer(&mut burst, now, 5, due),
        Some(utc("2026-01-01T12:00:00Z"))
    );
    let due = Some(utc("2026-01-01T13:00:00Z"));
    assert_eq!(
        answer(&mut burst, now, 6, due),
        Some(utc("2026-01-01T14:00:00Z"))
    );
}

#[test]
fn a_wall_clock_stepped_back_does_not_run_an_occurrence_again() {
    // The 12:00 run ended with the clock stepped back to 11:30.
    let (now, due) = (
        utc("2026-01-01T11:30:00Z"),
        Some(utc("2026-01-01T12:00:00Z")),
    );
    for missed in [MissedRuns::Skip, MissedRuns::Burst, MissedRuns::Delay] {
        let mut c = cron("0 * * * *").missed_runs(missed);
        assert_eq!(
            answer(&mut c, now, 1, due),
            Some(utc("2026-01-01T13:00:00Z")),
            "{missed:?}"
        );
    }
}

// ---- Errors --------------------------------------------------------------

#[test]
fn a_malformed_field_is_named() {
    for (expr, field, text) in [
        ("61 * * * *", "minute", "61"),
        ("0 24 * * *", "hour", "24"),
        ("0 0 32 * *", "day-of-month", "32"),
        ("0 0 0 * *", "day-of-month", "0"),
        ("0 0 * 13 *", "month", "13"),
        ("0 0 * JAN-FOO *", "month", "JAN-FOO"),
        ("0 0 * * 8", "day-of-week", "8"),
        ("0 0 * * MONDAY", "day-of-week", "MONDAY"),
        ("0 0 * MON *", "month", "MON"),
        ("0 0 * * JAN", "day-of-week", "JAN"),
        ("MON 0 * * *", "minute", "MON"),
        ("5-2 * * * *", "minute", "5-2"),
        ("*/0 * * * *", "minute", "*/0"),
        ("1,,2 * * * *", "minute", "1,,2"),
        (", * * * *", "minute", ","),
        ("0 0 * * 7-1", "day-of-week", "7-1"),
        ("0 0 5#2 * *", "day-of-month", "5#2"),
        ("x * * * *", "minute", "x"),
        ("60 * * * * *", "second", "60"),
        ("*/0 * * * * *", "second", "*/0"),
        ("0 0 0 * * 9", "day-of-week", "9"),
    ] {
        let err = Cron::parse(expr).expect_err(expr);
        assert_eq!(err.field(), Some(field), "{expr}: {err}");
        let message = err.to_string();
        assert!(
            message.contains(&format!("the {field} field {text:?}")),
            "{expr}: {message}"
        );
        assert!(message.contains(&format!("{expr:?}")), "{expr}: {message}");
        assert!(!err.is_time_zone());
    }
}

#[test]
fn the_parser_error_is_the_source() {
    let err = Cron::parse("0 61 * * *").unwrap_err();
    assert!(err.source().is_some(), "{err}");
    // A name check of our own has no parser error behind it.
    assert!(Cron::parse("0 0 * FOO *").unwrap_err().source().is_none());
}

#[test]
fn whole_expression_errors() {
    for (expr, says) in [
        ("", "empty"),
        ("   ", "empty"),
        ("* * * *", "has 4 fields"),
        ("0 0 0 * * * 2026", "has 7 fields"),
        ("@dayly", "unknown cron shorthand \"@dayly\""),
        ("@daily 3", "unknown cron shorthand"),
    ] {
        let err = Cron::parse(expr).expect_err(expr);
        assert_eq!(err.field(), None, "{expr}");
        assert!(err.to_string().contains(says), "{expr}: {err}");
    }
}

#[test]
fn an_unknown_time_zone_is_an_error() {
    let err = cron("0 0 * * *")
        .in_time_zone("America/Nowhere")
        .unwrap_err();
    assert!(err.is_time_zone());
    assert_eq!(err.field(), None);
    assert!(err.to_string().contains("\"America/Nowhere\""), "{err}");
    assert!(err.source().is_some());
}

#[test]
fn debug_shows_the_expression_zone_and_policy() {
    let c = zoned("0 9 * * MON-FRI", "Europe/Berlin");
    let debug = format!("{c:?}");
    assert!(
        debug.contains("0 9 * * MON-FRI")
            && debug.contains("Europe/Berlin")
            && debug.contains("Skip"),
        "{debug}"
    );
}

// ---- Against a model -------------------------------------------------------

/// The occurrences in `[from, to)` by brute force, minute by minute: every
/// instant whose wall time matches, except the second instant of a
/// repeated wall time for a fixed-time job; and, for a fixed-time job,
/// each jump over a gap that held a matching wall time.
fn model(c: &Cron, from: Timestamp, to: Timestamp) -> Vec<Timestamp> {
    let zone = &c.zone;
    let schedule = &c.expression.schedule;
    let fixed = !c.expression.by_elapsed_time;
    let mut all = Vec::new();
    let mut s = from;
    while s < to {
        let wall = zone.to_datetime(s);
        if schedule.is_time_matching(&wall).unwrap() {
            let second_pass = match zone.to_ambiguous_timestamp(wall).offset() {
                jiff::tz::AmbiguousOffset::Fold { after, .. } => zone.to_offset(s) == after,
                _ => false,
            };
            if !(fixed && second_pass) {
                all.push(s);
            }
        }
        s = s.checked_add(jiff::SignedDuration::from_mins(1)).unwrap();
    }
    if fixed {
        for transition in zone.following(from).take_while(|t| t.timestamp() < to) {
            let jump = transition.timestamp();
            let before = zone.to_offset(
                jump.checked_sub(jiff::SignedDuration::from_secs(1))
                    .unwrap(),
            );
            let after = transition.offset();
            // The wall times skipped: [jump + before, jump + after).
            let mut wall = jump.to_zoned(TimeZone::fixed(before)).datetime();
            let end = jump.to_zoned(TimeZone::fixed(after)).datetime();
            while wall < end {
                if schedule.is_time_matching(&wall).unwrap() {
                    all.push(jump);
                    break;
                }
                wall = wall
                    .checked_add(jiff::SignedDuration::from_mins(1))
                    .unwrap();
            }
        }
    }
    all.sort();
    all.dedup();
    all
}

#[test]
fn next_after_agrees_with_a_minute_by_minute_model_around_transitions() {
    let zones = [
        "America/New_York",
        "Europe/Berlin",
        "Europe/Dublin",       // negative daylight saving in the tzdb
        "Australia/Lord_Howe", // 30-minute shifts
        "America/Santiago",    // transitions at midnight
        "America/St_Johns",    // -03:30
        "Antarctica/Troll",    // two-hour shifts
        "Pacific/Apia",        // 2011-12-30 skipped whole
        "Asia/Shanghai",
    ];
    let patterns = [
        "30 2 * * *",
        "0,30 1 * * *",
        "*/15 * * * *",
        "0 * * * *",
        "*/7 1-3 * * *",
        "15 */2 * * *",
        "0 0 * * *",
        "45 23 * * *",
        "*/20 0-2 * * SUN",
        "5 3 * * *",
        "0 12 * * *",
    ];
    let day = jiff::SignedDuration::from_hours(24);
    for zone_name in zones {
        let zone = jiff::tz::db().get(zone_name).unwrap();
        let mut windows: Vec<Timestamp> = zone
            .following("2026-01-01T00:00:00Z".parse().unwrap())
            .take_while(|t| t.timestamp() < "2027-01-01T00:00:00Z".parse().unwrap())
            .map(|t| t.timestamp())
            .collect();
        if zone_name == "Pacific/Apia" {
            windows.push("2011-12-30T10:00:00Z".parse().unwrap());
        }
        if windows.is_empty() {
            windows.push("2026-03-08T00:00:00Z".parse().unwrap());
        }
        for pattern in patterns {
            let c = zoned(pattern, zone_name);
            for &t in &windows {
                let (from, to) = (t - day, t + day);
                let expected = model(&c, from, to);
                let mut found = Vec::new();
                let mut at = from - jiff::SignedDuration::from_nanos(1);
                while let Some(next) = c.next_after_timestamp(at).filter(|n| *n < to) {
                    found.push(next);
                    at = next;
                }
                assert_eq!(found, expected, "{pattern:?} in {zone_name} around {t}");
            }
        }
    }
}

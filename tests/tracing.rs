//! The `tracing` feature: the span of every run (id, name, kind,
//! lateness) and the events for panics, time-outs, missed runs and
//! rejections, as a subscriber sees them.
//!
//! One global subscriber records everything for the whole test binary
//! (worker threads do not see a thread's default subscriber); each test
//! picks out its own records by its tasks' names and ids.
#![cfg(feature = "tracing")]

mod common;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use chronopool::{MissedRuns, ScheduledExecutor, TaskError, TaskId, TimerQueue};
use common::{quiet_expected_panics, PATIENCE};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record as SpanValues};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A span or an event as recorded: its name (a span's) or message (an
/// event's), level, fields, and for an event the fields of the span it
/// happened in.
#[derive(Clone, Debug, Default)]
struct Record {
    span: bool,
    level: Option<Level>,
    name: String,
    fields: HashMap<String, String>,
    parent: HashMap<String, String>,
}

impl Record {
    fn field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }
}

/// Collects fields as text (strings without their quotes).
struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// Where spans keep their fields meanwhile (a span's `record` adds some).
struct SpanFields(HashMap<String, String>);

struct Recorder;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let span = ctx.span(id).expect("a new span is known");
        span.extensions_mut().insert(SpanFields(fields));
    }

    fn on_record(&self, id: &Id, values: &SpanValues<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a recorded span is known");
        let mut extensions = span.extensions_mut();
        let fields = extensions.get_mut::<SpanFields>().expect("fields kept");
        values.record(&mut Fields(&mut fields.0));
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).expect("a closed span is known");
        let fields = span
            .extensions()
            .get::<SpanFields>()
            .expect("fields kept")
            .0
            .clone();
        records().lock().unwrap().push(Record {
            span: true,
            level: Some(*span.metadata().level()),
            name: span.name().to_owned(),
            fields,
            parent: HashMap::new(),
        });
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "chronopool" {
            return;
        }
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let parent = ctx
            .event_span(event)
            .and_then(|span| span.extensions().get::<SpanFields>().map(|f| f.0.clone()))
            .unwrap_or_default();
        records().lock().unwrap().push(Record {
            span: false,
            level: Some(*event.metadata().level()),
            name: fields.remove("message").unwrap_or_default(),
            fields,
            parent,
        });
    }
}

fn records() -> &'static Mutex<Vec<Record>> {
    static RECORDS: OnceLock<Mutex<Vec<Record>>> = OnceLock::new();
    RECORDS.get_or_init(|| {
        let subscriber = tracing_subscriber::registry().with(Recorder);
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        Mutex::default()
    })
}

/// Installs the recorder (once per test binary).
fn record() {
    let _ = records();
}

/// The closed run spans of the task `id`.
fn runs_of(id: TaskId) -> Vec<Record> {
    let id = id.as_u64().to_string();
    records()
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.span && r.name == "task" && r.field("task.id") == Some(&id))
        .cloned()
        .collect()
}

/// The events with message `message` about the task `id`.
fn events_of(id: TaskId, message: &str) -> Vec<Record> {
    let id = id.as_u64().to_string();
    records()
        .lock()
        .unwrap()
        .iter()
        .filter(|r| !r.span && r.name == message && r.field("task.id") == Some(&id))
        .cloned()
        .collect()
}

#[test]
fn every_run_has_a_span_with_the_tasks_id_name_kind_and_lateness() {
    record();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    let submitted = pool.task().name("spans-submit").submit(|| 1).unwrap();
    let id = submitted.id();
    assert_eq!(submitted.join().unwrap(), 1);
    let scheduled = pool
        .task()
        .name("spans-scheduled")
        .schedule(|| 2, Duration::from_millis(5))
        .unwrap();
    let scheduled_id = scheduled.id();
    assert_eq!(scheduled.join().unwrap(), 2);
    let periodic = pool
        .schedule_at_fixed_rate(|| (), Duration::ZERO, Duration::from_millis(1))
        .unwrap();
    let periodic_id = periodic.id();
    assert!(common::eventually(|| runs_of(periodic_id).len() >= 3));
    periodic.cancel();
    let timed = pool.submit_with_timeout(|| 3, PATIENCE).unwrap();
    let timed_id = timed.id();
    assert_eq!(timed.join().unwrap(), 3);
    pool.shutdown();
    assert!(pool.await_termination(PATIENCE));

    let [run] = &runs_of(id)[..] else {
        panic!("one span for one run: {:?}", runs_of(id))
    };
    assert_eq!(run.level, Some(Level::DEBUG));
    assert_eq!(run.field("task.name"), Some("spans-submit"));
    assert_eq!(run.field("task.kind"), Some("task"));
    assert_eq!(
        run.field("lateness_us"),
        None,
        "an immediate task has no deadline"
    );

    let [run] = &runs_of(scheduled_id)[..] else {
        panic!("one span: {:?}", runs_of(scheduled_id))
    };
    assert_eq!(run.field("task.kind"), Some("scheduled"));
    assert!(run.field("lateness_us").is_some(), "{run:?}");

    let beats = runs_of(periodic_id);
    assert!(beats.len() >= 3);
    for beat in &beats {
        assert_eq!(beat.field("task.kind"), Some("periodic"));
        assert_eq!(beat.field("task.name"), None, "unnamed");
        assert!(beat.field("lateness_us").is_some());
    }
    let [run] = &runs_of(timed_id)[..] else {
        panic!("one span: {:?}", runs_of(timed_id))
    };
    assert_eq!(run.field("task.kind"), Some("with-timeout"));
}

/// The lateness a span records is the one the clock says: a manual jump of
/// 40 ms past a deadline shows as 40,000 µs.
#[test]
fn the_span_records_the_lateness_of_the_run() {
    record();
    let (pool, clock) = common::manual_pool(TimerQueue::heap(), 1);
    let late = pool
        .task()
        .name("spans-late")
        .schedule(|| (), Duration::from_millis(10))
        .unwrap();
    let id = late.id();
    clock.jump(Duration::from_millis(50));
    late.join().unwrap();
    drop(pool);
    let [run] = &runs_of(id)[..] else {
        panic!("one span: {:?}", runs_of(id))
    };
    assert_eq!(run.field("lateness_us"), Some("40000"));
}

#[test]
fn a_panic_is_an_error_event_inside_the_runs_span() {
    record();
    quiet_expected_panics();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .on_panic(|_| {})
        .build()
        .unwrap();
    let report = pool
        .task()
        .name("events-report")
        .submit(|| -> u8 { panic!("expected: no data") })
        .unwrap();
    let id = report.id();
    assert!(matches!(report.join(), Err(TaskError::Panicked(_))));
    drop(pool);
    let [event] = &events_of(id, "task panicked")[..] else {
        panic!("one event: {:?}", records().lock().unwrap())
    };
    assert_eq!(event.level, Some(Level::ERROR));
    assert_eq!(event.field("task.name"), Some("events-report"));
    assert_eq!(event.field("panic"), Some("expected: no data"));
    assert_eq!(
        event.parent.get("task.name").map(String::as_str),
        Some("events-report")
    );
}

/// The only worker runs a task that stops when asked (its time-out, a
/// second, comes while it runs: it started at once on an idle pool), and a
/// second task waits behind it and times out before it starts. (Not on a
/// manual clock: time does not move there while a task runs.)
#[test]
fn time_outs_before_and_during_a_run_are_warnings() {
    record();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let (started_tx, started) = std::sync::mpsc::channel();
    let running = pool
        .task()
        .name("events-running")
        .submit_with_timeout(
            move || {
                started_tx.send(()).unwrap();
                while !chronopool::cancelled() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            },
            Duration::from_secs(1),
        )
        .unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    let queued = pool
        .task()
        .name("events-queued")
        .submit_with_timeout(|| (), Duration::from_millis(10))
        .unwrap();
    let (running_id, queued_id) = (running.id(), queued.id());
    assert!(running.join().unwrap_err().is_timed_out());
    assert!(queued.join().unwrap_err().is_timed_out());
    drop(pool);
    let [event] = &events_of(running_id, "task timed out")[..] else {
        panic!("one event: {:?}", records().lock().unwrap())
    };
    assert_eq!(event.level, Some(Level::WARN));
    assert_eq!(event.field("running"), Some("true"));
    let [event] = &events_of(queued_id, "task timed out")[..] else {
        panic!("one event: {:?}", records().lock().unwrap())
    };
    assert_eq!(event.field("task.name"), Some("events-queued"));
    assert_eq!(event.field("running"), Some("false"));
}

/// Due at 10 ms, run at 45 ms: `Skip` skips the runs of 20, 30 and 40.
#[test]
fn skipped_runs_are_an_info_event() {
    record();
    const MS: Duration = Duration::from_millis(1);
    let (pool, clock) = common::manual_pool(TimerQueue::heap(), 1);
    let beat = pool
        .task()
        .name("events-beat")
        .schedule_at_fixed_rate_with(|| (), 10 * MS, 10 * MS, MissedRuns::Skip)
        .unwrap();
    clock.jump(45 * MS);
    beat.cancel();
    let id = beat.id();
    drop(pool);
    let [event] = &events_of(id, "missed runs")[..] else {
        panic!("one event: {:?}", records().lock().unwrap())
    };
    assert_eq!(event.level, Some(Level::INFO));
    assert_eq!(
        (event.field("skipped"), event.field("delayed")),
        (Some("3"), Some("0"))
    );
}

#[test]
fn a_rejected_submission_is_a_warning_with_its_reason() {
    record();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    pool.shutdown();
    assert!(pool.submit(|| ()).is_err());
    let rejected = records()
        .lock()
        .unwrap()
        .iter()
        .filter(|r| !r.span && r.name == "task rejected")
        .cloned()
        .collect::<Vec<_>>();
    assert!(
        rejected.iter().any(|r| r.level == Some(Level::WARN)
            && r.field("reason") == Some("the executor is shut down")),
        "{rejected:?}"
    );
}

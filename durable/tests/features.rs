//! On a real SQLite file: batches of schedules, retention of done and dead
//! jobs, permanent failures and typed (JSON) payloads, the metrics and the
//! `tracing` events, and leases renewed while every worker is busy.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use chronopool::{ManualClock, ScheduledExecutor};
use chronopool_durable::{
    Config, DurableError, DurableScheduler, Job, JobError, JobState, Schedule,
};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

fn manual_pool() -> (ScheduledExecutor, ManualClock) {
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()
        .unwrap();
    (pool, clock)
}

fn manual_config() -> Config {
    let mut config = Config::default();
    config.window = DAY;
    config.poll_interval = DAY / 2;
    config.retry = chronopool::trigger::Backoff::exponential(
        Duration::from_secs(60),
        2.0,
        Duration::from_secs(300),
    );
    config
}

/// Counts the runs of each key.
fn counting(jobs: &DurableScheduler, name: &str) -> Arc<Mutex<HashMap<String, u32>>> {
    let runs: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let r = runs.clone();
    jobs.register(name, move |job| {
        *r.lock().unwrap().entry(job.key().to_owned()).or_default() += 1;
        Ok(())
    });
    runs
}

#[test]
fn a_batch_is_stored_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let jobs =
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), manual_config()).unwrap();
    let runs = counting(&jobs, "work");
    jobs.start().unwrap();

    // 1,000 jobs, due from 1 to 1,000 minutes ahead (inside and past the
    // day's window), and one key twice: the later one is stored.
    let batch = (1..=1000u64)
        .map(|i| {
            let due = Schedule::After(Duration::from_secs(60 * i));
            Job::new(format!("j{i}"), "work", i.to_string(), due)
        })
        .chain([Job::new("j7", "work", "again", Schedule::After(2 * DAY))]);
    jobs.schedule_all(batch).unwrap();
    assert_eq!(jobs.job("j7").unwrap().unwrap().payload, b"again");

    // A batch with one schedule that cannot fire stores nothing.
    let bad = [
        Job::new("b1", "work", "", Schedule::After(HOUR)),
        Job::new("b2", "work", "", Schedule::Every(Duration::ZERO)),
    ];
    assert!(matches!(
        jobs.schedule_all(bad),
        Err(DurableError::Schedule(_))
    ));
    assert!(jobs.job("b1").unwrap().is_none());

    clock.advance(3 * DAY);
    let runs = runs.lock().unwrap();
    assert_eq!(runs.len(), 1000, "every key ran");
    assert!(runs.values().all(|&n| n == 1), "each once");
    let m = jobs.metrics();
    assert_eq!((m.claimed, m.succeeded, m.running), (1000, 1000, 0));
}

#[test]
fn done_and_dead_jobs_are_kept_for_their_retention_then_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let mut config = manual_config();
    config.keep_done = DAY;
    config.keep_dead = 3 * DAY;
    let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), config).unwrap();
    jobs.register("ok", |_| Ok(()));
    jobs.register("gone", |job| {
        Err(JobError::permanent(format!(
            "customer {:?} was deleted",
            job.payload()
        )))
    });
    jobs.start().unwrap();
    jobs.schedule("done", "ok", b"", Schedule::After(HOUR))
        .unwrap();
    jobs.schedule("dead", "gone", b"7", Schedule::After(HOUR))
        .unwrap();

    clock.advance(2 * HOUR);
    let done = jobs.job("done").unwrap().unwrap();
    assert_eq!(done.state, JobState::Done);
    let dead = jobs.job("dead").unwrap().unwrap();
    assert_eq!(
        (dead.state, dead.attempt),
        (JobState::Dead, 1),
        "a permanent error is not retried"
    );
    assert!(dead.last_error.unwrap().contains("was deleted"));

    clock.advance(2 * DAY);
    assert!(jobs.job("done").unwrap().is_none(), "done: kept a day");
    assert_eq!(jobs.dead_jobs().unwrap().len(), 1, "dead: kept 3 days");
    clock.advance(2 * DAY);
    assert!(jobs.dead_jobs().unwrap().is_empty());
    let m = jobs.metrics();
    assert_eq!((m.succeeded, m.dead, m.cleaned), (1, 1, 2));

    // A done key scheduled again runs again.
    jobs.schedule("done", "ok", b"", Schedule::After(HOUR))
        .unwrap();
    clock.advance(2 * HOUR);
    assert_eq!(jobs.metrics().succeeded, 2);
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Coupon {
    customer: u64,
    percent: u8,
}

#[test]
fn typed_payloads_and_one_the_handler_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let jobs =
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), manual_config()).unwrap();
    let (sent, coupons) = mpsc::channel();
    let sent = Mutex::new(sent);
    jobs.register("coupon", move |job| {
        let coupon: Coupon = job.json()?;
        sent.lock().unwrap().send(coupon).map_err(JobError::retry)
    });
    jobs.start().unwrap();
    let coupon = Coupon {
        customer: 7,
        percent: 10,
    };
    jobs.schedule_json("c7", "coupon", &coupon, Schedule::After(HOUR))
        .unwrap();
    // An older version's payload, which this handler cannot read.
    jobs.schedule("c8", "coupon", b"7;10", Schedule::After(HOUR))
        .unwrap();
    clock.advance(2 * HOUR);
    assert_eq!(coupons.try_recv().unwrap(), coupon);
    assert!(coupons.try_recv().is_err());
    let dead = jobs.dead_jobs().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].key.as_str(), dead[0].attempt), ("c8", 1));
    assert!(dead[0]
        .last_error
        .as_deref()
        .unwrap()
        .contains("the payload is not what the handler reads"));
}

/// The events of the `tracing` subscriber this test binary installs: each
/// event's message and its `key` field.
fn events() -> &'static Mutex<Vec<(String, String)>> {
    static EVENTS: OnceLock<Mutex<Vec<(String, String)>>> = OnceLock::new();
    EVENTS.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        struct Recorder;
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorder {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                #[derive(Default)]
                struct Fields(String, String);
                impl tracing::field::Visit for Fields {
                    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                        if field.name() == "key" {
                            self.1 = value.to_owned();
                        }
                    }
                    fn record_debug(
                        &mut self,
                        field: &tracing::field::Field,
                        value: &dyn std::fmt::Debug,
                    ) {
                        if field.name() == "message" {
                            self.0 = format!("{value:?}");
                        }
                    }
                }
                let mut fields = Fields::default();
                event.record(&mut fields);
                events().lock().unwrap().push((fields.0, fields.1));
            }
        }
        let subscriber = tracing_subscriber::registry().with(Recorder);
        tracing::subscriber::set_global_default(subscriber).unwrap();
        Mutex::default()
    })
}

#[test]
fn metrics_and_tracing_events_count_each_moment() {
    events();
    let dir = tempfile::tempdir().unwrap();
    let (pool, clock) = manual_pool();
    let mut config = manual_config();
    config.max_attempts = 3;
    let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), config).unwrap();
    let flaky_runs = AtomicU32::new(0);
    jobs.register("m", move |job| match job.key() {
        "m-ok" => Ok(()),
        // Fails once, then succeeds.
        "m-flaky" if flaky_runs.fetch_add(1, Ordering::Relaxed) == 0 => Err("busy".into()),
        "m-flaky" => Ok(()),
        _ => Err("always down".into()),
    });
    jobs.start().unwrap();
    for key in ["m-ok", "m-flaky", "m-down"] {
        jobs.schedule(key, "m", b"", Schedule::After(HOUR)).unwrap();
    }
    clock.advance(DAY);
    let m = jobs.metrics();
    // m-ok 1 run, m-flaky 2, m-down 3 (max_attempts): 6 claims.
    assert_eq!(m.claimed, 6);
    assert_eq!((m.succeeded, m.retried, m.dead), (2, 3, 1));
    assert_eq!(
        (m.running, m.lost, m.lease_expired, m.store_errors),
        (0, 0, 0, 0)
    );
    assert_eq!(m.due, 6, "each fire time placed once");

    let events = events().lock().unwrap();
    let count = |message: &str, key: &str| {
        events
            .iter()
            .filter(|(m, k)| m == message && k == key)
            .count()
    };
    assert_eq!(count("job claimed", "m-down"), 3);
    assert_eq!(count("job retried", "m-down"), 2);
    assert_eq!(count("job dead", "m-down"), 1);
    assert_eq!(count("job retried", "m-flaky"), 1);
    assert_eq!(count("job succeeded", "m-flaky"), 1);
    assert_eq!(count("job succeeded", "m-ok"), 1);
}

/// Real time: one worker, and a handler that runs for four leases. The
/// lease thread renews it, so a second scheduler polling the same file
/// never takes the job over: one run, attempt 1.
#[test]
fn a_live_scheduler_keeps_its_lease_while_every_worker_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let mut config = Config::default();
    config.lease = Duration::from_secs(1);
    config.poll_interval = Duration::from_millis(50);
    config.window = Duration::from_secs(1);
    let attempts = Arc::new(Mutex::new(Vec::new()));

    let pool_a = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let a = DurableScheduler::sqlite(&pool_a, &path, config.clone()).unwrap();
    let seen = attempts.clone();
    let (started_tx, started) = mpsc::channel();
    let started_tx = Mutex::new(started_tx);
    a.register("slow", move |job| {
        seen.lock().unwrap().push(("a", job.attempt()));
        started_tx.lock().unwrap().send(()).unwrap();
        std::thread::sleep(Duration::from_secs(4));
        Ok(())
    });
    let pool_b = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    let b = DurableScheduler::sqlite(&pool_b, &path, config).unwrap();
    let seen = attempts.clone();
    b.register("slow", move |job| {
        seen.lock().unwrap().push(("b", job.attempt()));
        Ok(())
    });
    a.start().unwrap();
    a.schedule("long", "slow", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    started.recv_timeout(Duration::from_secs(30)).unwrap();
    // B polls every 50 ms from now on, while A's run lasts 4 s.
    b.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while a.job("long").unwrap().is_some() {
        assert!(Instant::now() < deadline, "the run finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(*attempts.lock().unwrap(), [("a", 1)]);
    assert!(a.metrics().renewed >= 3, "{:?}", a.metrics());
    assert_eq!(b.metrics().claimed, 0);
}

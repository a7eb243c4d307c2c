//! The `metrics` facade (feature `metrics`): with a recorder installed (as
//! an application's exporter would be), runs, claims, lateness, run time
//! and the jobs by state reach it, labelled by handler and outcome. Its own
//! test binary: the recorder is the process's.

mod common;
mod stores;

use std::collections::HashMap;
use std::time::Duration;

use chronopool_durable::{JobError, Schedule};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use stores::{eventually, pool, real_config, Store, BOTH};

/// Every metric, by name and sorted labels.
fn snapshot(
    snapshotter: &metrics_util::debugging::Snapshotter,
) -> HashMap<(String, Vec<(String, String)>), DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let mut labels: Vec<_> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            ((key.key().name().to_owned(), labels), value)
        })
        .collect()
}

fn counter(v: Option<&DebugValue>) -> u64 {
    match v {
        Some(DebugValue::Counter(n)) => *n,
        None => 0,
        other => panic!("not a counter: {other:?}"),
    }
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    v.sort();
    v
}

#[test]
fn runs_claims_lateness_and_states_reach_the_installed_recorder() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.max_attempts = 1;
        let jobs = store.open(&pool, config);
        jobs.register("ok", |_| Ok(()));
        jobs.register("bad", |_| Err(JobError::permanent("no")));
        jobs.start().unwrap();
        let now = Schedule::After(Duration::ZERO);
        for n in 0..3 {
            jobs.schedule(&format!("ok-{n}-{kind:?}"), "ok", b"", now.clone())
                .unwrap();
        }
        jobs.schedule(&format!("bad-{kind:?}"), "bad", b"", now.clone())
            .unwrap();
        eventually("all ended", || {
            let m = jobs.metrics();
            m.succeeded == 3 && m.dead == 1
        });
        assert!(jobs.shutdown(Duration::from_secs(10)));
    }
    let s = snapshot(&snapshotter);
    let runs = |handler: &str, outcome: &str| {
        counter(s.get(&(
            "chronopool_durable_runs_total".to_owned(),
            labels(&[("handler", handler), ("outcome", outcome)]),
        )))
    };
    assert_eq!(runs("ok", "succeeded"), 6, "{s:?}");
    assert_eq!(runs("bad", "dead"), 2);
    let claimed = counter(s.get(&(
        "chronopool_durable_claimed_total".to_owned(),
        labels(&[("handler", "ok")]),
    )));
    assert_eq!(claimed, 6);
    match s.get(&(
        "chronopool_durable_lateness_seconds".to_owned(),
        labels(&[("handler", "ok")]),
    )) {
        Some(DebugValue::Histogram(values)) => {
            assert_eq!(values.len(), 6);
            assert!(
                values.iter().all(|v| v.0 >= 0.0 && v.0 < 10.0),
                "{values:?}"
            );
        }
        other => panic!("no lateness histogram: {other:?}"),
    }
    match s.get(&(
        "chronopool_durable_run_seconds".to_owned(),
        labels(&[("handler", "bad")]),
    )) {
        Some(DebugValue::Histogram(values)) => assert_eq!(values.len(), 2),
        other => panic!("no run-time histogram: {other:?}"),
    }
    // The gauges by state: read by the first poll of each scheduler.
    let states: Vec<_> = s
        .keys()
        .filter(|(name, _)| name == "chronopool_durable_jobs")
        .flat_map(|(_, l)| l.iter().map(|(_, v)| v.clone()))
        .collect();
    for state in ["scheduled", "paused", "running", "dead", "done"] {
        assert!(states.iter().any(|s| s == state), "{states:?}");
    }
}

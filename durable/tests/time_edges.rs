//! Time at the edges: sub-millisecond times and periods are never
//! rounded early, times a store cannot hold are errors rather than
//! panics, and times before 1970 or after 2500 are stored as given. On
//! both stores, under a manual clock where time must be exact.

mod common;
mod stores;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chronopool::{ManualClock, ScheduledExecutor};
use chronopool_durable::{Config, DurableError, Schedule};
use stores::{Store, BOTH};

const DAY: Duration = Duration::from_secs(24 * 3600);

fn manual(clock: &ManualClock) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn manual_config() -> Config {
    let mut config = Config::default();
    config.window = DAY;
    config.poll_interval = DAY / 2;
    config
}

/// Every run: the wall time it ran at, and the due time it was told.
type Runs = Arc<Mutex<Vec<(SystemTime, SystemTime)>>>;

#[test]
fn a_sub_millisecond_time_never_runs_early_and_a_period_is_never_shortened() {
    for kind in BOTH {
        let store = Store::new(kind);
        let clock = ManualClock::new();
        let pool = manual(&clock);
        let jobs = store.open(&pool, manual_config());
        let runs: Runs = Arc::default();
        let (r, c) = (runs.clone(), clock.clone());
        jobs.register("tick", move |job| {
            r.lock().unwrap().push((c.system_time(), job.due()));
            Ok(())
        });
        jobs.start().unwrap();
        let at = clock.system_time() + Duration::from_nanos(1_500_400);
        jobs.schedule("at", "tick", b"", Schedule::At(at)).unwrap();
        assert!(jobs.job("at").unwrap().unwrap().next_fire >= at, "{kind:?}");
        clock.advance(Duration::from_micros(1_500));
        assert!(
            runs.lock().unwrap().is_empty(),
            "{kind:?}: 1.5004 ms is not 1.5 ms"
        );
        clock.advance(Duration::from_micros(1));
        let (ran, due) = runs.lock().unwrap()[0];
        assert!(ran >= at && due >= at, "{kind:?}: not before its time");
        runs.lock().unwrap().clear();

        jobs.schedule(
            "every",
            "tick",
            b"",
            Schedule::Every(Duration::from_micros(1_900)),
        )
        .unwrap();
        clock.advance(Duration::from_millis(19));
        let runs = runs.lock().unwrap();
        assert_eq!(runs.len(), 10, "{kind:?}: every 1.9 ms, not every 1 ms");
        for pair in runs.windows(2) {
            assert_eq!(
                pair[1].1.duration_since(pair[0].1).unwrap(),
                Duration::from_micros(1_900)
            );
        }
    }
}

#[test]
fn times_a_store_cannot_hold_are_errors_not_panics() {
    for kind in BOTH {
        let store = Store::new(kind);
        let clock = ManualClock::new();
        let pool = manual(&clock);
        let jobs = store.open(&pool, manual_config());
        let year_10000 = UNIX_EPOCH + Duration::from_secs(253_402_300_800);
        for schedule in [
            Schedule::After(Duration::MAX),
            Schedule::Every(Duration::MAX),
            Schedule::After(Duration::from_secs(u64::MAX / 2)),
            Schedule::At(year_10000),
            Schedule::At(UNIX_EPOCH - Duration::from_secs(70_000_000_000)),
        ] {
            let stored = jobs.schedule("k", "tick", b"", schedule.clone());
            assert!(
                matches!(stored, Err(DurableError::Schedule(_))),
                "{kind:?}: {schedule:?}: {stored:?}"
            );
        }
        assert!(jobs.job("k").unwrap().is_none());
        let mut config = manual_config();
        config.lease = Duration::MAX;
        let refused = match &store.params {
            Some(params) => chronopool_durable::DurableScheduler::postgres(&pool, params, config),
            None => chronopool_durable::DurableScheduler::sqlite(&pool, store.path(), config),
        };
        assert!(
            matches!(refused, Err(DurableError::Config { field: "lease", .. })),
            "{kind:?}"
        );
    }
}

#[test]
fn times_before_1970_and_after_2500_are_stored_as_given() {
    for kind in BOTH {
        let store = Store::new(kind);
        let clock = ManualClock::new();
        let pool = manual(&clock);
        let jobs = store.open(&pool, manual_config());
        let year_1950 = UNIX_EPOCH - Duration::from_micros(631_152_000_123_457);
        let year_2600 = UNIX_EPOCH + Duration::from_micros(19_880_899_200_654_321);
        jobs.schedule("old", "tick", b"", Schedule::At(year_1950))
            .unwrap();
        jobs.schedule("new", "tick", b"", Schedule::At(year_2600))
            .unwrap();
        assert_eq!(
            jobs.job("old").unwrap().unwrap().next_fire,
            year_1950,
            "{kind:?}"
        );
        assert_eq!(
            jobs.job("new").unwrap().unwrap().next_fire,
            year_2600,
            "{kind:?}"
        );
    }
}

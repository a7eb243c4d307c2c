//! Jobs scheduled by another scheduler (another process, or another
//! scheduler on the same store) for now run within milliseconds, not at
//! the next poll: PostgreSQL notifies, SQLite's file shows the commit. A
//! notification lost costs latency, never the job. With
//! `Config::notifications` off, the next poll places it.

mod common;
mod stores;

use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use chronopool_durable::{Config, Schedule};
use stores::{pool, Kind, Store, BOTH};

/// The default poll interval (10 s): what a wake-up must beat.
fn slow_polls() -> Config {
    Config::default()
}

#[test]
fn a_job_scheduled_elsewhere_for_now_runs_within_milliseconds() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let runner = store.open(&pool, slow_polls());
        let (ran_tx, ran) = mpsc::channel();
        let ran_tx = Mutex::new(ran_tx);
        runner.register("work", move |job| {
            ran_tx.lock().unwrap().send(job.key().to_owned()).unwrap();
            Ok(())
        });
        runner.start().unwrap();
        // Let its first poll pass.
        std::thread::sleep(Duration::from_millis(300));
        let other = store.open(&pool, slow_polls());
        let mut latencies = Vec::new();
        for n in 0..20 {
            let asked = Instant::now();
            other
                .schedule(
                    &format!("k{n}"),
                    "work",
                    b"",
                    Schedule::After(Duration::ZERO),
                )
                .unwrap();
            assert_eq!(
                ran.recv_timeout(Duration::from_secs(5)).unwrap(),
                format!("k{n}")
            );
            latencies.push(asked.elapsed());
        }
        latencies.sort();
        let median = latencies[latencies.len() / 2];
        eprintln!(
            "{kind:?}: scheduled elsewhere to run, median {median:?}, max {:?}",
            latencies.last().unwrap()
        );
        assert!(median < Duration::from_millis(500), "{kind:?}: {median:?}");
    }
}

/// The listener's connection is cut by the server (an administrator's
/// `pg_terminate_backend`): a job scheduled meanwhile still runs (the
/// listener, connected again, asks for a full poll).
#[test]
fn a_lost_notification_delays_never_loses() {
    let store = Store::new(Kind::Postgres);
    let params = store.params.clone().unwrap();
    let pool = pool(2);
    let runner = store.open(&pool, slow_polls());
    let (ran_tx, ran) = mpsc::channel();
    let ran_tx = Mutex::new(ran_tx);
    runner.register("work", move |job| {
        ran_tx.lock().unwrap().send(job.key().to_owned()).unwrap();
        Ok(())
    });
    runner.start().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut admin = postgres::Client::connect(&params, postgres::NoTls).unwrap();
    let cut = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
            &[],
        )
        .unwrap();
    assert_eq!(cut.len(), 1, "the listener's session");
    let other = store.open(&pool, slow_polls());
    other
        .schedule("k", "work", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    assert_eq!(ran.recv_timeout(Duration::from_secs(15)).unwrap(), "k");
}

/// Without notifications (`Config::notifications` false: no listener on
/// PostgreSQL, no look at the file on SQLite), another scheduler's job is
/// placed by the next poll, not before.
#[test]
fn without_notifications_the_next_poll_places_it() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = Config::default();
        config.notifications = false;
        config.poll_interval = Duration::from_secs(3);
        let runner = store.open(&pool, config);
        let (ran_tx, ran) = mpsc::channel();
        let ran_tx = Mutex::new(ran_tx);
        runner.register("work", move |_| {
            ran_tx.lock().unwrap().send(Instant::now()).unwrap();
            Ok(())
        });
        runner.start().unwrap();
        // Its first poll, at the start, is done: the next is 3 s later.
        std::thread::sleep(Duration::from_millis(200));
        let other = store.open(&pool, Config::default());
        let scheduled = Instant::now();
        other
            .schedule("elsewhere", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        assert!(
            ran.recv_timeout(Duration::from_secs(1)).is_err(),
            "{kind:?}: placed before the poll, without notifications"
        );
        let at = ran.recv_timeout(Duration::from_secs(10)).unwrap();
        let after = at - scheduled;
        assert!(after < Duration::from_secs(4), "{kind:?}: {after:?}");
    }
}

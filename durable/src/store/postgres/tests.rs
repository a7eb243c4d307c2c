use super::*;
use crate::store::conformance;

#[path = "../../../tests/common/mod.rs"]
mod server;

fn fresh() -> Box<dyn Conn> {
    let params = server::PgServer::shared().fresh_database();
    PgStore::open(&params).unwrap().1
}

#[test]
fn the_protocol_holds() {
    conformance::all(fresh);
}

/// A database of version 2 (milliseconds, numbered states) migrates with
/// its jobs.
#[test]
fn a_version_2_database_is_migrated_with_its_jobs() {
    let params = server::PgServer::shared().fresh_database();
    let mut client = Client::connect(&params, NoTls).unwrap();
    client
        .batch_execute(&format!(
            "{} {}
             CREATE TABLE chronopool_schema (version BIGINT NOT NULL);
             INSERT INTO chronopool_schema VALUES (2);
             INSERT INTO chronopool_jobs (key, name, payload, recurrence, next_fire, state, misfire,
                                          owner, lease_until)
                 VALUES ('old', 'job', '\\x01', 'every 1500', 5, 0, 2, NULL, NULL),
                        ('running', 'job', '\\x02', 'once', 7, 1, 0, '1-0', 9);",
            MIGRATIONS[0], MIGRATIONS[1]
        ))
        .unwrap();
    let (_, mut conn) = PgStore::open(&params).unwrap();
    let old = conn.get("old").unwrap().unwrap();
    assert_eq!(
        (
            old.next_fire,
            old.recurrence.as_str(),
            old.state,
            old.missed
        ),
        (
            5_000,
            "every 1500000us",
            JobState::Scheduled,
            chronopool::MissedRuns::Burst
        )
    );
    let running = conn.get("running").unwrap().unwrap();
    assert_eq!(
        (running.state, running.lease_until),
        (JobState::Running, Some(9_000))
    );
}

/// Schedulers that start together on a new database migrate it once, and
/// all start.
#[test]
fn concurrent_first_opens_all_succeed() {
    let params = server::PgServer::shared().fresh_database();
    let barrier = std::sync::Barrier::new(6);
    std::thread::scope(|s| {
        let opens: Vec<_> = (0..6)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    PgStore::open(&params).map(drop)
                })
            })
            .collect();
        for open in opens {
            open.join().unwrap().unwrap();
        }
    });
}

/// What a user gets when the store cannot be reached or used: the
/// server's message and SQLSTATE, the cause, and whether a retry helps;
/// nothing is retried that a retry cannot mend.
#[test]
fn errors_keep_their_cause_and_fail_fast_when_a_retry_cannot_help() {
    let server = server::PgServer::shared();
    let started = std::time::Instant::now();
    let e = PgStore::open("host=127.0.0.1 port=notaport").err().unwrap();
    assert!(!e.is_transient(), "{e}");
    assert!(std::error::Error::source(&e).is_some());
    let missing = server
        .params()
        .replace("dbname=postgres", "dbname=no_such_database");
    let e = PgStore::open(&missing).err().unwrap();
    assert_eq!(e.code(), Some("3D000"), "{e}");
    assert!(e.to_string().contains("no_such_database"), "{e}");
    assert!(!e.is_transient());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "no retries"
    );
    // Nothing listens on this port: refused, which a retry may mend.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = PgStore::open(&format!("host=127.0.0.1 port={port} user=postgres"))
        .err()
        .unwrap();
    assert!(e.is_transient(), "{e}");
    assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
}

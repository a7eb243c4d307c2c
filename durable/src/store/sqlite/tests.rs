use super::*;
use crate::store::conformance;
use crate::store::IfExists;
use chronopool::MissedRuns;

fn fresh(dir: &tempfile::TempDir, n: &mut usize) -> Box<dyn Conn> {
    *n += 1;
    SqliteStore::open(&dir.path().join(format!("jobs-{n}.db")))
        .unwrap()
        .1
}

#[test]
fn the_protocol_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    conformance::all(|| fresh(&dir, &mut n));
}

/// A file written by version 1 (milliseconds, numbered states, the version
/// in `user_version`) migrates with its jobs: times in microseconds,
/// periods too, states by name.
#[test]
fn a_version_1_file_is_migrated_with_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let c = Connection::open(&path).unwrap();
    c.execute_batch(&format!(
        "{} PRAGMA user_version = 1;
         INSERT INTO chronopool_jobs (key, name, payload, recurrence, next_fire, state, misfire)
             VALUES ('old', 'job', x'01', 'every 1500', 5, 0, 2),
                    ('dead', 'job', x'02', 'once', 7, 2, 0);",
        MIGRATIONS[0]
    ))
    .unwrap();
    drop(c);
    let (_, mut conn) = SqliteStore::open(&path).unwrap();
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
            MissedRuns::Burst
        )
    );
    assert_eq!(conn.get("dead").unwrap().unwrap().state, JobState::Dead);
    let version: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT version FROM chronopool_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn the_schema_survives_a_reopen_and_refuses_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let (_, mut conn) = SqliteStore::open(&path).unwrap();
    conn.upsert(&[NewJob {
        key: "kept".into(),
        name: "job".into(),
        payload: vec![],
        recurrence: "once".into(),
        next_fire: 1,
        missed: MissedRuns::Skip,
        catch_up: None,
        if_exists: IfExists::Replace,
    }])
    .unwrap();
    drop(conn);
    let (_, mut reopened) = SqliteStore::open(&path).unwrap();
    assert!(reopened.get("kept").unwrap().is_some());
    drop(reopened);
    Connection::open(&path)
        .unwrap()
        .execute("UPDATE chronopool_schema SET version = version + 1", [])
        .unwrap();
    let e = SqliteStore::open(&path).err().unwrap();
    assert!(e.to_string().contains("newer than this crate's"), "{e}");
    assert!(!e.is_transient());
}

/// Many schedulers open one new file at once: every one succeeds, and the
/// schema is made once.
#[test]
fn concurrent_first_opens_all_succeed() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("jobs-{round}.db"));
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            let opens: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        SqliteStore::open(&path).map(drop)
                    })
                })
                .collect();
            for open in opens {
                open.join().unwrap().unwrap();
            }
        });
    }
}

/// The file, its journal and its shared memory are its owner's only.
#[cfg(unix)]
#[test]
fn the_files_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let (_, mut conn) = SqliteStore::open(&path).unwrap();
    conn.upsert(&[NewJob {
        key: "k".into(),
        name: "job".into(),
        payload: vec![],
        recurrence: "once".into(),
        next_fire: 1,
        missed: MissedRuns::Skip,
        catch_up: None,
        if_exists: IfExists::Replace,
    }])
    .unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{}{suffix}", path.display());
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file}: {mode:o}");
    }
}

/// A busy file is a transient error with SQLite's code; a directory is not
/// a database, and says so.
#[test]
fn errors_keep_their_code_and_cause() {
    let dir = tempfile::tempdir().unwrap();
    let e = SqliteStore::open(dir.path()).err().unwrap();
    assert_eq!(e.code(), Some("SQLITE_CANTOPEN"));
    assert!(!e.is_transient());
    assert!(std::error::Error::source(&e).is_some());
    let path = dir.path().join("jobs.db");
    let (_, mut conn) = SqliteStore::open(&path).unwrap();
    let locker = Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = std::time::Instant::now();
    let e = conn
        .clean(&crate::store::Retention {
            done_before: 0,
            dead_before: 0,
            runs_before: 0,
        })
        .unwrap_err();
    assert!(started.elapsed() >= BUSY_TIMEOUT, "it waited for the lock");
    assert_eq!(e.code(), Some("SQLITE_BUSY"));
    assert!(e.is_transient());
}

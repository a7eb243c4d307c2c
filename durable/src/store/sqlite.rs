//! [`SqliteStore`]: durable jobs in one SQLite file (the bundled SQLite:
//! nothing to install), for one process or several on one machine.
//!
//! One connection behind a lock: SQLite runs one writer at a time anyway,
//! and every operation of the protocol (`store/mod.rs`) is one statement,
//! so each is atomic on its own. The file is in WAL mode, so readers in
//! other processes do not block the writer, and waits up to 5 s for a lock
//! another process holds.
//!
//! The schema is versioned with `PRAGMA user_version`: [`SqliteStore::open`]
//! creates it, or migrates an older one step by step.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::{Due, Finish, JobState, Row, Store};
use crate::error::DurableError;
use crate::schedule::Misfire;

/// The schema's version: what `user_version` says once migrated.
const SCHEMA_VERSION: i64 = 2;

/// Each migration, from the version before it: `MIGRATIONS[v]` takes a
/// file at version `v` to `v + 1`.
const MIGRATIONS: [&str; 2] = [
    "CREATE TABLE chronopool_jobs (
        key         TEXT PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        payload     BLOB NOT NULL,
        recurrence  TEXT NOT NULL,
        next_fire   INTEGER NOT NULL,
        state       INTEGER NOT NULL,
        attempt     INTEGER NOT NULL DEFAULT 0,
        misfire     INTEGER NOT NULL DEFAULT 0,
        owner       TEXT,
        lease_until INTEGER,
        last_error  TEXT
    );
    CREATE INDEX chronopool_jobs_due ON chronopool_jobs (state, next_fire);
    CREATE INDEX chronopool_jobs_lease ON chronopool_jobs (state, lease_until);",
    // 2: done jobs, and when a job became done or dead (for retention).
    "ALTER TABLE chronopool_jobs ADD COLUMN finished_at INTEGER",
];

/// The columns of a [`Row`], in `row_of`'s order.
const COLUMNS: &str =
    "key, name, payload, recurrence, next_fire, state, attempt, misfire, last_error";

/// Durable jobs in a SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    connection: Mutex<Connection>,
}

impl SqliteStore {
    /// Opens (creating it if need be) the store in the file at `path`, and
    /// brings its schema to this version's.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the file cannot be opened or migrated,
    /// or was written by a newer version of this crate.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, DurableError> {
        let connection = Connection::open(path)?;
        connection.busy_timeout(Duration::from_secs(5))?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "NORMAL")?;
        migrate(&connection)?;
        Ok(SqliteStore {
            connection: Mutex::new(connection),
        })
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, DurableError> {
        let connection = self
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(f(&connection)?)
    }
}

/// Brings the schema of `connection` to [`SCHEMA_VERSION`], one migration
/// per version, each in a transaction with its version bump.
fn migrate(connection: &Connection) -> Result<(), DurableError> {
    let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(DurableError::Store(format!(
            "the store's schema is version {version}, newer than this crate's {SCHEMA_VERSION}"
        )));
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        connection.execute_batch(&format!(
            "BEGIN IMMEDIATE; {migration}; PRAGMA user_version = {}; COMMIT;",
            from + 1
        ))?;
    }
    Ok(())
}

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        key: r.get(0)?,
        name: r.get(1)?,
        payload: r.get(2)?,
        recurrence: r.get(3)?,
        next_fire: r.get(4)?,
        state: JobState::from_code(r.get(5)?),
        attempt: r.get(6)?,
        misfire: Misfire::from_code(r.get(7)?),
        last_error: r.get(8)?,
    })
}

/// One run's finish (`Store::finish`), in the caller's transaction.
fn finish_one(c: &Connection, key: &str, owner: &str, finish: &Finish) -> rusqlite::Result<bool> {
    const MINE: &str = "WHERE key = ?1 AND owner = ?2 AND state = 1";
    let changed = match finish {
        Finish::Done { keep: false, .. } => c
            .prepare_cached(&format!("DELETE FROM chronopool_jobs {MINE}"))?
            .execute(params![key, owner])?,
        Finish::Done { at, keep: true } => c
            .prepare_cached(&format!(
                "UPDATE chronopool_jobs SET state = 3, owner = NULL,
                             lease_until = NULL, last_error = NULL, finished_at = ?3 {MINE}"
            ))?
            .execute(params![key, owner, at])?,
        Finish::Next { next_fire } => c
            .prepare_cached(&format!(
                "UPDATE chronopool_jobs SET state = 0, next_fire = ?3, attempt = 0,
                             owner = NULL, lease_until = NULL, last_error = NULL {MINE}"
            ))?
            .execute(params![key, owner, next_fire])?,
        Finish::Retry {
            next_fire,
            error,
            uncount,
        } => c
            .prepare_cached(&format!(
                "UPDATE chronopool_jobs SET state = 0, next_fire = ?3,
                             attempt = max(attempt - ?5, 0), owner = NULL,
                             lease_until = NULL, last_error = ?4 {MINE}"
            ))?
            .execute(params![key, owner, next_fire, error, uncount])?,
        Finish::Dead { error, at } => c
            .prepare_cached(&format!(
                "UPDATE chronopool_jobs SET state = 2, owner = NULL,
                             lease_until = NULL, last_error = ?3, finished_at = ?4 {MINE}"
            ))?
            .execute(params![key, owner, error, at])?,
    };
    Ok(changed == 1)
}

impl Store for SqliteStore {
    fn upsert(&self, rows: &[Row]) -> Result<(), DurableError> {
        self.with(|c| {
            let tx = c.unchecked_transaction()?;
            {
                let mut statement = tx.prepare_cached(
                    "INSERT INTO chronopool_jobs
                         (key, name, payload, recurrence, next_fire, state, attempt, misfire)
                     VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ?6)
                     ON CONFLICT (key) DO UPDATE SET
                         name = excluded.name, payload = excluded.payload,
                         recurrence = excluded.recurrence, next_fire = excluded.next_fire,
                         state = 0, attempt = 0, misfire = excluded.misfire,
                         owner = NULL, lease_until = NULL, last_error = NULL,
                         finished_at = NULL",
                )?;
                for row in rows {
                    statement.execute(params![
                        row.key,
                        row.name,
                        row.payload,
                        row.recurrence,
                        row.next_fire,
                        row.misfire.code(),
                    ])?;
                }
            }
            tx.commit()
        })
    }

    fn due(&self, until: i64, owner: &str, limit: usize) -> Result<Vec<Due>, DurableError> {
        self.with(|c| {
            let mut statement = c.prepare_cached(
                "SELECT key, name, next_fire, 0 FROM chronopool_jobs
                     WHERE state = 0 AND next_fire <= ?1
                 UNION ALL
                 SELECT key, name, lease_until + 1, 1 FROM chronopool_jobs
                     WHERE state = 1 AND lease_until < ?1 AND owner <> ?2
                 ORDER BY 3
                 LIMIT ?3",
            )?;
            let rows = statement.query_map(params![until, owner, limit as i64], |r| {
                Ok(Due {
                    key: r.get(0)?,
                    name: r.get(1)?,
                    fire: r.get(2)?,
                    expired: r.get(3)?,
                })
            })?;
            rows.collect()
        })
    }

    fn claim(
        &self,
        keys: &[String],
        owner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<Vec<Row>, DurableError> {
        self.with(|c| {
            let tx = c.unchecked_transaction()?;
            let mut claimed = Vec::with_capacity(keys.len());
            {
                let mut statement = tx.prepare_cached(&format!(
                    "UPDATE chronopool_jobs
                         SET state = 1, owner = ?2, lease_until = ?4, attempt = attempt + 1
                     WHERE key = ?1
                       AND ((state = 0 AND next_fire <= ?3) OR (state = 1 AND lease_until < ?3))
                     RETURNING {COLUMNS}"
                ))?;
                for key in keys {
                    if let Some(row) = statement
                        .query_row(params![key, owner, now, lease_until], row_of)
                        .optional()?
                    {
                        claimed.push(row);
                    }
                }
            }
            tx.commit()?;
            Ok(claimed)
        })
    }

    fn renew(&self, keys: &[String], owner: &str, lease_until: i64) -> Result<usize, DurableError> {
        self.with(|c| {
            let tx = c.unchecked_transaction()?;
            let mut renewed = 0;
            {
                let mut statement = tx.prepare_cached(
                    "UPDATE chronopool_jobs SET lease_until = ?3
                     WHERE key = ?1 AND owner = ?2 AND state = 1",
                )?;
                for key in keys {
                    renewed += statement.execute(params![key, owner, lease_until])?;
                }
            }
            tx.commit()?;
            Ok(renewed)
        })
    }

    fn finish(&self, owner: &str, runs: &[(String, Finish)]) -> Result<Vec<bool>, DurableError> {
        self.with(|c| {
            let tx = c.unchecked_transaction()?;
            let stored = runs
                .iter()
                .map(|(key, finish)| finish_one(&tx, key, owner, finish))
                .collect::<rusqlite::Result<Vec<bool>>>()?;
            tx.commit()?;
            Ok(stored)
        })
    }

    fn get(&self, key: &str) -> Result<Option<Row>, DurableError> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM chronopool_jobs WHERE key = ?1"
            ))?
            .query_row(params![key], row_of)
            .optional()
        })
    }

    fn list(&self, state: JobState) -> Result<Vec<Row>, DurableError> {
        self.with(|c| {
            let mut statement = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM chronopool_jobs WHERE state = ?1 ORDER BY key"
            ))?;
            let rows = statement.query_map(params![state.code()], row_of)?;
            rows.collect()
        })
    }

    fn delete(&self, key: &str) -> Result<bool, DurableError> {
        self.with(|c| {
            c.execute("DELETE FROM chronopool_jobs WHERE key = ?1", params![key])
                .map(|n| n == 1)
        })
    }

    fn revive(&self, key: &str, now: i64) -> Result<bool, DurableError> {
        self.with(|c| {
            c.execute(
                "UPDATE chronopool_jobs SET state = 0, next_fire = ?2, attempt = 0,
                     finished_at = NULL
                 WHERE key = ?1 AND state = 2",
                params![key, now],
            )
            .map(|n| n == 1)
        })
    }

    fn clean(&self, done_before: i64, dead_before: i64) -> Result<u64, DurableError> {
        self.with(|c| {
            c.prepare_cached(
                "DELETE FROM chronopool_jobs
                 WHERE (state = 3 AND finished_at < ?1) OR (state = 2 AND finished_at < ?2)",
            )?
            .execute(params![done_before, dead_before])
            .map(|n| n as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("jobs.db")).unwrap();
        (dir, store)
    }

    fn due(key: &str, fire: i64) -> Due {
        Due {
            key: key.into(),
            name: "job".into(),
            fire,
            expired: false,
        }
    }

    /// One claim, as the scheduler's batches do it for a batch of one.
    fn claim1(
        store: &SqliteStore,
        key: &str,
        owner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<Option<Row>, DurableError> {
        let mut rows = store.claim(&[key.to_owned()], owner, now, lease_until)?;
        Ok(rows.pop())
    }

    fn finish1(
        store: &SqliteStore,
        key: &str,
        owner: &str,
        finish: &Finish,
    ) -> Result<bool, DurableError> {
        Ok(store.finish(owner, &[(key.to_owned(), finish.clone())])?[0])
    }

    const DONE: Finish = Finish::Done { at: 0, keep: false };

    fn row(key: &str, next_fire: i64) -> Row {
        Row {
            key: key.into(),
            name: "job".into(),
            payload: vec![1, 2, 3],
            recurrence: "once".into(),
            next_fire,
            state: JobState::Scheduled,
            attempt: 0,
            misfire: Misfire::RunOnce,
            last_error: None,
        }
    }

    #[test]
    fn one_claim_wins_and_a_finished_run_is_the_owners_only() {
        let (_dir, store) = store();
        store.upsert(&[row("a", 100)]).unwrap();
        assert!(
            claim1(&store, "a", "p1", 99, 1000).unwrap().is_none(),
            "not due yet"
        );
        let claimed = claim1(&store, "a", "p1", 100, 1000).unwrap().unwrap();
        assert_eq!((claimed.attempt, claimed.state), (1, JobState::Running));
        assert!(
            claim1(&store, "a", "p2", 500, 1500).unwrap().is_none(),
            "leased"
        );
        // The lease expires: another process takes it over.
        let taken = claim1(&store, "a", "p2", 1001, 2000).unwrap().unwrap();
        assert_eq!(taken.attempt, 2);
        assert!(
            !finish1(&store, "a", "p1", &DONE).unwrap(),
            "no longer p1's"
        );
        assert!(finish1(&store, "a", "p2", &DONE).unwrap());
        assert!(store.get("a").unwrap().is_none());
    }

    #[test]
    fn scheduling_a_key_again_replaces_its_job() {
        let (_dir, store) = store();
        store.upsert(&[row("a", 100)]).unwrap();
        claim1(&store, "a", "p1", 100, 1000).unwrap().unwrap();
        store.upsert(&[row("a", 300)]).unwrap();
        let again = store.get("a").unwrap().unwrap();
        assert_eq!(
            (again.next_fire, again.state, again.attempt),
            (300, JobState::Scheduled, 0)
        );
        assert!(
            !finish1(&store, "a", "p1", &DONE).unwrap(),
            "the old run finishes nothing"
        );
        assert_eq!(store.due(1000, "p", 10).unwrap(), [due("a", 300)]);
    }

    #[test]
    fn retries_dead_jobs_and_revival() {
        let (_dir, store) = store();
        store.upsert(&[row("a", 0)]).unwrap();
        claim1(&store, "a", "p", 0, 10).unwrap().unwrap();
        let retry = Finish::Retry {
            next_fire: 50,
            error: "boom".into(),
            uncount: 0,
        };
        assert!(finish1(&store, "a", "p", &retry).unwrap());
        let waiting = store.get("a").unwrap().unwrap();
        assert_eq!(
            (waiting.attempt, waiting.last_error.as_deref()),
            (1, Some("boom"))
        );
        claim1(&store, "a", "p", 50, 60).unwrap().unwrap();
        assert!(finish1(
            &store,
            "a",
            "p",
            &Finish::Dead {
                error: "boom again".into(),
                at: 60,
            }
        )
        .unwrap());
        assert_eq!(store.list(JobState::Dead).unwrap().len(), 1);
        assert!(
            store.due(i64::MAX, "q", 10).unwrap().is_empty(),
            "the dead do not fire"
        );
        assert!(store.revive("a", 70).unwrap());
        assert_eq!(store.due(100, "q", 10).unwrap(), [due("a", 70)]);
    }

    #[test]
    fn a_version_1_file_is_migrated_with_its_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(&format!(
            "{}; PRAGMA user_version = 1;
             INSERT INTO chronopool_jobs (key, name, payload, recurrence, next_fire, state)
                 VALUES ('old', 'job', x'01', 'once', 5, 0);",
            MIGRATIONS[0]
        ))
        .unwrap();
        drop(c);
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.get("old").unwrap().unwrap().next_fire, 5);
        claim1(&store, "old", "p", 5, 10).unwrap().unwrap();
        let done = Finish::Done { at: 6, keep: true };
        assert!(finish1(&store, "old", "p", &done).unwrap());
        assert_eq!(store.list(JobState::Done).unwrap().len(), 1);
        assert_eq!(store.clean(7, 0).unwrap(), 1, "finished_at, from version 2");
        let version: i64 = store
            .with(|c| c.pragma_query_value(None, "user_version", |r| r.get(0)))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn the_schema_survives_a_reopen_and_refuses_a_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        SqliteStore::open(&path)
            .unwrap()
            .upsert(&[row("kept", 1)])
            .unwrap();
        let reopened = SqliteStore::open(&path).unwrap();
        assert!(reopened.get("kept").unwrap().is_some());
        drop(reopened);
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(c);
        assert!(SqliteStore::open(&path).is_err());
    }
}

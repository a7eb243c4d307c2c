//! [`PgStore`]: durable jobs in PostgreSQL, for several processes that
//! share one schedule.
//!
//! Every operation of the protocol (`store/mod.rs`) is one statement, so
//! each is atomic on its own. A claim is an `UPDATE … RETURNING` of the
//! rows a `SELECT … FOR UPDATE SKIP LOCKED` found due: of two processes
//! that claim one row at once, one locks it and the other skips it at once
//! instead of waiting for the first's commit. The batch's keys are joined
//! to the table and the due test is a `CASE` no index serves, so each key
//! is a primary-key lookup: a range scan of the due index would walk the
//! entries every claimed row left behind until a vacuum. A batch of
//! schedules is one `INSERT … SELECT FROM unnest(arrays)`: one round trip.
//! The times are the processes' own clocks (in milliseconds
//! since the epoch): keep them synchronised, as Quartz and db-scheduler ask.
//!
//! Two connections: one for the runs (claims, renewals, finishes), one for
//! the rest, so that a batch of schedules or a poll never holds up the jobs
//! falling due.
//!
//! **A connection that goes away** (the server restarted, the network
//! dropped) is opened again, with a back-off from 10 ms doubling to 1 s,
//! for up to about 10 s, and the statement sent again. A statement whose
//! reply was lost may have been applied: sent again, a claim then finds
//! the job already running (it runs once its lease expires), and a finish
//! finds the run no longer its (it did finish). Nothing acknowledged is
//! lost: `schedule` returns only once its statement committed.
//!
//! The schema is versioned in `chronopool_schema`; [`PgStore::connect`]
//! migrates it under a transaction-scoped advisory lock, so that processes
//! that start together migrate once.

use std::sync::Mutex;
use std::time::Duration;

use postgres::{Client, NoTls};

use super::{Due, Finish, JobState, Row, Store};
use crate::error::DurableError;
use crate::schedule::Misfire;

/// The schema's version once migrated.
const SCHEMA_VERSION: i64 = 2;

/// `MIGRATIONS[v]` takes the schema from version `v` to `v + 1`.
const MIGRATIONS: [&str; 2] = [
    "CREATE TABLE chronopool_jobs (
        key         TEXT PRIMARY KEY,
        name        TEXT NOT NULL,
        payload     BYTEA NOT NULL,
        recurrence  TEXT NOT NULL,
        next_fire   BIGINT NOT NULL,
        state       BIGINT NOT NULL,
        attempt     BIGINT NOT NULL DEFAULT 0,
        misfire     BIGINT NOT NULL DEFAULT 0,
        owner       TEXT,
        lease_until BIGINT,
        last_error  TEXT
    );
    CREATE INDEX chronopool_jobs_due ON chronopool_jobs (state, next_fire);
    CREATE INDEX chronopool_jobs_lease ON chronopool_jobs (state, lease_until);",
    // 2: done jobs, and when a job became done or dead (for retention).
    "ALTER TABLE chronopool_jobs ADD COLUMN finished_at BIGINT",
];

/// An arbitrary key for the migration's advisory lock.
const MIGRATION_LOCK: i64 = 0x6368_726f_6e6f;

/// The columns of a [`Row`], in `row_of`'s order.
const COLUMNS: &str =
    "key, name, payload, recurrence, next_fire, state, attempt, misfire, last_error";

/// How long a statement keeps trying to reconnect before it fails.
const RECONNECT_FOR: Duration = Duration::from_secs(10);

/// Durable jobs in a PostgreSQL database.
pub struct PgStore {
    params: String,
    /// The connection of the runs: claims, renewals, finishes.
    runs: Mutex<Option<Client>>,
    /// The connection of the rest: schedules, polls, inspection, cleaning.
    other: Mutex<Option<Client>>,
}

/// Which connection a statement goes on. Two, so that a batch of
/// schedules or a poll (milliseconds to hundreds of milliseconds on a big
/// table) never holds up the claims and finishes of jobs falling due.
#[derive(Clone, Copy, Debug)]
enum Lane {
    Runs,
    Other,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database `params` names (a libpq connection string,
    /// `"host=127.0.0.1 port=5432 user=app dbname=app"`) and brings its
    /// schema to this version's.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the database cannot be reached or
    /// migrated, or its schema is newer than this crate's.
    pub fn connect(params: &str) -> Result<Self, DurableError> {
        let store = PgStore {
            params: params.to_owned(),
            runs: Mutex::new(None),
            other: Mutex::new(None),
        };
        store
            .with(Lane::Other, migrate)?
            .map_err(DurableError::Store)?;
        Ok(store)
    }

    /// Runs `f` on `lane`'s connection, opening it (again) if need be; a
    /// statement that failed because the connection closed is sent again
    /// on a new one (module doc).
    fn with<R>(
        &self,
        lane: Lane,
        mut f: impl FnMut(&mut Client) -> Result<R, postgres::Error>,
    ) -> Result<R, DurableError> {
        let connection = match lane {
            Lane::Runs => &self.runs,
            Lane::Other => &self.other,
        };
        let mut slot = connection.lock().unwrap_or_else(|p| p.into_inner());
        let give_up = std::time::Instant::now() + RECONNECT_FOR;
        let mut backoff = Duration::from_millis(10);
        loop {
            if slot.as_ref().is_none_or(Client::is_closed) {
                match Client::connect(&self.params, NoTls) {
                    Ok(client) => *slot = Some(client),
                    Err(_) if std::time::Instant::now() < give_up => {
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                        continue;
                    }
                    Err(e) => return Err(DurableError::Store(e.to_string())),
                }
            }
            let client = slot.as_mut().expect("connected above");
            match f(client) {
                Ok(value) => return Ok(value),
                Err(e) if connection_lost(client, &e) && std::time::Instant::now() < give_up => {
                    *slot = None;
                }
                Err(e) => return Err(DurableError::Store(e.to_string())),
            }
        }
    }
}

/// True if `e` means the connection is gone (closed, an I/O error: any
/// error the server did not report, or one where it says it is shutting
/// the connection down: SQLSTATE class 08, or 57P01-57P03): worth a new
/// one.
fn connection_lost(client: &Client, e: &postgres::Error) -> bool {
    client.is_closed()
        || e.is_closed()
        || e.as_db_error().is_none()
        || e.code().is_some_and(|code| {
            let code = code.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        })
}

/// Brings the schema to [`SCHEMA_VERSION`] (module doc); `Ok(Err(..))`
/// for a schema newer than this crate's (nothing migrated).
fn migrate(client: &mut Client) -> Result<Result<(), String>, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS chronopool_schema (version BIGINT NOT NULL)")?;
    let version: i64 = tx
        .query_opt("SELECT version FROM chronopool_schema", &[])?
        .map_or(0, |row| row.get(0));
    if version > SCHEMA_VERSION {
        tx.rollback()?;
        return Ok(Err(format!(
            "the store's schema is version {version}, newer than this crate's {SCHEMA_VERSION}"
        )));
    }
    for migration in MIGRATIONS.iter().skip(version as usize) {
        tx.batch_execute(migration)?;
    }
    tx.execute("DELETE FROM chronopool_schema", &[])?;
    tx.execute(
        "INSERT INTO chronopool_schema (version) VALUES ($1)",
        &[&SCHEMA_VERSION],
    )?;
    tx.commit().map(Ok)
}

fn row_of(r: &postgres::Row) -> Row {
    Row {
        key: r.get(0),
        name: r.get(1),
        payload: r.get(2),
        recurrence: r.get(3),
        next_fire: r.get(4),
        state: JobState::from_code(r.get(5)),
        attempt: u32::try_from(r.get::<_, i64>(6)).unwrap_or(u32::MAX),
        misfire: Misfire::from_code(r.get(7)),
        last_error: r.get(8),
    }
}

impl Store for PgStore {
    fn upsert(&self, rows: &[Row]) -> Result<(), DurableError> {
        // One statement for the batch (arrays, unnested): one round trip.
        // A key twice in one statement is an error in PostgreSQL, so the
        // later row of a key is the one sent.
        let mut latest: std::collections::HashMap<&str, usize> = Default::default();
        for (i, row) in rows.iter().enumerate() {
            latest.insert(&row.key, i);
        }
        let mut kept: Vec<usize> = latest.into_values().collect();
        kept.sort_unstable();
        let column = |f: &dyn Fn(&Row) -> String| -> Vec<String> {
            kept.iter().map(|&i| f(&rows[i])).collect()
        };
        let keys = column(&|r| r.key.clone());
        let names = column(&|r| r.name.clone());
        let recurrences = column(&|r| r.recurrence.clone());
        let payloads: Vec<&[u8]> = kept.iter().map(|&i| &rows[i].payload[..]).collect();
        let fires: Vec<i64> = kept.iter().map(|&i| rows[i].next_fire).collect();
        let misfires: Vec<i64> = kept.iter().map(|&i| rows[i].misfire.code()).collect();
        self.with(Lane::Other, |c| {
            c.execute(
                "INSERT INTO chronopool_jobs
                     (key, name, payload, recurrence, next_fire, misfire, state, attempt)
                 SELECT *, 0, 0 FROM unnest($1::TEXT[], $2::TEXT[], $3::BYTEA[],
                                            $4::TEXT[], $5::BIGINT[], $6::BIGINT[])
                 ON CONFLICT (key) DO UPDATE SET
                     name = excluded.name, payload = excluded.payload,
                     recurrence = excluded.recurrence, next_fire = excluded.next_fire,
                     state = 0, attempt = 0, misfire = excluded.misfire,
                     owner = NULL, lease_until = NULL, last_error = NULL,
                     finished_at = NULL",
                &[&keys, &names, &payloads, &recurrences, &fires, &misfires],
            )
            .map(drop)
        })
    }

    fn due(&self, until: i64, owner: &str, limit: usize) -> Result<Vec<Due>, DurableError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(Lane::Other, |c| {
            let rows = c.query(
                "(SELECT key, name, next_fire AS fire, false FROM chronopool_jobs
                     WHERE state = 0 AND next_fire <= $1)
                 UNION ALL
                 (SELECT key, name, lease_until + 1, true FROM chronopool_jobs
                     WHERE state = 1 AND lease_until < $1 AND owner <> $2)
                 ORDER BY fire
                 LIMIT $3",
                &[&until, &owner, &limit],
            )?;
            Ok(rows
                .iter()
                .map(|r| Due {
                    key: r.get(0),
                    name: r.get(1),
                    fire: r.get(2),
                    expired: r.get(3),
                })
                .collect())
        })
    }

    fn claim(
        &self,
        keys: &[String],
        owner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<Vec<Row>, DurableError> {
        self.with(Lane::Runs, |c| {
            let rows = c.query(
                &format!(
                    "UPDATE chronopool_jobs
                         SET state = 1, owner = $2, lease_until = $4, attempt = attempt + 1
                     WHERE key IN (
                         SELECT j.key FROM unnest($1::TEXT[]) AS k(key)
                             JOIN chronopool_jobs AS j ON j.key = k.key
                         WHERE CASE j.state WHEN 0 THEN j.next_fire <= $3
                                            WHEN 1 THEN j.lease_until < $3
                                            ELSE false END
                         FOR UPDATE OF j SKIP LOCKED)
                     RETURNING {COLUMNS}"
                ),
                &[&keys, &owner, &now, &lease_until],
            )?;
            Ok(rows.iter().map(row_of).collect())
        })
    }

    fn renew(&self, keys: &[String], owner: &str, lease_until: i64) -> Result<usize, DurableError> {
        self.with(Lane::Runs, |c| {
            c.execute(
                "UPDATE chronopool_jobs AS j SET lease_until = $3
                 FROM unnest($1::TEXT[]) AS k(key)
                 WHERE j.key = k.key AND j.owner = $2 AND j.state = 1",
                &[&keys, &owner, &lease_until],
            )
            .map(|n| n as usize)
        })
    }

    fn finish(&self, owner: &str, runs: &[(String, Finish)]) -> Result<Vec<bool>, DurableError> {
        // Two statements at most: a DELETE for the one-shot jobs that
        // succeeded, and one UPDATE from arrays (unnest) for the others,
        // each row with the values its `Finish` gives. A key twice in one
        // UPDATE would be updated once, so a batch is sent in rounds in
        // which each key is once.
        let mut stored = vec![false; runs.len()];
        let mut rounds: Vec<Vec<usize>> = Vec::new();
        let mut round_of: std::collections::HashMap<&str, usize> = Default::default();
        for (i, (key, _)) in runs.iter().enumerate() {
            let round = round_of.entry(key).and_modify(|r| *r += 1).or_insert(0);
            if rounds.len() <= *round {
                rounds.push(Vec::new());
            }
            rounds[*round].push(i);
        }
        for round in rounds {
            let (deletes, updates): (Vec<usize>, Vec<usize>) = round
                .into_iter()
                .partition(|&i| matches!(runs[i].1, Finish::Done { keep: false, .. }));
            let keys_of =
                |of: &[usize]| -> Vec<String> { of.iter().map(|&i| runs[i].0.clone()).collect() };
            let mut done: std::collections::HashSet<String> = Default::default();
            if !deletes.is_empty() {
                let keys = keys_of(&deletes);
                let rows = self.with(Lane::Runs, |c| {
                    c.query(
                        "DELETE FROM chronopool_jobs AS j USING unnest($1::TEXT[]) AS k(key)
                         WHERE j.key = k.key AND j.owner = $2 AND j.state = 1
                         RETURNING j.key",
                        &[&keys, &owner],
                    )
                })?;
                done.extend(rows.iter().map(|r| r.get::<_, String>(0)));
            }
            if !updates.is_empty() {
                let keys = keys_of(&updates);
                let mut states = Vec::new();
                let mut fires: Vec<Option<i64>> = Vec::new();
                let mut resets = Vec::new();
                let mut uncounts = Vec::new();
                let mut errors: Vec<Option<&str>> = Vec::new();
                let mut finished: Vec<Option<i64>> = Vec::new();
                for &i in &updates {
                    let (state, fire, reset, uncount, error, at) = match &runs[i].1 {
                        Finish::Done { at, .. } => (3, None, false, 0, None, Some(*at)),
                        Finish::Next { next_fire } => (0, Some(*next_fire), true, 0, None, None),
                        Finish::Retry {
                            next_fire,
                            error,
                            uncount,
                        } => (
                            0,
                            Some(*next_fire),
                            false,
                            i64::from(*uncount),
                            Some(error.as_str()),
                            None,
                        ),
                        Finish::Dead { error, at } => {
                            (2, None, false, 0, Some(error.as_str()), Some(*at))
                        }
                    };
                    states.push(state as i64);
                    fires.push(fire);
                    resets.push(reset);
                    uncounts.push(uncount);
                    errors.push(error);
                    finished.push(at);
                }
                let rows = self.with(Lane::Runs, |c| {
                    c.query(
                        "UPDATE chronopool_jobs AS j SET
                             state = u.state,
                             next_fire = coalesce(u.next_fire, j.next_fire),
                             attempt = CASE WHEN u.reset THEN 0
                                            ELSE greatest(j.attempt - u.uncount, 0) END,
                             owner = NULL, lease_until = NULL,
                             last_error = u.error, finished_at = u.finished_at
                         FROM unnest($1::TEXT[], $2::BIGINT[], $3::BIGINT[], $4::BOOL[],
                                     $5::BIGINT[], $6::TEXT[], $7::BIGINT[])
                              AS u(key, state, next_fire, reset, uncount, error, finished_at)
                         WHERE j.key = u.key AND j.owner = $8 AND j.state = 1
                         RETURNING j.key",
                        &[
                            &keys, &states, &fires, &resets, &uncounts, &errors, &finished, &owner,
                        ],
                    )
                })?;
                done.extend(rows.iter().map(|r| r.get::<_, String>(0)));
            }
            for i in deletes.into_iter().chain(updates) {
                stored[i] = done.contains(&runs[i].0);
            }
        }
        Ok(stored)
    }

    fn get(&self, key: &str) -> Result<Option<Row>, DurableError> {
        self.with(Lane::Other, |c| {
            let row = c.query_opt(
                &format!("SELECT {COLUMNS} FROM chronopool_jobs WHERE key = $1"),
                &[&key],
            )?;
            Ok(row.as_ref().map(row_of))
        })
    }

    fn list(&self, state: JobState) -> Result<Vec<Row>, DurableError> {
        self.with(Lane::Other, |c| {
            let rows = c.query(
                &format!("SELECT {COLUMNS} FROM chronopool_jobs WHERE state = $1 ORDER BY key"),
                &[&state.code()],
            )?;
            Ok(rows.iter().map(row_of).collect())
        })
    }

    fn delete(&self, key: &str) -> Result<bool, DurableError> {
        self.with(Lane::Other, |c| {
            c.execute("DELETE FROM chronopool_jobs WHERE key = $1", &[&key])
                .map(|n| n == 1)
        })
    }

    fn revive(&self, key: &str, now: i64) -> Result<bool, DurableError> {
        self.with(Lane::Other, |c| {
            c.execute(
                "UPDATE chronopool_jobs SET state = 0, next_fire = $2, attempt = 0,
                     finished_at = NULL
                 WHERE key = $1 AND state = 2",
                &[&key, &now],
            )
            .map(|n| n == 1)
        })
    }

    fn clean(&self, done_before: i64, dead_before: i64) -> Result<u64, DurableError> {
        self.with(Lane::Other, |c| {
            c.execute(
                "DELETE FROM chronopool_jobs
                 WHERE (state = 3 AND finished_at < $1) OR (state = 2 AND finished_at < $2)",
                &[&done_before, &dead_before],
            )
        })
    }
}

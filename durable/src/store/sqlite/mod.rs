//! [`SqliteStore`]: durable jobs in one SQLite file (the bundled SQLite:
//! nothing to install), for one process or several on one machine.
//!
//! Each of a scheduler's loops has a connection of its own, and the API
//! one more: the file is in WAL mode, so readers never block the writer.
//! Writers of one file in one process take turns on a lock of this
//! module's ([`writers_of`]), so that they never meet SQLite's own: its
//! default busy handler sleeps up to 100 ms at a time, which put a second
//! of lateness under jobs falling due while batches were scheduled. A
//! writer of another process is waited for with short sleeps (20 µs
//! doubling to 1 ms), up to 5 s (then the operation fails as transient, and
//! the loop tries again). Commits are `synchronous = FULL`: a job whose
//! `schedule` returned survives a power cut, not only a crash of the
//! process.
//!
//! The file (and the `-wal` and `-shm` files SQLite makes beside it, which
//! take its permissions) is created readable by its owner only: jobs'
//! payloads are the application's data.
//!
//! The schema's version is in `chronopool_schema` (a file of versions 1
//! and 2, from before that table, kept it in `PRAGMA user_version`). The
//! migrations are the `.sql` files in `migrations/`, applied in one
//! `BEGIN IMMEDIATE` transaction that reads the version first: of several
//! schedulers that open a new file at once, the first migrates and the
//! others find it done.

use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use rusqlite::types::Value;
use rusqlite::vtab::array::Array;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::app_transaction::{EndedIn, Rows, RunToEnd, Statements};
use super::{
    Conn, Due, DueQuery, Exchange, Exchanged, Fence, Finish, JobState, ListQuery, NewJob,
    Retention, Role, Row, RunEnd, RunRow, Store, Stored,
};
use crate::error::StoreError;
use crate::owner::Owner;
use crate::schedule::{missed_name, missed_of};
use crate::time::Micros;

/// `MIGRATIONS[v]` takes a file at version `v` to `v + 1`.
const MIGRATIONS: [&str; 6] = [
    include_str!("migrations/0001_jobs.sql"),
    include_str!("migrations/0002_finished_at.sql"),
    include_str!("migrations/0003_fences_and_microseconds.sql"),
    include_str!("migrations/0004_replaced.sql"),
    include_str!("migrations/0005_control_and_history.sql"),
    include_str!("migrations/0006_occurrence.sql"),
];

/// The schema's version once migrated.
const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long a statement waits for another connection's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The columns of a [`Row`], in `row_of`'s order.
const COLUMNS: &str = "key, name, payload, recurrence, next_fire, state, attempt, missed, \
                       catch_up, last_error, owner_name, lease_until, paused, \
                       coalesce(occurrence, next_fire)";

/// A job that may be placed or claimed: not paused, nor its handler.
const NOT_PAUSED: &str = "paused = 0 AND name NOT IN (SELECT name FROM chronopool_paused_names)";

/// The fence of a run, as every finish and renewal matches it.
const FENCED: &str = "key = ?1 AND owner = ?2 AND run = ?3 AND state = 'running'";

/// One job's upsert (`Conn::upsert`): ?9 is its `IfExists` (`keep_same`,
/// `keep_time` or `replace`).
/// In `DO UPDATE`, a bare column is the stored row's, before the update.
/// A stored row is *live* when it is scheduled or running. `keep_same`
/// leaves a live row that is the same job untouched (the `WHERE`: nothing
/// is returned); `keep_time` keeps a live row's time, schedule and handler
/// and takes the payload (a running one-shot is marked `replaced` too:
/// its run has the old payload, so the job runs again, at once, after it);
/// otherwise the row is replaced, except that a running one keeps its run
/// (fence, lease, attempt) and is marked `replaced` (module doc of
/// `store`).
pub(crate) const UPSERT: &str = "
    INSERT INTO chronopool_jobs
        (key, name, payload, recurrence, next_fire, state, attempt, missed, catch_up, seq)
    VALUES (?1, ?2, ?3, ?4, ?5, 'scheduled', 0, ?6, ?7, ?8)
    ON CONFLICT (key) DO UPDATE SET
        seq = CASE WHEN ?9 = 'keep_time' AND state IN ('scheduled', 'running') THEN seq
                   ELSE excluded.seq END,
        name = CASE WHEN ?9 = 'keep_time' AND state IN ('scheduled', 'running') THEN name
                    ELSE excluded.name END,
        payload = excluded.payload,
        recurrence = CASE WHEN ?9 = 'keep_time' AND state IN ('scheduled', 'running')
                          THEN recurrence ELSE excluded.recurrence END,
        next_fire = CASE WHEN ?9 = 'keep_time' AND state IN ('scheduled', 'running')
                         THEN next_fire ELSE excluded.next_fire END,
        occurrence = CASE WHEN ?9 = 'keep_time' AND state IN ('scheduled', 'running')
                          THEN occurrence END,
        missed = CASE WHEN ?9 = 'keep_time' AND state IN ('scheduled', 'running') THEN missed
                      ELSE excluded.missed END,
        catch_up = CASE WHEN ?9 = 'keep_time' AND state IN ('scheduled', 'running')
                        THEN catch_up ELSE excluded.catch_up END,
        replaced = CASE WHEN state <> 'running' THEN 0
                        WHEN ?9 = 'keep_time' AND recurrence NOT LIKE 'once%' THEN replaced
                        ELSE 1 END,
        attempt = CASE WHEN state = 'running'
                         OR (?9 = 'keep_time' AND state = 'scheduled') THEN attempt
                       ELSE 0 END,
        last_error = CASE WHEN state = 'running'
                            OR (?9 = 'keep_time' AND state = 'scheduled') THEN last_error
                          ELSE NULL END,
        state = CASE WHEN state = 'running' THEN 'running' ELSE 'scheduled' END,
        owner = CASE WHEN state = 'running' THEN owner END,
        run = CASE WHEN state = 'running' THEN run END,
        owner_name = CASE WHEN state = 'running' THEN owner_name END,
        owner_lock = CASE WHEN state = 'running' THEN owner_lock END,
        lease_until = CASE WHEN state = 'running' THEN lease_until END,
        finished_at = NULL
    WHERE NOT (?9 = 'keep_same' AND state IN ('scheduled', 'running')
               AND name = excluded.name AND payload = excluded.payload
               AND recurrence = excluded.recurrence AND missed = excluded.missed
               AND catch_up IS excluded.catch_up)
    RETURNING key, name, next_fire, state";

/// Durable jobs in a SQLite file.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating it, readable by its owner only, if need be) the
    /// store in the file at `path`, brings its schema to this version's,
    /// and returns it with that first connection.
    #[cfg(test)]
    pub(crate) fn open(path: &Path) -> Result<(SqliteStore, Box<dyn Conn>), StoreError> {
        SqliteStore::open_migrating(path, true)
    }

    /// [`open`](Self::open), bringing an older schema to this version's
    /// only if `migrate` (else an error says so).
    pub(crate) fn open_migrating(
        path: &Path,
        migrate_allowed: bool,
    ) -> Result<(SqliteStore, Box<dyn Conn>), StoreError> {
        create_private(path)?;
        let writers = writers_of(path);
        let mut connection = connect(path)?;
        migrate(&mut connection, &writers, migrate_allowed)?;
        let store = SqliteStore {
            path: path.to_owned(),
        };
        let conn = SqliteConn {
            c: connection,
            writers,
            data_version: None,
        };
        Ok((store, Box::new(conn)))
    }
}

impl Store for SqliteStore {
    fn connect(&self, _role: Role<'_>) -> Result<Box<dyn Conn>, StoreError> {
        Ok(Box::new(SqliteConn {
            c: connect(&self.path)?,
            writers: writers_of(&self.path),
            data_version: None,
        }))
    }
}

/// Creates the file at `path`, mode 0600, if there is none.
fn create_private(path: &Path) -> Result<(), StoreError> {
    if path.exists() {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        // Another scheduler created it meanwhile.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::new(
            format!("cannot create {}: {e}", path.display()),
            Some(format!("{:?}", e.kind())),
            false,
            Some(Box::new(e)),
        )),
    }
}

/// The lock the writers of the file at `path` take turns on in this
/// process (module doc).
fn writers_of(path: &Path) -> Arc<Mutex<()>> {
    static FILES: OnceLock<Mutex<HashMap<PathBuf, Weak<Mutex<()>>>>> = OnceLock::new();
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let mut files = FILES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    files.retain(|_, w| w.strong_count() > 0);
    if let Some(writers) = files.get(&path).and_then(Weak::upgrade) {
        return writers;
    }
    let writers = Arc::new(Mutex::new(()));
    files.insert(path, Arc::downgrade(&writers));
    writers
}

/// SQLite's busy handler for a lock another process holds (module doc):
/// short sleeps, for up to [`BUSY_TIMEOUT`].
fn wait_for_lock(attempts: i32) -> bool {
    thread_local! {
        static SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    let since = SINCE.with(|s| {
        if attempts == 0 || s.get().is_none() {
            s.set(Some(now));
        }
        s.get().unwrap_or(now)
    });
    if now.duration_since(since) >= BUSY_TIMEOUT {
        return false;
    }
    let sleep = Duration::from_micros(20).saturating_mul(1 << attempts.clamp(0, 6));
    std::thread::sleep(sleep.min(Duration::from_millis(1)));
    true
}

/// A connection to the file, in WAL mode with full syncs.
fn connect(path: &Path) -> Result<Connection, StoreError> {
    let connection = Connection::open(path).map_err(store_error)?;
    connection
        .busy_handler(Some(wait_for_lock))
        .map_err(store_error)?;
    rusqlite::vtab::array::load_module(&connection).map_err(store_error)?;
    // Switching to WAL needs the file to itself for a moment: another
    // connection doing the same, or migrating, answers busy at once (the
    // busy handler is not asked), so it is tried again until the timeout.
    let give_up = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match connection.pragma_update(None, "journal_mode", "WAL") {
            Ok(()) => break,
            Err(e) if is_busy(&e) && std::time::Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(store_error(e)),
        }
    }
    connection
        .pragma_update(None, "synchronous", "FULL")
        .map_err(store_error)?;
    Ok(connection)
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// The schema's version as recorded, if the file has the table yet (a
/// read: it waits for no writer).
fn recorded_version(connection: &Connection) -> Result<Option<i64>, StoreError> {
    let has_table: bool = connection
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master
                            WHERE type = 'table' AND name = 'chronopool_schema')",
            [],
            |r| r.get(0),
        )
        .map_err(store_error)?;
    if !has_table {
        return Ok(None);
    }
    connection
        .query_row("SELECT version FROM chronopool_schema", [], |r| r.get(0))
        .optional()
        .map_err(store_error)
}

/// Brings the schema to [`SCHEMA_VERSION`] (module doc). A file already
/// there is only read: an open (a CLI's `list`, a service's start) takes
/// no write lock, and works beside a writer that holds one.
fn migrate(
    connection: &mut Connection,
    writers: &Mutex<()>,
    allowed: bool,
) -> Result<(), StoreError> {
    if recorded_version(connection)? == Some(SCHEMA_VERSION) {
        return Ok(());
    }
    let _turn = turn(writers);
    let tx = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(store_error)?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS chronopool_schema (version INTEGER NOT NULL)")
        .map_err(store_error)?;
    let recorded: Option<i64> = tx
        .query_row("SELECT version FROM chronopool_schema", [], |r| r.get(0))
        .optional()
        .map_err(store_error)?;
    let version = match recorded {
        Some(v) => v,
        // A file of version 1 or 2 kept it here; a new file has 0.
        None => tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(store_error)?,
    };
    if version > SCHEMA_VERSION {
        return Err(StoreError::other(format!(
            "the store's schema is version {version}, newer than this crate's {SCHEMA_VERSION}"
        )));
    }
    if version < SCHEMA_VERSION && !allowed {
        return Err(StoreError::other(format!(
            "the store's schema is version {version}, older than this crate's {SCHEMA_VERSION}, \
             and Config::migrate is off: start a service of this version on it first (its \
             start migrates the schema), or allow the migration"
        )));
    }
    for migration in MIGRATIONS.iter().skip(version.max(0) as usize) {
        tx.execute_batch(migration).map_err(store_error)?;
    }
    tx.execute("DELETE FROM chronopool_schema", [])
        .map_err(store_error)?;
    tx.execute(
        "INSERT INTO chronopool_schema (version) VALUES (?1)",
        params![SCHEMA_VERSION],
    )
    .map_err(store_error)?;
    tx.commit().map_err(store_error)
}

/// A rusqlite error as a [`StoreError`]: busy and locked are transient.
fn store_error(e: rusqlite::Error) -> StoreError {
    let code = e.sqlite_error_code().map(code_name);
    StoreError::new(e.to_string(), code, is_busy(&e), Some(Box::new(e)))
}

/// SQLite's name of a result code.
fn code_name(code: rusqlite::ErrorCode) -> String {
    use rusqlite::ErrorCode as E;
    let name = match code {
        E::InternalMalfunction => "SQLITE_INTERNAL",
        E::PermissionDenied => "SQLITE_PERM",
        E::OperationAborted => "SQLITE_ABORT",
        E::DatabaseBusy => "SQLITE_BUSY",
        E::DatabaseLocked => "SQLITE_LOCKED",
        E::OutOfMemory => "SQLITE_NOMEM",
        E::ReadOnly => "SQLITE_READONLY",
        E::OperationInterrupted => "SQLITE_INTERRUPT",
        E::SystemIoFailure => "SQLITE_IOERR",
        E::DatabaseCorrupt => "SQLITE_CORRUPT",
        E::NotFound => "SQLITE_NOTFOUND",
        E::DiskFull => "SQLITE_FULL",
        E::CannotOpen => "SQLITE_CANTOPEN",
        E::FileLockingProtocolFailed => "SQLITE_PROTOCOL",
        E::SchemaChanged => "SQLITE_SCHEMA",
        E::TooBig => "SQLITE_TOOBIG",
        E::ConstraintViolation => "SQLITE_CONSTRAINT",
        E::TypeMismatch => "SQLITE_MISMATCH",
        E::ApiMisuse => "SQLITE_MISUSE",
        E::NoLargeFileSupport => "SQLITE_NOLFS",
        E::AuthorizationForStatementDenied => "SQLITE_AUTH",
        E::ParameterOutOfRange => "SQLITE_RANGE",
        E::NotADatabase => "SQLITE_NOTADB",
        _ => "SQLITE_ERROR",
    };
    name.to_owned()
}

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let state: String = r.get(5)?;
    let missed: String = r.get(7)?;
    Ok(Row {
        key: r.get(0)?,
        name: r.get(1)?,
        payload: r.get(2)?,
        recurrence: r.get(3)?,
        next_fire: r.get(4)?,
        state: JobState::of_name(&state).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, Box::new(e))
        })?,
        // A value no `u32` holds (written by another tool) reads as spent,
        // as on PostgreSQL: the job ends dead instead of failing every
        // claim and listing that meets it.
        attempt: u32::try_from(r.get::<_, i64>(6)?).unwrap_or(u32::MAX),
        missed: missed_of(&missed),
        catch_up: r.get(8)?,
        last_error: r.get(9)?,
        owner_name: r.get(10)?,
        lease_until: r.get(11)?,
        paused: r.get(12)?,
        occurrence: r.get(13)?,
    })
}

/// One connection to the file.
struct SqliteConn {
    c: Connection,
    /// Its process's writers of the file take turns on this (module doc).
    writers: Arc<Mutex<()>>,
    /// `PRAGMA data_version` when [`Conn::changed`] last asked.
    data_version: Option<i64>,
}

/// The upsert of `jobs` (`Conn::upsert`), in the caller's transaction:
/// the jobs stored, as they now are.
fn upsert_rows(c: &Connection, jobs: &[NewJob]) -> rusqlite::Result<Vec<Stored>> {
    let jobs = super::latest_per_key(jobs);
    let mut stored = Vec::with_capacity(jobs.len());
    let mut statement = c.prepare_cached(UPSERT)?;
    let mut seq = draw_seq(c, jobs.len())?;
    for job in jobs {
        seq += 1;
        let mode = job.if_exists.sql_name();
        let params = params![
            job.key,
            job.name,
            job.payload,
            job.recurrence,
            job.next_fire,
            missed_name(job.missed),
            job.catch_up,
            seq,
            mode,
        ];
        let row = statement
            .query_row(params, |r| {
                Ok(Stored {
                    key: r.get(0)?,
                    name: r.get(1)?,
                    next_fire: r.get(2)?,
                    running: r.get::<_, String>(3)? == "running",
                })
            })
            .optional()?;
        stored.extend(row);
    }
    Ok(stored)
}

/// Jobs scheduled in the application's own transaction on the file
/// (`DurableScheduler::schedule_in`). Its writes take the file's write
/// lock until it commits, so the sequence numbers it draws are in the
/// order of the commits, and the poll loops of every process see its jobs
/// with their next look at the file's `data_version` after the commit.
///
/// A run ended in it (`JobContext::complete_in`) takes the write lock too,
/// until the commit: the run loop's next exchange waits for it.
impl Statements for rusqlite::Transaction<'_> {
    fn upsert_jobs(&mut self, jobs: Rows<'_>) -> Result<(), StoreError> {
        upsert_rows(self, jobs.0).map(drop).map_err(store_error)
    }

    fn end_run(&mut self, run: RunToEnd<'_>) -> Result<EndedIn, StoreError> {
        if let Some((now, keep)) = run.record_at {
            record_run(self, run.owner, run.fence, run.finish, false, now, keep)
                .map_err(store_error)?;
        }
        finish_one(self, run.owner, run.fence, run.finish)
            .map(EndedIn)
            .map_err(store_error)
    }
}

/// A run's end that deletes its row (`Finish::deletes`): `?1` key, `?2`
/// owner, `?3` run. A replaced row's run ends by [`END_SUPERSEDED`]
/// instead, whatever its outcome.
pub(crate) const END_DELETE: &str = "DELETE FROM chronopool_jobs
    WHERE key = ?1 AND owner = ?2 AND run = ?3 AND state = 'running' AND replaced = 0";

/// A run's end that keeps its row: the fence as in [`END_DELETE`], then
/// the [`Ending`](crate::store::Ending)'s values in its field order.
pub(crate) const END_UPDATE: &str = "UPDATE chronopool_jobs SET
        state = ?4, next_fire = coalesce(?5, next_fire),
        occurrence = CASE ?11 WHEN 'keep' THEN occurrence
                              WHEN 'retry' THEN coalesce(occurrence, next_fire) END,
        attempt = CASE WHEN ?6 THEN 0 ELSE max(attempt - ?7, 0) END,
        last_error = CASE WHEN ?9 THEN last_error ELSE ?8 END, finished_at = ?10,
        owner = NULL, run = NULL, owner_name = NULL, owner_lock = NULL, lease_until = NULL
    WHERE key = ?1 AND owner = ?2 AND run = ?3 AND state = 'running' AND replaced = 0";

/// The end of a run whose job was replaced during it (`Conn::upsert`):
/// the run ends, the new schedule stands, with a sequence number of its
/// own (`?4`) so that polls and other processes see it.
pub(crate) const END_SUPERSEDED: &str = "UPDATE chronopool_jobs SET
        state = 'scheduled', attempt = 0, replaced = 0, last_error = NULL, seq = ?4,
        owner = NULL, run = NULL, owner_name = NULL, owner_lock = NULL, lease_until = NULL
    WHERE key = ?1 AND owner = ?2 AND run = ?3 AND state = 'running' AND replaced = 1
    RETURNING name, next_fire";

/// One run's end (`Conn::exchange`, or the application's transaction), in
/// the caller's transaction.
fn finish_one(
    c: &Connection,
    owner: &str,
    fence: &Fence,
    finish: &Finish,
) -> rusqlite::Result<RunEnd> {
    let Fence { key, run } = fence;
    let changed = if finish.deletes() {
        c.prepare_cached(END_DELETE)?
            .execute(params![key, owner, run])?
    } else {
        let e = finish.ending();
        c.prepare_cached(END_UPDATE)?.execute(params![
            key,
            owner,
            run,
            e.state,
            e.next_fire,
            e.reset,
            e.uncount,
            e.error,
            e.keep_error,
            e.finished_at,
            e.occurrence
        ])?
    };
    if changed == 1 {
        return Ok(RunEnd::Stored);
    }
    let seq = draw_seq(c, 1)? + 1;
    let superseded = c
        .prepare_cached(END_SUPERSEDED)?
        .query_row(params![key, owner, run, seq], |r| {
            Ok(RunEnd::Superseded {
                name: r.get(0)?,
                next_fire: r.get(1)?,
            })
        })
        .optional()?;
    Ok(superseded.unwrap_or(RunEnd::Lost))
}

/// Draws `n` sequence numbers (in the caller's transaction): the ones
/// after the returned value are the caller's.
fn draw_seq(c: &Connection, n: usize) -> rusqlite::Result<i64> {
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    c.prepare_cached(DRAW_SEQ)?
        .query_row(params![n], |r| r.get(0))
}

/// Draws `?1` sequence numbers: the ones after the value returned.
pub(crate) const DRAW_SEQ: &str =
    "UPDATE chronopool_seq SET value = value + ?1 RETURNING value - ?1";

/// `names` as an array parameter (`rarray(?)`): one parameter, however
/// many handlers there are (a parameter each would stop at SQLite's limit
/// of 32,766).
fn array_of(names: &[String]) -> Array {
    Rc::new(names.iter().map(|n| Value::from(n.clone())).collect())
}

fn due_rows(
    c: &Connection,
    until: Micros,
    q: &DueQuery<'_>,
    handled: bool,
) -> rusqlite::Result<Vec<Due>> {
    let among = if handled { "IN" } else { "NOT IN" };
    let mut statement = c.prepare_cached(&format!(
        "SELECT key, name, next_fire AS fire, 0 FROM chronopool_jobs
             WHERE state = 'scheduled' AND next_fire <= ?1 AND name {among} rarray(?3)
               AND {NOT_PAUSED}
         UNION ALL
         SELECT key, name,
                CASE WHEN replaced = 1 THEN max(lease_until + 1, next_fire)
                     ELSE lease_until + 1 END,
                1 FROM chronopool_jobs
             WHERE state = 'running' AND lease_until < ?1 AND name {among} rarray(?3)
               AND (replaced = 0 OR next_fire <= ?1)
               AND (owner <> ?4 OR lease_until < ?5) AND {NOT_PAUSED}
         ORDER BY 3
         LIMIT ?2"
    ))?;
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    let params = params![until, limit, array_of(q.names), q.owner, q.now];
    let rows = statement.query_map(params, |r| {
        Ok(Due {
            key: r.get(0)?,
            name: r.get(1)?,
            fire: r.get(2)?,
            expired: r.get(3)?,
        })
    })?;
    rows.collect()
}

/// The history row of a run's end: key `?1`, owner `?2`, run `?3`, at
/// `?4`, outcome `?5`, error `?6`; none if the fence is gone.
pub(crate) const RECORD_RUN: &str = "INSERT INTO chronopool_runs
        (key, name, owner, owner_name, attempt, due, started_at, ended_at, outcome, error)
    SELECT key, name, owner, owner_name, attempt, next_fire, started_at, ?4, ?5, ?6
        FROM chronopool_jobs
        WHERE key = ?1 AND owner = ?2 AND run = ?3 AND state = 'running'";

/// Drops the runs of the job `?1` older than its last `?2` (the index on
/// key and id finds them).
pub(crate) const TRIM_RUNS: &str = "DELETE FROM chronopool_runs
    WHERE key = ?1 AND id <= (SELECT id FROM chronopool_runs WHERE key = ?1
                              ORDER BY id DESC LIMIT 1 OFFSET ?2)";

/// Writes the history row of a run's end, if it is a run and still holds
/// its fence (before its finish, which clears the fence).
fn record_run(
    c: &Connection,
    owner: &str,
    fence: &Fence,
    finish: &Finish,
    skipped: bool,
    now: Micros,
    keep: usize,
) -> rusqlite::Result<()> {
    let Some(outcome) = super::outcome_name(finish, skipped) else {
        return Ok(());
    };
    c.prepare_cached(RECORD_RUN)?.execute(params![
        fence.key,
        owner,
        fence.run,
        now,
        outcome,
        super::error_of(finish)
    ])?;
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    c.prepare_cached(TRIM_RUNS)?
        .execute(params![fence.key, keep])?;
    Ok(())
}

/// For the limited handlers among `names`: how many more runs may start
/// (their limit less their runs whose lease is live), and the limit. In the exchange's
/// transaction, which holds the file's write lock: no other claim counts
/// meanwhile.
fn free_slots(
    c: &Connection,
    names: &[String],
    now: Micros,
) -> rusqlite::Result<HashMap<String, (i64, i64)>> {
    let mut statement = c.prepare_cached(
        "SELECT l.name, l.max_running - (SELECT count(*) FROM chronopool_jobs AS j
                                          WHERE j.name = l.name AND j.state = 'running'
                                            AND j.lease_until >= ?2),
                l.max_running
             FROM chronopool_limits AS l WHERE l.name IN rarray(?1)",
    )?;
    let rows = statement.query_map(params![array_of(names), now], |r| {
        Ok((r.get(0)?, (r.get(1)?, r.get(2)?)))
    })?;
    rows.collect()
}

fn exchange(c: &mut Connection, x: &Exchange<'_>) -> rusqlite::Result<Exchanged> {
    let Owner { id, name, lock } = x.owner;
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut done = Exchanged::default();
    for (i, (fence, finish)) in x.ends.iter().enumerate() {
        if let Some(h) = x.history {
            let skipped = h.skipped.get(i).copied().unwrap_or(false);
            record_run(&tx, id, fence, finish, skipped, x.now, h.keep)?;
        }
        done.ended.push(finish_one(&tx, id, fence, finish)?);
    }
    // Renewals before claims: a run of this owner whose lease ended under
    // a stall is extended here, so the claims below neither take it over
    // nor leave it out of its handler's count of runs at once (limits
    // count live leases).
    if let Some((fences, until)) = x.renew {
        let mut statement = tx.prepare_cached(&format!(
            "UPDATE chronopool_jobs SET lease_until = ?4 WHERE {FENCED}"
        ))?;
        for Fence { key, run } in fences {
            done.renewed
                .push(statement.execute(params![key, id, run, until])? == 1);
        }
    }
    if let Some(claim) = &x.claim {
        let mut free = free_slots(&tx, claim.names, claim.now)?;
        let mut statement = tx.prepare_cached(&format!(
            "UPDATE chronopool_jobs
                 SET attempt = CASE WHEN state = 'running' AND owner = ?2 AND run = ?3
                                         THEN attempt
                                    WHEN replaced = 1 THEN 1
                                    ELSE min(attempt, 4294967295) + 1 END,
                     state = 'running', owner = ?2, run = ?3, owner_name = ?4,
                     owner_lock = ?5, lease_until = ?6, replaced = 0, started_at = ?7
             WHERE key = ?1 AND name = ?8 AND {NOT_PAUSED}
               AND ((state = 'scheduled' AND next_fire <= ?7)
                    OR (state = 'running' AND lease_until < ?7
                        AND (replaced = 0 OR next_fire <= ?7))
                    OR (state = 'running' AND owner = ?2 AND run = ?3 AND replaced = 0))
             RETURNING {COLUMNS}"
        ))?;
        for (key, handler) in claim.keys.iter().zip(claim.names) {
            let slot = free.get_mut(handler);
            if let Some((_, limit)) = slot.as_ref().filter(|(left, _)| *left <= 0) {
                // A limit of 0 holds the job back for good: not retried
                // (the polls place it again, and a raised limit lets it).
                if *limit > 0 {
                    done.held_back.push((key.clone(), handler.clone()));
                }
                continue;
            }
            let row = statement
                .query_row(
                    params![
                        key,
                        id,
                        claim.run,
                        name,
                        lock,
                        claim.lease_until,
                        claim.now,
                        handler
                    ],
                    row_of,
                )
                .optional()?;
            if let (Some(_), Some((n, _))) = (&row, slot) {
                *n -= 1;
            }
            done.claimed.extend(row);
        }
    }
    tx.commit()?;
    Ok(done)
}

/// This process's turn to write (module doc).
fn turn(writers: &Mutex<()>) -> MutexGuard<'_, ()> {
    writers.lock().unwrap_or_else(|p| p.into_inner())
}

impl Conn for SqliteConn {
    fn upsert(&mut self, jobs: &[NewJob]) -> Result<Vec<Stored>, StoreError> {
        let _turn = turn(&self.writers);
        let tx = self
            .c
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_error)?;
        let stored = upsert_rows(&tx, jobs).map_err(store_error)?;
        tx.commit().map_err(store_error)?;
        Ok(stored)
    }

    fn due(&mut self, q: &DueQuery<'_>) -> Result<Vec<Due>, StoreError> {
        let mut due = due_rows(&self.c, q.until, q, true).map_err(store_error)?;
        due.extend(due_rows(&self.c, q.unhandled_before, q, false).map_err(store_error)?);
        Ok(due)
    }

    fn fresh(
        &mut self,
        after: i64,
        until: Micros,
        names: &[String],
        limit: usize,
    ) -> Result<(Vec<Due>, i64), StoreError> {
        let mut statement = self
            .c
            .prepare_cached(&format!(
                "SELECT key, name, next_fire, seq FROM chronopool_jobs
                 WHERE seq > ?1 AND state = 'scheduled' AND next_fire <= ?2
                   AND name IN rarray(?4) AND {NOT_PAUSED}
                 ORDER BY seq LIMIT ?3"
            ))
            .map_err(store_error)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut last = after;
        let rows = statement
            .query_map(params![after, until, limit, array_of(names)], |r| {
                Ok((
                    Due {
                        key: r.get(0)?,
                        name: r.get(1)?,
                        fire: r.get(2)?,
                        expired: false,
                    },
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(store_error)?;
        let mut due = Vec::new();
        for row in rows {
            let (d, seq) = row.map_err(store_error)?;
            last = last.max(seq);
            due.push(d);
        }
        Ok((due, last))
    }

    fn last_seq(&mut self) -> Result<i64, StoreError> {
        self.c
            .query_row("SELECT value FROM chronopool_seq", [], |r| r.get(0))
            .map_err(store_error)
    }

    fn changed(&mut self) -> Result<bool, StoreError> {
        let now: i64 = self
            .c
            .pragma_query_value(None, "data_version", |r| r.get(0))
            .map_err(store_error)?;
        Ok(self
            .data_version
            .replace(now)
            .is_some_and(|before| before != now))
    }

    fn exchange(&mut self, x: &Exchange<'_>) -> Result<Exchanged, StoreError> {
        let _turn = turn(&self.writers);
        exchange(&mut self.c, x).map_err(store_error)
    }

    fn get(&mut self, key: &str) -> Result<Option<Row>, StoreError> {
        self.c
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM chronopool_jobs WHERE key = ?1"
            ))
            .and_then(|mut s| s.query_row(params![key], row_of).optional())
            .map_err(store_error)
    }

    fn query(&mut self, q: &ListQuery<'_>) -> Result<Vec<Row>, StoreError> {
        let mut statement = self
            .c
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM chronopool_jobs
                 WHERE (?1 IS NULL OR state = ?1)
                   AND (?2 IS NULL OR (paused = 1 OR name IN (SELECT name FROM chronopool_paused_names)) = ?2)
                   AND (?3 IS NULL OR name = ?3)
                   AND (?4 IS NULL OR substr(key, 1, length(?4)) = ?4)
                   AND (?5 IS NULL OR next_fire < ?5)
                   AND (?6 IS NULL OR next_fire > ?6 OR (next_fire = ?6 AND key > ?7))
                 ORDER BY next_fire, key LIMIT ?8"
            ))
            .map_err(store_error)?;
        let prefix = q.key_prefix;
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        let rows = statement
            .query_map(
                params![
                    q.state.map(JobState::name),
                    q.paused,
                    q.name,
                    prefix,
                    q.due_before,
                    q.after.map(|(fire, _)| fire),
                    q.after.map(|(_, key)| key),
                    limit
                ],
                row_of,
            )
            .map_err(store_error)?;
        rows.collect::<rusqlite::Result<_>>().map_err(store_error)
    }

    fn counts(&mut self) -> Result<Vec<(JobState, bool, u64)>, StoreError> {
        let mut statement = self
            .c
            .prepare_cached(
                "SELECT state, (paused = 1 OR name IN (SELECT name FROM chronopool_paused_names)),
                        count(*)
                 FROM chronopool_jobs GROUP BY 1, 2",
            )
            .map_err(store_error)?;
        let rows = statement
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, bool>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(store_error)?;
        let mut counts = Vec::new();
        for row in rows {
            let (state, paused, n) = row.map_err(store_error)?;
            counts.push((JobState::of_name(&state)?, paused, n as u64));
        }
        Ok(counts)
    }

    fn set_paused(&mut self, key: &str, paused: bool) -> Result<bool, StoreError> {
        self.write(|tx| {
            let seq = draw_seq(tx, 1)? + 1;
            tx.execute(
                "UPDATE chronopool_jobs SET paused = ?2,
                     seq = CASE WHEN ?2 THEN seq ELSE ?3 END
                 WHERE key = ?1",
                params![key, paused, seq],
            )
            .map(|n| n == 1)
        })
    }

    fn set_name_paused(&mut self, name: &str, paused: bool) -> Result<(), StoreError> {
        self.write(|tx| {
            if paused {
                tx.execute(
                    "INSERT OR IGNORE INTO chronopool_paused_names (name) VALUES (?1)",
                    params![name],
                )?;
                return Ok(());
            }
            if tx.execute(
                "DELETE FROM chronopool_paused_names WHERE name = ?1",
                params![name],
            )? == 0
            {
                return Ok(());
            }
            // New sequence numbers, one per row (the base, then its rowid:
            // unique), and the counter past them.
            let base = draw_seq(tx, 1)? + 1;
            tx.execute(
                "UPDATE chronopool_jobs SET seq = ?2 + rowid
                 WHERE name = ?1 AND state = 'scheduled'",
                params![name, base],
            )?;
            tx.execute(
                "UPDATE chronopool_seq
                 SET value = max(value, coalesce((SELECT max(seq) FROM chronopool_jobs), 0))",
                [],
            )?;
            Ok(())
        })
    }

    fn paused_names(&mut self) -> Result<Vec<String>, StoreError> {
        let mut statement = self
            .c
            .prepare_cached("SELECT name FROM chronopool_paused_names ORDER BY name")
            .map_err(store_error)?;
        let rows = statement.query_map([], |r| r.get(0)).map_err(store_error)?;
        rows.collect::<rusqlite::Result<_>>().map_err(store_error)
    }

    fn run_now(&mut self, key: &str, now: Micros) -> Result<bool, StoreError> {
        self.write(|tx| {
            let seq = draw_seq(tx, 1)? + 1;
            tx.execute(
                "UPDATE chronopool_jobs SET next_fire = min(next_fire, ?2), seq = ?3
                 WHERE key = ?1 AND state = 'scheduled'",
                params![key, now, seq],
            )
            .map(|n| n == 1)
        })
    }

    fn reschedule(
        &mut self,
        key: &str,
        recurrence: &str,
        next_fire: Micros,
    ) -> Result<bool, StoreError> {
        self.write(|tx| {
            let seq = draw_seq(tx, 1)? + 1;
            tx.execute(
                "UPDATE chronopool_jobs SET recurrence = ?2, next_fire = ?3, seq = ?4,
                     occurrence = NULL,
                     replaced = (state = 'running'),
                     attempt = CASE WHEN state = 'running' THEN attempt ELSE 0 END,
                     last_error = CASE WHEN state = 'running' THEN last_error END
                 WHERE key = ?1 AND state IN ('scheduled', 'running')",
                params![key, recurrence, next_fire, seq],
            )
            .map(|n| n == 1)
        })
    }

    fn set_limit(&mut self, name: &str, limit: Option<u32>) -> Result<(), StoreError> {
        self.write(|tx| {
            match limit {
                Some(n) => tx.execute(
                    "INSERT INTO chronopool_limits (name, max_running) VALUES (?1, ?2)
                     ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running",
                    params![name, n],
                )?,
                None => tx.execute(
                    "DELETE FROM chronopool_limits WHERE name = ?1",
                    params![name],
                )?,
            };
            Ok(())
        })
    }

    fn limits(&mut self) -> Result<Vec<(String, u32)>, StoreError> {
        let mut statement = self
            .c
            .prepare_cached("SELECT name, max_running FROM chronopool_limits ORDER BY name")
            .map_err(store_error)?;
        let rows = statement
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(store_error)?;
        rows.collect::<rusqlite::Result<_>>().map_err(store_error)
    }

    fn runs(&mut self, key: Option<&str>, limit: usize) -> Result<Vec<RunRow>, StoreError> {
        let mut statement = self
            .c
            .prepare_cached(
                "SELECT key, name, owner, owner_name, attempt, due, started_at, ended_at,
                        outcome, error
                 FROM chronopool_runs WHERE ?1 IS NULL OR key = ?1
                 ORDER BY id DESC LIMIT ?2",
            )
            .map_err(store_error)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = statement
            .query_map(params![key, limit], |r| {
                Ok(RunRow {
                    key: r.get(0)?,
                    name: r.get(1)?,
                    owner: r.get(2)?,
                    owner_name: r.get(3)?,
                    attempt: u32::try_from(r.get::<_, i64>(4)?).unwrap_or(u32::MAX),
                    due: r.get(5)?,
                    started_at: r.get(6)?,
                    ended_at: r.get(7)?,
                    outcome: r.get(8)?,
                    error: r.get(9)?,
                })
            })
            .map_err(store_error)?;
        rows.collect::<rusqlite::Result<_>>().map_err(store_error)
    }

    fn run_counts(&mut self, since: Micros) -> Result<Vec<(String, u64)>, StoreError> {
        let mut statement = self
            .c
            .prepare_cached(
                "SELECT outcome, count(*) FROM chronopool_runs WHERE ended_at >= ?1
                 GROUP BY outcome ORDER BY outcome",
            )
            .map_err(store_error)?;
        let rows = statement
            .query_map(params![since], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
            })
            .map_err(store_error)?;
        rows.collect::<rusqlite::Result<_>>().map_err(store_error)
    }

    fn delete(&mut self, key: &str) -> Result<bool, StoreError> {
        let _turn = turn(&self.writers);
        self.c
            .execute("DELETE FROM chronopool_jobs WHERE key = ?1", params![key])
            .map(|n| n == 1)
            .map_err(store_error)
    }

    fn revive(&mut self, key: &str, now: Micros) -> Result<bool, StoreError> {
        let _turn = turn(&self.writers);
        let tx = self
            .c
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_error)?;
        let seq = draw_seq(&tx, 1).map_err(store_error)? + 1;
        let revived = tx
            .execute(
                "UPDATE chronopool_jobs SET state = 'scheduled', next_fire = ?2, attempt = 0,
                     occurrence = NULL, finished_at = NULL, seq = ?3
                 WHERE key = ?1 AND state = 'dead'",
                params![key, now, seq],
            )
            .map_err(store_error)?;
        tx.commit().map_err(store_error)?;
        Ok(revived == 1)
    }

    fn clean(&mut self, r: &Retention) -> Result<u64, StoreError> {
        self.write(|tx| {
            let jobs = tx
                .prepare_cached(
                    "DELETE FROM chronopool_jobs
                     WHERE (state = 'done' AND finished_at < ?1)
                        OR (state = 'dead' AND finished_at < ?2)",
                )?
                .execute(params![r.done_before, r.dead_before])?;
            tx.prepare_cached("DELETE FROM chronopool_runs WHERE ended_at < ?1")?
                .execute(params![r.runs_before])?;
            Ok(jobs as u64)
        })
    }
}

impl SqliteConn {
    /// `f` in a write transaction of its own, in this process's turn.
    fn write<R>(
        &mut self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError> {
        let _turn = turn(&self.writers);
        let tx = self
            .c
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_error)?;
        let r = f(&tx).map_err(store_error)?;
        tx.commit().map_err(store_error)?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests;

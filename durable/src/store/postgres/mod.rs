//! [`PgStore`]: durable jobs in PostgreSQL, for several processes on
//! several machines that share one schedule.
//!
//! Each of a scheduler's loops has a connection of its own, and the API
//! one more. A claim is an `UPDATE … RETURNING` of the rows a `SELECT …
//! FOR UPDATE SKIP LOCKED` found due: of two schedulers that claim one row
//! at once, one locks it and the other skips it at once instead of waiting
//! for the first's commit. The batch's keys are joined to the table and the
//! due test is a `CASE` no index serves, so each key is a primary-key
//! lookup: a range scan of the due index would walk the entries every
//! claimed row left behind until a vacuum. Batches of schedules, finishes
//! and renewals are statements over arrays (`unnest`): one round trip each.
//!
//! Times are `timestamptz` (microseconds), taken from the schedulers' own
//! clocks: keep them synchronised, as Quartz and db-scheduler ask.
//!
//! # A crashed process is seen at once
//!
//! The run loop's connection and the poll loop's each hold a session-level
//! advisory lock, in shared mode, keyed by their owner's random lock key
//! (stored in each row it claims). The server drops a session's lock when
//! the session ends, which it does as soon as it sees the connection
//! close: when the process dies, the kernel closes both. One session ended
//! alone (an admin's `pg_terminate_backend`, a proxy that closed one
//! connection) leaves the other's: the owner still looks alive. A
//! poll that finds an owner's lock gone looks again a moment later
//! ([`REAP_CONFIRM`](super::REAP_CONFIRM)), and if it still is, ends the
//! leases of its running rows ([`Conn::reap`]): a crashed process's runs
//! are taken over within a poll and that moment, rather than when their
//! leases expire. A live owner whose connection broke (a server that
//! closed it, a network blip) is not mistaken for a dead one: while it
//! holds runs it checks its session every
//! [`KEEP_ALIVE`](super::KEEP_ALIVE), and takes its lock again at once. Only once the server has
//! been up for longer than a lease: after a restart of the server every
//! session is new, and a live owner needs a moment to take its lock
//! again; its leases still hold meanwhile. A process cut off from the
//! server for longer than that moment (a network partition) loses its runs
//! this way, as it would lose them to its lease's end: their outcomes are
//! then not stored (the fence), and the jobs run again elsewhere.
//!
//! # A connection that goes away
//!
//! A call that finds its connection gone (the server restarted, the network
//! dropped) opens it again once; if that fails, the call fails with a
//! transient [`StoreError`], and the loop that made it tries again after a
//! back-off (the API, for up to 10 s). A statement whose reply was lost may
//! have been applied: sent again, a claim returns the rows it claimed (the
//! fence is the same), and a finish finds the run no longer its (it did
//! finish). Nothing acknowledged is lost: `schedule` returns only once its
//! statement committed.
//!
//! The schema's version is in `chronopool_schema`; the migrations are the
//! `.sql` files in `migrations/`, applied under a transaction-scoped
//! advisory lock, so that processes that start together migrate once.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

use super::app_transaction::{EndedIn, Rows, RunToEnd, Statements};
use super::{
    Claim, Conn, Due, DueQuery, Exchange, Exchanged, Fence, Finish, IfExists, JobState, ListQuery,
    NewJob, Notice, Retention, Role, Row, RunEnd, RunRow, Store, Stored, POLL_NOTICE,
};
use crate::error::StoreError;
use crate::schedule::{missed_name, missed_of};
use crate::time::{self, Micros};

/// `MIGRATIONS[v]` takes the schema from version `v` to `v + 1`.
const MIGRATIONS: [&str; 7] = [
    include_str!("migrations/0001_jobs.sql"),
    include_str!("migrations/0002_finished_at.sql"),
    include_str!("migrations/0003_fences_and_timestamps.sql"),
    include_str!("migrations/0004_replaced.sql"),
    include_str!("migrations/0005_control_and_history.sql"),
    include_str!("migrations/0006_occurrence.sql"),
    include_str!("migrations/0007_runs_by_key_hash.sql"),
];

/// The schema's version once migrated.
const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// An arbitrary key for the migration's advisory lock.
const MIGRATION_LOCK: i64 = 0x6368_726f_6e6f;

/// How long a connection attempt may take, unless the connection string
/// says otherwise.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The columns of a [`Row`], in `row_of`'s order.
const COLUMNS: &str = "key, name, payload, recurrence, next_fire, state, attempt, missed, \
                       catch_up, last_error, owner_name, lease_until, paused, \
                       coalesce(occurrence, next_fire)";

/// A job that may be placed or claimed: not paused, nor its handler.
const NOT_PAUSED: &str = "NOT paused AND name NOT IN (SELECT name FROM chronopool_paused_names)";

/// A job paused, by itself or by its handler.
const IS_PAUSED: &str = "(paused OR name IN (SELECT name FROM chronopool_paused_names))";

/// Durable jobs in a PostgreSQL database.
pub(crate) struct PgStore {
    config: postgres::Config,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("host", &self.config.get_hosts())
            .field("dbname", &self.config.get_dbname())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database `params` names (a libpq connection string
    /// or URL), brings its schema to this version's, and returns the store
    /// with that first connection.
    #[cfg(test)]
    pub(crate) fn open(params: &str) -> Result<(PgStore, Box<dyn Conn>), StoreError> {
        PgStore::open_migrating(params, true)
    }

    /// [`open`](Self::open), bringing an older schema to this version's
    /// only if `migrate_allowed` (else an error says so).
    pub(crate) fn open_migrating(
        params: &str,
        migrate_allowed: bool,
    ) -> Result<(PgStore, Box<dyn Conn>), StoreError> {
        let mut config: postgres::Config = params.parse().map_err(pg_error)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let mut conn = PgConn {
            config: config.clone(),
            client: None,
            lock: None,
            listens: false,
        };
        conn.run(|c| migrate(c, migrate_allowed))??;
        Ok((PgStore { config }, Box::new(conn)))
    }
}

impl Store for PgStore {
    fn connect(&self, role: Role<'_>) -> Result<Box<dyn Conn>, StoreError> {
        let (lock, name) = match role {
            Role::Runs(owner) => (Some(owner.lock), "chronopool-durable runs"),
            Role::Poll(owner) => (Some(owner.lock), "chronopool-durable poll"),
            Role::Listen => (None, "chronopool-durable listen"),
        };
        let mut config = self.config.clone();
        if config.get_application_name().is_none() {
            // What `pg_stat_activity` shows an operator for each session.
            config.application_name(name);
        }
        Ok(Box::new(PgConn {
            config,
            client: None,
            lock: lock.map(|key| Lock { key, held: false }),
            listens: matches!(role, Role::Listen),
        }))
    }

    fn notifies(&self) -> bool {
        true
    }

    fn session_locks(&self) -> bool {
        true
    }
}

/// Brings the schema to [`SCHEMA_VERSION`] (module doc).
fn migrate(client: &mut Client, allowed: bool) -> Result<Result<(), StoreError>, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS chronopool_schema (version BIGINT NOT NULL)")?;
    let version: i64 = tx
        .query_opt("SELECT version FROM chronopool_schema", &[])?
        .map_or(0, |row| row.get(0));
    if version > SCHEMA_VERSION {
        tx.rollback()?;
        return Ok(Err(StoreError::other(format!(
            "the store's schema is version {version}, newer than this crate's {SCHEMA_VERSION}"
        ))));
    }
    if version < SCHEMA_VERSION && !allowed {
        tx.rollback()?;
        return Ok(Err(StoreError::other(format!(
            "the store's schema is version {version}, older than this crate's {SCHEMA_VERSION}, \
             and Config::migrate is off: start a service of this version on it first (its \
             start migrates the schema), or allow the migration"
        ))));
    }
    for migration in MIGRATIONS.iter().skip(version.max(0) as usize) {
        tx.batch_execute(migration)?;
    }
    tx.execute("DELETE FROM chronopool_schema", &[])?;
    tx.execute(
        "INSERT INTO chronopool_schema (version) VALUES ($1)",
        &[&SCHEMA_VERSION],
    )?;
    tx.commit().map(Ok)
}

/// A postgres error as a [`StoreError`]: the server's message and
/// SQLSTATE, or the chain of causes; transient if the connection was lost
/// or refused, or the server is busy or shutting down.
fn pg_error(e: postgres::Error) -> StoreError {
    let (message, code, transient) = match e.as_db_error() {
        Some(db) => {
            let code = db.code().code().to_owned();
            let transient = code.starts_with("08")
                || matches!(
                    code.as_str(),
                    // admin_shutdown, crash_shutdown, cannot_connect_now,
                    // idle_session_timeout, too_many_connections,
                    // serialization_failure, deadlock_detected,
                    // lock_not_available
                    "57P01" | "57P02" | "57P03" | "57P05" | "53300" | "40001" | "40P01" | "55P03"
                );
            (format!("{db} (SQLSTATE {code})"), Some(code), transient)
        }
        None => {
            let mut message = e.to_string();
            let mut cause = std::error::Error::source(&e);
            let mut io = false;
            while let Some(c) = cause {
                message.push_str(": ");
                message.push_str(&c.to_string());
                io |= c.is::<std::io::Error>();
                cause = c.source();
            }
            // A closed connection, an I/O error (refused, reset, timed out):
            // a new connection may do. A bad connection string, a TLS or
            // protocol failure: it will not.
            let timeout = message.contains("timeout");
            (message, None, e.is_closed() || io || timeout)
        }
    };
    StoreError::new(message, code, transient, Some(Box::new(e)))
}

/// The owner's session lock (module doc), held in shared mode by the run
/// loop's connection and the poll loop's: the owner looks alive while
/// either session holds it.
struct Lock {
    key: i64,
    /// Taken on this connection. A connection whose predecessor's session
    /// the server has not closed yet cannot take it: it tries again at each
    /// exchange (the old session still holds it, so the owner looks alive).
    held: bool,
}

/// One connection, opened again when it is lost (module doc).
struct PgConn {
    config: postgres::Config,
    client: Option<Client>,
    lock: Option<Lock>,
    /// It listens for the schedules' notifications (`Role::Listen`).
    listens: bool,
}

impl Drop for PgConn {
    /// Dropped in async code (the last handle to a scheduler dropped in a
    /// task), the client, and its runtime, are dropped on a thread of
    /// their own (see `in_async_context`).
    fn drop(&mut self) {
        if let Some(client) = self.client.take().filter(|_| in_async_context()) {
            std::thread::scope(|scope| {
                scope.spawn(move || drop(client));
            });
        }
    }
}

/// True on a thread inside a tokio runtime's context (one that drives its
/// tasks: an async handler, a web request; also `spawn_blocking`'s
/// threads and `Handle::enter`, where moving off costs a thread and
/// nothing else): `postgres`'s client blocks on a runtime of its own,
/// which tokio refuses to start, or drop, there. (A thread that cannot be
/// spawned for the call panics, as `std::thread::scope` does.)
fn in_async_context() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

impl PgConn {
    /// Runs `f` on the connection, opening it first if need be. A
    /// transient failure drops the connection, so that the next call opens
    /// a new one. Called from async code (the scheduler's API in a task),
    /// it runs on a scoped thread of its own, which the caller waits for
    /// as for any blocking call (the scheduler's own threads never are).
    fn run<R: Send>(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<R, postgres::Error> + Send,
    ) -> Result<R, StoreError> {
        if in_async_context() {
            return std::thread::scope(|scope| {
                let call = scope.spawn(|| self.run_here(f));
                call.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            });
        }
        self.run_here(f)
    }

    fn run_here<R>(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<R, postgres::Error>,
    ) -> Result<R, StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            let mut client = self.config.connect(NoTls).map_err(pg_error)?;
            // A server's `idle_session_timeout` would close the run loop's
            // connection between renewals, and with it the session lock that
            // says this scheduler is alive. (Before PostgreSQL 14 there is no
            // such setting, and nothing to turn off.)
            if let Err(e) = client.batch_execute("SET idle_session_timeout = 0") {
                if e.code() != Some(&postgres::error::SqlState::UNDEFINED_OBJECT) {
                    return Err(pg_error(e));
                }
            }
            if self.listens {
                client
                    .batch_execute("LISTEN chronopool_jobs")
                    .map_err(pg_error)?;
            }
            self.client = Some(client);
            if let Some(lock) = &mut self.lock {
                lock.held = false;
            }
        }
        let client = self.client.as_mut().expect("connected above");
        if let Some(lock) = self.lock.as_mut().filter(|l| !l.held) {
            match client.query_one("SELECT pg_try_advisory_lock_shared($1)", &[&lock.key]) {
                Ok(row) => lock.held = row.get(0),
                Err(e) => return Err(self.failed(e)),
            }
        }
        let client = self.client.as_mut().expect("connected above");
        f(client).map_err(|e| self.failed(e))
    }

    fn failed(&mut self, e: postgres::Error) -> StoreError {
        let e = pg_error(e);
        if e.is_transient() {
            self.client = None;
        }
        e
    }
}

fn at(m: Micros) -> SystemTime {
    time::system_time(m)
}

fn micros_of(t: SystemTime) -> Micros {
    time::micros_saturating(t)
}

fn row_of(r: &postgres::Row) -> Result<Row, postgres::Error> {
    let state: &str = r.try_get(5)?;
    let attempt: i64 = r.try_get(6)?;
    let missed: &str = r.try_get(7)?;
    Ok(Row {
        key: r.try_get(0)?,
        name: r.try_get(1)?,
        payload: r.try_get(2)?,
        recurrence: r.try_get(3)?,
        next_fire: micros_of(r.try_get(4)?),
        // The CHECK constraint keeps the states to the four names.
        state: JobState::of_name(state).unwrap_or(JobState::Dead),
        attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
        missed: missed_of(missed),
        catch_up: r.try_get(8)?,
        last_error: r.try_get(9)?,
        owner_name: r.try_get(10)?,
        lease_until: r.try_get::<_, Option<SystemTime>>(11)?.map(micros_of),
        paused: r.try_get(12)?,
        occurrence: micros_of(r.try_get(13)?),
    })
}

fn rows_of(rows: &[postgres::Row]) -> Result<Vec<Row>, postgres::Error> {
    rows.iter().map(row_of).collect()
}

/// The `(key, run)` pairs a statement returned.
fn fences_of(rows: &[postgres::Row]) -> Result<HashSet<(String, i64)>, postgres::Error> {
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

/// The names among `names` a `text` can hold (no NUL byte): a handler
/// registered under another can have no job here.
fn storable(names: &[String]) -> Vec<&str> {
    names
        .iter()
        .map(String::as_str)
        .filter(|n| !n.contains('\0'))
        .collect()
}

fn due_rows(
    c: &mut Client,
    until: Micros,
    names: &[&str],
    q: &DueQuery<'_>,
    handled: bool,
) -> Result<Vec<Due>, postgres::Error> {
    let among = if handled { "" } else { "NOT" };
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    let rows = c.query(
        &format!(
            "(SELECT key, name, next_fire AS fire, false AS expired FROM chronopool_jobs
                  WHERE state = 'scheduled' AND next_fire <= $1 AND {among} (name = ANY($2))
                    AND {NOT_PAUSED}
                  ORDER BY next_fire LIMIT $3)
             UNION ALL
             (SELECT key, name,
                     CASE WHEN replaced
                          THEN greatest(lease_until + interval '1 microsecond', next_fire)
                          ELSE lease_until + interval '1 microsecond' END,
                     true
                  FROM chronopool_jobs
                  WHERE state = 'running' AND lease_until < $1 AND {among} (name = ANY($2))
                    AND (NOT replaced OR next_fire <= $1)
                    AND (owner <> $4 OR lease_until < $5) AND {NOT_PAUSED}
                  ORDER BY lease_until LIMIT $3)
             ORDER BY fire
             LIMIT $3"
        ),
        &[&at(until), &names, &limit, &q.owner, &at(q.now)],
    )?;
    rows.iter()
        .map(|r| {
            Ok(Due {
                key: r.try_get(0)?,
                name: r.try_get(1)?,
                fire: micros_of(r.try_get(2)?),
                expired: r.try_get(3)?,
            })
        })
        .collect()
}

/// `$n::bigint` microseconds (NULL: NULL) as a `timestamptz`, by whole
/// seconds and the rest, as in [`UPSERT`].
macro_rules! at_micros {
    ($m:literal) => {
        concat!(
            "(timestamptz 'epoch' + (",
            $m,
            " / 1000000) * interval '1 second' + (",
            $m,
            " % 1000000) * interval '1 microsecond')"
        )
    };
}

/// A `timestamptz` column as microseconds since the epoch, exactly (whole
/// seconds, then the microseconds within them), whatever the server's
/// version makes of `extract`.
macro_rules! micros_at {
    ($c:literal) => {
        concat!(
            "(extract(epoch FROM date_trunc('second', ",
            $c,
            "))::bigint * 1000000 + extract(microseconds FROM ",
            $c,
            ")::bigint % 1000000)"
        )
    };
}

/// The renewal of the leases of runs: keys `$1`, runs `$2`, owner `$3`,
/// until `$4`; the fences that held. A row locked by another transaction
/// is skipped, not waited for: a handler that ends its run in its own
/// transaction (`JobContext::complete_in`) holds its row until it commits,
/// and an exchange that waited for it would hold up every other run's end,
/// claim and renewal meanwhile. A skipped row whose fence the statement's
/// snapshot shows is counted as held (its run is ending; if its handler's
/// transaction rolls back, the next renewal extends it).
const RENEW: &str = "
    WITH free AS (
        SELECT j.key FROM chronopool_jobs AS j
            JOIN unnest($1::text[], $2::bigint[]) AS f(key, run)
              ON j.key = f.key AND j.run = f.run
            WHERE j.owner = $3 AND j.state = 'running'
            FOR UPDATE OF j SKIP LOCKED
    ), renewed AS (
        UPDATE chronopool_jobs AS j SET lease_until = $4 FROM free WHERE j.key = free.key
    )
    SELECT f.key, f.run FROM chronopool_jobs AS j
        JOIN unnest($1::text[], $2::bigint[]) AS f(key, run) ON j.key = f.key AND j.run = f.run
        WHERE j.owner = $3 AND j.state = 'running'";

/// The ends that delete their rows (`Finish::deletes`): keys `$1`, runs
/// `$2`, owner `$3`; the fences that held.
pub(crate) const END_DELETE: &str = "
    DELETE FROM chronopool_jobs AS j USING unnest($1::text[], $2::bigint[]) AS f(key, run)
    WHERE j.key = f.key AND j.run = f.run AND j.owner = $3 AND j.state = 'running'
      AND NOT j.replaced
    RETURNING f.key, f.run";

/// The ends that keep their rows: keys, runs, then the `Ending`s' values
/// in their field order (times in microseconds) but the last, then the
/// owner (`$10`), then the last (`occurrence`, `$11`); the fences that
/// held.
pub(crate) const END_UPDATE: &str = concat!(
    "UPDATE chronopool_jobs AS j SET
        state = f.state,
        next_fire = coalesce(",
    at_micros!("f.next_fire"),
    ", j.next_fire),
        occurrence = CASE f.occurrence WHEN 'keep' THEN j.occurrence
                                       WHEN 'retry' THEN coalesce(j.occurrence, j.next_fire) END,
        attempt = CASE WHEN f.reset THEN 0 ELSE greatest(j.attempt - f.uncount, 0) END,
        last_error = CASE WHEN f.keep_error THEN j.last_error ELSE f.error END,
        finished_at = ",
    at_micros!("f.finished_at"),
    ",
        owner = NULL, run = NULL, owner_name = NULL, owner_lock = NULL, lease_until = NULL
    FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bool[], $6::bigint[],
                $7::text[], $8::bool[], $9::bigint[], $11::text[])
         AS f(key, run, state, next_fire, reset, uncount, error, keep_error, finished_at,
              occurrence)
    WHERE j.key = f.key AND j.run = f.run AND j.owner = $10 AND j.state = 'running'
      AND NOT j.replaced
    RETURNING f.key, f.run"
);

/// The ends of runs whose jobs were replaced during them (`Conn::upsert`):
/// the runs end, the new schedules stand, with sequence numbers of their
/// own (the listeners are told, and fresh polls see them). Keys `$1`, runs
/// `$2`, owner `$3`; each fence with its job's handler and fire time.
pub(crate) const END_SUPERSEDED: &str = concat!(
    "UPDATE chronopool_jobs AS j SET
        state = 'scheduled', attempt = 0, replaced = false, last_error = NULL,
        seq = nextval('chronopool_jobs_seq'),
        owner = NULL, run = NULL, owner_name = NULL, owner_lock = NULL, lease_until = NULL
    FROM unnest($1::text[], $2::bigint[]) AS f(key, run)
    WHERE j.key = f.key AND j.run = f.run AND j.owner = $3 AND j.state = 'running'
      AND j.replaced
    RETURNING f.key, f.run, j.name, ",
    micros_at!("j.next_fire")
);

/// The columns of [`END_UPDATE`] for `ends`.
pub(crate) struct EndColumns<'a> {
    pub(crate) keys: Vec<&'a str>,
    pub(crate) runs: Vec<i64>,
    pub(crate) states: Vec<&'static str>,
    pub(crate) next_fires: Vec<Option<Micros>>,
    pub(crate) resets: Vec<bool>,
    pub(crate) uncounts: Vec<i64>,
    pub(crate) errors: Vec<Option<&'a str>>,
    pub(crate) keep_errors: Vec<bool>,
    pub(crate) finished: Vec<Option<Micros>>,
    pub(crate) occurrences: Vec<&'static str>,
}

impl<'a> EndColumns<'a> {
    pub(crate) fn of<'e: 'a>(ends: impl Iterator<Item = &'e (Fence, Finish)>) -> Self {
        let mut c = EndColumns {
            keys: Vec::new(),
            runs: Vec::new(),
            states: Vec::new(),
            next_fires: Vec::new(),
            resets: Vec::new(),
            uncounts: Vec::new(),
            errors: Vec::new(),
            keep_errors: Vec::new(),
            finished: Vec::new(),
            occurrences: Vec::new(),
        };
        for (fence, finish) in ends {
            let e = finish.ending();
            c.keys.push(&fence.key);
            c.runs.push(fence.run);
            c.states.push(e.state);
            c.next_fires.push(e.next_fire);
            c.resets.push(e.reset);
            c.uncounts.push(e.uncount);
            c.errors.push(e.error);
            c.keep_errors.push(e.keep_error);
            c.finished.push(e.finished_at);
            c.occurrences.push(e.occurrence);
        }
        c
    }
}

/// The ends of an exchange (or one in the application's transaction):
/// [`END_DELETE`] for the one-shot jobs that succeeded and are not kept,
/// [`END_UPDATE`] for the others, [`END_SUPERSEDED`] for the rest.
fn end_runs(
    tx: &mut postgres::Transaction<'_>,
    owner: &str,
    ends: &[(Fence, Finish)],
) -> Result<Vec<RunEnd>, postgres::Error> {
    type Ends<'a> = Vec<&'a (Fence, Finish)>;
    let (deletes, updates): (Ends<'_>, Ends<'_>) =
        ends.iter().partition(|(_, finish)| finish.deletes());
    let mut held = HashSet::new();
    if !deletes.is_empty() {
        let keys: Vec<&str> = deletes.iter().map(|(f, _)| f.key.as_str()).collect();
        let runs: Vec<i64> = deletes.iter().map(|(f, _)| f.run).collect();
        let rows = tx.query(END_DELETE, &[&keys, &runs, &owner])?;
        held.extend(fences_of(&rows)?);
    }
    if !updates.is_empty() {
        let c = EndColumns::of(updates.into_iter());
        let rows = tx.query(
            END_UPDATE,
            &[
                &c.keys,
                &c.runs,
                &c.states,
                &c.next_fires,
                &c.resets,
                &c.uncounts,
                &c.errors,
                &c.keep_errors,
                &c.finished,
                &owner,
                &c.occurrences,
            ],
        )?;
        held.extend(fences_of(&rows)?);
    }
    let rest: Vec<&Fence> = ends
        .iter()
        .map(|(f, _)| f)
        .filter(|f| !held.contains(&(f.key.clone(), f.run)))
        .collect();
    let mut superseded = HashMap::new();
    if !rest.is_empty() {
        let keys: Vec<&str> = rest.iter().map(|f| f.key.as_str()).collect();
        let runs: Vec<i64> = rest.iter().map(|f| f.run).collect();
        let rows = tx.query(END_SUPERSEDED, &[&keys, &runs, &owner])?;
        for r in &rows {
            let fence: (String, i64) = (r.try_get(0)?, r.try_get(1)?);
            let end = RunEnd::Superseded {
                name: r.try_get(2)?,
                next_fire: r.try_get(3)?,
            };
            superseded.insert(fence, end);
        }
    }
    Ok(ends
        .iter()
        .map(|(f, _)| {
            let fence = (f.key.clone(), f.run);
            if held.contains(&fence) {
                RunEnd::Stored
            } else {
                superseded.remove(&fence).unwrap_or(RunEnd::Lost)
            }
        })
        .collect())
}

/// The upsert of `jobs` (`Conn::upsert`), in the caller's transaction:
/// one statement per kind of upsert in the batch (arrays, unnested), a
/// round trip each. A key twice in one statement is an error in
/// PostgreSQL, so the later job of a key is the one sent.
fn upsert_batch(
    tx: &mut postgres::Transaction<'_>,
    jobs: &[NewJob],
) -> Result<Vec<Stored>, postgres::Error> {
    let mut stored = Vec::with_capacity(jobs.len());
    for (mode, of_kind) in by_kind(jobs) {
        stored.extend(upsert_kind(tx, &of_kind, mode)?);
    }
    Ok(stored)
}

/// `jobs` grouped for [`UPSERT`], one group per `IfExists`, each key once
/// (`latest_per_key`).
pub(crate) fn by_kind(jobs: &[NewJob]) -> Vec<(IfExists, Vec<&NewJob>)> {
    let jobs = super::latest_per_key(jobs);
    let mut kinds: Vec<IfExists> = jobs.iter().map(|j| j.if_exists).collect();
    kinds.sort_unstable_by_key(|&mode| mode.sql_name());
    kinds.dedup();
    kinds
        .into_iter()
        .map(|mode| {
            let of_kind = jobs
                .iter()
                .copied()
                .filter(|j| j.if_exists == mode)
                .collect();
            (mode, of_kind)
        })
        .collect()
}

/// Jobs scheduled in the application's own transaction
/// (`DurableScheduler::schedule_in`). Their sequence numbers are drawn now
/// but committed when the application commits, maybe after higher ones:
/// so the transaction also sends a notification that asks the listeners
/// for a full poll (`POLL_NOTICE`), which PostgreSQL delivers only if it
/// commits.
impl Statements for postgres::Transaction<'_> {
    fn upsert_jobs(&mut self, jobs: Rows<'_>) -> Result<(), StoreError> {
        upsert_batch(self, jobs.0).map_err(pg_error)?;
        self.execute("SELECT pg_notify('chronopool_jobs', $1)", &[&POLL_NOTICE])
            .map_err(pg_error)?;
        Ok(())
    }

    /// A run ended in the application's transaction: its row stays locked
    /// until the commit (the run loop's renewals skip it: `RENEW`). A replaced
    /// job's new schedule gets its sequence number here, before the
    /// commit: the notification asks for a full poll, as `upsert_jobs`'s.
    fn end_run(&mut self, run: RunToEnd<'_>) -> Result<EndedIn, StoreError> {
        let ends = [(run.fence.clone(), run.finish.clone())];
        if let Some((now, keep)) = run.record_at {
            record_runs(self, run.owner, &ends, &[false], now, keep).map_err(pg_error)?;
        }
        let end = end_runs(self, run.owner, &ends)
            .map_err(pg_error)?
            .pop()
            .unwrap_or(RunEnd::Lost);
        if matches!(end, RunEnd::Superseded { .. }) {
            self.execute("SELECT pg_notify('chronopool_jobs', $1)", &[&POLL_NOTICE])
                .map_err(pg_error)?;
        }
        Ok(EndedIn(end))
    }
}

/// The upsert of a batch of one `IfExists` (`$8`): SQLite's `UPSERT` (see
/// there for what each mode does), over arrays. In `DO UPDATE`, `j` is the
/// stored row, before the update. A fire time comes as microseconds,
/// made a `timestamptz` by whole seconds and the rest (one product by a
/// float of 2^53 µs and more would round).
pub(crate) const UPSERT: &str = "
    INSERT INTO chronopool_jobs AS j
        (key, name, payload, recurrence, next_fire, missed, catch_up, state, attempt)
    SELECT k, n, p, r,
           timestamptz 'epoch' + (f / 1000000) * interval '1 second'
               + (f % 1000000) * interval '1 microsecond',
           m, c, 'scheduled', 0
        FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[], $5::bigint[], $6::text[],
                    $7::bigint[]) AS u(k, n, p, r, f, m, c)
    ON CONFLICT (key) DO UPDATE SET
        seq = CASE WHEN $8 = 'keep_time' AND j.state IN ('scheduled', 'running') THEN j.seq
                   ELSE excluded.seq END,
        name = CASE WHEN $8 = 'keep_time' AND j.state IN ('scheduled', 'running') THEN j.name
                    ELSE excluded.name END,
        payload = excluded.payload,
        recurrence = CASE WHEN $8 = 'keep_time' AND j.state IN ('scheduled', 'running')
                          THEN j.recurrence ELSE excluded.recurrence END,
        next_fire = CASE WHEN $8 = 'keep_time' AND j.state IN ('scheduled', 'running')
                         THEN j.next_fire ELSE excluded.next_fire END,
        occurrence = CASE WHEN $8 = 'keep_time' AND j.state IN ('scheduled', 'running')
                          THEN j.occurrence END,
        missed = CASE WHEN $8 = 'keep_time' AND j.state IN ('scheduled', 'running')
                      THEN j.missed ELSE excluded.missed END,
        catch_up = CASE WHEN $8 = 'keep_time' AND j.state IN ('scheduled', 'running')
                        THEN j.catch_up ELSE excluded.catch_up END,
        replaced = CASE WHEN j.state <> 'running' THEN false
                        WHEN $8 = 'keep_time' AND j.recurrence NOT LIKE 'once%' THEN j.replaced
                        ELSE true END,
        attempt = CASE WHEN j.state = 'running'
                         OR ($8 = 'keep_time' AND j.state = 'scheduled') THEN j.attempt
                       ELSE 0 END,
        last_error = CASE WHEN j.state = 'running'
                            OR ($8 = 'keep_time' AND j.state = 'scheduled') THEN j.last_error
                          ELSE NULL END,
        state = CASE WHEN j.state = 'running' THEN 'running' ELSE 'scheduled' END,
        owner = CASE WHEN j.state = 'running' THEN j.owner END,
        run = CASE WHEN j.state = 'running' THEN j.run END,
        owner_name = CASE WHEN j.state = 'running' THEN j.owner_name END,
        owner_lock = CASE WHEN j.state = 'running' THEN j.owner_lock END,
        lease_until = CASE WHEN j.state = 'running' THEN j.lease_until END,
        finished_at = NULL
    WHERE NOT ($8 = 'keep_same' AND j.state IN ('scheduled', 'running')
               AND j.name = excluded.name AND j.payload = excluded.payload
               AND j.recurrence = excluded.recurrence AND j.missed = excluded.missed
               AND j.catch_up IS NOT DISTINCT FROM excluded.catch_up)
    RETURNING j.key, j.name, j.next_fire, j.state";

/// The upsert of `jobs`, all of one kind (`UPSERT`).
fn upsert_kind(
    tx: &mut postgres::Transaction<'_>,
    jobs: &[&NewJob],
    mode: IfExists,
) -> Result<Vec<Stored>, postgres::Error> {
    let keys: Vec<&str> = jobs.iter().map(|j| j.key.as_str()).collect();
    let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    let payloads: Vec<&[u8]> = jobs.iter().map(|j| j.payload.as_slice()).collect();
    let recurrences: Vec<&str> = jobs.iter().map(|j| j.recurrence.as_str()).collect();
    let fires: Vec<Micros> = jobs.iter().map(|j| j.next_fire).collect();
    let missed: Vec<&str> = jobs.iter().map(|j| missed_name(j.missed)).collect();
    let catch_ups: Vec<Option<i64>> = jobs.iter().map(|j| j.catch_up).collect();
    let rows = tx.query(
        UPSERT,
        &[
            &keys,
            &names,
            &payloads,
            &recurrences,
            &fires,
            &missed,
            &catch_ups,
            &mode.sql_name(),
        ],
    )?;
    rows.iter()
        .map(|r| {
            Ok(Stored {
                key: r.try_get(0)?,
                name: r.try_get(1)?,
                next_fire: micros_of(r.try_get(2)?),
                running: r.try_get::<_, &str>(3)? == "running",
            })
        })
        .collect()
}

/// The history rows of an exchange's ends that are runs and still hold
/// their fences (before their finishes, which clear the fences).
fn record_runs(
    tx: &mut postgres::Transaction<'_>,
    owner: &str,
    ends: &[(Fence, Finish)],
    skipped: &[bool],
    now: Micros,
    keep: usize,
) -> Result<(), postgres::Error> {
    let mut keys = Vec::new();
    let mut runs = Vec::new();
    let mut outcomes = Vec::new();
    let mut errors = Vec::new();
    for ((fence, finish), skipped) in ends.iter().zip(skipped) {
        if let Some(outcome) = super::outcome_name(finish, *skipped) {
            keys.push(fence.key.as_str());
            runs.push(fence.run);
            outcomes.push(outcome);
            errors.push(super::error_of(finish));
        }
    }
    if !keys.is_empty() {
        tx.execute(
            RECORD_RUNS,
            &[&keys, &runs, &outcomes, &errors, &owner, &at(now)],
        )?;
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        tx.execute(TRIM_RUNS, &[&keys, &keep])?;
    }
    Ok(())
}

/// Drops the runs of the jobs `$1` older than each one's last `$2` (the
/// index on key and id finds them).
pub(crate) const TRIM_RUNS: &str = "
    DELETE FROM chronopool_runs AS r
        USING (SELECT DISTINCT k FROM unnest($1::text[]) AS k) AS t
    WHERE r.key = t.k
      AND r.id <= (SELECT id FROM chronopool_runs WHERE key = t.k
                   ORDER BY id DESC OFFSET $2 LIMIT 1)";

/// The history rows of runs' ends: keys `$1`, runs `$2`, outcomes `$3`,
/// errors `$4`, owner `$5`, at `$6` (a `timestamptz`; sqlx sends
/// microseconds to [`RECORD_RUN_MICROS`]). The rows are locked as they
/// are read: a take-over cannot commit between this and the end, which
/// would record a run that ends lost.
const RECORD_RUNS: &str = "
    INSERT INTO chronopool_runs
        (key, name, owner, owner_name, attempt, due, started_at, ended_at, outcome, error)
    SELECT j.key, j.name, j.owner, j.owner_name, j.attempt, j.next_fire, j.started_at, $6,
           f.outcome, f.error
        FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[])
             AS f(key, run, outcome, error)
        JOIN chronopool_jobs AS j ON j.key = f.key AND j.run = f.run
        WHERE j.owner = $5 AND j.state = 'running'
        FOR UPDATE OF j";

/// [`RECORD_RUNS`] for one run, its time in microseconds (`$6`).
#[cfg(feature = "sqlx")]
pub(crate) const RECORD_RUN_MICROS: &str = concat!(
    "INSERT INTO chronopool_runs
        (key, name, owner, owner_name, attempt, due, started_at, ended_at, outcome, error)
    SELECT key, name, owner, owner_name, attempt, next_fire, started_at, ",
    at_micros!("$6::bigint"),
    ", $3, $4 FROM chronopool_jobs
        WHERE key = $1 AND run = $2 AND owner = $5 AND state = 'running'
        FOR UPDATE"
);

/// The claim's keys and handlers less those held back by their handlers'
/// limits (added to `held_back`). The limits' rows of the claim's
/// handlers are locked first, so the claims of one limited handler take
/// turns across processes, each counting the runs the others committed.
fn within_limits(
    tx: &mut postgres::Transaction<'_>,
    claim: &Claim<'_>,
    held_back: &mut Vec<(String, String)>,
) -> Result<(Vec<String>, Vec<String>), postgres::Error> {
    let names = storable(claim.names);
    let locked = tx.query(
        "SELECT name FROM chronopool_limits WHERE name = ANY($1) ORDER BY name FOR UPDATE",
        &[&names],
    )?;
    if locked.is_empty() {
        return Ok((claim.keys.to_vec(), claim.names.to_vec()));
    }
    let rows = tx.query(
        "SELECT l.name, l.max_running - (SELECT count(*) FROM chronopool_jobs AS j
                                          WHERE j.name = l.name AND j.state = 'running'
                                            AND j.lease_until >= $2),
                l.max_running
             FROM chronopool_limits AS l WHERE l.name = ANY($1)",
        &[&names, &at(claim.now)],
    )?;
    let mut free: HashMap<String, i64> = HashMap::new();
    let mut zero = HashSet::new();
    for r in &rows {
        let name: String = r.try_get(0)?;
        if r.try_get::<_, i64>(2)? == 0 {
            zero.insert(name.clone());
        }
        free.insert(name, r.try_get(1)?);
    }
    let (mut keys, mut kept) = (Vec::new(), Vec::new());
    for (key, name) in claim.keys.iter().zip(claim.names) {
        match free.get_mut(name) {
            // A limit of 0 holds the job back for good: not retried (the
            // polls place it again, and a raised limit lets it).
            Some(n) if *n <= 0 && zero.contains(name) => {}
            Some(n) if *n <= 0 => held_back.push((key.clone(), name.clone())),
            Some(n) => {
                *n -= 1;
                keys.push(key.clone());
                kept.push(name.clone());
            }
            None => {
                keys.push(key.clone());
                kept.push(name.clone());
            }
        }
    }
    Ok((keys, kept))
}

/// The keys of `keys` whose rows exist but another transaction holds
/// locked now; the others' rows it locks for `tx` ([`exchange`]). One
/// round trip: the outer query reads the whole locking `ours`.
fn locked_elsewhere(
    tx: &mut postgres::Transaction<'_>,
    keys: &[&str],
) -> Result<HashSet<String>, postgres::Error> {
    tx.query(
        "WITH ours AS (
             SELECT key FROM chronopool_jobs WHERE key = ANY($1) FOR UPDATE SKIP LOCKED
         )
         SELECT key FROM chronopool_jobs
         WHERE key = ANY($1) AND key NOT IN (SELECT key FROM ours)",
        &[&keys],
    )?
    .iter()
    .map(|r| r.try_get(0))
    .collect()
}

fn exchange(c: &mut Client, x: &Exchange<'_>) -> Result<Exchanged, postgres::Error> {
    let owner = x.owner;
    let mut tx = c.transaction()?;
    let mut done = Exchanged::default();
    // The ends first, those whose rows this transaction can lock at once:
    // a row that a transaction of the application's holds locked (an ORM's
    // `SELECT … FOR UPDATE`, a `schedule_in` of the same key not yet
    // committed) defers its own end to a later exchange, instead of
    // holding up the other ends, the renewals and the claims until that
    // transaction ends (for longer than a lease, other processes took this
    // one's runs over).
    if !x.ends.is_empty() {
        let keys: Vec<&str> = x.ends.iter().map(|(f, _)| f.key.as_str()).collect();
        let locked = locked_elsewhere(&mut tx, &keys)?;
        if locked.is_empty() {
            if let Some(h) = x.history {
                record_runs(&mut tx, &owner.id, x.ends, h.skipped, x.now, h.keep)?;
            }
            done.ended = end_runs(&mut tx, &owner.id, x.ends)?;
        } else {
            let deferred: Vec<bool> = x
                .ends
                .iter()
                .map(|(f, _)| locked.contains(&f.key))
                .collect();
            let ready: Vec<(Fence, Finish)> = x
                .ends
                .iter()
                .zip(&deferred)
                .filter(|(_, &d)| !d)
                .map(|(end, _)| end.clone())
                .collect();
            if let Some(h) = x.history {
                let skipped: Vec<bool> = h
                    .skipped
                    .iter()
                    .zip(&deferred)
                    .filter(|(_, &d)| !d)
                    .map(|(&s, _)| s)
                    .collect();
                record_runs(&mut tx, &owner.id, &ready, &skipped, x.now, h.keep)?;
            }
            let mut stored = end_runs(&mut tx, &owner.id, &ready)?.into_iter();
            done.ended = deferred
                .iter()
                .map(|&d| {
                    if d {
                        RunEnd::Deferred
                    } else {
                        stored.next().unwrap_or(RunEnd::Lost)
                    }
                })
                .collect();
        }
    }
    // Renewals before claims: a run of this owner whose lease ended under
    // a stall is extended here, so the claims below neither take it over
    // nor leave it out of its handler's count of runs at once (limits
    // count live leases).
    if let Some((fences, until)) = x.renew {
        let keys: Vec<&str> = fences.iter().map(|f| f.key.as_str()).collect();
        let runs: Vec<i64> = fences.iter().map(|f| f.run).collect();
        let rows = tx.query(RENEW, &[&keys, &runs, &owner.id, &at(until)])?;
        let held = fences_of(&rows)?;
        done.renewed = fences
            .iter()
            .map(|f| held.contains(&(f.key.clone(), f.run)))
            .collect();
    }
    if let Some(claim) = &x.claim {
        let (keys, names) = within_limits(&mut tx, claim, &mut done.held_back)?;
        let rows = tx.query(
            &format!(
                "UPDATE chronopool_jobs AS j SET
                     attempt = CASE WHEN j.state = 'running' AND j.owner = $2 AND j.run = $3
                                        THEN j.attempt
                                    WHEN j.replaced THEN 1
                                    ELSE least(j.attempt, 4294967295) + 1 END,
                     state = 'running', owner = $2, run = $3, owner_name = $4,
                     owner_lock = $5, lease_until = $6, replaced = false, started_at = $7
                 WHERE j.key IN (
                     SELECT c.key FROM unnest($1::text[], $8::text[]) AS k(key, name)
                         JOIN chronopool_jobs AS c ON c.key = k.key AND c.name = k.name
                     WHERE NOT c.paused
                       AND c.name NOT IN (SELECT name FROM chronopool_paused_names)
                       AND CASE c.state
                               WHEN 'scheduled' THEN c.next_fire <= $7
                               WHEN 'running' THEN (c.lease_until < $7
                                                    AND (NOT c.replaced OR c.next_fire <= $7))
                                                   OR (c.owner = $2 AND c.run = $3
                                                       AND NOT c.replaced)
                               ELSE false END
                     FOR UPDATE OF c SKIP LOCKED)
                 RETURNING {COLUMNS}"
            ),
            &[
                &keys,
                &owner.id,
                &claim.run,
                &owner.name,
                &owner.lock,
                &at(claim.lease_until),
                &at(claim.now),
                &names,
            ],
        )?;
        done.claimed = rows_of(&rows)?;
    }
    tx.commit()?;
    Ok(done)
}

impl Conn for PgConn {
    fn upsert(&mut self, jobs: &[NewJob]) -> Result<Vec<Stored>, StoreError> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            let stored = upsert_batch(&mut tx, jobs)?;
            tx.commit()?;
            Ok(stored)
        })
    }

    fn due(&mut self, q: &DueQuery<'_>) -> Result<Vec<Due>, StoreError> {
        let names = storable(q.names);
        self.run(|c| {
            let mut due = due_rows(c, q.until, &names, q, true)?;
            due.extend(due_rows(c, q.unhandled_before, &names, q, false)?);
            Ok(due)
        })
    }

    fn reap(
        &mut self,
        now: Micros,
        grace: Duration,
        suspects: &[i64],
    ) -> Result<(u64, Vec<i64>), StoreError> {
        // The owners of running rows whose session lock is missing (and
        // whose lease has not ended: those are anyone's already).
        const MISSING: &str = "SELECT DISTINCT owner_lock FROM chronopool_jobs
             WHERE state = 'running' AND owner_lock IS NOT NULL AND lease_until > $1
               AND owner_lock <> ALL (
                   SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks AS l
                   WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                     AND l.database = (SELECT oid FROM pg_database
                                       WHERE datname = current_database()))";
        self.run(|c| {
            let up = c.query_one(
                "SELECT now() - pg_postmaster_start_time() > make_interval(secs => $1)",
                &[&grace.as_secs_f64()],
            )?;
            if !up.try_get::<_, bool>(0)? {
                return Ok((0, Vec::new()));
            }
            let missing: Vec<i64> = c
                .query(MISSING, &[&at(now - 1)])?
                .iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()?;
            let gone: Vec<i64> = missing
                .iter()
                .copied()
                .filter(|lock| suspects.contains(lock))
                .collect();
            let reaped = if gone.is_empty() {
                0
            } else {
                c.execute(
                    &format!(
                        "UPDATE chronopool_jobs SET lease_until = $1
                         WHERE state = 'running' AND lease_until > $1
                           AND owner_lock = ANY($2) AND owner_lock IN ({MISSING})"
                    ),
                    &[&at(now - 1), &gone],
                )?
            };
            Ok((reaped, missing))
        })
    }

    fn keep_alive(&mut self) -> Result<(), StoreError> {
        self.run(|c| c.batch_execute(""))
    }

    fn fresh(
        &mut self,
        after: i64,
        until: Micros,
        names: &[String],
        limit: usize,
    ) -> Result<(Vec<Due>, i64), StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let names = storable(names);
        self.run(|c| {
            let rows = c.query(
                &format!(
                    "SELECT key, name, next_fire, seq FROM chronopool_jobs
                     WHERE seq > $1 AND state = 'scheduled' AND next_fire <= $2 AND name = ANY($3)
                       AND {NOT_PAUSED}
                     ORDER BY seq LIMIT $4"
                ),
                &[&after, &at(until), &names, &limit],
            )?;
            let mut last = after;
            let mut due = Vec::with_capacity(rows.len());
            for r in &rows {
                last = last.max(r.try_get(3)?);
                due.push(Due {
                    key: r.try_get(0)?,
                    name: r.try_get(1)?,
                    fire: micros_of(r.try_get(2)?),
                    expired: false,
                });
            }
            Ok((due, last))
        })
    }

    fn last_seq(&mut self) -> Result<i64, StoreError> {
        self.run(|c| {
            c.query_one("SELECT coalesce(max(seq), 0) FROM chronopool_jobs", &[])?
                .try_get(0)
        })
    }

    fn notified(&mut self, timeout: Duration) -> Result<Notice, StoreError> {
        self.run(|c| {
            let mut notifications = c.notifications();
            let Some(first) = notifications.timeout_iter(timeout).next()? else {
                return Ok(Notice::None);
            };
            // Those that came with it are one notice: a full poll if any
            // asks for one.
            let mut full = first.payload() == POLL_NOTICE;
            while let Some(more) = notifications.iter().next()? {
                full |= more.payload() == POLL_NOTICE;
            }
            Ok(if full { Notice::Full } else { Notice::Fresh })
        })
    }

    fn exchange(&mut self, x: &Exchange<'_>) -> Result<Exchanged, StoreError> {
        self.run(|c| exchange(c, x))
    }

    fn get(&mut self, key: &str) -> Result<Option<Row>, StoreError> {
        self.run(|c| {
            let row = c.query_opt(
                &format!("SELECT {COLUMNS} FROM chronopool_jobs WHERE key = $1"),
                &[&key],
            )?;
            row.as_ref().map(row_of).transpose()
        })
    }

    fn query(&mut self, q: &ListQuery<'_>) -> Result<Vec<Row>, StoreError> {
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        let prefix = q.key_prefix;
        self.run(|c| {
            let rows = c.query(
                &format!(
                    "SELECT {COLUMNS} FROM chronopool_jobs
                     WHERE ($1::text IS NULL OR state = $1)
                       AND ($2::bool IS NULL OR {IS_PAUSED} = $2)
                       AND ($3::text IS NULL OR name = $3)
                       AND ($4::text IS NULL OR left(key, length($4)) = $4)
                       AND ($5::timestamptz IS NULL OR next_fire < $5)
                       AND ($6::timestamptz IS NULL OR (next_fire, key) > ($6, $7::text))
                     ORDER BY next_fire, key LIMIT $8"
                ),
                &[
                    &q.state.map(JobState::name),
                    &q.paused,
                    &q.name,
                    &prefix,
                    &q.due_before.map(at),
                    &q.after.map(|(fire, _)| at(fire)),
                    &q.after.map(|(_, key)| key),
                    &limit,
                ],
            )?;
            rows_of(&rows)
        })
    }

    fn counts(&mut self) -> Result<Vec<(JobState, bool, u64)>, StoreError> {
        self.run(|c| {
            let rows = c.query(
                &format!("SELECT state, {IS_PAUSED}, count(*) FROM chronopool_jobs GROUP BY 1, 2"),
                &[],
            )?;
            rows.iter()
                .map(|r| {
                    let state: &str = r.try_get(0)?;
                    let n: i64 = r.try_get(2)?;
                    Ok((
                        JobState::of_name(state).unwrap_or(JobState::Dead),
                        r.try_get(1)?,
                        n as u64,
                    ))
                })
                .collect()
        })
    }

    fn set_paused(&mut self, key: &str, paused: bool) -> Result<bool, StoreError> {
        self.run(|c| {
            c.execute(
                "UPDATE chronopool_jobs SET paused = $2,
                     seq = CASE WHEN $2 THEN seq ELSE nextval('chronopool_jobs_seq') END
                 WHERE key = $1",
                &[&key, &paused],
            )
            .map(|n| n == 1)
        })
    }

    fn set_name_paused(&mut self, name: &str, paused: bool) -> Result<(), StoreError> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            if paused {
                tx.execute(
                    "INSERT INTO chronopool_paused_names (name) VALUES ($1) ON CONFLICT DO NOTHING",
                    &[&name],
                )?;
            } else if tx.execute(
                "DELETE FROM chronopool_paused_names WHERE name = $1",
                &[&name],
            )? == 1
            {
                tx.execute(
                    "UPDATE chronopool_jobs SET seq = nextval('chronopool_jobs_seq')
                     WHERE name = $1 AND state = 'scheduled'",
                    &[&name],
                )?;
            }
            tx.commit()
        })
    }

    fn paused_names(&mut self) -> Result<Vec<String>, StoreError> {
        self.run(|c| {
            c.query(
                "SELECT name FROM chronopool_paused_names ORDER BY name",
                &[],
            )?
            .iter()
            .map(|r| r.try_get(0))
            .collect()
        })
    }

    fn run_now(&mut self, key: &str, now: Micros) -> Result<bool, StoreError> {
        self.run(|c| {
            c.execute(
                "UPDATE chronopool_jobs SET next_fire = least(next_fire, $2),
                     seq = nextval('chronopool_jobs_seq')
                 WHERE key = $1 AND state = 'scheduled'",
                &[&key, &at(now)],
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
        self.run(|c| {
            c.execute(
                "UPDATE chronopool_jobs SET recurrence = $2, next_fire = $3, occurrence = NULL,
                     seq = nextval('chronopool_jobs_seq'),
                     replaced = (state = 'running'),
                     attempt = CASE WHEN state = 'running' THEN attempt ELSE 0 END,
                     last_error = CASE WHEN state = 'running' THEN last_error END
                 WHERE key = $1 AND state IN ('scheduled', 'running')",
                &[&key, &recurrence, &at(next_fire)],
            )
            .map(|n| n == 1)
        })
    }

    fn set_limit(&mut self, name: &str, limit: Option<u32>) -> Result<(), StoreError> {
        self.run(|c| {
            match limit {
                Some(n) => c.execute(
                    "INSERT INTO chronopool_limits (name, max_running) VALUES ($1, $2)
                     ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running",
                    &[&name, &i64::from(n)],
                )?,
                None => c.execute("DELETE FROM chronopool_limits WHERE name = $1", &[&name])?,
            };
            Ok(())
        })
    }

    fn limits(&mut self) -> Result<Vec<(String, u32)>, StoreError> {
        self.run(|c| {
            c.query(
                "SELECT name, max_running FROM chronopool_limits ORDER BY name",
                &[],
            )?
            .iter()
            .map(|r| {
                let n: i64 = r.try_get(1)?;
                Ok((r.try_get(0)?, u32::try_from(n).unwrap_or(u32::MAX)))
            })
            .collect()
        })
    }

    fn runs(&mut self, key: Option<&str>, limit: usize) -> Result<Vec<RunRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(|c| {
            c.query(
                "SELECT key, name, owner, owner_name, attempt, due, started_at, ended_at,
                        outcome, error
                 FROM chronopool_runs WHERE $1::text IS NULL OR key = $1
                 ORDER BY id DESC LIMIT $2",
                &[&key, &limit],
            )?
            .iter()
            .map(|r| {
                let attempt: i64 = r.try_get(4)?;
                Ok(RunRow {
                    key: r.try_get(0)?,
                    name: r.try_get(1)?,
                    owner: r.try_get(2)?,
                    owner_name: r.try_get(3)?,
                    attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                    due: micros_of(r.try_get(5)?),
                    started_at: r.try_get::<_, Option<SystemTime>>(6)?.map(micros_of),
                    ended_at: micros_of(r.try_get(7)?),
                    outcome: r.try_get(8)?,
                    error: r.try_get(9)?,
                })
            })
            .collect()
        })
    }

    fn run_counts(&mut self, since: Micros) -> Result<Vec<(String, u64)>, StoreError> {
        self.run(|c| {
            c.query(
                "SELECT outcome, count(*) FROM chronopool_runs WHERE ended_at >= $1
                 GROUP BY outcome ORDER BY outcome",
                &[&at(since)],
            )?
            .iter()
            .map(|r| {
                let n: i64 = r.try_get(1)?;
                Ok((r.try_get(0)?, n as u64))
            })
            .collect()
        })
    }

    fn delete(&mut self, key: &str) -> Result<bool, StoreError> {
        self.run(|c| {
            c.execute("DELETE FROM chronopool_jobs WHERE key = $1", &[&key])
                .map(|n| n == 1)
        })
    }

    fn revive(&mut self, key: &str, now: Micros) -> Result<bool, StoreError> {
        self.run(|c| {
            c.execute(
                "UPDATE chronopool_jobs SET state = 'scheduled', next_fire = $2, attempt = 0,
                     occurrence = NULL, finished_at = NULL, seq = nextval('chronopool_jobs_seq')
                 WHERE key = $1 AND state = 'dead'",
                &[&key, &at(now)],
            )
            .map(|n| n == 1)
        })
    }

    fn clean(&mut self, r: &Retention) -> Result<u64, StoreError> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            let jobs = tx.execute(
                "DELETE FROM chronopool_jobs
                 WHERE (state = 'done' AND finished_at < $1) OR (state = 'dead' AND finished_at < $2)",
                &[&at(r.done_before), &at(r.dead_before)],
            )?;
            tx.execute(
                "DELETE FROM chronopool_runs WHERE ended_at < $1",
                &[&at(r.runs_before)],
            )?;
            tx.commit()?;
            Ok(jobs)
        })
    }
}

#[cfg(test)]
mod tests;

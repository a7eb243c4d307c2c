//! Jobs scheduled, and runs ended, in an application's sqlx transaction
//! (feature `sqlx`), on PostgreSQL or SQLite: the same statements as the
//! stores' own (`postgres::UPSERT` and its notification, `sqlite::UPSERT`
//! with its sequence numbers, the `END_*` statements of each), sent
//! through the application's connection, awaited on its runtime.

use std::future::Future;
use std::pin::Pin;

use super::app_transaction::{EndedIn, Rows, RunToEnd};
use super::{postgres, sqlite, NewJob, RunEnd, POLL_NOTICE};
use crate::error::StoreError;
use crate::schedule::missed_name;
use crate::time::Micros;

/// An sqlx transaction of the application's on the scheduler's store
/// (`sqlx::Transaction<'_, Postgres>` or `sqlx::Transaction<'_, Sqlite>`),
/// for [`DurableScheduler::schedule_in_sqlx`](crate::DurableScheduler::schedule_in_sqlx)
/// and [`JobContext::complete_in_sqlx`](crate::JobContext::complete_in_sqlx).
/// Sealed: the stores are the crate's.
pub trait SqlxTransaction: AsyncStatements {}

impl<T: AsyncStatements + ?Sized> SqlxTransaction for T {}

/// What a statement in an sqlx transaction returns.
#[doc(hidden)]
pub type StatementFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The store's side of an [`SqlxTransaction`] (sealed: not nameable
/// outside the crate).
pub trait AsyncStatements {
    /// Stores the jobs in the transaction, without the commit.
    #[doc(hidden)]
    fn upsert_jobs<'a>(&'a mut self, jobs: Rows<'a>) -> StatementFuture<'a, ()>;

    /// Ends a run in the transaction, without the commit.
    #[doc(hidden)]
    fn end_run<'a>(&'a mut self, run: RunToEnd<'a>) -> StatementFuture<'a, EndedIn>;
}

fn sqlx_error(e: sqlx::Error) -> StoreError {
    let code = e
        .as_database_error()
        .and_then(|db| db.code())
        .map(|code| code.into_owned());
    StoreError::new(e.to_string(), code, false, Some(Box::new(e)))
}

/// As `postgres::Transaction`'s: one statement per kind, then the
/// notification that asks for a full poll at the commit.
impl AsyncStatements for sqlx::Transaction<'_, sqlx::Postgres> {
    fn upsert_jobs<'a>(&'a mut self, jobs: Rows<'a>) -> StatementFuture<'a, ()> {
        Box::pin(async move {
            for (mode, of_kind) in postgres::by_kind(jobs.0) {
                let column = |f: fn(&NewJob) -> String| -> Vec<String> {
                    of_kind.iter().map(|j| f(j)).collect()
                };
                let payloads: Vec<Vec<u8>> = of_kind.iter().map(|j| j.payload.clone()).collect();
                let fires: Vec<Micros> = of_kind.iter().map(|j| j.next_fire).collect();
                let catch_ups: Vec<Option<i64>> = of_kind.iter().map(|j| j.catch_up).collect();
                sqlx::query(postgres::UPSERT)
                    .bind(column(|j| j.key.clone()))
                    .bind(column(|j| j.name.clone()))
                    .bind(payloads)
                    .bind(column(|j| j.recurrence.clone()))
                    .bind(fires)
                    .bind(column(|j| missed_name(j.missed).to_owned()))
                    .bind(catch_ups)
                    .bind(mode.sql_name())
                    .execute(&mut **self)
                    .await
                    .map_err(sqlx_error)?;
            }
            sqlx::query("SELECT pg_notify('chronopool_jobs', $1)")
                .bind(POLL_NOTICE)
                .execute(&mut **self)
                .await
                .map_err(sqlx_error)?;
            Ok(())
        })
    }

    /// As `postgres::Transaction`'s, one run: its fence held (the end
    /// stored), or its job replaced (the new schedule stands, and the
    /// listeners are asked for a full poll), or neither.
    fn end_run<'a>(&'a mut self, run: RunToEnd<'a>) -> StatementFuture<'a, EndedIn> {
        Box::pin(async move {
            let keys = vec![run.fence.key.as_str()];
            let runs = vec![run.fence.run];
            let outcome = super::outcome_name(run.finish, false);
            if let (Some((at, keep)), Some(outcome)) = (run.record_at, outcome) {
                sqlx::query(postgres::RECORD_RUN_MICROS)
                    .bind(&run.fence.key)
                    .bind(run.fence.run)
                    .bind(outcome)
                    .bind(super::error_of(run.finish))
                    .bind(run.owner)
                    .bind(at)
                    .execute(&mut **self)
                    .await
                    .map_err(sqlx_error)?;
                sqlx::query(postgres::TRIM_RUNS)
                    .bind(&keys)
                    .bind(i64::try_from(keep).unwrap_or(i64::MAX))
                    .execute(&mut **self)
                    .await
                    .map_err(sqlx_error)?;
            }
            let held = if run.finish.deletes() {
                sqlx::query(postgres::END_DELETE)
                    .bind(&keys)
                    .bind(&runs)
                    .bind(run.owner)
                    .execute(&mut **self)
                    .await
            } else {
                let ends = [(run.fence.clone(), run.finish.clone())];
                let c = postgres::EndColumns::of(ends.iter());
                sqlx::query(postgres::END_UPDATE)
                    .bind(&c.keys)
                    .bind(&c.runs)
                    .bind(&c.states)
                    .bind(&c.next_fires)
                    .bind(&c.resets)
                    .bind(&c.uncounts)
                    .bind(&c.errors)
                    .bind(&c.keep_errors)
                    .bind(&c.finished)
                    .bind(run.owner)
                    .bind(&c.occurrences)
                    .execute(&mut **self)
                    .await
            }
            .map_err(sqlx_error)?
            .rows_affected();
            if held == 1 {
                return Ok(EndedIn(RunEnd::Stored));
            }
            let superseded: Option<(String, i64, String, i64)> =
                sqlx::query_as(postgres::END_SUPERSEDED)
                    .bind(&keys)
                    .bind(&runs)
                    .bind(run.owner)
                    .fetch_optional(&mut **self)
                    .await
                    .map_err(sqlx_error)?;
            let Some((_, _, name, next_fire)) = superseded else {
                return Ok(EndedIn(RunEnd::Lost));
            };
            sqlx::query("SELECT pg_notify('chronopool_jobs', $1)")
                .bind(POLL_NOTICE)
                .execute(&mut **self)
                .await
                .map_err(sqlx_error)?;
            Ok(EndedIn(RunEnd::Superseded { name, next_fire }))
        })
    }
}

/// As `rusqlite::Transaction`'s: the sequence numbers drawn in the
/// transaction, which holds the file's write lock until it commits.
impl AsyncStatements for sqlx::Transaction<'_, sqlx::Sqlite> {
    fn upsert_jobs<'a>(&'a mut self, jobs: Rows<'a>) -> StatementFuture<'a, ()> {
        Box::pin(async move {
            let jobs = super::latest_per_key(jobs.0);
            let n = i64::try_from(jobs.len()).unwrap_or(i64::MAX);
            let mut seq: i64 = sqlx::query_scalar(sqlite::DRAW_SEQ)
                .bind(n)
                .fetch_one(&mut **self)
                .await
                .map_err(sqlx_error)?;
            for job in jobs {
                seq += 1;
                sqlx::query(sqlite::UPSERT)
                    .bind(&job.key)
                    .bind(&job.name)
                    .bind(&job.payload)
                    .bind(&job.recurrence)
                    .bind(job.next_fire)
                    .bind(missed_name(job.missed))
                    .bind(job.catch_up)
                    .bind(seq)
                    .bind(job.if_exists.sql_name())
                    .execute(&mut **self)
                    .await
                    .map_err(sqlx_error)?;
            }
            Ok(())
        })
    }

    /// As `rusqlite::Transaction`'s: the run's end, or its replaced job's
    /// new schedule with a sequence number drawn in the transaction.
    fn end_run<'a>(&'a mut self, run: RunToEnd<'a>) -> StatementFuture<'a, EndedIn> {
        Box::pin(async move {
            let (key, owner, number) = (&run.fence.key, run.owner, run.fence.run);
            let outcome = super::outcome_name(run.finish, false);
            if let (Some((at, keep)), Some(outcome)) = (run.record_at, outcome) {
                sqlx::query(sqlite::RECORD_RUN)
                    .bind(key)
                    .bind(owner)
                    .bind(number)
                    .bind(at)
                    .bind(outcome)
                    .bind(super::error_of(run.finish))
                    .execute(&mut **self)
                    .await
                    .map_err(sqlx_error)?;
                sqlx::query(sqlite::TRIM_RUNS)
                    .bind(key)
                    .bind(i64::try_from(keep).unwrap_or(i64::MAX))
                    .execute(&mut **self)
                    .await
                    .map_err(sqlx_error)?;
            }
            let held = if run.finish.deletes() {
                sqlx::query(sqlite::END_DELETE)
                    .bind(key)
                    .bind(owner)
                    .bind(number)
                    .execute(&mut **self)
                    .await
            } else {
                let e = run.finish.ending();
                sqlx::query(sqlite::END_UPDATE)
                    .bind(key)
                    .bind(owner)
                    .bind(number)
                    .bind(e.state)
                    .bind(e.next_fire)
                    .bind(e.reset)
                    .bind(e.uncount)
                    .bind(e.error)
                    .bind(e.keep_error)
                    .bind(e.finished_at)
                    .bind(e.occurrence)
                    .execute(&mut **self)
                    .await
            }
            .map_err(sqlx_error)?
            .rows_affected();
            if held == 1 {
                return Ok(EndedIn(RunEnd::Stored));
            }
            let seq: i64 = sqlx::query_scalar(sqlite::DRAW_SEQ)
                .bind(1_i64)
                .fetch_one(&mut **self)
                .await
                .map_err(sqlx_error)?;
            let superseded: Option<(String, i64)> = sqlx::query_as(sqlite::END_SUPERSEDED)
                .bind(key)
                .bind(owner)
                .bind(number)
                .bind(seq + 1)
                .fetch_optional(&mut **self)
                .await
                .map_err(sqlx_error)?;
            Ok(EndedIn(match superseded {
                Some((name, next_fire)) => RunEnd::Superseded { name, next_fire },
                None => RunEnd::Lost,
            }))
        })
    }
}

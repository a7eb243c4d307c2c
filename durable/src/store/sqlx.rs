//! Jobs scheduled in an application's sqlx transaction (feature `sqlx`),
//! on PostgreSQL or SQLite: the same statements as the stores' own
//! (`postgres::UPSERT` and its notification, `sqlite::UPSERT` with its
//! sequence numbers), sent through the application's connection, awaited
//! on its runtime.

use std::future::Future;
use std::pin::Pin;

use super::app_transaction::Rows;
use super::{postgres, sqlite, NewJob, POLL_NOTICE};
use crate::error::StoreError;
use crate::schedule::missed_name;
use crate::time::Micros;

/// An sqlx transaction of the application's on the scheduler's store
/// (`sqlx::Transaction<'_, Postgres>` or `sqlx::Transaction<'_, Sqlite>`),
/// for [`DurableScheduler::schedule_in_sqlx`](crate::DurableScheduler::schedule_in_sqlx).
/// Sealed: the stores are the crate's.
pub trait SqlxTransaction: AsyncUpsert {}

impl<T: AsyncUpsert + ?Sized> SqlxTransaction for T {}

/// What storing jobs in an sqlx transaction returns.
#[doc(hidden)]
pub type UpsertFuture<'a> = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'a>>;

/// The store's side of an [`SqlxTransaction`] (sealed: not nameable
/// outside the crate).
pub trait AsyncUpsert {
    /// Stores the jobs in the transaction, without the commit.
    #[doc(hidden)]
    fn upsert_jobs<'a>(&'a mut self, jobs: Rows<'a>) -> UpsertFuture<'a>;
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
impl AsyncUpsert for sqlx::Transaction<'_, sqlx::Postgres> {
    fn upsert_jobs<'a>(&'a mut self, jobs: Rows<'a>) -> UpsertFuture<'a> {
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
}

/// As `rusqlite::Transaction`'s: the sequence numbers drawn in the
/// transaction, which holds the file's write lock until it commits.
impl AsyncUpsert for sqlx::Transaction<'_, sqlx::Sqlite> {
    fn upsert_jobs<'a>(&'a mut self, jobs: Rows<'a>) -> UpsertFuture<'a> {
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
}

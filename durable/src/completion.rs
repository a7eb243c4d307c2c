//! Completing a run in the application's transaction:
//! [`JobContext::complete_in`] (and `complete_in_sqlx`), and the
//! [`RunRecord`] through which the run learns of it.
//!
//! # Why the run loop still sends its finish
//!
//! The handler ends its run in its own transaction, beside its own writes,
//! with the same fenced statement the run loop would send; whether that
//! transaction commits is the application's affair, and the scheduler is
//! not told. So when the handler returns, the run loop sends the finish of
//! the handler's outcome as for any run, fenced as always:
//!
//! * the transaction committed: the row no longer carries the run's fence
//!   (the handler's end cleared it), so the run loop's finish stores
//!   nothing (`RunEnd::Lost`), and the run counts as the success the
//!   handler's transaction stored, its next occurrence placed from the
//!   finish recorded here;
//! * it rolled back (or was never committed): the fence is still there,
//!   and the run loop stores the handler's outcome, as if `complete_in`
//!   had never been called.
//!
//! The handler's writes and its run's end are one transaction: a process
//! killed before the commit leaves neither (the lease ends, and the job
//! runs again), after it both. A run whose fence is gone by the time the
//! handler ends it (its lease ended and another run took the job, or it
//! was cancelled) gets an error from `complete_in`, so that the handler
//! rolls its writes back: the run that holds the job does them.

use std::sync::{Arc, Mutex};

use crate::job::{JobContext, JobError};
use crate::store::app_transaction::{EndedIn, RunToEnd};
use crate::store::{AppTransaction, Fence, Finish, Row, RunEnd};
use crate::time::Micros;

/// A run's success as of when it is asked for: its finish, and the time
/// its history row records (`None`: no history).
type Success = dyn Fn(&Row) -> (Finish, Option<(Micros, usize)>) + Send + Sync;

/// What a run's handler can end its run with, and what it did: shared by
/// the run (which made it) and the handler's context.
pub(crate) struct RunRecord {
    /// The run's owner's id and fence.
    owner: String,
    fence: Fence,
    /// The finish of a success of this run, as of when it is asked for,
    /// and the time its history row records (`None`: no history).
    success: Box<Success>,
    /// The last end the handler stored in a transaction of its own.
    completed: Mutex<Option<Completed>>,
}

/// A run's end, stored in the application's transaction (which may yet
/// roll back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Completed {
    pub(crate) finish: Finish,
    pub(crate) end: RunEnd,
}

impl std::fmt::Debug for RunRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRecord")
            .field("fence", &self.fence)
            .field("completed", &self.completed())
            .finish_non_exhaustive()
    }
}

impl RunRecord {
    pub(crate) fn new(
        owner: String,
        fence: Fence,
        success: impl Fn(&Row) -> (Finish, Option<(Micros, usize)>) + Send + Sync + 'static,
    ) -> Arc<RunRecord> {
        Arc::new(RunRecord {
            owner,
            fence,
            success: Box::new(success),
            completed: Mutex::new(None),
        })
    }

    /// The end the handler stored in its own transaction, if it did.
    pub(crate) fn completed(&self) -> Option<Completed> {
        self.completed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The statement's arguments for this run's success, now.
    fn to_end<'a>(
        &'a self,
        finish: &'a Finish,
        record_at: Option<(Micros, usize)>,
    ) -> RunToEnd<'a> {
        RunToEnd {
            owner: &self.owner,
            fence: &self.fence,
            finish,
            record_at,
        }
    }

    /// Records what the statement did; an error if the fence was gone.
    fn record(&self, finish: Finish, EndedIn(end): EndedIn) -> Result<(), JobError> {
        if end == RunEnd::Lost {
            return Err(lost());
        }
        *self.completed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Completed { finish, end });
        Ok(())
    }
}

/// The error of a run that no longer holds its job.
fn lost() -> JobError {
    JobError::retry(
        "this run no longer holds its job (its lease ended and another run took it, or it \
         was cancelled): roll the transaction back",
    )
}

/// The error of a statement that failed.
fn failed(e: crate::error::StoreError) -> JobError {
    JobError::retry(format!(
        "the run could not be ended in the transaction: {e}"
    ))
}

impl JobContext<'_> {
    /// Ends this run as a success in `tx`, a transaction of the handler's
    /// own on the scheduler's store (a `rusqlite::Transaction` on the same
    /// SQLite file, or a `postgres::Transaction` on the same database):
    /// the handler's writes and its run's end commit together, or neither
    /// does. A handler whose effects live in that database runs them
    /// exactly once, even when processes crash: killed before the commit,
    /// the run left nothing, and the job runs again when its lease ends;
    /// after it, the job is done (or waits for its next occurrence).
    ///
    /// Call it once per transaction, last, just before the commit:
    ///
    /// * On PostgreSQL the job's row is locked from here until the commit:
    ///   the scheduler's renewals skip it, but any other statement on it
    ///   waits, so do not call the scheduler's API on this job's key
    ///   meanwhile (`cancel`, `schedule`: on the same thread that waits
    ///   forever). Use the default isolation, `READ COMMITTED`: under
    ///   `REPEATABLE READ` the scheduler's renewals make the end fail with
    ///   a serialization error.
    /// * On SQLite the transaction holds the file's write lock from its
    ///   first write until the commit, and every writer waits for it, the
    ///   scheduler too; begin it with `TransactionBehavior::Immediate`
    ///   (a deferred one that reads first may fail with `SQLITE_BUSY`).
    /// * Once it has committed, the job is free: a recurring job's next
    ///   occurrence may start (here or elsewhere) before this handler has
    ///   returned.
    ///
    /// If `tx` rolls back, so does the end: the run then ends with what the
    /// handler returns, as if this had not been called. Once `tx` has
    /// committed, what the handler returns changes nothing in the store
    /// (a handler that returns an error after its commit is counted as a
    /// lost run in [`DurableMetrics`](crate::DurableMetrics), not as a
    /// success).
    ///
    /// # Errors
    ///
    /// A retryable [`JobError`] if the run no longer holds its job (its
    /// lease ended and another run took it over, or the job was
    /// cancelled), or if the statement failed: return it (with `?`) so that
    /// `tx` rolls back.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use chronopool_durable::{Config, DurableScheduler, Schedule};
    /// use rusqlite::TransactionBehavior;
    /// use std::path::PathBuf;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path: PathBuf = dir.path().join("shop.db");
    /// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
    /// let jobs = DurableScheduler::sqlite(&pool, &path, Config::default())?;
    /// rusqlite::Connection::open(&path)?
    ///     .execute("CREATE TABLE invoices (order_id TEXT PRIMARY KEY)", [])?;
    ///
    /// let db = path.clone();
    /// jobs.register("invoice", move |job| {
    ///     let mut conn = rusqlite::Connection::open(&db).map_err(|e| e.to_string())?;
    ///     let mut tx = conn
    ///         .transaction_with_behavior(TransactionBehavior::Immediate)
    ///         .map_err(|e| e.to_string())?;
    ///     tx.execute("INSERT INTO invoices (order_id) VALUES (?1)", [job.key()])
    ///         .map_err(|e| e.to_string())?;
    ///     job.complete_in(&mut tx)?; // the invoice and the run's end, or neither
    ///     tx.commit().map_err(|e| e.to_string())?;
    ///     Ok(())
    /// });
    /// jobs.start()?;
    /// jobs.schedule("order-7", "invoice", b"", Schedule::After(std::time::Duration::ZERO))?;
    /// # let waited = std::time::Instant::now();
    /// # while jobs.job("order-7")?.is_some() && waited.elapsed().as_secs() < 30 {
    /// #     std::thread::sleep(std::time::Duration::from_millis(10));
    /// # }
    /// # assert!(jobs.job("order-7")?.is_none());
    /// # jobs.shutdown(std::time::Duration::from_secs(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn complete_in<T: AppTransaction + ?Sized>(&self, tx: &mut T) -> Result<(), JobError> {
        let record = self.record();
        let (finish, record_at) = (record.success)(self.row());
        let ended = tx
            .end_run(record.to_end(&finish, record_at))
            .map_err(failed)?;
        record.record(finish, ended)
    }

    /// [`complete_in`](Self::complete_in), in an sqlx transaction of the
    /// handler's (`sqlx::Transaction<'_, Postgres>` or
    /// `sqlx::Transaction<'_, Sqlite>`, on the scheduler's store; feature
    /// `sqlx`), awaited on the handler's runtime: for an
    /// [async handler](crate::DurableScheduler::register_async). On SQLite,
    /// begin it with `pool.begin_with("BEGIN IMMEDIATE")`.
    ///
    /// # Errors
    ///
    /// As for [`complete_in`](Self::complete_in).
    ///
    /// ```no_run
    /// # #[cfg(feature = "tokio")]
    /// # fn demo(jobs: &chronopool_durable::DurableScheduler, db: sqlx::PgPool,
    /// #         runtime: &tokio::runtime::Runtime) {
    /// jobs.register_async("invoice", runtime.handle().clone(), move |job| {
    ///     let db = db.clone();
    ///     async move {
    ///         let mut tx = db.begin().await.map_err(|e| e.to_string())?;
    ///         sqlx::query("INSERT INTO invoices (order_id) VALUES ($1)")
    ///             .bind(job.key())
    ///             .execute(&mut *tx)
    ///             .await
    ///             .map_err(|e| e.to_string())?;
    ///         job.complete_in_sqlx(&mut tx).await?;
    ///         tx.commit().await.map_err(|e| e.to_string())?;
    ///         Ok(())
    ///     }
    /// });
    /// # }
    /// ```
    #[cfg(feature = "sqlx")]
    pub async fn complete_in_sqlx<T: crate::store::SqlxTransaction + ?Sized>(
        &self,
        tx: &mut T,
    ) -> Result<(), JobError> {
        let record = self.record();
        let (finish, record_at) = (record.success)(self.row());
        let ended = tx
            .end_run(record.to_end(&finish, record_at))
            .await
            .map_err(failed)?;
        record.record(finish, ended)
    }
}

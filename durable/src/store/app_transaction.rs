//! [`AppTransaction`]: a transaction of the application's own, on the
//! scheduler's store, that jobs can be scheduled in and runs ended in.

use super::{Fence, Finish, NewJob, RunEnd};
use crate::error::StoreError;

/// A transaction of the application's own on the scheduler's store, in
/// which [`DurableScheduler::schedule_in`](crate::DurableScheduler::schedule_in)
/// stores jobs, and [`JobContext::complete_in`](crate::JobContext::complete_in)
/// ends a run, beside the application's own writes: if it commits, they
/// are stored; if it rolls back, they never were. Implemented for
/// `rusqlite::Transaction` (feature `sqlite`) and `postgres::Transaction`
/// (feature `postgres`), on the same SQLite file or PostgreSQL database
/// as the scheduler. Sealed: the stores are the crate's.
pub trait AppTransaction: Statements {}

impl<T: Statements + ?Sized> AppTransaction for T {}

/// The store's side of an [`AppTransaction`] (sealed: not nameable outside
/// the crate).
pub trait Statements {
    /// Stores the jobs in the transaction (`Conn::upsert`, without the
    /// commit).
    #[doc(hidden)]
    fn upsert_jobs(&mut self, jobs: Rows<'_>) -> Result<(), StoreError>;

    /// Ends a run in the transaction (one end of `Conn::exchange`, without
    /// the commit).
    #[doc(hidden)]
    fn end_run(&mut self, run: RunToEnd<'_>) -> Result<EndedIn, StoreError>;
}

/// The jobs a [`Statements`] stores (opaque outside the crate).
#[doc(hidden)]
#[derive(Debug)]
pub struct Rows<'a>(pub(crate) &'a [NewJob]);

/// A run a [`Statements`] ends (opaque outside the crate).
#[doc(hidden)]
#[derive(Debug)]
pub struct RunToEnd<'a> {
    /// Its owner's id.
    pub(crate) owner: &'a str,
    pub(crate) fence: &'a Fence,
    pub(crate) finish: &'a Finish,
    /// When the run ended, for its history row, and how many runs of the
    /// job the history keeps (`None`: no history).
    pub(crate) record_at: Option<(crate::time::Micros, usize)>,
}

/// What became of a run a [`Statements`] ended (opaque outside the crate).
#[doc(hidden)]
#[derive(Debug)]
pub struct EndedIn(pub(crate) RunEnd);

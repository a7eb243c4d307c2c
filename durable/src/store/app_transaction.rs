//! [`AppTransaction`]: a transaction of the application's own, on the
//! scheduler's store, that jobs can be scheduled in.

use super::NewJob;
use crate::error::StoreError;

/// A transaction of the application's own on the scheduler's store, in
/// which [`DurableScheduler::schedule_in`](crate::DurableScheduler::schedule_in)
/// stores jobs beside the application's own writes: if it commits, they
/// exist and run; if it rolls back, they never existed. Implemented for
/// `rusqlite::Transaction` (feature `sqlite`) and `postgres::Transaction`
/// (feature `postgres`), on the same SQLite file or PostgreSQL database
/// as the scheduler. Sealed: the stores are the crate's.
pub trait AppTransaction: Upsert {}

impl<T: Upsert + ?Sized> AppTransaction for T {}

/// The store's side of an [`AppTransaction`] (sealed: not nameable outside
/// the crate).
pub trait Upsert {
    /// Stores the jobs in the transaction (`Conn::upsert`, without the
    /// commit).
    #[doc(hidden)]
    fn upsert_jobs(&mut self, jobs: Rows<'_>) -> Result<(), StoreError>;
}

/// The jobs an [`Upsert`] stores (opaque outside the crate).
#[doc(hidden)]
#[derive(Debug)]
pub struct Rows<'a>(pub(crate) &'a [NewJob]);

//! Durable schedules for [chronopool]: named jobs whose schedules are
//! stored, so that they survive restarts and crashes, run on a
//! [`ScheduledExecutor`](chronopool::ScheduledExecutor) and its timer.
//!
//! Closures cannot be stored, so a job is a *handler* registered by name at
//! start ([`DurableScheduler::register`]) and a stored row: its key (unique:
//! scheduling a key again replaces its job), the handler's name, a payload
//! of bytes, and a [`Schedule`]: once at a wall time or after a delay,
//! every period, or on a cron expression in a time zone.
//!
//! * **Memory holds a window, the store holds the rest**: only the jobs
//!   due within [`Config::window`] are in the executor's timer.
//! * **At least once, exactly once while nothing crashes**: a process
//!   claims a job (owner and lease, one statement) before it runs it,
//!   renews the lease while the handler runs, and stores the outcome only
//!   if the job is still its own. A crashed process's leases expire and
//!   another process runs its jobs; the handler sees the attempt number.
//! * **Failures** are retried with a doubling back-off up to
//!   [`Config::max_attempts`], then the job is *dead*, kept for
//!   [`dead_jobs`](DurableScheduler::dead_jobs) and a manual
//!   [`retry`](DurableScheduler::retry). A job whose handler is not
//!   registered waits, reported in its `last_error`.
//! * **Misfires** of a recurring job after downtime follow its [`Misfire`].
//!
//! The store is SQLite ([`DurableScheduler::sqlite`]: one file, the
//! bundled SQLite, for one process or several on one machine) or
//! PostgreSQL ([`DurableScheduler::postgres`]: processes on several
//! machines sharing one schedule; a connection lost to a restart of the
//! server is opened again).
//!
//! [chronopool]: https://docs.rs/chronopool

#![warn(missing_docs, missing_debug_implementations)]

mod error;
mod schedule;
mod scheduler;
mod store;
mod time;

pub use error::DurableError;
pub use schedule::{Misfire, Schedule};
pub use scheduler::{Config, DurableScheduler, Handler, JobContext, JobInfo};
pub use store::JobState;

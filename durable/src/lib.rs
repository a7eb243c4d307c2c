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
//!   A handler's [permanent](JobError::permanent) error (a payload it
//!   cannot read, say) makes the job dead at once.
//! * **Misfires** of a recurring job after downtime follow its [`Misfire`].
//! * **Batches**: [`schedule_all`](DurableScheduler::schedule_all) stores
//!   many jobs in one transaction.
//! * **Retention**: dead jobs are deleted after [`Config::keep_dead`], and
//!   one-shot jobs that succeeded are deleted at once or kept as
//!   [`JobState::Done`] for [`Config::keep_done`].
//! * **Leases** are renewed by a thread of the scheduler's own, so a busy
//!   executor cannot let a live run's lease expire.
//! * **Observability**: [`DurableMetrics`] counts due, claimed, running,
//!   retried and dead runs, expired leases and store errors.
//!
//! The store is SQLite ([`DurableScheduler::sqlite`]: one file, the
//! bundled SQLite, for one process or several on one machine) or
//! PostgreSQL ([`DurableScheduler::postgres`]: processes on several
//! machines sharing one schedule; a connection lost to a restart of the
//! server is opened again).
//!
//! # Cargo features
//!
//! * `serde`: typed payloads in JSON (`Job::json`,
//!   `DurableScheduler::schedule_json`, `JobContext::json`).
//! * `tracing`: events for `tracing` subscribers at the moments
//!   [`DurableMetrics`] counts (`DEBUG` claimed and succeeded, `INFO`
//!   retried, `WARN` dead, lost runs and expired leases, `ERROR` store
//!   failures; `TRACE` each job placed in the timer).
//!
//! [chronopool]: https://docs.rs/chronopool

#![warn(missing_docs, missing_debug_implementations)]

mod batch;
mod error;
mod job;
mod lease;
mod metrics;
mod schedule;
mod scheduler;
mod store;
mod time;

pub use error::DurableError;
pub use job::{Handler, Job, JobContext, JobError};
pub use metrics::DurableMetrics;
pub use schedule::{Misfire, Schedule};
pub use scheduler::{Config, DurableScheduler, JobInfo};
pub use store::JobState;

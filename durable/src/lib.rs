//! Durable schedules for [chronopool]: named jobs whose schedules are
//! stored, so that they survive restarts and crashes, run on a
//! [`ScheduledExecutor`](chronopool::ScheduledExecutor) and its timer.
//!
//! Closures cannot be stored, so a job is a *handler* registered by name at
//! start ([`DurableScheduler::register`]) and a stored row: its key (unique:
//! see [`IfExists`] for what scheduling a stored key again does), the
//! handler's name, a payload
//! of bytes, and a [`Schedule`]: once at a wall time or after a delay,
//! every period, or on a cron expression in a time zone.
//!
//! * **Memory holds a window, the store holds the rest**: only the jobs
//!   due within [`Config::window`] are in the executor's timer.
//! * **At least once, exactly once while nothing crashes**: a scheduler
//!   claims a job (a lease, and a fence: its own random identity and a run
//!   number) before it runs it, renews the lease until the run's outcome
//!   is stored, and stores the outcome only if the row still carries the
//!   run's fence. A crashed process's leases expire (on PostgreSQL they are
//!   ended as soon as the server sees its connection close) and another
//!   process runs its jobs; the handler sees the attempt number. A job
//!   cancelled while it runs is left alone by the run's outcome; one
//!   replaced while it runs waits for that run to end (no second run of a
//!   key starts beside it, in any process), then runs on its new schedule.
//! * **Scheduling is idempotent by default**: the same job scheduled again
//!   (at every start of a service, say) is kept untouched, its next run
//!   where it was; [`IfExists`] also keeps a stored job's time and takes
//!   the new payload (debounce), or replaces the job.
//! * **The store's work is the scheduler's**: claims, outcomes, renewals
//!   and polls happen on threads of the scheduler's own, so the executor's
//!   workers run handlers and nothing else, and a store that is away holds
//!   up no worker (outcomes wait, and are stored when it is back). A job is
//!   claimed only when a run slot can start it.
//! * **Wake-ups in milliseconds**: a job another process schedules for now
//!   is placed at once (PostgreSQL `LISTEN`/`NOTIFY`; SQLite: the file's
//!   change counter, looked at every 25 ms); [`Config::poll_interval`]
//!   polls stay the source of truth.
//! * **Failures** are retried after the back-off of [`Config::retry`] (the
//!   core's [`Backoff`](chronopool::trigger::Backoff)) up to
//!   [`Config::max_attempts`], then the job is *dead*, kept for
//!   [`dead_jobs`](DurableScheduler::dead_jobs) and a manual
//!   [`retry`](DurableScheduler::retry). A handler's
//!   [permanent](JobError::permanent) error makes the job dead at once. For
//!   a recurring job only that occurrence is dead: the job goes on to its
//!   next occurrence, its failure kept as its `last_error` (one bad
//!   occurrence never ends a schedule). A
//!   handler that kills its process uses up its attempts too: they are
//!   counted when the job is claimed. A job whose handler is not
//!   registered waits, reported in its `last_error`.
//! * **Missed runs** of a recurring job after downtime follow its
//!   [`MissedRuns`](chronopool::MissedRuns) policy (the core's, same
//!   meanings), and a [catch-up window](Job::catch_up) can skip
//!   occurrences too late to matter.
//! * **Batches**: [`schedule_all`](DurableScheduler::schedule_all) stores
//!   many jobs in one transaction.
//! * **In the application's transactions**: [`schedule_in`](DurableScheduler::schedule_in)
//!   stores jobs in a transaction of the application's, beside its own
//!   writes (an order and its reminder, or neither), and a handler's
//!   [`complete_in`](JobContext::complete_in) ends its run in one (its
//!   effects and its end, or neither: exactly once, crashes included).
//! * **Typed and async handlers**: a `JobArgs` type
//!   (feature `serde`) names its handler and carries its arguments, so
//!   scheduling and handling type-check against each other; a handler may
//!   be an `async fn` on the runtime of the application's
//!   ([`register_async`](DurableScheduler::register_async)).
//! * **Retention**: dead jobs are deleted after [`Config::keep_dead`], and
//!   one-shot jobs that succeeded are deleted at once or kept as
//!   [`JobState::Done`] for [`Config::keep_done`].
//! * **Time**: every time is a whole microsecond, rounded up (a job never
//!   runs early), from the year 1 to 9999; a schedule outside that range is
//!   an error, never a panic.
//! * **Observability**: [`DurableMetrics`] counts due, claimed, running,
//!   retried and dead runs, expired leases and store errors; errors keep
//!   their cause ([`StoreError`]).
//!
//! # Stores
//!
//! * SQLite (feature `sqlite`, on by default;
//!   [`DurableScheduler::sqlite`]): one file, the bundled SQLite, for one
//!   process or several on one machine.
//! * PostgreSQL (feature `postgres`; `DurableScheduler::postgres`):
//!   processes on several machines sharing one schedule; a connection lost
//!   to a restart of the server is opened again.
//!
//! # Cargo features
//!
//! * `sqlite` (default) and `postgres`: the stores (at least one).
//! * `serde`: typed jobs, `JobArgs` (a Rust type of arguments that
//!   names its handler: `register_typed`, `schedule_typed`, `Job::typed`),
//!   and JSON payloads (`Job::json`, `DurableScheduler::schedule_json`,
//!   `JobContext::json`).
//! * `sqlx`: scheduling, and ending runs, in an application's sqlx
//!   transaction, PostgreSQL or SQLite (`DurableScheduler::schedule_in_sqlx`,
//!   `JobContext::complete_in_sqlx`; turns on both stores).
//! * `tokio`: async handlers on a tokio runtime's handle
//!   ([`DurableScheduler::register_async`] takes any [`Spawn`]; this
//!   feature implements it for `tokio::runtime::Handle`).
//! * `metrics`: counters, histograms and gauges through the `metrics`
//!   facade, for the exporter the application installed (Prometheus,
//!   OpenTelemetry): see the `prometheus` example.
//! * `tracing`: events for `tracing` subscribers at the moments
//!   [`DurableMetrics`] counts (`DEBUG` claimed and succeeded, `INFO`
//!   retried and skipped, `WARN` dead, lost runs and expired leases,
//!   `ERROR` store failures; `TRACE` each job placed in the timer).
//!
//! [chronopool]: https://docs.rs/chronopool

#![warn(missing_docs, missing_debug_implementations)]

#[cfg(not(any(feature = "sqlite", feature = "postgres")))]
compile_error!("chronopool-durable needs a store: turn on the `sqlite` or the `postgres` feature");

mod completion;
mod config;
mod control;
mod engine;
mod error;
mod job;
mod listing;
mod metrics;
mod owner;
mod schedule;
mod scheduler;
mod spawn;
mod store;
mod time;
#[cfg(feature = "serde")]
mod typed;

pub use config::Config;
pub use control::MAX_BACKFILL;
pub use error::{DurableError, StoreError};
pub use job::{Handler, Job, JobContext, JobError};
pub use listing::{JobCounts, JobQuery, RunInfo, RunOutcome};
pub use metrics::DurableMetrics;
pub use schedule::Schedule;
pub use scheduler::{DurableScheduler, JobInfo};
pub use spawn::{AsyncHandler, HandlerFuture, Spawn, SpawnedFuture};
#[cfg(feature = "sqlx")]
pub use store::SqlxTransaction;
pub use store::{AppTransaction, IfExists, JobState};
#[cfg(feature = "serde")]
pub use typed::JobArgs;

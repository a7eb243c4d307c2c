//! A work-stealing thread pool that runs tasks now, later, periodically
//! and on calendars (cron in time zones, wall-clock times, back-off, any
//! [`Trigger`](trigger::Trigger)), with a handle to every task, panic
//! isolation, a [`ManualClock`] for tests, and a shutdown that loses
//! nothing.
//!
//! ```
//! use chronopool::{ScheduledExecutor, TaskError};
//! use std::time::Duration;
//!
//! let pool = ScheduledExecutor::builder()
//!     .worker_threads(4)
//!     .thread_name("app-worker")
//!     .build()?;
//!
//! // A task with a result.
//! let answer = pool.submit(|| 6 * 7)?;
//! assert_eq!(answer.join()?, 42);
//!
//! // A task that panics: the worker survives, the handle tells.
//! let oops = pool.submit(|| -> u32 { panic!("boom") })?;
//! assert!(matches!(oops.join(), Err(TaskError::Panicked(p)) if p.message() == Some("boom")));
//!
//! // Fire and forget.
//! pool.execute(|| println!("hello from a worker"))?;
//!
//! // Later, and periodically.
//! let reply = pool.schedule(|| "pong", Duration::from_millis(10))?;
//! let beat = pool.schedule_at_fixed_rate(|| { /* heartbeat */ }, Duration::ZERO, Duration::from_secs(1))?;
//! assert_eq!(reply.join()?, "pong");
//! assert!(beat.cancel());
//!
//! pool.shutdown();
//! assert!(pool.await_termination(Duration::from_secs(5)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design
//!
//! * **Workers** take tasks from their own LIFO deque, then in batches from
//!   a shared injector (where tasks from outside the pool go), then steal
//!   from each other (crossbeam-deque). A task submitted from inside a task
//!   goes to the submitting worker's own deque. After 61 tasks in a row
//!   from its own deque a worker takes the injector's oldest, else its
//!   own oldest: a task that re-submits itself does not starve the
//!   injector (tasks from outside, due timers) or its worker's older
//!   tasks. Idle workers spin briefly,
//!   then park; a new task wakes at most one of them, and none if one is
//!   already looking for work (see `pool/idle.rs` for the protocol and
//!   why no wake-up is lost).
//! * **Tasks** are cells with one atomic state word that the worker and the
//!   [`TaskHandle`] share (see `task/state.rs`); a handle joins (also with
//!   a time-out, also as a `Future`), cancels, or is dropped to detach.
//! * **Joining from inside the pool** runs queued tasks while it waits, as
//!   `ForkJoinPool::join` does, so nested submit-and-join never deadlocks.
//! * **Panics** are caught per task, counted, handed to the optional
//!   [`Builder::on_panic`] hook and to the task's handle; a panic of user
//!   code that no handle reports (a destructor, a waker) goes to the hook
//!   and never unwinds into the pool or into its caller.
//! * **Time**: one timer thread per executor owns the delayed work queue
//!   and hands each task that falls due to the workers; it sleeps until the
//!   next deadline and never wakes when nothing is due (with few timers it
//!   ends a long sleep with a short spin, so that a task starts within
//!   microseconds of its deadline: [`Builder::timer_spin`]). Schedulers reach it
//!   through a bounded lock-free command queue (a scheduler that finds it
//!   full waits until the timer thread has taken some: back-pressure, so
//!   that the backend's memory is the timer thread's own); a cancel only
//!   counts itself, and
//!   the timer thread sweeps cancelled entries out in one pass once they
//!   are half of what it holds.
//! * **Triggers**: every recurring task asks a [`Trigger`](trigger::Trigger)
//!   when to run next, after each run; fixed rate and fixed delay are
//!   triggers too. A run can end its task with a value, a trigger by having
//!   no next run, and [`TriggerHandle::reschedule`] changes the trigger of a
//!   live task. Runs due at a wall time follow steps of the wall clock.
//! * **Deadlines and async time**: [`ScheduledExecutor::submit_with_timeout`]
//!   gives a task a time-out (a running one is asked to stop:
//!   [`cancelled`]); [`future`] has `sleep`, `timeout` and `interval`
//!   futures for any async runtime, woken by the timer thread itself.
//! * **Metrics**: [`ScheduledExecutor::metrics`] counts runs, panics,
//!   cancels, rejections and time-outs, and reads the lateness of scheduled
//!   runs (p50, p99, max) from per-worker histograms.
//! * **Ids and names**: every task has a [`TaskId`]; [`ScheduledExecutor::task`]
//!   names one. Both are on its handles, inside it ([`task_id`],
//!   [`task_name`]) and on the [`PanicPayload`] the `on_panic` hook sees.
//! * **Manual time**: a pool built with [`Builder::clock`] reads every time
//!   from a [`ManualClock`], whose `advance` runs every deadline on the way,
//!   in order, and returns when the pool is quiet.
//! * **Shutdown**: [`ScheduledExecutor::shutdown`] lets queued tasks finish;
//!   [`ScheduledExecutor::shutdown_now`] returns the ones that never started
//!   as [`PendingTask`]s. Every task submitted before either one either runs
//!   or is returned.
//!
//! # Cargo features
//!
//! * `cron` (on by default): [`trigger::Cron`], cron expressions in IANA
//!   time zones.
//! * `tracing` (off): a `DEBUG` span named `task` around every run, with
//!   `task.id`, `task.name`, `task.kind` and, for scheduled runs,
//!   `lateness_us`; events (target `chronopool`) when a task panics
//!   (`ERROR`), a submission is rejected or a time-out comes first (`WARN`),
//!   and when `MissedRuns` skips or delays runs (`INFO`). Without a
//!   subscriber that wants them, a run pays the callsite's check and an
//!   empty span, which shows on a periodic re-arm (measured: see the
//!   repository's `benches/README.md`, "`tracing` with no subscriber"); a
//!   closure from `execute` has no span.
//!   `examples/tracing.rs` prints them with `tracing-subscriber`.
//!
//! # Choosing a timer queue
//!
//! The delayed work queue is a backend chosen with
//! [`Builder::timer_queue`]; all three keep tasks in insertion order among
//! equal deadlines, never run a task early, and give a cancelled task's
//! memory back without waiting for its deadline (its closure at once, its
//! entry at the next sweep: a cancel costs the same on all three).
//!
//! | [`TimerQueue`] | deadlines | insert | pick it for |
//! |---|---|---|---|
//! | [`heap()`](TimerQueue::heap) (default) | exact | O(log n) | exact deadlines, a moderate number of timers, latency-sensitive single timers |
//! | [`hierarchical_wheel()`](TimerQueue::hierarchical_wheel) | rounded up to a 1 ms tick | O(1) at any delay | many timers over wide spans (timeouts, leases, retries from ms to days) |
//! | [`hashed_wheel()`](TimerQueue::hashed_wheel) | rounded up to a 1 ms tick | O(1) | many short, similar timeouts within a revolution (512 ms by default) |
//!
//! `benches/README.md` in the repository has the measurements behind this.
//!
//! # The source, layer by layer
//!
//! Each layer uses only the layers below it. The order is written once, in
//! the repository's `tests/layers.rs`, which checks every path of the
//! library's code against it; from the top:
//!
//! * the API (`executor.rs`, `builder.rs`, `task_builder.rs`, the
//!   `BuildError`, the one `submission.rs` path every entry point takes),
//!   over the handles, the timer futures and what a task may call on its
//!   own pool (`handle/`, `future/`, `pending.rs`, `current.rs`, `busy.rs`);
//! * `pool/`: the queues, the workers and their sleep, the lifecycle, the
//!   metrics it assembles;
//! * `timer/`: the delayed work queue backends (`queue/`) and the timer
//!   thread (`driver/`), which sees the pool only through a trait;
//! * `task/`: the task cells and the jobs the queues move, which see
//!   whatever runs them only through `TaskContext`;
//! * `trigger/`: when a recurring task runs next ([`trigger`]);
//! * `time/`: the executor's clock and the manual clock; `sync/`: the
//!   synchronisation primitives, which, built with `RUSTFLAGS="--cfg
//!   loom"`, are [loom]'s model-checked ones (the models of a protocol
//!   that needs only its module sit beside it; those that need a pool are
//!   in the test-only `loom_model/`, and whole pools through the public API
//!   in the repository's `loom-tests` crate).
//!
//! [loom]: https://docs.rs/loom

#![warn(missing_docs, missing_debug_implementations)]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_internals;
mod builder;
mod busy;
mod current;
mod error;
mod executor;
pub mod future;
mod handle;
#[cfg(all(test, loom))]
mod loom_model;
mod pending;
mod pool;
mod submission;
mod sync;
mod task;
mod task_builder;
mod time;
mod timer;
pub mod trigger;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "cron"))]
pub struct ReadmeDoctests;

pub use builder::{Builder, MAX_TIMER_SPIN, MAX_WORKER_THREADS};
pub use busy::Busy;
pub use current::{cancelled, execute, schedule, submit, task_id, task_name};
pub use error::BuildError;
pub use executor::{ScheduledExecutor, WeakExecutor};
pub use handle::{
    CancelHandle, JoinTimeoutError, PeriodicHandle, ScheduledHandle, TaskHandle, TriggerHandle,
};
pub use pending::PendingTask;
pub use pool::{Lateness, Metrics, SubmitError, SubmitErrorKind};
pub use task::{PanicPayload, TaskError, TaskId};
pub use task_builder::TaskBuilder;
pub use time::{ManualClock, MANUAL_CLOCK_START};
pub use timer::{TimerQueue, MAX_WHEEL_SLOTS, MAX_WHEEL_TICK};
pub use trigger::MissedRuns;

//! The task layer: what a task is, free of the pool that runs it.
//!
//! * `state.rs`: the atomic state word every task cell has ([`Header`]),
//!   its state machine and the ground rules of the cells;
//! * `cell.rs`, `scheduled.rs`, `recurring.rs`: the cells of a one-shot
//!   task, of one that runs later, and of one that runs again and again
//!   (periodic, or on any trigger);
//! * `job.rs`: [`Job`], the two-word unit the queues move;
//! * `deadline.rs`: a task with a time-out, its own timer entry;
//! * `id.rs`, `name.rs`: a task's [`TaskId`], drawn the first time
//!   someone asks, and its name, if it was given one;
//! * `running.rs`: the task running on this thread, for
//!   `chronopool::cancelled()`, `task_id()` and `task_name()`;
//! * `entry.rs`: [`Delayed`], what the timer holds for a task;
//! * `alarm.rs`: [`Alarm`], what it holds for a timer future: a deadline
//!   and a waker, rung on the timer's thread;
//! * `context.rs`: [`TaskContext`], all a task needs from whatever runs it
//!   (report a panic, read the clock, re-arm, count a cancel), and where
//!   the panics of user code that no handle reports go;
//! * `error.rs`, `unwind.rs`: what a task ends with, and the boundary every
//!   piece of user code runs behind;
//! * `trace.rs`: the spans and events of the `tracing` feature.
//!
//! Nothing here imports the pool, the timer or the API: they import this.

pub(crate) mod alarm;
pub(crate) mod cell;
pub(crate) mod context;
pub(crate) mod deadline;
pub(crate) mod delayed;
pub(crate) mod error;
pub(crate) mod id;
pub(crate) mod job;
pub(crate) mod name;
pub(crate) mod recurring;
pub(crate) mod running;
pub(crate) mod scheduled;
pub(crate) mod state;
pub(crate) mod trace;
pub(crate) mod unwind;

pub(crate) use alarm::{Alarm, Rang};
pub(crate) use cell::TaskCell;
pub(crate) use context::TaskContext;
pub(crate) use deadline::DeadlineTask;
pub(crate) use delayed::{Delayed, WallTask};
pub use error::{PanicPayload, TaskError};
pub use id::TaskId;
pub(crate) use job::{Job, RunOutcome};
pub(crate) use name::Label;
pub(crate) use recurring::{OneShot, RecurringTask, Repeat, Reschedulable, Until};
pub(crate) use scheduled::ScheduledTask;
pub(crate) use state::{Cancellable, Header, Joinable};

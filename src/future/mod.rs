//! Timer futures served by the executor's timer, for async code on any
//! runtime: [`Sleep`] ([`ScheduledExecutor::sleep`](crate::ScheduledExecutor::sleep),
//! [`sleep_until`](crate::ScheduledExecutor::sleep_until)), [`Timeout`]
//! ([`ScheduledExecutor::timeout`](crate::ScheduledExecutor::timeout)) and [`Interval`]
//! ([`ScheduledExecutor::interval`](crate::ScheduledExecutor::interval)).
//!
//! They need no runtime of their own: a timer future registers with the
//! executor's timer on its first poll, and when its deadline comes the
//! timer thread wakes its waker right there, with no worker in between
//! (nothing runs on the pool: the wake is all). A timer future first
//! polled while the timer is behind its deadline (its thread waits for a
//! core that the runtime's threads keep busy) rings what is due itself, on
//! the polling thread: a runtime that keeps every core busy is not held up by
//! the executor's timer thread. Dropped before its
//! deadline, a timer future takes its entry out of the timer, as a
//! cancelled task does: nothing is kept until the deadline. Polled again
//! with a new waker, it wakes the newest one. They follow the executor's
//! clock, so under a [`ManualClock`](crate::ManualClock) they fire when
//! `advance` passes their deadline.
//!
//! ```
//! use chronopool::ScheduledExecutor;
//! use std::time::Duration;
//!
//! let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
//! // Any executor polls them; here, one from the `futures` family.
//! let slow = async {
//!     pool.sleep(Duration::from_secs(60)).await;
//!     "slow"
//! };
//! let result = futures_lite::future::block_on(async {
//!     pool.sleep(Duration::from_millis(10)).await;
//!     pool.timeout(Duration::from_millis(10), slow).await
//! });
//! assert!(result.is_err(), "the sleep of a minute timed out");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **When the executor shuts down.** A timer future already registered
//! fires at its deadline if the executor keeps delayed tasks at shutdown
//! (the default), and ends at once when it discards them
//! ([`shutdown_now`](crate::ScheduledExecutor::shutdown_now), the last handle
//! dropped, or [`keep_delayed_tasks_on_shutdown(false)`](crate::Builder::keep_delayed_tasks_on_shutdown)).
//! One first polled after `shutdown` ends at once. Either way nothing waits
//! for a timer that will never fire; [`Sleep::is_elapsed`] tells which it
//! was.

mod interval;
mod sleep;
mod timeout;

pub use interval::Interval;
pub use sleep::Sleep;
pub use timeout::{Elapsed, Timeout};

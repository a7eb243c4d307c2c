//! [`TaskBuilder`]: one task with a name, submitted through any of the
//! executor's methods.

use std::fmt;
use std::ops::ControlFlow;
use std::time::{Duration, Instant, SystemTime};

use crate::executor::ScheduledExecutor;
use crate::handle::{PeriodicHandle, ScheduledHandle, TaskHandle, TriggerHandle};
use crate::pool::SubmitError;
use crate::submission::When;
use crate::sync::StdArc;
use crate::trigger::{MissedRuns, Trigger};

/// A task to be submitted with a name, made by
/// [`ScheduledExecutor::task`]. Its methods are the executor's, and do what
/// they do; the task they make carries the name.
///
/// An unnamed task's cell holds no name at all (the executor's own methods
/// make those): only a named task pays for one, 16 bytes. A closure given
/// to [`execute`](Self::execute) with a name gets a task cell of its own
/// (it has none otherwise), and with it an id.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let heartbeat = pool
///     .task()
///     .name("heartbeat")
///     .schedule_at_fixed_rate(|| { /* ping */ }, Duration::ZERO, Duration::from_secs(1))?;
/// println!("{heartbeat:?}"); // PeriodicHandle { id: TaskId(..), name: Some("heartbeat"), .. }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a TaskBuilder submits nothing until one of its methods is called"]
pub struct TaskBuilder<'a> {
    executor: &'a ScheduledExecutor,
    name: Option<StdArc<str>>,
}

/// Calls `$submit` with the builder's submission, labelled with its name,
/// or with `()` (no name, no space) for a task without one.
macro_rules! submission {
    ($builder:expr, $submission:ident => $submit:expr) => {
        match $builder.name {
            Some(name) => {
                let $submission = $builder.executor.submission(name);
                $submit
            }
            None => {
                let $submission = $builder.executor.submission(());
                $submit
            }
        }
    };
}

impl<'a> TaskBuilder<'a> {
    pub(crate) fn new(executor: &'a ScheduledExecutor) -> Self {
        TaskBuilder {
            executor,
            name: None,
        }
    }

    /// Names the task. A name is any text; it need not be unique.
    pub fn name(mut self, name: impl Into<std::sync::Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// [`ScheduledExecutor::execute`], named. A named closure gets a task
    /// cell (an unnamed one is queued bare), so that the name and an id
    /// reach it and its panics.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::execute`].
    pub fn execute<F>(self, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        submission!(self, task => task.execute(f))
    }

    /// [`ScheduledExecutor::submit`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::submit`].
    pub fn submit<F, T>(self, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        submission!(self, task => task.submit(f))
    }

    /// [`ScheduledExecutor::submit_with_timeout`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::submit_with_timeout`].
    pub fn submit_with_timeout<F, T>(
        self,
        f: F,
        timeout: Duration,
    ) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        submission!(self, task => task.submit_with_timeout(f, timeout, None::<fn() -> T>))
    }

    /// [`ScheduledExecutor::submit_with_timeout_or`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::submit_with_timeout_or`].
    pub fn submit_with_timeout_or<F, T, G>(
        self,
        f: F,
        timeout: Duration,
        fallback: G,
    ) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
        G: FnOnce() -> T + Send + 'static,
    {
        submission!(self, task => task.submit_with_timeout(f, timeout, Some(fallback)))
    }

    /// [`ScheduledExecutor::schedule`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::schedule`].
    pub fn schedule<F, T>(self, f: F, delay: Duration) -> Result<ScheduledHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        submission!(self, task => task.schedule(f, When::After(delay)))
    }

    /// [`ScheduledExecutor::schedule_at`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::schedule_at`].
    pub fn schedule_at<F, T>(
        self,
        f: F,
        deadline: Instant,
    ) -> Result<ScheduledHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        submission!(self, task => task.schedule(f, When::At(deadline)))
    }

    /// [`ScheduledExecutor::schedule_at_system_time`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::schedule_at_system_time`].
    pub fn schedule_at_system_time<F, T>(
        self,
        f: F,
        at: SystemTime,
    ) -> Result<ScheduledHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        submission!(self, task => task.schedule_at_system_time(f, at))
    }

    /// [`ScheduledExecutor::schedule_at_fixed_rate`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::schedule_at_fixed_rate`].
    pub fn schedule_at_fixed_rate<F>(
        self,
        f: F,
        initial_delay: Duration,
        period: Duration,
    ) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        self.schedule_at_fixed_rate_with(f, initial_delay, period, MissedRuns::Burst)
    }

    /// [`ScheduledExecutor::schedule_at_fixed_rate_with`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::schedule_at_fixed_rate_with`].
    pub fn schedule_at_fixed_rate_with<F>(
        self,
        f: F,
        initial_delay: Duration,
        period: Duration,
        missed: MissedRuns,
    ) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        submission!(self, task => task.fixed_rate(f, initial_delay, period, missed))
    }

    /// [`ScheduledExecutor::schedule_with_fixed_delay`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::schedule_with_fixed_delay`].
    pub fn schedule_with_fixed_delay<F>(
        self,
        f: F,
        initial_delay: Duration,
        delay: Duration,
    ) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        submission!(self, task => task.fixed_delay(f, initial_delay, delay))
    }

    /// [`ScheduledExecutor::schedule_with_trigger`], named.
    ///
    /// # Errors
    ///
    /// As for [`ScheduledExecutor::schedule_with_trigger`].
    pub fn schedule_with_trigger<F, T, G>(
        self,
        f: F,
        trigger: G,
    ) -> Result<TriggerHandle<T>, SubmitError<F>>
    where
        F: FnMut() -> ControlFlow<T> + Send + 'static,
        T: Send + 'static,
        G: Trigger,
    {
        submission!(self, task => task.trigger(f, trigger))
    }
}

impl fmt::Debug for TaskBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskBuilder")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

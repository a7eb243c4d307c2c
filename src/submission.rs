//! [`Submission`]: the one path from every public entry point to the pool.
//!
//! The executor's methods and those of a [`TaskBuilder`](crate::TaskBuilder)
//! are the same eleven entry points, with a name or without one. Both build
//! a `Submission` (the pool, and the task's label: its name, or `()` for
//! none, which costs the cell nothing) and call the method for the kind of
//! task; the closure, when it runs and its time-out are that method's
//! arguments. So a new kind of task is one method here, and the two public
//! surfaces forward to it in one line each.

use std::ops::ControlFlow;
use std::time::{Duration, Instant, SystemTime};

use crate::handle::{PeriodicHandle, ScheduledHandle, TaskHandle, TriggerHandle};
use crate::pool::{worker, Pool, SubmitError, SubmitErrorKind};
use crate::sync::Arc;
use crate::task::{Label, OneShot, Repeat, Until};
use crate::time::clock::nanos;
use crate::trigger::{self, FixedDelay, FixedRate, MissedRuns, Next, Trigger};

/// When a one-shot scheduled task is due.
pub(crate) enum When {
    /// After a delay from now.
    After(Duration),
    /// At an instant.
    At(Instant),
}

/// A task about to be submitted to `pool`, named by `label`.
pub(crate) struct Submission<'a, L> {
    pool: &'a Arc<Pool>,
    label: L,
}

impl<'a, L: Label> Submission<'a, L> {
    pub(crate) fn new(pool: &'a Arc<Pool>, label: L) -> Self {
        Submission { pool, label }
    }

    /// Fire and forget. An unnamed closure is queued bare (no cell, no id);
    /// a named one gets a task cell, so that its name and an id reach it
    /// and its panics.
    pub(crate) fn execute<F>(self, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        if self.label.name().is_some() {
            return self.submit(f).map(drop);
        }
        let pool = self.pool;
        worker::with_current(|ctx| pool.execute(ctx.filter(|ctx| ctx.belongs_to(pool)), f))
    }

    /// Runs `f` now: on the calling worker's own deque when called from one
    /// of this pool's tasks, on the shared queue otherwise.
    pub(crate) fn submit<F, T>(self, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let Submission { pool, label } = self;
        let cell = worker::with_current(|ctx| {
            pool.submit(ctx.filter(|ctx| ctx.belongs_to(pool)), f, label)
        })?;
        Ok(TaskHandle::new(cell, Arc::clone(pool)))
    }

    /// Runs `f` now, timed out `timeout` from now; a time-out gives the
    /// handle `fallback`'s value if there is one.
    pub(crate) fn submit_with_timeout<F, T, G>(
        self,
        f: F,
        timeout: Duration,
        fallback: Option<G>,
    ) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
        G: FnOnce() -> T + Send + 'static,
    {
        let Submission { pool, label } = self;
        let deadline = pool.timer.clock.after(timeout);
        let cell = worker::with_current(|ctx| {
            pool.submit_with_deadline(
                ctx.filter(|ctx| ctx.belongs_to(pool)),
                f,
                deadline,
                fallback,
                label,
            )
        })?;
        Ok(TaskHandle::new(cell, Arc::clone(pool)))
    }

    /// Runs `f` once, `when` says, on the monotonic clock.
    pub(crate) fn schedule<F, T>(
        self,
        f: F,
        when: When,
    ) -> Result<ScheduledHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let Submission { pool, label } = self;
        let clock = &pool.timer.clock;
        let now = clock.now();
        let deadline = match when {
            When::After(delay) => now.saturating_add(nanos(delay)),
            When::At(deadline) => clock.nanos_of(deadline),
        };
        let cell = pool.schedule(f, now, deadline, label)?;
        Ok(ScheduledHandle::new(cell, Arc::clone(pool)))
    }

    /// Runs `f` once at the wall time `at`: a one-shot recurring task, so
    /// that a step of the wall clock moves it.
    pub(crate) fn schedule_at_system_time<F, T>(
        self,
        f: F,
        at: SystemTime,
    ) -> Result<ScheduledHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let Submission { pool, label } = self;
        let once = trigger::Once(Next::AtSystemTime(at));
        let cell = pool
            .schedule_recurring(OneShot(Some(f)), once, false, label)
            .map_err(|e| e.map_job(|OneShot(f)| f.expect("a refused task was never run")))?;
        Ok(ScheduledHandle::once(cell, Arc::clone(pool)))
    }

    /// Runs `f` every `period` on the original schedule.
    pub(crate) fn fixed_rate<F>(
        self,
        f: F,
        initial_delay: Duration,
        period: Duration,
        missed: MissedRuns,
    ) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        if period.is_zero() {
            return Err(SubmitError::new(f, SubmitErrorKind::ZeroPeriod));
        }
        let rate = FixedRate::new(period)
            .initial_delay(initial_delay)
            .missed_runs(missed);
        self.periodic(f, rate)
    }

    /// Runs `f` each time `delay` after the previous run ended.
    pub(crate) fn fixed_delay<F>(
        self,
        f: F,
        initial_delay: Duration,
        delay: Duration,
    ) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        if delay.is_zero() {
            return Err(SubmitError::new(f, SubmitErrorKind::ZeroPeriod));
        }
        self.periodic(f, FixedDelay::new(delay).initial_delay(initial_delay))
    }

    /// A periodic task on `trigger`.
    fn periodic<F, G>(self, f: F, trigger: G) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
        G: Trigger,
    {
        let Submission { pool, label } = self;
        let cell = pool
            .schedule_recurring(Repeat(f), trigger, true, label)
            .map_err(|e| e.map_job(|Repeat(f)| f))?;
        Ok(PeriodicHandle::new(cell, Arc::clone(pool)))
    }

    /// Runs `f` when `trigger` says, until a run breaks.
    pub(crate) fn trigger<F, T, G>(
        self,
        f: F,
        trigger: G,
    ) -> Result<TriggerHandle<T>, SubmitError<F>>
    where
        F: FnMut() -> ControlFlow<T> + Send + 'static,
        T: Send + 'static,
        G: Trigger,
    {
        let Submission { pool, label } = self;
        let cell = pool
            .schedule_recurring(Until::new(f), trigger, true, label)
            .map_err(|e| e.map_job(|until| until.0))?;
        Ok(TriggerHandle::new(cell, Arc::clone(pool)))
    }
}

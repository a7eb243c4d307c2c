//! [`ScheduledExecutor`]: the handle users submit work through and shut
//! the pool down with.

use std::fmt;
use std::future::IntoFuture;
use std::ops::ControlFlow;
use std::time::{Duration, Instant, SystemTime};

use crate::builder::Builder;
use crate::busy::Busy;
use crate::error::BuildError;
use crate::future::{Interval, Sleep, Timeout};
use crate::handle::{PeriodicHandle, ScheduledHandle, TaskHandle, TriggerHandle};
use crate::pending::PendingTask;
use crate::pool::Metrics;
use crate::pool::{Pool, SubmitError};
use crate::submission::{Submission, When};
use crate::sync::thread::JoinHandle;
use crate::sync::{Arc, Mutex, StdArc};
use crate::task::Label;
use crate::task_builder::TaskBuilder;
use crate::trigger::{MissedRuns, Trigger};

/// A pool of work-stealing worker threads that runs the tasks given to it.
///
/// Cloning a `ScheduledExecutor` gives another handle to the same pool.
///
/// # Shutting down
///
/// * [`shutdown`](Self::shutdown) stops accepting work; tasks already queued
///   still run, then the workers exit.
/// * [`shutdown_now`](Self::shutdown_now) stops accepting work and hands
///   back every task that has not started (tasks already running finish).
/// * [`await_termination`](Self::await_termination) waits for the workers
///   to exit.
/// * Dropping the **last** handle shuts the pool down gracefully (as
///   `shutdown`, except that tasks scheduled to run later and not yet due
///   are cancelled rather than waited for) and **joins the pool's
///   threads**, so it blocks until the queued tasks have run. On one of
///   the pool's own threads (the last handle dropped by a task, with a
///   closure or an output, by a hook or a waker) it joins nothing, since
///   that would wait for the calling thread itself: it returns at once, and
///   the threads exit on their own once the queued tasks have run.
///
/// Work submitted after shutdown is refused with a [`SubmitError`] that gives
/// the job back; nothing panics.
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::{Duration, Instant};
///
/// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
/// let answer = pool.submit(|| 6 * 7)?;
/// assert_eq!(answer.join()?, 42);
/// pool.execute(|| println!("fire and forget"))?;
/// pool.shutdown();
/// assert!(pool.await_termination(Duration::from_secs(5)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ScheduledExecutor {
    inner: StdArc<Inner>,
}

/// Owned by the user-facing handles only: the workers hold the `Pool`, not
/// this, so the last user handle going away is what shuts the pool down.
struct Inner {
    pool: Arc<Pool>,
    /// The workers, then the timer thread.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Inner {
    /// Shuts the pool down and joins its threads, unless this is one of
    /// them: then a join would wait for this thread itself, directly (its
    /// own join) or through work that only it can do (a worker waiting for
    /// the task this thread runs, the timer thread's cancel of the closure
    /// whose drop this is, which the workers wait for). Its threads are
    /// then detached; they exit once the shutdown has run its course.
    fn drop(&mut self) {
        self.pool.timer.discard_on_shutdown();
        self.pool.shutdown();
        let threads = std::mem::take(&mut *self.threads.lock());
        if self.pool.is_own_thread() {
            return;
        }
        // The workers first: the timer thread leaves after the last one.
        for handle in threads {
            let _ = handle.join();
        }
    }
}

impl ScheduledExecutor {
    /// A builder to configure the executor.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// An executor with the default configuration (one worker per CPU).
    pub fn new() -> Result<Self, BuildError> {
        Builder::new().build()
    }

    pub(crate) fn start(
        pool: Arc<Pool>,
        mut threads: Vec<JoinHandle<()>>,
        timer: JoinHandle<()>,
    ) -> Self {
        threads.push(timer);
        ScheduledExecutor {
            inner: StdArc::new(Inner {
                pool,
                threads: Mutex::new(threads),
            }),
        }
    }

    fn pool(&self) -> &Arc<Pool> {
        &self.inner.pool
    }

    /// A task for this pool, named by `label` (`()`: no name): every entry
    /// point, here and on [`TaskBuilder`], goes through one.
    pub(crate) fn submission<L: Label>(&self, label: L) -> Submission<'_, L> {
        Submission::new(self.pool(), label)
    }

    /// A builder for one task: give it a name, then submit it with one of
    /// the builder's methods, which are this executor's (tokio's
    /// `task::Builder`). The name is seen by the task
    /// ([`chronopool::task_name`](crate::task_name)), by the `on_panic`
    /// hook ([`PanicPayload::task_name`](crate::PanicPayload::task_name)),
    /// by the task's handle and by its `Debug` output.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let flush = pool
    ///     .task()
    ///     .name("flush-metrics")
    ///     .schedule_with_fixed_delay(|| { /* flush */ }, Duration::ZERO, Duration::from_secs(10))?;
    /// assert_eq!(flush.name(), Some("flush-metrics"));
    /// let who = pool.task().name("who-am-i").submit(|| chronopool::task_name())?;
    /// assert_eq!(who.join()?.as_deref(), Some("who-am-i"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn task(&self) -> TaskBuilder<'_> {
        TaskBuilder::new(self)
    }

    /// Runs `f` on a worker and returns a handle to its result.
    ///
    /// Called from a task running on one of this pool's workers, the task
    /// goes to that worker's own deque (it runs there next, unless another
    /// worker steals it first); from any other thread it goes to the shared
    /// queue.
    ///
    /// # Errors
    ///
    /// After shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown), with `f` given back.
    pub fn submit<F, T>(&self, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submission(()).submit(f)
    }

    /// Runs `f` on a worker, as [`submit`](Self::submit) does, with a
    /// time-out (the JDK 25 `ForkJoinPool.submitWithTimeout`): if `f` has
    /// not started `timeout` from now, it never runs and its closure is
    /// dropped; if it is running, it is asked to stop
    /// ([`chronopool::cancelled`](crate::cancelled) turns true in it) and
    /// the handle returns [`TaskError::TimedOut`](crate::TaskError::TimedOut)
    /// at once (the run's output, if it comes, is dropped). The timer
    /// thread times it out: no thread waits for it.
    ///
    /// ```
    /// use chronopool::{ScheduledExecutor, TaskError};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let slow = pool.submit_with_timeout(
    ///     || {
    ///         while !chronopool::cancelled() {
    ///             std::thread::sleep(Duration::from_millis(1)); // a step of work
    ///         }
    ///         "stopped when asked"
    ///     },
    ///     Duration::from_millis(20),
    /// )?;
    /// assert!(matches!(slow.join(), Err(TaskError::TimedOut)));
    /// let quick = pool.submit_with_timeout(|| 7, Duration::from_secs(60))?;
    /// assert_eq!(quick.join()?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// After shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown), with `f` given back.
    pub fn submit_with_timeout<F, T>(
        &self,
        f: F,
        timeout: Duration,
    ) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submission(())
            .submit_with_timeout(f, timeout, None::<fn() -> T>)
    }

    /// [`submit_with_timeout`](Self::submit_with_timeout), but a time-out
    /// gives the handle the value of `fallback` instead of
    /// [`TaskError::TimedOut`](crate::TaskError::TimedOut) (as the JDK's
    /// `submitWithTimeout` with a fallback does). `fallback` runs on the
    /// thread that joins the handle, once, and only if the time-out won;
    /// a panic in it is the handle's [`TaskError::Panicked`](crate::TaskError::Panicked).
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let price = pool.submit_with_timeout_or(
    ///     move || { let _ = rx.recv(); 120 }, // waits for a quote
    ///     Duration::from_millis(10),
    ///     || 100,                             // the list price
    /// )?;
    /// assert_eq!(price.join()?, 100);
    /// drop(tx);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// After shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown), with `f` given back.
    pub fn submit_with_timeout_or<F, T, G>(
        &self,
        f: F,
        timeout: Duration,
        fallback: G,
    ) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
        G: FnOnce() -> T + Send + 'static,
    {
        self.submission(())
            .submit_with_timeout(f, timeout, Some(fallback))
    }

    /// Runs `f` on a worker, without a handle (fire and forget). A panic of
    /// `f` goes to the `on_panic` hook and the panic counters.
    ///
    /// # Errors
    ///
    /// After shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown), with `f` given back.
    pub fn execute<F>(&self, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.submission(()).execute(f)
    }

    /// Runs `f` on a worker once `delay` has passed, and returns a handle to
    /// its result and to the time left.
    ///
    /// The task never runs before `delay` has passed on the monotonic
    /// clock; `Duration::ZERO` means as soon as possible. Any delay is
    /// accepted: a deadline past about 584 years from the executor's start
    /// saturates instead of overflowing, and is never due (the task waits
    /// until cancelled, even on a [`ManualClock`](crate::ManualClock)
    /// advanced by `Duration::MAX`).
    ///
    /// Scheduling does not block while the timer thread keeps up. A burst
    /// that gets 4,096 tasks ahead of it waits until the timer thread has
    /// placed some (back-pressure: usually until the timer thread's current
    /// turn ends, which may include a sweep of cancelled entries), so that
    /// tasks falling due meanwhile are not held up behind the backlog.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::{Duration, Instant};
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let start = Instant::now();
    /// let reply = pool.schedule(|| 42, Duration::from_millis(30))?;
    /// assert_eq!(reply.join()?, 42);
    /// assert!(start.elapsed() >= Duration::from_millis(30));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// After shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown), with `f` given back.
    pub fn schedule<F, T>(
        &self,
        f: F,
        delay: Duration,
    ) -> Result<ScheduledHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submission(()).schedule(f, When::After(delay))
    }

    /// Runs `f` on a worker at `deadline` (as soon as possible if it has
    /// passed), and returns a handle to its result. See
    /// [`schedule`](Self::schedule).
    ///
    /// # Errors
    ///
    /// After shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown), with `f` given back.
    pub fn schedule_at<F, T>(
        &self,
        f: F,
        deadline: Instant,
    ) -> Result<ScheduledHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submission(()).schedule(f, When::At(deadline))
    }

    /// Runs `f` periodically at a fixed rate: first after `initial_delay`,
    /// then every `period` after that, on the original schedule (run `n` is
    /// due at `start + n × period`). A run that ends late is caught up
    /// back to back ([`MissedRuns::Burst`], the JDK's behaviour; see
    /// [`schedule_at_fixed_rate_with`](Self::schedule_at_fixed_rate_with)
    /// for the other policies). Runs never overlap, and each run
    /// happens-before the next.
    ///
    /// The task runs until it is cancelled through its handle (the current
    /// run finishes, no further one starts) or until a run panics (the
    /// handle then reports the panic and the `on_panic` hook sees it).
    /// Joining it waits for either.
    ///
    /// A task that needs its own executor (to submit work from each run)
    /// should hold a [`WeakExecutor`] (from [`downgrade`](Self::downgrade)),
    /// not a clone: a clone inside the task keeps the executor alive, so
    /// dropping the other handles would never shut it down.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let beats = Arc::new(AtomicUsize::new(0));
    /// let b = beats.clone();
    /// let heartbeat = pool.schedule_at_fixed_rate(
    ///     move || { b.fetch_add(1, Ordering::SeqCst); },
    ///     Duration::ZERO,
    ///     Duration::from_millis(5),
    /// )?;
    /// while beats.load(Ordering::SeqCst) < 3 {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// assert!(heartbeat.cancel());
    /// assert!(heartbeat.join().unwrap_err().is_cancelled());
    ///
    /// // A heartbeat that submits work through its own executor.
    /// let weak = pool.downgrade();
    /// let _beat = pool.schedule_at_fixed_rate(
    ///     move || {
    ///         if let Some(pool) = weak.upgrade() {
    ///             let _ = pool.execute(|| { /* send it */ });
    ///         }
    ///     },
    ///     Duration::ZERO,
    ///     Duration::from_secs(1),
    /// )?;
    /// drop(pool); // shuts the pool down: the task held no strong handle
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A zero `period`: [`SubmitErrorKind::ZeroPeriod`](crate::SubmitErrorKind::ZeroPeriod);
    /// after shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown);
    /// `f` is given back either way.
    pub fn schedule_at_fixed_rate<F>(
        &self,
        f: F,
        initial_delay: Duration,
        period: Duration,
    ) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        self.submission(())
            .fixed_rate(f, initial_delay, period, MissedRuns::Burst)
    }

    /// Like [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate), with
    /// a chosen policy for runs that come due while the task is late (see
    /// [`MissedRuns`]).
    ///
    /// # Errors
    ///
    /// As for [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    pub fn schedule_at_fixed_rate_with<F>(
        &self,
        f: F,
        initial_delay: Duration,
        period: Duration,
        missed: MissedRuns,
    ) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        self.submission(())
            .fixed_rate(f, initial_delay, period, missed)
    }

    /// Runs `f` periodically with a fixed delay: first after
    /// `initial_delay`, then each time `delay` after the previous run
    /// ended. Runs never overlap, and each run happens-before the next;
    /// cancelling and panics end the task as for
    /// [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let sweep = pool.schedule_with_fixed_delay(
    ///     || { /* evict expired cache entries */ },
    ///     Duration::from_secs(5),
    ///     Duration::from_secs(5),
    /// )?;
    /// assert!(sweep.delay() <= Duration::from_secs(5));
    /// sweep.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A zero `delay`: [`SubmitErrorKind::ZeroPeriod`](crate::SubmitErrorKind::ZeroPeriod);
    /// after shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown);
    /// `f` is given back either way.
    pub fn schedule_with_fixed_delay<F>(
        &self,
        f: F,
        initial_delay: Duration,
        delay: Duration,
    ) -> Result<PeriodicHandle, SubmitError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        self.submission(()).fixed_delay(f, initial_delay, delay)
    }

    /// Runs `f` again and again, when `trigger` says (see
    /// [`trigger`](crate::trigger)): the trigger gives the first run now,
    /// and the next one after each run. The task ends when a run returns
    /// `ControlFlow::Break(value)`, when the trigger has no next run, when
    /// it is cancelled, or when a run or the trigger panics; its handle's
    /// [`join`](TriggerHandle::join) tells which. Runs never overlap, and
    /// each run happens-before the next.
    ///
    /// Retry a flaky call with back-off, until it succeeds or five tries
    /// failed:
    ///
    /// ```
    /// use chronopool::trigger::Backoff;
    /// use chronopool::ScheduledExecutor;
    /// use std::ops::ControlFlow;
    /// use std::time::Duration;
    ///
    /// # fn call() -> Result<u32, ()> { Ok(7) }
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let fetched = pool.schedule_with_trigger(
    ///     || match call() { Ok(v) => ControlFlow::Break(v), Err(()) => ControlFlow::Continue(()) },
    ///     Backoff::exponential(Duration::from_millis(10), 2.0, Duration::from_secs(1)),
    /// )?;
    /// assert_eq!(fetched.join()?.into_value(), Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A trigger that has no first run, or panics when asked for it, ends
    /// the task at once: its handle is finished (a panic also goes to the
    /// [`on_panic`](crate::Builder::on_panic) hook).
    ///
    /// # Errors
    ///
    /// After shutdown: [`SubmitErrorKind::Shutdown`](crate::SubmitErrorKind::Shutdown);
    /// at the [`max_scheduled_tasks`](crate::Builder::max_scheduled_tasks)
    /// limit: [`SubmitErrorKind::TooManyScheduled`](crate::SubmitErrorKind::TooManyScheduled);
    /// `f` is given back either way.
    pub fn schedule_with_trigger<F, T, G>(
        &self,
        f: F,
        trigger: G,
    ) -> Result<TriggerHandle<T>, SubmitError<F>>
    where
        F: FnMut() -> ControlFlow<T> + Send + 'static,
        T: Send + 'static,
        G: Trigger,
    {
        self.submission(()).trigger(f, trigger)
    }

    /// A future that ends `duration` from now, timed by this executor's
    /// timer: await it from any async runtime (see [`future`](crate::future)).
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// futures_lite::future::block_on(pool.sleep(Duration::from_millis(10)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let pool = self.pool();
        Sleep::new(Arc::clone(pool), pool.timer.clock.after(duration))
    }

    /// A future that ends at `deadline` (at once if it has passed); see
    /// [`sleep`](Self::sleep).
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::{Duration, Instant};
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let at = Instant::now() + Duration::from_millis(10);
    /// futures_lite::future::block_on(pool.sleep_until(at));
    /// assert!(Instant::now() >= at);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        let pool = self.pool();
        Sleep::new(Arc::clone(pool), pool.timer.clock.nanos_of(deadline))
    }

    /// `future`, given up with [`Elapsed`](crate::future::Elapsed) if it has
    /// not ended `duration` from now; see [`Timeout`].
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let reply = pool.timeout(Duration::from_secs(1), async { "pong" });
    /// assert_eq!(futures_lite::future::block_on(reply), Ok("pong"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timeout<F: IntoFuture>(&self, duration: Duration, future: F) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep(duration))
    }

    /// Ticks every `period`, the first at once; see [`Interval`].
    ///
    /// # Panics
    ///
    /// If `period` is zero.
    ///
    /// ```
    /// use chronopool::{MissedRuns, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let mut flush = pool.interval(Duration::from_millis(5)).missed_runs(MissedRuns::Skip);
    /// futures_lite::future::block_on(async {
    ///     for _ in 0..3 {
    ///         flush.tick().await;
    ///     }
    /// });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn interval(&self, period: Duration) -> Interval {
        assert!(!period.is_zero(), "interval: the period must not be zero");
        Interval::new(self.sleep(Duration::ZERO), period)
    }

    /// Runs `f` once, when the *wall* clock reads `at` (not after the
    /// monotonic delay it looks like now): if the wall clock is stepped
    /// forward past `at`, `f` runs at once; stepped back, it waits for the
    /// new wall time (see [`trigger`](crate::trigger#wall-time)). A time in
    /// the past runs at once. At shutdown it is kept or dropped as the
    /// other delayed tasks are.
    ///
    /// ```
    /// use chronopool::{ManualClock, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let pool = ScheduledExecutor::builder().clock(clock.clone()).build()?;
    /// let noon = clock.system_time() + Duration::from_secs(12 * 3600);
    /// let lunch = pool.schedule_at_system_time(|| "lunch", noon)?;
    /// clock.set_system_time(noon); // the wall clock is stepped: it runs
    /// assert_eq!(lunch.join()?, "lunch");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`schedule`](Self::schedule).
    pub fn schedule_at_system_time<F, T>(
        &self,
        f: F,
        at: SystemTime,
    ) -> Result<ScheduledHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submission(()).schedule_at_system_time(f, at)
    }

    /// Stops accepting work. Tasks already queued still run; then the
    /// worker threads exit. Returns at once (see
    /// [`await_termination`](Self::await_termination)). Calling it again
    /// does nothing.
    pub fn shutdown(&self) {
        self.pool().shutdown();
    }

    /// Stops accepting work and returns every task that has not started,
    /// each once, in no particular order. Tasks already running are not interrupted; the
    /// workers exit as soon as they finish them.
    ///
    /// The returned tasks can be [run](PendingTask::run) by the caller or
    /// dropped; the handle of a dropped one resolves to
    /// [`TaskError::Cancelled`](crate::TaskError::Cancelled).
    pub fn shutdown_now(&self) -> Vec<PendingTask> {
        let pool = self.pool();
        pool.shutdown_now()
            .into_iter()
            .map(|job| PendingTask::new(job, Arc::clone(pool)))
            .collect()
    }

    /// Waits until every worker thread has exited after a shutdown, or
    /// until `timeout` has passed. Returns true if the executor terminated.
    ///
    /// Without a shutdown the workers never exit, so this waits the whole
    /// `timeout` and returns false. Called on one of the pool's own threads
    /// (from a task, a hook, or a destructor the pool runs) it can never
    /// succeed, since the calling thread is part of what it would wait for:
    /// it returns false at once, whatever the `timeout`.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let p = pool.clone();
    /// let waited = pool.submit(move || p.await_termination(Duration::MAX))?;
    /// assert!(!waited.join()?, "a worker cannot wait for itself to exit");
    /// pool.shutdown();
    /// assert!(pool.await_termination(Duration::from_secs(5)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn await_termination(&self, timeout: Duration) -> bool {
        let pool = self.pool();
        if pool.is_own_thread() {
            return false;
        }
        pool.lifecycle.await_termination(timeout)
    }

    /// True after [`shutdown`](Self::shutdown) or
    /// [`shutdown_now`](Self::shutdown_now).
    pub fn is_shutdown(&self) -> bool {
        self.pool().lifecycle.is_shut_down()
    }

    /// True once the executor was shut down and every worker has exited.
    pub fn is_terminated(&self) -> bool {
        self.pool().lifecycle.is_terminated()
    }

    /// The wall time on the executor's clock: the system's, or that of its
    /// [`ManualClock`](crate::ManualClock) (what
    /// [`schedule_at_system_time`](Self::schedule_at_system_time) runs by).
    ///
    /// ```
    /// use chronopool::{ManualClock, ScheduledExecutor, MANUAL_CLOCK_START};
    /// use std::time::{Duration, UNIX_EPOCH};
    ///
    /// let clock = ManualClock::new();
    /// let pool = ScheduledExecutor::builder().clock(clock.clone()).build()?;
    /// clock.advance(Duration::from_secs(60));
    /// let start = UNIX_EPOCH + MANUAL_CLOCK_START;
    /// assert_eq!(pool.system_time(), start + Duration::from_secs(60));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn system_time(&self) -> SystemTime {
        self.pool().timer.clock.system_time()
    }

    /// A guard that holds the executor busy for a
    /// [`ManualClock`](crate::ManualClock): while it lives, `advance` waits
    /// as for a running task. For libraries that hand part of a task's
    /// work to threads of their own (see [`Busy`]); on the system clock it
    /// has no effect.
    pub fn busy(&self) -> Busy {
        Busy::new(Arc::clone(self.pool()))
    }

    /// A handle that does not keep the executor alive (see
    /// [`WeakExecutor`]).
    pub fn downgrade(&self) -> WeakExecutor {
        WeakExecutor {
            inner: StdArc::downgrade(&self.inner),
        }
    }

    /// A snapshot of the executor's counters.
    pub fn metrics(&self) -> Metrics {
        self.pool().metrics()
    }
}

/// A handle to an executor that does not keep it alive: what a task that
/// needs its own executor should hold (a [`ScheduledExecutor`] clone inside
/// one of its own tasks is a reference cycle: the executor would never see
/// its last handle dropped). Made by [`ScheduledExecutor::downgrade`].
///
/// ```
/// use chronopool::ScheduledExecutor;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let weak = pool.downgrade();
/// assert!(weak.upgrade().is_some());
/// drop(pool);
/// assert!(weak.upgrade().is_none(), "the last handle shut it down");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct WeakExecutor {
    inner: std::sync::Weak<Inner>,
}

impl WeakExecutor {
    /// The executor, if a [`ScheduledExecutor`] handle to it still exists.
    pub fn upgrade(&self) -> Option<ScheduledExecutor> {
        self.inner
            .upgrade()
            .map(|inner| ScheduledExecutor { inner })
    }
}

impl fmt::Debug for WeakExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakExecutor")
            .field("alive", &(self.inner.strong_count() > 0))
            .finish()
    }
}

impl fmt::Debug for ScheduledExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScheduledExecutor")
            .field("worker_threads", &self.pool().workers())
            .field("shutdown", &self.is_shutdown())
            .field("terminated", &self.is_terminated())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::{Duration, Instant};

    use crate::pool::worker;
    use crate::timer::driver::lead;
    use crate::{Builder, ScheduledExecutor, TimerQueue};

    /// A gate for a blocked task.
    type Gate = Arc<(Mutex<bool>, Condvar)>;

    /// Opens the gate and stops the [`chain`] when dropped, however the
    /// test ends, so that the pool's threads end.
    struct Release(Gate, Arc<AtomicBool>);

    impl Drop for Release {
        fn drop(&mut self) {
            self.1.store(true, Ordering::Relaxed);
            *self.0 .0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.0 .1.notify_all();
        }
    }

    /// A task that waits on `gate` (opened by a [`Release`]).
    fn blocker(gate: &Gate) -> impl FnOnce() + Send + 'static {
        let gate = Arc::clone(gate);
        move || {
            let mut open = gate.0.lock().unwrap();
            while !*open {
                open = gate.1.wait(open).unwrap();
            }
        }
    }

    /// True once `cond` holds, polled for up to 10 s.
    fn eventually(cond: impl Fn() -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        cond()
    }

    /// A pool of `workers` workers on `queue` whose workers lead (an idle
    /// one has taken the lead from the timer thread).
    fn leading_pool(workers: usize, queue: TimerQueue) -> ScheduledExecutor {
        let pool = Builder::new()
            .worker_threads(workers)
            .timer_queue(queue)
            .build()
            .unwrap();
        assert!(eventually(|| pool.pool().timer.worker_leads()), "{queue:?}");
        pool
    }

    fn queues() -> [TimerQueue; 3] {
        [
            TimerQueue::heap(),
            TimerQueue::hashed_wheel(),
            TimerQueue::hierarchical_wheel(),
        ]
    }

    /// Re-submits itself from its worker until `stop`: that worker's own
    /// deque always holds the next link, so it is never idle.
    fn chain(stop: Arc<AtomicBool>, links: Arc<AtomicUsize>) {
        links.fetch_add(1, Ordering::Relaxed);
        if !stop.load(Ordering::Relaxed) {
            let (s, l) = (Arc::clone(&stop), Arc::clone(&links));
            crate::execute(move || chain(s, l)).expect("the pool runs");
        }
    }

    /// The timer thread takes the lead from a leader stuck in a long task
    /// once a timer falls due; the other worker, kept busy by a chain of
    /// jobs (never idle), takes it back as it takes its next job, so the
    /// timer thread does not lead for good (`timer/driver/lead.rs`). The
    /// timer runs: the timer thread hands it over on the injector, which
    /// the busy worker looks at every so many jobs (`pool/worker.rs`).
    #[test]
    fn a_busy_worker_takes_the_lead_back_from_the_timer_thread() {
        for queue in queues() {
            let pool = leading_pool(2, queue);
            let timer = &pool.pool().timer;
            let gate = Gate::default();
            let stop = Arc::new(AtomicBool::new(false));
            let release = Release(Arc::clone(&gate), Arc::clone(&stop));
            // The leader takes the blocking task when it falls due.
            let entered = Arc::new(AtomicUsize::new(usize::MAX));
            let (e, block) = (Arc::clone(&entered), blocker(&gate));
            let _blocked = pool
                .schedule(
                    move || {
                        let me = worker::with_current(|w| w.map(|w| w.index));
                        e.store(me.expect("on a worker"), Ordering::SeqCst);
                        block();
                    },
                    Duration::from_millis(5),
                )
                .unwrap();
            assert!(eventually(|| entered.load(Ordering::SeqCst) != usize::MAX));
            let stuck = entered.load(Ordering::SeqCst);
            // The other worker runs the chain.
            let links = Arc::new(AtomicUsize::new(0));
            let (s, l) = (Arc::clone(&stop), Arc::clone(&links));
            pool.execute(move || chain(s, l)).unwrap();
            assert!(
                eventually(|| links.load(Ordering::Relaxed) > 1_000),
                "{queue:?}"
            );
            // A timer falls due: the watch rescues the stuck leader within
            // about a `GRACE` and hands the timer over; then the busy worker
            // takes the lead. (Before, the timer thread kept it until a
            // worker was idle: never, here.)
            let fired = pool.schedule(|| 3, Duration::from_millis(2)).unwrap();
            assert_eq!(
                fired.join_timeout(Duration::from_secs(10)).ok(),
                Some(3),
                "{queue:?}: the timer did not fire"
            );
            assert!(
                eventually(|| timer.leader().is_some_and(|w| w != stuck)),
                "{queue:?}: the busy worker does not lead (lead: {:?})",
                timer.leader()
            );
            drop(release);
            pool.shutdown();
            assert!(pool.await_termination(Duration::from_secs(10)), "{queue:?}");
        }
    }

    /// A worker that takes the lead back at a job that then blocks is an
    /// awake leader the timer thread watches: it rescues it and the timers
    /// go on. (Without `armed` reset, the timer thread slept until the
    /// deadline it had published, none here, and a time-out never came.)
    #[test]
    fn a_worker_that_takes_the_lead_back_and_blocks_is_rescued() {
        for queue in queues() {
            let pool = leading_pool(1, queue);
            let timer = &pool.pool().timer;
            let (first, second) = (Gate::default(), Gate::default());
            let stop = Arc::new(AtomicBool::new(false));
            let release_first = Release(Arc::clone(&first), Arc::clone(&stop));
            let release_second = Release(Arc::clone(&second), Arc::clone(&stop));
            // The leader runs the first blocker when it falls due; once the
            // timer after it falls due too, the timer thread rescues the
            // worker and leads.
            let entered = Arc::new(AtomicBool::new(false));
            let (e, block) = (Arc::clone(&entered), blocker(&first));
            let _due = pool
                .schedule(
                    move || {
                        e.store(true, Ordering::SeqCst);
                        block();
                    },
                    Duration::from_millis(5),
                )
                .unwrap();
            let _after = pool.schedule(|| (), Duration::from_millis(15)).unwrap();
            assert!(eventually(|| entered.load(Ordering::SeqCst)), "{queue:?}");
            assert!(eventually(|| !timer.worker_leads()), "{queue:?}: no rescue");
            // The second waits in the injector; when the first ends, the
            // worker takes it from there, and the lead with it, and blocks
            // again. (The time-out's command below gets it rescued again
            // a `GRACE` or so later: too soon to see it lead here for sure.)
            pool.execute(blocker(&second)).unwrap();
            drop(release_first);
            // A time-out is the timer's to give, whoever runs tasks.
            let timed_out = pool
                .submit_with_timeout_or(|| 1, Duration::from_millis(10), || 2)
                .unwrap();
            assert_eq!(
                timed_out.join_timeout(Duration::from_secs(10)).ok(),
                Some(2),
                "{queue:?}: the time-out did not come"
            );
            drop(release_second);
            pool.shutdown();
            assert!(pool.await_termination(Duration::from_secs(10)), "{queue:?}");
        }
    }

    /// A leader that runs a long task while nothing is due and no command
    /// waits holds nothing up: the watch leaves it the lead for an
    /// `IDLE_GRACE`. (Before, it was rescued a `GRACE` or two into any
    /// long task, and a busy pool with no timers went through a rescue and
    /// a take-back every few milliseconds: `benches/README.md`.)
    #[test]
    fn a_leader_that_holds_nothing_up_keeps_the_lead() {
        // Half an `IDLE_GRACE` from the task's start: a rescue seen before
        // then is not the one after an `IDLE_GRACE`, however late this
        // thread reads (it reads the lead first, then the time).
        let keep = Duration::from_nanos(lead::IDLE_GRACE / 2);
        for queue in queues() {
            let pool = leading_pool(1, queue);
            let timer = &pool.pool().timer;
            let gate = Gate::default();
            let release = Release(Arc::clone(&gate), Arc::new(AtomicBool::new(false)));
            let started = Arc::new(Mutex::new(None));
            let (s, block) = (Arc::clone(&started), blocker(&gate));
            pool.execute(move || {
                *s.lock().unwrap() = Some(Instant::now());
                block();
            })
            .unwrap();
            assert!(
                eventually(|| started.lock().unwrap().is_some()),
                "{queue:?}"
            );
            let until = started.lock().unwrap().unwrap() + keep;
            // Ten `GRACE`s and more, looked at every 100 µs.
            loop {
                let lead = timer.leader();
                if Instant::now() >= until {
                    break;
                }
                assert_eq!(lead, Some(0), "{queue:?}: rescued");
                std::thread::sleep(Duration::from_micros(100));
            }
            // A timer scheduled now is another matter: its command waits,
            // then it falls due, and the leader is rescued.
            let _due = pool.schedule(|| (), Duration::from_millis(1)).unwrap();
            assert!(
                eventually(|| timer.leader().is_none()),
                "{queue:?}: not rescued"
            );
            drop(release);
            pool.shutdown();
            assert!(pool.await_termination(Duration::from_secs(10)), "{queue:?}");
        }
    }
}

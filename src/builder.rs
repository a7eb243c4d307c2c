//! [`Builder`]: how many worker threads, their names and stack size, and
//! the hooks that see threads start and stop and tasks panic.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use crate::error::BuildError;
use crate::executor::ScheduledExecutor;
use crate::pool::hooks::Hooks;
use crate::pool::{self, worker, Pool};
use crate::sync::{thread, Arc, StdArc};
use crate::task::PanicPayload;
use crate::time::clock::nanos;
#[cfg(not(loom))]
use crate::time::manual::Driven;
use crate::time::{Clock, ManualClock};
use crate::timer::driver::{ShutdownPolicy, Timer};
use crate::timer::{InvalidQueue, TimerQueue};

/// The most worker threads one executor can have.
pub const MAX_WORKER_THREADS: usize = 1 << 15;

/// The longest [`timer_spin`](Builder::timer_spin): 1 ms.
pub const MAX_TIMER_SPIN: Duration = Duration::from_millis(1);

/// The default [`timer_spin`](Builder::timer_spin): 100 µs.
const DEFAULT_TIMER_SPIN: Duration = Duration::from_micros(100);

/// Configures and starts a [`ScheduledExecutor`].
///
/// ```
/// use chronopool::ScheduledExecutor;
///
/// let pool = ScheduledExecutor::builder()
///     .worker_threads(4)
///     .thread_name("app-worker")
///     .stack_size(512 * 1024)
///     .on_panic(|panic| eprintln!("a task panicked: {panic}"))
///     .build()?;
/// # Ok::<(), chronopool::BuildError>(())
/// ```
///
/// Invalid settings are reported by [`build`](Builder::build) as a
/// [`BuildError`], never by a panic.
pub struct Builder {
    worker_threads: Option<usize>,
    thread_name: ThreadName,
    stack_size: Option<usize>,
    hooks: Hooks,
    timer_queue: TimerQueue,
    keep_delayed_on_shutdown: bool,
    keep_periodic_on_shutdown: bool,
    max_scheduled: usize,
    timer_spin: Duration,
    clock: Option<ManualClock>,
}

enum ThreadName {
    Prefix(String),
    Fn(Box<dyn Fn(usize) -> String + Send + Sync>),
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            worker_threads: None,
            thread_name: ThreadName::Prefix("chronopool".to_owned()),
            stack_size: None,
            hooks: Hooks::default(),
            timer_queue: TimerQueue::default(),
            keep_delayed_on_shutdown: true,
            keep_periodic_on_shutdown: false,
            max_scheduled: usize::MAX,
            timer_spin: DEFAULT_TIMER_SPIN,
            clock: None,
        }
    }
}

impl Builder {
    /// A builder with the defaults: one worker thread per CPU, threads named
    /// `chronopool-<i>` (and the timer thread `chronopool-timer`), the
    /// platform's default stack size, no hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of worker threads (default: the number of CPUs, from
    /// `num_cpus::get()`). Must be between 1 and [`MAX_WORKER_THREADS`].
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.worker_threads = Some(n);
        self
    }

    /// Names worker `i` `"<prefix>-<i>"` and the timer thread
    /// `"<prefix>-timer"` (default prefix: `chronopool`). Linux shows the
    /// first 15 bytes of a thread's name.
    ///
    /// The timer thread runs no task (it hands them to the workers), so the
    /// thread hooks ([`on_thread_start`](Self::on_thread_start),
    /// [`on_thread_stop`](Self::on_thread_stop)), which prepare a thread
    /// for running tasks, do not run on it.
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = ThreadName::Prefix(prefix.into());
        self
    }

    /// Names worker `i` with `name(i)` (the timer thread is then named
    /// `chronopool-timer`). It is called for every worker before any
    /// thread starts, on the thread that calls [`build`](Self::build); a
    /// name with a NUL byte, or a panic of `name`, makes `build` fail with
    /// a [`BuildError`] (and start nothing).
    ///
    /// ```
    /// # use chronopool::ScheduledExecutor;
    /// let pool = ScheduledExecutor::builder()
    ///     .worker_threads(2)
    ///     .thread_name_fn(|i| format!("timer-{}", i + 1))
    ///     .build()?;
    /// let name = pool.submit(|| std::thread::current().name().map(str::to_owned))?.join()?;
    /// assert!(matches!(name.as_deref(), Some("timer-1" | "timer-2")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn thread_name_fn(
        mut self,
        name: impl Fn(usize) -> String + Send + Sync + 'static,
    ) -> Self {
        self.thread_name = ThreadName::Fn(Box::new(name));
        self
    }

    /// The stack size of each worker thread, in bytes (default: the
    /// platform's, as for `std::thread::spawn`). Must not be 0.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Runs `hook` on each worker thread when it starts, before it runs any
    /// task (not on the timer thread, which runs no task). A panic in the hook is caught (the default panic hook of `std`
    /// prints it); the thread goes on.
    pub fn on_thread_start(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.hooks.on_thread_start = Some(Box::new(hook));
        self
    }

    /// Runs `hook` on each worker thread when it stops, after its last
    /// task. A panic in the hook is caught; the thread goes on stopping.
    pub fn on_thread_stop(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.hooks.on_thread_stop = Some(Box::new(hook));
        self
    }

    /// Calls `hook` with the payload of every task that panics, on the
    /// thread where it panicked, before the task's handle sees the panic.
    /// It sees the panics of every task, also of those submitted with
    /// `execute` or whose handle was dropped, and the panics of user code
    /// that no handle reports: the destructor of a closure dropped unrun
    /// (cancelled, returned by `shutdown_now` and dropped, or discarded at
    /// shutdown), of an output nobody joined, of a panic payload, and a
    /// waker's `wake` (see the README's "What user code may do"). A panic
    /// in the hook itself is caught.
    ///
    /// Whatever the hook, a panicking task never takes its worker down, and
    /// the default panic hook of `std` still prints the panic as usual.
    pub fn on_panic(mut self, hook: impl Fn(&PanicPayload) + Send + Sync + 'static) -> Self {
        self.hooks.on_panic = Some(Box::new(hook));
        self
    }

    /// The delayed work queue that orders tasks scheduled to run later
    /// (default: [`TimerQueue::heap`]).
    pub fn timer_queue(mut self, queue: TimerQueue) -> Self {
        self.timer_queue = queue;
        self
    }

    /// Whether one-shot tasks scheduled to run later still run after
    /// [`shutdown`](ScheduledExecutor::shutdown) (default: true, as in the
    /// JDK): the executor then terminates after the last of them ran. With
    /// false, `shutdown` cancels them (their handles resolve to
    /// [`TaskError::Cancelled`](crate::TaskError::Cancelled)).
    /// [`shutdown_now`](ScheduledExecutor::shutdown_now) returns them
    /// either way.
    pub fn keep_delayed_tasks_on_shutdown(mut self, keep: bool) -> Self {
        self.keep_delayed_on_shutdown = keep;
        self
    }

    /// Whether periodic tasks go on running after
    /// [`shutdown`](ScheduledExecutor::shutdown) (default: false, as in the
    /// JDK: `shutdown` cancels them, and a run in progress finishes but is
    /// not followed by another). With true, the executor does not terminate
    /// until they are cancelled or [`shutdown_now`](ScheduledExecutor::shutdown_now)
    /// is called.
    pub fn keep_periodic_tasks_on_shutdown(mut self, keep: bool) -> Self {
        self.keep_periodic_on_shutdown = keep;
        self
    }

    /// The most tasks scheduled to run later (one-shot and periodic) the
    /// executor holds at once (default: no limit). Past it, `schedule*`
    /// calls are refused with
    /// [`SubmitErrorKind::TooManyScheduled`](crate::SubmitErrorKind::TooManyScheduled),
    /// the job given back, until some run or are cancelled. A guard against
    /// producers that outrun expiry (Netty's `maxPendingTimeouts`). Must not
    /// be 0.
    ///
    /// The limit counts what waits for its time. A periodic task counts
    /// while it waits for its next run, not during a run, and its next run
    /// is always admitted (it was when the task was scheduled): the count
    /// can pass the limit by the periodic tasks that were running when it
    /// was reached.
    ///
    /// ```
    /// use chronopool::{ScheduledExecutor, SubmitErrorKind};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().max_scheduled_tasks(1).build()?;
    /// let first = pool.schedule(|| (), Duration::from_secs(60))?;
    /// let refused = pool.schedule(|| (), Duration::from_secs(60)).unwrap_err();
    /// assert_eq!(refused.kind(), SubmitErrorKind::TooManyScheduled);
    /// first.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_scheduled_tasks(mut self, max: usize) -> Self {
        self.max_scheduled = max;
        self
    }

    /// How long before a deadline the thread that waits for time (an idle
    /// worker that leads, or the timer thread) stops sleeping and spins on
    /// the clock instead (default: 100 µs; `Duration::ZERO`: never spin).
    /// At most [`MAX_TIMER_SPIN`].
    ///
    /// A timed sleep ends late, on Linux even with the tight timer slack the
    /// timer thread asks for. So while the executor holds few scheduled
    /// tasks (at most 64) and a worker is idle, the waiting thread ends each
    /// wait of at least five windows by sleeping until one window before
    /// the deadline and spinning the rest. A task then starts sooner after
    /// its deadline (measured: see the repository's `benches/README.md`,
    /// "Why the timer thread spins before a deadline"). The price is CPU:
    /// at most one window of spinning per wait of five, and usually less,
    /// since the sleep itself ends late. With many scheduled tasks the
    /// timer thread never spins.
    ///
    /// ```
    /// use chronopool::ScheduledExecutor;
    /// use std::time::Duration;
    ///
    /// // Favour CPU over punctuality: sleep out every wait.
    /// let pool = ScheduledExecutor::builder().timer_spin(Duration::ZERO).build()?;
    /// # Ok::<(), chronopool::BuildError>(())
    /// ```
    pub fn timer_spin(mut self, window: Duration) -> Self {
        self.timer_spin = window;
        self
    }

    /// Makes the executor read time only from `clock`, a [`ManualClock`]
    /// that moves when the test moves it, instead of the monotonic clock:
    /// deadlines, `delay()` and `deadline()`, the end of a fixed-delay run.
    /// Several executors may share one clock.
    ///
    /// ```
    /// use chronopool::{ManualClock, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let pool = ScheduledExecutor::builder().clock(clock.clone()).build()?;
    /// let later = pool.schedule(|| "a day later", Duration::from_secs(86_400))?;
    /// clock.advance(Duration::from_secs(86_400));
    /// assert_eq!(later.join()?, "a day later");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(mut self, clock: ManualClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Checks the settings and starts the worker threads.
    ///
    /// ```
    /// use chronopool::{BuildError, ScheduledExecutor};
    ///
    /// let err = ScheduledExecutor::builder().worker_threads(0).build().unwrap_err();
    /// assert!(matches!(err, BuildError::WorkerThreads(0)));
    /// ```
    pub fn build(self) -> Result<ScheduledExecutor, BuildError> {
        let workers = self.worker_threads.unwrap_or_else(num_cpus::get);
        if workers == 0 || workers > MAX_WORKER_THREADS {
            return Err(BuildError::WorkerThreads(workers));
        }
        if self.stack_size == Some(0) {
            return Err(BuildError::ZeroStackSize);
        }
        if self.max_scheduled == 0 {
            return Err(BuildError::ZeroMaxScheduledTasks);
        }
        if self.timer_spin > MAX_TIMER_SPIN {
            return Err(BuildError::TimerSpin(self.timer_spin));
        }
        self.timer_queue
            .validate()
            .map_err(|invalid| match invalid {
                InvalidQueue::Tick(tick) => BuildError::WheelTick(tick),
                InvalidQueue::Slots(slots) => BuildError::WheelSlots(slots),
            })?;
        let policy = ShutdownPolicy {
            keep_delayed: self.keep_delayed_on_shutdown,
            keep_periodic: self.keep_periodic_on_shutdown,
        };
        // Every name before any thread starts: a bad one fails the build
        // with nothing to stop.
        let names = (0..workers)
            .map(|index| self.thread_name.of(index))
            .collect::<Result<Vec<_>, _>>()?;
        let clock = match &self.clock {
            Some(manual) => Clock::manual(StdArc::clone(manual.state())),
            None => Clock::new(),
        };
        let mut timer = Timer::with_clock(self.timer_queue, policy, self.max_scheduled, clock);
        timer.set_spin(nanos(self.timer_spin));
        let (pool, deques) = Pool::new(workers, self.hooks, timer);
        let pool = Arc::new(pool);
        #[cfg(not(loom))]
        if let Some(manual) = &self.clock {
            let weak: std::sync::Weak<Pool> = Arc::downgrade(&pool);
            manual.state().attach(weak as std::sync::Weak<dyn Driven>);
        }
        let mut threads = Vec::with_capacity(workers + 1);
        for ((index, local), name) in deques.into_iter().enumerate().zip(names) {
            let mut builder = thread::Builder::new().name(name);
            if let Some(bytes) = self.stack_size {
                builder = builder.stack_size(bytes);
            }
            let worker_pool = Arc::clone(&pool);
            if let Err(err) = builder
                .spawn(move || worker::run(worker_pool, index, local))
                .map(|h| threads.push(h))
            {
                // The ones never started count as exited.
                for _ in index..workers {
                    pool.lifecycle.worker_exited();
                }
                return Err(abandon(&pool, threads, err));
            }
        }
        let timer_pool = Arc::clone(&pool);
        let mut builder = thread::Builder::new().name(self.thread_name.of_timer());
        if let Some(bytes) = self.stack_size {
            builder = builder.stack_size(bytes);
        }
        match builder.spawn(move || pool::run_timer(timer_pool)) {
            Ok(timer) => Ok(ScheduledExecutor::start(pool, threads, timer)),
            Err(err) => Err(abandon(&pool, threads, err)),
        }
    }
}

impl ThreadName {
    /// The timer thread's name: `<prefix>-timer`, or `chronopool-timer`
    /// with a naming function (the prefix was checked with the workers'
    /// names).
    fn of_timer(&self) -> String {
        match self {
            ThreadName::Prefix(prefix) => format!("{prefix}-timer"),
            ThreadName::Fn(_) => "chronopool-timer".to_owned(),
        }
    }

    /// The name of worker `index`, checked: the builder's `Fn` is user code
    /// (its panic is caught), and no thread name may hold a NUL byte.
    fn of(&self, index: usize) -> Result<String, BuildError> {
        let name = match self {
            ThreadName::Prefix(prefix) => format!("{prefix}-{index}"),
            ThreadName::Fn(name) => std::panic::catch_unwind(AssertUnwindSafe(|| name(index)))
                .map_err(|payload| BuildError::ThreadNamePanicked(PanicPayload::new(payload)))?,
        };
        if name.contains('\0') {
            return Err(BuildError::ThreadName(name));
        }
        Ok(name)
    }
}

/// Stops the threads already started after one failed to start.
fn abandon(pool: &Pool, threads: Vec<thread::JoinHandle<()>>, err: std::io::Error) -> BuildError {
    drop(pool.shutdown_now());
    for handle in threads {
        let _ = handle.join();
    }
    BuildError::Spawn(err)
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("worker_threads", &self.worker_threads)
            .field("stack_size", &self.stack_size)
            .field("hooks", &self.hooks)
            .field("timer_queue", &self.timer_queue)
            .field("keep_delayed_on_shutdown", &self.keep_delayed_on_shutdown)
            .field("keep_periodic_on_shutdown", &self.keep_periodic_on_shutdown)
            .field("max_scheduled", &self.max_scheduled)
            .field("timer_spin", &self.timer_spin)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

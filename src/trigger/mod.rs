//! Triggers: when a recurring task runs next.
//!
//! A [`Trigger`] is asked, once before the first run and again after each
//! run, when the task runs next, given what happened so far (a
//! [`TriggerContext`]). It answers with an [`Instant`] (monotonic time: a
//! delay, a period), a [`SystemTime`] (wall time: a calendar, "at 12:00"),
//! or nothing, which ends the task. Every recurring task of the executor
//! runs on one: fixed rate and fixed delay ([`FixedRate`], [`FixedDelay`]),
//! back-off ([`Backoff`]), cron (`Cron`, the default `cron` feature), and any closure
//! `FnMut(&TriggerContext) -> Option<Next>`.
//!
//! ```
//! use chronopool::trigger::{Next, TriggerContext};
//! use chronopool::ScheduledExecutor;
//! use std::ops::ControlFlow;
//! use std::time::Duration;
//!
//! let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
//! // Three runs, 10 ms apart, counted from the end of each run.
//! let handle = pool.schedule_with_trigger(
//!     || ControlFlow::<()>::Continue(()),
//!     |ctx: &TriggerContext| {
//!         (ctx.runs() < 3).then(|| Next::At(ctx.now() + Duration::from_millis(10)))
//!     },
//! )?;
//! assert!(handle.join()?.is_by_trigger());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Wall time
//!
//! A run due at a [`SystemTime`] runs when the wall clock reaches it, not
//! after the monotonic delay it looked like when it was placed: if the
//! wall clock is stepped forward past it (an NTP step, a change by hand),
//! it runs at once; stepped back, it waits for the new wall time. The
//! timer thread notices a step by the change of the wall-minus-monotonic
//! offset, at each of its wake-ups and at least once a second while it
//! holds a wall-time run (monotonic runs cost nothing for it), and places
//! the wall-time runs again; a run is also checked against the wall clock
//! when it falls due, so it is never early, even under a slow drift. The
//! JDK's `ScheduledThreadPoolExecutor` uses only the monotonic clock (its
//! "at 12:00" drifts from the wall clock by design) and `java.util.Timer`
//! only the wall clock (its periods stretch or collapse when the clock is
//! changed); chronopool uses each for what it measures: periods on the
//! monotonic clock, calendar times on the wall clock.

use std::cell::Cell;
use std::fmt;
use std::time::{Instant, SystemTime};

use crate::time::{Clock, Nanos};

mod backoff;
#[cfg(feature = "cron")]
mod cron;
mod fixed;

pub use backoff::{Backoff, Jitter};
#[cfg(feature = "cron")]
pub use cron::{Cron, CronError};
pub use fixed::{FixedDelay, FixedRate, MissedRuns};

/// When a recurring task runs next, as a [`Trigger`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Next {
    /// At this instant of the monotonic clock (a past one: at once).
    At(Instant),
    /// When the wall clock reads this time (a past one: at once); see the
    /// module doc for steps of the wall clock.
    AtSystemTime(SystemTime),
}

impl From<Instant> for Next {
    fn from(at: Instant) -> Self {
        Next::At(at)
    }
}

impl From<SystemTime> for Next {
    fn from(at: SystemTime) -> Self {
        Next::AtSystemTime(at)
    }
}

/// Decides when a recurring task runs next (see the module doc).
///
/// [`next`](Trigger::next) is called once when the task is scheduled (with
/// [`runs`](TriggerContext::runs) 0) and after each run that did not end
/// the task, on the thread that ran it; never concurrently with itself or
/// with a run. Returning `None` ends the task: its handle's `join` returns
/// [`Ended::ByTrigger`].
///
/// Any closure `FnMut(&TriggerContext) -> Option<Next> + Send + 'static`
/// is a trigger:
///
/// ```
/// use chronopool::trigger::{Next, Trigger, TriggerContext};
/// use std::time::Duration;
///
/// /// Every second, five times.
/// struct FiveSeconds;
///
/// impl Trigger for FiveSeconds {
///     fn next(&mut self, ctx: &TriggerContext) -> Option<Next> {
///         let last = ctx.last_due().unwrap_or(ctx.now());
///         (ctx.runs() < 5).then(|| Next::At(last + Duration::from_secs(1)))
///     }
///
///     fn records_run_times(&self) -> bool {
///         false // reads neither last_start() nor last_end()
///     }
/// }
/// ```
///
/// A panic of `next` ends the task as a panic of its run would: its
/// handle reports [`TaskError::Panicked`](crate::TaskError::Panicked) and
/// the `on_panic` hook sees it (`Metrics::panicked_tasks` counts the runs
/// that panicked, not this).
pub trait Trigger: Send + 'static {
    /// When the task runs next, or `None` to end it.
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next>;

    /// True (the default) if [`next`](Trigger::next) reads
    /// [`last_start`](TriggerContext::last_start) or
    /// [`last_end`](TriggerContext::last_end): the task then reads the
    /// clock before and after each run to record them. A trigger that
    /// needs neither returns false and saves two clock reads per run (a
    /// clock read costs as much as the rest of a re-arm); the two then
    /// return `None`.
    fn records_run_times(&self) -> bool {
        true
    }
}

impl<F> Trigger for F
where
    F: FnMut(&TriggerContext<'_>) -> Option<Next> + Send + 'static,
{
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next> {
        self(ctx)
    }
}

/// What happened so far, for a [`Trigger`] to decide when the task runs
/// next. Times are on the executor's clock (a
/// [`ManualClock`](crate::ManualClock)'s if it has one).
pub struct TriggerContext<'a> {
    clock: &'a Clock,
    history: &'a History,
    /// The time now, read once, at the first call that needs it.
    now: Cell<Option<Nanos>>,
    /// The last `instant_at` conversion, so that the task need not convert
    /// the `Instant` a built-in trigger answers with back (`nanos_of`).
    converted: Cell<Option<(Instant, Nanos)>>,
    /// Runs a built-in trigger's `MissedRuns` skipped and delayed, for the
    /// executor's metrics.
    missed: Cell<(u64, u64)>,
}

impl<'a> TriggerContext<'a> {
    pub(crate) fn new(clock: &'a Clock, history: &'a History) -> Self {
        TriggerContext {
            clock,
            history,
            now: Cell::new(None),
            converted: Cell::new(None),
            missed: Cell::new((0, 0)),
        }
    }

    /// Counts runs a built-in trigger skipped and delayed (`MissedRuns`).
    pub(crate) fn note_missed(&self, skipped: u64, delayed: u64) {
        let (s, d) = self.missed.get();
        self.missed.set((s + skipped, d + delayed));
    }

    /// The runs skipped and delayed this call (see `note_missed`).
    pub(crate) fn missed(&self) -> (u64, u64) {
        self.missed.get()
    }

    /// The time now, in nanoseconds on the clock (read once per context).
    pub(crate) fn now_nanos(&self) -> Nanos {
        match self.now.get() {
            Some(now) => now,
            None => {
                let now = self.clock.now();
                self.now.set(Some(now));
                now
            }
        }
    }

    /// When the last run was due, in nanoseconds on the clock.
    pub(crate) fn last_due_nanos(&self) -> Option<Nanos> {
        (self.history.runs > 0).then_some(self.history.last_due)
    }

    /// The `Instant` of `nanos` on the clock.
    pub(crate) fn instant_at(&self, nanos: Nanos) -> Instant {
        let at = self.clock.instant_of_saturating(nanos);
        self.converted.set(Some((at, nanos)));
        at
    }

    /// `at` in nanoseconds on the clock (without a conversion if it is the
    /// last `instant_at` gave).
    pub(crate) fn nanos_of(&self, at: Instant) -> Nanos {
        match self.converted.get() {
            Some((converted, nanos)) if converted == at => nanos,
            _ => self.clock.nanos_of(at),
        }
    }

    /// How many runs have ended (0 before the first).
    pub fn runs(&self) -> u64 {
        self.history.runs
    }

    /// When the last run was due (`None` before the first run).
    pub fn last_due(&self) -> Option<Instant> {
        self.last_due_nanos()
            .map(|due| self.clock.instant_of_saturating(due))
    }

    /// The wall time the last run was due at, if it was due at a wall time
    /// ([`Next::AtSystemTime`]).
    pub fn last_due_system_time(&self) -> Option<SystemTime> {
        self.history.last_due_wall
    }

    /// When the last run started, if it was recorded (see
    /// [`Trigger::records_run_times`]).
    pub fn last_start(&self) -> Option<Instant> {
        (self.history.last_start != NONE)
            .then(|| self.clock.instant_of_saturating(self.history.last_start))
    }

    /// When the last run ended, if it was recorded (see
    /// [`Trigger::records_run_times`]).
    pub fn last_end(&self) -> Option<Instant> {
        (self.history.last_end != NONE)
            .then(|| self.clock.instant_of_saturating(self.history.last_end))
    }

    /// The time now, on the monotonic clock.
    pub fn now(&self) -> Instant {
        self.clock.instant_of_saturating(self.now_nanos())
    }

    /// The time now, on the wall clock.
    pub fn system_time(&self) -> SystemTime {
        self.clock.system_time()
    }
}

impl fmt::Debug for TriggerContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TriggerContext")
            .field("runs", &self.runs())
            .field("last_due", &self.last_due())
            .field("last_due_system_time", &self.last_due_system_time())
            .finish_non_exhaustive()
    }
}

/// What a recurring task remembers of its runs, for its trigger. Kept
/// small (it is written after every run, beside the task's hot fields):
/// `NONE` stands for a time not recorded, and `last_due` means something
/// only once a run has ended.
#[derive(Clone, Copy, Debug)]
pub(crate) struct History {
    pub(crate) runs: u64,
    /// When the last run was due (if `runs > 0`).
    pub(crate) last_due: Nanos,
    /// The wall time the last run was due at, if it was due at one (any
    /// `SystemTime`: 1950 and 2600 alike).
    pub(crate) last_due_wall: Option<SystemTime>,
    pub(crate) last_start: Nanos,
    pub(crate) last_end: Nanos,
}

impl Default for History {
    fn default() -> Self {
        History {
            runs: 0,
            last_due: 0,
            last_due_wall: None,
            last_start: NONE,
            last_end: NONE,
        }
    }
}

/// A time not recorded (`History`).
pub(crate) const NONE: u64 = u64::MAX;

/// How a task scheduled with a trigger ended, when it ended by itself (a
/// cancel or a panic is an `Err` of [`TaskError`](crate::TaskError)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ended<T> {
    /// A run returned `ControlFlow::Break` with this value.
    ByClosure(T),
    /// The trigger had no next run.
    ByTrigger,
}

impl<T> Ended<T> {
    /// True if a run of the closure ended the task.
    pub fn is_by_closure(&self) -> bool {
        matches!(self, Ended::ByClosure(_))
    }

    /// True if the trigger ended the task.
    pub fn is_by_trigger(&self) -> bool {
        matches!(self, Ended::ByTrigger)
    }

    /// The value the closure ended the task with, if it did.
    pub fn into_value(self) -> Option<T> {
        match self {
            Ended::ByClosure(value) => Some(value),
            Ended::ByTrigger => None,
        }
    }
}

/// A trigger that answers once: the first run, then the end (the
/// schedule of a one-shot task at a wall time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Once(pub(crate) Next);

impl Trigger for Once {
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next> {
        (ctx.runs() == 0).then_some(self.0)
    }

    fn records_run_times(&self) -> bool {
        false
    }
}

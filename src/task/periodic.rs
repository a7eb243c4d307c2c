//! Periodic tasks: run, reset, re-arm (the JDK's `runAndReset`), at a fixed
//! rate or with a fixed delay; and [`MissedRuns`], what a fixed-rate task
//! does about runs it missed.
//!
//! # Ground rules
//!
//! A periodic task is a cell with the same state word as a one-shot task
//! (`state.rs`). A worker claims it (SCHEDULED -> RUNNING), runs the closure,
//! computes the next deadline, moves it back to SCHEDULED (`try_reset`,
//! `Release`) and only *then* hands it to the timer again; the next run
//! claims it with `Acquire`. So a run never overlaps the previous one, and
//! each run happens-before the next, on whatever worker it lands.
//!
//! * The closure (`job`) belongs to the thread that holds RUNNING, or to a
//!   canceller that moved SCHEDULED -> CANCELLED (it drops it).
//! * A cancel during a run sets CANCEL_REQUESTED and returns true: the run
//!   finishes, `try_reset` fails, and the runner drops the closure and ends
//!   the task as CANCELLED. No further run is queued.
//! * A panic ends the task: the runner stores the payload, drops the
//!   closure, and moves RUNNING -> COMPLETE (the handle reports the panic).
//! * `deadline` is written only by the runner (before the reset that
//!   publishes it) and at creation; the timer and the handle read it.
//! * The closure is dropped when the task ends (cancelled, panicked, or
//!   stopped by a shutdown), through the task's context: a panic of its
//!   captures' destructors goes to `on_panic` and changes nothing else (the
//!   handle still reports how the task ended).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sync::cell::UnsafeCell;
use crate::sync::{AtomicU64, Ordering, StdArc};
use crate::time::Nanos;

use super::context::TaskContext;
use super::entry::TimerEntry;
use super::error::{PanicPayload, TaskError};
use super::job::{Job, RunOutcome, Runnable};
use super::state::{Cancellable, Header, Joinable, PeriodicCancel, RUNNING};

/// What a fixed-rate task does when a run ends after the next one was due
/// (the task ran long, or the pool was busy), drawn for a period of 10
/// time units with the run due at 20 ending at 45:
///
/// ```text
/// due:        0    10    20    30    40    50    60
/// run:        |#|   |#|   |##########|
/// Burst:                             |#|#|#| |#|   (30 and 40 at once, then 50 on time)
/// Skip:                                      |#|   (30 and 40 dropped; 50 on time)
/// Delay:                                       |#|   |#|   (55, 65, ...: the schedule shifts)
/// ```
///
/// A fixed-rate task never runs concurrently with itself, whatever the
/// policy: late runs happen one after another, never in parallel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissedRuns {
    /// Catch up: run the missed runs back to back, each as soon as the
    /// previous one ends, until the task is on schedule again. Run `n` stays
    /// due at `start + n × period`. The JDK's behaviour, and the default of
    /// [`schedule_at_fixed_rate`](crate::ScheduledExecutor::schedule_at_fixed_rate).
    ///
    /// ```
    /// use chronopool::{MissedRuns, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let beat = pool.schedule_at_fixed_rate_with(
    ///     || { /* send a heartbeat */ },
    ///     Duration::ZERO,
    ///     Duration::from_secs(1),
    ///     MissedRuns::Burst,
    /// )?;
    /// beat.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[default]
    Burst,
    /// Drop the missed runs: the next run is at the first `start + n ×
    /// period` after the late run ended. The schedule keeps its phase.
    ///
    /// ```
    /// use chronopool::{MissedRuns, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let sample = pool.schedule_at_fixed_rate_with(
    ///     || { /* sample a gauge */ },
    ///     Duration::ZERO,
    ///     Duration::from_millis(100),
    ///     MissedRuns::Skip,
    /// )?;
    /// sample.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    Skip,
    /// Shift the schedule: the next run is one period after the late run
    /// ended, and the rate continues from there.
    ///
    /// ```
    /// use chronopool::{MissedRuns, ScheduledExecutor};
    /// use std::time::Duration;
    ///
    /// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
    /// let poll = pool.schedule_at_fixed_rate_with(
    ///     || { /* poll a service */ },
    ///     Duration::ZERO,
    ///     Duration::from_millis(500),
    ///     MissedRuns::Delay,
    /// )?;
    /// poll.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    Delay,
}

/// When the next run of a periodic task is due.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Period {
    /// Every `period` from the first deadline, with a policy for late runs.
    FixedRate { period: Nanos, missed: MissedRuns },
    /// `delay` after the previous run ended.
    FixedDelay { delay: Nanos },
}

impl Period {
    /// The deadline after a run that was due at `due` and ended at
    /// `now()`. The clock is read only where the answer depends on it (not
    /// for a fixed rate with [`MissedRuns::Burst`]): a clock read costs
    /// ~25-100 ns, as much as the rest of a re-arm.
    fn next(self, due: Nanos, now: impl FnOnce() -> Nanos) -> Nanos {
        match self {
            Period::FixedDelay { delay } => now().saturating_add(delay),
            Period::FixedRate { period, missed } => {
                let next = due.saturating_add(period);
                if missed == MissedRuns::Burst {
                    return next;
                }
                let now = now();
                if next > now {
                    return next;
                }
                match missed {
                    MissedRuns::Burst => next,
                    MissedRuns::Skip => {
                        let missed_periods = (now - due) / period;
                        due.saturating_add(period.saturating_mul(missed_periods + 1))
                    }
                    MissedRuns::Delay => now.saturating_add(period),
                }
            }
        }
    }
}

/// A periodic task (see the module doc).
pub(crate) struct PeriodicTask<F> {
    header: Header,
    job: UnsafeCell<Option<F>>,
    panic: UnsafeCell<Option<PanicPayload>>,
    deadline: AtomicU64,
    period: Period,
}

// SAFETY: shared through `StdArc`; `job` is touched only by the holder of
// RUNNING or by the canceller that moved SCHEDULED -> CANCELLED, `panic`
// only by the runner before it publishes COMPLETE (`Release`) and by the
// unique handle after it read COMPLETE (`Acquire`) (module doc). `F` moves
// between workers across runs, hence `F: Send`; it is never shared.
unsafe impl<F: Send> Sync for PeriodicTask<F> {}

impl<F: FnMut() + Send + 'static> PeriodicTask<F> {
    pub(crate) fn new(f: F, first: Nanos, period: Period) -> Self {
        PeriodicTask {
            header: Header::default(),
            job: UnsafeCell::new(Some(f)),
            panic: UnsafeCell::new(None),
            deadline: AtomicU64::new(first),
            period,
        }
    }

    /// Drops the closure. Only its owner (module doc) calls this.
    fn drop_job(&self, ctx: &dyn TaskContext) {
        // SAFETY: the caller holds RUNNING or won SCHEDULED -> CANCELLED,
        // which makes it the only thread touching `job`.
        let job = self.job.with_mut(|job| unsafe { (*job).take() });
        ctx.drop_reporting(job);
    }

    /// Ends the task after a run: no further run.
    fn stop_after_run(&self, ctx: &dyn TaskContext) {
        self.drop_job(ctx);
        if let Some(waker) = self.header.finish_cancelled() {
            ctx.wake(waker);
        }
    }

    /// Ends a task that `cancel_periodic` stopped between runs: `counted`
    /// (the bookkeeping), then the closure is dropped and the waiter woken.
    /// True if it was stopped or is stopping (a run in progress).
    fn cancel_then(&self, ctx: &dyn TaskContext, counted: impl FnOnce()) -> bool {
        match self.header.cancel_periodic() {
            PeriodicCancel::Stopped { wake } => {
                counted();
                self.drop_job(ctx);
                if let Some(waker) = wake.then(|| self.header.take_waiter()).flatten() {
                    ctx.wake(waker);
                }
                true
            }
            PeriodicCancel::Requested => true,
            PeriodicCancel::Lost => false,
        }
    }

    /// Runs the closure once (the caller holds RUNNING).
    fn run_once(&self) -> std::thread::Result<()> {
        // SAFETY: we hold RUNNING, so `job` is ours (module doc); it holds
        // the closure, which only leaves when the task ends.
        self.job.with_mut(|job| {
            let f = unsafe { (*job).as_mut() };
            catch_unwind(AssertUnwindSafe(|| {
                if let Some(f) = f {
                    f();
                }
            }))
        })
    }
}

impl<F: FnMut() + Send + 'static> Runnable for PeriodicTask<F> {
    fn run(this: &StdArc<Self>, ctx: &dyn TaskContext) -> RunOutcome {
        if this.header.leave_scheduled(RUNNING).is_none() {
            return RunOutcome::Skipped;
        }
        if let Err(payload) = this.run_once() {
            let payload = PanicPayload::new(payload);
            ctx.show_panic(&payload);
            this.drop_job(ctx);
            // SAFETY: we hold RUNNING: nobody reads `panic` until COMPLETE.
            this.panic.with_mut(|slot| unsafe { *slot = Some(payload) });
            if let Some(waker) = this.header.complete() {
                ctx.wake(waker);
            }
            return RunOutcome::Panicked;
        }
        let due = this.deadline.load(Ordering::Relaxed);
        let next = this.period.next(due, || ctx.now());
        this.deadline.store(next, Ordering::Relaxed);
        // The closure is dropped (user code) only after the re-arm's
        // admission has ended: `shutdown_now` waits for admitted re-arms,
        // so a destructor that calls it must not run inside one.
        let rearmed = ctx.rearm(this.clone(), &mut || this.header.try_reset());
        if !rearmed {
            this.stop_after_run(ctx);
        }
        RunOutcome::Completed
    }

    fn abandon(&self, ctx: &dyn TaskContext) {
        self.cancel_then(ctx, || ());
    }
}

impl<F: FnMut() + Send + 'static> Cancellable for PeriodicTask<F> {
    fn header(&self) -> &Header {
        &self.header
    }

    /// A task stopped between runs leaves a dead entry in the timer: the
    /// cancel is counted there (module doc of `timer::driver::sweep`); a run in
    /// progress ends the task itself and re-arms nothing.
    fn cancel(&self, ctx: &dyn TaskContext) -> bool {
        self.cancel_then(ctx, || ctx.note_cancelled())
    }

    fn deadline(&self) -> Option<Nanos> {
        Some(self.deadline.load(Ordering::Relaxed))
    }
}

impl<F: FnMut() + Send + 'static> Joinable<()> for PeriodicTask<F> {
    fn cancellable(self: StdArc<Self>) -> StdArc<dyn Cancellable> {
        self
    }

    fn take_output(&self) -> Result<(), TaskError> {
        if self.header.is_cancelled() {
            return Err(TaskError::Cancelled);
        }
        // SAFETY: the caller saw COMPLETE with `Acquire`; the runner wrote
        // `panic` before publishing it; the unique handle reads it once.
        match self.panic.with_mut(|slot| unsafe { (*slot).take() }) {
            Some(payload) => Err(TaskError::Panicked(payload)),
            None => unreachable!("a periodic task completes only by panicking"),
        }
    }
}

impl<F: FnMut() + Send + 'static> TimerEntry for PeriodicTask<F> {
    fn deadline(&self) -> Nanos {
        self.deadline.load(Ordering::Relaxed)
    }

    fn is_final(&self) -> bool {
        self.header.is_final()
    }

    fn is_periodic(&self) -> bool {
        true
    }

    fn into_job(self: StdArc<Self>) -> Job {
        Job::task(self)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::context::TestContext;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// A periodic task that counts its runs and the drops of its closure.
    fn counting(
        first: Nanos,
        period: Period,
    ) -> (
        StdArc<PeriodicTask<impl FnMut() + Send>>,
        Arc<AtomicUsize>,
        Arc<AtomicUsize>,
    ) {
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (r, capture) = (runs.clone(), Counted(drops.clone()));
        let task = StdArc::new(PeriodicTask::new(
            move || {
                let _keep = &capture;
                r.fetch_add(1, Ordering::SeqCst);
            },
            first,
            period,
        ));
        (task, runs, drops)
    }

    #[test]
    fn a_run_rearms_through_the_context_at_its_next_deadline() {
        let ctx = TestContext::default();
        let (task, runs, drops) = counting(10, rate(MissedRuns::Burst));
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Completed);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(ctx.rearmed.lock().unwrap().len(), 1);
        assert_eq!(TimerEntry::deadline(&*task), 20);
        assert!(!task.header.is_final());
        assert_eq!(drops.load(Ordering::SeqCst), 0, "the closure is kept");
    }

    #[test]
    fn a_fixed_delay_counts_from_the_contexts_clock() {
        let ctx = TestContext::default();
        ctx.now.store(100, Ordering::SeqCst);
        let (task, _, _) = counting(10, Period::FixedDelay { delay: 7 });
        Job::task(task.clone()).run(&ctx);
        assert_eq!(TimerEntry::deadline(&*task), 107);
    }

    #[test]
    fn a_refused_rearm_ends_the_task_and_drops_its_closure() {
        let ctx = TestContext::default();
        ctx.refuse_rearm.store(true, Ordering::SeqCst);
        let (task, runs, drops) = counting(10, rate(MissedRuns::Burst));
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Completed);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(task.header.is_cancelled());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert!(ctx.rearmed.lock().unwrap().is_empty());
    }

    #[test]
    fn a_cancel_between_runs_is_counted_and_drops_the_closure() {
        let ctx = TestContext::default();
        let (task, runs, drops) = counting(10, rate(MissedRuns::Burst));
        assert!(Cancellable::cancel(&*task, &ctx));
        assert_eq!(ctx.cancels.load(Ordering::SeqCst), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Skipped);
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        assert!(task.take_output().unwrap_err().is_cancelled());
    }

    #[test]
    fn a_panicking_run_ends_the_task_with_its_payload() {
        crate::task::unwind::quiet_expected_panics();
        let ctx = TestContext::default();
        let task = StdArc::new(PeriodicTask::new(
            || panic!("expected: a periodic run panicked"),
            10,
            rate(MissedRuns::Burst),
        ));
        assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Panicked);
        assert_eq!(ctx.panics.lock().unwrap().len(), 1);
        assert!(ctx.rearmed.lock().unwrap().is_empty());
        assert!(task.take_output().unwrap_err().is_panic());
    }

    fn rate(missed: MissedRuns) -> Period {
        Period::FixedRate { period: 10, missed }
    }

    #[test]
    fn on_time_runs_keep_the_rate_whatever_the_policy() {
        for missed in [MissedRuns::Burst, MissedRuns::Skip, MissedRuns::Delay] {
            assert_eq!(rate(missed).next(20, || 25), 30);
            assert_eq!(rate(missed).next(20, || 29), 30);
        }
    }

    #[test]
    fn late_runs_follow_the_policy() {
        // Due at 20, ended at 45 (the timeline in MissedRuns' doc).
        assert_eq!(rate(MissedRuns::Burst).next(20, || 45), 30);
        assert_eq!(rate(MissedRuns::Burst).next(30, || 45), 40);
        assert_eq!(rate(MissedRuns::Burst).next(40, || 45), 50);
        assert_eq!(rate(MissedRuns::Skip).next(20, || 45), 50);
        assert_eq!(
            rate(MissedRuns::Skip).next(20, || 50),
            60,
            "a run ending on a boundary"
        );
        assert_eq!(rate(MissedRuns::Delay).next(20, || 45), 55);
    }

    #[test]
    fn fixed_delay_counts_from_the_end_of_the_run() {
        assert_eq!(Period::FixedDelay { delay: 7 }.next(20, || 45), 52);
    }

    #[test]
    fn huge_periods_saturate() {
        let p = Period::FixedRate {
            period: u64::MAX,
            missed: MissedRuns::Skip,
        };
        assert_eq!(p.next(5, || 6), u64::MAX);
        assert_eq!(
            Period::FixedDelay { delay: u64::MAX }.next(0, || 9),
            u64::MAX
        );
    }
}

/// loom model of run-and-reset vs cancel (`RUSTFLAGS="--cfg loom"`, see
/// `loom-tests/README.md`), over a [`PeriodicTask`] and a pool without
/// threads.
///
/// `run_and_reset_vs_cancel`: one thread runs the task's first run (a queue
/// job, as a worker would: claim, run, reset, re-arm into the timer's
/// command queue); a second thread takes whatever the timer holds (the
/// timer's own `drain`: it applies the commands, placing the re-armed
/// entry) and runs it, as the next worker would; the main thread cancels,
/// then sets a flag (`SeqCst`) that each run reads when its closure starts
/// and when it ends. Asserted:
///
/// * after `cancel()` returned true no further run starts. A run is
///   claimed before its closure starts, so one closure may start after
///   `cancel()` returned: the run that was claimed, not yet in its closure,
///   when the cancel came (and found it RUNNING). So: at most one closure
///   starts after the flag is set, and none if a closure was running when
///   it was set (that run was the one in progress);
/// * runs never overlap and each happens-before the next: the closure
///   keeps its log in a loom `UnsafeCell` (plain, non-atomic fields), and
///   loom reports a data race unless the previous run's accesses are
///   ordered before the next run's;
/// * `cancel()` is true (one canceller, nothing else ends the task), the
///   task ends CANCELLED, and its closure is dropped exactly once.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom_support::{bare_pool, model, DropCounter};
    use crate::sync::cell::UnsafeCell;
    use crate::sync::{thread, Arc, AtomicBool};

    /// What the runs wrote, in plain fields.
    #[derive(Default)]
    struct Log {
        runs: usize,
        /// Runs whose closure started after `cancel()` returned true.
        started_after_cancel: usize,
        /// Runs whose closure was running when `cancel()` returned true.
        running_at_cancel: usize,
    }

    struct Shared {
        /// Only accessed by runs of the task (and by the main thread once
        /// every run ended): loom checks that these accesses are ordered.
        log: UnsafeCell<Log>,
        /// Set once `cancel()` returned true.
        cancelled: AtomicBool,
    }

    // SAFETY: `log` is only accessed by runs of the task, which the task
    // protocol orders (loom checks that it does), and after they ended.
    unsafe impl Sync for Shared {}

    #[test]
    fn run_and_reset_vs_cancel() {
        model("periodic::run_and_reset_vs_cancel", || {
            let (pool, _) = bare_pool(1, Default::default());
            let shared = Arc::new(Shared {
                log: UnsafeCell::new(Log::default()),
                cancelled: AtomicBool::new(false),
            });
            let drops = DropCounter::new();
            let (s, guard) = (Arc::clone(&shared), drops.guard());
            let cell = StdArc::new(PeriodicTask::new(
                move || {
                    let _keep = &guard;
                    let before = s.cancelled.load(Ordering::SeqCst);
                    // SAFETY (both): the task protocol orders the runs.
                    s.log.with_mut(|log| unsafe { (*log).runs += 1 });
                    let after = s.cancelled.load(Ordering::SeqCst);
                    s.log.with_mut(|log| unsafe {
                        if before {
                            (*log).started_after_cancel += 1;
                        } else if after {
                            (*log).running_at_cancel += 1;
                        }
                    });
                },
                0,
                Period::FixedRate {
                    period: 1,
                    missed: MissedRuns::Burst,
                },
            ));
            // The first run: its job, as the timer hands it over when due.
            let first = Job::task(StdArc::clone(&cell));
            let w1 = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    first.run(&*pool);
                })
            };
            let w2 = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    for job in pool.timer.drain() {
                        job.run(&*pool);
                    }
                })
            };
            let cancelled = Cancellable::cancel(&*cell, &*pool);
            if cancelled {
                shared.cancelled.store(true, Ordering::SeqCst);
            }
            w1.join().unwrap();
            w2.join().unwrap();

            assert!(cancelled, "nothing but this cancel ends the task");
            assert!(cell.header.is_cancelled());
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
            // SAFETY: every run has ended (the threads were joined).
            let log = shared
                .log
                .with_mut(|log| unsafe { std::mem::take(&mut *log) });
            assert!(log.runs <= 2, "{} runs", log.runs);
            assert!(
                log.started_after_cancel <= 1,
                "a run started after cancel() returned true and another run"
            );
            assert!(
                log.started_after_cancel == 0 || log.running_at_cancel == 0,
                "a run started after the run in progress at cancel() ended"
            );
        });
    }
}

//! loom models of a recurring task (`RUSTFLAGS="--cfg loom"`, see
//! `loom-tests/README.md`), over a [`RecurringTask`] and a pool without
//! threads.
//!
//! `run_and_reset_vs_cancel`: one thread runs the task's first run (a queue
//! job, as a worker would: claim, run, reset, re-arm into the timer's
//! command queue); a second thread takes whatever the timer holds (the
//! timer's own `drain`: it applies the commands, placing the re-armed
//! entry) and runs it, as the next worker would; the main thread cancels,
//! then sets a flag (`SeqCst`) that each run reads when its closure starts
//! and when it ends. Asserted:
//!
//! * after `cancel()` returned true no further run starts. A run is
//!   claimed before its closure starts, so one closure may start after
//!   `cancel()` returned: the run that was claimed, not yet in its closure,
//!   when the cancel came (and found it RUNNING). So: at most one closure
//!   starts after the flag is set, and none if a closure was running when
//!   it was set (that run was the one in progress);
//! * runs never overlap and each happens-before the next: the closure
//!   keeps its log in a loom `UnsafeCell` (plain, non-atomic fields), and
//!   loom reports a data race unless the previous run's accesses are
//!   ordered before the next run's;
//! * `cancel()` is true (one canceller, nothing else ends the task), the
//!   task ends CANCELLED, and its closure is dropped exactly once.

use crate::loom_model::support::{bare_pool, model, DropCounter, Every};
use crate::sync::cell::UnsafeCell;
use crate::sync::{thread, Arc};
use crate::sync::{AtomicBool, CellArc, Ordering};
use crate::task::delayed::Delayed;
use crate::task::job::Job;
use crate::task::recurring::*;
use crate::task::state::Cancellable;
use crate::time::Nanos;
use crate::trigger::{Next, TriggerContext};

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
    model("recurring::run_and_reset_vs_cancel", || {
        let (pool, _) = bare_pool(1, Default::default());
        let shared = Arc::new(Shared {
            log: UnsafeCell::new(Log::default()),
            cancelled: AtomicBool::new(false),
        });
        let drops = DropCounter::new();
        let (s, guard) = (Arc::clone(&shared), drops.guard());
        let cell = CellArc::new(RecurringTask::new(
            Repeat(move || {
                let _keep = &guard;
                let before = s.cancelled.load(Ordering::SeqCst);
                // SAFETY: the task protocol orders the runs, the only
                // accesses to the log until the model reads it.
                s.log.with_mut(|log| unsafe { (*log).runs += 1 });
                let after = s.cancelled.load(Ordering::SeqCst);
                // SAFETY: as above.
                s.log.with_mut(|log| unsafe {
                    if before {
                        (*log).started_after_cancel += 1;
                    } else if after {
                        (*log).running_at_cancel += 1;
                    }
                });
            }),
            Every {
                first: 0,
                period: 1,
            },
            true,
            (),
        ));
        assert_eq!(
            RecurringTask::first(&cell, &*pool).map(|p| p.deadline),
            Some(0)
        );
        // The first run: its job, as the timer hands it over when due.
        let first = Job::task(CellArc::clone(&cell));
        let w1 = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                first.run(&*pool);
            })
        };
        let w2 = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                for job in pool.timer.drain(&*pool) {
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

/// `reschedule_vs_run`: the task's first run is due (its job is handed
/// to one thread, as the timer would) while the main thread hands it a
/// new trigger; the timer's entries are then drained and run, as the
/// next worker would. The old trigger would place the next run at
/// `OLD`, the new one at `NEW` after the last due time (or at `FIRST`
/// if no run has happened). Asserted: `reschedule` returns true (the
/// task is alive); the runs never overlap (the log is a plain cell);
/// before the drain, the task's deadline is the new trigger's answer
/// for the runs so far (never the old trigger's: a run in progress took
/// the new trigger, whichever came first); exactly one of the drained
/// entries runs the task (a stale entry runs nothing, and none is
/// lost); and the count of dead entries covers the stale ones left.
#[test]
fn reschedule_vs_run() {
    const OLD: Nanos = 1 << 40;
    const NEW: Nanos = 1 << 20;
    const FIRST: Nanos = 1 << 10;
    model("recurring::reschedule_vs_run", || {
        let (pool, _) = bare_pool(1, Default::default());
        let shared = Arc::new(Shared {
            log: UnsafeCell::new(Log::default()),
            cancelled: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let cell = CellArc::new(RecurringTask::new(
            Repeat(move || {
                // SAFETY: the task protocol orders the runs.
                s.log.with_mut(|log| unsafe { (*log).runs += 1 });
            }),
            Every {
                first: 0,
                period: OLD,
            },
            true,
            (),
        ));
        assert_eq!(
            RecurringTask::first(&cell, &*pool).map(|p| p.deadline),
            Some(0)
        );
        let first = Job::task(CellArc::clone(&cell));
        let w1 = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                first.run(&*pool);
            })
        };
        let new = |ctx: &TriggerContext<'_>| {
            let at = ctx.last_due_nanos().map_or(FIRST, |due| due + NEW);
            Some(Next::At(ctx.instant_at(at)))
        };
        assert!(RecurringTask::reschedule(&cell, Box::new(new), &*pool));
        w1.join().unwrap();
        // SAFETY: every run has ended (the thread was joined).
        let runs = shared.log.with_mut(|log| unsafe { (*log).runs });
        let deadline = Delayed::deadline(&*cell);
        match runs {
            0 => assert_eq!(deadline, FIRST, "placed by the new trigger"),
            1 => assert_eq!(deadline, NEW, "the run took the new trigger"),
            n => panic!("{n} runs"),
        }
        let dead = pool.timer.dead_count();
        let jobs = pool.timer.drain(&*pool);
        assert!(
            dead + 1 >= jobs.len() as u64,
            "the stale entries are counted"
        );
        for job in jobs {
            job.run(&*pool);
        }
        // SAFETY: as above.
        let after = shared.log.with_mut(|log| unsafe { (*log).runs });
        assert_eq!(after, runs + 1, "exactly one entry ran the task");
    });
}

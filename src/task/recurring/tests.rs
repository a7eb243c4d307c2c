use super::*;
use crate::task::context::TestContext;
use crate::trigger::{FixedDelay, FixedRate, MissedRuns};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// A task on `trigger` that counts its runs and the drops of its
/// closure, placed for its first run.
#[allow(clippy::type_complexity)]
fn counting<G: Trigger>(
    ctx: &TestContext,
    trigger: G,
) -> (
    CellArc<RecurringTask<Repeat<impl FnMut() + Send>, G>>,
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
    let body = Repeat(move || {
        let _keep = &capture;
        r.fetch_add(1, Ordering::SeqCst);
    });
    let task = CellArc::new(RecurringTask::new(body, trigger, true, ()));
    assert!(RecurringTask::first(&task, ctx).is_some());
    (task, runs, drops)
}

fn deadline(task: &impl Delayed) -> Duration {
    Duration::from_nanos(task.deadline())
}

#[test]
fn a_run_rearms_through_the_context_at_its_next_deadline() {
    let ctx = TestContext::default();
    let (task, runs, drops) =
        counting(&ctx, FixedRate::new(SECOND * 10).initial_delay(SECOND * 10));
    assert_eq!(deadline(&*task), SECOND * 10);
    assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(ctx.rearmed.lock().unwrap().len(), 1);
    assert_eq!(
        deadline(&*task),
        SECOND * 20,
        "from the due time, not the clock"
    );
    assert!(!task.header.is_final());
    assert_eq!(drops.load(Ordering::SeqCst), 0, "the closure is kept");
}

#[test]
fn a_fixed_delay_counts_from_the_contexts_clock() {
    let ctx = TestContext::default();
    let (task, _, _) = counting(&ctx, FixedDelay::new(SECOND * 7));
    ctx.manual.jump(SECOND * 100);
    Job::task(task.clone()).run(&ctx);
    assert_eq!(deadline(&*task), SECOND * 107);
}

#[test]
fn late_fixed_rate_runs_follow_the_policy() {
    for (missed, next) in [
        (MissedRuns::Burst, 20),
        (MissedRuns::Skip, 50),
        (MissedRuns::Delay, 55),
    ] {
        let ctx = TestContext::default();
        let rate = FixedRate::new(SECOND * 10)
            .initial_delay(SECOND * 10)
            .missed_runs(missed);
        let (task, _, _) = counting(&ctx, rate);
        ctx.manual.jump(SECOND * 45);
        Job::task(task.clone()).run(&ctx);
        assert_eq!(deadline(&*task), SECOND * next, "{missed:?}");
    }
}

#[test]
fn a_refused_rearm_ends_the_task_and_drops_its_closure() {
    let ctx = TestContext::default();
    let (task, runs, drops) = counting(&ctx, FixedRate::new(SECOND));
    ctx.refuse_rearm.store(true, Ordering::SeqCst);
    assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(task.header.is_cancelled());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(ctx.rearmed.lock().unwrap().is_empty());
}

#[test]
fn a_cancel_between_runs_is_counted_and_drops_the_closure() {
    let ctx = TestContext::default();
    let (task, runs, drops) = counting(&ctx, FixedRate::new(SECOND));
    assert!(Cancellable::cancel(&*task, &ctx));
    assert_eq!(ctx.cancels.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Cancelled);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(task.take_output().unwrap_err().is_cancelled());
}

#[test]
fn a_panicking_run_ends_the_task_with_its_payload() {
    crate::task::unwind::quiet_expected_panics();
    let ctx = TestContext::default();
    let body = Repeat(|| panic!("expected: a periodic run panicked"));
    let task = CellArc::new(RecurringTask::new(body, FixedRate::new(SECOND), true, ()));
    assert!(RecurringTask::first(&task, &ctx).is_some());
    assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Panicked);
    assert_eq!(ctx.panics.lock().unwrap().len(), 1);
    assert!(ctx.rearmed.lock().unwrap().is_empty());
    assert!(task.take_output().unwrap_err().is_panic());
}

#[test]
fn a_reschedule_between_runs_places_a_fresh_entry_and_makes_the_old_one_stale() {
    let ctx = TestContext::default();
    let (task, runs, _) = counting(&ctx, FixedRate::new(SECOND * 60));
    let old = crate::task::delayed::erase(task.clone());
    assert!(RecurringTask::reschedule(
        &task,
        Box::new(FixedRate::new(SECOND)),
        &ctx
    ));
    assert!(old.is_final(), "the old entry is stale");
    assert_eq!(ctx.cancels.load(Ordering::SeqCst), 1, "counted as dead");
    let fresh = ctx.rearmed.lock().unwrap().pop().expect("a fresh entry");
    assert!(!fresh.is_final());
    assert_eq!(Duration::from_nanos(fresh.deadline()), Duration::ZERO);
    assert_eq!(
        crate::task::delayed::into_job(old.clone()).run(&ctx),
        RunOutcome::Skipped
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "a stale entry runs nothing");
    assert_eq!(
        crate::task::delayed::into_job(fresh).run(&ctx),
        RunOutcome::Completed
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(deadline(&*task), SECOND, "the new trigger's period");
}

#[test]
fn a_trigger_that_ends_completes_the_task_by_trigger() {
    let ctx = TestContext::default();
    let twice = |c: &TriggerContext| (c.runs() < 2).then(|| Next::At(c.now()));
    let (task, runs, drops) = counting(&ctx, twice);
    Job::task(task.clone()).run(&ctx);
    let second = ctx.rearmed.lock().unwrap().pop().unwrap();
    crate::task::delayed::into_job(second).run(&ctx);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(task.take_output().unwrap(), Ended::ByTrigger);
}

#[test]
fn a_wall_time_run_waits_for_the_wall_clock() {
    let ctx = TestContext::default();
    let at = ctx.manual.system_time() + SECOND * 10;
    let (task, runs, _) = counting(&ctx, crate::trigger::Once(Next::AtSystemTime(at)));
    assert_eq!(deadline(&*task), SECOND * 10);
    assert_eq!(ctx.watched.lock().unwrap().len(), 1, "watched");
    // The monotonic deadline comes, but the wall clock was set back.
    ctx.manual.jump(SECOND * 10);
    ctx.manual.set_system_time(at - SECOND * 5);
    assert_eq!(Job::task(task.clone()).run(&ctx), RunOutcome::Skipped);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(deadline(&*task), SECOND * 15, "placed again");
}

//! The burn-down workload: a backlog of jobs already stored and due
//! (stored with no worker running), then the workers started with the
//! no-op handler; `burndown_jobs_per_s` = jobs / (the workers' start to the
//! last job's run). Each system stores and starts in
//! [`System::burndown`](crate::systems::System::burndown).

use std::time::Duration;

use crate::report::{Metric, Report};
use crate::systems::{Store, System};

/// One repetition on a fresh `store`: measures, prints, adds to `report`.
pub fn measure(
    system: &dyn System,
    store: &Store,
    jobs: usize,
    batch: usize,
    patience: Duration,
    rep: usize,
    report: &mut Report,
) {
    let name = system.name();
    let Some(run) = system.burndown(store, jobs, batch, patience) else {
        eprintln!("rep {rep} {name} burndown: not measured (the system cannot)");
        return;
    };
    let secs = run.elapsed.as_secs_f64();
    let rate = jobs as f64 / secs;
    eprintln!(
        "rep {rep} {name} burndown: stored {jobs} jobs in {:.3} s ({:.0} jobs/s, no worker \
         running); ran {} of them in {secs:.3} s from the workers' start = {rate:.0} jobs/s; \
         {} repeated runs{}",
        run.insert.as_secs_f64(),
        jobs as f64 / run.insert.as_secs_f64(),
        run.slots.ran(),
        run.slots.runs() - run.slots.ran(),
        if run.complete {
            ""
        } else {
            "; NOT ALL RAN in time: not reported"
        }
    );
    if run.complete {
        report.add(name, Metric::BurndownJobsPerS, rate);
    }
}

//! The immediate workload: jobs due now, inserted one at a time by another
//! process (this binary re-executed, `--child immediate <system>`), run by
//! the system's worker in this process, started first and given
//! [`SETTLE`] to settle. Each payload carries the wall time just before
//! its insert call; the handler records its run's time past it.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::report::{Metric, Report};
use crate::slots::{self, Slots};
use crate::systems::{Store, System};

/// Jobs inserted (scaled, but never fewer than [`MIN_JOBS`]).
pub const JOBS: usize = 200;
pub const MIN_JOBS: usize = 50;
/// Between one insert call's start and the next.
pub const GAP: Duration = Duration::from_millis(20);
/// From the worker's start to the child's start.
pub const SETTLE: Duration = Duration::from_secs(3);
/// How long the runs may take after the child's last insert.
const PATIENCE: Duration = Duration::from_secs(60);

/// One repetition on a fresh `store`; `child` is the inserting process's
/// command (not started yet): measures, prints, adds to `report`.
/// With `polled`, the worker is told of nothing and polls
/// (`System::with_polling_worker`).
pub fn measure(
    system: &dyn System,
    store: &Store,
    jobs: usize,
    mut child: Command,
    polled: bool,
    rep: usize,
    report: &mut Report,
) {
    let name = system.name();
    let slots = Arc::new(Slots::new(jobs));
    let mut inserted = None;
    let mut during = || {
        std::thread::sleep(SETTLE);
        let status = child.status().expect("the immediate child");
        inserted = Some(status);
        slots.wait_for(jobs, Instant::now() + PATIENCE);
    };
    let ran = if polled {
        system.with_polling_worker(store, &slots, &mut during)
    } else {
        system.with_worker(store, &slots, &mut during)
    };
    let group = if polled {
        "immediate (polled)"
    } else {
        "immediate"
    };
    if !ran {
        eprintln!("rep {rep} {name} {group}: not measured (the system cannot)");
        return;
    }
    let status = inserted.expect("the child ran");
    let mut late: Vec<f64> = slots
        .lateness_us()
        .iter()
        .map(|&l| l as f64 / 1000.0)
        .collect();
    late.sort_by(f64::total_cmp);
    let (p50, p99) = (
        slots::percentile(&late, 50.0),
        slots::percentile(&late, 99.0),
    );
    let complete = status.success() && slots.ran() == jobs;
    eprintln!(
        "rep {rep} {name} {group}: {jobs} jobs due now inserted by another process {GAP:?} \
         apart; from just before each insert call to its run: p50 {p50:.1} ms, p99 {p99:.1} ms, \
         min {:.1} ms, max {:.1} ms; ran {} of {jobs}, {} repeated runs{}",
        late.first().copied().unwrap_or(f64::NAN),
        late.last().copied().unwrap_or(f64::NAN),
        slots.ran(),
        slots.runs() - slots.ran(),
        if complete {
            String::new()
        } else {
            format!("; NOT ALL RAN (the child: {status}): not reported")
        }
    );
    if complete {
        let (m50, m99) = if polled {
            (Metric::ImmediatePolledP50Ms, Metric::ImmediatePolledP99Ms)
        } else {
            (Metric::ImmediateP50Ms, Metric::ImmediateP99Ms)
        };
        report.add(name, m50, p50);
        report.add(name, m99, p99);
    }
}

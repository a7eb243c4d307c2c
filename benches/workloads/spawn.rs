//! The pool workloads: `spawn` and `spawn-tree`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::measure::{per_op_ns, DONE};
use crate::systems::{Executor, SpawnInside};
use crate::workload::{timed_out, Exec, Metrics, Params, WAIT};

/// One outside thread submits N immediate tasks (1,000,000 at SCALE 1);
/// `ns_per_task` = wall time from the first submit until all ran, / N.
pub fn spawn<S: Executor>(config: &S::Config, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000_000);
    DONE.reset(n as u64);
    let ex = Exec::<S>::start(config, p)?;
    let t0 = Instant::now();
    for _ in 0..n {
        ex.spawn(|| DONE.hit())?;
    }
    let submitted = t0.elapsed();
    let ok = DONE.wait(WAIT);
    let wall = t0.elapsed();
    ex.finish()?;
    if !ok {
        return Err(timed_out("spawn"));
    }
    eprintln!("  submit phase {:.1} ns/task", per_op_ns(submitted, n));
    Ok(vec![("ns_per_task", per_op_ns(wall, n))])
}

/// Submissions from inside the pool that the system refused.
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// The levels of the tree: 20 (2^20 - 1 tasks) at SCALE 1, `round(20 +
/// log2(factor))` otherwise.
fn tree_levels(p: &Params) -> u32 {
    ((20.0 + p.factor().log2()).round() as i64).clamp(1, 30) as u32
}

/// A task of the tree: the body, then its two children unless at the last
/// level.
fn node<S: SpawnInside>(ctx: S::Ctx, level: u32, levels: u32) {
    DONE.hit();
    if level < levels {
        for _ in 0..2 {
            let child = ctx.clone();
            if S::spawn_inside(&ctx, move || node::<S>(child, level + 1, levels)).is_err() {
                REFUSED.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A root task from outside; every task above the last level submits two
/// children from inside the pool. `ns_per_task` = wall / tasks.
pub fn spawn_tree<S: SpawnInside>(config: &S::Config, p: &Params) -> Result<Metrics, String> {
    let levels = tree_levels(p);
    let n = (1u64 << levels) - 1;
    DONE.reset(n);
    REFUSED.store(0, Ordering::Relaxed);
    let ex = Exec::<S>::start(config, p)?;
    let ctx = ex.ctx();
    let t0 = Instant::now();
    ex.spawn(move || node::<S>(ctx, 1, levels))?;
    let ok = DONE.wait(WAIT);
    let wall = t0.elapsed();
    ex.finish()?;
    match REFUSED.load(Ordering::Relaxed) {
        0 if ok => Ok(vec![("ns_per_task", per_op_ns(wall, n as usize))]),
        0 => Err(timed_out("spawn-tree")),
        refused => Err(format!("spawn-tree: {refused} submissions refused")),
    }
}

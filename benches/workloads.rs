//! The workloads of the shared benchmark spec (`shared/bench/WORKLOADS.md`
//! beside the repository; the crate keeps its own copy of what it needs, so
//! it builds on its own), run on chronopool.
//!
//! ```text
//! cargo bench --bench workloads                   # every workload
//! cargo bench --bench workloads -- spawn          # some workloads
//! SCALE=0.1 REPS=1 cargo bench --bench workloads  # a quick look
//! ```
//!
//! stdout: one JSON object per (system, workload, metric), the median of
//! `REPS` (default 3) repetitions, each on a fresh executor with 2 worker
//! threads, after one warm-up run at 10% of the work. Everything else goes
//! to stderr.
//!
//! Implemented so far: `spawn` and `spawn-tree`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use chronopool::ScheduledExecutor;

/// Worker threads for every system (the machines here have 2 cores).
fn threads() -> usize {
    std::env::var("THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2)
}
/// Give up waiting for a repetition after this long.
const WAIT: Duration = Duration::from_secs(120);

// ------------------------------------------------------------ completion

/// The shared counter every task body increments, and a signal when it
/// reaches the target: the task that reaches it takes the lock once and
/// wakes the measuring thread, which sleeps meanwhile (no spinning, so it
/// takes no core from the 2 workers).
struct Completion {
    count: AtomicU64,
    target: AtomicU64,
    reached: Mutex<bool>,
    cv: Condvar,
}

impl Completion {
    const fn new() -> Self {
        Completion {
            count: AtomicU64::new(0),
            target: AtomicU64::new(u64::MAX),
            reached: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    fn reset(&self, target: u64) {
        *self.reached.lock().unwrap() = false;
        self.count.store(0, Ordering::SeqCst);
        self.target.store(target, Ordering::SeqCst);
    }

    /// The task body.
    #[inline]
    fn hit(&self) {
        let c = self.count.fetch_add(1, Ordering::AcqRel) + 1;
        if c == self.target.load(Ordering::Relaxed) {
            *self.reached.lock().unwrap() = true;
            self.cv.notify_all();
        }
    }

    fn wait(&self, timeout: Duration) -> bool {
        let guard = self.reached.lock().unwrap();
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, timeout, |reached| !*reached)
            .unwrap();
        *guard
    }
}

static DONE: Completion = Completion::new();

// ------------------------------------------------------------ systems

/// One configuration of chronopool under test.
struct System {
    name: &'static str,
    start: fn() -> ScheduledExecutor,
}

fn start_default() -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(threads())
        .build()
        .expect("start chronopool")
}

const SYSTEMS: &[System] = &[System {
    name: "chronopool",
    start: start_default,
}];

fn stop(pool: ScheduledExecutor) -> Result<(), String> {
    pool.shutdown();
    if !pool.await_termination(Duration::from_secs(30)) {
        return Err("workers still running 30 s after shutdown".into());
    }
    Ok(())
}

// ------------------------------------------------------------ workloads

type Metrics = Vec<(&'static str, f64)>;

struct Params {
    scale: f64,
    warmup: bool,
}

impl Params {
    fn factor(&self) -> f64 {
        self.scale * if self.warmup { 0.1 } else { 1.0 }
    }

    fn n(&self, base: usize) -> usize {
        ((base as f64 * self.factor()).round() as usize).max(1)
    }
}

fn per_op_ns(d: Duration, n: u64) -> f64 {
    d.as_nanos() as f64 / n as f64
}

/// One outside thread submits N immediate tasks; wall time until all ran.
fn spawn(system: &System, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000_000);
    DONE.reset(n as u64);
    let pool = (system.start)();
    let t0 = Instant::now();
    for _ in 0..n {
        pool.execute(|| DONE.hit()).map_err(|e| e.to_string())?;
    }
    let t_submit = t0.elapsed();
    let ok = DONE.wait(WAIT);
    eprintln!(
        "  submit phase {:.1} ns/task",
        per_op_ns(t_submit, n as u64)
    );
    let wall = t0.elapsed();
    stop(pool)?;
    if !ok {
        return Err("spawn: timed out".into());
    }
    Ok(vec![("ns_per_task", per_op_ns(wall, n as u64))])
}

fn node(level: u32, levels: u32) {
    DONE.hit();
    if level < levels {
        for _ in 0..2 {
            if chronopool::execute(move || node(level + 1, levels)).is_err() {
                eprintln!("spawn-tree: a submission from inside the pool was refused");
            }
        }
    }
}

/// A root task from outside; every task above the last level submits two
/// children from inside the pool (2^levels - 1 tasks, 20 levels at SCALE 1).
fn spawn_tree(system: &System, p: &Params) -> Result<Metrics, String> {
    let levels = ((20.0 + p.factor().log2()).round() as i64).clamp(1, 30) as u32;
    let n = (1u64 << levels) - 1;
    DONE.reset(n);
    let pool = (system.start)();
    let t0 = Instant::now();
    pool.execute(move || node(1, levels))
        .map_err(|e| e.to_string())?;
    let ok = DONE.wait(WAIT);
    let wall = t0.elapsed();
    stop(pool)?;
    if !ok {
        return Err("spawn-tree: timed out".into());
    }
    Ok(vec![("ns_per_task", per_op_ns(wall, n))])
}

type RunFn = fn(&System, &Params) -> Result<Metrics, String>;

const WORKLOADS: &[(&str, RunFn)] = &[("spawn", spawn), ("spawn-tree", spawn_tree)];

// ------------------------------------------------------------ driver

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(s) if !s.trim().is_empty() => s.trim().parse().map_err(|_| format!("bad {name}={s}")),
        _ => Ok(default),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Warm-up, `reps` measured repetitions, one JSON line per metric.
fn run_workload(system: &System, name: &str, run: RunFn, scale: f64, reps: usize) -> bool {
    eprintln!("[{}] {name}: warm-up (10%)", system.name);
    if let Err(e) = run(
        system,
        &Params {
            scale,
            warmup: true,
        },
    ) {
        eprintln!("[{}] {name}: warm-up FAILED: {e}", system.name);
        return false;
    }
    let mut results: Vec<Metrics> = Vec::new();
    for r in 1..=reps {
        match run(
            system,
            &Params {
                scale,
                warmup: false,
            },
        ) {
            Ok(m) => {
                let shown: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v:.3}")).collect();
                eprintln!(
                    "[{}] {name}: rep {r}/{reps}: {}",
                    system.name,
                    shown.join(" ")
                );
                results.push(m);
            }
            Err(e) => {
                eprintln!("[{}] {name}: rep {r} FAILED: {e}", system.name);
                return false;
            }
        }
    }
    for (i, (metric, _)) in results[0].iter().enumerate() {
        let value = median(results.iter().map(|m| m[i].1).collect());
        println!(
            "{{\"system\":\"{}\",\"workload\":\"{name}\",\"metric\":\"{metric}\",\"value\":{value:.3}}}",
            system.name
        );
    }
    true
}

fn main() -> ExitCode {
    let (scale, reps) = match (env_or("SCALE", 1.0f64), env_or("REPS", 3usize)) {
        (Ok(s), Ok(r)) if s > 0.0 && r > 0 => (s, r),
        _ => {
            eprintln!("error: SCALE must be > 0 and REPS >= 1");
            return ExitCode::from(2);
        }
    };
    // `cargo bench` passes `--bench`; anything else not starting with `-`
    // is a workload name.
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    for w in &wanted {
        if !WORKLOADS.iter().any(|(name, _)| name == w) {
            let known: Vec<_> = WORKLOADS.iter().map(|(n, _)| *n).collect();
            eprintln!("error: unknown workload {w:?}; known: {}", known.join(" "));
            return ExitCode::from(2);
        }
    }
    let systems: Vec<&System> = match std::env::var("SYSTEMS") {
        Ok(list) if !list.trim().is_empty() => SYSTEMS
            .iter()
            .filter(|s| list.split(',').any(|n| n.trim() == s.name))
            .collect(),
        _ => SYSTEMS.iter().collect(),
    };
    let mut ok = true;
    for system in systems {
        for (name, run) in WORKLOADS {
            if wanted.is_empty() || wanted.iter().any(|w| w == name) {
                ok &= run_workload(system, name, *run, scale, reps);
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

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
//! Workloads: `spawn`, `spawn-tree`, `timer-fire`, `cancel`, `periodic`,
//! `idle`, `latency`; system `chronopool-heap` (the backends to come are
//! added as systems). The measurement rules are the spec's: delays from
//! xorshift64* seeded with 42; lateness against the due instant on the
//! monotonic clock; RSS from /proc/self/status after `malloc_trim(0)`;
//! process CPU from `CLOCK_PROCESS_CPUTIME_ID`.

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

    /// Keep the count, wait for `target` (the latency workload).
    fn arm(&self, target: u64) {
        *self.reached.lock().unwrap() = false;
        self.target.store(target, Ordering::SeqCst);
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
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
    name: "chronopool-heap",
    start: start_default,
}];

/// Discards what is still pending and waits for the threads to finish.
fn stop(pool: ScheduledExecutor) -> Result<(), String> {
    drop(pool.shutdown_now());
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

// ------------------------------------------------------------ measuring

/// The spec's delays: xorshift64* seeded with 42, `lo + next mod (hi - lo)`.
fn delays_ns(n: usize, lo: Duration, hi: Duration) -> Vec<u64> {
    let (lo, hi) = (lo.as_nanos() as u64, hi.as_nanos() as u64);
    let mut state = 42u64;
    (0..n)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            lo + state.wrapping_mul(0x2545_F491_4F6C_DD1D) % (hi - lo)
        })
        .collect()
}

/// The origin of the bench's monotonic clock (fixed on first use).
fn base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Nanoseconds from the origin to now.
fn now_ns() -> i64 {
    ns_of(base(), Instant::now())
}

fn ns_of(base: Instant, t: Instant) -> i64 {
    t.saturating_duration_since(base).as_nanos() as i64
}

const UNSET: i64 = i64::MIN;

/// Per-task lateness slots (ns), leaked so task closures carry a plain
/// reference; written with relaxed stores, no locking in the task.
fn slots(n: usize) -> &'static [std::sync::atomic::AtomicI64] {
    let v: Vec<_> = (0..n)
        .map(|_| std::sync::atomic::AtomicI64::new(UNSET))
        .collect();
    Box::leak(v.into_boxed_slice())
}

fn recorded(slots: &[std::sync::atomic::AtomicI64]) -> Vec<i64> {
    let mut v: Vec<i64> = slots
        .iter()
        .map(|s| s.load(Ordering::Acquire))
        .filter(|&x| x != UNSET)
        .collect();
    v.sort_unstable();
    if v.first().is_some_and(|&x| x < 0) {
        eprintln!(
            "  WARNING: {} runs fired early",
            v.iter().take_while(|&&x| x < 0).count()
        );
    }
    v
}

/// Nearest-rank percentile of sorted values, in µs.
fn percentile_us(sorted: &[i64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e3
}

/// Process CPU time (all threads) in ns.
fn cpu_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    #[allow(clippy::unnecessary_cast)] // time_t and c_long are not i64 everywhere
    let ns = ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64;
    ns
}

/// Resident set size in bytes, after handing freed heap pages back.
fn rss_bytes() -> i64 {
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok())
        .unwrap_or(0)
        * 1024
}

// ------------------------------------------------------------ timer workloads

/// N one-shot tasks, delays uniform in [0, 1000) ms, from one outside thread.
fn timer_fire(system: &System, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000_000);
    let delays = delays_ns(n, Duration::ZERO, Duration::from_millis(1000));
    let slots = slots(n);
    let base = base();
    DONE.reset(n as u64);
    let pool = (system.start)();
    let t0 = Instant::now();
    for (slot, &d) in slots.iter().zip(&delays) {
        let delay = Duration::from_nanos(d);
        let due_ns = ns_of(base, Instant::now() + delay);
        let h = pool.schedule(
            move || {
                slot.store(now_ns() - due_ns, Ordering::Relaxed);
                DONE.hit();
            },
            delay,
        );
        drop(h.map_err(|e| e.to_string())?);
    }
    let t1 = Instant::now();
    let ok = DONE.wait(WAIT);
    let t2 = Instant::now();
    stop(pool)?;
    if !ok {
        return Err("timer-fire: timed out".into());
    }
    let late = recorded(slots);
    Ok(vec![
        ("insert_ns_per_op", per_op_ns(t1 - t0, n as u64)),
        ("overhead_ms", (t2 - t0).as_secs_f64() * 1e3 - 1000.0),
        ("late_p50_us", percentile_us(&late, 50.0)),
        ("late_p99_us", percentile_us(&late, 99.0)),
        ("late_max_us", *late.last().unwrap() as f64 / 1e3),
    ])
}

/// N one-shot tasks due in [10, 20) s, each cancelled through its handle;
/// RSS deltas against the RSS before the first insert.
fn cancel(system: &System, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000_000);
    let delays = delays_ns(n, Duration::from_secs(10), Duration::from_secs(20));
    let mut handles = Vec::with_capacity(n);
    for _ in 0..n {
        handles.push(std::hint::black_box(None));
    }
    DONE.reset(u64::MAX);
    let pool = (system.start)();
    std::thread::sleep(Duration::from_millis(20));
    let rss0 = rss_bytes();
    let t0 = Instant::now();
    for (h, &d) in handles.iter_mut().zip(&delays) {
        *h = Some(
            pool.schedule(|| DONE.hit(), Duration::from_nanos(d))
                .map_err(|e| e.to_string())?,
        );
    }
    let t1 = Instant::now();
    let rss1 = rss_bytes();
    let t2 = Instant::now();
    for h in handles.iter_mut() {
        h.take().unwrap().cancel();
    }
    let t3 = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let rss2 = rss_bytes();
    let fired = DONE.count();
    stop(pool)?;
    if fired != 0 {
        return Err(format!("cancel: {fired} cancelled tasks ran"));
    }
    Ok(vec![
        ("insert_ns_per_op", per_op_ns(t1 - t0, n as u64)),
        ("cancel_ns_per_op", per_op_ns(t3 - t2, n as u64)),
        ("bytes_per_pending", (rss1 - rss0) as f64 / n as f64),
        ("bytes_after_cancel", (rss2 - rss0) as f64 / n as f64),
    ])
}

/// N fixed-rate tasks, period 10 ms, first run after [0, 10) ms; after 2 s
/// the runs and the process CPU are counted, then all are cancelled.
fn periodic(system: &System, p: &Params) -> Result<Metrics, String> {
    const MAX_RUNS: usize = 256;
    let n = p.n(10_000);
    let period = Duration::from_millis(10);
    let initial = delays_ns(n, Duration::ZERO, period);
    let slots = slots(n * MAX_RUNS);
    let base = base();
    let mut handles = Vec::with_capacity(n);
    DONE.reset(u64::MAX);
    let pool = (system.start)();
    let cpu0 = cpu_ns();
    let t0 = Instant::now();
    for (row, &d) in slots.chunks_exact(MAX_RUNS).zip(&initial) {
        let delay = Duration::from_nanos(d);
        let first_ns = ns_of(base, Instant::now() + delay);
        let period_ns = period.as_nanos() as i64;
        let mut k = 0usize;
        let h = pool.schedule_at_fixed_rate(
            move || {
                if let Some(slot) = row.get(k) {
                    slot.store(
                        now_ns() - (first_ns + k as i64 * period_ns),
                        Ordering::Relaxed,
                    );
                }
                k += 1;
                DONE.hit();
            },
            delay,
            period,
        );
        handles.push(h.map_err(|e| e.to_string())?);
    }
    let end = t0 + Duration::from_secs(2);
    std::thread::sleep(end.saturating_duration_since(Instant::now()));
    let runs = DONE.count();
    let cpu1 = cpu_ns();
    for h in handles {
        h.cancel();
    }
    stop(pool)?;
    let late = recorded(slots);
    Ok(vec![
        ("runs_ratio", runs as f64 / (n as f64 * 200.0)),
        ("late_p99_us", percentile_us(&late, 99.0)),
        ("cpu_ms", (cpu1 - cpu0) as f64 / 1e6),
    ])
}

/// N one-shot tasks due in an hour; the process CPU over the next 5 s.
fn idle(system: &System, p: &Params) -> Result<Metrics, String> {
    let n = p.n(100_000);
    let window = if p.warmup {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(5)
    };
    DONE.reset(u64::MAX);
    let pool = (system.start)();
    for _ in 0..n {
        drop(
            pool.schedule(|| DONE.hit(), Duration::from_secs(3600))
                .map_err(|e| e.to_string())?,
        );
    }
    let cpu0 = cpu_ns();
    std::thread::sleep(window);
    let cpu1 = cpu_ns();
    let fired = DONE.count();
    stop(pool)?;
    if fired != 0 {
        return Err(format!("idle: {fired} tasks due in an hour ran"));
    }
    Ok(vec![("idle_cpu_ms", (cpu1 - cpu0) as f64 / 1e6)])
}

/// N one-shot tasks of 1 ms, each scheduled after the previous one ran.
fn latency(system: &System, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000);
    let delay = Duration::from_millis(1);
    let slots = slots(n);
    let base = base();
    DONE.reset(u64::MAX);
    let pool = (system.start)();
    for (i, slot) in slots.iter().enumerate() {
        DONE.arm(i as u64 + 1);
        let due_ns = ns_of(base, Instant::now() + delay);
        let h = pool.schedule(
            move || {
                slot.store(now_ns() - due_ns, Ordering::Relaxed);
                DONE.hit();
            },
            delay,
        );
        drop(h.map_err(|e| e.to_string())?);
        if !DONE.wait(Duration::from_secs(10)) {
            return Err(format!("latency: task {i} did not fire within 10 s"));
        }
    }
    stop(pool)?;
    let late = recorded(slots);
    Ok(vec![
        ("late_p50_us", percentile_us(&late, 50.0)),
        ("late_p99_us", percentile_us(&late, 99.0)),
    ])
}

type RunFn = fn(&System, &Params) -> Result<Metrics, String>;

const WORKLOADS: &[(&str, RunFn)] = &[
    ("spawn", spawn),
    ("spawn-tree", spawn_tree),
    ("timer-fire", timer_fire),
    ("cancel", cancel),
    ("periodic", periodic),
    ("idle", idle),
    ("latency", latency),
];

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

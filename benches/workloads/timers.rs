//! The timer workloads: `timer-fire`, `cancel`, `periodic`, `idle`,
//! `latency`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use crate::measure::{self, now_ns, ns_of, per_op_ns, percentile_us, DONE, NO_TARGET};
use crate::systems::Timers;
use crate::workload::{timed_out, Exec, Metrics, Params, WAIT};

/// The task body with lateness: record `now - due` in the task's own slot,
/// then count.
#[inline]
fn late_hit(slot: &AtomicI64, due_ns: i64) {
    slot.store(now_ns() - due_ns, Ordering::Relaxed);
    DONE.hit();
}

/// One outside thread schedules N one-shot tasks (1,000,000 at SCALE 1),
/// delays uniform in [0, 1000) ms; waits until all fired.
pub fn timer_fire<S: Timers>(config: &S::Config, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000_000);
    let delays = measure::delays_ns(n, Duration::ZERO, Duration::from_millis(1000));
    let slots = measure::slots(n);
    DONE.reset(n as u64);
    // With LATENESS_BY_DUE set, each task's due time is kept too, for a
    // breakdown on stderr (see `print_lateness_by_due`).
    let mut dues: Option<Vec<i64>> =
        std::env::var_os("LATENESS_BY_DUE").map(|_| Vec::with_capacity(n));
    let ex = Exec::<S>::start(config, p)?;
    let t0 = Instant::now();
    for (slot, &d) in slots.iter().zip(&delays) {
        let delay = Duration::from_nanos(d);
        let due = Instant::now() + delay;
        let due_ns = ns_of(due);
        if let Some(dues) = &mut dues {
            dues.push(due_ns);
        }
        drop(ex.schedule(delay, due, move || late_hit(slot, due_ns))?);
    }
    let t1 = Instant::now();
    let ok = DONE.wait(WAIT);
    let t2 = Instant::now();
    ex.finish()?;
    if !ok {
        return Err(timed_out("timer-fire"));
    }
    if let Some(dues) = &dues {
        print_lateness_by_due(slots, dues, ns_of(t0), t1 - t0);
    }
    let late = measure::lateness(slots, "timer-fire")?;
    Ok(vec![
        ("insert_ns_per_op", per_op_ns(t1 - t0, n)),
        ("overhead_ms", (t2 - t0).as_secs_f64() * 1e3 - 1000.0),
        ("late_p50_us", percentile_us(&late, 50.0)),
        ("late_p99_us", percentile_us(&late, 99.0)),
        ("late_max_us", measure::max_us(&late)),
    ])
}

/// Prints on stderr the lateness of `timer-fire`'s tasks grouped by when
/// they were due (100 ms groups from the first submit), so that the late
/// tasks of the submit burst and those of the quiet second after it can be
/// told apart.
fn print_lateness_by_due(slots: &[AtomicI64], dues: &[i64], t0_ns: i64, submit: Duration) {
    const GROUP_NS: i64 = 100_000_000;
    let mut groups: Vec<Vec<i64>> = Vec::new();
    for (slot, &due) in slots.iter().zip(dues) {
        let group = ((due - t0_ns).max(0) / GROUP_NS) as usize;
        if groups.len() <= group {
            groups.resize_with(group + 1, Vec::new);
        }
        groups[group].push(slot.load(Ordering::Acquire));
    }
    eprintln!(
        "  lateness by due time (submits took {:.0} ms):",
        submit.as_secs_f64() * 1e3
    );
    for (i, late) in groups.iter_mut().enumerate().filter(|(_, g)| !g.is_empty()) {
        late.sort_unstable();
        eprintln!(
            "    due {:4}-{:4} ms: {:7} tasks, p50 {:8.0} µs, p99 {:8.0} µs, max {:8.0} µs",
            i as i64 * 100,
            (i as i64 + 1) * 100,
            late.len(),
            percentile_us(late, 50.0),
            percentile_us(late, 99.0),
            measure::max_us(late),
        );
    }
}

/// N one-shot tasks (1,000,000 at SCALE 1) due in [10, 20) s, then every
/// one cancelled through its handle, then 200 ms to settle. The RSS
/// baseline is read with the executor started and the delays and handle
/// slots allocated and touched: the caller's 8 bytes per handle are not
/// counted, what a handle points to is.
pub fn cancel<S: Timers>(config: &S::Config, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000_000);
    let delays = measure::delays_ns(n, Duration::from_secs(10), Duration::from_secs(20));
    let mut handles: Vec<Option<S::Handle>> = Vec::with_capacity(n);
    for _ in 0..n {
        // black_box: written for real (resident now), not a calloc'd block
        // whose pages would become resident during the inserts.
        handles.push(std::hint::black_box(None));
    }
    DONE.reset(NO_TARGET);
    let ex = Exec::<S>::start(config, p)?;
    std::thread::sleep(Duration::from_millis(20));
    let rss0 = measure::rss_bytes();
    let t0 = Instant::now();
    for (h, &d) in handles.iter_mut().zip(&delays) {
        let delay = Duration::from_nanos(d);
        *h = Some(ex.schedule(delay, Instant::now() + delay, || DONE.hit())?);
    }
    let t1 = Instant::now();
    let rss1 = measure::rss_bytes();
    let t2 = Instant::now();
    for h in &mut handles {
        S::cancel(h.take().expect("every slot holds a handle"));
    }
    let t3 = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let rss2 = measure::rss_bytes();
    let fired = DONE.count();
    ex.finish()?;
    if fired != 0 {
        return Err(format!("cancel: {fired} cancelled tasks ran"));
    }
    Ok(vec![
        ("insert_ns_per_op", per_op_ns(t1 - t0, n)),
        ("cancel_ns_per_op", per_op_ns(t3 - t2, n)),
        ("bytes_per_pending", (rss1 - rss0) as f64 / n as f64),
        ("bytes_after_cancel", (rss2 - rss0) as f64 / n as f64),
    ])
}

/// The period of the `periodic` tasks.
const PERIOD: Duration = Duration::from_millis(10);
/// How long `periodic` runs before it counts.
const PERIODIC_RUN: Duration = Duration::from_secs(2);
/// Lateness slots per periodic task: 200 runs are due in 2 s, plus room
/// for those between the count and the cancel.
const MAX_RUNS: usize = 256;

/// N fixed-rate tasks (10,000 at SCALE 1), period 10 ms, first run after
/// [0, 10) ms; 2 s after the first submit the runs and the process CPU are
/// counted, then every task is cancelled.
pub fn periodic<S: Timers>(config: &S::Config, p: &Params) -> Result<Metrics, String> {
    let n = p.n(10_000);
    let initial = measure::delays_ns(n, Duration::ZERO, PERIOD);
    let slots = measure::slots(n * MAX_RUNS);
    let mut handles = Vec::with_capacity(n);
    DONE.reset(NO_TARGET);
    let ex = Exec::<S>::start(config, p)?;
    let cpu0 = measure::cpu_ns();
    let t0 = Instant::now();
    for (row, &d) in slots.chunks_exact(MAX_RUNS).zip(&initial) {
        let delay = Duration::from_nanos(d);
        let first_due = Instant::now() + delay;
        handles.push(ex.schedule_at_fixed_rate(
            delay,
            first_due,
            PERIOD,
            periodic_body(row, first_due),
        )?);
    }
    let submitted = t0.elapsed();
    std::thread::sleep((t0 + PERIODIC_RUN).saturating_duration_since(Instant::now()));
    let runs = DONE.count();
    let cpu1 = measure::cpu_ns();
    for h in handles {
        S::cancel_periodic(h);
    }
    ex.finish()?;
    let late = measure::lateness(slots, "periodic")?;
    let expected = n as f64 * (PERIODIC_RUN.as_nanos() / PERIOD.as_nanos()) as f64;
    eprintln!(
        "  submit phase {:.1} ms; {runs} runs of {expected} expected",
        submitted.as_secs_f64() * 1e3
    );
    Ok(vec![
        ("runs_ratio", runs as f64 / expected),
        ("late_p99_us", percentile_us(&late, 99.0)),
        ("cpu_ms", (cpu1 - cpu0) as f64 / 1e6),
    ])
}

/// The body of one periodic task: run k records its lateness against
/// `first_due + k × period` in `row[k]`, then counts.
fn periodic_body(row: &'static [AtomicI64], first_due: Instant) -> impl FnMut() + Send + 'static {
    let first_ns = ns_of(first_due);
    let period_ns = PERIOD.as_nanos() as i64;
    let mut k = 0usize;
    move || {
        let due_ns = first_ns + k as i64 * period_ns;
        match row.get(k) {
            Some(slot) => late_hit(slot, due_ns),
            None => DONE.hit(),
        }
        k += 1;
    }
}

/// N one-shot tasks (100,000 at SCALE 1) due in 3600 s; the process CPU
/// over the next 5 s (0.5 s in the warm-up) from right after the last
/// insert.
pub fn idle<S: Timers>(config: &S::Config, p: &Params) -> Result<Metrics, String> {
    let n = p.n(100_000);
    let window = if p.warmup {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(5)
    };
    let delay = Duration::from_secs(3600);
    DONE.reset(NO_TARGET);
    let ex = Exec::<S>::start(config, p)?;
    for _ in 0..n {
        // The handle is dropped; the task stays scheduled.
        drop(ex.schedule(delay, Instant::now() + delay, || DONE.hit())?);
    }
    let cpu0 = measure::cpu_ns();
    std::thread::sleep(window / 10);
    let cpu_first = measure::cpu_ns();
    std::thread::sleep(window - window / 10);
    let cpu1 = measure::cpu_ns();
    let fired = DONE.count();
    ex.finish()?;
    if fired != 0 {
        return Err(format!("idle: {fired} tasks due in an hour ran"));
    }
    eprintln!(
        "  idle: {:.3} ms CPU in the first tenth, {:.3} ms in the rest",
        (cpu_first - cpu0) as f64 / 1e6,
        (cpu1 - cpu_first) as f64 / 1e6
    );
    Ok(vec![("idle_cpu_ms", (cpu1 - cpu0) as f64 / 1e6)])
}

/// N one-shot tasks of 1 ms (1,000 at SCALE 1), one at a time: the outside
/// thread schedules the next once the previous has run.
pub fn latency<S: Timers>(config: &S::Config, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000);
    let delay = Duration::from_millis(1);
    let slots = measure::slots(n);
    DONE.reset(NO_TARGET);
    let ex = Exec::<S>::start(config, p)?;
    for (i, slot) in slots.iter().enumerate() {
        DONE.arm(i as u64 + 1);
        let due = Instant::now() + delay;
        let due_ns = ns_of(due);
        drop(ex.schedule(delay, due, move || late_hit(slot, due_ns))?);
        if !DONE.wait(Duration::from_secs(10)) {
            return Err(format!("latency: task {i} did not run within 10 s"));
        }
    }
    ex.finish()?;
    let late = measure::lateness(slots, "latency")?;
    Ok(vec![
        ("late_p50_us", percentile_us(&late, 50.0)),
        ("late_p99_us", percentile_us(&late, 99.0)),
    ])
}

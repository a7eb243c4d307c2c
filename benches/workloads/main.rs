//! The workloads of the shared benchmark spec (`shared/bench/WORKLOADS.md`
//! beside the repository; this bench keeps its own copy of what it needs
//! and builds and runs without it), on chronopool and on Rust peers in the
//! same process.
//!
//! ```text
//! cargo bench -p chronopool-benches --bench workloads                    # every workload, every system
//! cargo bench -p chronopool-benches --bench workloads -- spawn latency   # some workloads
//! SYSTEMS=chronopool-heap,tokio cargo bench -p chronopool-benches --bench workloads
//! SCALE=0.1 REPS=1 cargo bench -p chronopool-benches --bench workloads   # a quick look
//! ```
//!
//! Environment: `SYSTEMS` (comma list; default all), `SCALE` (multiplies
//! task counts, never durations; default 1), `REPS` (measured repetitions;
//! default 3), `THREADS` (worker threads per system; default 2),
//! `LATENESS_BY_DUE` (if set, `timer-fire` also prints on stderr its
//! lateness by due time, in 100 ms groups), `SLEEP_FLOOR` (if set,
//! `sleep-future` also prints on stderr, before the warm-up and each
//! repetition, its create phase with futures that no timer serves: the
//! insert's floor).
//!
//! Systems: `chronopool-heap` (one per timer queue backend, see
//! `systems/mod.rs`), and the peers `tokio`, `scheduled-thread-pool`,
//! `rayon`, `threadpool` (named as in the shared peer harness). A
//! workload a system cannot do (timers in a plain pool) prints nothing.
//!
//! stdout: the spec's JSON lines and nothing else, one per (system,
//! workload, metric): the median of `REPS` repetitions, each on a fresh
//! executor, after one warm-up run at 10% of the work. stderr: progress,
//! each repetition's figures with the CPU other processes used meanwhile,
//! and at the end a table of chronopool beside the best peer (see
//! `report.rs` for its rules). Exit status: 1 if a workload failed (its
//! lines are missing), 2 on bad arguments. `benches/chart.py` draws the
//! JSON lines (this bench's and the other harnesses') as SVG bar charts;
//! `benches/README.md` says which figures of the repository come from here.
//!
//! The measurement rules are the spec's: delays from xorshift64* seeded
//! with 42; a task body that increments one shared atomic counter and
//! stores its lateness (`now - due`, monotonic clock) in its own
//! preallocated slot; nearest-rank percentiles; RSS from /proc/self/status
//! after `malloc_trim(0)`; process CPU from `CLOCK_PROCESS_CPUTIME_ID`.

mod measure;
mod report;
mod sleeps;
mod spawn;
mod systems;
mod timers;
mod workload;

/// `--features mimalloc` (see `Cargo.toml`): every system on mimalloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Instant;

use measure::OtherLoad;
use report::Record;
use systems::{Entry, Kind, RunFn};
use workload::{Metrics, Params, Workload};

/// What to run, from the arguments and the environment.
struct Config {
    /// The workloads, in spec order.
    workloads: Vec<Workload>,
    /// The systems, in output order.
    systems: Vec<Entry>,
    /// `SCALE`.
    scale: f64,
    /// `REPS`.
    reps: usize,
    /// `THREADS`.
    threads: usize,
}

/// Reads the configuration, runs, and exits with 0, 1 (a workload failed)
/// or 2 (bad arguments).
fn main() -> ExitCode {
    let config = match parse_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    measure::start_clock();
    if run_all(&config) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The environment variable `name` parsed, or `default` if unset or empty.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(s) if !s.trim().is_empty() => s.trim().parse().map_err(|_| format!("bad {name}={s}")),
        _ => Ok(default),
    }
}

/// Reads the arguments (workload names; `cargo bench` adds `--bench`,
/// so arguments starting with `-` are skipped) and the environment.
fn parse_config() -> Result<Config, String> {
    let scale: f64 = env_or("SCALE", 1.0)?;
    let reps: usize = env_or("REPS", 3)?;
    let threads: usize = env_or("THREADS", 2)?;
    if !(scale > 0.0 && scale.is_finite()) || reps == 0 || threads == 0 {
        return Err("SCALE must be > 0, REPS and THREADS >= 1".into());
    }
    let mut wanted = Vec::new();
    for arg in std::env::args().skip(1).filter(|a| !a.starts_with('-')) {
        wanted.push(Workload::parse(&arg).ok_or_else(|| {
            let known: Vec<_> = Workload::ALL.iter().map(|w| w.name()).collect();
            format!("unknown workload {arg:?}; known: {}", known.join(" "))
        })?);
    }
    let workloads = Workload::ALL
        .into_iter()
        .filter(|w| wanted.is_empty() || wanted.contains(w))
        .collect();
    Ok(Config {
        workloads,
        systems: selected_systems()?,
        scale,
        reps,
        threads,
    })
}

/// The systems `SYSTEMS` names (all if unset); an error for an unknown name.
fn selected_systems() -> Result<Vec<Entry>, String> {
    let mut systems = systems::all();
    let list = std::env::var("SYSTEMS").unwrap_or_default();
    let names: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(unknown) = names
        .iter()
        .find(|n| !systems.iter().any(|s| s.name == **n))
    {
        let known: Vec<_> = systems.iter().map(|s| s.name).collect();
        return Err(format!(
            "unknown system {unknown:?}; known: {}",
            known.join(" ")
        ));
    }
    if !names.is_empty() {
        systems.retain(|s| names.contains(&s.name));
    }
    Ok(systems)
}

/// Runs every selected workload on every selected system, prints the JSON
/// lines as they come and the summary at the end; false if any failed.
fn run_all(config: &Config) -> bool {
    let names: Vec<&str> = config.systems.iter().map(|s| s.name).collect();
    let workloads: Vec<&str> = config.workloads.iter().map(|w| w.name()).collect();
    eprintln!(
        "workloads: systems [{}], workloads [{}], SCALE={}, REPS={}, THREADS={}",
        names.join(" "),
        workloads.join(" "),
        config.scale,
        config.reps,
        config.threads
    );
    let started = Instant::now();
    let mut load = OtherLoad::default();
    let mut records = Vec::new();
    let mut ok = true;
    for system in &config.systems {
        // A workload the system cannot do is skipped without a line.
        for &w in &config.workloads {
            let Some(run) = system.run(w) else { continue };
            match run_workload(system, w, run, config, &mut load) {
                Some(medians) => records.extend(medians),
                None => ok = false,
            }
        }
    }
    eprintln!(
        "workloads: done in {:.1} s; other processes used at most {:.1}% of the CPUs \
         during a repetition of 0.5 s or more",
        started.elapsed().as_secs_f64(),
        load.max_pct
    );
    let ours: Vec<&'static str> = config
        .systems
        .iter()
        .filter(|s| s.kind == Kind::Chronopool)
        .map(|s| s.name)
        .collect();
    report::print_summary(&records, &ours);
    ok
}

/// Warm-up, then the measured repetitions of `w` (`run`) on `system`; prints and
/// returns the medians; `None` if a run failed.
fn run_workload(
    system: &Entry,
    w: Workload,
    run: &RunFn,
    config: &Config,
    load: &mut OtherLoad,
) -> Option<Vec<Record>> {
    let tag = format!("[{}] {}", system.name, w.name());
    let mut params = Params {
        scale: config.scale,
        warmup: true,
        threads: config.threads,
    };
    eprintln!("{tag}: warm-up (10%)");
    if let Err(e) = run(&params) {
        eprintln!("{tag}: warm-up FAILED: {e}");
        return None;
    }
    params.warmup = false;
    let mut reps: Vec<Metrics> = Vec::with_capacity(config.reps);
    for r in 1..=config.reps {
        let span = load.begin();
        let outcome = run(&params);
        let other = load.end(span);
        match outcome {
            Ok(m) => {
                eprintln!("{tag}: rep {r}/{}: {}  ({other})", config.reps, shown(&m));
                reps.push(m);
            }
            Err(e) => {
                eprintln!("{tag}: rep {r} FAILED: {e}  ({other})");
                return None;
            }
        }
    }
    let medians = medians(system, w, &reps);
    for record in &medians {
        println!("{}", record.json());
    }
    Some(medians)
}

/// A repetition's figures for stderr.
fn shown(m: &Metrics) -> String {
    let parts: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{k}={}", report::json_number(*v)))
        .collect();
    parts.join(" ")
}

/// The median of each metric over the repetitions.
fn medians(system: &Entry, w: Workload, reps: &[Metrics]) -> Vec<Record> {
    reps[0]
        .iter()
        .enumerate()
        .map(|(i, &(metric, _))| Record {
            system: system.name,
            kind: system.kind,
            workload: w,
            metric,
            value: measure::median(reps.iter().map(|m| m[i].1).collect()),
        })
        .collect()
}

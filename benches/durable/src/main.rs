//! chronopool-durable beside apalis and River on the `durable` workload of
//! the shared spec and the burn-down and immediate workloads, on SQLite and
//! on one PostgreSQL server, in one run (see README.md). stdout: JSON lines
//! only, one per system and metric (the median of the repetitions);
//! stderr: settings, progress, every repetition's figures and a table.
//!
//! Environment: `REPS` (3), `SCALE` (1: multiplies every job count),
//! `SYSTEMS` (comma list, all by default). Arguments: the groups of
//! metrics to measure, `durable` (insert rate and lateness), `rss`,
//! `recovery`, `burndown` and `immediate` (all by default).
//! `--child rss|recovery|immediate <system>` is this binary re-executed
//! for a measurement in a fresh process.

mod burndown;
mod immediate;
/// The PostgreSQL server the durable crate's tests start.
#[path = "../../../durable/tests/common/mod.rs"]
mod pg;
mod report;
mod rng;
mod rss;
mod slots;
mod sqlite_settings;
mod systems;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use report::{Metric, Report};
use systems::{Store, System};

/// The server's durability settings, as the running server reports them
/// (`SHOW`): PostgreSQL's durable defaults, which the tests' server (`pg`
/// below) keeps in `PgServer::start_durable`.
fn pg_durability(server: &pg::PgServer) -> String {
    let mut client =
        postgres::Client::connect(&server.params(), postgres::NoTls).expect("a connection");
    ["fsync", "full_page_writes", "synchronous_commit"]
        .iter()
        .map(|name| {
            let row = client
                .query_one(&format!("SHOW {name}"), &[])
                .expect("a setting");
            format!("{name}={}", row.get::<_, String>(0))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Jobs per batch (one transaction where the system has them).
const BATCH: usize = 1000;
/// The `durable` workload: 100,000 jobs due within 10 s.
const DURABLE_JOBS: usize = 100_000;
const DURABLE_SPAN_MS: u64 = 10_000;
/// The RSS workload: 1,000,000 jobs due within 365 days.
const RSS_JOBS: usize = 1_000_000;
const RSS_SPAN_MS: u64 = 365 * 24 * 3600 * 1000;
/// The recovery workload: 10,000 jobs due within 1 s, the process killed
/// 500 ms after they are stored.
const RECOVERY_JOBS: usize = 10_000;
const RECOVERY_SPAN_MS: u64 = 1000;
const KILL_AFTER: Duration = Duration::from_millis(500);
/// The burn-down workload: 1,000,000 jobs stored and due before the
/// workers start.
const BURNDOWN_JOBS: usize = 1_000_000;
/// The groups, in the order measured.
const GROUPS: [&str; 5] = ["durable", "rss", "recovery", "burndown", "immediate"];

/// How long the jobs of a workload may take to run after the last is
/// scheduled, before the run is reported incomplete.
const PATIENCE: Duration = Duration::from_secs(600);
/// How long the burn-down's jobs may take to run from the workers' start,
/// before the run is reported incomplete: a million jobs at 1,000 jobs/s
/// take 1,000 s.
const BURNDOWN_PATIENCE: Duration = Duration::from_secs(1800);

fn scaled(n: usize, scale: f64) -> usize {
    ((n as f64 * scale).round() as usize).max(1)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(&args[2], &args[3]);
    } else {
        parent(&args[1..]);
    }
}

fn system_named(name: &str) -> Box<dyn System> {
    systems::all()
        .into_iter()
        .find(|s| s.name() == name)
        .unwrap_or_else(|| panic!("no system named {name:?}"))
}

/// A measurement in a fresh process: its result on stdout.
fn child(workload: &str, system: &str) {
    let system = system_named(system);
    let store = Store::from_env();
    let jobs: usize = std::env::var("DURABLE_BENCH_JOBS")
        .expect("DURABLE_BENCH_JOBS")
        .parse()
        .expect("a job count");
    match workload {
        "rss" => {
            let delays = rng::delays_ms(jobs, RSS_SPAN_MS);
            let (mb, insert) = system.rss(&store, &delays, BATCH);
            eprintln!(
                "    (child) {} jobs scheduled in {:.1} s: {:.0} jobs/s",
                delays.len(),
                insert.as_secs_f64(),
                delays.len() as f64 / insert.as_secs_f64()
            );
            println!("RSS_MB {mb}");
        }
        "recovery" => {
            let delays = rng::delays_ms(jobs, RECOVERY_SPAN_MS);
            system.recovery_child(&store, &delays, BATCH);
        }
        "immediate" => system.insert_now(&store, jobs, immediate::GAP),
        other => panic!("no child workload {other:?}"),
    }
}

/// A store made for one measurement, removed after it.
struct Fresh<'a> {
    store: Store,
    database: Option<(&'a pg::PgServer, String)>,
}

impl Drop for Fresh<'_> {
    fn drop(&mut self) {
        match (&self.store, &self.database) {
            (_, Some((server, name))) => server.drop_database(name),
            (Store::Sqlite(path), None) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            _ => {}
        }
    }
}

fn fresh<'a>(
    system: &dyn System,
    workload: &str,
    rep: usize,
    dir: &Path,
    server: Option<&'a pg::PgServer>,
) -> Fresh<'a> {
    if system.postgres() {
        let server = server.expect("the PostgreSQL server");
        let name = format!("{}_{workload}_{rep}", system.name().replace('-', "_"));
        let params = server.database(&name);
        Fresh {
            store: Store::Postgres {
                params,
                url: server.url(&name),
            },
            database: Some((server, name)),
        }
    } else {
        Fresh {
            store: Store::Sqlite(dir.join(format!("{}-{workload}-{rep}.db", system.name()))),
            database: None,
        }
    }
}

fn child_command(workload: &str, system: &dyn System, store: &Store, jobs: usize) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("this binary"));
    command
        .args(["--child", workload, system.name()])
        .envs(store.to_env())
        .env("DURABLE_BENCH_JOBS", jobs.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

/// `BY_SECOND=1`: the lateness of the jobs by the second (from their
/// batch's start) they were due in, to see where late jobs come from.
fn by_second(delays_ms: &[u64], slots: &slots::Slots) {
    let mut buckets: Vec<Vec<f64>> = Vec::new();
    for (delay, late) in delays_ms.iter().zip(slots.lateness_by_index()) {
        let Some(late) = late else { continue };
        let second = (delay / 1000) as usize;
        if buckets.len() <= second {
            buckets.resize(second + 1, Vec::new());
        }
        buckets[second].push(late.max(0) as f64 / 1000.0);
    }
    for (second, mut late) in buckets.into_iter().enumerate() {
        late.sort_by(f64::total_cmp);
        eprintln!(
            "    due in second {second}: {} jobs, lateness p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            late.len(),
            slots::percentile(&late, 50.0),
            slots::percentile(&late, 99.0),
            late.last().copied().unwrap_or(f64::NAN)
        );
    }
}

/// A trial run of a SQLite system (one job) with its SQLite connections
/// traced: what it sets, as a line for stderr.
fn sqlite_trial(system: &dyn System, dir: &Path) -> String {
    let store = Store::Sqlite(dir.join(format!("{}-trial.db", system.name())));
    let (run, opened, pragmas) =
        sqlite_settings::trace(|| system.durable(&store, &[0], 1, Duration::from_secs(60)));
    if let Store::Sqlite(path) = &store {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    format!(
        "SQLite settings of {} (its PRAGMAs, traced on a trial run of one job{}): {}; \
         connections opened in that run: {opened}; unset ones are SQLite's defaults",
        system.name(),
        if run.slots.ran() == 1 {
            ""
        } else {
            ", which did not run"
        },
        if pragmas.is_empty() {
            "none".to_owned()
        } else {
            pragmas.join(", ")
        },
    )
}

fn parent(args: &[String]) {
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    let scale: f64 = std::env::var("SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let selected: Vec<Box<dyn System>> = match std::env::var("SYSTEMS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|name| system_named(name.trim()))
            .collect(),
        _ => systems::all(),
    };
    let groups: Vec<&str> = if args.is_empty() {
        GROUPS.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    for g in &groups {
        assert!(
            GROUPS.contains(g),
            "unknown group {g:?} ({})",
            GROUPS.join(", ")
        );
    }
    let (durable_jobs, rss_jobs, recovery_jobs, burndown_jobs) = (
        scaled(DURABLE_JOBS, scale),
        scaled(RSS_JOBS, scale),
        scaled(RECOVERY_JOBS, scale),
        scaled(BURNDOWN_JOBS, scale),
    );
    let immediate_jobs = scaled(immediate::JOBS, scale).max(immediate::MIN_JOBS);

    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = selected
        .iter()
        .any(|s| s.postgres())
        .then(pg::PgServer::start_durable);
    eprintln!(
        "durable bench: REPS={reps} SCALE={scale} groups={groups:?}, batches of {BATCH}; \
         durable: {durable_jobs} jobs due within {DURABLE_SPAN_MS} ms of their batch's start; \
         rss: {rss_jobs} jobs due within 365 days; recovery: {recovery_jobs} jobs due within \
         {RECOVERY_SPAN_MS} ms, SIGKILL {KILL_AFTER:?} after they are stored; burndown: \
         {burndown_jobs} jobs stored and due before the workers start; immediate: \
         {immediate_jobs} jobs due now inserted by another process {:?} apart, the worker \
         started {:?} before; {} CPUs",
        immediate::GAP,
        immediate::SETTLE,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    eprintln!("SQLite files in {}", dir.path().display());
    if let Some(server) = &server {
        eprintln!(
            "PostgreSQL: {} on 127.0.0.1, {} (SHOW; the server's durable defaults)",
            server.version(),
            pg_durability(server)
        );
    }
    for s in &selected {
        eprintln!("settings of {}: {}", s.name(), s.settings());
    }
    if selected.iter().any(|s| !s.postgres()) {
        eprintln!("{}", sqlite_settings::defaults(dir.path()));
    }
    for s in selected.iter().filter(|s| !s.postgres()) {
        eprintln!("{}", sqlite_trial(s.as_ref(), dir.path()));
    }

    let mut report = Report::new(selected.iter().map(|s| s.name()).collect());
    let durable_delays = rng::delays_ms(durable_jobs, DURABLE_SPAN_MS);
    for rep in 1..=reps {
        for system in &selected {
            let system = system.as_ref();
            let name = system.name();
            if groups.contains(&"durable") {
                let f = fresh(system, "durable", rep, dir.path(), server.as_ref());
                let run = system.durable(&f.store, &durable_delays, BATCH, PATIENCE);
                drop(f);
                let insert_rate = run.jobs as f64 / run.insert.as_secs_f64();
                let late_us = run.slots.lateness_us();
                let early = late_us.iter().filter(|&&l| l < 0).count();
                let mut late_ms: Vec<f64> =
                    late_us.iter().map(|&l| l.max(0) as f64 / 1000.0).collect();
                late_ms.sort_by(f64::total_cmp);
                let (p50, p99) = (
                    slots::percentile(&late_ms, 50.0),
                    slots::percentile(&late_ms, 99.0),
                );
                let max = late_ms.last().copied().unwrap_or(f64::NAN);
                eprintln!(
                    "rep {rep} {name} durable: scheduled {} jobs in {:.3} s = {insert_rate:.0} jobs/s; \
                     lateness p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms; \
                     {early} early (counted as 0); ran {} of {}, {} repeated runs",
                    run.jobs,
                    run.insert.as_secs_f64(),
                    run.slots.ran(),
                    run.jobs,
                    run.slots.runs() - run.slots.ran()
                );
                if std::env::var_os("BY_SECOND").is_some() {
                    by_second(&durable_delays, &run.slots);
                }
                report.add(name, Metric::InsertJobsPerS, insert_rate);
                if run.slots.ran() == run.jobs {
                    report.add(name, Metric::LateP50Ms, p50);
                    report.add(name, Metric::LateP99Ms, p99);
                } else {
                    eprintln!("  lateness not reported: not every job ran");
                }
            }
            if groups.contains(&"rss") {
                let f = fresh(system, "rss", rep, dir.path(), server.as_ref());
                let output = child_command("rss", system, &f.store, rss_jobs)
                    .output()
                    .expect("the RSS child");
                let stdout = String::from_utf8_lossy(&output.stdout);
                match stdout
                    .lines()
                    .find_map(|l| l.strip_prefix("RSS_MB "))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                {
                    Some(mb) => {
                        eprintln!("rep {rep} {name} rss: {mb:.1} MB with {rss_jobs} jobs stored");
                        report.add(name, Metric::RssMb, mb);
                    }
                    None => eprintln!(
                        "rep {rep} {name} rss: the child failed ({}): {stdout}",
                        output.status
                    ),
                }
            }
            if groups.contains(&"recovery") && system.recovers() {
                let f = fresh(system, "recovery", rep, dir.path(), server.as_ref());
                let mut child = child_command("recovery", system, &f.store, recovery_jobs)
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("the recovery child");
                let mut line = String::new();
                BufReader::new(child.stdout.take().expect("its stdout"))
                    .read_line(&mut line)
                    .expect("READY from the child");
                assert_eq!(line.trim(), "READY", "the recovery child's first line");
                let ready = Instant::now();
                std::thread::sleep(KILL_AFTER.saturating_sub(ready.elapsed()));
                child.kill().expect("SIGKILL");
                let _ = child.wait();
                let r = system.recovery(&f.store, recovery_jobs, Duration::from_secs(120));
                let ms = r.elapsed.as_secs_f64() * 1000.0;
                let mut late: Vec<f64> = r
                    .slots
                    .lateness_us()
                    .iter()
                    .map(|&l| l as f64 / 1000.0)
                    .collect();
                late.sort_by(f64::total_cmp);
                eprintln!(
                    "rep {rep} {name} recovery: {ms:.1} ms from opening to the last remaining job's run; \
                     {} jobs remained at the kill, {} of them in flight{}; the recovered runs' lateness \
                     past due: p50 {:.1} ms, max {:.1} ms ({} repeated runs){}",
                    r.remaining,
                    r.in_flight,
                    if name.starts_with("chronopool") {
                        format!(" (lease {:?})", systems::chronopool::RECOVERY_LEASE)
                    } else if name.starts_with("river") {
                        format!(
                            " (rescue_after {:?})",
                            systems::river::RECOVERY_RESCUE_AFTER
                        )
                    } else {
                        String::new()
                    },
                    slots::percentile(&late, 50.0),
                    late.last().copied().unwrap_or(f64::NAN),
                    r.slots.runs() - r.slots.ran(),
                    if r.complete { "" } else { "; NOT ALL RAN" }
                );
                if r.complete {
                    report.add(name, Metric::RecoveryMs, ms);
                }
            }
            if groups.contains(&"burndown") {
                let f = fresh(system, "burndown", rep, dir.path(), server.as_ref());
                burndown::measure(
                    system,
                    &f.store,
                    burndown_jobs,
                    BATCH,
                    BURNDOWN_PATIENCE,
                    rep,
                    &mut report,
                );
            }
            if groups.contains(&"immediate") {
                for polled in [false, true] {
                    let f = fresh(system, "immediate", rep, dir.path(), server.as_ref());
                    let mut child = child_command("immediate", system, &f.store, immediate_jobs);
                    child.stdout(Stdio::null());
                    immediate::measure(
                        system,
                        &f.store,
                        immediate_jobs,
                        child,
                        polled,
                        rep,
                        &mut report,
                    );
                }
            }
        }
    }
    report.print_json();
    eprintln!();
    report.print_table();
    drop(server);
}

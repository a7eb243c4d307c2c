//! `chronopool-durable`: the operator's command line for the jobs that
//! [`chronopool_durable`] stores in a SQLite file or a PostgreSQL
//! database. It lists and shows jobs, pauses and resumes them (one, or
//! every job of a handler), runs one now, retries a dead one, cancels one,
//! prints the store's figures and sets the handlers' limits of runs at
//! once. It only reads and changes the store and runs no job, so it is
//! safe beside the services that run them: each honours a change at its
//! next claim or poll.
//!
//! ```text
//! chronopool-durable --store jobs.db list --late
//! chronopool-durable --store jobs.db pause report-daily
//! chronopool-durable --store postgres://app@db/app stats --json
//! ```
//!
//! The store is `--store` or the `CHRONOPOOL_DURABLE_STORE` environment
//! variable: a PostgreSQL connection string (`postgres://…`,
//! `postgresql://…`, or libpq's `host=… dbname=…`), else the path of a
//! SQLite file, which must exist (a typo never creates an empty store).
//! It never upgrades the store's schema unless `--migrate` asks (a newer
//! tool must not move the schema under older services).
//! Every command prints text for people, or one JSON document on stdout
//! with `--json`; in text, every string of the store (keys, names, errors)
//! is printed as data, its control characters escaped.
//!
//! `serve` serves the store's web dashboard (`chronopool-durable-web`) on
//! `--bind` (127.0.0.1:8080 by default), with an access token from
//! `--token` or `CHRONOPOOL_DURABLE_TOKEN`.
//!
//! Exit codes: 0, done; 1, an error of the store or of usage (`error: …`
//! on stderr); 2, nothing changed because the job does not exist or is not
//! in the state the command needs (the reason, one line on stderr).

mod output;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chronopool::ScheduledExecutor;
use chronopool_durable::{
    Config, DurableError, DurableScheduler, JobInfo, JobQuery, JobState, RunInfo, RunOutcome,
};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;
use serde_json::json;

use output::{clean, quoted, rfc3339, truncate, Table};

/// The most characters of an error in a table.
const ERROR_WIDTH: usize = 60;

/// The runs `show` prints.
const SHOW_RUNS: usize = 10;

/// The cap of `stats`' count of late jobs.
const LATE_CAP: usize = 1000;

/// The operator's command line for chronopool-durable's stored jobs
/// (SQLite or PostgreSQL). It changes the store only; it runs no job.
///
/// Exit codes: 0 done; 1 a store or usage error; 2 nothing changed (no
/// such job, or not in the state the command needs).
#[derive(Debug, Parser)]
#[command(name = "chronopool-durable", version)]
struct Cli {
    /// The store: a PostgreSQL connection string (postgres://…,
    /// postgresql://…, or host=… dbname=…), else the path of an existing
    /// SQLite file.
    #[arg(
        long,
        global = true,
        env = "CHRONOPOOL_DURABLE_STORE",
        hide_env_values = true,
        value_name = "STORE"
    )]
    store: Option<String>,

    /// Prints one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,

    /// Brings an older schema of the store to this version's (by default
    /// the CLI refuses: upgrading it under older services would keep them
    /// from starting again).
    #[arg(long, global = true)]
    migrate: bool,

    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Lists jobs, by next fire time then key.
    List(ListArgs),
    /// Shows a job, every field, and its last 10 runs.
    Show {
        /// The job's key.
        key: String,
    },
    /// Pauses a job, or every job of a handler (those scheduled later too):
    /// neither placed nor claimed, in any process, until resumed.
    Pause(Target),
    /// Resumes a paused job, or a paused handler's jobs.
    Resume(Target),
    /// Makes a scheduled job due now (its schedule goes on after this run).
    RunNow {
        /// The job's key.
        key: String,
    },
    /// Runs a dead job again, now, its attempts reset.
    Retry {
        /// The job's key.
        key: String,
    },
    /// Removes a job (a run in progress finishes, and stores nothing).
    Cancel {
        /// The job's key.
        key: String,
    },
    /// The jobs in each state, the runs of the last hour, the late jobs,
    /// the handlers' limits and the paused handlers.
    Stats,
    /// Limits a handler's runs at once, across every process on the store.
    Limit(LimitArgs),
    /// Serves the web dashboard of the store until interrupted (it runs no
    /// job: the verbs only change the store).
    Serve {
        /// Where to listen (localhost by default: anything else should
        /// have a token).
        #[arg(long, default_value = "127.0.0.1:8080")]
        bind: String,
        /// The access token every request must carry (a bearer header, or
        /// the cookie `/?token=…` sets).
        #[arg(long, env = "CHRONOPOOL_DURABLE_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// A host name the dashboard is reached by, answered without a
        /// token too (by default only localhost, 127.0.0.1 and [::1]).
        #[arg(long)]
        allow_host: Vec<String>,
    },
}

/// `list`'s filters and page.
#[derive(Debug, Args)]
struct ListArgs {
    /// Only the jobs in this state.
    #[arg(long, value_enum)]
    state: Option<StateArg>,
    /// Only the jobs of this handler.
    #[arg(long, value_name = "NAME")]
    handler: Option<String>,
    /// Only the jobs whose key starts with this.
    #[arg(long, value_name = "KEY_PREFIX")]
    prefix: Option<String>,
    /// Only the paused jobs (by themselves or by their handler).
    #[arg(long)]
    paused: bool,
    /// Only the scheduled jobs past their fire time, not paused, the most
    /// late first (no other filter).
    #[arg(
        long,
        conflicts_with_all = ["state", "handler", "prefix", "paused", "after_key"]
    )]
    late: bool,
    /// At most this many jobs.
    #[arg(long, value_name = "N", default_value_t = 50)]
    limit: usize,
    /// The next page: the jobs after this key (the last of the page
    /// before), with --after-time.
    #[arg(long, value_name = "KEY", requires = "after_time")]
    after_key: Option<String>,
    /// The next fire time of --after-key's job: RFC 3339
    /// (2025-01-31T08:00:00.000001Z) or microseconds since the epoch.
    #[arg(
        long,
        value_name = "TIME",
        requires = "after_key",
        value_parser = parse_time
    )]
    after_time: Option<SystemTime>,
}

/// A job state, as `--state` names it.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum StateArg {
    /// Waiting for its next fire time.
    Scheduled,
    /// Claimed by a scheduler that runs it.
    Running,
    /// Failed for good: kept for a retry.
    Dead,
    /// A one-shot job that succeeded (kept for Config::keep_done).
    Done,
}

impl From<StateArg> for JobState {
    fn from(state: StateArg) -> JobState {
        match state {
            StateArg::Scheduled => JobState::Scheduled,
            StateArg::Running => JobState::Running,
            StateArg::Dead => JobState::Dead,
            StateArg::Done => JobState::Done,
        }
    }
}

/// What `pause` and `resume` act on: a job, or a handler's jobs.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct Target {
    /// The job's key.
    key: Option<String>,
    /// A handler's name instead: every job of it.
    #[arg(long, value_name = "NAME")]
    handler: Option<String>,
}

/// `limit`'s handler and number.
#[derive(Debug, Args)]
struct LimitArgs {
    /// The handler's name.
    name: String,
    /// Its runs at once, at most (0 holds every job of it back).
    #[arg(required_unless_present = "none", conflicts_with = "none")]
    n: Option<u32>,
    /// No limit (the default).
    #[arg(long)]
    none: bool,
}

/// `--after-time`: RFC 3339, or microseconds since the epoch.
fn parse_time(s: &str) -> Result<SystemTime, String> {
    if let Ok(us) = s.parse::<i64>() {
        let d = Duration::from_micros(us.unsigned_abs());
        let t = if us >= 0 {
            UNIX_EPOCH.checked_add(d)
        } else {
            UNIX_EPOCH.checked_sub(d)
        };
        return t.ok_or_else(|| format!("{us} µs since the epoch is out of range"));
    }
    s.parse::<jiff::Timestamp>()
        .map(SystemTime::from)
        .map_err(|e| {
            format!(
                "neither RFC 3339 (2025-01-31T08:00:00.000001Z) \
                 nor microseconds since the epoch: {e}"
            )
        })
}

/// Why a command did not succeed, and so its exit code.
#[derive(Debug)]
enum Failure {
    /// An error of the store or of usage: exit code 1.
    Error(String),
    /// Nothing changed (no such job, or not in the state the command
    /// needs): exit code 2.
    Unchanged(String),
}

impl From<DurableError> for Failure {
    fn from(e: DurableError) -> Failure {
        Failure::Error(e.to_string())
    }
}

/// What a command prints on stdout, and whether it changed nothing.
#[derive(Debug, Default)]
struct Report {
    /// For stdout: text, or a JSON document.
    stdout: String,
    /// Why nothing changed, for stderr (exit code 2).
    unchanged: Option<String>,
}

impl Report {
    /// A report of `stdout`.
    fn of(stdout: String) -> Report {
        Report {
            stdout,
            unchanged: None,
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and the version on stdout (0); a usage error on stderr
            // (1), clap's message starting with `error: `.
            let code = u8::from(e.use_stderr());
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Error(message)) => {
            eprintln!("error: {}", clean(&message));
            ExitCode::from(1)
        }
        Err(Failure::Unchanged(reason)) => {
            eprintln!("{}", clean(&reason));
            ExitCode::from(2)
        }
    }
}

/// Opens the store, runs the command, prints its report.
fn run(cli: &Cli) -> Result<(), Failure> {
    let store = cli
        .store
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            Failure::Error("no store: pass --store <STORE> or set CHRONOPOOL_DURABLE_STORE".into())
        })?;
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .map_err(|e| Failure::Error(format!("executor: {e}")))?;
    let jobs = open(store, &pool, cli.migrate)?;
    if let Command::Serve {
        bind,
        token,
        allow_host,
    } = &cli.command
    {
        return serve(jobs, bind, token.as_deref(), allow_host);
    }
    let json = cli.json;
    let report = match &cli.command {
        Command::List(args) => list(&jobs, args, json),
        Command::Show { key } => show(&jobs, key, json),
        Command::Pause(target) => pause_or_resume(&jobs, target, true, json),
        Command::Resume(target) => pause_or_resume(&jobs, target, false, json),
        Command::RunNow { key } => run_now(&jobs, key, json),
        Command::Retry { key } => retry(&jobs, key, json),
        Command::Cancel { key } => cancel(&jobs, key, json),
        Command::Stats => stats(&jobs, json),
        Command::Limit(args) => limit(&jobs, args, json),
        Command::Serve { .. } => unreachable!("served above"),
    };
    drop(jobs);
    pool.shutdown();
    let report = report?;
    print(&report.stdout)?;
    match report.unchanged {
        Some(reason) => Err(Failure::Unchanged(reason)),
        None => Ok(()),
    }
}

/// Serves the dashboard until the process is ended; prints where.
fn serve(
    jobs: DurableScheduler,
    bind: &str,
    token: Option<&str>,
    hosts: &[String],
) -> Result<(), Failure> {
    let mut dashboard = chronopool_durable_web::Dashboard::new(std::sync::Arc::new(jobs));
    if let Some(token) = token {
        dashboard = dashboard.token(token);
    }
    for host in hosts {
        dashboard = dashboard.allow_host(host.clone());
    }
    let server = dashboard
        .serve(bind)
        .map_err(|e| Failure::Error(format!("cannot listen on {bind}: {e}")))?;
    let login = if token.is_some() { "/?token=…" } else { "/" };
    println!("the dashboard: http://{}{login}", server.addr());
    server.join();
    Ok(())
}

/// True if `store` is a PostgreSQL connection string.
fn is_postgres(store: &str) -> bool {
    store.starts_with("postgres://")
        || store.starts_with("postgresql://")
        || store.contains("host=")
        || store.contains("dbname=")
}

/// A scheduler on `store`, never started: it only reads and changes the
/// store.
fn open(store: &str, pool: &ScheduledExecutor, migrate: bool) -> Result<DurableScheduler, Failure> {
    let mut config = Config::default();
    config.migrate = migrate;
    if is_postgres(store) {
        return Ok(DurableScheduler::postgres(pool, store, config)?);
    }
    let path = Path::new(store);
    if !path.exists() {
        return Err(Failure::Error(format!(
            "no such store file: {} (a SQLite store must exist: the services that run \
             its jobs create it)",
            quoted(store)
        )));
    }
    Ok(DurableScheduler::sqlite(pool, path, config)?)
}

/// Writes `text` on stdout; a reader gone (`| head`) is no error.
fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::Error(format!("stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// `value` as one JSON document, on a line.
fn json_document(value: &impl Serialize) -> Result<String, Failure> {
    let mut text =
        serde_json::to_string_pretty(value).map_err(|e| Failure::Error(format!("JSON: {e}")))?;
    text.push('\n');
    Ok(text)
}

/// A state's name.
fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Scheduled => "scheduled",
        JobState::Running => "running",
        JobState::Dead => "dead",
        JobState::Done => "done",
        _ => "unknown",
    }
}

/// An outcome's name.
fn outcome_name(outcome: Option<RunOutcome>) -> &'static str {
    outcome.map_or("unknown", RunOutcome::name)
}

/// A job's state for people: its name, and whether it is paused (by
/// itself or by its handler).
fn state_text(job: &JobInfo, handler_paused: bool) -> String {
    let mut text = state_name(job.state).to_owned();
    if job.paused {
        text.push_str(", paused");
    } else if handler_paused {
        text.push_str(", handler paused");
    }
    text
}

/// Bytes in hexadecimal.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A job in JSON.
#[derive(Debug, Serialize)]
struct JobJson<'a> {
    /// Its key.
    key: &'a str,
    /// Its handler's name.
    handler: &'a str,
    /// `scheduled`, `running`, `dead` or `done`.
    state: &'static str,
    /// Its schedule, for people (`once`, `every 1h 30m`, `cron … in …`).
    schedule: &'a str,
    /// Paused by itself.
    paused: bool,
    /// Its handler is paused.
    handler_paused: bool,
    /// RFC 3339, UTC, to the microsecond.
    next_fire: String,
    /// The attempts of its current occurrence so far.
    attempt: u32,
    /// Why its last run failed.
    last_error: Option<&'a str>,
    /// For a running job: the readable name of the scheduler that runs it.
    owner_name: Option<&'a str>,
    /// For a running job: when its lease ends, unless renewed.
    lease_until: Option<String>,
    /// The payload's length in bytes.
    payload_len: usize,
    /// The payload, if it is UTF-8.
    payload: Option<&'a str>,
    /// The payload in hexadecimal, if it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_hex: Option<String>,
}

impl<'a> JobJson<'a> {
    /// `job` in JSON; `paused_handlers` tells whether its handler is paused.
    fn of(job: &'a JobInfo, paused_handlers: &[String]) -> JobJson<'a> {
        let text = std::str::from_utf8(&job.payload).ok();
        JobJson {
            key: &job.key,
            handler: &job.name,
            state: state_name(job.state),
            schedule: &job.schedule,
            paused: job.paused,
            handler_paused: paused_handlers.contains(&job.name),
            next_fire: rfc3339(job.next_fire),
            attempt: job.attempt,
            last_error: job.last_error.as_deref(),
            owner_name: job.owner_name.as_deref(),
            lease_until: job.lease_until.map(rfc3339),
            payload_len: job.payload.len(),
            payload: text,
            payload_hex: text.is_none().then(|| hex(&job.payload)),
        }
    }
}

/// A run in JSON.
#[derive(Debug, Serialize)]
struct RunJson<'a> {
    /// Which attempt it was.
    attempt: u32,
    /// When it was due.
    due: String,
    /// When it was claimed.
    started_at: Option<String>,
    /// When it ended.
    ended_at: String,
    /// `succeeded`, `failed`, `dead`, `skipped` (or `unknown`).
    outcome: &'static str,
    /// Its error, if it failed.
    error: Option<&'a str>,
    /// The id of the scheduler that ran it.
    owner: &'a str,
    /// That scheduler's readable name.
    owner_name: Option<&'a str>,
}

impl<'a> RunJson<'a> {
    /// `run` in JSON.
    fn of(run: &'a RunInfo) -> RunJson<'a> {
        RunJson {
            attempt: run.attempt,
            due: rfc3339(run.due),
            started_at: run.started_at.map(rfc3339),
            ended_at: rfc3339(run.ended_at),
            outcome: outcome_name(run.outcome),
            error: run.error.as_deref(),
            owner: &run.owner,
            owner_name: run.owner_name.as_deref(),
        }
    }
}

/// `list`.
fn list(jobs: &DurableScheduler, args: &ListArgs, json: bool) -> Result<Report, Failure> {
    let page = if args.late {
        jobs.late_jobs(args.limit)?
    } else {
        let mut query = JobQuery::new().limit(args.limit);
        if let Some(state) = args.state {
            query = query.state(state.into());
        }
        if let Some(handler) = &args.handler {
            query = query.handler(handler.clone());
        }
        if let Some(prefix) = &args.prefix {
            query = query.key_prefix(prefix.clone());
        }
        if args.paused {
            query = query.paused(true);
        }
        if let (Some(key), Some(time)) = (&args.after_key, args.after_time) {
            query = query.after(time, key.clone());
        }
        jobs.jobs(&query)?
    };
    let paused_handlers = jobs.paused_handlers()?;
    // A full page may have a next one (not for --late, which has no pages).
    let last = page
        .last()
        .filter(|_| !args.late && args.limit > 0 && page.len() == args.limit);
    if json {
        let listed: Vec<JobJson<'_>> = page
            .iter()
            .map(|job| JobJson::of(job, &paused_handlers))
            .collect();
        let next_page =
            last.map(|job| json!({ "after_key": job.key, "after_time": rfc3339(job.next_fire) }));
        return Ok(Report::of(json_document(
            &json!({ "jobs": listed, "next_page": next_page }),
        )?));
    }
    if page.is_empty() {
        return Ok(Report::of("no jobs\n".into()));
    }
    let mut table = Table::new(&[
        "KEY",
        "HANDLER",
        "STATE",
        "NEXT FIRE",
        "ATTEMPT",
        "LAST ERROR",
    ]);
    for job in &page {
        table.row([
            job.key.clone(),
            job.name.clone(),
            state_text(job, paused_handlers.contains(&job.name)),
            rfc3339(job.next_fire),
            job.attempt.to_string(),
            truncate(job.last_error.as_deref().unwrap_or(""), ERROR_WIDTH),
        ]);
    }
    let mut text = table.render("");
    if let Some(job) = last {
        text.push_str(&format!(
            "(a full page: the next one is --after-key {} --after-time {})\n",
            shell_quoted(&job.key),
            rfc3339(job.next_fire)
        ));
    }
    Ok(Report::of(text))
}

/// `s` quoted for a shell, as a word to paste: in single quotes, or, if
/// it holds a character that must not reach the terminal raw
/// (`output::is_unsafe`), in bash's `$'…'` with that character's UTF-8
/// bytes escaped (`\xHH`: bash keeps `\U` escapes as text under the C
/// locale), so the hint is printable and pastes as the very key.
fn shell_quoted(s: &str) -> String {
    if !s.chars().any(output::is_unsafe) {
        return format!("'{}'", s.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str(r"\'"),
            '\\' => out.push_str(r"\\"),
            c if output::is_unsafe(c) => {
                let mut utf8 = [0; 4];
                for byte in c.encode_utf8(&mut utf8).bytes() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `show`.
fn show(jobs: &DurableScheduler, key: &str, json: bool) -> Result<Report, Failure> {
    let Some(job) = jobs.job(key)? else {
        return Err(Failure::Unchanged(format!("no job {}", quoted(key))));
    };
    let runs = jobs.history(Some(key), SHOW_RUNS)?;
    let paused_handlers = jobs.paused_handlers()?;
    if json {
        let runs: Vec<RunJson<'_>> = runs.iter().map(RunJson::of).collect();
        return Ok(Report::of(json_document(&json!({
            "job": JobJson::of(&job, &paused_handlers),
            "runs": runs,
        }))?));
    }
    let handler_paused = paused_handlers.contains(&job.name);
    let size = match job.payload.len() {
        1 => "1 byte".to_owned(),
        n => format!("{n} bytes"),
    };
    let payload = match std::str::from_utf8(&job.payload) {
        Ok(text) => format!("{size}: {}", quoted(&truncate(text, 200))),
        Err(_) => format!("{size} (hex): {}", truncate(&hex(&job.payload), 200)),
    };
    let none = || "-".to_owned();
    let mut fields = Table::plain();
    fields.row(["key".into(), job.key.clone()]);
    fields.row(["handler".into(), job.name.clone()]);
    fields.row(["state".into(), state_text(&job, handler_paused)]);
    fields.row(["schedule".into(), job.schedule.clone()]);
    fields.row(["next fire".into(), rfc3339(job.next_fire)]);
    fields.row(["attempt".into(), job.attempt.to_string()]);
    fields.row([
        "last error".into(),
        job.last_error.clone().unwrap_or_else(none),
    ]);
    fields.row(["owner".into(), job.owner_name.clone().unwrap_or_else(none)]);
    fields.row([
        "lease until".into(),
        job.lease_until.map(rfc3339).unwrap_or_else(none),
    ]);
    fields.row(["payload".into(), payload]);
    let mut text = fields.render("");
    if runs.is_empty() {
        text.push_str("runs: none in the history\n");
    } else {
        text.push_str(&format!("runs (the last {SHOW_RUNS}, newest first):\n"));
        let mut table = Table::new(&[
            "ENDED", "OUTCOME", "ATTEMPT", "DUE", "STARTED", "OWNER", "ERROR",
        ]);
        for run in &runs {
            table.row([
                rfc3339(run.ended_at),
                outcome_name(run.outcome).to_owned(),
                run.attempt.to_string(),
                rfc3339(run.due),
                run.started_at.map(rfc3339).unwrap_or_else(none),
                run.owner_name.clone().unwrap_or_else(|| run.owner.clone()),
                truncate(run.error.as_deref().unwrap_or(""), ERROR_WIDTH),
            ]);
        }
        text.push_str(&table.render("  "));
    }
    Ok(Report::of(text))
}

/// Why the verb `verb` changed nothing for `key`: no such job, or its
/// state (`needs` says which state the verb needs, if it needs one).
fn why_unchanged(
    jobs: &DurableScheduler,
    key: &str,
    verb: &str,
    needs: Option<(JobState, &str)>,
) -> Result<String, Failure> {
    let reason = match (jobs.job(key)?, needs) {
        (None, _) => format!("no job {}", quoted(key)),
        (Some(job), Some((state, hint))) if job.state != state => format!(
            "job {} is {}, not {}: {hint}",
            quoted(key),
            state_name(job.state),
            state_name(state)
        ),
        (Some(_), _) => format!("job {} did not change", quoted(key)),
    };
    Ok(format!("{verb}: nothing changed: {reason}"))
}

/// The report of a verb on the job `key`: `done` in text if it `changed`,
/// else the reason nothing changed ([`why_unchanged`]).
fn job_change(
    key: &str,
    changed: bool,
    json: bool,
    done: impl FnOnce() -> Result<String, Failure>,
    why_not: impl FnOnce() -> Result<String, Failure>,
) -> Result<Report, Failure> {
    let stdout = if json {
        json_document(&json!({ "key": key, "changed": changed }))?
    } else if changed {
        done()? + "\n"
    } else {
        String::new()
    };
    let unchanged = if changed { None } else { Some(why_not()?) };
    Ok(Report { stdout, unchanged })
}

/// `pause` and `resume` (`pause` false).
fn pause_or_resume(
    jobs: &DurableScheduler,
    target: &Target,
    pause: bool,
    json: bool,
) -> Result<Report, Failure> {
    let verb = if pause { "pause" } else { "resume" };
    if let Some(name) = &target.handler {
        return handler_pause(jobs, name, pause, json);
    }
    let Some(key) = &target.key else {
        return Err(Failure::Error(format!("{verb}: a key or --handler NAME")));
    };
    let changed = if pause {
        jobs.pause(key)?
    } else {
        jobs.resume(key)?
    };
    job_change(
        key,
        changed,
        json,
        || {
            Ok(if pause {
                format!(
                    "paused job {}: neither placed nor claimed until resumed",
                    quoted(key)
                )
            } else {
                format!("resumed job {}", quoted(key))
            })
        },
        || why_unchanged(jobs, key, verb, None),
    )
}

/// `pause --handler` and `resume --handler`: always done (exit 0);
/// `changed` says whether the handler was in the other state before.
fn handler_pause(
    jobs: &DurableScheduler,
    name: &str,
    pause: bool,
    json: bool,
) -> Result<Report, Failure> {
    let was_paused = jobs.paused_handlers()?.iter().any(|n| n == name);
    if pause {
        jobs.pause_handler(name)?;
        let has_jobs = !jobs
            .jobs(&JobQuery::new().handler(name).limit(1))?
            .is_empty();
        if !has_jobs {
            eprintln!(
                "note: no job of the handler {} is stored (those scheduled later are paused)",
                quoted(name)
            );
        }
    } else {
        jobs.resume_handler(name)?;
    }
    let changed = was_paused != pause;
    let stdout = if json {
        json_document(&json!({ "handler": name, "changed": changed }))?
    } else {
        let name = quoted(name);
        match (pause, changed) {
            (true, true) => format!(
                "paused handler {name}: its jobs are neither placed nor claimed until resumed\n"
            ),
            (true, false) => format!("handler {name} was paused already\n"),
            (false, true) => format!("resumed handler {name}\n"),
            (false, false) => format!("handler {name} was not paused\n"),
        }
    };
    Ok(Report::of(stdout))
}

/// `run-now`.
fn run_now(jobs: &DurableScheduler, key: &str, json: bool) -> Result<Report, Failure> {
    let changed = jobs.run_now(key)?;
    job_change(
        key,
        changed,
        json,
        || {
            let paused = jobs.job(key)?.is_some_and(|job| job.paused);
            Ok(format!(
                "job {} is due now{}",
                quoted(key),
                if paused {
                    " (it is paused: it runs when resumed)"
                } else {
                    ""
                }
            ))
        },
        || {
            why_unchanged(
                jobs,
                key,
                "run-now",
                Some((
                    JobState::Scheduled,
                    "only a scheduled job can be made due (a dead one: retry)",
                )),
            )
        },
    )
}

/// `retry`.
fn retry(jobs: &DurableScheduler, key: &str, json: bool) -> Result<Report, Failure> {
    let changed = jobs.retry(key)?;
    job_change(
        key,
        changed,
        json,
        || {
            Ok(format!(
                "job {} is scheduled again, due now, its attempts reset",
                quoted(key)
            ))
        },
        || {
            why_unchanged(
                jobs,
                key,
                "retry",
                Some((JobState::Dead, "only a dead job can be retried")),
            )
        },
    )
}

/// `cancel`.
fn cancel(jobs: &DurableScheduler, key: &str, json: bool) -> Result<Report, Failure> {
    let changed = jobs.cancel(key)?;
    job_change(
        key,
        changed,
        json,
        || Ok(format!("cancelled job {}", quoted(key))),
        || why_unchanged(jobs, key, "cancel", None),
    )
}

/// `stats`.
fn stats(jobs: &DurableScheduler, json: bool) -> Result<Report, Failure> {
    let counts = jobs.counts()?;
    // Every outcome this version knows, in this order, then any other.
    let mut runs: Vec<(&'static str, u64)> = [
        RunOutcome::Succeeded,
        RunOutcome::Failed,
        RunOutcome::Dead,
        RunOutcome::Skipped,
    ]
    .into_iter()
    .map(|outcome| (outcome.name(), 0))
    .collect();
    for (outcome, n) in jobs.recent_runs(Duration::from_secs(3600))? {
        match runs.iter_mut().find(|(name, _)| *name == outcome.name()) {
            Some((_, count)) => *count += n,
            None => runs.push((outcome.name(), n)),
        }
    }
    let late = jobs.late_jobs(LATE_CAP)?.len();
    let late_capped = late >= LATE_CAP;
    let limits = jobs.limits()?;
    let paused_handlers = jobs.paused_handlers()?;
    if json {
        let limits: BTreeMap<&str, u32> = limits.iter().map(|(n, l)| (n.as_str(), *l)).collect();
        return Ok(Report::of(json_document(&json!({
            "counts": {
                "scheduled": counts.scheduled,
                "paused": counts.paused,
                "running": counts.running,
                "dead": counts.dead,
                "done": counts.done,
            },
            "runs_last_hour": runs.iter().copied().collect::<BTreeMap<_, _>>(),
            "late": late,
            "late_capped": late_capped,
            "limits": limits,
            "paused_handlers": paused_handlers,
        }))?));
    }
    let list = |items: Vec<String>| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(", ")
        }
    };
    let mut table = Table::plain();
    table.row([
        "jobs".into(),
        format!(
            "{} scheduled, {} paused, {} running, {} dead, {} done",
            counts.scheduled, counts.paused, counts.running, counts.dead, counts.done
        ),
    ]);
    table.row([
        "runs, last hour".into(),
        list(runs.iter().map(|(o, n)| format!("{n} {o}")).collect()),
    ]);
    table.row([
        "late".into(),
        if late_capped {
            format!("{LATE_CAP}+")
        } else {
            late.to_string()
        },
    ]);
    table.row([
        "limits".into(),
        list(
            limits
                .iter()
                .map(|(name, n)| format!("{} {n}", quoted(name)))
                .collect(),
        ),
    ]);
    table.row([
        "paused handlers".into(),
        list(paused_handlers.iter().map(|n| quoted(n)).collect()),
    ]);
    Ok(Report::of(table.render("")))
}

/// `limit`: always done (exit 0); `changed` says whether the limit was
/// another before.
fn limit(jobs: &DurableScheduler, args: &LimitArgs, json: bool) -> Result<Report, Failure> {
    let name = args.name.as_str();
    let limit = if args.none { None } else { args.n };
    let before = jobs
        .limits()?
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, l)| l);
    jobs.set_limit(name, limit)?;
    let changed = before != limit;
    let stdout = if json {
        json_document(&json!({ "handler": name, "limit": limit, "changed": changed }))?
    } else {
        let set = match limit {
            Some(n) => format!(
                "handler {}: at most {n} runs at once, across every process",
                quoted(name)
            ),
            None => format!("handler {}: no limit", quoted(name)),
        };
        set + if changed { "\n" } else { " (as before)\n" }
    };
    Ok(Report::of(stdout))
}

//! The `chronopool-durable` binary end to end, on both stores: a SQLite
//! file, and a fresh database on a real PostgreSQL server (the durable
//! crate's test helpers, included by path). Each test makes its store and
//! jobs with the library, runs the binary as a subprocess, and checks the
//! store through the library.

#![cfg(unix)]

// The durable crate's PostgreSQL server and stores, shared, not copied
// (each allows its own unused items: `#![allow(dead_code)]`).
#[path = "../../durable/tests/common/mod.rs"]
mod common;
#[path = "../../durable/tests/stores/mod.rs"]
mod stores;

use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use chronopool::ScheduledExecutor;
use chronopool_durable::{DurableScheduler, JobError, JobState, Schedule};
use serde_json::Value;
use stores::{eventually, pool, real_config, Kind, Store, BOTH};

/// A key that tries to forge a line of output and colour the terminal.
const HOSTILE: &str = "evil\nforged-line \u{1b}[31mred";

/// A store of `kind` with these jobs, and a scheduler on it (never
/// started) to check it with:
///
/// * `broken` (handler `fail`): dead, its handler's permanent error
///   `boom` in its history;
/// * `report-daily` (`report`): every day, next in a day;
/// * `report-eu-1` (`report`): once, in two hours;
/// * `mail-late` (`mail`): once, an hour ago: late;
/// * [`HOSTILE`] (`mail`): once, in three hours.
struct Fixture {
    store: Store,
    _pool: ScheduledExecutor,
    jobs: DurableScheduler,
}

impl Fixture {
    fn new(kind: Kind) -> Fixture {
        let store = Store::new(kind);
        let pool = pool(1);
        // The dead job first, on a started scheduler with only its handler.
        let runner = store.open(&pool, real_config());
        runner.register("fail", |_| Err(JobError::permanent("boom")));
        runner.start().unwrap();
        runner
            .schedule("broken", "fail", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("broken is dead", || {
            runner.job("broken").unwrap().map(|j| j.state) == Some(JobState::Dead)
        });
        assert!(runner.shutdown(Duration::from_secs(10)));
        drop(runner);
        // The others on a scheduler that never starts (nothing runs them).
        let jobs = store.open(&pool, real_config());
        let day = Duration::from_secs(86_400);
        jobs.schedule("report-daily", "report", b"daily", Schedule::Every(day))
            .unwrap();
        let in_2h = Schedule::After(Duration::from_secs(7200));
        jobs.schedule("report-eu-1", "report", b"eu", in_2h)
            .unwrap();
        let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
        jobs.schedule("mail-late", "mail", b"ada", Schedule::At(an_hour_ago))
            .unwrap();
        let in_3h = Schedule::After(Duration::from_secs(3 * 3600));
        jobs.schedule(HOSTILE, "mail", b"\xff\x00", in_3h).unwrap();
        Fixture {
            store,
            _pool: pool,
            jobs,
        }
    }

    /// The `--store` value.
    fn arg(&self) -> String {
        match &self.store.params {
            Some(params) => params.clone(),
            None => self.store.path().display().to_string(),
        }
    }

    /// The binary, on this store, with `args`.
    fn cli(&self, args: &[&str]) -> Run {
        let mut all = vec!["--store".to_owned(), self.arg()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        run(&all, None)
    }

    /// The binary with `--json` and `args`, successful; its JSON.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let run = self.cli(&all);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        run.json()
    }
}

/// What a run of the binary did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn of(output: Output) -> Run {
        Run {
            code: output.status.code().expect("exited"),
            stdout: String::from_utf8(output.stdout).expect("UTF-8 on stdout"),
            stderr: String::from_utf8(output.stderr).expect("UTF-8 on stderr"),
        }
    }

    /// Its stdout, one JSON document.
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", self.stdout))
    }

    /// Succeeded, or panics with what it printed.
    fn ok(self, what: &str) -> Run {
        assert_eq!(self.code, 0, "{what}: {self:?}");
        self
    }
}

/// The binary with `args`, `CHRONOPOOL_DURABLE_STORE` set to `env_store`
/// (or unset).
fn run(args: &[String], env_store: Option<&str>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_chronopool-durable"));
    command.args(args).env_remove("CHRONOPOOL_DURABLE_STORE");
    if let Some(store) = env_store {
        command.env("CHRONOPOOL_DURABLE_STORE", store);
    }
    Run::of(command.output().expect("the binary runs"))
}

/// The keys of a `list --json`, in order.
fn keys(listed: &Value) -> Vec<String> {
    listed["jobs"]
        .as_array()
        .expect("a `jobs` array")
        .iter()
        .map(|job| job["key"].as_str().unwrap().to_owned())
        .collect()
}

/// The data lines of a table (its header left out).
fn rows(table: &str) -> Vec<&str> {
    table.lines().skip(1).collect()
}

#[test]
fn list_filters_pages_late_jobs_and_json() {
    for kind in BOTH {
        let f = Fixture::new(kind);

        let all = f.cli(&["list"]).ok("list");
        let header = all.stdout.lines().next().unwrap();
        for column in [
            "KEY",
            "HANDLER",
            "STATE",
            "NEXT FIRE",
            "ATTEMPT",
            "LAST ERROR",
        ] {
            assert!(header.contains(column), "{kind:?}: {header}");
        }
        assert_eq!(rows(&all.stdout).len(), 5, "{kind:?}: {}", all.stdout);
        let broken = rows(&all.stdout)
            .into_iter()
            .find(|row| row.starts_with("broken "))
            .unwrap();
        assert!(
            broken.contains("dead") && broken.contains("boom"),
            "{broken}"
        );

        let dead = f.cli(&["list", "--state", "dead"]).ok("--state");
        assert_eq!(rows(&dead.stdout).len(), 1, "{kind:?}: {}", dead.stdout);
        assert!(dead.stdout.contains("broken"));

        let listed = f.json(&["list", "--handler", "report"]);
        assert_eq!(keys(&listed), ["report-eu-1", "report-daily"], "{kind:?}");
        let listed = f.json(&["list", "--prefix", "report-eu"]);
        assert_eq!(keys(&listed), ["report-eu-1"], "{kind:?}");

        assert!(f.jobs.pause("report-daily").unwrap());
        let listed = f.json(&["list", "--paused"]);
        assert_eq!(keys(&listed), ["report-daily"], "{kind:?}");
        let paused = f.cli(&["list", "--paused"]).ok("--paused");
        assert!(
            paused.stdout.contains("scheduled, paused"),
            "{}",
            paused.stdout
        );

        let late = f.cli(&["list", "--late"]).ok("--late");
        assert_eq!(rows(&late.stdout).len(), 1, "{kind:?}: {}", late.stdout);
        assert!(late.stdout.contains("mail-late"));
        assert_eq!(keys(&f.json(&["list", "--late"])), ["mail-late"]);

        // Every field, the times in RFC 3339 to the microsecond.
        let listed = f.json(&["list"]);
        let job = &listed["jobs"][0];
        for field in [
            "key",
            "handler",
            "state",
            "schedule",
            "paused",
            "handler_paused",
            "next_fire",
            "attempt",
            "last_error",
            "owner_name",
            "lease_until",
            "payload_len",
            "payload",
        ] {
            assert!(job.get(field).is_some(), "{kind:?}: no {field} in {job}");
        }
        assert_eq!(job["key"], "mail-late");
        assert_eq!(job["payload"], "ada");
        let next_fire = job["next_fire"].as_str().unwrap();
        assert!(
            next_fire.ends_with('Z') && next_fire.split('.').nth(1).unwrap().len() == 7,
            "{next_fire}"
        );
        assert!(listed["next_page"].is_null());

        // Pages of two, by next fire time then key: every job once.
        let mut seen = Vec::new();
        let mut page = f.json(&["list", "--limit", "2"]);
        loop {
            seen.extend(keys(&page));
            let next = &page["next_page"];
            if next.is_null() {
                break;
            }
            let (key, time) = (
                next["after_key"].as_str().unwrap(),
                next["after_time"].as_str().unwrap(),
            );
            page = f.json(&[
                "list",
                "--limit",
                "2",
                "--after-key",
                key,
                "--after-time",
                time,
            ]);
        }
        let all_keys = keys(&f.json(&["list"]));
        assert_eq!(seen, all_keys, "{kind:?}");
        assert_eq!(all_keys.len(), 5);

        // --limit, and a page after a time in microseconds.
        assert_eq!(keys(&f.json(&["list", "--limit", "1"])), ["mail-late"]);
        let first = f.jobs.job("mail-late").unwrap().unwrap();
        let micros = first
            .next_fire
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_micros()
            .to_string();
        let after = f.json(&[
            "list",
            "--limit",
            "1",
            "--after-key",
            "mail-late",
            "--after-time",
            &micros,
        ]);
        assert_eq!(keys(&after), [all_keys[1].clone()], "{kind:?}");

        // Usage errors: exit code 1, `error: ` first.
        let wrong = f.cli(&["list", "--late", "--state", "dead"]);
        assert_eq!(wrong.code, 1, "{wrong:?}");
        assert!(wrong.stderr.starts_with("error: "), "{wrong:?}");
        let wrong = f.cli(&["list", "--after-key", "x"]);
        assert_eq!(wrong.code, 1, "{wrong:?}");
    }
}

#[test]
fn show_prints_every_field_and_the_history() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        let shown = f.cli(&["show", "broken"]).ok("show");
        for expected in ["broken", "fail", "dead", "boom", "runs (the last 10"] {
            assert!(
                shown.stdout.contains(expected),
                "{kind:?}: {}",
                shown.stdout
            );
        }
        let run_line = shown
            .stdout
            .lines()
            .skip_while(|line| !line.starts_with("runs"))
            .nth(2)
            .expect("a run");
        assert!(
            run_line.contains("dead") && run_line.contains("boom"),
            "{run_line}"
        );

        let shown = f.json(&["show", "broken"]);
        assert_eq!(shown["job"]["key"], "broken", "{kind:?}");
        assert_eq!(shown["job"]["state"], "dead");
        assert_eq!(shown["job"]["last_error"], "boom");
        let runs = shown["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{kind:?}: {shown}");
        assert_eq!(runs[0]["outcome"], "dead");
        assert_eq!(runs[0]["error"], "boom");
        assert_eq!(runs[0]["attempt"], 1);

        // A payload that is not UTF-8 is in hexadecimal.
        let shown = f.json(&["show", HOSTILE]);
        assert_eq!(shown["job"]["payload"], Value::Null);
        assert_eq!(shown["job"]["payload_hex"], "ff00");
        assert_eq!(shown["runs"], Value::Array(Vec::new()));
    }
}

#[test]
fn pause_and_resume_a_job_and_a_handler() {
    for kind in BOTH {
        let f = Fixture::new(kind);

        let paused = f.cli(&["pause", "report-daily"]).ok("pause");
        assert!(
            paused.stdout.contains("paused job \"report-daily\""),
            "{paused:?}"
        );
        assert!(
            f.jobs.job("report-daily").unwrap().unwrap().paused,
            "{kind:?}"
        );
        let resumed = f.json(&["resume", "report-daily"]);
        assert_eq!(
            resumed,
            serde_json::json!({"key": "report-daily", "changed": true})
        );
        assert!(!f.jobs.job("report-daily").unwrap().unwrap().paused);

        let paused = f.json(&["pause", "--handler", "mail"]);
        assert_eq!(
            paused,
            serde_json::json!({"handler": "mail", "changed": true})
        );
        assert_eq!(f.jobs.paused_handlers().unwrap(), ["mail"], "{kind:?}");
        // Again: nothing to change, and no error.
        let again = f.json(&["pause", "--handler", "mail"]);
        assert_eq!(again["changed"], false);
        let listed = f.cli(&["list", "--handler", "mail"]).ok("list");
        assert!(
            listed.stdout.contains("handler paused"),
            "{}",
            listed.stdout
        );

        let resumed = f.cli(&["resume", "--handler", "mail"]).ok("resume");
        assert!(
            resumed.stdout.contains("resumed handler \"mail\""),
            "{resumed:?}"
        );
        assert!(f.jobs.paused_handlers().unwrap().is_empty(), "{kind:?}");

        // A key or --handler, not both, not neither.
        assert_eq!(f.cli(&["pause"]).code, 1);
        assert_eq!(f.cli(&["pause", "k", "--handler", "mail"]).code, 1);
    }
}

#[test]
fn run_now_makes_a_scheduled_job_due() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        let before = f.jobs.job("report-daily").unwrap().unwrap().next_fire;
        assert!(before > SystemTime::now() + Duration::from_secs(3600));
        let done = f.cli(&["run-now", "report-daily"]).ok("run-now");
        assert!(done.stdout.contains("is due now"), "{done:?}");
        let after = f.jobs.job("report-daily").unwrap().unwrap().next_fire;
        assert!(after <= SystemTime::now(), "{kind:?}: {after:?}");

        // A dead job is not scheduled: 2, and why.
        let dead = f.cli(&["--json", "run-now", "broken"]);
        assert_eq!(dead.code, 2, "{dead:?}");
        assert_eq!(
            dead.json(),
            serde_json::json!({"key": "broken", "changed": false})
        );
        assert!(dead.stderr.contains("is dead, not scheduled"), "{dead:?}");
        assert_eq!(dead.stderr.lines().count(), 1);
    }
}

#[test]
fn retry_revives_a_dead_job() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        let done = f.json(&["retry", "broken"]);
        assert_eq!(done, serde_json::json!({"key": "broken", "changed": true}));
        let job = f.jobs.job("broken").unwrap().unwrap();
        assert_eq!(job.state, JobState::Scheduled, "{kind:?}");
        assert_eq!(job.attempt, 0);

        // Not dead any more: 2, and why.
        let again = f.cli(&["retry", "broken"]);
        assert_eq!(again.code, 2, "{again:?}");
        assert!(again.stdout.is_empty());
        assert!(again.stderr.contains("is scheduled, not dead"), "{again:?}");
    }
}

#[test]
fn cancel_removes_a_job() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        let done = f.cli(&["cancel", "report-eu-1"]).ok("cancel");
        assert!(
            done.stdout.contains("cancelled job \"report-eu-1\""),
            "{done:?}"
        );
        assert!(f.jobs.job("report-eu-1").unwrap().is_none(), "{kind:?}");
        let again = f.cli(&["--json", "cancel", "report-eu-1"]);
        assert_eq!(again.code, 2, "{again:?}");
        assert_eq!(again.json()["changed"], false);
    }
}

#[test]
fn stats_match_the_library() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        f.jobs.pause("report-eu-1").unwrap();
        f.jobs.pause_handler("report").unwrap();
        f.jobs.set_limit("mail", Some(2)).unwrap();

        let stats = f.json(&["stats"]);
        let counts = f.jobs.counts().unwrap();
        let c = &stats["counts"];
        assert_eq!(c["scheduled"], counts.scheduled, "{kind:?}: {stats}");
        assert_eq!(c["paused"], counts.paused);
        assert_eq!(c["running"], counts.running);
        assert_eq!(c["dead"], counts.dead);
        assert_eq!(c["done"], counts.done);
        assert_eq!(counts.dead, 1);
        assert_eq!(stats["late"], 1, "{kind:?}: {stats}");
        assert_eq!(stats["late_capped"], false);
        assert_eq!(stats["runs_last_hour"]["dead"], 1, "{kind:?}: {stats}");
        assert_eq!(stats["runs_last_hour"]["succeeded"], 0);
        assert_eq!(stats["limits"], serde_json::json!({"mail": 2}));
        assert_eq!(stats["paused_handlers"], serde_json::json!(["report"]));

        let text = f.cli(&["stats"]).ok("stats").stdout;
        for expected in ["1 dead", "late", "\"mail\" 2", "\"report\""] {
            assert!(text.contains(expected), "{kind:?}: {text}");
        }
    }
}

#[test]
fn limit_sets_and_unsets_a_handlers_limit() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        let set = f.json(&["limit", "report", "3"]);
        assert_eq!(set["changed"], true);
        assert_eq!(
            f.jobs.limits().unwrap(),
            [("report".to_owned(), 3)],
            "{kind:?}"
        );
        f.cli(&["limit", "report", "0"]).ok("limit 0");
        assert_eq!(f.jobs.limits().unwrap(), [("report".to_owned(), 0)]);
        let unset = f.cli(&["limit", "report", "--none"]).ok("--none");
        assert!(unset.stdout.contains("no limit"), "{unset:?}");
        assert!(f.jobs.limits().unwrap().is_empty(), "{kind:?}");

        // A number or --none, not both, not neither.
        assert_eq!(f.cli(&["limit", "report"]).code, 1);
        assert_eq!(f.cli(&["limit", "report", "3", "--none"]).code, 1);
    }
}

#[test]
fn a_missing_key_exits_with_2() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        for verb in ["show", "pause", "resume", "run-now", "retry", "cancel"] {
            let missing = f.cli(&[verb, "missing-key"]);
            assert_eq!(missing.code, 2, "{kind:?} {verb}: {missing:?}");
            assert_eq!(missing.stderr.lines().count(), 1, "{verb}: {missing:?}");
            assert!(
                missing.stderr.contains("no job \"missing-key\""),
                "{verb}: {missing:?}"
            );
        }
    }
}

#[test]
fn a_missing_sqlite_file_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    let path_arg = path.display().to_string();
    let missing = run(&["--store".into(), path_arg.clone(), "list".into()], None);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(missing.stderr.starts_with("error: "), "{missing:?}");
    assert!(missing.stderr.contains("no such store file"), "{missing:?}");
    assert!(!path.exists(), "a typo created a store");
    // Through the environment too; and no store at all.
    let missing = run(&["stats".into()], Some(&path_arg));
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(!path.exists());
    let none = run(&["stats".into()], None);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.starts_with("error: no store"), "{none:?}");
}

#[test]
fn the_store_can_come_from_the_environment() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        let stats = run(&["--json".into(), "stats".into()], Some(&f.arg()));
        assert_eq!(stats.code, 0, "{kind:?}: {stats:?}");
        assert_eq!(stats.json()["counts"]["dead"], 1);
    }
}

#[test]
fn a_hostile_key_is_printed_as_data() {
    for kind in BOTH {
        let f = Fixture::new(kind);
        for args in [
            &["list"][..],
            &["list", "--handler", "mail"],
            &["show", HOSTILE],
            &["pause", HOSTILE],
        ] {
            let printed = f.cli(args).ok("hostile");
            assert!(
                !printed.stdout.contains('\u{1b}'),
                "{kind:?} {args:?}: raw ESC"
            );
            // No line of the output starts with the key's second line.
            assert!(
                printed
                    .stdout
                    .lines()
                    .all(|l| !l.starts_with("forged-line")),
                "{kind:?} {args:?}: a forged line: {}",
                printed.stdout
            );
            assert!(
                printed.stdout.contains(r"evil\nforged-line \u{1b}[31mred"),
                "{kind:?} {args:?}: {}",
                printed.stdout
            );
        }
        let listed = f.cli(&["list", "--handler", "mail"]).ok("list");
        assert_eq!(rows(&listed.stdout).len(), 2, "{kind:?}: {}", listed.stdout);
        // In JSON, the key is exactly itself (JSON escapes it).
        let listed = f.json(&["list", "--handler", "mail"]);
        assert!(keys(&listed).iter().any(|k| k == HOSTILE), "{kind:?}");
        assert!(f.jobs.job(HOSTILE).unwrap().unwrap().paused);
    }
}

/// Keys that differ by a newline against a backslash and an `n`, or by a
/// character that prints as nothing (a zero-width space), print
/// differently; the next-page hint of such a key, pasted into bash, is
/// the key itself.
#[test]
fn keys_that_differ_print_differently() {
    let f = Fixture::new(Kind::Sqlite);
    let keys = [
        "zz-a\nb",
        "zz-a\\nb",
        "zz-report-daily",
        "zz-report\u{200b}-daily",
    ];
    for key in keys {
        let later = Schedule::After(Duration::from_secs(30 * 86_400));
        f.jobs.schedule(key, "odd", b"", later).unwrap();
    }
    let listed = f.cli(&["list", "--handler", "odd"]).ok("list");
    let printed: Vec<&str> = rows(&listed.stdout)
        .iter()
        .map(|row| row.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        printed,
        [
            r"zz-a\nb",
            r"zz-a\\nb",
            "zz-report-daily",
            r"zz-report\u{200b}-daily"
        ],
        "{}",
        listed.stdout
    );
    // A page of one: the hint names the first key, quoted for bash.
    for (n, key) in keys.iter().enumerate() {
        let mut args = vec!["list", "--handler", "odd", "--limit", "1"];
        let after;
        if n > 0 {
            let page = f.json(&["list", "--handler", "odd", "--limit", &n.to_string()]);
            after = (
                page["next_page"]["after_key"].as_str().unwrap().to_owned(),
                page["next_page"]["after_time"].as_str().unwrap().to_owned(),
            );
            args.extend(["--after-key", &after.0, "--after-time", &after.1]);
        }
        let page = f.cli(&args).ok("a page of one");
        let hint = page
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("(a full page: the next one is --after-key "))
            .unwrap_or_else(|| panic!("no hint: {}", page.stdout));
        let quoted = hint.split(" --after-time ").next().unwrap();
        for locale in ["C", "C.UTF-8"] {
            let pasted = Command::new("bash")
                .args(["-c", &format!("printf %s {quoted}")])
                .env("LC_ALL", locale)
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8(pasted.stdout).unwrap(),
                *key,
                "{hint}, LC_ALL={locale}"
            );
        }
    }
}

/// The commands that only read work beside a writer that holds the
/// file's write lock (SQLite's WAL lets readers be): at once, not after
/// the five-second busy wait, and not with "database is locked".
#[test]
fn reading_commands_work_beside_a_writer() {
    let f = Fixture::new(Kind::Sqlite);
    let writer = rusqlite::Connection::open(f.store.path()).unwrap();
    writer
        .execute_batch("BEGIN IMMEDIATE; UPDATE chronopool_jobs SET attempt = attempt")
        .unwrap();
    for args in [
        &["list"][..],
        &["show", "report-daily"],
        &["stats"],
        &["--json", "list", "--handler", "report"],
    ] {
        let asked = std::time::Instant::now();
        let run = f.cli(args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "{args:?} waited {:?} for the writer",
            asked.elapsed()
        );
    }
    writer.execute_batch("ROLLBACK").unwrap();
}

/// The address a `serve` child prints on its first line.
fn served_at(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("the dashboard: http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned()
}

/// `serve`: the dashboard of the store, over HTTP, asking for its token.
#[test]
fn serve_serves_the_dashboard() {
    use std::io::{Read, Write};
    for kind in BOTH {
        let f = Fixture::new(kind);
        let mut child = Command::new(env!("CARGO_BIN_EXE_chronopool-durable"))
            .args(["--store", &f.arg(), "serve", "--bind", "127.0.0.1:0"])
            .env("CHRONOPOOL_DURABLE_TOKEN", "cli-token")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let addr = served_at(&mut child);
        let get = |target: &str, auth: bool| {
            let mut stream = std::net::TcpStream::connect(&addr).unwrap();
            let bearer = if auth {
                "Authorization: Bearer cli-token\r\n"
            } else {
                ""
            };
            write!(
                stream,
                "GET {target} HTTP/1.1\r\nHost: x\r\n{bearer}Connection: close\r\n\r\n"
            )
            .unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).unwrap();
            reply
        };
        assert!(get("/", false).starts_with("HTTP/1.1 401"), "{kind:?}");
        let listed = get("/jobs?handler=report", true);
        assert!(listed.starts_with("HTTP/1.1 200"), "{listed}");
        assert!(listed.contains("report-daily") && !listed.contains("mail-late"));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// `serve` outlives running out of file descriptors: idle connections
/// beyond its limit (`ulimit -n 64`) neither end the process nor stop it
/// answering once they are gone.
#[test]
fn serve_outlives_running_out_of_file_descriptors() {
    use std::io::{Read, Write};
    let f = Fixture::new(Kind::Sqlite);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_chronopool-durable"))
        .args(["--store", &f.arg(), "serve", "--bind", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr = served_at(&mut child);
    let idle: Vec<_> = (0..100)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    assert!(child.try_wait().unwrap().is_none(), "serve ended");
    drop(idle);
    let get = || {
        let mut stream = std::net::TcpStream::connect(&addr).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
            .write_all(b"GET /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).ok()?;
        Some(reply)
    };
    eventually("serve answers again", || {
        get().is_some_and(|r| r.starts_with("HTTP/1.1 200") && r.contains("report-daily"))
    });
    assert!(child.try_wait().unwrap().is_none(), "serve ended");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The CLI does not upgrade an older schema under the services (they would
/// not start again): it says so, and `--migrate` is the way.
#[test]
fn an_older_schema_is_not_upgraded_without_migrate() {
    let f = Fixture::new(Kind::Sqlite);
    // The file as a service of the version before would have left it.
    let c = rusqlite::Connection::open(f.store.path()).unwrap();
    let current: i64 = c
        .query_row("SELECT version FROM chronopool_schema", [], |r| r.get(0))
        .unwrap();
    c.execute("UPDATE chronopool_schema SET version = version - 1", [])
        .unwrap();
    let run = f.cli(&["list"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("older than this crate's"),
        "{}",
        run.stderr
    );
    let version: i64 = c
        .query_row("SELECT version FROM chronopool_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, current - 1, "nothing written");
}

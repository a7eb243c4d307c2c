//! Adversarial tests: a hostile user (odd configs, odd keys, handlers that
//! drop what runs them, storms of reschedules and cancels) and a hostile
//! world (a PostgreSQL server restarted, frozen or cutting connections, a
//! SQLite file deleted, the end of time). On both stores where it applies.
//!
//! Each test asserts what a reader of the crate's docs would expect. The
//! tests whose doc comment starts with **BUG** fail: they show a defect.

mod common;
mod stores;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chronopool::{ManualClock, MissedRuns, ScheduledExecutor};
use chronopool_durable::{
    Config, DurableError, DurableScheduler, Job, JobError, JobState, Schedule,
};
use common::PgServer;
use stores::{eventually, pool, real_config, Kind, Store, BOTH};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// A pool on a manual clock.
fn manual(clock: &ManualClock) -> ScheduledExecutor {
    ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// A config for a manual clock: a day's window, polled twice a day.
fn manual_config() -> Config {
    let mut config = Config::default();
    config.window = DAY;
    config.poll_interval = DAY / 2;
    config
}

/// Waits until `done` holds, for at most `limit` (a bound that tells a
/// job on time from one late by a poll interval or an `unhandled_wait`).
fn within(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < give_up, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every run of a handler: key, payload, attempt, due time.
type Runs = Arc<Mutex<Vec<(String, Vec<u8>, u32, SystemTime)>>>;

fn recording(jobs: &DurableScheduler, name: &str) -> Runs {
    let runs: Runs = Arc::default();
    let r = runs.clone();
    jobs.register(name, move |job| {
        r.lock().unwrap().push((
            job.key().to_owned(),
            job.payload().to_vec(),
            job.attempt(),
            job.due(),
        ));
        Ok(())
    });
    runs
}

fn runs_of(runs: &Runs, key: &str) -> usize {
    runs.lock().unwrap().iter().filter(|r| r.0 == key).count()
}

/// A scheduler on `store` that is never started: a client that only
/// schedules (as another process of the application would).
fn client(store: &Store, pool: &ScheduledExecutor) -> DurableScheduler {
    store.open(pool, real_config())
}

fn assert_identity(jobs: &DurableScheduler, what: &str) {
    let m = jobs.metrics();
    assert_eq!(
        m.claimed,
        m.succeeded + m.skipped + m.retried + m.dead + m.released + m.lost + m.running,
        "{what}: {m:?}"
    );
}

/// Runs `test` on each store, and fails with every store's failure.
fn on_both(test: impl Fn(Kind)) {
    let mut failed = Vec::new();
    for kind in BOTH {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| test(kind))) {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failed.push(format!("[{kind:?}] {message}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ---------------------------------------------------------------------
// Failing tests: bugs.
// ---------------------------------------------------------------------

/// **BUG** (both stores). At 9999-12-31T23:00Z (a `ManualClock`), a job
/// every 30 minutes runs at 23:30; its next occurrence, 00:00 of the year
/// 10000, cannot be stored. The docs: a computed time saturates at the end
/// of the range. Expected: at most one more run (at the last storable
/// instant), then no more. Found: the next fire time saturates to
/// 9999-12-31T23:59:59.999999, and run there it saturates there again, so
/// that one occurrence runs again and again without end (stopped here by a
/// fuse in the handler after 20 runs).
#[test]
fn a_recurring_job_past_the_last_storable_time_does_not_run_forever() {
    on_both(|kind| {
        let store = Store::new(kind);
        // 9999-12-31T23:00:00Z.
        let start = UNIX_EPOCH + Duration::from_secs(253_402_300_800 - 3600);
        let clock = ManualClock::starting_at(start);
        let pool = manual(&clock);
        let jobs = store.open(&pool, manual_config());
        let dues = Arc::new(Mutex::new(Vec::new()));
        let d = dues.clone();
        jobs.register("tick", move |job| {
            let mut dues = d.lock().unwrap();
            dues.push(job.due());
            if dues.len() >= 20 {
                return Err(JobError::permanent("fuse: ran 20 times"));
            }
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule("k", "tick", b"", Schedule::Every(Duration::from_secs(1800)))
            .unwrap();
        clock.advance(2 * HOUR);
        let dues = dues.lock().unwrap();
        assert!(
            dues.len() <= 2,
            "{kind:?}: {} runs; due times: {:?}",
            dues.len(),
            dues.iter().take(4).collect::<Vec<_>>()
        );
    });
}

/// **BUG** (both stores). Scheduler A has the handler "a" only; it places
/// job `k` (due in 1 s) in its timer. Another process then schedules `k`
/// again, same time, for the handler "b" (the job moved to another
/// service), which A lacks. The docs (`register`, `Config::unhandled_wait`):
/// a due job whose handler a scheduler lacks is left to the others for
/// `unhandled_wait` (60 s). Expected: `k` waits untouched, and B (with
/// "b"), started just after, runs it at once. Found: A's old placement
/// fires, A claims `k` anyway (a claim does not look at the handler's
/// name), finds no handler, and puts it back for `unhandled_wait` with a
/// `last_error`: B cannot run it for a minute.
#[test]
fn a_stale_placement_does_not_take_a_job_moved_to_another_handler() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool_a, pool_b, pool_c) = (pool(2), pool(2), pool(1));
        let a = store.open(&pool_a, real_config());
        let _runs_a = recording(&a, "a");
        a.start().unwrap();
        let at = SystemTime::now() + Duration::from_secs(1);
        a.schedule("k", "a", b"for a", Schedule::At(at)).unwrap();
        let other = client(&store, &pool_c);
        other
            .schedule("k", "b", b"for b", Schedule::At(at))
            .unwrap();
        while SystemTime::now() < at + Duration::from_millis(400) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let k = other.job("k").unwrap().unwrap();
        assert_eq!(
            (k.state, k.attempt, k.last_error.as_deref()),
            (JobState::Scheduled, 0, None),
            "{kind:?}: A touched a job of a handler it lacks before unhandled_wait"
        );
        assert!(
            k.next_fire < at + Duration::from_secs(1),
            "{kind:?}: put back"
        );
        let b = store.open(&pool_b, real_config());
        let runs_b = recording(&b, "b");
        b.start().unwrap();
        within(Duration::from_secs(5), "B runs k", || {
            runs_of(&runs_b, "k") == 1
        });
    });
}

/// **BUG** (both stores). `Config::concurrency = Some(usize::MAX)` ("the
/// most runs at once": no limit) passes validation. Expected: jobs run.
/// Found: once a handler has run, the run loop's `claimable` adds its
/// claim-ahead to `usize::MAX`: an overflow, so the run loop's thread
/// panics (in a debug build; a release build wraps to a small number) and
/// no job is ever claimed again.
#[test]
fn an_unlimited_concurrency_keeps_running_jobs() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.concurrency = Some(usize::MAX);
        let jobs = store.open(&pool, config);
        let runs = recording(&jobs, "work");
        jobs.start().unwrap();
        jobs.schedule("first", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        within(Duration::from_secs(10), "the first job runs", || {
            runs_of(&runs, "first") == 1
        });
        std::thread::sleep(Duration::from_millis(100));
        jobs.schedule("second", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        within(Duration::from_secs(10), "the second job runs", || {
            runs_of(&runs, "second") == 1
        });
    });
}

/// **BUG** (both stores). A pool of 1,200 workers (I/O-bound handlers)
/// runs 1,100 jobs at once, each for 3 s; the lease is 1 s, renewed every
/// third of it. Expected (docs: exactly once while nothing crashes or
/// stalls): each job runs once. Found: a renewal carries at most
/// `BATCH_LIMIT` (1,000) fences and the rest wait for the next renewal
/// period, where `HashMap` iteration picks the same 1,000 again: 100 runs
/// are never renewed, their leases end under them, and this scheduler's
/// own poll takes them over and runs them a second time.
#[test]
fn more_than_a_thousand_runs_at_once_keep_their_leases() {
    const JOBS: usize = 1_100;
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(JOBS + 100);
        let jobs = store.open(&pool, real_config());
        let runs: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let r = runs.clone();
        jobs.register("io", move |job| {
            *r.lock().unwrap().entry(job.key().to_owned()).or_default() += 1;
            std::thread::sleep(Duration::from_secs(3));
            Ok(())
        });
        let batch =
            (0..JOBS).map(|n| Job::new(format!("j{n}"), "io", "", Schedule::After(Duration::ZERO)));
        jobs.schedule_all(batch).unwrap();
        jobs.start().unwrap();
        eventually("every job ran and was stored", || {
            runs.lock().unwrap().len() == JOBS && jobs.metrics().running == 0
        });
        std::thread::sleep(Duration::from_millis(500));
        let runs = runs.lock().unwrap();
        let twice = runs.values().filter(|&&n| n > 1).count();
        let m = jobs.metrics();
        assert_eq!(
            (twice, m.lease_expired, m.lost),
            (0, 0, 0),
            "{kind:?}: jobs run twice, leases taken over, outcomes lost"
        );
        drop(runs);
        assert!(jobs.shutdown(Duration::from_secs(30)));
    });
}

/// **BUG** (PostgreSQL; SQLite passes). `register` takes any name; one
/// with a NUL byte is a name PostgreSQL's `text` cannot hold. Expected:
/// the other handlers' jobs run (that one handler's jobs may fail to be
/// stored). Found: every poll sends all the handlers' names to the server,
/// which refuses the whole query (SQLSTATE 22021), so no poll ever
/// succeeds and no job placed by a poll (scheduled by another process,
/// before `start`, or past the window) ever runs here.
#[test]
fn a_handler_name_with_a_nul_byte_stops_no_other_job() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool, pool_c) = (pool(2), pool(1));
        let other = client(&store, &pool_c);
        other
            .schedule("k", "ok", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        let jobs = store.open(&pool, real_config());
        let runs = recording(&jobs, "ok");
        jobs.register("bad\0name", |_| Ok(()));
        jobs.start().unwrap();
        within(
            Duration::from_secs(10),
            &format!("{kind:?}: k runs"),
            || runs_of(&runs, "k") == 1,
        );
        assert_eq!(jobs.metrics().store_errors, 0, "{kind:?}");
    });
}

/// **BUG** (PostgreSQL; SQLite passes). `Config::name` ("a readable name
/// for this scheduler, display only") with a NUL byte passes validation.
/// Expected: the scheduler is refused (`DurableError::Config` naming
/// `name`), or it works. Found: it opens and starts, and every claim (which
/// stores the name beside the run) is refused by PostgreSQL (SQLSTATE
/// 22021, a permanent error): no job ever runs.
#[test]
fn a_scheduler_name_with_a_nul_byte_is_refused_or_works() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.name = Some("web\0one".into());
        let opened = match &store.params {
            Some(params) => DurableScheduler::postgres(&pool, params, config),
            None => DurableScheduler::sqlite(&pool, store.path(), config),
        };
        match opened {
            Err(DurableError::Config { field: "name", .. }) => {}
            Err(e) => panic!("{kind:?}: not a config error: {e}"),
            Ok(jobs) => {
                let runs = recording(&jobs, "work");
                jobs.start().unwrap();
                jobs.schedule("k", "work", b"", Schedule::After(Duration::ZERO))
                    .unwrap();
                within(
                    Duration::from_secs(10),
                    &format!("{kind:?}: k runs"),
                    || runs_of(&runs, "k") == 1,
                );
            }
        }
    });
}

/// PIDs of the server's processes: the postmaster and its children.
fn server_pids(data: &Path) -> Vec<String> {
    let pid_file = std::fs::read_to_string(data.join("postmaster.pid")).unwrap();
    let postmaster = pid_file.lines().next().unwrap().trim().to_owned();
    let mut pids = vec![postmaster.clone()];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid = after.split(' ').nth(1).unwrap_or("");
        if ppid == postmaster {
            pids.push(name);
        }
    }
    pids
}

fn signal(pids: &[String], sig: &str) {
    for pid in pids {
        let _ = Command::new("kill").args([sig, pid]).status();
    }
}

/// **BUG** (PostgreSQL). The server freezes (SIGSTOP: a paused VM, a
/// partition that drops packets): the poll loop's query waits for an
/// answer. The docs: `shutdown(timeout)` waits up to `timeout`; dropping
/// the scheduler "does the same without waiting". Found: `shutdown` joins
/// the poll thread without a bound (`Threads::stop`), so `shutdown(1 s)`
/// (and `drop`) blocks for as long as the server is frozen.
#[test]
fn a_shutdown_does_not_wait_for_a_frozen_server() {
    let server = PgServer::start();
    let params = server.fresh_database();
    let pool = pool(2);
    let jobs = DurableScheduler::postgres(&pool, &params, real_config()).unwrap();
    jobs.register("work", |_| Ok(()));
    jobs.start().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let pids = server_pids(server.data());
    signal(&pids, "-STOP");
    // Polls every 100 ms: one is now waiting for the server.
    std::thread::sleep(Duration::from_millis(600));
    let (done_tx, done) = mpsc::channel();
    let stopping = std::thread::spawn(move || {
        let asked = Instant::now();
        let ended = jobs.shutdown(Duration::from_secs(1));
        done_tx.send(asked.elapsed()).unwrap();
        ended
    });
    let took = done.recv_timeout(Duration::from_secs(8));
    signal(&pids, "-CONT");
    let _ = stopping.join();
    assert!(
        took.is_ok_and(|took| took < Duration::from_secs(3)),
        "shutdown(1 s) returned after {took:?} (Err: not within 8 s; it returned once the server woke)"
    );
}

/// The pid of the run loop's session of the owner of `key`'s run: one of
/// those holding its session lock, the one named for the run loop.
fn run_loop_backend(params: &str, key: &str) -> Option<i32> {
    let mut c = postgres::Client::connect(params, postgres::NoTls).unwrap();
    c.query_opt(
        "SELECT l.pid FROM pg_locks AS l JOIN chronopool_jobs AS j
             ON ((l.classid::bigint << 32) | l.objid::bigint) = j.owner_lock
           JOIN pg_stat_activity AS a ON a.pid = l.pid
         WHERE j.key = $1 AND l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
           AND a.application_name = 'chronopool-durable runs'",
        &[&key],
    )
    .unwrap()
    .map(|r| r.get(0))
}

/// PostgreSQL. A's run of `k` is live: its handler runs for 4 s,
/// its 6 s lease renewed every 2 s. The server ends the session of A's run
/// loop (`pg_terminate_backend`; an admin, a proxy or `idle_session_timeout`
/// does the same); A's process lives on and reconnects at its next
/// exchange. The docs: exactly once while nothing crashes or stalls past
/// its lease; on PostgreSQL a *crashed* process's leases end early. (Found
/// once: B's poll saw A's session lock gone and ended A's live lease, so B
/// ran `k` a second time; then, under load, when A took longer than the
/// reap's second look to reconnect. A's poll session now holds the lock
/// too: one session cut alone leaves the owner alive.)
#[test]
fn a_cut_connection_does_not_let_another_scheduler_run_a_live_job_again() {
    let server = PgServer::shared();
    let params = server.fresh_database();
    let mut config = real_config();
    config.lease = Duration::from_secs(6);
    // The reap waits until the server has been up for a lease.
    {
        let mut c = postgres::Client::connect(&params, postgres::NoTls).unwrap();
        let up: f64 = c
            .query_one(
                "SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8",
                &[],
            )
            .unwrap()
            .get(0);
        if up < 7.0 {
            std::thread::sleep(Duration::from_secs_f64(7.0 - up));
        }
    }
    let (pool_a, pool_b) = (pool(2), pool(2));
    let a = DurableScheduler::postgres(&pool_a, &params, config.clone()).unwrap();
    let b = DurableScheduler::postgres(&pool_b, &params, config).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    for jobs in [&a, &b] {
        let r = runs.clone();
        jobs.register("work", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_secs(4));
            Ok(())
        });
    }
    a.start().unwrap();
    a.schedule("k", "work", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    eventually("k runs in A", || runs.load(Ordering::SeqCst) == 1);
    b.start().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pid = run_loop_backend(&params, "k").expect("A's run loop holds its lock");
    let mut c = postgres::Client::connect(&params, postgres::NoTls).unwrap();
    c.execute("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap();
    // Then its sessions cut again as soon as they take the lock, for a
    // second and a half: a run loop slow to reconnect (a loaded machine)
    // is still a live owner.
    let cutting = std::time::Instant::now();
    while cutting.elapsed() < Duration::from_millis(1_500) {
        if let Some(pid) = run_loop_backend(&params, "k") {
            c.execute("SELECT pg_terminate_backend($1)", &[&pid])
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(4));
    eventually("k is done", || a.job("k").unwrap().is_none());
    assert_eq!(
        (
            runs.load(Ordering::SeqCst),
            b.metrics().claimed,
            a.metrics().lost
        ),
        (1, 0, 0),
        "runs, B's claims, A's lost outcomes"
    );
}

/// **BUG** (both stores). `batch` is 1 and this scheduler runs one long
/// job; `poll_interval` 5 s, `window` 10 s, `lease` 1.5 s. Another process
/// schedules job `j` 7 s ahead. The docs (`poll_interval`: at most half
/// the window "so that no job is placed late"; `batch`: a full batch polls
/// again as soon as half of it is claimed). Expected: `j` runs at its
/// time. Found: the poll lists this scheduler's own live run first (its
/// lease ends within the window, earlier than `j`), which fills the batch
/// but is not placed; the follow-up it asks for is sent only when a
/// placement is dealt with, and none is: `j` is placed by the poll after
/// its time, 3 s late.
#[test]
fn own_live_runs_that_fill_the_batch_make_no_job_late() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool, pool_c) = (pool(2), pool(1));
        let mut config = real_config();
        config.batch = 1;
        config.window = Duration::from_secs(10);
        config.poll_interval = Duration::from_secs(5);
        config.lease = Duration::from_millis(1500);
        let jobs = store.open(&pool, config);
        let (release_tx, release) = mpsc::channel::<()>();
        let release = Mutex::new(release);
        jobs.register("long", move |_| {
            let _ = release
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(30));
            Ok(())
        });
        let ran_at = Arc::new(Mutex::new(None));
        let r = ran_at.clone();
        jobs.register("quick", move |_| {
            *r.lock().unwrap() = Some(SystemTime::now());
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule("long", "long", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let due = SystemTime::now() + Duration::from_secs(7);
        client(&store, &pool_c)
            .schedule("j", "quick", b"", Schedule::At(due))
            .unwrap();
        eventually("j runs", || ran_at.lock().unwrap().is_some());
        release_tx.send(()).unwrap();
        let late = ran_at
            .lock()
            .unwrap()
            .unwrap()
            .duration_since(due)
            .unwrap_or_default();
        assert!(
            late < Duration::from_secs(1),
            "{kind:?}: j ran {late:?} late"
        );
    });
}

/// **BUG** (SQLite; PostgreSQL passes). A scheduler with more handlers
/// than SQLite has statement variables (32,766): each poll names them all
/// in one statement, which SQLite refuses ("too many SQL variables"), so no
/// poll ever succeeds and no job another process scheduled runs here.
#[test]
fn thirty_three_thousand_handlers_still_poll() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool, pool_c) = (pool(2), pool(1));
        client(&store, &pool_c)
            .schedule("k", "h0", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        let jobs = store.open(&pool, real_config());
        let runs = recording(&jobs, "h0");
        for n in 1..33_000 {
            jobs.register(&format!("h{n}"), |_| Ok(()));
        }
        jobs.start().unwrap();
        within(
            Duration::from_secs(10),
            &format!("{kind:?}: k runs"),
            || runs_of(&runs, "k") == 1,
        );
    });
}

// ---------------------------------------------------------------------
// Passing tests: behaviour that holds, guarded.
// ---------------------------------------------------------------------

/// `start` twice, and from eight threads at once, starts one engine: a job
/// runs once and is claimed once. After `shutdown`, `start` is an error; a
/// job scheduled then is stored, not run here, and the next scheduler on
/// the store runs it.
#[test]
fn start_again_is_a_no_op_and_a_shut_down_scheduler_stays_down() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = recording(&jobs, "work");
        jobs.start().unwrap();
        jobs.start().unwrap();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| jobs.start().unwrap());
            }
        });
        jobs.schedule("k", "work", b"", Schedule::After(Duration::from_millis(50)))
            .unwrap();
        eventually("k runs", || {
            runs_of(&runs, "k") == 1 && jobs.metrics().running == 0
        });
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!((runs_of(&runs, "k"), jobs.metrics().claimed), (1, 1));
        assert!(jobs.shutdown(Duration::from_secs(10)));
        assert!(
            jobs.shutdown(Duration::from_secs(10)),
            "again: nothing to wait for"
        );
        assert!(matches!(jobs.start(), Err(DurableError::Executor(_))));
        jobs.schedule("later", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(runs_of(&runs, "later"), 0, "not run by a stopped scheduler");
        assert_eq!(
            jobs.job("later").unwrap().unwrap().state,
            JobState::Scheduled
        );
        let next = store.open(&pool, real_config());
        let next_runs = recording(&next, "work");
        next.start().unwrap();
        eventually("the next scheduler runs it", || {
            runs_of(&next_runs, "later") == 1
        });
    });
}

/// A handler registered after `start` (against the advice, not forbidden):
/// its due jobs are placed by the next poll and run, as attempt 1, without
/// an error recorded.
#[test]
fn a_handler_registered_after_start_runs_its_jobs() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool, pool_c) = (pool(2), pool(1));
        client(&store, &pool_c)
            .schedule("k", "late", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        let jobs = store.open(&pool, real_config());
        jobs.start().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let runs = recording(&jobs, "late");
        within(Duration::from_secs(3), "k runs", || {
            runs_of(&runs, "k") == 1
        });
        assert_eq!(runs.lock().unwrap()[0].2, 1, "attempt 1");
        assert_eq!(jobs.metrics().retried, 0);
    });
}

/// A handler that drops the last handle of its own scheduler (a recurring
/// job): no deadlock, the run's outcome is stored (the job is scheduled
/// again, attempt 0, not left running), nothing runs afterwards here, and
/// the executor's workers live on.
#[test]
fn a_handler_that_drops_its_own_scheduler_stores_its_outcome() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool, pool_c) = (pool(2), pool(1));
        let holder: Arc<Mutex<Option<DurableScheduler>>> = Arc::default();
        let jobs = store.open(&pool, real_config());
        let runs = Arc::new(AtomicUsize::new(0));
        let (h, r) = (holder.clone(), runs.clone());
        jobs.register("drop-me", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            let me = h.lock().unwrap().take();
            drop(me);
            Ok(())
        });
        jobs.start().unwrap();
        {
            let mut held = holder.lock().unwrap();
            *held = Some(jobs);
            held.as_ref()
                .unwrap()
                .schedule(
                    "k",
                    "drop-me",
                    b"",
                    Schedule::Every(Duration::from_millis(50)),
                )
                .unwrap();
        }
        eventually("the handler dropped it", || {
            holder.lock().unwrap().is_none()
        });
        let other = client(&store, &pool_c);
        eventually("its outcome is stored", || {
            other.job("k").unwrap().unwrap().state == JobState::Scheduled
        });
        let k = other.job("k").unwrap().unwrap();
        assert_eq!((k.attempt, k.last_error, k.owner_name), (0, None, None));
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "nothing runs after the drop"
        );
        assert_eq!(pool.submit(|| 6 * 7).unwrap().join().unwrap(), 42);
    });
}

/// A handler that drops the last handle of the executor it runs on: the
/// executor shuts down (from its own worker: nothing joined), the run's
/// outcome is stored all the same, nothing more is claimed, and the
/// scheduler's API and `shutdown` still work.
#[test]
fn a_handler_that_drops_the_last_executor_handle_stores_its_outcome() {
    on_both(|kind| {
        let store = Store::new(kind);
        let holder = Arc::new(Mutex::new(Some(pool(2))));
        let jobs = store.open(holder.lock().unwrap().as_ref().unwrap(), real_config());
        let runs = Arc::new(AtomicUsize::new(0));
        let (h, r) = (holder.clone(), runs.clone());
        jobs.register("drop-pool", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            let pool = h.lock().unwrap().take();
            drop(pool);
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule(
            "k",
            "drop-pool",
            b"",
            Schedule::Every(Duration::from_millis(50)),
        )
        .unwrap();
        eventually("the pool is dropped", || holder.lock().unwrap().is_none());
        eventually("the outcome is stored", || {
            let k = jobs.job("k").unwrap().unwrap();
            k.state == JobState::Scheduled && jobs.metrics().running == 0
        });
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let m = jobs.metrics();
        assert_eq!((m.claimed, m.succeeded, m.running), (1, 1, 0), "{m:?}");
        jobs.schedule("x", "drop-pool", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        assert!(jobs.job("x").unwrap().is_some());
        assert!(jobs.shutdown(Duration::from_secs(10)));
    });
}

/// Captures whose `Drop` panics (not while unwinding).
struct Bomb(Arc<AtomicUsize>);

impl Drop for Bomb {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        if !std::thread::panicking() {
            panic!("expected: the replaced handler's captures panic when dropped");
        }
    }
}

/// A handler whose captures panic when dropped, replaced by `register`
/// while it runs (its last reference is then the run's, dropped on the
/// worker) and while it does not (dropped in `register`, whose caller sees
/// the panic): the run's outcome is stored, the new handler runs the next
/// jobs, and the workers live on.
#[test]
fn a_replaced_handler_whose_captures_panic_on_drop_harms_nothing() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let drops = Arc::new(AtomicUsize::new(0));
        let (started_tx, started) = mpsc::channel::<()>();
        let (release_tx, release) = mpsc::channel::<()>();
        let (started_tx, release) = (Mutex::new(started_tx), Mutex::new(release));
        let bomb = Bomb(drops.clone());
        jobs.register("h", move |_| {
            let _ = &bomb;
            started_tx.lock().unwrap().send(()).unwrap();
            let _ = release
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(20));
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule("a", "h", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        started.recv_timeout(Duration::from_secs(10)).unwrap();
        let second = recording(&jobs, "h");
        release_tx.send(()).unwrap();
        eventually("the old handler is dropped and a's outcome stored", || {
            drops.load(Ordering::SeqCst) == 1 && jobs.job("a").unwrap().is_none()
        });
        jobs.schedule("b", "h", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the new handler runs b", || runs_of(&second, "b") == 1);
        // Replaced while idle: the drop (and its panic) is in `register`.
        let bomb = Bomb(drops.clone());
        jobs.register("h", move |_| {
            let _ = &bomb;
            Ok(())
        });
        let _ = catch_unwind(AssertUnwindSafe(|| recording(&jobs, "h")));
        let third = recording(&jobs, "h");
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        jobs.schedule("c", "h", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the last handler runs c", || runs_of(&third, "c") == 1);
        assert_eq!(pool.submit(|| 7).unwrap().join().unwrap(), 7);
        // c's outcome is stored (and counted) after its handler returned.
        eventually("c's outcome is stored", || jobs.metrics().running == 0);
        let m = jobs.metrics();
        assert_eq!((m.succeeded, m.retried, m.lost), (3, 0, 0), "{m:?}");
    });
}

/// A handler blocks; its scheduler is dropped. The drop returns at once;
/// the run goes on, its lease renewed by the run thread left behind, so a
/// second scheduler polling for five leases never takes the job; once the
/// handler returns, its outcome is stored.
#[test]
fn a_blocked_handler_keeps_its_job_after_its_scheduler_is_dropped() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool_a, pool_b) = (pool(2), pool(2));
        let mut config = real_config();
        config.lease = Duration::from_millis(600);
        let a = store.open(&pool_a, config.clone());
        let (started_tx, started) = mpsc::channel::<()>();
        let (release_tx, release) = mpsc::channel::<()>();
        let (started_tx, release) = (Mutex::new(started_tx), Mutex::new(release));
        a.register("block", move |_| {
            started_tx.lock().unwrap().send(()).unwrap();
            let _ = release
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(30));
            Ok(())
        });
        a.start().unwrap();
        a.schedule("k", "block", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        started.recv_timeout(Duration::from_secs(10)).unwrap();
        let dropping = Instant::now();
        drop(a);
        assert!(dropping.elapsed() < Duration::from_secs(1), "{kind:?}");
        let b = store.open(&pool_b, config);
        let runs_b = recording(&b, "block");
        b.start().unwrap();
        std::thread::sleep(Duration::from_secs(3));
        let k = b.job("k").unwrap().unwrap();
        assert_eq!(k.state, JobState::Running, "{kind:?}");
        assert!(k.lease_until.unwrap() > SystemTime::now(), "renewed");
        assert_eq!((b.metrics().claimed, runs_of(&runs_b, "k")), (0, 0));
        release_tx.send(()).unwrap();
        eventually("the outcome is stored", || b.job("k").unwrap().is_none());
        assert_eq!(b.metrics().claimed, 0);
    });
}

/// Every `Duration` setting at `Duration::MAX` and at zero, `batch` and
/// `max_attempts` at their ends: refused as `DurableError::Config` naming
/// the field, or accepted.
#[test]
fn each_config_setting_at_its_extremes_is_refused_by_name_or_accepted() {
    type Case = (&'static str, Option<&'static str>, fn(&mut Config));
    let cases: Vec<Case> = vec![
        ("window MAX", Some("window"), |c| c.window = Duration::MAX),
        ("window 0", Some("window"), |c| c.window = Duration::ZERO),
        ("poll MAX", Some("poll_interval"), |c| {
            c.poll_interval = Duration::MAX
        }),
        ("poll 0", Some("poll_interval"), |c| {
            c.poll_interval = Duration::ZERO
        }),
        ("lease MAX", Some("lease"), |c| c.lease = Duration::MAX),
        ("lease 0", Some("lease"), |c| c.lease = Duration::ZERO),
        ("unhandled MAX", Some("unhandled_wait"), |c| {
            c.unhandled_wait = Duration::MAX
        }),
        ("unhandled 0", Some("unhandled_wait"), |c| {
            c.unhandled_wait = Duration::ZERO
        }),
        ("keep_done MAX", Some("keep_done"), |c| {
            c.keep_done = Duration::MAX
        }),
        ("keep_done 0", None, |c| c.keep_done = Duration::ZERO),
        ("keep_dead MAX", Some("keep_dead"), |c| {
            c.keep_dead = Duration::MAX
        }),
        ("keep_dead 0", None, |c| c.keep_dead = Duration::ZERO),
        ("batch 0", Some("batch"), |c| c.batch = 0),
        ("batch MAX", Some("batch"), |c| c.batch = usize::MAX),
        ("batch 1", None, |c| c.batch = 1),
        ("attempts 0", Some("max_attempts"), |c| c.max_attempts = 0),
        ("attempts MAX", None, |c| c.max_attempts = u32::MAX),
        ("concurrency 0", Some("concurrency"), |c| {
            c.concurrency = Some(0)
        }),
        ("retry MAX", None, |c| {
            c.retry =
                chronopool::trigger::Backoff::exponential(Duration::MAX, f64::MAX, Duration::MAX)
        }),
    ];
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(1);
        for (what, refused, set) in &cases {
            let mut config = Config::default();
            set(&mut config);
            let opened = match &store.params {
                Some(params) => DurableScheduler::postgres(&pool, params, config),
                None => DurableScheduler::sqlite(&pool, store.path(), config),
            };
            match (opened, refused) {
                (Ok(_), None) => {}
                (Err(DurableError::Config { field, .. }), Some(name)) if field == *name => {}
                (Ok(_), Some(name)) => panic!("{what}: accepted, expected refused as {name}"),
                (Err(e), _) => panic!("{what}: {e}"),
            }
        }
    });
}

/// The largest settings a store can hold (9,000 years of window, lease,
/// waits and retention; a poll every 4,500 years; a million-job batch;
/// `u32::MAX` attempts) work: jobs run, recur, fail and are retried, and
/// are kept; nothing panics or overflows.
#[test]
fn the_largest_storable_settings_work() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let eon = Duration::from_secs(9_000 * 365 * 86_400);
        let mut config = Config::default();
        config.window = eon;
        config.poll_interval = eon / 2;
        config.lease = eon;
        config.unhandled_wait = eon;
        config.keep_done = eon;
        config.keep_dead = eon;
        config.batch = 1_000_000;
        config.max_attempts = u32::MAX;
        config.retry = chronopool::trigger::Backoff::exponential(
            Duration::from_millis(10),
            1.0,
            Duration::from_millis(10),
        );
        let jobs = store.open(&pool, config);
        let runs = recording(&jobs, "work");
        let fails = Arc::new(AtomicUsize::new(0));
        let f = fails.clone();
        jobs.register("fail", move |_| {
            f.fetch_add(1, Ordering::SeqCst);
            Err("again".into())
        });
        jobs.start().unwrap();
        jobs.schedule("now", "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        jobs.schedule(
            "tick",
            "work",
            b"",
            Schedule::Every(Duration::from_millis(20)),
        )
        .unwrap();
        jobs.schedule("fail", "fail", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        jobs.schedule("next-year", "work", b"", Schedule::After(365 * DAY))
            .unwrap();
        eventually("they run", || {
            runs_of(&runs, "now") == 1
                && runs_of(&runs, "tick") >= 10
                && fails.load(Ordering::SeqCst) >= 10
        });
        assert_eq!(jobs.job("now").unwrap().unwrap().state, JobState::Done);
        assert_eq!(runs_of(&runs, "next-year"), 0);
        let fail = jobs.job("fail").unwrap().unwrap();
        assert!(
            fail.state != JobState::Dead && fail.attempt >= 9,
            "{fail:?}"
        );
        assert!(jobs.shutdown(Duration::from_secs(10)));
    });
}

/// Cron expressions that never fire are refused (no hang, nothing
/// stored); one that fires every second fires 60 times in a manual minute,
/// each at its second.
#[test]
fn cron_that_never_fires_is_refused_and_every_second_fires_every_second() {
    on_both(|kind| {
        let store = Store::new(kind);
        let clock = ManualClock::new();
        let pool = manual(&clock);
        let jobs = store.open(&pool, manual_config());
        let seen: Arc<Mutex<Vec<(SystemTime, SystemTime)>>> = Arc::default();
        let (s, c) = (seen.clone(), clock.clone());
        jobs.register("tick", move |job| {
            s.lock().unwrap().push((job.due(), c.system_time()));
            Ok(())
        });
        jobs.start().unwrap();
        for never in ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *"] {
            let (tx, rx) = mpsc::channel();
            std::thread::scope(|s| {
                s.spawn(|| {
                    let stored = Schedule::cron(never, "UTC")
                        .and_then(|cron| jobs.schedule("never", "tick", b"", cron));
                    tx.send(stored).unwrap();
                });
                let stored = rx
                    .recv_timeout(Duration::from_secs(20))
                    .unwrap_or_else(|_| panic!("{never}: hangs"));
                assert!(
                    matches!(stored, Err(DurableError::Schedule(_))),
                    "{never}: {stored:?}"
                );
            });
        }
        assert!(jobs.job("never").unwrap().is_none());
        let every_second = Schedule::cron("* * * * * *", "UTC").unwrap();
        jobs.schedule("second", "tick", b"", every_second).unwrap();
        let start = clock.system_time();
        clock.advance(Duration::from_secs(60));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 60);
        for (n, (due, ran)) in seen.iter().enumerate() {
            assert_eq!(*due, start + Duration::from_secs(n as u64 + 1));
            assert_eq!(ran, due);
        }
    });
}

/// Keys and names with quotes, SQL, Unicode, an empty key, a NUL byte, a
/// megabyte; payloads with NUL bytes and of 16 MB. Each job is either
/// stored and run once with exactly its key, name and payload, or refused
/// with a store error and nothing stored (PostgreSQL's `text` holds no NUL
/// byte, and its index no megabyte key); SQLite stores them all. After all
/// that, the scheduler still works.
#[test]
fn odd_keys_names_and_payloads_run_exactly_or_are_refused() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let big_name = "n".repeat(1 << 20);
        let names = [
            "plain".to_owned(),
            "'; DROP TABLE chronopool_jobs; --".to_owned(),
            "ünïcödé 🎉 \\ % _".to_owned(),
            big_name.clone(),
        ];
        let runs: Runs = Arc::default();
        for name in &names {
            let r = runs.clone();
            jobs.register(name, move |job| {
                r.lock().unwrap().push((
                    format!("{}|{}", job.key(), job.name()),
                    job.payload().to_vec(),
                    job.attempt(),
                    job.due(),
                ));
                Ok(())
            });
        }
        jobs.start().unwrap();
        let huge: Vec<u8> = (0..16u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let cases: Vec<(String, String, Vec<u8>)> = vec![
            (
                "'; DROP TABLE chronopool_jobs; --".into(),
                names[1].clone(),
                b"x".to_vec(),
            ),
            (
                "\"double\" 'single' `back`".into(),
                names[0].clone(),
                b"\0\0\0".to_vec(),
            ),
            ("ünïcödé 🎉 \\ % _".into(), names[2].clone(), "ünï".into()),
            (String::new(), names[0].clone(), Vec::new()),
            ("nul\0key".into(), names[0].clone(), b"nul".to_vec()),
            ("k".repeat(1 << 20), names[0].clone(), b"big key".to_vec()),
            ("big-name".into(), big_name.clone(), b"big name".to_vec()),
            ("huge-payload".into(), names[0].clone(), huge.clone()),
        ];
        let mut refused = Vec::new();
        for (key, name, payload) in &cases {
            let short = key.chars().take(20).collect::<String>();
            match jobs.schedule(key, name, payload, Schedule::After(Duration::ZERO)) {
                Ok(()) => {
                    let id = format!("{key}|{name}");
                    within(Duration::from_secs(20), &format!("{short:?} runs"), || {
                        runs_of(&runs, &id) == 1
                    });
                    let runs = runs.lock().unwrap();
                    let run = runs.iter().find(|r| r.0 == id).unwrap();
                    assert!(run.1 == *payload, "{short:?}: the payload as given");
                    drop(runs);
                    eventually("gone", || jobs.job(key).unwrap().is_none());
                }
                Err(DurableError::Store(e)) => {
                    refused.push(short.clone());
                    assert!(
                        !matches!(jobs.job(key), Ok(Some(_))),
                        "{short:?}: refused ({e}) but stored"
                    );
                }
                Err(e) => panic!("{short:?}: {e}"),
            }
        }
        match kind {
            Kind::Sqlite => assert!(refused.is_empty(), "{refused:?}"),
            Kind::Postgres => assert!(refused.contains(&"nul\0key".to_owned()), "{refused:?}"),
        }
        // A batch with one key PostgreSQL refuses is stored whole or not at all.
        let batch = [
            Job::new("batch-ok", "plain", "", Schedule::After(HOUR)),
            Job::new("batch\0nul", "plain", "", Schedule::After(HOUR)),
        ];
        let stored = jobs.schedule_all(batch);
        assert_eq!(
            stored.is_ok(),
            jobs.job("batch-ok").unwrap().is_some(),
            "all or nothing: {stored:?}"
        );
        jobs.schedule("after", "plain", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        within(Duration::from_secs(10), "still works", || {
            runs_of(&runs, "after|plain") == 1
        });
    });
}

/// Hourly, cron (UTC and Europe/Berlin) and one-shot jobs over a manual
/// day that starts at `start`: each fires at its time, once, the handler
/// told the right due time.
fn a_day_of_jobs_from(kind: Kind, start: SystemTime) {
    let store = Store::new(kind);
    let clock = ManualClock::starting_at(start);
    let pool = manual(&clock);
    let jobs = store.open(&pool, manual_config());
    let seen: Arc<Mutex<Vec<(String, SystemTime, SystemTime)>>> = Arc::default();
    let (s, c) = (seen.clone(), clock.clone());
    jobs.register("tick", move |job| {
        s.lock()
            .unwrap()
            .push((job.key().to_owned(), job.due(), c.system_time()));
        Ok(())
    });
    jobs.start().unwrap();
    jobs.schedule("hourly", "tick", b"", Schedule::Every(HOUR))
        .unwrap();
    let cron = Schedule::cron("0 * * * *", "UTC").unwrap();
    jobs.schedule("cron", "tick", b"", cron).unwrap();
    let berlin = Schedule::cron("30 2 * * *", "Europe/Berlin").unwrap();
    jobs.schedule("berlin", "tick", b"", berlin).unwrap();
    let once_at = start + Duration::from_secs(5_400);
    jobs.schedule("once", "tick", b"", Schedule::At(once_at))
        .unwrap();
    clock.advance(DAY);
    let seen = seen.lock().unwrap();
    let count = |key: &str| seen.iter().filter(|s| s.0 == key).count();
    assert_eq!(
        (
            count("hourly"),
            count("cron"),
            count("berlin"),
            count("once")
        ),
        (24, 24, 1, 1),
        "{kind:?}: runs of hourly, cron, berlin, once over a day from {start:?}"
    );
    for (key, due, ran) in seen.iter() {
        assert_eq!(due, ran, "{key} at {start:?}");
    }
    let hourly: Vec<_> = seen
        .iter()
        .filter(|s| s.0 == "hourly")
        .map(|s| s.1)
        .collect();
    for (n, due) in hourly.iter().enumerate() {
        assert_eq!(*due, start + HOUR * (n as u32 + 1));
    }
    assert!(seen.iter().any(|s| s.0 == "once" && s.1 == once_at));
}

/// A manual clock that starts in 2600: every job fires on time.
#[test]
fn jobs_run_on_time_in_2600() {
    let year_2600 = UNIX_EPOCH + Duration::from_secs(19_880_899_200);
    on_both(|kind| a_day_of_jobs_from(kind, year_2600));
}

/// Both stores. A manual clock that starts in 1900 (the docs: times from
/// the year 1, "dates before 1970 are times like any other"): hourly, cron
/// and one-shot jobs fire over a day. (Found once: none fired. The durable
/// crate places each job with `ScheduledExecutor::schedule_at_system_time`,
/// and the core clamped a wall time before 1970 to the epoch, so when the
/// placement fell due its wall time read 1970-01-01 and it was put back to
/// wait for 1970; the core now holds any `SystemTime`.)
#[test]
fn jobs_run_on_time_in_1900() {
    let year_1900 = UNIX_EPOCH - Duration::from_secs(2_208_988_800);
    on_both(|kind| a_day_of_jobs_from(kind, year_1900));
}

/// A manual year with 2,040 jobs: 2,000 one-shots spread over it, 20 daily
/// and 20 weekly (cron, Mondays in Berlin). Every occurrence runs once, at
/// its time; the metrics add up.
#[test]
fn a_manual_year_with_thousands_of_jobs_runs_each_occurrence_once_on_time() {
    on_both(|kind| {
        let store = Store::new(kind);
        let clock = ManualClock::new();
        let pool = manual(&clock);
        let jobs = store.open(&pool, manual_config());
        let seen: Arc<Mutex<Vec<(String, SystemTime, SystemTime)>>> = Arc::default();
        let (s, c) = (seen.clone(), clock.clone());
        jobs.register("tick", move |job| {
            s.lock()
                .unwrap()
                .push((job.key().to_owned(), job.due(), c.system_time()));
            Ok(())
        });
        jobs.start().unwrap();
        let start = clock.system_time();
        let mut batch = Vec::new();
        for n in 0..2_000u32 {
            let at =
                start + Duration::from_secs(15_768) * n + Duration::from_micros(u64::from(n) + 1);
            batch.push(Job::new(format!("once-{n}"), "tick", "", Schedule::At(at)));
        }
        for n in 0..20 {
            batch.push(Job::new(
                format!("daily-{n}"),
                "tick",
                "",
                Schedule::Every(DAY),
            ));
            let weekly = Schedule::cron("0 9 * * 1", "Europe/Berlin").unwrap();
            batch.push(Job::new(format!("weekly-{n}"), "tick", "", weekly));
        }
        jobs.schedule_all(batch).unwrap();
        clock.advance(365 * DAY);
        let seen = seen.lock().unwrap();
        let mut per_key: HashMap<&str, usize> = HashMap::new();
        for (key, due, ran) in seen.iter() {
            *per_key.entry(key).or_default() += 1;
            assert_eq!(due, ran, "{key}: on time");
        }
        for n in 0..2_000 {
            assert_eq!(per_key.get(format!("once-{n}").as_str()), Some(&1));
        }
        for n in 0..20 {
            assert_eq!(per_key.get(format!("daily-{n}").as_str()), Some(&365));
            assert_eq!(per_key.get(format!("weekly-{n}").as_str()), Some(&52));
        }
        let m = jobs.metrics();
        let total = 2_000 + 20 * 365 + 20 * 52;
        assert_eq!(seen.len(), total);
        assert_eq!(
            (m.claimed, m.succeeded, m.lost, m.retried, m.running),
            (total as u64, total as u64, 0, 0, 0),
            "{m:?}"
        );
    });
}

/// Ten hours of downtime (no scheduler runs; a manual clock), then a
/// scheduler: each `MissedRuns` policy and catch-up window does what the
/// docs say. Burst runs all ten missed hourly occurrences (cron too), Skip
/// one and keeps the grid, Delay one and shifts; an occurrence later than
/// its catch-up window is skipped and the job goes on at its next
/// occurrence after now (Burst included), a one-shot one is done.
#[test]
fn missed_runs_and_catch_up_windows_after_a_long_downtime() {
    on_both(|kind| {
        let store = Store::new(kind);
        let clock = ManualClock::new();
        let t0 = clock.system_time();
        {
            let pool = manual(&clock);
            let jobs = store.open(&pool, manual_config());
            let every = || Schedule::Every(HOUR);
            let cron = || Schedule::cron("0 * * * *", "UTC").unwrap();
            jobs.schedule_all([
                Job::new("burst", "t", "", every()).missed_runs(MissedRuns::Burst),
                Job::new("skip", "t", "", every()).missed_runs(MissedRuns::Skip),
                Job::new("delay", "t", "", every()).missed_runs(MissedRuns::Delay),
                Job::new("cron-burst", "t", "", cron()).missed_runs(MissedRuns::Burst),
                Job::new("burst-3h", "t", "", every())
                    .missed_runs(MissedRuns::Burst)
                    .catch_up(3 * HOUR),
                Job::new("skip-3h", "t", "", every()).catch_up(3 * HOUR),
                Job::new("once", "t", "", Schedule::At(t0 + 2 * HOUR)),
                Job::new("once-1h", "t", "", Schedule::At(t0 + 2 * HOUR)).catch_up(HOUR),
            ])
            .unwrap();
        }
        clock.advance(10 * HOUR + HOUR / 2);
        let pool = manual(&clock);
        let jobs = store.open(&pool, manual_config());
        let seen: Arc<Mutex<Vec<(String, SystemTime)>>> = Arc::default();
        let s = seen.clone();
        jobs.register("t", move |job| {
            s.lock().unwrap().push((job.key().to_owned(), job.due()));
            Ok(())
        });
        jobs.start().unwrap();
        clock.advance(Duration::ZERO);
        let count = |key: &str| seen.lock().unwrap().iter().filter(|s| s.0 == key).count();
        let next = |key: &str| jobs.job(key).unwrap().map(|j| j.next_fire);
        let counts = |keys: &[&str]| keys.iter().map(|k| count(k)).collect::<Vec<_>>();
        let keys = [
            "burst",
            "skip",
            "delay",
            "cron-burst",
            "burst-3h",
            "skip-3h",
            "once",
            "once-1h",
        ];
        assert_eq!(
            counts(&keys),
            [10, 1, 1, 10, 0, 0, 1, 0],
            "after the downtime"
        );
        assert_eq!(next("burst"), Some(t0 + 11 * HOUR));
        assert_eq!(next("skip"), Some(t0 + 11 * HOUR));
        assert_eq!(next("delay"), Some(t0 + 11 * HOUR + HOUR / 2));
        assert_eq!(next("burst-3h"), Some(t0 + 11 * HOUR));
        assert_eq!(next("skip-3h"), Some(t0 + 11 * HOUR));
        assert_eq!((next("once"), next("once-1h")), (None, None));
        assert_eq!(jobs.metrics().skipped, 3);
        clock.advance(HOUR);
        assert_eq!(counts(&keys), [11, 2, 2, 11, 1, 1, 1, 0], "an hour later");
    });
}

/// Three threads (two schedulers on one store) schedule and cancel one key
/// in a tight loop while it runs, each schedule with a payload of its own;
/// then a last schedule. No payload runs twice, the last one runs exactly
/// once, nothing is left running, and each scheduler's metrics add up.
#[test]
fn a_storm_of_reschedules_and_cancels_of_one_key() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool_a, pool_b) = (pool(2), pool(2));
        let a = store.open(&pool_a, real_config());
        let b = store.open(&pool_b, real_config());
        let runs = Arc::new(Mutex::new(Vec::<String>::new()));
        for jobs in [&a, &b] {
            let r = runs.clone();
            jobs.register("work", move |job| {
                r.lock()
                    .unwrap()
                    .push(String::from_utf8(job.payload().to_vec()).unwrap());
                Ok(())
            });
            jobs.start().unwrap();
        }
        std::thread::scope(|s| {
            for t in 0..3 {
                let (a, b) = (&a, &b);
                s.spawn(move || {
                    for i in 0..300u64 {
                        let jobs = if (t + i) % 2 == 0 { a } else { b };
                        if i % 7 == 3 {
                            jobs.cancel("k").unwrap();
                        } else {
                            let delay = Duration::from_micros(i * 37 % 3_000);
                            jobs.schedule("k", "work", format!("{t}-{i}"), Schedule::After(delay))
                                .unwrap();
                        }
                    }
                });
            }
        });
        a.schedule("k", "work", "last", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the last one runs and nothing is left", || {
            runs.lock().unwrap().iter().any(|p| p == "last")
                && a.job("k").unwrap().is_none()
                && a.metrics().running == 0
                && b.metrics().running == 0
        });
        std::thread::sleep(Duration::from_millis(300));
        let runs = runs.lock().unwrap();
        let mut count: HashMap<&str, usize> = HashMap::new();
        for p in runs.iter() {
            *count.entry(p).or_default() += 1;
        }
        let twice: Vec<_> = count.iter().filter(|(_, &n)| n > 1).collect();
        assert!(twice.is_empty(), "{kind:?}: run twice: {twice:?}");
        assert_eq!(count.get("last"), Some(&1));
        for (name, jobs) in [("a", &a), ("b", &b)] {
            assert_identity(jobs, name);
            let m = jobs.metrics();
            assert_eq!((m.released, m.retried, m.dead), (0, 0, 0), "{name}: {m:?}");
        }
    });
}

/// `retry` of a running job is false (it is not dead) and leaves it
/// running; `cancel` of it is true, the run ends storing nothing (lost),
/// and it is not run again. Four threads retrying one dead job at once:
/// each revival runs it exactly once more.
#[test]
fn retry_and_cancel_of_a_running_job() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let (started_tx, started) = mpsc::channel::<()>();
        let (release_tx, release) = mpsc::channel::<()>();
        let (started_tx, release) = (Mutex::new(started_tx), Mutex::new(release));
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        jobs.register("block", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            started_tx.lock().unwrap().send(()).unwrap();
            let _ = release
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(20));
            Err("a retry would bring it back".into())
        });
        let dead_runs = Arc::new(AtomicUsize::new(0));
        let d = dead_runs.clone();
        jobs.register("doomed", move |_| {
            d.fetch_add(1, Ordering::SeqCst);
            Err(JobError::permanent("no"))
        });
        jobs.start().unwrap();
        jobs.schedule("k", "block", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        started.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(!jobs.retry("k").unwrap());
        assert_eq!(jobs.job("k").unwrap().unwrap().state, JobState::Running);
        assert!(jobs.cancel("k").unwrap());
        assert!(!jobs.cancel("k").unwrap());
        release_tx.send(()).unwrap();
        eventually("the run ends, lost", || {
            let m = jobs.metrics();
            m.lost == 1 && m.running == 0
        });
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(jobs.job("k").unwrap().is_none());

        jobs.schedule("d", "doomed", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("d is dead", || jobs.dead_jobs().unwrap().len() == 1);
        let revived: Vec<bool> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| jobs.retry("d").unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // A revival runs the job at once, and it is dead again at once: a
        // later retry may revive it again. Each revival is one more run.
        let revivals = revived.iter().filter(|&&r| r).count();
        assert!(revivals >= 1, "{revived:?}");
        eventually("d runs once per revival, dead again", || {
            dead_runs.load(Ordering::SeqCst) == 1 + revivals
                && jobs.dead_jobs().unwrap().len() == 1
                && jobs.metrics().running == 0
        });
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(dead_runs.load(Ordering::SeqCst), 1 + revivals);
    });
}

/// A job whose handler one scheduler lacks and another has: the other
/// runs it at once and the first never touches it; with only the first
/// left, it waits `unhandled_wait`, records why (attempt not counted), and
/// a new scheduler with the handler runs it as attempt 1.
#[test]
fn a_job_handled_in_one_scheduler_and_not_in_another() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool_a, pool_b, pool_c) = (pool(2), pool(2), pool(1));
        let mut config = real_config();
        config.unhandled_wait = Duration::from_millis(500);
        let a = store.open(&pool_a, config.clone());
        let _other = recording(&a, "other");
        let b = store.open(&pool_b, config.clone());
        let runs_b = recording(&b, "x");
        a.start().unwrap();
        b.start().unwrap();
        let c = client(&store, &pool_c);
        c.schedule("j1", "x", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        within(Duration::from_secs(3), "B runs j1", || {
            runs_of(&runs_b, "j1") == 1
        });
        assert_eq!(a.metrics().claimed, 0);
        assert!(b.shutdown(Duration::from_secs(10)));
        c.schedule("j2", "x", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        within(Duration::from_secs(5), "A says why j2 waits", || {
            c.job("j2").unwrap().unwrap().last_error.is_some()
        });
        let j2 = c.job("j2").unwrap().unwrap();
        assert_eq!((j2.state, j2.attempt), (JobState::Scheduled, 0));
        assert!(j2
            .last_error
            .unwrap()
            .contains("no handler is registered for \"x\" here"));
        let b2 = store.open(&pool_b, config);
        let runs_b2 = recording(&b2, "x");
        b2.start().unwrap();
        within(Duration::from_secs(5), "B2 runs j2", || {
            runs_of(&runs_b2, "j2") == 1
        });
        assert_eq!(runs_b2.lock().unwrap()[0].2, 1, "attempt 1");
    });
}

/// Eight schedulers in one process on one store, six sharing one executor:
/// 600 jobs scheduled through all of them run exactly once; every
/// scheduler's metrics add up, with nothing lost, released or retried.
#[test]
fn many_schedulers_in_one_process_on_one_store_run_each_job_once() {
    on_both(|kind| {
        let store = Store::new(kind);
        let shared_pool = pool(4);
        let own_pools = [pool(2), pool(2)];
        let mut config = real_config();
        config.lease = Duration::from_secs(15);
        let runs = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
        let mut all = Vec::new();
        for n in 0..8 {
            let pool = if n < 6 {
                &shared_pool
            } else {
                &own_pools[n - 6]
            };
            let jobs = store.open(pool, config.clone());
            let r = runs.clone();
            jobs.register("work", move |job| {
                *r.lock().unwrap().entry(job.key().to_owned()).or_default() += 1;
                Ok(())
            });
            jobs.start().unwrap();
            all.push(jobs);
        }
        for n in 0..600u64 {
            let delay = Duration::from_millis(n * 7 % 2_000);
            all[n as usize % 8]
                .schedule(&format!("j{n}"), "work", b"", Schedule::After(delay))
                .unwrap();
        }
        eventually("all ran", || {
            runs.lock().unwrap().len() == 600 && all.iter().all(|j| j.metrics().running == 0)
        });
        std::thread::sleep(Duration::from_millis(300));
        let runs = runs.lock().unwrap();
        assert!(runs.values().all(|&n| n == 1), "{kind:?}: some ran twice");
        let mut claimed = 0;
        for (n, jobs) in all.iter().enumerate() {
            let m = jobs.metrics();
            assert_identity(jobs, &format!("scheduler {n}"));
            assert_eq!((m.lost, m.released, m.retried), (0, 0, 0), "{n}: {m:?}");
            assert_eq!(m.claimed, m.succeeded, "{n}: {m:?}");
            claimed += m.claimed;
        }
        assert_eq!(claimed, 600);
    });
}

/// The PostgreSQL server restarted five times (an immediate stop, as a
/// crash) while 300 jobs fall due and a recurring job ticks: every job
/// runs exactly once (the scheduler never crashed, and leases are longer
/// than the outages), none is left, and the recurring job goes on.
#[test]
fn a_postgres_server_restarted_five_times_loses_and_doubles_nothing() {
    let server = PgServer::start();
    let params = server.fresh_database();
    let pool = pool(2);
    let mut config = real_config();
    config.lease = Duration::from_secs(30);
    let jobs = DurableScheduler::postgres(&pool, &params, config).unwrap();
    let runs = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let r = runs.clone();
    jobs.register("work", move |job| {
        *r.lock().unwrap().entry(job.key().to_owned()).or_default() += 1;
        Ok(())
    });
    jobs.start().unwrap();
    for n in 0..300u64 {
        let delay = Duration::from_millis(n * 23 % 6_000);
        jobs.schedule(&format!("j{n}"), "work", b"", Schedule::After(delay))
            .unwrap();
    }
    jobs.schedule(
        "tick",
        "work",
        b"",
        Schedule::Every(Duration::from_millis(50)),
    )
    .unwrap();
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(700));
        server.stop();
        std::thread::sleep(Duration::from_millis(300));
        server.start_again();
    }
    eventually("every job ran", || {
        let runs = runs.lock().unwrap();
        (0..300).all(|n| runs.contains_key(&format!("j{n}")))
    });
    eventually("none is left", || {
        (0..300).all(|n| jobs.job(&format!("j{n}")).unwrap().is_none())
    });
    let ticks = runs.lock().unwrap()["tick"];
    eventually("the recurring job goes on", || {
        runs.lock().unwrap()["tick"] >= ticks + 10
    });
    let runs = runs.lock().unwrap();
    let twice: Vec<_> = runs
        .iter()
        .filter(|(k, &n)| *k != "tick" && n > 1)
        .collect();
    assert!(twice.is_empty(), "run twice: {twice:?}");
}

/// A handler that schedules its own key again (a self-rescheduling job,
/// twenty times): each payload runs once, in order; each run ends (its
/// success stored as the end of that run), and the next link, which
/// replaced the job meanwhile, runs after it.
#[test]
fn a_self_rescheduling_chain_runs_each_link_once() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = Arc::new(store.open(&pool, real_config()));
        let me: Arc<OnceLock<std::sync::Weak<DurableScheduler>>> = Arc::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (m, s) = (me.clone(), seen.clone());
        jobs.register("chain", move |job| {
            let n: u32 = std::str::from_utf8(job.payload()).unwrap().parse().unwrap();
            s.lock().unwrap().push(n);
            if n < 20 {
                let jobs = m.get().unwrap().upgrade().unwrap();
                jobs.schedule(
                    "chain",
                    "chain",
                    (n + 1).to_string(),
                    Schedule::After(Duration::from_millis(1)),
                )
                .map_err(JobError::retry)?;
            }
            Ok(())
        });
        me.set(Arc::downgrade(&jobs)).unwrap();
        jobs.start().unwrap();
        jobs.schedule("chain", "chain", "0", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the chain ends", || {
            seen.lock().unwrap().len() == 21
                && jobs.job("chain").unwrap().is_none()
                && jobs.metrics().running == 0
        });
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(*seen.lock().unwrap(), (0..=20).collect::<Vec<u32>>());
        let m = jobs.metrics();
        assert_eq!((m.claimed, m.succeeded, m.lost), (21, 21, 0), "{m:?}");
    });
}

/// A job every nanosecond (a microsecond once stored) runs as fast as it
/// can; `cancel` stops it: at most the run in progress ends after it, and
/// the job is gone.
#[test]
fn a_job_every_nanosecond_runs_flat_out_and_stops_when_cancelled() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        jobs.register("spin", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule(
            "spin",
            "spin",
            b"",
            Schedule::Every(Duration::from_nanos(1)),
        )
        .unwrap();
        std::thread::sleep(Duration::from_secs(1));
        assert!(runs.load(Ordering::SeqCst) > 10, "{kind:?}: it runs");
        assert!(jobs.cancel("spin").unwrap());
        let at_cancel = runs.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(700));
        let after = runs.load(Ordering::SeqCst);
        assert!(
            after <= at_cancel + 1,
            "{kind:?}: {} runs after the cancel",
            after - at_cancel
        );
        assert!(jobs.job("spin").unwrap().is_none());
        eventually("nothing running", || jobs.metrics().running == 0);
    });
}

/// Of two jobs with one key in one batch, the later is stored and placed:
/// the earlier's near time neither runs the later job early nor runs the
/// earlier.
#[test]
fn a_batch_with_one_key_twice_stores_and_runs_the_later() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = recording(&jobs, "work");
        jobs.start().unwrap();
        jobs.schedule_all([
            Job::new("k", "work", "first", Schedule::After(HOUR)),
            Job::new("k", "work", "second", Schedule::After(Duration::ZERO)),
        ])
        .unwrap();
        jobs.schedule_all([
            Job::new("j", "work", "now", Schedule::After(Duration::ZERO)),
            Job::new("j", "work", "later", Schedule::After(HOUR)),
        ])
        .unwrap();
        eventually("k runs", || runs_of(&runs, "k") == 1);
        std::thread::sleep(Duration::from_millis(500));
        let runs = runs.lock().unwrap();
        assert_eq!(runs.len(), 1, "{kind:?}: {runs:?}");
        assert_eq!(runs[0].1, b"second");
        let j = jobs.job("j").unwrap().unwrap();
        assert_eq!(
            (j.payload.as_slice(), j.state),
            (&b"later"[..], JobState::Scheduled)
        );
    });
}

/// The SQLite file (and its `-wal` and `-shm`) deleted under a running
/// scheduler: its connections hold the file open, so it goes on running
/// and scheduling without an error or a panic.
#[test]
fn a_sqlite_file_deleted_under_a_running_scheduler_does_not_stop_it() {
    let store = Store::new(Kind::Sqlite);
    let pool = pool(2);
    let jobs = store.open(&pool, real_config());
    let runs = recording(&jobs, "work");
    jobs.start().unwrap();
    jobs.schedule(
        "tick",
        "work",
        b"",
        Schedule::Every(Duration::from_millis(20)),
    )
    .unwrap();
    eventually("it ticks", || runs_of(&runs, "tick") >= 3);
    for suffix in ["", "-wal", "-shm"] {
        let mut path = store.path().into_os_string();
        path.push(suffix);
        std::fs::remove_file(path).unwrap();
    }
    let before = runs_of(&runs, "tick");
    std::thread::sleep(Duration::from_secs(1));
    assert!(runs_of(&runs, "tick") > before + 10);
    jobs.schedule("new", "work", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    within(Duration::from_secs(3), "new runs", || {
        runs_of(&runs, "new") == 1
    });
    assert_eq!(jobs.metrics().store_errors, 0);
}

/// Counts this process's threads, and those of the durable schedulers
/// (`chronopool-durable-runs` and `-poll`, both shown as
/// `chronopool-dura`).
fn threads() -> (usize, usize) {
    let mut all = 0;
    let mut durable = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        all += 1;
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == "chronopool-dura" {
            durable += 1;
        }
    }
    (all, durable)
}

/// The child's part of [`no_thread_outlives_its_scheduler`] (alone in its
/// process, so that the thread counts are its own).
#[test]
#[ignore = "run by no_thread_outlives_its_scheduler as a child process"]
fn thread_count_child() {
    let Ok(described) = std::env::var("ADVERSARIAL_STORES") else {
        return;
    };
    let pool = pool(2);
    for store in described.split('\n') {
        // Warm up (lazy statics of the drivers).
        drop(stores::open_described(store, &pool, real_config()));
        let (baseline, durable) = threads();
        assert_eq!(durable, 0);
        for n in 0..10 {
            let jobs = stores::open_described(store, &pool, real_config());
            let runs = recording(&jobs, "work");
            // The last one's run thread, left to end by itself (a drop does
            // not wait), ends; this one, not started, has none.
            eventually("no durable thread", || threads().1 == 0);
            jobs.start().unwrap();
            jobs.start().unwrap();
            // The run and poll loops, and on PostgreSQL the listener. (A
            // thread names itself once it runs.)
            let loops = if store.starts_with("postgres") { 3 } else { 2 };
            eventually("the durable threads", || threads().1 == loops);
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(threads().1, loops, "{store}: its threads, started twice");
            let key = format!("k{n}");
            jobs.schedule(&key, "work", b"", Schedule::After(Duration::ZERO))
                .unwrap();
            eventually("it runs", || runs_of(&runs, &key) == 1);
            drop(jobs);
        }
        eventually(&format!("{store}: threads back to {baseline}"), || {
            threads().0 == baseline
        });
        // Dropped while a handler blocks: the run thread stays until it
        // returns, then ends.
        let jobs = stores::open_described(store, &pool, real_config());
        let (started_tx, started) = mpsc::channel::<()>();
        let (release_tx, release) = mpsc::channel::<()>();
        let (started_tx, release) = (Mutex::new(started_tx), Mutex::new(release));
        jobs.register("block", move |_| {
            started_tx.lock().unwrap().send(()).unwrap();
            let _ = release
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(20));
            Ok(())
        });
        jobs.start().unwrap();
        jobs.schedule("blocked", "block", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        started.recv_timeout(Duration::from_secs(10)).unwrap();
        drop(jobs);
        // The others end at once (the listener within its wait).
        eventually("the run thread alone", || threads().1 == 1);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(threads().1, 1, "{store}: the run thread waits for the run");
        release_tx.send(()).unwrap();
        eventually(&format!("{store}: threads back to {baseline}"), || {
            threads().0 == baseline
        });
    }
    println!("THREADS OK");
}

/// Ten schedulers started (twice each), run a job and are dropped, then
/// one is dropped while its handler blocks: no thread outlives them (the
/// process's thread count returns to what it was), on both stores.
#[test]
fn no_thread_outlives_its_scheduler() {
    let sqlite = Store::new(Kind::Sqlite);
    let postgres = Store::new(Kind::Postgres);
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["thread_count_child", "--exact", "--ignored", "--nocapture"])
        .env(
            "ADVERSARIAL_STORES",
            format!("{}\n{}", sqlite.describe(), postgres.describe()),
        )
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("THREADS OK"),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// **BUG** (timing-dependent; PostgreSQL). A job scheduled again with the
/// same key *and the same fire time* (an `At` that has passed, a payload
/// corrected) just after its old version was claimed: `Placements::place`
/// sees the key still placed at that time (the old fire is dealt with only
/// after the run loop has started every run its exchange claimed) and
/// places nothing; then the old fire is dealt with and the placement
/// removed. Expected: the new version runs at once. Found: it waits for
/// the next poll (here 20 s). Made likely by having one exchange claim a
/// thousand jobs, the rescheduled one first (the table is locked while
/// they fall due, so they are claimed together), in eight rounds.
#[test]
fn a_job_rescheduled_at_the_same_time_as_it_is_claimed_is_not_left_to_the_next_poll() {
    let store = Store::new(Kind::Postgres);
    let params = store.params.clone().unwrap();
    let pool = pool(2);
    let mut config = real_config();
    config.concurrency = Some(1_000);
    config.window = Duration::from_secs(40);
    config.poll_interval = Duration::from_secs(20);
    config.lease = Duration::from_secs(30);
    let jobs = Arc::new(store.open(&pool, config));
    let me: Arc<OnceLock<std::sync::Weak<DurableScheduler>>> = Arc::default();
    jobs.register("filler", |_| Ok(()));
    let seen = Arc::new(Mutex::new(Vec::<(String, String, Instant)>::new()));
    let (m, s) = (me.clone(), seen.clone());
    jobs.register("k", move |job| {
        let payload = String::from_utf8(job.payload().to_vec()).unwrap();
        s.lock()
            .unwrap()
            .push((job.key().to_owned(), payload.clone(), Instant::now()));
        if payload == "first" {
            let jobs = m.get().unwrap().upgrade().unwrap();
            jobs.schedule(job.key(), "k", "second", Schedule::At(job.due()))
                .map_err(JobError::retry)?;
        }
        Ok(())
    });
    me.set(Arc::downgrade(&jobs)).unwrap();
    jobs.start().unwrap();
    let ran = |key: &str, payload: &str| {
        let seen = seen.lock().unwrap();
        seen.iter()
            .find(|s| s.0 == key && s.1 == payload)
            .map(|s| s.2)
    };
    for round in 0..8 {
        let key = format!("k{round}");
        std::thread::sleep(Duration::from_millis(200));
        let now = SystemTime::now();
        let (early, at) = (
            now + Duration::from_secs(1),
            now + Duration::from_millis(1_200),
        );
        let mut batch: Vec<Job> = (0..5)
            .map(|n| {
                Job::new(
                    format!("early-{round}-{n}"),
                    "filler",
                    "",
                    Schedule::At(early),
                )
            })
            .collect();
        batch.push(Job::new(key.clone(), "k", "first", Schedule::At(at)));
        batch.extend(
            (0..994).map(|n| Job::new(format!("f-{round}-{n}"), "filler", "", Schedule::At(at))),
        );
        jobs.schedule_all(batch).unwrap();
        let mut locker = postgres::Client::connect(&params, postgres::NoTls).unwrap();
        let mut lock = locker.transaction().unwrap();
        lock.batch_execute("LOCK TABLE chronopool_jobs IN ACCESS EXCLUSIVE MODE")
            .unwrap();
        while SystemTime::now() < at + Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(10));
        }
        lock.commit().unwrap();
        eventually("the first version runs", || ran(&key, "first").is_some());
        let first = ran(&key, "first").unwrap();
        let give_up = first + Duration::from_secs(3);
        while ran(&key, "second").is_none() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(5));
        }
        if ran(&key, "second").is_none() {
            let job = jobs.job(&key).unwrap().unwrap();
            let overdue = SystemTime::now().duration_since(job.next_fire);
            let waited = Instant::now();
            eventually("the next poll runs it", || ran(&key, "second").is_some());
            panic!(
                "round {round}: the second version had not run 3 s after the first, though \
                 {:?} and due {overdue:?} ago; it ran {:?} later (the next poll)",
                job.state,
                waited.elapsed()
            );
        }
        eventually("the round's jobs are done", || jobs.metrics().running == 0);
    }
}

/// **BUG** (PostgreSQL; SQLite passes). A handler fails with a message
/// that holds a NUL byte (text from a C library, a binary protocol). The
/// docs: a failure is retried, then the job is dead, its `last_error`
/// saying why. Expected: that, and the other jobs, whose runs end at the
/// same moment, stored once each. Found: PostgreSQL refuses the whole
/// exchange (SQLSTATE 22021, a permanent error); the run loop sends it
/// twice more, then drops its outcomes as lost: the other jobs' outcomes
/// go with it, their leases end, and they run a second time; the failing
/// job is claimed again and again until it is dead with a false reason
/// ("the earlier attempts never ended (their processes died ...)").
#[test]
fn a_failure_message_with_a_nul_byte_loses_no_other_outcome() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(4);
        let mut config = real_config();
        config.max_attempts = 2;
        config.retry = chronopool::trigger::Backoff::exponential(
            Duration::from_millis(100),
            1.0,
            Duration::from_millis(100),
        );
        let jobs = store.open(&pool, config);
        let runs = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
        let r = runs.clone();
        jobs.register("ok", move |job| {
            *r.lock().unwrap().entry(job.key().to_owned()).or_default() += 1;
            Ok(())
        });
        jobs.register("bad", |_| Err("bad\0byte".into()));
        jobs.start().unwrap();
        let at = SystemTime::now() + Duration::from_millis(500);
        let mut batch = vec![Job::new("bad", "bad", "", Schedule::At(at))];
        batch.extend((0..30).map(|n| Job::new(format!("ok-{n}"), "ok", "", Schedule::At(at))));
        jobs.schedule_all(batch).unwrap();
        let give_up = Instant::now() + Duration::from_secs(20);
        let bad_is_dead = || {
            jobs.job("bad")
                .unwrap()
                .is_some_and(|b| b.state == JobState::Dead)
        };
        while !(bad_is_dead() && runs.lock().unwrap().len() == 30 && jobs.metrics().running == 0) {
            assert!(
                Instant::now() < give_up,
                "{kind:?}: after 20 s, {} of 30 ran; bad: {:?}; {:?}",
                runs.lock().unwrap().len(),
                jobs.job("bad").unwrap(),
                jobs.metrics()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // Leases (1 s) of outcomes dropped would end meanwhile.
        std::thread::sleep(Duration::from_secs(3));
        let twice = runs.lock().unwrap().values().filter(|&&n| n > 1).count();
        let bad = jobs.job("bad").unwrap().unwrap();
        let dead: Vec<String> = jobs
            .dead_jobs()
            .unwrap()
            .into_iter()
            .map(|j| j.key)
            .collect();
        assert_eq!(
            (twice, dead),
            (0, vec!["bad".to_owned()]),
            "{kind:?}: other jobs run twice, dead jobs; bad: {bad:?}; {:?}",
            jobs.metrics()
        );
        assert!(
            bad.last_error
                .as_deref()
                .is_some_and(|e| e.starts_with("bad")),
            "{kind:?}: the reason is the handler's: {:?}",
            bad.last_error
        );
        assert_eq!(jobs.metrics().lost, 0, "{kind:?}");
    });
}

/// **BUG** (PostgreSQL). A server with `idle_session_timeout` (PostgreSQL
/// 14+, here 1 s) closes sessions idle for longer. The docs: a connection
/// lost is opened again (the API tries a transient failure again for up to
/// 10 s). Expected: `schedule` after an idle spell succeeds. Found: the
/// server's FATAL `idle_session_timeout` (SQLSTATE 57P05) arrives as the
/// answer to the next statement, and `pg_error` does not count 57P05 as a
/// lost connection: the call fails at once with a store error.
#[test]
fn an_idle_session_timeout_is_a_lost_connection() {
    let server = PgServer::start_with(&format!(
        "{} -c idle_session_timeout=1000",
        common::TEST_SETTINGS
    ));
    let params = server.fresh_database();
    let pool = pool(2);
    let jobs = DurableScheduler::postgres(&pool, &params, real_config()).unwrap();
    let runs = recording(&jobs, "work");
    jobs.start().unwrap();
    let mut failed = Vec::new();
    for n in 0..3 {
        std::thread::sleep(Duration::from_millis(1_500));
        let key = format!("k{n}");
        if let Err(e) = jobs.schedule(&key, "work", b"", Schedule::After(Duration::ZERO)) {
            failed.push(format!("{key}: {e}"));
        }
    }
    assert!(
        failed.is_empty(),
        "schedule after an idle spell: {failed:#?}"
    );
    eventually("they run", || runs.lock().unwrap().len() == 3);
}

/// **BUG** (PostgreSQL). As the cut connection above, from a server
/// setting alone: `idle_session_timeout` (1 s) shorter than a third of the
/// lease (6 s, renewed every 2 s) closes A's run-loop session between
/// renewals, which drops its session lock; B's poll then ends A's live
/// lease (`PgConn::reap`) and runs the job a second time while A's run
/// goes on. Expected: once.
#[test]
fn an_idle_session_timeout_does_not_let_another_scheduler_run_a_live_job_again() {
    let server = PgServer::start_with(&format!(
        "{} -c idle_session_timeout=1000",
        common::TEST_SETTINGS
    ));
    let params = server.fresh_database();
    let mut config = real_config();
    config.lease = Duration::from_secs(6);
    // The reap waits until the server has been up for a lease.
    std::thread::sleep(Duration::from_secs(7));
    let (pool_a, pool_b) = (pool(2), pool(2));
    let a = DurableScheduler::postgres(&pool_a, &params, config.clone()).unwrap();
    let b = DurableScheduler::postgres(&pool_b, &params, config).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    for jobs in [&a, &b] {
        let r = runs.clone();
        jobs.register("work", move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_secs(5));
            Ok(())
        });
        jobs.start().unwrap();
    }
    a.schedule("k", "work", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    std::thread::sleep(Duration::from_secs(7));
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let k = a.job("k");
        if k.as_ref()
            .is_ok_and(|k| k.as_ref().is_none_or(|k| k.state != JobState::Running))
        {
            let k = k.unwrap();
            assert!(
                k.is_none(),
                "k is not done but {k:?}; {} runs; A {:?}; B {:?}",
                runs.load(Ordering::SeqCst),
                a.metrics(),
                b.metrics()
            );
            break;
        }
        assert!(
            Instant::now() < give_up,
            "k still not done after 37 s: {k:?}; {} runs; A {:?}; B {:?}",
            runs.load(Ordering::SeqCst),
            a.metrics(),
            b.metrics()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        (
            runs.load(Ordering::SeqCst),
            a.metrics().lost + b.metrics().lost
        ),
        (1, 0),
        "runs, outcomes lost; A {:?}, B {:?}",
        a.metrics(),
        b.metrics()
    );
}

/// Two hundred recurring jobs (every 5 ms) on two schedulers, while three
/// threads reschedule and cancel them at random; then every one is
/// cancelled. Afterwards nothing runs (beyond runs in flight at the
/// cancel), the store is empty, nothing is left running, every outcome is
/// stored or lost (none released, no store error), and the metrics add up.
#[test]
fn a_storm_over_many_recurring_jobs_ends_with_nothing_left() {
    on_both(|kind| {
        let store = Store::new(kind);
        let (pool_a, pool_b) = (pool(2), pool(2));
        let a = store.open(&pool_a, real_config());
        let b = store.open(&pool_b, real_config());
        let runs = Arc::new(AtomicUsize::new(0));
        for jobs in [&a, &b] {
            let r = runs.clone();
            jobs.register("tick", move |_| {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
            jobs.start().unwrap();
        }
        let every = || Schedule::Every(Duration::from_millis(5));
        a.schedule_all((0..200).map(|n| Job::new(format!("t{n}"), "tick", "", every())))
            .unwrap();
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let (a, b) = (&a, &b);
                s.spawn(move || {
                    let mut x = t + 1;
                    for _ in 0..400 {
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        let key = format!("t{}", (x >> 33) % 200);
                        let jobs = if x & 1 == 0 { a } else { b };
                        match (x >> 8) % 3 {
                            0 => {
                                jobs.cancel(&key).unwrap();
                            }
                            1 => jobs.schedule(&key, "tick", b"", every()).unwrap(),
                            _ => jobs
                                .schedule(
                                    &key,
                                    "tick",
                                    b"",
                                    Schedule::After(Duration::from_millis(1)),
                                )
                                .unwrap(),
                        }
                    }
                });
            }
        });
        for n in 0..200 {
            a.cancel(&format!("t{n}")).unwrap();
        }
        eventually("nothing running", || {
            a.metrics().running == 0 && b.metrics().running == 0
        });
        let settled = runs.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            runs.load(Ordering::SeqCst),
            settled,
            "{kind:?}: runs after the cancels"
        );
        for n in 0..200 {
            assert!(a.job(&format!("t{n}")).unwrap().is_none());
        }
        for (name, jobs) in [("a", &a), ("b", &b)] {
            assert_identity(jobs, name);
            let m = jobs.metrics();
            assert_eq!(
                (m.released, m.store_errors, m.dead),
                (0, 0, 0),
                "{name}: {m:?}"
            );
        }
    });
}

/// Makes files immutable (`chattr +i`, as root) until dropped.
struct Immutable(Vec<std::path::PathBuf>);

impl Immutable {
    fn new(paths: Vec<std::path::PathBuf>) -> Immutable {
        for path in &paths {
            let status = Command::new("chattr").arg("+i").arg(path).status().unwrap();
            assert!(status.success(), "chattr +i {}", path.display());
        }
        Immutable(paths)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = Command::new("chattr").arg("-i").arg(path).status();
        }
    }
}

/// **BUG** (SQLite). The SQLite file and its WAL made unwritable for 2 s
/// (`chattr +i`; a read-only remount or a full disk does the same) while a
/// job runs. The docs (DESIGN: "keeps every
/// outcome until the store has it (a store that is busy or away costs
/// latency, never a job)"; exactly once while nothing crashes). Expected:
/// the outcomes wait and are stored once the file is writable; each run
/// once. Found: the write fails with a non-busy error, which the run loop
/// treats as permanent: after three failures (about 70 ms) it drops the
/// outcomes as lost; the rows stay claimed, their leases end, and the jobs
/// run a second time.
#[test]
fn an_unwritable_sqlite_file_for_two_seconds_loses_no_outcome() {
    let store = Store::new(Kind::Sqlite);
    let pool = pool(2);
    let jobs = store.open(&pool, real_config());
    let runs = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let r = runs.clone();
    let (started_tx, started) = mpsc::channel::<()>();
    let started_tx = Mutex::new(started_tx);
    jobs.register("work", move |job| {
        *r.lock().unwrap().entry(job.key().to_owned()).or_default() += 1;
        if job.key() == "slow" {
            started_tx.lock().unwrap().send(()).unwrap();
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(())
    });
    jobs.start().unwrap();
    jobs.schedule("slow", "work", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    started.recv_timeout(Duration::from_secs(10)).unwrap();
    // (Not the `-shm`: SQLite maps it, and a write to an immutable mapped
    // page is a SIGBUS.)
    let files = ["", "-wal"]
        .iter()
        .map(|suffix| {
            let mut path = store.path().into_os_string();
            path.push(suffix);
            std::path::PathBuf::from(path)
        })
        .collect();
    {
        let _unwritable = Immutable::new(files);
        std::thread::sleep(Duration::from_secs(2));
    }
    eventually("slow's outcome is stored", || {
        jobs.job("slow").unwrap().is_none() && jobs.metrics().running == 0
    });
    std::thread::sleep(Duration::from_millis(1_500));
    let m = jobs.metrics();
    assert_eq!(
        (runs.lock().unwrap()["slow"], m.lost),
        (1, 0),
        "runs of slow, outcomes lost; {m:?}"
    );
}

/// Runs `sql` on `store` with a connection of its own (another tool's).
fn execute(store: &Store, sql: &str) {
    match store.kind {
        Kind::Sqlite => {
            let c = rusqlite::Connection::open(store.path()).unwrap();
            c.busy_timeout(Duration::from_secs(5)).unwrap();
            c.execute_batch(sql).unwrap();
        }
        Kind::Postgres => {
            let params = store.params.as_deref().unwrap();
            let mut c = postgres::Client::connect(params, postgres::NoTls).unwrap();
            c.batch_execute(sql).unwrap();
        }
    }
}

/// A row that another tool wrote with an attempt no `u32` holds (a
/// negative one) holds up no other job's claim: the twenty due jobs
/// claimed beside it run, and it ends dead (its attempts read as spent)
/// instead of failing every claim and listing that meets it.
#[test]
fn a_row_with_an_attempt_out_of_range_holds_up_no_other() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = recording(&jobs, "work");
        for bad in ["bad", "worse"] {
            jobs.schedule(bad, "work", b"", Schedule::After(Duration::ZERO))
                .unwrap();
        }
        execute(
            &store,
            "UPDATE chronopool_jobs SET attempt = -7 WHERE key = 'bad';
             UPDATE chronopool_jobs SET attempt = 9223372036854775807 WHERE key = 'worse'",
        );
        for n in 0..20 {
            jobs.schedule(
                &format!("good-{n}"),
                "work",
                b"",
                Schedule::After(Duration::ZERO),
            )
            .unwrap();
        }
        jobs.start().unwrap();
        within(Duration::from_secs(10), "the good jobs run", || {
            (0..20).all(|n| runs_of(&runs, &format!("good-{n}")) == 1)
        });
        for bad in ["bad", "worse"] {
            within(Duration::from_secs(10), "the bad jobs settle", || {
                jobs.job(bad)
                    .unwrap()
                    .is_some_and(|j| j.state == JobState::Dead)
                    || runs_of(&runs, bad) == 1 && jobs.job(bad).unwrap().is_none()
            });
        }
        assert!(jobs.jobs(&chronopool_durable::JobQuery::new()).is_ok());
        // Their history rows read back too.
        jobs.history(None, 100).unwrap();
    });
}

/// A periodic job whose stored due time another tool set to the first
/// microsecond SQLite's integer holds (`i64::MIN`) runs, and its next
/// occurrence is the next slot after now (`Skip`): no overflow.
#[test]
fn a_due_time_at_the_start_of_the_integer_range_runs_and_moves_on() {
    let store = Store::new(Kind::Sqlite);
    let pool = pool(2);
    let jobs = store.open(&pool, real_config());
    let runs = recording(&jobs, "tick");
    jobs.schedule_all([
        Job::new("k", "tick", "", Schedule::Every(HOUR)).missed_runs(MissedRuns::Skip)
    ])
    .unwrap();
    execute(
        &store,
        "UPDATE chronopool_jobs SET next_fire = -9223372036854775808 WHERE key = 'k'",
    );
    jobs.start().unwrap();
    within(Duration::from_secs(10), "it runs", || {
        runs_of(&runs, "k") == 1
    });
    within(Duration::from_secs(10), "it moves on", || {
        jobs.job("k")
            .unwrap()
            .is_some_and(|j| j.state == JobState::Scheduled && j.next_fire > SystemTime::now())
    });
    let job = jobs.job("k").unwrap().unwrap();
    assert!(
        job.next_fire <= SystemTime::now() + HOUR,
        "{:?}",
        job.next_fire
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(runs_of(&runs, "k"), 1, "{:?}", runs.lock().unwrap());
}

/// Keys just short of what PostgreSQL's key index holds (2,704 bytes an
/// entry; random text does not compress): every key that `schedule`
/// accepts runs once and is gone, its history row written too; a key the
/// store refuses is refused at `schedule`, never at the run's end (where
/// it ran again at each lease, then stayed claimed for good).
#[test]
fn a_key_the_store_accepts_has_its_history_written() {
    on_both(|kind| {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = recording(&jobs, "work");
        jobs.start().unwrap();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut accepted = Vec::new();
        for len in (2_600..2_800).step_by(3) {
            let key: String = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    char::from(
                        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            [(seed % 62) as usize],
                    )
                })
                .collect();
            if jobs
                .schedule(&key, "work", b"", Schedule::After(Duration::ZERO))
                .is_ok()
            {
                accepted.push(key);
            }
        }
        assert!(!accepted.is_empty(), "{kind:?}: none accepted");
        within(
            Duration::from_secs(30),
            "every accepted key ran and is gone",
            || {
                accepted
                    .iter()
                    .all(|key| runs_of(&runs, key) == 1 && jobs.job(key).unwrap().is_none())
            },
        );
        let history = jobs.history(None, 1_000).unwrap();
        for key in &accepted {
            assert!(
                history.iter().any(|r| &r.key == key),
                "{kind:?}: no history of a key of {} bytes",
                key.len()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
        assert!(accepted.iter().all(|key| runs_of(&runs, key) == 1));
    });
}

/// PostgreSQL: an application's transaction holds a running job's row
/// lock (a `SELECT … FOR UPDATE`, as an ORM's load does) for three
/// leases, while that run ends and then another. The other run's end is
/// stored at once, and the scheduler's long run keeps its lease (neither
/// waits behind the lock), so a second scheduler takes nothing over; the
/// locked run's outcome is stored once the lock is gone. Every job runs
/// once.
#[test]
fn a_row_lock_held_by_the_application_holds_up_no_other_run() {
    let store = Store::new(Kind::Postgres);
    let mut config = real_config();
    config.lease = Duration::from_secs(2);
    let (pool_a, pool_b) = (pool(4), pool(2));
    let a = store.open(&pool_a, config.clone());
    let b = store.open(&pool_b, config);
    let runs: Arc<Mutex<Vec<String>>> = Arc::default();
    let (go_short, short_gate) = mpsc::channel::<()>();
    let (go_other, other_gate) = mpsc::channel::<()>();
    let gates = Arc::new(Mutex::new((short_gate, other_gate)));
    for jobs in [&a, &b] {
        let (runs, gates) = (runs.clone(), gates.clone());
        jobs.register("work", move |job| {
            runs.lock().unwrap().push(job.key().to_owned());
            let wait = Duration::from_secs(30);
            match job.key() {
                "long" => std::thread::sleep(Duration::from_secs(9)),
                _ => {
                    let _ = gates.lock().unwrap().0.recv_timeout(wait);
                }
            }
            Ok(())
        });
    }
    // "other"'s handler is A's alone: its end is A's to store.
    let (r, g) = (runs.clone(), gates.clone());
    a.register("solo", move |job| {
        r.lock().unwrap().push(job.key().to_owned());
        let gate = loop {
            // Not under the lock of the gates while waiting.
            if let Ok(gates) = g.try_lock() {
                break gates;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let _ = gate.1.recv_timeout(Duration::from_secs(30));
        Ok(())
    });
    a.start().unwrap();
    for key in ["long", "short"] {
        a.schedule(key, "work", b"", Schedule::After(Duration::ZERO))
            .unwrap();
    }
    eventually("both run in A", || runs.lock().unwrap().len() == 2);
    let params = store.params.as_deref().unwrap();
    let mut app = postgres::Client::connect(params, postgres::NoTls).unwrap();
    let mut tx = app.transaction().unwrap();
    tx.query(
        "SELECT key FROM chronopool_jobs WHERE key = 'short' FOR UPDATE",
        &[],
    )
    .unwrap();
    go_short.send(()).unwrap();
    b.start().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Another run ends while the first end waits for the lock.
    a.schedule("other", "solo", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    eventually("other runs", || runs.lock().unwrap().len() == 3);
    go_other.send(()).unwrap();
    within(
        Duration::from_secs(3),
        "other's end is stored under the lock",
        || a.job("other").unwrap().is_none(),
    );
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        a.job("short").unwrap().is_some(),
        "short's end waits for the lock"
    );
    tx.commit().unwrap();
    within(Duration::from_secs(20), "every job is done", || {
        ["long", "short"]
            .iter()
            .all(|key| a.job(key).unwrap().is_none())
    });
    let mut seen = runs.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        ["long", "other", "short"],
        "a run taken over and run again"
    );
}

//! Runs ended in the handler's own transaction (`JobContext::complete_in`),
//! on both stores, with the handler's own connection (`rusqlite`,
//! `postgres`): the handler writes an invoice and ends its run in one
//! transaction.
//!
//! * Committed: the invoice and the run's end, once, for one-shot and
//!   recurring jobs (counted as successes, none lost).
//! * Rolled back: neither; the run ends with what the handler returns.
//! * Cancelled during the run: `complete_in` says the run lost its job,
//!   and the handler's writes roll back.
//! * Replaced during the run: the run ends, the new schedule stands and
//!   runs.
//! * **Kills** (child processes, SIGKILL or `abort` in the handler):
//!   killed between the handler's write and its commit, the job runs
//!   again and its invoice is written once; killed after the commit,
//!   before the handler returned, the job never runs again; killed at a
//!   random moment while it runs hundreds of jobs, every job's invoice
//!   exists exactly once after a second process ran the rest.

#![cfg(unix)]

mod common;
mod stores;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronopool::ScheduledExecutor;
use chronopool_durable::{
    Config, DurableScheduler, IfExists, Job, JobContext, JobError, JobState, Schedule,
};
use stores::{
    child_part, eventually, open_described, pool, real_config, spawn_child, Kind, Store, BOTH,
};

/// The handler's own connection to the store, with an `invoices` table.
enum Db {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

/// What the handler does after its write and `complete_in`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    Commit,
    RollBack,
    /// Dies (`abort`: no destructor, no rollback sent; the kernel closes
    /// its sockets and file) before the commit.
    DieBeforeCommit,
    /// Dies after the commit, before the handler returns.
    DieAfterCommit,
}

impl Db {
    fn open(store: &str) -> Db {
        match store.split_once(':') {
            Some(("sqlite", path)) => {
                let c = rusqlite::Connection::open(path).unwrap();
                c.busy_timeout(Duration::from_secs(10)).unwrap();
                c.execute(
                    "CREATE TABLE IF NOT EXISTS invoices (id INTEGER PRIMARY KEY, key TEXT)",
                    [],
                )
                .unwrap();
                Db::Sqlite(c)
            }
            Some(("postgres", params)) => {
                let mut c = postgres::Client::connect(params, postgres::NoTls).unwrap();
                c.batch_execute("CREATE TABLE IF NOT EXISTS invoices (id bigserial, key text)")
                    .unwrap();
                Db::Postgres(c)
            }
            _ => panic!("not a store: {store}"),
        }
    }

    /// Writes an invoice for the job and ends its run in one transaction,
    /// then does `then`; `complete_in`'s error (the transaction rolled
    /// back) is the handler's.
    fn invoice(&mut self, job: &JobContext<'_>, then: Then) -> Result<(), JobError> {
        let err = |e: &dyn std::fmt::Display| JobError::retry(e.to_string());
        match self {
            Db::Sqlite(c) => {
                let mut tx = c
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| err(&e))?;
                tx.execute("INSERT INTO invoices (key) VALUES (?1)", [job.key()])
                    .map_err(|e| err(&e))?;
                job.complete_in(&mut tx)?;
                match then {
                    Then::Commit | Then::DieAfterCommit => tx.commit().map_err(|e| err(&e))?,
                    Then::RollBack => tx.rollback().map_err(|e| err(&e))?,
                    Then::DieBeforeCommit => std::process::abort(),
                }
            }
            Db::Postgres(c) => {
                let mut tx = c.transaction().map_err(|e| err(&e))?;
                tx.execute("INSERT INTO invoices (key) VALUES ($1)", &[&job.key()])
                    .map_err(|e| err(&e))?;
                job.complete_in(&mut tx)?;
                match then {
                    Then::Commit | Then::DieAfterCommit => tx.commit().map_err(|e| err(&e))?,
                    Then::RollBack => tx.rollback().map_err(|e| err(&e))?,
                    Then::DieBeforeCommit => std::process::abort(),
                }
            }
        }
        if then == Then::DieAfterCommit {
            std::process::abort();
        }
        Ok(())
    }

    /// The invoices written for `key`.
    fn invoices(&mut self, key: &str) -> i64 {
        match self {
            Db::Sqlite(c) => c
                .query_row("SELECT count(*) FROM invoices WHERE key = ?1", [key], |r| {
                    r.get(0)
                })
                .unwrap(),
            Db::Postgres(c) => c
                .query_one("SELECT count(*) FROM invoices WHERE key = $1", &[&key])
                .unwrap()
                .get(0),
        }
    }

    /// Keys with more than one invoice, and how many keys have one.
    fn tally(&mut self) -> (Vec<(String, i64)>, i64) {
        const TWICE: &str =
            "SELECT key, count(*) FROM invoices GROUP BY key HAVING count(*) > 1 ORDER BY key";
        const KEYS: &str = "SELECT count(DISTINCT key) FROM invoices";
        match self {
            Db::Sqlite(c) => {
                let mut s = c.prepare(TWICE).unwrap();
                let twice = s
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                (twice, c.query_row(KEYS, [], |r| r.get(0)).unwrap())
            }
            Db::Postgres(c) => {
                let twice = c
                    .query(TWICE, &[])
                    .unwrap()
                    .iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect();
                (twice, c.query_one(KEYS, &[]).unwrap().get(0))
            }
        }
    }
}

/// Registers "invoice": the handler's transaction does `then(job)`; runs
/// counted in the returned counter.
fn register(
    jobs: &DurableScheduler,
    store: &str,
    then: impl Fn(&JobContext<'_>) -> Then + Send + Sync + 'static,
) -> Arc<AtomicUsize> {
    let db = Mutex::new(Db::open(store));
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    jobs.register("invoice", move |job| {
        r.fetch_add(1, Ordering::SeqCst);
        db.lock().unwrap().invoice(job, then(job))
    });
    runs
}

#[test]
fn a_handler_s_write_and_its_run_s_end_commit_together() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = register(&jobs, &store.describe(), |_| Then::Commit);
        jobs.start().unwrap();
        let mut db = Db::open(&store.describe());

        jobs.schedule("once", "invoice", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the one-shot job is done", || {
            jobs.job("once").unwrap().is_none()
        });
        assert_eq!(db.invoices("once"), 1, "{kind:?}");

        jobs.schedule(
            "every",
            "invoice",
            b"",
            Schedule::Every(Duration::from_millis(100)),
        )
        .unwrap();
        eventually("the recurring job runs five times", || {
            db.invoices("every") >= 5
        });
        // Every run counted a success once its transaction committed
        // (none lost: the run loop's finish found the fence gone because
        // the handler's transaction had ended the run).
        let metrics = jobs.metrics();
        let every = db.invoices("every") as u64;
        assert_eq!(
            (metrics.lost, metrics.retried),
            (0, 0),
            "{kind:?}: {metrics:?}"
        );
        assert!(
            metrics.succeeded >= 5 && metrics.succeeded <= 1 + every,
            "{kind:?}: {every} invoices, {metrics:?}"
        );
        assert!(runs.load(Ordering::SeqCst) as u64 >= metrics.succeeded);
        assert_eq!(db.invoices("once"), 1, "{kind:?}");
        jobs.cancel("every").unwrap();
        assert!(jobs.shutdown(Duration::from_secs(10)));
    }
}

#[test]
fn a_rolled_back_end_leaves_the_run_to_what_its_handler_returns() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.max_attempts = 5;
        config.retry = stores::retry_every(Duration::from_millis(10));
        let jobs = store.open(&pool, config);
        let handler_db = Mutex::new(Db::open(&store.describe()));
        // Rolled back and failed on its first attempt, committed on its
        // second: one invoice, two runs.
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        jobs.register("invoice", move |job| {
            r.fetch_add(1, Ordering::SeqCst);
            if job.attempt() == 1 {
                handler_db.lock().unwrap().invoice(job, Then::RollBack)?;
                return Err("the first attempt fails after its rollback".into());
            }
            handler_db.lock().unwrap().invoice(job, Then::Commit)
        });
        // Rolled back, then the handler returns success: the run loop
        // stores it (the job is done, with no invoice).
        let other_db = Mutex::new(Db::open(&store.describe()));
        jobs.register("quiet", move |job| {
            other_db.lock().unwrap().invoice(job, Then::RollBack)
        });
        jobs.start().unwrap();
        let mut db = Db::open(&store.describe());

        jobs.schedule("twice", "invoice", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        jobs.schedule("quiet", "quiet", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("both are done", || {
            jobs.job("twice").unwrap().is_none() && jobs.job("quiet").unwrap().is_none()
        });
        assert_eq!(runs.load(Ordering::SeqCst), 2, "{kind:?}");
        assert_eq!(db.invoices("twice"), 1, "{kind:?}");
        assert_eq!(db.invoices("quiet"), 0, "{kind:?}");
        // The last outcome is counted once the run loop has stored it.
        eventually("all counted", || jobs.metrics().running == 0);
        let metrics = jobs.metrics();
        assert_eq!(
            (metrics.retried, metrics.succeeded, metrics.lost),
            (1, 2, 0),
            "{kind:?}: {metrics:?}"
        );
    }
}

#[test]
fn a_run_whose_job_was_cancelled_cannot_end_it_and_rolls_back() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = Arc::new(store.open(&pool, real_config()));
        let handler_db = Mutex::new(Db::open(&store.describe()));
        let refused = Arc::new(Mutex::new(None));
        let seen = refused.clone();
        let cancelling = jobs.clone();
        jobs.register("invoice", move |job| {
            // Cancelled while it runs, before it ends itself.
            assert!(cancelling.cancel(job.key()).unwrap());
            let outcome = handler_db.lock().unwrap().invoice(job, Then::Commit);
            *seen.lock().unwrap() = Some(outcome.clone());
            outcome
        });
        jobs.start().unwrap();
        let mut db = Db::open(&store.describe());
        jobs.schedule("gone", "invoice", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the run ended", || refused.lock().unwrap().is_some());
        let outcome = refused.lock().unwrap().take().unwrap();
        let error = outcome.expect_err("complete_in refuses a run without its job");
        assert!(
            error.message().contains("no longer holds its job"),
            "{error}"
        );
        assert_eq!(db.invoices("gone"), 0, "{kind:?}: the write rolled back");
        eventually("counted as lost", || jobs.metrics().lost == 1);
        assert!(jobs.job("gone").unwrap().is_none());
    }
}

#[test]
fn a_run_whose_job_was_replaced_ends_and_the_new_schedule_runs() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = Arc::new(store.open(&pool, real_config()));
        let handler_db = Mutex::new(Db::open(&store.describe()));
        let replacing = jobs.clone();
        let payloads = Arc::new(Mutex::new(Vec::new()));
        let p = payloads.clone();
        jobs.register("invoice", move |job| {
            p.lock().unwrap().push(job.payload().to_vec());
            if job.payload() == b"old" {
                let new = Job::new("k", "invoice", "new", Schedule::After(Duration::ZERO))
                    .if_exists(IfExists::Replace);
                replacing.schedule_all([new]).unwrap();
            }
            handler_db.lock().unwrap().invoice(job, Then::Commit)
        });
        jobs.start().unwrap();
        let mut db = Db::open(&store.describe());
        jobs.schedule("k", "invoice", b"old", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the new schedule ran", || {
            payloads.lock().unwrap().len() == 2 && jobs.job("k").unwrap().is_none()
        });
        assert_eq!(
            *payloads.lock().unwrap(),
            [b"old".to_vec(), b"new".to_vec()],
            "{kind:?}"
        );
        assert_eq!(db.invoices("k"), 2, "{kind:?}");
        assert_eq!(jobs.metrics().lost, 0, "{kind:?}");
    }
}

/// On PostgreSQL the handler's transaction holds its job's row from
/// `complete_in` to its commit; the scheduler's renewals skip that row, so
/// the other runs' ends, claims and renewals go on meanwhile, even past
/// the held run's lease.
#[test]
fn on_postgres_a_run_ending_in_its_transaction_holds_up_no_other_run() {
    let store = Store::new(Kind::Postgres);
    let pool = pool(2);
    let jobs = store.open(&pool, real_config());
    let params = store.params.clone().unwrap();
    let committed = Arc::new(AtomicBool::new(false));
    let c = committed.clone();
    let (completing_tx, completing) = std::sync::mpsc::channel();
    let completing_tx = Mutex::new(completing_tx);
    jobs.register("slow", move |job| {
        let mut client = postgres::Client::connect(&params, postgres::NoTls).unwrap();
        let mut tx = client.transaction().unwrap();
        job.complete_in(&mut tx)?;
        completing_tx.lock().unwrap().send(()).unwrap();
        // Past the run's 1 s lease, its row locked all along.
        std::thread::sleep(Duration::from_millis(2_500));
        c.store(true, Ordering::SeqCst);
        tx.commit().unwrap();
        Ok(())
    });
    jobs.register("quick", |_| Ok(()));
    jobs.start().unwrap();
    jobs.schedule("slow", "slow", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    completing.recv_timeout(Duration::from_secs(30)).unwrap();
    for n in 0..5 {
        let key = format!("quick-{n}");
        jobs.schedule(&key, "quick", b"", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the quick run ends", || jobs.job(&key).unwrap().is_none());
        assert!(
            !committed.load(Ordering::SeqCst),
            "quick-{n} waited for the slow run's commit"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eventually("the slow run ends", || jobs.job("slow").unwrap().is_none());
    eventually("and is counted", || jobs.metrics().running == 0);
    let metrics = jobs.metrics();
    assert_eq!(metrics.succeeded, 6, "{metrics:?}");
    assert_eq!(metrics.lost, 0, "{metrics:?}");
}

// ---- Kills -------------------------------------------------------------

/// Many jobs, for the random kill.
const MANY: usize = 400;

fn kill_config() -> Config {
    let mut config = real_config();
    config.lease = Duration::from_millis(500);
    config.retry = stores::retry_every(Duration::from_millis(10));
    config
}

/// The children's bodies: only when a parent runs this test as one.
#[test]
#[ignore = "run by the other tests of this file as a child process"]
fn child() {
    let Some((part, store)) = child_part() else {
        return;
    };
    let pool = pool(2);
    let jobs = open_described(&store, &pool, kill_config());
    let then = match part.as_str() {
        "die_before_commit" => Then::DieBeforeCommit,
        "die_after_commit" => Then::DieAfterCommit,
        "run" => Then::Commit,
        other => panic!("no such part: {other}"),
    };
    register(&jobs, &store, move |_| then);
    jobs.start().unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

/// A scheduler of the parent's on `store` that commits every run.
fn survivor(store: &Store, pool: &ScheduledExecutor) -> (DurableScheduler, Arc<AtomicUsize>) {
    let jobs = open_described(&store.describe(), pool, kill_config());
    let runs = register(&jobs, &store.describe(), |_| Then::Commit);
    (jobs, runs)
}

/// A job scheduled, then run by a child whose handler dies as `part`
/// says (`abort`); the parent's scheduler, not started, the invoices'
/// connection, and the store (kept alive for them).
struct Killed {
    jobs: DurableScheduler,
    runs: Arc<AtomicUsize>,
    db: Db,
    _pool: ScheduledExecutor,
    _store: Store,
}

fn killed_in_its_handler(kind: Kind, part: &str) -> Killed {
    let store = Store::new(kind);
    let pool = pool(2);
    let (jobs, runs) = survivor(&store, &pool);
    let db = Db::open(&store.describe());
    jobs.schedule("j", "invoice", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    let status = spawn_child(part, &store).wait().unwrap();
    assert!(
        !status.success(),
        "{kind:?}: the child aborted in its handler"
    );
    Killed {
        jobs,
        runs,
        db,
        _pool: pool,
        _store: store,
    }
}

#[test]
fn killed_between_its_write_and_its_commit_the_job_runs_again_and_writes_once() {
    for kind in BOTH {
        // Every field bound: the pool and the store live to the end.
        let Killed {
            jobs,
            runs,
            mut db,
            _pool,
            _store,
        } = killed_in_its_handler(kind, "die_before_commit");
        assert_eq!(db.invoices("j"), 0, "{kind:?}: the write died with it");
        let row = jobs.job("j").unwrap().expect("the job is still there");
        assert_eq!(row.state, JobState::Running, "{kind:?}: its lease runs");
        jobs.start().unwrap();
        eventually("taken over and done", || jobs.job("j").unwrap().is_none());
        assert_eq!(db.invoices("j"), 1, "{kind:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{kind:?}");
    }
}

#[test]
fn killed_after_its_commit_the_job_never_runs_again() {
    for kind in BOTH {
        // Every field bound: the pool and the store live to the end.
        let Killed {
            jobs,
            runs,
            mut db,
            _pool,
            _store,
        } = killed_in_its_handler(kind, "die_after_commit");
        assert_eq!(db.invoices("j"), 1, "{kind:?}");
        assert!(
            jobs.job("j").unwrap().is_none(),
            "{kind:?}: the commit ended the run"
        );
        jobs.start().unwrap();
        // Past the dead child's lease, and several polls.
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(runs.load(Ordering::SeqCst), 0, "{kind:?}: never again");
        assert_eq!(db.invoices("j"), 1, "{kind:?}");
    }
}

#[test]
fn killed_at_a_random_moment_every_job_writes_exactly_once() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let (jobs, _) = survivor(&store, &pool);
        let mut db = Db::open(&store.describe());
        let batch: Vec<Job> = (0..MANY)
            .map(|n| {
                let delay = Duration::from_millis((n as u64 * 7) % 1_500);
                Job::new(format!("j-{n:03}"), "invoice", "", Schedule::After(delay))
            })
            .collect();
        jobs.schedule_all(batch).unwrap();
        let mut child = spawn_child("run", &store);
        // Killed once it has written between a tenth and two thirds of
        // the invoices: at a moment of its choosing, mid-run.
        let stop_at = {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos() as usize;
            MANY / 10 + nanos % (MANY * 2 / 3 - MANY / 10)
        };
        eventually("the child wrote some", || db.tally().1 as usize >= stop_at);
        child.kill().unwrap();
        child.wait().unwrap();
        let (twice, written) = db.tally();
        assert!(twice.is_empty(), "{kind:?}: {twice:?}");
        assert!((written as usize) < MANY, "{kind:?}: killed mid-run");
        jobs.start().unwrap();
        eventually("the rest ran", || db.tally().1 as usize == MANY);
        eventually("and ended", || {
            (0..MANY).all(|n| jobs.job(&format!("j-{n:03}")).unwrap().is_none())
        });
        let (twice, written) = db.tally();
        assert!(
            twice.is_empty(),
            "{kind:?}: written twice after killing at {stop_at}: {twice:?}"
        );
        assert_eq!(written as usize, MANY, "{kind:?}");
    }
}

//! Jobs scheduled in the application's own transaction
//! (`DurableScheduler::schedule_in`), on both stores, with the
//! application's own connection (`rusqlite`, `postgres`): a rollback leaves
//! no job and runs nothing; a commit runs the job, never before the
//! commit, placed by the notification of the commit (the polls here are a
//! minute apart), even when the scheduler that scheduled it is gone; and on
//! PostgreSQL, a transaction whose sequence numbers others overtook while
//! it was open is still placed at its commit. A process killed (`abort`)
//! between its `schedule_in` and its commit leaves neither the order nor
//! the job; one killed just after its commit leaves both, and another
//! process runs the job.

mod common;
mod stores;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool_durable::{Config, DurableScheduler, Job, Schedule};
use stores::{
    child_part, eventually, open_described, pool, real_config, spawn_child, Kind, Store, BOTH,
};

/// Polls a minute apart: what runs within seconds was placed by a
/// notification (PostgreSQL) or a look at the file's change counter
/// (SQLite), not by a poll.
fn slow_polls() -> Config {
    let mut config = real_config();
    config.window = Duration::from_secs(180);
    config.poll_interval = Duration::from_secs(60);
    config
}

/// The application's own connection to the store, with an `orders` table.
enum App {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

impl App {
    fn open(store: &Store) -> App {
        App::open_described(&store.describe())
    }

    /// On the store `Store::describe` described.
    fn open_described(store: &str) -> App {
        match store.split_once(':').unwrap() {
            ("sqlite", path) => {
                let c = rusqlite::Connection::open(path).unwrap();
                c.busy_timeout(Duration::from_secs(5)).unwrap();
                c.execute(
                    "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)",
                    [],
                )
                .unwrap();
                App::Sqlite(c)
            }
            (_, params) => {
                let mut c = postgres::Client::connect(params, postgres::NoTls).unwrap();
                c.batch_execute("CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY)")
                    .unwrap();
                App::Postgres(c)
            }
        }
    }

    /// Writes order `id` and schedules `jobs` in one transaction, waits
    /// `before_commit`, then commits it (or rolls it back); when it was
    /// committed.
    fn order(
        &mut self,
        scheduler: &DurableScheduler,
        id: i64,
        jobs: Vec<Job>,
        before_commit: Duration,
        commit: bool,
    ) -> Instant {
        self.order_then(scheduler, id, jobs, before_commit, commit, || {})
    }

    /// `order`, then `after` (before the transaction is dropped).
    fn order_then(
        &mut self,
        scheduler: &DurableScheduler,
        id: i64,
        jobs: Vec<Job>,
        before_commit: Duration,
        commit: bool,
        after: impl FnOnce(),
    ) -> Instant {
        match self {
            App::Sqlite(c) => {
                let mut tx = c.transaction().unwrap();
                tx.execute("INSERT INTO orders (id) VALUES (?1)", [id])
                    .unwrap();
                scheduler.schedule_in(&mut tx, jobs).unwrap();
                std::thread::sleep(before_commit);
                if commit {
                    tx.commit().unwrap();
                } else {
                    after();
                    tx.rollback().unwrap();
                    return Instant::now();
                }
            }
            App::Postgres(c) => {
                let mut tx = c.transaction().unwrap();
                tx.execute("INSERT INTO orders (id) VALUES ($1)", &[&id])
                    .unwrap();
                scheduler.schedule_in(&mut tx, jobs).unwrap();
                std::thread::sleep(before_commit);
                if commit {
                    tx.commit().unwrap();
                } else {
                    after();
                    tx.rollback().unwrap();
                    return Instant::now();
                }
            }
        }
        after();
        Instant::now()
    }

    fn has_order(&mut self, id: i64) -> bool {
        match self {
            App::Sqlite(c) => {
                c.query_row("SELECT count(*) FROM orders WHERE id = ?1", [id], |r| {
                    r.get::<_, i64>(0)
                })
                .unwrap()
                    == 1
            }
            App::Postgres(c) => {
                c.query_one("SELECT count(*) FROM orders WHERE id = $1", &[&id])
                    .unwrap()
                    .get::<_, i64>(0)
                    == 1
            }
        }
    }
}

fn remind(id: i64) -> Job {
    Job::new(
        format!("remind-{id}"),
        "remind",
        id.to_string(),
        Schedule::After(Duration::ZERO),
    )
}

/// Runs of "remind": the payload and when it started.
fn register(jobs: &DurableScheduler) -> Arc<Mutex<Vec<(String, Instant)>>> {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let r = runs.clone();
    jobs.register("remind", move |job| {
        let payload = String::from_utf8(job.payload().to_vec()).unwrap();
        r.lock().unwrap().push((payload, Instant::now()));
        Ok(())
    });
    runs
}

#[test]
fn a_rollback_leaves_no_job_and_a_commit_runs_it_never_before() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, slow_polls());
        let runs = register(&jobs);
        jobs.start().unwrap();
        let mut app = App::open(&store);

        // Rolled back: neither the order nor its job, and nothing runs.
        app.order(&jobs, 1, vec![remind(1)], Duration::ZERO, false);
        std::thread::sleep(Duration::from_millis(500));
        assert!(!app.has_order(1), "{kind:?}");
        assert!(jobs.job("remind-1").unwrap().is_none(), "{kind:?}");
        assert!(runs.lock().unwrap().is_empty(), "{kind:?}: nothing ran");

        // Committed 400 ms after it was scheduled (due at once): it runs
        // after the commit, placed within seconds though polls are a
        // minute apart.
        let committed = app.order(&jobs, 2, vec![remind(2)], Duration::from_millis(400), true);
        assert!(app.has_order(2), "{kind:?}");
        eventually("the committed job runs", || {
            !runs.lock().unwrap().is_empty()
        });
        let runs = runs.lock().unwrap();
        assert_eq!(runs.len(), 1, "{kind:?}: {runs:?}");
        assert_eq!(runs[0].0, "2");
        let after = runs[0].1.saturating_duration_since(committed);
        assert!(
            runs[0].1 >= committed - Duration::from_millis(5),
            "{kind:?}: ran before its commit"
        );
        assert!(
            after < Duration::from_secs(10),
            "{kind:?}: placed by a poll, {after:?} later"
        );
    }
}

/// The scheduler that scheduled the job (in the application's
/// transaction) is gone when the transaction commits: another scheduler
/// on the store runs it.
#[test]
fn a_commit_runs_even_when_the_scheduler_that_scheduled_it_is_gone() {
    for kind in BOTH {
        let store = Store::new(kind);
        let (pool_a, pool_b) = (pool(1), pool(2));
        let b = store.open(&pool_b, slow_polls());
        let runs = register(&b);
        b.start().unwrap();
        let mut app = App::open(&store);
        let a = store.open(&pool_a, slow_polls());
        match &mut app {
            App::Sqlite(c) => {
                let mut tx = c.transaction().unwrap();
                a.schedule_in(&mut tx, [remind(3)]).unwrap();
                drop(a);
                tx.commit().unwrap();
            }
            App::Postgres(c) => {
                let mut tx = c.transaction().unwrap();
                a.schedule_in(&mut tx, [remind(3)]).unwrap();
                drop(a);
                tx.commit().unwrap();
            }
        }
        drop(pool_a);
        eventually("b runs it", || runs.lock().unwrap().len() == 1);
        assert_eq!(runs.lock().unwrap()[0].0, "3", "{kind:?}");
    }
}

/// PostgreSQL draws sequence numbers when a statement runs, not when its
/// transaction commits: jobs scheduled by others, and seen, after the
/// application's transaction drew its numbers and before it committed,
/// leave it behind what fresh polls look for. Its commit's notification
/// asks for a full poll: it is placed at once all the same.
#[test]
fn a_transaction_overtaken_by_later_schedules_is_placed_at_its_commit() {
    let store = Store::new(Kind::Postgres);
    let pool = pool(2);
    let jobs = store.open(&pool, slow_polls());
    let runs = register(&jobs);
    jobs.start().unwrap();
    let mut app = App::open(&store);
    let App::Postgres(c) = &mut app else {
        unreachable!()
    };
    let mut tx = c.transaction().unwrap();
    jobs.schedule_in(&mut tx, [remind(4)]).unwrap();
    // Others schedule and run, seen by fresh polls.
    for id in 10..20 {
        jobs.schedule_all([remind(id)]).unwrap();
    }
    eventually("the later ones run", || runs.lock().unwrap().len() == 10);
    tx.commit().unwrap();
    let committed = Instant::now();
    eventually("the overtaken one runs", || {
        runs.lock().unwrap().len() == 11
    });
    let runs = runs.lock().unwrap();
    let (payload, at) = runs.last().unwrap();
    assert_eq!(payload, "4");
    let after = at.saturating_duration_since(committed);
    assert!(
        after < Duration::from_secs(10),
        "placed by a poll, {after:?} later"
    );
}

/// The children's bodies: only when a parent runs this test as one.
#[test]
#[ignore = "run by the other tests of this file as a child process"]
fn child() {
    let Some((part, store)) = child_part() else {
        return;
    };
    let pool = pool(1);
    let jobs = open_described(&store, &pool, slow_polls());
    let mut app = App::open_described(&store);
    // Dies (`abort`: no rollback sent, no destructor) before its commit,
    // or just after it.
    let commit = part == "die_after_commit";
    app.order_then(&jobs, 5, vec![remind(5)], Duration::ZERO, commit, || {
        std::process::abort()
    });
    unreachable!("aborted");
}

#[test]
fn a_process_killed_before_its_commit_leaves_nothing_and_after_it_everything() {
    for kind in BOTH {
        for part in ["die_before_commit", "die_after_commit"] {
            let store = Store::new(kind);
            let pool = pool(2);
            let jobs = store.open(&pool, slow_polls());
            let runs = register(&jobs);
            jobs.start().unwrap();
            let status = spawn_child(part, &store).wait().unwrap();
            assert!(!status.success(), "{kind:?} {part}: the child aborted");
            let mut app = App::open(&store);
            if part == "die_before_commit" {
                std::thread::sleep(Duration::from_millis(500));
                assert!(!app.has_order(5), "{kind:?}: no order");
                assert!(jobs.job("remind-5").unwrap().is_none(), "{kind:?}: no job");
                assert!(runs.lock().unwrap().is_empty(), "{kind:?}: nothing ran");
            } else {
                assert!(app.has_order(5), "{kind:?}: the order");
                eventually("the job runs here", || runs.lock().unwrap().len() == 1);
                assert_eq!(runs.lock().unwrap()[0].0, "5", "{kind:?}");
            }
        }
    }
}

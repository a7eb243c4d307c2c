//! Jobs scheduled, and runs ended, in an application's sqlx transaction
//! (`schedule_in_sqlx`, `complete_in_sqlx`), on both stores, through sqlx
//! pools of the application's on a tokio runtime: a rollback leaves no job
//! and runs nothing; a commit runs the job after the commit, placed within
//! seconds though the polls are a minute apart. An async handler's write
//! and its run's end commit together; rolled back, the run ends with what
//! the handler returns.

mod common;
mod stores;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool_durable::{Config, DurableScheduler, Job, JobError, Schedule};
use stores::{eventually, pool, real_config, Kind, Store, BOTH};

fn slow_polls() -> Config {
    let mut config = real_config();
    config.window = Duration::from_secs(180);
    config.poll_interval = Duration::from_secs(60);
    config
}

fn remind(id: i64) -> Job {
    Job::new(
        format!("remind-{id}"),
        "remind",
        id.to_string(),
        Schedule::After(Duration::ZERO),
    )
}

/// On the pool `$db` (`create` makes the orders table): order 1 and its
/// reminder in a transaction rolled back, then order 2 and its reminder in
/// one committed 400 ms after the schedule; when it was committed. (A
/// macro: the two pools' types share no trait the test can name simply.)
macro_rules! orders {
    ($db:expr, $jobs:expr, $create:expr) => {{
        let db = $db;
        sqlx::query($create).execute(&db).await.unwrap();
        for (id, commit) in [(1_i64, false), (2, true)] {
            let mut tx = db.begin().await.unwrap();
            sqlx::query("INSERT INTO orders (id) VALUES ($1)")
                .bind(id)
                .execute(&mut *tx)
                .await
                .unwrap();
            $jobs.schedule_in_sqlx(&mut tx, [remind(id)]).await.unwrap();
            if commit {
                tokio::time::sleep(Duration::from_millis(400)).await;
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
        }
        Instant::now()
    }};
}

/// sqlx's options for the test server's `key=value` parameters.
fn pg_options(params: &str) -> sqlx::postgres::PgConnectOptions {
    let mut options = sqlx::postgres::PgConnectOptions::new();
    for pair in params.split_whitespace() {
        let (key, value) = pair.split_once('=').unwrap();
        options = match key {
            "host" => options.host(value),
            "port" => options.port(value.parse().unwrap()),
            "user" => options.username(value),
            "dbname" => options.database(value),
            other => panic!("a parameter the test does not know: {other}"),
        };
    }
    options
}

#[test]
fn an_sqlx_rollback_leaves_no_job_and_a_commit_runs_it_after_the_commit() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, slow_polls());
        let runs = Arc::new(Mutex::new(Vec::new()));
        let r = runs.clone();
        jobs.register("remind", move |job| {
            r.lock()
                .unwrap()
                .push((job.payload().to_vec(), Instant::now()));
            Ok(())
        });
        jobs.start().unwrap();
        let committed = rt.block_on(async {
            match kind {
                Kind::Postgres => {
                    let options = pg_options(store.params.as_deref().unwrap());
                    let db = sqlx::PgPool::connect_with(options).await.unwrap();
                    orders!(db, jobs, "CREATE TABLE orders (id bigint PRIMARY KEY)")
                }
                Kind::Sqlite => {
                    let url = format!("sqlite://{}", store.path().display());
                    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
                    orders!(db, jobs, "CREATE TABLE orders (id INTEGER PRIMARY KEY)")
                }
            }
        });
        assert!(
            jobs.job("remind-1").unwrap().is_none(),
            "{kind:?}: rolled back"
        );
        eventually("the committed job runs", || {
            !runs.lock().unwrap().is_empty()
        });
        std::thread::sleep(Duration::from_millis(300));
        let runs = runs.lock().unwrap();
        assert_eq!(runs.len(), 1, "{kind:?}: only the committed one");
        assert_eq!(runs[0].0, b"2");
        assert!(
            runs[0].1 + Duration::from_millis(5) >= committed,
            "{kind:?}: before its commit"
        );
        let after = runs[0].1.saturating_duration_since(committed);
        assert!(
            after < Duration::from_secs(10),
            "{kind:?}: placed by a poll, {after:?} later"
        );
    }
}

/// Registers "invoice", async on `$rt`, with the sqlx pool `$db` (whose
/// `invoices` table `$create` makes): each run writes an invoice and ends
/// in one transaction; a first attempt of "fails-once" rolls it back and
/// fails. The runs, counted.
macro_rules! invoicing {
    ($jobs:expr, $rt:expr, $db:expr, $create:expr) => {{
        let db = $db;
        sqlx::query($create).execute(&db).await.unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let handler_db = db.clone();
        $jobs.register_async("invoice", $rt, move |job| {
            let db = handler_db.clone();
            r.fetch_add(1, Ordering::SeqCst);
            async move {
                let to_job = |e: sqlx::Error| JobError::retry(e);
                let mut tx = db.begin().await.map_err(to_job)?;
                sqlx::query("INSERT INTO invoices (key) VALUES ($1)")
                    .bind(job.key())
                    .execute(&mut *tx)
                    .await
                    .map_err(to_job)?;
                job.complete_in_sqlx(&mut tx).await?;
                if job.key() == "fails-once" && job.attempt() == 1 {
                    tx.rollback().await.map_err(to_job)?;
                    return Err("the first attempt rolls back and fails".into());
                }
                tx.commit().await.map_err(to_job)?;
                Ok(())
            }
        });
        (db, runs)
    }};
}

/// Counts the invoices of `key` on the sqlx pool `db`.
macro_rules! invoices {
    ($db:expr, $key:expr) => {{
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM invoices WHERE key = $1")
            .bind($key)
            .fetch_one(&$db)
            .await
            .unwrap();
        n
    }};
}

fn schedule_invoices(jobs: &DurableScheduler) {
    let now = Schedule::After(Duration::ZERO);
    let mut batch = vec![Job::new("fails-once", "invoice", "", now.clone())];
    batch.extend((0..3).map(|n| Job::new(format!("ok-{n}"), "invoice", "", now.clone())));
    jobs.schedule_all(batch).unwrap();
}

#[test]
fn an_async_handler_s_write_and_its_run_s_end_commit_together_in_sqlx() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.retry = stores::retry_every(Duration::from_millis(10));
        let jobs = store.open(&pool, config);
        let done = |jobs: &DurableScheduler| {
            ["fails-once", "ok-0", "ok-1", "ok-2"]
                .iter()
                .all(|key| jobs.job(key).unwrap().is_none())
        };
        // The pool's type differs by store: the run, written once, is a
        // macro on it.
        macro_rules! run_on {
            ($db:expr, $create:expr) => {{
                let (db, runs) = invoicing!(jobs, rt.handle().clone(), $db, $create);
                jobs.start().unwrap();
                schedule_invoices(&jobs);
                while !done(&jobs) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let counts = [
                    invoices!(db, "fails-once"),
                    invoices!(db, "ok-0"),
                    invoices!(db, "ok-1"),
                    invoices!(db, "ok-2"),
                ];
                (counts, runs.load(Ordering::SeqCst))
            }};
        }
        let counts = rt.block_on(async {
            match kind {
                Kind::Postgres => {
                    let options = pg_options(store.params.as_deref().unwrap());
                    let db = sqlx::PgPool::connect_with(options).await.unwrap();
                    run_on!(db, "CREATE TABLE invoices (id bigserial, key text)")
                }
                Kind::Sqlite => {
                    let url = format!("sqlite://{}", store.path().display());
                    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
                    run_on!(
                        db,
                        "CREATE TABLE invoices (id INTEGER PRIMARY KEY, key TEXT)"
                    )
                }
            }
        });
        assert_eq!(counts, ([1, 1, 1, 1], 5), "{kind:?}");
        eventually("all counted", || jobs.metrics().running == 0);
        let metrics = jobs.metrics();
        assert_eq!(
            (metrics.succeeded, metrics.retried, metrics.lost),
            (4, 1, 0),
            "{kind:?}: {metrics:?}"
        );
        assert!(jobs.shutdown(Duration::from_secs(10)));
    }
}

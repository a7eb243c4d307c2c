//! A store that is away or busy when runs end: their outcomes wait and are
//! stored when it is back, so no job is stuck `Running`; and while it is
//! away, the executor's workers still run plain tasks (the store's work is
//! on the scheduler's own threads).

mod common;
mod stores;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool_durable::{JobState, Schedule};
use common::PgServer;
use stores::{eventually, pool, real_config, Kind, Store};

/// SQLite: as a run of a recurring job ends, another connection holds the
/// file's write lock for longer than the busy timeout (5 s), so its
/// outcome cannot be stored; it is stored once the lock is gone, and the
/// job goes on.
#[test]
fn a_finish_that_meets_a_locked_sqlite_file_is_stored_later() {
    let store = Store::new(Kind::Sqlite);
    let pool = pool(2);
    let mut config = real_config();
    config.lease = Duration::from_secs(30);
    let jobs = store.open(&pool, config);
    let runs = Arc::new(AtomicUsize::new(0));
    let (r, path) = (runs.clone(), store.path());
    let (locked_tx, locked) = mpsc::channel();
    let locked_tx = Mutex::new(locked_tx);
    jobs.register("tick", move |_| {
        if r.fetch_add(1, Ordering::SeqCst) == 1 {
            // The second run locks the file for 7 s as it ends.
            let locker = rusqlite::Connection::open(&path).unwrap();
            locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
            let tx = locked_tx.lock().unwrap().clone();
            std::thread::spawn(move || {
                tx.send(()).unwrap();
                std::thread::sleep(Duration::from_secs(7));
                drop(locker);
            });
        }
        Ok(())
    });
    jobs.start().unwrap();
    jobs.schedule(
        "k",
        "tick",
        b"",
        Schedule::Every(Duration::from_millis(200)),
    )
    .unwrap();
    locked.recv_timeout(Duration::from_secs(30)).unwrap();
    let unlocked = Instant::now() + Duration::from_secs(7);
    eventually("it runs again after the lock", || {
        Instant::now() > unlocked && runs.load(Ordering::SeqCst) >= 7
    });
    let k = jobs.job("k").unwrap().unwrap();
    assert!(k.state == JobState::Scheduled || k.state == JobState::Running);
    assert!(jobs.metrics().store_errors > 0, "the lock was met");
    assert_eq!(jobs.metrics().lost, 0, "the outcome waited and was stored");
}

/// PostgreSQL stopped for 12 s while a run is in flight and a recurring
/// job falls due: the run's outcome and the recurring job carry on once
/// the server is back; meanwhile plain tasks on the executor's two workers
/// run at once.
#[test]
fn postgres_away_holds_up_no_worker_and_loses_no_outcome() {
    let server = PgServer::start();
    let params = server.fresh_database();
    let pool = pool(2);
    let mut config = real_config();
    config.lease = Duration::from_secs(60);
    let jobs = chronopool_durable::DurableScheduler::postgres(&pool, &params, config).unwrap();
    let (started_tx, started) = mpsc::channel();
    let (release, gate) = mpsc::channel::<()>();
    let (started_tx, gate) = (Mutex::new(started_tx), Mutex::new(gate));
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    jobs.register("held", move |_| {
        started_tx.lock().unwrap().send(()).unwrap();
        gate.lock().unwrap().recv().unwrap();
        Ok(())
    });
    jobs.register("tick", move |_| {
        t.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    jobs.start().unwrap();
    jobs.schedule("held", "held", b"", Schedule::After(Duration::ZERO))
        .unwrap();
    jobs.schedule(
        "tick",
        "tick",
        b"",
        Schedule::Every(Duration::from_millis(100)),
    )
    .unwrap();
    for n in 0..30 {
        let due = Duration::from_millis(300 + 50 * n);
        jobs.schedule(&format!("j{n}"), "tick", b"", Schedule::After(due))
            .unwrap();
    }
    started.recv_timeout(Duration::from_secs(30)).unwrap();
    eventually("ticks", || ticks.load(Ordering::SeqCst) >= 2);
    server.stop();
    let down = Instant::now();
    release.send(()).unwrap();
    // Jobs fall due meanwhile; the workers stay free for plain tasks.
    while down.elapsed() < Duration::from_secs(12) {
        let asked = Instant::now();
        let task = pool.submit(|| 6 * 7).unwrap();
        assert_eq!(task.join_timeout(Duration::from_secs(1)).unwrap(), 42);
        assert!(asked.elapsed() < Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(100));
    }
    server.start_again();
    let before = ticks.load(Ordering::SeqCst);
    eventually("the held run's outcome is stored", || {
        jobs.job("held").unwrap().is_none()
    });
    eventually("the one-shot jobs ran", || {
        (0..30).all(|n| jobs.job(&format!("j{n}")).unwrap().is_none())
    });
    eventually("the recurring job goes on", || {
        ticks.load(Ordering::SeqCst) >= before + 5
    });
}

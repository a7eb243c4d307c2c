//! Idle workers park without losing a wake-up, and an idle pool burns no CPU.

mod common;

use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use chronopool::ScheduledExecutor;
use common::PATIENCE;

/// CPU time (user + system) of one thread of this process, from
/// /proc/thread-self/task/<tid>/stat, in clock ticks (10 ms on Linux).
#[cfg(target_os = "linux")]
fn thread_cpu_ticks(tid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    // After the parenthesised command: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The id of the calling thread, as /proc names it.
#[cfg(target_os = "linux")]
fn own_tid() -> String {
    let link = std::fs::read_link("/proc/thread-self").unwrap();
    link.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
#[cfg(target_os = "linux")]
fn an_idle_pool_uses_no_cpu() {
    const THREADS: usize = 4;
    let pool = ScheduledExecutor::builder()
        .worker_threads(THREADS)
        .build()
        .unwrap();
    // Every worker reports its thread id (all at once, so each one does).
    let barrier = Arc::new(Barrier::new(THREADS));
    let tids: Vec<String> = (0..THREADS)
        .map(|_| {
            let b = barrier.clone();
            pool.submit(move || {
                b.wait();
                own_tid()
            })
            .unwrap()
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join_timeout(PATIENCE).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let before: u64 = tids.iter().map(|t| thread_cpu_ticks(t)).sum();
    std::thread::sleep(Duration::from_secs(1));
    let used = tids.iter().map(|t| thread_cpu_ticks(t)).sum::<u64>() - before;
    // Spinning workers would use ~100 ticks each; parked ones use none.
    assert!(
        used <= 2,
        "idle workers used {used} ticks (10 ms each) in 1 s"
    );
}

/// Tasks that arrive while workers are going to sleep are never stranded:
/// each round lets every worker fall asleep, then pushes work that needs
/// *all* of them at once (a barrier), so a single lost wake-up hangs the
/// round (caught by the time-out).
#[test]
fn work_pushed_while_workers_fall_asleep_always_wakes_enough_of_them() {
    for threads in [2, 3] {
        let pool = ScheduledExecutor::builder()
            .worker_threads(threads)
            .build()
            .unwrap();
        for round in 0..300 {
            // Vary the gap so that pushes land in every phase of falling asleep.
            std::thread::sleep(Duration::from_micros((round % 7) * 30));
            let barrier = Arc::new(Barrier::new(threads));
            let (tx, rx) = mpsc::channel();
            for _ in 0..threads {
                let (b, tx) = (barrier.clone(), tx.clone());
                pool.execute(move || {
                    b.wait();
                    tx.send(()).unwrap();
                })
                .unwrap();
            }
            for _ in 0..threads {
                rx.recv_timeout(PATIENCE).unwrap_or_else(|_| {
                    panic!("{threads} threads, round {round}: a worker stayed asleep")
                });
            }
        }
    }
}

/// The same from inside the pool: a task pushes work to its own deque that
/// another (sleeping) worker must take, because this one then blocks.
#[test]
fn work_pushed_from_inside_is_stolen_by_a_woken_worker() {
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .build()
        .unwrap();
    for round in 0..300 {
        std::thread::sleep(Duration::from_micros((round % 5) * 40));
        let (tx, rx) = mpsc::channel::<()>();
        let handle = pool
            .submit(move || {
                // The child must run elsewhere: this task blocks until it does.
                chronopool::execute(move || tx.send(()).unwrap()).unwrap();
                rx.recv_timeout(PATIENCE).is_ok()
            })
            .unwrap();
        assert!(
            handle.join().unwrap(),
            "round {round}: the child was stranded"
        );
    }
}

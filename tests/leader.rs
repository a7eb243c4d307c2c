//! Leader-follower timing: an idle worker waits for time itself and runs
//! what falls due (`timer/driver/lead.rs`). What covers for it while it
//! runs something long (the timer thread takes the lead back), and what an
//! idle pool with a far timer costs (nothing).
#![cfg(not(loom))]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chronopool::{ScheduledExecutor, TimerQueue};
use common::{block_on, eventually, queues, Gate};

const MS: Duration = Duration::from_millis(1);

/// Far more than the lateness the timer thread's watch allows a stuck
/// leader (about 2 ms), far less than the time the long task blocks: a
/// machine under load passes it, a timer held up by the long task fails.
const BOUND: Duration = Duration::from_millis(250);

/// A task due soon blocks on a gate: the worker that leads takes it (a
/// leader runs the first due task itself). Returns the gate.
fn block_the_leader(pool: &ScheduledExecutor) -> Gate {
    let gate = Gate::new();
    let waiter = gate.waiter();
    let _blocked = pool.schedule(move || waiter.wait(), 5 * MS).unwrap();
    gate
}

#[test]
fn a_long_task_on_the_leader_does_not_hold_up_the_other_timers() {
    for queue in queues() {
        let pool = common::pool(queue, 2);
        let gate = block_the_leader(&pool);
        let late = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        for i in 1..=10u32 {
            let due = start + 20 * MS * i;
            let late = late.clone();
            let _timer = pool
                .schedule(
                    move || late.lock().unwrap().push(Instant::now() - due),
                    due - Instant::now(),
                )
                .unwrap();
        }
        assert!(
            eventually(|| late.lock().unwrap().len() == 10),
            "{queue:?}: timers held up behind the long task"
        );
        let worst = late.lock().unwrap().iter().copied().max().unwrap();
        assert!(worst < BOUND, "{queue:?}: a timer ran {worst:?} late");
        gate.open();
    }
}

#[test]
fn a_timer_future_rings_while_the_only_worker_runs_a_long_task() {
    for queue in queues() {
        let pool = common::pool(queue, 1);
        let gate = block_the_leader(&pool);
        std::thread::sleep(20 * MS);
        let sleep = pool.sleep(30 * MS);
        // Rung by whoever waits for time: not the worker, which is stuck.
        let sleeper = std::thread::spawn(move || {
            let start = Instant::now();
            block_on(sleep);
            start.elapsed()
        });
        let rung = eventually(|| sleeper.is_finished());
        gate.open();
        assert!(rung, "{queue:?}: the sleep waits for the long task");
        let took = sleeper.join().unwrap();
        assert!(
            took < 30 * MS + BOUND,
            "{queue:?}: a 30 ms sleep took {took:?}"
        );
    }
}

/// Wake-ups (voluntary context switches) of this process's threads whose
/// name starts with `prefix` (the pool's threads, named after it), from
/// /proc: a thread that sleeps until woken counts one per wake-up.
#[cfg(target_os = "linux")]
fn wake_ups_of_threads(prefix: &str) -> u64 {
    let mut wake_ups = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !comm.starts_with(prefix) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(path.join("status")) else {
            continue;
        };
        wake_ups += status
            .lines()
            .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
            .map_or(0, |n| n.trim().parse::<u64>().unwrap());
    }
    wake_ups
}

/// A worker leads, sleeping until a timer an hour away; the timer thread
/// watches it until a little after that: neither wakes meanwhile (a watch
/// that looked every millisecond would wake a thousand times a second, at
/// a CPU cost below what /proc's 10 ms ticks show).
#[test]
#[cfg(target_os = "linux")]
fn an_idle_pool_with_a_far_timer_does_not_wake() {
    for queue in [TimerQueue::heap(), TimerQueue::hierarchical_wheel()] {
        let pool = ScheduledExecutor::builder()
            .worker_threads(2)
            .timer_queue(queue)
            .thread_name("leadidle")
            .build()
            .unwrap();
        let far = pool.schedule(|| (), Duration::from_secs(3600)).unwrap();
        // Some work, so that the workers went through a wake-up.
        for _ in 0..100 {
            pool.submit(|| ()).unwrap().join().unwrap();
        }
        std::thread::sleep(100 * MS);
        let before = wake_ups_of_threads("leadidle");
        std::thread::sleep(Duration::from_secs(1));
        let woken = wake_ups_of_threads("leadidle") - before;
        assert!(
            woken <= 10,
            "{queue:?}: the idle pool woke {woken} times in 1 s"
        );
        far.cancel();
    }
}

/// More timers than a worker leads with (`LEAD_MAX_TIMERS`, 65,536): the
/// lead goes to the timer thread as they are scheduled and back to a
/// worker as they drain; each runs once.
#[test]
fn many_timers_move_the_lead_and_each_runs_once() {
    const TIMERS: usize = 70_000;
    for queue in queues() {
        let pool = common::pool(queue, 2);
        let ran: Arc<Vec<std::sync::atomic::AtomicU32>> =
            Arc::new((0..TIMERS).map(|_| Default::default()).collect());
        for i in 0..TIMERS {
            let ran = ran.clone();
            let delay = Duration::from_micros((i % 200) as u64 * 1_000);
            let _timer = pool
                .schedule(
                    move || ran[i].fetch_add(1, std::sync::atomic::Ordering::SeqCst),
                    delay,
                )
                .unwrap();
        }
        let count = |n| {
            ran.iter()
                .filter(|r| r.load(std::sync::atomic::Ordering::SeqCst) == n)
                .count()
        };
        assert!(eventually(|| count(1) == TIMERS), "{queue:?}: not all ran");
        // Then a few more, once the backend holds few again: on time.
        let late = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..20 {
            let due = Instant::now() + 5 * MS;
            let late = late.clone();
            let _timer = pool
                .schedule(
                    move || late.lock().unwrap().push(Instant::now() - due),
                    5 * MS,
                )
                .unwrap();
            std::thread::sleep(MS);
        }
        assert!(eventually(|| late.lock().unwrap().len() == 20));
        let worst = late.lock().unwrap().iter().copied().max().unwrap();
        assert!(worst < BOUND, "{queue:?}: a timer ran {worst:?} late");
        assert_eq!(count(1), TIMERS, "{queue:?}: none ran twice");
    }
}

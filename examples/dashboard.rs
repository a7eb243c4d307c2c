//! The operator's view of a running executor: a mixed load (heartbeats,
//! request time-outs that mostly get cancelled, jobs with a deadline, a
//! burst of background work every second, a timer future awaited in a
//! loop) for a few seconds, and once a second a line of `metrics()`:
//! throughput, lateness of scheduled runs, what is queued and what the
//! timer holds, rejections and time-outs.
//!
//! ```text
//! cargo run --release --example dashboard            # 5 s
//! cargo run --release --example dashboard -- 20      # 20 s
//! ```

use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronopool::{Metrics, ScheduledExecutor};

const MS: Duration = Duration::from_millis(1);

fn main() -> Result<(), Box<dyn Error>> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(5);
    let pool = ScheduledExecutor::builder()
        .worker_threads(4)
        .thread_name("dash-worker")
        .build()?;
    let stop = Arc::new(AtomicBool::new(false));

    // 200 heartbeats, every 10 ms each.
    let heartbeats: Vec<_> = (0..200u64)
        .map(|i| pool.schedule_at_fixed_rate(|| (), MS * (i % 10) as u32, 10 * MS))
        .collect::<Result<_, _>>()?;

    // A client: requests with a 50 ms time-out each, most answered (the
    // time-out cancelled) within a few ms; some work with a deadline.
    let client = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..100 {
                    n += 1;
                    if let Ok(timeout) = pool.schedule(|| (), 50 * MS) {
                        if n % 10 != 0 {
                            timeout.cancel(); // the reply came in time
                        }
                    }
                }
                // One job in a hundred must finish within 2 ms, or it is
                // asked to stop.
                let _ = pool.submit_with_timeout(
                    move || {
                        let started = Instant::now();
                        while !chronopool::cancelled() && started.elapsed() < (n % 4) as u32 * MS {
                            std::hint::spin_loop();
                        }
                    },
                    2 * MS,
                );
                std::thread::sleep(MS);
            }
        })
    };

    // A second of background work in bursts of 20,000 small tasks.
    let bursts = pool.schedule_at_fixed_rate(
        {
            let pool = pool.clone();
            move || {
                for _ in 0..20_000 {
                    let _ = pool.execute(|| {
                        std::hint::black_box((0..100u64).sum::<u64>());
                    });
                }
            }
        },
        Duration::ZERO,
        Duration::from_secs(1),
    )?;

    // Async code: a flush loop on a timer future, on its own thread.
    let flusher = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut every = pool.interval(25 * MS);
            futures_lite::future::block_on(async {
                while !stop.load(Ordering::Relaxed) {
                    every.tick().await;
                }
            });
        })
    };

    println!(
        "{:>4} {:>10} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8}",
        "t s",
        "runs/s",
        "late p50",
        "late p99",
        "late max",
        "queued",
        "timers",
        "timeouts",
        "rejected"
    );
    let started = Instant::now();
    let mut last = pool.metrics();
    for second in 1..=seconds {
        let next = started + Duration::from_secs(second);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let now = pool.metrics();
        print_line(second, &last, &now);
        last = now;
    }

    stop.store(true, Ordering::Relaxed);
    client.join().expect("the client thread");
    flusher.join().expect("the flusher thread");
    bursts.cancel();
    for beat in heartbeats {
        beat.cancel();
    }
    pool.shutdown();
    assert!(pool.await_termination(Duration::from_secs(30)));
    let end = pool.metrics();
    println!(
        "done: {} runs, {} scheduled runs timed late by p50 {:?}, p99 {:?}, max {:?}",
        end.completed_tasks,
        end.lateness.runs,
        end.lateness.p50,
        end.lateness.p99,
        end.lateness.max
    );
    Ok(())
}

/// One line of the table: the runs of the last second, and the lateness,
/// queue and timer figures now (lateness over the executor's life).
fn print_line(second: u64, last: &Metrics, now: &Metrics) {
    let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    println!(
        "{:>4} {:>10} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8}",
        second,
        now.completed_tasks - last.completed_tasks,
        us(now.lateness.p50),
        us(now.lateness.p99),
        us(now.lateness.max),
        now.queued_tasks,
        now.scheduled_tasks,
        now.timed_out_tasks,
        now.rejected_tasks,
    );
}

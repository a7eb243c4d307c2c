//! The `tracing` feature: a span per task run (id, name, kind, lateness)
//! and events for panics, time-outs, missed runs and rejections, printed by
//! `tracing-subscriber`'s fmt layer.
//!
//! ```sh
//! cargo run --example tracing --features tracing
//! ```

use std::time::Duration;

use chronopool::{MissedRuns, ScheduledExecutor};
use tracing_subscriber::fmt::format::FmtSpan;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Every run's span is printed when it closes, with how long it took;
    // events inside a run carry its span (task.id, task.name, ...).
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false)
        .init();

    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        // The panic is traced; the hook keeps stderr quiet about it.
        .on_panic(|_| {})
        .build()?;
    std::panic::set_hook(Box::new(|_| {}));

    // A heartbeat whose third beat is slow: the beats it missed are
    // skipped (an INFO event "missed runs").
    let mut beat = 0;
    let heartbeat = pool.task().name("heartbeat").schedule_at_fixed_rate_with(
        move || {
            beat += 1;
            if beat == 3 {
                std::thread::sleep(Duration::from_millis(250));
            }
        },
        Duration::ZERO,
        Duration::from_millis(100),
        MissedRuns::Skip,
    )?;

    // A report that panics (an ERROR event, and its handle's error).
    let report = pool.task().name("nightly-report").schedule(
        || -> u32 { panic!("no data for yesterday") },
        Duration::from_millis(50),
    )?;
    println!("report: {:?}", report.join().unwrap_err());

    // A quote that does not come in time (a WARN event "task timed out").
    let quote = pool.task().name("fetch-quote").submit_with_timeout(
        || {
            while !chronopool::cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
        },
        Duration::from_millis(100),
    )?;
    println!("quote: {:?}", quote.join().unwrap_err());

    std::thread::sleep(Duration::from_millis(600));
    heartbeat.cancel();
    pool.shutdown();
    // Refused: the pool is shut down (a WARN event "task rejected").
    let refused = pool.submit(|| ()).unwrap_err();
    println!("after shutdown: {refused}");
    pool.await_termination(Duration::from_secs(5));
    Ok(())
}

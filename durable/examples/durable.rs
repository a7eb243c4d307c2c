//! Durable jobs that outlive the process: run it, stop it (Ctrl-C, or
//! `kill -9`) and run it again; the jobs carry on where they were.
//!
//! ```sh
//! cargo run -p chronopool-durable --example durable             # 20 s, ./durable-example.db
//! cargo run -p chronopool-durable --example durable -- 60 /tmp/jobs.db
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler, Schedule};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map_or(Ok(20), |s| s.parse())?;
    let path = args
        .next()
        .unwrap_or_else(|| "durable-example.db".to_owned());

    let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
    let mut config = Config::default();
    config.poll_interval = Duration::from_secs(1);
    let jobs = DurableScheduler::sqlite(&pool, &path, config)?;
    jobs.register("heartbeat", |job| {
        println!("{} heartbeat (due {})", clock(), seconds_of(job.due()));
        Ok(())
    });
    jobs.register("report", |job| {
        println!(
            "{} report {:?}, attempt {}",
            clock(),
            String::from_utf8_lossy(job.payload()),
            job.attempt()
        );
        Ok(())
    });
    jobs.start()?;

    // Scheduled on the first start only (the heartbeat's key is in the
    // store from then on): a restart carries on instead of starting over.
    if jobs.job("heartbeat")?.is_none() {
        let every = Schedule::Every(Duration::from_secs(3));
        jobs.schedule("heartbeat", "heartbeat", b"", every)?;
        for (n, delay) in [(1, 5), (2, 15), (3, 30)] {
            let payload = format!("the report due {delay} s after the first start");
            let after = Schedule::After(Duration::from_secs(delay));
            jobs.schedule(&format!("report-{n}"), "report", payload, after)?;
        }
    }
    println!(
        "{} running {seconds} s on {path}; stop it and run it again",
        clock()
    );
    std::thread::sleep(Duration::from_secs(seconds));
    let left: Vec<String> = ["report-1", "report-2", "report-3"]
        .into_iter()
        .filter(|key| matches!(jobs.job(key), Ok(Some(_))))
        .map(str::to_owned)
        .collect();
    println!("{} stopping; reports still to come: {left:?}", clock());
    Ok(())
}

fn seconds_of(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 60
}

/// The wall clock's seconds, for the log.
fn clock() -> String {
    format!("[:{:02}]", seconds_of(SystemTime::now()))
}

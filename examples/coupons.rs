//! Calendar jobs and a retry, the way a shop runs them: send coupons on the
//! hour, refresh the price labels daily at 02:00 in Shanghai, and sync with
//! a flaky partner service every morning, retrying with back-off until it
//! answers.
//!
//! ```sh
//! cargo run --example coupons                        # the schedule, then one retry in real time
//! cargo run --example coupons -- --simulate-days 3   # three days in manual time, in milliseconds
//! ```
//!
//! With `--simulate-days N` the pool runs on a [`ManualClock`]: `advance`
//! runs every fire time of the N days in order, and the example prints what
//! fired when (wall times in Shanghai and UTC).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use chronopool::trigger::{Backoff, Cron, Jitter};
use chronopool::{ManualClock, ScheduledExecutor, WeakExecutor};

type Log = Arc<Mutex<Vec<(SystemTime, String)>>>;

/// Where the jobs write what they did, with the wall time of the pool's
/// clock.
#[derive(Clone)]
struct Journal {
    log: Log,
    now: Arc<dyn Fn() -> SystemTime + Send + Sync>,
}

impl Journal {
    fn note(&self, what: String) {
        self.log.lock().unwrap().push(((self.now)(), what));
    }
}

/// A partner service that fails its first `failures` calls of each sync.
fn partner_call(attempt: u32, failures: u32) -> Result<&'static str, &'static str> {
    if attempt <= failures {
        Err("503 Service Unavailable")
    } else {
        Ok("200 OK")
    }
}

/// Schedules the shop's three jobs on `pool`.
fn schedule_jobs(
    pool: &ScheduledExecutor,
    journal: &Journal,
    retry_initial: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let j = journal.clone();
    let sent = AtomicU32::new(0);
    let coupons = pool.schedule_with_trigger(
        move || {
            let n = sent.fetch_add(1, Ordering::Relaxed) + 1;
            j.note(format!("coupons sent (batch {n})"));
            ControlFlow::<()>::Continue(())
        },
        Cron::parse("0 * * * *")?,
    )?;
    let j = journal.clone();
    let labels = pool.schedule_with_trigger(
        move || {
            j.note("price labels refreshed".to_string());
            ControlFlow::<()>::Continue(())
        },
        Cron::parse("0 2 * * *")?.in_time_zone("Asia/Shanghai")?,
    )?;
    // Every morning at 09:30 UTC, a sync that retries with back-off: the
    // partner fails 2, 3 or 4 times before it answers.
    let j = journal.clone();
    let weak: WeakExecutor = pool.downgrade();
    let day = AtomicU32::new(0);
    let sync = pool.schedule_with_trigger(
        move || {
            let failures = 2 + day.fetch_add(1, Ordering::Relaxed) % 3;
            let (j, mut attempt) = (j.clone(), 0);
            if let Some(pool) = weak.upgrade() {
                let retry = Backoff::exponential(retry_initial, 2.0, retry_initial * 30)
                    .jitter(Jitter::Partial(0.2))
                    .max_runs(8);
                let started = pool.schedule_with_trigger(
                    move || {
                        attempt += 1;
                        match partner_call(attempt, failures) {
                            Ok(status) => {
                                j.note(format!("partner sync attempt {attempt}: {status}"));
                                ControlFlow::Break(attempt)
                            }
                            Err(status) => {
                                j.note(format!("partner sync attempt {attempt}: {status}"));
                                ControlFlow::Continue(())
                            }
                        }
                    },
                    retry,
                );
                // The retry runs on its own; its handle is not needed here.
                drop(started);
            }
            ControlFlow::<()>::Continue(())
        },
        Cron::parse("30 9 * * *")?,
    )?;
    // The jobs run until the pool shuts down.
    drop((coupons, labels, sync));
    Ok(())
}

/// `t` as "2026-01-01 08:00 CST (00:00 UTC)".
fn show(t: SystemTime) -> String {
    let Ok(ts) = jiff::Timestamp::try_from(t) else {
        return format!("{t:?}");
    };
    let shanghai = jiff::tz::TimeZone::get("Asia/Shanghai").expect("a bundled zone");
    format!(
        "{} ({} UTC)",
        ts.to_zoned(shanghai).strftime("%Y-%m-%d %H:%M:%S %Z"),
        ts.strftime("%H:%M:%S")
    )
}

fn simulate(days: u32) -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()?;
    let c = clock.clone();
    let journal = Journal {
        log: Log::default(),
        now: Arc::new(move || c.system_time()),
    };
    schedule_jobs(&pool, &journal, Duration::from_secs(30))?;
    println!(
        "simulating {days} day(s) from {}",
        show(clock.system_time())
    );
    let took = Instant::now();
    clock.advance(Duration::from_secs(86_400) * days);
    let took = took.elapsed();
    let mut log = journal.log.lock().unwrap().clone();
    log.sort_by_key(|(at, _)| *at);
    for (at, what) in &log {
        println!("{}  {what}", show(*at));
    }
    let count = |prefix: &str| log.iter().filter(|(_, w)| w.starts_with(prefix)).count();
    println!(
        "{days} day(s) in {:.1} ms of real time: {} coupon batches, {} label refreshes, {} partner calls",
        took.as_secs_f64() * 1e3,
        count("coupons"),
        count("price labels"),
        count("partner"),
    );
    pool.shutdown();
    Ok(())
}

fn real_time() -> Result<(), Box<dyn std::error::Error>> {
    let now = SystemTime::now();
    println!("now:                {}", show(now));
    let hourly = Cron::parse("0 * * * *")?;
    let labels = Cron::parse("0 2 * * *")?.in_time_zone("Asia/Shanghai")?;
    let sync = Cron::parse("30 9 * * *")?;
    for (name, cron) in [
        ("coupons", &hourly),
        ("price labels", &labels),
        ("partner sync", &sync),
    ] {
        if let Some(next) = cron.next_after(now) {
            println!("next {name:<13} {}", show(next));
        }
    }
    // One retry, in real time: the partner fails twice, then answers.
    let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
    let start = Instant::now();
    let mut attempt = 0;
    let retry = pool.schedule_with_trigger(
        move || {
            attempt += 1;
            let result = partner_call(attempt, 2);
            println!(
                "partner sync attempt {attempt} at +{:>4} ms: {}",
                start.elapsed().as_millis(),
                result.unwrap_or_else(|e| e)
            );
            match result {
                Ok(_) => ControlFlow::Break(attempt),
                Err(_) => ControlFlow::Continue(()),
            }
        },
        Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(2)).max_runs(8),
    )?;
    println!("ended: {:?}", retry.join()?);
    println!("(run with --simulate-days N to see N days of the schedule)");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("--simulate-days") => {
            let days = args
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or("--simulate-days takes a number of days")?;
            simulate(days)
        }
        None => real_time(),
        Some(other) => Err(format!("unknown argument {other:?} (try --simulate-days 3)").into()),
    }
}

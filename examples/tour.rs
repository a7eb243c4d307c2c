//! A short tour of chronopool: submit and join, a fork-join computation
//! inside the pool, a panic that stays isolated, cancellation, `.await`,
//! tasks that run later (one-shot, fixed rate, fixed delay), a week of cron
//! jobs and a retry with back-off in manual time, and a shutdown that hands
//! back what never ran.
//!
//! ```text
//! cargo run --release --example tour
//! ```

use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use chronopool::{ScheduledExecutor, TaskError};

/// Sums 0..n by splitting the range and submitting the halves from inside
/// the pool; every task joins its child (the join runs queued work meanwhile).
fn sum(lo: u64, hi: u64) -> u64 {
    if hi - lo <= 10_000 {
        return (lo..hi).map(std::hint::black_box).sum();
    }
    let mid = (lo + hi) / 2;
    let left = chronopool::submit(move || sum(lo, mid)).expect("runs on a worker");
    let right = sum(mid, hi);
    left.join().expect("no panic") + right
}

fn main() -> Result<(), Box<dyn Error>> {
    // The tour provokes panics on purpose. The pool's `on_panic` hook prints
    // each as one line, so std's default message (and backtrace) is kept
    // for panics elsewhere only.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let on_the_pool = std::thread::current()
            .name()
            .is_some_and(|name| name.starts_with("tour-"));
        if !on_the_pool {
            default_hook(info);
        }
    }));

    let panics = Arc::new(AtomicUsize::new(0));
    let seen = panics.clone();
    let pool = ScheduledExecutor::builder()
        .worker_threads(4)
        .thread_name("tour")
        .on_panic(move |p| {
            seen.fetch_add(1, Ordering::SeqCst);
            println!("  on_panic hook saw: {p}");
        })
        .build()?;

    println!("1. submit and join");
    let answer = pool.submit(|| 6 * 7)?;
    println!("  6 * 7 = {}", answer.join()?);

    println!("2. a fork-join sum of 0..100,000,000 inside the pool");
    let t = Instant::now();
    let total = pool.submit(|| sum(0, 100_000_000))?.join()?;
    println!("  = {total} in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);

    println!("3. one million fire-and-forget tasks");
    let counter = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    for _ in 0..1_000_000 {
        let c = counter.clone();
        pool.execute(move || {
            c.fetch_add(1, Ordering::Relaxed);
        })?;
    }
    pool.submit(|| ())?.join()?;
    while counter.load(Ordering::Relaxed) < 1_000_000 {
        std::thread::yield_now();
    }
    println!("  all ran in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);

    println!("4. a panic is isolated");
    // The on_panic hook sees it (and prints it, above); so does the handle.
    let oops = pool.submit(|| -> u32 { panic!("something broke") })?;
    match oops.join() {
        Err(TaskError::Panicked(p)) => {
            println!("  the handle says: panicked with {:?}", p.message())
        }
        other => println!("  unexpected: {other:?}"),
    }
    println!(
        "  the workers still run tasks: {}",
        pool.submit(|| "yes")?.join()?
    );

    println!("5. cancel a task before it runs");
    // Keep the four workers busy so that the next task stays queued.
    let blockers: Vec<_> = (0..4)
        .map(|_| {
            let (tx, rx) = mpsc::channel::<()>();
            pool.execute(move || {
                let _ = rx.recv();
            })
            .map(|_| tx)
        })
        .collect::<Result<_, _>>()?;
    let doomed = pool.submit(|| println!("  (never printed)"))?;
    println!(
        "  cancel() -> {}; join() -> {:?}",
        doomed.cancel(),
        doomed.join()
    );
    drop(blockers); // lets the four blocked tasks finish

    println!("6. await a handle from async code (any runtime; here a tiny block_on)");
    let handle = pool.submit(|| "from a future")?;
    println!("  {}", block_on(handle)?);

    println!("7. tasks that run later");
    let t = Instant::now();
    let reply = pool.schedule(|| "a reply", Duration::from_millis(50))?;
    println!("  one-shot due in {:?}", reply.delay());
    println!(
        "  -> {:?} after {:.1} ms",
        reply.join()?,
        t.elapsed().as_secs_f64() * 1e3
    );

    let beats = Arc::new(AtomicUsize::new(0));
    let b = beats.clone();
    let heartbeat = pool.schedule_at_fixed_rate(
        move || {
            b.fetch_add(1, Ordering::SeqCst);
        },
        Duration::ZERO,
        Duration::from_millis(10),
    )?;
    let sweeps = Arc::new(AtomicUsize::new(0));
    let s = sweeps.clone();
    let sweep = pool.schedule_with_fixed_delay(
        move || {
            s.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5)); // the delay counts from here
        },
        Duration::from_millis(5),
        Duration::from_millis(20),
    )?;
    let far = pool.schedule(|| println!("  (never printed)"), Duration::from_secs(3600))?;
    std::thread::sleep(Duration::from_millis(200));
    println!(
        "  in 200 ms: {} heartbeats (fixed rate, every 10 ms), {} sweeps (fixed delay of 20 ms after each 5 ms run)",
        beats.load(Ordering::SeqCst),
        sweeps.load(Ordering::SeqCst)
    );
    println!(
        "  cancel: heartbeat {}, sweep {}, the task due in an hour {} (its closure is dropped now)",
        heartbeat.cancel(),
        sweep.cancel(),
        far.cancel()
    );
    let flaky = pool.schedule_at_fixed_rate(
        {
            let mut runs = 0;
            move || {
                runs += 1;
                if runs == 3 {
                    panic!("the third run failed");
                }
            }
        },
        Duration::ZERO,
        Duration::from_millis(5),
    )?;
    match flaky.join() {
        Err(TaskError::Panicked(p)) => println!("  a periodic task stopped at its panic: {p}"),
        other => println!("  unexpected: {other:?}"),
    }

    println!("8. a week of calendar jobs and a retry, in manual time");
    calendar_week()?;

    println!("9. shutdown_now hands back what never started");
    let (release, wait) = mpsc::channel::<()>();
    let wait = Arc::new(std::sync::Mutex::new(wait));
    for _ in 0..4 {
        let wait = wait.clone();
        pool.execute(move || {
            let _ = wait.lock().map(|w| w.recv_timeout(Duration::from_secs(5)));
        })?;
    }
    std::thread::sleep(Duration::from_millis(20));
    let queued: Vec<_> = (0..10)
        .map(|i| pool.submit(move || i))
        .collect::<Result<_, _>>()?;
    let never_started = pool.shutdown_now();
    println!(
        "  {} tasks came back; running 5 of them here, dropping 5",
        never_started.len()
    );
    for (i, task) in never_started.into_iter().enumerate() {
        if i < 5 {
            task.run();
        }
    }
    drop(release);
    let (ok, cancelled) = queued
        .into_iter()
        .fold((0, 0), |(ok, c), h| match h.join() {
            Ok(_) => (ok + 1, c),
            Err(_) => (ok, c + 1),
        });
    println!("  their handles: {ok} with a value, {cancelled} cancelled");
    match pool.submit(|| 1) {
        Err(e) => println!("  a submission now: {e}"),
        Ok(_) => println!("  unexpected: accepted after shutdown"),
    }
    println!(
        "  terminated: {}",
        pool.await_termination(Duration::from_secs(10))
    );
    println!("  metrics: {:?}", pool.metrics());
    println!(
        "  panics seen by the hook: {}",
        panics.load(Ordering::SeqCst)
    );
    Ok(())
}

/// Hourly coupons, a daily 02:00 job in Shanghai and a retry with back-off,
/// run for a week on a manual clock: `advance` runs every fire time in
/// order, and returns when the pool is quiet.
fn calendar_week() -> Result<(), Box<dyn Error>> {
    use chronopool::trigger::{Backoff, Cron};
    use chronopool::ManualClock;
    use std::ops::ControlFlow;

    let clock = ManualClock::new();
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .clock(clock.clone())
        .build()?;
    let (coupons, labels) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let c = coupons.clone();
    let hourly = pool.schedule_with_trigger(
        move || {
            c.fetch_add(1, Ordering::Relaxed);
            ControlFlow::<()>::Continue(())
        },
        Cron::parse("0 * * * *")?,
    )?;
    let l = labels.clone();
    let daily = pool.schedule_with_trigger(
        move || {
            l.fetch_add(1, Ordering::Relaxed);
            ControlFlow::<()>::Continue(())
        },
        Cron::parse("0 2 * * *")?.in_time_zone("Asia/Shanghai")?,
    )?;
    let (start, tries) = (clock.now(), Arc::new(std::sync::Mutex::new(Vec::new())));
    let (t, c) = (tries.clone(), clock.clone());
    let mut attempt = 0;
    let retry = pool.schedule_with_trigger(
        move || {
            attempt += 1;
            t.lock().unwrap().push(c.now() - start);
            if attempt == 4 {
                ControlFlow::Break(attempt)
            } else {
                ControlFlow::Continue(())
            }
        },
        Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(60)),
    )?;
    let t = Instant::now();
    clock.advance(Duration::from_secs(7 * 24 * 3600));
    println!(
        "  {} coupon batches, {} label refreshes, in {:.1} ms of real time",
        coupons.load(Ordering::Relaxed),
        labels.load(Ordering::Relaxed),
        t.elapsed().as_secs_f64() * 1e3
    );
    println!(
        "  the retry tried at {:?} and ended {:?}",
        tries.lock().unwrap(),
        retry.join()?
    );
    hourly.cancel();
    daily.cancel();
    Ok(())
}

/// Polls a future to completion on this thread.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

//! The `sleep-future` workload: a million sleep futures on a tokio
//! runtime, each timed by the timer of the system under test.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::measure::{self, now_ns, ns_of, per_op_ns, percentile_us, DONE};
use crate::systems::SleepTimer;
use crate::workload::{timed_out, Metrics, Params, WAIT};

/// On a tokio multi-thread runtime (`p.threads` workers), one task creates
/// N sleep futures (1,000,000 at SCALE 1), delays uniform in [0, 1000) ms,
/// polls each once, and spawns it as a tokio task that records its
/// lateness when it completes (one that completed on that poll, already
/// due, records it there); then waits until all completed. The RSS
/// delta over the create phase, per sleep, is its `bytes_per_pending`
/// (the spawned task's own memory included, the same for every system).
pub fn sleep_future<S: SleepTimer>(config: &S::Config, p: &Params) -> Result<Metrics, String> {
    let n = p.n(1_000_000);
    let delays = measure::delays_ns(n, Duration::ZERO, Duration::from_millis(1000));
    let slots = measure::slots(n);
    DONE.reset(n as u64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(p.threads)
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    if std::env::var_os("SLEEP_FLOOR").is_some() {
        let floor = create_floor(slots, &delays, p)?;
        eprintln!("[sleep-future] create phase without a timer: {floor:.0} ns per sleep");
        measure::trim_heap();
    }
    let timer = S::start(config, p.threads)?;
    measure::trim_heap();
    let rss0 = measure::rss_bytes();
    let t0 = Instant::now();
    runtime.block_on(async {
        for (slot, &d) in slots.iter().zip(&delays) {
            let due = Instant::now() + Duration::from_nanos(d);
            let due_ns = ns_of(due);
            let mut sleep = Box::pin(timer.sleep_until(due));
            if poll_once(sleep.as_mut()).await.is_ready() {
                // Due already (a delay of a few hundred nanoseconds): it is
                // done, and a future must not be polled after it completed
                // (async-io's `Timer` then stays pending for ever: the
                // run that hung at 999,999 of a million).
                late(slot, due_ns);
                continue;
            }
            drop(tokio::spawn(async move {
                sleep.await;
                late(slot, due_ns);
            }));
        }
    });
    let t1 = Instant::now();
    let rss1 = measure::rss_bytes();
    let ok = DONE.wait(WAIT);
    drop(runtime);
    timer.shutdown()?;
    if !ok {
        return Err(timed_out("sleep-future"));
    }
    let late = measure::lateness(slots, "sleep-future")?;
    Ok(vec![
        ("insert_ns_per_op", per_op_ns(t1 - t0, n)),
        ("late_p50_us", percentile_us(&late, 50.0)),
        ("late_p99_us", percentile_us(&late, 99.0)),
        ("bytes_per_pending", (rss1 - rss0) as f64 / n as f64),
    ])
}

/// Polls `future` once, with the calling task's waker: whether it
/// completed.
async fn poll_once<F: Future>(future: F) -> Poll<()> {
    let mut future = pin!(future);
    poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx).map(drop))).await
}

/// Records `now - due` in the sleep's own slot, then counts it.
#[inline]
fn late(slot: &AtomicI64, due_ns: i64) {
    slot.store(now_ns() - due_ns, Ordering::Relaxed);
    DONE.hit();
}

/// The create phase of `sleep_future` with a future that no timer serves
/// (pending for ever, 24 bytes as chronopool's `Sleep`), on a fresh
/// runtime: the clock read, the box, the first poll and the spawn of each,
/// and each spawned task's first poll, without a registration (what every
/// system's insert figure holds besides its timer's share; printed on
/// stderr with `SLEEP_FLOOR` set). Its tasks are dropped with the runtime.
/// The systems' create phases also share the machine with their timer's
/// wake-ups and the tasks that end, which this one does not: it is a floor.
fn create_floor(slots: &'static [AtomicI64], delays: &[u64], p: &Params) -> Result<f64, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(p.threads)
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    runtime.block_on(async {
        for (slot, &d) in slots.iter().zip(delays) {
            let due = Instant::now() + Duration::from_nanos(d);
            let due_ns = ns_of(due);
            let mut sleep = Box::pin(Untimed([due_ns; 3]));
            if poll_once(sleep.as_mut()).await.is_ready() {
                continue;
            }
            drop(tokio::spawn(async move {
                sleep.await;
                late(slot, due_ns);
            }));
        }
    });
    let t1 = Instant::now();
    drop(runtime);
    Ok(per_op_ns(t1 - t0, slots.len()))
}

/// A future that never completes and registers nothing (`create_floor`).
struct Untimed([i64; 3]);

impl Future for Untimed {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<()> {
        std::hint::black_box(&self.0);
        Poll::Pending
    }
}

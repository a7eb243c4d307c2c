//! What one pending timer holds beyond the caller's own object, on each
//! queue: a sleep polled once (its alarm and queue entry), the same sleep
//! boxed (`Box::pin`, as a `Box<dyn Future>` holds one: the box counts
//! too) and a task scheduled an hour ahead (its cell and queue
//! entry), a million of each,
//! as the resident memory they add on fresh pages (`malloc_trim` first),
//! the caller's futures and handles kept in a vector touched beforehand.
//! The `cancel` and `sleep-future` workloads read the same thing inside a
//! busier measurement (tokio's tasks, a create phase that outlasts the
//! delays), where it moves by tens of bytes between runs; this one moves
//! by less than one.
//!
//! ```text
//! cargo bench -p chronopool-benches --bench pending_bytes
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chronopool::{ScheduledExecutor, TimerQueue};

/// Pending timers per measurement.
const N: usize = 1_000_000;
/// Far enough ahead that none falls due while it is measured.
const AHEAD: Duration = Duration::from_secs(3600);

/// Resident memory in bytes, after giving freed memory back (`Rss` of
/// `smaps_rollup`, which the kernel sums exactly, where `VmRSS` may lag by
/// a few batches of pages).
fn rss() -> i64 {
    // SAFETY: `malloc_trim` only releases free memory of glibc's arenas.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
    let rollup =
        std::fs::read_to_string("/proc/self/smaps_rollup").expect("/proc/self/smaps_rollup");
    let kb = rollup
        .lines()
        .find_map(|line| line.strip_prefix("Rss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .expect("Rss");
    kb * 1024
}

/// Bytes per pending timer that `make` adds beyond what it returns (kept
/// in a vector whose pages are touched before the first reading), once
/// the timer has placed them all (`placed`).
fn per_pending<T>(mut make: impl FnMut() -> T, placed: impl FnOnce()) -> f64 {
    let mut kept: Vec<T> = Vec::with_capacity(N);
    // Touch every page of the spare capacity (volatile: a plain store the
    // compiler sees overwritten later is removed, and the pages with it).
    let base = kept.as_mut_ptr().cast::<u8>();
    for offset in (0..N * std::mem::size_of::<T>()).step_by(4096) {
        // SAFETY: within the capacity; the vector's length stays 0, so
        // nothing reads these bytes as a `T`.
        unsafe { std::ptr::write_volatile(base.add(offset), 0) };
    }
    let before = rss();
    kept.extend((0..N).map(|_| make()));
    placed();
    let after = rss();
    drop(kept);
    (after - before) as f64 / N as f64
}

/// A waker that does nothing (`Waker::noop` is newer than the MSRV).
fn noop_waker() -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    fn clone(_: *const ()) -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

/// The queues, by name.
fn queue(name: &str) -> TimerQueue {
    match name {
        "heap" => TimerQueue::heap(),
        "hashed-wheel" => TimerQueue::hashed_wheel(),
        "hierarchical-wheel" => TimerQueue::hierarchical_wheel(),
        other => panic!("no queue {other}"),
    }
}

/// One measurement, in a process of its own (`child QUEUE KIND`): memory
/// an earlier measurement freed would be reused, not counted.
fn child(queue_name: &str, kind: &str) {
    let pool = ScheduledExecutor::builder()
        .worker_threads(2)
        .timer_queue(queue(queue_name))
        .build()
        .expect("a pool");
    let waker = noop_waker();
    // The timer takes its entries from a command queue in order: once a
    // task scheduled after them all has run, every one is in the queue.
    let placed = || {
        let marker = pool.schedule(|| (), Duration::from_millis(1));
        marker.expect("scheduled").join().expect("the marker ran");
    };
    let bytes = match kind {
        "sleep" => per_pending(
            || {
                let mut sleep = pool.sleep(AHEAD);
                let polled = Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
                assert!(matches!(polled, Poll::Pending));
                sleep
            },
            placed,
        ),
        "boxed-sleep" => per_pending(
            || {
                let mut sleep = Box::pin(pool.sleep(AHEAD));
                let polled = sleep.as_mut().poll(&mut Context::from_waker(&waker));
                assert!(matches!(polled, Poll::Pending));
                sleep
            },
            placed,
        ),
        "task" => per_pending(|| pool.schedule(|| (), AHEAD).expect("scheduled"), placed),
        other => panic!("no kind {other}"),
    };
    println!("{bytes:.1}");
    pool.shutdown_now();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, marker, queue, kind] = &args[..] {
        if marker == "child" {
            return child(queue, kind);
        }
    }
    let me = std::env::current_exe().expect("this benchmark");
    let measure = |queue: &str, kind: &str| -> String {
        let out = std::process::Command::new(&me)
            .args(["child", queue, kind])
            .output()
            .expect("a measurement");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    println!(
        "bytes per pending timer, beyond the caller's own object ({} of each, fresh pages)",
        N
    );
    println!(
        "(a Sleep is {} bytes; boxed sleep: the box too)",
        std::mem::size_of::<chronopool::future::Sleep>()
    );
    println!(
        "{:<20} {:>12} {:>12} {:>12}",
        "queue", "sleep", "boxed sleep", "task"
    );
    for queue in ["heap", "hashed-wheel", "hierarchical-wheel"] {
        println!(
            "{queue:<20} {:>12} {:>12} {:>12}",
            measure(queue, "sleep"),
            measure(queue, "boxed-sleep"),
            measure(queue, "task")
        );
    }
}

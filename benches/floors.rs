//! The hardware's floors under the cost ledger of `README.md` ("Where the
//! time of a timer goes"): what one clock read, one locked instruction, one
//! allocation and one cache line moved between cores cost on this machine,
//! each alone in a tight loop, best of five rounds.
//!
//! ```text
//! cargo bench -p chronopool-benches --bench floors
//! ```

use std::hint::black_box;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Operations per round.
const N: usize = 1_000_000;
/// Rounds; the best is printed.
const ROUNDS: usize = 5;

/// The best of `ROUNDS` rounds of `round`, which returns the nanoseconds
/// of one operation.
fn best(mut round: impl FnMut() -> f64) -> f64 {
    (0..ROUNDS).map(|_| round()).fold(f64::INFINITY, f64::min)
}

/// Nanoseconds per operation of `n` calls of `op`.
fn per_op(n: usize, mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        op();
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// A task cell's size class: 72 bytes, an 80-byte block for glibc's malloc.
type Cell = [u64; 9];

/// Gives the freed heap back to the system, as the workloads do before
/// they read the RSS: the next allocations touch fresh pages.
fn trim() {
    // SAFETY: `malloc_trim` only releases free memory of glibc's arenas.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `N` cells allocated and kept, then freed: nanoseconds per allocation.
/// With `fresh`, after a trim (first touch of new pages); without, on the
/// memory the previous round freed.
fn kept_allocations(fresh: bool) -> f64 {
    let mut cells: Vec<Box<Cell>> = Vec::with_capacity(N);
    // Warm the allocator's own structures and the vector.
    cells.extend((0..N).map(|i| Box::new([i as u64; 9])));
    cells.clear();
    if fresh {
        trim();
    }
    let start = Instant::now();
    for i in 0..N {
        cells.push(Box::new([i as u64; 9]));
    }
    let took = start.elapsed().as_nanos() as f64 / N as f64;
    drop(black_box(cells));
    took
}

/// One cache line passed from one core to the other: two threads take
/// turns incrementing one counter; nanoseconds per turn.
fn line_transfer() -> f64 {
    const TURNS: u64 = 200_000;
    let counter = Arc::new(AtomicU64::new(0));
    let other = {
        let counter = Arc::clone(&counter);
        std::thread::spawn(move || {
            let mut next = 1;
            while next < 2 * TURNS {
                if counter.load(Ordering::Acquire) == next {
                    counter.store(next + 1, Ordering::Release);
                    next += 2;
                }
                std::hint::spin_loop();
            }
        })
    };
    let start = Instant::now();
    let mut next = 0;
    while next < 2 * TURNS {
        if counter.load(Ordering::Acquire) == next {
            counter.store(next + 1, Ordering::Release);
            next += 2;
        }
        std::hint::spin_loop();
    }
    let took = start.elapsed().as_nanos() as f64 / (2 * TURNS) as f64;
    other.join().unwrap();
    took
}

fn main() {
    let counter = AtomicUsize::new(0);
    let rows: [(&str, f64); 7] = [
        (
            "Instant::now()",
            best(|| {
                per_op(N, || {
                    black_box(Instant::now());
                })
            }),
        ),
        (
            "locked read-modify-write, uncontended (fetch_add)",
            best(|| {
                per_op(10 * N, || {
                    black_box(&counter).fetch_add(1, Ordering::SeqCst);
                })
            }),
        ),
        (
            "a store, then fence(SeqCst)",
            best(|| {
                per_op(10 * N, || {
                    black_box(&counter).store(1, Ordering::Relaxed);
                    fence(Ordering::SeqCst);
                })
            }),
        ),
        (
            "malloc + free of 72 bytes at once",
            best(|| per_op(N, || drop(black_box(Box::new([0u64; 9]))))),
        ),
        (
            "malloc of 72 bytes kept, memory the process owns",
            best(|| kept_allocations(false)),
        ),
        (
            "malloc of 72 bytes kept, fresh pages (after malloc_trim)",
            best(|| kept_allocations(true)),
        ),
        ("a cache line passed to the other core", best(line_transfer)),
    ];
    println!("{:<58} {:>8}", "floor (best of 5)", "ns/op");
    for (name, ns) in rows {
        println!("{name:<58} {ns:>8.1}");
    }
}

//! Where the handlers record their runs: one preallocated slot per job
//! (its index travels in the payload), so that a run costs two atomic
//! operations and no allocation.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const NOT_RUN: i64 = i64::MIN;

/// The jobs' lateness, in microseconds, by index.
pub struct Slots {
    late_us: Vec<AtomicI64>,
    ran: AtomicUsize,
    runs: AtomicUsize,
    origin: Instant,
    /// When the last first run happened, in nanoseconds after `origin`.
    last_run_ns: AtomicU64,
}

/// Microseconds since the epoch, now.
pub fn now_us() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(d.as_micros()).expect("in range")
}

/// Milliseconds since the epoch of `t`.
pub fn millis(t: SystemTime) -> i64 {
    let d = t.duration_since(UNIX_EPOCH).expect("after 1970");
    i64::try_from(d.as_millis()).expect("in range")
}

impl Slots {
    /// `n` slots, none run.
    pub fn new(n: usize) -> Self {
        Slots {
            late_us: (0..n).map(|_| AtomicI64::new(NOT_RUN)).collect(),
            ran: AtomicUsize::new(0),
            runs: AtomicUsize::new(0),
            origin: Instant::now(),
            last_run_ns: AtomicU64::new(0),
        }
    }

    /// Job `index`, whose lateness counts from `since_us` (µs since the
    /// epoch: its due time, or when it was handed to the system), runs now.
    /// Only its first run counts; later ones (at-least-once) are counted
    /// apart.
    pub fn record(&self, index: usize, since_us: i64) {
        let late = now_us() - since_us;
        self.runs.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = self.late_us.get(index) else {
            return;
        };
        if slot
            .compare_exchange(NOT_RUN, late, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let at = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.last_run_ns.fetch_max(at, Ordering::Relaxed);
            self.ran.fetch_add(1, Ordering::Release);
        }
    }

    /// How many jobs have run at least once.
    pub fn ran(&self) -> usize {
        self.ran.load(Ordering::Acquire)
    }

    /// How many runs there were, repeats included.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::Relaxed)
    }

    /// When the last job's first run happened.
    pub fn last_run(&self) -> Instant {
        self.origin + std::time::Duration::from_nanos(self.last_run_ns.load(Ordering::Relaxed))
    }

    /// Waits until `n` jobs have run or `deadline` passes; true if they
    /// all ran.
    pub fn wait_for(&self, n: usize, deadline: Instant) -> bool {
        while self.ran() < n {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        true
    }

    /// Each job's lateness in microseconds, by index (`None`: not run).
    pub fn lateness_by_index(&self) -> Vec<Option<i64>> {
        self.late_us
            .iter()
            .map(|s| Some(s.load(Ordering::Relaxed)).filter(|&l| l != NOT_RUN))
            .collect()
    }

    /// The lateness of the jobs that ran, in microseconds.
    pub fn lateness_us(&self) -> Vec<i64> {
        self.late_us
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&l| l != NOT_RUN)
            .collect()
    }
}

/// Nearest-rank percentile `p` (0-100) of `sorted`.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

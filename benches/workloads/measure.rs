//! Measurement plumbing every workload shares: the monotonic clock, the
//! task body's counter and completion signal, per-task lateness slots, the
//! spec's delay generator, statistics, and readers of process and machine
//! state (`/proc`, CPU clocks).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

// ------------------------------------------------------------ clock

/// The origin of the bench's nanosecond clock, fixed on first use.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Fixes the clock's origin; call before the first workload.
pub fn start_clock() {
    origin();
}

/// Nanoseconds from the origin to `t` (std's `Instant` is
/// `CLOCK_MONOTONIC` on Linux).
#[inline]
pub fn ns_of(t: Instant) -> i64 {
    t.saturating_duration_since(origin()).as_nanos() as i64
}

/// Nanoseconds from the origin to now.
#[inline]
pub fn now_ns() -> i64 {
    ns_of(Instant::now())
}

// ------------------------------------------------------------ completion

/// The shared counter every task body increments, and a signal when it
/// reaches a target: the task that reaches it takes the lock once and
/// wakes the measuring thread, which sleeps meanwhile (no spinning, so it
/// takes no core from the workers, and no polling granularity).
pub struct Completion {
    count: AtomicU64,
    target: AtomicU64,
    reached: Mutex<bool>,
    cv: Condvar,
}

/// A target never reached: the counter only counts.
pub const NO_TARGET: u64 = u64::MAX;

impl Completion {
    /// A counter at 0 with no target.
    const fn new() -> Self {
        Completion {
            count: AtomicU64::new(0),
            target: AtomicU64::new(NO_TARGET),
            reached: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Counts from 0 again and waits for `target` increments.
    pub fn reset(&self, target: u64) {
        *self.reached.lock().unwrap() = false;
        self.count.store(0, Ordering::SeqCst);
        self.target.store(target, Ordering::SeqCst);
    }

    /// Keeps the count and waits until it reaches `target`.
    pub fn arm(&self, target: u64) {
        *self.reached.lock().unwrap() = false;
        self.target.store(target, Ordering::SeqCst);
    }

    /// The task body's increment.
    #[inline]
    pub fn hit(&self) {
        let c = self.count.fetch_add(1, Ordering::AcqRel) + 1;
        if c == self.target.load(Ordering::Relaxed) {
            *self.reached.lock().unwrap() = true;
            self.cv.notify_all();
        }
    }

    /// Increments so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// Sleeps until the target is reached; false after `timeout`.
    pub fn wait(&self, timeout: Duration) -> bool {
        let guard = self.reached.lock().unwrap();
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, timeout, |reached| !*reached)
            .unwrap();
        *guard
    }
}

/// The one counter of every task body. One repetition runs at a time, and
/// its executor is gone before the next one starts.
pub static DONE: Completion = Completion::new();

/// Counts events (rayon's worker exits) and lets a thread wait for `n`.
#[derive(Default)]
pub struct Latch {
    n: Mutex<usize>,
    cv: Condvar,
}

impl Latch {
    /// One more event.
    pub fn count_up(&self) {
        *self.n.lock().unwrap() += 1;
        self.cv.notify_all();
    }

    /// Waits until `n` events happened; false after `timeout`.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> bool {
        let guard = self.n.lock().unwrap();
        let (_guard, res) = self
            .cv
            .wait_timeout_while(guard, timeout, |c| *c < n)
            .unwrap();
        !res.timed_out()
    }
}

// ------------------------------------------------------------ lateness slots

/// A slot nothing was recorded in.
const UNSET: i64 = i64::MIN;

/// `n` lateness slots (ns), all unset. A task writes its own slot with a
/// relaxed store (no locking in the task). The buffer is leaked so that
/// closures carry a plain reference, and reused by later repetitions (it
/// only grows); the previous repetition's executor is gone by then.
pub fn slots(n: usize) -> &'static [AtomicI64] {
    static BUFFER: Mutex<&'static [AtomicI64]> = Mutex::new(&[]);
    let mut buffer = BUFFER.lock().unwrap();
    if buffer.len() < n {
        let fresh: Vec<AtomicI64> = (0..n).map(|_| AtomicI64::new(UNSET)).collect();
        *buffer = Box::leak(fresh.into_boxed_slice());
    }
    let s = &buffer[..n];
    for slot in s {
        slot.store(UNSET, Ordering::Relaxed);
    }
    s
}

/// The recorded lateness values, sorted; an error if there are none, a
/// warning on stderr for runs that came early.
pub fn lateness(slots: &[AtomicI64], what: &str) -> Result<Vec<i64>, String> {
    let mut v: Vec<i64> = slots
        .iter()
        .map(|s| s.load(Ordering::Acquire))
        .filter(|&x| x != UNSET)
        .collect();
    v.sort_unstable();
    match v.first() {
        None => Err(format!("{what}: no lateness recorded")),
        Some(&first) if first < 0 => {
            let early = v.iter().take_while(|&&x| x < 0).count();
            eprintln!(
                "  WARNING: {what}: {early} runs came early, the earliest {:.1} µs before due",
                -first as f64 / 1e3
            );
            Ok(v)
        }
        Some(_) => Ok(v),
    }
}

/// Nearest-rank percentile (`p` in (0, 100]) of sorted nanoseconds, in µs.
pub fn percentile_us(sorted: &[i64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e3
}

/// The largest of sorted nanoseconds, in µs.
pub fn max_us(sorted: &[i64]) -> f64 {
    sorted.last().map_or(f64::NAN, |&x| x as f64 / 1e3)
}

/// Median; the mean of the middle two for an even count.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Wall time per operation in ns.
pub fn per_op_ns(d: Duration, n: usize) -> f64 {
    d.as_nanos() as f64 / n as f64
}

// ------------------------------------------------------------ delays

/// The spec's delays: `n` values in ns, `lo + next mod (hi - lo)` from a
/// fresh xorshift64* generator with state 42 (the JVM harness draws the
/// same sequence).
pub fn delays_ns(n: usize, lo: Duration, hi: Duration) -> Vec<u64> {
    let (lo, hi) = (lo.as_nanos() as u64, hi.as_nanos() as u64);
    let mut state = 42u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    (0..n).map(|_| lo + next() % (hi - lo)).collect()
}

// ------------------------------------------------------------ process

/// A numeric field of `/proc/self/status` (kB for sizes), 0 if absent.
fn status_field(name: &str) -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Hands freed heap pages of every glibc arena back to the kernel, so that
/// RSS counts live memory only (the allocator's analogue of the JVM
/// harness's forced GC).
pub fn trim_heap() {
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
}

/// Resident set size in bytes (`VmRSS`), read after [`trim_heap`].
pub fn rss_bytes() -> i64 {
    trim_heap();
    status_field("VmRSS") * 1024
}

/// Threads of this process.
pub fn thread_count() -> usize {
    status_field("Threads") as usize
}

/// Polls (1 ms) until the process has at most `n` threads; false after
/// `timeout`.
pub fn wait_threads_at_most(n: usize, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while thread_count() > n {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Process CPU time (all threads, user + system) in ns.
pub fn cpu_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    #[allow(clippy::unnecessary_cast)] // time_t and c_long are not i64 everywhere
    let ns = ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64;
    ns
}

// ------------------------------------------------------------ machine

/// Busy time of the whole machine (every process, every CPU) in ns, and
/// the number of CPUs, from `/proc/stat`: user + nice + system + irq +
/// softirq + steal (steal: time the hypervisor gave our CPUs to others).
/// Clock-tick resolution (10 ms).
fn machine_busy() -> (i64, usize) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    let ticks: Vec<i64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    if ticks.len() < 8 {
        return (0, cpus.max(1));
    }
    #[allow(clippy::unnecessary_cast)] // c_long is not i64 everywhere
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as i64;
    let busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7];
    (busy * (1_000_000_000 / hz), cpus.max(1))
}

/// CPU that other processes used while a repetition ran: the machine's
/// busy time minus this process's CPU time, as a share of all CPUs.
/// Figures taken while it was more than a few percent were disturbed.
#[derive(Default)]
pub struct OtherLoad {
    /// The largest share seen over spans of 0.5 s or more, in percent.
    pub max_pct: f64,
}

/// Where a span measured by [`OtherLoad`] began.
pub struct Span {
    busy: i64,
    own: i64,
    t: Instant,
}

impl OtherLoad {
    /// Starts a span.
    pub fn begin(&self) -> Span {
        Span {
            busy: machine_busy().0,
            own: cpu_ns(),
            t: Instant::now(),
        }
    }

    /// Ends a span: a description for stderr.
    pub fn end(&mut self, s: Span) -> String {
        let wall = s.t.elapsed();
        let (busy, cpus) = machine_busy();
        let other = ((busy - s.busy) - (cpu_ns() - s.own)).max(0);
        let pct = 100.0 * other as f64 / (wall.as_nanos() as f64 * cpus as f64);
        if wall >= Duration::from_millis(500) {
            self.max_pct = self.max_pct.max(pct);
        }
        format!(
            "other processes: {:.0} ms CPU = {pct:.1}% of {cpus} CPUs over {:.0} ms",
            other as f64 / 1e6,
            wall.as_secs_f64() * 1e3
        )
    }
}

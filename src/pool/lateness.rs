//! [`LatenessShard`]: one worker's histogram of how late its scheduled runs
//! started (deadline → start), which `metrics()` merges into
//! [`Lateness`](crate::Lateness).
//!
//! Log-linear buckets, as HdrHistogram's: each power of two of nanoseconds
//! is split into eight, so a bucket's width is at most an eighth of its
//! lower bound (a percentile read off it is within 12.5% above the true
//! value), and every `u64` fits in 496 buckets (4 KB per worker). Written
//! here rather than taken from the `hdrhistogram` crate because of what the
//! hot path needs: one writer per shard with plain loads and stores (no
//! read-modify-write, no lock, no allocation), and readers on any thread at
//! any time, which needs atomic counts; `hdrhistogram` counts in plain
//! integers behind `&mut`.
//!
//! **Sampling.** Timing a run costs a clock read, as much as a quarter of
//! a periodic task's re-arm. A shard times every one of its first
//! `EXACT` runs, then one run in `EVERY`, which counts for `EVERY`: at the
//! rates where the cost would show, the sample is large, and a pool that
//! runs few timers is timed exactly. The run count stays exact; `max` is
//! the latest start among the runs timed.

use std::time::Duration;

// std's atomics even under loom: no protocol depends on these counters
// (one writer, relaxed reads for a report), and 500 loom atomics per
// worker would exhaust a model's branch budget.
use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two: `2^SUB_BITS`.
const SUB_BITS: u32 = 3;
const SUBS: usize = 1 << SUB_BITS;
/// Buckets: exact below `SUBS`, then `SUBS` per power of two up to 2^64.
pub(crate) const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUBS;

/// The bucket of `v` nanoseconds.
fn bucket(v: u64) -> usize {
    if v < SUBS as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let exp = (msb - SUB_BITS + 1) as usize;
    let mantissa = ((v >> (msb - SUB_BITS)) as usize) & (SUBS - 1);
    exp * SUBS + mantissa
}

/// The largest value in bucket `i`.
fn upper_bound(i: usize) -> u64 {
    if i < SUBS {
        return i as u64;
    }
    let (exp, mantissa) = (i / SUBS, (i % SUBS) as u64);
    let shift = exp as u32 - 1;
    let lower = (SUBS as u64 + mantissa) << shift;
    lower.saturating_add((1u64 << shift) - 1)
}

/// Runs timed exactly by each shard before it samples (module doc).
const EXACT: u64 = 1024;
/// After that, one run in this many is timed, and counts for this many.
const EVERY: u64 = 16;

/// One worker's lateness histogram (see the module doc). Only its worker
/// records; anyone may read.
#[derive(Debug)]
pub(crate) struct LatenessShard {
    counts: Box<[AtomicU64]>,
    max: AtomicU64,
    /// Every run, timed or not.
    runs: AtomicU64,
}

impl Default for LatenessShard {
    fn default() -> Self {
        LatenessShard {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
            runs: AtomicU64::new(0),
        }
    }
}

impl LatenessShard {
    /// Counts a run; returns its weight if it is to be timed (module doc).
    /// Called by the owning worker only.
    #[inline]
    pub(crate) fn sample(&self) -> Option<u64> {
        let n = self.runs.load(Ordering::Relaxed);
        self.runs.store(n + 1, Ordering::Relaxed);
        if n < EXACT {
            Some(1)
        } else if n % EVERY == 0 {
            Some(EVERY)
        } else {
            None
        }
    }

    /// Records a timed run that started `late` nanoseconds after its
    /// deadline, counting for `weight` runs. Called by the owning worker
    /// only.
    #[inline]
    pub(crate) fn record(&self, late: u64, weight: u64) {
        let count = &self.counts[bucket(late)];
        count.store(count.load(Ordering::Relaxed) + weight, Ordering::Relaxed);
        if late > self.max.load(Ordering::Relaxed) {
            self.max.store(late, Ordering::Relaxed);
        }
    }

    /// Adds this shard's counts to `into`; returns its runs and maximum.
    pub(crate) fn merge_into(&self, into: &mut [u64]) -> (u64, u64) {
        for (sum, count) in into.iter_mut().zip(self.counts.iter()) {
            *sum += count.load(Ordering::Relaxed);
        }
        (
            self.runs.load(Ordering::Relaxed),
            self.max.load(Ordering::Relaxed),
        )
    }
}

/// p50, p99 and max of merged `counts` (with the exact `max`).
pub(crate) fn summary(counts: &[u64], max: u64) -> (Duration, Duration, Duration) {
    let runs: u64 = counts.iter().sum();
    let percentile = |p: f64| -> Duration {
        if runs == 0 {
            return Duration::ZERO;
        }
        // Nearest rank.
        let rank = ((p * runs as f64).ceil() as u64).clamp(1, runs);
        let mut seen = 0;
        for (i, &count) in counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Duration::from_nanos(upper_bound(i).min(max));
            }
        }
        Duration::from_nanos(max)
    };
    (
        percentile(0.50),
        percentile(0.99),
        Duration::from_nanos(max),
    )
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_whose_bounds_hold_it_within_an_eighth() {
        let mut samples: Vec<u64> = (0..2000).collect();
        samples.extend((0..64).flat_map(|s| [1u64 << s, (1u64 << s) - 1, (1u64 << s) + 1]));
        samples.push(u64::MAX);
        for v in samples {
            let i = bucket(v);
            assert!(i < BUCKETS, "{v}");
            let upper = upper_bound(i);
            let lower = if i == 0 { 0 } else { upper_bound(i - 1) + 1 };
            assert!(lower <= v && v <= upper, "{v} in [{lower}, {upper}]");
            assert!(
                upper - lower <= lower / 8 + 1,
                "{v}: width {}",
                upper - lower
            );
        }
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let shard = LatenessShard::default();
        for ms in 1..=100u64 {
            assert_eq!(shard.sample(), Some(1));
            shard.record(ms * 1_000_000, 1);
        }
        let mut counts = vec![0; BUCKETS];
        let (runs, max) = shard.merge_into(&mut counts);
        let (p50, p99, max) = summary(&counts, max);
        assert_eq!(runs, 100);
        let within = |d: Duration, ms: u64| {
            let want = Duration::from_millis(ms);
            d >= want && d <= want + want / 8
        };
        assert!(within(p50, 50), "{p50:?}");
        assert!(within(p99, 99), "{p99:?}");
        assert_eq!(max, Duration::from_millis(100));
        assert_eq!(summary(&vec![0; BUCKETS], 0).0, Duration::ZERO);
    }

    #[test]
    fn past_the_exact_runs_one_in_sixteen_is_timed_and_weighs_sixteen() {
        let shard = LatenessShard::default();
        let mut weights = 0;
        for _ in 0..EXACT + 16 * 100 {
            if let Some(weight) = shard.sample() {
                shard.record(1_000, weight);
                weights += weight;
            }
        }
        let mut counts = vec![0; BUCKETS];
        assert_eq!(
            shard.merge_into(&mut counts).0,
            EXACT + 1600,
            "exact run count"
        );
        assert_eq!(counts.iter().sum::<u64>(), weights);
        assert_eq!(weights, EXACT + 1600);
    }
}

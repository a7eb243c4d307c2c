//! [`Backoff`]: retry with exponential back-off; [`Jitter`], how much of
//! each delay is drawn at random.
//!
//! A retry loop is a recurring task whose closure returns
//! `ControlFlow::Break` when the call succeeds, on a trigger that says
//! when to try again: the first try at once, then a wait after each
//! failure that grows geometrically up to a cap. The wait is counted from
//! the end of the failed try (the trigger is asked right after a run
//! ends), as in a fixed-delay schedule: a slow try does not eat into the
//! pause the failing service gets before the next one.
//!
//! The `k`-th delay is `min(max, initial × factor^(k-1))`, computed in
//! `f64` and clamped to `max` before it becomes nanoseconds, so a
//! thousand retries at `factor` 10 wait `max` rather than overflow. `k`
//! is the task's count of runs ([`TriggerContext::runs`]): the trigger
//! reads only that and [`TriggerContext::now`] (so the task records no run
//! times for it), and keeps no state but its random generator and the
//! time it was first asked (for [`max_elapsed`](Backoff::max_elapsed)).
//!
//! # Jitter
//!
//! Clients that fail together (a service went down under all of them)
//! retry together if their delays are the same, and the retries arrive as
//! bursts as large as the one that failed. Drawing each delay at random
//! spreads them out. Of the schemes compared in AWS's "Exponential Backoff
//! And Jitter", full jitter (uniform in `[0, d]`) did the least total work;
//! "equal jitter" (uniform in `[d/2, d]`) keeps a floor under each wait,
//! for a little more work and a much longer time to finish. [`Jitter`] offers
//! both (equal jitter is [`Jitter::Partial`]`(0.5)`) and none, the
//! default, for schedules that must be exact. Every jittered delay stays
//! at or under the delay it jitters, so `max` bounds every wait. The
//! "decorrelated" scheme of the same article is not offered: each of its
//! delays is drawn in a range set by the previous draw rather than by the
//! count of tries, so `initial` and `factor` would not describe it.
//!
//! The draws come from a [`fastrand::Rng`] of the trigger's own, seeded
//! from the thread's generator when the trigger is made (or by
//! [`Backoff::seed`], for draws that repeat from run to run). A clone made
//! without a seed draws a new one, so that triggers cloned from one
//! template for many tasks do not jitter in step; a seeded clone repeats
//! its original's draws.

use std::time::Duration;

use crate::time::Nanos;

use super::{Next, Trigger, TriggerContext};
use crate::time::clock::nanos;

/// How much of each [`Backoff`] delay is drawn at random (see the module
/// doc for why), drawn for the delay `d` = 400 ms:
///
/// ```text
///                0         100       200       300       400 ms
/// None:                                                  *  exactly d
/// Full:          [=======================================]  uniform in [0, d]
/// Partial(0.5):                      [===================]  uniform in [d/2, d]
/// Partial(0.25):                               [=========]  uniform in [3d/4, d]
/// ```
///
/// A jittered delay is never longer than `d`: the cap of the back-off
/// bounds every wait.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum Jitter {
    /// Every delay exactly as computed: for schedules that must be
    /// predictable, or a client that retries alone.
    ///
    /// ```
    /// use chronopool::trigger::{Backoff, Jitter};
    /// use std::time::Duration;
    ///
    /// // 100 ms, 200 ms, 400 ms, ... after each failed try.
    /// let exact = Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(10))
    ///     .jitter(Jitter::None);
    /// # let _ = exact;
    /// ```
    #[default]
    None,
    /// Each delay uniform in `[0, d]`: AWS's "full jitter", which spreads
    /// clients that fail together the most, at the price of some retries
    /// coming much sooner than `d`.
    ///
    /// ```
    /// use chronopool::trigger::{Backoff, Jitter};
    /// use std::time::Duration;
    ///
    /// // Anywhere in [0, 100 ms], then [0, 200 ms], [0, 400 ms], ...
    /// let spread = Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(10))
    ///     .jitter(Jitter::Full);
    /// # let _ = spread;
    /// ```
    Full,
    /// Each delay uniform in `[d × (1 − fraction), d]`: `fraction` of each
    /// delay drawn at random, the rest kept as a floor. `Partial(0.5)` is
    /// AWS's "equal jitter"; `Partial(0.0)` is [`None`](Jitter::None) and
    /// `Partial(1.0)` [`Full`](Jitter::Full). A fraction outside `[0, 1]`
    /// is taken as the nearer end.
    ///
    /// ```
    /// use chronopool::trigger::{Backoff, Jitter};
    /// use std::time::Duration;
    ///
    /// // In [50 ms, 100 ms], then [100 ms, 200 ms], [200 ms, 400 ms], ...
    /// let equal = Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(10))
    ///     .jitter(Jitter::Partial(0.5));
    /// # let _ = equal;
    /// ```
    Partial(f64),
}

/// Retry with exponential back-off: the first run at once, then, after run
/// `k` ends, the next one `min(max, initial × factor^(k-1))` later
/// (optionally [jittered](Backoff::jitter)), until the closure returns
/// `ControlFlow::Break` or a limit ([`max_runs`](Backoff::max_runs),
/// [`max_elapsed`](Backoff::max_elapsed)) ends the task with
/// [`Ended::ByTrigger`](super::Ended::ByTrigger).
///
/// ```
/// use chronopool::trigger::{Backoff, Jitter};
/// use chronopool::ScheduledExecutor;
/// use std::ops::ControlFlow;
/// use std::time::Duration;
///
/// # let mut failures = 2;
/// # let mut call = move || if failures > 0 { failures -= 1; Err("busy") } else { Ok(42) };
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// // Up to 5 tries, 1 ms, 2 ms, 4 ms, 8 ms apart at most (full jitter).
/// let answer = pool.schedule_with_trigger(
///     move || match call() {
///         Ok(v) => ControlFlow::Break(v),
///         Err(_) => ControlFlow::Continue(()),
///     },
///     Backoff::exponential(Duration::from_millis(1), 2.0, Duration::from_secs(1))
///         .jitter(Jitter::Full)
///         .max_runs(5),
/// )?;
/// assert_eq!(answer.join()?.into_value(), Some(42));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The count of runs is the task's ([`TriggerContext::runs`]): a task
/// [rescheduled](crate::TriggerHandle::reschedule) to a back-off after
/// some runs goes on from that count, for its delays and for `max_runs`.
#[derive(Debug)]
pub struct Backoff {
    initial: Nanos,
    factor: f64,
    max: Nanos,
    jitter: Jitter,
    max_runs: u64,
    max_elapsed: Option<Nanos>,
    /// When the trigger was first asked (the origin of `max_elapsed`).
    first_asked: Option<Nanos>,
    rng: fastrand::Rng,
    /// True if `rng` was seeded by [`Backoff::seed`] (its clones repeat it).
    seeded: bool,
}

impl Backoff {
    /// The first run at once; after run `k` (`k` ≥ 1) ends, the next one
    /// `min(max, initial × factor^(k-1))` later, rounded to the
    /// nanosecond; no jitter and no limit.
    ///
    /// ```
    /// use chronopool::trigger::Backoff;
    /// use std::time::Duration;
    ///
    /// // Tries at 0, then 100 ms, 200 ms, 400 ms, ..., 10 s, 10 s, ...
    /// // after the end of each failed one.
    /// let retry = Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(10));
    /// // A constant delay is a factor of 1.
    /// let every_second = Backoff::exponential(Duration::from_secs(1), 1.0, Duration::from_secs(1));
    /// # let _ = (retry, every_second);
    /// ```
    ///
    /// # Panics
    ///
    /// If `initial` is zero (every retry would come at once, a busy loop
    /// against whatever is failing), if `factor` is below 1, infinite or
    /// NaN (a back-off that shrinks is no back-off), or if `initial` is
    /// longer than `max` (most likely the two swapped).
    pub fn exponential(initial: Duration, factor: f64, max: Duration) -> Self {
        assert!(
            !initial.is_zero(),
            "Backoff: the initial delay must not be zero"
        );
        assert!(
            factor.is_finite() && factor >= 1.0,
            "Backoff: the factor must be finite and at least 1, not {factor}"
        );
        assert!(
            initial <= max,
            "Backoff: the initial delay ({initial:?}) must not be longer than the maximum ({max:?})"
        );
        Backoff {
            initial: nanos(initial),
            factor,
            max: nanos(max),
            jitter: Jitter::None,
            max_runs: u64::MAX,
            max_elapsed: None,
            first_asked: None,
            rng: fastrand::Rng::new(),
            seeded: false,
        }
    }

    /// How much of each delay is drawn at random (see [`Jitter`]).
    ///
    /// ```
    /// use chronopool::trigger::{Backoff, Jitter};
    /// use std::time::Duration;
    ///
    /// let retry = Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(10))
    ///     .jitter(Jitter::Full);
    /// # let _ = retry;
    /// ```
    ///
    /// # Panics
    ///
    /// If the fraction of a [`Jitter::Partial`] is NaN.
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = match jitter {
            Jitter::Partial(fraction) => {
                assert!(!fraction.is_nan(), "Backoff: the jitter fraction is NaN");
                Jitter::Partial(fraction.clamp(0.0, 1.0))
            }
            other => other,
        };
        self
    }

    /// Seeds the random draws of the jitter, so that they repeat from one
    /// run of the program to the next (for tests, simulations). Clones of
    /// a seeded back-off draw the same delays as it.
    ///
    /// ```
    /// use chronopool::trigger::{Backoff, Jitter};
    /// use std::time::Duration;
    ///
    /// let reproducible = Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(10))
    ///     .jitter(Jitter::Full)
    ///     .seed(7);
    /// # let _ = reproducible;
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.rng = fastrand::Rng::with_seed(seed);
        self.seeded = true;
        self
    }

    /// Ends the task once `runs` runs have ended: at most `runs` tries in
    /// all, the first included (0: none at all).
    ///
    /// ```
    /// use chronopool::trigger::Backoff;
    /// use std::time::Duration;
    ///
    /// // The first try and at most four retries.
    /// let retry = Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(10))
    ///     .max_runs(5);
    /// # let _ = retry;
    /// ```
    pub fn max_runs(mut self, runs: u64) -> Self {
        self.max_runs = runs;
        self
    }

    /// Ends the task instead of a retry that would start more than `limit`
    /// after the trigger was first asked (when the task was scheduled): a
    /// budget of time for all the tries, rather than of tries.
    ///
    /// ```
    /// use chronopool::trigger::Backoff;
    /// use std::time::Duration;
    ///
    /// // Give up after a minute: no try starts later than that.
    /// let retry = Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(10))
    ///     .max_elapsed(Duration::from_secs(60));
    /// # let _ = retry;
    /// ```
    pub fn max_elapsed(mut self, limit: Duration) -> Self {
        self.max_elapsed = Some(nanos(limit));
        self
    }

    /// The wait before the try that follows `failures` failed tries
    /// (`failures` ≥ 1; 0 is taken as 1): `min(max, initial ×
    /// factor^(failures-1))`, with the [jitter](Backoff::jitter) drawn. What
    /// the trigger answers after run `failures` ends, for code that keeps
    /// its own count of tries (a job whose attempts are stored, say) and
    /// needs no task. [`max_runs`](Backoff::max_runs) and
    /// [`max_elapsed`](Backoff::max_elapsed) do not apply.
    ///
    /// ```
    /// use chronopool::trigger::Backoff;
    /// use std::time::Duration;
    ///
    /// let mut retry = Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(60));
    /// assert_eq!(retry.delay_after(1), Duration::from_secs(1));
    /// assert_eq!(retry.delay_after(3), Duration::from_secs(4));
    /// assert_eq!(retry.delay_after(u64::MAX), Duration::from_secs(60));
    /// ```
    pub fn delay_after(&mut self, failures: u64) -> Duration {
        let delay = self.delay(failures.max(1));
        Duration::from_nanos(self.jittered(delay))
    }

    /// The delay before the try after run `k` ended (`k` ≥ 1), without
    /// jitter: `min(max, initial × factor^(k-1))`, computed in `f64` so
    /// that a huge power saturates at `max` instead of overflowing.
    fn delay(&self, k: u64) -> Nanos {
        let exponent = k.saturating_sub(1) as f64;
        let delay = self.initial as f64 * self.factor.powf(exponent);
        if delay >= self.max as f64 {
            self.max
        } else {
            // Below max, so within u64; min() for a max that f64 rounds up.
            (delay.round() as Nanos).min(self.max)
        }
    }

    /// `delay` with the jitter applied: in `[0, delay]`.
    fn jittered(&mut self, delay: Nanos) -> Nanos {
        match self.jitter {
            Jitter::None => delay,
            Jitter::Full => self.rng.u64(0..=delay),
            Jitter::Partial(fraction) => {
                let spread = ((delay as f64 * fraction).round() as Nanos).min(delay);
                self.rng.u64(delay - spread..=delay)
            }
        }
    }
}

impl Clone for Backoff {
    /// A copy with the same settings; its jitter draws anew unless the
    /// original was [seeded](Backoff::seed) (see the module doc).
    fn clone(&self) -> Self {
        Backoff {
            rng: if self.seeded {
                self.rng.clone()
            } else {
                fastrand::Rng::new()
            },
            ..*self
        }
    }
}

impl Trigger for Backoff {
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next> {
        let runs = ctx.runs();
        let now = ctx.now_nanos();
        let first_asked = *self.first_asked.get_or_insert(now);
        if runs >= self.max_runs {
            return None;
        }
        let at = if runs == 0 {
            now
        } else {
            let delay = self.jittered(self.delay(runs));
            now.saturating_add(delay)
        };
        if let Some(limit) = self.max_elapsed {
            if at.saturating_sub(first_asked) > limit {
                return None;
            }
        }
        Some(Next::At(ctx.instant_at(at)))
    }

    fn records_run_times(&self) -> bool {
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::History;
    use super::*;
    use crate::time::{Clock, ManualClock};

    const MS: Duration = Duration::from_millis(1);

    /// Asks `backoff`, as a task whose `runs` runs have ended would, at the
    /// time of `clock`: the delay from now to the answer, or `None`.
    fn ask(backoff: &mut Backoff, clock: &ManualClock, runs: u64) -> Option<Duration> {
        let clock = Clock::manual(clock.state().clone());
        let history = History {
            runs,
            ..History::default()
        };
        let ctx = TriggerContext::new(&clock, &history);
        let now = ctx.now();
        backoff.next(&ctx).map(|next| match next {
            Next::At(at) => at - now,
            Next::AtSystemTime(_) => panic!("a back-off answers in monotonic time"),
        })
    }

    /// The answers to the first `n` askings (runs 0 to n - 1).
    fn delays(mut backoff: Backoff, n: u64) -> Vec<Option<Duration>> {
        let clock = ManualClock::new();
        (0..n).map(|runs| ask(&mut backoff, &clock, runs)).collect()
    }

    #[test]
    fn delays_grow_by_the_factor_from_the_first_retry() {
        let backoff = Backoff::exponential(100 * MS, 2.0, Duration::from_secs(10));
        let expected = [0, 100, 200, 400, 800, 1600, 3200, 6400]
            .map(|ms| Some(ms * MS))
            .to_vec();
        assert_eq!(delays(backoff, 8), expected);

        let backoff = Backoff::exponential(100 * MS, 1.5, Duration::from_secs(10));
        let expected = [0, 100, 150, 225].map(|ms| Some(ms * MS)).to_vec();
        assert_eq!(delays(backoff, 4), expected);
    }

    #[test]
    fn delays_saturate_at_the_maximum() {
        let backoff = Backoff::exponential(100 * MS, 2.0, Duration::from_secs(1));
        let expected = [0, 100, 200, 400, 800, 1000, 1000, 1000]
            .map(|ms| Some(ms * MS))
            .to_vec();
        assert_eq!(delays(backoff, 8), expected);
    }

    #[test]
    fn a_factor_of_one_is_a_constant_delay() {
        let backoff = Backoff::exponential(250 * MS, 1.0, Duration::from_secs(1));
        assert_eq!(delays(backoff.clone(), 4)[1..], [Some(250 * MS); 3]);
        assert_eq!(backoff.delay(u64::MAX), nanos(250 * MS));
    }

    #[test]
    fn huge_powers_saturate_instead_of_overflowing() {
        let backoff = Backoff::exponential(Duration::from_secs(1), 1e300, Duration::MAX);
        assert_eq!(backoff.delay(1), nanos(Duration::from_secs(1)));
        assert_eq!(backoff.delay(2), u64::MAX);
        assert_eq!(backoff.delay(u64::MAX), u64::MAX);
        let backoff = Backoff::exponential(MS, 10.0, Duration::from_secs(3600));
        assert_eq!(backoff.delay(1_000_000), nanos(Duration::from_secs(3600)));
        // A deadline beyond what the clock can hold is still an answer.
        let mut backoff = Backoff::exponential(Duration::MAX, 2.0, Duration::MAX);
        let clock = ManualClock::new();
        assert!(ask(&mut backoff, &clock, 3).is_some());
    }

    #[test]
    fn max_runs_ends_the_task_once_that_many_runs_have_ended() {
        let backoff = Backoff::exponential(100 * MS, 2.0, Duration::from_secs(10)).max_runs(3);
        let expected = vec![
            Some(Duration::ZERO),
            Some(100 * MS),
            Some(200 * MS),
            None,
            None,
        ];
        assert_eq!(delays(backoff, 5), expected);
        let never = Backoff::exponential(MS, 2.0, MS).max_runs(0);
        assert_eq!(delays(never, 1), vec![None]);
    }

    #[test]
    fn max_elapsed_ends_the_task_instead_of_a_late_retry() {
        let clock = ManualClock::new();
        let mut backoff =
            Backoff::exponential(100 * MS, 2.0, Duration::from_secs(10)).max_elapsed(500 * MS);
        assert_eq!(ask(&mut backoff, &clock, 0), Some(Duration::ZERO));
        // Each try takes 10 ms: tries at 0, 110, 320; the next would be at 730.
        clock.advance(10 * MS);
        assert_eq!(ask(&mut backoff, &clock, 1), Some(100 * MS));
        clock.advance(110 * MS);
        assert_eq!(ask(&mut backoff, &clock, 2), Some(200 * MS));
        clock.advance(210 * MS);
        assert_eq!(ask(&mut backoff, &clock, 3), None);
        // A retry at exactly the limit is still made.
        let mut backoff =
            Backoff::exponential(100 * MS, 2.0, Duration::from_secs(10)).max_elapsed(100 * MS);
        assert_eq!(ask(&mut backoff, &clock, 0), Some(Duration::ZERO));
        assert_eq!(ask(&mut backoff, &clock, 1), Some(100 * MS));
    }

    /// `samples` draws of each of the first `retries` jittered delays, each
    /// with its unjittered delay.
    fn draws(backoff: Backoff, retries: u64, samples: usize) -> Vec<(Duration, Vec<Duration>)> {
        let clock = ManualClock::new();
        let exact = Backoff {
            jitter: Jitter::None,
            ..backoff.clone()
        };
        let mut backoff = backoff;
        (1..=retries)
            .map(|k| {
                let d = Duration::from_nanos(exact.delay(k));
                let drawn = (0..samples)
                    .map(|_| ask(&mut backoff, &clock, k).unwrap())
                    .collect();
                (d, drawn)
            })
            .collect()
    }

    fn assert_spread_within(drawn: &[Duration], low: Duration, high: Duration) {
        for &delay in drawn {
            assert!(
                low <= delay && delay <= high,
                "{delay:?} not in [{low:?}, {high:?}]"
            );
        }
        let (min, max) = (drawn.iter().min().unwrap(), drawn.iter().max().unwrap());
        assert!(min != max, "all {} draws were {min:?}", drawn.len());
        // Spread over the range, not stuck in a corner of it.
        let quarter = (high - low) / 4;
        assert!(
            *min < low + quarter && *max > high - quarter,
            "{min:?}..{max:?}"
        );
    }

    #[test]
    fn full_jitter_draws_each_delay_in_zero_to_the_delay() {
        let backoff = Backoff::exponential(100 * MS, 2.0, Duration::from_secs(1))
            .jitter(Jitter::Full)
            .seed(1);
        for (d, drawn) in draws(backoff, 8, 1000) {
            assert_spread_within(&drawn, Duration::ZERO, d);
        }
    }

    #[test]
    fn partial_jitter_keeps_the_rest_of_each_delay_as_a_floor() {
        for (fraction, floor) in [(0.5, 0.5), (0.25, 0.75), (0.9, 0.1)] {
            let backoff = Backoff::exponential(100 * MS, 2.0, Duration::from_secs(1))
                .jitter(Jitter::Partial(fraction))
                .seed(2);
            for (d, drawn) in draws(backoff, 8, 1000) {
                assert_spread_within(&drawn, d.mul_f64(floor), d);
            }
        }
    }

    #[test]
    fn partial_jitter_fractions_are_clamped() {
        let jitter = |fraction| {
            Backoff::exponential(MS, 2.0, MS)
                .jitter(Jitter::Partial(fraction))
                .jitter
        };
        assert_eq!(jitter(-1.0), Jitter::Partial(0.0));
        assert_eq!(jitter(7.0), Jitter::Partial(1.0));
        let none = Backoff::exponential(100 * MS, 2.0, Duration::from_secs(1))
            .jitter(Jitter::Partial(-3.0));
        for (d, drawn) in draws(none, 4, 10) {
            assert!(drawn.iter().all(|&delay| delay == d));
        }
    }

    #[test]
    fn the_first_run_is_never_jittered() {
        let mut backoff = Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(1))
            .jitter(Jitter::Full);
        let clock = ManualClock::new();
        for _ in 0..100 {
            assert_eq!(ask(&mut backoff, &clock, 0), Some(Duration::ZERO));
        }
    }

    #[test]
    fn seeded_draws_repeat_and_unseeded_clones_draw_anew() {
        let template = Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(60))
            .jitter(Jitter::Full);
        let seeded = template.clone().seed(42);
        assert_eq!(draws(seeded.clone(), 5, 20), draws(seeded, 5, 20));
        assert_eq!(
            draws(Backoff::clone(&template).seed(9), 3, 5),
            draws(template.clone().seed(9), 3, 5)
        );
        // Two unseeded clones drawing the same 100 delays in 1 s..60 s of
        // nanoseconds: a chance of about 10^-900.
        assert_ne!(
            draws(template.clone(), 5, 20),
            draws(template.clone(), 5, 20)
        );
    }

    #[test]
    fn records_no_run_times() {
        assert!(!Backoff::exponential(MS, 2.0, MS).records_run_times());
        fn send_static<T: Send + 'static>() {}
        send_static::<Backoff>();
    }

    #[test]
    #[should_panic(expected = "must not be zero")]
    fn a_zero_initial_delay_is_refused() {
        let _ = Backoff::exponential(Duration::ZERO, 2.0, MS);
    }

    #[test]
    fn shrinking_or_undefined_factors_are_refused() {
        for factor in [0.5, 0.0, -2.0, f64::NAN, f64::INFINITY] {
            let made = std::panic::catch_unwind(|| Backoff::exponential(MS, factor, MS));
            assert!(made.is_err(), "factor {factor}");
        }
    }

    #[test]
    #[should_panic(expected = "must not be longer than the maximum")]
    fn an_initial_delay_longer_than_the_maximum_is_refused() {
        let _ = Backoff::exponential(Duration::from_secs(10), 2.0, Duration::from_secs(1));
    }

    #[test]
    #[should_panic(expected = "NaN")]
    fn a_nan_jitter_fraction_is_refused() {
        let _ = Backoff::exponential(MS, 2.0, MS).jitter(Jitter::Partial(f64::NAN));
    }
}

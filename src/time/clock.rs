//! The executor's clock: `Instant`s as `u64` nanoseconds since an origin,
//! with saturating arithmetic; the monotonic clock, or a [`ManualClock`]'s
//! time.
//!
//! Deadlines are stored as [`Nanos`] since the clock's origin. Adding a
//! delay saturates instead of overflowing: any delay up to `Duration::MAX`
//! is accepted, and a deadline that saturates at `u64::MAX` ns (about 584
//! years after the executor started) is never due ([`NEVER`]): no clock
//! reaches it, a manual one stops one nanosecond before.
//!
//! [`NEVER`]: super::NEVER
//!
//! [`ManualClock`]: super::ManualClock

use std::time::{Duration, Instant, SystemTime};

use crate::sync::StdArc;

use super::manual::ManualState;
use super::Nanos;

/// Converts between `Instant`, `Duration` and nanoseconds since `origin`,
/// and reads the time: the monotonic clock's, or a manual clock's.
#[derive(Clone)]
pub(crate) struct Clock {
    origin: Instant,
    /// The manual clock the time is read from, if any.
    manual: Option<StdArc<ManualState>>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock")
            .field("manual", &self.manual.is_some())
            .finish_non_exhaustive()
    }
}

impl Clock {
    /// The monotonic clock, from now.
    pub(crate) fn new() -> Self {
        Clock {
            origin: Instant::now(),
            manual: None,
        }
    }

    /// A manual clock's time.
    pub(crate) fn manual(state: StdArc<ManualState>) -> Self {
        Clock {
            origin: state.origin(),
            manual: Some(state),
        }
    }

    /// The manual clock the time is read from, if any.
    pub(crate) fn manual_state(&self) -> Option<&StdArc<ManualState>> {
        self.manual.as_ref()
    }

    /// True for a manual clock: time moves only when it is told to, so
    /// nothing may sleep (or spin) until a deadline in real time.
    pub(crate) fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// The wall time now: the system clock's, or the manual clock's.
    pub(crate) fn system_time(&self) -> SystemTime {
        match &self.manual {
            None => SystemTime::now(),
            Some(manual) => manual.system_time(),
        }
    }

    /// The monotonic time and the wall time at one instant, for the offset
    /// between the two clocks (`timer/driver/wall.rs`): two monotonic
    /// reads around the wall read, their midpoint. A thread preempted
    /// between two reads (a loaded machine) would see the offset move by
    /// the preemption, which looks like a step of the wall clock and
    /// places every task due at a wall time again; so a pair more than
    /// [`WALL_READ_SPREAD`] apart is read again, up to four times, and the
    /// tightest is kept.
    pub(crate) fn now_and_wall(&self) -> (Nanos, SystemTime) {
        if let Some(manual) = &self.manual {
            return manual.now_and_wall();
        }
        let mut tightest = None;
        for _ in 0..4 {
            let before = self.now();
            let wall = SystemTime::now();
            let spread = self.now().saturating_sub(before);
            let read = (before + spread / 2, wall);
            if spread <= WALL_READ_SPREAD {
                return read;
            }
            if tightest.is_none_or(|(s, _)| spread < s) {
                tightest = Some((spread, read));
            }
        }
        tightest.expect("read at least once").1
    }

    /// Nanoseconds since the origin, now.
    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        match &self.manual {
            None => self.nanos_of(Instant::now()),
            Some(manual) => manual.now(),
        }
    }

    /// The deadline `delay` from now (saturated at `u64::MAX`).
    pub(crate) fn after(&self, delay: Duration) -> Nanos {
        self.now().saturating_add(nanos(delay))
    }

    /// `instant` as nanoseconds since the origin (0 if before it, saturated
    /// at `u64::MAX`).
    pub(crate) fn nanos_of(&self, instant: Instant) -> Nanos {
        let since = instant.saturating_duration_since(self.origin);
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The `Instant` of a deadline, or `None` if it is beyond what
    /// `Instant` can represent (a wait for it is a wait without end).
    pub(crate) fn instant_of(&self, deadline: Nanos) -> Option<Instant> {
        self.origin.checked_add(Duration::from_nanos(deadline))
    }

    /// The `Instant` of a deadline, or, if `Instant` cannot represent it,
    /// one it can before it (halving the deadline until it fits: only a
    /// deadline centuries away, on a platform with a narrow `Instant`, gets
    /// there).
    pub(crate) fn instant_of_saturating(&self, deadline: Nanos) -> Instant {
        let mut nanos = deadline;
        loop {
            if let Some(instant) = self.instant_of(nanos) {
                return instant;
            }
            nanos -= (nanos - nanos / 2).max(1);
        }
    }

    /// Time left until `deadline` (zero if it has passed).
    pub(crate) fn until(&self, deadline: Nanos) -> Duration {
        Duration::from_nanos(deadline.saturating_sub(self.now()))
    }
}

/// How far apart the two monotonic reads of [`Clock::now_and_wall`] may
/// be (a clock read is tens of nanoseconds; a preemption, tens of
/// microseconds or more): a tenth of the tolerance of the wall clock's
/// watch (1 ms, `task/recurring/placement.rs`).
const WALL_READ_SPREAD: Nanos = 100_000;

/// The offset between a wall clock reading `wall` and a monotonic time
/// `now` (wall minus monotonic, in nanoseconds since the Unix epoch and
/// the clock's origin): what a step of the wall clock changes. Any
/// `SystemTime` fits.
pub(crate) fn wall_offset(wall: SystemTime, now: Nanos) -> i128 {
    let wall = match wall.duration_since(std::time::UNIX_EPOCH) {
        Ok(since) => since.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    };
    wall - i128::from(now)
}

/// A duration in nanoseconds, saturated at `u64::MAX`.
pub(crate) fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn huge_delays_saturate_instead_of_overflowing() {
        let clock = Clock::new();
        assert_eq!(clock.now().saturating_add(nanos(Duration::MAX)), u64::MAX);
        assert_eq!(nanos(Duration::from_secs(u64::MAX)), u64::MAX);
        assert!(clock.until(u64::MAX) > Duration::from_secs(500 * 365 * 24 * 3600));
        let past = clock
            .origin
            .checked_sub(Duration::from_secs(1))
            .unwrap_or(clock.origin);
        assert_eq!(clock.nanos_of(past), 0);
        assert_eq!(clock.until(0), Duration::ZERO);
    }

    #[test]
    fn instants_round_trip() {
        let clock = Clock::new();
        let later = Instant::now() + Duration::from_millis(5);
        let nanos = clock.nanos_of(later);
        assert_eq!(clock.instant_of(nanos), Some(later));
    }
}

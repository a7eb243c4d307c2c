//! Times as stored: whole microseconds since the Unix epoch, in an `i64`
//! ([`Micros`]), between [`EARLIEST`] and [`LATEST`].
//!
//! Microseconds are what PostgreSQL's `timestamptz` holds, so both stores
//! keep the same instants. A time with a finer part is rounded *up* to the
//! next microsecond: a job is never due before the time it was given, and a
//! period is never shortened. The range is the years 1 to 9999, which both
//! stores (and every client's date type) hold: a schedule that would need a
//! time outside it is refused with an error, and a time computed later (a
//! retry's back-off, a next occurrence, a lease) saturates at its ends.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch (negative before it).
pub(crate) type Micros = i64;

/// 0001-01-01T00:00:00Z.
pub(crate) const EARLIEST: Micros = -62_135_596_800_000_000;
/// 9999-12-31T23:59:59.999999Z.
pub(crate) const LATEST: Micros = 253_402_300_799_999_999;

/// `t` in microseconds, rounded up; `None` outside [`EARLIEST`]..=[`LATEST`].
pub(crate) fn micros(t: SystemTime) -> Option<Micros> {
    let m = match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(ceil_micros(after)).ok()?,
        // Before the epoch: rounding up is towards it.
        Err(e) => -i64::try_from(e.duration().as_micros()).ok()?,
    };
    (EARLIEST..=LATEST).contains(&m).then_some(m)
}

/// `t` in microseconds, rounded up, saturating at the range's ends.
pub(crate) fn micros_saturating(t: SystemTime) -> Micros {
    micros(t).unwrap_or_else(|| if t >= UNIX_EPOCH { LATEST } else { EARLIEST })
}

/// `d` in microseconds, rounded up; `None` if it is longer than the range.
pub(crate) fn duration_micros(d: Duration) -> Option<Micros> {
    i64::try_from(ceil_micros(d))
        .ok()
        .filter(|&m| m <= LATEST - EARLIEST)
}

/// `d` in microseconds, rounded up, saturating at the range's length.
pub(crate) fn duration_micros_saturating(d: Duration) -> Micros {
    duration_micros(d).unwrap_or(LATEST - EARLIEST)
}

/// `t + d`, saturating at [`LATEST`] (and at [`EARLIEST`] below).
pub(crate) fn add(t: Micros, d: Micros) -> Micros {
    t.saturating_add(d).clamp(EARLIEST, LATEST)
}

/// The instant `m` stands for.
pub(crate) fn system_time(m: Micros) -> SystemTime {
    let m = m.clamp(EARLIEST, LATEST);
    let d = Duration::from_micros(m.unsigned_abs());
    if m >= 0 {
        UNIX_EPOCH + d
    } else {
        UNIX_EPOCH - d
    }
}

fn ceil_micros(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_up_to_the_microsecond_on_both_sides_of_the_epoch() {
        let t = UNIX_EPOCH + Duration::from_nanos(1_500);
        assert_eq!(micros(t), Some(2));
        let before = UNIX_EPOCH - Duration::from_nanos(1_500);
        assert_eq!(micros(before), Some(-1), "up is towards the epoch");
        assert!(system_time(micros(before).unwrap()) >= before);
        assert_eq!(
            duration_micros(Duration::from_nanos(1_900_001)),
            Some(1_901)
        );
        for m in [EARLIEST, -1, 0, 1, 1_767_225_600_000_000, LATEST] {
            assert_eq!(micros(system_time(m)), Some(m));
        }
    }

    #[test]
    fn the_range_is_years_1_to_9999_and_later_times_saturate() {
        let year_10000 = system_time(LATEST) + Duration::from_micros(1);
        assert_eq!(micros(year_10000), None);
        assert_eq!(micros_saturating(year_10000), LATEST);
        assert_eq!(
            micros(system_time(EARLIEST) - Duration::from_micros(1)),
            None
        );
        assert_eq!(duration_micros(Duration::MAX), None);
        assert_eq!(add(LATEST - 1, i64::MAX), LATEST);
        assert_eq!(add(0, duration_micros_saturating(Duration::MAX)), LATEST);
    }
}

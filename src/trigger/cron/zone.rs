//! Wall times to instants in a time zone: where daylight saving makes a
//! wall time happen twice (a fold) or not at all (a gap).
//!
//! jiff reports a wall time's offsets ([`AmbiguousOffset`]): one, two for
//! a fold (before and after the clock goes back), or the two around a gap.
//! What a cron job does about each is decided in `cron.rs`; this file only
//! names the instants, and finds the one a gap jumps to, which jiff's
//! disambiguations do not give (their "later" for 02:30 in a one-hour gap
//! is 03:30, RFC 5545's choice; the clock itself jumps to 03:00).

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;

/// The instants a wall time names in a zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Instants {
    /// It happens once.
    Once(Timestamp),
    /// It happens twice: before and after the clock goes back.
    Twice(Timestamp, Timestamp),
    /// The clock jumps over it, to the wall time it reads at `jump` (the
    /// first instant after the gap).
    Skipped { jump: Timestamp },
}

/// The instants `wall` names in `zone`; `None` outside the range of times
/// jiff represents.
pub(super) fn instants(zone: &TimeZone, wall: DateTime) -> Option<Instants> {
    let ambiguous = zone.to_ambiguous_timestamp(wall);
    Some(match ambiguous.offset() {
        AmbiguousOffset::Unambiguous { .. } => Instants::Once(ambiguous.unambiguous().ok()?),
        AmbiguousOffset::Fold { .. } => {
            Instants::Twice(ambiguous.earlier().ok()?, ambiguous.later().ok()?)
        }
        AmbiguousOffset::Gap { after, .. } => {
            // Read with the offset after the gap, the wall time is an
            // instant before the jump (the gap spans [jump + before,
            // jump + after) of wall time), and no other transition lies in
            // between: the jump is the first one after it.
            let before_jump = after.to_timestamp(wall).ok()?;
            let jump = zone.following(before_jump).next()?.timestamp();
            Instants::Skipped { jump }
        }
    })
}

/// If `t` is in the first pass through a range of wall times that the
/// clock is about to repeat, the first wall time of the second pass (the
/// wall time the clock goes back to); else `None`.
///
/// `wall` is `t`'s wall time in `zone`.
pub(super) fn second_pass_start(zone: &TimeZone, t: Timestamp, wall: DateTime) -> Option<DateTime> {
    match zone.to_ambiguous_timestamp(wall).offset() {
        AmbiguousOffset::Fold { before, .. } if zone.to_offset(t) == before => {
            let back = zone.following(t).next()?.timestamp();
            Some(zone.to_datetime(back))
        }
        _ => None,
    }
}

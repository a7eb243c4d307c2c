//! Time as the executor sees it: [`Nanos`] since its clock's origin, the
//! clock that converts to and from `Instant` and `Duration`, and the
//! [`ManualClock`] that tests move by hand.

pub(crate) mod clock;
pub(crate) mod manual;

pub(crate) use clock::Clock;
pub use manual::{ManualClock, MANUAL_CLOCK_START};

/// Nanoseconds since the executor's clock origin.
pub(crate) type Nanos = u64;

/// A deadline that cannot be represented (it saturated at `u64::MAX`,
/// about 584 years after the origin): never due. No clock reaches it, so
/// a periodic task whose next run lies beyond the clock's range stays
/// pending instead of running at every turn.
pub(crate) const NEVER: Nanos = u64::MAX;

/// The last time a clock reaches: a [`ManualClock`] moved by
/// `Duration::MAX` stops here, one nanosecond before [`NEVER`].
pub(crate) const LAST_INSTANT: Nanos = NEVER - 1;

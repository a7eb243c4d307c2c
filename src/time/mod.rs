//! Time as the executor sees it: [`Nanos`] since its clock's origin, the
//! clock that converts to and from `Instant` and `Duration`, and the
//! [`ManualClock`] that tests move by hand.

pub(crate) mod clock;
pub(crate) mod manual;

pub(crate) use clock::Clock;
pub use manual::{ManualClock, MANUAL_CLOCK_START};

/// Nanoseconds since the executor's clock origin.
pub(crate) type Nanos = u64;

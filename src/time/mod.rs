//! Time as the executor sees it: [`Nanos`] since its clock's origin, and
//! the clock that converts to and from `Instant` and `Duration`.

pub(crate) mod clock;

pub(crate) use clock::Clock;

/// Nanoseconds since the executor's clock origin.
pub(crate) type Nanos = u64;

//! The timer layer: the delayed work queue and the thread that waits for
//! time.
//!
//! * [`queue`]: the backends ([`DelayQueue`]): plain
//!   single-threaded data structures driven by an explicit `now`, each
//!   property-tested against one reference model.
//! * [`driver`]: the timer thread, which owns the backend, takes the
//!   schedulers' commands, sweeps cancelled entries, hands due tasks to the
//!   workers and sleeps until the next deadline.
//!
//! [`TimerQueue`] is the public choice of backend.

use std::time::Duration;

use crate::time::clock;

pub(crate) mod driver;
pub(crate) mod queue;

use queue::{hashed_wheel, heap, hierarchical_wheel, DelayQueue};

/// Which delayed work queue an executor uses, chosen with
/// [`Builder::timer_queue`](crate::Builder::timer_queue).
///
/// ```
/// use chronopool::{ScheduledExecutor, TimerQueue};
///
/// let pool = ScheduledExecutor::builder().timer_queue(TimerQueue::heap()).build()?;
/// # Ok::<(), chronopool::BuildError>(())
/// ```
///
/// A wheel's settings are checked by
/// [`Builder::build`](crate::Builder::build): a tick of zero or of more
/// than [`MAX_WHEEL_TICK`], or a number of slots of zero or more than
/// [`MAX_WHEEL_SLOTS`], is a [`BuildError`](crate::BuildError).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerQueue(Backend);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Backend {
    #[default]
    Heap,
    HashedWheel {
        tick: Duration,
        slots: usize,
    },
    HierarchicalWheel {
        tick: Duration,
    },
}

/// The largest tick a timing wheel accepts: one hour (a coarser wheel
/// would round every deadline by hours; it also keeps a revolution of the
/// largest hashed wheel within the clock's range).
pub const MAX_WHEEL_TICK: Duration = Duration::from_secs(3600);

/// The most slots a hashed wheel accepts: 2^20 (8 MiB of bucket heads).
pub const MAX_WHEEL_SLOTS: usize = hashed_wheel::MAX_SLOTS;

impl TimerQueue {
    /// A 4-ary heap (the JDK's `DelayedWorkQueue`, improved): exact
    /// deadlines (no tick), insertion order among equal deadlines, O(log n)
    /// insert and pop; a cancel is counted and swept out with the others.
    /// The default.
    pub fn heap() -> Self {
        TimerQueue(Backend::Heap)
    }

    /// A hashed timing wheel (Netty's `HashedWheelTimer`, improved) with a
    /// 1 ms tick and 512 slots: O(1) insert and pop; deadlines rounded
    /// up to the tick (a task may run up to one tick late, never early).
    /// Best for many short, similar time-outs (up to a few revolutions of
    /// 512 ms); see [`hashed_wheel_with`](Self::hashed_wheel_with).
    ///
    /// ```
    /// use chronopool::{ScheduledExecutor, TimerQueue};
    ///
    /// let pool = ScheduledExecutor::builder()
    ///     .timer_queue(TimerQueue::hashed_wheel())
    ///     .build()?;
    /// # Ok::<(), chronopool::BuildError>(())
    /// ```
    pub fn hashed_wheel() -> Self {
        TimerQueue(Backend::HashedWheel {
            tick: Duration::from_nanos(hashed_wheel::DEFAULT_TICK),
            slots: hashed_wheel::DEFAULT_SLOTS,
        })
    }

    /// A hashed timing wheel with the given tick and number of slots, the
    /// latter rounded up to a power of two (as Netty does). One revolution
    /// is `tick × slots`; entries further out wait in their slot for later
    /// revolutions, which makes finding the next deadline slower, so pick
    /// a revolution longer than most delays.
    ///
    /// ```
    /// use chronopool::{BuildError, ScheduledExecutor, TimerQueue};
    /// use std::time::Duration;
    ///
    /// let wheel = TimerQueue::hashed_wheel_with(Duration::from_micros(100), 1000);
    /// let pool = ScheduledExecutor::builder().timer_queue(wheel).build()?;
    ///
    /// let zero_tick = TimerQueue::hashed_wheel_with(Duration::ZERO, 512);
    /// let refused = ScheduledExecutor::builder().timer_queue(zero_tick).build();
    /// assert!(matches!(refused, Err(BuildError::WheelTick(_))));
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn hashed_wheel_with(tick: Duration, slots: usize) -> Self {
        TimerQueue(Backend::HashedWheel { tick, slots })
    }

    /// A hierarchical timing wheel (Linux's, tokio's, Kafka's overflow
    /// wheels) with a 1 ms tick: levels of 64 slots, each 64 times coarser
    /// than the one below, found through occupancy bitmaps; O(1) insert and
    /// cancel for any delay (a timer a year out costs what one a second
    /// out does); deadlines rounded up to the tick (a task may run up to
    /// one tick late, never early). Best for many timers over wide spans.
    ///
    /// Its cost under a heavy load: each time the wheel enters a new span
    /// of 64 ticks, the timers due in that span move to the finest level
    /// in one sequential pass, and tasks falling due meanwhile wait for it:
    /// microseconds at ten thousand timers due a second, a fraction of a
    /// millisecond at a million (measured on the wheel alone:
    /// `benches/README.md` in the repository, "The hierarchical wheel
    /// under load").
    ///
    /// ```
    /// use chronopool::{ScheduledExecutor, TimerQueue};
    ///
    /// let pool = ScheduledExecutor::builder()
    ///     .timer_queue(TimerQueue::hierarchical_wheel())
    ///     .build()?;
    /// # Ok::<(), chronopool::BuildError>(())
    /// ```
    pub fn hierarchical_wheel() -> Self {
        TimerQueue(Backend::HierarchicalWheel {
            tick: Duration::from_nanos(hierarchical_wheel::HierarchicalWheel::<()>::DEFAULT_TICK),
        })
    }

    /// A hierarchical timing wheel with the given tick (the finest level's
    /// slot; the lateness bound).
    ///
    /// ```
    /// use chronopool::{ScheduledExecutor, TimerQueue};
    /// use std::time::Duration;
    ///
    /// let fine = TimerQueue::hierarchical_wheel_with(Duration::from_micros(10));
    /// let pool = ScheduledExecutor::builder().timer_queue(fine).build()?;
    /// # Ok::<(), chronopool::BuildError>(())
    /// ```
    pub fn hierarchical_wheel_with(tick: Duration) -> Self {
        TimerQueue(Backend::HierarchicalWheel { tick })
    }

    /// Checks the settings (see the type doc).
    pub(crate) fn validate(self) -> Result<(), InvalidQueue> {
        let check_tick = |tick: Duration| {
            if tick.is_zero() || tick > MAX_WHEEL_TICK {
                Err(InvalidQueue::Tick(tick))
            } else {
                Ok(())
            }
        };
        match self.0 {
            Backend::Heap => Ok(()),
            Backend::HashedWheel { tick, slots } => {
                check_tick(tick)?;
                if slots == 0 || slots > MAX_WHEEL_SLOTS {
                    return Err(InvalidQueue::Slots(slots));
                }
                Ok(())
            }
            Backend::HierarchicalWheel { tick } => check_tick(tick),
        }
    }

    /// A fresh, empty backend of this kind (the settings were validated).
    pub(crate) fn build<T: Send + 'static>(self) -> Box<dyn DelayQueue<T> + Send> {
        match self.0 {
            Backend::Heap => Box::new(heap::Heap::default()),
            Backend::HashedWheel { tick, slots } => Box::new(hashed_wheel::HashedWheel::new(
                clock::nanos(tick),
                slots.next_power_of_two(),
            )),
            Backend::HierarchicalWheel { tick } => Box::new(
                hierarchical_wheel::HierarchicalWheel::new(clock::nanos(tick)),
            ),
        }
    }
}

/// A wheel setting out of range (the builder reports it as a
/// [`BuildError`](crate::BuildError)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InvalidQueue {
    /// A tick of zero or more than [`MAX_WHEEL_TICK`].
    Tick(Duration),
    /// A hashed wheel's slots: zero or more than [`MAX_WHEEL_SLOTS`].
    Slots(usize),
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A leading worker shares a wheel's tick of due tasks only once they
    /// are late beyond the tick (`driver/lead.rs`): each backend says how
    /// coarse its deadlines are.
    #[test]
    fn a_backend_reports_its_granularity() {
        let granularity = |queue: TimerQueue| queue.build::<()>().granularity();
        assert_eq!(granularity(TimerQueue::heap()), 0);
        assert_eq!(granularity(TimerQueue::hashed_wheel()), 1_000_000);
        assert_eq!(granularity(TimerQueue::hierarchical_wheel()), 1_000_000);
        let tick = Duration::from_micros(250);
        assert_eq!(
            granularity(TimerQueue::hashed_wheel_with(tick, 64)),
            250_000
        );
        assert_eq!(
            granularity(TimerQueue::hierarchical_wheel_with(tick)),
            250_000
        );
    }
}

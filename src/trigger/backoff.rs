//! [`Backoff`]: retry with exponential back-off (placeholder, being written).

use std::time::Duration;

use super::{Next, Trigger, TriggerContext};

/// Exponential back-off (being written).
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
}

/// Jitter (being written).
#[derive(Clone, Copy, Debug)]
pub enum Jitter {
    /// None.
    None,
}

impl Backoff {
    /// Exponential back-off.
    pub fn exponential(initial: Duration, _factor: f64, _max: Duration) -> Self {
        Backoff { initial }
    }
}

impl Trigger for Backoff {
    fn next(&mut self, ctx: &TriggerContext<'_>) -> Option<Next> {
        Some(Next::At(ctx.now() + self.initial))
    }
}

//! [`Cron`]: calendar schedules (placeholder, being written).

use super::{Next, Trigger, TriggerContext};

/// A cron schedule (being written).
#[derive(Clone, Debug)]
pub struct Cron {}

/// A malformed cron expression (being written).
#[derive(Clone, Debug)]
pub struct CronError {}

impl Cron {
    /// Parses a cron expression.
    pub fn parse(_expr: &str) -> Result<Cron, CronError> {
        Ok(Cron {})
    }
}

impl Trigger for Cron {
    fn next(&mut self, _ctx: &TriggerContext<'_>) -> Option<Next> {
        None
    }
}

//! What a task cell holds of its name: [`Label`].
//!
//! A name is opt-in (`ScheduledExecutor::task().name(..)`), so the cells
//! take it as a type parameter: an unnamed task's cell holds `()`, which
//! takes no space, and only a named one pays for the name's 16 bytes.

use crate::sync::StdArc;

/// A task cell's name, or nothing.
pub(crate) trait Label: Send + Sync + 'static {
    /// The name, if the task has one.
    fn name(&self) -> Option<&StdArc<str>>;
}

impl Label for () {
    fn name(&self) -> Option<&StdArc<str>> {
        None
    }
}

impl Label for StdArc<str> {
    fn name(&self) -> Option<&StdArc<str>> {
        Some(self)
    }
}

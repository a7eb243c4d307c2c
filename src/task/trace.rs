//! What the pool tells [`tracing`](https://docs.rs/tracing) (the `tracing`
//! feature, off by default): a span around each run of a task, and an
//! event for each thing that goes wrong or is dropped.
//!
//! All under the target `chronopool`:
//!
//! | what | level | name / message | fields |
//! |---|---|---|---|
//! | a run of a task | `DEBUG` span | `task` | `task.id`, `task.name` (if named), `task.kind`, `lateness_us` (scheduled runs) |
//! | a task's code panicked | `ERROR` | "task panicked" | `task.id`, `task.name` (if any), `panic` (its message) |
//! | a submission was refused | `WARN` | "task rejected" | `reason` |
//! | a time-out came first | `WARN` | "task timed out" | `task.id`, `task.name`, `running` |
//! | `MissedRuns` skipped or delayed runs | `INFO` | "missed runs" | `task.id`, `task.name`, `skipped`, `delayed` |
//!
//! Without the feature every function here is an empty inline one, and
//! the pool's code is as if this module were not there. With it and no
//! subscriber that wants them, a run costs the check of the span's
//! callsite and an empty span (its fields, the id included, are only worked
//! out for a subscriber): a little, measured in `benches/README.md`
//! ("`tracing` with no subscriber"). (`execute`'s closures, the spawn
//! benches', have no span.)

use crate::sync::StdArc;

use super::state::Header;

/// What kind of task runs, for the span's `task.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `submit` (or a named `execute`).
    Task,
    /// `schedule`, `schedule_at`.
    Scheduled,
    /// `submit_with_timeout`.
    WithTimeout,
    /// `schedule_at_fixed_rate`, `schedule_with_fixed_delay`.
    Periodic,
    /// `schedule_with_trigger`.
    Trigger,
    /// `schedule_at_system_time`.
    WallTime,
}

impl Kind {
    /// The name the span records.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Task => "task",
            Kind::Scheduled => "scheduled",
            Kind::WithTimeout => "with-timeout",
            Kind::Periodic => "periodic",
            Kind::Trigger => "trigger",
            Kind::WallTime => "wall-time",
        }
    }
}

#[cfg(feature = "tracing")]
pub(crate) use enabled::*;

#[cfg(not(feature = "tracing"))]
pub(crate) use disabled::*;

#[cfg(feature = "tracing")]
mod enabled {
    use std::fmt;

    use super::*;
    use crate::task::error::PanicPayload;
    use crate::time::Nanos;

    /// The span of a run, entered until dropped.
    pub(crate) type RunSpan = tracing::span::EnteredSpan;

    /// Enters the span of a run of the task `header`, named `name`, of
    /// `kind`; `lateness` (called only for a subscriber that records the
    /// span) gives how late a scheduled run starts, in nanoseconds.
    #[inline]
    pub(crate) fn run(
        kind: Kind,
        header: &Header,
        name: Option<&StdArc<str>>,
        lateness: impl FnOnce() -> Option<Nanos>,
    ) -> RunSpan {
        let span = tracing::debug_span!(
            target: "chronopool",
            "task",
            task.id = header.id().as_u64(),
            task.name = name.map(|name| &**name),
            task.kind = kind.as_str(),
            lateness_us = tracing::field::Empty,
        );
        if !span.is_disabled() {
            if let Some(late) = lateness() {
                span.record("lateness_us", late / 1_000);
            }
        }
        span.entered()
    }

    /// A task's code panicked (whatever reported it).
    pub(crate) fn panicked(payload: &PanicPayload) {
        tracing::event!(
            target: "chronopool",
            tracing::Level::ERROR,
            task.id = payload.task_id().map(|id| id.as_u64()),
            task.name = payload.task_name(),
            panic = payload.message().unwrap_or("Box<dyn Any>"),
            "task panicked"
        );
    }

    /// A submission was refused.
    pub(crate) fn rejected(reason: &dyn fmt::Display) {
        tracing::warn!(target: "chronopool", reason = %reason, "task rejected");
    }

    /// A task's time-out came first; `running`: it had started.
    pub(crate) fn timed_out(header: &Header, name: Option<&StdArc<str>>, running: bool) {
        tracing::event!(
            target: "chronopool",
            tracing::Level::WARN,
            task.id = header.id().as_u64(),
            task.name = name.map(|name| &**name),
            running,
            "task timed out"
        );
    }

    /// A fixed-rate task's `MissedRuns` skipped or delayed runs.
    pub(crate) fn missed_runs(
        header: &Header,
        name: Option<&StdArc<str>>,
        skipped: u64,
        delayed: u64,
    ) {
        tracing::event!(
            target: "chronopool",
            tracing::Level::INFO,
            task.id = header.id().as_u64(),
            task.name = name.map(|name| &**name),
            skipped,
            delayed,
            "missed runs"
        );
    }
}

#[cfg(not(feature = "tracing"))]
mod disabled {
    use std::fmt;

    use super::*;
    use crate::task::error::PanicPayload;
    use crate::time::Nanos;

    /// Nothing: the feature is off.
    pub(crate) struct RunSpan;

    #[inline(always)]
    pub(crate) fn run(
        _: Kind,
        _: &Header,
        _: Option<&StdArc<str>>,
        _: impl FnOnce() -> Option<Nanos>,
    ) -> RunSpan {
        RunSpan
    }

    #[inline(always)]
    pub(crate) fn panicked(_: &PanicPayload) {}

    #[inline(always)]
    pub(crate) fn rejected(_: &dyn fmt::Display) {}

    #[inline(always)]
    pub(crate) fn timed_out(_: &Header, _: Option<&StdArc<str>>, _: bool) {}

    #[inline(always)]
    pub(crate) fn missed_runs(_: &Header, _: Option<&StdArc<str>>, _: u64, _: u64) {}
}

//! The loom models that need a whole pool (`RUSTFLAGS="--cfg loom"`; see
//! `loom-tests/README.md` for the list and how to run them).
//!
//! A protocol's component model sits beside it when it needs only its own
//! module (the ring, the sleep protocol, a task id). The models here need
//! more: a task cell run, cancelled and joined through a real pool, the
//! timer thread's turns handing tasks to workers, the manual clock driving
//! a timer. They live in this test-only module (tokio keeps its own in
//! `runtime/tests/`) so that the library's imports are its layer order: no
//! file of `task/`, `time/` or `timer/` names the pool or the handles.
//!
//! Each file is named after the protocol it models and says, at its top,
//! what each model asserts.

pub(crate) mod support;

mod alarm;
mod cell;
mod commands;
mod deadline;
mod help;
mod lead;
mod manual_clock;
mod recurring;
mod shutdown;
mod sweep;
mod timer;
mod wall;

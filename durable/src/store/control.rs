//! What operators ask of a store beyond the protocol (`Conn`'s control
//! methods): the queries' arguments and rows.

use super::JobState;
use crate::time::Micros;

/// Which jobs a listing returns ([`Conn::query`](super::Conn::query)):
/// every filter that is set, ordered by fire time, then key.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListQuery<'a> {
    pub(crate) state: Option<JobState>,
    pub(crate) paused: Option<bool>,
    pub(crate) name: Option<&'a str>,
    pub(crate) key_prefix: Option<&'a str>,
    /// Due before this (with `state` scheduled: the late ones).
    pub(crate) due_before: Option<Micros>,
    /// The page after this (fire time, key).
    pub(crate) after: Option<(Micros, &'a str)>,
    pub(crate) limit: usize,
}

/// A run that ended, as the history keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunRow {
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) owner: String,
    pub(crate) owner_name: Option<String>,
    pub(crate) attempt: u32,
    pub(crate) due: Micros,
    pub(crate) started_at: Option<Micros>,
    pub(crate) ended_at: Micros,
    /// [`outcome_name`](super::outcome_name)'s.
    pub(crate) outcome: String,
    pub(crate) error: Option<String>,
}

/// What the retention pass deletes ([`Conn::clean`](super::Conn::clean)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retention {
    /// Done jobs finished before this.
    pub(crate) done_before: Micros,
    /// Dead jobs finished before this.
    pub(crate) dead_before: Micros,
    /// Runs ended before this (each job's runs beyond its last few go as
    /// new ones are written).
    pub(crate) runs_before: Micros,
}

//! [`IfExists`]: what storing a job does when its key is stored already.

/// What storing a job does when its key is stored already, chosen per job
/// with [`Job::if_exists`](crate::Job::if_exists). A key names one job: it
/// is never stored twice. Of two jobs with one key in one batch, the later
/// is the one stored, the earlier ignored.
///
/// The default, [`KeepSame`](IfExists::KeepSame), makes scheduling at
/// start-up idempotent: a service that schedules `"hourly-report"` every
/// `Every(1 h)` at each start keeps the job's first run where it was,
/// instead of pushing it an hour back at every restart (and never running
/// it if it restarts more often than hourly).
///
/// A job whose run is in progress is never disturbed by a schedule: the
/// run goes on under its lease. Replaced meanwhile, it takes over once the
/// run ends (no second run of the key starts meanwhile, here or in another
/// process), and the run's own outcome (a retry, a death, its next
/// occurrence) is not applied: the new job stands.
///
/// Sameness compares the stored bytes: a typed payload whose JSON is not
/// always written the same way (a `HashMap`'s order, say) looks different
/// at every schedule, and replaces the job.
///
/// ```
/// use chronopool_durable::{IfExists, Job, Schedule};
/// use std::time::Duration;
///
/// // At every start: the same job again changes nothing.
/// let report = Job::new("hourly-report", "report", "", Schedule::Every(Duration::from_secs(3600)));
/// // A debounced notification: the latest text, sent when first planned.
/// let digest = Job::new("digest-7", "send-digest", "3 new comments", Schedule::After(Duration::from_secs(600)))
///     .if_exists(IfExists::KeepTime);
/// // A new time, whatever was stored.
/// let retry = Job::new("sync-7", "sync", "", Schedule::After(Duration::ZERO))
///     .if_exists(IfExists::Replace);
/// # let _ = (report, digest, retry);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IfExists {
    /// Keep the stored job untouched when it is the same job: scheduled or
    /// running, for the same handler, with the same payload, schedule
    /// ([`Every`](crate::Schedule::Every) and
    /// [`Cron`](crate::Schedule::Cron) by their rule, not their next time;
    /// [`At`](crate::Schedule::At) by its time, whatever a retry made its
    /// next one; an [`After`](crate::Schedule::After) by being a pending
    /// `After` one-shot) and policies. A different job, or a stored one
    /// that is done or dead, is replaced as by [`Replace`](Self::Replace).
    /// The default.
    #[default]
    KeepSame,
    /// Keep the stored job's time (its next run, its schedule, its
    /// handler) and take the new payload: debounce. A key that is not
    /// stored, or whose job is done or dead, is stored as new. A one-shot
    /// whose run is in progress (it has the old payload) runs again after
    /// that run, at once, with the new one.
    KeepTime,
    /// Store the new job in place of the stored one: its schedule starts
    /// from now, its attempts and last error are cleared. A run in
    /// progress finishes undisturbed, and the new schedule takes over when
    /// it ends.
    Replace,
}

impl IfExists {
    /// Its name in the stores' upsert statements.
    pub(crate) fn sql_name(self) -> &'static str {
        match self {
            IfExists::KeepSame => "keep_same",
            IfExists::KeepTime => "keep_time",
            IfExists::Replace => "replace",
        }
    }
}

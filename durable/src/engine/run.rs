//! A claimed run on one of the executor's workers: its handler, the
//! outcome it stores, and the [`RunGuard`] that makes sure it stores one.
//!
//! Every claimed run ends in a stored finish or a released claim, whatever
//! happens to it: the guard travels with the run's closure into the
//! executor, and if it is dropped without an outcome (the executor refused
//! the run or dropped it unrun: a claim to release; or something unwound
//! past the handler's own catch, such as a panic payload whose drop panics
//! again: a failed attempt), its `Drop` reports that to the run loop. A
//! handler that kills its process is the lease's case, and its attempt is
//! already counted (the claim counts it).

use std::cell::Cell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use chronopool::{MissedRuns, PanicPayload};

use super::{Ended, Shared};
use crate::completion::RunRecord;
use crate::job::{Handler, JobContext, JobError};
use crate::schedule::Recurrence;
use crate::spawn::{AsyncHandler, HandlerFuture, Spawn};
use crate::store::{Fence, Finish, Row};
use crate::time::{self, Micros};

thread_local! {
    /// The scheduler (its [`Shared`]'s address) whose handler this thread
    /// is running, or 0: a `shutdown` called from a handler cannot wait for
    /// the run loop, which waits for that very run.
    static IN_HANDLER_OF: Cell<usize> = const { Cell::new(0) };
}

/// This thread runs a handler of a scheduler until dropped (the mark of
/// the one before, if handlers nest, comes back).
struct InHandler(usize);

impl InHandler {
    fn enter(shared: &Shared) -> InHandler {
        InHandler(IN_HANDLER_OF.replace(std::ptr::from_ref(shared) as usize))
    }
}

impl Drop for InHandler {
    fn drop(&mut self) {
        IN_HANDLER_OF.set(self.0);
    }
}

/// True if this thread is running one of `shared`'s handlers (its address
/// cannot be another's meanwhile: the run holds the scheduler's `Shared`).
pub(crate) fn in_handler_of(shared: &Shared) -> bool {
    IN_HANDLER_OF.get() == std::ptr::from_ref(shared) as usize
}

/// A claimed run handed to the executor (module doc).
pub(crate) struct RunGuard {
    shared: Arc<Shared>,
    fence: Fence,
    name: String,
    /// What to store if the guard is dropped without an outcome: a
    /// release until the run starts, a failed attempt after.
    if_dropped: Option<Finish>,
    /// The handler's side of the run, once it started: the end it stored
    /// in a transaction of its own, if it did (`completion.rs`).
    record: Option<Arc<RunRecord>>,
}

impl RunGuard {
    pub(crate) fn new(shared: Arc<Shared>, fence: Fence, name: String) -> Self {
        RunGuard {
            shared,
            fence,
            name,
            if_dropped: Some(Finish::Release),
            record: None,
        }
    }

    /// Runs `row`'s handler (on a worker) and reports its outcome: at once
    /// for a synchronous handler, when its future completes for an async
    /// one.
    pub(crate) fn run(mut self, row: Row, handler: &Registered) {
        let shared = Arc::clone(&self.shared);
        let now = shared.now_micros();
        // From here on, an unwinding run counts as a failed attempt.
        self.if_dropped = Some(failed(
            &shared,
            &row,
            now,
            JobError::retry("the run panicked outside its handler (a panic payload's drop, say)"),
        ));
        if too_late(&row, now) {
            let finish = skip(&shared, &row, now);
            self.complete(finish, None, true);
            return;
        }
        let success = {
            let shared = Arc::clone(&shared);
            move |row: &Row| {
                let finish = finish_of(&shared, row, Ok(()));
                let record = shared.keeps_runs();
                let keep = shared.config.keep_runs;
                (finish, record.then(|| (shared.now_micros(), keep)))
            }
        };
        let record = RunRecord::new(shared.owner.id.clone(), self.fence.clone(), success);
        self.record = Some(Arc::clone(&record));
        match handler {
            Registered::Sync(handler) => {
                let started = Instant::now();
                let context = JobContext::borrowed(&row, record);
                let outcome = {
                    let _in_handler = InHandler::enter(&shared);
                    catching(|| handler(&context))
                };
                let finish = finish_of(&shared, &row, outcome);
                self.complete(finish, Some(started.elapsed()), false);
            }
            Registered::Async { spawn, handler } => self.spawn(row, record, &**spawn, handler),
        }
    }

    /// An async handler's run: its future, on `spawn`'s runtime, reports
    /// the outcome when it completes (`AsyncRun`).
    fn spawn(
        mut self,
        row: Row,
        record: Arc<RunRecord>,
        spawn: &dyn Spawn,
        handler: &AsyncHandler,
    ) {
        let row = Arc::new(row);
        let started = Instant::now();
        let made = {
            let _in_handler = InHandler::enter(&self.shared);
            catch_unwind(AssertUnwindSafe(|| {
                handler(JobContext::shared(Arc::clone(&row), record))
            }))
        };
        let future = match made {
            Ok(future) => future,
            Err(payload) => {
                let outcome = Err(panicked(payload));
                let finish = finish_of(&self.shared, &row, outcome);
                self.complete(finish, Some(started.elapsed()), false);
                return;
            }
        };
        // Dropped unfinished (its runtime shut down, or cancelled it): a
        // failed attempt.
        self.if_dropped = Some(failed(
            &self.shared,
            &row,
            self.shared.now_micros(),
            JobError::retry("the run's future was dropped before it completed"),
        ));
        let run = AsyncRun {
            future: Some(future),
            guard: Some(self),
            row,
            started,
            polled: false,
        };
        // A spawner that panics drops the run as it unwinds: its guard
        // reports the failed attempt.
        drop_caught(|| spawn.spawn(Box::pin(run)));
    }

    fn complete(&mut self, finish: Finish, ran_for: Option<Duration>, skipped: bool) {
        self.if_dropped = None;
        self.report(finish, ran_for, skipped);
    }

    fn report(&mut self, finish: Finish, ran_for: Option<Duration>, skipped: bool) {
        let busy = self.shared.busy();
        let completed = self.record.take().and_then(|r| r.completed());
        self.shared.ended(Ended {
            fence: self.fence.clone(),
            name: std::mem::take(&mut self.name),
            finish,
            ran_for,
            skipped,
            completed,
            busy,
        });
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if let Some(finish) = self.if_dropped.take() {
            self.report(finish, None, false);
        }
    }
}

/// A handler as registered: called on a worker, or returning a future that
/// a runtime polls.
pub(crate) enum Registered {
    Sync(Box<Handler>),
    Async {
        spawn: Arc<dyn Spawn>,
        handler: Box<AsyncHandler>,
    },
}

/// `f`'s outcome, a panic a retryable failure.
fn catching(f: impl FnOnce() -> Result<(), JobError>) -> Result<(), JobError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| Err(panicked(payload)))
}

/// Runs `f` (user code: a drop, a spawner), its panic caught and its
/// payload dropped as a [`PanicPayload`], whose own drop's panic is caught
/// too: a payload that panics again must not unwind into the run's
/// report.
fn drop_caught(f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        drop(PanicPayload::from(payload));
    }
}

/// The failure of a handler that panicked with `payload`.
fn panicked(payload: Box<dyn std::any::Any + Send>) -> JobError {
    // Dropping the payload may panic: `PanicPayload` catches it.
    let payload = PanicPayload::from(payload);
    JobError::retry(format!(
        "the handler panicked: {}",
        payload.message().unwrap_or("a non-text payload")
    ))
}

/// An async handler's run, as its runtime polls it: the handler's future,
/// then the outcome reported through the guard. Dropped unfinished, it
/// drops the future (user code: a panic of its drop is caught) and reports
/// a failed attempt, its back-off counted from then.
struct AsyncRun {
    future: Option<HandlerFuture>,
    guard: Option<RunGuard>,
    row: Arc<Row>,
    started: Instant,
    /// The runtime polled it at least once.
    polled: bool,
}

impl Drop for AsyncRun {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else {
            return;
        };
        let future = self.future.take();
        drop_caught(|| drop(future));
        let why = if self.polled {
            "the run's future was dropped before it completed (its runtime cancelled it)"
        } else {
            "the run's future was dropped before it completed, never polled (its runtime shut down)"
        };
        let now = guard.shared.now_micros();
        let finish = failed(&guard.shared, &self.row, now, JobError::retry(why));
        guard.complete(finish, Some(self.started.elapsed()), false);
    }
}

impl Future for AsyncRun {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let (Some(future), Some(guard)) = (this.future.as_mut(), this.guard.as_ref()) else {
            return Poll::Ready(());
        };
        this.polled = true;
        let polled = {
            let _in_handler = InHandler::enter(&guard.shared);
            catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)))
        };
        let outcome = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(outcome)) => outcome,
            Err(payload) => Err(panicked(payload)),
        };
        // Done with: dropped now (user code, its panic caught), before the
        // outcome is reported.
        let done = this.future.take();
        drop_caught(|| drop(done));
        if let Some(mut guard) = this.guard.take() {
            let finish = finish_of(&guard.shared, &this.row, outcome);
            guard.complete(finish, Some(this.started.elapsed()), false);
        }
        Poll::Ready(())
    }
}

/// True if `row`'s occurrence is later than its catch-up window.
fn too_late(row: &Row, now: Micros) -> bool {
    let late = now.saturating_sub(row.next_fire);
    row.catch_up.is_some_and(|window| late > window)
}

/// The finish of an occurrence skipped as too late: the job goes on to its
/// next occurrence after now (on its schedule, as `MissedRuns::Skip` goes
/// on), or is done.
fn skip(shared: &Shared, row: &Row, now: Micros) -> Finish {
    went_on(shared, row, now, MissedRuns::Skip)
}

/// The fire time of `row`'s occurrence after the one that just ended
/// (ran, was skipped or failed for the last time), now, by `missed`:
/// from the occurrence's due time, never a retry's, so a retry never
/// moves the schedule. `None` if the job has no more.
fn next_occurrence(row: &Row, now: Micros, missed: MissedRuns) -> Result<Option<Micros>, String> {
    Recurrence::decode(&row.recurrence)
        .and_then(|r| r.after_run(row.occurrence, now, missed))
        .map_err(|e| stored_error(&e.to_string()))
}

/// The finish of `row`'s occurrence that ended well (ran, or was skipped),
/// now: the job goes on to its next occurrence by `missed`, or is done.
fn went_on(shared: &Shared, row: &Row, now: Micros, missed: MissedRuns) -> Finish {
    match next_occurrence(row, now, missed) {
        Ok(Some(next_fire)) => Finish::Next { next_fire },
        Ok(None) => Finish::Done {
            at: now,
            keep: !shared.config.keep_done.is_zero(),
        },
        Err(error) => Finish::Dead { error, at: now },
    }
}

/// The finish of a run of `row` that ended with `outcome`, now.
fn finish_of(shared: &Shared, row: &Row, outcome: Result<(), JobError>) -> Finish {
    let now = shared.now_micros();
    match outcome {
        Ok(()) => went_on(shared, row, now, row.missed),
        Err(error) => failed(shared, row, now, error),
    }
}

/// The most bytes of a failure's message that are stored.
const MAX_ERROR: usize = 16 * 1024;

/// A failure's message as stored: a NUL byte (which PostgreSQL's `text`
/// cannot hold) as U+FFFD, and at most [`MAX_ERROR`] bytes, so that no
/// handler's message can keep an outcome from being stored.
fn stored_error(message: &str) -> String {
    let mut end = message.len().min(MAX_ERROR);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let mut stored = message[..end].replace('\0', "\u{FFFD}");
    if end < message.len() {
        stored.push('…');
    }
    stored
}

/// The finish of a failed attempt: a retry after the back-off, or dead
/// (permanent, or the last attempt): for a recurring job, only this
/// occurrence is.
fn failed(shared: &Shared, row: &Row, now: Micros, error: JobError) -> Finish {
    if error.is_permanent() || row.attempt >= shared.config.max_attempts {
        return dead(row, now, stored_error(error.message()));
    }
    // A clone draws its own jitter (the config's back-off is a template).
    let delay = shared
        .config
        .retry
        .clone()
        .delay_after(u64::from(row.attempt));
    Finish::Retry {
        next_fire: time::add(now, time::duration_micros_saturating(delay)),
        error: stored_error(error.message()),
        uncount: false,
    }
}

/// The finish of `row`'s occurrence that failed for the last time, now:
/// a recurring job goes on to its next occurrence (by its missed-runs
/// policy, as after a run), a one-shot job, or one with no occurrence
/// left, is dead.
fn dead(row: &Row, now: Micros, error: String) -> Finish {
    match next_occurrence(row, now, row.missed) {
        Ok(Some(next_fire)) => Finish::DeadOccurrence { next_fire, error },
        Ok(None) => Finish::Dead { error, at: now },
        // Its schedule cannot go on either: the job is dead, saying both.
        Err(schedule) => Finish::Dead {
            error: stored_error(&format!("{error}; its schedule: {schedule}")),
            at: now,
        },
    }
}

/// The finish of a claimed run that cannot start here: past its attempts
/// (its earlier runs never ended: their processes died), or its handler
/// is not registered.
pub(crate) fn unrunnable(shared: &Shared, row: &Row, now: Micros) -> Option<Finish> {
    let max = shared.config.max_attempts;
    if row.attempt > max {
        let error = format!(
            "attempt {} of at most {max}: the earlier attempts never ended (their \
             processes died while running the handler: an abort, the OOM killer, \
             a kill)",
            row.attempt
        );
        return Some(dead(row, now, error));
    }
    if shared.handler(&row.name).is_none() {
        let wait = time::duration_micros_saturating(shared.config.unhandled_wait);
        return Some(Finish::Retry {
            next_fire: time::add(now, wait),
            error: stored_error(&format!("no handler is registered for {:?} here", row.name)),
            uncount: true,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_error_has_no_nul_and_a_bounded_length() {
        assert_eq!(stored_error("a\0b"), "a\u{FFFD}b");
        let long = "é".repeat(MAX_ERROR);
        let stored = stored_error(&long);
        assert!(stored.len() <= MAX_ERROR + '…'.len_utf8());
        assert!(stored.ends_with('…'));
    }
}

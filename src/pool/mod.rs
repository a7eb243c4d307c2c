//! What an executor's handles and its worker threads share: the queues, the
//! sleep protocol, the lifecycle, the counters and the user's hooks; and the
//! operations on them that are not a worker's own loop (submitting,
//! shutting down, draining, reporting).
//!
//! # Queues
//!
//! One crossbeam-deque `Injector` takes submissions from threads outside the
//! pool; each worker owns a LIFO `Worker` deque that takes the submissions
//! made from inside its tasks, and the others steal from it through its
//! `Stealer`. After 61 jobs in a row from its own deque, a worker takes one
//! from the injector, else its own oldest through its own `Stealer`
//! (`worker.rs`: a job that re-submits itself would starve both).
//!
//! # Submitting without losing a task to a concurrent shutdown
//!
//! * From outside: the submission is admitted by the [`Lifecycle`] (one RMW
//!   that also reads the state), pushes, makes the work known to the
//!   sleepers, and leaves. `shutdown_now` waits for admitted submissions to
//!   leave before it drains, so it sees all of their jobs.
//! * From a worker (the hot path of task trees): no shared counter is
//!   touched. The job is pushed to the worker's own deque first; then, after
//!   the `SeqCst` fence that making work known needs anyway, the state is
//!   read. `shutdown_now` moves the state and then fences before draining.
//!   Of the two fences one comes first, so either the drain sees the job, or
//!   the pusher sees the new state. A pusher that sees the pool shut down
//!   pops its deque: it gets its own job back (the owner pops the newest
//!   end, thieves and the drain take the oldest, so the newest is its own
//!   unless it was taken, and then everything older was taken too; the
//!   owner's own look at its oldest runs between jobs, never between its
//!   push and this pop) and
//!   rejects it; or it gets nothing, because a worker or the drain took the
//!   job, which is then accepted: it runs, or `shutdown_now` returns it.
//!
//! # The pool's own threads
//!
//! Its workers and its timer thread mark themselves in a thread-local
//! ([`Pool::is_own_thread`]) for as long as they run, so that what cannot
//! succeed on them is refused at once instead of waiting for the calling
//! thread itself: `await_termination`, and the join of the threads when the
//! last executor handle is dropped there (see `executor.rs`).

use std::cell::Cell;
use std::ptr;

use crate::sync::deque::{Injector, Steal, Stealer, Worker};
use crate::sync::{fence, Arc, AtomicBool, AtomicU64, CachePadded, CellArc, Ordering, StdArc};
use crate::task::recurring::Body;
use crate::task::{delayed, trace};
use crate::task::{
    Alarm, DeadlineTask, Delayed, Job, Label, PanicPayload, RecurringTask, ScheduledTask, TaskCell,
    TaskContext, WallTask,
};
use crate::time::manual::{Driven, Jobs};
use crate::time::Clock;
use crate::time::Nanos;
use crate::timer::driver::sweep::drop_swept;
use crate::timer::driver::{self, Timer, Workers};
use crate::trigger::Trigger;

pub(crate) mod hooks;
pub(crate) mod idle;
pub(crate) mod job_count;
pub(crate) mod lateness;
pub(crate) mod lifecycle;
pub(crate) mod metrics;
pub(crate) mod pace;
pub(crate) mod stats;
pub(crate) mod submit_error;
pub(crate) mod worker;

use hooks::Hooks;
use idle::Idle;
use job_count::JobCount;
use lifecycle::Lifecycle;
pub use metrics::{Lateness, Metrics};
use stats::WorkerStats;
pub use submit_error::{SubmitError, SubmitErrorKind};
use worker::WorkerContext;

crate::sync::thread_local! {
    /// The pool whose worker or timer thread this is, or null (see the
    /// module doc). Only ever compared, never dereferenced.
    static OWN_POOL: Cell<*const Pool> = const { Cell::new(ptr::null()) };
}

/// Marks the calling thread as one of a pool's own threads until dropped
/// (see [`Pool::own_thread`]).
#[derive(Debug)]
pub(crate) struct OwnThread(());

impl Drop for OwnThread {
    fn drop(&mut self) {
        OWN_POOL.with(|own| own.set(ptr::null()));
    }
}

/// The state shared by an executor's handles and its workers.
#[derive(Debug)]
pub(crate) struct Pool {
    injector: Injector<Job>,
    stealers: Box<[Stealer<Job>]>,
    idle: Idle,
    pub(crate) lifecycle: Lifecycle,
    pub(crate) timer: Timer,
    stats: Box<[CachePadded<WorkerStats>]>,
    hooks: Hooks,
    /// On a manual clock, the jobs queued or running (see `job_count.rs`).
    job_count: Option<JobCount>,
    /// Submissions refused, and time-outs that won (for `metrics()`: rare
    /// events, counted in shared words).
    pub(crate) rejected: AtomicU64,
    pub(crate) timed_out: AtomicU64,
    /// `shutdown_now` has taken the queued jobs out: what is queued after
    /// that, once the workers have exited, is stranded (`give_up_stranded`).
    drained: AtomicBool,
    /// Fixed-rate runs skipped and delayed by `MissedRuns` (late runs
    /// only: rare).
    pub(crate) skipped_runs: AtomicU64,
    pub(crate) delayed_runs: AtomicU64,
}

impl Pool {
    /// A pool for `workers` workers, and the deques those workers will own
    /// (index i goes to worker i).
    pub(crate) fn new(workers: usize, hooks: Hooks, mut timer: Timer) -> (Pool, Vec<Worker<Job>>) {
        let idle = Idle::new(workers);
        timer.attach_workers(idle.parkers());
        let deques: Vec<Worker<Job>> = (0..workers).map(|_| Worker::new_lifo()).collect();
        let job_count = timer
            .clock
            .manual_state()
            .map(|clock| JobCount::new(StdArc::clone(clock)));
        let pool = Pool {
            injector: Injector::new(),
            stealers: deques.iter().map(Worker::stealer).collect(),
            idle,
            lifecycle: Lifecycle::new(workers),
            timer,
            stats: (0..workers).map(|_| CachePadded::default()).collect(),
            hooks,
            job_count,
            rejected: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            drained: AtomicBool::new(false),
            skipped_runs: AtomicU64::new(0),
            delayed_runs: AtomicU64::new(0),
        };
        (pool, deques)
    }

    /// A job is about to be pushed on a queue (counted on a manual clock).
    #[inline]
    pub(crate) fn job_pushed(&self) {
        if let Some(count) = &self.job_count {
            count.pushed();
        }
    }

    /// `n` jobs ran, or left the queues unrun (see `job_count.rs`).
    #[inline]
    pub(crate) fn jobs_ended(&self, n: usize) {
        if let Some(count) = &self.job_count {
            count.ended(n);
        }
    }

    pub(crate) fn workers(&self) -> usize {
        self.stealers.len()
    }

    /// The user's hooks (the thread hooks; `on_panic` is reached through
    /// the pool's [`TaskContext`]).
    pub(crate) fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    /// Marks the calling thread, a worker or the timer thread of this pool,
    /// as one of its own until the guard is dropped.
    pub(crate) fn own_thread(&self) -> OwnThread {
        OWN_POOL.with(|own| own.set(self));
        OwnThread(())
    }

    /// True if the calling thread is a worker or the timer thread of this
    /// pool.
    pub(crate) fn is_own_thread(&self) -> bool {
        OWN_POOL.with(|own| ptr::eq(own.get(), self))
    }

    pub(crate) fn stats(&self, index: usize) -> &WorkerStats {
        &self.stats[index]
    }

    /// Queues `f` as a task and returns its cell (for its handle).
    /// `worker` is the calling thread's worker context if it is a worker
    /// of this pool.
    pub(crate) fn submit<F, T, L>(
        &self,
        worker: Option<&WorkerContext>,
        f: F,
        label: L,
    ) -> Result<CellArc<TaskCell<F, T, L>>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
        L: Label,
    {
        let (cell, queued) = CellArc::pair(TaskCell::labelled(f, label));
        match self.push(worker, Job::task(queued)) {
            Ok(()) => Ok(cell),
            // Take the closure back before the refused job is given up
            // (that would cancel the task and drop the closure).
            Err(job) => {
                let f = cell
                    .reclaim()
                    .expect("a refused task without a time-out never ran");
                Err(self.give_back(f, job))
            }
        }
    }

    /// Queues `f` as [`submit`](Self::submit) does, with a time-out at
    /// `deadline` (nanoseconds on the timer's clock) handed to the timer
    /// in the same admission (see `task/deadline.rs`); `fallback` gives
    /// the handle's value if the time-out wins.
    #[allow(clippy::type_complexity)]
    pub(crate) fn submit_with_deadline<F, T, G, L>(
        &self,
        worker: Option<&WorkerContext>,
        f: F,
        deadline: Nanos,
        fallback: Option<G>,
        label: L,
    ) -> Result<CellArc<DeadlineTask<F, T, G, L>>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
        G: FnOnce() -> T + Send + 'static,
        L: Label,
    {
        if !self.enter() {
            return Err(self.refuse(f, SubmitErrorKind::Shutdown));
        }
        let cell = DeadlineTask::new(f, deadline, fallback, label);
        // Counted as the timer's, whatever `max_scheduled_tasks`: it is a
        // time-out, not a scheduled task.
        self.timer.reinsert(delayed::erase(cell.timeout_entry()));
        let pushed = self.push(worker, Job::task(CellArc::clone(&cell)));
        self.leave();
        match pushed {
            Ok(()) => Ok(cell),
            Err(job) => match cell.reclaim() {
                Some(f) => {
                    // Its time-out entry is dead now: swept out.
                    self.note_cancelled();
                    Err(self.give_back(f, job))
                }
                None => {
                    // Its time-out (due at once) fell due between the
                    // insert above and the refusal, and settled it: the
                    // closure is dropped, and the handle says so.
                    job.cancel(self);
                    Ok(cell)
                }
            },
        }
    }

    /// Queues `f` as a task without a handle. `worker` as for `submit`.
    #[inline]
    pub(crate) fn execute<F>(
        &self,
        worker: Option<&WorkerContext>,
        f: F,
    ) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.push(worker, Job::detached(f))
            .map_err(|job| match job.into_detached::<F>() {
                Some(f) => self.refuse(f, SubmitErrorKind::Shutdown),
                None => unreachable!("a refused job is the one pushed"),
            })
    }

    /// Queues `job` (into `worker`'s own deque if given), or gives it back
    /// if the pool no longer accepts work.
    #[inline]
    fn push(&self, worker: Option<&WorkerContext>, job: Job) -> Result<(), Job> {
        match worker {
            Some(worker) => {
                debug_assert!(worker.belongs_to(self));
                self.push_local(&worker.local, job)
            }
            None => self.push_external(job),
        }
    }

    /// From a thread outside the pool (module doc).
    #[inline]
    fn push_external(&self, job: Job) -> Result<(), Job> {
        if !self.enter() {
            return Err(job);
        }
        self.job_pushed();
        self.injector.push(job);
        self.idle.notify_work();
        self.leave();
        Ok(())
    }

    /// Admits an outside submission (see [`Lifecycle::enter`]). A refused
    /// one was counted in flight for a moment, and an idle worker that saw
    /// the pool shut down and that count may have gone to sleep until it
    /// drops: the refusal wakes the workers, as a `leave` after a shutdown
    /// does.
    fn enter(&self) -> bool {
        if self.lifecycle.enter() {
            return true;
        }
        self.idle.wake_all();
        false
    }

    /// Ends an admitted outside submission; if the pool was shut down
    /// meanwhile, wakes the workers and the timer thread, which may be
    /// waiting for the in-flight count to drop before they exit.
    fn leave(&self) {
        if self.lifecycle.leave() {
            self.idle.wake_all();
            self.timer.wake();
        }
    }

    /// Schedules `f` to run at `deadline` (nanoseconds on the timer's
    /// clock), `now` being the time the caller read (one clock read per
    /// submission: it costs as much as the rest of the insert). A deadline
    /// at or before `now` goes straight to the workers. Returns the task's
    /// cell (for its handle).
    pub(crate) fn schedule<F, T, L>(
        &self,
        f: F,
        now: Nanos,
        deadline: Nanos,
        label: L,
    ) -> Result<CellArc<ScheduledTask<F, T, L>>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
        L: Label,
    {
        if !self.enter() {
            return Err(self.refuse(f, SubmitErrorKind::Shutdown));
        }
        if deadline <= now {
            let (cell, queued) = CellArc::pair(ScheduledTask::labelled(f, deadline, label));
            self.push_due(Job::task(queued));
            self.leave();
            return Ok(cell);
        }
        let mut swept = Vec::new();
        if !self.timer.reserve(&mut swept) {
            self.leave();
            drop_swept(swept, self);
            return Err(self.refuse(f, SubmitErrorKind::TooManyScheduled));
        }
        let (cell, entry) = CellArc::pair(ScheduledTask::labelled(f, deadline, label));
        self.timer.insert_reserved(delayed::erase(entry));
        self.leave();
        drop_swept(swept, self);
        Ok(cell)
    }

    /// Hands a timer future's alarm to the timer, if the pool still runs
    /// (false after `shutdown`: the future then ends at once, as it has no
    /// timer left to wait for). It is counted among the tasks the timer
    /// holds, but not against `max_scheduled_tasks`, which counts tasks.
    pub(crate) fn set_alarm(&self, alarm: CellArc<Alarm>) -> bool {
        if !self.enter() {
            return false;
        }
        self.timer.reinsert(delayed::erase(alarm));
        self.leave();
        true
    }

    /// A task whose job the queues refused after its closure `f` was taken
    /// back out of its cell: the job is given up, the closure refused.
    fn give_back<F>(&self, f: F, job: Job) -> SubmitError<F> {
        job.cancel(self);
        self.refuse(f, SubmitErrorKind::Shutdown)
    }

    /// A refused submission: counted (`metrics()`), and `f` given back.
    fn refuse<F>(&self, f: F, kind: SubmitErrorKind) -> SubmitError<F> {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        trace::rejected(&kind);
        SubmitError::new(f, kind)
    }

    /// Schedules the recurring task `body` on `trigger`, which decides its
    /// first run now, and returns its cell (for its handle). `periodic`
    /// tasks are dropped at shutdown unless the pool keeps them; the others
    /// (a one-shot task at a wall time) are kept as delayed tasks are. A
    /// trigger that ends the task at once (or panics) makes a cell that is
    /// already final and inserts nothing.
    ///
    /// The trigger is user code: it is asked before the submission's
    /// admission, which `shutdown_now` waits for (a trigger that calls it
    /// must not run inside one).
    pub(crate) fn schedule_recurring<B, G, L>(
        &self,
        body: B,
        trigger: G,
        periodic: bool,
        label: L,
    ) -> Result<CellArc<RecurringTask<B, G, L>>, SubmitError<B>>
    where
        B: Body,
        G: Trigger,
        L: Label,
    {
        if self.lifecycle.is_shut_down() {
            return Err(self.refuse(body, SubmitErrorKind::Shutdown));
        }
        let cell = CellArc::new(RecurringTask::new(body, trigger, periodic, label));
        let Some(placed) = RecurringTask::first(&cell, self) else {
            return Ok(cell);
        };
        let mut swept = Vec::new();
        let refused = if !self.enter() {
            SubmitErrorKind::Shutdown
        } else if !self.timer.reserve(&mut swept) {
            self.leave();
            drop_swept(swept, self);
            SubmitErrorKind::TooManyScheduled
        } else {
            self.timer.insert_reserved(delayed::erase(cell.clone()));
            if let Some(offset) = placed.wall_offset {
                self.timer
                    .wall_placed(self, delayed::erase_wall(cell.clone()), offset);
            }
            self.leave();
            drop_swept(swept, self);
            return Ok(cell);
        };
        Err(self.refuse(RecurringTask::refuse(&cell, self), refused))
    }

    /// Admits the re-arming of a periodic task after a run (false: stop it,
    /// the pool was shut down and keeps no periodic task, or stopped). An
    /// admitted one calls [`rearm_done`](Self::rearm_done) after it re-armed.
    fn rearm_admitted(&self, periodic: bool) -> bool {
        if !self.lifecycle.enter_rearm() {
            return false;
        }
        if periodic && self.lifecycle.is_shut_down() && !self.timer.keeps_periodic_on_shutdown() {
            self.leave();
            return false;
        }
        true
    }

    /// See [`rearm_admitted`](Self::rearm_admitted).
    fn rearm_done(&self) {
        self.leave();
    }

    /// A task the timer found due: onto the injector, past the admission
    /// (it was admitted when it was scheduled).
    pub(crate) fn push_due(&self, job: Job) {
        self.push_due_quietly(job);
        self.idle.notify_work();
    }

    /// [`push_due`](Self::push_due) without the wake-up: the caller calls
    /// `sleep.notify_work()` after its last push.
    pub(crate) fn push_due_quietly(&self, job: Job) {
        self.job_pushed();
        self.injector.push(job);
    }

    /// From one of this pool's workers, into its own deque (module doc).
    #[inline]
    fn push_local(&self, local: &Worker<Job>, job: Job) -> Result<(), Job> {
        if !self.lifecycle.is_running() {
            return Err(job);
        }
        self.job_pushed();
        local.push(job);
        // The fence in notify_work orders the push before the state read.
        self.idle.notify_work();
        if !self.lifecycle.is_running() {
            if let Some(job) = local.pop() {
                self.jobs_ended(1);
                return Err(job);
            }
        }
        Ok(())
    }

    /// True if any queue holds a job.
    pub(crate) fn has_visible_work(&self) -> bool {
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// True if an idle worker may exit: after `shutdown_now`; or after
    /// `shutdown` once no outside submission is in flight, the timer holds
    /// no task that is still to run, and no queue holds a job.
    pub(crate) fn idle_worker_may_exit(&self) -> bool {
        self.lifecycle.is_stopped()
            || (self.lifecycle.idle_worker_may_exit()
                && self.timer.pending() == 0
                && !self.has_visible_work())
    }

    /// Stops accepting work; queued work still runs.
    pub(crate) fn shutdown(&self) {
        if self.lifecycle.shutdown() {
            self.idle.wake_all();
            self.timer.wake();
        }
    }

    /// Stops accepting work and takes every queued job out (module doc).
    pub(crate) fn shutdown_now(&self) -> Vec<Job> {
        self.lifecycle.stop();
        fence(Ordering::SeqCst);
        self.idle.wake_all();
        self.timer.schedulers_apply();
        self.lifecycle.wait_no_submissions_in_flight();
        // The timer first: it pushes due tasks on the injector under the
        // lock that its drain takes (see `timer::driver`).
        let mut drained = self.timer.drain(self);
        self.timer.wake();
        let from_the_timer = drained.len();
        drain(|| self.injector.steal(), &mut drained);
        for stealer in self.stealers.iter() {
            drain(|| stealer.steal(), &mut drained);
        }
        // Each task once: a wall check, or the entry a task placed again
        // left behind, is no task to return (`Job::is_users`). They are
        // given up here, a panic of what they drop reported.
        let queued = drained.len() - from_the_timer;
        let (tasks, not_tasks): (Vec<Job>, Vec<Job>) = drained.into_iter().partition(Job::is_users);
        for job in not_tasks {
            job.cancel(self);
        }
        // Those from the queues leave them unrun (the timer's were never
        // queued).
        self.jobs_ended(queued);
        self.drained.store(true, Ordering::SeqCst);
        tasks
    }

    /// Gives up the jobs left in the queues of a pool whose workers have
    /// all exited (a wall check or a due task handed over as the last one
    /// left, or after `shutdown_now`): nobody will run them. As `Drop`
    /// would, now, so that `metrics` counts none queued and a manual
    /// clock does not wait for them (`Driven`).
    ///
    /// Not while a `shutdown_now` may still take them out to return them
    /// (the workers exit as it starts): only once it has (`drained`).
    pub(crate) fn give_up_stranded(&self) {
        if !self.lifecycle.is_terminated()
            || (self.lifecycle.is_stopped() && !self.drained.load(Ordering::SeqCst))
        {
            return;
        }
        let mut left = Vec::new();
        drain(|| self.injector.steal(), &mut left);
        for stealer in self.stealers.iter() {
            drain(|| stealer.steal(), &mut left);
        }
        let n = left.len();
        for job in left {
            job.cancel(self);
        }
        self.jobs_ended(n);
    }

    /// A worker exited: if it was the last, an `advance` waiting for this
    /// pool's jobs looks again (a terminated pool takes no part: `Driven`).
    pub(crate) fn worker_exited(&self) {
        self.lifecycle.worker_exited();
        if let Some(count) = &self.job_count {
            if self.lifecycle.is_terminated() {
                count.notify_clock();
            }
        }
    }

    /// Takes the jobs queued on the injector, for a loom model that runs
    /// them by hand (no worker thread).
    #[cfg(all(test, loom))]
    pub(crate) fn take_queued(&self) -> Vec<Job> {
        let mut taken = Vec::new();
        drain(|| self.injector.steal(), &mut taken);
        taken
    }

    /// Jobs in the queues right now (a snapshot): none once every worker
    /// has exited (those left will never run, and are given up).
    pub(crate) fn queued_jobs(&self) -> usize {
        if self.lifecycle.is_terminated() {
            return 0;
        }
        self.injector.len() + self.stealers.iter().map(Stealer::len).sum::<usize>()
    }

    /// Every worker's counters.
    pub(crate) fn worker_stats(&self) -> impl Iterator<Item = &WorkerStats> {
        self.stats.iter().map(|stats| &**stats)
    }
}

/// What the pool's tasks need of it (see `task/context.rs`).
impl TaskContext for Pool {
    fn show_panic(&self, payload: &PanicPayload) {
        trace::panicked(payload);
        self.hooks.show_panic(payload);
    }

    fn clock(&self) -> &Clock {
        &self.timer.clock
    }

    /// The closure of a task that is not re-armed is dropped by the task
    /// after this returns, outside the re-arm's admission: `shutdown_now`
    /// waits for admitted re-arms, so a destructor that calls it must not
    /// run inside one.
    fn rearm(
        &self,
        entry: CellArc<dyn Delayed>,
        periodic: bool,
        reset: &mut dyn FnMut() -> bool,
    ) -> bool {
        if !self.rearm_admitted(periodic) {
            return false;
        }
        let reset = reset();
        if reset {
            self.timer.reinsert(entry);
        }
        self.rearm_done();
        reset
    }

    fn watch_wall(&self, task: CellArc<dyn WallTask>) {
        self.timer.watch_wall(task);
    }

    fn wall_placed(&self, task: CellArc<dyn WallTask>, offset: i128) {
        self.timer.wall_placed(self, task, offset);
    }

    fn note_cancelled(&self) {
        self.timer.note_cancelled();
    }

    /// Into the lateness histogram of the worker running the task (a clock
    /// read, for the runs it samples: `lateness.rs`); a run by hand off the
    /// pool's workers is not recorded.
    fn started_late(&self, deadline: Nanos) {
        worker::with_current(|worker| {
            if let Some(worker) = worker.filter(|w| w.belongs_to(self)) {
                let shard = &self.stats(worker.index).lateness;
                if let Some(weight) = shard.sample() {
                    let late = self.timer.clock.now().saturating_sub(deadline);
                    shard.record(late, weight);
                }
            }
        });
    }

    fn note_timed_out(&self) {
        self.timed_out.fetch_add(1, Ordering::Relaxed);
    }

    fn note_missed(&self, skipped: u64, delayed: u64) {
        self.skipped_runs.fetch_add(skipped, Ordering::Relaxed);
        self.delayed_runs.fetch_add(delayed, Ordering::Relaxed);
    }
}

/// What the timer thread needs of the pool (see `timer/driver`).
impl Workers for Pool {
    fn timer(&self) -> &Timer {
        &self.timer
    }

    fn hand_over(&self, job: Job) {
        self.push_due_quietly(job);
    }

    fn notify(&self) {
        self.idle.notify_work();
    }

    fn wake_all(&self) {
        self.idle.wake_all();
    }

    fn is_stopped(&self) -> bool {
        self.lifecycle.is_stopped()
    }

    fn is_shut_down(&self) -> bool {
        self.lifecycle.is_shut_down()
    }

    fn all_exited(&self) -> bool {
        self.lifecycle.is_terminated()
    }

    fn give_up_stranded(&self) {
        Pool::give_up_stranded(self);
    }

    fn some_worker_sleeps(&self) -> bool {
        self.idle.some_worker_sleeps()
    }

    fn ringing(&self, n: usize) {
        if let Some(count) = &self.job_count {
            count.ringing(n);
        }
    }

    fn rung(&self, n: usize) {
        self.jobs_ended(n);
    }
}

/// What a manual clock's `advance` needs of the pool (see
/// `time/manual.rs`); only pools on a manual clock are attached to one.
/// A pool whose workers have all exited takes no part in `advance`: its
/// jobs never run, so nothing of it is waited for, and the other pools on
/// the clock keep their time. (`jobs` reads termination under the lock
/// `advance` waits with, and the last worker notifies under it after it
/// is counted out: `worker_exited`.)
impl Driven for Pool {
    fn hand_over_due(&self, now: Nanos) {
        if self.lifecycle.is_terminated() {
            self.give_up_stranded();
        } else {
            self.timer.hand_over_at(self, now);
        }
    }

    fn jobs(&self) -> Jobs {
        if self.lifecycle.is_terminated() {
            return Jobs::default();
        }
        self.job_count
            .as_ref()
            .map_or(Jobs::default(), JobCount::jobs)
    }

    fn timer_idle(&self, now: Nanos) -> bool {
        self.lifecycle.is_terminated() || self.timer.idle_at(now)
    }

    fn next_deadline(&self) -> Option<Nanos> {
        if self.lifecycle.is_terminated() {
            return None;
        }
        self.timer.next_deadline()
    }

    fn is_own_thread(&self) -> bool {
        Pool::is_own_thread(self)
    }
}

/// The body of the timer thread of `pool` (see `timer/driver`), marked as
/// one of the pool's own threads.
pub(crate) fn run_timer(pool: Arc<Pool>) {
    let _own = pool.own_thread();
    driver::run(&*pool);
}

impl Drop for Pool {
    /// Gives up the jobs still queued (none, unless a thread of the pool
    /// never started), reporting panics of their user code to the hooks.
    fn drop(&mut self) {
        let mut left = Vec::new();
        drain(|| self.injector.steal(), &mut left);
        for job in left {
            job.cancel(&*self);
        }
    }
}

/// Steals from one queue until it reports empty.
fn drain(mut steal: impl FnMut() -> Steal<Job>, into: &mut Vec<Job>) {
    loop {
        match steal() {
            Steal::Success(job) => into.push(job),
            Steal::Empty => return,
            Steal::Retry => continue,
        }
    }
}

/// loom models of submission vs shutdown (`RUSTFLAGS="--cfg loom"`, see
/// `loom-tests/README.md`), over a pool with one real worker thread
/// (`worker::run`) and no timer thread.
///
/// * `submit_vs_shutdown_now`: a thread outside the pool submits while the
///   main thread calls `shutdown_now`. Asserted: an accepted task either
///   ran or was returned by `shutdown_now` (exactly one of the two, never
///   lost, never both) and its handle says which; a refused one got its
///   closure back and neither ran nor was returned; the closure is dropped
///   exactly once; the worker exits.
/// * `submit_vs_shutdown`: the same with `shutdown`: an accepted task runs
///   before the worker exits (the in-flight count keeps the worker until
///   the push is visible); a refused one gets its closure back; the worker
///   exits (it is not left asleep: loom would report the deadlock). (A
///   regression test: a refused submission, counted in flight for a moment,
///   did not wake the workers, and an idle worker that read that count
///   slept for good: the pool never terminated.)
/// * `local_submit_vs_shutdown_now`: a task running on the worker submits a
///   subtask to its own deque (the path that counts nothing in flight and
///   re-checks the state after its push) and joins it, while the main
///   thread calls `shutdown_now`. Asserted as for `submit_vs_shutdown_now`,
///   for both tasks, and the join returns: after `shutdown_now` a joining
///   worker no longer runs queued work, so a subtask pushed after the drain
///   and not taken back would be waited for forever (loom: deadlock).
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::handle::TaskHandle;
    use crate::loom_model::support::{
        bare_pool, join_all, model, spawn_workers, submit, DropCounter,
    };
    use crate::sync::{thread, AtomicUsize};
    use crate::task::TaskError;

    /// A closure that counts its runs and holds a drop guard.
    fn counted(ran: &Arc<AtomicUsize>, drops: &DropCounter) -> impl FnOnce() -> u32 + Send {
        let (ran, guard) = (Arc::clone(ran), drops.guard());
        move || {
            let _guard = guard;
            ran.fetch_add(1, Ordering::SeqCst);
            7
        }
    }

    /// Submits from a new thread outside the pool: the handle if accepted,
    /// `None` if refused (after checking that the closure came back).
    fn submit_from_outside(
        pool: &Arc<Pool>,
        f: impl FnOnce() -> u32 + Send + 'static,
    ) -> thread::JoinHandle<Option<TaskHandle<u32>>> {
        let pool = Arc::clone(pool);
        thread::spawn(move || match submit(&pool, f) {
            Ok(handle) => Some(handle),
            Err(refused) => {
                assert_eq!(refused.kind(), SubmitErrorKind::Shutdown);
                drop(refused.into_inner());
                None
            }
        })
    }

    #[test]
    fn submit_vs_shutdown_now() {
        model("pool::submit_vs_shutdown_now", || {
            let (pool, deques) = bare_pool(1, Default::default());
            let workers = spawn_workers(&pool, deques);
            let (ran, drops) = (Arc::new(AtomicUsize::new(0)), DropCounter::new());
            let submitter = submit_from_outside(&pool, counted(&ran, &drops));
            let returned = pool.shutdown_now();
            let accepted = submitter.join().unwrap();
            join_all(workers);

            let ran = ran.load(Ordering::SeqCst);
            // Dropping a returned job cancels its task.
            let returned = {
                let n = returned.len();
                drop(returned);
                n
            };
            match accepted {
                Some(handle) => {
                    assert_eq!(ran + returned, 1, "ran {ran}, returned {returned}");
                    let result = handle.join();
                    assert!(matches!(
                        (ran, result),
                        (1, Ok(7)) | (0, Err(TaskError::Cancelled))
                    ));
                }
                None => assert_eq!((ran, returned), (0, 0)),
            }
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
        });
    }

    #[test]
    fn submit_vs_shutdown() {
        model("pool::submit_vs_shutdown", || {
            let (pool, deques) = bare_pool(1, Default::default());
            let workers = spawn_workers(&pool, deques);
            let (ran, drops) = (Arc::new(AtomicUsize::new(0)), DropCounter::new());
            let submitter = submit_from_outside(&pool, counted(&ran, &drops));
            pool.shutdown();
            let accepted = submitter.join().unwrap();
            join_all(workers);

            let ran = ran.load(Ordering::SeqCst);
            match accepted {
                Some(handle) => {
                    assert_eq!(ran, 1, "an accepted task runs before the worker exits");
                    assert_eq!(handle.join().ok(), Some(7));
                }
                None => assert_eq!(ran, 0),
            }
            assert!(!pool.has_visible_work());
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
        });
    }

    #[test]
    fn local_submit_vs_shutdown_now() {
        model("pool::local_submit_vs_shutdown_now", || {
            let (pool, deques) = bare_pool(1, Default::default());
            let (ran, drops) = (Arc::new(AtomicUsize::new(0)), DropCounter::new());
            let sub = counted(&ran, &drops);
            // The parent, queued before the worker starts: it submits the
            // subtask from the worker, to the worker's own deque, and joins
            // it.
            let parent = submit(&pool, move || match crate::current::submit(sub) {
                Ok(handle) => Some(handle.join()),
                Err(refused) => {
                    assert_eq!(refused.kind(), SubmitErrorKind::Shutdown);
                    drop(refused.into_inner());
                    None
                }
            })
            .expect("the pool is running");
            let workers = spawn_workers(&pool, deques);
            let returned = pool.shutdown_now();
            // Dropping a returned job cancels its task (and ends the
            // parent's join of it).
            let returned = {
                let n = returned.len();
                drop(returned);
                n
            };
            join_all(workers);

            let ran = ran.load(Ordering::SeqCst);
            match parent.join() {
                // The parent ran; the subtask ran, or was returned, or was
                // refused.
                Ok(Some(Ok(7))) => assert_eq!((ran, returned), (1, 0)),
                Ok(Some(Err(TaskError::Cancelled))) => assert_eq!((ran, returned), (0, 1)),
                Ok(None) => assert_eq!((ran, returned), (0, 0)),
                // The parent was returned (and dropped: cancelled).
                Err(TaskError::Cancelled) => assert_eq!((ran, returned), (0, 1)),
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(drops.drops(), 1, "the closure is dropped exactly once");
        });
    }
}

//! A worker thread: its main loop (take a job from its own deque, else from
//! the injector, else steal; spin briefly; sleep), the thread-local that lets
//! code running on it find its deque, and the wait of a task that joins
//! another task (it runs queued work meanwhile, so a join never deadlocks a
//! pool whose workers are all joining).

use std::cell::{Cell, RefCell};
use std::ptr;
use std::task::Waker;
use std::time::Instant;

use crate::sync::deque::{Steal, Worker};
use crate::sync::parker;
use crate::sync::{Arc, Backoff, StdArc};
use crate::task::{Header, Job, RunOutcome, TaskContext};
use crate::time::Nanos;
use crate::timer::driver::lead::{lead_turn, LeadTurn};
use crate::timer::driver::waiting::{Wait, Waiting};

use super::pace::Pace;
use super::Pool;

/// What a worker thread knows about itself.
pub(crate) struct WorkerContext {
    pub(crate) pool: Arc<Pool>,
    pub(crate) index: usize,
    pub(crate) local: Worker<Job>,
    /// How this worker waits for a deadline while it leads (the timer
    /// thread's policy: `timer/driver/waiting.rs`).
    waiting: RefCell<Waiting>,
    /// How long the due tasks it took while leading ran: whether its turns
    /// share them.
    pace: Pace,
    /// While it leads: the next deadline its last turn saw (0: it took due
    /// tasks, look again; `Nanos::MAX`: none, or it does not lead).
    lead_next: Cell<Nanos>,
    /// Jobs to take before it looks at the injector ahead of its own deque
    /// (`next_job`): 1 to [`INJECTOR_INTERVAL`].
    until_injector: Cell<u32>,
}

/// How many jobs in a row a worker's main loop takes from its own deque
/// before it looks at the injector ahead of it, and then at its own
/// oldest job. A job that re-submits itself keeps its worker's deque from
/// ever running dry; without this, work submitted from outside the pool
/// and due tasks the timer thread hands over (both on the injector) would
/// wait on that worker for as long as the chain lasts, and so would the
/// jobs submitted on that worker before the chain (the chain's link is
/// always the newest, and with one worker no thief takes the oldest).
/// tokio's workers check their global queue every 61 polls for the same
/// reason; a prime keeps the look out of step with periodic patterns of
/// work. More than a batch from the injector (32), so that a batch runs
/// out before the look (`injector_batch`). Not addressed, as in tokio: a
/// job left in another busy worker's deque waits for that worker, or for
/// a worker that runs dry and steals it.
const INJECTOR_INTERVAL: u32 = 61;

/// What a leading worker's turn gave it (`WorkerContext::turn`).
enum Turned {
    /// It does not lead (any more).
    Follow,
    /// It took due tasks: the first, to run (none if the turn only rang
    /// alarms).
    Took(Option<Job>),
    /// Nothing is due: `armed` is published (see `LeadTurn::Wait`).
    Wait { next: Option<Nanos>, held: usize },
}

/// What a worker's look at the timer decided (`WorkerContext::lead`).
enum Led {
    /// It does not lead: look for work as a follower.
    Follow,
    /// Look at the queues again (it took due tasks, or waited for time).
    Again,
    /// Run this job (stolen while it led).
    Run(Job),
}

crate::sync::thread_local! {
    /// The context of the worker running on this thread, or null. Set by
    /// [`run`] for exactly the time its context lives (see `with_current`).
    static CURRENT: Cell<*const WorkerContext> = const { Cell::new(ptr::null()) };
}

/// Calls `f` with the context of the worker running on the calling
/// thread, or with `None` on any other thread.
///
/// A plain pointer in a thread-local (rather than an `Rc` in a `RefCell`)
/// keeps this to one load on the hot path of every submission.
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&WorkerContext>) -> R) -> R {
    let current = CURRENT.with(Cell::get);
    // SAFETY: `current` is null, or it points to the `WorkerContext` that
    // `run` owns on this very thread: `run` stores the pointer after the
    // context is built and resets it to null (also on unwind, by a guard)
    // before the context is dropped; `f` runs within that time, on this
    // thread, and the reference cannot outlive the call (`R` cannot borrow
    // from it). The context is only ever used through shared references.
    f(unsafe { current.as_ref() })
}

impl WorkerContext {
    /// True if this worker belongs to `pool`.
    #[inline]
    pub(crate) fn belongs_to(&self, pool: &Pool) -> bool {
        ptr::eq(&*self.pool, pool)
    }
}

/// Resets the thread's current-worker pointer when the worker's body ends.
struct ClearCurrent;

impl Drop for ClearCurrent {
    fn drop(&mut self) {
        CURRENT.with(|current| current.set(ptr::null()));
    }
}

/// The body of worker thread `index` of `pool`, owning `local`.
pub(crate) fn run(pool: Arc<Pool>, index: usize, local: Worker<Job>) {
    parker::install(StdArc::clone(pool.idle.parker(index)));
    let own = pool.own_thread();
    let waiting = RefCell::new(Waiting::new(pool.timer.spin()));
    let ctx = WorkerContext {
        pool,
        index,
        local,
        waiting,
        pace: Pace::new(),
        lead_next: Cell::new(Nanos::MAX),
        until_injector: Cell::new(INJECTOR_INTERVAL),
    };
    {
        CURRENT.with(|current| current.set(&ctx));
        let _clear = ClearCurrent;
        ctx.pool.hooks().thread_started();
        ctx.main_loop();
        ctx.pool.hooks().thread_stopping();
    }
    let WorkerContext { pool, local, .. } = ctx;
    // Empty, unless a job pushed after `shutdown_now` drained it was not
    // taken back yet (see `Pool::push_local`): give it up.
    while let Some(job) = local.pop() {
        job.cancel(&*pool);
        pool.jobs_ended(1);
    }
    drop(local);
    drop(own);
    pool.worker_exited();
    // The timer thread stays until the last worker is gone (see
    // `timer::driver`): let it look.
    pool.timer.wake();
}

/// Waits until the task behind `header` is final or `deadline` passes;
/// true if it is final. On a worker thread the wait runs queued work. The
/// wait registers a waker of its own, and a waker it replaces (one a poll
/// of the handle left, user code) is dropped through `ctx`.
pub(crate) fn wait_until_final(
    header: &Header,
    deadline: Option<Instant>,
    ctx: &dyn TaskContext,
) -> bool {
    if header.is_final() {
        return true;
    }
    with_current(|worker| match worker {
        Some(worker) => worker.help_until_final(header, deadline, ctx),
        None => block_until_final(header, deadline, ctx),
    })
}

/// Registers `waker` with the task behind `header`, dropping the wakers it
/// replaced through `ctx`; false if the task is already final.
fn register(header: &Header, waker: &Waker, ctx: &dyn TaskContext) -> bool {
    let registration = header.register(waker);
    ctx.drop_reporting(registration.stale);
    registration.registered
}

/// The wait of a thread outside any pool: park until the task wakes us.
fn block_until_final(header: &Header, deadline: Option<Instant>, ctx: &dyn TaskContext) -> bool {
    let parker = parker::current();
    if !register(header, &Waker::from(StdArc::clone(&parker)), ctx) {
        return true;
    }
    loop {
        if header.is_final() {
            return true;
        }
        if !parker.park_until(deadline) {
            return header.is_final();
        }
    }
}

/// The job `steal` gives, trying again while it says `Retry`.
fn one(steal: impl Fn() -> Steal<Job>) -> Option<Job> {
    loop {
        match steal() {
            Steal::Success(job) => return Some(job),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

impl WorkerContext {
    fn main_loop(&self) {
        let pool = &*self.pool;
        let mut searching = false;
        loop {
            // The lifecycle is only read when there is nothing to run. Once
            // the pool is shut down, a worker that may exit does so before
            // it searches: a search visits every other worker's deque, so
            // at the wake-up of a shutdown, n workers searching would cost
            // O(n²) (seconds for a few thousand workers).
            let job = match self
                .due_job()
                .or_else(|| self.next_job().inspect(|_| self.reclaim_lead()))
            {
                Some(job) => Some(job),
                None if pool.lifecycle.is_shut_down() && pool.idle_worker_may_exit() => break,
                None => match self.lead(&mut searching) {
                    Led::Again => continue,
                    Led::Run(job) => Some(job),
                    Led::Follow => {
                        if !searching {
                            searching = true;
                            pool.idle.start_searching();
                        }
                        self.search()
                    }
                },
            };
            if let Some(job) = job {
                if searching {
                    searching = false;
                    pool.idle.stop_searching(|| pool.has_visible_work());
                }
                self.run_job(job);
                continue;
            }
            if pool.idle_worker_may_exit() {
                break;
            }
            pool.idle.sleep(
                self.index,
                searching,
                || pool.has_visible_work() || pool.idle_worker_may_exit(),
                None,
            );
            searching = true;
        }
        if searching {
            pool.idle.stop_searching(|| pool.has_visible_work());
        }
    }

    /// An idle worker leads, if it can (`timer/driver/lead.rs`): a turn of
    /// the timer; if nothing is due, it waits for the next deadline as an
    /// idle worker (or steals what other queues hold). `searching` is the
    /// main loop's flag.
    fn lead(&self, searching: &mut bool) -> Led {
        let pool = &*self.pool;
        let timer = &pool.timer;
        if !timer.take_lead(self.index, || pool.lifecycle.is_shut_down()) {
            return Led::Follow;
        }
        match self.turn() {
            Turned::Follow => Led::Follow,
            Turned::Took(job) => job.map_or(Led::Again, Led::Run),
            Turned::Wait { next, held } => {
                if pool.has_visible_work() {
                    timer.leader_awake(self.index);
                    return self.steal_once().map_or(Led::Again, Led::Run);
                }
                self.wait_for_time(next, held, searching);
                timer.leader_awake(self.index);
                Led::Again
            }
        }
    }

    /// A worker that took a job from a queue takes the lead if the timer
    /// thread holds it (after a rescue, `timer/driver/lead.rs`), and turns
    /// after this job: with a steady stream of work it is never idle, and
    /// an idle worker is the only other one that takes the lead.
    #[inline]
    fn reclaim_lead(&self) {
        let pool = &*self.pool;
        if pool.timer.lead_is_free()
            && pool
                .timer
                .take_lead(self.index, || pool.lifecycle.is_shut_down())
        {
            pool.timer.leader_awake(self.index);
            self.lead_next.set(0);
        }
    }

    /// A leading worker about to run other work first takes a turn if the
    /// next deadline it knows of has passed (or it took due tasks at its
    /// last turn, and has not looked since): a stream of ordinary jobs
    /// does not hold its timers up. The due task it took, if any.
    #[inline]
    fn due_job(&self) -> Option<Job> {
        let next = self.lead_next.get();
        if next == Nanos::MAX || (next != 0 && self.pool.timer.clock.now() < next) {
            return None;
        }
        match self.turn() {
            Turned::Follow => None,
            Turned::Took(job) => job,
            Turned::Wait { .. } => {
                // It runs other work: awake, with `armed` published.
                self.pool.timer.leader_awake(self.index);
                None
            }
        }
    }

    /// One turn of the timer as its leader (again while the turn says so):
    /// the first due task is the caller's to run; the others of the turn,
    /// if it shares them (long ones: `pace`; late ones: `lead`), go on the
    /// injector for the other workers, in deadline order, and one is woken.
    fn turn(&self) -> Turned {
        let pool = &*self.pool;
        let share = self.pace.share();
        let mut first = None;
        let mut take = |job| {
            if first.is_none() {
                pool.job_pushed();
                first = Some(job);
            } else {
                pool.push_due_quietly(job);
            }
        };
        let (turn, at) = loop {
            match lead_turn(pool, self.index, share, &mut take) {
                (LeadTurn::Again, _) => continue,
                turned => break turned,
            }
        };
        if turn == LeadTurn::Follow {
            self.lead_next.set(Nanos::MAX);
            return Turned::Follow;
        }
        self.pace.turned(at);
        match turn {
            LeadTurn::Took(n) => {
                self.pace.took(at, n);
                // Look again before other work.
                self.lead_next.set(0);
                if n >= 2 {
                    pool.idle.notify_work();
                }
                Turned::Took(first)
            }
            LeadTurn::Wait { next, held } => {
                self.lead_next.set(next.unwrap_or(Nanos::MAX));
                Turned::Wait { next, held }
            }
            LeadTurn::Follow | LeadTurn::Again => unreachable!("handled above"),
        }
    }

    /// A leading worker waits until `next` (the backend holding `held`
    /// entries) as the timer thread would (`waiting`), or until work, a
    /// command or the shutdown comes. It comes back counted as searching
    /// after a park (as from any sleep: `idle`), and stops when it finds
    /// a job; its own due task is not in a queue, so that wakes nobody.
    fn wait_for_time(&self, next: Option<Nanos>, held: usize, searching: &mut bool) {
        let pool = &*self.pool;
        let timer = &pool.timer;
        // It spins whether or not other workers sleep: it runs the task.
        let plan = self
            .waiting
            .borrow_mut()
            .plan(next, held, || timer.clock.now(), || true);
        match plan {
            Wait::Spin(until) => timer.lead_spin_until(until, || {
                pool.has_visible_work() || pool.lifecycle.is_shut_down()
            }),
            Wait::Park(until) => {
                pool.idle.sleep(
                    self.index,
                    *searching,
                    || {
                        pool.has_visible_work()
                            || pool.idle_worker_may_exit()
                            || !timer.no_commands()
                    },
                    timer.instant_of(until),
                );
                *searching = true;
            }
        }
    }

    /// The main loop's fast path: [`own_or_injector`](Self::own_or_injector),
    /// except that every [`INJECTOR_INTERVAL`]th look (each batch from the
    /// injector starts the count again) takes the injector's oldest job,
    /// else the oldest of its own deque.
    #[inline]
    fn next_job(&self) -> Option<Job> {
        let left = self.until_injector.get() - 1;
        if left == 0 {
            self.until_injector.set(INJECTOR_INTERVAL);
            // One job each, so that the order of the deque stays as it
            // was. The own deque's oldest is taken from the end thieves
            // take from: with one worker no thief does, and a job that
            // re-submits itself (always the newest) would starve the jobs
            // submitted before it. (This runs between jobs, never between
            // a push of this worker and the pop that takes a refused job
            // back: `Pool::push_local`'s protocol holds.)
            let oldest = || self.pool.stealers[self.index].steal();
            if let Some(job) = one(|| self.pool.injector.steal()).or_else(|| one(oldest)) {
                return Some(job);
            }
        } else {
            self.until_injector.set(left);
        }
        self.own_or_injector()
    }

    /// Own deque (newest first), then a batch from the injector. A join's
    /// wait takes its jobs this way, without `next_job`'s look: while its
    /// own deque is not empty it then runs only jobs submitted after the
    /// task that joins, its own descendants (an older job might wait for
    /// that task, or for a lock it holds: a deadlock on one thread).
    #[inline]
    fn own_or_injector(&self) -> Option<Job> {
        self.local.pop().or_else(|| {
            one(|| self.pool.injector.steal_batch_and_pop(&self.local))
                .map(|job| self.injector_batch(job))
        })
    }

    /// A batch came from the injector (into an empty deque): the count of
    /// jobs before the next look at the injector starts again, so a batch
    /// (at most 32 jobs) runs out before that look and the injector's
    /// order holds (equal deadlines run in the order they were scheduled
    /// in), unless its jobs submit more.
    #[inline]
    fn injector_batch(&self, job: Job) -> Job {
        self.until_injector.set(INJECTOR_INTERVAL);
        self.announce_batch(job)
    }

    /// A batch steal moved tasks into our deque. While they moved, a worker
    /// going to sleep could see neither the source nor our deque holding
    /// them, so they count as newly pushed work: make them known.
    #[inline]
    fn announce_batch(&self, job: Job) -> Job {
        if !self.local.is_empty() {
            self.pool.idle.notify_work();
        }
        job
    }

    /// Every queue once: injector, then the other workers from the next one
    /// on (so thieves spread over their victims).
    fn steal_once(&self) -> Option<Job> {
        let pool = &*self.pool;
        loop {
            let mut retry = false;
            let mut attempt = |steal: Steal<Job>| match steal {
                Steal::Success(job) => Some(self.announce_batch(job)),
                Steal::Empty => None,
                Steal::Retry => {
                    retry = true;
                    None
                }
            };
            if let Some(job) = attempt(pool.injector.steal_batch_and_pop(&self.local)) {
                self.until_injector.set(INJECTOR_INTERVAL);
                return Some(job);
            }
            let n = pool.stealers.len();
            for victim in (1..n).map(|k| (self.index + k) % n) {
                if let Some(job) = attempt(pool.stealers[victim].steal_batch_and_pop(&self.local)) {
                    return Some(job);
                }
            }
            if !retry {
                return None;
            }
        }
    }

    /// A searcher's bounded spin: steal rounds with exponential back-off
    /// (a few microseconds of spinning, then a few yields), then give up.
    fn search(&self) -> Option<Job> {
        let backoff = Backoff::new();
        loop {
            if let Some(job) = self.steal_once() {
                return Some(job);
            }
            if backoff.is_completed() {
                return None;
            }
            backoff.snooze();
        }
    }

    /// Runs one job (which catches and reports its own panics) and counts
    /// it. A job run while helping a join runs inside another one: the
    /// worker stays busy after it.
    #[inline]
    fn run_job(&self, job: Job) {
        let pool = &*self.pool;
        let stats = pool.stats(self.index);
        let was_busy = stats.is_busy();
        stats.set_busy(true);
        match job.run(pool) {
            RunOutcome::Completed => stats.record_run(false),
            RunOutcome::Panicked => stats.record_run(true),
            RunOutcome::Cancelled => stats.record_cancelled(),
            RunOutcome::Skipped => {}
        }
        stats.set_busy(was_busy);
        pool.jobs_ended(1);
    }

    /// A task on this worker joins another task: run queued work until it
    /// is final, sleeping (as an idle worker, so new work wakes us to help)
    /// when there is none. True if final, false if `deadline` passed.
    fn help_until_final(
        &self,
        header: &Header,
        deadline: Option<Instant>,
        ctx: &dyn TaskContext,
    ) -> bool {
        let pool = &*self.pool;
        let mut searching = false;
        let mut registered = false;
        let finished = loop {
            if header.is_final() {
                break true;
            }
            if past(deadline) {
                break false;
            }
            let helping = !pool.lifecycle.is_stopped();
            if helping {
                if let Some(job) = self.own_or_injector().or_else(|| self.steal_once()) {
                    if searching {
                        searching = false;
                        pool.idle.stop_searching(|| pool.has_visible_work());
                    }
                    self.run_job(job);
                    continue;
                }
            }
            if !registered {
                registered = true;
                let waker = Waker::from(StdArc::clone(pool.idle.parker(self.index)));
                if !register(header, &waker, ctx) {
                    continue;
                }
            }
            pool.idle.sleep(
                self.index,
                searching,
                || header.is_final() || (helping && pool.has_visible_work()),
                deadline,
            );
            searching = true;
        };
        if searching {
            pool.idle.stop_searching(|| pool.has_visible_work());
        }
        finished
    }
}

/// loom models of a worker's own protocols (`RUSTFLAGS="--cfg loom"`, see
/// `loom-tests/README.md`), over a pool with one or two real worker threads
/// ([`run`]) and no timer thread.
///
/// * `submit_while_the_worker_goes_to_sleep`: the sleepy-worker race with
///   the real worker loop: the main thread submits a task while the only
///   worker runs out of work and goes to sleep, then joins it. Asserted:
///   the task runs and the join returns its value (a lost wake-up leaves
///   both asleep: loom reports the deadlock); the worker exits at shutdown.
/// * `two_workers_submit_while_going_to_sleep`: the same with two workers
///   searching, going to sleep and waking each other (one wake-up per push,
///   the last searcher's hand-off).
/// * `join_helps_and_sees_a_result_run_elsewhere`: a task on the worker
///   submits two subtasks to its own deque and joins them, while the main
///   thread steals from that deque (as another worker would) and runs what
///   it took. The joining worker helps: it runs the newest subtask itself,
///   and if the other one was stolen it sleeps until the thief's run ends.
///   Asserted: no deadlock (a lost wake-up of the joining worker leaves it
///   asleep: loom reports it), and the joined results are seen (the
///   parent's result is built from both).
/// * `join_helped_by_a_real_thief`: the same with two workers: the other
///   worker steals from the joining worker's deque (or the joining worker
///   runs both subtasks, or the parent itself runs on either worker).
/// * `panic_isolation`: a task panics on the worker while the main thread
///   submits another. Asserted: the worker survives and runs the second
///   task (its join returns its value), the panic reaches the `on_panic`
///   hook once and the panic counter, and the worker exits at shutdown.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::handle::TaskHandle;
    use crate::loom_model::support::{
        bare_pool, expected_panic, join_all, model, spawn_workers, submit,
    };
    use crate::pool::hooks::Hooks;
    use crate::sync::{AtomicUsize, Ordering};

    /// One outside submit to `workers` real workers that are going to
    /// sleep; its join sees the result, and the workers exit at shutdown.
    fn submit_to_sleepy_workers(workers: usize) {
        let (pool, deques) = bare_pool(workers, Default::default());
        let workers = spawn_workers(&pool, deques);
        let task = submit(&pool, || 7).expect("the pool is running");
        assert_eq!(task.join().ok(), Some(7));
        pool.shutdown();
        join_all(workers);
    }

    #[test]
    fn submit_while_the_worker_goes_to_sleep() {
        model("worker::submit_while_the_worker_goes_to_sleep", || {
            submit_to_sleepy_workers(1)
        });
    }

    #[test]
    fn two_workers_submit_while_going_to_sleep() {
        model("worker::two_workers_submit_while_going_to_sleep", || {
            submit_to_sleepy_workers(2)
        });
    }

    /// A task that submits two subtasks to its worker's deque and joins
    /// both (23 once both ran).
    fn submit_parent(pool: &Arc<Pool>) -> TaskHandle<u32> {
        submit(pool, || {
            // The oldest in the deque: what a thief takes first.
            let stolen = crate::current::submit(|| 2).unwrap();
            // The newest: the joining worker runs it itself.
            let helped = crate::current::submit(|| 3).unwrap();
            stolen.join().unwrap() * 10 + helped.join().unwrap()
        })
        .expect("the pool is running")
    }

    #[test]
    fn join_helps_and_sees_a_result_run_elsewhere() {
        model("worker::join_helps_and_sees_a_result_run_elsewhere", || {
            let (pool, deques) = bare_pool(1, Default::default());
            let parent = submit_parent(&pool);
            let workers = spawn_workers(&pool, deques);
            // One steal from the worker's deque, as another worker would.
            if let Steal::Success(job) = pool.stealers[0].steal() {
                job.run(&*pool);
            }
            assert_eq!(parent.join().ok(), Some(23));
            pool.shutdown();
            join_all(workers);
        });
    }

    #[test]
    fn join_helped_by_a_real_thief() {
        model("worker::join_helped_by_a_real_thief", || {
            let (pool, deques) = bare_pool(2, Default::default());
            let parent = submit_parent(&pool);
            let workers = spawn_workers(&pool, deques);
            assert_eq!(parent.join().ok(), Some(23));
            pool.shutdown();
            join_all(workers);
        });
    }

    #[test]
    fn panic_isolation() {
        model("worker::panic_isolation", || {
            let panics = Arc::new(AtomicUsize::new(0));
            let seen = Arc::clone(&panics);
            let hooks = Hooks {
                on_panic: Some(Box::new(move |_| {
                    seen.fetch_add(1, Ordering::SeqCst);
                })),
                ..Default::default()
            };
            let (pool, deques) = bare_pool(1, hooks);
            let workers = spawn_workers(&pool, deques);
            pool.execute(None, || expected_panic())
                .expect("the pool is running");
            let after = submit(&pool, || 7).expect("the pool is running");
            assert_eq!(after.join().ok(), Some(7));
            pool.shutdown();
            join_all(workers);
            assert_eq!(panics.load(Ordering::SeqCst), 1);
            let panicked: u64 = pool.worker_stats().map(|s| s.panicked()).sum();
            assert_eq!(panicked, 1);
        });
    }
}

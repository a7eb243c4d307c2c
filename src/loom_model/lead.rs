//! loom models of leader-follower timing (`timer/driver/lead.rs`): a
//! worker that waits for time itself, and the timer thread's watch over it
//! (see `timer.rs` here for how the models treat time; the leader's turn
//! reads the pool's real clock, so a task due at 1 ns is due at once and
//! one due at `EARLIER` or `LATER` never).
//!
//! * `earlier_deadline_wakes_the_leading_worker`: a worker leads and
//!   sleeps on its own parker until a task's deadline while a task due
//!   earlier is scheduled. Asserted: it is not left asleep past the
//!   earlier deadline: the scheduler reads the lead and wakes that worker,
//!   or the worker sees the command before it parks, and it re-arms for
//!   the earlier deadline (if it slept on, loom would report the
//!   deadlock); `pending` counts both tasks. (The commands protocol of
//!   `commands.rs`, with a worker as the one who sleeps.)
//! * `rescue_vs_the_leaders_turn`: a task is due while the leading worker
//!   is awake, and the timer thread, having seen no turn for a whole
//!   watch, takes the lead back while the leader returns from its work and
//!   turns. Asserted: the task is taken exactly once (by the leader's
//!   turn, or handed to the injector by the timer thread's), never lost,
//!   never twice; a leader whose lead was taken follows; `pending` is 0.
//! * `a_leader_that_holds_nothing_up_is_left_the_lead`: the leading
//!   worker is awake without a turn, nothing is due (a task due at
//!   `LATER`), while a scheduler adds a task due at once and the watch
//!   looks. Asserted: before the scheduler, a look leaves the leader the
//!   lead; the watch takes the lead back only if it sees the
//!   new command (or the task it brings) under the lock; if its look
//!   came first, its next look (the watch looks again a `GRACE` later
//!   while the leader is awake) does take it: the scheduler did not wake
//!   anyone (`armed` is 0), so that look is what applies the command.
//! * `the_watch_sees_a_leader_that_wakes`: the leading worker slept until
//!   a far deadline, and wakes to run other work while the timer thread
//!   goes to sleep for a `GRACE` past that deadline. Asserted: the timer
//!   thread does not stay asleep: it sees the leader awake before it
//!   parks, or the leader sees how long it sleeps and wakes it (else loom
//!   reports the deadlock).
//! * `shutdown_now_while_a_worker_leads`: the only worker, a real one
//!   (`worker::run`), leads and waits for a periodic task due in an hour,
//!   beside the real timer thread, while the main thread calls
//!   `shutdown_now` (once the worker has taken the lead). Asserted: the
//!   task is returned, once, unrun; the worker and the timer thread exit
//!   (a leader left asleep, or a timer thread left watching a leader that
//!   is gone, would be a deadlock); `pending` is 0. (The shutdown models
//!   in `shutdown.rs` run without leading workers.) It found a bug: the
//!   timer thread's turn read "not stopped", then "shut down", with
//!   `shutdown_now` in between, and applied `shutdown`'s policies, which
//!   cancel periodic tasks: the task was cancelled, not returned (seen
//!   once as a failure of `shutdown_now_returns_periodic_tasks`).

use super::timer::{schedule, EARLIER, LATER};
use crate::loom_model::support::{
    join_all, model, schedule_periodic, spawn_workers, DEFAULT_POLICY,
};
use crate::pool::Pool;
use crate::sync::{thread, Arc, AtomicUsize, Ordering};
use crate::task::Job;
use crate::time::Nanos;
use crate::timer::driver::lead::{lead_turn, watch, LeadTurn, Share, Watch, GRACE};
use crate::timer::driver::waiting::Waiting;
use crate::timer::driver::{run_with_clock, turn, Timer, Turn};

/// An hour, in nanoseconds: not due while a model runs.
const HOUR: Nanos = 3_600_000_000_000;

/// A pool of `workers` workers, no thread started, whose idle workers may
/// take the lead.
fn leading_pool(workers: usize) -> Arc<Pool> {
    let mut timer = Timer::new(Default::default(), DEFAULT_POLICY, usize::MAX);
    timer.set_workers_lead(true);
    let (pool, _deques) = Pool::new(workers, Default::default(), timer);
    Arc::new(pool)
}

/// Worker `index`, which leads, turns until `done` says so of a turn that
/// would wait; parks on its own parker otherwise (as `wait_for_time` does
/// with a deadline that, under loom, never passes).
fn lead_until(pool: &Pool, index: usize, done: impl Fn(Option<Nanos>) -> bool) {
    loop {
        let mut take = |job: Job| panic!("nothing is due: {job:?}");
        match lead_turn(pool, index, Share::One, &mut take).0 {
            LeadTurn::Wait { next, .. } => {
                if done(next) {
                    return;
                }
                pool.timer.worker_parker(index).park_until(None);
            }
            LeadTurn::Again => continue,
            other => panic!("the worker leads, and nothing is due: {other:?}"),
        }
    }
}

#[test]
fn earlier_deadline_wakes_the_leading_worker() {
    model("lead::earlier_deadline_wakes_the_leading_worker", || {
        let pool = leading_pool(1);
        let _later = schedule(&pool, || (), 0, LATER);
        assert!(pool.timer.take_lead(0, || false));
        let leader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || lead_until(&pool, 0, |next| next == Some(EARLIER)))
        };
        let _earlier = schedule(&pool, || (), 0, EARLIER);
        leader.join().unwrap();
        assert_eq!(pool.timer.armed.load(Ordering::SeqCst), EARLIER);
        assert_eq!(pool.timer.pending(), 2);
    });
}

#[test]
fn rescue_vs_the_leaders_turn() {
    model("lead::rescue_vs_the_leaders_turn", || {
        let pool = leading_pool(1);
        let task = schedule(&pool, || 7, 0, 1);
        assert!(pool.timer.take_lead(0, || false));
        // The watch's first look: the leader awake (`armed` 0), at this
        // many turns.
        let seen = pool.timer.turns_taken();
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                if !pool.timer.rescue(seen, 2, GRACE) {
                    return false;
                }
                // The timer thread's own turn, as after a rescue.
                loop {
                    match turn(&*pool, || 2) {
                        Turn::Again => continue,
                        Turn::Sleep { .. } => return true,
                        Turn::Exit => panic!("the pool runs"),
                    }
                }
            })
        };
        let mut taken = Vec::new();
        let led = lead_turn(&*pool, 0, Share::One, &mut |job| taken.push(job)).0;
        let rescued = timer.join().unwrap();
        taken.extend(pool.take_queued());
        assert_eq!(taken.len(), 1, "taken exactly once");
        match led {
            LeadTurn::Follow => assert!(rescued, "only a rescue takes the lead"),
            LeadTurn::Took(1) => {}
            other => panic!("the task was due: {other:?}"),
        }
        assert_eq!(pool.timer.pending(), 0);
        for job in taken {
            job.run(&*pool);
        }
        assert_eq!(task.join().ok(), Some(7));
    });
}

#[test]
fn a_leader_that_holds_nothing_up_is_left_the_lead() {
    model(
        "lead::a_leader_that_holds_nothing_up_is_left_the_lead",
        || {
            let pool = leading_pool(1);
            let _later = schedule(&pool, || (), 0, LATER);
            assert!(pool.timer.take_lead(0, || false));
            // The leader's turn applies that command; then it runs other work
            // (`armed` 0) and takes no turn.
            lead_until(&pool, 0, |next| next == Some(LATER));
            pool.timer.leader_awake(0);
            let seen = pool.timer.turns_taken();
            assert!(!pool.timer.rescue(seen, 2, GRACE), "nothing is held up");
            // The watch's look, as the scheduler adds the task due at once.
            // (The look runs on the spawned thread: with the scheduler spawned
            // and the look on this one, loom explored one interleaving only,
            // the look always first.)
            let watch = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.timer.rescue(seen, 2, GRACE))
            };
            let _due = schedule(&pool, || (), 0, 1);
            let first = watch.join().unwrap();
            assert!(
                first || pool.timer.rescue(seen, 2, GRACE),
                "the look after the command takes the lead"
            );
            assert!(!pool.timer.worker_leads());
        },
    );
}

#[test]
fn the_watch_sees_a_leader_that_wakes() {
    model("lead::the_watch_sees_a_leader_that_wakes", || {
        let pool = leading_pool(1);
        let _later = schedule(&pool, || (), 0, LATER);
        assert!(pool.timer.take_lead(0, || false));
        // The leader's turn: nothing due, `armed` published.
        lead_until(&pool, 0, |next| next == Some(LATER));
        let timer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || watch(&*pool, || 0, &mut Watch::default()))
        };
        // The leader wakes (for other work).
        pool.timer.leader_awake(0);
        timer.join().unwrap();
        assert_eq!(pool.timer.armed.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn shutdown_now_while_a_worker_leads() {
    model("lead::shutdown_now_while_a_worker_leads", || {
        let mut timer = Timer::new(Default::default(), DEFAULT_POLICY, usize::MAX);
        timer.set_workers_lead(true);
        let (pool, deques) = Pool::new(1, Default::default(), timer);
        let pool = Arc::new(pool);
        let runs = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&runs);
        let task = schedule_periodic(
            &pool,
            move || {
                r.fetch_add(1, Ordering::SeqCst);
            },
            HOUR,
            HOUR,
        )
        .expect("the pool accepts it");
        let workers = spawn_workers(&pool, deques);
        let timer_thread = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || run_with_clock(&*pool, || 0, Waiting::new(0)))
        };
        // The worker finds no work and takes the lead: the case to model
        // (what follows races its turn and its sleep).
        while !pool.timer.worker_leads() {
            loom::thread::yield_now();
        }
        let returned = pool.shutdown_now();
        let count = returned.len();
        for job in returned {
            job.cancel(&*pool);
        }
        join_all(workers);
        timer_thread.join().unwrap();
        assert_eq!(count, 1, "the periodic task is returned, once");
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        assert!(task.is_cancelled());
        assert_eq!(pool.timer.pending(), 0);
    });
}

//! loom model of a placement that straddles a step of the wall clock
//! (`RUSTFLAGS="--cfg loom"`, see `loom-tests/README.md`; module doc), over
//! a pool on a manual clock with no thread of its own: the model's threads
//! do the timer's turns and run the queued jobs by hand.
//!
//! `placement_vs_wall_step`: the main thread schedules a one-shot due at a
//! wall time 10 ns ahead while another thread steps the wall clock a day
//! forward and takes a turn of the timer (its look at the wall clock: the
//! check jobs of the watched tasks handed over if the offset moved). Then
//! the main thread runs what is queued and takes turns until nothing is
//! left, the monotonic time not moved. Asserted: the task has run,
//! whichever order the placement's clock reading, its insert, its watch,
//! its second reading and the step took (a task placed with the offset
//! from before the step, and not checked after it, would wait 10 ns of
//! monotonic time that never pass); exactly once; and no live entry is
//! left.

use crate::sync::{AtomicUsize, Ordering, StdArc};
use std::time::Duration;

use crate::loom_model::support::{manual_pool, model};
use crate::sync::{thread, Arc};
use crate::task::OneShot;
use crate::trigger::{self, Next};

#[test]
fn placement_vs_wall_step() {
    model("timer::placement_vs_wall_step", || {
        let (state, pool, _deques) = manual_pool();
        // No timer thread: commands that find the queue full are
        // applied by whoever pushes them, as once it has exited
        // (`commands.rs`).
        pool.timer.timer_thread_exits();
        let start = state.system_time();
        let stepping = {
            let (pool, state) = (Arc::clone(&pool), StdArc::clone(&state));
            thread::spawn(move || {
                state.set_wall(start + Duration::from_secs(86_400));
                pool.timer.hand_over_at(&*pool, 0);
            })
        };
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let due = Next::AtSystemTime(start + Duration::from_nanos(10));
        let _task = pool
            .schedule_recurring(
                OneShot(Some(move || r.fetch_add(1, Ordering::SeqCst))),
                trigger::Once(due),
                false,
                (),
            )
            .map_err(|_| "refused")
            .expect("the pool accepts it");
        stepping.join().unwrap();
        loop {
            pool.timer.hand_over_at(&*pool, 0);
            let queued = pool.take_queued();
            if queued.is_empty() {
                break;
            }
            for job in queued {
                job.run(&*pool);
                pool.jobs_ended(1);
            }
        }
        assert_eq!(
            ran.load(Ordering::SeqCst),
            1,
            "the step passed its wall time"
        );
        assert_eq!(state.now(), 0, "no monotonic time passed");
        // The placements made stale: none of them live.
        pool.timer.sweep_cancelled(&*pool);
        assert_eq!(pool.timer.pending(), 0);
    });
}

//! A poll helps: a timer future first polled while the timer is behind
//! its deadline rings what is due on the polling thread.
//!
//! # Why
//!
//! The holder of the lead (`lead`) rings a due alarm by waking its
//! future's waker on its own thread: the timer thread, or a worker of this
//! pool. A future awaited on another runtime (tokio's, smol's) is polled by
//! that runtime's threads, and the timer thread is one more thread that
//! needs a core when its deadline comes: while the runtime keeps every core
//! busy it waits for one, and every alarm due meanwhile waits with it. In
//! the `sleep-future` workload (a million sleeps created on a tokio runtime
//! in 2–3 s on two cores, due over the first second) the median sleep ended
//! 56–368 ms late; tokio's own sleep, which its busy workers drive, 12–49
//! ms in the same runs. Each ring there wakes a tokio task from outside
//! the runtime (a push on its shared queue, often a parked worker's
//! wake-up), and the timer thread alone fell behind a million of them. A
//! thread that polls a timer future is running by definition, so a poll
//! that finds the timer behind rings what is due itself: the median fell
//! to 2–21 ms (`benches/README.md`, "A poll helps").
//!
//! # What it does
//!
//! A [`Sleep`](crate::future::Sleep) (and so a `Timeout`, an `Interval`)
//! still pending after its first poll, the one that registers it, calls
//! [`help`] with the time that poll read (a re-poll does not help: it
//! would pay a clock read for it, `Sleep::register`):
//!
//! * Nothing if the holder of the lead sleeps until a deadline still ahead
//!   (`armed`): nothing is due that it will not hand over in time. Else
//!   (the holder is awake, or its deadline passed and it has not turned):
//! * it tries the backend lock, never waits for it (a holder that has it
//!   is turning, and hands over what is due itself), and does what a
//!   turn's hand-over does (`hand_over_due`) for at most [`AT_MOST`] due
//!   entries: alarms out to ring, tasks on the injector with a worker
//!   woken;
//! * it rings the alarms after the lock, on this thread.
//!
//! It applies no commands, sweeps nothing and publishes no `armed`: an
//! entry still in the command queue waits for the holder, as before.
//!
//! # Invariants (the timer's, kept)
//!
//! * **Each due entry is taken once**: a helper pops under the backend
//!   lock, as every turn does, and its tasks are on the injector before it
//!   releases it (`shutdown_now` drains the backend, then the queues,
//!   under that lock: a task is in one of them).
//! * **`pending`, and a manual clock's count of alarms being rung**, move
//!   as in any hand-over (`hand_over_due`, `ring`). Not on a manual clock,
//!   all the same: its time moves only by `advance`, which hands over what
//!   falls due and waits for it, and nothing is ever behind.
//! * **`armed` has one writer**, the holder (`lead`): a helper does not
//!   write it. A holder whose `armed` named an entry a helper took wakes
//!   at that deadline, finds nothing due and sleeps again.
//! * **Shutdown's policies**: a helper hands over nothing once the pool is
//!   shut down (read under the lock): the holder's next turn applies the
//!   policies (discard, cancel periodic tasks, return them) to what is
//!   left, as it would have without helpers.
//! * **No re-entrance**: ringing wakes wakers, user code; a waker that
//!   polls a timer future on this thread would help again from inside the
//!   ring, and again from inside that one, a stack frame deeper for each
//!   due alarm. A thread that is ringing (after a turn, a leader's turn or
//!   a help: [`ringing`]) does not help.
//!
//! A waker that panics is reported to the pool's `on_panic` hook, as on
//! the timer thread (`ring`); one that blocks holds this thread, not the
//! timer thread (whose every alarm it held before).

use std::cell::Cell;

use crate::sync::Ordering;
use crate::time::Nanos;

use super::{hand_over_due, ring, Workers};

/// The most due entries one poll hands over: what is left waits for the
/// next poll or the holder, so that a poll that finds a burst due (a
/// wheel's tick can hold thousands) does not ring them all on one
/// future's time. With 16, 64, 1,024 or no bound the `sleep-future`
/// workload's median lateness was the same within its noise between runs
/// (`benches/README.md`, "A poll helps"), so the bound is kept small.
const AT_MOST: usize = 64;

crate::sync::thread_local! {
    /// True while this thread rings alarms ([`ringing`]).
    static RINGING: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread rings alarms (its wakers' schedules must not
/// wait for room in the command queue: `commands`).
pub(super) fn is_ringing() -> bool {
    RINGING.try_with(Cell::get).unwrap_or(true)
}

/// Runs `ring_them` (the ring of alarms) with this thread marked as
/// ringing, so that a timer future its wakers poll does not help (module
/// doc). The mark is cleared even if `ring_them` unwinds (a waker's panic
/// is reported, but a reporting hook may itself panic).
pub(super) fn ringing<R>(ring_them: impl FnOnce() -> R) -> R {
    /// Restores the mark as it was (a ring inside a ring keeps it).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let was = self.0;
            let _ = RINGING.try_with(|ringing| ringing.set(was));
        }
    }
    // `try_with`: a thread whose locals are being destroyed (a timer
    // future dropped by one of them) rings without the mark; it cannot
    // help either (below).
    let _restore = Restore(
        RINGING
            .try_with(|ringing| ringing.replace(true))
            .unwrap_or(true),
    );
    ring_them()
}

/// Hands over what is due at `now` if the holder of the lead is behind
/// (module doc). Called by a timer future's first poll that stays
/// pending.
pub(crate) fn help(pool: &impl Workers, now: Nanos) {
    let timer = pool.timer();
    let armed = timer.armed.load(Ordering::Relaxed);
    if armed != 0 && now < armed {
        return;
    }
    if RINGING.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    let rung = {
        let Some(mut queue) = timer.queue.try_lock() else {
            return;
        };
        if pool.is_shut_down() || queue.next_due().is_none_or(|next| next > now) {
            return;
        }
        hand_over_due(pool, &mut queue, now, AT_MOST)
    };
    ring(rung, pool);
}

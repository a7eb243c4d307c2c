//! How the timer thread waits for its next deadline: its timer slack, and
//! the short spin that finishes a long wait.
//!
//! # Why it does not just sleep until the deadline
//!
//! A timed sleep ends late. Linux adds the thread's *timer slack* (50 µs by
//! default; a thread inherits its creator's) to every timed wait, to batch
//! wake-ups; and even with the slack at 1 µs, a thread woken from a timed
//! sleep on an idle core of a virtual machine runs well after its deadline
//! (measured: see `benches/README.md`, "Why the timer thread spins before a
//! deadline"). A task due at that deadline then waits for the timer thread
//! to wake, and after it for a worker to wake.
//!
//! So, with few timers (at most [`FEW_TIMERS`]):
//!
//! * **the slack is 1 µs** instead of 50 µs;
//! * **a long wait ends with a spin.** When the next deadline is at least
//!   [`LONG_WAIT`] spins away, the timer thread sleeps until one *spin
//!   window* before it (100 µs by default, `Builder::timer_spin`), then
//!   spins on the clock until the deadline, watching the command queue so
//!   that a new, earlier task still ends the spin. The spin only happens
//!   while some worker sleeps: with every worker busy the task could not
//!   start sooner anyway, and the spin would take a core from them.
//!
//! What it gains: the timer thread hands a task over at its deadline
//! instead of when its sleep ends, and the task runs sooner after the
//! deadline, at the median and at the 99th percentile (measured with the
//! `latency` workload: the same section).
//!
//! **The cost** is CPU: at most one spin window per wait of at least
//! `LONG_WAIT` windows, so at most a fifth of one core with timers due
//! back to back every 500 µs, and in practice the window less the sleep's
//! own lateness (measured in `latency`: the same section). With many timers
//! the waits are short, the deadlines dense, and a tight slack would only
//! wake the timer thread for ever smaller batches: with 10,000 periodic
//! tasks (the `periodic` workload) it costs more CPU and a worse p99
//! (measured: the same section). So there the timer thread keeps the slack
//! it was started with and never spins.
//!
//! That slack is the one the thread inherited from the thread that built
//! the pool: Linux's 50 µs, or whatever the process chose (systemd's
//! `TimerSlackNSec=`, a `prctl` before `build()`). Going back to it after a
//! tight spell asks Linux for the thread's *default* slack (a `prctl` with
//! 0), which is that inherited value, so the timer thread never overrides
//! a slack the process set.

use crate::time::Nanos;

/// At most this many timers for a tight slack and a spin.
const FEW_TIMERS: usize = 64;

/// A wait is long, and ends with a spin, if it is at least this many spin
/// windows: it bounds the spinning to a fifth of the time.
const LONG_WAIT: u64 = 5;

/// What the timer thread does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Park until this instant (without a deadline if `None`), or until
    /// woken.
    Park(Option<Nanos>),
    /// Spin on the clock until this instant (or until a command arrives).
    Spin(Nanos),
}

/// The timer slack: how late Linux may end a timed wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slack {
    /// The slack the thread was started with (inherited from its creator:
    /// 50 µs unless the process chose another).
    Inherited,
    /// 1 µs, with few timers.
    Tight,
}

impl Slack {
    /// The argument of `PR_SET_TIMERSLACK` that sets it: 0 asks for the
    /// thread's default slack, which is the one it inherited.
    fn prctl_nanos(self) -> u64 {
        match self {
            Slack::Inherited => 0,
            Slack::Tight => 1_000,
        }
    }
}

/// The timer thread's waiting policy (module doc). Decides each wait from
/// the next deadline, the clock and the pool's state; remembers the slack
/// it set and the deadline it woke early for.
#[derive(Debug)]
pub(crate) struct Waiting {
    /// The spin window (0: never spin).
    spin: Nanos,
    /// The slack the thread has now (it starts with the inherited one).
    slack: Slack,
    /// The deadline of the long wait it woke early for (or is spinning
    /// towards), if any.
    finishing: Option<Nanos>,
}

impl Waiting {
    /// A policy that spins for at most `spin` nanoseconds before a
    /// deadline (0: never).
    pub(crate) fn new(spin: Nanos) -> Self {
        Waiting {
            spin,
            slack: Slack::Inherited,
            finishing: None,
        }
    }

    /// How to wait for `next` (the earliest deadline; `None` if the backend
    /// is empty) with `held` timers in the backend. `now` reads the clock and
    /// `worker_sleeps` tells whether some worker is asleep; both are asked
    /// only if a spin is possible (under loom, where the spin is off, a
    /// model sees no extra read). Sets the thread's timer slack.
    pub(crate) fn plan(
        &mut self,
        next: Option<Nanos>,
        held: usize,
        now: impl FnOnce() -> Nanos,
        worker_sleeps: impl FnOnce() -> bool,
    ) -> Wait {
        let few = held <= FEW_TIMERS;
        self.set_slack(if few { Slack::Tight } else { Slack::Inherited });
        // Whether it already woke early for this very deadline.
        let finishing = self.finishing.take().is_some_and(|d| Some(d) == next);
        let Some(due) = next else {
            return Wait::Park(None);
        };
        if self.spin == 0 || !few {
            return Wait::Park(Some(due));
        }
        let now = now();
        if due <= now || !worker_sleeps() {
            return Wait::Park(Some(due));
        }
        let left = due - now;
        if !finishing && left < LONG_WAIT * self.spin {
            return Wait::Park(Some(due));
        }
        // Here it woke early for `due` or the wait is long (at least
        // `LONG_WAIT` windows): within the window only in the first case.
        self.finishing = Some(due);
        if left <= self.spin {
            Wait::Spin(due)
        } else {
            // A long wait, or one it woke from before the window (a wake-up
            // without a new command): sleep until the window.
            Wait::Park(Some(due - self.spin))
        }
    }

    fn set_slack(&mut self, wanted: Slack) {
        if wanted != self.slack {
            self.slack = wanted;
            set_timer_slack(wanted.prctl_nanos());
        }
    }
}

/// Sets the calling thread's timer slack, or with 0 resets it to the
/// thread's default (Linux; elsewhere nothing).
fn set_timer_slack(nanos: u64) {
    #[cfg(all(target_os = "linux", not(loom)))]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only changes
    // the calling thread's timer slack; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, nanos as libc::c_ulong, 0, 0, 0);
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    let _ = nanos;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const SPIN: Nanos = 100;

    #[test]
    fn a_long_wait_sleeps_until_the_window_then_spins_to_the_deadline() {
        let mut waiting = Waiting::new(SPIN);
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 0, || true),
            Wait::Park(Some(900))
        );
        // Woke on time for the window: spin the rest.
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 905, || true),
            Wait::Spin(1_000)
        );
        // A command ended the spin early, the deadline unchanged: spin on.
        assert_eq!(
            waiting.plan(Some(1_000), 2, || 950, || true),
            Wait::Spin(1_000)
        );
        // The next deadline is a new wait.
        assert_eq!(
            waiting.plan(Some(2_000), 1, || 1_001, || true),
            Wait::Park(Some(1_900))
        );
    }

    #[test]
    fn a_short_wait_is_a_plain_sleep() {
        let mut waiting = Waiting::new(SPIN);
        let short = LONG_WAIT * SPIN - 1;
        assert_eq!(
            waiting.plan(Some(short), 1, || 0, || true),
            Wait::Park(Some(short))
        );
        // Even within the window: it never woke early for this deadline.
        assert_eq!(
            waiting.plan(Some(short), 1, || short - 50, || true),
            Wait::Park(Some(short))
        );
    }

    #[test]
    fn a_wake_up_before_the_window_sleeps_again_until_the_window() {
        let mut waiting = Waiting::new(SPIN);
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 0, || true),
            Wait::Park(Some(900))
        );
        // Woken at 700 (no new command): never spin for more than the window.
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 700, || true),
            Wait::Park(Some(900))
        );
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 901, || true),
            Wait::Spin(1_000)
        );
    }

    #[test]
    fn an_earlier_deadline_replaces_the_one_it_was_finishing() {
        let mut waiting = Waiting::new(SPIN);
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 0, || true),
            Wait::Park(Some(900))
        );
        // A task due at 950 arrived during the sleep: a short wait, plain.
        assert_eq!(
            waiting.plan(Some(950), 2, || 920, || true),
            Wait::Park(Some(950))
        );
        // After it fired, the wait for 1,000 is short too: it is a new wait.
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 951, || true),
            Wait::Park(Some(1_000))
        );
    }

    #[test]
    fn no_spin_with_many_timers_busy_workers_or_the_spin_off() {
        let many = FEW_TIMERS + 1;
        assert_eq!(
            Waiting::new(SPIN).plan(Some(1_000), many, || 0, || true),
            Wait::Park(Some(1_000))
        );
        assert_eq!(
            Waiting::new(SPIN).plan(Some(1_000), 1, || 0, || false),
            Wait::Park(Some(1_000))
        );
        assert_eq!(
            Waiting::new(0).plan(Some(1_000), 1, || 0, || true),
            Wait::Park(Some(1_000))
        );
        // With the spin off, or many timers, neither the clock nor the
        // workers' state is read (a loom model sees no extra operation).
        let unread = || -> Nanos { unreachable!("read although no spin is possible") };
        let unasked = || -> bool { unreachable!("asked although no spin is possible") };
        assert_eq!(
            Waiting::new(0).plan(Some(1_000), 1, unread, unasked),
            Wait::Park(Some(1_000))
        );
        assert_eq!(
            Waiting::new(SPIN).plan(Some(1_000), many, unread, unasked),
            Wait::Park(Some(1_000))
        );
        // Woke early, then every worker got busy: sleep out the rest.
        let mut waiting = Waiting::new(SPIN);
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 0, || true),
            Wait::Park(Some(900))
        );
        assert_eq!(
            waiting.plan(Some(1_000), 1, || 905, || false),
            Wait::Park(Some(1_000))
        );
    }

    #[test]
    fn no_deadline_or_a_past_one_is_a_plain_park() {
        let mut waiting = Waiting::new(SPIN);
        assert_eq!(waiting.plan(None, 0, || 0, || true), Wait::Park(None));
        assert_eq!(
            waiting.plan(Some(5), 1, || 10, || true),
            Wait::Park(Some(5))
        );
    }

    #[test]
    fn the_slack_follows_the_number_of_timers() {
        let mut waiting = Waiting::new(SPIN);
        waiting.plan(None, FEW_TIMERS, || 0, || true);
        assert_eq!(waiting.slack, Slack::Tight);
        waiting.plan(None, FEW_TIMERS + 1, || 0, || true);
        assert_eq!(waiting.slack, Slack::Inherited);
    }

    /// The calling thread's timer slack in nanoseconds.
    #[cfg(target_os = "linux")]
    fn timer_slack() -> u64 {
        // SAFETY: PR_GET_TIMERSLACK takes no argument and returns the
        // calling thread's slack; no memory is passed.
        let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        u64::try_from(slack).expect("PR_GET_TIMERSLACK succeeds")
    }

    /// A process that chose its own slack keeps it: after a tight spell the
    /// thread goes back to the slack it inherited, not to Linux's 50 µs.
    #[cfg(target_os = "linux")]
    #[test]
    fn after_a_tight_spell_the_slack_is_the_inherited_one_again() {
        const CHOSEN: u64 = 300_000;
        let in_timer_thread = std::thread::spawn(|| {
            set_timer_slack(CHOSEN);
            // A thread started from here inherits CHOSEN, as a timer thread
            // does from the thread that builds the pool.
            std::thread::spawn(|| {
                let started_with = timer_slack();
                let mut waiting = Waiting::new(SPIN);
                waiting.plan(Some(1_000), FEW_TIMERS + 1, || 0, || true);
                let with_many = timer_slack();
                waiting.plan(Some(1_000), 1, || 0, || true);
                let with_few = timer_slack();
                waiting.plan(Some(1_000), FEW_TIMERS + 1, || 0, || true);
                (started_with, with_many, with_few, timer_slack())
            })
            .join()
            .expect("the inner thread does not panic")
        });
        let slacks = in_timer_thread.join().expect("the thread does not panic");
        assert_eq!(slacks, (CHOSEN, CHOSEN, 1_000, CHOSEN));
    }
}

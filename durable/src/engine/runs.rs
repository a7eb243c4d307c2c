//! [`RunLoop`]: claims, finishes and renewals, on a thread of the
//! scheduler's own (see `engine/mod.rs`).
//!
//! # What it keeps
//!
//! * `fires`: placements that fell due, waiting to be claimed.
//! * `ends`: runs that ended, waiting for their outcome to be stored. An
//!   outcome is never dropped because the store failed: it waits here, its
//!   lease renewed, until it is stored or the store says the run no longer
//!   holds its fence (then the run is *lost*: another run has the job).
//! * `held`: every run from its claim until its outcome is stored (or its
//!   fence is gone); the loop renews their leases every third of a lease,
//!   in the same transaction as whatever else it sends.
//!
//! # Claim only what can start
//!
//! A claimed job is held under a live lease, so a process that claimed
//! more than it can start would keep jobs from idle processes. The loop
//! claims at most as many jobs as there are free run slots
//! ([`Config::concurrency`](crate::Config::concurrency), by default the
//! executor's workers), plus as many as the free slots are expected to
//! start within [`CLAIM_AHEAD`] judging by how long recent handlers took
//! (none until a handler has run; none for a slot whose run has been going
//! longer than that). Short handlers are claimed in batches (a round trip
//! to the store per batch, not per job); long ones one per free slot. The
//! rest wait in `fires` until a run ends.
//!
//! # Turns
//!
//! Each turn drains the channel, then sends one [`Exchange`]: the ends
//! waiting (first: they free run slots and rows), the renewals if they are
//! due (second: a lease that ended under a stall is extended before a
//! claim sees it), and the claims that fit. A fire of a job whose run is
//! held live here (still renewed) is not claimed until a renewal finds
//! that run's fence gone (see `turn`). A failed exchange is sent again
//! after a back-off (10 ms, doubling, at most 1 s), all of it if the
//! failure is transient. Otherwise its claims are dropped (a later poll places those
//! jobs again), and the loop finds out what the store refuses: renewals
//! alone first; if they are stored, the store works, and the ends go one
//! by one; an end refused alone three times while the rest is stored is
//! dropped (its lease ends, and the job runs again). An end is never
//! dropped because the store as a whole fails (a file made read-only, a
//! disk full, a server away): it waits as long as that lasts.

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronopool::{Busy, PanicPayload};

use super::run::{self, RunGuard};
use super::{Ended, Shared, ToRuns};
use crate::completion::Completed;
use crate::error::StoreError;
use crate::metrics::Outcome;
use crate::store::{
    Claim, Conn, Exchange, Exchanged, Fence, Finish, History, Role, Row, RunEnd, Store,
    BATCH_LIMIT, KEEP_ALIVE,
};
use crate::time::{self, Micros};

/// How far ahead of free run slots the loop claims (module doc).
pub(crate) const CLAIM_AHEAD: Duration = Duration::from_millis(20);

/// How long after a claim held back by a limit the job is claimed again.
const LIMIT_RETRY: Duration = Duration::from_millis(250);

/// Times an outcome is refused alone, while the store takes everything
/// else, before it is dropped (its lease ends; the job runs again).
const GIVE_UP_AFTER: u32 = 3;

/// A placement that fell due.
struct Fire {
    key: String,
    name: String,
    fire: Micros,
    expired: bool,
    busy: Option<Busy>,
}

/// A run that ended, waiting to be stored.
struct End {
    fence: Fence,
    name: String,
    finish: Finish,
    skipped: bool,
    /// The end its handler stored in a transaction of its own.
    completed: Option<Completed>,
    busy: Option<Busy>,
}

/// How a turn is made up (see `RunLoop::turn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Everything waiting.
    Normal,
    /// After a failure the store called permanent: renewals alone.
    Probe,
    /// The store works: the `left` ends waiting when it was found to, one
    /// by one; the first of them refused `fails` times so far.
    Isolate { fails: u32, left: usize },
}

/// A run held: claimed, its outcome not stored yet.
struct Held {
    /// When it was handed to the executor, until its guard reported.
    handed: Option<Instant>,
    /// Its lease is renewed (false once a renewal found its fence gone).
    renew: bool,
}

/// The run loop (module doc).
pub(crate) struct RunLoop {
    shared: Arc<Shared>,
    store: Arc<dyn Store>,
    rx: Receiver<ToRuns>,
    conn: Option<Box<dyn Conn>>,
    /// The executor's worker threads.
    workers: usize,
    fires: VecDeque<Fire>,
    ends: VecDeque<End>,
    held: HashMap<Fence, Held>,
    /// Runs handed to the executor whose guard has not reported.
    running: usize,
    /// The next run number (fences are this owner's id and a number).
    next_run: i64,
    renew_at: Instant,
    /// Failed exchanges in a row.
    failures: u32,
    /// How turns are made up (see `turn`).
    mode: Mode,
    retry_at: Option<Instant>,
    /// The first of the failed exchanges in a row.
    failing_since: Option<Instant>,
    /// `Stop` came.
    stopping: bool,
    /// How long handlers take (an average that favours the recent), ns.
    run_time: Option<f64>,
    /// On a store with session locks: when to check the session next,
    /// while runs are held (`store::KEEP_ALIVE`).
    keep_alive_at: Option<Instant>,
}

impl RunLoop {
    pub(crate) fn new(
        shared: Arc<Shared>,
        store: Arc<dyn Store>,
        rx: Receiver<ToRuns>,
        workers: usize,
    ) -> Self {
        let renew_at = Instant::now() + shared.config.lease / 3;
        RunLoop {
            shared,
            store,
            rx,
            conn: None,
            workers,
            fires: VecDeque::new(),
            ends: VecDeque::new(),
            held: HashMap::new(),
            running: 0,
            next_run: 1,
            renew_at,
            failures: 0,
            mode: Mode::Normal,
            retry_at: None,
            failing_since: None,
            stopping: false,
            run_time: None,
            keep_alive_at: None,
        }
    }

    /// The loop: until stopped and every run held is stored (or a lease
    /// has passed since the stop: the leases end by themselves).
    pub(crate) fn run(mut self) {
        loop {
            if self.finished() {
                return;
            }
            self.receive();
            self.keep_alive();
            if self.retry_at.is_some_and(|t| Instant::now() < t) {
                continue;
            }
            // A panic here (a handler's captures dropped on this thread by
            // a refused run, a driver's bug) must not end the loop: the
            // turn's work is lost (its leases end, its jobs run again).
            let turned = catch_unwind(AssertUnwindSafe(|| self.turn()));
            if let Err(payload) = turned {
                let payload = PanicPayload::from(payload);
                let e = StoreError::other(format!("the run loop's turn panicked: {payload}"));
                self.shared
                    .counters
                    .store_error("claim, finish and renew", &e);
            }
        }
    }

    /// Stopped, and every run held is stored; or stopped with the store
    /// failing for longer than a lease (the leases have ended by
    /// themselves: the jobs will run again elsewhere). A run whose handler
    /// goes on is held, and its lease renewed, as long as it goes on.
    fn finished(&self) -> bool {
        if !self.stopping {
            return false;
        }
        let settled = self.ends.is_empty() && self.held.is_empty();
        let lease = self.shared.config.lease;
        settled
            || self
                .failing_since
                .is_some_and(|since| since.elapsed() > lease)
    }

    /// Waits for a message unless there is work now, then drains the
    /// channel.
    fn receive(&mut self) {
        if !self.work_now() {
            let next = self.next_deadline();
            let message = match next {
                Some(at) => self
                    .rx
                    .recv_timeout(at.saturating_duration_since(Instant::now())),
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match message {
                Ok(message) => self.handle(message),
                Err(RecvTimeoutError::Timeout) => {}
                // Every sender is gone with the scheduler: stop.
                Err(RecvTimeoutError::Disconnected) => self.handle(ToRuns::Stop),
            }
        }
        while let Ok(message) = self.rx.try_recv() {
            self.handle(message);
        }
    }

    fn work_now(&self) -> bool {
        if self.retry_at.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        !self.ends.is_empty()
            || self.renewal_due()
            || (!self.fires.is_empty() && self.claimable() > 0)
    }

    fn next_deadline(&self) -> Option<Instant> {
        let renew = (!self.held.is_empty()).then_some(self.renew_at);
        let alive = self.keep_alive_at.filter(|_| !self.held.is_empty());
        [renew, self.retry_at, alive].into_iter().flatten().min()
    }

    /// On a store with session locks, while runs are held: makes sure the
    /// session is alive every `KEEP_ALIVE`, so that a broken connection is
    /// opened again (and the lock taken again) before other schedulers
    /// take this one for dead. A failure is left to the next time.
    fn keep_alive(&mut self) {
        if self.held.is_empty() || !self.store.session_locks() {
            self.keep_alive_at = None;
            return;
        }
        let now = Instant::now();
        match self.keep_alive_at {
            Some(at) if now < at => {}
            Some(_) => {
                if let Some(conn) = &mut self.conn {
                    let _ = conn.keep_alive();
                }
                self.keep_alive_at = Some(now + KEEP_ALIVE);
            }
            None => self.keep_alive_at = Some(now + KEEP_ALIVE),
        }
    }

    fn renewal_due(&self) -> bool {
        !self.held.is_empty() && Instant::now() >= self.renew_at
    }

    fn handle(&mut self, message: ToRuns) {
        match message {
            ToRuns::Fire {
                key,
                name,
                fire,
                expired,
                busy,
            } => {
                let fire = Fire {
                    key,
                    name,
                    fire,
                    expired,
                    busy,
                };
                if self.stopping || !self.executor_runs() {
                    self.drop_fire(fire);
                } else {
                    self.fires.push_back(fire);
                }
            }
            ToRuns::Ended(ended) => self.ended(ended),
            ToRuns::Stop => {
                self.stopping = true;
                for fire in std::mem::take(&mut self.fires) {
                    self.drop_fire(fire);
                }
            }
        }
    }

    /// A run's guard reported.
    fn ended(&mut self, ended: Ended) {
        let Ended {
            fence,
            name,
            finish,
            ran_for,
            skipped,
            completed,
            busy,
        } = ended;
        self.running = self.running.saturating_sub(1);
        if let Some(held) = self.held.get_mut(&fence) {
            held.handed = None;
        }
        if let Some(ran_for) = ran_for {
            self.shared.counters.ran(&name, ran_for);
            let x = ran_for.as_nanos() as f64;
            self.run_time = Some(self.run_time.map_or(x, |avg| 0.8 * avg + 0.2 * x));
        }
        self.ends.push_back(End {
            fence,
            name,
            finish,
            skipped,
            completed,
            busy,
        });
    }

    /// True if the executor takes work.
    fn executor_runs(&self) -> bool {
        self.shared
            .executor
            .upgrade()
            .is_some_and(|e| !e.is_shutdown())
    }

    /// How many jobs may be claimed now (module doc).
    fn claimable(&self) -> usize {
        if self.stopping || !self.executor_runs() {
            return 0;
        }
        let slots = self
            .shared
            .config
            .concurrency
            .unwrap_or(self.workers)
            .max(1);
        let ahead = match self.run_time {
            Some(avg) => {
                let now = Instant::now();
                let slow = self
                    .held
                    .values()
                    .filter(|h| h.handed.is_some_and(|t| now - t > CLAIM_AHEAD))
                    .count();
                let quick_slots = slots.saturating_sub(slow) as f64;
                let per_slot = CLAIM_AHEAD.as_nanos() as f64 / avg.max(1.0);
                ((quick_slots * per_slot) as usize).min(BATCH_LIMIT)
            }
            None => 0,
        };
        slots.saturating_add(ahead).saturating_sub(self.running)
    }

    /// A fire is claimed now, or dropped: it leaves the placements (and
    /// may start the poll's follow-up). From here on, a job scheduled
    /// again for the same time is placed again (so a schedule that lands
    /// while its old placement is being claimed is not lost).
    fn unplace(&self, fire: &Fire) {
        if self.shared.placements.unplace(&fire.key, fire.fire) {
            self.shared.poll_now();
        }
    }

    /// A fire dropped unclaimed.
    fn drop_fire(&self, fire: Fire) {
        self.unplace(&fire);
        drop(fire.busy);
    }

    /// One exchange with the store (module doc): in normal turns, the
    /// ends, renewals and claims waiting, in that order; after a failure
    /// the store called permanent, first renewals alone (does the store
    /// work at all?), then the ends one by one (is one of them what it
    /// refuses?).
    fn turn(&mut self) {
        // The leases this turn sends run from here: the next renewal is due
        // a third of a lease from here, not from the exchange's end, so
        // that after an exchange that waited (a locked store) the next turn
        // renews at once, ahead of its claims.
        let started = Instant::now();
        let now = self.shared.now_micros();
        let take = match self.mode {
            Mode::Normal => self.ends.len().min(BATCH_LIMIT),
            Mode::Probe => 0,
            Mode::Isolate { .. } => self.ends.len().min(1),
        };
        let ends: Vec<End> = self.ends.drain(..take).collect();
        let mut claiming: Vec<Fire> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        let want = match self.mode {
            Mode::Normal => self.claimable().min(BATCH_LIMIT),
            Mode::Probe | Mode::Isolate { .. } => 0,
        };
        // The keys of the runs held here whose leases are live as far as
        // the last renewal knew. A fire of one of them is not claimed in
        // this turn: it is a lease that ended under a stall of this process
        // (a slow store, a loaded machine), a poll's placement that read
        // the job before this process claimed it, or a new job of the key
        // placed after a cancel under the run. Claimed with the run's lease
        // ended, the first two would take the live run over. So it is
        // parked, and the lease renewed now, in this exchange, ahead of its
        // claims; then `settle` drops it if the run still holds (the run's
        // end places what comes next) and claims it next turn if not.
        let mut parked: Vec<Fire> = Vec::new();
        let live = if want > 0 && !self.fires.is_empty() {
            live_keys(&self.held)
        } else {
            HashSet::new()
        };
        while keys.len() < want {
            let Some(fire) = self.fires.pop_front() else {
                break;
            };
            if live.contains(fire.key.as_str()) {
                self.renew_at = Instant::now();
                parked.push(fire);
                continue;
            }
            if seen.insert(fire.key.clone()) {
                self.unplace(&fire);
                keys.push(fire.key.clone());
                names.push(fire.name.clone());
                claiming.push(fire);
            } else {
                // The same job placed twice: one claim is enough.
                self.drop_fire(fire);
            }
        }
        let renew_now = self.renewal_due() || self.mode == Mode::Probe;
        let renewing: Vec<Fence> = if renew_now {
            self.held
                .iter()
                .filter(|(_, h)| h.renew)
                .map(|(f, _)| f.clone())
                .collect()
        } else {
            Vec::new()
        };
        if ends.is_empty() && keys.is_empty() && renewing.is_empty() {
            // (A parked fire made the renewal due: none is parked here.)
            for fire in parked {
                self.drop_fire(fire);
            }
            if self.renewal_due() {
                self.renew_at = Instant::now() + self.shared.config.lease / 3;
            }
            // Nothing to probe with, or nothing left to isolate.
            self.mode = Mode::Normal;
            return;
        }
        let lease_until = time::add(
            now,
            time::duration_micros_saturating(self.shared.config.lease),
        );
        let run = self.next_run;
        let pairs: Vec<(Fence, Finish)> = ends
            .iter()
            .map(|e| (e.fence.clone(), e.finish.clone()))
            .collect();
        let skipped: Vec<bool> = ends.iter().map(|e| e.skipped).collect();
        let shared = Arc::clone(&self.shared);
        let exchange = Exchange {
            owner: &shared.owner,
            ends: &pairs,
            history: shared.keeps_runs().then_some(History {
                skipped: &skipped,
                keep: shared.config.keep_runs,
            }),
            now,
            claim: (!keys.is_empty()).then_some(Claim {
                keys: &keys,
                names: &names,
                run,
                now,
                lease_until,
            }),
            renew: (!renewing.is_empty()).then_some((renewing.as_slice(), lease_until)),
        };
        let result = match self.conn() {
            Ok(conn) => conn.exchange(&exchange),
            Err(e) => Err(e),
        };
        match result {
            Ok(done) => {
                if !keys.is_empty() {
                    self.next_run += 1;
                }
                self.failures = 0;
                self.retry_at = None;
                self.failing_since = None;
                self.mode = match self.mode {
                    // The store works: one of the ends may be what it refuses.
                    Mode::Probe if !self.ends.is_empty() => Mode::Isolate {
                        fails: 0,
                        left: self.ends.len(),
                    },
                    Mode::Isolate { left, .. } if left > 1 => Mode::Isolate {
                        fails: 0,
                        left: left - 1,
                    },
                    _ => Mode::Normal,
                };
                if !renewing.is_empty() {
                    self.renew_at = started + self.shared.config.lease / 3;
                }
                self.apply(done, ends, claiming, &renewing, now, run);
                self.settle(parked);
            }
            Err(e) => {
                self.failed(&e, ends, claiming);
                // Parked again by the turn that sends the exchange again.
                for fire in parked.into_iter().rev() {
                    self.fires.push_front(fire);
                }
            }
        }
    }

    /// The fires a turn parked (see `turn`), after its exchange renewed:
    /// one whose key's run still holds is dropped (the run's end places
    /// what comes next); one whose run's fence is gone (cancelled, taken
    /// over, or its end stored) is claimed next turn.
    fn settle(&mut self, parked: Vec<Fire>) {
        if parked.is_empty() {
            return;
        }
        let live = live_keys(&self.held);
        let (still_held, freed): (Vec<Fire>, Vec<Fire>) = parked
            .into_iter()
            .partition(|fire| live.contains(fire.key.as_str()));
        for fire in still_held {
            self.drop_fire(fire);
        }
        for fire in freed.into_iter().rev() {
            self.fires.push_front(fire);
        }
    }

    fn conn(&mut self) -> Result<&mut Box<dyn Conn>, StoreError> {
        if self.conn.is_none() {
            self.conn = Some(self.store.connect(Role::Runs(&self.shared.owner))?);
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    /// An exchange failed: what is sent again, and when (module doc). No
    /// outcome is dropped because the store failed: only one that the
    /// store refuses alone, again and again, while it takes everything
    /// else.
    fn failed(&mut self, e: &StoreError, ends: Vec<End>, claiming: Vec<Fire>) {
        self.shared
            .counters
            .store_error("claim, finish and renew", e);
        self.failures += 1;
        self.failing_since.get_or_insert_with(Instant::now);
        let delay = Duration::from_millis(10)
            .saturating_mul(1 << self.failures.min(7))
            .min(Duration::from_secs(1));
        self.retry_at = Some(Instant::now() + delay);
        if e.is_transient() {
            for fire in claiming.into_iter().rev() {
                self.fires.push_front(fire);
            }
        } else {
            // A poll places these jobs again.
            for fire in claiming {
                drop(fire.busy);
            }
            self.mode = match self.mode {
                Mode::Isolate { fails, left } if ends.len() == 1 => {
                    if fails + 1 >= GIVE_UP_AFTER {
                        // The store takes the rest, not this one.
                        for end in ends {
                            self.held.remove(&end.fence);
                            let error = format!("the store refuses its outcome: {e}");
                            self.shared.counters.ended(
                                &end.fence.key,
                                &end.name,
                                Outcome::Lost,
                                Some(&error),
                            );
                        }
                        self.mode = if left > 1 {
                            Mode::Isolate {
                                fails: 0,
                                left: left - 1,
                            }
                        } else {
                            Mode::Normal
                        };
                        return;
                    }
                    Mode::Isolate {
                        fails: fails + 1,
                        left,
                    }
                }
                isolating @ Mode::Isolate { .. } => isolating,
                Mode::Normal | Mode::Probe => Mode::Probe,
            };
        }
        for end in ends.into_iter().rev() {
            self.ends.push_front(end);
        }
    }

    /// What a stored exchange did: outcomes counted and next occurrences
    /// placed, claimed runs started, renewals counted.
    fn apply(
        &mut self,
        done: Exchanged,
        ends: Vec<End>,
        claiming: Vec<Fire>,
        renewing: &[Fence],
        now: Micros,
        run: i64,
    ) {
        let mut deferred = Vec::new();
        for (end, stored) in ends.into_iter().zip(done.ended) {
            if stored == RunEnd::Deferred {
                // Sent again with the next exchange (its row is locked by
                // another transaction); held, and renewed, meanwhile.
                deferred.push(end);
                continue;
            }
            self.held.remove(&end.fence);
            self.stored(end, stored, now);
        }
        for end in deferred.into_iter().rev() {
            self.ends.push_front(end);
        }
        let expired: HashSet<&str> = claiming
            .iter()
            .filter(|f| f.expired)
            .map(|f| f.key.as_str())
            .collect();
        for row in done.claimed {
            let taken_over = expired.contains(row.key.as_str());
            self.start(row, taken_over, now, run);
        }
        // Held back by their handler's limit of runs at once: placed again
        // a moment later, to be claimed when a run of theirs has ended (in
        // any process).
        let again = time::add(now, time::duration_micros_saturating(LIMIT_RETRY));
        let stamp = self.shared.placements.stamp();
        for (key, name) in done.held_back {
            // A take-over stays one (its lease expiry is counted at its
            // claim).
            let expired = claiming.iter().any(|f| f.key == key && f.expired);
            self.shared
                .placements
                .place(&self.shared, &key, &name, again, expired, stamp);
        }
        // Claimed and handed over, or not due: a manual clock may move on.
        drop(claiming);
        let mut renewed = 0;
        for (fence, held) in renewing.iter().zip(done.renewed) {
            if held {
                renewed += 1;
            } else if let Some(h) = self.held.get_mut(fence) {
                // Taken over or cancelled: its end will
                // find the fence gone.
                h.renew = false;
            }
        }
        self.shared.counters.renewed(renewed);
    }

    /// A run's outcome was stored (or its job had been replaced: the run
    /// is counted by its own outcome, and the new job placed; or it found
    /// its fence gone).
    fn stored(&self, end: End, stored: RunEnd, now: Micros) {
        let key = &end.fence.key;
        // Its handler ended it in a transaction of its own and returned
        // success, and the fence was gone when this finish came: that
        // transaction committed (`completion.rs`). The run is what it
        // stored. (A handler that returned an error is counted by this
        // finish, lost: its transaction, if it committed, is not known to.)
        let (finish, stored) = match end.completed {
            Some(completed) if stored == RunEnd::Lost && end.finish.succeeded() => {
                (completed.finish, completed.end)
            }
            _ => (end.finish, stored),
        };
        let (outcome, next, error) = match &finish {
            _ if stored == RunEnd::Lost => (Outcome::Lost, None, None),
            Finish::Done { .. } if end.skipped => (Outcome::Skipped, None, None),
            Finish::Next { next_fire } if end.skipped => (Outcome::Skipped, Some(*next_fire), None),
            Finish::Done { .. } => (Outcome::Succeeded, None, None),
            Finish::Next { next_fire } => (Outcome::Succeeded, Some(*next_fire), None),
            Finish::Retry {
                next_fire, error, ..
            } => (Outcome::Retried, Some(*next_fire), Some(error.as_str())),
            Finish::Dead { error, .. } => (Outcome::Dead, None, Some(error.as_str())),
            Finish::DeadOccurrence { next_fire, error } => {
                (Outcome::Dead, Some(*next_fire), Some(error.as_str()))
            }
            Finish::Release => (Outcome::Released, None, None),
        };
        self.shared.counters.ended(key, &end.name, outcome, error);
        match stored {
            RunEnd::Superseded { name, next_fire } => {
                self.shared.place_if_near(key, &name, next_fire, now);
            }
            _ => {
                if let Some(next) = next {
                    self.shared.place_if_near(key, &end.name, next, now);
                }
            }
        }
        // The next occurrence is placed: a manual clock may move on.
        drop(end.busy);
    }

    /// A job was claimed: run it, or end it at once if it cannot run here.
    fn start(&mut self, row: Row, taken_over: bool, now: Micros, run: i64) {
        let late = now.saturating_sub(row.next_fire).max(0);
        self.shared
            .counters
            .claimed(&row.key, &row.name, row.attempt, taken_over, late);
        let fence = Fence {
            key: row.key.clone(),
            run,
        };
        self.held.insert(
            fence.clone(),
            Held {
                handed: None,
                renew: true,
            },
        );
        let handler = match run::unrunnable(&self.shared, &row, now) {
            Some(finish) => None.ok_or(finish),
            None => self.shared.handler(&row.name).ok_or(Finish::Release),
        };
        let handler = match handler {
            Ok(handler) => handler,
            Err(finish) => {
                let busy = self.shared.busy();
                self.ends.push_back(End {
                    fence,
                    name: row.name,
                    finish,
                    skipped: false,
                    completed: None,
                    busy,
                });
                return;
            }
        };
        let Ok(executor) = self.shared.executor() else {
            let busy = self.shared.busy();
            self.ends.push_back(End {
                fence,
                name: row.name,
                finish: Finish::Release,
                skipped: false,
                completed: None,
                busy,
            });
            return;
        };
        if let Some(held) = self.held.get_mut(&fence) {
            held.handed = Some(Instant::now());
        }
        self.running += 1;
        let guard = RunGuard::new(Arc::clone(&self.shared), fence, row.name.clone());
        // Refused (shut down meanwhile): the closure comes back in the
        // error and is dropped here, and its guard releases the claim.
        let _ = executor.execute(move || guard.run(row, &handler));
    }
}

/// The keys of the runs in `held` whose leases are live as far as the last
/// renewal knew.
fn live_keys(held: &HashMap<Fence, Held>) -> HashSet<&str> {
    held.iter()
        .filter(|(_, h)| h.renew)
        .map(|(f, _)| f.key.as_str())
        .collect()
}

// On SQLite: the test makes a lease end by writing to the file.
#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use chronopool::ScheduledExecutor;

    use crate::{Config, DurableScheduler, Schedule};

    fn eventually(what: &str, done: impl Fn() -> bool) {
        let give_up = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < give_up, "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Opens the handler's gate when dropped: a failed assert must not
    /// leave a run blocked under the pool's drop.
    struct Opens(Arc<AtomicBool>);

    impl Drop for Opens {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// A scheduler on a SQLite file, with a lease of 3 s (renewed every
    /// second) and no poll, whose job `k` is running, blocked until the
    /// fixture is dropped; its row then changed by `sql` from another
    /// connection, and a fire of `k` sent to the run loop that is not a
    /// take-over (as a poll's placement that read the job before its claim
    /// is).
    struct Fixture {
        // Dropped first: the gate opens before the pool is dropped.
        _opens: Opens,
        jobs: DurableScheduler,
        runs: Arc<AtomicUsize>,
        db: rusqlite::Connection,
        _pool: ScheduledExecutor,
        _dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new(sql: &str) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let open = Arc::new(AtomicBool::new(false));
            let opens = Opens(Arc::clone(&open));
            let pool = ScheduledExecutor::builder()
                .worker_threads(2)
                .build()
                .unwrap();
            let config = Config {
                lease: Duration::from_secs(3),
                window: Duration::from_secs(7200),
                poll_interval: Duration::from_secs(3600),
                ..Config::default()
            };
            let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), config).unwrap();
            let runs = Arc::new(AtomicUsize::new(0));
            let (r, o) = (Arc::clone(&runs), open);
            jobs.register("work", move |_| {
                r.fetch_add(1, Ordering::SeqCst);
                while !o.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(())
            });
            jobs.start().unwrap();
            jobs.schedule("k", "work", "", Schedule::After(Duration::ZERO))
                .unwrap();
            eventually("the run starts", || runs.load(Ordering::SeqCst) == 1);
            let db = rusqlite::Connection::open(dir.path().join("jobs.db")).unwrap();
            let fixture = Fixture {
                _opens: opens,
                jobs,
                runs,
                db,
                _pool: pool,
                _dir: dir,
            };
            let fire = fixture.read("next_fire").unwrap();
            fixture.db.execute(sql, []).unwrap();
            fixture
                .jobs
                .shared
                .fired("k".into(), "work".into(), fire, false);
            fixture
        }

        /// `column` of the row of `k`.
        fn read(&self, column: &str) -> Option<i64> {
            self.db
                .query_row(
                    &format!("SELECT {column} FROM chronopool_jobs WHERE key = 'k'"),
                    [],
                    |r| r.get(0),
                )
                .unwrap()
        }

        fn runs(&self) -> usize {
            self.runs.load(Ordering::SeqCst)
        }
    }

    /// A run held here whose lease ended under a stall of this process (its
    /// row's lease made to end, as a stall would); then a fire of its job
    /// that is not a take-over comes (a poll's placement that read the job
    /// before this process claimed it). The turn that gets it would claim
    /// a row whose lease has ended. Expected: the fire is not claimed and
    /// the lease is renewed; the run is not taken over, and runs once.
    #[test]
    fn a_fire_of_a_job_held_live_here_does_not_take_its_run_over() {
        let f = Fixture::new("UPDATE chronopool_jobs SET lease_until = 0 WHERE key = 'k'");
        eventually("the lease is renewed", || f.read("lease_until") > Some(0));
        // Time for a claim that would follow.
        std::thread::sleep(Duration::from_millis(200));
        let m = f.jobs.metrics();
        assert_eq!((f.runs(), m.lease_expired, m.lost), (1, 0, 0), "{m:?}");
        let Fixture {
            _opens, jobs, runs, ..
        } = f;
        drop(_opens);
        eventually("the run is stored", || jobs.metrics().running == 0);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(jobs.job("k").unwrap().is_none());
        assert!(jobs.shutdown(Duration::from_secs(10)));
    }

    /// A run held here, and its row made a new job of the same key, due
    /// (as a cancel and a schedule under the run make it, but with a
    /// sequence number a fresh poll has seen: no poll places it); then its
    /// fire comes. The run loop holds the key live until its renewal finds
    /// the fence gone. Expected: the new job is claimed once the renewal
    /// has found that, not left for the next full poll (an hour away).
    #[test]
    fn a_fire_parked_for_a_run_whose_fence_is_gone_is_claimed() {
        let f = Fixture::new(
            "UPDATE chronopool_jobs SET state = 'scheduled', owner = NULL, run = NULL,
                 owner_name = NULL, owner_lock = NULL, lease_until = NULL, seq = 0
             WHERE key = 'k'",
        );
        let give_up = Instant::now() + Duration::from_secs(5);
        while f.runs() < 2 && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(f.runs(), 2, "the new job did not run within 5 s");
        let Fixture { _opens, jobs, .. } = f;
        drop(_opens);
        eventually("both are stored", || jobs.metrics().running == 0);
        let m = jobs.metrics();
        assert_eq!((m.succeeded, m.lost), (1, 1), "{m:?}");
    }
}

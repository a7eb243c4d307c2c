//! A run's outcome lands on its own job only: a key scheduled again, or
//! cancelled, while its run is in flight keeps the new job (or none),
//! whatever the old run ends with; and the new job's runs wait for the old
//! run to end. On both stores, in real time, with handlers held at gates
//! the test opens.

mod common;
mod stores;

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use chronopool_durable::{DurableScheduler, Job, JobError, Schedule};
use stores::{eventually, pool, real_config, Store, BOTH};

/// Handlers held until the test opens their gate, and every run seen.
#[derive(Default)]
struct Gates {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    open: HashMap<String, Result<(), String>>,
    started: Vec<String>,
}

impl Gates {
    /// A handler that records its payload, waits for the gate of that
    /// name if the payload starts with "hold", and returns what the gate
    /// says (`Ok`, or a retryable error).
    fn register(self: &Arc<Self>, jobs: &DurableScheduler) {
        let gates = Arc::clone(self);
        jobs.register("work", move |job| {
            let payload = String::from_utf8(job.payload().to_vec()).unwrap();
            let mut state = gates.state.lock().unwrap();
            state.started.push(payload.clone());
            gates.changed.notify_all();
            if !payload.starts_with("hold") {
                return Ok(());
            }
            loop {
                if let Some(outcome) = state.open.get(&payload) {
                    return outcome.clone().map_err(JobError::retry);
                }
                state = gates.changed.wait(state).unwrap();
            }
        });
    }

    fn open(&self, gate: &str, outcome: Result<(), &str>) {
        let mut state = self.state.lock().unwrap();
        state
            .open
            .insert(gate.into(), outcome.map_err(str::to_owned));
        self.changed.notify_all();
    }

    fn runs_of(&self, payload: &str) -> usize {
        let state = self.state.lock().unwrap();
        state.started.iter().filter(|p| *p == payload).count()
    }
}

/// A one-shot run in flight; its key is scheduled again as a recurring
/// job, which waits for that run; the old run succeeds. Its outcome
/// (delete the one-shot) must not delete the recurring job, which then
/// runs on its own schedule.
#[test]
fn an_old_runs_success_does_not_delete_the_job_that_replaced_it() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(3);
        let jobs = store.open(&pool, real_config());
        let gates = Arc::new(Gates::default());
        gates.register(&jobs);
        jobs.start().unwrap();
        jobs.schedule("k", "work", "hold-old", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the old run starts", || gates.runs_of("hold-old") == 1);
        let every = Schedule::Every(Duration::from_millis(200));
        jobs.schedule("k", "work", "new", every).unwrap();
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(
            gates.runs_of("new"),
            0,
            "{kind:?}: the new job waits for the run in flight"
        );
        gates.open("hold-old", Ok(()));
        eventually("the recurring job goes on", || gates.runs_of("new") >= 3);
        assert!(jobs.job("k").unwrap().is_some(), "{kind:?}");
        assert_eq!(jobs.metrics().lost, 0, "{kind:?}: the old run ended");
    }
}

/// A one-shot run in flight fails (a retry); meanwhile its key was
/// scheduled again as another one-shot, due at once, which waits for it.
/// The old run's retry must not bring the old job back, nor run the new
/// one twice: the new one runs once, after the old run.
#[test]
fn an_old_runs_retry_does_not_run_the_new_job_again() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(3);
        let mut config = real_config();
        config.retry = chronopool::trigger::Backoff::exponential(
            Duration::from_millis(100),
            1.0,
            Duration::from_millis(100),
        );
        let jobs = store.open(&pool, config);
        let gates = Arc::new(Gates::default());
        gates.register(&jobs);
        jobs.start().unwrap();
        jobs.schedule("k", "work", "hold-old", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the old run starts", || gates.runs_of("hold-old") == 1);
        jobs.schedule("k", "work", "new", Schedule::After(Duration::ZERO))
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(gates.runs_of("new"), 0, "{kind:?}: it waits");
        gates.open("hold-old", Err("the old run fails"));
        eventually("the new job is done", || jobs.job("k").unwrap().is_none());
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(gates.runs_of("new"), 1, "{kind:?}");
        assert_eq!(gates.runs_of("hold-old"), 1, "{kind:?}");
    }
}

/// A job cancelled, then scheduled again, while its run is in flight: the
/// old run's outcome touches neither the cancel nor the new job.
#[test]
fn a_cancel_under_a_run_stays_and_a_new_job_after_it_is_its_own() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let gates = Arc::new(Gates::default());
        gates.register(&jobs);
        jobs.start().unwrap();
        jobs.schedule("k", "work", "hold-old", Schedule::After(Duration::ZERO))
            .unwrap();
        jobs.schedule(
            "gone",
            "work",
            "hold-gone",
            Schedule::Every(Duration::from_millis(50)),
        )
        .unwrap();
        eventually("both run", || {
            gates.runs_of("hold-old") == 1 && gates.runs_of("hold-gone") == 1
        });
        assert!(jobs.cancel("gone").unwrap());
        assert!(jobs.cancel("k").unwrap());
        let later = Schedule::After(Duration::from_secs(3600));
        jobs.schedule_all([Job::new("k", "work", "later", later)])
            .unwrap();
        gates.open("hold-old", Err("failed: a retry would bring it back"));
        gates.open("hold-gone", Ok(()));
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            jobs.job("gone").unwrap().is_none(),
            "{kind:?}: cancelled stays cancelled"
        );
        let k = jobs.job("k").unwrap().unwrap();
        assert_eq!(
            (k.payload.as_slice(), k.attempt, k.last_error),
            (&b"later"[..], 0, None),
            "{kind:?}"
        );
        assert_eq!(gates.runs_of("hold-gone"), 1, "{kind:?}");
    }
}

/// A run in flight; its job is cancelled and a new job of the same key
/// scheduled, due at once, while the run goes on. The new job is its own
/// (the cancel deleted the old one): expected, it runs at once, beside the
/// old run, not at the next full poll (an hour away here).
#[test]
fn a_new_job_after_a_cancel_under_a_run_runs_at_once() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(3);
        let mut config = real_config();
        config.window = Duration::from_secs(7200);
        config.poll_interval = Duration::from_secs(3600);
        let jobs = store.open(&pool, config);
        let gates = Arc::new(Gates::default());
        gates.register(&jobs);
        jobs.start().unwrap();
        jobs.schedule("k", "work", "hold-old", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the old run starts", || gates.runs_of("hold-old") == 1);
        assert!(jobs.cancel("k").unwrap());
        jobs.schedule("k", "work", "new", Schedule::After(Duration::ZERO))
            .unwrap();
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        while gates.runs_of("new") == 0 && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(5));
        }
        let ran = gates.runs_of("new");
        // Opened before the assert: a failed one must not leave a run
        // blocked under the pool's drop.
        gates.open("hold-old", Ok(()));
        assert_eq!(ran, 1, "{kind:?}: the new job did not run within 5 s");
        eventually("both are stored", || jobs.metrics().running == 0);
        assert_eq!(gates.runs_of("new"), 1, "{kind:?}");
        assert!(jobs.job("k").unwrap().is_none(), "{kind:?}");
    }
}

/// Holds the store's jobs table for `stall` from another connection, as a
/// slow or frozen store would: every statement on it waits meanwhile.
fn stall_store(store: &Store, stall: Duration) {
    match &store.params {
        Some(params) => {
            let mut client = postgres::Client::connect(params, postgres::NoTls).unwrap();
            let mut lock = client.transaction().unwrap();
            lock.batch_execute("LOCK TABLE chronopool_jobs IN ACCESS EXCLUSIVE MODE")
                .unwrap();
            std::thread::sleep(stall);
            lock.commit().unwrap();
        }
        None => {
            let mut conn = rusqlite::Connection::open(store.path()).unwrap();
            let lock = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
                .unwrap();
            std::thread::sleep(stall);
            lock.commit().unwrap();
        }
    }
}

/// A handler limited to one run at once has a run in flight; another of
/// its jobs falls due while the store stalls, from well before the run's
/// next renewal until past its lease. The first exchanges after the stall
/// hold both the claim of that job and a renewal. Expected: the live run's
/// lease is renewed before the claim counts the handler's runs, so the
/// other job waits for it (the limit holds), then runs once; nothing is
/// lost or taken over.
#[test]
fn a_limit_holds_for_a_live_run_whose_lease_ended_under_a_stalled_store() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(3);
        let jobs = store.open(&pool, real_config());
        let gates = Arc::new(Gates::default());
        gates.register(&jobs);
        jobs.set_limit("work", Some(1)).unwrap();
        jobs.start().unwrap();
        jobs.schedule("a", "work", "hold-a", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the first run starts", || gates.runs_of("hold-a") == 1);
        let due = std::time::SystemTime::now() + Duration::from_millis(300);
        jobs.schedule("b", "work", "b", Schedule::At(due)).unwrap();
        // Past the 1 s lease, counted from the last renewal before it.
        stall_store(&store, Duration::from_millis(2_500));
        std::thread::sleep(Duration::from_millis(1_000));
        let early = gates.runs_of("b");
        // Opened before the assert (see above).
        gates.open("hold-a", Ok(()));
        assert_eq!(early, 0, "{kind:?}: b ran beside the live run");
        eventually("b runs", || gates.runs_of("b") == 1);
        eventually("both are stored", || jobs.metrics().running == 0);
        std::thread::sleep(Duration::from_millis(300));
        let m = jobs.metrics();
        assert_eq!(
            (
                gates.runs_of("hold-a"),
                gates.runs_of("b"),
                m.lost,
                m.lease_expired
            ),
            (1, 1, 0, 0),
            "{kind:?}: {m:?}"
        );
    }
}

/// A run in flight; its key is scheduled again, due a moment later; the
/// store stalls from before that moment until well past the run's lease,
/// so the polls after the stall find the old run's lease ended and the new
/// job due. Expected: this process's own live run is not taken over (its
/// lease is renewed); the new job waits for it and then runs once;
/// nothing is lost.
#[test]
fn a_job_scheduled_again_and_due_while_the_store_stalls_waits_for_the_live_run() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(3);
        let jobs = store.open(&pool, real_config());
        let gates = Arc::new(Gates::default());
        gates.register(&jobs);
        jobs.start().unwrap();
        jobs.schedule("k", "work", "hold-old", Schedule::After(Duration::ZERO))
            .unwrap();
        eventually("the old run starts", || gates.runs_of("hold-old") == 1);
        let due = std::time::SystemTime::now() + Duration::from_millis(400);
        jobs.schedule("k", "work", "new", Schedule::At(due))
            .unwrap();
        // Past the 1 s lease, counted from the last renewal before it.
        stall_store(&store, Duration::from_millis(2_500));
        std::thread::sleep(Duration::from_millis(1_000));
        let early = gates.runs_of("new");
        // Opened before the assert (see above).
        gates.open("hold-old", Ok(()));
        assert_eq!(
            early, 0,
            "{kind:?}: the new job ran while the old run was live"
        );
        eventually("the new job runs", || gates.runs_of("new") == 1);
        eventually("both are stored", || jobs.metrics().running == 0);
        std::thread::sleep(Duration::from_millis(300));
        let m = jobs.metrics();
        assert_eq!(
            (gates.runs_of("new"), m.lost, m.lease_expired),
            (1, 0, 0),
            "{kind:?}: {m:?}"
        );
        assert!(jobs.job("k").unwrap().is_none(), "{kind:?}");
    }
}

//! The protocol of `store/mod.rs`, checked the same way on every store:
//! each function takes a fresh, empty store's connection (`sqlite/tests.rs`
//! and `postgres/tests.rs` run them all).

use chronopool::MissedRuns;

use super::{
    Claim, Conn, Due, DueQuery, Exchange, Exchanged, Fence, Finish, History, IfExists, JobState,
    ListQuery, NewJob, Retention,
};
use crate::owner::Owner;
use crate::time::Micros;

const S: Micros = 1_000_000;
/// A time in 2026.
const T0: Micros = 1_767_225_600 * S;

fn job(key: &str, name: &str, next_fire: Micros) -> NewJob {
    NewJob {
        key: key.into(),
        name: name.into(),
        payload: vec![1, 2, 3],
        recurrence: "once".into(),
        next_fire,
        missed: MissedRuns::Skip,
        catch_up: None,
        if_exists: IfExists::Replace,
    }
}

/// `job`, stored with `mode`.
fn job_if(key: &str, next_fire: Micros, payload: &[u8], mode: IfExists) -> NewJob {
    NewJob {
        payload: payload.to_vec(),
        if_exists: mode,
        ..job(key, "work", next_fire)
    }
}

/// A recurring `job` (every hour), stored with `mode`.
fn every_hour(key: &str, next_fire: Micros, mode: IfExists) -> NewJob {
    NewJob {
        recurrence: "every 3600000000us".into(),
        ..job_if(key, next_fire, &[1, 2, 3], mode)
    }
}

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

fn claim(conn: &mut dyn Conn, owner: &Owner, keys: &[&str], run: i64, now: Micros) -> Exchanged {
    claim_of(conn, owner, keys, "work", run, now)
}

/// A claim of jobs placed for the handler `name`.
fn claim_of(
    conn: &mut dyn Conn,
    owner: &Owner,
    keys: &[&str],
    name: &str,
    run: i64,
    now: Micros,
) -> Exchanged {
    let handlers = vec![name.to_owned(); keys.len()];
    let keys = names(keys);
    conn.exchange(&Exchange {
        owner,
        ends: &[],
        claim: Some(Claim {
            keys: &keys,
            names: &handlers,
            run,
            now,
            lease_until: now + 60 * S,
        }),
        renew: None,
        history: None,
        now: T0,
    })
    .unwrap()
}

fn end(conn: &mut dyn Conn, owner: &Owner, key: &str, run: i64, finish: Finish) -> bool {
    let ends = [(fence(key, run), finish)];
    let done = conn
        .exchange(&Exchange {
            owner,
            ends: &ends,
            claim: None,
            renew: None,
            history: None,
            now: T0,
        })
        .unwrap();
    done.ended[0].held()
}

fn renew(conn: &mut dyn Conn, owner: &Owner, key: &str, run: i64, until: Micros) -> bool {
    let fences = [fence(key, run)];
    conn.exchange(&Exchange {
        owner,
        ends: &[],
        claim: None,
        renew: Some((&fences, until)),
        history: None,
        now: T0,
    })
    .unwrap()
    .renewed[0]
}

/// Done and dead jobs finished before these times; no runs.
fn retention(done_before: Micros, dead_before: Micros) -> Retention {
    Retention {
        done_before,
        dead_before,
        runs_before: 0,
    }
}

fn fence(key: &str, run: i64) -> Fence {
    Fence {
        key: key.into(),
        run,
    }
}

const DONE: Finish = Finish::Done {
    at: T0,
    keep: false,
};

/// One claim wins; a lease that ends is taken over by anyone; the fence
/// decides whose finish counts.
pub(crate) fn one_claim_wins_and_only_the_fence_holder_finishes(conn: &mut dyn Conn) {
    let (a, b) = (Owner::new(None), Owner::new(Some("b".into())));
    conn.upsert(&[job("k", "work", T0)]).unwrap();
    assert!(
        claim(conn, &a, &["k"], 1, T0 - 1).claimed.is_empty(),
        "not due yet"
    );
    let claimed = claim(conn, &a, &["k"], 1, T0).claimed;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        (claimed[0].attempt, claimed[0].state),
        (1, JobState::Running)
    );
    assert!(
        claim(conn, &b, &["k"], 1, T0 + S).claimed.is_empty(),
        "leased"
    );
    // The lease (60 s) ends: b takes it over, and a's fence is gone.
    let taken = claim(conn, &b, &["k"], 7, T0 + 61 * S).claimed;
    assert_eq!(taken[0].attempt, 2);
    assert_eq!(taken[0].owner_name.as_deref(), Some("b"));
    assert!(!renew(conn, &a, "k", 1, T0 + 500 * S), "a renews nothing");
    assert_eq!(
        conn.get("k").unwrap().unwrap().lease_until,
        Some(T0 + 121 * S)
    );
    assert!(!end(conn, &a, "k", 1, DONE), "a finishes nothing");
    assert!(
        !end(conn, &b, "k", 1, DONE),
        "b's other run finishes nothing"
    );
    assert!(end(conn, &b, "k", 7, DONE));
    assert!(conn.get("k").unwrap().is_none());
}

/// A key scheduled again, or cancelled, while its run is in flight: the
/// A job replaced under a run keeps the run: its lease renews, no one else
/// claims it, and its finish (whatever its outcome) only ends it, the new
/// schedule standing. A cancelled one fences the run off.
pub(crate) fn a_job_replaced_under_a_run_keeps_the_run_and_a_cancel_fences_it(conn: &mut dyn Conn) {
    let (a, b) = (Owner::new(None), Owner::new(None));
    conn.upsert(&[job("k", "work", T0)]).unwrap();
    claim(conn, &a, &["k"], 1, T0);
    // Replaced by a job due at once: it still waits for the run.
    let stored = conn.upsert(&[job("k", "work", T0 + S)]).unwrap();
    assert_eq!(stored.len(), 1);
    assert!(stored[0].running, "not to be placed while its run goes on");
    assert!(
        renew(conn, &a, "k", 1, T0 + 30 * S),
        "the run keeps its lease"
    );
    assert!(
        claim(conn, &b, &["k"], 1, T0 + 2 * S).claimed.is_empty(),
        "no second run while the first is leased"
    );
    let retry = Finish::Retry {
        next_fire: T0 + S,
        error: "boom".into(),
        uncount: false,
    };
    let before = conn.last_seq().unwrap();
    assert!(end(conn, &a, "k", 1, retry), "the run ends");
    assert!(conn.last_seq().unwrap() > before, "polls are told");
    let again = conn.get("k").unwrap().unwrap();
    assert_eq!(
        (
            again.next_fire,
            again.state,
            again.attempt,
            again.last_error,
            again.lease_until
        ),
        (T0 + S, JobState::Scheduled, 0, None, None),
        "the new schedule stands, not the run's retry"
    );
    // Replaced under a run whose owner is gone: claimed at the new time,
    // not when the lease ends, as a first attempt.
    let run = claim(conn, &a, &["k"], 2, T0 + 3600 * S).claimed;
    assert_eq!(run[0].attempt, 1);
    conn.upsert(&[job("k", "work", T0 + 7200 * S)]).unwrap();
    let due = conn
        .due(&DueQuery {
            until: T0 + 7200 * S,
            names: &names(&["work"]),
            limit: 10,
            unhandled_before: 0,
            owner: "someone else",
            now: T0 + 3700 * S,
        })
        .unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].fire, due[0].expired), (T0 + 7200 * S, true));
    assert!(
        claim(conn, &b, &["k"], 1, T0 + 3661 * S).claimed.is_empty(),
        "the lease ended, the new time has not come"
    );
    let taken = claim(conn, &b, &["k"], 1, T0 + 7200 * S).claimed;
    assert_eq!((taken[0].attempt, taken[0].next_fire), (1, T0 + 7200 * S));
    assert!(!end(conn, &a, "k", 2, DONE), "a's run was taken over");
    // Cancelled: the run's finish finds nothing.
    assert!(conn.delete("k").unwrap());
    assert!(!end(conn, &b, "k", 1, Finish::Next { next_fire: T0 }));
    assert!(
        conn.get("k").unwrap().is_none(),
        "a cancelled job stays gone"
    );
}

/// The three [`IfExists`] choices, on scheduled, running, dead and missing
/// rows.
pub(crate) fn upserts_keep_the_same_job_keep_its_time_or_replace_it(conn: &mut dyn Conn) {
    let a = Owner::new(None);
    // The same one-shot at the same time: kept, nothing stored or told.
    conn.upsert(&[job_if("once", T0, &[1], IfExists::KeepSame)])
        .unwrap();
    let seq = conn.last_seq().unwrap();
    let stored = conn
        .upsert(&[job_if("once", T0, &[1], IfExists::KeepSame)])
        .unwrap();
    assert!(stored.is_empty(), "kept: {stored:?}");
    // A one-shot at another wall time (its time is in its text), or with
    // another payload: replaced.
    let later = NewJob {
        recurrence: format!("once at {}", T0 + S),
        ..job_if("once", T0 + S, &[1], IfExists::KeepSame)
    };
    let stored = conn.upsert(std::slice::from_ref(&later)).unwrap();
    assert_eq!(stored[0].next_fire, T0 + S);
    conn.upsert(&[NewJob {
        payload: vec![2],
        ..later.clone()
    }])
    .unwrap();
    assert_eq!(conn.get("once").unwrap().unwrap().payload, vec![2]);
    assert!(conn.last_seq().unwrap() > seq);
    // A recurring job at every start: its rule is the same, its next run
    // is kept (not pushed back an hour).
    conn.upsert(&[every_hour("hourly", T0, IfExists::KeepSame)])
        .unwrap();
    let stored = conn
        .upsert(&[every_hour("hourly", T0 + 1800 * S, IfExists::KeepSame)])
        .unwrap();
    assert!(stored.is_empty());
    assert_eq!(conn.get("hourly").unwrap().unwrap().next_fire, T0);
    // Keep the time, take the payload (debounce).
    let stored = conn
        .upsert(&[job_if("hourly", T0 + 99 * S, &[9], IfExists::KeepTime)])
        .unwrap();
    assert_eq!(stored[0].next_fire, T0, "the stored time");
    let row = conn.get("hourly").unwrap().unwrap();
    assert_eq!(
        (row.next_fire, row.recurrence.as_str(), row.payload),
        (T0, "every 3600000000us", vec![9])
    );
    // On a missing key, KeepTime stores the job.
    let stored = conn
        .upsert(&[job_if("new", T0 + 5 * S, &[5], IfExists::KeepTime)])
        .unwrap();
    assert_eq!(stored[0].next_fire, T0 + 5 * S);
    // A running job: kept if the same, its payload taken under KeepTime,
    // and its run's finish applies as usual (it was not replaced).
    claim(conn, &a, &["hourly"], 1, T0);
    let same = NewJob {
        payload: vec![9],
        ..every_hour("hourly", T0 + 7 * S, IfExists::KeepSame)
    };
    assert!(conn.upsert(&[same]).unwrap().is_empty(), "kept");
    conn.upsert(&[job_if("hourly", T0 + 7 * S, &[4], IfExists::KeepTime)])
        .unwrap();
    let row = conn.get("hourly").unwrap().unwrap();
    assert_eq!(
        (row.state, row.payload.clone()),
        (JobState::Running, vec![4])
    );
    assert!(end(
        conn,
        &a,
        "hourly",
        1,
        Finish::Next {
            next_fire: T0 + 3600 * S
        }
    ));
    assert_eq!(
        conn.get("hourly").unwrap().unwrap().next_fire,
        T0 + 3600 * S
    );
    // A dead job is scheduled anew, whatever the mode.
    claim(conn, &a, &["once"], 2, T0 + S);
    end(
        conn,
        &a,
        "once",
        2,
        Finish::Dead {
            error: "gone".into(),
            at: T0 + S,
        },
    );
    let stored = conn
        .upsert(&[job_if("once", T0 + S, &[2], IfExists::KeepSame)])
        .unwrap();
    assert_eq!(stored.len(), 1);
    let row = conn.get("once").unwrap().unwrap();
    assert_eq!(
        (row.state, row.attempt, row.last_error),
        (JobState::Scheduled, 0, None)
    );
    // Of two jobs with one key in a batch, the later is the one stored.
    let stored = conn
        .upsert(&[
            job_if("twice", T0, &[1], IfExists::Replace),
            job_if("twice", T0 + 2 * S, &[2], IfExists::Replace),
        ])
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(conn.get("twice").unwrap().unwrap().payload, vec![2]);
}

/// A claim sent again with its fence (its reply was lost) returns what it
/// claimed, counted once; a released claim is uncounted and due again.
pub(crate) fn claims_are_idempotent_and_releases_uncount(conn: &mut dyn Conn) {
    let a = Owner::new(None);
    conn.upsert(&[job("k", "work", T0), job("j", "work", T0)])
        .unwrap();
    let first = claim(conn, &a, &["k", "j"], 4, T0).claimed;
    assert_eq!(first.len(), 2);
    let again = claim(conn, &a, &["k", "j"], 4, T0 + S).claimed;
    assert_eq!(again.len(), 2, "the same fence: the same rows");
    assert!(again.iter().all(|r| r.attempt == 1), "counted once");
    assert!(end(conn, &a, "k", 4, Finish::Release));
    let k = conn.get("k").unwrap().unwrap();
    assert_eq!(
        (k.state, k.attempt, k.next_fire),
        (JobState::Scheduled, 0, T0)
    );
    assert_eq!(claim(conn, &a, &["k"], 5, T0).claimed[0].attempt, 1);
}

/// Finishes: a recurring job's next fire, a retry keeps its count (or
/// uncounts), dead and done rows keep `finished_at` for retention.
pub(crate) fn finishes_move_the_row_as_the_protocol_says(conn: &mut dyn Conn) {
    let a = Owner::new(None);
    conn.upsert(&[
        job("r", "work", T0),
        job("d", "work", T0),
        job("k", "work", T0),
    ])
    .unwrap();
    claim(conn, &a, &["r", "d", "k"], 1, T0);
    let retry = Finish::Retry {
        next_fire: T0 + 50 * S,
        error: "boom".into(),
        uncount: false,
    };
    assert!(end(conn, &a, "r", 1, retry));
    let r = conn.get("r").unwrap().unwrap();
    assert_eq!(
        (r.state, r.attempt, r.next_fire, r.last_error.as_deref()),
        (JobState::Scheduled, 1, T0 + 50 * S, Some("boom"))
    );
    claim(conn, &a, &["r"], 2, T0 + 50 * S);
    assert!(end(
        conn,
        &a,
        "r",
        2,
        Finish::Next {
            next_fire: T0 + 99 * S
        }
    ));
    let r = conn.get("r").unwrap().unwrap();
    assert_eq!(
        (r.attempt, r.next_fire, r.last_error),
        (0, T0 + 99 * S, None)
    );
    let dead = Finish::Dead {
        error: "gone".into(),
        at: T0 + 5 * S,
    };
    assert!(end(conn, &a, "d", 1, dead));
    let kept = Finish::Done {
        at: T0 + 6 * S,
        keep: true,
    };
    assert!(end(conn, &a, "k", 1, kept));
    let in_state = |conn: &mut dyn Conn, state| {
        conn.query(&ListQuery {
            state: Some(state),
            limit: 100,
            ..ListQuery::default()
        })
        .unwrap()
    };
    assert_eq!(in_state(conn, JobState::Dead).len(), 1);
    assert_eq!(in_state(conn, JobState::Done)[0].key, "k");
    assert_eq!(
        conn.clean(&retention(T0 + 6 * S, T0)).unwrap(),
        0,
        "finished at, not before"
    );
    assert_eq!(conn.clean(&retention(T0 + 7 * S, T0)).unwrap(), 1, "done");
    assert!(conn.revive("d", T0 + 8 * S).unwrap());
    assert!(!conn.revive("r", T0).unwrap(), "only the dead revive");
    let d = conn.get("d").unwrap().unwrap();
    assert_eq!(
        (d.state, d.attempt, d.next_fire),
        (JobState::Scheduled, 0, T0 + 8 * S)
    );
    assert_eq!(
        conn.clean(&retention(T0 + 100 * S, T0 + 100 * S)).unwrap(),
        0
    );
}

/// Due lists a handler's jobs first (others' fill no batch), earliest
/// first, with running rows at their lease's end; others' jobs only after
/// they waited.
pub(crate) fn due_lists_this_schedulers_jobs_first(conn: &mut dyn Conn) {
    let a = Owner::new(None);
    let others: Vec<NewJob> = (0..50)
        .map(|i| job(&format!("o{i}"), "other", T0 - S))
        .collect();
    conn.upsert(&others).unwrap();
    conn.upsert(&[job("m2", "mine", T0 + 2 * S), job("m1", "mine", T0 + S)])
        .unwrap();
    conn.upsert(&[job("run", "mine", T0)]).unwrap();
    assert!(
        claim(conn, &a, &["run"], 1, T0).claimed.is_empty(),
        "placed for another handler"
    );
    claim_of(conn, &a, &["run"], "mine", 1, T0);
    let mine = names(&["mine"]);
    let query = DueQuery {
        until: T0 + 100 * S,
        names: &mine,
        limit: 3,
        unhandled_before: T0 - 2 * S,
        owner: "another",
        now: T0,
    };
    let due = conn.due(&query).unwrap();
    let fires: Vec<(&str, Micros, bool)> = due
        .iter()
        .map(|d| (d.key.as_str(), d.fire, d.expired))
        .collect();
    assert_eq!(
        fires,
        [
            ("m1", T0 + S, false),
            ("m2", T0 + 2 * S, false),
            ("run", T0 + 60 * S + 1, true)
        ]
    );
    // Its owner's own poll leaves it alone while the lease lasts.
    let own = conn
        .due(&DueQuery {
            owner: &a.id,
            ..query
        })
        .unwrap();
    assert_eq!(own.len(), 2, "{own:?}");
    let ended = conn
        .due(&DueQuery {
            owner: &a.id,
            now: T0 + 61 * S,
            ..query
        })
        .unwrap();
    assert_eq!(ended.len(), 3, "its lease ended: taken over by anyone");
    // Others' jobs, once they have waited.
    let waited = conn
        .due(&DueQuery {
            unhandled_before: T0,
            ..query
        })
        .unwrap();
    let others: Vec<&Due> = waited.iter().filter(|d| d.name == "other").collect();
    assert_eq!(others.len(), 3, "at most a batch of them");
}

/// Every conformance check, each on a fresh store from `fresh`.
/// What the review of the first version found: a running one-shot
/// debounced runs again with its new payload; one key twice in a batch
/// stores the later job alone, whatever the modes, on every store; a claim
/// sent again does not take a job replaced meanwhile; a one-shot at a wall
/// time that is being retried is the same job when scheduled again.
pub(crate) fn if_exists_edges_hold(conn: &mut dyn Conn) {
    let a = Owner::new(None);
    // A running one-shot, debounced: its run has the old payload, so it
    // runs again after it, at once, with the new one.
    conn.upsert(&[job_if("digest", T0, b"3", IfExists::KeepTime)])
        .unwrap();
    claim(conn, &a, &["digest"], 1, T0);
    conn.upsert(&[job_if("digest", T0 + 60 * S, b"4", IfExists::KeepTime)])
        .unwrap();
    assert!(end(conn, &a, "digest", 1, DONE), "the run ends");
    let row = conn.get("digest").unwrap().unwrap();
    assert_eq!(
        (row.state, row.next_fire, row.payload),
        (JobState::Scheduled, T0, b"4".to_vec()),
        "not deleted with the old run: due again at its time"
    );
    // One key twice in a batch: the later job alone, against the stored
    // row (here the stored time is kept: the later job keeps it).
    conn.upsert(&[
        job_if("twice", T0 + 5 * S, b"A", IfExists::Replace),
        job_if("twice", T0 + 9 * S, b"B", IfExists::KeepTime),
    ])
    .unwrap();
    conn.upsert(&[
        job_if("twice", T0 + 5 * S, b"C", IfExists::Replace),
        job_if("twice", T0 + 9 * S, b"D", IfExists::KeepTime),
    ])
    .unwrap();
    let row = conn.get("twice").unwrap().unwrap();
    assert_eq!((row.next_fire, row.payload), (T0 + 9 * S, b"D".to_vec()));
    // A claim sent again after its job was replaced: not that claim's.
    conn.upsert(&[job("resent", "work", T0)]).unwrap();
    assert_eq!(claim(conn, &a, &["resent"], 7, T0).claimed.len(), 1);
    conn.upsert(&[job("resent", "work", T0 + 3600 * S)])
        .unwrap();
    assert!(
        claim(conn, &a, &["resent"], 7, T0).claimed.is_empty(),
        "the new job waits for its time"
    );
    // A one-shot at a wall time, failing and retried, scheduled again as
    // it was: the same job, its retry kept.
    let at = NewJob {
        recurrence: format!("once at {T0}"),
        ..job_if("at", T0, b"x", IfExists::KeepSame)
    };
    conn.upsert(std::slice::from_ref(&at)).unwrap();
    claim(conn, &a, &["at"], 8, T0);
    let retry = Finish::Retry {
        next_fire: T0 + 30 * S,
        error: "down".into(),
        uncount: false,
    };
    assert!(end(conn, &a, "at", 8, retry));
    assert!(conn.upsert(&[at]).unwrap().is_empty(), "kept");
    let row = conn.get("at").unwrap().unwrap();
    assert_eq!((row.attempt, row.next_fire), (1, T0 + 30 * S));
}

/// The history: a run's end writes its row when it holds its fence (not
/// after a cancel), and the retention trims each job to its last runs and
/// drops the old ones. Limits hold claims back; a paused job or handler is
/// neither due nor claimed.
pub(crate) fn history_limits_and_pauses_hold(conn: &mut dyn Conn) {
    let a = Owner::new(Some("a".into()));
    let run_kept = |conn: &mut dyn Conn, run: i64, at: Micros, finish: Finish, keep: usize| {
        assert_eq!(claim(conn, &a, &["h"], run, at).claimed.len(), 1);
        let ends = [(fence("h", run), finish)];
        conn.exchange(&Exchange {
            owner: &a,
            ends: &ends,
            claim: None,
            renew: None,
            history: Some(History {
                skipped: &[false],
                keep,
            }),
            now: at + S,
        })
        .unwrap()
    };
    let run_once = |conn: &mut dyn Conn, run: i64, at: Micros, finish: Finish| {
        run_kept(conn, run, at, finish, 100)
    };
    conn.upsert(&[every_hour("h", T0, IfExists::KeepSame)])
        .unwrap();
    for run in 1..=5 {
        let at = T0 + (run - 1) * 3600 * S;
        run_once(
            conn,
            run,
            at,
            Finish::Next {
                next_fire: at + 3600 * S,
            },
        );
    }
    let retry = Finish::Retry {
        next_fire: T0 + 6 * 3600 * S,
        error: "busy".into(),
        uncount: false,
    };
    run_once(conn, 6, T0 + 5 * 3600 * S, retry);
    let runs = conn.runs(Some("h"), 100).unwrap();
    assert_eq!(runs.len(), 6);
    assert_eq!(
        (
            runs[0].outcome.as_str(),
            runs[0].error.as_deref(),
            runs[0].attempt
        ),
        ("failed", Some("busy"), 1)
    );
    assert_eq!(runs[1].outcome, "succeeded");
    assert_eq!(runs[5].started_at, Some(T0));
    assert_eq!(runs[5].ended_at, T0 + S);
    assert_eq!(runs[0].owner_name.as_deref(), Some("a"));
    // A cancelled run writes none.
    assert_eq!(
        claim(conn, &a, &["h"], 7, T0 + 6 * 3600 * S).claimed.len(),
        1
    );
    assert!(conn.delete("h").unwrap());
    let ends = [(
        fence("h", 7),
        Finish::Done {
            at: T0,
            keep: false,
        },
    )];
    conn.exchange(&Exchange {
        owner: &a,
        ends: &ends,
        claim: None,
        renew: None,
        history: Some(History {
            skipped: &[false],
            keep: 100,
        }),
        now: T0,
    })
    .unwrap();
    assert_eq!(conn.runs(None, 100).unwrap().len(), 6);
    let counts: Vec<_> = conn.run_counts(T0 + 2 * 3600 * S).unwrap();
    assert_eq!(
        counts,
        [("failed".to_owned(), 1), ("succeeded".to_owned(), 3)]
    );
    // A run written with a keep of two leaves the job's last two.
    conn.upsert(&[every_hour("h", T0, IfExists::KeepSame)])
        .unwrap();
    let next = Finish::Next {
        next_fire: T0 + 3600 * S,
    };
    run_kept(conn, 8, T0, next, 2);
    let runs = conn.runs(Some("h"), 100).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0].outcome.as_str(), runs[1].outcome.as_str()),
        ("succeeded", "failed")
    );
    // Then the old ones go.
    let mut old = retention(T0, T0);
    old.runs_before = T0 + 100 * 3600 * S;
    conn.clean(&old).unwrap();
    assert!(conn.runs(None, 100).unwrap().is_empty());

    // A limit of one: a second claim of the handler is held back while the
    // first run's lease lives, and taken once it has ended.
    conn.set_limit("work", Some(1)).unwrap();
    conn.upsert(&[job("l1", "work", T0), job("l2", "work", T0)])
        .unwrap();
    let first = claim_of(conn, &a, &["l1", "l2"], "work", 10, T0);
    assert_eq!(first.claimed.len(), 1);
    assert_eq!(first.held_back.len(), 1);
    let held = first.held_back[0].0.clone();
    let again = claim_of(conn, &a, &[held.as_str()], "work", 11, T0 + S);
    assert!(again.claimed.is_empty() && again.held_back.len() == 1);
    // Past the first run's lease (60 s), it no longer counts.
    let later = claim_of(conn, &a, &[held.as_str()], "work", 12, T0 + 61 * S);
    assert_eq!(later.claimed.len(), 1);
    assert_eq!(conn.limits().unwrap(), [("work".to_owned(), 1)]);
    // A limit of 0 holds back for good: nothing to retry.
    conn.set_limit("work", Some(0)).unwrap();
    conn.upsert(&[job("l3", "work", T0)]).unwrap();
    let zero = claim_of(conn, &a, &["l3"], "work", 13, T0 + 62 * S);
    assert!(zero.claimed.is_empty() && zero.held_back.is_empty());
    conn.set_limit("work", None).unwrap();
    assert!(conn.limits().unwrap().is_empty());

    // Paused, by itself or by its handler: not due, not claimed.
    conn.upsert(&[job("p", "pausing", T0)]).unwrap();
    let names = names(&["pausing"]);
    let due = |conn: &mut dyn Conn| {
        conn.due(&DueQuery {
            until: T0 + S,
            names: &names,
            limit: 10,
            unhandled_before: T0 - S,
            owner: "nobody",
            now: T0,
        })
        .unwrap()
        .len()
    };
    assert_eq!(due(conn), 1);
    assert!(conn.set_paused("p", true).unwrap());
    assert_eq!(due(conn), 0);
    assert!(claim_of(conn, &a, &["p"], "pausing", 20, T0)
        .claimed
        .is_empty());
    let seq = conn.last_seq().unwrap();
    assert!(conn.set_paused("p", false).unwrap());
    let (fresh, _) = conn.fresh(seq, T0 + S, &names, 10).unwrap();
    assert_eq!(fresh.len(), 1, "a resume is seen by a fresh poll");
    conn.set_name_paused("pausing", true).unwrap();
    assert_eq!(due(conn), 0);
    assert_eq!(conn.paused_names().unwrap(), ["pausing"]);
    let seq = conn.last_seq().unwrap();
    conn.set_name_paused("pausing", false).unwrap();
    let (fresh, _) = conn.fresh(seq, T0 + S, &names, 10).unwrap();
    assert_eq!(fresh.len(), 1, "a handler's resume too");
    assert_eq!(
        claim_of(conn, &a, &["p"], "pausing", 21, T0).claimed.len(),
        1
    );
}

/// A retry keeps the occurrence it belongs to (`Row::occurrence`), across
/// retries and releases, until the job goes on to an occurrence of its own
/// or gets a new schedule: replaced, rescheduled or revived (a `KeepTime`
/// upsert keeps it, as it keeps the time).
pub(crate) fn a_retry_keeps_its_occurrence(conn: &mut dyn Conn) {
    let a = Owner::new(None);
    let occurrence = |conn: &mut dyn Conn| {
        let row = conn.get("e").unwrap().unwrap();
        (row.next_fire, row.occurrence)
    };
    let retry = |at: Micros| Finish::Retry {
        next_fire: at,
        error: "boom".into(),
        uncount: false,
    };
    conn.upsert(&[every_hour("e", T0, IfExists::Replace)])
        .unwrap();
    assert_eq!(occurrence(conn), (T0, T0));
    assert_eq!(claim(conn, &a, &["e"], 1, T0).claimed[0].occurrence, T0);
    assert!(end(conn, &a, "e", 1, retry(T0 + 5 * S)));
    assert_eq!(occurrence(conn), (T0 + 5 * S, T0), "a retry keeps it");
    assert_eq!(
        claim(conn, &a, &["e"], 2, T0 + 5 * S).claimed[0].occurrence,
        T0
    );
    assert!(end(conn, &a, "e", 2, retry(T0 + 9 * S)));
    assert_eq!(occurrence(conn), (T0 + 9 * S, T0), "and a second");
    claim(conn, &a, &["e"], 3, T0 + 9 * S);
    assert!(end(conn, &a, "e", 3, Finish::Release));
    assert_eq!(occurrence(conn), (T0 + 9 * S, T0), "a release too");
    claim(conn, &a, &["e"], 4, T0 + 9 * S);
    let next = T0 + 3600 * S;
    assert!(end(conn, &a, "e", 4, Finish::Next { next_fire: next }));
    assert_eq!(occurrence(conn), (next, next), "the next occurrence's own");
    let retried = |conn: &mut dyn Conn, run: i64| {
        claim(conn, &a, &["e"], run, next);
        assert!(end(conn, &a, "e", run, retry(next + S)));
        assert_eq!(occurrence(conn), (next + S, next));
    };
    retried(conn, 5);
    conn.upsert(&[every_hour("e", T0 + 7200 * S, IfExists::KeepTime)])
        .unwrap();
    assert_eq!(occurrence(conn), (next + S, next), "KeepTime keeps it");
    conn.upsert(&[every_hour("e", T0 + 7200 * S, IfExists::Replace)])
        .unwrap();
    assert_eq!(occurrence(conn), (T0 + 7200 * S, T0 + 7200 * S), "replaced");
    conn.upsert(&[every_hour("e", next, IfExists::Replace)])
        .unwrap();
    retried(conn, 6);
    assert!(conn
        .reschedule("e", "every 60000000us", T0 + 9000 * S)
        .unwrap());
    assert_eq!(
        occurrence(conn),
        (T0 + 9000 * S, T0 + 9000 * S),
        "rescheduled"
    );
    conn.upsert(&[every_hour("e", next, IfExists::Replace)])
        .unwrap();
    retried(conn, 7);
    claim(conn, &a, &["e"], 8, next + S);
    let after = T0 + 7200 * S;
    let dead_occurrence = Finish::DeadOccurrence {
        next_fire: after,
        error: "gone".into(),
    };
    assert!(end(conn, &a, "e", 8, dead_occurrence));
    assert_eq!(occurrence(conn), (after, after), "a dead occurrence's next");
    conn.upsert(&[every_hour("e", next, IfExists::Replace)])
        .unwrap();
    retried(conn, 9);
    claim(conn, &a, &["e"], 10, next + S);
    let dead = Finish::Dead {
        error: "gone".into(),
        at: next + S,
    };
    assert!(end(conn, &a, "e", 10, dead));
    assert_eq!(occurrence(conn), (next + S, next + S), "dead: cleared");
    assert!(conn.revive("e", next + 2 * S).unwrap());
    assert_eq!(occurrence(conn), (next + 2 * S, next + 2 * S), "revived");
}

pub(crate) fn all(mut fresh: impl FnMut() -> Box<dyn Conn>) {
    history_limits_and_pauses_hold(&mut *fresh());
    one_claim_wins_and_only_the_fence_holder_finishes(&mut *fresh());
    a_job_replaced_under_a_run_keeps_the_run_and_a_cancel_fences_it(&mut *fresh());
    upserts_keep_the_same_job_keep_its_time_or_replace_it(&mut *fresh());
    if_exists_edges_hold(&mut *fresh());
    claims_are_idempotent_and_releases_uncount(&mut *fresh());
    finishes_move_the_row_as_the_protocol_says(&mut *fresh());
    a_retry_keeps_its_occurrence(&mut *fresh());
    due_lists_this_schedulers_jobs_first(&mut *fresh());
}

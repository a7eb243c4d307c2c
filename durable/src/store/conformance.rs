//! The protocol of `store/mod.rs`, checked the same way on every store:
//! each function takes a fresh, empty store's connection (`sqlite/tests.rs`
//! and `postgres/tests.rs` run them all).

use chronopool::MissedRuns;

use super::{Claim, Conn, Due, DueQuery, Exchange, Exchanged, Fence, Finish, JobState, NewJob};
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
        })
        .unwrap();
    done.ended[0]
}

fn renew(conn: &mut dyn Conn, owner: &Owner, key: &str, run: i64, until: Micros) -> bool {
    let fences = [fence(key, run)];
    conn.exchange(&Exchange {
        owner,
        ends: &[],
        claim: None,
        renew: Some((&fences, until)),
    })
    .unwrap()
    .renewed[0]
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
/// old run's renewal and finish touch nothing of the new job.
pub(crate) fn a_job_replaced_or_cancelled_under_a_run_is_fenced_off(conn: &mut dyn Conn) {
    let a = Owner::new(None);
    conn.upsert(&[job("k", "work", T0)]).unwrap();
    claim(conn, &a, &["k"], 1, T0);
    conn.upsert(&[job("k", "work", T0 + 3600 * S)]).unwrap();
    assert!(!renew(conn, &a, "k", 1, T0 + 500 * S));
    assert!(!end(conn, &a, "k", 1, DONE), "the old run finishes nothing");
    let retry = Finish::Retry {
        next_fire: T0 + S,
        error: "boom".into(),
        uncount: false,
    };
    assert!(!end(conn, &a, "k", 1, retry));
    let again = conn.get("k").unwrap().unwrap();
    assert_eq!(
        (
            again.next_fire,
            again.state,
            again.attempt,
            again.last_error
        ),
        (T0 + 3600 * S, JobState::Scheduled, 0, None)
    );
    // The same owner claims the new job: a new run number, a new fence.
    claim(conn, &a, &["k"], 2, T0 + 3600 * S);
    assert!(conn.delete("k").unwrap());
    assert!(!end(conn, &a, "k", 2, Finish::Next { next_fire: T0 }));
    assert!(
        conn.get("k").unwrap().is_none(),
        "a cancelled job stays gone"
    );
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
    assert_eq!(conn.list(JobState::Dead).unwrap().len(), 1);
    assert_eq!(conn.list(JobState::Done).unwrap()[0].key, "k");
    assert_eq!(
        conn.clean(T0 + 6 * S, T0).unwrap(),
        0,
        "finished at, not before"
    );
    assert_eq!(conn.clean(T0 + 7 * S, T0).unwrap(), 1, "done");
    assert!(conn.revive("d", T0 + 8 * S).unwrap());
    assert!(!conn.revive("r", T0).unwrap(), "only the dead revive");
    let d = conn.get("d").unwrap().unwrap();
    assert_eq!(
        (d.state, d.attempt, d.next_fire),
        (JobState::Scheduled, 0, T0 + 8 * S)
    );
    assert_eq!(conn.clean(T0 + 100 * S, T0 + 100 * S).unwrap(), 0);
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
pub(crate) fn all(mut fresh: impl FnMut() -> Box<dyn Conn>) {
    one_claim_wins_and_only_the_fence_holder_finishes(&mut *fresh());
    a_job_replaced_or_cancelled_under_a_run_is_fenced_off(&mut *fresh());
    claims_are_idempotent_and_releases_uncount(&mut *fresh());
    finishes_move_the_row_as_the_protocol_says(&mut *fresh());
    due_lists_this_schedulers_jobs_first(&mut *fresh());
}

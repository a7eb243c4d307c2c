//! Typed jobs (`JobArgs`), on both stores: the handler gets the arguments
//! the job was scheduled with, the payload is their JSON, and a payload
//! stored under the kind's name by other code that is not its arguments
//! makes the job dead at once, with the reason, without running it.

mod common;
mod stores;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chronopool_durable::{Job, JobArgs, JobState, Schedule};
use serde::{Deserialize, Serialize};
use stores::{eventually, pool, real_config, Store, BOTH};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct SendCoupon {
    customer: u64,
    percent: u8,
    note: Option<String>,
}

impl JobArgs for SendCoupon {
    const NAME: &'static str = "send-coupon";
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Reindex {
    shard: u32,
}

impl JobArgs for Reindex {
    const NAME: &'static str = "reindex";
}

#[test]
fn a_typed_job_reaches_its_handler_as_it_was_scheduled() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let coupons = Arc::new(Mutex::new(Vec::new()));
        let shards = Arc::new(Mutex::new(Vec::new()));
        let (c, s) = (coupons.clone(), shards.clone());
        jobs.register_typed(move |job, coupon: SendCoupon| {
            c.lock()
                .unwrap()
                .push((job.key().to_owned(), coupon, job.payload().to_vec()));
            Ok(())
        });
        jobs.register_typed(move |_, reindex: Reindex| {
            s.lock().unwrap().push(reindex.shard);
            Ok(())
        });
        jobs.start().unwrap();
        let coupon = SendCoupon {
            customer: 7,
            percent: 10,
            note: Some("\u{0}ünïcode \"quoted\"".into()),
        };
        jobs.schedule_typed("c7", &coupon, Schedule::After(Duration::ZERO))
            .unwrap();
        jobs.schedule_all([
            Job::typed("r1", &Reindex { shard: 1 }, Schedule::After(Duration::ZERO)).unwrap(),
            Job::typed("r2", &Reindex { shard: 2 }, Schedule::After(Duration::ZERO)).unwrap(),
        ])
        .unwrap();
        eventually("all three run", || {
            coupons.lock().unwrap().len() == 1 && shards.lock().unwrap().len() == 2
        });
        let coupons = coupons.lock().unwrap();
        assert_eq!(coupons[0].0, "c7");
        assert_eq!(coupons[0].1, coupon, "{kind:?}");
        let raw: serde_json::Value = serde_json::from_slice(&coupons[0].2).unwrap();
        assert_eq!(raw["customer"], 7, "{kind:?}: the payload is the JSON");
        let mut shards = shards.lock().unwrap().clone();
        shards.sort();
        assert_eq!(shards, [1, 2]);
    }
}

#[test]
fn a_payload_that_is_not_the_kinds_arguments_is_dead_at_once() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = Arc::new(Mutex::new(0));
        let r = runs.clone();
        jobs.register_typed(move |_, _: SendCoupon| {
            *r.lock().unwrap() += 1;
            Ok(())
        });
        jobs.start().unwrap();
        // Other code stores raw bytes under the kind's name.
        jobs.schedule(
            "bad",
            SendCoupon::NAME,
            br#"{"customer": "seven"}"#,
            Schedule::After(Duration::ZERO),
        )
        .unwrap();
        eventually("it is dead", || {
            jobs.job("bad")
                .unwrap()
                .is_some_and(|job| job.state == JobState::Dead)
        });
        let job = jobs.job("bad").unwrap().unwrap();
        assert_eq!(job.attempt, 1, "{kind:?}: not retried");
        let error = job.last_error.unwrap();
        assert!(error.contains("payload"), "{kind:?}: {error}");
        assert_eq!(*runs.lock().unwrap(), 0, "{kind:?}: the handler never ran");
    }
}

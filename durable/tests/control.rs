//! The operator's verbs, on both stores: pause and resume (a job, a
//! handler), run now, reschedule, limits of runs at once across
//! schedulers, backfill, the listings (filters, pages, counts, late jobs)
//! and the history of runs. A pause by one process is honoured by the
//! others (child processes).

#![cfg(unix)]

mod common;
mod stores;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use chronopool_durable::{
    Config, DurableScheduler, JobError, JobQuery, JobState, RunOutcome, Schedule,
};
use stores::{
    child_part, eventually, open_described, pool, real_config, spawn_child, wait_for_line, Store,
    BOTH,
};

const NOW: Schedule = Schedule::After(Duration::ZERO);

/// Counts each key's runs.
fn counting(jobs: &DurableScheduler, name: &str) -> Arc<Mutex<HashMap<String, usize>>> {
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let r = runs.clone();
    jobs.register(name, move |job| {
        *r.lock().unwrap().entry(job.key().to_owned()).or_insert(0) += 1;
        Ok(())
    });
    runs
}

fn runs_of(runs: &Mutex<HashMap<String, usize>>, key: &str) -> usize {
    runs.lock().unwrap().get(key).copied().unwrap_or(0)
}

#[test]
fn a_paused_job_keeps_its_schedule_and_runs_again_when_resumed() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = counting(&jobs, "tick");
        jobs.start().unwrap();
        let every = Schedule::Every(Duration::from_millis(50));
        jobs.schedule("tick", "tick", b"", every).unwrap();
        eventually("it ticks", || runs_of(&runs, "tick") >= 2);

        assert!(jobs.pause("tick").unwrap());
        assert!(!jobs.pause("nothing").unwrap());
        // A run in flight at the pause ends; then none.
        std::thread::sleep(Duration::from_millis(300));
        let paused_at = runs_of(&runs, "tick");
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(runs_of(&runs, "tick"), paused_at, "{kind:?}: paused");
        let info = jobs.job("tick").unwrap().unwrap();
        assert!(info.paused && info.state == JobState::Scheduled, "{info:?}");
        let listed = jobs.jobs(&JobQuery::new().paused(true)).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(jobs.counts().unwrap().paused, 1, "{kind:?}");

        // Resumed: it missed about 14 occurrences, and `Skip` (the
        // default) runs the late one once and goes on at the next.
        assert!(jobs.resume("tick").unwrap());
        eventually("it ticks again", || runs_of(&runs, "tick") > paused_at);
        let resumed = runs_of(&runs, "tick");
        assert!(resumed <= paused_at + 3, "{kind:?}: no burst ({resumed})");
        assert!(!jobs.job("tick").unwrap().unwrap().paused);
    }
}

#[test]
fn a_job_paused_after_it_was_placed_is_not_claimed() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = counting(&jobs, "work");
        jobs.start().unwrap();
        // Placed in the timer at once (within the window), due in 300 ms.
        let soon = Schedule::After(Duration::from_millis(300));
        jobs.schedule("soon", "work", b"", soon).unwrap();
        assert!(jobs.pause("soon").unwrap());
        std::thread::sleep(Duration::from_millis(1_000));
        assert_eq!(runs_of(&runs, "soon"), 0, "{kind:?}");
        assert!(jobs.resume("soon").unwrap());
        eventually("it runs once resumed", || runs_of(&runs, "soon") == 1);
    }
}

#[test]
fn a_paused_handler_pauses_every_job_of_it_until_resumed() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let reports = counting(&jobs, "report");
        let mails = counting(&jobs, "mail");
        jobs.pause_handler("report").unwrap();
        jobs.pause_handler("report").unwrap();
        jobs.start().unwrap();
        for n in 0..3 {
            jobs.schedule(&format!("report-{n}"), "report", b"", NOW)
                .unwrap();
        }
        jobs.schedule("mail-0", "mail", b"", NOW).unwrap();
        eventually("the mail runs", || runs_of(&mails, "mail-0") == 1);
        std::thread::sleep(Duration::from_millis(500));
        assert!(reports.lock().unwrap().is_empty(), "{kind:?}: paused");
        assert_eq!(jobs.paused_handlers().unwrap(), ["report"]);
        let counts = jobs.counts().unwrap();
        assert_eq!((counts.paused, counts.scheduled), (3, 0), "{counts:?}");
        let paused = jobs
            .jobs(&JobQuery::new().paused(true).handler("report"))
            .unwrap();
        assert_eq!(paused.len(), 3);

        jobs.resume_handler("report").unwrap();
        eventually("the reports run", || reports.lock().unwrap().len() == 3);
        assert!(jobs.paused_handlers().unwrap().is_empty());
    }
}

#[test]
fn run_now_and_reschedule_move_a_job() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let runs = counting(&jobs, "work");
        jobs.start().unwrap();
        let later = Schedule::After(Duration::from_secs(3600));
        jobs.schedule("later", "work", b"", later.clone()).unwrap();
        jobs.schedule("moved", "work", b"", later).unwrap();
        assert!(jobs.run_now("later").unwrap());
        eventually("run now runs it", || runs_of(&runs, "later") == 1);
        assert!(!jobs.run_now("later").unwrap(), "{kind:?}: it is gone");
        assert!(!jobs.run_now("nothing").unwrap());

        let every = Schedule::Every(Duration::from_millis(100));
        assert!(jobs.reschedule("moved", every).unwrap());
        eventually("the new schedule repeats", || runs_of(&runs, "moved") >= 3);
        let info = jobs.job("moved").unwrap().unwrap();
        assert_eq!(info.payload, b"", "{kind:?}: payload kept");
        assert!(!jobs.reschedule("nothing", NOW).unwrap());
        assert!(jobs
            .reschedule(
                "moved",
                Schedule::Cron {
                    expression: "not cron".into(),
                    time_zone: "UTC".into(),
                },
            )
            .is_err());
    }
}

#[test]
fn a_limit_holds_runs_of_a_handler_across_schedulers() {
    for kind in BOTH {
        let store = Store::new(kind);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        // Three schedulers (three owners, three sets of connections), two
        // workers each: six runs could start at once.
        let schedulers: Vec<_> = (0..3)
            .map(|_| {
                let pool = pool(2);
                let jobs = store.open(&pool, real_config());
                let (running, most, done) = (running.clone(), most.clone(), done.clone());
                jobs.register("slow", move |_| {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(150));
                    running.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
                (pool, jobs)
            })
            .collect();
        schedulers[0].1.set_limit("slow", Some(2)).unwrap();
        assert_eq!(schedulers[1].1.limits().unwrap(), [("slow".to_owned(), 2)]);
        for (_, jobs) in &schedulers {
            jobs.start().unwrap();
        }
        let batch =
            (0..12).map(|n| chronopool_durable::Job::new(format!("s-{n}"), "slow", "", NOW));
        schedulers[0].1.schedule_all(batch).unwrap();
        eventually("all ran", || done.load(Ordering::SeqCst) == 12);
        let most = most.load(Ordering::SeqCst);
        assert!(most <= 2, "{kind:?}: {most} runs at once");
        assert_eq!(most, 2, "{kind:?}: the limit is used");
        schedulers[2].1.set_limit("slow", None).unwrap();
        assert!(schedulers[0].1.limits().unwrap().is_empty());
    }
}

#[test]
fn the_history_keeps_each_run_its_outcome_and_error() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let mut config = real_config();
        config.retry = stores::retry_every(Duration::from_millis(10));
        config.name = Some("worker-a".into());
        let jobs = store.open(&pool, config);
        jobs.register("flaky", |job| {
            if job.attempt() == 1 {
                return Err(JobError::retry("the first attempt fails"));
            }
            Ok(())
        });
        jobs.register("broken", |_| Err(JobError::permanent("no such customer")));
        jobs.start().unwrap();
        let before = SystemTime::now();
        jobs.schedule("flaky", "flaky", b"", NOW).unwrap();
        jobs.schedule("broken", "broken", b"", NOW).unwrap();
        eventually("both ended", || {
            jobs.job("flaky").unwrap().is_none()
                && jobs.job("broken").unwrap().map(|j| j.state) == Some(JobState::Dead)
        });
        let flaky = jobs.history(Some("flaky"), 10).unwrap();
        let outcomes: Vec<_> = flaky.iter().map(|r| (r.outcome, r.attempt)).collect();
        assert_eq!(
            outcomes,
            [
                (Some(RunOutcome::Succeeded), 2),
                (Some(RunOutcome::Failed), 1)
            ],
            "{kind:?}: newest first"
        );
        assert_eq!(flaky[1].error.as_deref(), Some("the first attempt fails"));
        let run = &flaky[0];
        assert_eq!(run.owner_name.as_deref(), Some("worker-a"));
        let started = run.started_at.expect("a start");
        assert!(
            before <= run.due && run.due <= started && started <= run.ended_at,
            "{run:?}"
        );
        let broken = jobs.history(Some("broken"), 10).unwrap();
        assert_eq!(broken.len(), 1);
        assert_eq!(broken[0].outcome, Some(RunOutcome::Dead));
        assert_eq!(broken[0].error.as_deref(), Some("no such customer"));
        assert_eq!(jobs.history(None, 10).unwrap().len(), 3);
        let recent: HashMap<_, _> = jobs
            .recent_runs(Duration::from_secs(3600))
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(recent.get(&RunOutcome::Succeeded), Some(&1), "{recent:?}");
        assert_eq!(recent.get(&RunOutcome::Failed), Some(&1));
        assert_eq!(recent.get(&RunOutcome::Dead), Some(&1));
    }
}

#[test]
fn an_occurrence_skipped_for_its_catch_up_window_is_recorded() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(1);
        let jobs = store.open(&pool, real_config());
        let runs = counting(&jobs, "daily");
        // Due an hour ago, with a catch-up window of a minute: skipped.
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        let job = chronopool_durable::Job::new("late", "daily", "", Schedule::At(long_ago))
            .catch_up(Duration::from_secs(60));
        jobs.schedule_all([job]).unwrap();
        jobs.start().unwrap();
        eventually("skipped", || jobs.job("late").unwrap().is_none());
        assert_eq!(runs_of(&runs, "late"), 0);
        let history = jobs.history(Some("late"), 10).unwrap();
        assert_eq!(history.len(), 1, "{kind:?}");
        assert_eq!(history[0].outcome, Some(RunOutcome::Skipped));
    }
}

#[test]
fn no_history_is_written_when_none_is_kept() {
    let store = Store::new(stores::Kind::Sqlite);
    let pool = pool(1);
    let mut config = real_config();
    config.keep_runs = 0;
    let jobs = store.open(&pool, config);
    let runs = counting(&jobs, "work");
    jobs.start().unwrap();
    jobs.schedule("j", "work", b"", NOW).unwrap();
    eventually("ran", || runs_of(&runs, "j") == 1);
    eventually("ended", || jobs.job("j").unwrap().is_none());
    assert!(jobs.history(None, 10).unwrap().is_empty());
}

#[test]
fn listings_filter_page_and_count() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(1);
        let jobs = store.open(&pool, real_config());
        let hour = Duration::from_secs(3600);
        let base = SystemTime::now() + hour;
        // Keys with LIKE's own characters: a prefix is a prefix.
        let keys = ["a%1", "a_2", "ab3", "b-4", "a%5"];
        let batch = keys.iter().enumerate().map(|(i, key)| {
            let at = base + Duration::from_secs(i as u64);
            chronopool_durable::Job::new(*key, "work", "", Schedule::At(at))
        });
        jobs.schedule_all(batch).unwrap();
        let listed = |q: JobQuery| -> Vec<String> {
            jobs.jobs(&q).unwrap().into_iter().map(|j| j.key).collect()
        };
        assert_eq!(listed(JobQuery::new()), keys, "{kind:?}: by fire time");
        assert_eq!(listed(JobQuery::new().key_prefix("a%")), ["a%1", "a%5"]);
        assert_eq!(listed(JobQuery::new().key_prefix("a_")), ["a_2"]);
        assert_eq!(listed(JobQuery::new().key_prefix("a")).len(), 4);
        assert!(
            listed(JobQuery::new().key_prefix("A")).is_empty(),
            "{kind:?}: case"
        );
        // Pages of two.
        let mut pages = Vec::new();
        let mut q = JobQuery::new().limit(2);
        loop {
            let page = jobs.jobs(&q).unwrap();
            let Some(last) = page.last() else { break };
            q = JobQuery::new()
                .limit(2)
                .after(last.next_fire, last.key.clone());
            pages.push(page.iter().map(|j| j.key.clone()).collect::<Vec<_>>());
        }
        assert_eq!(pages, [vec!["a%1", "a_2"], vec!["ab3", "b-4"], vec!["a%5"]]);
        assert_eq!(listed(JobQuery::new().state(JobState::Dead)).len(), 0);
        assert_eq!(listed(JobQuery::new().handler("other")).len(), 0);
        assert_eq!(jobs.counts().unwrap().scheduled, 5);
        // Late: two jobs past due (the scheduler is not started).
        let past = SystemTime::now() - hour;
        jobs.schedule("late-1", "work", b"", Schedule::At(past))
            .unwrap();
        let later = past + Duration::from_secs(60);
        jobs.schedule("late-2", "work", b"", Schedule::At(later))
            .unwrap();
        let late: Vec<_> = jobs
            .late_jobs(10)
            .unwrap()
            .into_iter()
            .map(|j| j.key)
            .collect();
        assert_eq!(late, ["late-1", "late-2"], "{kind:?}: the most late first");
    }
}

#[test]
fn backfill_runs_a_past_range_s_occurrences_once_each() {
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(2);
        let jobs = store.open(&pool, real_config());
        let dues = Arc::new(Mutex::new(Vec::new()));
        let d = dues.clone();
        jobs.register("hourly", move |job| {
            d.lock().unwrap().push((job.key().to_owned(), job.due()));
            Ok(())
        });
        let hour = Duration::from_secs(3600);
        jobs.schedule("hourly", "hourly", b"", Schedule::Every(hour))
            .unwrap();
        let first = jobs.job("hourly").unwrap().unwrap().next_fire;
        // The five occurrences in the phase of the schedule from six hours
        // before its first to one hour before it (now, when it was
        // scheduled), that one excluded.
        let (from, to) = (first - 6 * hour, first - hour);
        assert_eq!(jobs.backfill("hourly", from, to).unwrap(), 5);
        assert_eq!(
            jobs.backfill("hourly", from, to).unwrap(),
            5,
            "the same jobs"
        );
        jobs.start().unwrap();
        eventually("five ran", || dues.lock().unwrap().len() == 5);
        std::thread::sleep(Duration::from_millis(300));
        let mut ran = dues.lock().unwrap().clone();
        ran.sort_by_key(|(_, due)| *due);
        let expected: Vec<SystemTime> = (0..5).map(|i| from + i * hour).collect();
        let got: Vec<SystemTime> = ran.iter().map(|(_, due)| *due).collect();
        assert_eq!(got, expected, "{kind:?}");
        assert!(ran
            .iter()
            .all(|(key, _)| key.starts_with("hourly@backfill-")));
        // A range off the schedule's phase: only the occurrences in it.
        let off = Duration::from_secs(1800);
        assert_eq!(jobs.backfill("hourly", from + off, to + off).unwrap(), 5);
        assert_eq!(jobs.backfill("hourly", from + off, to - off).unwrap(), 4);
        assert!(jobs.backfill("nothing", from, to).is_err());
        jobs.schedule("once", "hourly", b"", Schedule::After(hour))
            .unwrap();
        assert!(
            jobs.backfill("once", from, first).is_err(),
            "a one-shot job"
        );
        let year_of_seconds = Schedule::Every(Duration::from_secs(1));
        jobs.schedule("fast", "hourly", b"", year_of_seconds)
            .unwrap();
        let e = jobs.backfill("fast", from, to).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
    }
}

// ---- Across processes -------------------------------------------------

/// The children's bodies: only when a parent runs this test as one.
#[test]
#[ignore = "run by the other tests of this file as a child process"]
fn child() {
    let Some((part, store)) = child_part() else {
        return;
    };
    assert_eq!(part, "tick");
    let pool = pool(2);
    let jobs = open_described(&store, &pool, real_config());
    jobs.register("tick", |job| {
        println!("RAN {}", job.key());
        Ok(())
    });
    jobs.start().unwrap();
    println!("STARTED");
    std::thread::sleep(Duration::from_secs(120));
}

/// Three processes run a recurring job; a fourth pauses its handler:
/// within a poll none runs it; resumed, they do again.
#[test]
fn a_pause_by_one_process_is_honoured_by_the_others() {
    use std::io::BufRead;
    for kind in BOTH {
        let store = Store::new(kind);
        let pool = pool(1);
        let control = store.open(&pool, Config::default());
        let every = Schedule::Every(Duration::from_millis(50));
        control.schedule("t", "tick", b"", every).unwrap();
        let mut children: Vec<_> = (0..3).map(|_| spawn_child("tick", &store)).collect();
        for child in &mut children {
            wait_for_line(child, "STARTED");
        }
        // Each child's runs, counted from its stdout.
        let ran = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = children
            .iter_mut()
            .map(|child| {
                let out = child.stdout.take().unwrap();
                let ran = ran.clone();
                std::thread::spawn(move || {
                    for line in std::io::BufReader::new(out).lines() {
                        if line.is_ok_and(|l| l.starts_with("RAN")) {
                            ran.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        eventually("they run it", || ran.load(Ordering::SeqCst) >= 3);
        control.pause_handler("tick").unwrap();
        // A run claimed before the pause may still end.
        std::thread::sleep(Duration::from_millis(300));
        let at_pause = ran.load(Ordering::SeqCst);
        let quiet_from = Instant::now();
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            at_pause,
            "{kind:?}: ran while paused ({:?})",
            quiet_from.elapsed()
        );
        control.resume_handler("tick").unwrap();
        eventually("they run it again", || {
            ran.load(Ordering::SeqCst) >= at_pause + 3
        });
        for mut child in children {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        for reader in readers {
            reader.join().unwrap();
        }
    }
}

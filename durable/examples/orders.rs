//! A web-style handler: an order placed in a request's transaction, its
//! reminder scheduled in that same transaction (typed arguments), and sent
//! by an async handler on a tokio runtime, which marks the order reminded
//! and ends its run in one transaction (so the mark is written once, even
//! if the process dies between the two). A request that fails rolls back
//! both: no order, no reminder.
//!
//! ```sh
//! cargo run -p chronopool-durable --features serde,tokio --example orders
//! ```

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler, Job, JobArgs, JobContext, JobError, Schedule};
use serde::{Deserialize, Serialize};

/// The reminder's arguments: its type names the handler that sends it.
#[derive(Debug, Serialize, Deserialize)]
struct RemindToPay {
    order: i64,
    email: String,
}

impl JobArgs for RemindToPay {
    const NAME: &'static str = "remind-to-pay";
}

/// The request handler: writes the order and schedules its reminder in one
/// transaction; fails (and rolls back both) for an order of nothing.
fn place_order(
    db: &mut rusqlite::Connection,
    jobs: &DurableScheduler,
    order: i64,
    email: &str,
    items: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut tx = db.transaction()?;
    tx.execute(
        "INSERT INTO orders (id, email, items) VALUES (?1, ?2, ?3)",
        (order, email, items),
    )?;
    let remind = RemindToPay {
        order,
        email: email.to_owned(),
    };
    // Three days in a shop; a second here.
    let later = Schedule::After(Duration::from_secs(1));
    jobs.schedule_in(
        &mut tx,
        [Job::typed(format!("remind-{order}"), &remind, later)?],
    )?;
    if items == 0 {
        return Err("an order of nothing".into()); // dropped: rolled back
    }
    tx.commit()?;
    Ok(())
}

/// Marks the order reminded and ends the reminder's run, in one
/// transaction.
fn mark_reminded(shop: &Path, job: &JobContext<'_>, order: i64) -> Result<(), JobError> {
    let mut db = rusqlite::Connection::open(shop).map_err(JobError::retry)?;
    db.busy_timeout(Duration::from_secs(5))
        .map_err(JobError::retry)?;
    let mut tx = db
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(JobError::retry)?;
    tx.execute("UPDATE orders SET reminded = 1 WHERE id = ?1", [order])
        .map_err(JobError::retry)?;
    job.complete_in(&mut tx)?;
    tx.commit().map_err(JobError::retry)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shop.db");
    let runtime = tokio::runtime::Runtime::new()?;
    let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
    let jobs = DurableScheduler::sqlite(&pool, &path, Config::default())?;

    let (sent, reminders) = mpsc::channel();
    let shop = path.clone();
    jobs.register_typed_async(runtime.handle().clone(), move |job, remind: RemindToPay| {
        let (sent, shop) = (sent.clone(), shop.clone());
        async move {
            // An async mail client would be awaited here.
            tokio::time::sleep(Duration::from_millis(10)).await;
            println!(
                "reminder sent to {} for order {}",
                remind.email, remind.order
            );
            // The order marked and the run ended together (rusqlite
            // blocks: off the runtime's threads).
            tokio::task::spawn_blocking(move || mark_reminded(&shop, &job, remind.order))
                .await
                .map_err(|e| e.to_string())??;
            let _ = sent.send(remind.order);
            Ok(())
        }
    });
    jobs.start()?;

    let mut db = rusqlite::Connection::open(&path)?;
    db.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT NOT NULL, items INTEGER NOT NULL,
                              reminded INTEGER NOT NULL DEFAULT 0)",
        [],
    )?;
    place_order(&mut db, &jobs, 1, "ada@example.com", 3)?;
    if let Err(e) = place_order(&mut db, &jobs, 2, "bob@example.com", 0) {
        println!("order 2 refused ({e}): no order, no reminder");
    }
    assert!(jobs.job("remind-2")?.is_none());

    let order = reminders.recv_timeout(Duration::from_secs(30))?;
    assert_eq!(order, 1);
    assert!(reminders.recv_timeout(Duration::from_secs(2)).is_err());
    let reminded: i64 =
        db.query_row("SELECT reminded FROM orders WHERE id = 1", [], |r| r.get(0))?;
    assert_eq!(reminded, 1);
    assert!(jobs.job("remind-1")?.is_none());
    jobs.shutdown(Duration::from_secs(5));
    Ok(())
}

//! The scheduler's metrics in Prometheus's text format, through the
//! `metrics` facade (feature `metrics`) and `metrics-exporter-prometheus`:
//! an application installs its exporter once, and the scheduler's
//! counters, histograms and gauges appear beside its own.
//!
//! ```sh
//! cargo run -p chronopool-durable --features metrics --example prometheus
//! ```

use std::time::Duration;

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler, JobError, Schedule};
use metrics_exporter_prometheus::PrometheusBuilder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // In a service: `PrometheusBuilder::new().install()?` serves /metrics
    // over HTTP (its `http-listener` feature); here the text is printed.
    let prometheus = PrometheusBuilder::new().install_recorder()?;

    let dir = tempfile::tempdir()?;
    let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
    let jobs = DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default())?;
    jobs.register("send-mail", |_| Ok(()));
    jobs.register("charge-card", |job| {
        if job.attempt() == 1 {
            return Err(JobError::retry("the card network is busy"));
        }
        Ok(())
    });
    jobs.start()?;
    let now = Schedule::After(Duration::ZERO);
    for n in 0..5 {
        jobs.schedule(&format!("mail-{n}"), "send-mail", b"", now.clone())?;
    }
    jobs.schedule("charge-7", "charge-card", b"", now)?;
    let waited = std::time::Instant::now();
    while jobs.metrics().succeeded < 6 && waited.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    jobs.shutdown(Duration::from_secs(5));

    let text = prometheus.render();
    for line in text.lines().filter(|l| l.contains("chronopool_durable")) {
        println!("{line}");
    }
    assert!(text
        .contains(r#"chronopool_durable_runs_total{handler="send-mail",outcome="succeeded"} 5"#));
    Ok(())
}

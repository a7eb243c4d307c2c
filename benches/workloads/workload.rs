//! What every workload shares: the list of workloads, their size
//! parameters, the result type, and the fresh executor of a repetition.

use std::ops::Deref;
use std::time::Duration;

use crate::measure;
use crate::systems::Executor;

/// The workloads of the spec, in output order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Immediate tasks from one outside thread.
    Spawn,
    /// A binary tree of tasks, each submitting its children from inside.
    SpawnTree,
    /// One-shot timers, a million a second.
    TimerFire,
    /// One-shot timers far out, each cancelled through its handle.
    Cancel,
    /// Fixed-rate tasks for 2 s.
    Periodic,
    /// Timers due in an hour; the CPU used meanwhile.
    Idle,
    /// One 1 ms timer at a time.
    Latency,
    /// A million sleep futures on a tokio runtime.
    SleepFuture,
}

impl Workload {
    /// Every workload, in output order.
    pub const ALL: [Workload; 8] = [
        Workload::Spawn,
        Workload::SpawnTree,
        Workload::TimerFire,
        Workload::Cancel,
        Workload::Periodic,
        Workload::Idle,
        Workload::Latency,
        Workload::SleepFuture,
    ];

    /// The name in the spec and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Spawn => "spawn",
            Workload::SpawnTree => "spawn-tree",
            Workload::TimerFire => "timer-fire",
            Workload::Cancel => "cancel",
            Workload::Periodic => "periodic",
            Workload::Idle => "idle",
            Workload::Latency => "latency",
            Workload::SleepFuture => "sleep-future",
        }
    }

    /// The workload called `name`.
    pub fn parse(name: &str) -> Option<Workload> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }
}

/// The size of one run.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// `SCALE`: multiplies every task count (never a duration).
    pub scale: f64,
    /// The warm-up run: 10% of the work.
    pub warmup: bool,
    /// Worker threads of every system (`THREADS`, default 2).
    pub threads: usize,
}

impl Params {
    /// What task counts are multiplied by.
    pub fn factor(&self) -> f64 {
        self.scale * if self.warmup { 0.1 } else { 1.0 }
    }

    /// The task count of a workload whose spec count is `base`.
    pub fn n(&self, base: usize) -> usize {
        ((base as f64 * self.factor()).round() as usize).max(1)
    }
}

/// A repetition's figures: (metric, value), in output order.
pub type Metrics = Vec<(&'static str, f64)>;

/// How long a repetition may wait for its tasks before it fails.
pub const WAIT: Duration = Duration::from_secs(120);

/// The error of a repetition that waited [`WAIT`] in vain.
pub fn timed_out(what: &str) -> String {
    format!(
        "{what}: timed out after {} s with {} tasks run",
        WAIT.as_secs(),
        measure::DONE.count()
    )
}

/// The fresh executor of one repetition. [`finish`](Exec::finish) shuts
/// it down and waits until the process is back to the thread count it had
/// before the start (some systems offer no join); dropping it does the
/// same on error paths.
pub struct Exec<S: Executor> {
    pool: Option<S>,
    threads_before: usize,
}

impl<S: Executor> Exec<S> {
    /// Starts an executor of system `config` with `p.threads` workers.
    pub fn start(config: &S::Config, p: &Params) -> Result<Self, String> {
        let threads_before = measure::thread_count();
        Ok(Exec {
            pool: Some(S::start(config, p.threads)?),
            threads_before,
        })
    }

    /// Shuts the executor down and waits for its threads to be gone.
    pub fn finish(mut self) -> Result<(), String> {
        self.stop()
    }

    /// [`finish`](Exec::finish), once.
    fn stop(&mut self) -> Result<(), String> {
        let Some(pool) = self.pool.take() else {
            return Ok(());
        };
        pool.shutdown()?;
        if measure::wait_threads_at_most(self.threads_before, Duration::from_secs(30)) {
            Ok(())
        } else {
            Err(format!(
                "{} threads alive 30 s after shutdown, {} before the start",
                measure::thread_count(),
                self.threads_before
            ))
        }
    }
}

impl<S: Executor> Deref for Exec<S> {
    type Target = S;

    fn deref(&self) -> &S {
        self.pool.as_ref().expect("executor already stopped")
    }
}

impl<S: Executor> Drop for Exec<S> {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("  {e}");
        }
    }
}

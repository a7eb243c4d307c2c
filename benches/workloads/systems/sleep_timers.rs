//! The sleep futures of `sleep-future`: chronopool's (`Sleep`, one system
//! per timer queue), tokio's `time::sleep_until` (its runtime's own timer
//! wheel) and async-io's `Timer` (the timer of smol's reactor thread).
//! Each is polled by the same tokio runtime; only the timer differs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use chronopool::future::Sleep;
use chronopool::ScheduledExecutor;

use super::{QueueFn, SleepTimer};

/// chronopool's timer futures, on an executor of its own (its workers stay
/// idle: a sleep's expiry only wakes, on the timer thread).
pub struct ChronopoolSleep(ScheduledExecutor);

impl SleepTimer for ChronopoolSleep {
    type Config = QueueFn;
    type Sleep = Sleep;

    fn start(queue: &QueueFn, threads: usize) -> Result<Self, String> {
        ScheduledExecutor::builder()
            .worker_threads(threads)
            .timer_queue(queue())
            .build()
            .map(ChronopoolSleep)
            .map_err(|e| e.to_string())
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        self.0.sleep_until(deadline)
    }

    fn shutdown(self) -> Result<(), String> {
        self.0.shutdown();
        Ok(())
    }
}

/// tokio's own sleep, on the polling runtime's time driver.
pub struct TokioSleep;

impl SleepTimer for TokioSleep {
    type Config = ();
    type Sleep = tokio::time::Sleep;

    fn start(_: &(), _: usize) -> Result<Self, String> {
        Ok(TokioSleep)
    }

    fn sleep_until(&self, deadline: Instant) -> tokio::time::Sleep {
        tokio::time::sleep_until(deadline.into())
    }

    fn shutdown(self) -> Result<(), String> {
        Ok(())
    }
}

/// async-io's `Timer`, served by its reactor thread ("async-io").
pub struct AsyncIoTimer;

/// An async-io `Timer` as a future of `()`.
pub struct AsyncIoSleep(async_io::Timer);

impl Future for AsyncIoSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(drop)
    }
}

impl SleepTimer for AsyncIoTimer {
    type Config = ();
    type Sleep = AsyncIoSleep;

    fn start(_: &(), _: usize) -> Result<Self, String> {
        Ok(AsyncIoTimer)
    }

    fn sleep_until(&self, deadline: Instant) -> AsyncIoSleep {
        AsyncIoSleep(async_io::Timer::at(deadline))
    }

    fn shutdown(self) -> Result<(), String> {
        Ok(())
    }
}

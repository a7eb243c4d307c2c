//! [`Timeout`]: a future with a deadline; [`Elapsed`], the error of one
//! that missed it.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Sleep;

/// A future that gives up on the one it wraps when a [`Sleep`] ends first:
/// made by [`ScheduledExecutor::timeout`](crate::ScheduledExecutor::timeout).
/// Its output is the inner future's, or [`Elapsed`] if the deadline came
/// first (the inner future is then dropped with the `Timeout`).
///
/// ```
/// use chronopool::ScheduledExecutor;
/// use std::time::Duration;
///
/// let pool = ScheduledExecutor::builder().worker_threads(1).build()?;
/// let quick = pool.timeout(Duration::from_secs(5), async { 7 });
/// assert_eq!(futures_lite::future::block_on(quick), Ok(7));
/// let never = pool.timeout(Duration::from_millis(5), std::future::pending::<()>());
/// assert!(futures_lite::future::block_on(never).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a Timeout does nothing unless awaited or polled"]
#[derive(Debug)]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

impl<F> Timeout<F> {
    pub(crate) fn new(future: F, sleep: Sleep) -> Self {
        Timeout { future, sleep }
    }

    /// The inner future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// The inner future, to change it (only while it is not pinned).
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.future
    }

    /// The inner future, without its deadline.
    pub fn into_inner(self) -> F {
        self.future
    }

    /// The deadline's [`Sleep`].
    pub fn sleep(&self) -> &Sleep {
        &self.sleep
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of `future`: it is never moved out of
        // a pinned `Timeout` (`into_inner` and `get_mut` take it by value
        // or `&mut Self`, which a pinned `Timeout` of a `!Unpin` future
        // does not give out), `Timeout` has no `Drop` of its own and is
        // not `repr(packed)`, and it is `Unpin` only when `F` is (the
        // auto trait; `Sleep` is `Unpin`). `sleep` is not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above: `future` stays where it is until dropped.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(output) = future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        match this.sleep.poll_sleep(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The error of a [`Timeout`] whose deadline came before its future ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the deadline has elapsed")
    }
}

impl Error for Elapsed {}

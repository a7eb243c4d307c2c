//! The handles a submission returns: [`TaskHandle`] (a task that runs now),
//! [`ScheduledHandle`] (one that runs later), [`PeriodicHandle`] (one that
//! runs periodically), [`TriggerHandle`] (one that runs on a trigger), and
//! [`CancelHandle`] (cancel any of them from elsewhere). Each holds its task's cell and the pool, which its cancel
//! and its drops report panics of user code to.

/// What a handle built on an inner one (`ScheduledHandle` and
/// `TriggerHandle` on a [`TaskHandle`], `PeriodicHandle` on a
/// `TriggerHandle`) takes from it unchanged, written once: its id, its
/// name, its cancel handle, `.await` (with `$ready` mapping the inner
/// handle's output to its own) and `Debug`. A handle writes by hand only
/// what means something of its own for its kind: what `join` returns, what
/// `cancel`, `is_finished` and `deadline` mean.
macro_rules! built_on_inner_handle {
    ($handle:ident $(<$t:ident>)?, output = $output:ty, ready = $ready:expr) => {
        impl$(<$t>)? $handle$(<$t>)? {
            /// The task's id (see [`TaskId`](crate::TaskId)).
            pub fn id(&self) -> crate::TaskId {
                self.handle.id()
            }

            /// The task's name, if it was given one (see
            /// [`ScheduledExecutor::task`](crate::ScheduledExecutor::task)).
            pub fn name(&self) -> Option<&str> {
                self.handle.name()
            }

            /// A cheap, cloneable handle that can cancel the task from
            /// elsewhere (see [`CancelHandle`](crate::CancelHandle)).
            pub fn cancel_handle(&self) -> crate::CancelHandle
            where
                $($t: 'static,)?
            {
                self.handle.cancel_handle()
            }
        }

        impl$(<$t>)? std::future::Future for $handle$(<$t>)? {
            type Output = $output;

            /// # Panics
            ///
            /// If polled again after it returned `Poll::Ready`.
            fn poll(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Self::Output> {
                std::future::Future::poll(std::pin::Pin::new(&mut self.handle), cx).map($ready)
            }
        }

        impl$(<$t>)? std::fmt::Debug for $handle$(<$t>)? {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($handle))
                    .field("id", &self.id())
                    .field("name", &self.name())
                    .field("delay", &self.delay())
                    .field("finished", &self.is_finished())
                    .field("cancelled", &self.is_cancelled())
                    .finish()
            }
        }
    };
}

mod cancel;
mod join_timeout;
mod periodic;
mod scheduled;
mod task;
mod trigger;

pub use cancel::CancelHandle;
pub use join_timeout::JoinTimeoutError;
pub use periodic::PeriodicHandle;
pub use scheduled::ScheduledHandle;
pub use task::TaskHandle;
pub use trigger::TriggerHandle;

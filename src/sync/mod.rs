//! The bottom layer: the one place the crate takes its synchronisation
//! primitives from, and the ones it builds itself ([`parker`], [`ring`],
//! [`cell_arc`], [`recycle`]).
//!
//! Every other module imports atomics, `Arc`, locks, threads, thread locals,
//! `UnsafeCell` and the work-stealing deque from here and nowhere else, so
//! that building with `RUSTFLAGS="--cfg loom"` swaps all of them at once for
//! [loom](https://docs.rs/loom)'s model-checked versions.
//!
//! * Normally: std atomics and `Arc`, parking_lot's `Mutex`/`Condvar` behind a
//!   std-shaped wrapper, std threads, and crossbeam-deque.
//! * Under `cfg(loom)`: loom's atomics, `Arc`, `Mutex`, `Condvar`, threads and
//!   `thread_local!`, and a `Mutex<VecDeque>` stand-in for crossbeam-deque
//!   with the same surface (crossbeam-deque is not loom-aware).
//! * Either way, [`recycle`]: the crate's own recycling of small blocks
//!   (task cells), per-thread caches by size class and a shared depot;
//!   under `cfg(loom)` every block goes to the global allocator, and its
//!   loom model checks the depot.
//!
//! loom does not model time: under loom a timed wait never times out, so
//! nothing in the crate may rely on a timeout firing for progress.

pub(crate) mod cell_arc;
pub(crate) mod parker;
pub(crate) mod recycle;
pub(crate) mod ring;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

#[cfg(loom)]
pub(crate) use self::loom_atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicPtr, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

/// loom's atomics, with their initial value stored again as `SeqCst`.
///
/// loom 0.7 records an atomic's initial value as a `Release` store, and
/// lets a `SeqCst` load return it even after a later `SeqCst` store that
/// the loading thread has not synchronised with. C++ (and so Rust) forbids
/// that: the initialisation happens before every other access, so a
/// `SeqCst` load that reads it precedes, in the single total order of
/// `SeqCst` operations, every `SeqCst` store after it. The crate's Dekker
/// pairs of `SeqCst` operations (the lifecycle's admission against a
/// shutdown: write one word, read the other) then fail under loom although
/// they are correct. The atomic's creator stores the value again with
/// `SeqCst` before anyone else can see the atomic, which gives loom the
/// missing order and nothing more (loads with weaker orderings may still
/// read the initial value).
#[cfg(loom)]
mod loom_atomic {
    use loom::sync::atomic::Ordering;

    macro_rules! seq_cst_init {
        ($($name:ident($t:ty)),*) => {$(
            #[derive(Debug)]
            pub(crate) struct $name(loom::sync::atomic::$name);

            impl $name {
                pub(crate) fn new(value: $t) -> Self {
                    let atomic = loom::sync::atomic::$name::new(value);
                    atomic.store(value, Ordering::SeqCst);
                    $name(atomic)
                }
            }

            impl Default for $name {
                fn default() -> Self {
                    Self::new(Default::default())
                }
            }

            impl std::ops::Deref for $name {
                type Target = loom::sync::atomic::$name;

                fn deref(&self) -> &Self::Target {
                    &self.0
                }
            }
        )*};
    }

    seq_cst_init!(
        AtomicBool(bool),
        AtomicU32(u32),
        AtomicU64(u64),
        AtomicUsize(usize)
    );
}

/// The reference count of parkers and of what is shared without a
/// protocol of ours (names, the manual clock's state): always std's `Arc`.
///
/// A parker becomes a `std::task::Waker`, which loom's `Arc` cannot be
/// turned into. Task cells have their own count ([`CellArc`]).
pub(crate) use std::sync::Arc as StdArc;

pub(crate) use cell_arc::{CellArc, CellWeak};

/// Exponential back-off for short spins: crossbeam-utils' `Backoff`, or,
/// under loom, a stand-in that yields to the model's scheduler once.
#[cfg(not(loom))]
pub(crate) use crossbeam_utils::Backoff;

/// Exponential back-off for short spins (loom stand-in: no spinning).
#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct Backoff(std::cell::Cell<bool>);

#[cfg(loom)]
impl Backoff {
    pub(crate) fn new() -> Self {
        Self::default()
    }
    pub(crate) fn snooze(&self) {
        loom::thread::yield_now();
        self.0.set(true);
    }
    pub(crate) fn is_completed(&self) -> bool {
        self.0.get()
    }
}

/// Pads and aligns a value to a cache line, so that per-worker counters
/// written by different threads do not share one.
pub(crate) use crossbeam_utils::CachePadded;

pub(crate) use lock::{Condvar, Mutex};

/// Thread spawning.
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::{Builder, JoinHandle};

    #[cfg(loom)]
    pub(crate) use loom::thread::{Builder, JoinHandle};

    /// Spawns a modelled thread (loom models only).
    #[cfg(all(test, loom))]
    pub(crate) use loom::thread::spawn;
}

/// `thread_local!`: std's, or loom's (std's would be shared by all the
/// modelled threads, which loom runs on one OS thread).
#[cfg(not(loom))]
macro_rules! thread_local_shim {
    ($($t:tt)*) => { std::thread_local!($($t)*); };
}
#[cfg(loom)]
macro_rules! thread_local_shim {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr };) => {
        loom::thread_local!($(#[$attr])* $vis static $name: $t = $init;);
    };
    ($($t:tt)*) => { loom::thread_local!($($t)*); };
}
pub(crate) use thread_local_shim as thread_local;

/// `UnsafeCell` with loom's closure-based API (`with_mut`), so that
/// under loom every access is checked for data races.
pub(crate) mod cell {
    #[cfg(loom)]
    pub(crate) use loom::cell::UnsafeCell;

    /// std's `UnsafeCell` behind loom's access API.
    #[cfg(not(loom))]
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(loom))]
    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        /// Calls `f` with a unique pointer to the value.
        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

/// Locks with parking_lot's shape (`lock()` returns the guard, no poisoning)
/// and std's condvar shape (`wait` takes and returns the guard).
mod lock {
    use std::time::Duration;

    #[cfg(not(loom))]
    pub(crate) use parking_lot::MutexGuard;

    /// A mutex that never poisons: parking_lot's, or loom's under loom.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T> {
        #[cfg(not(loom))]
        inner: parking_lot::Mutex<T>,
        #[cfg(loom)]
        inner: loom::sync::Mutex<T>,
    }

    #[cfg(loom)]
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex {
                #[cfg(not(loom))]
                inner: parking_lot::Mutex::new(value),
                #[cfg(loom)]
                inner: loom::sync::Mutex::new(value),
            }
        }

        #[inline]
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            #[cfg(not(loom))]
            return self.inner.lock();
            #[cfg(loom)]
            return self.inner.lock().unwrap_or_else(|e| e.into_inner());
        }

        #[inline]
        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            #[cfg(not(loom))]
            return self.inner.try_lock();
            #[cfg(loom)]
            // loom's `try_lock` fails only with `WouldBlock`.
            return self.inner.try_lock().ok();
        }

        pub(crate) fn into_inner(self) -> T {
            #[cfg(not(loom))]
            return self.inner.into_inner();
            #[cfg(loom)]
            return self.inner.into_inner().unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A condition variable paired with [`Mutex`].
    #[derive(Debug, Default)]
    pub(crate) struct Condvar {
        #[cfg(not(loom))]
        inner: parking_lot::Condvar,
        #[cfg(loom)]
        inner: loom::sync::Condvar,
    }

    impl Condvar {
        pub(crate) fn new() -> Self {
            Self::default()
        }

        /// Blocks until notified (spurious wake-ups possible).
        pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            #[cfg(not(loom))]
            {
                let mut guard = guard;
                self.inner.wait(&mut guard);
                guard
            }
            #[cfg(loom)]
            self.inner.wait(guard).unwrap_or_else(|e| e.into_inner())
        }

        /// Blocks until notified or `timeout` passed (spurious wake-ups
        /// possible). Under loom it never times out.
        pub(crate) fn wait_timeout<'a, T>(
            &self,
            guard: MutexGuard<'a, T>,
            timeout: Duration,
        ) -> MutexGuard<'a, T> {
            #[cfg(not(loom))]
            {
                let mut guard = guard;
                self.inner.wait_for(&mut guard, timeout);
                guard
            }
            #[cfg(loom)]
            {
                let _ = timeout;
                self.wait(guard)
            }
        }

        pub(crate) fn notify_one(&self) {
            self.inner.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.inner.notify_all();
        }
    }
}

/// The work-stealing deque: crossbeam-deque, or a loom-visible stand-in.
pub(crate) mod deque {
    #[cfg(not(loom))]
    pub(crate) use crossbeam_deque::{Injector, Steal, Stealer, Worker};

    #[cfg(loom)]
    pub(crate) use self::model::{Injector, Steal, Stealer, Worker};

    /// `Mutex<VecDeque>` versions of crossbeam-deque's types with the same
    /// methods and the same results (LIFO owner, FIFO stealers and injector).
    #[cfg(loom)]
    mod model {
        use loom::sync::{Arc, Mutex};
        use std::collections::VecDeque;

        pub(crate) use crossbeam_deque::Steal;

        /// How many tasks a batch steal moves at most (crossbeam moves up to 32).
        const MAX_BATCH: usize = 2;

        /// Moves the first task and up to half of the rest (at most
        /// `MAX_BATCH` in all) from `src` to `dest`, returning the first. The
        /// source lock is released before the destination is locked, so two
        /// workers stealing from each other cannot deadlock.
        fn steal_batch<T>(src: &Mutex<VecDeque<T>>, dest: &Worker<T>) -> Steal<T> {
            let (first, batch) = {
                let mut q = src.lock().unwrap();
                let Some(first) = q.pop_front() else {
                    return Steal::Empty;
                };
                let take = (q.len() / 2).min(MAX_BATCH - 1);
                (first, q.drain(..take).collect::<Vec<T>>())
            };
            dest.0.lock().unwrap().extend(batch);
            Steal::Success(first)
        }

        #[derive(Debug)]
        pub(crate) struct Injector<T>(Mutex<VecDeque<T>>);

        impl<T> Injector<T> {
            pub(crate) fn new() -> Self {
                Injector(Mutex::new(VecDeque::new()))
            }
            pub(crate) fn push(&self, task: T) {
                self.0.lock().unwrap().push_back(task);
            }
            pub(crate) fn steal(&self) -> Steal<T> {
                self.0
                    .lock()
                    .unwrap()
                    .pop_front()
                    .map_or(Steal::Empty, Steal::Success)
            }
            pub(crate) fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
                steal_batch(&self.0, dest)
            }
            pub(crate) fn is_empty(&self) -> bool {
                self.0.lock().unwrap().is_empty()
            }
            pub(crate) fn len(&self) -> usize {
                self.0.lock().unwrap().len()
            }
        }

        #[derive(Debug)]
        pub(crate) struct Worker<T>(Arc<Mutex<VecDeque<T>>>);

        impl<T> Worker<T> {
            pub(crate) fn new_lifo() -> Self {
                Worker(Arc::new(Mutex::new(VecDeque::new())))
            }
            pub(crate) fn push(&self, task: T) {
                self.0.lock().unwrap().push_back(task);
            }
            pub(crate) fn pop(&self) -> Option<T> {
                self.0.lock().unwrap().pop_back()
            }
            pub(crate) fn is_empty(&self) -> bool {
                self.0.lock().unwrap().is_empty()
            }
            pub(crate) fn stealer(&self) -> Stealer<T> {
                Stealer(self.0.clone())
            }
        }

        #[derive(Debug)]
        pub(crate) struct Stealer<T>(Arc<Mutex<VecDeque<T>>>);

        impl<T> Stealer<T> {
            pub(crate) fn steal(&self) -> Steal<T> {
                self.0
                    .lock()
                    .unwrap()
                    .pop_front()
                    .map_or(Steal::Empty, Steal::Success)
            }
            pub(crate) fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
                steal_batch(&self.0, dest)
            }
            pub(crate) fn is_empty(&self) -> bool {
                self.0.lock().unwrap().is_empty()
            }
            pub(crate) fn len(&self) -> usize {
                self.0.lock().unwrap().len()
            }
        }
    }
}

//! A unit of work in a queue: [`Job`], a type-erased `FnOnce` in 16 bytes.
//!
//! A job is either a closure submitted with `execute` (nobody waits for it)
//! or a reference to a task cell submitted with `submit` (see `cell.rs`).
//! Queues move jobs around a lot, so a `Job` is kept to two words — a
//! pointer to a per-type table of functions, and one word of storage — which
//! moves in registers and packs four to a cache line in the deques. A value
//! that fits in the word (a closure capturing at most one pointer-sized
//! value, and every task reference) is stored *inline*: no allocation at
//! all. A larger one goes in a block of its own and the word holds its
//! address. The block is recycled as a task cell's is
//! ([`recycle`](crate::sync::recycle)), not a `Box`: a closure is mostly
//! freed by a worker, not by the thread that submitted it, and the
//! recycling's depot carries the block back to that thread, so a warm
//! `execute` of a closure of up to 256 bytes (aligned to at most 16) takes
//! nothing from the global allocator (`tests/cell_memory.rs`).
//!
//! A job that will not run is [cancelled](Job::cancel): its closure is
//! dropped and its task, if it has one, cancelled, so a handle never waits
//! for a task that can no longer run; a panic of that user code goes to the
//! pool's `on_panic` hook. Every path of the pool that gives up a job does
//! that; a job dropped anyway (`Drop`, the last resort) cancels its task
//! the same way with nobody to report to.

use std::alloc::Layout;
use std::any::TypeId;
use std::mem::{self, ManuallyDrop, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use crate::sync::{recycle, CellArc, StdArc};

use super::context::{NoPool, TaskContext};
use super::error::PanicPayload;
use super::id::TaskIdentity;
use super::state::Header;
use super::unwind::ignore_panic;

/// What running a job did, for the worker's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    /// The closure ran and returned.
    Completed,
    /// The closure ran and panicked (the panic was reported and stored).
    Panicked,
    /// Nothing ran: the entry was stale, or the run was moved.
    Skipped,
    /// Nothing ran: the task had been cancelled through its handle (a
    /// one-shot task before it started, a recurring one between runs).
    Cancelled,
}

/// One word of storage: holds a value inline if it fits, else the address
/// of its block.
type Slot = MaybeUninit<*mut ()>;

/// A queued unit of work (see the module doc).
pub(crate) struct Job {
    vtable: &'static VTable,
    slot: Slot,
}

// SAFETY: a `Job` is only ever built from a `U: Unit`, and `Unit: Send`; the
// slot holds that `U` (or its block's address), owned by the job and by
// nothing else.
unsafe impl Send for Job {}

/// The functions of one concrete `U: Unit` stored in a job.
struct VTable {
    /// Takes the value out of the slot and runs it.
    run: unsafe fn(&mut Slot, &dyn TaskContext) -> RunOutcome,
    /// Takes the value out of the slot and cancels it.
    cancel: unsafe fn(&mut Slot, &dyn TaskContext),
    /// The id and name of the value's task, if it is a task's.
    identity: unsafe fn(&Slot) -> Option<TaskIdentity>,
    /// False if it runs no task of the user's (see [`Job::is_users`]).
    is_users: unsafe fn(&Slot) -> bool,
    /// The `TypeId` of `U`.
    type_id: fn() -> TypeId,
}

/// True if a `U` is stored inline (it fits in the slot's size and alignment).
const fn is_inline<U>() -> bool {
    mem::size_of::<U>() <= mem::size_of::<Slot>() && mem::align_of::<U>() <= mem::align_of::<Slot>()
}

/// Moves `value` into a fresh slot (inline, or into a block of its own).
fn store<U>(value: U) -> Slot {
    let mut slot = Slot::uninit();
    if is_inline::<U>() {
        // SAFETY: `U` fits in the slot's size and alignment (checked above),
        // and the slot is fresh, so nothing is overwritten.
        unsafe { ptr::write(slot.as_mut_ptr().cast::<U>(), value) };
    } else {
        let block = block_of::<U>();
        // SAFETY: a fresh block of at least `U`'s size and alignment (or,
        // for a zero-sized `U`, an aligned dangling address, where a write
        // writes nothing).
        unsafe { block.as_ptr().write(value) };
        slot.write(block.as_ptr().cast());
    }
    slot
}

/// A block for a `U` stored out of line: from the recycling, or for a
/// zero-sized `U` (one too aligned for the slot) an aligned dangling
/// address, which is never given back.
fn block_of<U>() -> NonNull<U> {
    if mem::size_of::<U>() == 0 {
        return NonNull::dangling();
    }
    recycle::alloc(Layout::new::<U>()).cast()
}

/// Gives back the block of a `U` whose value was moved out.
///
/// # Safety
///
/// `block` came from `block_of::<U>()` and is not used again.
unsafe fn free_block<U>(block: *mut U) {
    if mem::size_of::<U>() != 0 {
        // SAFETY: a block of `U`'s layout from `recycle::alloc`, given up
        // (caller).
        unsafe { recycle::dealloc(NonNull::new_unchecked(block.cast()), Layout::new::<U>()) };
    }
}

/// Moves the value back out of a slot filled by `store::<U>`.
///
/// # Safety
///
/// `slot` was filled by `store::<U>` with this same `U`, and the value was
/// not taken out before; it must not be used again afterwards.
unsafe fn take<U>(slot: &mut Slot) -> U {
    if is_inline::<U>() {
        // SAFETY: `store::<U>` wrote a `U` inline here, not yet taken (caller).
        unsafe { ptr::read(slot.as_ptr().cast::<U>()) }
    } else {
        // SAFETY: `store::<U>` wrote the address of a block holding a `U`
        // here, not yet taken: the value is moved out, then the block is
        // given back, once.
        unsafe {
            let block = slot.assume_init().cast::<U>();
            let value = ptr::read(block);
            free_block(block);
            value
        }
    }
}

/// Borrows the value in a slot filled by `store::<U>`.
///
/// # Safety
///
/// `slot` was filled by `store::<U>` with this same `U`, and the value was
/// not taken out.
unsafe fn peek<U>(slot: &Slot) -> &U {
    if is_inline::<U>() {
        // SAFETY: a `U` is stored inline here, not taken (caller).
        unsafe { &*slot.as_ptr().cast::<U>() }
    } else {
        // SAFETY: the address of a block holding a `U` is stored here, not
        // taken (caller).
        unsafe { &*slot.assume_init().cast::<U>() }
    }
}

/// The vtable of one `U`, as a promoted `'static` constant.
struct VTableOf<U>(std::marker::PhantomData<U>);

impl<U: Unit> VTableOf<U> {
    const VTABLE: VTable = VTable {
        // SAFETY: `Job` calls `run` or `cancel` once, on the slot that
        // `Job::new::<U>` filled, and never touches the slot afterwards.
        run: |slot, ctx| unsafe { take::<U>(slot) }.run(ctx),
        // SAFETY: as `run`'s.
        cancel: |slot, ctx| unsafe { take::<U>(slot) }.cancel(ctx),
        // SAFETY: `Job` calls it on the filled slot before the value is taken.
        identity: |slot| unsafe { peek::<U>(slot) }.identity(),
        // SAFETY: as `identity`'s.
        is_users: |slot| unsafe { peek::<U>(slot) }.is_users(),
        type_id: TypeId::of::<U>,
    };
}

impl Job {
    fn new<U: Unit>(value: U) -> Job {
        Job {
            vtable: &VTableOf::<U>::VTABLE,
            slot: store(value),
        }
    }

    /// A job without a handle: the closure itself.
    pub(crate) fn detached<F: FnOnce() + Send + 'static>(f: F) -> Job {
        Job::new(Detached(f))
    }

    /// A job that runs the task in `cell` (holding one reference to it).
    pub(crate) fn task<C: Runnable>(cell: CellArc<C>) -> Job {
        Job::new(TaskRef(Some(cell)))
    }

    /// The closure of a job made by [`Job::detached`] with this `F` (for
    /// giving a refused job back to its submitter); `None` for any other job.
    pub(crate) fn into_detached<F: FnOnce() + Send + 'static>(self) -> Option<F> {
        if (self.vtable.type_id)() != TypeId::of::<Detached<F>>() {
            return None;
        }
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the type id says the slot was filled by `store` with a
        // `Detached<F>`; `this` is never dropped, so it is taken only once.
        Some(unsafe { take::<Detached<F>>(&mut this.slot) }.0)
    }

    /// Runs the job on the calling thread, for `pool`. Nothing unwinds out
    /// of it: a panic of the job is caught, given to the pool's `on_panic`
    /// hook, and stored in its handle if it has one; a panic of a destructor that runs here (a
    /// detached closure's captures, the output of a task whose handle is
    /// gone) is caught and reported too.
    #[inline]
    pub(crate) fn run(self, ctx: &dyn TaskContext) -> RunOutcome {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the vtable and the slot were made together by `Job::new`;
        // `this` is never dropped, so the value is taken exactly once.
        unsafe { (this.vtable.run)(&mut this.slot, ctx) }
    }

    /// The id and name of the task this job runs; `None` for a closure
    /// from `execute`.
    pub(crate) fn identity(&self) -> Option<TaskIdentity> {
        // SAFETY: as in `run`: made together; the value is still there.
        unsafe { (self.vtable.identity)(&self.slot) }
    }

    /// False for a job that runs no task of the user's: a check of the wall
    /// clock, or the entry a recurring task left behind when it was placed
    /// again (stale: it can run nothing). `shutdown_now` gives such jobs up
    /// instead of returning them, so it returns each task once.
    pub(crate) fn is_users(&self) -> bool {
        // SAFETY: as in `identity`.
        unsafe { (self.vtable.is_users)(&self.slot) }
    }

    /// Gives the job up unrun: drops its closure and cancels its task, if
    /// it has one. A panic of that user code (the closure's destructor, the
    /// task's waker) is reported through `ctx`, never unwound.
    pub(crate) fn cancel(self, ctx: &dyn TaskContext) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: as in `run`.
        unsafe { (this.vtable.cancel)(&mut this.slot, ctx) }
    }
}

impl Drop for Job {
    /// The last resort, for a job dropped where no pool is at hand: it is
    /// cancelled as by [`Job::cancel`], and a panic of user code is caught
    /// with nobody to report it to.
    fn drop(&mut self) {
        let (cancel, slot) = (self.vtable.cancel, &mut self.slot);
        // SAFETY: as in `run`: made together, taken once (this is the last
        // use of the job).
        ignore_panic(|| unsafe { cancel(slot, &NoPool) });
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}

/// What a job can hold.
trait Unit: Send + 'static {
    /// Runs it (see [`Job::run`]).
    fn run(self, ctx: &dyn TaskContext) -> RunOutcome;

    /// Gives it up unrun (see [`Job::cancel`]).
    fn cancel(self, ctx: &dyn TaskContext);

    /// See [`Job::identity`].
    fn identity(&self) -> Option<TaskIdentity> {
        None
    }

    /// See [`Job::is_users`].
    fn is_users(&self) -> bool {
        true
    }
}

/// A closure from `execute`.
struct Detached<F>(F);

impl<F: FnOnce() + Send + 'static> Unit for Detached<F> {
    fn run(self, ctx: &dyn TaskContext) -> RunOutcome {
        // The captures are dropped inside the call, so inside catch_unwind.
        match catch_unwind(AssertUnwindSafe(self.0)) {
            Ok(()) => RunOutcome::Completed,
            Err(payload) => {
                ctx.report(PanicPayload::new(payload));
                RunOutcome::Panicked
            }
        }
    }

    fn cancel(self, ctx: &dyn TaskContext) {
        ctx.drop_reporting(self.0);
    }
}

/// A task cell as the queues see it.
pub(crate) trait Runnable: Send + Sync + 'static {
    /// Runs the task in `this` if it is still scheduled, in `ctx`
    /// (catching a panic and showing it to the context); `Skipped` if
    /// it was cancelled.
    fn run(this: &CellArc<Self>, ctx: &dyn TaskContext) -> RunOutcome;

    /// Cancels the task if it has not started (its job is given up unrun),
    /// reporting panics of its user code through `ctx`.
    fn abandon(&self, ctx: &dyn TaskContext);

    /// The header and name of the user's task this job runs; `None` if it
    /// runs none (a timer future's alarm, a check of the wall clock).
    fn identity(&self) -> Option<(&Header, Option<&StdArc<str>>)>;

    /// False if it runs no task of the user's: no identity, or a stale
    /// entry of a task placed again since (see [`Job::is_users`]). Only
    /// the placement counts, not whether the task is final: the entry of
    /// a task cancelled since is still that task's, and `shutdown_now`
    /// returns it as it always did.
    fn is_users(&self) -> bool {
        self.identity().is_some()
    }
}

/// A task with a handle: the queue's reference to its cell (`None` once
/// it ran: a periodic task is scheduled again by then, and dropping the
/// reference must not cancel it).
struct TaskRef<C: Runnable>(Option<CellArc<C>>);

impl<C: Runnable> Unit for TaskRef<C> {
    fn run(mut self, ctx: &dyn TaskContext) -> RunOutcome {
        let Some(cell) = self.0.take() else {
            return RunOutcome::Skipped;
        };
        let outcome = C::run(&cell, ctx);
        // If the handle is gone, this drops the task's output: a panic of
        // its destructor goes to the hook (the task's own outcome stands).
        ctx.drop_reporting(cell);
        outcome
    }

    fn cancel(mut self, ctx: &dyn TaskContext) {
        if let Some(cell) = self.0.take() {
            cell.abandon(ctx);
            ctx.drop_reporting(cell);
        }
    }

    fn identity(&self) -> Option<TaskIdentity> {
        let (header, name) = self.0.as_ref()?.identity()?;
        Some(header.identity(name))
    }

    fn is_users(&self) -> bool {
        self.0.as_ref().is_some_and(|cell| cell.is_users())
    }
}

impl<C: Runnable> Drop for TaskRef<C> {
    /// A `TaskRef` is consumed by `run` or `cancel`; one dropped otherwise
    /// (only while unwinding out of them) still cancels its task.
    fn drop(&mut self) {
        if let Some(cell) = self.0.take() {
            cell.abandon(&NoPool);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::context::TestContext;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn small_closures_are_inline_and_large_ones_out_of_line() {
        assert!(is_inline::<Detached<u64>>());
        assert!(is_inline::<
            TaskRef<crate::task::cell::TaskCell<fn() -> u8, u8>>,
        >());
        assert!(!is_inline::<Detached<[u64; 2]>>());
        assert!(!is_inline::<Detached<u128>>() || mem::align_of::<u128>() <= 8);
        assert_eq!(mem::size_of::<Job>(), 16);
        assert_eq!(mem::size_of::<Option<Job>>(), 16);
    }

    #[test]
    fn jobs_run_and_drop_their_captures_exactly_once() {
        let counter = Arc::new(AtomicUsize::new(0));
        let small = counter.clone(); // one pointer: inline
        let big = (counter.clone(), [7u64; 4]); // out of line
        let ran = Arc::new(AtomicUsize::new(0));
        let (r1, r2) = (ran.clone(), ran.clone());
        let jobs = [
            Job::detached(move || {
                let _keep = &small;
                r1.fetch_add(1, Ordering::SeqCst);
            }),
            Job::detached(move || {
                let (_keep, array) = &big;
                assert_eq!(array[3], 7);
                r2.fetch_add(1, Ordering::SeqCst);
            }),
        ];
        assert_eq!(Arc::strong_count(&counter), 3);
        let ctx = TestContext::default();
        for job in jobs {
            assert_eq!(job.run(&ctx), RunOutcome::Completed);
        }
        assert_eq!(ran.load(Ordering::SeqCst), 2);
        assert_eq!(
            Arc::strong_count(&counter),
            1,
            "captures dropped after the run"
        );

        let unrun = (counter.clone(), [0u8; 64]);
        let small = counter.clone();
        drop(Job::detached(move || {
            let (keep, pad) = unrun;
            drop((keep, pad));
        }));
        drop(Job::detached(move || drop(small)));
        assert_eq!(
            Arc::strong_count(&counter),
            1,
            "captures dropped with an unrun job"
        );
    }

    fn make_small() -> impl FnOnce() + Send + 'static {
        let n = 5u32;
        move || assert_eq!(n, 5)
    }

    fn make_big() -> impl FnOnce() + Send + 'static {
        let a = [3u64; 8];
        move || assert_eq!(a[7], 3)
    }

    /// The closure in `job`, as the type that `_make` returns.
    fn unbox_as<F: FnOnce() + Send + 'static>(job: Job, _make: fn() -> F) -> Option<F> {
        job.into_detached::<F>()
    }

    /// A zero-sized capture aligned past the slot (stored out of line,
    /// at a dangling address), one aligned past a recycled block (64), one
    /// larger than the largest recycled block: each runs, or is cancelled,
    /// and is dropped once.
    #[test]
    fn closures_of_every_layout_run_or_cancel_and_drop_once() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        #[repr(align(32))]
        struct AlignedZst;
        impl Drop for AlignedZst {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }
        #[repr(align(64))]
        struct Wide([u8; 40]);
        let counter = Arc::new(AtomicUsize::new(0));
        let ctx = TestContext::default();
        let jobs = |counter: &Arc<AtomicUsize>| {
            let (c1, c2, c3) = (counter.clone(), counter.clone(), counter.clone());
            let zst = AlignedZst;
            let wide = Wide([1; 40]);
            let large = [2u8; 1000];
            [
                Job::detached(move || {
                    let _keep = &zst;
                }),
                Job::detached(move || {
                    let wide = wide;
                    assert_eq!(wide.0[39], 1);
                    c1.fetch_add(1, Ordering::SeqCst);
                }),
                Job::detached(move || {
                    assert_eq!(large[999], 2);
                    c2.fetch_add(1, Ordering::SeqCst);
                }),
                Job::detached(move || drop(c3)),
            ]
        };
        for job in jobs(&counter) {
            assert_eq!(job.run(&ctx), RunOutcome::Completed);
        }
        assert_eq!(counter.load(Ordering::SeqCst), 2, "the runs");
        assert_eq!(DROPS.load(Ordering::SeqCst), 1, "the aligned capture");
        for job in jobs(&counter) {
            job.cancel(&ctx);
        }
        assert_eq!(counter.load(Ordering::SeqCst), 2, "nothing ran");
        assert_eq!(DROPS.load(Ordering::SeqCst), 2, "dropped unrun");
        assert_eq!(Arc::strong_count(&counter), 1, "every capture dropped");
    }

    /// Whether `Job::detached` stores a closure like `_f` out of line.
    fn out_of_line<F>(_f: &F) -> bool {
        !is_inline::<Detached<F>>()
    }

    /// The block's address (a job stored out of line).
    fn block_address(job: &Job) -> usize {
        // SAFETY: a job stored out of line holds its block's address.
        unsafe { job.slot.assume_init() as usize }
    }

    /// Runs `job` if `i` is even, else cancels it.
    fn run_or_cancel(job: Job, i: u64, ctx: &TestContext) {
        if i % 2 == 0 {
            assert_eq!(job.run(ctx), RunOutcome::Completed);
        } else {
            job.cancel(ctx);
        }
    }

    /// The blocks are aligned for the closure, and given back when it runs
    /// or is cancelled: a recycled one comes back to this thread's cache
    /// (one fresh block for a hundred jobs), one from the global allocator
    /// goes back to it (as many freed as taken).
    #[test]
    fn out_of_line_blocks_are_aligned_and_given_back() {
        // The counts below read the recycling (off under Miri otherwise).
        crate::sync::recycle::recycle_under_miri();
        #[repr(align(32))]
        struct AlignedZst;
        #[repr(align(64))]
        struct Wide([u8; 40]);
        let ctx = TestContext::default();
        let zst = AlignedZst;
        let zst_job = move || {
            let _keep = &zst;
        };
        assert!(out_of_line(&zst_job));
        let job = Job::detached(zst_job);
        assert_eq!(block_address(&job) % 32, 0);
        assert_eq!(job.run(&ctx), RunOutcome::Completed);

        let before = recycle::traffic();
        for i in 0..100u8 {
            let wide = Wide([i; 40]);
            let f = move || {
                // The whole `Wide` moves in (its field alone would be copied).
                let wide = wide;
                assert_eq!(wide.0[39], i);
            };
            assert!(out_of_line(&f));
            let job = Job::detached(f);
            assert_eq!(block_address(&job) % 64, 0, "aligned for the closure");
            run_or_cancel(job, u64::from(i), &ctx);
        }
        let global = recycle::traffic();
        assert_eq!(
            global.fresh - before.fresh,
            100,
            "64-aligned: the global allocator's"
        );
        assert_eq!(global.freed - before.freed, 100, "each given back");

        for i in 0..100u64 {
            let payload = [i; 5];
            let f = move || assert_eq!(payload[4], i);
            assert!(out_of_line(&f));
            let job = Job::detached(f);
            assert_eq!(block_address(&job) % 16, 0);
            run_or_cancel(job, i, &ctx);
        }
        let recycled = recycle::traffic();
        assert!(
            recycled.fresh - global.fresh <= 1,
            "a recycled block comes back: {} fresh for 100 jobs",
            recycled.fresh - global.fresh
        );
    }

    #[test]
    fn a_refused_closure_comes_back_whole() {
        unbox_as(Job::detached(make_small()), make_small).expect("inline")();
        unbox_as(Job::detached(make_big()), make_big).expect("out of line")();
        assert!(unbox_as(Job::detached(make_small()), make_big).is_none());
    }

    #[test]
    fn a_panicking_job_is_caught_and_reported() {
        let ctx = TestContext::default();
        let outcome = Job::detached(|| std::panic::panic_any("expected")).run(&ctx);
        assert_eq!(outcome, RunOutcome::Panicked);
        assert_eq!(*ctx.panics.lock().unwrap(), [Some("expected".to_owned())]);
    }

    /// A capture whose destructor panics.
    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("expected: dropped");
        }
    }

    #[test]
    fn a_job_given_up_reports_its_closures_panic_and_never_unwinds() {
        let ctx = TestContext::default();
        let capture = PanicsOnDrop;
        Job::detached(move || drop(capture)).cancel(&ctx);
        assert_eq!(
            *ctx.panics.lock().unwrap(),
            [Some("expected: dropped".to_owned())]
        );
    }
}

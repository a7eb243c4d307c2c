//! The state of a task: the atomic word that a worker, a canceller and a
//! handle share ([`Header`]), its state machine, and the ground rules every
//! task cell (`cell.rs`, `scheduled.rs`, `recurring.rs`) follows.
//!
//! A submitted closure lives in a [`TaskCell`] together with one atomic
//! state word and, once someone waits for it, a slot for their waker (in
//! the task's extras, below); the closure
//! and, once it ran, its output share one slot (the *stage*: a task never
//! holds both). The queues hold a reference to the cell in a
//! [`Job`](crate::job::Job); the [`TaskHandle`](crate::TaskHandle) holds
//! another through [`Joinable<T>`]. A closure submitted with `execute` has
//! no handle and needs no cell: its job is the closure itself.
//!
//! # The state word
//!
//! ```text
//!  bits 0-1: lifecycle   SCHEDULED --claim--> RUNNING --finish--> COMPLETE
//!                            |
//!                            +-------cancel--------------------> CANCELLED
//!  bit 2:    WAITER      a waker is stored in `waiter` and must be woken
//!                        when the lifecycle becomes final
//!  bit 3:    CANCEL_REQUESTED  (recurring tasks) cancelled during a run
//!  bit 4:    RESCHEDULE_REQUESTED  (recurring tasks) a new trigger came
//!                        during a run
//!  bit 5:    TIMED_OUT   (tasks with a time-out) the time-out came first:
//!                        with SCHEDULED it cancels the task; with RUNNING
//!                        it sets CANCEL_REQUESTED too (the run is asked to
//!                        stop) and settles the task for its handle at once
//!  bit 6:    RETURNED    the handle returned the result as a `Future`
//!  bit 7:    TAKEN       the handle took a one-shot task's output
//!  bits 8-:  PLACEMENT   (recurring tasks) the generation of the timer
//!                        entry the task waits on
//! ```
//!
//! RETURNED and TAKEN are written only by the unique handle, once the task
//! is settled; they are bits of the word, not bytes of their own, so that
//! the header is two words (below).
//!
//! # Two words: the state, and what only a waiter or an id needs
//!
//! The header is the state word and a pointer to the task's [`Extras`]:
//! its id, and the waiter slot with its lock. A task that nobody waits
//! for and whose id nobody asks for (a detached timer, a cancelled one,
//! most of a burst of timers) never makes them, and its cell is 16 bytes
//! smaller than with them inline: a scheduled task's cell is a 40-byte
//! block, a 48-byte chunk of glibc's malloc, where it was a 56-byte block
//! in a 64-byte chunk (`benches/README.md`, `pending_bytes`). Whoever
//! first needs them (a handle that waits, `id()`, a panic's report, a
//! tracing span) makes them and publishes them with a compare-and-swap
//! from null (`Release`; readers load with `Acquire`); a loser frees its
//! own and uses the winner's. They live until the cell is dropped.
//!
//! A finisher reads the waiter slot only after its read-modify-write of
//! the state saw WAITER, which the waiter set after it had made the
//! extras (ground rules, below): that RMW synchronises with the waiter's,
//! so the finisher sees the pointer. Without WAITER nobody needs them.
//!
//! CANCEL_REQUESTED on a running one-shot task (a `cancel()` that came too
//! late, a time-out) changes nothing of its lifecycle: it is what
//! [`chronopool::cancelled`](crate::cancelled) reports to the running
//! closure, the cooperative stop.
//!
//! A recurring task (`recurring.rs`) goes back from RUNNING to SCHEDULED
//! after each run (`try_reset`), unless a cancel arrived during the run
//! (`CANCEL_REQUESTED`), in which case the run ends it (RUNNING ->
//! CANCELLED), or a reschedule did (`RESCHEDULE_REQUESTED`), in which case
//! the run computes its next deadline again first; it ends as COMPLETE when
//! a run, its trigger or a panic ends it.
//!
//! Only the timer entry whose generation is the word's `PLACEMENT` may
//! claim a recurring task (`leave_scheduled_at`): an entry left behind when
//! the task was placed again (rescheduled, or moved by a step of the wall
//! clock) is *stale*, and it can neither run the task nor take the claim
//! from the entry that is due. The generation changes only with a reset
//! (`try_reset`), by the holder of RUNNING.
//!
//! COMPLETE and CANCELLED are final: a final state never changes again.
//!
//! # Ground rules
//!
//! * **`stage`** holds the closure until whoever moves the lifecycle out
//!   of SCHEDULED takes it: the worker that claims it (to RUNNING) or the
//!   canceller (to CANCELLED). Exactly one of them wins that
//!   compare-and-swap, so exactly one of them takes the closure, and it is
//!   run or dropped exactly once. The claiming worker then writes the
//!   output into the stage, before it moves RUNNING -> COMPLETE with
//!   `Release`; the output is read only by the handle, after it has seen
//!   COMPLETE with `Acquire`. There is one handle, and taking the output
//!   consumes it, so there is one reader.
//! * **`waiter`** is only touched under its lock. A waiter stores its waker
//!   *first* and sets WAITER *second* (a CAS that fails if the state is
//!   already final); the finisher moves to a final state *first* and, if the
//!   old state had WAITER, takes the waker *second*. Both steps are RMWs on
//!   the one state word, so either the finisher sees WAITER and wakes the
//!   stored waker, or the waiter's CAS sees the final state and does not
//!   wait: no lost wake-up. A waiter whose CAS failed takes its waker back
//!   out, so that a final task holds no waker (a waker is user code: it is
//!   dropped by the thread that registered it, not by whoever frees the
//!   cell).
//! * **User code** in a cell (the closure, the output, the waker) is
//!   dropped or woken outside the state protocol's critical steps and
//!   through the task's [`TaskContext`], so a panic in it is reported,
//!   never unwound into a worker or into the caller of `cancel` (see
//!   `context.rs`).
//! * A job dropped without running (a queue dropped with the pool, a
//!   [`PendingTask`](crate::PendingTask) the caller discards) cancels its
//!   task, so no handle ever waits for a task that can no longer run.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::task::Waker;

use crate::sync::cell::UnsafeCell;
use crate::sync::recycle;
use crate::sync::{AtomicPtr, AtomicUsize, CellArc, Mutex, Ordering, StdArc};
use crate::time::Nanos;

use super::context::TaskContext;
use super::error::TaskError;
use super::id::{IdSlot, TaskId, TaskIdentity};

const LIFECYCLE: usize = 0b11;
pub(crate) const SCHEDULED: usize = 0;
pub(crate) const RUNNING: usize = 1;
pub(crate) const COMPLETE: usize = 2;
pub(crate) const CANCELLED: usize = 3;
const WAITER: usize = 0b100;
/// A periodic task was cancelled while it ran: no further run.
const CANCEL_REQUESTED: usize = 0b1000;
/// A recurring task was rescheduled while it ran: the run computes its
/// next deadline again, with the new trigger.
const RESCHEDULE_REQUESTED: usize = 0b1_0000;
/// A task with a time-out timed out (module doc).
const TIMED_OUT: usize = 0b10_0000;
/// The handle returned the result as a `Future` (only the unique handle
/// sets it: it orders nothing).
const RETURNED: usize = 0b100_0000;
/// The handle took a [`TaskCell`](super::TaskCell)'s output out of its
/// slot (only the unique handle sets it; the cell's destructor reads it
/// after the last reference's `Acquire` fence).
const TAKEN: usize = 0b1000_0000;
/// Where the placement generation starts in the state word.
const PLACEMENT_SHIFT: u32 = 8;
/// The placement generations that fit in the word (they wrap: a stale
/// entry would have to outlive 2^24 placements of its task, on a 32-bit
/// target, 2^56 on a 64-bit one, to be taken for the current one).
pub(crate) const PLACEMENTS: usize = usize::MAX >> PLACEMENT_SHIFT;

/// What [`Header::try_reset`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reset {
    /// RUNNING -> SCHEDULED, at the new placement.
    Done,
    /// A cancel came during the run: still RUNNING, the caller ends it.
    Cancelled,
    /// A reschedule came during the run: still RUNNING (the request is
    /// taken), the caller computes the next deadline again.
    Rescheduled,
}

/// What [`Header::request_reschedule`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RescheduleRequest {
    /// It was between runs: now RUNNING, held by the caller, which places
    /// it again.
    Claimed,
    /// A run is in progress: it takes the new trigger when it ends.
    Requested,
    /// It had ended, or is ending (a cancel came).
    Lost,
}

/// What [`Header::time_out`] did. With `wake`, the caller takes the
/// waiter's waker ([`Header::take_waiter`]) and wakes it: the handle
/// settles with the time-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeOut {
    /// It had not started: now CANCELLED (timed out), and the caller owns
    /// the closure, to drop it.
    BeforeStart { wake: bool },
    /// It is running: the run is asked to stop, and its output, when it
    /// comes, is dropped unread.
    WhileRunning { wake: bool },
    /// It had finished (or been cancelled) first.
    Lost,
}

/// True if a task in state `s` is settled for its handle: final, or timed
/// out while running.
fn settled(s: usize) -> bool {
    s & LIFECYCLE >= COMPLETE || s & TIMED_OUT != 0
}

/// What [`Header::cancel_periodic`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeriodicCancel {
    /// It was between runs: now CANCELLED, and the caller owns the closure
    /// (to drop it) and must wake the waiter if the flag says so
    /// ([`Header::take_waiter`]).
    Stopped { wake: bool },
    /// It is running: the run finishes, then no further run is queued.
    Requested,
    /// It had already ended, or a cancel already won.
    Lost,
}

/// A task cell as a handle sees it whatever its output: something to
/// cancel and to look at.
pub(crate) trait Cancellable: Send + Sync {
    /// The state word and the extras (id, waiter slot).
    fn header(&self) -> &Header;

    /// Cancels the task if it is still scheduled (true iff this call did),
    /// dropping its closure and waking its waiter through `ctx`
    /// (a panic there is reported, never unwound into the caller).
    fn cancel(&self, ctx: &dyn TaskContext) -> bool;

    /// When a scheduled task is (next) due; `None` for an immediate task.
    fn deadline(&self) -> Option<Nanos> {
        None
    }

    /// The task's name, if it was given one.
    fn name(&self) -> Option<&StdArc<str>> {
        None
    }
}

/// The handle's view of a task cell with output `T`.
pub(crate) trait Joinable<T>: Cancellable {
    /// The result, once [`Header::is_final`] has returned true. Called at
    /// most once (the handle is consumed or fused by it).
    fn take_output(&self) -> Result<T, TaskError>;

    /// The same cell, without its output type (for a cancel handle), from
    /// the caller's reference in `this` (as for `Delayed::job`; call it
    /// through [`cancellable_of`]).
    ///
    /// # Safety
    ///
    /// `this` holds a reference to `self`.
    unsafe fn cancellable(
        &self,
        this: &mut Option<CellArc<dyn Joinable<T>>>,
    ) -> CellArc<dyn Cancellable>;
}

/// `cell`, as a handle with output `T` holds it.
pub(crate) fn joinable<T, C: Joinable<T> + 'static>(cell: CellArc<C>) -> CellArc<dyn Joinable<T>> {
    // SAFETY: the closure is the unsizing coercion.
    unsafe { CellArc::unsize(cell, |cell| cell as _) }
}

/// `cell`, as a cancel handle holds it.
pub(crate) fn cancellable<C: Cancellable + 'static>(cell: CellArc<C>) -> CellArc<dyn Cancellable> {
    // SAFETY: the closure is the unsizing coercion.
    unsafe { CellArc::unsize(cell, |cell| cell as _) }
}

/// A handle's cell, without its output type ([`Joinable::cancellable`]).
pub(crate) fn cancellable_of<T>(cell: CellArc<dyn Joinable<T>>) -> CellArc<dyn Cancellable> {
    // SAFETY: the slot holds a reference to the cell it is called on.
    CellArc::lend(cell, |cell, this| unsafe { cell.cancellable(this) })
}

/// The body of [`Joinable::cancellable`] for a cell of type `C`.
///
/// # Safety
///
/// `this` holds a reference to a `C`.
pub(crate) unsafe fn cancellable_as<T, C: Joinable<T> + 'static>(
    this: &mut Option<CellArc<dyn Joinable<T>>>,
) -> CellArc<dyn Cancellable> {
    let this = this.take().expect("the caller's reference");
    // SAFETY: it is a `C` (caller).
    cancellable(unsafe { CellArc::downcast_unchecked::<C>(this) })
}

/// The part of a task cell that does not depend on its closure or output
/// type: the state word, and the task's [`Extras`] once made (module doc).
///
/// `repr(C)`: the state word first, where a cancel or a run reads it, in
/// the cache line of the cell's reference counts.
#[repr(C)]
pub(crate) struct Header {
    state: AtomicUsize,
    /// Null until someone needs the extras; then theirs, until the header
    /// is dropped (module doc).
    extras: AtomicPtr<Extras>,
    /// The header owns its extras: it is `Send` and `Sync` only as far as
    /// they are (an `AtomicPtr` alone would be whatever they hold).
    owns: PhantomData<Box<Extras>>,
}

/// What only a waiter or a reader of the task's id needs (module doc):
/// made on first use, in a block of the crate's recycling.
pub(crate) struct Extras {
    id: IdSlot,
    /// Guards `waiter`.
    waiter_lock: Mutex<()>,
    waiter: UnsafeCell<Option<Waker>>,
}

impl Default for Extras {
    fn default() -> Self {
        Extras {
            id: IdSlot::default(),
            waiter_lock: Mutex::new(()),
            waiter: UnsafeCell::new(None),
        }
    }
}

impl Extras {
    /// Runs `f` on the waiter slot, under its lock.
    fn with_waiter<R>(&self, f: impl FnOnce(&mut Option<Waker>) -> R) -> R {
        let _locked = self.waiter_lock.lock();
        // SAFETY: the slot is only reached here, under the lock held for
        // the whole call: no other reference to it exists meanwhile.
        self.waiter.with_mut(|slot| f(unsafe { &mut *slot }))
    }
}

impl Default for Header {
    fn default() -> Self {
        Header {
            state: AtomicUsize::new(SCHEDULED),
            extras: AtomicPtr::new(ptr::null_mut()),
            owns: PhantomData,
        }
    }
}

impl Drop for Header {
    fn drop(&mut self) {
        // `Relaxed`: whoever drops the header holds the cell alone, after
        // the last reference's `Acquire` fence, which orders the
        // publication before it.
        if let Some(extras) = NonNull::new(self.extras.load(Ordering::Relaxed)) {
            // Moved out, the block freed, then dropped: a waker still in
            // the slot (user code, dropped here as it was when the slot was
            // inline) that panics in its drop cannot leak the block.
            // SAFETY: published by `make_extras`, from `recycle::alloc`
            // with this layout and initialised; nobody else can reach it
            // now, and it is read out once.
            let owned = unsafe { extras.as_ptr().read() };
            // SAFETY: as above; the block is not used again.
            unsafe { recycle::dealloc(extras.cast(), Layout::new::<Extras>()) };
            drop(owned);
        }
    }
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header")
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

// SAFETY: `waiter` is only touched under `waiter_lock` (`with_waiter`);
// a `Waker` is `Send + Sync`. The extras are reached through `&Header`
// only after their publication (module doc) and freed only by the
// header's drop.
unsafe impl Sync for Extras {}

impl Header {
    /// The task's extras, made now if nobody needed them before (module
    /// doc).
    fn extras(&self) -> &Extras {
        match self.made_extras() {
            Some(extras) => extras,
            None => self.make_extras(),
        }
    }

    /// The task's extras, if someone made them.
    fn made_extras(&self) -> Option<&Extras> {
        // SAFETY: a non-null pointer was published with `Release` by
        // `make_extras`, initialised, and lives as long as `self`.
        NonNull::new(self.extras.load(Ordering::Acquire)).map(|extras| unsafe { extras.as_ref() })
    }

    /// Makes the extras and publishes them, or takes those another thread
    /// published first.
    #[cold]
    fn make_extras(&self) -> &Extras {
        let layout = Layout::new::<Extras>();
        let fresh = recycle::alloc(layout).cast::<Extras>();
        // SAFETY: a fresh block of `Extras`' layout, owned by nobody else.
        unsafe { fresh.as_ptr().write(Extras::default()) };
        match self.extras.compare_exchange(
            ptr::null_mut(),
            fresh.as_ptr(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: published: it lives until the header's drop.
            Ok(_) => unsafe { fresh.as_ref() },
            Err(winner) => {
                // SAFETY: ours was never published: drop and free it (an
                // empty slot and an undrawn id: no user code runs). The
                // winner's is initialised and lives as long as `self`.
                unsafe {
                    ptr::drop_in_place(fresh.as_ptr());
                    recycle::dealloc(fresh.cast(), layout);
                    &*winner
                }
            }
        }
    }

    /// The task's id (drawn the first time it is asked for: `id.rs`).
    pub(crate) fn id(&self) -> TaskId {
        self.extras().id.get()
    }

    /// The id of this task and `name`, its name.
    pub(crate) fn identity(&self, name: Option<&StdArc<str>>) -> TaskIdentity {
        (self.id(), name.cloned())
    }

    /// Marks the result as returned by the handle, polled as a `Future`.
    pub(crate) fn set_returned(&self) {
        self.state.fetch_or(RETURNED, Ordering::Relaxed);
    }

    /// True once the handle returned the result as a `Future`.
    pub(crate) fn is_returned(&self) -> bool {
        self.state.load(Ordering::Relaxed) & RETURNED != 0
    }

    /// Marks the output taken (only the unique handle calls it).
    pub(crate) fn set_taken(&self) {
        self.state.fetch_or(TAKEN, Ordering::Relaxed);
    }

    /// True once the handle took the output (the handle's own check, or
    /// the cell's destructor, after the last reference's `Acquire` fence).
    pub(crate) fn is_taken(&self) -> bool {
        self.state.load(Ordering::Relaxed) & TAKEN != 0
    }

    /// The lifecycle bits of the state (`Acquire`).
    pub(crate) fn lifecycle(&self) -> usize {
        self.state.load(Ordering::Acquire) & LIFECYCLE
    }

    /// Moves the lifecycle from SCHEDULED to `to`, returning the state it
    /// left, or `None` if it was not SCHEDULED. The winner owns the closure
    /// slot from then on.
    pub(crate) fn leave_scheduled(&self, to: usize) -> Option<usize> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & LIFECYCLE == SCHEDULED).then_some(s | to)
            })
            .ok()
    }

    /// RUNNING -> COMPLETE; returns the waiter's waker, to be woken, if
    /// one registered.
    #[must_use = "the waiter must be woken"]
    pub(crate) fn complete(&self) -> Option<Waker> {
        let prev = self.state.fetch_add(COMPLETE - RUNNING, Ordering::AcqRel);
        debug_assert_eq!(prev & LIFECYCLE, RUNNING);
        self.waiter_of(prev)
    }

    /// The registered waker, if the state `prev` that a final transition
    /// left had WAITER.
    pub(crate) fn waiter_of(&self, prev: usize) -> Option<Waker> {
        if prev & WAITER != 0 {
            self.take_waiter()
        } else {
            None
        }
    }

    /// Takes the registered waker out (the caller wakes it). Nothing if
    /// nobody ever registered: the extras are not made for it.
    pub(crate) fn take_waiter(&self) -> Option<Waker> {
        self.made_extras()?.with_waiter(Option::take)
    }

    /// Claims a recurring task for the timer entry of placement
    /// `placement`: SCHEDULED -> RUNNING if that is the task's current
    /// placement (module doc). False for a stale entry, or a task that is
    /// not SCHEDULED.
    pub(crate) fn leave_scheduled_at(&self, placement: usize) -> bool {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & LIFECYCLE == SCHEDULED && s >> PLACEMENT_SHIFT == placement)
                    .then_some(s | RUNNING)
            })
            .is_ok()
    }

    /// The current placement generation (module doc).
    pub(crate) fn placement(&self) -> usize {
        self.state.load(Ordering::Acquire) >> PLACEMENT_SHIFT
    }

    /// True if an entry of placement `placement` can no longer run the
    /// task: the task is final, or was placed again since.
    pub(crate) fn is_stale(&self, placement: usize) -> bool {
        let s = self.state.load(Ordering::Acquire);
        s & LIFECYCLE >= COMPLETE || s >> PLACEMENT_SHIFT != placement
    }

    /// After a run of a recurring task: RUNNING -> SCHEDULED at placement
    /// `placement`, unless a cancel or a reschedule was requested during
    /// the run (see [`Reset`]). `Release`: the run happens-before the next
    /// one, which claims with `Acquire`.
    pub(crate) fn try_reset(&self, placement: usize) -> Reset {
        let mut outcome = Reset::Done;
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                debug_assert_eq!(s & LIFECYCLE, RUNNING);
                if s & CANCEL_REQUESTED != 0 {
                    outcome = Reset::Cancelled;
                    None
                } else if s & RESCHEDULE_REQUESTED != 0 {
                    outcome = Reset::Rescheduled;
                    Some(s & !RESCHEDULE_REQUESTED)
                } else {
                    outcome = Reset::Done;
                    let placement = (placement & PLACEMENTS) << PLACEMENT_SHIFT;
                    Some((s & (WAITER | RETURNED | TAKEN)) | SCHEDULED | placement)
                }
            });
        outcome
    }

    /// Asks a recurring task to place itself again (see
    /// [`RescheduleRequest`]).
    pub(crate) fn request_reschedule(&self) -> RescheduleRequest {
        let mut outcome = RescheduleRequest::Lost;
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                match s & LIFECYCLE {
                    SCHEDULED => {
                        outcome = RescheduleRequest::Claimed;
                        Some(s | RUNNING)
                    }
                    RUNNING if s & CANCEL_REQUESTED == 0 => {
                        outcome = RescheduleRequest::Requested;
                        Some(s | RESCHEDULE_REQUESTED)
                    }
                    _ => {
                        outcome = RescheduleRequest::Lost;
                        None
                    }
                }
            });
        outcome
    }

    /// Cancels a periodic task (see [`PeriodicCancel`]).
    pub(crate) fn cancel_periodic(&self) -> PeriodicCancel {
        let mut outcome = PeriodicCancel::Lost;
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                match s & LIFECYCLE {
                    SCHEDULED => {
                        outcome = PeriodicCancel::Stopped {
                            wake: s & WAITER != 0,
                        };
                        Some(s | CANCELLED)
                    }
                    RUNNING if s & CANCEL_REQUESTED == 0 => {
                        outcome = PeriodicCancel::Requested;
                        Some(s | CANCEL_REQUESTED)
                    }
                    _ => {
                        outcome = PeriodicCancel::Lost;
                        None
                    }
                }
            });
        outcome
    }

    /// RUNNING -> CANCELLED (a periodic task that stops after a run);
    /// returns the waiter's waker, to be woken, if one registered.
    #[must_use = "the waiter must be woken"]
    pub(crate) fn finish_cancelled(&self) -> Option<Waker> {
        let prev = self.state.fetch_add(CANCELLED - RUNNING, Ordering::AcqRel);
        debug_assert_eq!(prev & LIFECYCLE, RUNNING);
        self.waiter_of(prev)
    }

    /// True once the task completed, panicked or was cancelled, or timed
    /// out (`Acquire`: after it returns true, the output is visible, unless
    /// it timed out: then nobody reads it).
    pub(crate) fn is_final(&self) -> bool {
        settled(self.state.load(Ordering::Acquire))
    }

    /// True if the task was cancelled (not by its time-out).
    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) & (LIFECYCLE | TIMED_OUT) == CANCELLED
    }

    /// True if the task's time-out came before it finished.
    pub(crate) fn is_timed_out(&self) -> bool {
        self.state.load(Ordering::Acquire) & TIMED_OUT != 0
    }

    /// True if the running task was asked to stop (a cancel or a time-out
    /// during its run): what `chronopool::cancelled()` reports.
    pub(crate) fn stop_requested(&self) -> bool {
        self.state.load(Ordering::Relaxed) & CANCEL_REQUESTED != 0
    }

    /// Asks a running one-shot task to stop (a `cancel()` that found it
    /// running): sets CANCEL_REQUESTED, nothing else.
    pub(crate) fn request_stop(&self) {
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & LIFECYCLE == RUNNING).then_some(s | CANCEL_REQUESTED)
            });
    }

    /// The time-out of a task with one (see [`TimeOut`]).
    pub(crate) fn time_out(&self) -> TimeOut {
        let mut outcome = TimeOut::Lost;
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                if settled(s) {
                    outcome = TimeOut::Lost;
                    return None;
                }
                let wake = s & WAITER != 0;
                let cleared = s & !WAITER;
                if s & LIFECYCLE == SCHEDULED {
                    outcome = TimeOut::BeforeStart { wake };
                    Some(cleared | CANCELLED | TIMED_OUT)
                } else {
                    outcome = TimeOut::WhileRunning { wake };
                    Some(cleared | TIMED_OUT | CANCEL_REQUESTED)
                }
            });
        outcome
    }

    /// Stores `waker` to be woken when the task becomes final.
    /// `registered` is false if it already is final (the waker is then
    /// taken back out). The wakers it replaced or took back are handed to
    /// the caller to drop (user code: see the module doc), after the
    /// protocol's steps are done.
    pub(crate) fn register(&self, waker: &Waker) -> Registration {
        let stored = self
            .extras()
            .with_waiter(|slot| slot.as_ref().is_some_and(|w| w.will_wake(waker)));
        let replaced = if stored {
            None
        } else {
            // Cloned outside the lock: a waker's `clone` is user code, and
            // may call back into this task (cancel it, whose wake-up takes
            // this lock). Stored second: a finisher that took the slot
            // meanwhile is met by the state's step below, as ever.
            let fresh = waker.clone();
            self.extras().with_waiter(|slot| slot.replace(fresh))
        };
        let registered = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (!settled(s)).then_some(s | WAITER)
            })
            .is_ok();
        // Final: nobody will wake what we stored (a finisher that saw an
        // earlier WAITER may have taken it already, and that is fine: the
        // caller sees the final state and does not wait).
        let taken_back = if registered { None } else { self.take_waiter() };
        Registration {
            registered,
            stale: [replaced, taken_back],
        }
    }
}

/// What [`Header::register`] did.
#[derive(Debug)]
#[must_use = "the stale wakers are user code to drop"]
pub(crate) struct Registration {
    /// True if a finisher will wake the waker; false if the task was
    /// already final.
    pub(crate) registered: bool,
    /// Wakers that left the slot, for the caller to drop.
    pub(crate) stale: [Option<Waker>; 2],
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The state word and the extras' pointer: 16 bytes, where the id, the
    /// waiter's lock, two flags and the waker inline made 32 (module doc).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn the_header_is_two_words() {
        assert_eq!(std::mem::size_of::<Header>(), 16);
        assert_eq!(std::mem::size_of::<Extras>(), 24);
    }
}

#[cfg(all(test, not(loom)))]
mod extras_tests {
    use super::*;
    use std::task::Wake;

    /// A waker whose clones are counted by its `Arc`.
    struct Noop;
    impl Wake for Noop {
        fn wake(self: StdArc<Self>) {}
    }

    #[test]
    fn the_extras_are_made_on_first_need_and_freed_with_the_header() {
        let header = Header::default();
        // A task's life without a waiter or an id: nothing made.
        assert!(header.leave_scheduled(RUNNING).is_some());
        assert!(header.complete().is_none());
        assert!(header.take_waiter().is_none());
        header.set_returned();
        header.set_taken();
        assert!(header.is_returned() && header.is_taken() && header.is_final());
        assert!(header.made_extras().is_none(), "nothing needed them");
        drop(header);

        let waker = StdArc::new(Noop);
        let header = Header::default();
        let id = header.id();
        assert!(header.made_extras().is_some());
        let registration = header.register(&Waker::from(StdArc::clone(&waker)));
        assert!(registration.registered);
        assert_eq!(header.id(), id, "the same extras");
        assert_eq!(StdArc::strong_count(&waker), 2, "the slot holds a clone");
        // Dropped with a waker still in the slot: the extras drop it.
        drop(header);
        assert_eq!(StdArc::strong_count(&waker), 1, "the extras were dropped");
    }

    #[test]
    fn a_waker_that_panics_in_its_drop_when_the_header_goes_unwinds_once() {
        struct Boom;
        impl Drop for Boom {
            fn drop(&mut self) {
                panic!("a waker's drop panicked");
            }
        }
        impl Wake for Boom {
            fn wake(self: StdArc<Self>) {}
        }
        let header = Header::default();
        let registration = header.register(&Waker::from(StdArc::new(Boom)));
        assert!(registration.registered);
        // The slot holds the last reference: the header's drop runs
        // `Boom::drop`, after the extras' block went back.
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(header)));
        assert!(unwound.is_err(), "the waker's panic reaches the dropper");
        // The allocator is whole after it (a double free of the block
        // would abort glibc here): a fresh header makes its extras.
        let again = Header::default();
        let _ = again.id();
        assert!(again.made_extras().is_some());
    }

    #[test]
    fn a_reset_keeps_the_handles_bits() {
        let header = Header::default();
        header.set_returned();
        header.set_taken();
        assert!(header.leave_scheduled_at(0));
        assert_eq!(header.try_reset(5), Reset::Done);
        assert_eq!(header.placement(), 5);
        assert!(header.is_returned() && header.is_taken());
        assert_eq!(header.lifecycle(), SCHEDULED);
    }

    #[test]
    fn threads_that_need_the_extras_at_once_share_one() {
        for _ in 0..200 {
            let header = Header::default();
            let waker = StdArc::new(Noop);
            let ids: Vec<TaskId> = std::thread::scope(|s| {
                let asking: Vec<_> = (0..3).map(|_| s.spawn(|| header.id())).collect();
                let registered = header.register(&Waker::from(StdArc::clone(&waker)));
                assert!(registered.registered);
                asking.into_iter().map(|t| t.join().unwrap()).collect()
            });
            assert!(ids.iter().all(|&id| id == header.id()), "one id: {ids:?}");
            assert_eq!(StdArc::strong_count(&waker), 2);
            drop(header);
            assert_eq!(StdArc::strong_count(&waker), 1);
        }
    }
}

/// The extras' publication under loom: a reader of the id and a waiter
/// that make them at once share one block (loom's allocator fails the
/// model on the loser's block if it leaks, or on the winner's if the
/// header's drop does not free it), and a finisher that saw WAITER finds
/// the waker the waiter stored.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::sync::{thread, Arc};
    use std::task::Wake;

    struct Woken(std::sync::atomic::AtomicBool);
    impl Wake for Woken {
        fn wake(self: StdArc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn racing_first_needs_and_a_finisher() {
        crate::loom_model::support::model("state::racing_first_needs_and_a_finisher", || {
            let header = Arc::new(Header::default());
            assert!(header.leave_scheduled(RUNNING).is_some());
            let woken = StdArc::new(Woken(std::sync::atomic::AtomicBool::new(false)));
            let asker = {
                let header = Arc::clone(&header);
                thread::spawn(move || header.id())
            };
            let finisher = {
                let header = Arc::clone(&header);
                thread::spawn(move || {
                    if let Some(waker) = header.complete() {
                        waker.wake();
                    }
                })
            };
            let registration = header.register(&Waker::from(StdArc::clone(&woken)));
            let id = asker.join().unwrap();
            finisher.join().unwrap();
            assert_eq!(header.id(), id);
            // Registered before the finish: the finisher woke it. After:
            // the register saw the final state.
            assert!(
                !registration.registered || woken.0.load(std::sync::atomic::Ordering::SeqCst),
                "a registered waiter was not woken"
            );
        });
    }
}

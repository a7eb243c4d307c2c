//! [`CellArc`]: the reference-counted pointer of task cells, whose blocks
//! come from the crate's own recycling ([`recycle`](super::recycle)), not
//! straight from the global allocator as `std::sync::Arc`'s do.
//!
//! Why not std's `Arc`: it allocates through the global allocator, and on
//! fresh pages a cell's allocation was 32 ns of a 150 ns insert (the cost
//! ledger in `benches/README.md`); recycled blocks are warm. Its counts
//! are std's: a strong count, and a weak one ([`CellWeak`], for the
//! timer's entry of a time-out and the wall clock's watch).
//!
//! A cell is shared as several trait objects (the timer's `dyn Delayed`,
//! the handle's `dyn Joinable<T>`, a cancel handle's `dyn Cancellable`).
//! Stable Rust does not let a pointer of our own coerce to a trait object
//! on its own, but it does unsize a raw pointer: [`CellArc::unsize`] does
//! it with the coercion written at the call site, and
//! [`CellArc::downcast_unchecked`] goes back to the concrete type where a
//! trait's method needs the owning pointer (a trait object cannot take
//! `self: CellArc<Self>` on stable).
//!
//! # The count's protocol (std's `Arc`'s)
//!
//! * A clone adds one with `Relaxed`: whoever clones already holds a
//!   reference, so the cell is alive and nothing needs ordering.
//! * A drop subtracts one with `Release`, so that every use of the cell by
//!   this holder happens before the count reaches zero; the holder that
//!   takes it to zero issues an `Acquire` fence, so that every other
//!   holder's uses happen before it drops the value.
//! * The strong references together hold one weak reference; the block is
//!   freed by whoever gives up the last weak one, by the same
//!   `Release`/`Acquire` pair. An upgrade adds a strong reference only to
//!   a non-zero count, with `Acquire`.
//!
//! Under `cfg(loom)` the count is loom's atomic, so the models see it (the
//! `cell_arc` model below, and every cell of the pool-level models).

use std::alloc::Layout;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop};
use std::ops::Deref;
use std::ptr::{self, NonNull};

use super::recycle;
use super::{fence, AtomicU32, Ordering};

/// The block a [`CellArc`] points to: the counts, then the value.
///
/// The counts are 32 bits each, 8 bytes together where two `usize`s were
/// 16: an alarm's block is 40 bytes (a 48-byte chunk of the allocator
/// where it was 64), a scheduled task's 40 (a 48-byte chunk, with the
/// cell's untagged slot, `task/cell.rs`, and its two-word header,
/// `task/state.rs`). More than [`MAX_REFS`]
/// references to one cell would take 2^31 handles; the count aborts there
/// (std's `Arc` aborts at `isize::MAX`, the same limit on 32-bit targets).
#[repr(C)]
pub(crate) struct ArcInner<T: ?Sized> {
    strong: AtomicU32,
    /// The [`CellWeak`]s, plus one held by all the strong references
    /// together (std's scheme): the block is freed when this reaches zero.
    weak: AtomicU32,
    value: T,
}

/// A shared, reference-counted task cell (module doc).
pub(crate) struct CellArc<T: ?Sized> {
    ptr: NonNull<ArcInner<T>>,
    /// Owns an `ArcInner<T>` (for the drop check and variance).
    owned: PhantomData<ArcInner<T>>,
}

/// A weak reference to a [`CellArc`]'s cell: it keeps the block, not the
/// value (the timer's entry for a time-out, the wall clock's watch).
pub(crate) struct CellWeak<T: ?Sized> {
    ptr: NonNull<ArcInner<T>>,
}

// SAFETY: as `std::sync::Arc`: the value is shared between the holders'
// threads (`Sync`) and dropped by whichever drops the last reference
// (`Send`); the counts are atomic.
unsafe impl<T: ?Sized + Send + Sync> Send for CellArc<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for CellArc<T> {}
// SAFETY: as above (a weak reference upgrades to a strong one).
unsafe impl<T: ?Sized + Send + Sync> Send for CellWeak<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for CellWeak<T> {}

// A `CellArc` moves its pointer, never the value: pinning the reference
// pins nothing (as `std::sync::Arc`).
impl<T: ?Sized> Unpin for CellArc<T> {}

/// More references than this is a leak of references (std's `Arc` has
/// the same limit on 32-bit targets): abort rather than let a count wrap.
const MAX_REFS: u32 = i32::MAX as u32;

/// Adds one to a count whose holder already has a reference (`Relaxed`:
/// module doc).
#[inline]
fn add_ref(count: &AtomicU32) {
    if count.fetch_add(1, Ordering::Relaxed) > MAX_REFS {
        std::process::abort();
    }
}

impl<T> CellArc<T> {
    /// Moves `value` into a fresh block, with one reference.
    pub(crate) fn new(value: T) -> Self {
        Self::with_refs(value, 1)
    }

    /// Moves `value` into a fresh block, with two references: the cell and
    /// its first holder (a queue, the timer) without a locked instruction
    /// (a clone's `fetch_add` waits for the fresh block's line).
    pub(crate) fn pair(value: T) -> (Self, Self) {
        let cell = Self::with_refs(value, 2);
        let other = CellArc {
            ptr: cell.ptr,
            owned: PhantomData,
        };
        (cell, other)
    }

    /// A fresh block holding `value`, with a strong count of `refs`: the
    /// caller makes that many `CellArc`s of it.
    fn with_refs(value: T, refs: u32) -> Self {
        let ptr = recycle::alloc(Layout::new::<ArcInner<T>>()).cast::<ArcInner<T>>();
        // SAFETY: `ptr` is a fresh block of `ArcInner<T>`'s layout, owned
        // by nobody else.
        unsafe {
            ptr.as_ptr().write(ArcInner {
                strong: AtomicU32::new(refs),
                weak: AtomicU32::new(1),
                value,
            })
        };
        CellArc {
            ptr,
            owned: PhantomData,
        }
    }

    /// A cell whose value holds a weak reference to itself: `make` gets it
    /// before the value exists (it upgrades to nothing until `new_cyclic`
    /// returns). A panic of `make` frees the block.
    pub(crate) fn new_cyclic(make: impl FnOnce(&CellWeak<T>) -> T) -> Self {
        let ptr = recycle::alloc(Layout::new::<ArcInner<T>>()).cast::<ArcInner<T>>();
        let raw = ptr.as_ptr();
        // SAFETY: a fresh block, owned by nobody else: the counts are
        // written, the value not yet (no strong reference reads it).
        unsafe {
            ptr::addr_of_mut!((*raw).strong).write(AtomicU32::new(0));
            ptr::addr_of_mut!((*raw).weak).write(AtomicU32::new(1));
        }
        // The strong references' weak one, until the value is there (if
        // `make` panics, its drop frees the block).
        let weak = CellWeak { ptr };
        let value = make(&weak);
        // SAFETY: the value's place is uninitialised and nobody reads it
        // while the strong count is zero.
        unsafe { ptr::addr_of_mut!((*raw).value).write(value) };
        // `Release`: an upgrade (`Acquire`) sees the value written.
        // SAFETY: the block is alive (the weak reference holds it).
        unsafe { (*raw).strong.store(1, Ordering::Release) };
        mem::forget(weak);
        CellArc {
            ptr,
            owned: PhantomData,
        }
    }
}

impl<T: ?Sized> CellArc<T> {
    /// The same reference, as a `CellArc<U>`: `erase` is the unsizing
    /// coercion, written at the call site as `|cell| cell as _` with the target
    /// type known (`CellArc<C>` to `CellArc<dyn Trait>`).
    ///
    /// # Safety
    ///
    /// `erase` returns its argument, unsized: the same block, with the
    /// metadata of a type the value really is (a trait it implements). An
    /// `as` cast to some other type is not that.
    pub(crate) unsafe fn unsize<U: ?Sized>(
        this: Self,
        erase: impl FnOnce(*mut ArcInner<T>) -> *mut ArcInner<U>,
    ) -> CellArc<U> {
        let raw = ManuallyDrop::new(this).ptr.as_ptr();
        let erased = erase(raw);
        debug_assert!(ptr::addr_eq(raw, erased), "unsize keeps the block");
        CellArc {
            // SAFETY: the same non-null address (caller).
            ptr: unsafe { NonNull::new_unchecked(erased) },
            owned: PhantomData,
        }
    }

    /// The same reference, as the concrete type `C` of its value.
    ///
    /// # Safety
    ///
    /// The value is a `C` (this reference was unsized from a `CellArc<C>`).
    pub(crate) unsafe fn downcast_unchecked<C>(this: Self) -> CellArc<C> {
        let raw = ManuallyDrop::new(this).ptr;
        CellArc {
            ptr: raw.cast::<ArcInner<C>>(),
            owned: PhantomData,
        }
    }

    /// Calls `f` on the value with `this` in a slot beside it: for a trait
    /// method that takes the caller's reference (a trait object cannot take
    /// `self: CellArc<Self>`). `f` may move the reference out of the slot
    /// into what it returns (a job that keeps the cell), never drop it;
    /// what it leaves there is dropped after it returned, when nothing
    /// borrows the value any more.
    pub(crate) fn lend<R>(this: Self, f: impl FnOnce(&T, &mut Option<Self>) -> R) -> R {
        let value: *const T = &*this;
        let mut held = Some(this);
        // SAFETY: the value lives while a reference does: `held`'s until
        // `f` returns, or the one `f` moved into what it returns (the
        // contract above), which outlives the call.
        let result = f(unsafe { &*value }, &mut held);
        drop(held);
        result
    }

    /// A weak reference to the cell.
    pub(crate) fn downgrade(this: &Self) -> CellWeak<T> {
        add_ref(&this.inner().weak);
        CellWeak { ptr: this.ptr }
    }

    /// True if both point to the same cell.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn ptr_eq(a: &Self, b: &Self) -> bool {
        ptr::addr_eq(a.ptr.as_ptr(), b.ptr.as_ptr())
    }

    /// Asks the CPU to bring the cell's block into the cache, its first
    /// 128 bytes at most (its counts and the task's header, state and
    /// closure): a hint, for a cell about to run.
    #[inline]
    pub(crate) fn prefetch(this: &Self) {
        #[cfg(target_arch = "x86_64")]
        {
            // The size comes from the pointer's metadata (a `dyn`'s
            // vtable), not from the block.
            let size = std::mem::size_of_val(this.inner());
            let block = this.ptr.as_ptr().cast::<i8>();
            for offset in [0, size.min(128) - 1] {
                // SAFETY: a prefetch is a hint; it never faults and does
                // not access memory observably. The address is inside the
                // live block.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        block.wrapping_add(offset),
                    );
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = this;
    }

    /// The address of the cell (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn as_ptr(this: &Self) -> *const T {
        &**this
    }

    /// The number of strong references (for tests: it may change at once).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn strong_count(this: &Self) -> usize {
        this.inner().strong.load(Ordering::Relaxed) as usize
    }

    fn inner(&self) -> &ArcInner<T> {
        // SAFETY: this reference keeps the block alive and initialised.
        unsafe { self.ptr.as_ref() }
    }
}

/// Gives up one weak reference to the block of `raw` (the strong
/// references' own, or a [`CellWeak`]): true if it was the last reference
/// of any kind, and the caller frees the block (with [`free_block`]).
///
/// # Safety
///
/// The caller held one weak reference to the block and gives it up here.
unsafe fn release_weak<T: ?Sized>(raw: *mut ArcInner<T>) -> bool {
    // SAFETY: the caller's weak reference keeps the counts alive. A
    // reference to the count alone: the value may be borrowed mutably by
    // its own destructor (a weak reference inside the value it points to).
    let weak = unsafe { &(*raw).weak };
    // One weak reference left is the caller's: with no strong reference,
    // nobody can make another (a downgrade needs a strong one, a clone a
    // weak one): free without a locked instruction.
    if weak.load(Ordering::Acquire) != 1 && weak.fetch_sub(1, Ordering::Release) != 1 {
        return false;
    }
    fence(Ordering::Acquire);
    true
}

/// Frees the block of `raw`, of `layout`.
///
/// # Safety
///
/// [`release_weak`] returned true for it: nobody else reaches the block;
/// `layout` is the block's.
unsafe fn free_block<T: ?Sized>(raw: *mut ArcInner<T>, layout: Layout) {
    // SAFETY: the last reference of any kind (caller), allocated with
    // `layout`.
    unsafe { recycle::dealloc(NonNull::new_unchecked(raw.cast::<u8>()), layout) };
}

impl<T: ?Sized> Clone for CellArc<T> {
    #[inline]
    fn clone(&self) -> Self {
        add_ref(&self.inner().strong);
        CellArc {
            ptr: self.ptr,
            owned: PhantomData,
        }
    }
}

impl<T: ?Sized> Drop for CellArc<T> {
    #[inline]
    fn drop(&mut self) {
        // `Release`, then `Acquire` by the last one: module doc.
        if self.inner().strong.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        // Read while the value is there (a trait object's from its vtable).
        let layout = Layout::for_value(self.inner());
        let raw = self.ptr.as_ptr();
        // The strong references' weak one goes after the value, even if
        // the value's destructor (user code) panics.
        let _release = Release { raw, layout };
        // SAFETY: this was the last strong reference: nobody else reads the
        // value (the fence orders their uses before this); it is dropped
        // once, here.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*raw).value)) };
    }
}

/// Gives up the strong references' weak one when dropped ([`CellArc`]'s
/// last drop, after the value's destructor, returned or unwound).
struct Release<T: ?Sized> {
    raw: *mut ArcInner<T>,
    layout: Layout,
}

impl<T: ?Sized> Drop for Release<T> {
    fn drop(&mut self) {
        // SAFETY: made by the last strong reference, which held the weak
        // one and dropped the value; `layout` is the block's.
        unsafe {
            if release_weak(self.raw) {
                free_block(self.raw, self.layout);
            }
        }
    }
}

impl<T: ?Sized> Deref for CellArc<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for CellArc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized> CellWeak<T> {
    /// A strong reference, if the value is still there.
    pub(crate) fn upgrade(&self) -> Option<CellArc<T>> {
        // `Acquire`: the value's writes (`new_cyclic`'s included) are seen.
        self.strong()
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
                (n != 0).then(|| {
                    if n > MAX_REFS {
                        std::process::abort();
                    }
                    n + 1
                })
            })
            .ok()?;
        Some(CellArc {
            ptr: self.ptr,
            owned: PhantomData,
        })
    }

    /// The number of strong references: zero once the value is gone.
    pub(crate) fn strong_count(&self) -> usize {
        self.strong().load(Ordering::Relaxed) as usize
    }

    fn strong(&self) -> &AtomicU32 {
        // SAFETY: this weak reference keeps the block (and its counts).
        unsafe { &(*self.ptr.as_ptr()).strong }
    }
}

impl<T: ?Sized> Clone for CellWeak<T> {
    fn clone(&self) -> Self {
        // SAFETY: this weak reference keeps the block.
        add_ref(unsafe { &(*self.ptr.as_ptr()).weak });
        CellWeak { ptr: self.ptr }
    }
}

impl<T: ?Sized> Drop for CellWeak<T> {
    fn drop(&mut self) {
        let raw = self.ptr.as_ptr();
        // SAFETY: the block is alive (this weak reference holds it), and
        // this reference is given up here. The layout is read only once
        // this was the last reference of any kind: a weak reference can be
        // a field of the value it points to (a task with a time-out holds
        // its timer entry, which holds the task weakly), and while the
        // value's destructor runs, a reference to the whole block would
        // alias the destructor's exclusive one (Miri's Stacked Borrows
        // reports it). Once the last, the value was dropped (the strong
        // references give up their weak one after its destructor) or, after
        // a panic in `new_cyclic`, never written: `for_value` reads only
        // its type's size and alignment (a trait object's from the vtable),
        // not its bytes (std's `Weak` uses the unstable `for_value_raw`).
        unsafe {
            if release_weak(raw) {
                free_block(raw, Layout::for_value(&*raw));
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize as Counter, Ordering::SeqCst};
    use std::sync::Arc;

    /// Counts its drops.
    struct Counted(Arc<Counter>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    trait Named {
        fn name(&self) -> &'static str;
    }

    impl Named for Counted {
        fn name(&self) -> &'static str {
            "counted"
        }
    }

    #[test]
    fn the_value_is_dropped_once_by_the_last_reference() {
        let drops = Arc::new(Counter::new(0));
        let a = CellArc::new(Counted(drops.clone()));
        let b = a.clone();
        assert_eq!(CellArc::strong_count(&a), 2);
        assert!(CellArc::ptr_eq(&a, &b));
        drop(a);
        assert_eq!(drops.load(SeqCst), 0);
        drop(b);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn a_pair_is_two_references_to_one_cell() {
        let drops = Arc::new(Counter::new(0));
        let (a, b) = CellArc::pair(Counted(drops.clone()));
        assert!(CellArc::ptr_eq(&a, &b));
        assert_eq!(CellArc::strong_count(&a), 2);
        drop(a);
        assert_eq!(drops.load(SeqCst), 0);
        drop(b);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn an_unsized_reference_drops_and_frees_the_concrete_value() {
        let drops = Arc::new(Counter::new(0));
        let cell = CellArc::new(Counted(drops.clone()));
        let kept = cell.clone();
        // SAFETY: the closure is the unsizing coercion.
        let named: CellArc<dyn Named> = unsafe { CellArc::unsize(cell, |cell| cell as _) };
        assert_eq!(named.name(), "counted");
        // SAFETY: it was unsized from a `CellArc<Counted>`.
        let back: CellArc<Counted> = unsafe { CellArc::downcast_unchecked(named.clone()) };
        assert_eq!(CellArc::strong_count(&kept), 3);
        drop((back, kept));
        assert_eq!(drops.load(SeqCst), 0);
        drop(named);
        assert_eq!(drops.load(SeqCst), 1, "dropped through the trait object");
    }

    #[test]
    fn the_last_drop_on_another_thread_frees_it_once() {
        let drops = Arc::new(Counter::new(0));
        for _ in 0..1_000 {
            let cell = CellArc::new(Counted(drops.clone()));
            let other = cell.clone();
            let thread = std::thread::spawn(move || drop(other));
            drop(cell);
            thread.join().unwrap();
        }
        assert_eq!(drops.load(SeqCst), 1_000);
    }

    /// Panics when dropped.
    struct PanicsOnDrop([u64; 5]);

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("expected: a destructor panicked ({})", self.0[0]);
        }
    }

    #[test]
    fn a_value_whose_destructor_panics_still_frees_its_block() {
        // The check below reads the magazine (off under Miri otherwise).
        recycle::recycle_under_miri();
        let cell = CellArc::new(PanicsOnDrop([7; 5]));
        let block = CellArc::as_ptr(&cell).cast::<u8>();
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(cell)));
        assert!(dropped.is_err());
        // The thread's magazine is a stack: the block it got back is the
        // next one out.
        let next = CellArc::new(PanicsOnDrop([0; 5]));
        let reused = CellArc::as_ptr(&next).cast::<u8>() == block;
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(next)));
        assert!(reused, "the block went back to the thread's magazine");
    }

    #[test]
    fn a_weak_reference_upgrades_only_while_the_value_lives() {
        let drops = Arc::new(Counter::new(0));
        let cell = CellArc::new(Counted(drops.clone()));
        let weak = CellArc::downgrade(&cell);
        let also = weak.clone();
        assert_eq!(weak.upgrade().map(|c| CellArc::strong_count(&c)), Some(2));
        drop(cell);
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the value goes with the last strong one"
        );
        assert!(weak.upgrade().is_none());
        assert_eq!(also.strong_count(), 0);
        drop((weak, also));
    }

    /// Larger and more aligned than `Counted`: a block whose layout only
    /// the vtable knows once it is behind `dyn Named`.
    #[repr(align(16))]
    struct Wide {
        _drops: Counted,
        _wide: [u64; 5],
    }

    impl Named for Wide {
        fn name(&self) -> &'static str {
            "wide"
        }
    }

    /// A weak reference to an unsized cell (the wall clock's watch list
    /// holds `CellWeak<dyn WallTask>`): it upgrades to the trait object
    /// while the value lives, not after, and the last weak reference frees
    /// the block with the concrete type's layout, read from the vtable of a
    /// value already dropped (under Miri, a wrong layout is an error of the
    /// global allocator's `dealloc`).
    #[test]
    fn a_weak_reference_to_an_unsized_cell_frees_it_with_the_concrete_layout() {
        let drops = Arc::new(Counter::new(0));
        let small = CellArc::new(Counted(drops.clone()));
        let wide = CellArc::new(Wide {
            _drops: Counted(drops.clone()),
            _wide: [3; 5],
        });
        // SAFETY: the closures are the unsizing coercions.
        let cells: [CellArc<dyn Named>; 2] = unsafe {
            [
                CellArc::unsize(small, |cell| cell as _),
                CellArc::unsize(wide, |cell| cell as _),
            ]
        };
        let weak: Vec<CellWeak<dyn Named>> = cells.iter().map(CellArc::downgrade).collect();
        let names: Vec<_> = weak.iter().map(|w| w.upgrade().map(|c| c.name())).collect();
        assert_eq!(names, [Some("counted"), Some("wide")]);
        drop(cells);
        assert_eq!(drops.load(SeqCst), 2, "each value dropped once");
        assert!(weak.iter().all(|w| w.upgrade().is_none()));
        // The weak references go last, in the reverse order of the values.
        drop(weak.into_iter().rev().collect::<Vec<_>>());
        assert_eq!(drops.load(SeqCst), 2);
    }

    /// Holds a weak reference to the cell it is in.
    struct SelfRef {
        me: CellWeak<SelfRef>,
        _drops: Counted,
    }

    #[test]
    fn a_cyclic_cell_reaches_itself_and_a_panicking_maker_frees_the_block() {
        let drops = Arc::new(Counter::new(0));
        let cell = CellArc::new_cyclic(|me| {
            assert!(me.upgrade().is_none(), "not yet there");
            SelfRef {
                me: me.clone(),
                _drops: Counted(drops.clone()),
            }
        });
        let again = cell.me.upgrade().expect("there now");
        assert!(CellArc::ptr_eq(&cell, &again));
        drop((cell, again));
        assert_eq!(drops.load(SeqCst), 1);
        let made = std::panic::catch_unwind(|| {
            CellArc::<SelfRef>::new_cyclic(|_| panic!("expected: no value"))
        });
        assert!(made.is_err());
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_reference_is_a_pointer_and_the_counts_one_word() {
        assert_eq!(std::mem::size_of::<CellArc<u64>>(), 8);
        assert_eq!(std::mem::size_of::<Option<CellArc<u64>>>(), 8);
        assert_eq!(std::mem::size_of::<CellArc<dyn Named>>(), 16);
        assert_eq!(std::mem::size_of::<ArcInner<u64>>(), 16);
    }
}

/// The count's protocol under loom: whichever of two holders, on either
/// thread, drops the last reference drops the value once, after the
/// other's last read of it (the value's destructor writes it: without the
/// `Release`/`Acquire` pair loom reports the race).
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom_model::support::model;
    use crate::sync::cell::UnsafeCell;
    use crate::sync::thread;

    /// Written by its destructor.
    struct Probe(UnsafeCell<u32>);

    impl Drop for Probe {
        fn drop(&mut self) {
            // SAFETY: the destructor runs alone (the protocol).
            self.0.with_mut(|value| unsafe { *value = 0 });
        }
    }

    impl Probe {
        fn read(&self) -> u32 {
            // SAFETY: only the destructor writes, after every reader.
            self.0.with(|value| unsafe { *value })
        }
    }

    #[test]
    fn last_drop_sees_every_use() {
        model("cell_arc::last_drop_sees_every_use", || {
            let cell = CellArc::new(Probe(UnsafeCell::new(1)));
            let other = cell.clone();
            let reader = thread::spawn(move || {
                assert_eq!(other.read(), 1);
                drop(other);
            });
            assert_eq!(cell.read(), 1);
            drop(cell);
            reader.join().unwrap();
        });
    }

    /// A weak reference upgraded on one thread while the last strong one
    /// is dropped on another: an upgrade that succeeds reads the value
    /// before it is dropped (the destructor's write would race, or the
    /// read see 0); the value and the block go once.
    #[test]
    fn upgrade_vs_last_drop() {
        model("cell_arc::upgrade_vs_last_drop", || {
            let cell = CellArc::new(Probe(UnsafeCell::new(1)));
            let weak = CellArc::downgrade(&cell);
            let upgrader = thread::spawn(move || {
                if let Some(cell) = weak.upgrade() {
                    assert_eq!(cell.read(), 1);
                }
            });
            drop(cell);
            upgrader.join().unwrap();
        });
    }

    /// A cell whose maker hands a weak reference to another thread, which
    /// upgrades it: the upgrade succeeds only once `new_cyclic` published
    /// the value, and then reads it whole (the `Release` store of the
    /// count against the upgrade's `Acquire`).
    #[test]
    fn new_cyclic_publishes_the_value_to_an_upgrade() {
        model(
            "cell_arc::new_cyclic_publishes_the_value_to_an_upgrade",
            || {
                let mut upgrader = None;
                let cell = CellArc::new_cyclic(|me: &CellWeak<Probe>| {
                    let me = me.clone();
                    upgrader = Some(thread::spawn(move || {
                        if let Some(cell) = me.upgrade() {
                            assert_eq!(cell.read(), 1);
                        }
                    }));
                    Probe(UnsafeCell::new(1))
                });
                upgrader.unwrap().join().unwrap();
                drop(cell);
            },
        );
    }
}

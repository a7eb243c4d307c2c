//! The crate's own recycling of small blocks (task cells, and the
//! closures a job stores out of line): a cache per thread and size class,
//! and a depot per class that carries blocks freed on one thread back to
//! threads that allocate.
//!
//! Task cells are allocated by the scheduling thread and mostly freed by a
//! worker. On fresh pages a cell's malloc is ~32 ns of a ~150 ns insert;
//! memory the process reuses took a quarter off it (`benches/README.md`,
//! the cost ledger). Here an allocation on a warm thread takes nothing from
//! the global allocator and touches no fresh page.
//!
//! # Design
//!
//! Bonwick's magazines and depot (the slab allocator's).
//!
//! * Sizes are rounded up to a multiple of 8: 32 classes, 8 to
//!   [`MAX_RECYCLED`] bytes, alignment at most 16. Every block of a class is
//!   allocated from the global allocator with the class's layout (its size,
//!   alignment 16), so any thread can give it back to the global allocator,
//!   whatever caches it passed through. Larger or more aligned blocks come
//!   from the global allocator and go straight back to it.
//! * A magazine is an array of at most [`MAGAZINE`] free blocks' addresses
//!   (Bonwick's: not a list linked through the blocks, whose lines the
//!   freeing thread wrote last, so that an allocation would wait for a
//!   cache miss to find the next block).
//! * Each thread has two magazines per class, `loaded` and `previous`. An
//!   allocation pops from `loaded`; if it is empty and `previous` is full
//!   they swap, else `loaded` is replaced by a magazine from the depot,
//!   else the block comes from the global allocator. A free pushes on
//!   `loaded`; if it is full and `previous` is empty they swap, else the
//!   full `previous` goes to the depot, `loaded` becomes `previous` and
//!   `loaded` starts empty. So a thread that allocates and frees around a
//!   magazine's boundary goes to the depot at most once in [`MAGAZINE`]
//!   operations, not at each one.
//! * The depot keeps, per class, under a lock, at most [`DEPOT_MAGAZINES`]
//!   magazines. A free that finds both magazines and the depot full gives
//!   its block straight back to the global allocator; a magazine given up
//!   at a thread's exit to a full depot goes back block by block.
//!
//! # Memory kept
//!
//! Per class: at most `DEPOT_MAGAZINES * MAGAZINE` = 2,048 blocks in the
//! depot, and `2 * MAGAZINE` = 64 in the cache of each live thread. For
//! 80-byte blocks that is 160 KiB in the depot and 5 KiB per thread; for
//! all 32 classes together at most 8.25 MiB in the depots and 264 KiB per
//! thread. Blocks go back to the global allocator only when a free finds
//! the depot full: memory kept is not trimmed over time.
//!
//! # Thread exit
//!
//! When a thread's cache is destroyed (its thread-local's destructor), its
//! non-empty magazines go to the depot (those beyond the cap back to the
//! global allocator). An `alloc` or `dealloc` on that thread afterwards
//! (from another thread-local's destructor) goes to the global allocator.
//!
//! # Invariant
//!
//! A thread's cache (its magazines and the blocks in them) is touched only
//! by its thread. The depot's magazines are touched only under the depot's
//! lock; a magazine moves between a cache and the depot by value, under
//! that lock, whose release and acquire order the giver's writes of the
//! addresses before the taker's reads. So a free block is in exactly one
//! magazine, owned by one thread or by the depot, and a block handed out
//! is in none. A `previous` magazine is always empty or full. The tests
//! below check it with threads; the loom model, the depot's exchange.
//!
//! Under `cfg(loom)`, `alloc` and `dealloc` skip the caches and go to
//! loom's allocator, which fails a model that leaks a block or frees one
//! twice (loom does not model std's thread-locals). Under Miri they skip
//! them too, for the same reason, except where a test of the caches turns
//! them on (`recycles`).

use std::alloc::{handle_alloc_error, Layout};
#[cfg(all(test, not(loom)))]
use std::cell::Cell;
#[cfg(not(loom))]
use std::cell::RefCell;
use std::ptr::NonNull;

#[cfg(any(not(loom), test))]
use crate::sync::Mutex;

/// The step of the size classes. Eight, not sixteen: a block of 8k + 8
/// bytes is one of malloc's chunks of 8k + 16 rounded to 16 with it, of 16
/// more with a step of 16 (measured when a scheduled task's cell was 72
/// bytes: `cancel`'s bytes per pending went from 123 to 132 with 16; it is
/// 40 since issue 35, a 48-byte chunk either way).
const GRANULE: usize = 8;
/// The alignment of every recycled block (and the most a recycled layout
/// may ask for).
const BLOCK_ALIGN: usize = 16;
/// The largest block recycled, in bytes.
const MAX_RECYCLED: usize = 256;
/// The number of size classes: 8, 16, …, `MAX_RECYCLED` bytes.
#[cfg(not(loom))]
const CLASSES: usize = MAX_RECYCLED / GRANULE;
/// The blocks of a full magazine.
#[cfg(any(not(loom), test))]
const MAGAZINE: usize = 32;
/// The magazines a depot keeps, per class.
#[cfg(not(loom))]
const DEPOT_MAGAZINES: usize = 64;

/// Allocates a block for `layout` (size > 0): at least its size, aligned
/// to at least its alignment. Blocks of at most `MAX_RECYCLED` bytes and
/// align <= 16 come from this thread's cache of their size class when it
/// has one, else from the depot, else from the global allocator; larger or
/// more aligned ones straight from the global allocator.
/// Aborts via `std::alloc::handle_alloc_error` on failure.
#[inline]
pub(crate) fn alloc(layout: Layout) -> NonNull<u8> {
    #[cfg(not(loom))]
    if let Some(class) = class_of(layout).filter(|_| recycles()) {
        let cached = CACHE.try_with(|cache| cache.try_borrow_mut().ok()?.get().alloc(class));
        if let Ok(Some(block)) = cached {
            return block;
        }
    }
    fresh(block_layout(layout))
}

/// Gives back a block from `alloc` with the same `layout`.
///
/// # Safety
///
/// `ptr` came from `alloc(layout)` with this same layout, and is not used
/// again.
#[inline]
pub(crate) unsafe fn dealloc(ptr: NonNull<u8>, layout: Layout) {
    #[cfg(not(loom))]
    if let Some(class) = class_of(layout).filter(|_| recycles()) {
        let kept = CACHE.try_with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else {
                return false;
            };
            // SAFETY: `ptr` is a block of `class` from `alloc` (whichever
            // path gave it, it was allocated with the class's layout), and
            // the caller gives it up.
            unsafe { cache.get().dealloc(class, ptr) };
            true
        });
        if matches!(kept, Ok(true)) {
            return;
        }
    }
    // SAFETY: `alloc(layout)` gave `ptr`, allocated with
    // `block_layout(layout)` by `fresh` (directly, or as a block of its
    // class: the same layout), and the caller gives it up.
    unsafe { free(ptr, block_layout(layout)) }
}

/// Whether this thread's blocks go through the caches: always, except
/// under Miri (`.ci/run`), where a block kept in a magazine is still
/// allocated as far as Miri knows, so a block used after it was given back,
/// or given back twice, would go unreported. Under Miri every block goes
/// straight back to the global allocator, which Miri tracks, except on the
/// threads where a test of the caches themselves turns them on
/// (`recycle_under_miri`).
#[cfg(not(loom))]
#[inline]
fn recycles() -> bool {
    #[cfg(miri)]
    return RECYCLES_UNDER_MIRI
        .try_with(std::cell::Cell::get)
        .unwrap_or(false);
    #[cfg(not(miri))]
    true
}

#[cfg(all(miri, not(loom)))]
std::thread_local! {
    /// This thread recycles under Miri (`recycles`).
    static RECYCLES_UNDER_MIRI: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Turns the caches on for this thread under Miri (a test of the caches
/// themselves); nothing otherwise.
#[cfg(all(test, not(loom)))]
pub(crate) fn recycle_under_miri() {
    #[cfg(miri)]
    RECYCLES_UNDER_MIRI.with(|on| on.set(true));
}

/// The size class of `layout`, if its blocks are recycled.
#[inline]
fn class_of(layout: Layout) -> Option<usize> {
    (layout.size() <= MAX_RECYCLED && layout.align() <= BLOCK_ALIGN)
        .then(|| layout.size().saturating_sub(1) / GRANULE)
}

/// The layout of every block of `class` (`class < CLASSES`).
#[inline]
fn class_layout(class: usize) -> Layout {
    debug_assert!(class < MAX_RECYCLED / GRANULE);
    // SAFETY: the alignment is a power of two, and the size (at most
    // `MAX_RECYCLED`), rounded up to it, far below `isize::MAX`.
    unsafe { Layout::from_size_align_unchecked((class + 1) * GRANULE, BLOCK_ALIGN) }
}

/// The layout the block for `layout` is allocated with.
#[inline]
fn block_layout(layout: Layout) -> Layout {
    match class_of(layout) {
        Some(class) => class_layout(class),
        // A zero size is outside the contract, but `alloc` is safe: never
        // ask the global allocator for zero bytes.
        None if layout.size() == 0 => {
            Layout::from_size_align(layout.align(), layout.align()).unwrap_or(layout)
        }
        None => layout,
    }
}

/// A block from the global allocator (aborts if there is none).
fn fresh(layout: Layout) -> NonNull<u8> {
    #[cfg(all(test, not(loom)))]
    count(|t| t.fresh += 1);
    // SAFETY: the layouts passed here (`block_layout`'s) have a non-zero
    // size.
    #[cfg(not(loom))]
    let ptr = unsafe { std::alloc::alloc(layout) };
    // Under loom, loom's allocator: a model then fails on a block it leaks
    // or frees twice (every task cell of every model).
    // SAFETY: as above.
    #[cfg(loom)]
    let ptr = unsafe { loom::alloc::alloc(layout) };
    NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(layout))
}

/// Gives `ptr` back to the global allocator.
///
/// # Safety
///
/// `ptr` came from `fresh(layout)` with this same layout, and is not used
/// again.
unsafe fn free(ptr: NonNull<u8>, layout: Layout) {
    #[cfg(all(test, not(loom)))]
    count(|t| t.freed += 1);
    // SAFETY: `ptr` was allocated by the global allocator with `layout`,
    // and nobody uses it again (caller).
    #[cfg(not(loom))]
    unsafe {
        std::alloc::dealloc(ptr.as_ptr(), layout)
    }
    // SAFETY: as above, by loom's allocator (`fresh`).
    #[cfg(loom)]
    unsafe {
        loom::alloc::dealloc(ptr.as_ptr(), layout)
    }
}

/// A stack of free blocks of one class: an array of their addresses. A pop
/// reads the thread's own array, never the block (module doc; the
/// measurement is in `benches/README.md`, "Recycled cells").
#[cfg(any(not(loom), test))]
#[derive(Debug)]
struct Magazine {
    blocks: [Option<NonNull<u8>>; MAGAZINE],
    len: usize,
}

// SAFETY: a magazine owns its blocks (the module's invariant): memory from
// the global allocator, which any thread may use and give back.
#[cfg(any(not(loom), test))]
unsafe impl Send for Magazine {}

#[cfg(any(not(loom), test))]
impl Magazine {
    const EMPTY: Magazine = Magazine {
        blocks: [None; MAGAZINE],
        len: 0,
    };

    #[cfg(not(loom))]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a free block to a magazine that is not full.
    ///
    /// # Safety
    ///
    /// Nobody else uses `block`: the magazine owns it now.
    unsafe fn push(&mut self, block: NonNull<u8>) {
        debug_assert!(self.len < MAGAZINE, "a full magazine takes no block");
        self.blocks[self.len] = Some(block);
        self.len += 1;
    }

    /// Takes out the last block pushed.
    fn pop(&mut self) -> Option<NonNull<u8>> {
        self.len = self.len.checked_sub(1)?;
        self.blocks[self.len].take()
    }

    /// Gives every block back to the global allocator.
    ///
    /// # Safety
    ///
    /// Every block in the magazine came from `fresh(layout)`.
    #[cfg(not(loom))]
    unsafe fn free_all(mut self, layout: Layout) {
        while let Some(block) = self.pop() {
            // SAFETY: from `fresh(layout)` (caller); out of the magazine, so
            // nobody uses it again.
            unsafe { free(block, layout) };
        }
    }
}

/// The magazines of one class that no thread holds (module doc).
#[cfg(any(not(loom), test))]
#[derive(Debug)]
struct Depot {
    magazines: Mutex<Vec<Magazine>>,
    cap: usize,
}

#[cfg(any(not(loom), test))]
impl Depot {
    fn new(cap: usize) -> Self {
        Depot {
            magazines: Mutex::new(Vec::new()),
            cap,
        }
    }

    /// Takes a magazine, the last one given.
    fn take(&self) -> Option<Magazine> {
        self.magazines.lock().pop()
    }

    /// Moves `magazine`'s blocks into the depot, leaving it empty (true),
    /// or leaves it as it is if the depot holds `cap` already (false).
    fn give(&self, magazine: &mut Magazine) -> bool {
        let mut magazines = self.magazines.lock();
        if magazines.len() >= self.cap {
            return false;
        }
        if magazines.capacity() == 0 {
            // Once, at its cap: it never grows again.
            magazines.reserve_exact(self.cap);
        }
        magazines.push(std::mem::replace(magazine, Magazine::EMPTY));
        true
    }
}

/// The depots, one per class.
#[cfg(not(loom))]
static DEPOTS: std::sync::LazyLock<[Depot; CLASSES]> =
    std::sync::LazyLock::new(|| std::array::from_fn(|_| Depot::new(DEPOT_MAGAZINES)));

/// The depot of `class`.
#[cfg(not(loom))]
fn depot(class: usize) -> &'static Depot {
    #[cfg(test)]
    if let Ok(Some(depots)) = TEST_DEPOTS.try_with(Cell::get) {
        return &depots[class];
    }
    &DEPOTS[class]
}

/// Hands a magazine of `class` to its depot; if the depot is full, gives
/// its blocks back to the global allocator.
#[cfg(not(loom))]
fn stock(class: usize, mut magazine: Magazine) {
    if !depot(class).give(&mut magazine) {
        // SAFETY: the blocks in a magazine of `class` are blocks of `class`,
        // all from `fresh(class_layout(class))`.
        unsafe { magazine.free_all(class_layout(class)) };
    }
}

/// A thread's two magazines of one class (module doc).
#[cfg(not(loom))]
#[derive(Debug)]
struct Pair {
    loaded: Magazine,
    /// Always empty or full.
    previous: Magazine,
}

/// A thread's cache: its magazines of every class.
#[cfg(not(loom))]
#[derive(Debug)]
struct Cache {
    classes: [Pair; CLASSES],
}

#[cfg(not(loom))]
impl Cache {
    /// A block of `class` from the cache or the depot; `None` if both are
    /// out of them.
    fn alloc(&mut self, class: usize) -> Option<NonNull<u8>> {
        let pair = &mut self.classes[class];
        if pair.loaded.is_empty() {
            if !pair.previous.is_empty() {
                std::mem::swap(&mut pair.loaded, &mut pair.previous);
            } else {
                // The empty magazine replaced holds nothing to free.
                pair.loaded = depot(class).take()?;
            }
        }
        pair.loaded.pop()
    }

    /// Keeps a block of `class`.
    ///
    /// # Safety
    ///
    /// `block` came from `fresh(class_layout(class))`, and nobody uses it
    /// again.
    unsafe fn dealloc(&mut self, class: usize, block: NonNull<u8>) {
        let pair = &mut self.classes[class];
        if pair.loaded.len >= MAGAZINE {
            if !pair.previous.is_empty() && !depot(class).give(&mut pair.previous) {
                // Both full, and the depot too: this block goes back to the
                // global allocator (not a whole magazine of them, which a
                // burst of frees would then cycle through the cache).
                // SAFETY: from `fresh(class_layout(class))` (caller).
                unsafe { free(block, class_layout(class)) };
                return;
            }
            // `previous` is empty now: the full one takes its place.
            std::mem::swap(&mut pair.loaded, &mut pair.previous);
        }
        // SAFETY: ours now (caller); `loaded` is not full (above).
        unsafe { pair.loaded.push(block) };
    }
}

#[cfg(not(loom))]
impl Drop for Cache {
    /// The thread exits: its blocks go to the depots (module doc).
    fn drop(&mut self) {
        for (class, pair) in self.classes.iter_mut().enumerate() {
            for magazine in [&mut pair.loaded, &mut pair.previous] {
                let magazine = std::mem::replace(magazine, Magazine::EMPTY);
                if !magazine.is_empty() {
                    stock(class, magazine);
                }
            }
        }
    }
}

/// A thread's cache, on the heap from its first use: in the thread-local
/// itself its 17 KiB would be static TLS, which glibc takes from the top of
/// each thread's stack (a pool of threads with 64 KiB stacks overflowed).
#[cfg(not(loom))]
struct ThreadCache(Option<Box<Cache>>);

#[cfg(not(loom))]
impl ThreadCache {
    fn get(&mut self) -> &mut Cache {
        self.0.get_or_insert_with(|| {
            // Zeroed on the heap, not built on the stack (`Box::new_zeroed`
            // needs Rust 1.92).
            let layout = Layout::new::<Cache>();
            // SAFETY: `Cache` is not zero-sized.
            let raw = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Cache>();
            if raw.is_null() {
                handle_alloc_error(layout);
            }
            // SAFETY: a zeroed block of `Cache`'s layout from the global
            // allocator, which `Box` frees with that layout; all zeroes is
            // an empty cache (every magazine's block addresses `None`, its
            // length 0).
            let cache = unsafe { Box::from_raw(raw) };
            debug_assert!(cache.classes.iter().all(|pair| pair.loaded.is_empty()));
            cache
        })
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// This thread's cache (borrowed only inside `alloc` and `dealloc`,
    /// which do not call each other: a failed borrow is never expected, and
    /// would take the global allocator's path).
    static CACHE: RefCell<ThreadCache> = const { RefCell::new(ThreadCache(None)) };
}

/// The blocks this thread took from and gave back to the global allocator
/// here (tests only). Per thread, so that tests running beside each other
/// do not disturb each other's counts.
#[cfg(all(test, not(loom)))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Traffic {
    pub(crate) fresh: usize,
    pub(crate) freed: usize,
}

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// This thread's [`Traffic`] (no destructor: usable to the very end).
    static TRAFFIC: Cell<Traffic> = const { Cell::new(Traffic { fresh: 0, freed: 0 }) };
    /// Depots a test gave this thread instead of the global ones, so that
    /// its counts do not depend on other tests' threads.
    static TEST_DEPOTS: Cell<Option<&'static [Depot; CLASSES]>> = const { Cell::new(None) };
}

/// This thread's traffic with the global allocator so far.
#[cfg(all(test, not(loom)))]
pub(crate) fn traffic() -> Traffic {
    TRAFFIC.try_with(Cell::get).unwrap_or_default()
}

#[cfg(all(test, not(loom)))]
fn count(f: impl FnOnce(&mut Traffic)) {
    let _ = TRAFFIC.try_with(|cell| {
        let mut traffic = cell.get();
        f(&mut traffic);
        cell.set(traffic);
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc, Mutex as StdMutex};
    use std::thread;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    /// This thread's traffic during `f`.
    fn traffic_of(f: impl FnOnce()) -> Traffic {
        let before = traffic();
        f();
        let after = traffic();
        Traffic {
            fresh: after.fresh - before.fresh,
            freed: after.freed - before.freed,
        }
    }

    /// A set of depots of the global ones' caps for one test's threads
    /// (each calls `use_depots`), leaked: other tests neither take from nor
    /// give to them.
    /// Depots of a test's own, kept reachable from a static for the life
    /// of the test binary, as the global ones are: Miri's leak check then
    /// sees the blocks they hold as kept, not leaked.
    static OWN_DEPOTS: StdMutex<Vec<&'static [Depot; CLASSES]>> = StdMutex::new(Vec::new());

    fn own_depots() -> &'static [Depot; CLASSES] {
        let depots: &'static [Depot; CLASSES] = Box::leak(Box::new(std::array::from_fn(|_| {
            Depot::new(DEPOT_MAGAZINES)
        })));
        OWN_DEPOTS.lock().unwrap().push(depots);
        depots
    }

    fn use_depots(depots: &'static [Depot; CLASSES]) {
        recycle_under_miri();
        TEST_DEPOTS.with(|d| d.set(Some(depots)));
    }

    /// Writes `tag`-derived words (and bytes at the end) over the block.
    fn fill(block: NonNull<u8>, size: usize, tag: u64) {
        let p = block.as_ptr();
        for w in 0..size / 8 {
            // SAFETY: inside the block, which is 8-aligned at least.
            unsafe { p.cast::<u64>().add(w).write(tag.wrapping_add(w as u64)) };
        }
        for b in size / 8 * 8..size {
            // SAFETY: inside the block.
            unsafe { p.add(b).write(tag as u8) };
        }
    }

    /// Checks what `fill` wrote.
    fn check(block: NonNull<u8>, size: usize, tag: u64) {
        let p = block.as_ptr();
        for w in 0..size / 8 {
            // SAFETY: inside the block, which is 8-aligned at least.
            let word = unsafe { p.cast::<u64>().add(w).read() };
            assert_eq!(word, tag.wrapping_add(w as u64), "word {w} of {p:p}");
        }
        for b in size / 8 * 8..size {
            // SAFETY: inside the block.
            assert_eq!(unsafe { p.add(b).read() }, tag as u8, "byte {b} of {p:p}");
        }
    }

    /// A thread that allocated and freed 1,000 blocks takes none from the
    /// global allocator for 1,000 more, and gives none back: 64 come from
    /// its magazines, the rest from the depot its frees stocked.
    #[test]
    fn a_warm_thread_takes_nothing_fresh() {
        let depots = own_depots();
        thread::spawn(move || {
            use_depots(depots);
            let l = layout(80, 8);
            let round = || {
                let blocks: Vec<_> = (0..1_000).map(|_| alloc(l)).collect();
                for block in blocks {
                    // SAFETY: from `alloc(l)`, not used again.
                    unsafe { dealloc(block, l) };
                }
            };
            let first = traffic_of(round);
            assert_eq!(
                first,
                Traffic {
                    fresh: 1_000,
                    freed: 0
                },
                "cold"
            );
            assert_eq!(traffic_of(round), Traffic::default(), "warm");
        })
        .join()
        .unwrap();
    }

    /// Thread A allocates 10,000 blocks of 80 bytes a round, then sends them
    /// to thread B, which checks and frees them; A waits for that before
    /// the next round (so that the counts are exact). From the second round
    /// on, A finds a full depot: `DEPOT_MAGAZINES * MAGAZINE` blocks it
    /// does not take fresh. No block is handed out twice while live (a set
    /// of live addresses, which B leaves before freeing).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "too slow under Miri; the depot test runs the same paths"
    )]
    fn blocks_freed_on_another_thread_come_back_through_the_depot() {
        const ROUNDS: u64 = 5;
        const BLOCKS: u64 = 10_000;
        const SIZE: usize = 80;
        let l = layout(SIZE, 8);
        let depots = own_depots();
        let live = Arc::new(StdMutex::new(HashSet::new()));
        let (blocks_tx, blocks_rx) = mpsc::channel::<usize>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let freer = {
            let live = Arc::clone(&live);
            thread::spawn(move || {
                use_depots(depots);
                for round in 0..ROUNDS {
                    for i in 0..BLOCKS {
                        let block = NonNull::new(blocks_rx.recv().unwrap() as *mut u8).unwrap();
                        check(block, SIZE, round << 32 | i);
                        assert!(live.lock().unwrap().remove(&(block.as_ptr() as usize)));
                        // SAFETY: from `alloc(l)` on A, which gave it up.
                        unsafe { dealloc(block, l) };
                    }
                    done_tx.send(()).unwrap();
                }
            })
        };
        let fresh_by_round: Vec<usize> = thread::spawn(move || {
            use_depots(depots);
            (0..ROUNDS)
                .map(|round| {
                    let mut addresses = Vec::new();
                    let t = traffic_of(|| {
                        for i in 0..BLOCKS {
                            let block = alloc(l);
                            assert_eq!(block.as_ptr() as usize % 16, 0);
                            fill(block, SIZE, round << 32 | i);
                            let address = block.as_ptr() as usize;
                            assert!(live.lock().unwrap().insert(address), "twice: {address:#x}");
                            addresses.push(address);
                        }
                    });
                    for address in addresses {
                        blocks_tx.send(address).unwrap();
                    }
                    done_rx.recv().unwrap();
                    t.fresh
                })
                .collect()
        })
        .join()
        .unwrap();
        freer.join().unwrap();
        assert_eq!(fresh_by_round[0], BLOCKS as usize, "nothing to reuse yet");
        let bound = BLOCKS as usize - DEPOT_MAGAZINES * MAGAZINE;
        assert!(
            fresh_by_round[1..].iter().all(|&f| f <= bound),
            "fresh blocks by round: {fresh_by_round:?}, at most {bound} after the first"
        );
    }

    /// Four threads allocate and free blocks of random sizes (16 to 300
    /// bytes, alignment 8, 16 or 32), up to 64 live each, 200,000
    /// operations each, through the global depots. Each block is filled
    /// with its owner's thread, slot and operation and checked before it is
    /// freed: a block handed to two owners at once would be overwritten.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "too slow under Miri; the depot test runs the same paths"
    )]
    fn concurrent_owners_never_share_a_block() {
        const THREADS: u64 = 4;
        const OPS: u64 = 200_000;
        const SLOTS: usize = 64;
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                thread::spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(t);
                    let mut slots: Vec<Option<(NonNull<u8>, Layout, u64)>> = vec![None; SLOTS];
                    for op in 0..OPS {
                        let s = rng.usize(..SLOTS);
                        if let Some((block, l, tag)) = slots[s].take() {
                            check(block, l.size(), tag);
                            // SAFETY: from `alloc(l)`, not used again.
                            unsafe { dealloc(block, l) };
                        } else {
                            let align = [8, 16, 16, 32][rng.usize(..4)];
                            let l = layout(rng.usize(16..=300), align);
                            let block = alloc(l);
                            assert_eq!(block.as_ptr() as usize % align, 0, "{l:?}");
                            let tag = t << 56 | (s as u64) << 40 | op;
                            fill(block, l.size(), tag);
                            slots[s] = Some((block, l, tag));
                        }
                    }
                    for (block, l, tag) in slots.into_iter().flatten() {
                        check(block, l.size(), tag);
                        // SAFETY: from `alloc(l)`, not used again.
                        unsafe { dealloc(block, l) };
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    }

    /// A thread allocates and frees 100 blocks, then exits: its cache's
    /// destructor hands its magazines (three full, one of four) to the
    /// depot, and another thread gets all 100 from there.
    #[test]
    fn an_exiting_thread_stocks_the_depot() {
        let l = layout(208, 16);
        let depots = own_depots();
        thread::spawn(move || {
            use_depots(depots);
            let blocks: Vec<_> = (0..100).map(|_| alloc(l)).collect();
            for block in blocks {
                // SAFETY: from `alloc(l)`, not used again.
                unsafe { dealloc(block, l) };
            }
        })
        .join()
        .unwrap();
        let taken = thread::spawn(move || {
            use_depots(depots);
            let mut blocks = Vec::new();
            let t = traffic_of(|| blocks = (0..100).map(|_| alloc(l)).collect());
            for block in blocks {
                // SAFETY: from `alloc(l)`, not used again.
                unsafe { dealloc(block, l) };
            }
            t
        })
        .join()
        .unwrap();
        assert_eq!(taken, Traffic::default(), "all 100 from the depot");
    }

    /// What `Late`'s destructor saw: whether the cache was still there, and
    /// the traffic of a dealloc, then of an alloc and dealloc.
    type LateReport = (bool, Traffic, Traffic);

    /// Frees its block when its thread-local is destroyed, after the cache's.
    struct Late {
        block: NonNull<u8>,
        report: Arc<StdMutex<Option<LateReport>>>,
    }

    const LATE_LAYOUT: Layout = Layout::new::<[u64; 8]>();

    impl Drop for Late {
        fn drop(&mut self) {
            let alive = CACHE.try_with(|_| ()).is_ok();
            // SAFETY: from `alloc(LATE_LAYOUT)`, not used again.
            let freed = traffic_of(|| unsafe { dealloc(self.block, LATE_LAYOUT) });
            let again = traffic_of(|| {
                let block = alloc(LATE_LAYOUT);
                // SAFETY: from `alloc(LATE_LAYOUT)`, not used again.
                unsafe { dealloc(block, LATE_LAYOUT) };
            });
            *self.report.lock().unwrap() = Some((alive, freed, again));
        }
    }

    std::thread_local! {
        static LATE: RefCell<Option<Late>> = const { RefCell::new(None) };
    }

    /// A thread-local destroyed after the cache (destructors run in the
    /// reverse order of first use: `LATE` is used first) frees a block and
    /// allocates one: both go to the global allocator, without a panic
    /// (which would abort the test binary).
    #[test]
    fn after_the_cache_is_gone_blocks_go_to_the_global_allocator() {
        let report = Arc::new(StdMutex::new(None));
        let theirs = Arc::clone(&report);
        thread::spawn(move || {
            recycle_under_miri();
            LATE.with(|_| ());
            let block = alloc(LATE_LAYOUT);
            LATE.with(|late| {
                *late.borrow_mut() = Some(Late {
                    block,
                    report: theirs,
                })
            });
        })
        .join()
        .unwrap();
        let (alive, freed, again) = report.lock().unwrap().take().expect("Late dropped");
        assert!(!alive, "the cache was destroyed first");
        assert_eq!(freed, Traffic { fresh: 0, freed: 1 });
        assert_eq!(again, Traffic { fresh: 1, freed: 1 });
    }

    /// Blocks over `MAX_RECYCLED` bytes or aligned to more than 16 come from
    /// the global allocator and go back to it every time; the largest
    /// recycled one is kept after its first use.
    #[test]
    fn large_or_overaligned_blocks_go_to_the_global_allocator() {
        recycle_under_miri();
        for l in [
            layout(MAX_RECYCLED + 1, 8),
            layout(300, 16),
            layout(64, 32),
            layout(16, 64),
        ] {
            for _ in 0..3 {
                let t = traffic_of(|| {
                    let block = alloc(l);
                    assert_eq!(block.as_ptr() as usize % l.align(), 0);
                    // SAFETY: from `alloc(l)`, not used again.
                    unsafe { dealloc(block, l) };
                });
                assert_eq!(t, Traffic { fresh: 1, freed: 1 }, "{l:?}");
            }
        }
        let l = layout(MAX_RECYCLED, 16);
        let round = || {
            // SAFETY: from `alloc(l)`, not used again.
            unsafe { dealloc(alloc(l), l) }
        };
        round();
        assert_eq!(traffic_of(round), Traffic::default(), "recycled");
    }

    /// Two threads pass 2,000 magazines of three blocks through a depot
    /// that keeps four: the taker gets every block it was given once, the
    /// giver frees the ones refused, and nothing else happens to a block.
    #[test]
    fn a_depot_passes_each_magazine_once() {
        // Fewer under Miri (an interpreter): still fifty times the cap.
        const MAGAZINES: usize = if cfg!(miri) { 200 } else { 2_000 };
        const EACH: usize = 3;
        const CAP: usize = 4;
        let l = class_layout(1);
        let depot = Depot::new(CAP);
        let given_all = AtomicBool::new(false);
        thread::scope(|s| {
            let giver = s.spawn(|| {
                let mut refused = 0;
                for m in 0..MAGAZINES {
                    let mut magazine = Magazine::EMPTY;
                    for i in 0..EACH {
                        let block = fresh(l);
                        // SAFETY: a fresh 16-byte block: its second word is
                        // free for an id, and the magazine takes it.
                        unsafe {
                            block.cast::<usize>().add(1).write(m * EACH + i);
                            magazine.push(block);
                        }
                    }
                    if !depot.give(&mut magazine) {
                        refused += magazine.len;
                        // SAFETY: its blocks are from `fresh(l)`.
                        unsafe { magazine.free_all(l) };
                    }
                }
                given_all.store(true, Ordering::Release);
                refused
            });
            let mut seen = vec![false; MAGAZINES * EACH];
            loop {
                let last = given_all.load(Ordering::Acquire);
                while let Some(mut magazine) = depot.take() {
                    assert_eq!(magazine.len, EACH);
                    while let Some(block) = magazine.pop() {
                        // SAFETY: the id the giver wrote; then the block
                        // is ours to free.
                        let id = unsafe { block.cast::<usize>().add(1).read() };
                        assert!(!std::mem::replace(&mut seen[id], true), "{id} twice");
                        // SAFETY: from `fresh(l)`, not used again.
                        unsafe { free(block, l) };
                    }
                }
                if last {
                    break;
                }
                thread::yield_now();
            }
            let refused = giver.join().unwrap();
            let taken = seen.iter().filter(|&&s| s).count();
            assert_eq!(taken + refused, MAGAZINES * EACH);
            assert!(taken >= CAP * EACH);
            assert_eq!(depot.magazines.lock().capacity(), CAP, "allocated once");
        });
    }
}

/// loom model of the depot (`RUSTFLAGS="--cfg loom"`).
///
/// * `magazines_cross_a_depot_once`: a depot that keeps one magazine; a
///   thread gives it two magazines of two blocks each, retrying (and
///   yielding) while it is full, while the main thread takes until it has
///   four blocks. Asserted: every block arrives exactly once, each
///   magazine whole, and the depot is empty at the end. The depot's lock is
///   loom's, so every order of the gives, refusals and takes is explored.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use crate::loom_model::support::model;
    use crate::sync::{thread, Arc};

    #[test]
    fn magazines_cross_a_depot_once() {
        model("recycle::magazines_cross_a_depot_once", || {
            let l = class_layout(0);
            let depot = Arc::new(Depot::new(1));
            let blocks: Vec<usize> = (0..4).map(|_| fresh(l).as_ptr() as usize).collect();
            let giver = {
                let depot = Arc::clone(&depot);
                let blocks = blocks.clone();
                thread::spawn(move || {
                    for pair in blocks.chunks(2) {
                        let mut magazine = Magazine::EMPTY;
                        for &block in pair {
                            // SAFETY: a fresh 16-byte block, given to the
                            // magazine.
                            unsafe { magazine.push(NonNull::new(block as *mut u8).unwrap()) };
                        }
                        while !depot.give(&mut magazine) {
                            loom::thread::yield_now();
                        }
                    }
                })
            };
            let mut got = Vec::new();
            while got.len() < 4 {
                match depot.take() {
                    Some(mut magazine) => {
                        assert_eq!(magazine.len, 2, "whole");
                        got.extend(
                            std::iter::from_fn(|| magazine.pop()).map(|b| b.as_ptr() as usize),
                        );
                    }
                    None => loom::thread::yield_now(),
                }
            }
            giver.join().unwrap();
            assert!(depot.take().is_none());
            got.sort_unstable();
            let mut want = blocks;
            want.sort_unstable();
            assert_eq!(got, want, "each block once");
            for block in got {
                // SAFETY: from `fresh(l)`, out of every magazine.
                unsafe { free(NonNull::new(block as *mut u8).unwrap(), l) };
            }
        });
    }
}

//! A bench-local global allocator that puts every large allocation on the page size under
//! test, so that a bench's tables, key lists and packet pools sit on 4 KiB or on 2 MiB pages
//! like the DPDK peer's (`--no-huge` or hugepages; `docs/PERFORMANCE.md`, "Side by side").
//!
//! Allocations of at least [`LARGE`] bytes get a mapping of their own:
//!
//! - [`Pages::Small`]: `mmap` + `madvise(MADV_NOHUGEPAGE)`, so that they are 4 KiB pages
//!   whatever the transparent-huge-page setting;
//! - [`Pages::Huge`]: `mmap(MAP_HUGETLB)` from the reserved hugetlbfs pool (what DPDK's EAL
//!   uses); when the pool is short, a 2 MiB-aligned mapping with `madvise(MADV_HUGEPAGE)`
//!   instead, counted in [`fallback_bytes`] so that the bench reports it and never passes it
//!   off as hugetlbfs memory.
//!
//! Smaller allocations go to the system allocator. The mode is set once by [`set_pages`]
//! before anything large is allocated, and never changes afterwards, so `dealloc` knows how
//! every block was made.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// Allocations at least this big get a mapping of their own.
pub const LARGE: usize = 1 << 20;
const HUGE_PAGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// The page size the large allocations should use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// 4 KiB pages.
    Small,
    /// 2 MiB hugetlbfs pages.
    Huge,
}

static MODE: AtomicU8 = AtomicU8::new(0);
static HUGETLB_BYTES: AtomicUsize = AtomicUsize::new(0);
static FALLBACK_BYTES: AtomicUsize = AtomicUsize::new(0);
static LARGE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Chooses the page size; call first thing in `main`, before any large allocation.
pub fn set_pages(p: Pages) {
    assert_eq!(LARGE_COUNT.load(Ordering::Relaxed), 0, "set_pages after a large allocation");
    MODE.store(if p == Pages::Huge { 1 } else { 0 }, Ordering::Relaxed);
}

fn huge() -> bool {
    MODE.load(Ordering::Relaxed) == 1
}

/// Bytes mapped from hugetlbfs so far.
pub fn hugetlb_bytes() -> usize {
    HUGETLB_BYTES.load(Ordering::Relaxed)
}

/// Bytes that asked for hugetlbfs pages but got transparent huge pages (or small pages).
pub fn fallback_bytes() -> usize {
    FALLBACK_BYTES.load(Ordering::Relaxed)
}

/// The `pages=` label of the result lines: `4k`, `2M` when every large block came from
/// hugetlbfs, `thp` when any fell back.
pub fn label() -> &'static str {
    match (huge(), fallback_bytes()) {
        (false, _) => "4k",
        (true, 0) => "2M",
        (true, _) => "thp",
    }
}

/// The global allocator (install with `#[global_allocator]`).
pub struct HugeAlloc;

fn round(len: usize, to: usize) -> usize {
    len.div_ceil(to) * to
}

fn anon(len: usize, extra: libc::c_int) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory; failure is MAP_FAILED, checked by the callers.
    unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
            -1,
            0,
        )
        .cast()
    }
}

/// A 2 MiB-aligned mapping of `len` (a multiple of 2 MiB) with `MADV_HUGEPAGE`.
fn thp(len: usize) -> *mut u8 {
    let p = anon(len + HUGE_PAGE, 0);
    if p == libc::MAP_FAILED.cast() {
        return std::ptr::null_mut();
    }
    let addr = p as usize;
    let start = round(addr, HUGE_PAGE);
    let (head, tail) = (start - addr, HUGE_PAGE - (start - addr));
    // SAFETY: both ranges lie inside the mapping just made (head + len + tail = its length)
    // and nothing refers to them; unmapping the unaligned ends leaves [start, start + len).
    unsafe {
        if head > 0 {
            libc::munmap(p.cast(), head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    start as *mut u8
}

// SAFETY: `alloc` returns either the system allocator's block or a fresh private mapping of
// at least `layout.size()` bytes aligned to a page (4 KiB or 2 MiB), which satisfies every
// alignment up to that; `dealloc` undoes exactly what `alloc` did for the same layout, which
// it can tell from the size because the mode never changes after the first large block.
unsafe impl GlobalAlloc for HugeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() < LARGE || layout.align() > PAGE {
            // SAFETY: forwarded with the caller's layout, which GlobalAlloc's contract makes valid.
            return unsafe { System.alloc(layout) };
        }
        LARGE_COUNT.fetch_add(1, Ordering::Relaxed);
        if !huge() {
            let len = round(layout.size(), PAGE);
            let p = anon(len, 0);
            if p == libc::MAP_FAILED.cast() {
                return std::ptr::null_mut();
            }
            // SAFETY: advice on the mapping just made, of exactly its length.
            unsafe { libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE) };
            return p;
        }
        let len = round(layout.size(), HUGE_PAGE);
        let p = anon(len, libc::MAP_HUGETLB);
        if p != libc::MAP_FAILED.cast() {
            HUGETLB_BYTES.fetch_add(len, Ordering::Relaxed);
            return p;
        }
        FALLBACK_BYTES.fetch_add(len, Ordering::Relaxed);
        thp(len)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() < LARGE || layout.align() > PAGE {
            // SAFETY: this block came from `System.alloc` with the same layout (see `alloc`).
            return unsafe { System.dealloc(ptr, layout) };
        }
        let len = round(layout.size(), if huge() { HUGE_PAGE } else { PAGE });
        // SAFETY: `ptr` is the start of a mapping of `len` bytes made by `alloc` for this
        // layout, and the caller gives up the block.
        unsafe { libc::munmap(ptr.cast(), len) };
    }
}

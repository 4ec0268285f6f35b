//! The init-time heap: a first-fit allocator (`linked_list_allocator`) behind a spin
//! lock, over a block of the managed range, registered as the global allocator.
//!
//! The heap is for initialization (classifiers, tables, pool
//! bookkeeping); after the workers start the per-packet path never allocates.
//! [`stats`] exposes an allocation counter so tests can prove that.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

struct Heap {
    inner: spin::Mutex<linked_list_allocator::Heap>,
    allocs: AtomicU64,
}

#[global_allocator]
static HEAP: Heap = Heap { inner: spin::Mutex::new(linked_list_allocator::Heap::empty()), allocs: AtomicU64::new(0) };

// SAFETY: allocation and deallocation go through the lock; `allocate_first_fit` returns
// blocks of at least `layout.size()` bytes at `layout.align()` inside the heap region,
// never overlapping a live block; failure is reported as null.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocs.fetch_add(1, Ordering::Relaxed);
        self.inner.lock().allocate_first_fit(layout).map_or(core::ptr::null_mut(), |p| p.as_ptr())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(p) = NonNull::new(ptr) {
            // SAFETY: `GlobalAlloc::dealloc`'s contract: `ptr` came from `alloc` with `layout`.
            unsafe { self.inner.lock().deallocate(p, layout) }
        }
    }
}

/// Hands the heap its memory.
///
/// # Safety
/// `[base, base + size)` must be identity-mapped RAM used by nothing else, and this must
/// be called once.
pub(crate) unsafe fn init(base: u64, size: usize) {
    // SAFETY: per the contract, the block is exclusively the heap's.
    unsafe { HEAP.inner.lock().init(base as usize as *mut u8, size) }
}

/// Heap usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub struct HeapStats {
    /// Bytes the heap manages.
    pub size: usize,
    /// Bytes in use.
    pub used: usize,
    /// Allocations since boot (successful or not).
    pub allocs: u64,
}

/// Current heap usage.
pub fn stats() -> HeapStats {
    let h = HEAP.inner.lock();
    HeapStats { size: h.size(), used: h.used(), allocs: HEAP.allocs.load(Ordering::Relaxed) }
}

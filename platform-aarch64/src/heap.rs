//! The init-time heap: the x86 platform's allocator (`linked_list_allocator` first fit
//! behind a spin lock) over a block of RAM that holds neither the image nor the device
//! tree. `cadence-core` links `alloc`, so an image that uses it has a global allocator.
//!
//! The block is [`carve`]d from the tree's RAM region: the first 2 MiB-aligned block of
//! the asked size above the image that overlaps nothing the loader placed (the blob, an
//! initial RAM disk).

use crate::dt::Region;

/// The first `size`-byte, 2 MiB-aligned block of `ram` above `image` (its end) that
/// overlaps neither `image` nor any of `avoid`.
pub fn carve(ram: Region, image: Region, avoid: &[Region], size: u64) -> Option<Region> {
    const ALIGN: u64 = 2 << 20;
    let up = |a: u64| a.checked_add(ALIGN - 1).map(|a| a & !(ALIGN - 1));
    let overlaps = |a: Region, b: Region| a.base < b.end() && b.base < a.end();
    let mut base = up(image.end().max(ram.base))?;
    loop {
        let r = Region { base, size };
        if r.end() > ram.end() || r.end() < base {
            return None;
        }
        if overlaps(r, image) {
            base = up(image.end().max(base + 1))?;
            continue;
        }
        match avoid.iter().find(|a| a.size > 0 && overlaps(r, **a)) {
            None => return Some(r),
            Some(a) => base = up(a.end().max(base + 1))?,
        }
    }
}

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
mod global {
    use core::alloc::{GlobalAlloc, Layout};
    use core::ptr::NonNull;

    struct Heap(spin::Mutex<linked_list_allocator::Heap>);

    #[global_allocator]
    static HEAP: Heap = Heap(spin::Mutex::new(linked_list_allocator::Heap::empty()));

    // SAFETY: allocation and deallocation go through the lock; `allocate_first_fit`
    // returns blocks of at least `layout.size()` bytes at `layout.align()` inside the heap
    // region, never overlapping a live block; failure is reported as null.
    unsafe impl GlobalAlloc for Heap {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.0.lock().allocate_first_fit(layout).map_or(core::ptr::null_mut(), |p| p.as_ptr())
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            if let Some(p) = NonNull::new(ptr) {
                // SAFETY: `GlobalAlloc::dealloc`'s contract: `ptr` came from `alloc` with `layout`.
                unsafe { self.0.lock().deallocate(p, layout) }
            }
        }
    }

    /// Hands the heap its memory.
    ///
    /// # Safety
    /// `[base, base + size)` must be mapped RAM used by nothing else, and this must be
    /// called once, with the MMU and caches on (the lock uses exclusive accesses).
    pub unsafe fn init(base: u64, size: usize) {
        // SAFETY: per the contract, the block is exclusively the heap's.
        unsafe { HEAP.0.lock().init(base as usize as *mut u8, size) }
    }
}

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub use global::init;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carves_above_the_image_around_the_tree() {
        let ram = Region { base: 0x4000_0000, size: 256 << 20 };
        let image = Region { base: 0x4008_0000, size: 0x2_0000 };
        let dtb = Region { base: 0x4800_0000, size: 0x10_0000 };
        assert_eq!(carve(ram, image, &[dtb], 8 << 20), Some(Region { base: 0x4020_0000, size: 8 << 20 }));
        // A tree right above the image pushes the heap past it.
        let dtb2 = Region { base: 0x4020_0000, size: 0x1000 };
        assert_eq!(carve(ram, image, &[dtb2], 8 << 20), Some(Region { base: 0x4040_0000, size: 8 << 20 }));
        assert_eq!(carve(ram, image, &[dtb], 512 << 20), None, "larger than RAM");
        // An initial RAM disk after the tree pushes it past both.
        let initrd = Region { base: 0x4040_0000, size: 0x3000 };
        assert_eq!(carve(ram, image, &[dtb2, initrd], 8 << 20), Some(Region { base: 0x4060_0000, size: 8 << 20 }));
    }
}

//! The memory a packet pool is carved from, which the CPU shares with devices.
//!
//! A [`Pool`](crate::buf::Pool) hands out `&[u8]` / `&mut [u8]` for one buffer at a time,
//! while a device (a NIC's DMA, the kernel behind an AF_XDP UMEM, a device model in a test)
//! writes other buffers of the same region whenever it likes. Holding the whole region as
//! one `&'m mut [u8]` would claim that nothing else touches any of it for `'m` — false as
//! soon as a device writes, and undefined behaviour by Rust's aliasing rules when that
//! device is Rust code (a model) writing through another pointer: Miri's Stacked Borrows
//! reports exactly that. [`PacketMem`] holds the region as a raw pointer instead and makes a
//! reference only for the one buffer and the one borrow of the pool that asks for it.
//!
//! Why this is sound (the `unsafe` below relies on it):
//! - [`PacketMem::new`] takes `&'m mut [u8]`: for `'m` nobody else can reach the bytes, so
//!   the pool's short references can alias nothing;
//! - [`PacketMem::from_raw_parts`] is `unsafe`: its caller promises the DMA discipline of
//!   `buf` — a device reads or writes a buffer only while the driver has posted it to the
//!   device, and the pool makes no reference to a buffer in that state (the driver does not
//!   ask for one until the device hands the buffer back and an `Acquire` fence orders the
//!   device's writes before the CPU's reads);
//! - `get` borrows `&self` and `get_mut` `&mut self` for as long as the returned slice
//!   lives, so the pool's own references follow the usual rules among themselves.

use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// A region of packet memory shared with devices; see the module docs.
pub struct PacketMem<'m> {
    ptr: NonNull<u8>,
    len: usize,
    _region: PhantomData<&'m mut [u8]>,
}

// SAFETY: `PacketMem` stands for a `&'m mut [u8]` (which is `Send` and `Sync`): it hands out
// `&[u8]` only through `&self` and `&mut [u8]` only through `&mut self`, so moving it to
// another core or sharing it by reference allows nothing that the slice would not.
unsafe impl Send for PacketMem<'_> {}
// SAFETY: as above.
unsafe impl Sync for PacketMem<'_> {}

impl<'m> PacketMem<'m> {
    /// Memory that only the CPU touches, or whose device accesses the compiler cannot see
    /// (real DMA): the exclusive borrow lasts as long as the region.
    pub fn new(mem: &'m mut [u8]) -> Self {
        let len = mem.len();
        Self { ptr: NonNull::from(mem).cast(), len, _region: PhantomData }
    }

    /// Memory that a device reaches through another pointer (a device model in a test, a
    /// kernel mapping).
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes for `'m`, and whoever else reaches
    /// those bytes keeps to the DMA discipline of the module docs: it touches a buffer only
    /// while the pool has handed it to a device, never while a slice that this region gave
    /// out for that buffer is alive.
    pub unsafe fn from_raw_parts(ptr: NonNull<u8>, len: usize) -> Self {
        Self { ptr, len, _region: PhantomData }
    }

    /// A second handle on the same region, for another core that takes buffers over by the
    /// hand-off discipline (NetBlaze's auxiliary cores: [`crate::buf::Pool::view`]).
    ///
    /// # Safety
    /// The region outlives the alias, and the two handles keep to the DMA discipline of the
    /// module docs between themselves: each buffer is touched through one handle at a time —
    /// the one whose side holds it — and passes from one side to the other only through a
    /// `Release` store that the other side reads with `Acquire` (a hand-off ring).
    pub unsafe fn alias(&self) -> PacketMem<'m> {
        Self { ptr: self.ptr, len: self.len, _region: PhantomData }
    }

    /// Splits the region at `mid` (at most its length) into two disjoint regions, e.g. one
    /// pool per lane over one allocation.
    pub fn split_at(self, mid: usize) -> (Self, Self) {
        let mid = mid.min(self.len);
        // SAFETY: `mid <= len`, so the result points into the region or one past its end,
        // which is in bounds of the same allocation (and not null).
        let tail = unsafe { self.ptr.add(mid) };
        let head = Self { ptr: self.ptr, len: mid, _region: PhantomData };
        (head, Self { ptr: tail, len: self.len - mid, _region: PhantomData })
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `len` bytes at `start`, if they lie inside the region.
    #[inline]
    pub fn get(&self, start: usize, len: usize) -> Option<&[u8]> {
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `start + len <= self.len`, so the range lies inside the region, which is
        // valid for `'m` (`new`: a live exclusive borrow; `from_raw_parts`: its contract).
        // Nothing writes these bytes while the slice lives: the pool's writers need `&mut
        // self`, which this `&self` borrow excludes, and devices keep off buffers the pool
        // hands out (DMA discipline, module docs).
        Some(unsafe { core::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) })
    }

    /// `len` bytes at `start`, writable, if they lie inside the region.
    #[inline]
    pub fn get_mut(&mut self, start: usize, len: usize) -> Option<&mut [u8]> {
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: inside the region as above; the `&mut self` borrow lasts as long as the
        // slice, so the pool makes no other reference to the region meanwhile, and devices
        // keep off buffers the pool hands out (DMA discipline, module docs).
        Some(unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start), len) })
    }
}

/// A table of per-buffer records (a pool's metadata) held as a raw pointer for the same
/// reason as [`PacketMem`]: two pools over the same buffers (an owner and a view, for a core
/// that takes buffers over by hand-off) each make a reference to one record at a time, so
/// the owner writing record `i` aliases nothing the view holds for record `j`. The owner
/// (made by [`MetaTable::new`]) frees the table when dropped; an alias never does.
pub struct MetaTable<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    owner: bool,
}

// SAFETY: as for `PacketMem`: the table stands for a `Box<[T]>` (`Send`/`Sync` when `T` is),
// records are read through `&self` and written through `&mut self` only, and an alias is
// made only under `alias`'s contract.
unsafe impl<T: Copy + Send> Send for MetaTable<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + Sync> Sync for MetaTable<T> {}

impl<T: Copy> MetaTable<T> {
    /// Takes `records` over (the owner).
    pub fn new(records: alloc::vec::Vec<T>) -> Self {
        let boxed = records.into_boxed_slice();
        let len = boxed.len();
        let ptr = NonNull::from(alloc::boxed::Box::leak(boxed)).cast::<T>();
        Self { ptr, len, owner: true }
    }

    /// A second handle on the same records, which never frees them.
    ///
    /// # Safety
    /// The owner outlives the alias, and each record is touched through one handle at a time,
    /// passing between them as [`PacketMem::alias`] says.
    pub unsafe fn alias(&self) -> Self {
        Self { ptr: self.ptr, len: self.len, owner: false }
    }

    /// Makes the table permanent: it is never freed (its owner no longer frees it when
    /// dropped), so no alias of it can outlive it.
    pub fn make_permanent(&mut self) {
        self.owner = false;
    }

    /// Records in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Record `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `i < len`: inside the allocation, which lives as long as the owner (and an
        // alias by its contract). Writers of record `i` need `&mut self` on this handle, and
        // the other handle keeps off records this side holds (`alias`'s contract).
        Some(unsafe { &*self.ptr.as_ptr().add(i) })
    }

    /// Record `i`, writable.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        // SAFETY: inside the allocation as above; `&mut self` excludes every other reference
        // through this handle while the record's lives, and the other handle keeps off it.
        Some(unsafe { &mut *self.ptr.as_ptr().add(i) })
    }
}

impl<T: Copy> Drop for MetaTable<T> {
    fn drop(&mut self) {
        if self.owner {
            let slice = core::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
            // SAFETY: the owner's pointer and length came from `Box::leak` of a boxed slice in
            // `new`, and only the owner frees it, once.
            drop(unsafe { alloc::boxed::Box::from_raw(slice) });
        }
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for MetaTable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetaTable").field("len", &self.len).field("owner", &self.owner).finish()
    }
}

impl fmt::Debug for PacketMem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketMem").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_outside_the_region_are_refused() {
        let mut backing = [1u8, 2, 3, 4];
        let mut m = PacketMem::new(&mut backing);
        assert_eq!(m.len(), 4);
        assert_eq!(m.get(1, 2), Some(&[2u8, 3][..]));
        assert_eq!(m.get(4, 0), Some(&[][..]));
        assert!(m.get(3, 2).is_none() && m.get(usize::MAX, 2).is_none());
        m.get_mut(0, 1).expect("inside")[0] = 9;
        assert!(m.get_mut(2, 3).is_none());
        assert_eq!(m.get(0, 4), Some(&[9u8, 2, 3, 4][..]));
        let (mut a, b) = m.split_at(3);
        assert_eq!((a.len(), b.len()), (3, 1));
        assert_eq!(b.get(0, 1), Some(&[4u8][..]));
        a.get_mut(2, 1).expect("inside")[0] = 7;
        assert!(a.get(2, 2).is_none());
        let (c, d) = b.split_at(9);
        assert_eq!((c.len(), d.len(), d.is_empty()), (1, 0, true));
        assert_eq!(backing, [9, 2, 7, 4]);
    }

    #[test]
    fn a_meta_table_hands_out_records_in_range_and_its_alias_sees_the_owners_writes() {
        let mut t = MetaTable::new(vec![1u32, 2, 3]);
        assert_eq!((t.len(), t.is_empty()), (3, false));
        assert_eq!(t.get(2), Some(&3));
        assert!(t.get(3).is_none() && t.get_mut(usize::MAX).is_none());
        *t.get_mut(0).expect("inside") = 10;
        // SAFETY: `t` outlives `a`; records 0 and 1 are touched through one handle at a time.
        let mut a = unsafe { t.alias() };
        assert_eq!(a.get(0), Some(&10));
        *a.get_mut(1).expect("inside") = 20;
        *t.get_mut(2).expect("inside") = 30;
        assert_eq!((t.get(1), a.get(2)), (Some(&20), Some(&30)));
        drop(a); // frees nothing
        assert_eq!(t.get(1), Some(&20));
        let mut backing = [0u8; 4];
        let mut m = PacketMem::new(&mut backing);
        // SAFETY: the region outlives the alias; the two write different bytes.
        let mut n = unsafe { m.alias() };
        n.get_mut(2, 2).expect("inside").copy_from_slice(&[5, 6]);
        m.get_mut(0, 2).expect("inside").copy_from_slice(&[1, 2]);
        assert_eq!(m.get(0, 4), Some(&[1u8, 2, 5, 6][..]));
    }

    /// The pattern of the device models: the pool and the "device" reach the same
    /// allocation, each through its own copy of one raw pointer, one buffer each.
    #[test]
    fn a_device_writing_another_buffer_through_its_own_pointer_is_fine() {
        let raw = NonNull::new(Box::into_raw(vec![0u8; 8].into_boxed_slice()).cast::<u8>()).expect("non-null");
        // SAFETY: 8 bytes from a leaked box, freed below; the "device" writes bytes 4..8
        // only, while the slices handed out cover 0..4.
        let mut m = unsafe { PacketMem::from_raw_parts(raw, 8) };
        m.get_mut(0, 4).expect("inside").copy_from_slice(&[1, 2, 3, 4]);
        // SAFETY: inside the allocation; no slice of bytes 4..8 is alive.
        unsafe { raw.as_ptr().add(4).write_bytes(7, 4) };
        assert_eq!(m.get(0, 8), Some(&[1u8, 2, 3, 4, 7, 7, 7, 7][..]));
        // SAFETY: the pointer came from `Box::into_raw` of an 8-byte boxed slice; `m` is
        // not used again.
        drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(raw.as_ptr(), 8)) });
    }
}

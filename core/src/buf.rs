//! Packet buffers: a fixed pool of DMA-able buffers, small `Copy` handles, and batches.
//!
//! The pool is carved out of one physically contiguous region handed over by the
//! platform at initialization. Every buffer is `BUF_SIZE` bytes; a frame starts at
//! `HEADROOM` when it arrives, so a driver can put its own header (virtio-net's 12
//! bytes) in front of it without copying.
//!
//! Ownership: every buffer is owned by exactly one of the pool (free), a NIC ring,
//! a [`Batch`] or a hand-off ring. Handles are plain indices and carry no lifetime,
//! so the pool checks what it can: freeing a buffer that is already free is refused
//! and counted ([`PoolError::DoubleFree`]), and [`Pool::in_use`] lets tests prove that
//! nothing leaked.
//!
//! DMA: a buffer posted to a device is not read or written by the CPU until the
//! device hands it back (the driver observes the descriptor's done bit, then an
//! `Acquire` fence), so the device's writes never race with a Rust reference. The pool
//! holds its region as a [`PacketMem`] (not one `&mut [u8]` over all of it) and makes a
//! reference to one buffer at a time, so a device writing another buffer aliases nothing
//! ([`Pool::try_with_mem`] for memory a device reaches through its own pointer).
//!
//! Frames longer than a buffer (jumbo frames, issue 27 item 5) span several: the first buffer
//! is the frame's handle, each buffer's record says whether the frame goes on and a side table
//! names the next buffer ([`Pool::append_segment`], [`Pool::segments`], [`Pool::frame_len`];
//! at most [`MAX_SEGMENTS`]). [`Pool::frame`] is the first buffer's bytes, where every header
//! is; freeing the first buffer frees them all. A frame of one buffer pays one flag test when
//! it is freed.
//!
//! In the dataplane there is one pool per lane (2048-byte buffers, 64 bytes of headroom), and
//! frames received on lane `k` leave on lane `k`. Every buffer is in exactly one place: the
//! pool, an RX ring, a batch, a TX ring, or a NetBlaze hand-off link (its two rings, or the
//! auxiliary core's hands, `crate::offload::handoff`). `pool_in_use` in the stats lines is
//! the number of buffers outside the pools (at rest: the RX rings).

use alloc::vec::Vec;
use core::fmt;

use crate::sync::MetaTable;
pub use crate::sync::PacketMem;

// The aliasing of a second pool over the same buffers is argued in its module docs.
#[allow(unsafe_code)]
mod view;
pub use view::AuxView;

/// Bytes in one packet buffer.
pub const BUF_SIZE: usize = 2048;
/// Bytes reserved in front of a received frame for driver headers and encapsulation.
pub const HEADROOM: usize = 64;
/// Largest frame a buffer holds after the headroom.
pub const MAX_FRAME: usize = BUF_SIZE - HEADROOM;
/// Most buffers in one batch.
pub const BATCH_SIZE: usize = 32;
/// Most buffers one frame spans ([`Pool::append_segment`]): 16 × [`MAX_FRAME`] = 31 744 bytes;
/// the frame of a 9 000-byte MTU (9 018 bytes with a VLAN tag) takes 5 whole buffers, or 9
/// of 1 KiB (the Intel NICs' receive buffers with jumbo frames).
pub const MAX_SEGMENTS: usize = 16;
/// The longest frame a pool holds, over [`MAX_SEGMENTS`] buffers.
pub const MAX_SEGMENTED_FRAME: usize = MAX_SEGMENTS * MAX_FRAME;

/// A handle to one packet buffer of a [`Pool`]: a small index, `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PacketBuf(u16);

impl PacketBuf {
    /// The buffer's index in its pool.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The handle as the raw `u16` a hand-off ring's atomic slot holds
    /// ([`crate::offload::handoff`]).
    pub(crate) const fn raw(self) -> u16 {
        self.0
    }

    /// The handle a hand-off ring's slot held ([`PacketBuf::raw`]). Not a way to forge
    /// buffers: only `core`'s rings call it, on values that were handles when pushed.
    pub(crate) const fn from_raw(raw: u16) -> Self {
        Self(raw)
    }
}

/// Why a pool operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PoolError {
    /// The memory region is smaller than `count * BUF_SIZE` bytes.
    RegionTooSmall,
    /// More than `u16::MAX + 1` buffers, or zero buffers, were asked for.
    BadCount,
    /// The region's physical base is not aligned to `BUF_SIZE`.
    Misaligned,
    /// The handle does not name a buffer of this pool.
    BadHandle,
    /// The buffer is already free.
    DoubleFree,
    /// A frame's offset and length do not fit in the buffer.
    BadLength,
    /// A segment that cannot be appended: free, already part of a frame of several buffers,
    /// the frame itself, or one more than [`MAX_SEGMENTS`].
    BadSegment,
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolError::RegionTooSmall => "memory region smaller than the pool",
            PoolError::BadCount => "buffer count must be 1..=65536",
            PoolError::Misaligned => "region base not aligned to the buffer size",
            PoolError::BadHandle => "handle outside the pool",
            PoolError::DoubleFree => "buffer freed twice",
            PoolError::BadLength => "frame does not fit in the buffer",
            PoolError::BadSegment => "segment cannot be appended to the frame",
        })
    }
}

/// Bytes of each buffer's metadata that belong to the layer above the pool
/// ([`Pool::opaque`]), as VPP's buffer opaque and DPDK's dynamic mbuf fields do: the pool
/// only zeroes them when it hands the buffer out and when a view's holder frees it
/// ([`Pool::view`]), and never reads them. NetBlaze's hand-off keeps a frame's output port and tail mark there
/// (`crate::offload::marks`).
pub const OPAQUE: usize = 3;

/// [`Meta::flags`]: the buffer is in the pool's free list.
const FREE: u8 = 1;
/// [`Meta::flags`]: the frame goes on in the buffer the pool's link table names.
const MORE: u8 = 2;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Meta {
    off: u16,
    len: u16,
    /// [`FREE`], [`MORE`].
    flags: u8,
    /// The upper layer's bytes ([`OPAQUE`]).
    opaque: [u8; OPAQUE],
    /// Clock ticks when the frame was received (0: not stamped), for the dataplane's own
    /// latency accounting ([`crate::latency`]).
    stamp: u64,
}

impl Meta {
    /// A buffer's record when it is handed out (and, with `free`, when it is taken back).
    const fn fresh(free: bool) -> Meta {
        Meta { off: HEADROOM as u16, len: 0, flags: if free { FREE } else { 0 }, opaque: [0; OPAQUE], stamp: 0 }
    }

    #[inline(always)]
    fn is_free(&self) -> bool {
        self.flags & FREE != 0
    }
}

// Two lines per eight buffers.
const _: () = assert!(core::mem::size_of::<Meta>() == 16);

/// A fixed pool of packet buffers over one DMA-able region.
#[derive(Debug)]
pub struct Pool<'m> {
    mem: PacketMem<'m>,
    phys_base: u64,
    meta: MetaTable<Meta>,
    /// For each buffer whose record has [`MORE`]: the buffer its frame goes on in. Apart from
    /// the records so that they stay 16 bytes; read only for frames of several buffers.
    links: MetaTable<u16>,
    /// The owner: its free buffers. A view ([`Pool::view`]): the buffers its holder freed,
    /// to give back to the owner.
    free: Vec<PacketBuf>,
    double_frees: u64,
    /// Frames over several buffers made in this pool and not yet freed or trimmed (never
    /// below the truth: a per-batch test that lets single-buffer traffic skip every
    /// per-frame look at segments).
    segmented: u32,
    view: bool,
}

impl<'m> Pool<'m> {
    /// Builds a pool of `count` buffers over `mem`, whose first byte is at physical
    /// address `phys_base`. Allocates its bookkeeping (init time only).
    pub fn try_new(mem: &'m mut [u8], phys_base: u64, count: usize) -> Result<Self, PoolError> {
        Self::try_with_mem(PacketMem::new(mem), phys_base, count)
    }

    /// Builds a pool of `count` buffers over `mem` (memory a device reaches through its own
    /// pointer: [`PacketMem::from_raw_parts`]), whose first byte is at physical address
    /// `phys_base`. Allocates its bookkeeping (init time only).
    pub fn try_with_mem(mem: PacketMem<'m>, phys_base: u64, count: usize) -> Result<Self, PoolError> {
        if count == 0 || count > u16::MAX as usize + 1 {
            return Err(PoolError::BadCount);
        }
        if mem.len() < count * BUF_SIZE {
            return Err(PoolError::RegionTooSmall);
        }
        if !phys_base.is_multiple_of(BUF_SIZE as u64) {
            return Err(PoolError::Misaligned);
        }
        let meta = MetaTable::new(alloc::vec![Meta::fresh(true); count]);
        let links = MetaTable::new(alloc::vec![0u16; count]);
        // Highest index on top: allocation hands out low indices first.
        let free = (0..count).rev().map(|i| PacketBuf(i as u16)).collect();
        Ok(Self { mem, phys_base, meta, links, free, double_frees: 0, segmented: 0, view: false })
    }

    /// Buffers in the pool, free or not.
    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    /// Buffers currently free (a view: none).
    pub fn available(&self) -> usize {
        if self.view { 0 } else { self.free.len() }
    }

    /// Buffers currently owned by rings, batches or hand-off rings.
    pub fn in_use(&self) -> usize {
        self.capacity() - self.available()
    }

    /// Frees that were refused because the buffer was already free.
    pub fn double_frees(&self) -> u64 {
        self.double_frees
    }

    /// Takes a free buffer, reset to an empty frame at `HEADROOM` (a view has none).
    #[inline]
    pub fn alloc(&mut self) -> Option<PacketBuf> {
        if self.view {
            return None;
        }
        let b = self.free.pop()?;
        if let Some(m) = self.meta.get_mut(b.index()) {
            *m = Meta::fresh(false);
        }
        Some(b)
    }

    /// Returns `b` to the pool, with every further buffer of its frame
    /// ([`Pool::append_segment`]). In a view ([`Pool::view`]) the buffer is kept aside for its
    /// holder to give back to the owner ([`Pool::take_released`]), its metadata untouched
    /// (the owner frees it and its segments, and counts a double free if there is one).
    #[inline]
    pub fn free(&mut self, b: PacketBuf) -> Result<(), PoolError> {
        let Some(m) = self.meta.get_mut(b.index()) else {
            return Err(PoolError::BadHandle);
        };
        if self.view {
            // What the holder marked is void: the buffer comes back as dropped.
            m.opaque = [0; OPAQUE];
            // Cannot overflow: the list has room for every buffer. A buffer freed twice here
            // goes back twice, and the owner refuses the second.
            self.free.push(b);
            return Ok(());
        }
        // One test for both exceptions: already free, or a frame over several buffers.
        if m.flags != 0 {
            return self.free_flagged(b);
        }
        m.flags = FREE;
        // Cannot overflow: the free list has room for every buffer, and `b` was not in it.
        self.free.push(b);
        Ok(())
    }

    /// [`Pool::free`] of a buffer whose record has a flag: a double free (refused, counted),
    /// or the first buffer of a frame over several (all of them freed).
    #[cold]
    #[inline(never)]
    fn free_flagged(&mut self, b: PacketBuf) -> Result<(), PoolError> {
        let Some(m) = self.meta.get_mut(b.index()) else {
            return Err(PoolError::BadHandle);
        };
        if m.is_free() {
            self.double_frees += 1;
            return Err(PoolError::DoubleFree);
        }
        m.flags = FREE;
        // Cannot overflow, as in `free`.
        self.free.push(b);
        self.segmented = self.segmented.saturating_sub(1);
        self.free_segments(b);
        Ok(())
    }

    /// Whether a frame over several buffers may be in use (made here and not freed): when
    /// not, no frame needs its segments looked at.
    #[inline(always)]
    pub fn has_segmented(&self) -> bool {
        self.segmented != 0
    }

    /// Frees the buffers after `b` in its frame (whose record no longer says so): each once,
    /// at most [`MAX_SEGMENTS`] − 1; one already free ends the walk and is counted.
    #[cold]
    #[inline(never)]
    fn free_segments(&mut self, mut b: PacketBuf) {
        for _ in 1..MAX_SEGMENTS {
            let Some(&n) = self.links.get(b.index()) else { return };
            let next = PacketBuf(n);
            let Some(m) = self.meta.get_mut(next.index()) else { return };
            if m.is_free() {
                self.double_frees += 1;
                return;
            }
            let more = m.flags & MORE != 0;
            m.flags = FREE;
            // Cannot overflow, as in `free`.
            self.free.push(next);
            if !more {
                return;
            }
            b = next;
        }
    }

    /// Appends `next` (a buffer holding the frame's next bytes, at its own offset and length)
    /// to the frame that starts in `head`: a frame longer than a buffer, as a NIC delivers it
    /// over several receive buffers. Refused (`BadSegment`) for a free buffer, a `next` that
    /// is already part of a frame of several buffers or is one of `head`'s, and past
    /// [`MAX_SEGMENTS`] buffers; nothing changes then.
    pub fn append_segment(&mut self, head: PacketBuf, next: PacketBuf) -> Result<(), PoolError> {
        let rec = |p: &Self, b: PacketBuf| p.meta.get(b.index()).copied().ok_or(PoolError::BadHandle);
        let (h, n) = (rec(self, head)?, rec(self, next)?);
        if h.is_free() || n.is_free() || n.flags & MORE != 0 {
            return Err(PoolError::BadSegment);
        }
        let mut last = head;
        for _ in 1..MAX_SEGMENTS {
            if last == next {
                return Err(PoolError::BadSegment);
            }
            match self.next_segment(last) {
                Some(s) => last = s,
                None => {
                    if last == head {
                        self.segmented = self.segmented.saturating_add(1);
                    }
                    self.link(last, next);
                    return Ok(());
                }
            }
        }
        Err(PoolError::BadSegment)
    }

    /// Makes each buffer of the frame that starts in `b` a frame of its own (offsets and
    /// lengths kept), `b` first into `out`: for a driver that hands the buffers back one by
    /// one (AF_XDP's completion ring names each buffer it sent). Returns how many.
    pub fn unchain(&mut self, b: PacketBuf, out: &mut [PacketBuf; MAX_SEGMENTS]) -> usize {
        let mut n = 0;
        let mut at = Some(b);
        while let (Some(s), Some(slot)) = (at, out.get_mut(n)) {
            *slot = s;
            n += 1;
            at = self.next_segment(s);
            if let Some(m) = self.meta.get_mut(s.index()) {
                m.flags &= !MORE;
            }
        }
        if n > 1 {
            self.segmented = self.segmented.saturating_sub(1);
        }
        n
    }

    /// Cuts `b`'s frame to its first buffer: the buffers after it are freed (a reply built in
    /// place from the front of a long frame, an ICMP error).
    pub fn trim_segments(&mut self, b: PacketBuf) {
        let Some(m) = self.meta.get_mut(b.index()) else { return };
        if m.flags & MORE != 0 && !m.is_free() {
            m.flags &= !MORE;
            self.segmented = self.segmented.saturating_sub(1);
            self.free_segments(b);
        }
    }

    /// Cuts the frame that starts in `b` to its first `len` bytes (at least one): the buffer
    /// where they end keeps its share of them, the buffers after it are freed. `false`, and
    /// nothing changed, when the frame is shorter or `len` is 0.
    pub fn truncate_frame(&mut self, b: PacketBuf, len: usize) -> bool {
        if len == 0 || self.frame_len(b) < len {
            return false;
        }
        let mut left = len;
        for s in self.segments(b).collect::<heapless::Vec<PacketBuf, MAX_SEGMENTS>>() {
            let here = self.len(s);
            if left > here {
                left -= here;
                continue;
            }
            let _ = self.set_len(s, left);
            let Some(m) = self.meta.get_mut(s.index()) else { return false };
            if m.flags & MORE != 0 {
                m.flags &= !MORE;
                if s == b {
                    self.segmented = self.segmented.saturating_sub(1);
                }
                self.free_segments(s);
            }
            return true;
        }
        false
    }

    /// Makes `next` the buffer `prev`'s frame goes on in.
    fn link(&mut self, prev: PacketBuf, next: PacketBuf) {
        if let (Some(l), Some(m)) = (self.links.get_mut(prev.index()), self.meta.get_mut(prev.index())) {
            *l = next.0;
            m.flags |= MORE;
        }
    }

    /// The buffer `b`'s frame goes on in, if it spans more than `b`.
    #[inline]
    pub fn next_segment(&self, b: PacketBuf) -> Option<PacketBuf> {
        match self.meta.get(b.index()) {
            Some(m) if m.flags & MORE != 0 => self.links.get(b.index()).map(|&n| PacketBuf(n)),
            _ => None,
        }
    }

    /// Whether `b`'s frame spans more buffers than `b` ([`Pool::append_segment`]).
    #[inline]
    pub fn is_segmented(&self, b: PacketBuf) -> bool {
        self.meta.get(b.index()).is_some_and(|m| m.flags & MORE != 0)
    }

    /// The buffers of the frame that starts in `b`, `b` first (at most [`MAX_SEGMENTS`]).
    pub fn segments(&self, b: PacketBuf) -> impl Iterator<Item = PacketBuf> + '_ {
        core::iter::successors(Some(b), |&s| self.next_segment(s)).take(MAX_SEGMENTS)
    }

    /// The length of the whole frame that starts in `b`: [`Pool::len`] over its buffers.
    #[inline(always)]
    pub fn frame_len(&self, b: PacketBuf) -> usize {
        match self.meta.get(b.index()) {
            Some(m) if m.flags & MORE != 0 => m.len as usize + self.rest_len(b) as usize,
            Some(m) => m.len as usize,
            None => 0,
        }
    }

    /// Copies the whole frame that starts in `b` into the front of `out`; its length, or
    /// `None` (nothing copied) if `out` is shorter.
    pub fn copy_frame(&self, b: PacketBuf, out: &mut [u8]) -> Option<usize> {
        let total = self.frame_len(b);
        let mut at = out.get_mut(..total)?;
        for s in self.segments(b) {
            let f = self.frame(s);
            let (here, rest) = at.split_at_mut(f.len().min(at.len()));
            here.copy_from_slice(f.get(..here.len())?);
            at = rest;
        }
        Some(total)
    }

    /// Copies bytes `from..from + out.len()` of the whole frame that starts in `b` (across its
    /// buffers) into `out`; `false` (`out` partly written) if the frame is shorter.
    pub fn copy_out(&self, b: PacketBuf, from: usize, out: &mut [u8]) -> bool {
        let (mut skip, mut at) = (from, 0);
        for s in self.segments(b) {
            let f = self.frame(s);
            if skip >= f.len() {
                skip -= f.len();
                continue;
            }
            let n = (f.len() - skip).min(out.len() - at);
            let (Some(dst), Some(src)) = (out.get_mut(at..at + n), f.get(skip..skip + n)) else { return false };
            dst.copy_from_slice(src);
            (skip, at) = (0, at + n);
            if at == out.len() {
                return true;
            }
        }
        at == out.len()
    }

    /// A frame holding `bytes`, over as many buffers as it needs (each at `HEADROOM`, up to
    /// [`MAX_FRAME`] bytes; at most [`MAX_SEGMENTS`]): its first buffer, or `None` — and
    /// nothing taken — when the pool has too few free buffers, `bytes` is empty, or it is
    /// longer than [`MAX_SEGMENTED_FRAME`]. For drivers that copy frames in.
    pub fn alloc_frame(&mut self, bytes: &[u8]) -> Option<PacketBuf> {
        let n = bytes.len().div_ceil(MAX_FRAME);
        if n == 0 || n > MAX_SEGMENTS || n > self.available() {
            return None;
        }
        let mut head: Option<PacketBuf> = None;
        let mut prev: Option<PacketBuf> = None;
        for chunk in bytes.chunks(MAX_FRAME) {
            // Cannot fail: `n` buffers are free, and a frame of `n` chunks is within bounds.
            let b = self.alloc()?;
            let _ = self.set_len(b, chunk.len());
            self.frame_mut(b).copy_from_slice(chunk);
            if let Some(p) = prev {
                self.link(p, b);
            }
            head.get_or_insert(b);
            prev = Some(b);
        }
        if n > 1 {
            self.segmented = self.segmented.saturating_add(1);
        }
        head
    }

    /// Rebuilds the free list from the buffers' own records: exactly the buffers marked free.
    /// For a lane taken over from a worker stopped inside its round (`sync::TryLock::revoke`):
    /// its last `alloc` or `free` may have been cut between the list and the record, and the
    /// record is the one that is written in one store. A buffer the stopped worker took but
    /// had not marked yet goes back to the list (it will never use it); one it marked free but
    /// had not pushed is added. Buffers it held (its batch) stay out: they are lost with it,
    /// and the caller counts them. Returns the buffers now free. A view has no list: 0.
    pub fn rebuild_free_list(&mut self) -> usize {
        if self.view {
            return 0;
        }
        self.free.clear();
        // Highest index first, as at construction.
        for i in (0..self.meta.len()).rev() {
            if self.meta.get(i).is_some_and(Meta::is_free) {
                // Cannot overflow: the list has room for every buffer.
                self.free.push(PacketBuf(i as u16));
            }
        }
        self.free.len()
    }

    /// The region, the metadata and the segment links, for [`Pool::view`] (`view`, where
    /// the aliasing is argued).
    pub(crate) fn view_parts(&self) -> (&PacketMem<'m>, &MetaTable<Meta>, &MetaTable<u16>) {
        (&self.mem, &self.meta, &self.links)
    }

    /// Makes the metadata and link tables permanent (never freed), for [`Pool::aux_views`].
    pub(crate) fn make_meta_permanent(&mut self) {
        self.meta.make_permanent();
        self.links.make_permanent();
    }

    /// A view over `mem`, `meta` and `links` (aliases of an owner's, made by [`Pool::view`]).
    pub(crate) fn from_view_parts(
        mem: PacketMem<'m>,
        meta: MetaTable<Meta>,
        links: MetaTable<u16>,
        phys_base: u64,
    ) -> Self {
        let free = Vec::with_capacity(meta.len());
        Pool { mem, phys_base, meta, links, free, double_frees: 0, segmented: 0, view: true }
    }

    /// Whether this pool is a view ([`Pool::view`]).
    pub fn is_view(&self) -> bool {
        self.view
    }

    /// A view's released buffers (freed by its holder's chain: drops), moved into `into` as
    /// far as it has room, for the holder to give back. Returns how many. An owner has none.
    pub fn take_released(&mut self, into: &mut Batch) -> usize {
        if !self.view {
            return 0;
        }
        let mut n = 0;
        while !into.is_full() {
            let Some(b) = self.free.pop() else { break };
            // Cannot fail: the batch is not full.
            let _ = into.push(b);
            n += 1;
        }
        n
    }

    /// Buffers a view's holder freed and has not taken yet.
    pub fn released(&self) -> usize {
        if self.view { self.free.len() } else { 0 }
    }

    /// `b`'s upper-layer bytes ([`OPAQUE`]; zero for a buffer just handed out or taken back,
    /// and for a handle outside the pool).
    #[inline]
    pub fn opaque(&self, b: PacketBuf) -> [u8; OPAQUE] {
        self.meta.get(b.index()).map_or([0; OPAQUE], |m| m.opaque)
    }

    /// Sets `b`'s upper-layer bytes ([`Pool::opaque`]); a handle outside the pool is ignored.
    #[inline]
    pub fn set_opaque(&mut self, b: PacketBuf, bytes: [u8; OPAQUE]) {
        if let Some(m) = self.meta.get_mut(b.index()) {
            m.opaque = bytes;
        }
    }

    /// Stamps `b` with the clock reading `ticks` (its arrival; see [`Pool::stamp`]).
    #[inline]
    pub fn set_stamp(&mut self, b: PacketBuf, ticks: u64) {
        if let Some(m) = self.meta.get_mut(b.index()) {
            m.stamp = ticks;
        }
    }

    /// Stamps every frame of `batch` with `ticks` ([`Pool::set_stamp`]) and returns their
    /// bytes (every buffer of a frame over several): one pass over their metadata where a
    /// receive path needs both.
    #[inline]
    pub fn stamp_batch(&mut self, batch: &Batch, ticks: u64) -> u64 {
        let mut bytes = 0u64;
        for &b in batch.as_slice() {
            if let Some(m) = self.meta.get_mut(b.index()) {
                m.stamp = ticks;
                bytes += u64::from(m.len);
            }
        }
        // Frames over several buffers: their other buffers' bytes, in a pass of their own.
        if self.has_segmented() {
            bytes += self.rest_bytes(batch);
        }
        bytes
    }

    /// The bytes of `batch`'s frames after their first buffers.
    #[cold]
    #[inline(never)]
    fn rest_bytes(&self, batch: &Batch) -> u64 {
        batch.as_slice().iter().filter(|&&b| self.is_segmented(b)).map(|&b| self.rest_len(b)).sum()
    }

    /// Bytes of `b`'s frame after its first buffer.
    #[cold]
    #[inline(never)]
    fn rest_len(&self, b: PacketBuf) -> u64 {
        self.segments(b).skip(1).map(|s| self.len(s) as u64).sum()
    }

    /// Completes the arrival stamps of `batch` from a driver that sets them itself
    /// ([`crate::nic::RxQueue::stamps_arrival`]) and returns the frames' bytes: a frame the
    /// driver left unstamped (0), or stamped after `ticks` (the two clocks disagree), gets
    /// `ticks`, the reading of the poll that took it off the ring. Returns the bytes and how
    /// many frames got `ticks`.
    #[inline]
    pub fn stamp_batch_unstamped(&mut self, batch: &Batch, ticks: u64) -> (u64, u64) {
        let (mut bytes, mut from_poll) = (0u64, 0u64);
        for &b in batch.as_slice() {
            if let Some(m) = self.meta.get_mut(b.index()) {
                if m.stamp == 0 || m.stamp > ticks {
                    m.stamp = ticks;
                    from_poll += 1;
                }
                bytes += u64::from(m.len);
            }
        }
        if self.has_segmented() {
            bytes += self.rest_bytes(batch);
        }
        (bytes, from_poll)
    }

    /// `b`'s first buffer's length ([`Pool::len`]) and arrival stamp ([`Pool::stamp`]) in one
    /// lookup.
    #[inline]
    pub fn len_stamp(&self, b: PacketBuf) -> (usize, u64) {
        self.meta.get(b.index()).map_or((0, 0), |m| (m.len as usize, m.stamp))
    }

    /// The arrival stamp of `b` (0: never stamped, e.g. a frame the dataplane made).
    #[inline]
    pub fn stamp(&self, b: PacketBuf) -> u64 {
        self.meta.get(b.index()).map_or(0, |m| m.stamp)
    }

    /// Returns every buffer of `batch` to the pool and empties the batch.
    pub fn free_batch(&mut self, batch: &mut Batch) {
        while let Some(b) = batch.pop() {
            // A refused free is already counted by the pool.
            let _ = self.free(b);
        }
    }

    /// Physical address of the first byte of `b`'s buffer (for descriptors).
    #[inline]
    pub fn phys(&self, b: PacketBuf) -> u64 {
        self.phys_base + (b.index() * BUF_SIZE) as u64
    }

    /// Physical address of the pool's first byte (buffer 0), as given to [`Pool::try_new`].
    #[inline]
    pub fn phys_base(&self) -> u64 {
        self.phys_base
    }

    /// The buffer whose `BUF_SIZE` bytes contain physical address `phys`, if `phys` lies
    /// inside the pool and that buffer is not free: the way back from an address a device
    /// or kernel hands over (an AF_XDP ring entry) to the handle that owns it. O(1).
    ///
    /// `None` for an address outside the pool, and for a free buffer: a device naming a
    /// buffer nobody gave it is an anomaly for the driver to count, never a buffer to
    /// hand out.
    #[inline]
    pub fn handle_at(&self, phys: u64) -> Option<PacketBuf> {
        let index = phys.checked_sub(self.phys_base)? / BUF_SIZE as u64;
        let index = usize::try_from(index).ok()?;
        // `index < capacity <= u16::MAX + 1`, so it fits the handle.
        let m = self.meta.get(index)?;
        (!m.is_free()).then_some(PacketBuf(index as u16))
    }

    /// Sets where `b`'s frame starts in its buffer and how long it is.
    #[inline]
    pub fn set_frame(&mut self, b: PacketBuf, off: usize, len: usize) -> Result<(), PoolError> {
        if off.checked_add(len).is_none_or(|end| end > BUF_SIZE) {
            return Err(PoolError::BadLength);
        }
        let m = self.meta.get_mut(b.index()).ok_or(PoolError::BadHandle)?;
        m.off = off as u16;
        m.len = len as u16;
        Ok(())
    }

    /// Sets the length of `b`'s frame, keeping its start.
    #[inline]
    pub fn set_len(&mut self, b: PacketBuf, len: usize) -> Result<(), PoolError> {
        let off = self.frame_offset(b);
        self.set_frame(b, off, len)
    }

    /// Offset of `b`'s frame in its buffer.
    #[inline]
    pub fn frame_offset(&self, b: PacketBuf) -> usize {
        self.meta.get(b.index()).map_or(HEADROOM, |m| m.off as usize)
    }

    /// Length of `b`'s frame.
    #[inline]
    pub fn len(&self, b: PacketBuf) -> usize {
        self.meta.get(b.index()).map_or(0, |m| m.len as usize)
    }

    /// Whether `b`'s frame is empty.
    #[inline]
    pub fn is_empty(&self, b: PacketBuf) -> bool {
        self.len(b) == 0
    }

    /// The frame in `b` (empty for a bad handle).
    #[inline]
    pub fn frame(&self, b: PacketBuf) -> &[u8] {
        let (off, len) = self.meta.get(b.index()).map_or((0, 0), |m| (m.off as usize, m.len as usize));
        let start = b.index() * BUF_SIZE + off;
        self.mem.get(start, len).unwrap_or(&[])
    }

    /// The frame in `b`, writable (empty for a bad handle).
    #[inline]
    pub fn frame_mut(&mut self, b: PacketBuf) -> &mut [u8] {
        let (off, len) = self.meta.get(b.index()).map_or((0, 0), |m| (m.off as usize, m.len as usize));
        let start = b.index() * BUF_SIZE + off;
        self.mem.get_mut(start, len).unwrap_or(&mut [])
    }

    /// The whole buffer of `b`, `BUF_SIZE` bytes (empty for a bad handle).
    #[inline]
    pub fn raw_mut(&mut self, b: PacketBuf) -> &mut [u8] {
        let start = b.index() * BUF_SIZE;
        self.mem.get_mut(start, BUF_SIZE).unwrap_or(&mut [])
    }
}

/// Up to [`BATCH_SIZE`] buffer handles moving through the pipeline together.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    bufs: heapless::Vec<PacketBuf, BATCH_SIZE>,
}

impl Batch {
    /// An empty batch.
    pub const fn new() -> Self {
        Self { bufs: heapless::Vec::new() }
    }

    /// Handles in the batch.
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    /// Whether the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// Whether the batch is full.
    pub fn is_full(&self) -> bool {
        self.bufs.is_full()
    }

    /// Room left.
    pub fn room(&self) -> usize {
        BATCH_SIZE - self.bufs.len()
    }

    /// Appends `b`; gives it back if the batch is full.
    #[inline]
    pub fn push(&mut self, b: PacketBuf) -> Result<(), PacketBuf> {
        self.bufs.push(b)
    }

    /// Removes the last handle.
    #[inline]
    pub fn pop(&mut self) -> Option<PacketBuf> {
        self.bufs.pop()
    }

    /// The handles, in arrival order.
    pub fn as_slice(&self) -> &[PacketBuf] {
        &self.bufs
    }

    /// Keeps the handles for which `f` is true, in order; hands the others to `drop`.
    pub fn retain(&mut self, mut keep: impl FnMut(PacketBuf) -> bool, mut drop: impl FnMut(PacketBuf)) {
        let mut out = heapless::Vec::<PacketBuf, BATCH_SIZE>::new();
        for &b in self.bufs.iter() {
            if keep(b) {
                // Cannot fail: `out` is no longer than `self.bufs`.
                let _ = out.push(b);
            } else {
                drop(b);
            }
        }
        self.bufs = out;
    }

    /// Removes the first `n` handles (all of them if `n >= len`), keeping the rest in order.
    pub fn drain_front(&mut self, n: usize) {
        let n = n.min(self.bufs.len());
        let rest = heapless::Vec::<PacketBuf, BATCH_SIZE>::from_slice(&self.bufs[n..]).unwrap_or_default();
        self.bufs = rest;
    }

    /// Empties the batch without touching the buffers (the caller owns them now).
    pub fn clear(&mut self) {
        self.bufs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(mem: &mut [u8], n: usize) -> Pool<'_> {
        Pool::try_new(mem, 0x10_0000, n).unwrap()
    }

    /// A free list cut between its two steps (a holder stopped inside `alloc` or `free`) is
    /// rebuilt from the records: every buffer marked free is in it exactly once, the held
    /// ones are not, and allocation goes on without handing a buffer out twice.
    #[test]
    fn the_free_list_is_rebuilt_from_the_buffers_records() {
        let mut mem = vec![0u8; 8 * BUF_SIZE];
        let mut p = pool(&mut mem, 8);
        let held: Vec<PacketBuf> = (0..3).map(|_| p.alloc().unwrap()).collect();
        // `alloc` cut after the pop, before the record: the buffer is marked free, out of the
        // list (the stopped holder never uses it).
        let popped = p.free.pop().unwrap();
        // `free` cut after the record, before the push: marked free, not in the list.
        let half_freed = held[2];
        p.meta.get_mut(half_freed.index()).unwrap().flags = FREE;
        // A duplicated entry (the list's length written before its slot): two copies.
        let dup = *p.free.last().unwrap();
        p.free.push(dup);
        assert_eq!(p.rebuild_free_list(), 8 - 2, "all but the two still held");
        assert_eq!(p.in_use(), 2);
        let mut got: Vec<usize> = (0..6).map(|_| p.alloc().unwrap().index()).collect();
        got.sort_unstable();
        let mut want: Vec<usize> = (0..8).filter(|&i| i != held[0].index() && i != held[1].index()).collect();
        want.sort_unstable();
        assert_eq!(got, want, "each free buffer once: {popped:?} and {half_freed:?} back, {dup:?} once");
        assert!(p.alloc().is_none());
        assert_eq!(p.double_frees(), 0);
    }

    #[test]
    fn rejects_bad_configuration() {
        let mut mem = vec![0u8; 4 * BUF_SIZE];
        assert_eq!(Pool::try_new(&mut mem, 0, 5).err(), Some(PoolError::RegionTooSmall));
        assert_eq!(Pool::try_new(&mut mem, 0, 0).err(), Some(PoolError::BadCount));
        assert_eq!(Pool::try_new(&mut mem, 100, 4).err(), Some(PoolError::Misaligned));
    }

    #[test]
    #[allow(unsafe_code)] // a view of the pool (`Pool::view`), under its discipline
    fn the_opaque_bytes_are_per_buffer_and_zeroed_by_alloc_and_by_a_views_free() {
        let mut mem = vec![0u8; 4 * BUF_SIZE];
        let mut p = pool(&mut mem, 4);
        let (a, b) = (p.alloc().unwrap(), p.alloc().unwrap());
        assert_eq!(p.opaque(a), [0; OPAQUE]);
        p.set_opaque(a, [1, 2, 3]);
        assert_eq!((p.opaque(a), p.opaque(b)), ([1, 2, 3], [0; OPAQUE]));
        // A handle outside the pool reads zero and writes nothing.
        let outside = PacketBuf(9);
        p.set_opaque(outside, [7; OPAQUE]);
        assert_eq!(p.opaque(outside), [0; OPAQUE]);
        // The owner's free leaves them (nothing reads a free buffer's); alloc zeroes them.
        p.free(a).unwrap();
        let again = p.alloc().unwrap();
        assert_eq!((again, p.opaque(again)), (a, [0; OPAQUE]));
        // A view's free zeroes them: the frame comes back unmarked.
        p.set_opaque(b, [4, 5, 6]);
        // SAFETY: the view is used only here, on `b`, which the owner does not touch meanwhile.
        let mut view = unsafe { p.view() };
        view.free(b).unwrap();
        drop(view);
        assert_eq!(p.opaque(b), [0; OPAQUE]);
    }

    #[test]
    fn alloc_until_empty_then_free_restores() {
        let mut mem = vec![0u8; 4 * BUF_SIZE];
        let mut p = pool(&mut mem, 4);
        let bufs: Vec<_> = (0..4).map(|_| p.alloc().unwrap()).collect();
        assert!(p.alloc().is_none());
        assert_eq!(p.in_use(), 4);
        assert_eq!(p.phys(bufs[1]), 0x10_0000 + BUF_SIZE as u64);
        for b in bufs {
            p.free(b).unwrap();
        }
        assert_eq!(p.in_use(), 0);
    }

    #[test]
    fn double_free_is_refused_and_counted() {
        let mut mem = vec![0u8; 2 * BUF_SIZE];
        let mut p = pool(&mut mem, 2);
        let b = p.alloc().unwrap();
        p.free(b).unwrap();
        assert_eq!(p.free(b), Err(PoolError::DoubleFree));
        assert_eq!(p.double_frees(), 1);
        assert_eq!(p.available(), 2);
        assert_eq!(p.free(PacketBuf(9)), Err(PoolError::BadHandle));
    }

    #[test]
    fn frames_are_isolated_per_buffer() {
        let mut mem = vec![0u8; 2 * BUF_SIZE];
        let mut p = pool(&mut mem, 2);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        p.set_len(a, 3).unwrap();
        p.set_len(b, 2).unwrap();
        p.frame_mut(a).copy_from_slice(&[1, 2, 3]);
        p.frame_mut(b).copy_from_slice(&[9, 9]);
        assert_eq!(p.frame(a), &[1, 2, 3]);
        assert_eq!(p.frame(b), &[9, 9]);
        assert_eq!(p.set_frame(a, BUF_SIZE - 1, 2), Err(PoolError::BadLength));
        assert_eq!(p.frame_offset(a), HEADROOM);
    }

    #[test]
    fn handle_at_maps_addresses_inside_buffers_in_use_only() {
        let mut mem = vec![0u8; 4 * BUF_SIZE];
        let mut p = pool(&mut mem, 4);
        assert_eq!(p.phys_base(), 0x10_0000);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        // Every byte of an allocated buffer maps back to it, and only to it.
        for off in [0u64, 1, 256, BUF_SIZE as u64 - 1] {
            assert_eq!(p.handle_at(p.phys(a) + off), Some(a));
            assert_eq!(p.handle_at(p.phys(b) + off), Some(b));
        }
        // Buffers 2 and 3 are free: no handle.
        assert_eq!(p.handle_at(0x10_0000 + 2 * BUF_SIZE as u64), None);
        assert_eq!(p.handle_at(0x10_0000 + 4 * BUF_SIZE as u64 - 1), None);
        // Outside the pool, on either side, and at the extremes.
        assert_eq!(p.handle_at(0x10_0000 - 1), None);
        assert_eq!(p.handle_at(0x10_0000 + 4 * BUF_SIZE as u64), None);
        assert_eq!(p.handle_at(0), None);
        assert_eq!(p.handle_at(u64::MAX), None);
        // Freed: gone.
        p.free(a).unwrap();
        assert_eq!(p.handle_at(p.phys(a)), None);
        assert_eq!(p.handle_at(p.phys(b) + 7), Some(b));
    }

    #[test]
    fn handle_at_covers_the_largest_pool() {
        // Under Miri a pool of 1024 (128 MiB and 65 536 allocations are minutes there).
        let n = crate::testing::miri_or(u16::MAX as usize + 1, 1024);
        let mut mem = vec![0u8; n * BUF_SIZE];
        let mut p = Pool::try_new(&mut mem, 0, n).unwrap();
        let all: Vec<_> = (0..n).map(|_| p.alloc().unwrap()).collect();
        let last = *all.last().unwrap();
        assert_eq!(last.index(), n - 1);
        assert_eq!(p.handle_at(p.phys(last) + BUF_SIZE as u64 - 1), Some(last));
        assert_eq!(p.handle_at((n * BUF_SIZE) as u64), None);
    }

    /// A frame longer than a buffer: copied in over as many buffers as it needs, read back
    /// whole, freed whole by its first buffer; too long or too few buffers takes nothing.
    #[test]
    fn a_frame_spans_buffers_and_is_freed_with_its_first() {
        let mut mem = vec![0u8; 8 * BUF_SIZE];
        let mut p = pool(&mut mem, 8);
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let head = p.alloc_frame(&bytes).unwrap();
        let segs: Vec<PacketBuf> = p.segments(head).collect();
        assert_eq!(
            segs.iter().map(|&s| p.len(s)).collect::<Vec<_>>(),
            vec![MAX_FRAME, MAX_FRAME, 5000 - 2 * MAX_FRAME]
        );
        assert!(p.is_segmented(head) && p.is_segmented(segs[1]) && !p.is_segmented(segs[2]));
        assert_eq!((p.frame_len(head), p.frame_len(segs[2]), p.in_use()), (5000, 5000 - 2 * MAX_FRAME, 3));
        let mut out = vec![0u8; 6000];
        assert_eq!(p.copy_frame(head, &mut out), Some(5000));
        assert_eq!(&out[..5000], &bytes[..]);
        assert_eq!(p.copy_frame(head, &mut out[..4999]), None, "too short a destination: nothing");
        // Any range of the whole frame, across buffers; none past its end.
        let mut piece = [0u8; 100];
        assert!(p.copy_out(head, MAX_FRAME - 30, &mut piece));
        assert_eq!(&piece[..], &bytes[MAX_FRAME - 30..MAX_FRAME + 70]);
        assert!(p.copy_out(head, 4900, &mut piece) && piece[..] == bytes[4900..]);
        assert!(!p.copy_out(head, 4901, &mut piece));
        // One buffer's frame is what it was.
        let small = p.alloc_frame(&bytes[..100]).unwrap();
        assert_eq!((p.is_segmented(small), p.frame_len(small), p.segments(small).count()), (false, 100, 1));
        assert!(p.has_segmented());
        p.free(head).unwrap();
        assert_eq!(p.in_use(), 1, "all three back");
        assert!(!p.has_segmented(), "no frame of several buffers left");
        // A segment freed again, through its own handle: refused and counted.
        assert_eq!(p.free(segs[1]), Err(PoolError::DoubleFree));
        assert_eq!(p.double_frees(), 1);
        // Too long, empty, or more buffers than are free: nothing taken.
        assert_eq!(p.alloc_frame(&vec![1; MAX_SEGMENTED_FRAME + 1]), None);
        assert_eq!(p.alloc_frame(&[]), None);
        assert_eq!(p.alloc_frame(&vec![1; 7 * MAX_FRAME + 1]), None);
        assert_eq!(p.in_use(), 1);
        let full = p.alloc_frame(&vec![1; 7 * MAX_FRAME]).unwrap();
        assert_eq!((p.frame_len(full), p.available()), (7 * MAX_FRAME, 0));
        p.free(full).unwrap();
        p.free(small).unwrap();
        assert_eq!(p.in_use(), 0);
    }

    /// Appending segments by hand, as a NIC's receive path does: each to the end of the frame,
    /// and nothing that would make a frame of a free buffer, a cycle, two frames' worth, or
    /// more than `MAX_SEGMENTS` buffers.
    #[test]
    fn segments_are_appended_at_the_end_and_bad_ones_refused() {
        let mut mem = vec![0u8; (MAX_SEGMENTS + 4) * BUF_SIZE];
        let mut p = pool(&mut mem, MAX_SEGMENTS + 4);
        let b: Vec<PacketBuf> = (0..MAX_SEGMENTS + 2).map(|_| p.alloc().unwrap()).collect();
        for (i, &x) in b.iter().enumerate() {
            p.set_len(x, 10 + i).unwrap();
        }
        p.append_segment(b[0], b[1]).unwrap();
        p.append_segment(b[0], b[2]).unwrap();
        assert_eq!(p.segments(b[0]).collect::<Vec<_>>(), vec![b[0], b[1], b[2]]);
        assert_eq!(p.frame_len(b[0]), 10 + 11 + 12);
        // Its own segment again (a cycle), itself, or the head of another frame of several.
        assert_eq!(p.append_segment(b[0], b[2]), Err(PoolError::BadSegment));
        assert_eq!(p.append_segment(b[0], b[0]), Err(PoolError::BadSegment));
        p.append_segment(b[3], b[4]).unwrap();
        assert_eq!(p.append_segment(b[0], b[3]), Err(PoolError::BadSegment));
        // A free buffer, either way; a handle outside the pool.
        let spare = p.alloc().unwrap();
        p.free(spare).unwrap();
        assert_eq!(p.append_segment(b[0], spare), Err(PoolError::BadSegment));
        assert_eq!(p.append_segment(spare, b[5]), Err(PoolError::BadSegment));
        assert_eq!(p.append_segment(b[0], PacketBuf(400)), Err(PoolError::BadHandle));
        // Up to MAX_SEGMENTS buffers, not one more.
        for &x in &b[5..MAX_SEGMENTS + 2] {
            p.append_segment(b[0], x).unwrap();
        }
        assert_eq!(p.segments(b[0]).count(), MAX_SEGMENTS);
        let extra = p.alloc().unwrap();
        assert_eq!(p.append_segment(b[0], extra), Err(PoolError::BadSegment));
        assert!(!p.is_segmented(b[MAX_SEGMENTS + 1]) && !p.is_segmented(extra));
        p.free(b[0]).unwrap();
        assert!(p.has_segmented(), "b[3]'s frame is left");
        p.free(b[3]).unwrap();
        p.free(extra).unwrap();
        assert_eq!((p.in_use(), p.double_frees(), p.has_segmented()), (0, 0, false));
        // Trimmed to its first buffer: the others back, the first still held.
        let f = p.alloc_frame(&vec![1; 3 * MAX_FRAME]).unwrap();
        p.trim_segments(f);
        assert_eq!((p.in_use(), p.frame_len(f), p.has_segmented()), (1, MAX_FRAME, false));
        p.free(f).unwrap();
        // Unchained: three frames of one buffer each, the bytes where they were, each freed
        // on its own.
        let bytes: Vec<u8> = (0..2 * MAX_FRAME + 5).map(|i| i as u8).collect();
        let f = p.alloc_frame(&bytes).unwrap();
        let mut parts = [PacketBuf(0); MAX_SEGMENTS];
        assert_eq!(p.unchain(f, &mut parts), 3);
        assert_eq!(parts[0], f);
        assert!(!p.has_segmented() && parts[..3].iter().all(|&x| !p.is_segmented(x)));
        let again: Vec<u8> = parts[..3].iter().flat_map(|&x| p.frame(x).to_vec()).collect();
        assert_eq!(again, bytes);
        for &x in &parts[..3] {
            p.free(x).unwrap();
        }
        assert_eq!((p.in_use(), p.double_frees()), (0, 0));
        // A frame of one buffer is itself.
        let one = p.alloc().unwrap();
        assert_eq!((p.unchain(one, &mut parts), parts[0]), (1, one));
        p.free(one).unwrap();
        // Truncated: inside its second buffer (the third freed), then inside its first (a frame
        // of one buffer again); past its end or to nothing, refused.
        let f = p.alloc_frame(&bytes).unwrap();
        assert!(!p.truncate_frame(f, bytes.len() + 1) && !p.truncate_frame(f, 0));
        assert!(p.truncate_frame(f, MAX_FRAME + 10));
        assert_eq!((p.frame_len(f), p.segments(f).count(), p.in_use()), (MAX_FRAME + 10, 2, 2));
        let mut v = vec![0u8; MAX_FRAME + 10];
        assert_eq!(p.copy_frame(f, &mut v), Some(v.len()));
        assert_eq!(v, bytes[..MAX_FRAME + 10]);
        assert!(p.truncate_frame(f, 100));
        assert_eq!((p.frame_len(f), p.is_segmented(f), p.has_segmented(), p.in_use()), (100, false, false, 1));
        p.free(f).unwrap();
        assert_eq!((p.in_use(), p.double_frees()), (0, 0));
    }

    /// A view frees a frame of several buffers as one: its holder gives the first back, and
    /// the owner's free takes the rest with it.
    #[test]
    #[allow(unsafe_code)] // a view of the pool (`Pool::view`), under its discipline
    fn a_views_free_of_a_frame_of_several_buffers_frees_all_of_them_at_the_owner() {
        let mut mem = vec![0u8; 4 * BUF_SIZE];
        let mut p = pool(&mut mem, 4);
        let head = p.alloc_frame(&vec![3u8; 3000]).unwrap();
        // SAFETY: the view is used only here, on `head`'s frame, which the owner does not
        // touch meanwhile.
        let mut view = unsafe { p.view() };
        assert_eq!(view.frame_len(head), 3000, "the view reads the links");
        view.free(head).unwrap();
        let mut back = Batch::new();
        assert_eq!(view.take_released(&mut back), 1);
        drop(view);
        p.free_batch(&mut back);
        assert_eq!((p.in_use(), p.double_frees()), (0, 0));
    }

    #[test]
    fn batch_retain_keeps_order_and_hands_out_the_rest() {
        let mut batch = Batch::new();
        for i in 0..5 {
            batch.push(PacketBuf(i)).unwrap();
        }
        let mut dropped = Vec::new();
        batch.retain(|b| b.index() % 2 == 0, |b| dropped.push(b.index()));
        assert_eq!(batch.as_slice(), &[PacketBuf(0), PacketBuf(2), PacketBuf(4)]);
        assert_eq!(dropped, vec![1, 3]);
        batch.drain_front(2);
        assert_eq!(batch.as_slice(), &[PacketBuf(4)]);
    }

    #[test]
    fn batch_refuses_overflow() {
        let mut batch = Batch::new();
        for i in 0..BATCH_SIZE as u16 {
            batch.push(PacketBuf(i)).unwrap();
        }
        assert_eq!(batch.push(PacketBuf(99)), Err(PacketBuf(99)));
        assert!(batch.is_full());
    }
}

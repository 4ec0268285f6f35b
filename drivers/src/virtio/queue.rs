//! The split virtqueue (virtio 1.2 §2.7), driver side.
//!
//! One DMA allocation holds the three parts, each at its spec alignment (§2.7,
//! "Virtqueue alignment" table):
//!
//! | part | alignment | size |
//! |---|---|---|
//! | descriptor table | 16 | 16 × N |
//! | available ring (driver area) | 2 | 6 + 2 × N |
//! | used ring (device area) | 4 | 6 + 8 × N |
//!
//! N (the queue size) is a power of two, so the free-running 16-bit ring indices
//! wrap onto ring slots consistently (`idx % N` stays continuous across the u16 wrap).
//!
//! A chain here carries one packet: a single descriptor (every receive buffer, and a frame
//! in one buffer), or up to `buf::MAX_SEGMENTS` (a frame over several buffers on transmit,
//! [`SplitQueue::push_chain`]). The queue keeps a stack of free descriptor ids and, per
//! descriptor, the buffer a chain's head carries and the descriptor that follows it (the
//! driver's own copy of `next`: the device's view of the table is never read back), so
//! completions may come back in any order, a whole chain is freed by its head, and an id
//! the device invents is caught instead of trusted.

use alloc::vec::Vec;

use cadence_core::buf::PacketBuf;

use crate::hal::{Dma, DmaAlloc, DmaError};

/// `struct virtq_desc` field offsets (§2.7.5): `le64 addr; le32 len; le16 flags; le16 next`.
pub(crate) mod desc {
    pub(crate) const ADDR: usize = 0;
    pub(crate) const LEN: usize = 8;
    pub(crate) const FLAGS: usize = 12;
    pub(crate) const NEXT: usize = 14;
    pub(crate) const SIZE: usize = 16;
}

/// `struct virtq_avail` offsets (§2.7.6): `le16 flags; le16 idx; le16 ring[N]; le16 used_event`.
pub(crate) mod avail {
    pub(crate) const FLAGS: usize = 0;
    pub(crate) const IDX: usize = 2;
    pub(crate) const RING: usize = 4;
    pub(crate) const ELEM: usize = 2;
}

/// `struct virtq_used` offsets (§2.7.8): `le16 flags; le16 idx; struct virtq_used_elem
/// ring[N]; le16 avail_event`, with `virtq_used_elem { le32 id; le32 len; }`.
pub(crate) mod used {
    pub(crate) const FLAGS: usize = 0;
    pub(crate) const IDX: usize = 2;
    pub(crate) const RING: usize = 4;
    pub(crate) const ELEM: usize = 8;
    pub(crate) const ELEM_ID: usize = 0;
    pub(crate) const ELEM_LEN: usize = 4;
}

/// `VIRTQ_DESC_F_NEXT` (§2.7.5): the chain continues in the `next` field.
pub(crate) const DESC_F_NEXT: u16 = 1;
/// `VIRTQ_DESC_F_WRITE` (§2.7.5): the buffer is device-writable (RX).
pub(crate) const DESC_F_WRITE: u16 = 2;
/// `VIRTQ_AVAIL_F_NO_INTERRUPT` (§2.7.7): the driver wants no used-buffer notifications.
pub(crate) const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// `VIRTQ_USED_F_NO_NOTIFY` (§2.7.10): the device wants no available-buffer notifications.
pub(crate) const USED_F_NO_NOTIFY: u16 = 1;

/// Largest split queue size (§2.7: "The maximum Queue Size value is 32768").
pub(crate) const MAX_SIZE: u16 = 32768;

/// Allocation alignment: the descriptor table's 16 bytes would do; a page keeps a
/// queue off other allocations' cache lines.
pub(crate) const ALLOC_ALIGN: usize = 4096;

/// Byte offsets of the driver and device areas, and the total size, for `size` entries.
pub(crate) const fn layout(size: u16) -> (usize, usize, usize) {
    let n = size as usize;
    let avail_off = desc::SIZE * n;
    let avail_end = avail_off + avail::RING + avail::ELEM * n + 2;
    let used_off = (avail_end + 3) & !3;
    let used_end = used_off + used::RING + used::ELEM * n + 2;
    (avail_off, used_off, used_end)
}

/// No descriptor follows (the end of a chain, in [`SplitQueue`]'s `next`).
const NO_NEXT: u16 = u16::MAX;

/// A split virtqueue whose chains carry packet buffers.
#[derive(Debug)]
pub(crate) struct SplitQueue<R> {
    mem: R,
    size: u16,
    avail_off: usize,
    used_off: usize,
    /// Free descriptor ids (a stack).
    free: Vec<u16>,
    /// The buffer each chain's head carries while the device owns it.
    tokens: Vec<Option<PacketBuf>>,
    /// The descriptor after each one in its chain ([`NO_NEXT`] for the last).
    next: Vec<u16>,
    /// The driver's next avail index (written to `avail->idx` by [`Self::publish`]).
    next_avail: u16,
    /// The avail index the device has been shown.
    published: u16,
    /// The next used-ring entry the driver will read.
    last_used: u16,
    /// The device's used index as last read.
    seen_used: u16,
    /// Used entries naming a descriptor the device did not own, and polls that found the
    /// used index further ahead than the descriptors the device holds (device bugs).
    bad_used: u64,
}

impl<R: Dma> SplitQueue<R> {
    /// Allocates a queue of `size` entries (a power of two, 1..=32768) from `dma`,
    /// with used-buffer notifications turned off (polled driver).
    pub(crate) fn try_new<A: DmaAlloc<Region = R>>(dma: &mut A, size: u16) -> Result<Self, DmaError> {
        debug_assert!(size.is_power_of_two() && size <= MAX_SIZE);
        let (avail_off, used_off, total) = layout(size);
        let mem = dma.alloc(total, ALLOC_ALIGN)?;
        // §2.7.7: "the driver ... MAY set VIRTQ_AVAIL_F_NO_INTERRUPT": this driver polls.
        // (Memory comes zeroed, so every other field starts at 0 as §2.7 expects.)
        mem.write16(avail_off + avail::FLAGS, AVAIL_F_NO_INTERRUPT);
        let free = (0..size).rev().collect();
        let tokens = alloc::vec![None; size as usize];
        let next = alloc::vec![NO_NEXT; size as usize];
        Ok(Self {
            mem,
            size,
            avail_off,
            used_off,
            free,
            tokens,
            next,
            next_avail: 0,
            published: 0,
            last_used: 0,
            seen_used: 0,
            bad_used: 0,
        })
    }

    /// Entries in the queue.
    pub(crate) fn size(&self) -> u16 {
        self.size
    }

    /// Physical address of the descriptor table (`queue_desc`).
    pub(crate) fn desc_phys(&self) -> u64 {
        self.mem.phys()
    }

    /// Physical address of the driver area (`queue_driver`).
    pub(crate) fn driver_phys(&self) -> u64 {
        self.mem.phys() + self.avail_off as u64
    }

    /// Physical address of the device area (`queue_device`).
    pub(crate) fn device_phys(&self) -> u64 {
        self.mem.phys() + self.used_off as u64
    }

    /// Descriptors free for [`Self::push`].
    pub(crate) fn num_free(&self) -> usize {
        self.free.len()
    }

    /// Descriptors the device owns (posted, not yet seen in the used ring): its buffers,
    /// one per descriptor.
    pub(crate) fn in_flight(&self) -> usize {
        self.size as usize - self.free.len()
    }

    /// Used entries the device got wrong so far.
    pub(crate) fn bad_used(&self) -> u64 {
        self.bad_used
    }

    /// Puts `buf` on the available ring as one descriptor of `len` bytes at `addr`,
    /// without showing it to the device yet ([`Self::publish`] does). Gives `buf`
    /// back if no descriptor is free.
    pub(crate) fn push(&mut self, addr: u64, len: u32, flags: u16, buf: PacketBuf) -> Result<(), PacketBuf> {
        let Some(id) = self.free.pop() else {
            return Err(buf);
        };
        self.write_desc(id, addr, len, flags, NO_NEXT);
        self.make_available(id, buf);
        Ok(())
    }

    /// Puts `buf` on the available ring as one chain of descriptors, `parts[i]` = (address,
    /// bytes) of the i-th, all with `flags` (and `NEXT` but the last): one packet in several
    /// pieces (§2.7.5, §2.7.13.1). Gives `buf` back, and takes nothing, if `parts` is empty
    /// or fewer descriptors are free.
    pub(crate) fn push_chain(&mut self, parts: &[(u64, u32)], flags: u16, buf: PacketBuf) -> Result<(), PacketBuf> {
        if parts.is_empty() || parts.len() > self.free.len() {
            return Err(buf);
        }
        // Built from the last descriptor back, so each knows the one after it.
        let mut after = NO_NEXT;
        for &(addr, len) in parts.iter().rev() {
            let Some(id) = self.free.pop() else { return Err(buf) }; // Cannot fail: counted above.
            let f = if after == NO_NEXT { flags } else { flags | DESC_F_NEXT };
            self.write_desc(id, addr, len, f, after);
            after = id;
        }
        self.make_available(after, buf);
        Ok(())
    }

    /// Writes descriptor `id` and the driver's copy of its `next`.
    fn write_desc(&mut self, id: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let d = id as usize * desc::SIZE;
        self.mem.write64(d + desc::ADDR, addr);
        self.mem.write32(d + desc::LEN, len);
        self.mem.write16(d + desc::FLAGS, flags);
        self.mem.write16(d + desc::NEXT, if next == NO_NEXT { 0 } else { next });
        if let Some(n) = self.next.get_mut(id as usize) {
            *n = next;
        }
    }

    /// Puts the chain headed by `id`, carrying `buf`, in the next available-ring entry.
    fn make_available(&mut self, id: u16, buf: PacketBuf) {
        if let Some(t) = self.tokens.get_mut(id as usize) {
            *t = Some(buf);
        }
        // §2.7.13.1: "the driver places the index of the head of the descriptor chain into
        // the next ring entry of the available ring" (idx % N; N is a power of two).
        let slot = (self.next_avail % self.size) as usize;
        self.mem.write16(self.avail_off + avail::RING + slot * avail::ELEM, id);
        self.next_avail = self.next_avail.wrapping_add(1);
    }

    /// Shows the device every descriptor pushed since the last call, by storing the
    /// avail index. Returns whether the device wants an available-buffer notification.
    pub(crate) fn publish(&mut self) -> bool {
        if self.published == self.next_avail {
            return false;
        }
        // §2.7.13: "The driver performs a suitable memory barrier to ensure the device sees
        // the updated descriptor table and available ring before the next step" (the idx
        // store). `dma_wmb` orders the descriptor, ring and packet-buffer writes before it
        // (`hal::barrier`: outer-shareable on aarch64, where the device observes).
        crate::hal::dma_wmb();
        self.mem.write16(self.avail_off + avail::IDX, self.next_avail);
        self.published = self.next_avail;
        // §2.7.13: "The driver performs a suitable memory barrier to ensure that it updates
        // the idx field before checking for notification suppression." A store followed by
        // a load needs a full barrier (`dma_mb`).
        crate::hal::dma_mb();
        // §2.7.10: without VIRTIO_F_EVENT_IDX, the device sets VIRTQ_USED_F_NO_NOTIFY when
        // it does not need a notification (it is already processing the queue).
        self.mem.read16(self.used_off + used::FLAGS) & USED_F_NO_NOTIFY == 0
    }

    /// The CPU address of the used ring's `idx`, which the device writes when it hands
    /// buffers back (for a sleeper that monitors it), if the memory has one.
    pub(crate) fn used_idx_address(&self) -> Option<usize> {
        self.mem.cpu_address(self.used_off + used::IDX)
    }

    /// Used entries the device wrote that the driver has not taken (read only; bounded by
    /// the descriptors the device holds, as in [`Self::poll_used`]).
    pub(crate) fn pending_used(&self) -> usize {
        let idx = self.mem.read16(self.used_off + used::IDX);
        usize::from(idx.wrapping_sub(self.last_used)).min(self.in_flight())
    }

    /// Reads the device's used index and returns how many used entries are new.
    ///
    /// A device can have used at most the descriptors it holds, so an index further ahead
    /// than that is a device bug (or a hostile device); it is counted in
    /// [`Self::bad_used`] (once per poll) and only as many entries as the device holds
    /// descriptors are read. Without that bound a single burst walked up to 65 535 used
    /// entries the device never wrote (found by the `virtio` fuzz target).
    pub(crate) fn poll_used(&mut self) -> u16 {
        let idx = self.mem.read16(self.used_off + used::IDX);
        // §2.7.14 / §2.7.8: the device writes the used element before it updates idx; the
        // driver must read idx first and the elements (and the buffers they point at)
        // after it. `dma_rmb` keeps the later reads after the idx read.
        crate::hal::dma_rmb();
        let new = idx.wrapping_sub(self.last_used);
        let held = self.in_flight() as u16;
        if new > held {
            self.bad_used += 1;
            self.seen_used = self.last_used.wrapping_add(held);
            return held;
        }
        self.seen_used = idx;
        new
    }

    /// Takes the next used entry seen by [`Self::poll_used`]: the buffer and the bytes
    /// the device wrote into it; the entry's chain is free again. Entries naming a
    /// descriptor that heads no chain the device owns are skipped and counted in
    /// [`Self::bad_used`].
    pub(crate) fn pop_used(&mut self) -> Option<(PacketBuf, u32)> {
        while self.last_used != self.seen_used {
            let slot = (self.last_used % self.size) as usize;
            let e = self.used_off + used::RING + slot * used::ELEM;
            let id = self.mem.read32(e + used::ELEM_ID);
            let len = self.mem.read32(e + used::ELEM_LEN);
            self.last_used = self.last_used.wrapping_add(1);
            let token = usize::try_from(id).ok().and_then(|i| self.tokens.get_mut(i)).and_then(Option::take);
            match token {
                Some(buf) => {
                    // `id < size` here, since `tokens` has `size` entries; a chain is at most
                    // `size` long (each descriptor in it was taken from `free` once).
                    let mut d = id as u16;
                    for _ in 0..self.size {
                        self.free.push(d);
                        match self.next.get_mut(d as usize) {
                            Some(n) if *n != NO_NEXT => d = core::mem::replace(n, NO_NEXT),
                            _ => break,
                        }
                    }
                    return Some((buf, len));
                }
                None => self.bad_used += 1,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::layout;

    #[test]
    fn layout_follows_the_spec_alignments() {
        // N = 256: desc 4096 bytes, avail 4 + 512 + 2 = 518 -> used at 4096 + 520.
        assert_eq!(layout(256), (4096, 4616, 4616 + 4 + 2048 + 2));
        // N = 1: avail ends at 16 + 8 = 24 (already 4-aligned).
        assert_eq!(layout(1), (16, 24, 24 + 4 + 8 + 2));
        // N = 2: avail ends at 32 + 10 = 42 -> used at 44.
        assert_eq!(layout(2).1, 44);
    }
}

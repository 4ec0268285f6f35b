//! The two halves of an AF_XDP ring's index protocol (`net/xdp/xsk_queue.h`, libxdp
//! `xsk.h`).
//!
//! The kernel's comment in `xsk_queue.h` states the pairing:
//!
//! ```text
//! producer                          consumer
//! if (LOAD ->consumer) {  (A)       LOAD.acq ->producer  (C)
//!    STORE $data                    LOAD $data
//!    STORE.rel ->producer (B)       STORE.rel ->consumer (D)
//! }
//! ```
//!
//! "(A) pairs with (D), and (B) pairs with (C)": the producer must not write an entry
//! before it has seen the consumer release that slot, and the consumer must not read an
//! entry before it has seen the producer publish it. Here (A) and (C) are a volatile
//! load followed by `fence(Acquire)`, (B) and (D) are `fence(Release)` followed by the
//! volatile store.
//!
//! Both sides keep the other side's index cached, as libxdp does, and read the shared
//! word only when the cache says the ring is full (producer) or empty (consumer). Indices
//! are free-running `u32`s; every difference is a wrapping subtraction. The kernel's
//! index is not trusted: a difference larger than the ring is counted in `bad_index` and
//! clamped, so a corrupt index costs entries, never an out-of-ring access.

use core::sync::atomic::{Ordering, fence};

use super::error::{Ring, XskError};
use super::{RingOffsets, RingWindow, XDP_RING_NEED_WAKEUP};
use crate::hal::Mmio;

/// Checks a ring's size and offsets against its window, for entries of `entry` bytes.
pub(crate) fn check(ring: Ring, rw: &RingWindow<impl Mmio>, entry: usize) -> Result<(), XskError> {
    let RingWindow { window, offsets, size } = rw;
    let size = *size;
    if size == 0 || !size.is_power_of_two() || size > 1 << 31 {
        return Err(XskError::BadSize { ring, size });
    }
    let RingOffsets { producer, consumer, flags, desc } = *offsets;
    let words = [producer, consumer, flags];
    if words.iter().any(|w| !w.is_multiple_of(4)) || !desc.is_multiple_of(8) {
        return Err(XskError::Misaligned { ring });
    }
    let have = window.len();
    let too_small = |need: usize| XskError::WindowTooSmall { ring, need, have };
    let desc_end = (size as usize).checked_mul(entry).and_then(|b| b.checked_add(desc)).ok_or(too_small(usize::MAX))?;
    let mut need = desc_end;
    for w in words {
        need = need.max(w.checked_add(4).ok_or(too_small(usize::MAX))?);
    }
    if need > have {
        return Err(too_small(need));
    }
    // Each word must be apart from the others and outside the entry array.
    for (i, &w) in words.iter().enumerate() {
        let clash_word = words.iter().skip(i + 1).any(|&o| o == w);
        let in_desc = (desc..desc_end).contains(&w);
        if clash_word || in_desc {
            return Err(XskError::Overlap { ring });
        }
    }
    Ok(())
}

/// The user's side of a ring the user produces into (fill, TX).
#[derive(Debug)]
pub(crate) struct Producer<W> {
    w: W,
    off: RingOffsets,
    size: u32,
    mask: u32,
    /// Our producer index: the next entry to write. Authoritative (we are the producer).
    prod: u32,
    /// The kernel's consumer index as last read, plus `size` (libxdp's trick: free
    /// entries are then `cached_cons - prod`).
    cached_cons: u32,
    /// Times the kernel's consumer index claimed more entries consumed than produced.
    pub(crate) bad_index: u64,
}

impl<W: Mmio> Producer<W> {
    /// Takes over a checked ring. Fails when it is not empty.
    pub(crate) fn try_new(ring: Ring, rw: RingWindow<W>) -> Result<Self, XskError> {
        let RingWindow { window: w, offsets: off, size } = rw;
        let prod = w.read32(off.producer);
        let cons = w.read32(off.consumer);
        if prod != cons {
            return Err(XskError::NotEmpty { ring });
        }
        // (A): nothing is written before this load is done.
        fence(Ordering::Acquire);
        Ok(Self { w, off, size, mask: size - 1, prod, cached_cons: cons.wrapping_add(size), bad_index: 0 })
    }

    /// Entries.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Entries free for writing; reads the kernel's consumer index only when the cached
    /// value shows fewer than `want` (libxdp `xsk_prod_nb_free`).
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.prod);
        if free >= want {
            return free;
        }
        self.refresh();
        self.cached_cons.wrapping_sub(self.prod)
    }

    /// Re-reads the kernel's consumer index (A).
    fn refresh(&mut self) {
        let cons = self.w.read32(self.off.consumer);
        // (A) "if (LOAD ->consumer)": the slots it frees are written only after this load.
        fence(Ordering::Acquire);
        if self.prod.wrapping_sub(cons) > self.size {
            // More consumed than produced: the index is corrupt. Treat the ring as empty
            // (the kernel claims it read everything); ownership is tracked apart, so the
            // cost is at most entries the kernel never reads.
            self.bad_index += 1;
            self.cached_cons = self.prod.wrapping_add(self.size);
        } else {
            self.cached_cons = cons.wrapping_add(self.size);
        }
    }

    /// Entries written but not yet consumed by the kernel (reads its consumer index).
    pub(crate) fn unconsumed(&mut self) -> u32 {
        self.refresh();
        self.size - self.cached_cons.wrapping_sub(self.prod)
    }

    /// Byte offset of entry `prod + i`.
    fn slot(&self, i: u32, entry: usize) -> usize {
        self.off.desc + (self.prod.wrapping_add(i) & self.mask) as usize * entry
    }

    /// Writes a `u64` address into entry `prod + i` (fill ring). `i` must be below what
    /// [`Self::free`] returned.
    pub(crate) fn write_addr(&self, i: u32, addr: u64) {
        self.w.write64(self.slot(i, super::ADDR_ENTRY), addr);
    }

    /// Writes an `xdp_desc` into entry `prod + i` (TX ring).
    pub(crate) fn write_desc(&self, i: u32, addr: u64, len: u32) {
        self.write_desc_options(i, addr, len, 0);
    }

    /// [`Self::write_desc`] with `options` (`XDP_PKT_CONTD` for a piece of a frame that goes
    /// on in the next entry).
    pub(crate) fn write_desc_options(&self, i: u32, addr: u64, len: u32, options: u32) {
        let e = self.slot(i, super::desc::SIZE);
        self.w.write64(e + super::desc::ADDR, addr);
        self.w.write32(e + super::desc::LEN, len);
        self.w.write32(e + super::desc::OPTIONS, options);
    }

    /// Publishes `n` written entries (B).
    pub(crate) fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.prod = self.prod.wrapping_add(n);
        // (B) "STORE.rel ->producer": the entries (and, for TX, the frames they name) are
        // visible before the index that publishes them.
        fence(Ordering::Release);
        self.w.write32(self.off.producer, self.prod);
    }

    /// Whether the kernel asks for a wake-up. A full fence first: the producer store
    /// above must be visible before the flag is read, or the kernel could set the flag
    /// after missing our entries while we read the old, clear flag (store → load order).
    pub(crate) fn needs_wakeup(&self) -> bool {
        fence(Ordering::SeqCst);
        self.w.read32(self.off.flags) & XDP_RING_NEED_WAKEUP != 0
    }
}

/// The user's side of a ring the kernel produces into (RX, completion).
#[derive(Debug)]
pub(crate) struct Consumer<W> {
    w: W,
    off: RingOffsets,
    size: u32,
    mask: u32,
    /// Our consumer index: the next entry to read.
    cons: u32,
    /// The kernel's producer index as last read (clamped to `cons + size`).
    cached_prod: u32,
    /// Times the kernel's producer index was more than a ring ahead of us, or behind.
    pub(crate) bad_index: u64,
}

impl<W: Mmio> Consumer<W> {
    /// Takes over a checked ring. Fails when it is not empty.
    pub(crate) fn try_new(ring: Ring, rw: RingWindow<W>) -> Result<Self, XskError> {
        let RingWindow { window: w, offsets: off, size } = rw;
        let prod = w.read32(off.producer);
        let cons = w.read32(off.consumer);
        if prod != cons {
            return Err(XskError::NotEmpty { ring });
        }
        Ok(Self { w, off, size, mask: size - 1, cons, cached_prod: prod, bad_index: 0 })
    }

    /// Entries.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// The CPU address of the producer word, which the kernel writes when it publishes.
    pub(crate) fn producer_address(&self) -> Option<usize> {
        self.w.cpu_address(self.off.producer)
    }

    /// Entries the kernel published and we have not read (one read of its producer index,
    /// no state changed; a corrupt index counts as a full ring).
    pub(crate) fn pending(&self) -> u32 {
        let n = self.w.read32(self.off.producer).wrapping_sub(self.cons);
        n.min(self.size)
    }

    /// Entries ready to read, at most `max`; reads the kernel's producer index only when
    /// the cached one shows none (libxdp `xsk_cons_nb_avail`).
    pub(crate) fn available(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cons);
        if n == 0 {
            let prod = self.w.read32(self.off.producer);
            // (C) "LOAD.acq ->producer": entries, and the frames they name, are read after.
            fence(Ordering::Acquire);
            n = prod.wrapping_sub(self.cons);
            if n > self.size {
                // More than a ring ahead (or behind us): the index is corrupt. Read one
                // ring's worth; every entry is validated on its own.
                self.bad_index += 1;
                n = self.size;
            }
            self.cached_prod = self.cons.wrapping_add(n);
        }
        n.min(max)
    }

    /// Byte offset of entry `cons + i`.
    fn slot(&self, i: u32, entry: usize) -> usize {
        self.off.desc + (self.cons.wrapping_add(i) & self.mask) as usize * entry
    }

    /// Reads the `u64` address in entry `cons + i` (completion ring).
    pub(crate) fn read_addr(&self, i: u32) -> u64 {
        self.w.read64(self.slot(i, super::ADDR_ENTRY))
    }

    /// Reads the `xdp_desc` in entry `cons + i` (RX ring): address, length, options.
    pub(crate) fn read_desc(&self, i: u32) -> (u64, u32, u32) {
        let e = self.slot(i, super::desc::SIZE);
        (
            self.w.read64(e + super::desc::ADDR),
            self.w.read32(e + super::desc::LEN),
            self.w.read32(e + super::desc::OPTIONS),
        )
    }

    /// Hands `n` read entries back to the kernel (D).
    pub(crate) fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cons = self.cons.wrapping_add(n);
        // (D) "STORE.rel ->consumer": our reads of the entries are done before the kernel
        // may reuse their slots.
        fence(Ordering::Release);
        self.w.write32(self.off.consumer, self.cons);
    }
}

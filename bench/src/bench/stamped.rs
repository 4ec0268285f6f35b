//! A `TPACKET_V3` receive ring read for the kernel's per-frame timestamps: the sink of
//! the latency trials.
//!
//! `drivers::tpacket::TpacketRx` (the sink of the throughput search) copies frames into
//! pool buffers and drops the packet headers, so the only receive time it leaves is the
//! sink's own poll, which comes after the kernel handed over the whole block: when the
//! block is full (≈ 28 frames of 64 B in 4 KiB) or its 1 ms retire timer fired. At low
//! rates that wait is most of the measured latency. Every `tpacket3_hdr` carries
//! `tp_sec`/`tp_nsec`, the `CLOCK_REALTIME` time at which the kernel put the frame in the
//! ring (`af_packet.c`, `tpacket_get_timestamp`: the skb's stamp, or `ktime_get_real` when
//! it has none — frames crossing into the host's namespace lose theirs); this walker reads
//! it with the first bytes of each frame. The block protocol is `packet_mmap.rst`'s, as
//! in `TpacketRx`: blocks in ring order, `TP_STATUS_USER` hands one over (Acquire after
//! reading it), `TP_STATUS_KERNEL` gives it back (Release before), every offset checked
//! against the block before it is followed.

use core::sync::atomic::{Ordering, fence};

use cadence_drivers::hal::Mmio;

/// `TP_STATUS_USER` / `TP_STATUS_KERNEL` (`if_packet.h`).
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_KERNEL: u32 = 0;
/// Offsets in a block (`struct tpacket_block_desc`): status, packet count, first packet.
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST: usize = 16;
const BLOCK_HDR_LEN: usize = 48;
/// Offsets in a `struct tpacket3_hdr`.
const PKT_NEXT: usize = 0;
const PKT_SEC: usize = 4;
const PKT_NSEC: usize = 8;
const PKT_SNAPLEN: usize = 12;
const PKT_MAC: usize = 24;
const PKT_HDR_LEN: usize = 48;
/// Bytes of each frame handed to the caller (headers + tag).
pub const PREFIX: usize = 64;

/// What the walker counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StampCounters {
    pub blocks: u64,
    pub frames: u64,
    /// Packet headers or data outside their block: the rest of that block is skipped.
    pub bad: u64,
}

/// The walker over one RX ring window.
#[derive(Debug)]
pub struct StampRx<W> {
    w: W,
    block_size: usize,
    block_nr: usize,
    block: usize,
    pub counters: StampCounters,
}

impl<W: Mmio> StampRx<W> {
    /// A walker over a fresh ring of `block_nr` blocks of `block_size` bytes; `None` when
    /// the window is smaller than that or a block cannot hold its header.
    pub fn new(w: W, block_size: usize, block_nr: usize) -> Option<Self> {
        if block_nr == 0 || block_size < BLOCK_HDR_LEN || w.len() < block_size.checked_mul(block_nr)? {
            return None;
        }
        Some(Self { w, block_size, block_nr, block: 0, counters: StampCounters::default() })
    }

    /// Hands every frame of up to `max_blocks` handed-over blocks to `f` (its first
    /// [`PREFIX`] bytes, and the kernel's timestamp in ns since the epoch); returns the
    /// frames.
    pub fn poll(&mut self, max_blocks: usize, mut f: impl FnMut(&[u8], u64)) -> usize {
        let mut frames = 0;
        let mut buf = [0u8; PREFIX];
        for _ in 0..max_blocks {
            let base = self.block * self.block_size;
            if self.w.read32(base + BLOCK_STATUS) & TP_STATUS_USER == 0 {
                break;
            }
            // Nothing of the block is read before the status that hands it over.
            fence(Ordering::Acquire);
            let n = self.w.read32(base + BLOCK_NUM_PKTS);
            let mut off = self.w.read32(base + BLOCK_FIRST) as usize;
            for _ in 0..n {
                let fits = off >= BLOCK_HDR_LEN && off.is_multiple_of(4) && off + PKT_HDR_LEN <= self.block_size;
                if !fits {
                    self.counters.bad += 1;
                    break;
                }
                let h = base + off;
                let mac = self.w.read16(h + PKT_MAC) as usize;
                let len = (self.w.read32(h + PKT_SNAPLEN) as usize).min(PREFIX);
                if mac < PKT_HDR_LEN || off + mac + len > self.block_size {
                    self.counters.bad += 1;
                    break;
                }
                self.w.read_bytes(h + mac, &mut buf[..len]);
                let ns = u64::from(self.w.read32(h + PKT_SEC)) * 1_000_000_000 + u64::from(self.w.read32(h + PKT_NSEC));
                f(&buf[..len], ns);
                frames += 1;
                let next = self.w.read32(h + PKT_NEXT) as usize;
                if next == 0 {
                    break;
                }
                off += next;
            }
            // Every read of the block is done before the kernel may refill it.
            fence(Ordering::Release);
            self.w.write32(base + BLOCK_STATUS, TP_STATUS_KERNEL);
            self.block = (self.block + 1) % self.block_nr;
            self.counters.blocks += 1;
        }
        self.counters.frames += frames as u64;
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A ring window over plain memory.
    struct Mem(RefCell<Vec<u8>>);

    impl Mmio for Mem {
        fn read8(&self, off: usize) -> u8 {
            self.0.borrow()[off]
        }
        fn read16(&self, off: usize) -> u16 {
            let m = self.0.borrow();
            u16::from_le_bytes([m[off], m[off + 1]])
        }
        fn read32(&self, off: usize) -> u32 {
            let m = self.0.borrow();
            u32::from_le_bytes([m[off], m[off + 1], m[off + 2], m[off + 3]])
        }
        fn write8(&self, off: usize, val: u8) {
            self.0.borrow_mut()[off] = val;
        }
        fn write16(&self, off: usize, val: u16) {
            self.0.borrow_mut()[off..off + 2].copy_from_slice(&val.to_le_bytes());
        }
        fn write32(&self, off: usize, val: u32) {
            self.0.borrow_mut()[off..off + 4].copy_from_slice(&val.to_le_bytes());
        }
        fn len(&self) -> usize {
            self.0.borrow().len()
        }
    }

    /// Block `b` of 4 KiB with frames `(len, byte, sec, nsec)` laid out as the kernel does
    /// (first at 48, headers 48 bytes, data at tp_mac = 82, next offsets aligned to 8).
    fn fill(m: &Mem, b: usize, frames: &[(usize, u8, u32, u32)]) {
        let base = b * 4096;
        let mut off = 48;
        m.write32(base + BLOCK_NUM_PKTS, frames.len() as u32);
        m.write32(base + BLOCK_FIRST, off as u32);
        for (i, &(len, byte, sec, nsec)) in frames.iter().enumerate() {
            let h = base + off;
            let next = (82 + len).next_multiple_of(8);
            m.write32(h + PKT_NEXT, if i + 1 == frames.len() { 0 } else { next as u32 });
            m.write32(h + PKT_SEC, sec);
            m.write32(h + PKT_NSEC, nsec);
            m.write32(h + PKT_SNAPLEN, len as u32);
            m.write16(h + PKT_MAC, 82);
            for k in 0..len {
                m.write8(h + 82 + k, byte);
            }
            off += next;
        }
        m.write32(base + BLOCK_STATUS, TP_STATUS_USER);
    }

    #[test]
    fn frames_come_with_the_kernel_stamps_in_block_order() {
        let m = Mem(RefCell::new(vec![0; 3 * 4096]));
        let mut rx = StampRx::new(m, 4096, 3).unwrap();
        assert_eq!(rx.poll(8, |_, _| unreachable!("no block handed over yet")), 0);
        fill(&rx.w, 0, &[(60, 1, 10, 5), (1514, 2, 10, 7)]);
        fill(&rx.w, 2, &[(60, 9, 99, 0)]); // not reached: block 1 is still the kernel's
        let mut got = Vec::new();
        assert_eq!(rx.poll(8, |f, ns| got.push((f.len(), f[0], ns))), 2);
        assert_eq!(got, vec![(60, 1, 10_000_000_005), (64, 2, 10_000_000_007)]);
        assert_eq!(rx.w.read32(BLOCK_STATUS), TP_STATUS_KERNEL, "block 0 given back");
        fill(&rx.w, 1, &[(60, 3, 11, 0)]);
        got.clear();
        assert_eq!(rx.poll(1, |f, ns| got.push((f.len(), f[0], ns))), 1, "one block at most");
        assert_eq!(rx.poll(8, |f, ns| got.push((f.len(), f[0], ns))), 1);
        assert_eq!(got, vec![(60, 3, 11_000_000_000), (60, 9, 99_000_000_000)]);
        assert_eq!(rx.counters, StampCounters { blocks: 3, frames: 4, bad: 0 });
    }

    #[test]
    fn offsets_outside_the_block_are_not_followed() {
        let m = Mem(RefCell::new(vec![0; 4096]));
        let mut rx = StampRx::new(m, 4096, 1).unwrap();
        fill(&rx.w, 0, &[(60, 1, 1, 0), (60, 2, 1, 0)]);
        rx.w.write32(48, 4090); // the first frame's next offset points past the block
        let mut n = 0;
        assert_eq!(rx.poll(1, |_, _| n += 1), 1);
        assert_eq!((n, rx.counters.bad), (1, 1));
        fill(&rx.w, 0, &[(60, 1, 1, 0)]);
        rx.w.write16(48 + PKT_MAC, 4080); // data past the block
        assert_eq!(rx.poll(1, |_, _| unreachable!()), 0);
        assert_eq!(rx.counters.bad, 2);
        assert!(StampRx::new(Mem(RefCell::new(vec![0; 100])), 4096, 1).is_none());
    }
}

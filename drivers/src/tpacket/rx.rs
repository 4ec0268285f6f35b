//! The `TPACKET_V3` receive ring: blocks of packets, copied into pool buffers.
//!
//! `packet_mmap.rst`, "TPACKET_V3 ... the ring buffer is divided into blocks": the kernel
//! fills block 0, 1, …, `block_nr − 1`, 0, … in order; it hands a block over by setting
//! `TP_STATUS_USER` in its `block_status` (when the block is full or its retire timer
//! fires) and takes it back when the user stores `TP_STATUS_KERNEL`. So the driver walks
//! the blocks in the same order and never skips one: a block not yet handed over stops
//! the burst.

use core::sync::atomic::{Ordering, fence};

use alloc::vec::Vec;

use cadence_core::buf::{Batch, HEADROOM, MAX_FRAME, MAX_SEGMENTED_FRAME, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, RxStats, WakeAddr};
use cadence_core::time::ClockMap;

use super::status::{
    TP_STATUS_CSUMNOTREADY, TP_STATUS_KERNEL, TP_STATUS_LOSING, TP_STATUS_USER, TP_STATUS_VLAN_TPID_VALID,
    TP_STATUS_VLAN_VALID,
};
use super::{ETH_ALEN2, ETH_HLEN, ETH_P_8021Q, TPACKET_ALIGNMENT, TpacketError, VLAN_HLEN, block, pkt};
use crate::hal::Mmio;

/// The RX ring's shape, as given to `PACKET_RX_RING` in `struct tpacket_req3`
/// (`tp_block_size`, `tp_block_nr`; `tp_frame_*` do not matter to `TPACKET_V3` RX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxGeometry {
    /// Bytes per block (`tp_block_size`).
    pub block_size: usize,
    /// Blocks (`tp_block_nr`).
    pub block_nr: usize,
}

/// What a [`TpacketRx`] counted besides its [`RxStats`]. `truncated`, `too_long`,
/// `short` and `bad_headers` are also in `RxStats::errors`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TpacketRxCounters {
    /// Blocks given back to the kernel.
    pub blocks: u64,
    /// Frames the kernel cut short (`tp_snaplen < tp_len`): the ring's slot was smaller
    /// than the frame. Dropped.
    pub truncated: u64,
    /// Frames longer than a pool frame takes (`MAX_SEGMENTED_FRAME` over several buffers,
    /// counting a re-inserted tag).
    pub too_long: u64,
    /// Frames longer than one pool buffer, received over several (`Pool::alloc_frame`).
    pub multi_buffer: u64,
    /// Frames shorter than an Ethernet header.
    pub short: u64,
    /// Packet headers outside their block, or data running past it. A header that
    /// cannot be read ends the walk of its block (the rest of the chain is lost).
    pub bad_headers: u64,
    /// Blocks the kernel flagged `TP_STATUS_LOSING` (it dropped frames: ring full).
    pub losing: u64,
    /// Frames flagged `TP_STATUS_CSUMNOTREADY` (L4 checksum left to an offload that
    /// will not happen here; delivered as they are).
    pub csum_not_ready: u64,
    /// Frames whose 802.1Q tag was put back.
    pub vlan_restored: u64,
    /// Frames stamped with their arrival from `tp_sec`/`tp_nsec` (only with
    /// [`TpacketRx::with_arrival`]).
    pub stamped: u64,
    /// Frames whose header had no time (`tp_sec` 0): counted from the poll instead.
    pub unstamped: u64,
}

/// One packet header, read and placed: `data` is inside the block.
#[derive(Debug, Clone, Copy)]
struct Packet {
    /// Window offset of the packet's header.
    hdr: usize,
    next_offset: u32,
    snaplen: u32,
    len: u32,
    status: u32,
}

/// Why a packet was not handed out.
enum Skip {
    /// Counted in `errors` (and one of the counters).
    Error,
    /// The pool was empty: counted in `no_buffer`.
    NoBuffer,
}

/// The receive queue of a `TPACKET_V3` socket.
#[derive(Debug)]
pub struct TpacketRx<W> {
    w: W,
    block_size: usize,
    block_nr: usize,
    /// The block being read or waited for.
    block: usize,
    /// Whether `block` is the user's and being walked.
    open: bool,
    /// Packets of `block` not yet read.
    left: u32,
    /// Offset in `block` of the next packet header (`usize::MAX`: the chain broke).
    next: usize,
    stats: RxStats,
    counters: TpacketRxCounters,
    /// [`TpacketRx::with_arrival`].
    arrival: Option<ClockMap>,
    /// Where a frame longer than a buffer is put together before it is copied into several
    /// (`MAX_SEGMENTED_FRAME` bytes, allocated once).
    scratch: Vec<u8>,
}

impl<W: Mmio> TpacketRx<W> {
    /// Takes over a freshly mapped RX ring (all blocks the kernel's; it starts with
    /// block 0). Checks that there is a block, that a block holds at least its 48-byte
    /// header, is a multiple of 16 bytes and at most `u32::MAX`, and that the window
    /// holds `block_size × block_nr` bytes.
    ///
    /// No doorbell: the kernel fills the blocks without being asked.
    pub fn try_new(ring: W, geometry: RxGeometry) -> Result<Self, TpacketError> {
        let RxGeometry { block_size, block_nr } = geometry;
        if block_nr == 0 {
            return Err(TpacketError::NoBlocks);
        }
        if block_size < block::HDR_LEN || u32::try_from(block_size).is_err() {
            return Err(TpacketError::BadBlockSize(block_size));
        }
        if !block_size.is_multiple_of(TPACKET_ALIGNMENT) {
            return Err(TpacketError::BlockMisaligned(block_size));
        }
        let have = ring.len();
        let need = block_size.saturating_mul(block_nr);
        if need > have {
            return Err(TpacketError::WindowTooSmall { need, have });
        }
        Ok(Self {
            w: ring,
            block_size,
            block_nr,
            block: 0,
            open: false,
            left: 0,
            next: 0,
            stats: RxStats::default(),
            counters: TpacketRxCounters::default(),
            arrival: None,
            scratch: alloc::vec![0; MAX_SEGMENTED_FRAME],
        })
    }

    /// Stamps each frame with its arrival: the packet header's `tp_sec`/`tp_nsec`, which
    /// `tpacket_rcv` fills with `CLOCK_REALTIME` (the skb's software timestamp, or the time
    /// the frame entered the ring; a hardware one only with `PACKET_TIMESTAMP`, which the
    /// platform does not set), converted to worker ticks by `map` (`CLOCK_REALTIME` ns →
    /// ticks). `None`: no stamps (the worker counts from the poll).
    pub fn with_arrival(mut self, map: Option<ClockMap>) -> Self {
        self.arrival = map;
        self
    }

    /// What was counted so far.
    pub fn counters(&self) -> TpacketRxCounters {
        self.counters
    }

    /// The block being read or waited for.
    pub fn current_block(&self) -> usize {
        self.block
    }

    fn block_base(&self) -> usize {
        self.block * self.block_size
    }

    /// Opens the current block if the kernel handed it over.
    fn open_block(&mut self) -> bool {
        let base = self.block_base();
        let status = self.w.read32(base + block::STATUS);
        if status & TP_STATUS_USER == 0 {
            return false;
        }
        // The kernel writes the packets and the header, then the status (`af_packet.c`,
        // `prb_close_block`: `smp_wmb()` before `BLOCK_STATUS(pbd1) = status`). Acquire:
        // nothing of the block is read before the status that hands it over.
        fence(Ordering::Acquire);
        if status & TP_STATUS_LOSING != 0 {
            self.counters.losing += 1;
        }
        self.left = self.w.read32(base + block::NUM_PKTS);
        self.next = self.w.read32(base + block::FIRST) as usize;
        self.open = true;
        true
    }

    /// Gives the current block back and moves to the next.
    fn close_block(&mut self) {
        // packet_mmap.rst: the user hands a block back by setting `TP_STATUS_KERNEL`.
        // Release: every copy out of the block is done before the kernel may refill it.
        fence(Ordering::Release);
        self.w.write32(self.block_base() + block::STATUS, TP_STATUS_KERNEL);
        self.block = (self.block + 1) % self.block_nr;
        self.open = false;
        self.counters.blocks += 1;
    }

    /// Reads the packet header at offset `at` of the current block, if it lies inside
    /// the block (aligned for the word reads).
    fn header(&self, at: usize) -> Option<Packet> {
        let end = at.checked_add(pkt::SIZE)?;
        if at < block::HDR_LEN || !at.is_multiple_of(4) || end > self.block_size {
            return None;
        }
        let hdr = self.block_base() + at;
        Some(Packet {
            hdr,
            next_offset: self.w.read32(hdr + pkt::NEXT_OFFSET),
            snaplen: self.w.read32(hdr + pkt::SNAPLEN),
            len: self.w.read32(hdr + pkt::LEN),
            status: self.w.read32(hdr + pkt::STATUS),
        })
    }

    /// Copies packet `p` into a fresh pool buffer at `HEADROOM`, putting back a VLAN tag
    /// the kernel took off.
    fn copy_out(&mut self, pool: &mut Pool<'_>, p: &Packet) -> Result<PacketBuf, Skip> {
        // `tp_mac` is counted from the packet header; the captured bytes must lie after
        // the header and inside the block.
        let at = p.hdr - self.block_base();
        let mac = self.w.read16(p.hdr + pkt::MAC) as usize;
        let snap = p.snaplen as usize;
        let inside = at.checked_add(mac).and_then(|s| s.checked_add(snap)).is_some_and(|end| end <= self.block_size);
        if mac < pkt::SIZE || !inside {
            self.counters.bad_headers += 1;
            return Err(Skip::Error);
        }
        if p.snaplen < p.len {
            self.counters.truncated += 1;
            return Err(Skip::Error);
        }
        if snap < ETH_HLEN {
            self.counters.short += 1;
            return Err(Skip::Error);
        }
        let vlan = p.status & TP_STATUS_VLAN_VALID != 0;
        let out_len = if vlan { snap + VLAN_HLEN } else { snap };
        if out_len > MAX_FRAME {
            return self.copy_out_long(pool, p, mac, out_len);
        }
        let Some(b) = pool.alloc() else {
            return Err(Skip::NoBuffer);
        };
        // `HEADROOM + out_len <= BUF_SIZE` (out_len <= MAX_FRAME), so the range exists.
        let Some(dst) = pool.raw_mut(b).get_mut(HEADROOM..HEADROOM + out_len) else {
            let _ = pool.free(b);
            return Err(Skip::Error);
        };
        self.read_frame(p, mac, dst);
        if pool.set_frame(b, HEADROOM, out_len).is_err() {
            let _ = pool.free(b);
            return Err(Skip::Error);
        }
        self.stamp(pool, p, b);
        Ok(b)
    }

    /// [`TpacketRx::copy_out`] of a frame longer than a buffer (a jumbo frame): put together
    /// in the scratch area, then copied over as many buffers as it needs.
    #[cold]
    #[inline(never)]
    fn copy_out_long(
        &mut self,
        pool: &mut Pool<'_>,
        p: &Packet,
        mac: usize,
        out_len: usize,
    ) -> Result<PacketBuf, Skip> {
        let mut scratch = core::mem::take(&mut self.scratch);
        let got = match scratch.get_mut(..out_len) {
            None => {
                self.counters.too_long += 1;
                Err(Skip::Error)
            }
            Some(dst) => {
                self.read_frame(p, mac, dst);
                match pool.alloc_frame(dst) {
                    Some(b) => {
                        self.counters.multi_buffer += 1;
                        self.stamp(pool, p, b);
                        Ok(b)
                    }
                    None => Err(Skip::NoBuffer),
                }
            }
        };
        self.scratch = scratch;
        got
    }

    /// Reads packet `p`'s frame (its data at `mac` from the header) into `dst`, exactly as
    /// long as the frame on the wire: a VLAN tag the kernel took off goes back in.
    fn read_frame(&mut self, p: &Packet, mac: usize, dst: &mut [u8]) {
        let data = p.hdr + mac;
        let vlan = p.status & TP_STATUS_VLAN_VALID != 0;
        if vlan {
            // if_packet.h: with TP_STATUS_VLAN_VALID the tag is in `tp_vlan_tci` (and its
            // TPID in `tp_vlan_tpid` if TP_STATUS_VLAN_TPID_VALID, else 802.1Q), not in
            // the data. It goes back between the MAC addresses and the EtherType, so the
            // frame is the one on the wire.
            let tpid = if p.status & TP_STATUS_VLAN_TPID_VALID != 0 {
                self.w.read16(p.hdr + pkt::VLAN_TPID)
            } else {
                ETH_P_8021Q
            };
            let tci = self.w.read32(p.hdr + pkt::VLAN_TCI) as u16;
            let (macs, rest) = dst.split_at_mut(ETH_ALEN2);
            let (tag, payload) = rest.split_at_mut(VLAN_HLEN);
            self.w.read_bytes(data, macs);
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&tci.to_be_bytes());
            self.w.read_bytes(data + ETH_ALEN2, payload);
            self.counters.vlan_restored += 1;
        } else {
            self.w.read_bytes(data, dst);
        }
        if p.status & TP_STATUS_CSUMNOTREADY != 0 {
            self.counters.csum_not_ready += 1;
        }
    }

    /// Stamps `b` with packet `p`'s arrival ([`TpacketRx::with_arrival`]).
    fn stamp(&mut self, pool: &mut Pool<'_>, p: &Packet, b: PacketBuf) {
        if let Some(map) = self.arrival {
            // `struct tpacket3_hdr`: `tp_sec`, then `tp_nsec` (nanoseconds in V3).
            let sec = u64::from(self.w.read32(p.hdr + pkt::SEC));
            let nsec = u64::from(self.w.read32(p.hdr + pkt::NSEC));
            if sec == 0 {
                self.counters.unstamped += 1;
            } else {
                self.counters.stamped += 1;
                pool.set_stamp(b, map.ticks(sec.saturating_mul(1_000_000_000).saturating_add(nsec)));
            }
        }
    }
}

impl<W: Mmio> RxQueue for TpacketRx<W> {
    /// Walks the blocks in order from where the last call stopped (inside a block if the
    /// batch filled there), copying each packet into a pool buffer; a block goes back to
    /// the kernel as soon as its last packet is read. An empty pool drops the frame
    /// (counted in `no_buffer`): it cannot stay in a block that has to go back.
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let mut n = 0;
        while batch.room() > 0 {
            if !self.open && !self.open_block() {
                break;
            }
            if self.left == 0 {
                self.close_block();
                continue;
            }
            self.left -= 1;
            let Some(p) = self.header(self.next) else {
                // The chain leads out of the block: the rest of it cannot be found.
                self.counters.bad_headers += 1;
                self.stats.errors += 1;
                self.close_block();
                continue;
            };
            // `tp_next_offset` is counted from this header; a step shorter than a header
            // would revisit it, so it breaks the chain (checked when followed).
            let step = p.next_offset as usize;
            self.next = if step >= pkt::SIZE { self.next.saturating_add(step) } else { usize::MAX };
            match self.copy_out(pool, &p) {
                Ok(b) => {
                    let bytes = pool.len(b) as u64;
                    if let Err(b) = batch.push(b) {
                        // Cannot happen (the loop checks for room); never leak the buffer.
                        let _ = pool.free(b);
                        self.stats.errors += 1;
                    } else {
                        self.stats.packets += 1;
                        self.stats.bytes += bytes;
                        n += 1;
                    }
                }
                Err(Skip::Error) => self.stats.errors += 1,
                Err(Skip::NoBuffer) => self.stats.no_buffer += 1,
            }
            if self.left == 0 {
                self.close_block();
            }
        }
        n
    }

    fn rx_stats(&self) -> RxStats {
        self.stats
    }

    /// With [`TpacketRx::with_arrival`]: frames carry the ring's timestamp.
    #[inline]
    fn stamps_arrival(&self) -> bool {
        self.arrival.is_some()
    }

    /// The `block_status` of the block the queue waits for: the kernel stores it when it
    /// hands the block over.
    fn wake_address(&self) -> Option<WakeAddr> {
        self.w.cpu_address(self.block_base() + block::STATUS).map(WakeAddr::new)
    }
}

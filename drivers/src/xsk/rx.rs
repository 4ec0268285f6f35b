//! The receive side of an AF_XDP socket: fill ring + RX ring.

use cadence_core::buf::{BUF_SIZE, Batch, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, RxStats, WakeAddr};
use cadence_core::time::ClockMap;

use super::error::{Ring, XskError};
use super::owned::Owned;
use super::ring::{self, Consumer, Producer};
use super::{ADDR_ENTRY, RingWindow, XDP_PKT_CONTD, XskConfig, arrival, check_umem, desc};
use crate::hal::{Kick, KickError, Mmio};

/// Shortest frame the RX ring may report: an Ethernet header.
const MIN_FRAME: usize = 14;

/// Anomalies and doorbell calls of an [`XskRx`], beyond its [`RxStats`]. The four
/// descriptor counters (`bad_addr`, `not_owned`, `bad_len`, `fragments`) add up to
/// `RxStats::errors`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XskRxCounters {
    /// RX descriptors whose address is outside the pool (or overflows with the UMEM base).
    pub bad_addr: u64,
    /// RX descriptors naming a pool buffer this ring does not own (free, someone else's,
    /// or reported twice).
    pub not_owned: u64,
    /// RX descriptors with a length under 14 or past the end of their buffer.
    pub bad_len: u64,
    /// RX descriptors of multi-buffer frames dropped (`XDP_PKT_CONTD` and what follows it):
    /// without [`XskConfig::multi_buffer`], or past `buf::MAX_SEGMENTS` buffers.
    pub fragments: u64,
    /// Frames received over several descriptors (with [`XskConfig::multi_buffer`]).
    pub multi_buffer: u64,
    /// Kernel index values that were impossible (RX producer, fill consumer); clamped.
    pub bad_index: u64,
    /// `kick_rx` calls that succeeded.
    pub kicks: u64,
    /// `kick_rx` calls that answered [`KickError::Busy`].
    pub kick_busy: u64,
    /// `kick_rx` calls that failed otherwise ([`KickError::Gone`], [`KickError::Other`]).
    pub kick_errors: u64,
    /// Frames with an arrival stamp read ([`super::arrival`]; only with
    /// [`XskConfig::arrival`]).
    pub stamped: u64,
    /// Frames without one (the XDP program could not add metadata, or the frame sits too
    /// close to its chunk's start): counted from the poll instead.
    pub unstamped: u64,
}

/// The receive queue of an AF_XDP socket: posts pool buffers on the fill ring, takes
/// received frames off the RX ring (zero copy: the frame stays where the kernel wrote it).
///
/// The fill ring is kept topped up to its size in buffers the kernel holds (posted and
/// not yet received): the kernel never holds more than one fill ring's worth, whatever
/// the RX ring's size.
#[derive(Debug)]
pub struct XskRx<W, K> {
    fill: Producer<W>,
    rx: Consumer<W>,
    kick: K,
    umem_base: u64,
    /// Buffers the kernel holds for this queue (fill ring, its own queues, RX ring).
    posted: Owned,
    /// Dropping the rest of a multi-buffer frame.
    in_fragment: bool,
    /// [`XskConfig::multi_buffer`].
    multi_buffer: bool,
    /// With `multi_buffer`: the frame being received over several descriptors (its first
    /// buffer, the others appended), until its last.
    head: Option<PacketBuf>,
    /// [`XskConfig::always_kick_rx`].
    always_kick: bool,
    /// [`XskConfig::arrival`].
    arrival: Option<ClockMap>,
    stats: RxStats,
    counters: XskRxCounters,
}

impl<W: Mmio, K: Kick> XskRx<W, K> {
    /// Takes over the fill and RX rings of a freshly bound socket whose UMEM is `pool`'s
    /// memory (see the module docs for the UMEM convention).
    ///
    /// Checks: sizes are powers of two; `producer`, `consumer`, `flags` 4-byte aligned
    /// and `desc` 8-byte aligned; each window holds its words and `desc + size × entry`
    /// bytes of entries (8 for fill, 16 for RX); no word overlaps another or the entries;
    /// both rings are empty; the UMEM base lines up with the pool. Allocates a bit per
    /// pool buffer. Posts nothing: call [`XskRx::fill`].
    pub fn try_new(
        fill: RingWindow<W>,
        rx: RingWindow<W>,
        kick: K,
        pool: &Pool<'_>,
        config: &XskConfig,
    ) -> Result<Self, XskError> {
        ring::check(Ring::Fill, &fill, ADDR_ENTRY)?;
        ring::check(Ring::Rx, &rx, desc::SIZE)?;
        check_umem(pool, config)?;
        Ok(Self {
            fill: Producer::try_new(Ring::Fill, fill)?,
            rx: Consumer::try_new(Ring::Rx, rx)?,
            kick,
            umem_base: config.umem_base,
            posted: Owned::new(pool.capacity()),
            in_fragment: false,
            multi_buffer: config.multi_buffer,
            head: None,
            always_kick: config.always_kick_rx,
            arrival: config.arrival,
            stats: RxStats::default(),
            counters: XskRxCounters::default(),
        })
    }

    /// Buffers the kernel holds for this queue.
    pub fn posted(&self) -> usize {
        self.posted.count()
    }

    /// Buffers of a frame whose last descriptors the kernel has yet to publish (held by the
    /// queue until then).
    pub fn receiving(&self, pool: &Pool<'_>) -> usize {
        self.head.map_or(0, |h| pool.segments(h).count())
    }

    /// Fill ring entries.
    pub fn fill_size(&self) -> u32 {
        self.fill.size()
    }

    /// RX ring entries.
    pub fn rx_size(&self) -> u32 {
        self.rx.size()
    }

    /// Anomalies and doorbell calls so far.
    pub fn counters(&self) -> XskRxCounters {
        XskRxCounters { bad_index: self.fill.bad_index + self.rx.bad_index, ..self.counters }
    }

    /// Posts buffers from `pool` on the fill ring (up to its size) and wakes the kernel
    /// if it asks for it. Returns how many it posted. Counts an empty pool in `no_buffer`.
    pub fn fill(&mut self, pool: &mut Pool<'_>) -> usize {
        let n = self.refill(pool);
        if n > 0 {
            self.wake(true, false);
        }
        n as usize
    }

    /// Returns every buffer the kernel holds for this queue to `pool`, and how many.
    ///
    /// Only safe once the kernel has stopped using them: after the socket is closed (or
    /// at least unbound, and in zero-copy mode the device queue stopped). Before that the
    /// kernel may still write a frame into a buffer that is now free, or that someone
    /// else has taken. Touches no ring (the windows may already be unmapped), and
    /// consumes the queue, whose rings no longer match its bookkeeping.
    pub fn drain(mut self, pool: &mut Pool<'_>) -> usize {
        let base = pool.phys_base();
        let mut n = 0;
        if let Some(h) = self.head.take() {
            n += pool.segments(h).count();
            let _ = pool.free(h);
        }
        self.posted.take_all(|i| {
            // The buffer is in use (we hold it), so `handle_at` finds it; if someone freed
            // it behind our back it is not freed again.
            if let Some(b) = pool.handle_at(base + (i * BUF_SIZE) as u64) {
                let _ = pool.free(b);
                n += 1;
            }
        });
        n
    }

    /// Tops the fill ring up from `pool` (without waking the kernel). Returns how many
    /// entries it produced.
    fn refill(&mut self, pool: &mut Pool<'_>) -> u32 {
        let target = self.fill.size() as usize;
        let want = target.saturating_sub(self.posted.count()) as u32;
        if want == 0 {
            return 0;
        }
        let free = self.fill.free(want).min(want);
        let mut n = 0;
        while n < free {
            let Some(b) = pool.alloc() else {
                self.stats.no_buffer += 1;
                break;
            };
            // UMEM address of the chunk: the pool is at or above the UMEM base (checked at
            // creation); a buffer this ring cannot track (another pool) goes back.
            let addr = pool.phys(b).checked_sub(self.umem_base);
            let Some(addr) = addr.filter(|_| self.posted.insert(b)) else {
                let _ = pool.free(b);
                break;
            };
            self.fill.write_addr(n, addr);
            n += 1;
        }
        self.fill.submit(n);
        n
    }

    /// Rings `kick_rx` if the kernel set NEED_WAKEUP on the fill ring, when `reason`
    /// holds (new fill entries, or an empty RX ring: the kernel may have stopped for lack
    /// of fill entries just after our last look); and, with `always_kick_rx`, whenever
    /// the RX ring was `empty` (busy polling: the call is what runs the NAPI poll).
    fn wake(&mut self, reason: bool, empty: bool) {
        let asked = reason && self.fill.needs_wakeup();
        if !(asked || self.always_kick && empty) {
            return;
        }
        match self.kick.kick_rx() {
            Ok(()) => self.counters.kicks += 1,
            Err(KickError::Busy) => self.counters.kick_busy += 1,
            Err(_) => self.counters.kick_errors += 1,
        }
    }

    /// Checks one RX descriptor and takes its buffer back from the kernel. Returns the
    /// buffer with its frame set, or `Err(counted)`: the descriptor was bad or belonged to a
    /// dropped frame (`true`, counted by reason; a buffer we owned is freed), or it is a piece
    /// of a frame over several kept until its last (`false`, with
    /// [`XskConfig::multi_buffer`]; that frame comes back whole with its last piece).
    #[inline(always)]
    fn accept(&mut self, pool: &mut Pool<'_>, addr: u64, len: u32, options: u32) -> Result<PacketBuf, bool> {
        let contd = options & XDP_PKT_CONTD != 0;
        // A descriptor with CONTD says another follows; the one without it ends the frame.
        // (With multi-buffer, a frame being put together has `in_fragment` set too.)
        if self.in_fragment || contd {
            if self.multi_buffer {
                return self.accept_part(pool, addr, len, contd);
            }
            self.in_fragment = contd;
            let (b, _) = self.take(pool, addr).ok_or(true)?;
            self.counters.fragments += 1;
            let _ = pool.free(b);
            return Err(true);
        }
        let (b, off) = self.take(pool, addr).ok_or(true)?;
        let len = len as usize;
        if len < MIN_FRAME || len > BUF_SIZE - off {
            self.counters.bad_len += 1;
        } else if pool.set_frame(b, off, len).is_ok() {
            if let Some(map) = self.arrival {
                self.take_stamp(pool, b, off, &map);
            }
            return Ok(b);
        }
        let _ = pool.free(b);
        Err(true)
    }

    /// Takes back the buffer at UMEM address `addr` from the kernel, with the frame's offset
    /// in it; `None` (counted) for an address outside the pool or a buffer not ours.
    #[inline(always)]
    fn take(&mut self, pool: &Pool<'_>, addr: u64) -> Option<(PacketBuf, usize)> {
        let Some(phys) = addr.checked_add(self.umem_base) else {
            self.counters.bad_addr += 1;
            return None;
        };
        let Some(b) = pool.handle_at(phys) else {
            let in_pool = phys.checked_sub(pool.phys_base()).is_some_and(|o| o < (pool.capacity() * BUF_SIZE) as u64);
            if in_pool {
                self.counters.not_owned += 1;
            } else {
                self.counters.bad_addr += 1;
            }
            return None;
        };
        if !self.posted.remove(b) {
            self.counters.not_owned += 1;
            return None;
        }
        // `handle_at` put `phys` inside `b`'s buffer, so the offset is below BUF_SIZE.
        Some((b, (phys - pool.phys(b)) as usize))
    }

    /// One descriptor of a frame over several (`XDP_PKT_CONTD` on all but its last): appended
    /// to the frame being received; the whole frame with its last descriptor. A bad
    /// descriptor (address, length: the first at least an Ethernet header, none empty) or
    /// one buffer too many drops the frame, its buffers back in the pool, and the rest of
    /// its descriptors (counted in `fragments`).
    #[inline(never)]
    fn accept_part(&mut self, pool: &mut Pool<'_>, addr: u64, len: u32, contd: bool) -> Result<PacketBuf, bool> {
        let dropping = self.in_fragment && self.head.is_none();
        self.in_fragment = contd;
        let Some((b, off)) = self.take(pool, addr) else {
            self.drop_frame(pool);
            return Err(true);
        };
        let len = len as usize;
        let least = if self.head.is_none() { MIN_FRAME } else { 1 };
        let fits = !dropping && len >= least && len <= BUF_SIZE - off && pool.set_frame(b, off, len).is_ok();
        let linked = fits
            && match self.head {
                None => {
                    if let Some(map) = self.arrival {
                        self.take_stamp(pool, b, off, &map);
                    }
                    self.head = Some(b);
                    true
                }
                Some(h) => pool.append_segment(h, b).is_ok(),
            };
        if !linked {
            let _ = pool.free(b);
            if !dropping && !fits {
                self.counters.bad_len += 1;
            } else {
                self.counters.fragments += 1;
            }
            self.drop_frame(pool);
            return Err(true);
        }
        if contd {
            return Err(false);
        }
        let head = self.head.take().ok_or(true)?;
        self.counters.multi_buffer += 1;
        // `rx_burst` counts the first buffer's bytes; the rest here.
        self.stats.bytes += (pool.frame_len(head) - pool.len(head)) as u64;
        Ok(head)
    }

    /// Drops the frame being received over several descriptors (its buffers back in the
    /// pool); its remaining descriptors are dropped as they come.
    fn drop_frame(&mut self, pool: &mut Pool<'_>) {
        if let Some(h) = self.head.take() {
            let _ = pool.free(h);
        }
    }
}

impl<W: Mmio, K: Kick> XskRx<W, K> {
    /// Reads the arrival stamp in front of `b`'s frame at `off` ([`super::arrival`]), clears
    /// its magic, and stamps the buffer with it in worker ticks; counts a frame without one
    /// (its buffer keeps stamp 0, set when it was allocated for the fill ring).
    #[inline]
    fn take_stamp(&mut self, pool: &mut Pool<'_>, b: PacketBuf, off: usize, map: &ClockMap) {
        let Some(start) = off.checked_sub(arrival::META_LEN) else {
            self.counters.unstamped += 1;
            return;
        };
        let word = |raw: &[u8], at: usize| {
            raw.get(start + at..start + at + 8).and_then(|w| w.try_into().ok()).map(u64::from_ne_bytes)
        };
        let raw = pool.raw_mut(b);
        if word(raw, arrival::MAGIC) != Some(arrival::ARRIVAL_MAGIC) {
            self.counters.unstamped += 1;
            return;
        }
        let ns = word(raw, arrival::STAMP).unwrap_or(0);
        if let Some(m) = raw.get_mut(start + arrival::MAGIC..start + arrival::MAGIC + 8) {
            m.fill(0);
        }
        self.counters.stamped += 1;
        pool.set_stamp(b, map.ticks(ns));
    }
}

impl<W: Mmio, K: Kick> RxQueue for XskRx<W, K> {
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let room = batch.room() as u32;
        let avail = if room > 0 { self.rx.available(room) } else { 0 };
        let mut n = 0;
        for i in 0..avail {
            let (addr, len, options) = self.rx.read_desc(i);
            let b = match self.accept(pool, addr, len, options) {
                Ok(b) => b,
                Err(counted) => {
                    self.stats.errors += u64::from(counted);
                    continue;
                }
            };
            let bytes = pool.len(b) as u64;
            if let Err(b) = batch.push(b) {
                // Cannot happen (at most `room` entries); never leak the buffer anyway.
                let _ = pool.free(b);
                self.stats.errors += 1;
                continue;
            }
            self.stats.packets += 1;
            self.stats.bytes += bytes;
            n += 1;
        }
        // Every entry read, good or bad, goes back to the kernel.
        self.rx.release(avail);
        let produced = self.refill(pool);
        let empty = room > 0 && avail == 0;
        self.wake(produced > 0 || empty, empty);
        n
    }

    /// With [`XskConfig::arrival`]: each frame carries the XDP program's stamp.
    #[inline]
    fn stamps_arrival(&self) -> bool {
        self.arrival.is_some()
    }

    /// The RX ring's entries the kernel published and we have not read.
    fn pending(&self) -> Option<usize> {
        usize::try_from(self.rx.pending()).ok()
    }

    fn rx_stats(&self) -> RxStats {
        self.stats
    }

    /// The RX ring's producer word: the kernel stores it after writing descriptors.
    fn wake_address(&self) -> Option<WakeAddr> {
        self.rx.producer_address().map(WakeAddr::new)
    }
}

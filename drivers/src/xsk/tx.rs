//! The transmit side of an AF_XDP socket: TX ring + completion ring.

use cadence_core::buf::{BUF_SIZE, Batch, MAX_SEGMENTED_FRAME, MAX_SEGMENTS, PacketBuf, Pool};
use cadence_core::nic::{TxQueue, TxStats};

use super::error::{Ring, XskError};
use super::owned::Owned;
use super::ring::{self, Consumer, Producer};
use super::{ADDR_ENTRY, RingWindow, XDP_PKT_CONTD, XskConfig, check_umem, desc};
use crate::hal::{Kick, KickError, Mmio};

/// Anomalies and doorbell calls of an [`XskTx`], beyond its [`TxStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XskTxCounters {
    /// Completion entries naming no buffer on this TX ring (outside the pool, free,
    /// someone else's, or completed twice). Nothing is freed for them.
    pub bad_completions: u64,
    /// Frames handed to `tx_burst` while the same buffer was still on the TX ring (a
    /// caller bug): dropped from the batch, counted in `TxStats::errors`, not freed.
    pub resubmitted: u64,
    /// Kernel index values that were impossible (TX consumer, completion producer); clamped.
    pub bad_index: u64,
    /// `kick_tx` calls that succeeded.
    pub kicks: u64,
    /// `kick_tx` calls that answered [`KickError::Busy`] (copy mode: more frames left
    /// than one `sendto` sends; they go on the next kick).
    pub kick_busy: u64,
    /// `kick_tx` calls that failed otherwise.
    pub kick_errors: u64,
}

/// The transmit queue of an AF_XDP socket: puts frames on the TX ring where they lie
/// (zero copy), takes their buffers back from the completion ring.
#[derive(Debug)]
pub struct XskTx<W, K> {
    tx: Producer<W>,
    completion: Consumer<W>,
    kick: K,
    umem_base: u64,
    always_kick: bool,
    max_frame: usize,
    /// [`XskConfig::multi_buffer`].
    multi_buffer: bool,
    /// Buffers on the TX ring or in the kernel, not yet completed.
    on_ring: Owned,
    stats: TxStats,
    counters: XskTxCounters,
}

impl<W: Mmio, K: Kick> XskTx<W, K> {
    /// Takes over the TX and completion rings of a freshly bound socket whose UMEM is
    /// `pool`'s memory. Same checks as [`super::XskRx::try_new`] (entries: 16 bytes on
    /// the TX ring, 8 on the completion ring).
    pub fn try_new(
        tx: RingWindow<W>,
        completion: RingWindow<W>,
        kick: K,
        pool: &Pool<'_>,
        config: &XskConfig,
    ) -> Result<Self, XskError> {
        ring::check(Ring::Tx, &tx, desc::SIZE)?;
        ring::check(Ring::Completion, &completion, ADDR_ENTRY)?;
        check_umem(pool, config)?;
        Ok(Self {
            tx: Producer::try_new(Ring::Tx, tx)?,
            completion: Consumer::try_new(Ring::Completion, completion)?,
            kick,
            umem_base: config.umem_base,
            always_kick: config.always_kick_tx,
            max_frame: config.max_tx_frame.min(if config.multi_buffer { MAX_SEGMENTED_FRAME } else { BUF_SIZE }),
            multi_buffer: config.multi_buffer,
            on_ring: Owned::new(pool.capacity()),
            stats: TxStats::default(),
            counters: XskTxCounters::default(),
        })
    }

    /// TX ring entries.
    pub fn tx_size(&self) -> u32 {
        self.tx.size()
    }

    /// Completion ring entries.
    pub fn completion_size(&self) -> u32 {
        self.completion.size()
    }

    /// Anomalies and doorbell calls so far.
    pub fn counters(&self) -> XskTxCounters {
        XskTxCounters { bad_index: self.tx.bad_index + self.completion.bad_index, ..self.counters }
    }

    /// Returns every buffer still on the TX ring (completed or not) to `pool`, and how
    /// many. The same rule as [`super::XskRx::drain`]: only once the
    /// socket is closed, since the kernel may still read those frames.
    pub fn drain(mut self, pool: &mut Pool<'_>) -> usize {
        let mut n = self.reap(pool);
        let base = pool.phys_base();
        self.on_ring.take_all(|i| {
            if let Some(b) = pool.handle_at(base + (i * BUF_SIZE) as u64) {
                let _ = pool.free(b);
                n += 1;
            }
        });
        n
    }

    /// Takes completed buffers off the completion ring and frees them. Reads at most one
    /// ring's worth of entries, in up to two passes (the cached producer index may show
    /// only part of what is there).
    fn reap(&mut self, pool: &mut Pool<'_>) -> usize {
        let mut freed = 0;
        let mut budget = self.completion.size();
        for _ in 0..2 {
            if self.on_ring.count() == 0 || budget == 0 {
                break;
            }
            let n = self.completion.available(budget);
            if n == 0 {
                break;
            }
            for i in 0..n {
                let addr = self.completion.read_addr(i);
                // The kernel returns the address we put in the descriptor; any byte of
                // the buffer maps back to it.
                let b = addr.checked_add(self.umem_base).and_then(|phys| pool.handle_at(phys));
                match b {
                    Some(b) if self.on_ring.remove(b) => {
                        let _ = pool.free(b);
                        freed += 1;
                    }
                    _ => self.counters.bad_completions += 1,
                }
            }
            self.completion.release(n);
            budget -= n;
        }
        freed
    }

    /// Puts the frame over several buffers that starts in `b` on the TX ring from entry
    /// `at`, one descriptor a buffer, `XDP_PKT_CONTD` on all but the last, each buffer made a
    /// frame of its own (the completion ring returns them one by one). `Err(true)`: fewer
    /// than `free` entries would be needed (try later); `Err(false)`: it cannot be sent
    /// (multi-buffer off, longer than the longest frame, a buffer empty, already on the ring
    /// or outside the UMEM). Returns the entries written and the frame's bytes.
    fn put_segmented(&mut self, pool: &mut Pool<'_>, b: PacketBuf, at: u32, free: u32) -> Result<(u32, usize), bool> {
        let total = pool.frame_len(b);
        if !self.multi_buffer || total > self.max_frame {
            return Err(false);
        }
        let mut n = 0u32;
        for s in pool.segments(b) {
            let addr = (pool.phys(s) + pool.frame_offset(s) as u64).checked_sub(self.umem_base);
            if pool.len(s) == 0 || addr.is_none() || self.on_ring.contains(s) || !self.on_ring.fits(s) {
                return Err(false);
            }
            n += 1;
        }
        if n > free {
            return Err(true);
        }
        let mut parts = [b; MAX_SEGMENTS];
        let n = pool.unchain(b, &mut parts);
        for (k, &s) in parts.iter().take(n).enumerate() {
            let addr = (pool.phys(s) + pool.frame_offset(s) as u64).saturating_sub(self.umem_base);
            let options = if k + 1 < n { XDP_PKT_CONTD } else { 0 };
            // Each piece is at most a buffer, so its length fits the descriptor's u32.
            self.tx.write_desc_options(at + k as u32, addr, pool.len(s) as u32, options);
            self.on_ring.insert(s);
        }
        Ok((n as u32, total))
    }

    /// Rings `kick_tx` when entries wait on the TX ring and the kernel asked for a
    /// wake-up (or `always_kick_tx`).
    fn wake(&mut self) {
        if !self.always_kick && !self.tx.needs_wakeup() {
            return;
        }
        if self.tx.unconsumed() == 0 {
            return;
        }
        match self.kick.kick_tx() {
            Ok(()) => self.counters.kicks += 1,
            Err(KickError::Busy) => self.counters.kick_busy += 1,
            Err(_) => self.counters.kick_errors += 1,
        }
    }
}

impl<W: Mmio, K: Kick> TxQueue for XskTx<W, K> {
    /// Refused (freed, counted in `errors`, counted as taken): frames of length 0 or over
    /// [`XskConfig::max_tx_frame`], and buffers of another pool; frames over several buffers
    /// without [`XskConfig::multi_buffer`] (with it, they take an entry a buffer). A buffer still on the
    /// ring is dropped from the batch without being freed (counted in `errors` and
    /// [`XskTxCounters::resubmitted`]).
    ///
    /// The doorbell: `kick_tx` when the kernel set NEED_WAKEUP on the TX ring (or with
    /// `always_kick_tx`) and the TX ring holds entries the kernel has not consumed, which
    /// is the case after a burst that took frames.
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        self.reap(pool);
        let mut free = self.tx.free(batch.len() as u32);
        let mut queued = 0;
        let mut taken = 0;
        for &b in batch.as_slice() {
            let off = pool.frame_offset(b);
            let len = pool.len(b);
            if self.on_ring.contains(b) {
                self.counters.resubmitted += 1;
                self.stats.errors += 1;
                taken += 1;
                continue;
            }
            if pool.is_segmented(b) {
                match self.put_segmented(pool, b, queued, free) {
                    Ok((n, bytes)) => {
                        queued += n;
                        free -= n;
                        taken += 1;
                        self.stats.packets += 1;
                        self.stats.bytes += bytes as u64;
                    }
                    Err(true) => break,
                    Err(false) => {
                        let _ = pool.free(b);
                        self.stats.errors += 1;
                        taken += 1;
                    }
                }
                continue;
            }
            let addr = (pool.phys(b) + off as u64).checked_sub(self.umem_base);
            let addr = addr.filter(|_| len > 0 && len <= self.max_frame.min(BUF_SIZE) && self.on_ring.fits(b));
            let Some(addr) = addr else {
                let _ = pool.free(b);
                self.stats.errors += 1;
                taken += 1;
                continue;
            };
            // `free` was counted for the whole batch before any entry was written; asking
            // again now would not see the entries written but not yet submitted.
            if free == 0 {
                break;
            }
            // `len <= max_frame <= BUF_SIZE`, so it fits the descriptor's u32.
            self.tx.write_desc(queued, addr, len as u32);
            self.on_ring.insert(b);
            queued += 1;
            free -= 1;
            taken += 1;
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
        }
        self.tx.submit(queued);
        self.wake();
        self.stats.ring_full += (batch.len() - taken) as u64;
        batch.drain_front(taken);
        taken
    }

    /// Frees completed buffers, and kicks the kernel as `tx_burst` does (in copy mode the
    /// kernel sends only inside the system call, so a drain needs the kicks).
    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        let n = self.reap(pool);
        if self.on_ring.count() > 0 {
            self.wake();
        }
        n
    }

    fn in_flight(&self) -> usize {
        self.on_ring.count()
    }

    fn tx_stats(&self) -> TxStats {
        self.stats
    }
}

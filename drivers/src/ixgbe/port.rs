//! The brought-up 82599: queues, link, RSS and statistics. Built from the plain
//! `BringUp` that `init` returns.

use alloc::vec::Vec;
use core::cell::Cell;

use cadence_core::buf::Pool;
use cadence_core::nic::{Port, PortStats, RssError};
use cadence_core::time::Clock;

use super::init::{BringUp, bring_up, write_reta};
use super::link::{self, Link};
use super::regs::STATUS;
use super::stats::{HwStats, read_counters};
use super::{Config, InitError, MacType};
use crate::hal::{Dma, DmaAlloc, Mmio, PciFunction};
use crate::intel::rss::RetaShadow;
use crate::intel::{IntelRx, IntelTx, OwnedQueues, QueuePair, Queues};
use crate::reg::Regs;

/// An 82599/X5xx port driven by polling.
#[derive(Debug)]
pub struct Ixgbe<W, R> {
    bar: W,
    mac: [u8; 6],
    mac_type: MacType,
    rx: Vec<IntelRx<W, R>>,
    tx: Vec<IntelTx<W, R>>,
    /// Receive and transmit queues brought up (they stay counted after
    /// [`Ixgbe::take_queues`] moves the rings out).
    queues: (u16, u16),
    ring_size: u16,
    reta: RetaShadow,
    /// Accumulated device counters (the registers clear on read, `stats` takes `&self`).
    hw: Cell<HwStats>,
}

impl<W: Mmio, R: Dma> Ixgbe<W, R> {
    /// Brings up the 82599 function `pci` (82599 §4.6.3) with rings from `dma`, waits
    /// against `clock`, and fills each receive ring from `pool` (unless
    /// [`Config::fill_rx`] is off). On failure after the rings were filled, the device is
    /// reset and the buffers are returned to `pool`. With [`Config::link_timeout_ms`]
    /// set, a link that does not come up in time is [`InitError::LinkDown`].
    pub fn try_new<P, A, C>(
        pci: &P,
        dma: &mut A,
        clock: &C,
        pool: &mut Pool<'_>,
        config: &Config,
    ) -> Result<Self, InitError>
    where
        P: PciFunction<Window = W>,
        A: DmaAlloc<Region = R>,
        C: Clock + ?Sized,
    {
        let b: BringUp<W, R> = bring_up(pci, dma, clock, pool, config)?;
        let queues = (b.rx.len() as u16, b.tx.len() as u16);
        Ok(Self {
            bar: b.bar,
            mac: b.mac,
            mac_type: b.mac_type,
            rx: b.rx,
            tx: b.tx,
            queues,
            ring_size: config.rx_ring,
            reta: b.reta,
            hw: Cell::new(HwStats::default()),
        })
    }

    /// The MAC generation.
    pub fn mac_type(&self) -> MacType {
        self.mac_type
    }

    /// The link as LINKS reads now.
    pub fn link(&self) -> Link {
        link::read(&Regs::new(&self.bar))
    }

    /// The link speed in Mb/s, when the link is up (the Metronome's line rate).
    pub fn speed_mbps(&self) -> Option<u32> {
        let l = self.link();
        (l.up && l.mbps > 0).then_some(l.mbps)
    }

    /// Waits up to `timeout_ms` for the link (after a cable was plugged in); returns it.
    pub fn wait_link<C: Clock + ?Sized>(&self, clock: &C, timeout_ms: u32) -> Link {
        link::wait(&Regs::new(&self.bar), clock, timeout_ms)
    }

    /// Receive queue `i`.
    pub fn rx_queue(&mut self, i: usize) -> Option<&mut IntelRx<W, R>> {
        self.rx.get_mut(i)
    }

    /// Transmit queue `i`.
    pub fn tx_queue(&mut self, i: usize) -> Option<&mut IntelTx<W, R>> {
        self.tx.get_mut(i)
    }

    /// Queue pair `i` (receive, transmit).
    pub fn queue_pair(&mut self, i: usize) -> Option<QueuePair<'_, W, R>> {
        Some((self.rx.get_mut(i)?, self.tx.get_mut(i)?))
    }

    /// All receive and transmit queues, to hand out disjointly.
    pub fn queues_mut(&mut self) -> Queues<'_, W, R> {
        (&mut self.rx, &mut self.tx)
    }

    /// Moves every ring out (to hand each pair to a lane on its own), leaving the port
    /// with its registers: MAC, link, statistics and the live RSS table update keep
    /// working. The queue counts stay what was brought up.
    pub fn take_queues(&mut self) -> OwnedQueues<W, R> {
        (core::mem::take(&mut self.rx), core::mem::take(&mut self.tx))
    }

    /// Descriptors per receive ring.
    pub fn ring_size(&self) -> u16 {
        self.ring_size
    }

    /// The redirection table as the device holds it.
    pub fn rss_table(&self) -> &[u8] {
        self.reta.entries()
    }

    /// Device counters since bring-up (reads and clears the registers, keeps the sums).
    pub fn hw_stats(&self) -> HwStats {
        let now = read_counters(&Regs::new(&self.bar), self.queues.0);
        let total = self.hw.get().plus(now);
        self.hw.set(total);
        total
    }
}

impl<W: Mmio, R: Dma> Port for Ixgbe<W, R> {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn rx_queues(&self) -> usize {
        usize::from(self.queues.0)
    }

    fn tx_queues(&self) -> usize {
        usize::from(self.queues.1)
    }

    /// Live update of the redirection table (82599 §7.1.2.10): legal on a running port;
    /// only the registers whose four entries changed are written, each write switching
    /// its four buckets at once. `table` has 128 entries (512 on the X550), or fewer,
    /// a power of two, repeated over the table. Returns once the writes reached the
    /// device: a register read after them flushes posted writes (PCIe ordering), so
    /// the caller's switch point is behind it.
    ///
    /// Caveat: a moved bucket's flows may have frames in the old queue (received
    /// before the write) and in the new one (after it). A caller that needs per-flow
    /// order drains the old queue past the update before it serves the new queue.
    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError> {
        if self.queues.0 < 2 {
            return Err(RssError::Unsupported);
        }
        let bar = &self.bar;
        let written = self.reta.update(table, self.queues.0, |i, v| write_reta(bar, i, v))?;
        if written > 0 {
            let _ = Regs::new(bar).read(STATUS);
        }
        Ok(())
    }

    fn stats(&self) -> PortStats {
        let mut s = PortStats::of_queues(&self.rx, &self.tx);
        let hw = self.hw_stats();
        s.device_drops = hw.mpc + hw.qprdc;
        s
    }
}

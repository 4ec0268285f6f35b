//! The brought-up 82599: queues, link, RSS and statistics.

use alloc::vec::Vec;
use core::cell::Cell;

use cadence_core::buf::Pool;
use cadence_core::nic::{Port, PortStats, RssError};
use cadence_core::time::Clock;

use super::init::{bring_up, read_counters, reta_reg};
use super::regs::{LINKS, links};
use super::{Config, InitError, MacType};
use crate::hal::{Dma, DmaAlloc, Mmio, PciFunction};
use crate::intel::field::Regs;
use crate::intel::rss::RetaShadow;
use crate::intel::{IntelRx, IntelTx, QueuePair, Queues};

/// Device counters accumulated from the clear-on-read registers (§8.2.3.23).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HwStats {
    /// GPRC: good packets received. Errata (82599 spec update #26): it also counts
    /// packets dropped for lack of a descriptor, so it can exceed what queues saw.
    pub gprc: u64,
    /// GPTC: good packets transmitted.
    pub gptc: u64,
    /// GORC: good octets received (36-bit register).
    pub gorc: u64,
    /// GOTC: good octets transmitted (36-bit register).
    pub gotc: u64,
    /// MPC(0..7): packets missed for lack of packet-buffer room.
    pub mpc: u64,
    /// CRCERRS: frames with a bad CRC.
    pub crcerrs: u64,
    /// QPRDC: frames dropped by DROP_EN because their queue had no descriptor.
    pub qprdc: u64,
}

impl HwStats {
    fn add(self, o: HwStats) -> HwStats {
        HwStats {
            gprc: self.gprc + o.gprc,
            gptc: self.gptc + o.gptc,
            gorc: self.gorc + o.gorc,
            gotc: self.gotc + o.gotc,
            mpc: self.mpc + o.mpc,
            crcerrs: self.crcerrs + o.crcerrs,
            qprdc: self.qprdc + o.qprdc,
        }
    }
}

/// Link state from LINKS (§8.2.3.22.20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Link {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (0 when down or unknown).
    pub mbps: u32,
}

/// An 82599/X5xx port driven by polling.
#[derive(Debug)]
pub struct Ixgbe<W, R> {
    bar: W,
    mac: [u8; 6],
    mac_type: MacType,
    rx: Vec<IntelRx<W, R>>,
    tx: Vec<IntelTx<W, R>>,
    reta: RetaShadow,
    /// Accumulated device counters (the registers clear on read, `stats` takes `&self`).
    hw: Cell<HwStats>,
}

impl<W: Mmio, R: Dma> Ixgbe<W, R> {
    /// Brings up the 82599 function `pci` (82599 §4.6.3) with rings from `dma`, waits
    /// against `clock`, and fills each receive ring from `pool`. On failure after the
    /// rings were filled, the device is reset and the buffers are returned to `pool`.
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
        bring_up(pci, dma, clock, pool, config)
    }

    pub(super) fn new(
        bar: W,
        mac: [u8; 6],
        mac_type: MacType,
        rx: Vec<IntelRx<W, R>>,
        tx: Vec<IntelTx<W, R>>,
        reta: RetaShadow,
    ) -> Self {
        Self { bar, mac, mac_type, rx, tx, reta, hw: Cell::new(HwStats::default()) }
    }

    /// The MAC generation.
    pub fn mac_type(&self) -> MacType {
        self.mac_type
    }

    /// The link as LINKS reads now.
    pub fn link(&self) -> Link {
        let v = Regs::new(&self.bar).read(LINKS);
        let up = links::UP.is_set(v);
        let mbps = match (up, links::SPEED.get(v)) {
            (false, _) => 0,
            (true, 1) => 100,
            (true, 2) => 1_000,
            (true, 3) => 10_000,
            _ => 0,
        };
        Link { up, mbps }
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

    /// The redirection table as the device holds it.
    pub fn rss_table(&self) -> &[u8] {
        self.reta.entries()
    }

    /// Device counters since bring-up (reads and clears the registers, keeps the sums).
    pub fn hw_stats(&self) -> HwStats {
        let now = read_counters(&Regs::new(&self.bar), self.rx.len() as u16);
        let total = self.hw.get().add(now);
        self.hw.set(total);
        total
    }
}

impl<W: Mmio, R: Dma> Port for Ixgbe<W, R> {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn rx_queues(&self) -> usize {
        self.rx.len()
    }

    fn tx_queues(&self) -> usize {
        self.tx.len()
    }

    /// Live update of the redirection table (82599 §7.1.2.10): legal on a running port;
    /// only the registers whose four entries changed are written, each write switching
    /// its four buckets at once. `table` has 128 entries (512 on the X550), or fewer,
    /// a power of two, repeated over the table.
    ///
    /// Caveat: a moved bucket's flows may have frames in the old queue (received
    /// before the write) and in the new one (after it). A caller that needs per-flow
    /// order drains the old queue past the update before it serves the new queue.
    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError> {
        if self.rx.len() < 2 {
            return Err(RssError::Unsupported);
        }
        self.reta.update(&self.bar, table, self.rx.len() as u16, reta_reg).map(|_| ())
    }

    fn stats(&self) -> PortStats {
        let mut s = PortStats::of_queues(&self.rx, &self.tx);
        let hw = self.hw_stats();
        s.device_drops = hw.mpc + hw.qprdc;
        s
    }
}

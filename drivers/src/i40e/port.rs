//! The brought-up XL710 port: queues, link, RSS lookup table, statistics. Built from the
//! plain `BringUp` that `init` returns.

use alloc::vec::Vec;
use core::cell::Cell;

use cadence_core::buf::Pool;
use cadence_core::nic::{Port, PortStats, RssError};
use cadence_core::time::Clock;

use super::aq::{AdminQueue, AqError};
use super::cmd::{Commands, LinkStatus, Version, opcode};
use super::desc::{I40eRx, I40eTx};
use super::hmc::Hmc;
use super::init::{BringUp, bring_up, write_hlut};
use super::regs::GLGEN_RSTAT;
use super::stats::{self, HwStats, Raw};
use super::{Config, InitError};
use crate::hal::{Dma, DmaAlloc, Mmio, PciFunction};
use crate::intel::rss::RetaShadow;
use crate::intel::{IntelRx, IntelTx, OwnedQueues, QueuePair};
use crate::reg::Regs;

/// An XL710 receive queue.
pub type I40eRxQueue<W, R> = IntelRx<W, R, I40eRx>;
/// An XL710 transmit queue.
pub type I40eTxQueue<W, R> = IntelTx<W, R, I40eTx>;

/// An XL710/X710 PF port driven by polling.
#[derive(Debug)]
pub struct I40e<W, R> {
    bar: W,
    aq: AdminQueue<R>,
    /// Holds the context backing memory the device reads (never freed while it runs).
    _hmc: Hmc<R>,
    mac: [u8; 6],
    pf: u8,
    port: u8,
    version: Version,
    vsi_seid: u16,
    link: LinkStatus,
    rx: Vec<I40eRxQueue<W, R>>,
    tx: Vec<I40eTxQueue<W, R>>,
    queues: u16,
    ring_size: u16,
    lut: RetaShadow,
    /// Statistics: the last raw counters and the totals (`stats` takes `&self`).
    raw: Cell<Raw>,
    hw: Cell<HwStats>,
    /// Link events seen on the admin receive queue.
    link_events: u64,
}

impl<W: Mmio, R: Dma> I40e<W, R> {
    /// Brings up the XL710 function `pci` (see the module docs) with rings from `dma`,
    /// waits against `clock`, and fills each receive ring from `pool` (unless
    /// [`Config::fill_rx`] is off). On failure the PF is reset and the buffers are
    /// returned to `pool`.
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
        let raw = stats::read(&Regs::new(&b.bar), usize::from(b.port));
        Ok(Self {
            bar: b.bar,
            aq: b.aq,
            _hmc: b.hmc,
            mac: b.mac,
            pf: b.pf,
            port: b.port,
            version: b.version,
            vsi_seid: b.vsi.seid,
            link: b.link,
            rx: b.rx,
            tx: b.tx,
            queues: config.queues,
            ring_size: config.ring,
            lut: b.lut,
            raw: Cell::new(raw),
            hw: Cell::new(HwStats::default()),
            link_events: 0,
        })
    }

    /// The firmware's version and admin API.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The PF's index and its port.
    pub fn pf_port(&self) -> (u8, u8) {
        (self.pf, self.port)
    }

    /// The SEID of the PF's VSI.
    pub fn vsi_seid(&self) -> u16 {
        self.vsi_seid
    }

    /// The link as last reported (at bring-up, or by an event [`I40e::poll_events`]
    /// read).
    pub fn link(&self) -> LinkStatus {
        self.link
    }

    /// The link speed in Mb/s, when the link is up (the Metronome's line rate).
    pub fn speed_mbps(&self) -> Option<u32> {
        (self.link.up && self.link.mbps > 0).then_some(self.link.mbps)
    }

    /// Asks the firmware for the link now (Get Link Status).
    pub fn refresh_link<C: Clock + ?Sized>(&mut self, clock: &C) -> Result<LinkStatus, AqError> {
        let l = Commands { aq: &mut self.aq, bar: &self.bar, clock }.link_status()?;
        self.link = l;
        Ok(l)
    }

    /// Reads the firmware's events (bounded: at most one ring's worth); link-status
    /// events update [`I40e::link`]. Returns the link after them.
    pub fn poll_events(&mut self) -> LinkStatus {
        let mut data = [0u8; 64];
        for _ in 0..super::aq::RING_LEN {
            let Some(ev) = self.aq.next_event(&self.bar, &mut data) else { break };
            if ev.opcode == opcode::GET_LINK_STATUS {
                self.link = LinkStatus::from_response(&ev);
                self.link_events += 1;
            }
        }
        self.link
    }

    /// Link events seen so far.
    pub fn link_events(&self) -> u64 {
        self.link_events
    }

    /// Whether a global reset is pending (the port then needs a new bring-up).
    pub fn reset_pending(&self) -> bool {
        Regs::new(&self.bar).read(GLGEN_RSTAT).get(GLGEN_RSTAT::DEVSTATE) != 0
    }

    /// Receive queue `i`.
    pub fn rx_queue(&mut self, i: usize) -> Option<&mut I40eRxQueue<W, R>> {
        self.rx.get_mut(i)
    }

    /// Transmit queue `i`.
    pub fn tx_queue(&mut self, i: usize) -> Option<&mut I40eTxQueue<W, R>> {
        self.tx.get_mut(i)
    }

    /// Queue pair `i` (receive, transmit).
    pub fn queue_pair(&mut self, i: usize) -> Option<QueuePair<'_, W, R, I40eRx, I40eTx>> {
        Some((self.rx.get_mut(i)?, self.tx.get_mut(i)?))
    }

    /// Moves every ring out (to hand each pair to a lane on its own), leaving the port
    /// with its registers and admin queue: MAC, link, statistics and the live lookup
    /// table update keep working.
    pub fn take_queues(&mut self) -> OwnedQueues<W, R, I40eRx, I40eTx> {
        (core::mem::take(&mut self.rx), core::mem::take(&mut self.tx))
    }

    /// Descriptors per ring.
    pub fn ring_size(&self) -> u16 {
        self.ring_size
    }

    /// The lookup table as the device holds it (VSI queue per bucket).
    pub fn rss_table(&self) -> &[u8] {
        self.lut.entries()
    }

    /// Port counters since bring-up (48-bit registers, wrap-aware).
    pub fn hw_stats(&self) -> HwStats {
        let now = stats::read(&Regs::new(&self.bar), usize::from(self.port));
        let total = self.hw.get().advance(&self.raw.get(), &now);
        self.raw.set(now);
        self.hw.set(total);
        total
    }
}

impl<W: Mmio, R: Dma> Port for I40e<W, R> {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn rx_queues(&self) -> usize {
        usize::from(self.queues)
    }

    fn tx_queues(&self) -> usize {
        usize::from(self.queues)
    }

    /// Live update of the lookup table: only PFQF_HLUT registers whose four entries
    /// changed are written (each switches its four buckets at once), then a register
    /// read flushes the posted writes, so the caller's switch point is behind it.
    /// `table` has 512 entries or fewer, a power of two, repeated over the table.
    /// The same caveat as the 82599's: drain the old queue of a moved bucket before
    /// serving the new one when per-flow order matters.
    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError> {
        if self.queues < 2 {
            return Err(RssError::Unsupported);
        }
        let bar = &self.bar;
        let written = self.lut.update(table, self.queues, |i, v| write_hlut(bar, i, v))?;
        if written > 0 {
            let _ = Regs::new(bar).read(GLGEN_RSTAT);
        }
        Ok(())
    }

    fn stats(&self) -> PortStats {
        let mut s = PortStats::of_queues(&self.rx, &self.tx);
        s.device_drops = self.hw_stats().rx_dropped;
        s
    }
}

//! The Intel 82576 ("igb") as QEMU (≥ 8.0, `-device igb`, PCI 8086:10c9) emulates it,
//! polled, on the shared ring engine of [`crate::intel`] (82576 datasheet rev. 2.x,
//! QEMU `hw/net/igb_core.c`).
//!
//! The 82576 is QEMU's closest stand-in for the 82599: the same advanced descriptors
//! and RSS registers, with the e1000 register map for the rest — queue blocks at
//! 0x0C000/0x0E000 + 0x40n (SRRCTL at +0x0C), global enables RCTL.EN and TCTL.EN,
//! EIMC at 0x01528, reset by CTRL.RST. QEMU-specific facts this driver relies on:
//! RSS is on only when MRQC.MRQE = 010b *and* RXCSUM.PCSD = 1; frames steered to a
//! queue without RXDCTL.ENABLE are dropped; RSS runs inside the device model, so 16
//! queues work over a single-queue netdev.
//!
//! Global enables are RCTL.EN / TCTL.EN; the link comes up after an auto-negotiation
//! restart through MDIC. Exercised end to end in QEMU: `tests/tests/igb.rs`, and
//! `tests/tests/igb_rss.rs` (16 RSS queues spread the flows; a live RSS_MOVE control frame
//! moves one queue's buckets mid-stream with no loss or reordering, RSS_RESTORE undoes it;
//! NetBlaze's server mapper releasing and recruiting queues). Control frames are
//! authenticated (`cadence_core::control`; `tests/tests/control_auth.rs`).
//!
//! Not done: the EEPROM auto-read wait (QEMU loads instantly; real 82576 silicon needs
//! EECD.AUTO_RD polled), PHY setup beyond restarting auto-negotiation, VMDq/SR-IOV.

pub mod regs;

use alloc::vec::Vec;
use core::fmt;

use cadence_core::buf::Pool;
use cadence_core::nic::{Port, PortStats, RssError};
use cadence_core::rss::DEFAULT_KEY;
use cadence_core::time::{Clock, poll_until};
use embedded_hal::delay::DelayNs;

use crate::hal::{BarError, ClockDelay, Dma, DmaAlloc, DmaError, Mmio, PciFunction, pci};
use crate::intel::queue::{self, RDT, RxBlock, TDT, TxBlock};
use crate::intel::rss::{self, RXCSUM, RetaShadow};
use crate::intel::{
    IntelRx, IntelTx, MAX_JUMBO_FRAME, MAX_RX_FRAME, OwnedQueues, QueueMap, QueuePair, Queues, rx_buf_kib,
    valid_ring_size,
};
use crate::reg::{Block, Field, Place, Regs};
use regs::*;

/// Intel's PCI vendor ID.
pub const VENDOR_ID: u16 = 0x8086;
/// The 82576 (copper), what QEMU's `igb` presents.
pub const DEVICE_ID: u16 = 0x10C9;
/// Queues of each direction (82576 §7.1.1: 16).
pub const MAX_QUEUES: u16 = 16;
/// Redirection-table entries (82576 §7.1.1.7).
pub const RETA_ENTRIES: usize = 128;

/// §8.2.1: CTRL.RST settles within 1 ms; no register access before.
const RESET_SETTLE_MS: u32 = 1;
/// Bound on CTRL.RST self-clearing.
const RESET_MS: u64 = 100;
/// RXDCTL/TXDCTL.ENABLE read-back (Linux igb: 10 ms).
const QUEUE_ENABLE_MS: u64 = 10;
/// MDIC.READY after a PHY register write (Linux igb: 1920 × 50 µs ≈ 100 ms).
const MDIC_MS: u64 = 100;
/// Link-up wait after CTRL.SLU: QEMU completes its auto-negotiation on a timer; not
/// an error when it runs out (the link may come up later, RX waits for it).
const LINK_MS: u64 = 3000;

/// Where the 82576 keeps its queue registers.
#[derive(Debug, Clone, Copy)]
pub struct IgbQueues;

impl QueueMap for IgbQueues {
    const QUEUES: u16 = MAX_QUEUES;
    type Srrctl = SRRCTL;
    const SRRCTL: SRRCTL = SRRCTL;
    const SRRCTL_BSIZEPACKET: Field<SRRCTL> = SRRCTL::BSIZEPACKET;
    const SRRCTL_BSIZEHEADER: Field<SRRCTL> = SRRCTL::BSIZEHEADER;
    const SRRCTL_DESCTYPE: Field<SRRCTL> = SRRCTL::DESCTYPE;
    /// SRRCTL.DROP_EN is bit 31 on the 82576.
    const SRRCTL_DROP_EN: Field<SRRCTL> = SRRCTL::DROP_EN;

    /// RDBAL(n) at 0x0C000 + 0x40n (0x02800 + 0x100n is a legacy alias for n < 4).
    fn rx_block(q: u16) -> Option<Block<RxBlock>> {
        RX_BLOCKS.at(usize::from(q))
    }

    /// TDBAL(n) at 0x0E000 + 0x40n.
    fn tx_block(q: u16) -> Option<Block<TxBlock>> {
        TX_BLOCKS.at(usize::from(q))
    }
}

/// Bring-up knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Config {
    /// Receive queues, 1..=16. Default 1.
    pub rx_queues: u16,
    /// Transmit queues, 1..=16. Default 1.
    pub tx_queues: u16,
    /// Descriptors per ring (16..=8192, a multiple of 8). Default 256.
    pub ring: u16,
    /// The Toeplitz key. Default `cadence_core::rss::DEFAULT_KEY`.
    pub rss_key: [u8; 40],
    /// Fill the receive rings from the bring-up's pool. Default on; off when each
    /// queue gets buffers from its own pool later ([`IntelRx::fill`]).
    pub fill_rx: bool,
    /// The longest frame received, FCS aside. Above [`MAX_RX_FRAME`] (up to
    /// [`MAX_FRAME`]): RCTL.LPE with RLPML, 1 KiB receive buffers, frames over several
    /// descriptors. Default [`MAX_RX_FRAME`].
    pub max_frame: usize,
}

/// The longest frame the 82576 receives, CRC aside: Intel's igb documentation gives 9 234 bytes
/// with it (an MTU of 9 216). Within what the ring takes (`intel::MAX_JUMBO_FRAME`).
pub const MAX_FRAME: usize = 9234 - 4;
const _: () = assert!(MAX_FRAME <= MAX_JUMBO_FRAME);

impl Default for Config {
    fn default() -> Self {
        Self { rx_queues: 1, tx_queues: 1, ring: 256, rss_key: DEFAULT_KEY, fill_rx: true, max_frame: MAX_RX_FRAME }
    }
}

impl Config {
    /// This configuration receiving frames of up to `bytes` ([`Config::max_frame`]).
    pub fn with_max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes;
        self
    }

    /// This configuration with `rx` receive and `tx` transmit queues.
    pub fn with_queues(mut self, rx: u16, tx: u16) -> Self {
        self.rx_queues = rx;
        self.tx_queues = tx;
        self
    }

    /// This configuration with rings of `n` descriptors.
    pub fn with_ring(mut self, n: u16) -> Self {
        self.ring = n;
        self
    }

    /// This configuration with the receive rings filled at bring-up or not.
    pub fn with_fill_rx(mut self, fill: bool) -> Self {
        self.fill_rx = fill;
        self
    }
}

/// Why bring-up failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitError {
    /// The function is not an 82576.
    NotIgb {
        /// Its vendor ID.
        vendor: u16,
        /// Its device ID.
        device: u16,
    },
    /// Queue count or ring size out of range.
    BadConfig,
    /// `Config::max_frame` is longer than the 82576 receives ([`MAX_FRAME`]).
    MaxFrame(usize),
    /// BAR 0 could not be mapped.
    MapBar(BarError),
    /// CTRL.RST did not clear.
    ResetTimeout,
    /// The PHY did not accept the auto-negotiation restart (MDIC).
    PhyTimeout,
    /// Descriptor ring memory could not be had.
    RingAlloc(DmaError),
    /// RXDCTL(n).ENABLE did not read back set.
    RxEnableTimeout(u16),
    /// TXDCTL(n).ENABLE did not read back set.
    TxEnableTimeout(u16),
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::NotIgb { vendor, device } => write!(f, "{vendor:04x}:{device:04x} is not an 82576"),
            InitError::BadConfig => f.write_str("queue count or ring size out of range"),
            InitError::MaxFrame(n) => write!(f, "max_frame {n}: the 82576 receives frames up to {MAX_FRAME} bytes"),
            InitError::MapBar(e) => write!(f, "BAR 0: {e}"),
            InitError::ResetTimeout => f.write_str("CTRL.RST did not clear"),
            InitError::PhyTimeout => f.write_str("PHY auto-negotiation restart failed (MDIC)"),
            InitError::RingAlloc(e) => write!(f, "descriptor rings: {e}"),
            InitError::RxEnableTimeout(q) => write!(f, "RXDCTL({q}).ENABLE did not read back"),
            InitError::TxEnableTimeout(q) => write!(f, "TXDCTL({q}).ENABLE did not read back"),
        }
    }
}

/// An 82576 port driven by polling.
#[derive(Debug)]
pub struct Igb<W, R> {
    bar: W,
    mac: [u8; 6],
    rx: Vec<IntelRx<W, R>>,
    tx: Vec<IntelTx<W, R>>,
    reta: RetaShadow,
    drops: core::cell::Cell<u64>,
    /// Receive and transmit queues brought up (they stay counted after
    /// [`Igb::take_queues`] moves the rings out).
    queues: (u16, u16),
}

fn mask_interrupts<W: Mmio>(r: &Regs<'_, W>) {
    r.write(IMC, IMC::ALL.value(u64::MAX));
    r.write(EIMC, EIMC::ALL.value(u64::MAX));
}

impl<W: Mmio, R: Dma> Igb<W, R> {
    /// Brings up the 82576 function `pci` with rings from `dma`, waits against `clock`,
    /// and fills each receive ring from `pool`. On failure after the rings were
    /// filled, the device is reset and the buffers go back to `pool`.
    pub fn try_new<P, A, C>(
        pci: &P,
        dma: &mut A,
        clock: &C,
        pool: &mut Pool<'_>,
        cfg: &Config,
    ) -> Result<Self, InitError>
    where
        P: PciFunction<Window = W>,
        A: DmaAlloc<Region = R>,
        C: Clock + ?Sized,
    {
        let id = pci.config_read32(pci::ID);
        let (vendor, device) = (id as u16, (id >> 16) as u16);
        if vendor != VENDOR_ID || device != DEVICE_ID {
            return Err(InitError::NotIgb { vendor, device });
        }
        if !(1..=MAX_QUEUES).contains(&cfg.rx_queues)
            || !(1..=MAX_QUEUES).contains(&cfg.tx_queues)
            || !valid_ring_size(cfg.ring)
        {
            return Err(InitError::BadConfig);
        }
        if cfg.max_frame > MAX_FRAME {
            return Err(InitError::MaxFrame(cfg.max_frame));
        }
        let cmd = pci.config_read32(pci::COMMAND) & 0xFFFF;
        pci.config_write32(pci::COMMAND, cmd | pci::CMD_MEMORY | pci::CMD_BUS_MASTER | pci::CMD_INTX_DISABLE);
        let bar = pci.map_bar(0, 0, BAR_LEN).map_err(InitError::MapBar)?;
        let r = Regs::new(&bar);
        let ms = |n: u64| clock.rate().ticks_from_ms(n);
        let mut delay = ClockDelay::new(clock);

        // §4.5.1: interrupts off, global reset, interrupts off again.
        mask_interrupts(&r);
        r.modify(CTRL, |v| v.set(CTRL::RST));
        delay.delay_ms(RESET_SETTLE_MS);
        poll_until(clock, ms(RESET_MS), || !r.is_set(CTRL, CTRL::RST)).map_err(|_| InitError::ResetTimeout)?;
        mask_interrupts(&r);
        r.modify(CTRL, |v| v.set(CTRL::SLU));
        // After a reset the link stays down until auto-negotiation runs (QEMU: a 500 ms
        // timer started by a PHY BMCR write with ANRESTART), so restart it through MDIC.
        let an = bmcr::BMCR::AUTOEN.value(1).set(bmcr::BMCR::ANRESTART).set(bmcr::BMCR::SPEED1000).set(bmcr::BMCR::FD);
        r.write(
            MDIC,
            MDIC::DATA
                .value(an.bits())
                .with(MDIC::REGADD, bmcr::REG)
                .with(MDIC::PHYADD, 1)
                .with(MDIC::OP, MDIC_OP_WRITE),
        );
        poll_until(clock, ms(MDIC_MS), || r.is_set(MDIC, MDIC::READY)).map_err(|_| InitError::PhyTimeout)?;
        if r.is_set(MDIC, MDIC::ERROR) {
            return Err(InitError::PhyTimeout);
        }
        r.modify(CTRL_EXT, |v| v.set(CTRL_EXT::DRV_LOAD));
        let (ral, rah) = (r.read(RAL0).raw(), r.read(RAH0).get(RAH0::ADDR) as u16);
        let [m0, m1, m2, m3] = ral.to_le_bytes();
        let [m4, m5] = rah.to_le_bytes();
        let mac = [m0, m1, m2, m3, m4, m5];
        let mut dev = Self {
            bar,
            mac,
            rx: Vec::new(),
            tx: Vec::new(),
            reta: RetaShadow::round_robin(0, 1),
            drops: 0.into(),
            queues: (cfg.rx_queues, cfg.tx_queues),
        };
        let _ = dev.read_drops();

        // §4.5.9 receive: RCTL.EN off while configuring; RSS (key, table, PCSD, MRQC).
        let r = Regs::new(&dev.bar);
        r.modify(RCTL, |v| v.clear(RCTL::EN));
        rss::write_key(&dev.bar, &cfg.rss_key);
        dev.reta = RetaShadow::round_robin(RETA_ENTRIES, cfg.rx_queues);
        dev.reta.write_all(|i, v| rss::write_reta(&dev.bar, i, v));
        r.modify(RXCSUM, |v| v.set(RXCSUM::PCSD));
        r.modify(MRQC, |v| {
            v.with(MRQC::MRQE, 0b010)
                .set(MRQC::IPV4_TCP)
                .set(MRQC::IPV4)
                .set(MRQC::IPV6_EX_TCP)
                .set(MRQC::IPV6)
                .set(MRQC::IPV6_TCP)
                .set(MRQC::IPV4_UDP)
                .set(MRQC::IPV6_UDP)
        });

        if let Err(e) = dev.init_queues(pci, dma, clock, pool, cfg) {
            Regs::new(&dev.bar).modify(CTRL, |v| v.set(CTRL::RST));
            delay.delay_ms(RESET_SETTLE_MS);
            for q in &mut dev.rx {
                q.release(pool);
            }
            return Err(e);
        }
        // Link: not fatal when slow (RX starts when it comes up).
        let _ = poll_until(clock, ms(LINK_MS), || dev.link_up());
        Ok(dev)
    }

    fn init_queues<P, A, C>(
        &mut self,
        pci: &P,
        dma: &mut A,
        clock: &C,
        pool: &mut Pool<'_>,
        cfg: &Config,
    ) -> Result<(), InitError>
    where
        P: PciFunction<Window = W>,
        A: DmaAlloc<Region = R>,
        C: Clock + ?Sized,
    {
        let bar = &self.bar;
        let r = Regs::new(bar);
        let timeout = clock.rate().ticks_from_ms(QUEUE_ENABLE_MS);
        for q in 0..cfg.rx_queues {
            let block = IgbQueues::rx_block(q).ok_or(InitError::BadConfig)?;
            let tail = pci.map_bar(0, block.reg(RDT).offset() as u64, 4).map_err(InitError::MapBar)?;
            let mut ring = IntelRx::try_new(dma, cfg.ring, tail, q).map_err(InitError::RingAlloc)?;
            let kib = rx_buf_kib(cfg.max_frame);
            ring.set_max_frame(cfg.max_frame, kib as usize * 1024);
            queue::program_rx::<IgbQueues, W>(bar, block, ring.ring_phys(), ring.ring_bytes(), kib);
            if cfg.fill_rx {
                ring.refill(pool);
            }
            self.rx.push(ring);
            queue::enable_rx(bar, clock, block, timeout).map_err(|_| InitError::RxEnableTimeout(q))?;
            // The tail only after ENABLE read back as 1 (as on the 82599).
            if let Some(ring) = self.rx.last_mut() {
                ring.publish();
            }
        }
        // Receive on: promiscuous, broadcast, CRC stripped, legacy DTYP 00b (SRRCTL
        // selects advanced descriptors), long packets only for jumbo frames (RLPML counts
        // the CRC, as Linux's igb_set_rlpml).
        let jumbo = cfg.max_frame > MAX_RX_FRAME;
        if jumbo {
            r.write(RLPML, RLPML::RLPML.value((cfg.max_frame + 4) as u64));
        }
        r.modify(RCTL, |v| {
            v.with(RCTL::DTYP, 0)
                .set_if(RCTL::LPE, jumbo)
                .set(RCTL::EN)
                .set(RCTL::UPE)
                .set(RCTL::MPE)
                .set(RCTL::BAM)
                .set(RCTL::SECRC)
        });
        for q in 0..cfg.tx_queues {
            let block = IgbQueues::tx_block(q).ok_or(InitError::BadConfig)?;
            let tail = pci.map_bar(0, block.reg(TDT).offset() as u64, 4).map_err(InitError::MapBar)?;
            let ring = IntelTx::try_new(dma, cfg.ring, tail, q).map_err(InitError::RingAlloc)?;
            queue::program_tx(bar, block, ring.ring_phys(), ring.ring_bytes(), 8, 1);
            self.tx.push(ring);
            queue::enable_tx(bar, clock, block, timeout).map_err(|_| InitError::TxEnableTimeout(q))?;
        }
        r.modify(TCTL, |v| v.set(TCTL::EN).set(TCTL::PSP));
        Ok(())
    }

    /// Reads and clears the drop counters (MPC, RQDPC), returning the running total.
    fn read_drops(&self) -> u64 {
        let r = Regs::new(&self.bar);
        let now =
            r.read(MPC).bits() + RQDPC.iter().take(usize::from(self.queues.0)).map(|q| r.read(q).bits()).sum::<u64>();
        let total = self.drops.get() + now;
        self.drops.set(total);
        total
    }

    /// Whether STATUS reports the link up.
    pub fn link_up(&self) -> bool {
        Regs::new(&self.bar).is_set(STATUS, STATUS::LU)
    }

    /// The link speed in Mb/s from STATUS.SPEED (§8.2.2), when the link is up.
    pub fn speed_mbps(&self) -> Option<u32> {
        let status = Regs::new(&self.bar).read(STATUS);
        status.is_set(STATUS::LU).then(|| match status.get(STATUS::SPEED) {
            0 => 10,
            1 => 100,
            _ => 1000,
        })
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

    /// All receive and transmit queues.
    pub fn queues_mut(&mut self) -> Queues<'_, W, R> {
        (&mut self.rx, &mut self.tx)
    }

    /// Moves every ring out (to hand each pair to a lane on its own), leaving the port
    /// with its registers: MAC, statistics and the live RSS table update keep working.
    pub fn take_queues(&mut self) -> OwnedQueues<W, R> {
        (core::mem::take(&mut self.rx), core::mem::take(&mut self.tx))
    }

    /// Descriptors per ring.
    pub fn ring_size(&self) -> u16 {
        self.rx.first().map_or(0, |q| q.size())
    }

    /// The redirection table as the device holds it.
    pub fn rss_table(&self) -> &[u8] {
        self.reta.entries()
    }

    /// Good packets received / transmitted by the device since the last call
    /// (GPRC/GPTC clear on read; octet counters read low half first).
    pub fn take_packet_counters(&self) -> (u64, u64, u64, u64) {
        let r = Regs::new(&self.bar);
        let gprc = r.read(GPRC).bits();
        let gptc = r.read(GPTC).bits();
        let gorc = r.read(GORCL).bits() | r.read(GORCH).get(GORCH::HIGH) << 32;
        let gotc = r.read(GOTCL).bits() | r.read(GOTCH).get(GOTCH::HIGH) << 32;
        let _ = r.read(CRCERRS);
        (gprc, gptc, gorc, gotc)
    }
}

impl<W: Mmio, R: Dma> Port for Igb<W, R> {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn rx_queues(&self) -> usize {
        usize::from(self.queues.0)
    }

    fn tx_queues(&self) -> usize {
        usize::from(self.queues.1)
    }

    /// Live update, as on the ixgbe: only changed RETA registers are written; drain
    /// the old queue of a moved bucket before serving the new one if order matters.
    /// Returns once the writes have reached the device: a register read after them
    /// flushes posted writes (PCIe ordering: a read cannot pass earlier posted writes),
    /// so the caller's "switch point" is behind it.
    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError> {
        if self.queues.0 < 2 {
            return Err(RssError::Unsupported);
        }
        let bar = &self.bar;
        let written = self.reta.update(table, self.queues.0, |i, v| rss::write_reta(bar, i, v))?;
        if written > 0 {
            let _ = Regs::new(bar).read(STATUS);
        }
        Ok(())
    }

    fn stats(&self) -> PortStats {
        let mut s = PortStats::of_queues(&self.rx, &self.tx);
        s.device_drops = self.read_drops();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_blocks_follow_the_e1000_map() {
        use crate::intel::queue::{RXDCTL, TXDCTL};
        let rx = |q| IgbQueues::rx_block(q).map(Block::base);
        assert_eq!(rx(0), Some(0x0C000));
        assert_eq!(IgbQueues::rx_block(0).map(|b| b.reg(SRRCTL).offset()), Some(0x0C00C));
        assert_eq!(IgbQueues::rx_block(0).map(|b| b.reg(RXDCTL).offset()), Some(0x0C028));
        assert_eq!(IgbQueues::tx_block(0).map(Block::base), Some(0x0E000));
        assert_eq!(IgbQueues::tx_block(0).map(|b| b.reg(TXDCTL).offset()), Some(0x0E028));
        assert_eq!(rx(15), Some(0x0C3C0));
        assert_eq!(rx(16), None);
        assert_eq!(RQDPC.at(1).map(Place::offset), Some(0x0C070));
    }
}

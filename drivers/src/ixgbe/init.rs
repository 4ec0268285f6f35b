//! 82599 bring-up, step by step in the datasheet's order (§4.6.3 "Initialization
//! Sequence"; §4.6.7 receive, §4.6.8 transmit initialization).

use alloc::vec::Vec;

use cadence_core::buf::Pool;
use cadence_core::time::{Clock, Duration, poll_until};

use super::port::{HwStats, Ixgbe};
use super::regs::*;
use super::{Config, InitError, IxgbeQueues, MacType, VENDOR_ID};
use crate::hal::{Dma, DmaAlloc, Mmio, PciFunction, pci};
use crate::intel::field::Regs;
use crate::intel::queue::{self, DCTL_ENABLE, rxq, txq};
use crate::intel::rss::{self, MRQC, MRQC_MRQE, RXCSUM, RXCSUM_PCSD, RetaShadow, mrqc_field};
use crate::intel::{IntelRx, IntelTx, QueueMap, RX_BUF_KIB, valid_ring_size};

/// GIO master disable: Linux allows 800 × 100 µs (IXGBE_PCI_MASTER_DISABLE_TIMEOUT).
const MASTER_DISABLE_MS: u64 = 80;
/// §4.6.3.2: "wait approximately 1 ms after setting [CTRL.RST] before attempting to
/// check if the bit has cleared or to access ... any other device register".
const RESET_SETTLE_MS: u64 = 1;
/// Bound on CTRL.RST self-clearing (the datasheet names none; 100× the settle time).
const RESET_MS: u64 = 100;
/// §4.6.3.2: software waits at least 10 ms after a reset before programming.
const POST_RESET_MS: u64 = 10;
/// EEC.ARD and RDRXCTL.DMAIDONE: no datasheet maximum; the EEPROM auto-read takes a
/// few ms; 100 ms bounds it with margin.
const AUTO_READ_MS: u64 = 100;
/// RXDCTL/TXDCTL.ENABLE read-back: Linux polls 10 × 1 ms (IXGBE_MAX_RX_DESC_POLL).
const QUEUE_ENABLE_MS: u64 = 10;
/// SECRXSTAT.SECRX_RDY: Linux polls for 40 ms (IXGBE_MAX_SECRX_POLL).
const SECRX_MS: u64 = 40;

/// Receive packet buffer 0 with one traffic class: all 512 KiB (§4.6.11.3.1).
const RXPB_KIB: u32 = 512;
/// Transmit packet buffer 0 with one traffic class: all 160 KiB (§4.6.11.3.1).
const TXPB_KIB: u32 = 160;
/// Largest frame the TX packet buffer must hold, in KiB (a 9.5 KB jumbo, rounded up).
const TX_MAX_FRAME_KIB: u32 = 10;
/// FCRTH(0): "must be set even if flow control is disabled" (§8.2.3.3.4); TinyNF and
/// DPDK use the buffer size less 24 KiB.
const FCRTH_BYTES: u32 = RXPB_KIB * 1024 - 0x6000;
/// TXDCTL prefetch / host thresholds (the values DPDK and ixy use).
const TX_PTHRESH: u32 = 36;
const TX_HTHRESH: u32 = 8;

/// Busy-waits `ms` milliseconds on `clock`.
fn delay<C: Clock + ?Sized>(clock: &C, ms: u64) {
    let _ = poll_until(clock, clock.rate().ticks_from_ms(ms), || false);
}

/// Writes EIMC (and EIMC_EX) to mask every interrupt (§4.6.3.1: "disable interrupts
/// by writing to the EIMC register"; EIMS is write-1-to-set, so writing it 0 does
/// nothing).
fn mask_interrupts<W: Mmio>(r: &Regs<'_, W>) {
    r.write(EIMC, 0x7FFF_FFFF);
    r.write(EIMC_EX0, u32::MAX);
    r.write(EIMC_EX0 + 4, u32::MAX);
}

/// Reads every clear-on-read counter once (to zero them) and returns the values.
pub(super) fn read_counters<W: Mmio>(r: &Regs<'_, W>, rx_queues: u16) -> HwStats {
    // 36-bit octet counters: low half first, then high (reading the high half clears).
    let octets = |lo: usize, hi: usize| {
        let l = r.read(lo) as u64;
        let h = OCTETS_HIGH.get(r.read(hi)) as u64;
        h << 32 | l
    };
    HwStats {
        gprc: r.read(GPRC) as u64,
        gptc: r.read(GPTC) as u64,
        gorc: octets(GORCL, GORCH),
        gotc: octets(GOTCL, GOTCH),
        mpc: (0..8).map(|i| r.read(MPC0 + 4 * i) as u64).sum(),
        crcerrs: r.read(CRCERRS) as u64,
        qprdc: (0..rx_queues.min(16)).map(|q| r.read(qprdc(q)) as u64).sum(),
    }
}

/// Offset of redirection-table register `i` (RETA(0..31), then the X550's ERETA).
pub(super) fn reta_reg(i: usize) -> usize {
    if i < 32 { rss::RETA + 4 * i } else { ERETA + 4 * (i - 32) }
}

/// Brings up the 82599 function `pci`.
pub(super) fn bring_up<P, A, C, W, R>(
    pci: &P,
    dma: &mut A,
    clock: &C,
    pool: &mut Pool<'_>,
    cfg: &Config,
) -> Result<Ixgbe<W, R>, InitError>
where
    P: PciFunction<Window = W>,
    A: DmaAlloc<Region = R>,
    C: Clock + ?Sized,
    W: Mmio,
    R: Dma,
{
    let id = pci.config_read32(pci::ID);
    let (vendor, device) = (id as u16, (id >> 16) as u16);
    let mac_type = match MacType::from_device_id(device) {
        Some(m) if vendor == VENDOR_ID => m,
        _ => return Err(InitError::NotIxgbe { vendor, device }),
    };
    if !(1..=mac_type.rss_queues()).contains(&cfg.rx_queues)
        || !(1..=64).contains(&cfg.tx_queues)
        || !valid_ring_size(cfg.rx_ring)
        || !valid_ring_size(cfg.tx_ring)
    {
        return Err(InitError::BadConfig);
    }
    // PCI 3.0 §6.2.2: memory space + bus master on, INTx off (polled). Only the command
    // half is written: the status half's error bits are write-1-to-clear.
    let cmd = pci.config_read32(pci::COMMAND) & 0xFFFF;
    pci.config_write32(pci::COMMAND, cmd | pci::CMD_MEMORY | pci::CMD_BUS_MASTER | pci::CMD_INTX_DISABLE);
    let bar = pci.map_bar(0, 0, BAR_LEN).map_err(InitError::MapBar)?;
    let r = Regs::new(&bar);
    let ms = |n: u64| clock.rate().ticks_from_ms(n);

    // §4.6.3.1: interrupts off.
    mask_interrupts(&r);
    // §5.2.5.3.2 master disable: no DMA in flight across the reset. On a timeout the
    // reset below still goes ahead (it clears pending requests; Linux does the same).
    r.set_bits(CTRL, &[ctrl::GIO_DIS]);
    let _ = poll_until(clock, ms(MASTER_DISABLE_MS), || !r.is_set(STATUS, STATUS_GIO_MASTER_EN));
    // §4.6.3.2 global reset (device + link).
    r.set_bits(CTRL, &[ctrl::RST, ctrl::LRST]);
    delay(clock, RESET_SETTLE_MS);
    poll_until(clock, ms(RESET_MS), || !r.is_set(CTRL, ctrl::RST)).map_err(|_| InitError::ResetTimeout)?;
    delay(clock, POST_RESET_MS);
    // §4.6.3.1: "disable interrupts again after the reset".
    mask_interrupts(&r);
    // §4.6.3: wait for the EEPROM auto-read and for the DMA init to be done.
    poll_until(clock, ms(AUTO_READ_MS), || r.is_set(EEC, eec::ARD)).map_err(|_| InitError::EepromTimeout)?;
    poll_until(clock, ms(AUTO_READ_MS), || r.is_set(RDRXCTL, rdrxctl::DMAIDONE))
        .map_err(|_| InitError::DmaInitTimeout)?;
    // §4.6.3 step "link setup": the 82599 SFP+ defaults loaded from the EEPROM into
    // AUTOC are kept (forcing a link mode, as ixy does, breaks other PHYs).
    let (ral, rah) = (r.read(RAL0), r.read(RAH0));
    let [m0, m1, m2, m3] = ral.to_le_bytes();
    let [m4, m5] = (RAH_ADDR.get(rah) as u16).to_le_bytes();
    let mac = [m0, m1, m2, m3, m4, m5];
    // §4.6.3 "initialize statistics": the counters are clear-on-read.
    let _ = read_counters(&r, cfg.rx_queues);

    let reta = RetaShadow::round_robin(mac_type.reta_entries(), cfg.rx_queues);
    init_rx_global(&r, cfg, &reta);

    let mut rx = Vec::with_capacity(cfg.rx_queues as usize);
    let mut tx = Vec::with_capacity(cfg.tx_queues as usize);
    let res = init_queues(pci, &bar, dma, clock, pool, cfg, &mut rx, &mut tx);
    if let Err(e) = res {
        // Stop the device before its buffers go back to the pool.
        r.set_bits(CTRL, &[ctrl::RST]);
        delay(clock, RESET_SETTLE_MS);
        for q in &mut rx {
            q.release(pool);
        }
        return Err(e);
    }
    Ok(Ixgbe::new(bar, mac, mac_type, rx, tx, reta))
}

/// §4.6.7 receive global setup, with RXCTRL.RXEN off (FCTRL may change only then).
fn init_rx_global<W: Mmio>(r: &Regs<'_, W>, cfg: &Config, reta: &RetaShadow) {
    r.clear_bits(RXCTRL, &[RXCTRL_RXEN]);
    // §4.6.11.3.1: one packet buffer for the one traffic class, the others 0.
    r.write(RXPBSIZE0, PBSIZE_KIB.val(RXPB_KIB));
    for i in 1..8 {
        r.write(RXPBSIZE0 + 4 * i, 0);
    }
    r.write(FCRTH0, FCRTH_RTH.val(FCRTH_BYTES >> FCRTH_RTH.offset));
    // §4.6.7: CRC strip in HLREG0 and RDRXCTL must agree; jumbo frames off (the RX
    // engine relies on frames of at most 1522 bytes); CRC append and padding on TX.
    r.modify(HLREG0, |v| {
        let v = v | hlreg0::RXCRCSTRP.mask() | hlreg0::TXCRCEN.mask() | hlreg0::TXPADEN.mask();
        v & !hlreg0::JUMBOEN.mask()
    });
    // §8.2.3.8.8: RSCFRSTSIZE 0, RSCACKC 1, FCOE_WRFIX 1 ("must be set").
    r.modify(RDRXCTL, |v| {
        let v = rdrxctl::RSCFRSTSIZE.set(v, 0);
        v | rdrxctl::CRCSTRIP.mask() | rdrxctl::RSCACKC.mask() | rdrxctl::FCOE_WRFIX.mask()
    });
    r.modify(FCTRL, |v| {
        let v = v | fctrl::BAM.mask();
        if cfg.promiscuous { v | fctrl::UPE.mask() | fctrl::MPE.mask() } else { v }
    });
    // §7.1.2.8: key, redirection table, hash in the descriptor, then MRQC.
    rss::write_key(r.bar(), &cfg.rss_key);
    reta.write_all(r.bar(), reta_reg);
    r.set_bits(RXCSUM, &[RXCSUM_PCSD]);
    r.modify(MRQC, |v| MRQC_MRQE.set(v, 0b0001) | mrqc_field::ALL);
}

/// Per-queue receive setup (§4.6.7.1), receive enable, transmit setup (§4.6.8).
#[allow(clippy::too_many_arguments)]
fn init_queues<P, A, C, W, R>(
    pci: &P,
    bar: &W,
    dma: &mut A,
    clock: &C,
    pool: &mut Pool<'_>,
    cfg: &Config,
    rx: &mut Vec<IntelRx<W, R>>,
    tx: &mut Vec<IntelTx<W, R>>,
) -> Result<(), InitError>
where
    P: PciFunction<Window = W>,
    A: DmaAlloc<Region = R>,
    C: Clock + ?Sized,
    W: Mmio,
    R: Dma,
{
    let r = Regs::new(bar);
    let enable_timeout: Duration = clock.rate().ticks_from_ms(QUEUE_ENABLE_MS);
    for q in 0..cfg.rx_queues {
        let block = IxgbeQueues::rx_block(q);
        let tail = pci.map_bar(0, (block + rxq::RDT) as u64, 4).map_err(InitError::MapBar)?;
        let mut ring = IntelRx::try_new(dma, cfg.rx_ring, tail, q).map_err(InitError::RingAlloc)?;
        queue::program_rx::<IxgbeQueues, W>(bar, q, ring.ring_phys(), ring.ring_bytes(), RX_BUF_KIB);
        if cfg.fill_rx {
            ring.refill(pool);
        }
        rx.push(ring);
        queue::enable_rx::<IxgbeQueues, W, C>(bar, clock, q, enable_timeout)
            .map_err(|_| InitError::RxEnableTimeout(q))?;
        // §4.6.7.1: DCA_RXCTRL bit 12 resets to 1 but "must be 0".
        r.clear_bits(block + rxq::DEV_0C, &[DCA_RXCTRL_BIT12]);
        // Only now, with ENABLE read back as 1, the tail: RDT = last posted + 1.
        if let Some(ring) = rx.last_mut() {
            ring.publish();
        }
    }
    // §4.6.7: "set CTRL_EXT.NS_DIS" (no snoop off: the driver does not use DCA).
    r.set_bits(CTRL_EXT, &[ctrl_ext::NS_DIS, ctrl_ext::DRV_LOAD]);
    // Receive enable (§8.2.3.12.10, DPDK ixgbe_enable_rx_dma_82599): stop the security
    // block's RX path, wait until it is idle, set RXEN, restart it.
    r.set_bits(SECRXCTRL, &[SECRXCTRL_RX_DIS]);
    poll_until(clock, clock.rate().ticks_from_ms(SECRX_MS), || r.is_set(SECRXSTAT, SECRXSTAT_RDY))
        .map_err(|_| InitError::SecRxTimeout)?;
    r.set_bits(RXCTRL, &[RXCTRL_RXEN]);
    r.clear_bits(SECRXCTRL, &[SECRXCTRL_RX_DIS]);

    // §4.6.8 transmit global setup: arbiter off while the packet buffers change.
    r.set_bits(RTTDCS, &[RTTDCS_ARBDIS]);
    r.write(TXPBSIZE0, PBSIZE_KIB.val(TXPB_KIB));
    r.write(TXPBTHRESH0, TXPBTHRESH_KIB.val(TXPB_KIB - TX_MAX_FRAME_KIB));
    for i in 1..8 {
        r.write(TXPBSIZE0 + 4 * i, 0);
        r.write(TXPBTHRESH0 + 4 * i, 0);
    }
    r.write(MTQC, 0);
    r.modify(DTXMXSZRQ, |v| DTXMXSZRQ_MAX.set(v, 0xFFF));
    r.clear_bits(RTTDCS, &[RTTDCS_ARBDIS]);
    for q in 0..cfg.tx_queues {
        let block = IxgbeQueues::tx_block(q);
        let tail = pci.map_bar(0, (block + txq::TDT) as u64, 4).map_err(InitError::MapBar)?;
        let ring = IntelTx::try_new(dma, cfg.tx_ring, tail, q).map_err(InitError::RingAlloc)?;
        queue::program_tx::<IxgbeQueues, W>(bar, q, ring.ring_phys(), ring.ring_bytes(), TX_PTHRESH, TX_HTHRESH);
        tx.push(ring);
    }
    // §4.6.8: "DMATXCTL.TE must be set before any TXDCTL.ENABLE".
    r.set_bits(DMATXCTL, &[DMATXCTL_TE]);
    for q in 0..cfg.tx_queues {
        queue::enable_tx::<IxgbeQueues, W, C>(bar, clock, q, enable_timeout)
            .map_err(|_| InitError::TxEnableTimeout(q))?;
    }
    debug_assert!(r.is_set(IxgbeQueues::tx_block(0) + txq::TXDCTL, DCTL_ENABLE));
    Ok(())
}

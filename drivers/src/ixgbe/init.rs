//! 82599 bring-up, step by step in the datasheet's order (§4.6.3 "Initialization
//! Sequence"; §4.6.7 receive, §4.6.8 transmit initialization).

use alloc::vec::Vec;

use cadence_core::buf::Pool;
use cadence_core::time::{Clock, Duration, poll_until};
use embedded_hal::delay::DelayNs;

use super::link;
use super::regs::*;
use super::stats::read_counters;
use super::{Config, InitError, IxgbeQueues, MacType, SfpCage, VENDOR_ID};
use crate::hal::{ClockDelay, Dma, DmaAlloc, Mmio, PciFunction, pci};
use crate::intel::queue::{self, RDT, RXDCTL, TDT, TXDCTL};
use crate::intel::rss::{self, RETA, RXCSUM, RetaShadow};
use crate::intel::{IntelRx, IntelTx, MAX_RX_FRAME, QueueMap, rx_buf_kib, valid_ring_size};
use crate::reg::{Place, Regs, Value};

/// GIO master disable: Linux allows 800 × 100 µs (IXGBE_PCI_MASTER_DISABLE_TIMEOUT).
const MASTER_DISABLE_MS: u64 = 80;
/// §4.6.3.2: "wait approximately 1 ms after setting [CTRL.RST] before attempting to
/// check if the bit has cleared or to access ... any other device register".
const RESET_SETTLE_MS: u32 = 1;
/// Bound on CTRL.RST self-clearing (the datasheet names none; 100× the settle time).
const RESET_MS: u32 = 100;
/// §4.6.3.2: software waits at least 10 ms after a reset before programming.
const POST_RESET_MS: u32 = 10;
/// EEC.ARD and RDRXCTL.DMAIDONE: no datasheet maximum; the EEPROM auto-read takes a
/// few ms; 100 ms bounds it with margin.
const AUTO_READ_MS: u64 = 100;
/// RXDCTL/TXDCTL.ENABLE read-back: Linux polls 10 × 1 ms (IXGBE_MAX_RX_DESC_POLL).
const QUEUE_ENABLE_MS: u64 = 10;
/// SECRXSTAT.SECRX_RDY: Linux polls for 40 ms (IXGBE_MAX_SECRX_POLL).
const SECRX_MS: u64 = 40;

/// Receive packet buffer 0 with one traffic class: all 512 KiB (§4.6.11.3.1).
const RXPB_KIB: u64 = 512;
/// Transmit packet buffer 0 with one traffic class: all 160 KiB (§4.6.11.3.1).
const TXPB_KIB: u64 = 160;
/// Largest frame the TX packet buffer must hold, in KiB (a 9.5 KB jumbo, rounded up).
const TX_MAX_FRAME_KIB: u64 = 10;
/// FCRTH(0): "must be set even if flow control is disabled" (§8.2.3.3.4); TinyNF and
/// DPDK use the buffer size less 24 KiB.
const FCRTH_BYTES: u64 = RXPB_KIB * 1024 - 0x6000;
/// TXDCTL prefetch / host thresholds (the values DPDK and ixy use).
const TX_PTHRESH: u64 = 36;
const TX_HTHRESH: u64 = 8;

/// What a successful bring-up yields: the port's parts, as plain data.
#[derive(Debug)]
pub(super) struct BringUp<W, R> {
    /// BAR 0.
    pub bar: W,
    /// The permanent MAC (RAL0/RAH0).
    pub mac: [u8; 6],
    /// The MAC generation.
    pub mac_type: MacType,
    /// Receive rings, queue `i` at `i`.
    pub rx: Vec<IntelRx<W, R>>,
    /// Transmit rings.
    pub tx: Vec<IntelTx<W, R>>,
    /// The redirection table as written.
    pub reta: RetaShadow,
}

/// Writes EIMC (and EIMC_EX) to mask every interrupt (§4.6.3.1: "disable interrupts
/// by writing to the EIMC register"; EIMS is write-1-to-set, so writing it 0 does
/// nothing).
fn mask_interrupts<W: Mmio>(r: &Regs<'_, W>) {
    r.write(EIMC, Value::new(0).set(EIMC::ALL));
    for ex in EIMC_EX.iter() {
        r.write(ex, Value::new(u32::MAX.into()));
    }
}

/// Writes redirection-table register `i`: RETA(0..31), then the X550's ERETA(0..95).
pub(super) fn write_reta<W: Mmio>(bar: &W, i: usize, v: u32) {
    let r = Regs::new(bar);
    match i.checked_sub(RETA::COUNT) {
        None => rss::write_reta(bar, i, v),
        Some(e) => {
            if let Some(reg) = ERETA.at(e) {
                r.write(reg, Value::new(v.into()));
            }
        }
    }
}

/// Brings up the 82599 function `pci`: reset, global and per-queue setup, RSS, link.
pub(super) fn bring_up<P, A, C, W, R>(
    pci: &P,
    dma: &mut A,
    clock: &C,
    pool: &mut Pool<'_>,
    cfg: &Config,
) -> Result<BringUp<W, R>, InitError>
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
    if cfg.max_frame > super::MAX_FRAME {
        return Err(InitError::MaxFrame(cfg.max_frame));
    }
    // PCI 3.0 §6.2.2: memory space + bus master on, INTx off (polled). Only the command
    // half is written: the status half's error bits are write-1-to-clear.
    let cmd = pci.config_read32(pci::COMMAND) & 0xFFFF;
    pci.config_write32(pci::COMMAND, cmd | pci::CMD_MEMORY | pci::CMD_BUS_MASTER | pci::CMD_INTX_DISABLE);
    let bar = pci.map_bar(0, 0, BAR_LEN).map_err(InitError::MapBar)?;
    let r = Regs::new(&bar);
    let ms = |n: u64| clock.rate().ticks_from_ms(n);
    let mut delay = ClockDelay::new(clock);

    // §4.6.3.1: interrupts off.
    mask_interrupts(&r);
    // §5.2.5.3.2 master disable: no DMA in flight across the reset. On a timeout the
    // reset below still goes ahead (it clears pending requests; Linux does the same).
    r.modify(CTRL, |v| v.set(CTRL::GIO_DIS));
    let _ = poll_until(clock, ms(MASTER_DISABLE_MS), || !r.is_set(STATUS, STATUS::GIO_MASTER_EN));
    // §4.6.3.2 global reset (device + link).
    r.modify(CTRL, |v| v.set(CTRL::RST).set(CTRL::LRST));
    delay.delay_ms(RESET_SETTLE_MS);
    poll_until(clock, ms(RESET_MS.into()), || !r.is_set(CTRL, CTRL::RST)).map_err(|_| InitError::ResetTimeout)?;
    delay.delay_ms(POST_RESET_MS);
    // §4.6.3.1: "disable interrupts again after the reset".
    mask_interrupts(&r);
    // §4.6.3: wait for the EEPROM auto-read and for the DMA init to be done.
    poll_until(clock, ms(AUTO_READ_MS), || r.is_set(EEC, EEC::ARD)).map_err(|_| InitError::EepromTimeout)?;
    poll_until(clock, ms(AUTO_READ_MS), || r.is_set(RDRXCTL, RDRXCTL::DMAIDONE))
        .map_err(|_| InitError::DmaInitTimeout)?;
    let (ral, rah) = (r.read(RAL0).raw(), r.read(RAH0).get(RAH0::ADDR) as u16);
    let [m0, m1, m2, m3] = ral.to_le_bytes();
    let [m4, m5] = rah.to_le_bytes();
    let mac = [m0, m1, m2, m3, m4, m5];
    // §4.6.3 step "link setup" (§4.6.4): a board with an SFP+ cage needs a module; the
    // link mode the EEPROM loaded into AUTOC is kept and auto-negotiation restarted.
    // The link comes up while the queues are set up; the wait for it is at the end.
    if !link::module_present(&r, SfpCage::of_device(device)) {
        return Err(InitError::NoModule);
    }
    link::restart_an(&r);
    // §4.6.3 "initialize statistics": the counters are clear-on-read.
    let _ = read_counters(&r, cfg.rx_queues);

    let reta = RetaShadow::round_robin(mac_type.reta_entries(), cfg.rx_queues);
    init_rx_global(&r, cfg, &reta);

    let mut rx = Vec::with_capacity(cfg.rx_queues as usize);
    let mut tx = Vec::with_capacity(cfg.tx_queues as usize);
    let mut res = init_queues(pci, &bar, dma, clock, pool, cfg, &mut rx, &mut tx);
    let mut link = link::read(&r);
    if res.is_ok() && !link.up && cfg.link_timeout_ms > 0 {
        link = link::wait(&r, clock, cfg.link_timeout_ms);
        if !link.up {
            res = Err(InitError::LinkDown { waited_ms: cfg.link_timeout_ms });
        }
    }
    if let Err(e) = res {
        // Stop the device before its buffers go back to the pool.
        r.modify(CTRL, |v| v.set(CTRL::RST));
        delay.delay_ms(RESET_SETTLE_MS);
        for q in &mut rx {
            q.release(pool);
        }
        return Err(e);
    }
    Ok(BringUp { bar, mac, mac_type, rx, tx, reta })
}

/// §4.6.7 receive global setup, with RXCTRL.RXEN off (FCTRL may change only then).
fn init_rx_global<W: Mmio>(r: &Regs<'_, W>, cfg: &Config, reta: &RetaShadow) {
    r.modify(RXCTRL, |v| v.clear(RXCTRL::RXEN));
    // §4.6.11.3.1: one packet buffer for the one traffic class, the others 0.
    for (i, pb) in RXPBSIZE.iter().enumerate() {
        r.write(pb, if i == 0 { RXPBSIZE::SIZE.value(RXPB_KIB) } else { Value::new(0) });
    }
    if let Some(fcrth) = FCRTH.at(0) {
        r.write(fcrth, FCRTH::RTH.value(FCRTH_BYTES >> FCRTH::RTH.offset()));
    }
    // §4.6.7: CRC strip in HLREG0 and RDRXCTL must agree; jumbo frames only when asked for
    // (MAXFRS counts the CRC, as Linux's ixgbe_set_rx_buffer_len); CRC append and padding
    // on TX.
    let jumbo = cfg.max_frame > MAX_RX_FRAME;
    if jumbo {
        r.write(MAXFRS, MAXFRS::MFS.value((cfg.max_frame + 4) as u64));
    }
    r.modify(HLREG0, |v| {
        v.set(HLREG0::RXCRCSTRP).set(HLREG0::TXCRCEN).set(HLREG0::TXPADEN).set_if(HLREG0::JUMBOEN, jumbo)
    });
    // §8.2.3.8.8: RSCFRSTSIZE 0, RSCACKC 1, FCOE_WRFIX 1 ("must be set").
    r.modify(RDRXCTL, |v| {
        v.with(RDRXCTL::RSCFRSTSIZE, 0).set(RDRXCTL::CRCSTRIP).set(RDRXCTL::RSCACKC).set(RDRXCTL::FCOE_WRFIX)
    });
    r.modify(FCTRL, |v| v.set(FCTRL::BAM).set_if(FCTRL::UPE, cfg.promiscuous).set_if(FCTRL::MPE, cfg.promiscuous));
    // §7.1.2.8: key, redirection table, hash in the descriptor, then MRQC.
    rss::write_key(r.window(), &cfg.rss_key);
    reta.write_all(|i, v| write_reta(r.window(), i, v));
    r.modify(RXCSUM, |v| v.set(RXCSUM::PCSD));
    r.modify(MRQC, |v| {
        v.with(MRQC::MRQE, 0b0001)
            .set(MRQC::IPV4_TCP)
            .set(MRQC::IPV4)
            .set(MRQC::IPV6_EX_TCP)
            .set(MRQC::IPV6)
            .set(MRQC::IPV6_TCP)
            .set(MRQC::IPV4_UDP)
            .set(MRQC::IPV6_UDP)
    });
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
        let block = IxgbeQueues::rx_block(q).ok_or(InitError::BadConfig)?;
        let tail = pci.map_bar(0, block.reg(RDT).offset() as u64, 4).map_err(InitError::MapBar)?;
        let mut ring = IntelRx::try_new(dma, cfg.rx_ring, tail, q).map_err(InitError::RingAlloc)?;
        let kib = rx_buf_kib(cfg.max_frame);
        ring.set_max_frame(cfg.max_frame, kib as usize * 1024);
        queue::program_rx::<IxgbeQueues, W>(bar, block, ring.ring_phys(), ring.ring_bytes(), kib);
        if cfg.fill_rx {
            ring.refill(pool);
        }
        rx.push(ring);
        queue::enable_rx(bar, clock, block, enable_timeout).map_err(|_| InitError::RxEnableTimeout(q))?;
        // §4.6.7.1: DCA_RXCTRL bit 12 resets to 1 but "must be 0".
        r.modify(block.reg(DCA_RXCTRL), |v| v.clear(DCA_RXCTRL::BIT12));
        // Only now, with ENABLE read back as 1, the tail: RDT = last posted + 1.
        if let Some(ring) = rx.last_mut() {
            ring.publish();
        }
    }
    // §4.6.7: "set CTRL_EXT.NS_DIS" (no snoop off: the driver does not use DCA).
    r.modify(CTRL_EXT, |v| v.set(CTRL_EXT::NS_DIS).set(CTRL_EXT::DRV_LOAD));
    // Receive enable (§8.2.3.12.10, DPDK ixgbe_enable_rx_dma_82599): stop the security
    // block's RX path, wait until it is idle, set RXEN, restart it.
    r.modify(SECRXCTRL, |v| v.set(SECRXCTRL::RX_DIS));
    poll_until(clock, clock.rate().ticks_from_ms(SECRX_MS), || r.is_set(SECRXSTAT, SECRXSTAT::SECRX_RDY))
        .map_err(|_| InitError::SecRxTimeout)?;
    r.modify(RXCTRL, |v| v.set(RXCTRL::RXEN));
    r.modify(SECRXCTRL, |v| v.clear(SECRXCTRL::RX_DIS));

    // §4.6.8 transmit global setup: arbiter off while the packet buffers change.
    r.modify(RTTDCS, |v| v.set(RTTDCS::ARBDIS));
    for (i, (pb, th)) in TXPBSIZE.iter().zip(TXPBTHRESH.iter()).enumerate() {
        let (size, thresh) = if i == 0 {
            (TXPBSIZE::SIZE.value(TXPB_KIB), TXPBTHRESH::THRESH.value(TXPB_KIB - TX_MAX_FRAME_KIB))
        } else {
            (Value::new(0), Value::new(0))
        };
        r.write(pb, size);
        r.write(th, thresh);
    }
    r.write(MTQC, Value::new(0));
    r.modify(DTXMXSZRQ, |v| v.with(DTXMXSZRQ::MAX_BYTES_NUM_REQ, 0xFFF));
    r.modify(RTTDCS, |v| v.clear(RTTDCS::ARBDIS));
    for q in 0..cfg.tx_queues {
        let block = IxgbeQueues::tx_block(q).ok_or(InitError::BadConfig)?;
        let tail = pci.map_bar(0, block.reg(TDT).offset() as u64, 4).map_err(InitError::MapBar)?;
        let ring = IntelTx::try_new(dma, cfg.tx_ring, tail, q).map_err(InitError::RingAlloc)?;
        queue::program_tx(bar, block, ring.ring_phys(), ring.ring_bytes(), TX_PTHRESH, TX_HTHRESH);
        tx.push(ring);
    }
    // §4.6.8: "DMATXCTL.TE must be set before any TXDCTL.ENABLE".
    r.modify(DMATXCTL, |v| v.set(DMATXCTL::TE));
    for q in 0..cfg.tx_queues {
        let block = IxgbeQueues::tx_block(q).ok_or(InitError::BadConfig)?;
        queue::enable_tx(bar, clock, block, enable_timeout).map_err(|_| InitError::TxEnableTimeout(q))?;
    }
    debug_assert!(IxgbeQueues::tx_block(0).is_some_and(|b| r.is_set(b.reg(TXDCTL), TXDCTL::ENABLE)));
    debug_assert!(IxgbeQueues::rx_block(0).is_some_and(|b| r.is_set(b.reg(RXDCTL), RXDCTL::ENABLE)));
    Ok(())
}

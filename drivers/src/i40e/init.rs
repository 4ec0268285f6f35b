//! XL710 bring-up, in the order of the module docs ([`super`]); every wait bounded.
//! Returns a plain [`BringUp`] that the port is built from.

use alloc::vec::Vec;

use cadence_core::buf::Pool;
use cadence_core::time::{Clock, poll_until};
use embedded_hal::delay::DelayNs;

use super::aq::{AdminQueue, AqError};
use super::cmd::{Commands, LinkStatus, PROMISC_BROADCAST, PROMISC_MULTICAST, PROMISC_UNICAST, Version, VsiInfo};
use super::desc::{I40eRx, I40eTx};
use super::hmc::{Hmc, RxCtx, TxCtx};
use super::regs::*;
use super::{Config, InitError, JUMBO_DBUFF, LUT_ENTRIES, MAX_QUEUES, VENDOR_ID, is_supported_device, valid_ring_size};
use crate::hal::{ClockDelay, Dma, DmaAlloc, Mmio, PciFunction, pci};
use crate::intel::rss::RetaShadow;
use crate::intel::{IntelRx, IntelTx, MAX_RX_FRAME, RX_BUF_KIB};
use crate::reg::{Place, Register, Regs, Value};

/// Global reset in progress: Linux allows (GRSTDEL + 10) × 100 ms; 2 s bounds it.
const GLOBAL_RESET_MS: u64 = 2000;
/// Firmware configuration load (GLNVM_ULD): DPDK polls 200 × 10 ms.
const FW_READY_MS: u64 = 2000;
/// PF reset (PFSWR self-clearing): DPDK polls 200 × 1 ms … Linux up to 1 s.
const PF_RESET_MS: u64 = 1000;
/// QENA_STAT following QENA_REQ: Linux polls 50 × 10 µs … 2 ms for RX; 10 ms bounds both.
const QUEUE_ENABLE_MS: u64 = 10;
/// After clearing a TX queue's pre-disable, before enabling it (Linux: 10 µs, "wait
/// for the pre-disable to take").
const PRE_QDIS_US: u32 = 10;
/// Between two link queries while waiting for the link.
const LINK_POLL_MS: u32 = 10;
/// The admin API major version this driver speaks.
const API_MAJOR: u16 = 1;
/// The hashed packet classifier types (PCTYPE, §7.1.8.1): IPv4 UDP 31, TCP 33, other
/// 35, fragments 36; IPv6 UDP 41, TCP 43, other 45, fragments 46.
const HENA_PCTYPES: [u32; 8] = [31, 33, 35, 36, 41, 43, 45, 46];

/// What a successful bring-up yields: the port's parts, as plain data.
#[derive(Debug)]
pub(super) struct BringUp<W, R> {
    pub bar: W,
    pub aq: AdminQueue<R>,
    pub hmc: Hmc<R>,
    pub mac: [u8; 6],
    pub pf: u8,
    pub port: u8,
    pub version: Version,
    pub vsi: VsiInfo,
    pub link: LinkStatus,
    pub rx: Vec<IntelRx<W, R, I40eRx>>,
    pub tx: Vec<IntelTx<W, R, I40eTx>>,
    pub lut: RetaShadow,
}

/// Writes RX control register `R` (API ≥ 1.5: through the admin queue, as the
/// datasheet asks; before: directly).
fn write_rx_ctl<W, R, C, G>(
    cmds: &mut Commands<'_, W, R, C>,
    version: Version,
    reg: G,
    v: Value<G::Reg>,
) -> Result<(), AqError>
where
    W: Mmio,
    R: Dma,
    C: Clock + ?Sized,
    G: Place,
    <G::Reg as Register>::Access: crate::reg::Writable,
{
    if version.rx_ctl_through_aq() {
        cmds.rx_ctl_write(reg.offset() as u32, v.bits() as u32)
    } else {
        Regs::new(cmds.bar).write(reg, v);
        Ok(())
    }
}

/// Writes lookup-table register `i` (entries 4i..4i+3).
pub(super) fn write_hlut<W: Mmio>(bar: &W, i: usize, v: u32) {
    if let Some(reg) = PFQF_HLUT.at(i) {
        Regs::new(bar).write(reg, Value::new(v.into()));
    }
}

/// Brings up the XL710 function `pci`.
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
    if vendor != VENDOR_ID || !is_supported_device(device) {
        return Err(InitError::NotI40e { vendor, device });
    }
    if !(1..=MAX_QUEUES).contains(&cfg.queues) || !valid_ring_size(cfg.ring) {
        return Err(InitError::BadConfig);
    }
    if cfg.max_frame > super::MAX_FRAME {
        return Err(InitError::MaxFrame(cfg.max_frame));
    }
    // PCI 3.0 §6.2.2: memory space + bus master on, INTx off (polled).
    let cmd = pci.config_read32(pci::COMMAND) & 0xFFFF;
    pci.config_write32(pci::COMMAND, cmd | pci::CMD_MEMORY | pci::CMD_BUS_MASTER | pci::CMD_INTX_DISABLE);
    let bar = pci.map_bar(0, 0, BAR_LEN).map_err(InitError::MapBar)?;
    let r = Regs::new(&bar);
    let ms = |n: u64| clock.rate().ticks_from_ms(n);

    // 1. No global reset running, the firmware's configuration loaded, then a PF reset.
    poll_until(clock, ms(GLOBAL_RESET_MS), || r.read(GLGEN_RSTAT).get(GLGEN_RSTAT::DEVSTATE) == 0)
        .map_err(|_| InitError::GlobalReset)?;
    poll_until(clock, ms(FW_READY_MS), || {
        let v = r.read(GLNVM_ULD);
        v.is_set(GLNVM_ULD::CONF_CORE_DONE) && v.is_set(GLNVM_ULD::CONF_GLOBAL_DONE)
    })
    .map_err(|_| InitError::FirmwareNotReady)?;
    r.modify(PFGEN_CTRL, |v| v.set(PFGEN_CTRL::PFSWR));
    poll_until(clock, ms(PF_RESET_MS), || !r.is_set(PFGEN_CTRL, PFGEN_CTRL::PFSWR))
        .map_err(|_| InitError::ResetTimeout)?;
    let pf = r.read(PF_FUNC_RID).get(PF_FUNC_RID::FUNCTION_NUMBER) as u8;
    let port = r.read(PFGEN_PORTNUM).get(PFGEN_PORTNUM::PORT_NUM) as u8;
    let qalloc = r.read(PFLAN_QALLOC);
    let (first, last) = (qalloc.get(PFLAN_QALLOC::FIRSTQ), qalloc.get(PFLAN_QALLOC::LASTQ));
    if !qalloc.is_set(PFLAN_QALLOC::VALID) || last < first {
        return Err(InitError::NoQueues);
    }
    let have = (last - first + 1) as u16;
    if cfg.queues > have {
        return Err(InitError::TooManyQueues { asked: cfg.queues, have });
    }
    let first_abs = first as u16;

    // 2. The admin queue and the firmware's view of the function.
    let mut aq = AdminQueue::try_new(dma).map_err(InitError::Memory)?;
    aq.start(&bar)?;
    let mut cmds = Commands { aq: &mut aq, bar: &bar, clock };
    let res = configure(&mut cmds, cfg);
    let (version, mac, vsi) = match res {
        Ok(v) => v,
        Err(e) => {
            aq.stop(&bar);
            return Err(e);
        }
    };

    // 3.–6. HMC, RSS, write-back, queues. On failure: PF reset (stops DMA), buffers back.
    let mut rx = Vec::with_capacity(usize::from(cfg.queues));
    let mut tx = Vec::with_capacity(usize::from(cfg.queues));
    let mut cmds = Commands { aq: &mut aq, bar: &bar, clock };
    let res = setup_queues(pci, &mut cmds, dma, pool, cfg, pf, first_abs, version, vsi, &mut rx, &mut tx);
    let res = res.and_then(|(hmc, lut)| {
        Hmc::<R>::check(&bar)?;
        // 7. The link, with link-change events on.
        let mut link = cmds.link_status()?;
        if cfg.link_timeout_ms > 0 {
            let deadline = clock.now().saturating_add(ms(cfg.link_timeout_ms.into()));
            let mut delay = ClockDelay::new(clock);
            while !link.up {
                if clock.now() >= deadline {
                    return Err(InitError::LinkDown { waited_ms: cfg.link_timeout_ms });
                }
                delay.delay_ms(LINK_POLL_MS);
                link = cmds.link_status()?;
            }
        }
        Ok((hmc, lut, link))
    });
    match res {
        Ok((hmc, lut, link)) => Ok(BringUp { bar, aq, hmc, mac, pf, port, version, vsi, link, rx, tx, lut }),
        Err(e) => {
            aq.stop(&bar);
            r.modify(PFGEN_CTRL, |v| v.set(PFGEN_CTRL::PFSWR));
            let _ = poll_until(clock, ms(PF_RESET_MS), || !r.is_set(PFGEN_CTRL, PFGEN_CTRL::PFSWR));
            for q in &mut rx {
                q.release(pool);
            }
            Err(e)
        }
    }
}

/// Step 2: version, PXE, MAC, VSI, queue map, promiscuous modes.
fn configure<W: Mmio, R: Dma, C: Clock + ?Sized>(
    cmds: &mut Commands<'_, W, R, C>,
    cfg: &Config,
) -> Result<(Version, [u8; 6], VsiInfo), InitError> {
    // §7.10.6.1: Get Version first; this driver speaks API 1.x.
    let version = cmds.get_version()?;
    if version.api_major != API_MAJOR {
        return Err(InitError::UnsupportedApi { major: version.api_major, minor: version.api_minor });
    }
    cmds.clear_pxe_mode()?;
    let mac = cmds.mac_address()?;
    let seid = cmds.pf_vsi_seid()?;
    let vsi = cmds.vsi_info(seid)?;
    cmds.map_queues(seid, cfg.queues)?;
    let promisc =
        if cfg.promiscuous { PROMISC_UNICAST | PROMISC_MULTICAST | PROMISC_BROADCAST } else { PROMISC_BROADCAST };
    cmds.set_promiscuous(seid, promisc)?;
    Ok((version, mac, vsi))
}

/// Steps 3–6.
#[allow(clippy::too_many_arguments)]
fn setup_queues<P, A, C, W, R>(
    pci: &P,
    cmds: &mut Commands<'_, W, R, C>,
    dma: &mut A,
    pool: &mut Pool<'_>,
    cfg: &Config,
    pf: u8,
    first_abs: u16,
    version: Version,
    vsi: VsiInfo,
    rx: &mut Vec<IntelRx<W, R, I40eRx>>,
    tx: &mut Vec<IntelTx<W, R, I40eTx>>,
) -> Result<(Hmc<R>, RetaShadow), InitError>
where
    P: PciFunction<Window = W>,
    A: DmaAlloc<Region = R>,
    C: Clock + ?Sized,
    W: Mmio,
    R: Dma,
{
    let bar = cmds.bar;
    let clock = cmds.clock;
    let r = Regs::new(bar);
    let n = cfg.queues;

    // 3. HMC backing and object layout.
    let hmc = Hmc::try_new(bar, dma, usize::from(pf), n)?;

    // 4. RSS: key, lookup table (512 entries), hashed packet types.
    let mut key = [0u8; 52];
    key[..40].copy_from_slice(&cfg.rss_key);
    for (reg, k) in PFQF_HKEY.iter().zip(key.chunks_exact(4)) {
        r.write(reg, Value::new(u32::from_le_bytes([k[0], k[1], k[2], k[3]]).into()));
    }
    let lut = RetaShadow::round_robin(LUT_ENTRIES, n);
    lut.write_all(|i, v| write_hlut(bar, i, v));
    let ctl0 = r.read(PFQF_CTL_0).set(PFQF_CTL_0::HASHLUTSIZE);
    write_rx_ctl(cmds, version, PFQF_CTL_0, ctl0)?;
    let hena = HENA_PCTYPES.iter().fold(0u64, |m, &t| m | 1 << t);
    for (i, reg) in PFQF_HENA.iter().enumerate() {
        write_rx_ctl(cmds, version, reg, Value::new((hena >> (32 * i)) & 0xFFFF_FFFF))?;
    }

    // 5. Descriptor write-back without interrupts: every queue in interrupt 0's list
    //    (RX q → TX q → RX q+1 ...), causes enabled, no ITR delay; interrupt 0 enabled.
    for q in 0..n {
        let (Some(rq), Some(tq)) = (QINT_RQCTL.at(q.into()), QINT_TQCTL.at(q.into())) else {
            return Err(InitError::BadConfig);
        };
        let next_rx = if q + 1 < n { u64::from(q + 1) } else { QUEUE_LIST_END };
        r.write(
            rq,
            QINT_RQCTL::CAUSE_ENA
                .value(1)
                .with(QINT_RQCTL::ITR_INDX, ITR_NONE)
                .with(QINT_RQCTL::NEXTQ_INDX, q.into())
                .with(QINT_RQCTL::NEXTQ_TYPE, QTYPE_TX),
        );
        r.write(
            tq,
            QINT_TQCTL::CAUSE_ENA
                .value(1)
                .with(QINT_TQCTL::ITR_INDX, ITR_NONE)
                .with(QINT_TQCTL::NEXTQ_INDX, next_rx)
                .with(QINT_TQCTL::NEXTQ_TYPE, QTYPE_RX),
        );
    }
    for itr in PFINT_ITR0.iter() {
        r.write(itr, Value::new(0));
    }
    r.write(PFINT_LNKLST0, PFINT_LNKLST0::FIRSTQ_INDX.value(0).with(PFINT_LNKLST0::FIRSTQ_TYPE, QTYPE_RX));
    r.write(
        PFINT_DYN_CTL0,
        PFINT_DYN_CTL0::INTENA.value(1).set(PFINT_DYN_CTL0::CLEARPBA).with(PFINT_DYN_CTL0::ITR_INDX, ITR_NONE),
    );

    // 6. Rings and contexts, then the queues, TX first (§8.4.3.1.1), then RX (§8.3.3.1).
    for q in 0..n {
        let (Some(rt), Some(tt)) = (QRX_TAIL.at(q.into()), QTX_TAIL.at(q.into())) else {
            return Err(InitError::BadConfig);
        };
        let rtail = pci.map_bar(0, rt.offset() as u64, 4).map_err(InitError::MapBar)?;
        let ttail = pci.map_bar(0, tt.offset() as u64, 4).map_err(InitError::MapBar)?;
        let mut ring = IntelRx::try_new(dma, cfg.ring, rtail, q).map_err(InitError::Memory)?;
        // Jumbo frames: the longest buffer the context's 128-byte units allow after the frame
        // offset; RXMAX the longest frame with its CRC (as Linux's i40e sets it), 1 522 bytes
        // without jumbo frames.
        let jumbo = cfg.max_frame > MAX_RX_FRAME;
        let buf_bytes = if jumbo { JUMBO_DBUFF } else { RX_BUF_KIB as usize * 1024 };
        ring.set_max_frame(cfg.max_frame, buf_bytes);
        let rxmax = if jumbo { ring.max_frame() + 4 } else { MAX_RX_FRAME } as u16;
        hmc.write_rx(q, &RxCtx { base: ring.ring_phys(), qlen: cfg.ring, buf_bytes: buf_bytes as u16, rxmax });
        rx.push(ring);
        let ring = IntelTx::try_new(dma, cfg.ring, ttail, q).map_err(InitError::Memory)?;
        hmc.write_tx(q, &TxCtx { base: ring.ring_phys(), qlen: cfg.ring, rdylist: vsi.qs_handle });
        tx.push(ring);
    }
    // The contexts must be in memory before the device reads them at the enable.
    crate::hal::dma_wmb();
    let timeout = clock.rate().ticks_from_ms(QUEUE_ENABLE_MS);
    let mut delay = ClockDelay::new(clock);
    for q in 0..n {
        let (Some(ctl), Some(ena)) = (QTX_CTL.at(q.into()), QTX_ENA.at(q.into())) else {
            return Err(InitError::BadConfig);
        };
        r.write(ctl, QTX_CTL::PFVF_Q.value(QTX_CTL_PF_QUEUE).with(QTX_CTL::PF_INDX, pf.into()));
        let abs = usize::from(first_abs + q);
        let Some(qdis) = GLLAN_TXPRE_QDIS.at(abs / 128) else { return Err(InitError::BadConfig) };
        r.write(qdis, GLLAN_TXPRE_QDIS::QINDX.value((abs % 128) as u64).set(GLLAN_TXPRE_QDIS::CLEAR_QDIS));
        delay.delay_us(PRE_QDIS_US);
        r.modify(ena, |v| v.set(QTX_ENA::QENA_REQ));
        poll_until(clock, timeout, || r.is_set(ena, QTX_ENA::QENA_STAT)).map_err(|_| InitError::TxEnableTimeout(q))?;
    }
    for (q, ring) in (0..n).zip(rx.iter_mut()) {
        let Some(ena) = QRX_ENA.at(q.into()) else { return Err(InitError::BadConfig) };
        if cfg.fill_rx {
            ring.refill(pool);
        }
        r.modify(ena, |v| v.set(QRX_ENA::QENA_REQ));
        poll_until(clock, timeout, || r.is_set(ena, QRX_ENA::QENA_STAT)).map_err(|_| InitError::RxEnableTimeout(q))?;
        // The tail only once the queue runs.
        ring.publish();
    }
    Ok((hmc, lut))
}

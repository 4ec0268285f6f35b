//! Per-queue register blocks and their programming, shared by ixgbe and igb.
//!
//! Both devices give every queue a 0x40-byte block with the same skeleton (82599
//! §8.2.3.8 / §8.2.3.9, 82576 §8.10 / §8.12): ring base low/high, ring length, head,
//! tail and a control register with an ENABLE bit 25. Where the blocks start, and
//! where SRRCTL lives, differs: a [`QueueMap`] per device says so.

use core::mem::offset_of;
use volatile_register::RW;

use cadence_core::time::{Clock, Duration, Timeout, poll_until};

use super::field::{Field, Regs};
use crate::hal::Mmio;

/// One receive queue's register block (offsets within the block). Layout only.
#[repr(C)]
#[allow(dead_code)] // Layout only: the fields' offsets are used, never the fields.
pub(crate) struct RxBlock {
    /// 0x00 RDBAL: ring base, low 32 bits (128-byte aligned: bits 6:0 are 0).
    rdbal: RW<u32>,
    /// 0x04 RDBAH: ring base, high 32 bits.
    rdbah: RW<u32>,
    /// 0x08 RDLEN: ring bytes, a multiple of 128.
    rdlen: RW<u32>,
    /// 0x0C device-specific (ixgbe DCA_RXCTRL, igb SRRCTL).
    dev_0c: RW<u32>,
    /// 0x10 RDH: head, advanced by the device.
    rdh: RW<u32>,
    /// 0x14 device-specific (ixgbe SRRCTL).
    dev_14: RW<u32>,
    /// 0x18 RDT: tail, written by the driver.
    rdt: RW<u32>,
    _r1c: [u32; 3],
    /// 0x28 RXDCTL: queue control (ENABLE bit 25).
    rxdctl: RW<u32>,
    _r2c: [u32; 5],
}

/// One transmit queue's register block. Layout only.
#[repr(C)]
#[allow(dead_code)] // Layout only.
pub(crate) struct TxBlock {
    /// 0x00 TDBAL.
    tdbal: RW<u32>,
    /// 0x04 TDBAH.
    tdbah: RW<u32>,
    /// 0x08 TDLEN (multiple of 128).
    tdlen: RW<u32>,
    /// 0x0C device-specific (ixgbe DCA_TXCTRL).
    dev_0c: RW<u32>,
    /// 0x10 TDH.
    tdh: RW<u32>,
    _r14: u32,
    /// 0x18 TDT.
    tdt: RW<u32>,
    _r1c: [u32; 3],
    /// 0x28 TXDCTL: thresholds and ENABLE bit 25.
    txdctl: RW<u32>,
    _r2c: [u32; 3],
    /// 0x38 TDWBAL: head write-back address (unused: DD write-back is used).
    tdwbal: RW<u32>,
    /// 0x3C TDWBAH.
    tdwbah: RW<u32>,
}

const _: () = assert!(core::mem::size_of::<RxBlock>() == 0x40);
const _: () = assert!(core::mem::size_of::<TxBlock>() == 0x40);

/// Offsets within an [`RxBlock`].
pub mod rxq {
    use super::{RxBlock, offset_of};
    pub const RDBAL: usize = offset_of!(RxBlock, rdbal);
    pub const RDBAH: usize = offset_of!(RxBlock, rdbah);
    pub const RDLEN: usize = offset_of!(RxBlock, rdlen);
    pub const DEV_0C: usize = offset_of!(RxBlock, dev_0c);
    pub const RDH: usize = offset_of!(RxBlock, rdh);
    pub const DEV_14: usize = offset_of!(RxBlock, dev_14);
    pub const RDT: usize = offset_of!(RxBlock, rdt);
    pub const RXDCTL: usize = offset_of!(RxBlock, rxdctl);
}
const _: () = assert!(rxq::RDBAL == 0x00 && rxq::RDBAH == 0x04 && rxq::RDLEN == 0x08 && rxq::DEV_0C == 0x0C);
const _: () = assert!(rxq::RDH == 0x10 && rxq::DEV_14 == 0x14 && rxq::RDT == 0x18 && rxq::RXDCTL == 0x28);

/// Offsets within a [`TxBlock`].
pub mod txq {
    use super::{TxBlock, offset_of};
    pub const TDBAL: usize = offset_of!(TxBlock, tdbal);
    pub const TDBAH: usize = offset_of!(TxBlock, tdbah);
    pub const TDLEN: usize = offset_of!(TxBlock, tdlen);
    pub const DEV_0C: usize = offset_of!(TxBlock, dev_0c);
    pub const TDH: usize = offset_of!(TxBlock, tdh);
    pub const TDT: usize = offset_of!(TxBlock, tdt);
    pub const TXDCTL: usize = offset_of!(TxBlock, txdctl);
    pub const TDWBAL: usize = offset_of!(TxBlock, tdwbal);
}
const _: () = assert!(txq::TDBAL == 0x00 && txq::TDBAH == 0x04 && txq::TDLEN == 0x08 && txq::DEV_0C == 0x0C);
const _: () = assert!(txq::TDH == 0x10 && txq::TDT == 0x18 && txq::TXDCTL == 0x28 && txq::TDWBAL == 0x38);

/// RXDCTL / TXDCTL.ENABLE (bit 25 on both devices).
pub const DCTL_ENABLE: Field = Field::bit(25);

/// SRRCTL (82599 §8.2.3.8.7, 82576 §8.10.2): BSIZEPACKET 6:0 in 1 KiB units.
pub const SRRCTL_BSIZEPACKET: Field = Field::new(0, 7);
/// SRRCTL BSIZEHEADER 13:8 in 64-byte units (no header split: 0).
pub const SRRCTL_BSIZEHEADER: Field = Field::new(8, 6);
/// SRRCTL DESCTYPE 27:25.
pub const SRRCTL_DESCTYPE: Field = Field::new(25, 3);
/// DESCTYPE 001b: advanced descriptor, one buffer.
pub const DESCTYPE_ADV_ONE_BUFFER: u32 = 0b001;

/// Where a device keeps its queue registers.
pub trait QueueMap {
    /// Queues of each direction the device has.
    const QUEUES: u16;
    /// SRRCTL.DROP_EN: drop a frame when its queue has no descriptor (82599 bit 28,
    /// 82576 bit 31) instead of holding the packet buffer for every queue.
    const SRRCTL_DROP_EN: Field;
    /// Offset of receive queue `q`'s [`RxBlock`].
    fn rx_block(q: u16) -> usize;
    /// Offset of transmit queue `q`'s [`TxBlock`].
    fn tx_block(q: u16) -> usize;
    /// Offset of SRRCTL(`q`).
    fn srrctl(q: u16) -> usize;
}

/// Programs receive queue `q` (ring at `phys`, `bytes` long) without enabling it:
/// ring base and length, SRRCTL (advanced one-buffer descriptors, `buf_kib` KiB
/// buffers, DROP_EN), head = tail = 0 (82599 §4.6.7.1 steps 1–4).
pub fn program_rx<M: QueueMap, W: Mmio>(bar: &W, q: u16, phys: u64, bytes: u32, buf_kib: u32) {
    let r = Regs::new(bar);
    let b = M::rx_block(q);
    r.write(b + rxq::RDBAL, phys as u32);
    r.write(b + rxq::RDBAH, (phys >> 32) as u32);
    r.write(b + rxq::RDLEN, bytes);
    r.modify(M::srrctl(q), |v| {
        let v = SRRCTL_BSIZEPACKET.set(v, buf_kib);
        let v = SRRCTL_BSIZEHEADER.set(v, 0);
        let v = SRRCTL_DESCTYPE.set(v, DESCTYPE_ADV_ONE_BUFFER);
        v | M::SRRCTL_DROP_EN.mask()
    });
    r.write(b + rxq::RDH, 0);
    r.write(b + rxq::RDT, 0);
}

/// Sets RXDCTL(`q`).ENABLE and waits until it reads back set (82599 §4.6.7.1: "Poll the
/// RXDCTL register until the Enable bit is set. The tail should not be bumped before
/// this bit was read as 1b.").
pub fn enable_rx<M: QueueMap, W: Mmio, C: Clock + ?Sized>(
    bar: &W,
    clock: &C,
    q: u16,
    timeout: Duration,
) -> Result<(), Timeout> {
    let r = Regs::new(bar);
    let off = M::rx_block(q) + rxq::RXDCTL;
    r.set_bits(off, &[DCTL_ENABLE]);
    poll_until(clock, timeout, || r.is_set(off, DCTL_ENABLE))
}

/// Programs transmit queue `q`: ring base and length, head = tail = 0, thresholds
/// (PTHRESH 6:0, HTHRESH 14:8, WTHRESH 22:16; WTHRESH 0 = write back every RS
/// descriptor at once) without enabling it (82599 §4.6.8.1, 82576 §4.5.10).
pub fn program_tx<M: QueueMap, W: Mmio>(bar: &W, q: u16, phys: u64, bytes: u32, pthresh: u32, hthresh: u32) {
    const PTHRESH: Field = Field::new(0, 7);
    const HTHRESH: Field = Field::new(8, 7);
    const WTHRESH: Field = Field::new(16, 7);
    let r = Regs::new(bar);
    let b = M::tx_block(q);
    r.write(b + txq::TDBAL, phys as u32);
    r.write(b + txq::TDBAH, (phys >> 32) as u32);
    r.write(b + txq::TDLEN, bytes);
    r.write(b + txq::TDH, 0);
    r.write(b + txq::TDT, 0);
    r.modify(b + txq::TXDCTL, |v| WTHRESH.set(HTHRESH.set(PTHRESH.set(v, pthresh), hthresh), 0));
}

/// Sets TXDCTL(`q`).ENABLE and waits until it reads back set (82599 §4.6.8.1: "poll
/// the TXDCTL register until the Enable bit is set").
pub fn enable_tx<M: QueueMap, W: Mmio, C: Clock + ?Sized>(
    bar: &W,
    clock: &C,
    q: u16,
    timeout: Duration,
) -> Result<(), Timeout> {
    let r = Regs::new(bar);
    let off = M::tx_block(q) + txq::TXDCTL;
    r.set_bits(off, &[DCTL_ENABLE]);
    poll_until(clock, timeout, || r.is_set(off, DCTL_ENABLE))
}

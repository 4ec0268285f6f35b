//! Per-queue register blocks and their programming, shared by ixgbe and igb.
//!
//! Both devices give every queue a 0x40-byte block with the same skeleton (82599
//! §8.2.3.8 / §8.2.3.9, 82576 §8.10 / §8.12): ring base low/high, ring length, head,
//! tail and a control register with an ENABLE bit 25. Where the blocks start, and
//! where SRRCTL lives (and its DROP_EN bit), differs: a [`QueueMap`] per device says
//! so.

use cadence_core::time::{Clock, Duration, Timeout, poll_until};

use crate::hal::Mmio;
use crate::reg::{Block, Field, Regs, Rw, Single, Value};
use crate::registers;

/// The space of one receive queue's register block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxBlock {}

/// The space of one transmit queue's register block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxBlock {}

registers! {
    /// RDBAL: ring base, low 32 bits (128-byte aligned: bits 6:0 are 0).
    pub RDBAL: Rw<u32> @ 0x00 in RxBlock {}
    /// RDBAH: ring base, high 32 bits.
    pub RDBAH: Rw<u32> @ 0x04 in RxBlock {}
    /// RDLEN: ring bytes, a multiple of 128.
    pub RDLEN: Rw<u32> @ 0x08 in RxBlock {}
    /// RDH: head, advanced by the device.
    pub RDH: Rw<u32> @ 0x10 in RxBlock {}
    /// RDT: tail, written by the driver.
    pub RDT: Rw<u32> @ 0x18 in RxBlock {}
    /// RXDCTL: queue control.
    pub RXDCTL: Rw<u32> @ 0x28 in RxBlock {
        /// Queue enable (reads back 1 once the queue runs).
        ENABLE: 25,
    }

    /// TDBAL: ring base, low 32 bits.
    pub TDBAL: Rw<u32> @ 0x00 in TxBlock {}
    /// TDBAH: ring base, high 32 bits.
    pub TDBAH: Rw<u32> @ 0x04 in TxBlock {}
    /// TDLEN: ring bytes, a multiple of 128.
    pub TDLEN: Rw<u32> @ 0x08 in TxBlock {}
    /// TDH: head.
    pub TDH: Rw<u32> @ 0x10 in TxBlock {}
    /// TDT: tail.
    pub TDT: Rw<u32> @ 0x18 in TxBlock {}
    /// TXDCTL: thresholds and queue enable.
    pub TXDCTL: Rw<u32> @ 0x28 in TxBlock {
        /// Prefetch threshold.
        PTHRESH: 6:0,
        /// Host threshold.
        HTHRESH: 14:8,
        /// Write-back threshold (0: write back every RS descriptor at once).
        WTHRESH: 22:16,
        /// Queue enable.
        ENABLE: 25,
    }
    /// TDWBAL: head write-back address (unused: descriptor write-back is used).
    pub TDWBAL: Rw<u32> @ 0x38 in TxBlock {}
}

/// DESCTYPE 001b: advanced descriptor, one buffer.
pub const DESCTYPE_ADV_ONE_BUFFER: u64 = 0b001;

/// Where a device keeps its queue registers.
pub trait QueueMap {
    /// Queues of each direction the device has.
    const QUEUES: u16;
    /// The device's SRRCTL (82599 §8.2.3.8.7 at block + 0x14, 82576 §8.10.2 at block +
    /// 0x0C).
    type Srrctl: crate::reg::Register<Space = RxBlock, Shape = Single, Access = Rw>;
    /// SRRCTL.BSIZEPACKET 6:0 in 1 KiB units.
    const SRRCTL_BSIZEPACKET: Field<Self::Srrctl>;
    /// SRRCTL.BSIZEHEADER 13:8 in 64-byte units (no header split: 0).
    const SRRCTL_BSIZEHEADER: Field<Self::Srrctl>;
    /// SRRCTL.DESCTYPE 27:25.
    const SRRCTL_DESCTYPE: Field<Self::Srrctl>;
    /// SRRCTL.DROP_EN: drop a frame when its queue has no descriptor (82599 bit 28,
    /// 82576 bit 31) instead of holding the packet buffer for every queue.
    const SRRCTL_DROP_EN: Field<Self::Srrctl>;
    /// SRRCTL itself.
    const SRRCTL: Self::Srrctl;
    /// Receive queue `q`'s block, `None` past the device's queues.
    fn rx_block(q: u16) -> Option<Block<RxBlock>>;
    /// Transmit queue `q`'s block, `None` past the device's queues.
    fn tx_block(q: u16) -> Option<Block<TxBlock>>;
}

/// Programs receive queue `q`'s block `b` (ring at `phys`, `bytes` long) without
/// enabling it: ring base and length, SRRCTL (advanced one-buffer descriptors,
/// `buf_kib` KiB buffers, DROP_EN), head = tail = 0 (82599 §4.6.7.1 steps 1–4).
pub fn program_rx<M: QueueMap, W: Mmio>(bar: &W, b: Block<RxBlock>, phys: u64, bytes: u32, buf_kib: u32) {
    let r = Regs::new(bar);
    r.write(b.reg(RDBAL), Value::new(phys & 0xFFFF_FFFF));
    r.write(b.reg(RDBAH), Value::new(phys >> 32));
    r.write(b.reg(RDLEN), Value::new(bytes.into()));
    r.modify(b.reg(M::SRRCTL), |v| {
        v.with(M::SRRCTL_BSIZEPACKET, buf_kib.into())
            .with(M::SRRCTL_BSIZEHEADER, 0)
            .with(M::SRRCTL_DESCTYPE, DESCTYPE_ADV_ONE_BUFFER)
            .set(M::SRRCTL_DROP_EN)
    });
    r.write(b.reg(RDH), Value::new(0));
    r.write(b.reg(RDT), Value::new(0));
}

/// Sets RXDCTL.ENABLE of block `b` and waits until it reads back set (82599 §4.6.7.1:
/// "Poll the RXDCTL register until the Enable bit is set. The tail should not be bumped
/// before this bit was read as 1b.").
pub fn enable_rx<W: Mmio, C: Clock + ?Sized>(
    bar: &W,
    clock: &C,
    b: Block<RxBlock>,
    timeout: Duration,
) -> Result<(), Timeout> {
    let r = Regs::new(bar);
    r.modify(b.reg(RXDCTL), |v| v.set(RXDCTL::ENABLE));
    poll_until(clock, timeout, || r.is_set(b.reg(RXDCTL), RXDCTL::ENABLE))
}

/// Programs transmit queue block `b`: ring base and length, head = tail = 0,
/// thresholds (WTHRESH 0 = write back every RS descriptor at once) without enabling it
/// (82599 §4.6.8.1, 82576 §4.5.10).
pub fn program_tx<W: Mmio>(bar: &W, b: Block<TxBlock>, phys: u64, bytes: u32, pthresh: u64, hthresh: u64) {
    let r = Regs::new(bar);
    r.write(b.reg(TDBAL), Value::new(phys & 0xFFFF_FFFF));
    r.write(b.reg(TDBAH), Value::new(phys >> 32));
    r.write(b.reg(TDLEN), Value::new(bytes.into()));
    r.write(b.reg(TDH), Value::new(0));
    r.write(b.reg(TDT), Value::new(0));
    r.modify(b.reg(TXDCTL), |v| {
        v.with(TXDCTL::PTHRESH, pthresh).with(TXDCTL::HTHRESH, hthresh).with(TXDCTL::WTHRESH, 0)
    });
}

/// Sets TXDCTL.ENABLE of block `b` and waits until it reads back set (82599 §4.6.8.1:
/// "poll the TXDCTL register until the Enable bit is set").
pub fn enable_tx<W: Mmio, C: Clock + ?Sized>(
    bar: &W,
    clock: &C,
    b: Block<TxBlock>,
    timeout: Duration,
) -> Result<(), Timeout> {
    let r = Regs::new(bar);
    r.modify(b.reg(TXDCTL), |v| v.set(TXDCTL::ENABLE));
    poll_until(clock, timeout, || r.is_set(b.reg(TXDCTL), TXDCTL::ENABLE))
}

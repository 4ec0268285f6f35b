//! The control virtqueue of a virtio-net device (virtio 1.2 §5.1.6.5), driver side:
//! one command at a time, waited for with a deadline.
//!
//! A command is a two-descriptor chain over one small DMA buffer (§5.1.6.5):
//!
//! ```text
//! struct virtio_net_ctrl {
//!     u8 class;                           // driver-readable: descriptor 0
//!     u8 command;
//!     u8 command-specific-data[];
//!     u8 ack;                             // device-writable: descriptor 1
//! };
//! ```
//!
//! "The driver MUST place the device-writable part after the driver-readable part"
//! (§2.7.4.2 for chains in general), so the ack is a separate, device-writable
//! descriptor at a fixed offset of the buffer. The ack starts as `0xFF` (neither
//! `VIRTIO_NET_OK` nor `VIRTIO_NET_ERR`), so a device that completes the chain
//! without writing it is not taken for one that said OK.
//!
//! Only one command is ever outstanding, so the chain always uses descriptors 0 and 1.
//! A command that timed out stays outstanding (the device still owns its
//! descriptors): the next command first looks for its completion and is refused
//! with [`CtrlError::Busy`] while there is none.

use core::fmt;

use cadence_core::time::{Clock, Duration, poll_until};

use super::mq::ACK_OK;
use super::queue::{
    ALLOC_ALIGN, AVAIL_F_NO_INTERRUPT, DESC_F_NEXT, DESC_F_WRITE, USED_F_NO_NOTIFY, avail, desc, layout, used,
};
use crate::hal::{Dma, DmaAlloc, DmaError, Mmio};

/// Bytes of the command buffer; the ack sits in its last byte.
pub(crate) const BUF_LEN: usize = 512;
/// Where the ack byte lives in the command buffer.
const ACK_OFF: usize = BUF_LEN - 1;
/// Longest `class, command, data` part a command may have.
pub(crate) const MAX_COMMAND: usize = ACK_OFF;
/// The ack before the device writes it.
const ACK_UNSET: u8 = 0xFF;

/// Why a control command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CtrlError {
    /// The device did not return the command within the deadline.
    Timeout,
    /// An earlier command timed out and the device still has not returned it.
    Busy,
    /// The device returned the command with this ack instead of `VIRTIO_NET_OK`
    /// (`VIRTIO_NET_ERR` = 1; `0xFF`: it wrote no ack).
    Refused(u8),
    /// The device's used entry named a descriptor other than the command's head.
    BadCompletion,
    /// The command is longer than the command buffer.
    TooLong,
}

impl fmt::Display for CtrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CtrlError::Timeout => f.write_str("control command: no answer from the device in time"),
            CtrlError::Busy => f.write_str("control command: an earlier command is still outstanding"),
            CtrlError::Refused(ack) => write!(f, "control command: device answered ack {ack} (not VIRTIO_NET_OK)"),
            CtrlError::BadCompletion => f.write_str("control command: device returned a descriptor it did not own"),
            CtrlError::TooLong => f.write_str("control command: longer than the command buffer"),
        }
    }
}

/// A control virtqueue with its command buffer and doorbell.
#[derive(Debug)]
pub(crate) struct CtrlQueue<W, R> {
    ring: R,
    buf: R,
    size: u16,
    avail_off: usize,
    used_off: usize,
    doorbell: W,
    index: u16,
    next_avail: u16,
    last_used: u16,
    /// A command timed out and its descriptors are still the device's.
    outstanding: bool,
}

impl<W: Mmio, R: Dma> CtrlQueue<W, R> {
    /// Allocates a queue of `size` entries (a power of two, at least 2: a command is a
    /// chain of two) and the command buffer from `dma`. `doorbell` and `index` are the
    /// queue's notification address and virtqueue index.
    pub(crate) fn try_new<A: DmaAlloc<Region = R>>(
        dma: &mut A,
        size: u16,
        doorbell: W,
        index: u16,
    ) -> Result<Self, DmaError> {
        debug_assert!(size.is_power_of_two() && size >= 2);
        let (avail_off, used_off, total) = layout(size);
        let ring = dma.alloc(total, ALLOC_ALIGN)?;
        let buf = dma.alloc(BUF_LEN, 64)?;
        // §2.7.7: polled, no used-buffer notifications wanted.
        ring.write16(avail_off + avail::FLAGS, AVAIL_F_NO_INTERRUPT);
        Ok(Self {
            ring,
            buf,
            size,
            avail_off,
            used_off,
            doorbell,
            index,
            next_avail: 0,
            last_used: 0,
            outstanding: false,
        })
    }

    /// Physical address of the descriptor table (`queue_desc`).
    pub(crate) fn desc_phys(&self) -> u64 {
        self.ring.phys()
    }

    /// Physical address of the driver area (`queue_driver`).
    pub(crate) fn driver_phys(&self) -> u64 {
        self.ring.phys() + self.avail_off as u64
    }

    /// Physical address of the device area (`queue_device`).
    pub(crate) fn device_phys(&self) -> u64 {
        self.ring.phys() + self.used_off as u64
    }

    /// Sends `class`/`command` with `data` and waits (at most `timeout` on `clock`) for
    /// the device to return it; `Ok` when its ack is `VIRTIO_NET_OK`.
    pub(crate) fn command<C: Clock + ?Sized>(
        &mut self,
        clock: &C,
        timeout: Duration,
        class: u8,
        command: u8,
        data: &[u8],
    ) -> Result<(), CtrlError> {
        if 2 + data.len() > MAX_COMMAND {
            return Err(CtrlError::TooLong);
        }
        if self.outstanding {
            // The late answer to the timed-out command (if any) is dropped: its
            // caller already reported the failure.
            if self.used_idx() == self.last_used {
                return Err(CtrlError::Busy);
            }
            self.outstanding = false;
            self.take_used()?;
        }

        // The command bytes, and the ack preset to "not written".
        self.buf.write8(0, class);
        self.buf.write8(1, command);
        for (i, &b) in data.iter().enumerate() {
            self.buf.write8(2 + i, b);
        }
        self.buf.write8(ACK_OFF, ACK_UNSET);

        // §5.1.6.5: the readable part (class, command, data), then the writable ack.
        let head = 0usize;
        let d0 = head * desc::SIZE;
        self.ring.write64(d0 + desc::ADDR, self.buf.phys());
        self.ring.write32(d0 + desc::LEN, (2 + data.len()) as u32);
        self.ring.write16(d0 + desc::FLAGS, DESC_F_NEXT);
        self.ring.write16(d0 + desc::NEXT, 1);
        let d1 = desc::SIZE;
        self.ring.write64(d1 + desc::ADDR, self.buf.phys() + ACK_OFF as u64);
        self.ring.write32(d1 + desc::LEN, 1);
        self.ring.write16(d1 + desc::FLAGS, DESC_F_WRITE);
        self.ring.write16(d1 + desc::NEXT, 0);

        // §2.7.13.1: the head's index into the next available-ring slot.
        let slot = (self.next_avail % self.size) as usize;
        self.ring.write16(self.avail_off + avail::RING + slot * avail::ELEM, head as u16);
        self.next_avail = self.next_avail.wrapping_add(1);
        // §2.7.13: "The driver performs a suitable memory barrier to ensure the device
        // sees the updated descriptor table and available ring before the next step":
        // `dma_wmb` orders the buffer, descriptor and ring writes before the idx store.
        crate::hal::dma_wmb();
        self.ring.write16(self.avail_off + avail::IDX, self.next_avail);
        // §2.7.13: the idx store before the notification-suppression check (store →
        // load: a full fence).
        crate::hal::dma_mb();
        if self.ring.read16(self.used_off + used::FLAGS) & USED_F_NO_NOTIFY == 0 {
            // §4.1.5.2: the 16-bit virtqueue index to the queue's notify address.
            self.doorbell.write16(0, self.index);
        }

        // Wait for the used entry. The spec names no bound; QEMU answers during the
        // doorbell write itself.
        let last = self.last_used;
        if poll_until(clock, timeout, || self.ring.read16(self.used_off + used::IDX) != last).is_err() {
            self.outstanding = true;
            return Err(CtrlError::Timeout);
        }
        self.take_used()?;
        // The ack was written before the used idx (§2.7.8); the `dma_rmb` in
        // `take_used` keeps this read after the idx read.
        match self.buf.read8(ACK_OFF) {
            ACK_OK => Ok(()),
            ack => Err(CtrlError::Refused(ack)),
        }
    }

    /// The device's used index.
    fn used_idx(&self) -> u16 {
        self.ring.read16(self.used_off + used::IDX)
    }

    /// Consumes the next used entry (the device has published it); checks that it
    /// names the command's head descriptor.
    fn take_used(&mut self) -> Result<(), CtrlError> {
        // §2.7.14: read the used idx first, the element (and the ack it covers) after.
        crate::hal::dma_rmb();
        let slot = (self.last_used % self.size) as usize;
        let id = self.ring.read32(self.used_off + used::RING + slot * used::ELEM + used::ELEM_ID);
        self.last_used = self.last_used.wrapping_add(1);
        if id != 0 {
            return Err(CtrlError::BadCompletion);
        }
        Ok(())
    }
}

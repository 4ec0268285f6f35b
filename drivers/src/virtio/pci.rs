//! Finding the virtio structures in PCI configuration space (virtio 1.2 §4.1.4).
//!
//! A modern virtio-PCI function describes where its register structures live with
//! vendor-specific capabilities (`struct virtio_pci_cap`, capability ID 0x09): each
//! names a `cfg_type`, a memory BAR, and an offset and length inside that BAR.

use core::fmt;

use crate::hal::{PciFunction, pci};

/// `cfg_type` of the common configuration capability (§4.1.4).
const CAP_COMMON_CFG: u8 = 1;
/// `cfg_type` of the notification capability (§4.1.4).
const CAP_NOTIFY_CFG: u8 = 2;
/// `cfg_type` of the ISR status capability (§4.1.4).
const CAP_ISR_CFG: u8 = 3;
/// `cfg_type` of the device-specific configuration capability (§4.1.4).
const CAP_DEVICE_CFG: u8 = 4;

/// Byte offsets inside `struct virtio_pci_cap` (§4.1.4).
mod cap {
    /// `u8 cap_vndr`: the PCI capability ID (0x09).
    pub(super) const VNDR: u8 = 0;
    /// `u8 cap_next`: the next capability's offset.
    pub(super) const NEXT: u8 = 1;
    /// `u8 cap_len`: the length of this capability structure.
    pub(super) const LEN: u8 = 2;
    /// `u8 cfg_type`: which structure it describes.
    pub(super) const CFG_TYPE: u8 = 3;
    /// `u8 bar`: the BAR holding the structure.
    pub(super) const BAR: u8 = 4;
    /// `le32 offset`: where the structure starts inside the BAR.
    pub(super) const OFFSET: u8 = 8;
    /// `le32 length`: the structure's length.
    pub(super) const LENGTH: u8 = 12;
    /// Size of `struct virtio_pci_cap`.
    pub(super) const SIZE: u8 = 16;
    /// `le32 notify_off_multiplier` of `struct virtio_pci_notify_cap` (§4.1.4.4).
    pub(super) const NOTIFY_OFF_MULTIPLIER: u8 = 16;
    /// Size of `struct virtio_pci_notify_cap`.
    pub(super) const NOTIFY_SIZE: u8 = 20;
}

/// Most capabilities a walk visits: 192 bytes of capability space at 4 bytes each.
/// A longer chain is a loop.
const MAX_CAPS: usize = 48;

/// Where one virtio structure lives: a BAR and a byte range inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CapRegion {
    /// Memory BAR (0..=5).
    pub bar: u8,
    /// Offset of the structure inside the BAR.
    pub offset: u32,
    /// Length of the structure.
    pub length: u32,
}

/// The virtio structures of one function, as its capabilities describe them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct VirtioCaps {
    /// Common configuration (`VIRTIO_PCI_CAP_COMMON_CFG`).
    pub common: CapRegion,
    /// Notification area (`VIRTIO_PCI_CAP_NOTIFY_CFG`).
    pub notify: CapRegion,
    /// Bytes between the doorbells of queues whose `queue_notify_off` differ by one (§4.1.4.4).
    pub notify_off_multiplier: u32,
    /// ISR status (`VIRTIO_PCI_CAP_ISR_CFG`); unused by this polled driver.
    pub isr: Option<CapRegion>,
    /// Device-specific configuration (`VIRTIO_PCI_CAP_DEVICE_CFG`).
    pub device: Option<CapRegion>,
}

/// Why the capability walk failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CapError {
    /// The status register says the function has no capability list.
    NoCapabilityList,
    /// The capability chain does not end (a loop).
    Loop,
    /// No usable common configuration capability.
    NoCommonCfg,
    /// No usable notification capability.
    NoNotifyCfg,
}

impl fmt::Display for CapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapError::NoCapabilityList => "PCI function has no capability list",
            CapError::Loop => "PCI capability list loops",
            CapError::NoCommonCfg => "no virtio common configuration capability (not a modern virtio device)",
            CapError::NoNotifyCfg => "no virtio notification capability",
        })
    }
}

/// Reads a little-endian `u32` at `off` of configuration space, one byte at a time
/// (capability fields are not guaranteed to be 4-byte aligned).
fn config_read32_unaligned<P: PciFunction>(pci: &P, off: u8) -> u32 {
    (0..4u8).fold(0, |acc, i| acc | (pci.config_read8(off.wrapping_add(i)) as u32) << (8 * i))
}

/// Walks the capability list of `pci` and collects the virtio structures.
///
/// Per §4.1.4: capabilities with a reserved `cfg_type` or a BAR above 5 are ignored,
/// and the first usable instance of each type wins ("The driver SHOULD use the first
/// instance of each virtio structure type they can support").
pub fn find_caps<P: PciFunction>(pci: &P) -> Result<VirtioCaps, CapError> {
    if pci.config_read32(pci::COMMAND) & pci::STATUS_CAP_LIST == 0 {
        return Err(CapError::NoCapabilityList);
    }
    let mut common = None;
    let mut notify = None;
    let mut isr = None;
    let mut device = None;

    // PCI 3.0 §6.7: the bottom two bits of a capability pointer are reserved.
    let mut ptr = pci.config_read8(pci::CAP_PTR) & !3;
    let mut visited = 0;
    while ptr != 0 {
        visited += 1;
        if visited > MAX_CAPS {
            return Err(CapError::Loop);
        }
        let next = pci.config_read8(ptr.wrapping_add(cap::NEXT)) & !3;
        // A capability must fit in the 256 bytes of configuration space.
        let fits = |size: u8| ptr as usize + size as usize <= 256;
        if fits(cap::SIZE) && pci.config_read8(ptr + cap::VNDR) == pci::CAP_VENDOR {
            let len = pci.config_read8(ptr + cap::LEN);
            let kind = pci.config_read8(ptr + cap::CFG_TYPE);
            let region = CapRegion {
                bar: pci.config_read8(ptr + cap::BAR),
                offset: config_read32_unaligned(pci, ptr + cap::OFFSET),
                length: config_read32_unaligned(pci, ptr + cap::LENGTH),
            };
            if region.bar <= 5 && len >= cap::SIZE {
                match kind {
                    CAP_COMMON_CFG if common.is_none() => common = Some(region),
                    CAP_NOTIFY_CFG if notify.is_none() && len >= cap::NOTIFY_SIZE && fits(cap::NOTIFY_SIZE) => {
                        let mult = config_read32_unaligned(pci, ptr + cap::NOTIFY_OFF_MULTIPLIER);
                        notify = Some((region, mult));
                    }
                    CAP_ISR_CFG if isr.is_none() => isr = Some(region),
                    CAP_DEVICE_CFG if device.is_none() => device = Some(region),
                    _ => {}
                }
            }
        }
        ptr = next;
    }

    let common = common.ok_or(CapError::NoCommonCfg)?;
    let (notify, notify_off_multiplier) = notify.ok_or(CapError::NoNotifyCfg)?;
    Ok(VirtioCaps { common, notify, notify_off_multiplier, isr, device })
}

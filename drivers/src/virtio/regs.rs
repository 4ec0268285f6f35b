//! Register layouts and bit definitions of the modern virtio-PCI transport and the
//! network device (virtio 1.2 §4.1.4.3, §2.1, §6, §5.1.3, §5.1.4).
//!
//! The register blocks are declared as `#[repr(C)]` structs of `volatile_register`
//! fields purely for their layout: the driver never forms a reference to device
//! memory. It reaches the registers through [`crate::hal::Mmio`] at the offsets
//! derived here with `offset_of!`, and a compile-time assert pins every offset to
//! the one the spec gives.

use core::mem::offset_of;
use volatile_register::{RO, RW};

/// `struct virtio_pci_common_cfg` (virtio 1.2 §4.1.4.3): the common configuration
/// structure, found through the `VIRTIO_PCI_CAP_COMMON_CFG` capability.
///
/// Layout only; never instantiated.
#[repr(C)]
#[allow(dead_code)] // Layout only: the fields' offsets are used, never the fields.
pub(crate) struct CommonCfg {
    /// 0x00, §4.1.4.3: selects which 32-bit window of the device features
    /// `device_feature` shows (0 = bits 0..31, 1 = bits 32..63).
    device_feature_select: RW<u32>,
    /// 0x04, §4.1.4.3: the device's feature bits in the selected window.
    device_feature: RO<u32>,
    /// 0x08, §4.1.4.3: selects which 32-bit window of the driver features
    /// `driver_feature` writes.
    driver_feature_select: RW<u32>,
    /// 0x0C, §4.1.4.3: the feature bits the driver accepts, in the selected window.
    driver_feature: RW<u32>,
    /// 0x10, §4.1.4.3: MSI-X vector for configuration changes (`NO_VECTOR` = none).
    config_msix_vector: RW<u16>,
    /// 0x12, §4.1.4.3: number of virtqueues the device supports.
    num_queues: RO<u16>,
    /// 0x14, §4.1.4.3 and §2.1: device status; writing 0 resets the device.
    device_status: RW<u8>,
    /// 0x15, §4.1.4.3 and §2.5.1: changes whenever the device configuration changes.
    config_generation: RO<u8>,
    /// 0x16, §4.1.4.3: selects the virtqueue the `queue_*` fields below refer to.
    queue_select: RW<u16>,
    /// 0x18, §4.1.4.3: on reset the maximum queue size (0 = queue unavailable); the
    /// driver may write a smaller power of two (§2.7).
    queue_size: RW<u16>,
    /// 0x1A, §4.1.4.3: MSI-X vector for the selected queue (`NO_VECTOR` = none).
    queue_msix_vector: RW<u16>,
    /// 0x1C, §4.1.4.3: 1 enables the selected queue; the driver never writes 0.
    queue_enable: RW<u16>,
    /// 0x1E, §4.1.4.3 and §4.1.4.4: the selected queue's notification offset, in
    /// units of the notify capability's `notify_off_multiplier`.
    queue_notify_off: RO<u16>,
    /// 0x20, §4.1.4.3 and §2.7: physical address of the descriptor table.
    queue_desc: RW<u64>,
    /// 0x28, §4.1.4.3 and §2.7: physical address of the driver area (avail ring).
    queue_driver: RW<u64>,
    /// 0x30, §4.1.4.3 and §2.7: physical address of the device area (used ring).
    queue_device: RW<u64>,
    /// 0x38, §4.1.4.3: notification data (only with `VIRTIO_F_NOTIF_CONFIG_DATA`).
    queue_notify_data: RO<u16>,
    /// 0x3A, §4.1.4.3: per-queue reset (only with `VIRTIO_F_RING_RESET`).
    queue_reset: RW<u16>,
}

const _: () = assert!(offset_of!(CommonCfg, device_feature_select) == 0x00);
const _: () = assert!(offset_of!(CommonCfg, device_feature) == 0x04);
const _: () = assert!(offset_of!(CommonCfg, driver_feature_select) == 0x08);
const _: () = assert!(offset_of!(CommonCfg, driver_feature) == 0x0C);
const _: () = assert!(offset_of!(CommonCfg, config_msix_vector) == 0x10);
const _: () = assert!(offset_of!(CommonCfg, num_queues) == 0x12);
const _: () = assert!(offset_of!(CommonCfg, device_status) == 0x14);
const _: () = assert!(offset_of!(CommonCfg, config_generation) == 0x15);
const _: () = assert!(offset_of!(CommonCfg, queue_select) == 0x16);
const _: () = assert!(offset_of!(CommonCfg, queue_size) == 0x18);
const _: () = assert!(offset_of!(CommonCfg, queue_msix_vector) == 0x1A);
const _: () = assert!(offset_of!(CommonCfg, queue_enable) == 0x1C);
const _: () = assert!(offset_of!(CommonCfg, queue_notify_off) == 0x1E);
const _: () = assert!(offset_of!(CommonCfg, queue_desc) == 0x20);
const _: () = assert!(offset_of!(CommonCfg, queue_driver) == 0x28);
const _: () = assert!(offset_of!(CommonCfg, queue_device) == 0x30);
const _: () = assert!(offset_of!(CommonCfg, queue_notify_data) == 0x38);
const _: () = assert!(offset_of!(CommonCfg, queue_reset) == 0x3A);

/// Offsets into the common configuration window, derived from [`CommonCfg`].
pub(crate) mod common {
    use super::{CommonCfg, offset_of};

    pub(crate) const DEVICE_FEATURE_SELECT: usize = offset_of!(CommonCfg, device_feature_select);
    pub(crate) const DEVICE_FEATURE: usize = offset_of!(CommonCfg, device_feature);
    pub(crate) const DRIVER_FEATURE_SELECT: usize = offset_of!(CommonCfg, driver_feature_select);
    pub(crate) const DRIVER_FEATURE: usize = offset_of!(CommonCfg, driver_feature);
    pub(crate) const CONFIG_MSIX_VECTOR: usize = offset_of!(CommonCfg, config_msix_vector);
    pub(crate) const NUM_QUEUES: usize = offset_of!(CommonCfg, num_queues);
    pub(crate) const DEVICE_STATUS: usize = offset_of!(CommonCfg, device_status);
    pub(crate) const CONFIG_GENERATION: usize = offset_of!(CommonCfg, config_generation);
    pub(crate) const QUEUE_SELECT: usize = offset_of!(CommonCfg, queue_select);
    pub(crate) const QUEUE_SIZE: usize = offset_of!(CommonCfg, queue_size);
    pub(crate) const QUEUE_MSIX_VECTOR: usize = offset_of!(CommonCfg, queue_msix_vector);
    pub(crate) const QUEUE_ENABLE: usize = offset_of!(CommonCfg, queue_enable);
    pub(crate) const QUEUE_NOTIFY_OFF: usize = offset_of!(CommonCfg, queue_notify_off);
    pub(crate) const QUEUE_DESC: usize = offset_of!(CommonCfg, queue_desc);
    pub(crate) const QUEUE_DRIVER: usize = offset_of!(CommonCfg, queue_driver);
    pub(crate) const QUEUE_DEVICE: usize = offset_of!(CommonCfg, queue_device);
    /// Bytes of the common configuration the driver touches (up to and including
    /// `queue_device`); a capability shorter than this is refused.
    pub(crate) const MIN_LEN: usize = QUEUE_DEVICE + 8;
}

/// `struct virtio_net_config` (virtio 1.2 §5.1.4), the head of the network
/// device's configuration window (device-specific capability). Layout only.
#[repr(C)]
#[allow(dead_code)] // Layout only: the fields' offsets are used, never the fields.
pub(crate) struct NetConfig {
    /// 0x00, §5.1.4: the MAC address; valid when `VIRTIO_NET_F_MAC` is negotiated.
    mac: [RO<u8>; 6],
    /// 0x06, §5.1.4: link status; valid with `VIRTIO_NET_F_STATUS`.
    status: RO<u16>,
    /// 0x08, §5.1.4: queue pairs; valid with `VIRTIO_NET_F_MQ` or `VIRTIO_NET_F_RSS`.
    max_virtqueue_pairs: RO<u16>,
    /// 0x0A, §5.1.4: the device's MTU; valid with `VIRTIO_NET_F_MTU`.
    mtu: RO<u16>,
    /// 0x0C, §5.1.4: link speed in Mbit/s; valid with `VIRTIO_NET_F_SPEED_DUPLEX`.
    speed: RO<u32>,
    /// 0x10, §5.1.4: duplex; valid with `VIRTIO_NET_F_SPEED_DUPLEX`.
    duplex: RO<u8>,
    /// 0x11, §5.1.4: longest RSS key the device takes; valid with `VIRTIO_NET_F_RSS`
    /// (or `HASH_REPORT`).
    rss_max_key_size: RO<u8>,
    /// 0x12, §5.1.4: longest RSS indirection table; valid with `VIRTIO_NET_F_RSS`.
    rss_max_indirection_table_length: RO<u16>,
    /// 0x14, §5.1.4: the `VIRTIO_NET_HASH_TYPE_*` bits the device can hash by; valid
    /// with `VIRTIO_NET_F_RSS` (or `HASH_REPORT`).
    supported_hash_types: RO<u32>,
}

const _: () = assert!(offset_of!(NetConfig, mac) == 0x00);
const _: () = assert!(offset_of!(NetConfig, status) == 0x06);
const _: () = assert!(offset_of!(NetConfig, max_virtqueue_pairs) == 0x08);
const _: () = assert!(offset_of!(NetConfig, mtu) == 0x0A);
const _: () = assert!(offset_of!(NetConfig, speed) == 0x0C);
const _: () = assert!(offset_of!(NetConfig, duplex) == 0x10);
const _: () = assert!(offset_of!(NetConfig, rss_max_key_size) == 0x11);
const _: () = assert!(offset_of!(NetConfig, rss_max_indirection_table_length) == 0x12);
const _: () = assert!(offset_of!(NetConfig, supported_hash_types) == 0x14);
const _: () = assert!(core::mem::size_of::<NetConfig>() == 0x18);

/// Offsets into the network device configuration window, derived from [`NetConfig`].
pub(crate) mod net_cfg {
    use super::{NetConfig, offset_of};

    pub(crate) const MAC: usize = offset_of!(NetConfig, mac);
    /// Bytes of the MAC.
    pub(crate) const MAC_LEN: usize = 6;
    pub(crate) const MAX_VIRTQUEUE_PAIRS: usize = offset_of!(NetConfig, max_virtqueue_pairs);
    pub(crate) const RSS_MAX_KEY_SIZE: usize = offset_of!(NetConfig, rss_max_key_size);
    pub(crate) const RSS_MAX_INDIRECTION_TABLE_LENGTH: usize = offset_of!(NetConfig, rss_max_indirection_table_length);
    pub(crate) const SUPPORTED_HASH_TYPES: usize = offset_of!(NetConfig, supported_hash_types);
    pub(crate) const SPEED: usize = offset_of!(NetConfig, speed);
    /// Bytes of the device configuration the driver reads with RSS (all of [`NetConfig`]).
    pub(crate) const RSS_LEN: usize = SUPPORTED_HASH_TYPES + 4;
}

/// The device status field (virtio 1.2 §2.1): a set of flag bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeviceStatus(pub u8);

impl DeviceStatus {
    /// §2.1: the guest OS has found the device and recognized it as a valid virtio device.
    pub const ACKNOWLEDGE: u8 = 1 << 0;
    /// §2.1: the guest OS knows how to drive the device.
    pub const DRIVER: u8 = 1 << 1;
    /// §2.1: the driver is set up and ready to drive the device.
    pub const DRIVER_OK: u8 = 1 << 2;
    /// §2.1: the driver has acknowledged the features it understands; negotiation is complete.
    pub const FEATURES_OK: u8 = 1 << 3;
    /// §2.1: the device has hit an error from which it cannot recover without a reset.
    pub const DEVICE_NEEDS_RESET: u8 = 1 << 6;
    /// §2.1: something went wrong in the guest and it has given up on the device.
    pub const FAILED: u8 = 1 << 7;

    /// Whether every bit of `bits` is set.
    pub const fn contains(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

/// Feature bits (virtio 1.2 §6 reserved bits, §5.1.3 network device bits), as masks
/// of the 64-bit feature word.
pub mod feature {
    /// §5.1.3 bit 0: the device handles packets with partial checksum (TX offload).
    pub const NET_CSUM: u64 = 1 << 0;
    /// §5.1.3 bit 1: the driver handles packets with partial checksum (RX offload).
    pub const NET_GUEST_CSUM: u64 = 1 << 1;
    /// §5.1.3 bit 5: the device has given a MAC address in its configuration.
    pub const NET_MAC: u64 = 1 << 5;
    /// §5.1.3 bit 15: the driver can merge receive buffers (changes the RX header use).
    pub const NET_MRG_RXBUF: u64 = 1 << 15;
    /// §5.1.3 bit 16: the configuration `status` field is valid.
    pub const NET_STATUS: u64 = 1 << 16;
    /// §5.1.3 bit 17: a control virtqueue exists.
    pub const NET_CTRL_VQ: u64 = 1 << 17;
    /// §5.1.3 bit 22: multiple queue pairs with automatic steering (requires `NET_CTRL_VQ`).
    pub const NET_MQ: u64 = 1 << 22;
    /// §5.1.3 bit 57: the device reports the packet's hash in a longer header.
    pub const NET_HASH_REPORT: u64 = 1 << 57;
    /// §5.1.3 bit 60: receive-side scaling, steered by the driver's RSS configuration
    /// (requires `NET_CTRL_VQ`).
    pub const NET_RSS: u64 = 1 << 60;
    /// §5.1.3 bit 63: the configuration's `speed` and `duplex` fields are valid.
    pub const NET_SPEED_DUPLEX: u64 = 1 << 63;
    /// §6 bit 28: indirect descriptors.
    pub const RING_INDIRECT_DESC: u64 = 1 << 28;
    /// §6 bit 29: the `used_event`/`avail_event` fields.
    pub const RING_EVENT_IDX: u64 = 1 << 29;
    /// §6 bit 32: compliance with virtio 1.x (no legacy interface). Required by this driver.
    pub const VERSION_1: u64 = 1 << 32;
    /// §6 bit 33: the device accesses memory through the platform's DMA translation.
    /// The driver hands out bus addresses ([`crate::hal::Dma::phys`]), so accepting it is correct.
    pub const ACCESS_PLATFORM: u64 = 1 << 33;
    /// §6 bit 34: packed virtqueues.
    pub const RING_PACKED: u64 = 1 << 34;
}

/// "No MSI-X vector" (virtio 1.2 §4.1.4.3): written to `config_msix_vector` and
/// every `queue_msix_vector`; this driver polls.
pub(crate) const NO_VECTOR: u16 = 0xFFFF;

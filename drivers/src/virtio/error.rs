//! Why bringing up a virtio-net device failed, by step.

use core::fmt;

use super::ctrl::CtrlError;
use super::pci::CapError;
use crate::hal::{BarError, DmaError};

/// Why [`super::VirtioNet::try_new`] failed. Each variant names the step of the
/// initialization (virtio 1.2 §3.1.1) that went wrong. Once the device has been
/// touched, a failure also sets `FAILED` in its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitError {
    /// The PCI IDs are not virtio-net's (vendor 0x1af4, device 0x1041, or 0x1000 with
    /// subsystem 1).
    NotVirtioNet {
        /// The vendor ID found.
        vendor: u16,
        /// The device ID found.
        device: u16,
    },
    /// Walking the virtio capabilities (§4.1.4) failed.
    Capability(CapError),
    /// The common configuration capability is shorter than the fields the driver uses.
    CommonCfgTooShort,
    /// Mapping the common configuration window failed.
    MapCommonCfg(BarError),
    /// §3.1.1 step 1: the device did not read back status 0 after a reset in time.
    ResetTimeout,
    /// §3.1.1 step 4: the device does not offer `VIRTIO_F_VERSION_1`, so it is a legacy
    /// device this driver cannot drive.
    NoVersion1,
    /// §3.1.1 step 4: the device offers no MAC (`VIRTIO_NET_F_MAC`) and none was configured.
    NoMac,
    /// §3.1.1 step 6: the device cleared `FEATURES_OK`: it refused the feature subset.
    FeaturesRefused,
    /// A field of the device configuration is needed (the MAC with `VIRTIO_NET_F_MAC`,
    /// `max_virtqueue_pairs` with `MQ`/`RSS`, the RSS limits with `RSS`) but the device
    /// has no configuration capability, or one too short to hold it.
    NoDeviceCfg,
    /// Mapping the device configuration window failed.
    MapDeviceCfg(BarError),
    /// §2.5.1: the configuration generation kept changing while the device
    /// configuration (MAC, queue pairs, RSS limits) was read.
    ConfigTimeout,
    /// §3.1.1 step 7: the device has fewer virtqueues than the queue pairs need.
    TooFewQueues {
        /// Virtqueues the device has (`num_queues`).
        have: u16,
        /// Virtqueues needed.
        need: u16,
    },
    /// §4.1.5.1.3: the virtqueue's maximum size reads 0 (queue unavailable).
    QueueUnavailable(u16),
    /// Allocating a virtqueue's rings failed.
    RingAlloc(DmaError),
    /// The virtqueue's notification address lies outside the notification capability.
    NotifyOutOfRange(u16),
    /// Mapping a virtqueue's notification address failed.
    MapNotify(BarError),
    /// The control virtqueue holds fewer than 2 entries, too few for a command chain.
    CtrlQueueTooSmall(u16),
    /// §5.1.6.5.5 / §5.1.6.5.7: the multiqueue command (`VQ_PAIRS_SET` or `RSS_CONFIG`)
    /// at bring-up failed.
    Multiqueue(CtrlError),
    /// Frames of `max_frame` bytes are wanted (`Config::max_frame`), longer than a receive
    /// buffer, and the device does not offer `VIRTIO_NET_F_MRG_RXBUF` to spread them over
    /// several.
    NoMergeableRx {
        /// The longest frame wanted.
        max_frame: usize,
    },
    /// Frames of `max_frame` bytes are wanted, longer than the buffers of one frame hold
    /// (`rxtx::MAX_MERGED_FRAME`).
    FrameTooLong {
        /// The longest frame wanted.
        max_frame: usize,
    },
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::NotVirtioNet { vendor, device } => {
                write!(f, "PCI function {vendor:04x}:{device:04x} is not a virtio-net device")
            }
            InitError::Capability(e) => write!(f, "virtio capability walk: {e}"),
            InitError::CommonCfgTooShort => f.write_str("virtio common configuration capability too short"),
            InitError::MapCommonCfg(e) => write!(f, "mapping virtio common configuration: {e}"),
            InitError::ResetTimeout => f.write_str("virtio reset: device status never read back 0"),
            InitError::NoVersion1 => {
                f.write_str("virtio features: device does not offer VIRTIO_F_VERSION_1 (legacy only)")
            }
            InitError::NoMac => f.write_str("virtio features: device offers no MAC and none is configured"),
            InitError::FeaturesRefused => f.write_str("virtio features: device refused FEATURES_OK"),
            InitError::NoDeviceCfg => f.write_str("virtio-net: device configuration missing or too short"),
            InitError::MapDeviceCfg(e) => write!(f, "mapping virtio-net device configuration: {e}"),
            InitError::ConfigTimeout => f.write_str("virtio-net: configuration generation never settled"),
            InitError::TooFewQueues { have, need } => {
                write!(f, "virtio queues: device has {have} virtqueues, {need} needed")
            }
            InitError::QueueUnavailable(q) => write!(f, "virtio queue {q}: unavailable (size 0)"),
            InitError::RingAlloc(e) => write!(f, "virtio queue rings: {e}"),
            InitError::NotifyOutOfRange(q) => write!(f, "virtio queue {q}: notify address outside its capability"),
            InitError::MapNotify(e) => write!(f, "mapping virtio notify address: {e}"),
            InitError::CtrlQueueTooSmall(q) => write!(f, "virtio control queue {q}: fewer than 2 entries"),
            InitError::Multiqueue(e) => write!(f, "virtio-net multiqueue setup: {e}"),
            InitError::NoMergeableRx { max_frame } => write!(
                f,
                "virtio features: frames of {max_frame} bytes need mergeable receive buffers \
                 (VIRTIO_NET_F_MRG_RXBUF), which the device does not offer (it takes {} at most)",
                super::rxtx::MAX_ONE_BUFFER_FRAME
            ),
            InitError::FrameTooLong { max_frame } => write!(
                f,
                "virtio-net: frames of {max_frame} bytes are longer than the driver receives ({} at most)",
                super::rxtx::MAX_MERGED_FRAME
            ),
        }
    }
}

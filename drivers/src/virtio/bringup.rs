//! The virtio-net device's bring-up: PCI IDs, the status sequence, feature negotiation, the
//! device configuration, and the set-up of each virtqueue (virtio 1.2 §3.1.1, §4.1.5.1,
//! §5.1.5), for [`super::net::VirtioNet::init`].

use alloc::vec::Vec;

use cadence_core::rss::DEFAULT_KEY;
use cadence_core::time::{Clock, Duration, poll_until};

use super::ctrl::{CtrlError, CtrlQueue};
use super::error::InitError;
use super::mq::{self, RssConfig, hash_type};
use super::pci::{CapRegion, VirtioCaps};
use super::queue::{MAX_SIZE, SplitQueue};
use super::regs::{DeviceStatus, NO_VECTOR, common, feature, net_cfg};
use super::rxtx::{MAX_MERGED_FRAME, MAX_ONE_BUFFER_FRAME, VirtioRx, VirtioTx};
use crate::hal::{Dma, DmaAlloc, Mmio, PciFunction, pci};

/// PCI vendor ID of virtio devices (§4.1.2).
pub const VENDOR_ID: u16 = 0x1af4;
/// PCI device ID of a modern (1.x-only) virtio-net device: 0x1040 + device type 1 (§4.1.2).
pub const DEVICE_ID: u16 = 0x1041;
/// PCI device ID of a transitional virtio-net device (§4.1.2.1); accepted when it
/// carries the modern capabilities and subsystem device ID 1 (network card).
pub const TRANSITIONAL_DEVICE_ID: u16 = 0x1000;
/// Subsystem ID register (high half of config dword 0x2C).
const SUBSYSTEM: u8 = 0x2C;

/// Bring-up knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Config {
    /// Wanted entries per virtqueue; the driver uses the largest power of two not above
    /// this nor the device's maximum. Default 256.
    pub queue_size: u16,
    /// MAC to use when the device offers none (`VIRTIO_NET_F_MAC` absent). Default `None`:
    /// such a device is refused with [`InitError::NoMac`].
    pub mac: Option<[u8; 6]>,
    /// Deadline of every wait on the device (reset, configuration reads, control
    /// commands), in milliseconds. The spec names no maximum; QEMU answers at once.
    /// Default 100.
    pub timeout_ms: u64,
    /// Wanted queue pairs. More than 1 negotiates `VIRTIO_NET_F_CTRL_VQ` with
    /// `VIRTIO_NET_F_MQ` and/or `VIRTIO_NET_F_RSS` when offered; the driver then uses
    /// `min(queue_pairs, max_virtqueue_pairs)` pairs. 0 counts as 1. Default 1 (no
    /// control queue, exactly the single-queue device).
    pub queue_pairs: u16,
    /// Whether bring-up fills every receive ring from the pool it is given. `false`
    /// leaves them empty for the caller to fill with [`VirtioRx::fill`], e.g. each queue
    /// pair from the pool of the lane that owns it. Default `true`.
    pub fill_rx: bool,
    /// The longest frame to receive, in bytes from the destination MAC (no FCS). Above
    /// [`MAX_ONE_BUFFER_FRAME`] (a frame in one receive buffer) `VIRTIO_NET_F_MRG_RXBUF` is
    /// negotiated, so the device spreads longer packets over several buffers; a device
    /// without it is refused ([`InitError::NoMergeableRx`]), as is a length over
    /// [`MAX_MERGED_FRAME`]. Default [`MAX_ONE_BUFFER_FRAME`].
    pub max_frame: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            queue_size: 256,
            mac: None,
            timeout_ms: 100,
            queue_pairs: 1,
            fill_rx: true,
            max_frame: MAX_ONE_BUFFER_FRAME,
        }
    }
}

impl Config {
    /// This configuration with `mac` as the fallback MAC.
    pub fn with_mac(mut self, mac: [u8; 6]) -> Self {
        self.mac = Some(mac);
        self
    }

    /// This configuration with `n` wanted entries per virtqueue.
    pub fn with_queue_size(mut self, n: u16) -> Self {
        self.queue_size = n;
        self
    }

    /// This configuration with `n` wanted queue pairs.
    pub fn with_queue_pairs(mut self, n: u16) -> Self {
        self.queue_pairs = n;
        self
    }

    /// This configuration receiving frames of up to `bytes` ([`Config::max_frame`]).
    pub fn with_max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes;
        self
    }

    /// This configuration with receive rings filled at bring-up (`true`) or left to the
    /// caller (`false`).
    pub fn with_fill_rx(mut self, fill: bool) -> Self {
        self.fill_rx = fill;
        self
    }
}

/// The features this driver accepts out of `offered` when it wants `queue_pairs`
/// queue pairs (§3.1.1 step 4, §5.1.3).
///
/// `VIRTIO_F_VERSION_1` is required. `VIRTIO_NET_F_MAC` and `VIRTIO_NET_F_SPEED_DUPLEX`
/// (the link speed, for Metronome's ring bound) are taken when offered.
/// `VIRTIO_F_ACCESS_PLATFORM` is taken when offered, since the driver hands the device
/// bus addresses. With more than one pair wanted: `VIRTIO_NET_F_MQ` and
/// `VIRTIO_NET_F_RSS` when offered together with `VIRTIO_NET_F_CTRL_VQ` (§5.1.3.1:
/// "VIRTIO_NET_F_MQ Requires VIRTIO_NET_F_CTRL_VQ", likewise `RSS`), and `CTRL_VQ`
/// only with one of them. Nothing else (`MRG_RXBUF` is [`negotiate_frames`]'s): no
/// `HASH_REPORT` and no offloads, so the header stays 12 bytes and all zeros on transmit.
pub fn negotiate(offered: u64, queue_pairs: u16) -> Result<u64, InitError> {
    if offered & feature::VERSION_1 == 0 {
        return Err(InitError::NoVersion1);
    }
    let mut take = feature::VERSION_1 | feature::NET_MAC | feature::ACCESS_PLATFORM | feature::NET_SPEED_DUPLEX;
    if queue_pairs > 1 && offered & feature::NET_CTRL_VQ != 0 {
        take |= feature::NET_CTRL_VQ | feature::NET_MQ | feature::NET_RSS;
    }
    let mut features = offered & take;
    if features & (feature::NET_MQ | feature::NET_RSS) == 0 {
        features &= !feature::NET_CTRL_VQ;
    }
    Ok(features)
}

/// The feature frames of up to `max_frame` bytes need out of `offered`: none when one receive
/// buffer holds them, else `VIRTIO_NET_F_MRG_RXBUF` (§5.1.6.3.1: without it or a GSO feature
/// the driver offers buffers for a 1 514-byte frame at most), refused when the device does
/// not offer it or the frame is longer than [`MAX_MERGED_FRAME`].
pub fn negotiate_frames(offered: u64, max_frame: usize) -> Result<u64, InitError> {
    if max_frame <= MAX_ONE_BUFFER_FRAME {
        Ok(0)
    } else if max_frame > MAX_MERGED_FRAME {
        Err(InitError::FrameTooLong { max_frame })
    } else if offered & feature::NET_MRG_RXBUF == 0 {
        Err(InitError::NoMergeableRx { max_frame })
    } else {
        Ok(feature::NET_MRG_RXBUF)
    }
}

/// The RSS configuration the port keeps (and resends whole on every change).
#[derive(Debug, Clone)]
pub(super) struct RssState {
    /// `VIRTIO_NET_HASH_TYPE_*` bits sent: [`hash_type::WANTED`] ∩ supported.
    pub(super) hash_types: u32,
    /// Bytes of [`DEFAULT_KEY`] sent: `min(40, rss_max_key_size)`.
    pub(super) key_len: usize,
    /// The indirection table as the device has it.
    pub(super) table: Vec<u16>,
}

impl RssState {
    pub(super) fn config(&self, table: &[u16], pairs: u16) -> Result<([u8; mq::MAX_RSS_CONFIG_LEN], usize), CtrlError> {
        let cfg = RssConfig {
            hash_types: self.hash_types,
            table,
            // §5.1.6.5.7.1: packets that are not hashed go to receiveq1.
            unclassified_queue: 0,
            max_tx_vq: pairs,
            key: DEFAULT_KEY.get(..self.key_len).unwrap_or(&DEFAULT_KEY),
        };
        let mut buf = [0u8; mq::MAX_RSS_CONFIG_LEN];
        let n = cfg.encode(&mut buf).ok_or(CtrlError::TooLong)?;
        Ok((buf, n))
    }
}

/// The largest power of two `<= n` (`n >= 1`).
pub(super) const fn pow2_floor(n: u16) -> u16 {
    1 << (15 - n.leading_zeros())
}

/// Checks the PCI IDs (§4.1.2).
pub(super) fn check_ids<P: PciFunction>(pci: &P) -> Result<(), InitError> {
    let id = pci.config_read32(pci::ID);
    let (vendor, device) = (id as u16, (id >> 16) as u16);
    let ok = vendor == VENDOR_ID
        && (device == DEVICE_ID || (device == TRANSITIONAL_DEVICE_ID && pci.config_read16(SUBSYSTEM + 2) == 1));
    if ok { Ok(()) } else { Err(InitError::NotVirtioNet { vendor, device }) }
}

/// What a successful bring-up yields.
pub(super) struct BringUp<W, R> {
    pub(super) mac: [u8; 6],
    pub(super) features: u64,
    pub(super) speed: u32,
    pub(super) rx: Vec<VirtioRx<W, R>>,
    pub(super) tx: Vec<VirtioTx<W, R>>,
    /// The control queue (and the RSS state it configured), when negotiated.
    pub(super) ctrl: Option<(CtrlQueue<W, R>, Option<RssState>)>,
}

/// The device configuration fields the driver uses (§5.1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct NetCfg {
    pub(super) mac: [u8; 6],
    /// Link speed in Mb/s as the device reports it (0 when not read).
    pub(super) speed: u32,
    pub(super) max_pairs: u16,
    pub(super) rss_max_key_size: u8,
    pub(super) rss_max_table_len: u16,
    pub(super) supported_hash_types: u32,
}

/// §3.1.1 steps 1–8 on the common configuration window `c`.
pub(super) fn bring_up<P, A, C, W, R>(
    pci: &P,
    c: &W,
    caps: &VirtioCaps,
    dma: &mut A,
    clock: &C,
    timeout: Duration,
    config: &Config,
) -> Result<BringUp<W, R>, InitError>
where
    P: PciFunction<Window = W>,
    A: DmaAlloc<Region = R>,
    C: Clock + ?Sized,
    W: Mmio,
    R: Dma,
{
    // Step 1: reset. §4.1.4.3.2: "After writing 0 to device_status, the driver MUST wait
    // for a read of device_status to return 0 before reinitializing the device."
    c.write8(common::DEVICE_STATUS, 0);
    poll_until(clock, timeout, || c.read8(common::DEVICE_STATUS) == 0).map_err(|_| InitError::ResetTimeout)?;

    // Steps 2–3: ACKNOWLEDGE, then DRIVER.
    let mut status = DeviceStatus::ACKNOWLEDGE;
    c.write8(common::DEVICE_STATUS, status);
    status |= DeviceStatus::DRIVER;
    c.write8(common::DEVICE_STATUS, status);

    // Step 4: read the device features (two 32-bit windows, §4.1.4.3) and pick ours.
    c.write32(common::DEVICE_FEATURE_SELECT, 0);
    let lo = c.read32(common::DEVICE_FEATURE) as u64;
    c.write32(common::DEVICE_FEATURE_SELECT, 1);
    let hi = c.read32(common::DEVICE_FEATURE) as u64;
    let features = negotiate(hi << 32 | lo, config.queue_pairs)? | negotiate_frames(hi << 32 | lo, config.max_frame)?;
    if features & feature::NET_MAC == 0 && config.mac.is_none() {
        return Err(InitError::NoMac);
    }
    c.write32(common::DRIVER_FEATURE_SELECT, 0);
    c.write32(common::DRIVER_FEATURE, features as u32);
    c.write32(common::DRIVER_FEATURE_SELECT, 1);
    c.write32(common::DRIVER_FEATURE, (features >> 32) as u32);

    // Steps 5–6: FEATURES_OK, then "re-read device status to ensure the FEATURES_OK bit
    // is still set: otherwise, the device does not support our subset of features".
    status |= DeviceStatus::FEATURES_OK;
    c.write8(common::DEVICE_STATUS, status);
    if !DeviceStatus(c.read8(common::DEVICE_STATUS)).contains(DeviceStatus::FEATURES_OK) {
        return Err(InitError::FeaturesRefused);
    }

    // Step 7: device-specific setup. The configuration (§5.1.5: "If the driver
    // negotiates VIRTIO_NET_F_MAC, it SHOULD read mac from the configuration"; the
    // pair count and RSS limits with MQ/RSS), then the queues.
    let net = read_net_config(pci, c, caps.device, clock, timeout, features)?;
    let mac = match config.mac {
        Some(m) if features & feature::NET_MAC == 0 => m,
        _ => net.mac,
    };
    let multi = features & (feature::NET_MQ | feature::NET_RSS) != 0;
    let has_ctrl = features & feature::NET_CTRL_VQ != 0;
    // §5.1.4: "The device MUST set max_virtqueue_pairs to between 1 and 0x8000
    // inclusive"; a device that does not is taken at the nearest legal value.
    let max_pairs = if multi { net.max_pairs.clamp(1, 0x8000) } else { 1 };
    let pairs = config.queue_pairs.clamp(1, max_pairs);
    // §5.1.2: controlq is virtqueue 2N, "N=1 if neither VIRTIO_NET_F_MQ nor
    // VIRTIO_NET_F_RSS are negotiated, otherwise N is set by max_virtqueue_pairs".
    let ctrl_index = 2 * max_pairs;

    // Polled: no configuration-change interrupts (§4.1.4.3, NO_VECTOR).
    c.write16(common::CONFIG_MSIX_VECTOR, NO_VECTOR);
    let have = c.read16(common::NUM_QUEUES);
    let need = if has_ctrl { ctrl_index + 1 } else { 2 * pairs };
    if have < need {
        return Err(InitError::TooFewQueues { have, need });
    }
    let mut rx = Vec::with_capacity(pairs as usize);
    let mut tx = Vec::with_capacity(pairs as usize);
    for pair in 0..pairs {
        let (vq, bell) = setup_queue(pci, c, caps, dma, 2 * pair, config.queue_size)?;
        rx.push(VirtioRx::new(vq, bell, 2 * pair, features & feature::NET_MRG_RXBUF != 0));
        let (vq, bell) = setup_queue(pci, c, caps, dma, 2 * pair + 1, config.queue_size)?;
        tx.push(VirtioTx::new(vq, bell, 2 * pair + 1));
    }
    let mut ctrl = if has_ctrl { Some(setup_ctrl_queue(pci, c, caps, dma, ctrl_index)?) } else { None };

    // Step 8: DRIVER_OK; the device is live.
    status |= DeviceStatus::DRIVER_OK;
    c.write8(common::DEVICE_STATUS, status);

    // §5.1.6.5.5: "the driver MUST NOT use receive queues other than the first" before
    // this command, and the device steers only to receiveq1 until then. RSS_CONFIG
    // (§5.1.6.5.7.1) sets the pairs and the steering at once; without RSS,
    // VQ_PAIRS_SET. Sent after DRIVER_OK (no notification before it, §3.1.1) and
    // before any receive buffer is posted, so a refusal leaves nothing to take back.
    let ctrl = match ctrl.take() {
        Some(mut q) => {
            let rss = if features & feature::NET_RSS != 0 {
                let state = rss_state(&net, pairs);
                let (buf, n) = state.config(&state.table, pairs).map_err(InitError::Multiqueue)?;
                let payload = buf.get(..n).unwrap_or(&[]);
                q.command(clock, timeout, mq::CLASS_MQ, mq::MQ_RSS_CONFIG, payload).map_err(InitError::Multiqueue)?;
                Some(state)
            } else {
                let payload = mq::vq_pairs_set(pairs);
                q.command(clock, timeout, mq::CLASS_MQ, mq::MQ_VQ_PAIRS_SET, &payload)
                    .map_err(InitError::Multiqueue)?;
                None
            };
            Some((q, rss))
        }
        None => None,
    };
    Ok(BringUp { mac, features, speed: net.speed, rx, tx, ctrl })
}

/// The RSS configuration bring-up sends for `pairs` pairs on a device described by `net`.
fn rss_state(net: &NetCfg, pairs: u16) -> RssState {
    // §5.1.6.5.7.1: the table length is a power of two no longer than
    // rss_max_indirection_table_length; this driver sends at most 128 entries.
    let len = pow2_floor(net.rss_max_table_len.clamp(1, mq::MAX_TABLE_LEN));
    RssState {
        // "The driver MUST NOT set any VIRTIO_NET_HASH_TYPE_ flags that are not
        // supported by the device."
        hash_types: hash_type::WANTED & net.supported_hash_types,
        // "The driver MUST NOT set hash_key_length greater than rss_max_key_size."
        key_len: mq::MAX_KEY_LEN.min(net.rss_max_key_size as usize),
        table: (0..len as usize).map(|i| mq::default_entry(i, pairs)).collect(),
    }
}

/// Reads the device configuration fields `features` makes valid, retrying while the
/// configuration generation changes under the read (§2.5.1, bounded by `timeout`).
/// Reads nothing (and needs no configuration capability) when no field is needed.
fn read_net_config<P, C, W>(
    pci: &P,
    c: &W,
    device: Option<CapRegion>,
    clock: &C,
    timeout: Duration,
    features: u64,
) -> Result<NetCfg, InitError>
where
    P: PciFunction<Window = W>,
    C: Clock + ?Sized,
    W: Mmio,
{
    let want_mac = features & feature::NET_MAC != 0;
    let want_pairs = features & (feature::NET_MQ | feature::NET_RSS) != 0;
    let want_rss = features & feature::NET_RSS != 0;
    let want_speed = features & feature::NET_SPEED_DUPLEX != 0;
    let speed_end = net_cfg::SPEED + 4;
    let need = if want_rss {
        net_cfg::RSS_LEN
    } else if want_pairs {
        net_cfg::MAX_VIRTQUEUE_PAIRS + 2
    } else if want_mac {
        net_cfg::MAC + net_cfg::MAC_LEN
    } else if want_speed {
        speed_end
    } else {
        return Ok(NetCfg::default());
    };
    let region = device.filter(|d| d.length as usize >= need).ok_or(InitError::NoDeviceCfg)?;
    // The speed is a hint: a configuration window too short for it just leaves it unknown.
    let read_speed = want_speed && region.length as usize >= speed_end;
    let cfg = pci.map_bar(region.bar, region.offset as u64, region.length as u64).map_err(InitError::MapDeviceCfg)?;
    let mut net = NetCfg::default();
    // §2.5.1: "drivers SHOULD read device configuration space fields like so: do { before =
    // get_config_generation(device); /* read */ after = get_config_generation(device); }
    // while (after != before);"
    poll_until(clock, timeout, || {
        let before = c.read8(common::CONFIG_GENERATION);
        if want_mac {
            for (i, b) in net.mac.iter_mut().enumerate() {
                *b = cfg.read8(net_cfg::MAC + i);
            }
        }
        if want_pairs {
            net.max_pairs = cfg.read16(net_cfg::MAX_VIRTQUEUE_PAIRS);
        }
        if read_speed {
            net.speed = cfg.read32(net_cfg::SPEED);
        }
        if want_rss {
            net.rss_max_key_size = cfg.read8(net_cfg::RSS_MAX_KEY_SIZE);
            net.rss_max_table_len = cfg.read16(net_cfg::RSS_MAX_INDIRECTION_TABLE_LENGTH);
            net.supported_hash_types = cfg.read32(net_cfg::SUPPORTED_HASH_TYPES);
        }
        c.read8(common::CONFIG_GENERATION) == before
    })
    .map_err(|_| InitError::ConfigTimeout)?;
    Ok(net)
}

/// §4.1.5.1.3 for the control virtqueue `q`: a small ring (one command at a time).
fn setup_ctrl_queue<P, A, W, R>(
    pci: &P,
    c: &W,
    caps: &VirtioCaps,
    dma: &mut A,
    q: u16,
) -> Result<CtrlQueue<W, R>, InitError>
where
    P: PciFunction<Window = W>,
    A: DmaAlloc<Region = R>,
    W: Mmio,
    R: Dma,
{
    // One command (a chain of 2) in flight at a time: 4 entries are plenty.
    let (size, bell) = select_queue(pci, c, caps, q, 4)?;
    if size < 2 {
        return Err(InitError::CtrlQueueTooSmall(q));
    }
    let cq = CtrlQueue::try_new(dma, size, bell, q).map_err(InitError::RingAlloc)?;
    enable_queue(c, size, cq.desc_phys(), cq.driver_phys(), cq.device_phys());
    Ok(cq)
}

/// §4.1.5.1.3: sets up virtqueue `q` and maps its doorbell.
fn setup_queue<P, A, W, R>(
    pci: &P,
    c: &W,
    caps: &VirtioCaps,
    dma: &mut A,
    q: u16,
    wanted: u16,
) -> Result<(SplitQueue<R>, W), InitError>
where
    P: PciFunction<Window = W>,
    A: DmaAlloc<Region = R>,
    W: Mmio,
    R: Dma,
{
    let (size, bell) = select_queue(pci, c, caps, q, wanted)?;
    let vq = SplitQueue::try_new(dma, size).map_err(InitError::RingAlloc)?;
    enable_queue(c, size, vq.desc_phys(), vq.driver_phys(), vq.device_phys());
    Ok((vq, bell))
}

/// §4.1.5.1.3 steps 1–2: selects virtqueue `q`, picks its size (the largest power of
/// two not above `wanted` nor the device's maximum) and maps its doorbell.
fn select_queue<P, W>(pci: &P, c: &W, caps: &VirtioCaps, q: u16, wanted: u16) -> Result<(u16, W), InitError>
where
    P: PciFunction<Window = W>,
    W: Mmio,
{
    // "1. Write the virtqueue index to queue_select. 2. Read the virtqueue size from
    // queue_size. [...] If the returned value is zero (0x0) the queue is not available."
    c.write16(common::QUEUE_SELECT, q);
    let max = c.read16(common::QUEUE_SIZE);
    if max == 0 {
        return Err(InitError::QueueUnavailable(q));
    }
    // Split queues have power-of-two sizes (§2.7); never above the device's maximum.
    let size = pow2_floor(max.min(wanted).clamp(1, MAX_SIZE));

    // §4.1.4.4: the doorbell is at cap.offset + queue_notify_off * notify_off_multiplier;
    // "The device MUST ensure that [...] queue_notify_off * notify_off_multiplier + 2 <=
    // cap.length" — checked rather than trusted.
    let notify_off = c.read16(common::QUEUE_NOTIFY_OFF) as u64 * caps.notify_off_multiplier as u64;
    if notify_off + 2 > caps.notify.length as u64 {
        return Err(InitError::NotifyOutOfRange(q));
    }
    let bell = pci.map_bar(caps.notify.bar, caps.notify.offset as u64 + notify_off, 2).map_err(InitError::MapNotify)?;
    Ok((size, bell))
}

/// §4.1.5.1.3 steps 3–6 on the selected virtqueue: its size, no MSI-X vector, the
/// ring addresses, then `queue_enable`.
fn enable_queue<W: Mmio>(c: &W, size: u16, desc: u64, driver: u64, device: u64) {
    // "3. Optionally, select a smaller virtqueue size and write it to queue_size. [...]
    // 5. Write physical addresses of the virtqueue's Descriptor Area, Driver Area and
    // Device Area to queue_desc, queue_driver and queue_device."
    c.write16(common::QUEUE_SIZE, size);
    // Polled: no used-buffer interrupts.
    c.write16(common::QUEUE_MSIX_VECTOR, NO_VECTOR);
    c.write64(common::QUEUE_DESC, desc);
    c.write64(common::QUEUE_DRIVER, driver);
    c.write64(common::QUEUE_DEVICE, device);
    // "6. Write 1 to queue_enable."
    c.write16(common::QUEUE_ENABLE, 1);
}

//! The virtio-net device: PCI bring-up, feature negotiation and queue setup
//! (virtio 1.2 §3.1.1, §4.1.5.1, §5.1.5).

use alloc::vec::Vec;

use cadence_core::buf::Pool;
use cadence_core::nic::{Port, PortStats, RssError, RxQueue, TxQueue};
use cadence_core::time::{Clock, Duration, poll_until};

use super::error::InitError;
use super::pci::{CapRegion, VirtioCaps, find_caps};
use super::queue::{MAX_SIZE, SplitQueue};
use super::regs::{DeviceStatus, NO_VECTOR, common, feature, net_cfg};
use super::rxtx::{VirtioRx, VirtioTx};
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
    /// Deadline of every wait on the device, in milliseconds. The spec names no maximum;
    /// QEMU answers at once. Default 100.
    pub timeout_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self { queue_size: 256, mac: None, timeout_ms: 100 }
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
}

/// The features this driver accepts out of `offered` (§3.1.1 step 4, §5.1.3).
///
/// `VIRTIO_F_VERSION_1` is required. `VIRTIO_NET_F_MAC` is taken when offered.
/// `VIRTIO_F_ACCESS_PLATFORM` is taken when offered, since the driver hands the device
/// bus addresses. Nothing else: no `MRG_RXBUF` and no offloads, so the header stays
/// 12 bytes and all zeros on transmit.
pub fn negotiate(offered: u64) -> Result<u64, InitError> {
    if offered & feature::VERSION_1 == 0 {
        return Err(InitError::NoVersion1);
    }
    Ok(offered & (feature::VERSION_1 | feature::NET_MAC | feature::ACCESS_PLATFORM))
}

/// A virtio-net device over modern virtio-PCI, driven by polling.
///
/// It owns its queue pairs; hand them to workers with [`VirtioNet::queue_pair`] or
/// [`VirtioNet::queues_mut`]. Virtqueue layout (§5.1.2): receiveq`n` = `2n`,
/// transmitq`n` = `2n + 1`. Only pair 0 exists until multi-queue support lands.
#[derive(Debug)]
pub struct VirtioNet<W, R> {
    common: W,
    mac: [u8; 6],
    features: u64,
    rx: Vec<VirtioRx<W, R>>,
    tx: Vec<VirtioTx<W, R>>,
}

/// A receive queue and a transmit queue of one [`VirtioNet`], borrowed together.
pub type QueuePair<'a, W, R> = (&'a mut VirtioRx<W, R>, &'a mut VirtioTx<W, R>);

/// Every receive and every transmit queue of one [`VirtioNet`], borrowed together.
pub type Queues<'a, W, R> = (&'a mut [VirtioRx<W, R>], &'a mut [VirtioTx<W, R>]);

/// The largest power of two `<= n` (`n >= 1`).
const fn pow2_floor(n: u16) -> u16 {
    1 << (15 - n.leading_zeros())
}

impl<W: Mmio, R: Dma> VirtioNet<W, R> {
    /// Brings up the virtio-net function `pci`: checks its IDs, enables memory decoding
    /// and bus mastering (INTx off), initializes the device (§3.1.1) with rings from
    /// `dma`, waits against `clock`, and fills each receive queue from `pool`.
    ///
    /// On failure after the device was reached, its status gets `FAILED`.
    pub fn try_new<P, A, C>(
        pci: &P,
        dma: &mut A,
        clock: &C,
        pool: &mut Pool<'_>,
        config: &Config,
    ) -> Result<Self, InitError>
    where
        P: PciFunction<Window = W>,
        A: DmaAlloc<Region = R>,
        C: Clock + ?Sized,
    {
        check_ids(pci)?;
        // PCI 3.0 §6.2.2: memory space + bus master on, INTx off (polled). Only the
        // command half is written: the status half's error bits are write-1-to-clear.
        let cmd = pci.config_read32(pci::COMMAND) & 0xFFFF;
        pci.config_write32(pci::COMMAND, cmd | pci::CMD_MEMORY | pci::CMD_BUS_MASTER | pci::CMD_INTX_DISABLE);

        let caps = find_caps(pci).map_err(InitError::Capability)?;
        if (caps.common.length as usize) < common::MIN_LEN {
            return Err(InitError::CommonCfgTooShort);
        }
        let common = pci
            .map_bar(caps.common.bar, caps.common.offset as u64, caps.common.length as u64)
            .map_err(InitError::MapCommonCfg)?;
        let timeout = clock.rate().ticks_from_ms(config.timeout_ms);

        match bring_up(pci, &common, &caps, dma, clock, timeout, config) {
            Ok((mac, features, rx, tx)) => {
                let mut dev = Self { common, mac, features, rx, tx };
                // §3.1.1: buffers are made available only after DRIVER_OK ("The driver MUST
                // NOT send any buffer available notifications to the device before setting
                // DRIVER_OK").
                for rx in &mut dev.rx {
                    rx.fill(pool);
                }
                Ok(dev)
            }
            Err(e) => {
                // §3.1.1 step 8: "If any of these steps go irrecoverably wrong, the driver
                // SHOULD set the FAILED status bit to indicate that it has given up on the
                // device".
                let s = common.read8(common::DEVICE_STATUS);
                common.write8(common::DEVICE_STATUS, s | DeviceStatus::FAILED);
                Err(e)
            }
        }
    }

    /// The negotiated feature bits ([`feature`]).
    pub fn features(&self) -> u64 {
        self.features
    }

    /// The device status as it reads now.
    pub fn status(&self) -> DeviceStatus {
        DeviceStatus(self.common.read8(common::DEVICE_STATUS))
    }

    /// Whether the device asks to be reset (`DEVICE_NEEDS_RESET`, §2.1.2).
    pub fn needs_reset(&self) -> bool {
        self.status().contains(DeviceStatus::DEVICE_NEEDS_RESET)
    }

    /// Entries per virtqueue, as negotiated with the device.
    pub fn queue_size(&self) -> u16 {
        self.rx.first().map_or(0, |q| q.size())
    }

    /// Receive queue `i`.
    pub fn rx_queue(&mut self, i: usize) -> Option<&mut VirtioRx<W, R>> {
        self.rx.get_mut(i)
    }

    /// Transmit queue `i`.
    pub fn tx_queue(&mut self, i: usize) -> Option<&mut VirtioTx<W, R>> {
        self.tx.get_mut(i)
    }

    /// Queue pair `i` (receive, transmit).
    pub fn queue_pair(&mut self, i: usize) -> Option<QueuePair<'_, W, R>> {
        Some((self.rx.get_mut(i)?, self.tx.get_mut(i)?))
    }

    /// All receive and transmit queues, to hand out disjointly.
    pub fn queues_mut(&mut self) -> Queues<'_, W, R> {
        (&mut self.rx, &mut self.tx)
    }
}

/// Checks the PCI IDs (§4.1.2).
fn check_ids<P: PciFunction>(pci: &P) -> Result<(), InitError> {
    let id = pci.config_read32(pci::ID);
    let (vendor, device) = (id as u16, (id >> 16) as u16);
    let ok = vendor == VENDOR_ID
        && (device == DEVICE_ID || (device == TRANSITIONAL_DEVICE_ID && pci.config_read16(SUBSYSTEM + 2) == 1));
    if ok { Ok(()) } else { Err(InitError::NotVirtioNet { vendor, device }) }
}

/// What a successful bring-up yields: MAC, features, queues.
type BringUp<W, R> = ([u8; 6], u64, Vec<VirtioRx<W, R>>, Vec<VirtioTx<W, R>>);

/// §3.1.1 steps 1–8 on the common configuration window `c`.
fn bring_up<P, A, C, W, R>(
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
    let features = negotiate(hi << 32 | lo)?;
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

    // Step 7: device-specific setup. The MAC (§5.1.5: "If the driver negotiates
    // VIRTIO_NET_F_MAC, it SHOULD read mac from the configuration"), then the queues.
    let mac = match config.mac {
        Some(m) if features & feature::NET_MAC == 0 => m,
        _ => read_mac(pci, c, caps.device, clock, timeout)?,
    };

    // Polled: no configuration-change interrupts (§4.1.4.3, NO_VECTOR).
    c.write16(common::CONFIG_MSIX_VECTOR, NO_VECTOR);
    let pairs: u16 = 1;
    let have = c.read16(common::NUM_QUEUES);
    if have < 2 * pairs {
        return Err(InitError::TooFewQueues { have, need: 2 * pairs });
    }
    let mut rx = Vec::with_capacity(pairs as usize);
    let mut tx = Vec::with_capacity(pairs as usize);
    for pair in 0..pairs {
        let (vq, bell) = setup_queue(pci, c, caps, dma, 2 * pair, config.queue_size)?;
        rx.push(VirtioRx::new(vq, bell, 2 * pair));
        let (vq, bell) = setup_queue(pci, c, caps, dma, 2 * pair + 1, config.queue_size)?;
        tx.push(VirtioTx::new(vq, bell, 2 * pair + 1));
    }

    // Step 8: DRIVER_OK; the device is live.
    status |= DeviceStatus::DRIVER_OK;
    c.write8(common::DEVICE_STATUS, status);
    Ok((mac, features, rx, tx))
}

/// Reads the MAC from the device configuration, retrying while the configuration
/// generation changes under the read (§2.5.1, bounded by `timeout`).
fn read_mac<P, C, W>(
    pci: &P,
    c: &W,
    device: Option<CapRegion>,
    clock: &C,
    timeout: Duration,
) -> Result<[u8; 6], InitError>
where
    P: PciFunction<Window = W>,
    C: Clock + ?Sized,
    W: Mmio,
{
    let region =
        device.filter(|d| d.length as usize >= net_cfg::MAC + net_cfg::MAC_LEN).ok_or(InitError::NoDeviceCfg)?;
    let cfg = pci.map_bar(region.bar, region.offset as u64, region.length as u64).map_err(InitError::MapDeviceCfg)?;
    let mut mac = [0u8; 6];
    // §2.5.1: "drivers SHOULD read device configuration space fields like so: do { before =
    // get_config_generation(device); /* read */ after = get_config_generation(device); }
    // while (after != before);"
    poll_until(clock, timeout, || {
        let before = c.read8(common::CONFIG_GENERATION);
        for (i, b) in mac.iter_mut().enumerate() {
            *b = cfg.read8(net_cfg::MAC + i);
        }
        c.read8(common::CONFIG_GENERATION) == before
    })
    .map_err(|_| InitError::ConfigTimeout)?;
    Ok(mac)
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
    // "1. Write the virtqueue index to queue_select. 2. Read the virtqueue size from
    // queue_size. [...] If the returned value is zero (0x0) the queue is not available."
    c.write16(common::QUEUE_SELECT, q);
    let max = c.read16(common::QUEUE_SIZE);
    if max == 0 {
        return Err(InitError::QueueUnavailable(q));
    }
    // Split queues have power-of-two sizes (§2.7); never above the device's maximum.
    let size = pow2_floor(max.min(wanted).clamp(1, MAX_SIZE));
    let vq = SplitQueue::try_new(dma, size).map_err(InitError::RingAlloc)?;

    // §4.1.4.4: the doorbell is at cap.offset + queue_notify_off * notify_off_multiplier;
    // "The device MUST ensure that [...] queue_notify_off * notify_off_multiplier + 2 <=
    // cap.length" — checked rather than trusted.
    let notify_off = c.read16(common::QUEUE_NOTIFY_OFF) as u64 * caps.notify_off_multiplier as u64;
    if notify_off + 2 > caps.notify.length as u64 {
        return Err(InitError::NotifyOutOfRange(q));
    }
    let bell = pci.map_bar(caps.notify.bar, caps.notify.offset as u64 + notify_off, 2).map_err(InitError::MapNotify)?;

    // "3. Optionally, select a smaller virtqueue size and write it to queue_size. [...]
    // 5. Write physical addresses of the virtqueue's Descriptor Area, Driver Area and
    // Device Area to queue_desc, queue_driver and queue_device."
    c.write16(common::QUEUE_SIZE, size);
    // Polled: no used-buffer interrupts.
    c.write16(common::QUEUE_MSIX_VECTOR, NO_VECTOR);
    c.write64(common::QUEUE_DESC, vq.desc_phys());
    c.write64(common::QUEUE_DRIVER, vq.driver_phys());
    c.write64(common::QUEUE_DEVICE, vq.device_phys());
    // "6. Write 1 to queue_enable."
    c.write16(common::QUEUE_ENABLE, 1);
    Ok((vq, bell))
}

impl<W: Mmio, R: Dma> Port for VirtioNet<W, R> {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn rx_queues(&self) -> usize {
        self.rx.len()
    }

    fn tx_queues(&self) -> usize {
        self.tx.len()
    }

    /// Not yet: RSS needs `VIRTIO_NET_F_RSS` and the control virtqueue.
    fn set_rss_table(&mut self, _table: &[u16]) -> Result<(), RssError> {
        Err(RssError::Unsupported)
    }

    fn stats(&self) -> PortStats {
        let mut s = PortStats::default();
        for q in &self.rx {
            let r = q.rx_stats();
            s.rx.packets += r.packets;
            s.rx.bytes += r.bytes;
            s.rx.errors += r.errors;
            s.rx.no_buffer += r.no_buffer;
        }
        for q in &self.tx {
            let t = q.tx_stats();
            s.tx.packets += t.packets;
            s.tx.bytes += t.bytes;
            s.tx.errors += t.errors;
            s.tx.ring_full += t.ring_full;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_requires_version_1_and_takes_only_mac_and_platform() {
        assert_eq!(negotiate(feature::NET_MAC), Err(InitError::NoVersion1));
        let all = u64::MAX;
        assert_eq!(negotiate(all), Ok(feature::VERSION_1 | feature::NET_MAC | feature::ACCESS_PLATFORM));
        assert_eq!(negotiate(feature::VERSION_1 | feature::NET_MRG_RXBUF | feature::NET_CSUM), Ok(feature::VERSION_1));
    }

    #[test]
    fn queue_size_is_a_power_of_two_floor() {
        assert_eq!(pow2_floor(1), 1);
        assert_eq!(pow2_floor(256), 256);
        assert_eq!(pow2_floor(1000), 512);
        assert_eq!(pow2_floor(u16::MAX), 32768);
    }
}

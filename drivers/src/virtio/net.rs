//! The virtio-net device ([`VirtioNet`]): its queues, its control queue (RSS, multi-queue)
//! and the [`Port`] it is; the bring-up that makes one is in `bringup`.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use cadence_core::buf::Pool;
use cadence_core::nic::{Port, PortStats, RssError};
use cadence_core::rss::DEFAULT_KEY;
use cadence_core::time::{Clock, Duration};

use super::bringup::*;
use super::ctrl::{CtrlError, CtrlQueue};
use super::error::InitError;
use super::mq::{self};
use super::pci::find_caps;
use super::regs::{DeviceStatus, common, feature};
use super::rxtx::{VirtioRx, VirtioTx};
use crate::hal::{Dma, DmaAlloc, Mmio, PciFunction, pci};

/// The control virtqueue and what it needs to wait: a clock of the port's own.
struct Control<W, R> {
    queue: CtrlQueue<W, R>,
    clock: Box<dyn Clock + Send + Sync>,
    timeout: Duration,
    rss: Option<RssState>,
}

impl<W: fmt::Debug, R: fmt::Debug> fmt::Debug for Control<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control")
            .field("queue", &self.queue)
            .field("timeout", &self.timeout)
            .field("rss", &self.rss)
            .finish_non_exhaustive()
    }
}

impl<W: Mmio, R: Dma> Control<W, R> {
    /// Sends `RSS_CONFIG` with `table` (§5.1.6.5.7.1) and records it once accepted.
    /// `None` without RSS.
    fn send_rss(&mut self, table: &[u16], pairs: u16) -> Option<Result<(), CtrlError>> {
        let Control { queue, clock, timeout, rss } = self;
        let rss = rss.as_mut()?;
        let sent = rss.config(table, pairs).and_then(|(buf, n)| {
            let payload = buf.get(..n).unwrap_or(&[]);
            queue.command(&**clock, *timeout, mq::CLASS_MQ, mq::MQ_RSS_CONFIG, payload)
        });
        if sent.is_ok() {
            rss.table.clear();
            rss.table.extend_from_slice(table);
        }
        Some(sent)
    }
}

/// A virtio-net device over modern virtio-PCI, driven by polling.
///
/// It owns its queue pairs; hand them to workers with [`VirtioNet::queue_pair`],
/// [`VirtioNet::queues_mut`] or [`VirtioNet::take_queues`]. Virtqueue layout (§5.1.2):
/// receiveq`k+1` = `2k`, transmitq`k+1` = `2k + 1` for pair `k`, and the control queue
/// `2N` where N is `max_virtqueue_pairs` when `MQ` or `RSS` is negotiated, else 1.
///
/// With more than one pair ([`Config::queue_pairs`]) and a device offering `RSS`,
/// bring-up sends `RSS_CONFIG`: hash types IPv4/TCPv4/UDPv4/IPv6/TCPv6/UDPv6 (those
/// supported), the `cadence_core::rss::DEFAULT_KEY` (cut to `rss_max_key_size`), an
/// indirection table as long as the device allows (a power of two, at most 128)
/// filled round-robin over the pairs, unclassified packets to pair 0. A device with
/// `MQ` only gets `VQ_PAIRS_SET` and steers by itself. [`Port::set_rss_table`] resends
/// `RSS_CONFIG` with a new table; it takes `&mut self`, so it never runs concurrently
/// with itself.
#[derive(Debug)]
pub struct VirtioNet<W, R> {
    common: W,
    mac: [u8; 6],
    features: u64,
    /// The configuration's `speed` (Mb/s) at bring-up, with `NET_SPEED_DUPLEX`.
    speed: u32,
    pairs: usize,
    rx: Vec<VirtioRx<W, R>>,
    tx: Vec<VirtioTx<W, R>>,
    ctrl: Option<Control<W, R>>,
}

/// A receive queue and a transmit queue of one [`VirtioNet`], borrowed together.
pub type QueuePair<'a, W, R> = (&'a mut VirtioRx<W, R>, &'a mut VirtioTx<W, R>);

/// Every receive and every transmit queue of one [`VirtioNet`], borrowed together.
pub type Queues<'a, W, R> = (&'a mut [VirtioRx<W, R>], &'a mut [VirtioTx<W, R>]);

/// Every receive and every transmit queue of one [`VirtioNet`], moved out of it
/// ([`VirtioNet::take_queues`]).
pub type OwnedQueues<W, R> = (Vec<VirtioRx<W, R>>, Vec<VirtioTx<W, R>>);

impl<W: Mmio, R: Dma> VirtioNet<W, R> {
    /// Brings up the virtio-net function `pci`: checks its IDs, enables memory decoding
    /// and bus mastering (INTx off), initializes the device (§3.1.1) with rings from
    /// `dma`, waits against `clock`, sets up the queue pairs (and RSS) as
    /// [`VirtioNet`] describes, and fills each receive queue from `pool`. The port
    /// keeps a copy of `clock` for the deadlines of later control commands.
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
        C: Clock + Clone + Send + Sync + 'static,
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
            Ok(up) => {
                let ctrl = up.ctrl.map(|(queue, rss)| Control { queue, clock: Box::new(clock.clone()), timeout, rss });
                let (mac, features, speed, pairs, rx, tx) = (up.mac, up.features, up.speed, up.rx.len(), up.rx, up.tx);
                let mut dev = Self { common, mac, features, speed, pairs, rx, tx, ctrl };
                // §3.1.1: buffers are made available only after DRIVER_OK ("The driver MUST
                // NOT send any buffer available notifications to the device before setting
                // DRIVER_OK").
                if config.fill_rx {
                    for rx in &mut dev.rx {
                        rx.fill(pool);
                    }
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

    /// The link speed in Mb/s the device reported at bring-up (§5.1.4: valid with
    /// `VIRTIO_NET_F_SPEED_DUPLEX`; `0xffffffff` = `SPEED_UNKNOWN`), if it did.
    pub fn speed_mbps(&self) -> Option<u32> {
        (self.features & feature::NET_SPEED_DUPLEX != 0 && self.speed != 0 && self.speed != u32::MAX)
            .then_some(self.speed)
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

    /// Moves every queue out of the port (receive queue `k` and transmit queue `k` at
    /// index `k`), e.g. to give each worker core its own pair. The port keeps the
    /// control queue, so [`Port::set_rss_table`] still works; [`Port::rx_queues`] still
    /// counts the pairs, but [`Port::stats`] only sums the queues the port still holds
    /// (none, after this).
    pub fn take_queues(&mut self) -> OwnedQueues<W, R> {
        (core::mem::take(&mut self.rx), core::mem::take(&mut self.tx))
    }

    /// The indirection table the device holds (receive queue per hash bucket), or
    /// `None` without RSS. [`Port::set_rss_table`] takes tables of this length.
    pub fn rss_table(&self) -> Option<&[u16]> {
        self.ctrl.as_ref()?.rss.as_ref().map(|r| &r.table[..])
    }

    /// The Toeplitz key the device hashes with (a prefix of
    /// `cadence_core::rss::DEFAULT_KEY`), or `None` without RSS.
    pub fn rss_key(&self) -> Option<&'static [u8]> {
        let rss = self.ctrl.as_ref()?.rss.as_ref()?;
        DEFAULT_KEY.get(..rss.key_len)
    }

    /// The `VIRTIO_NET_HASH_TYPE_*` bits ([`super::hash_type`]) the device hashes by,
    /// or `None` without RSS.
    pub fn rss_hash_types(&self) -> Option<u32> {
        Some(self.ctrl.as_ref()?.rss.as_ref()?.hash_types)
    }
}

impl<W: Mmio, R: Dma> Port for VirtioNet<W, R> {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn rx_queues(&self) -> usize {
        self.pairs
    }

    fn tx_queues(&self) -> usize {
        self.pairs
    }

    /// Sends `RSS_CONFIG` with `table` (the whole configuration: virtio has no partial
    /// update). `table` must be exactly as long as [`VirtioNet::rss_table`]
    /// ([`RssError::BadLength`]) and name only pairs the port has
    /// ([`RssError::BadQueue`]). [`RssError::Unsupported`] without `VIRTIO_NET_F_RSS`
    /// or with one pair; [`RssError::Device`] when the device refuses or does not
    /// answer in time (the device keeps its previous table then, unless it answered
    /// late).
    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError> {
        let pairs = self.pairs;
        let Some(ctrl) = self.ctrl.as_mut() else { return Err(RssError::Unsupported) };
        let Some(rss) = ctrl.rss.as_ref() else { return Err(RssError::Unsupported) };
        if pairs < 2 {
            return Err(RssError::Unsupported);
        }
        if table.len() != rss.table.len() {
            return Err(RssError::BadLength);
        }
        if table.iter().any(|&q| usize::from(q) >= pairs) {
            return Err(RssError::BadQueue);
        }
        match ctrl.send_rss(table, pairs as u16) {
            Some(Ok(())) => Ok(()),
            Some(Err(_)) => Err(RssError::Device),
            None => Err(RssError::Unsupported),
        }
    }

    fn stats(&self) -> PortStats {
        PortStats::of_queues(&self.rx, &self.tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_requires_version_1_and_takes_only_mac_speed_and_platform() {
        assert_eq!(negotiate(feature::NET_MAC, 1), Err(InitError::NoVersion1));
        let all = u64::MAX;
        let base = feature::VERSION_1 | feature::NET_MAC | feature::ACCESS_PLATFORM | feature::NET_SPEED_DUPLEX;
        assert_eq!(negotiate(all, 1), Ok(base));
        assert_eq!(
            negotiate(feature::VERSION_1 | feature::NET_MRG_RXBUF | feature::NET_CSUM, 1),
            Ok(feature::VERSION_1)
        );
    }

    #[test]
    fn negotiation_takes_ctrl_vq_mq_rss_only_for_more_pairs() {
        use feature::{NET_CTRL_VQ, NET_HASH_REPORT, NET_MQ, NET_RSS, VERSION_1};
        let all = u64::MAX;
        let base = feature::VERSION_1 | feature::NET_MAC | feature::ACCESS_PLATFORM | feature::NET_SPEED_DUPLEX;
        assert_eq!(negotiate(all, 4), Ok(base | NET_CTRL_VQ | NET_MQ | NET_RSS));
        assert_eq!(negotiate(all & !NET_HASH_REPORT, 2), Ok(base | NET_CTRL_VQ | NET_MQ | NET_RSS));
        // MQ/RSS without CTRL_VQ are unusable; CTRL_VQ alone is pointless.
        assert_eq!(negotiate(VERSION_1 | NET_MQ | NET_RSS, 4), Ok(VERSION_1));
        assert_eq!(negotiate(VERSION_1 | NET_CTRL_VQ, 4), Ok(VERSION_1));
        assert_eq!(negotiate(VERSION_1 | NET_CTRL_VQ | NET_MQ, 4), Ok(VERSION_1 | NET_CTRL_VQ | NET_MQ));
        assert_eq!(negotiate(VERSION_1 | NET_CTRL_VQ | NET_RSS, 4), Ok(VERSION_1 | NET_CTRL_VQ | NET_RSS));
    }

    #[test]
    fn queue_size_is_a_power_of_two_floor() {
        assert_eq!(pow2_floor(1), 1);
        assert_eq!(pow2_floor(256), 256);
        assert_eq!(pow2_floor(1000), 512);
        assert_eq!(pow2_floor(u16::MAX), 32768);
    }
}

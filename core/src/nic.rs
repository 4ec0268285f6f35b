//! The NIC queue contract: what every driver promises and what every caller may rely on.
//!
//! A driver exposes its receive and transmit queues through [`RxQueue`] and
//! [`TxQueue`], and its port-wide controls through [`Port`]. The pool is passed into
//! each call rather than held by the queue, so one pool can serve several queues
//! and the borrow checker sees who touches buffers when.
//!
//! Ownership rules:
//! - A buffer the driver posts to its RX ring belongs to the ring until `rx_burst`
//!   returns it in the batch; from then on it belongs to the caller.
//! - A buffer handed to `tx_burst` and accepted (removed from the batch) belongs to the
//!   TX ring until the device is done with it; the driver then returns it to the pool
//!   itself, in a later `tx_burst` or `reclaim`.
//! - A buffer `tx_burst` did not accept stays in the batch; the caller decides to
//!   retry or drop it.
//! - Nothing is ever lost: every buffer a driver took from the pool is in its ring,
//!   or was handed to the caller, or was returned to the pool.

use crate::buf::{Batch, Pool};
pub use crate::sync::doorbell::WakeAddr;

/// A receive queue.
pub trait RxQueue {
    /// Moves up to `batch.room()` received frames into `batch`, in arrival order, and
    /// returns how many it moved.
    ///
    /// Obligations:
    /// - Never blocks and never panics; an empty ring returns 0.
    /// - Each returned buffer holds exactly one complete frame ([`Pool::frame`]),
    ///   starting at a frame offset chosen by the driver, without any device header.
    /// - Frames the device flagged as errored, or longer than a buffer, are not
    ///   returned: the driver recycles their buffers and counts them in
    ///   [`RxStats::errors`].
    /// - The driver refills its ring from `pool` for every buffer it hands out. If the
    ///   pool is empty the ring runs short (counted in [`RxStats::no_buffer`]) and is
    ///   topped up again on later calls.
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize;

    /// Counters of this queue since it was created.
    fn rx_stats(&self) -> RxStats;

    /// The CPU address that the device writes when it hands a received frame over (the
    /// used ring's index, a descriptor's write-back), for a sleeper that monitors it
    /// (MONITOR/MWAIT) to wake as soon as a frame arrives. `None` (the default): the
    /// queue offers no such address, and sleeps end on their deadline only.
    fn wake_address(&self) -> Option<WakeAddr> {
        None
    }

    /// Whether this queue stamps each frame it hands out with its arrival
    /// ([`Pool::set_stamp`], in ticks of the worker's clock; 0 for a frame it has no stamp
    /// for), so the latency accounting counts from there ([`crate::latency`]). `false` (the
    /// default): the worker stamps every frame with the reading of the poll that took it.
    /// Asked once per non-empty burst, never per packet.
    fn stamps_arrival(&self) -> bool {
        false
    }

    /// Frames the device has handed over and the driver has not taken yet: what waits in
    /// the ring (a snapshot; more may arrive at once). Read only, never per packet: NetBlaze
    /// adds it to a lane's backlog at the end of an epoch. `None` (the default): the queue
    /// cannot tell without taking them.
    fn pending(&self) -> Option<usize> {
        None
    }
}

/// A transmit queue.
pub trait TxQueue {
    /// Takes frames from the front of `batch` onto the TX ring, in order, and returns
    /// how many it took. Those are removed from `batch`; what did not fit stays there,
    /// in order, for the caller to retry or free.
    ///
    /// Obligations:
    /// - Never blocks and never panics; a full ring takes 0.
    /// - Buffers whose transmission completed are returned to `pool` first, so that a
    ///   ring drained by the device makes room again.
    /// - Frames with a length of 0 or over the device's maximum are not sent: the
    ///   driver frees them to `pool`, counts them in [`TxStats::errors`], and counts
    ///   them as taken. A frame over several buffers (`Pool::is_segmented`) is over the
    ///   maximum of a queue that sends one buffer per frame.
    /// - The doorbell is rung before returning whenever anything was taken.
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize;

    /// Returns buffers of completed transmissions to `pool`, and returns how many.
    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize;

    /// Frames on the ring not yet known to be done.
    fn in_flight(&self) -> usize;

    /// Counters of this queue since it was created.
    fn tx_stats(&self) -> TxStats;
}

/// Port-wide controls and facts.
pub trait Port {
    /// The port's MAC address.
    fn mac(&self) -> [u8; 6];

    /// Number of receive queues in use.
    fn rx_queues(&self) -> usize;

    /// Number of transmit queues in use.
    fn tx_queues(&self) -> usize;

    /// Points the RSS indirection table at receive queues: entry `i` of `table`
    /// steers hash bucket `i`. Only the entries that changed are written.
    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError>;

    /// Port counters (sums over its queues plus anything the device counts).
    fn stats(&self) -> PortStats;
}

/// Why an RSS update was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RssError {
    /// The device has no RSS, or only one queue.
    Unsupported,
    /// The table's length is not one the device takes.
    BadLength,
    /// An entry names a queue the port does not have.
    BadQueue,
    /// The device did not accept the change in time.
    Device,
}

impl core::fmt::Display for RssError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RssError::Unsupported => "RSS unsupported by this port",
            RssError::BadLength => "indirection table length not supported",
            RssError::BadQueue => "indirection entry names a missing queue",
            RssError::Device => "device refused the RSS update",
        })
    }
}

/// Receive counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxStats {
    /// Frames handed to the caller.
    pub packets: u64,
    /// Bytes in those frames.
    pub bytes: u64,
    /// Frames the device flagged as bad, or that did not fit a buffer.
    pub errors: u64,
    /// Times a ring slot could not be refilled because the pool was empty.
    pub no_buffer: u64,
}

/// Transmit counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxStats {
    /// Frames put on the ring.
    pub packets: u64,
    /// Bytes in those frames.
    pub bytes: u64,
    /// Frames refused because of their length.
    pub errors: u64,
    /// Frames offered but not taken because the ring was full.
    pub ring_full: u64,
}

impl RxStats {
    /// Adds `other`'s counters to these (summing a port's queues).
    pub fn add(&mut self, other: &RxStats) {
        self.packets = self.packets.saturating_add(other.packets);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.errors = self.errors.saturating_add(other.errors);
        self.no_buffer = self.no_buffer.saturating_add(other.no_buffer);
    }
}

impl TxStats {
    /// Adds `other`'s counters to these (summing a port's queues).
    pub fn add(&mut self, other: &TxStats) {
        self.packets = self.packets.saturating_add(other.packets);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.errors = self.errors.saturating_add(other.errors);
        self.ring_full = self.ring_full.saturating_add(other.ring_full);
    }
}

/// Port counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PortStats {
    /// Sum over the receive queues.
    pub rx: RxStats,
    /// Sum over the transmit queues.
    pub tx: TxStats,
    /// Frames the device dropped before a queue saw them (missed, no descriptor).
    pub device_drops: u64,
}

impl PortStats {
    /// The sums of `rx` and `tx` queues' counters (no device drops).
    pub fn of_queues<'a, R, T>(rx: impl IntoIterator<Item = &'a R>, tx: impl IntoIterator<Item = &'a T>) -> Self
    where
        R: RxQueue + 'a,
        T: TxQueue + 'a,
    {
        let mut s = PortStats::default();
        for q in rx {
            s.rx.add(&q.rx_stats());
        }
        for q in tx {
            s.tx.add(&q.tx_stats());
        }
        s
    }
}

/// A queue borrowed mutably is still a queue (lets a worker run over queues that
/// stay owned by their device).
impl<Q: RxQueue + ?Sized> RxQueue for &mut Q {
    #[inline]
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        (**self).rx_burst(pool, batch)
    }

    fn rx_stats(&self) -> RxStats {
        (**self).rx_stats()
    }

    fn wake_address(&self) -> Option<WakeAddr> {
        (**self).wake_address()
    }

    fn pending(&self) -> Option<usize> {
        (**self).pending()
    }

    #[inline]
    fn stamps_arrival(&self) -> bool {
        (**self).stamps_arrival()
    }
}

/// A queue borrowed mutably is still a queue.
impl<Q: TxQueue + ?Sized> TxQueue for &mut Q {
    #[inline]
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        (**self).tx_burst(pool, batch)
    }

    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        (**self).reclaim(pool)
    }

    fn in_flight(&self) -> usize {
        (**self).in_flight()
    }

    fn tx_stats(&self) -> TxStats {
        (**self).tx_stats()
    }
}

//! Multi-queue and RSS commands of the control virtqueue (virtio 1.2 §5.1.6.5.5
//! "Automatic receive steering in multiqueue mode", §5.1.6.5.7 "Receive-side scaling
//! (RSS)"), encoded as the device reads them.
//!
//! ```text
//! VIRTIO_NET_CTRL_MQ (4), VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET (0):  le16 virtqueue_pairs
//! VIRTIO_NET_CTRL_MQ (4), VIRTIO_NET_CTRL_MQ_RSS_CONFIG (1):    struct virtio_net_rss_config {
//!     le32 hash_types;                       // VIRTIO_NET_HASH_TYPE_* bits
//!     le16 indirection_table_mask;           // table length - 1 (length a power of two)
//!     le16 unclassified_queue;               // receive queue for unhashed packets
//!     le16 indirection_table[length];        // receive queue per bucket (0 = receiveq1)
//!     le16 max_tx_vq;                        // transmit queues the driver uses
//!     u8 hash_key_length;
//!     u8 hash_key_data[hash_key_length];
//! }
//! ```
//!
//! The device hashes the packet (Toeplitz, the same input layouts as
//! `cadence_core::rss`) and steers it to `indirection_table[hash & mask]`.

use cadence_core::rss::DEFAULT_KEY;

/// `VIRTIO_NET_CTRL_MQ` (§5.1.6.5.5): the multiqueue command class.
pub const CLASS_MQ: u8 = 4;
/// `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET` (§5.1.6.5.5): use this many queue pairs, with the
/// device's automatic steering.
pub const MQ_VQ_PAIRS_SET: u8 = 0;
/// `VIRTIO_NET_CTRL_MQ_RSS_CONFIG` (§5.1.6.5.7.1): use RSS with this configuration.
pub const MQ_RSS_CONFIG: u8 = 1;
/// `VIRTIO_NET_OK` (§5.1.6.5): the ack of a command the device carried out.
pub const ACK_OK: u8 = 0;
/// `VIRTIO_NET_ERR` (§5.1.6.5): the ack of a command the device refused.
pub const ACK_ERR: u8 = 1;

/// `VIRTIO_NET_HASH_TYPE_*` bits (§5.1.6.4.3.1 "Supported/enabled hash types").
pub mod hash_type {
    /// Hash IPv4 packets by addresses.
    pub const IPV4: u32 = 1 << 0;
    /// Hash IPv4 TCP packets by addresses and ports.
    pub const TCPV4: u32 = 1 << 1;
    /// Hash IPv4 UDP packets by addresses and ports.
    pub const UDPV4: u32 = 1 << 2;
    /// Hash IPv6 packets by addresses.
    pub const IPV6: u32 = 1 << 3;
    /// Hash IPv6 TCP packets by addresses and ports.
    pub const TCPV6: u32 = 1 << 4;
    /// Hash IPv6 UDP packets by addresses and ports.
    pub const UDPV6: u32 = 1 << 5;
    /// The types this driver asks for (when the device supports them): the ones
    /// `cadence_core::rss` can predict. The `_EX` types (addresses from IPv6
    /// extension headers) are left off.
    pub const WANTED: u32 = IPV4 | TCPV4 | UDPV4 | IPV6 | TCPV6 | UDPV6;
}

/// Longest indirection table this driver sends: QEMU's maximum
/// (`VIRTIO_NET_RSS_MAX_TABLE_LEN`) and the 82599's RETA size.
pub const MAX_TABLE_LEN: u16 = 128;
/// Longest key this driver sends: `cadence_core::rss::DEFAULT_KEY`.
pub const MAX_KEY_LEN: usize = DEFAULT_KEY.len();

/// Bytes of a `VQ_PAIRS_SET` payload.
pub const VQ_PAIRS_SET_LEN: usize = 2;

/// Bytes of an `RSS_CONFIG` payload with a table of `table_len` entries and a key of
/// `key_len` bytes.
pub const fn rss_config_len(table_len: usize, key_len: usize) -> usize {
    4 + 2 + 2 + 2 * table_len + 2 + 1 + key_len
}

/// The longest `RSS_CONFIG` payload this driver sends.
pub const MAX_RSS_CONFIG_LEN: usize = rss_config_len(MAX_TABLE_LEN as usize, MAX_KEY_LEN);

/// The `VQ_PAIRS_SET` payload (`struct virtio_net_ctrl_mq { le16 virtqueue_pairs; }`).
pub fn vq_pairs_set(pairs: u16) -> [u8; VQ_PAIRS_SET_LEN] {
    pairs.to_le_bytes()
}

/// What an `RSS_CONFIG` command says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RssConfig<'a> {
    /// `VIRTIO_NET_HASH_TYPE_*` bits to hash by.
    pub hash_types: u32,
    /// Receive queue per hash bucket; its length is a power of two.
    pub table: &'a [u16],
    /// Receive queue of packets that are not hashed.
    pub unclassified_queue: u16,
    /// Transmit queues the driver uses.
    pub max_tx_vq: u16,
    /// The Toeplitz key.
    pub key: &'a [u8],
}

impl RssConfig<'_> {
    /// Bytes of the payload.
    pub fn len(&self) -> usize {
        rss_config_len(self.table.len(), self.key.len())
    }

    /// Whether the payload is empty (never: it has fixed fields).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the payload (`struct virtio_net_rss_config`, §5.1.6.5.7.1) into the front
    /// of `out` and returns its length; `None` when `out` is too short, the table is
    /// empty or not a power of two long, or the key is longer than 255 bytes.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.len();
        let table_len = self.table.len();
        // §5.1.6.5.7.1: "The driver MUST set indirection_table_mask to
        // indirection_table_length - 1", a power of two.
        if !table_len.is_power_of_two() || table_len > usize::from(u16::MAX) + 1 {
            return None;
        }
        let key_len = u8::try_from(self.key.len()).ok()?;
        let out = out.get_mut(..len)?;
        let mut w = Writer { out, at: 0 };
        w.put(&self.hash_types.to_le_bytes());
        w.put(&((table_len - 1) as u16).to_le_bytes());
        w.put(&self.unclassified_queue.to_le_bytes());
        for q in self.table {
            w.put(&q.to_le_bytes());
        }
        w.put(&self.max_tx_vq.to_le_bytes());
        w.put(&[key_len]);
        w.put(self.key);
        Some(w.at)
    }
}

/// Appends bytes to a slice known to be long enough.
struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, b: &[u8]) {
        if let Some(d) = self.out.get_mut(self.at..self.at + b.len()) {
            d.copy_from_slice(b);
        }
        self.at += b.len();
    }
}

/// The default indirection table entry `i` for `pairs` receive queues: round-robin.
pub const fn default_entry(i: usize, pairs: u16) -> u16 {
    if pairs == 0 { 0 } else { (i % pairs as usize) as u16 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_config_bytes_follow_the_spec_layout() {
        let table = [0u16, 1, 2, 1];
        let key = [0xAA, 0xBB, 0xCC];
        let cfg = RssConfig { hash_types: 0x3F, table: &table, unclassified_queue: 2, max_tx_vq: 3, key: &key };
        let mut out = [0xEEu8; 32];
        let n = cfg.encode(&mut out).expect("fits");
        assert_eq!(n, 4 + 2 + 2 + 8 + 2 + 1 + 3);
        assert_eq!(
            &out[..n],
            &[
                0x3F, 0, 0, 0, // hash_types
                3, 0, // indirection_table_mask = 4 - 1
                2, 0, // unclassified_queue
                0, 0, 1, 0, 2, 0, 1, 0, // indirection_table
                3, 0, // max_tx_vq
                3, // hash_key_length
                0xAA, 0xBB, 0xCC, // hash_key_data
            ]
        );
        assert_eq!(out[n], 0xEE, "nothing written past the payload");
    }

    #[test]
    fn rss_config_refuses_bad_tables_and_short_buffers() {
        let key = [0u8; 40];
        let bad = RssConfig { hash_types: 1, table: &[0, 1, 2], unclassified_queue: 0, max_tx_vq: 1, key: &key };
        assert_eq!(bad.encode(&mut [0; 256]), None);
        let empty = RssConfig { table: &[], ..bad };
        assert_eq!(empty.encode(&mut [0; 256]), None);
        let ok = RssConfig { table: &[0; 128], ..bad };
        assert_eq!(ok.len(), MAX_RSS_CONFIG_LEN);
        assert_eq!(ok.encode(&mut [0; MAX_RSS_CONFIG_LEN - 1]), None);
        assert_eq!(ok.encode(&mut [0; MAX_RSS_CONFIG_LEN]), Some(MAX_RSS_CONFIG_LEN));
    }

    #[test]
    fn vq_pairs_set_is_le16_and_default_table_is_round_robin() {
        assert_eq!(vq_pairs_set(0x0203), [0x03, 0x02]);
        let t: Vec<u16> = (0..8).map(|i| default_entry(i, 3)).collect();
        assert_eq!(t, [0, 1, 2, 0, 1, 2, 0, 1]);
    }
}

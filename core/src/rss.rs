//! Receive-side scaling: the Toeplitz hash, its input layouts, and the indirection table.
//!
//! Toeplitz (Microsoft "RSS hashing", the 82599 datasheet §7.1.2.8): for every bit
//! `b` of the input, most significant bit of the first byte first, if `b` is set the
//! result is XORed with the 32 key bits starting at the same bit position of the key.
//! The key therefore must be at least 4 bytes longer than the input.
//!
//! Input layouts (82599 §7.1.2.8.1; Microsoft "RSS hashing types"): source address,
//! destination address, then — for the TCP/UDP variants — source port and
//! destination port, all in network byte order. IPv4 takes 8 or 12 bytes, IPv6 32 or
//! 36, so the default 40-byte key covers every layout.
//!
//! The NIC uses the low bits of the hash to index its redirection (RETA) table
//! (82599 §7.1.2.10: "the 7 LS bits of the hash result are used as an index into a
//! 128-entry redirection table"); [`reta_index`] does the same in software so that a
//! core can predict where the NIC steers a flow.

pub mod meter;

pub use meter::{BucketLoad, BucketMeter, MeterError, MeterSnapshot, PeriodSum};

use alloc::vec::Vec;
use core::fmt;

use crate::parse::{FlowKey, IpAddr};

/// The Microsoft/Intel default RSS key (the one of the RSS verification suite).
pub const DEFAULT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// Longest hash input Cadence builds (IPv6 addresses plus ports).
pub const MAX_INPUT: usize = 36;

/// Why a Toeplitz hash or table could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ToeplitzError {
    /// The key is not at least 4 bytes longer than the input.
    KeyTooShort,
}

impl fmt::Display for ToeplitzError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToeplitzError::KeyTooShort => "Toeplitz key must be at least 4 bytes longer than the input",
        })
    }
}

/// The Toeplitz hash of `input` under `key`, bit by bit (the reference definition).
pub fn toeplitz(key: &[u8], input: &[u8]) -> Result<u32, ToeplitzError> {
    if key.len() < input.len() + 4 {
        return Err(ToeplitzError::KeyTooShort);
    }
    let mut result = 0u32;
    // The 32-bit key window starting at the current input bit, most significant first.
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, &byte) in input.iter().enumerate() {
        // The key byte that slides into the window as the input advances 8 bits.
        let next = key[i + 4];
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window;
            }
            window = (window << 1) | u32::from((next >> (7 - bit)) & 1);
        }
    }
    Ok(result)
}

/// A Toeplitz hash with one precomputed 256-entry table per input byte position:
/// one lookup and one XOR per input byte. Built at initialization (allocates
/// `max_input * 1 KiB`).
#[derive(Debug, Clone)]
pub struct ToeplitzTable {
    tables: Vec<[u32; 256]>,
}

impl ToeplitzTable {
    /// Precomputes the tables of `key` for inputs of up to `max_input` bytes.
    pub fn try_new(key: &[u8], max_input: usize) -> Result<Self, ToeplitzError> {
        if key.len() < max_input + 4 {
            return Err(ToeplitzError::KeyTooShort);
        }
        let mut tables = alloc::vec![[0u32; 256]; max_input];
        for (pos, table) in tables.iter_mut().enumerate() {
            // The window for each of the 8 bits of the byte at `pos`.
            let mut windows = [0u32; 8];
            let base = u64::from_be_bytes([
                key[pos],
                key[pos + 1],
                key[pos + 2],
                key[pos + 3],
                key.get(pos + 4).copied().unwrap_or(0),
                0,
                0,
                0,
            ]);
            for (bit, w) in windows.iter_mut().enumerate() {
                *w = (base >> (32 - bit)) as u32;
            }
            for (value, slot) in table.iter_mut().enumerate() {
                let mut h = 0;
                for (bit, w) in windows.iter().enumerate() {
                    if value & (0x80 >> bit) != 0 {
                        h ^= w;
                    }
                }
                *slot = h;
            }
        }
        Ok(Self { tables })
    }

    /// Longest input this table hashes.
    pub fn max_input(&self) -> usize {
        self.tables.len()
    }

    /// The Toeplitz hash of `input`. Bytes beyond [`max_input`](Self::max_input) are
    /// ignored (a debug assertion catches that mistake in tests).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        debug_assert!(input.len() <= self.tables.len(), "input longer than the table");
        self.tables.iter().zip(input).fold(0, |h, (t, &b)| h ^ t[b as usize])
    }

    /// The hash of a flow as the NIC lays it out ([`RssInput::from_flow`]), with the layout
    /// built in a fixed-size array per family (what the per-packet meter uses); the table
    /// must cover it (36 bytes for IPv6 with ports).
    #[inline]
    pub fn hash_flow(&self, flow: &FlowKey, with_ports: bool) -> u32 {
        let ports = with_ports && flow.has_ports();
        let (sp, dp) = (flow.src_port.to_be_bytes(), flow.dst_port.to_be_bytes());
        match (flow.src, flow.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let b = [s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3], sp[0], sp[1], dp[0], dp[1]];
                self.hash(if ports { &b } else { &b[..8] })
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let mut b = [0u8; 36];
                b[..16].copy_from_slice(&s);
                b[16..32].copy_from_slice(&d);
                b[32..34].copy_from_slice(&sp);
                b[34..].copy_from_slice(&dp);
                self.hash(if ports { &b } else { &b[..32] })
            }
            _ => self.hash(RssInput::from_flow(flow, with_ports).as_bytes()),
        }
    }
}

/// A hash input: up to [`MAX_INPUT`] bytes laid out as the NIC lays them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RssInput {
    bytes: [u8; MAX_INPUT],
    len: u8,
}

impl RssInput {
    fn from_parts(src: &[u8], dst: &[u8], ports: Option<(u16, u16)>) -> Self {
        let mut bytes = [0u8; MAX_INPUT];
        let mut len = 0;
        let mut put = |s: &[u8]| {
            if let Some(d) = bytes.get_mut(len..len + s.len()) {
                d.copy_from_slice(s);
                len += s.len();
            }
        };
        put(src);
        put(dst);
        if let Some((sp, dp)) = ports {
            put(&sp.to_be_bytes());
            put(&dp.to_be_bytes());
        }
        Self { bytes, len: len as u8 }
    }

    /// IPv4 addresses, with the source and destination ports when given.
    pub fn v4(src: [u8; 4], dst: [u8; 4], ports: Option<(u16, u16)>) -> Self {
        Self::from_parts(&src, &dst, ports)
    }

    /// IPv6 addresses, with the source and destination ports when given.
    pub fn v6(src: &[u8; 16], dst: &[u8; 16], ports: Option<(u16, u16)>) -> Self {
        Self::from_parts(src, dst, ports)
    }

    /// The input for a parsed flow: addresses, plus ports when `with_ports` is set and
    /// the flow is TCP or UDP (the NIC hashes other protocols, and fragments, by
    /// addresses only).
    pub fn from_flow(flow: &FlowKey, with_ports: bool) -> Self {
        let ports = (with_ports && flow.has_ports()).then_some((flow.src_port, flow.dst_port));
        match (flow.src, flow.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Self::v4(s, d, ports),
            (IpAddr::V6(s), IpAddr::V6(d)) => Self::v6(&s, &d, ports),
            // A FlowKey built by the parser never mixes families; hash what is there.
            (s, d) => Self::from_parts(s.as_bytes(), d.as_bytes(), ports),
        }
    }

    /// The bytes to hash.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len as usize).unwrap_or(&[])
    }
}

/// The redirection-table slot of `hash` in a table of `table_len` entries: the low
/// bits of the hash for a power-of-two table (what the NIC does), the remainder
/// otherwise; 0 for an empty table.
#[inline]
pub const fn reta_index(hash: u32, table_len: usize) -> usize {
    if table_len == 0 {
        0
    } else if table_len.is_power_of_two() {
        hash as usize & (table_len - 1)
    } else {
        hash as usize % table_len
    }
}

/// The queue that `table` steers `hash` to, or `None` for an empty table.
#[inline]
pub fn queue_for(hash: u32, table: &[u16]) -> Option<u16> {
    table.get(reta_index(hash, table.len())).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One row of the verification suite: source, source port, destination,
    /// destination port, hash of the addresses, hash of addresses and ports.
    type Row<A> = (A, u16, A, u16, u32, u32);

    /// Microsoft RSS verification suite, IPv4 (also 82599 datasheet §7.1.2.8.3).
    const V4: [Row<[u8; 4]>; 5] = [
        ([66, 9, 149, 187], 2794, [161, 142, 100, 80], 1766, 0x323e_8fc2, 0x51cc_c178),
        ([199, 92, 111, 2], 14230, [65, 69, 140, 83], 4739, 0xd718_262a, 0xc626_b0ea),
        ([24, 19, 198, 95], 12898, [12, 22, 207, 184], 38024, 0xd2d0_a5de, 0x5c2b_394a),
        ([38, 27, 205, 30], 48228, [209, 142, 163, 6], 2217, 0x8298_9176, 0xafc7_327f),
        ([153, 39, 163, 191], 44251, [202, 188, 127, 2], 1303, 0x5d18_09c5, 0x10e8_28a2),
    ];

    fn v6(groups: [u16; 8]) -> [u8; 16] {
        let mut a = [0u8; 16];
        for (i, g) in groups.iter().enumerate() {
            a[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
        }
        a
    }

    /// Microsoft RSS verification suite, IPv6.
    fn v6_rows() -> [Row<[u8; 16]>; 3] {
        [
            (
                v6([0x3ffe, 0x2501, 0x200, 0x1fff, 0, 0, 0, 7]),
                2794,
                v6([0x3ffe, 0x2501, 0x200, 3, 0, 0, 0, 1]),
                1766,
                0x2cc1_8cd5,
                0x4020_7d3d,
            ),
            (
                v6([0x3ffe, 0x501, 8, 0, 0x260, 0x97ff, 0xfe40, 0xefab]),
                14230,
                v6([0xff02, 0, 0, 0, 0, 0, 0, 1]),
                4739,
                0x0f0c_461c,
                0xdde5_1bbf,
            ),
            (
                v6([0x3ffe, 0x1900, 0x4545, 3, 0x200, 0xf8ff, 0xfe21, 0x67cf]),
                44251,
                v6([0xfe80, 0, 0, 0, 0x200, 0xf8ff, 0xfe21, 0x67cf]),
                38024,
                0x4b61_e985,
                0x02d1_feef,
            ),
        ]
    }

    #[test]
    fn verification_suite_ipv4() {
        let table = ToeplitzTable::try_new(&DEFAULT_KEY, MAX_INPUT).unwrap();
        for (src, sp, dst, dp, l3, l4) in V4 {
            let a = RssInput::v4(src, dst, None);
            let b = RssInput::v4(src, dst, Some((sp, dp)));
            assert_eq!(toeplitz(&DEFAULT_KEY, a.as_bytes()), Ok(l3), "{src:?}");
            assert_eq!(toeplitz(&DEFAULT_KEY, b.as_bytes()), Ok(l4), "{src:?}");
            assert_eq!(table.hash(a.as_bytes()), l3);
            assert_eq!(table.hash(b.as_bytes()), l4);
        }
    }

    #[test]
    fn verification_suite_ipv6() {
        let table = ToeplitzTable::try_new(&DEFAULT_KEY, MAX_INPUT).unwrap();
        for (src, sp, dst, dp, l3, l4) in v6_rows() {
            let a = RssInput::v6(&src, &dst, None);
            let b = RssInput::v6(&src, &dst, Some((sp, dp)));
            assert_eq!(a.as_bytes().len(), 32);
            assert_eq!(b.as_bytes().len(), 36);
            assert_eq!(toeplitz(&DEFAULT_KEY, a.as_bytes()), Ok(l3));
            assert_eq!(toeplitz(&DEFAULT_KEY, b.as_bytes()), Ok(l4));
            assert_eq!(table.hash(a.as_bytes()), l3);
            assert_eq!(table.hash(b.as_bytes()), l4);
        }
    }

    #[test]
    fn flow_key_input_matches_manual_layout() {
        let (src, sp, dst, dp, _, l4) = V4[0];
        let flow = FlowKey { src: IpAddr::V4(src), dst: IpAddr::V4(dst), src_port: sp, dst_port: dp, proto: 6 };
        assert_eq!(toeplitz(&DEFAULT_KEY, RssInput::from_flow(&flow, true).as_bytes()), Ok(l4));
        let icmp = FlowKey { proto: 1, src_port: 0, dst_port: 0, ..flow };
        assert_eq!(RssInput::from_flow(&icmp, true).as_bytes().len(), 8);
    }

    #[test]
    fn short_key_is_refused() {
        assert_eq!(toeplitz(&DEFAULT_KEY[..11], &[0; 8]), Err(ToeplitzError::KeyTooShort));
        assert_eq!(toeplitz(&DEFAULT_KEY[..12], &[0; 8]), Ok(0));
        assert!(ToeplitzTable::try_new(&DEFAULT_KEY, 37).is_err());
    }

    #[test]
    fn reta_index_uses_low_bits() {
        assert_eq!(reta_index(0x51cc_c178, 128), 0x78);
        assert_eq!(reta_index(0x51cc_c178, 0), 0);
        assert_eq!(reta_index(10, 3), 1);
        assert_eq!(queue_for(0x0000_0005, &[0, 1, 2, 3]), Some(1));
        assert_eq!(queue_for(5, &[]), None);
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        #[test]
        fn table_equals_bitwise(key in proptest::collection::vec(any::<u8>(), 40), input in proptest::collection::vec(any::<u8>(), 0..=36)) {
            let t = ToeplitzTable::try_new(&key, 36).unwrap();
            prop_assert_eq!(Ok(t.hash(&input)), toeplitz(&key, &input));
        }

        #[test]
        fn hashing_a_flow_field_by_field_equals_hashing_its_layout(
            v6 in any::<bool>(),
            src in any::<[u8; 16]>(),
            dst in any::<[u8; 16]>(),
            ports in any::<(u16, u16)>(),
            proto in prop_oneof![Just(6u8), Just(17u8), Just(1u8)],
            with_ports in any::<bool>(),
        ) {
            let t = ToeplitzTable::try_new(&DEFAULT_KEY, MAX_INPUT).unwrap();
            let (s, d) = if v6 {
                (IpAddr::V6(src), IpAddr::V6(dst))
            } else {
                (IpAddr::V4([src[0], src[1], src[2], src[3]]), IpAddr::V4([dst[0], dst[1], dst[2], dst[3]]))
            };
            let flow = FlowKey { src: s, dst: d, src_port: ports.0, dst_port: ports.1, proto };
            let whole = RssInput::from_flow(&flow, with_ports);
            prop_assert_eq!(Ok(t.hash_flow(&flow, with_ports)), toeplitz(&DEFAULT_KEY, whole.as_bytes()));
        }
    }
}

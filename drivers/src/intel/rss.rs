//! Receive-side scaling registers shared by ixgbe and igb (82599 §7.1.2.8, §8.2.3.7.13
//! – §8.2.3.7.16; 82576 §7.1.1.7, §8.10.11 – §8.10.14): the same offsets on both.
//!
//! - RSSRK(0..9): the 40-byte Toeplitz key, key byte `4i + j` in bits `8j+7:8j` of
//!   register `i`.
//! - RETA(0..31): 128 one-byte entries, four per register, entry `4i + j` in byte `j`;
//!   the device takes the 7 low bits of the hash as the entry index. The X550 family
//!   extends the table to 512 entries with ERETA(0..95) (ixgbe only).
//!
//! Live updates: every 32-bit RETA write retargets its four buckets atomically and the
//! device has no commit register, so [`RetaShadow::update`] writes only registers
//! whose bytes changed. The caveat for a caller that moves buckets under traffic:
//! frames of a moved flow that arrived before the write sit in the old queue, the
//! next ones in the new queue. If per-flow order matters, drain the old queue past the
//! moment of the write before serving the moved buckets from the new queue.

use core::mem::offset_of;
use volatile_register::RW;

use cadence_core::nic::RssError;

use super::field::{Field, Regs};
use crate::hal::Mmio;

/// The RSS register block at 0x05C00. Layout only.
#[repr(C)]
#[allow(dead_code)] // Layout only.
pub(crate) struct RssBlock {
    /// 0x05C00 RETA(0..31): redirection table, 4 entries per register.
    reta: [RW<u32>; 32],
    /// 0x05C80 RSSRK(0..9): the RSS random key.
    rssrk: [RW<u32>; 10],
}

/// Base of [`RssBlock`].
pub const RSS_BLOCK: usize = 0x05C00;
/// RETA(0).
pub const RETA: usize = RSS_BLOCK + offset_of!(RssBlock, reta);
/// RSSRK(0).
pub const RSSRK: usize = RSS_BLOCK + offset_of!(RssBlock, rssrk);
/// MRQC (82599 §8.2.3.7.12, 82576 §8.10.10): multiple receive queues command.
pub const MRQC: usize = 0x05818;
/// RXCSUM (82599 §8.2.3.7.5, 82576 §8.10.9).
pub const RXCSUM: usize = 0x05000;
const _: () = assert!(RETA == 0x05C00);
const _: () = assert!(RSSRK == 0x05C80);

/// RXCSUM.PCSD (bit 13): write the RSS hash into the descriptor instead of the
/// fragment checksum. The igb model of QEMU requires it for RSS at all.
pub const RXCSUM_PCSD: Field = Field::bit(13);
/// MRQC.MRQE 3:0 (82599): 0001b = RSS only. (82576 uses 2:0 = 010b; see igb.)
pub const MRQC_MRQE: Field = Field::new(0, 4);
/// MRQC hash-function enables (bits 16..24, the same on both devices).
pub mod mrqc_field {
    use super::Field;
    /// TCP over IPv4.
    pub const IPV4_TCP: Field = Field::bit(16);
    /// IPv4 addresses.
    pub const IPV4: Field = Field::bit(17);
    /// TCP over IPv6 with extension headers.
    pub const IPV6_EX_TCP: Field = Field::bit(18);
    /// IPv6 with extension headers.
    pub const IPV6_EX: Field = Field::bit(19);
    /// IPv6 addresses.
    pub const IPV6: Field = Field::bit(20);
    /// TCP over IPv6.
    pub const IPV6_TCP: Field = Field::bit(21);
    /// UDP over IPv4.
    pub const IPV4_UDP: Field = Field::bit(22);
    /// UDP over IPv6.
    pub const IPV6_UDP: Field = Field::bit(23);
    /// Every hash type this driver enables: addresses and TCP/UDP ports, v4 and v6.
    pub const ALL: u32 = IPV4_TCP.mask()
        | IPV4.mask()
        | IPV6_EX_TCP.mask()
        | IPV6.mask()
        | IPV6_TCP.mask()
        | IPV4_UDP.mask()
        | IPV6_UDP.mask();
}

/// Writes the 40-byte key into RSSRK(0..9).
pub fn write_key<W: Mmio>(bar: &W, key: &[u8; 40]) {
    let r = Regs::new(bar);
    for (i, k) in key.chunks_exact(4).enumerate() {
        r.write(RSSRK + 4 * i, u32::from_le_bytes([k[0], k[1], k[2], k[3]]));
    }
}

/// Most entries any supported device has (X550 RETA + ERETA).
pub const MAX_ENTRIES: usize = 512;

/// The driver's copy of the redirection table, so that updates write only what changed.
#[derive(Debug, Clone)]
pub struct RetaShadow {
    entries: [u8; MAX_ENTRIES],
    len: usize,
}

impl RetaShadow {
    /// A table of `len` entries (128 or 512) spreading buckets round robin over
    /// `queues` queues, as the device will hold it after [`Self::write_all`].
    pub fn round_robin(len: usize, queues: u16) -> Self {
        let mut entries = [0u8; MAX_ENTRIES];
        let q = queues.max(1) as usize;
        for (i, e) in entries.iter_mut().take(len).enumerate() {
            *e = (i % q) as u8;
        }
        Self { entries, len: len.min(MAX_ENTRIES) }
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries.
    pub fn entries(&self) -> &[u8] {
        self.entries.get(..self.len).unwrap_or(&[])
    }

    /// Register `r`'s value: entries `4r..4r+4`, entry `4r + j` in byte `j`.
    pub fn reg_value(&self, r: usize) -> u32 {
        let e = |j: usize| self.entries.get(4 * r + j).copied().unwrap_or(0);
        u32::from_le_bytes([e(0), e(1), e(2), e(3)])
    }

    /// Writes every register; `reg_off(r)` is the offset of register `r`.
    pub fn write_all<W: Mmio>(&self, bar: &W, reg_off: impl Fn(usize) -> usize) {
        for r in 0..self.len / 4 {
            bar.write32(reg_off(r), self.reg_value(r));
        }
    }

    /// Replaces the table with `table` and writes the registers whose bytes changed;
    /// returns how many it wrote. `table`'s length must be a power of two up to the
    /// device's size; a shorter table is repeated (bucket `i` gets `table[i % len]`,
    /// which is what indexing with fewer hash bits means). Every entry must name one
    /// of the first `queues` queues. Nothing is written when the table is refused.
    pub fn update<W: Mmio>(
        &mut self,
        bar: &W,
        table: &[u16],
        queues: u16,
        reg_off: impl Fn(usize) -> usize,
    ) -> Result<usize, RssError> {
        if table.is_empty() || !table.len().is_power_of_two() || table.len() > self.len {
            return Err(RssError::BadLength);
        }
        if table.iter().any(|&q| q >= queues) {
            return Err(RssError::BadQueue);
        }
        let mut written = 0;
        for r in 0..self.len / 4 {
            let old = self.reg_value(r);
            for j in 0..4 {
                let i = 4 * r + j;
                if let (Some(e), Some(&q)) = (self.entries.get_mut(i), table.get(i % table.len())) {
                    *e = q as u8;
                }
            }
            let new = self.reg_value(r);
            if new != old {
                bar.write32(reg_off(r), new);
                written += 1;
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::RefCell;

    /// A register file that records writes.
    struct Log(RefCell<alloc::vec::Vec<(usize, u32)>>);
    impl Mmio for Log {
        fn read8(&self, _: usize) -> u8 {
            0
        }
        fn read16(&self, _: usize) -> u16 {
            0
        }
        fn read32(&self, _: usize) -> u32 {
            0
        }
        fn write8(&self, _: usize, _: u8) {}
        fn write16(&self, _: usize, _: u16) {}
        fn write32(&self, off: usize, val: u32) {
            self.0.borrow_mut().push((off, val));
        }
        fn len(&self) -> usize {
            0x20000
        }
    }

    #[test]
    fn entries_pack_little_endian_four_per_register() {
        let s = RetaShadow::round_robin(128, 4);
        assert_eq!(s.reg_value(0), 0x0302_0100);
        assert_eq!(s.reg_value(31), 0x0302_0100);
    }

    #[test]
    fn key_bytes_go_in_order() {
        let log = Log(RefCell::new(alloc::vec::Vec::new()));
        write_key(&log, &cadence_core::rss::DEFAULT_KEY);
        let w = log.0.borrow();
        assert_eq!(w.len(), 10);
        assert_eq!(w[0], (0x05C80, 0xDA56_5A6D));
        assert_eq!(w[9], (0x05CA4, 0xFA01_ACBE));
    }

    #[test]
    fn update_writes_only_changed_registers_and_checks_input() {
        let log = Log(RefCell::new(alloc::vec::Vec::new()));
        let mut s = RetaShadow::round_robin(128, 4);
        let mut t = [0u16; 128];
        for (i, e) in t.iter_mut().enumerate() {
            *e = (i % 4) as u16;
        }
        assert_eq!(s.update(&log, &t, 4, |r| RETA + 4 * r), Ok(0));
        t[5] = 3;
        t[127] = 0;
        assert_eq!(s.update(&log, &t, 4, |r| RETA + 4 * r), Ok(2));
        assert_eq!(log.0.borrow().as_slice(), &[(RETA + 4, 0x0302_0300), (RETA + 124, 0x0002_0100)]);
        assert_eq!(s.update(&log, &t, 3, |r| RETA + 4 * r), Err(RssError::BadQueue));
        assert_eq!(s.update(&log, &t[..100], 4, |r| RETA + 4 * r), Err(RssError::BadLength));
        // A 2-entry table is repeated: everything alternates 1, 0.
        assert!(s.update(&log, &[1, 0], 4, |r| RETA + 4 * r).is_ok());
        assert_eq!(s.reg_value(7), 0x0001_0001);
    }
}

//! Receive-side scaling registers shared by ixgbe and igb (82599 §7.1.2.8, §8.2.3.7.13
//! – §8.2.3.7.16; 82576 §7.1.1.7, §8.10.11 – §8.10.14): the same offsets on both.
//!
//! - RSSRK(0..9): the 40-byte Toeplitz key, key byte `4i + j` in bits `8j+7:8j` of
//!   register `i`.
//! - RETA(0..31): 128 one-byte entries, four per register, entry `4i + j` in byte `j`;
//!   the device takes the 7 low bits of the hash as the entry index. The X550 family
//!   extends the table to 512 entries with ERETA(0..95) (ixgbe only).
//! - MRQC is declared by each device (`ixgbe::regs`, `igb::regs`): its MRQE field
//!   differs (82599 3:0 = 0001b, 82576 2:0 = 010b).
//!
//! [`RetaShadow`] is the driver's copy of a table of byte entries packed four per
//! register, entry `4r + j` in byte `j` of register `r`: RETA/ERETA here, and the
//! XL710's PFQF_HLUT (`crate::i40e`), which packs its 512 entries the same way.
//!
//! Live updates: every 32-bit RETA write retargets its four buckets atomically and the
//! device has no commit register, so [`RetaShadow::update`] writes only registers
//! whose bytes changed. The caveat for a caller that moves buckets under traffic:
//! frames of a moved flow that arrived before the write sit in the old queue, the
//! next ones in the new queue. If per-flow order matters, drain the old queue past the
//! moment of the write before serving the moved buckets from the new queue.

use cadence_core::nic::RssError;

use crate::hal::Mmio;
use crate::reg::{Regs, Value};
use crate::registers;

registers! {
    /// RETA(0..31) at 0x05C00: redirection table, 4 entries per register.
    pub RETA: Rw<u32> @ 0x05C00 [32; stride 4] {}
    /// RSSRK(0..9) at 0x05C80: the RSS random key.
    pub RSSRK: Rw<u32> @ 0x05C80 [10; stride 4] {}
    /// RXCSUM (82599 §8.2.3.7.5, 82576 §8.10.9).
    pub RXCSUM: Rw<u32> @ 0x05000 {
        /// PCSD: write the RSS hash into the descriptor instead of the fragment
        /// checksum. The igb model of QEMU requires it for RSS at all.
        PCSD: 13,
    }
}

/// Writes the 40-byte key into RSSRK(0..9): key byte `4i + j` in bits `8j+7:8j` of
/// register `i`.
pub fn write_key<W: Mmio>(bar: &W, key: &[u8; 40]) {
    let r = Regs::new(bar);
    for (reg, k) in RSSRK.iter().zip(key.chunks_exact(4)) {
        r.write(reg, Value::new(u32::from_le_bytes([k[0], k[1], k[2], k[3]]).into()));
    }
}

/// Writes RETA register `i` (0..32) with `v`: the table of the 82599 and the 82576.
pub fn write_reta<W: Mmio>(bar: &W, i: usize, v: u32) {
    if let Some(reg) = RETA.at(i) {
        Regs::new(bar).write(reg, Value::new(v.into()));
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

    /// Registers the table spans (four entries each).
    pub fn regs(&self) -> usize {
        self.len / 4
    }

    /// Writes every register through `write(r, value)` (the device's table registers:
    /// RETA, ERETA, the XL710's HLUT).
    pub fn write_all(&self, mut write: impl FnMut(usize, u32)) {
        for r in 0..self.regs() {
            write(r, self.reg_value(r));
        }
    }

    /// Replaces the table with `table` and writes the registers whose bytes changed;
    /// returns how many it wrote. `table`'s length must be a power of two up to the
    /// device's size; a shorter table is repeated (bucket `i` gets `table[i % len]`,
    /// which is what indexing with fewer hash bits means). Every entry must name one
    /// of the first `queues` queues. Nothing is written when the table is refused.
    pub fn update(&mut self, table: &[u16], queues: u16, mut write: impl FnMut(usize, u32)) -> Result<usize, RssError> {
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
                write(r, new);
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
        let w = |r, v| write_reta(&log, r, v);
        assert_eq!(s.update(&t, 4, w), Ok(0));
        t[5] = 3;
        t[127] = 0;
        assert_eq!(s.update(&t, 4, w), Ok(2));
        assert_eq!(log.0.borrow().as_slice(), &[(0x05C04, 0x0302_0300), (0x05C7C, 0x0002_0100)]);
        assert_eq!(s.update(&t, 3, w), Err(RssError::BadQueue));
        assert_eq!(s.update(&t[..100], 4, w), Err(RssError::BadLength));
        // A 2-entry table is repeated: everything alternates 1, 0.
        assert!(s.update(&[1, 0], 4, w).is_ok());
        assert_eq!(s.reg_value(7), 0x0001_0001);
    }
}

//! The model's HMC (XL710 datasheet §7.9): segment descriptors written through
//! PFHMC_SDCMD, LAN object bases/counts, and the queue contexts read out of host memory
//! when a queue is enabled. Context layouts from §8.3.3.2.2 (RX) and §8.4.3.4.2 (TX),
//! decoded with a bit reader of this file's own.

use super::{Device, off};

/// Segment descriptor 0 as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Backing physical address.
    pub pa: u64,
    /// Backing pages (4 KiB).
    pub pages: u64,
}

/// `width` bits at bit `lsb` of `img`, little-endian.
fn bits(img: &[u8], lsb: usize, width: usize) -> u64 {
    let mut v = 0u64;
    for b in 0..width {
        let bit = lsb + b;
        if img[bit / 8] >> (bit % 8) & 1 == 1 {
            v |= 1 << b;
        }
    }
    v
}

/// A decoded RX queue context.
#[derive(Debug, Clone, Copy)]
pub struct RxContext {
    pub base: u64,
    pub qlen: u32,
    pub dbuff: usize,
    pub dtype: u64,
    pub dsize: u64,
    pub crcstrip: bool,
    pub rxmax: usize,
}

/// A decoded TX queue context.
#[derive(Debug, Clone, Copy)]
pub struct TxContext {
    pub base: u64,
    pub qlen: u32,
    pub new_context: bool,
    pub head_wb: bool,
    pub rdylist: u16,
}

impl Device {
    /// PFHMC_SDCMD: with PMSDWR, the SDDATA registers go into descriptor PMSDIDX.
    pub(crate) fn write_sd(&mut self, v: u32) {
        if v & 1 << 31 == 0 {
            return;
        }
        let idx = v & 0xFFF;
        let part = self.reg(off::GLHMC_SDPART + 4 * self.pf);
        if idx >= (part >> 16) & 0x1FFF {
            self.violations.push(format!("segment descriptor {idx} outside the PF's partition"));
            return;
        }
        let lo = self.reg(off::PFHMC_SDDATALOW);
        let hi = self.reg(off::PFHMC_SDDATAHIGH);
        if lo & 1 == 0 {
            if idx == 0 {
                self.sd = None;
            }
            return;
        }
        if lo & 2 == 0 {
            self.violations.push("paged segment descriptors are not modeled (use direct mode)".into());
            return;
        }
        if idx != 0 {
            // Only SD 0 is modeled: 2 MiB hold 1536 TX + RX contexts.
            return;
        }
        let pa = (hi as u64) << 32 | (lo & 0xFFFF_F000) as u64;
        let pages = ((lo >> 2) & 0x3FF) as u64;
        if pages == 0 {
            self.violations.push("segment descriptor with no backing pages".into());
        }
        if !self.host.device_may_access(pa, (pages * 4096) as usize) {
            self.violations.push(format!("HMC backing {pa:#x}+{} pages outside allocated memory", pages));
        }
        self.sd = Some(Segment { pa, pages });
    }

    /// Flags an HMC error (PFHMC_ERRORINFO) and a violation.
    fn hmc_error(&mut self, what: String) {
        self.set(off::PFHMC_ERRORINFO, 1 << 31 | 1 << 8);
        self.violations.push(what);
    }

    /// Reads `len` bytes of object `q` of the LAN kind whose base/count registers are
    /// at `base_reg`/`cnt_reg` (object size `size`).
    fn read_object(&mut self, kind: &str, base_reg: usize, cnt_reg: usize, size: usize, q: usize) -> Option<Vec<u8>> {
        let Some(sd) = self.sd else {
            self.hmc_error(format!("{kind} queue {q} enabled without an HMC segment descriptor"));
            return None;
        };
        let cnt = (self.reg(cnt_reg + 4 * self.pf) & 0x7FF) as usize;
        if q >= cnt {
            self.hmc_error(format!("{kind} queue {q} enabled beyond the {cnt} contexts of the HMC"));
            return None;
        }
        let fpm = (self.reg(base_reg + 4 * self.pf) & 0xFF_FFFF) as u64 * 512 + (q * size) as u64;
        if fpm + size as u64 > sd.pages * 4096 {
            self.hmc_error(format!("{kind} context {q} at FPM {fpm:#x} outside the segment's backing pages"));
            return None;
        }
        let mut img = vec![0u8; size];
        if !self.host.dev_read(sd.pa + fpm, &mut img) {
            self.hmc_error(format!("{kind} context {q} outside allocated memory"));
            return None;
        }
        Some(img)
    }

    /// The TX and RX object ranges of the FPM must not overlap.
    fn check_layout(&mut self) {
        let txb = (self.reg(off::GLHMC_LANTXBASE + 4 * self.pf) & 0xFF_FFFF) as u64 * 512;
        let txn = (self.reg(off::GLHMC_LANTXCNT + 4 * self.pf) & 0x7FF) as u64 * 128;
        let rxb = (self.reg(off::GLHMC_LANRXBASE + 4 * self.pf) & 0xFF_FFFF) as u64 * 512;
        let rxn = (self.reg(off::GLHMC_LANRXCNT + 4 * self.pf) & 0x7FF) as u64 * 32;
        if txb < rxb + rxn && rxb < txb + txn {
            self.hmc_error(format!("HMC TX objects [{txb:#x}, +{txn:#x}) overlap RX objects [{rxb:#x}, +{rxn:#x})"));
        }
    }

    /// RX context of PF queue `q`, or `None` (and an HMC error) when it cannot be read.
    pub(crate) fn rx_context(&mut self, q: usize) -> Option<RxContext> {
        self.check_layout();
        let img = self.read_object("RX", off::GLHMC_LANRXBASE, off::GLHMC_LANRXCNT, 32, q)?;
        if img.iter().all(|&b| b == 0) {
            self.violations.push(format!("RX queue {q} enabled before its context was written"));
            return None;
        }
        Some(RxContext {
            base: bits(&img, 32, 57) * 128,
            qlen: bits(&img, 89, 13) as u32,
            dbuff: bits(&img, 102, 7) as usize * 128,
            dtype: bits(&img, 114, 2),
            dsize: bits(&img, 116, 1),
            crcstrip: bits(&img, 117, 1) == 1,
            rxmax: bits(&img, 174, 14) as usize,
        })
    }

    /// TX context of PF queue `q`.
    pub(crate) fn tx_context(&mut self, q: usize) -> Option<TxContext> {
        self.check_layout();
        let img = self.read_object("TX", off::GLHMC_LANTXBASE, off::GLHMC_LANTXCNT, 128, q)?;
        if img.iter().all(|&b| b == 0) {
            self.violations.push(format!("TX queue {q} enabled before its context was written"));
            return None;
        }
        Some(TxContext {
            base: bits(&img, 32, 57) * 128,
            qlen: bits(&img, 161, 13) as u32,
            new_context: bits(&img, 30, 1) == 1,
            head_wb: bits(&img, 160, 1) == 1,
            rdylist: bits(&img, 980, 10) as u16,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::bits;

    #[test]
    fn the_bit_reader_is_little_endian() {
        let img = [0b1010_0000, 0b0000_0011];
        assert_eq!(bits(&img, 5, 5), 0b11101);
        assert_eq!(bits(&img, 0, 5), 0);
    }
}

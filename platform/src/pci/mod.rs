//! PCI: addresses, BAR decoding and bus enumeration over an abstract configuration space.
//!
//! Sources: PCI Local Bus 3.0 §6.1 (configuration header), §6.2.5.1 (BAR sizing:
//! "write a value of all 1's to the register, then read it back"), §3.2.2.3.2
//! (configuration mechanism #1). Enumeration and sizing are generic over
//! [`ConfigAccess`] so they are tested on the host against a fake configuration space;
//! the port-I/O implementation and the [`cadence_drivers::hal::PciFunction`] impl
//! compile for the machine only.

#[cfg(target_os = "none")]
#[allow(unsafe_code)] // PCI configuration space by port I/O
mod config;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // BAR mapping of a PCI function
mod function;

#[cfg(target_os = "none")]
pub use config::Mechanism1;
#[cfg(target_os = "none")]
pub use function::Function;

use core::fmt;

/// Most functions kept by [`enumerate`].
pub const MAX_FUNCTIONS: usize = 64;
/// Header offset of the first BAR.
const BAR0: u8 = 0x10;
/// Header offset of class/subclass/prog-if/revision.
const CLASS_REV: u8 = 0x08;
/// Header offset of cache line/latency/header type/BIST.
const HEADER: u8 = 0x0c;
/// Command register bits: I/O space and memory space decoding.
const CMD_DECODE: u32 = 0b11;

/// A bus/device/function address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, defmt::Format)]
pub struct Bdf {
    /// Bus 0..=255.
    pub bus: u8,
    /// Device 0..=31.
    pub dev: u8,
    /// Function 0..=7.
    pub func: u8,
}

impl Bdf {
    /// The address, or `None` if `dev > 31` or `func > 7`.
    pub const fn try_new(bus: u8, dev: u8, func: u8) -> Option<Self> {
        if dev > 31 || func > 7 { None } else { Some(Self { bus, dev, func }) }
    }

    /// The mechanism #1 CONFIG_ADDRESS value for register `off` (PCI 3.0 §3.2.2.3.2).
    pub const fn config_address(self, off: u8) -> u32 {
        0x8000_0000
            | (self.bus as u32) << 16
            | ((self.dev & 0x1f) as u32) << 11
            | ((self.func & 7) as u32) << 8
            | (off & 0xfc) as u32
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.dev, self.func)
    }
}

/// A decoded Base Address Register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum Bar {
    /// Not implemented (sizes to 0), or the upper half of a 64-bit BAR.
    Absent,
    /// An I/O-port range.
    Io {
        /// First port.
        port: u32,
        /// Ports in the range.
        size: u32,
    },
    /// A memory range.
    Mem {
        /// Physical base address (as assigned by the firmware; 0 = unassigned).
        base: u64,
        /// Bytes in the range.
        size: u64,
        /// A 64-bit BAR (it uses the next BAR slot too).
        is64: bool,
        /// Prefetchable.
        prefetchable: bool,
    },
}

/// Decodes a BAR from its original value(s) and the value(s) read back after writing all
/// ones. `orig_hi`/`mask_hi` are the next BAR slot's, used only for a 64-bit BAR.
pub const fn decode_bar(orig_lo: u32, mask_lo: u32, orig_hi: u32, mask_hi: u32) -> Bar {
    if orig_lo & 1 == 1 {
        let mut m = mask_lo & !0b11;
        if m == 0 {
            return Bar::Absent;
        }
        // 16-bit I/O decoders may hardwire the upper half to 0 (§6.2.5.1).
        if m & 0xffff_0000 == 0 {
            m |= 0xffff_0000;
        }
        return Bar::Io { port: orig_lo & !0b11, size: (!m).wrapping_add(1) };
    }
    let prefetchable = orig_lo & 0b1000 != 0;
    let is64 = (orig_lo >> 1) & 0b11 == 0b10;
    let (base, mask) = if is64 {
        ((orig_hi as u64) << 32 | (orig_lo & !0xf) as u64, (mask_hi as u64) << 32 | (mask_lo & !0xf) as u64)
    } else {
        ((orig_lo & !0xf) as u64, 0xffff_ffff_0000_0000 | (mask_lo & !0xf) as u64)
    };
    if mask & 0xffff_ffff_ffff_fff0 == 0 || (!is64 && mask_lo & !0xf == 0) {
        return Bar::Absent;
    }
    Bar::Mem { base, size: (!mask).wrapping_add(1), is64, prefetchable }
}

/// Access to configuration space.
pub trait ConfigAccess {
    /// Reads the 32-bit register at `off` (4-byte aligned) of `bdf`; all ones if absent.
    fn read32(&self, bdf: Bdf, off: u8) -> u32;
    /// Writes the 32-bit register at `off` (4-byte aligned) of `bdf`.
    fn write32(&self, bdf: Bdf, off: u8, val: u32);
}

/// One PCI function found by [`enumerate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub struct PciDevice {
    /// Its address.
    pub bdf: Bdf,
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
    /// Base class (e.g. 0x02 network).
    pub class: u8,
    /// Subclass (e.g. 0x00 Ethernet).
    pub subclass: u8,
    /// Programming interface.
    pub prog_if: u8,
    /// Revision ID.
    pub revision: u8,
    /// Header type without the multi-function bit (0 = device, 1 = bridge).
    pub header_type: u8,
    /// BARs (a bridge has only 2; the rest are [`Bar::Absent`]).
    pub bars: [Bar; 6],
}

impl PciDevice {
    /// Class and subclass as one number, as in `class=0200`.
    pub const fn class_code(&self) -> u16 {
        (self.class as u16) << 8 | self.subclass as u16
    }

    /// Whether vendor and device match.
    pub const fn is(&self, vendor: u16, device: u16) -> bool {
        self.vendor == vendor && self.device == device
    }
}

/// Sizes the BARs of `bdf` with decoding turned off, restoring every register after.
fn size_bars(c: &impl ConfigAccess, bdf: Bdf, count: u8) -> [Bar; 6] {
    let mut bars = [Bar::Absent; 6];
    let cmd = c.read32(bdf, 0x04);
    // §6.2.5.1: disable decoding while BARs hold all ones, so no access lands in a
    // half-programmed window.
    c.write32(bdf, 0x04, cmd & !CMD_DECODE & 0xffff);
    let probe = |i: u8| {
        let off = BAR0 + 4 * i;
        let orig = c.read32(bdf, off);
        c.write32(bdf, off, u32::MAX);
        let mask = c.read32(bdf, off);
        c.write32(bdf, off, orig);
        (orig, mask)
    };
    let mut i = 0;
    while i < count {
        let (lo, mlo) = probe(i);
        let is64 = lo & 1 == 0 && (lo >> 1) & 0b11 == 0b10 && i + 1 < count;
        let (hi, mhi) = if is64 { probe(i + 1) } else { (0, 0) };
        bars[i as usize] = decode_bar(lo, mlo, hi, mhi);
        i += if is64 { 2 } else { 1 };
    }
    c.write32(bdf, 0x04, cmd & 0xffff);
    bars
}

/// Reads one function's header, or `None` if nothing answers at `bdf`.
pub fn probe(c: &impl ConfigAccess, bdf: Bdf) -> Option<PciDevice> {
    let id = c.read32(bdf, 0x00);
    let vendor = id as u16;
    if vendor == 0xffff || vendor == 0 {
        return None;
    }
    let class = c.read32(bdf, CLASS_REV);
    let header_type = ((c.read32(bdf, HEADER) >> 16) & 0x7f) as u8;
    let bar_count = match header_type {
        0 => 6,
        1 => 2,
        _ => 0,
    };
    Some(PciDevice {
        bdf,
        vendor,
        device: (id >> 16) as u16,
        class: (class >> 24) as u8,
        subclass: (class >> 16) as u8,
        prog_if: (class >> 8) as u8,
        revision: class as u8,
        header_type,
        bars: size_bars(c, bdf, bar_count),
    })
}

/// Every function on buses 0..=255 (brute force: cheap, and independent of how bridges
/// were numbered), in address order. Returns the functions kept and how many did not fit.
pub fn enumerate<const N: usize>(c: &impl ConfigAccess) -> (heapless::Vec<PciDevice, N>, usize) {
    let mut found = heapless::Vec::new();
    let mut dropped = 0;
    for bus in 0..=255u8 {
        for dev in 0..32u8 {
            let f0 = Bdf { bus, dev, func: 0 };
            if c.read32(f0, 0x00) as u16 == 0xffff {
                continue;
            }
            let multi = c.read32(f0, HEADER) & (0x80 << 16) != 0;
            for func in 0..if multi { 8 } else { 1 } {
                if let Some(d) = probe(c, Bdf { bus, dev, func })
                    && found.push(d).is_err()
                {
                    dropped += 1;
                }
            }
        }
    }
    (found, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// One fake function: its 64 registers and the writable bits of each BAR.
    type FakeFn = ([u32; 64], [u32; 6]);

    /// A fake configuration space whose BARs behave like hardware: writes keep only the
    /// address bits the size allows, and the low flag bits are read-only.
    #[derive(Default)]
    struct FakeConfig {
        fns: RefCell<HashMap<Bdf, FakeFn>>,
        writes_with_decode_on: RefCell<u32>,
    }

    impl FakeConfig {
        fn add(&self, bdf: Bdf, id: u32, class: u32, header: u32, bars: [(u32, u32); 6]) {
            let mut regs = [0u32; 64];
            regs[0] = id;
            regs[1] = 0x0010_0007;
            regs[2] = class;
            regs[3] = header << 16;
            let mut masks = [0u32; 6];
            for (i, (val, mask)) in bars.iter().enumerate() {
                regs[4 + i] = *val;
                masks[i] = *mask;
            }
            self.fns.borrow_mut().insert(bdf, (regs, masks));
        }
    }

    impl ConfigAccess for FakeConfig {
        fn read32(&self, bdf: Bdf, off: u8) -> u32 {
            self.fns.borrow().get(&bdf).map_or(u32::MAX, |(r, _)| r[off as usize / 4])
        }
        fn write32(&self, bdf: Bdf, off: u8, val: u32) {
            let mut fns = self.fns.borrow_mut();
            let Some((regs, masks)) = fns.get_mut(&bdf) else { return };
            let i = off as usize / 4;
            if (4..10).contains(&i) {
                if regs[1] & CMD_DECODE != 0 {
                    *self.writes_with_decode_on.borrow_mut() += 1;
                }
                // `masks` holds the writable bits; the rest (flags) are read-only.
                let m = masks[i - 4];
                regs[i] = (val & m) | (regs[i] & !m);
            } else {
                regs[i] = val;
            }
        }
    }

    fn bdf(bus: u8, dev: u8, func: u8) -> Bdf {
        Bdf::try_new(bus, dev, func).unwrap()
    }

    #[test]
    fn decode_bar_kinds() {
        assert_eq!(
            decode_bar(0xfebf_1000, 0xffff_f000, 0, 0),
            Bar::Mem { base: 0xfebf_1000, size: 0x1000, is64: false, prefetchable: false }
        );
        assert_eq!(
            decode_bar(0x0000_000c, 0xffff_c00c, 0x0000_0380, 0xffff_ffff),
            Bar::Mem { base: 0x380_0000_0000, size: 0x4000, is64: true, prefetchable: true }
        );
        assert_eq!(decode_bar(0xc041, 0xffff_ffe1, 0, 0), Bar::Io { port: 0xc040, size: 0x20 });
        assert_eq!(decode_bar(0xc041, 0x0000_ffe1, 0, 0), Bar::Io { port: 0xc040, size: 0x20 });
        assert_eq!(decode_bar(0, 0, 0, 0), Bar::Absent);
        assert_eq!(decode_bar(0x4, 0x4, 0, 0), Bar::Absent);
    }

    #[test]
    fn enumerate_q35_like_bus() {
        let c = FakeConfig::default();
        c.add(bdf(0, 0, 0), 0x29c0_8086, 0x0600_0000, 0, [(0, 0); 6]);
        c.add(
            bdf(0, 1, 0),
            0x1111_1234,
            0x0300_0002,
            0,
            [(0xfd00_0008, 0xff00_0000), (0, 0), (0xfebf_0000, 0xffff_f000), (0, 0), (0, 0), (0, 0)],
        );
        c.add(
            bdf(0, 3, 0),
            0x1041_1af4,
            0x0200_0001,
            0,
            [(0, 0), (0xfebf_1000, 0xffff_f000), (0, 0), (0, 0), (0xfe00_000c, 0xffff_c000), (0, 0xffff_ffff)],
        );
        c.add(bdf(0, 0x1f, 0), 0x2918_8086, 0x0601_0000, 0x80, [(0, 0); 6]);
        c.add(bdf(0, 0x1f, 3), 0x2930_8086, 0x0c05_0002, 0, [(0, 0), (0, 0), (0, 0), (0, 0), (0x0701, 0xffc0), (0, 0)]);
        c.add(bdf(2, 0, 0), 0x1000_1af4, 0x0200_0000, 0, [(0, 0); 6]);

        let (devs, dropped) = enumerate::<8>(&c);
        assert_eq!(dropped, 0);
        let addrs: Vec<String> = devs.iter().map(|d| d.bdf.to_string()).collect();
        assert_eq!(addrs, ["00:00.0", "00:01.0", "00:03.0", "00:1f.0", "00:1f.3", "02:00.0"]);
        let nic = devs[2];
        assert!(nic.is(0x1af4, 0x1041));
        assert_eq!(nic.class_code(), 0x0200);
        assert_eq!(nic.bars[1], Bar::Mem { base: 0xfebf_1000, size: 0x1000, is64: false, prefetchable: false });
        assert_eq!(nic.bars[4], Bar::Mem { base: 0xfe00_0000, size: 0x4000, is64: true, prefetchable: true });
        assert_eq!(nic.bars[5], Bar::Absent, "upper half of a 64-bit BAR");
        assert_eq!(devs[1].bars[0], Bar::Mem { base: 0xfd00_0000, size: 0x100_0000, is64: false, prefetchable: true });
        assert_eq!(devs[4].bars[4], Bar::Io { port: 0x0700, size: 0x40 });
        assert_eq!(*c.writes_with_decode_on.borrow(), 0, "BARs sized with decoding off");
        // Registers are restored.
        assert_eq!(c.read32(bdf(0, 3, 0), 0x20), 0xfe00_000c);
        assert_eq!(c.read32(bdf(0, 3, 0), 0x04) & 0xffff, 7);

        let (few, dropped) = enumerate::<2>(&c);
        assert_eq!((few.len(), dropped), (2, 4));
    }

    #[test]
    fn bdf_format_and_address() {
        assert_eq!(bdf(0, 3, 0).to_string(), "00:03.0");
        assert_eq!(bdf(0xab, 0x1f, 7).to_string(), "ab:1f.7");
        assert_eq!(bdf(1, 2, 3).config_address(0x13), 0x8001_1310);
        assert!(Bdf::try_new(0, 32, 0).is_none());
    }
}

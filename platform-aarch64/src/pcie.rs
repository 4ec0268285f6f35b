//! PCIe through the ECAM window: configuration access, enumeration of bus 0, BAR sizing
//! and assignment from the host bridge's 32-bit window, and
//! [`cadence_drivers::hal::PciFunction`].
//!
//! Facts:
//! - ECAM (PCI Express Base 6.0, §7.2.2): the configuration space of bus `b`, device `d`,
//!   function `f` is the 4 KiB at `base + (b << 20 | d << 15 | f << 12)`; a function
//!   that is absent reads vendor ID 0xFFFF.
//! - Header (PCI Local Bus 3.0, §6.1, §6.2.5.1): header type at 0x0E (bit 7:
//!   multi-function), BARs at 0x10–0x24; a memory BAR has bit 0 = 0, type in [2:1]
//!   (0b10: 64-bit, the next BAR holds the high half), prefetchable bit 3. Sizing: with
//!   memory decoding off, write all ones, read back, the size is the two's complement
//!   of the address bits; then write the assigned address.
//! - QEMU's `virt` booted with `-kernel` has no firmware that assigns BARs: the image
//!   assigns them, naturally aligned, from the tree's 32-bit window (`0x1000_0000`…,
//!   identity bus addresses), which [`crate::init`] maps as device memory. 64-bit BARs
//!   get addresses in that window too (their high half 0). Bridges are not followed: QEMU
//!   puts `-device`s on bus 0 unless told otherwise.

use core::ptr::{read_volatile, write_volatile};

use cadence_drivers::hal::{BarError, PciFunction};

use crate::dt::Region;
use crate::mmio::MmioWindow;

/// Functions recorded by [`enumerate`].
pub const MAX_FUNCTIONS: usize = 32;

/// One BAR as assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bar {
    #[default]
    Absent,
    /// An I/O BAR (not assigned: the image uses none).
    Io,
    /// A memory BAR at CPU address `base`.
    Mem { base: u64, size: u64, is64: bool },
}

/// The ECAM window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ecam {
    base: u64,
    buses: (u8, u8),
}

impl Ecam {
    /// The window `ecam` for `buses`.
    ///
    /// # Safety
    /// `ecam` must be the tree's ECAM window, mapped as device memory for the image's
    /// lifetime, covering `buses`.
    pub const unsafe fn new(ecam: Region, buses: (u8, u8)) -> Self {
        Ecam { base: ecam.base, buses }
    }

    fn addr(&self, bdf: Bdf, off: u16) -> Option<usize> {
        if bdf.bus < self.buses.0 || bdf.bus > self.buses.1 || bdf.dev > 31 || bdf.func > 7 || off > 0xffc {
            return None;
        }
        let rel = u64::from(bdf.bus - self.buses.0) << 20 | u64::from(bdf.dev) << 15 | u64::from(bdf.func) << 12;
        Some((self.base + rel + u64::from(off & !3)) as usize)
    }

    /// Reads configuration dword `off` of `bdf` (all ones outside the window).
    pub fn read32(&self, bdf: Bdf, off: u16) -> u32 {
        match self.addr(bdf, off) {
            // SAFETY: inside the mapped ECAM window (checked by `addr`), 4-byte aligned.
            Some(a) => unsafe { read_volatile(a as *const u32) },
            None => u32::MAX,
        }
    }

    /// Writes configuration dword `off` of `bdf` (ignored outside the window).
    pub fn write32(&self, bdf: Bdf, off: u16, val: u32) {
        if let Some(a) = self.addr(bdf, off) {
            // SAFETY: as in `read32`.
            unsafe { write_volatile(a as *mut u32, val) }
        }
    }
}

/// Bus, device, function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bdf {
    pub bus: u8,
    pub dev: u8,
    pub func: u8,
}

impl core::fmt::Display for Bdf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.dev, self.func)
    }
}

/// A function found on the bus, its BARs assigned.
#[derive(Debug, Clone, Copy)]
pub struct Function {
    ecam: Ecam,
    pub bdf: Bdf,
    pub vendor: u16,
    pub device: u16,
    /// Class code, subclass, programming interface (config 0x09–0x0B).
    pub class: u32,
    pub bars: [Bar; 6],
}

impl PciFunction for Function {
    type Window = MmioWindow;

    fn config_read32(&self, off: u8) -> u32 {
        self.ecam.read32(self.bdf, u16::from(off))
    }

    fn config_write32(&self, off: u8, val: u32) {
        self.ecam.write32(self.bdf, u16::from(off), val)
    }

    fn map_bar(&self, bar: u8, offset: u64, len: u64) -> Result<MmioWindow, BarError> {
        let (base, size) = match self.bars.get(bar as usize) {
            None | Some(Bar::Absent) => return Err(BarError::Absent),
            Some(Bar::Io) => return Err(BarError::NotMemory),
            Some(&Bar::Mem { base, size, .. }) => (base, size),
        };
        let end = offset.checked_add(len).ok_or(BarError::OutOfRange)?;
        if end > size || len == 0 {
            return Err(BarError::OutOfRange);
        }
        // SAFETY: the range lies inside a BAR assigned from the host bridge's window,
        // which `init` mapped as device memory for good; no Rust reference points there.
        Ok(unsafe { MmioWindow::device((base + offset) as usize, len as usize) })
    }
}

/// Hands out BAR addresses from the bridge's window.
#[derive(Debug)]
struct Window {
    next: u64,
    end: u64,
    bus_offset: u64,
}

impl Window {
    fn take(&mut self, size: u64) -> Option<u64> {
        let base = self.next.checked_add(size - 1)? & !(size - 1);
        let end = base.checked_add(size)?;
        (end <= self.end).then(|| {
            self.next = end;
            base
        })
    }
}

/// Why a function's BARs could not all be assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowFull;

/// Sizes and assigns `bdf`'s memory BARs from `win`.
fn assign_bars(ecam: &Ecam, bdf: Bdf, win: &mut Window) -> Result<[Bar; 6], WindowFull> {
    const COMMAND: u16 = 0x04;
    let cmd = ecam.read32(bdf, COMMAND);
    // Memory decoding off while the BARs hold sizing patterns (only the command half is
    // written: the status half's bits are write-1-to-clear).
    ecam.write32(bdf, COMMAND, cmd & 0xffff & !0x2);
    let mut bars = [Bar::Absent; 6];
    let mut i = 0;
    let mut full = false;
    while i < 6 {
        let off = 0x10 + 4 * i as u16;
        let orig = ecam.read32(bdf, off);
        if orig & 1 == 1 {
            bars[i] = Bar::Io;
            i += 1;
            continue;
        }
        let is64 = orig >> 1 & 3 == 0b10 && i < 5;
        ecam.write32(bdf, off, u32::MAX);
        let lo = ecam.read32(bdf, off) & !0xf;
        let hi = if is64 {
            ecam.write32(bdf, off + 4, u32::MAX);
            ecam.read32(bdf, off + 4)
        } else {
            0
        };
        let mask = u64::from(hi) << 32 | u64::from(lo);
        let size = if mask == 0 { 0 } else { (!mask).wrapping_add(1) & if is64 { u64::MAX } else { 0xffff_ffff } };
        if size != 0 {
            match win.take(size) {
                Some(base) => {
                    let bus = base.wrapping_add(win.bus_offset);
                    ecam.write32(bdf, off, bus as u32);
                    if is64 {
                        ecam.write32(bdf, off + 4, (bus >> 32) as u32);
                    }
                    bars[i] = Bar::Mem { base, size, is64 };
                }
                None => {
                    ecam.write32(bdf, off, 0);
                    full = true;
                }
            }
        } else {
            ecam.write32(bdf, off, orig);
        }
        i += if is64 { 2 } else { 1 };
    }
    ecam.write32(bdf, COMMAND, cmd & 0xffff);
    if full { Err(WindowFull) } else { Ok(bars) }
}

/// What [`enumerate`] found.
#[derive(Debug)]
pub struct Bus {
    pub functions: [Option<Function>; MAX_FUNCTIONS],
    pub count: usize,
    /// Functions whose BARs did not fit the window (left without them).
    pub unassigned: usize,
}

/// Enumerates bus 0 (the first bus of the window) and assigns every memory BAR from the
/// tree's 32-bit window (`mmio32`, with its bus offset).
pub fn enumerate(ecam: Ecam, mmio32: Region, bus_offset: u64) -> Bus {
    let mut win = Window { next: mmio32.base, end: mmio32.end(), bus_offset };
    let mut bus = Bus { functions: [None; MAX_FUNCTIONS], count: 0, unassigned: 0 };
    let b = ecam.buses.0;
    for dev in 0..32u8 {
        for func in 0..8u8 {
            let bdf = Bdf { bus: b, dev, func };
            let id = ecam.read32(bdf, 0);
            if id & 0xffff == 0xffff {
                if func == 0 {
                    break;
                }
                continue;
            }
            let header = ecam.read32(bdf, 0x0c) >> 16 & 0xff;
            let bars = if header & 0x7f == 0 {
                assign_bars(&ecam, bdf, &mut win).unwrap_or_else(|_| {
                    bus.unassigned += 1;
                    [Bar::Absent; 6]
                })
            } else {
                [Bar::Absent; 6] // a bridge or other header type: not followed
            };
            if bus.count < MAX_FUNCTIONS {
                bus.functions[bus.count] = Some(Function {
                    ecam,
                    bdf,
                    vendor: id as u16,
                    device: (id >> 16) as u16,
                    class: ecam.read32(bdf, 0x08) >> 8,
                    bars,
                });
                bus.count += 1;
            }
            if func == 0 && header & 0x80 == 0 {
                break;
            }
        }
    }
    bus
}

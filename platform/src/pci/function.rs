//! One enumerated PCI function as a driver sees it ([`cadence_drivers::hal::PciFunction`]).

use super::{Bar, ConfigAccess, Mechanism1, PciDevice};
use crate::mmio::MmioWindow;
use crate::paging::{Cache, map_identity};
use cadence_drivers::hal::{BarError, PciFunction};

/// A PCI function found at boot.
#[derive(Debug, Clone, Copy)]
pub struct Function {
    dev: PciDevice,
}

impl Function {
    /// The function described by `dev`.
    pub const fn new(dev: PciDevice) -> Self {
        Self { dev }
    }

    /// What enumeration found.
    pub const fn device(&self) -> &PciDevice {
        &self.dev
    }
}

impl PciFunction for Function {
    type Window = MmioWindow;

    fn config_read32(&self, off: u8) -> u32 {
        Mechanism1.read32(self.dev.bdf, off)
    }

    fn config_write32(&self, off: u8, val: u32) {
        Mechanism1.write32(self.dev.bdf, off, val)
    }

    /// Maps part of a memory BAR (uncached). A range that cannot be mapped (beyond the
    /// physical address width, page-table pool exhausted) is reported as `OutOfRange`.
    fn map_bar(&self, bar: u8, offset: u64, len: u64) -> Result<MmioWindow, BarError> {
        let (base, size) = match self.dev.bars.get(bar as usize) {
            None | Some(Bar::Absent) => return Err(BarError::Absent),
            Some(Bar::Io { .. }) => return Err(BarError::NotMemory),
            Some(&Bar::Mem { base, size, .. }) => (base, size),
        };
        if base == 0 {
            return Err(BarError::Absent);
        }
        let end = offset.checked_add(len).ok_or(BarError::OutOfRange)?;
        if end > size || len == 0 {
            return Err(BarError::OutOfRange);
        }
        let phys = base.checked_add(offset).ok_or(BarError::OutOfRange)?;
        map_identity(phys, len, Cache::Uncached).map_err(|_| BarError::OutOfRange)?;
        // SAFETY: `[phys, phys + len)` lies inside the BAR the firmware assigned (checked
        // above), is identity-mapped from now on (mappings are never removed), and is
        // device memory that no Rust reference points into.
        Ok(unsafe { MmioWindow::new(phys as usize, len as usize) })
    }
}

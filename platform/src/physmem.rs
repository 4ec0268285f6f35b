//! Reading physical memory: the one seam between the parsers and the machine.
//!
//! Boot information and ACPI tables live at physical addresses and point at each
//! other. The parsers in [`crate::bootinfo`] and [`crate::acpi`] read them only
//! through [`PhysMem`], so on the host they run against a byte fixture and on the
//! machine against the identity map.

/// Read-only access to physical memory.
pub trait PhysMem {
    /// The `len` bytes at physical address `addr`, or `None` where they cannot be
    /// read (outside the mapped range, or address 0).
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]>;

    /// A little-endian `u16` at `addr`.
    fn read_u16(&self, addr: u64) -> Option<u16> {
        self.read(addr, 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
}

/// Physical memory seen through the boot identity map (the first 4 GiB).
#[cfg(target_os = "none")]
#[derive(Debug)]
pub struct IdentityMap {
    _private: (),
}

#[cfg(target_os = "none")]
impl IdentityMap {
    /// End of the range the boot page tables map one-to-one.
    pub const LIMIT: u64 = 4 << 30;

    /// A reader over the boot identity map.
    ///
    /// # Safety
    /// The boot page tables (identity map of `[0, LIMIT)`) must be live, and memory
    /// read through the returned value must not be written while a slice from it is
    /// alive (it is used for loader and firmware tables, which nobody writes).
    pub const unsafe fn new() -> Self {
        Self { _private: () }
    }
}

#[cfg(target_os = "none")]
impl PhysMem for IdentityMap {
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let end = addr.checked_add(len as u64)?;
        if addr == 0 || end > Self::LIMIT {
            return None;
        }
        // SAFETY: `[addr, end)` lies inside the identity map (checked above, upheld by
        // `new`'s contract), is not null, and is not written while borrowed (`new`).
        Some(unsafe { core::slice::from_raw_parts(addr as usize as *const u8, len) })
    }
}

/// A fake physical memory made of byte chunks at chosen addresses (tests).
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct FakeMem {
    chunks: Vec<(u64, Vec<u8>)>,
}

#[cfg(test)]
impl FakeMem {
    /// Places `bytes` at `addr`.
    pub(crate) fn put(&mut self, addr: u64, bytes: &[u8]) -> &mut Self {
        self.chunks.push((addr, bytes.to_vec()));
        self
    }
}

#[cfg(test)]
impl PhysMem for FakeMem {
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]> {
        if addr == 0 {
            return None;
        }
        self.chunks.iter().find_map(|(base, bytes)| {
            let start = addr.checked_sub(*base)? as usize;
            bytes.get(start..start.checked_add(len)?)
        })
    }
}

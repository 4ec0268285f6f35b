//! Packet memory: the region a lane's [`cadence_core::buf::Pool`] is carved from and
//! that AF_XDP registers as its UMEM.
//!
//! [`packet_memory`] maps anonymous memory, zeroed (anonymous pages are) and pre-faulted,
//! and leaks it: it lives for the rest of the process, as the pool's `&'static mut [u8]`
//! requires. With `huge`, it asks for 2 MiB pages in two ways, best first:
//!
//! 1. `MAP_HUGETLB` — pages from the hugetlbfs pool, which exist only where the
//!    administrator reserved them (`vm.nr_hugepages`); none are by default here;
//! 2. a 2 MiB-aligned mapping with `madvise(MADV_HUGEPAGE)`, which transparent huge pages
//!    honour in their `madvise` mode (this machine's setting), then pre-faulted with
//!    `MADV_POPULATE_WRITE` (Linux 5.14) or by touching every page.
//!
//! [`PacketMemory::pages`] reports what it got ([`Pages`]): for transparent huge pages,
//! how many bytes the kernel actually backs with huge pages (from `/proc/self/smaps`).
//!
//! Addresses: the pool is built with `phys_base = 0`, so a buffer's "physical" address
//! is its offset in the region, which is exactly an AF_XDP UMEM address.

use super::Errno;
use core::fmt;
use core::ptr::NonNull;

/// A small page.
pub const PAGE: usize = 4096;
/// A huge page (x86_64 PMD).
pub const HUGE_PAGE: usize = 2 << 20;

/// The `phys_base` to build a lane's [`cadence_core::buf::Pool`] with over packet
/// memory: a buffer's "physical" address is then its offset in the region, i.e. its
/// AF_XDP UMEM address.
pub const POOL_PHYS_BASE: u64 = 0;

/// What backs a [`PacketMemory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Reserved hugetlbfs pages (`MAP_HUGETLB`), 2 MiB each.
    HugeTlb,
    /// Transparent huge pages asked for with `MADV_HUGEPAGE`; `huge_bytes` of the region
    /// were backed by huge pages after pre-faulting (the rest by small pages).
    Transparent {
        /// Bytes backed by huge pages (`AnonHugePages` of the mapping).
        huge_bytes: usize,
    },
    /// Small (4 KiB) pages: `huge` was not asked for.
    Small,
}

impl fmt::Display for Pages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pages::HugeTlb => f.write_str("hugetlbfs 2 MiB pages"),
            Pages::Transparent { huge_bytes } => {
                write!(f, "transparent huge pages ({} MiB huge)", huge_bytes >> 20)
            }
            Pages::Small => f.write_str("4 KiB pages"),
        }
    }
}

/// Why no packet memory could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemError {
    /// Zero bytes, or a size that overflows when rounded up to the page size.
    BadSize,
    /// `mmap` of the anonymous region failed.
    Map(Errno),
    /// Pre-faulting (`MADV_POPULATE_WRITE`) failed: not enough memory.
    Populate(Errno),
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemError::BadSize => f.write_str("packet memory: size is zero or too large"),
            MemError::Map(e) => write!(f, "packet memory: mmap: {e}"),
            MemError::Populate(e) => write!(f, "packet memory: pre-faulting: {e} (not enough memory?)"),
        }
    }
}

impl std::error::Error for MemError {}

/// A leaked, zeroed, pre-faulted anonymous region for packet buffers.
#[derive(Debug)]
pub struct PacketMemory {
    ptr: NonNull<u8>,
    len: usize,
    pages: Pages,
}

// SAFETY: the region is private to this value (leaked from a fresh mapping, no other
// pointer to it exists outside it); moving it between threads moves the ownership.
unsafe impl Send for PacketMemory {}

impl PacketMemory {
    /// Bytes in the region (the request rounded up to the page size used).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: [`packet_memory`] refuses zero bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What backs it.
    pub fn pages(&self) -> Pages {
        self.pages
    }

    /// The address of the first byte (page aligned; 2 MiB aligned with `huge`).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The region as the `&'static mut [u8]` a [`cadence_core::buf::Pool`] takes (with
    /// `phys_base = 0`). Take what else needs the address (an AF_XDP
    /// [`super::xdp::UmemRegion`]) first.
    pub fn into_slice(self) -> &'static mut [u8] {
        // SAFETY: the mapping is readable and writable, `len` bytes long, initialized
        // (zero pages), never unmapped (leaked), and `self` — the only pointer to it —
        // is consumed, so the `&'static mut` is unique.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// Maps `bytes` (rounded up to the page size) of zeroed, pre-faulted packet memory that
/// lives for the rest of the process; with `huge`, backed by 2 MiB pages where the
/// kernel gives them (see the module docs for the order tried).
pub fn packet_memory(bytes: usize, huge: bool) -> Result<PacketMemory, MemError> {
    if bytes == 0 {
        return Err(MemError::BadSize);
    }
    if !huge {
        let len = bytes.checked_next_multiple_of(PAGE).ok_or(MemError::BadSize)?;
        let ptr = map_anon(len, libc::MAP_POPULATE).map_err(MemError::Map)?;
        return Ok(PacketMemory { ptr, len, pages: Pages::Small });
    }
    let len = bytes.checked_next_multiple_of(HUGE_PAGE).ok_or(MemError::BadSize)?;
    if let Ok(ptr) = map_anon(len, libc::MAP_HUGETLB | libc::MAP_POPULATE) {
        return Ok(PacketMemory { ptr, len, pages: Pages::HugeTlb });
    }
    let ptr = map_aligned(len)?;
    // SAFETY: `ptr..ptr+len` is a mapping this function owns. MADV_HUGEPAGE only changes
    // how the kernel backs it; a kernel without THP answers EINVAL and we keep small pages.
    let _ = unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
    prefault(ptr, len)?;
    let huge_bytes = anon_huge_bytes(ptr.as_ptr() as usize).map_or(0, |b| b.min(len));
    Ok(PacketMemory { ptr, len, pages: Pages::Transparent { huge_bytes } })
}

/// A fresh private anonymous read/write mapping of `len` bytes.
fn map_anon(len: usize, extra: i32) -> Result<NonNull<u8>, Errno> {
    // SAFETY: a new mapping at an address of the kernel's choosing aliases nothing.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Errno::last());
    }
    NonNull::new(p.cast()).ok_or(Errno(libc::EFAULT))
}

/// `len` bytes (a multiple of 2 MiB) of anonymous memory starting on a 2 MiB boundary:
/// over-map by one huge page and unmap the unaligned head and tail.
fn map_aligned(len: usize) -> Result<NonNull<u8>, MemError> {
    let total = len.checked_add(HUGE_PAGE).ok_or(MemError::BadSize)?;
    let raw = map_anon(total, 0).map_err(MemError::Map)?;
    let start = raw.as_ptr() as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE);
    let head = aligned - start;
    let tail = total - head - len;
    // SAFETY: both ranges lie inside the mapping just made and outside the aligned part
    // that is kept; nothing refers to them.
    unsafe {
        if head > 0 {
            libc::munmap(raw.as_ptr().cast(), head);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
    }
    // SAFETY: `aligned` is inside the mapping `raw` (head < HUGE_PAGE <= total), so it
    // is a non-null address derived from it.
    Ok(unsafe { raw.add(head) })
}

/// Faults every page of `ptr..ptr+len` in, writable, after `MADV_HUGEPAGE` (so the
/// faults can take huge pages; `MAP_POPULATE` would fault before the advice).
fn prefault(ptr: NonNull<u8>, len: usize) -> Result<(), MemError> {
    // SAFETY: the range is our own fresh mapping; MADV_POPULATE_WRITE only faults pages
    // in (its contents stay zero).
    let r = unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_POPULATE_WRITE) };
    if r == 0 {
        return Ok(());
    }
    let e = Errno::last();
    if e.raw() != libc::EINVAL {
        return Err(MemError::Populate(e));
    }
    // Before Linux 5.14: write a zero into every small page.
    for off in (0..len).step_by(PAGE) {
        // SAFETY: `off < len`, inside our writable mapping, which nothing else references
        // yet; writing the zero it already holds changes no contents.
        unsafe { ptr.as_ptr().add(off).write_volatile(0) };
    }
    Ok(())
}

/// `AnonHugePages` of the mapping that holds `addr`, from `/proc/self/smaps`.
fn anon_huge_bytes(addr: usize) -> Option<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ')
            && let Some((lo, hi)) = range.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            inside = (lo..hi).contains(&addr);
            continue;
        }
        if inside && let Some(rest) = line.strip_prefix("AnonHugePages:") {
            let kb: usize = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            return Some(kb * 1024);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_pages_zeroed_and_page_rounded() {
        let m = packet_memory(10_000, false).unwrap();
        assert_eq!(m.len(), 12_288);
        assert_eq!(m.pages(), Pages::Small);
        assert_eq!(m.as_ptr() as usize % PAGE, 0);
        let s = m.into_slice();
        assert!(s.iter().all(|&b| b == 0));
        s[12_287] = 1;
    }

    #[test]
    fn huge_is_2mib_aligned_and_reports_its_backing() {
        let m = packet_memory(3 << 20, true).unwrap();
        assert_eq!(m.len(), 4 << 20);
        assert_eq!(m.as_ptr() as usize % HUGE_PAGE, 0);
        match m.pages() {
            Pages::HugeTlb => {}
            // THP may be off or fragmented: any amount is a valid report, but no more
            // than the region.
            Pages::Transparent { huge_bytes } => assert!(huge_bytes <= m.len()),
            Pages::Small => panic!("huge memory reported small pages"),
        }
        let s = m.into_slice();
        assert!(s.iter().step_by(4096).all(|&b| b == 0));
    }

    #[test]
    fn zero_bytes_is_refused() {
        assert_eq!(packet_memory(0, true).unwrap_err(), MemError::BadSize);
        assert_eq!(packet_memory(usize::MAX, true).unwrap_err(), MemError::BadSize);
    }

    #[test]
    fn smaps_parser_finds_the_mapping() {
        let m = packet_memory(2 << 20, true).unwrap();
        assert!(anon_huge_bytes(m.as_ptr() as usize).is_some());
        assert!(anon_huge_bytes(usize::MAX - 5).is_none());
    }
}

//! Physical memory: choosing the range the platform manages, and a bump allocator over it.
//!
//! The platform takes the largest usable stretch of RAM below the boot identity map's end
//! that is not the first MiB (real-mode structures, the AP trampoline at 0x8000), not the
//! image itself, not a boot module, and not overlapped by any non-usable memory-map entry.
//! The heap and the DMA allocator are carved from it once, at initialization; nothing is
//! ever given back. Pure arithmetic, tested on the host.

use crate::bootinfo::{MemKind, MemRegion};

/// Memory below this address is never handed out.
pub const LOW_RESERVED: u64 = 1 << 20;

/// A half-open physical range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl Range {
    /// The range of `len` bytes at `start` (saturating at the end of the address space).
    pub const fn at(start: u64, len: u64) -> Self {
        Self { start, end: start.saturating_add(len) }
    }

    /// Bytes in the range.
    pub const fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether the range is empty.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Pieces left of `pieces` after removing `hole`.
fn subtract(pieces: &mut heapless::Vec<Range, 64>, hole: Range) {
    let mut out: heapless::Vec<Range, 64> = heapless::Vec::new();
    for p in pieces.iter() {
        if hole.end <= p.start || hole.start >= p.end {
            let _ = out.push(*p);
            continue;
        }
        if hole.start > p.start {
            let _ = out.push(Range { start: p.start, end: hole.start });
        }
        if hole.end < p.end {
            let _ = out.push(Range { start: hole.end, end: p.end });
        }
    }
    *pieces = out;
}

/// The largest usable range below `limit`, after removing the first MiB, every
/// non-usable memory-map entry and every range in `reserved`.
pub fn largest_free(regions: &[MemRegion], reserved: &[Range], limit: u64) -> Option<Range> {
    let mut best: Option<Range> = None;
    for r in regions.iter().filter(|r| r.kind == MemKind::Usable) {
        let whole = Range::at(r.base, r.len);
        let clipped = Range { start: whole.start.max(LOW_RESERVED), end: whole.end.min(limit) };
        if clipped.is_empty() {
            continue;
        }
        let mut pieces: heapless::Vec<Range, 64> = heapless::Vec::new();
        let _ = pieces.push(clipped);
        for other in regions.iter().filter(|o| o.kind != MemKind::Usable) {
            subtract(&mut pieces, Range::at(other.base, other.len));
        }
        for &hole in reserved {
            subtract(&mut pieces, hole);
        }
        for p in pieces {
            if best.is_none_or(|b| p.len() > b.len()) {
                best = Some(p);
            }
        }
    }
    best
}

/// Hands out aligned pieces of a physical range, front to back, never to be returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhysBump {
    next: u64,
    end: u64,
}

impl PhysBump {
    /// A bump allocator over `r`.
    pub const fn new(r: Range) -> Self {
        Self { next: r.start, end: r.end }
    }

    /// The physical address of `size` bytes aligned to `align` (a power of two), or
    /// `None` if `align` is not a power of two or the range is used up.
    pub fn alloc(&mut self, size: u64, align: u64) -> Option<u64> {
        if !align.is_power_of_two() {
            return None;
        }
        let start = self.next.checked_add(align - 1)? & !(align - 1);
        let end = start.checked_add(size)?;
        if end > self.end {
            return None;
        }
        self.next = end;
        Some(start)
    }

    /// Bytes not yet handed out.
    pub const fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q35_256m() -> Vec<MemRegion> {
        vec![
            MemRegion { base: 0, len: 0x9fc00, kind: MemKind::Usable },
            MemRegion { base: 0x9fc00, len: 0x400, kind: MemKind::Reserved },
            MemRegion { base: 0xf0000, len: 0x10000, kind: MemKind::Reserved },
            MemRegion { base: 0x100000, len: 0xfee0000, kind: MemKind::Usable },
            MemRegion { base: 0xffe0000, len: 0x20000, kind: MemKind::Reserved },
            MemRegion { base: 0xb000_0000, len: 0x1000_0000, kind: MemKind::Reserved },
        ]
    }

    #[test]
    fn largest_free_skips_low_memory_image_and_modules() {
        let image = Range { start: 0x100000, end: 0x180000 };
        let module = Range::at(0x400_0000, 0x1000);
        let r = largest_free(&q35_256m(), &[image, module], 4 << 30).unwrap();
        assert_eq!(r, Range { start: 0x400_1000, end: 0xffe_0000 });
    }

    #[test]
    fn overlapping_reserved_entries_and_limits() {
        let mut map = q35_256m();
        map.push(MemRegion { base: 0x200_0000, len: 0x10, kind: MemKind::AcpiNvs });
        let r = largest_free(&map, &[], 4 << 30).unwrap();
        assert_eq!(r, Range { start: 0x200_0010, end: 0xffe0000 });
        let r = largest_free(&map, &[], 0x100_0000).unwrap();
        assert_eq!(r, Range { start: 0x100000, end: 0x100_0000 });
        let high = [MemRegion { base: 0x1_0000_0000, len: 1 << 30, kind: MemKind::Usable }];
        assert_eq!(largest_free(&high, &[], 4 << 30), None);
        assert_eq!(largest_free(&[], &[], 4 << 30), None);
    }

    #[test]
    fn bump_aligns_and_runs_out() {
        let mut b = PhysBump::new(Range { start: 0x100010, end: 0x104000 });
        assert_eq!(b.alloc(16, 4096), Some(0x101000));
        assert_eq!(b.alloc(2048, 2048), Some(0x101800));
        assert_eq!(b.alloc(1, 3), None);
        assert_eq!(b.remaining(), 0x104000 - 0x102000);
        assert_eq!(b.alloc(0x3000, 1), None);
        assert_eq!(b.alloc(0x2000, 1), Some(0x102000));
        assert_eq!(b.alloc(u64::MAX, 1), None);
    }
}

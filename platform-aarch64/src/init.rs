//! The boot core's bring-up, in order: the device tree read (MMU still off: the walker
//! reads bytes, no exclusives), the identity map built from it and the MMU turned on,
//! the console, the heap, the GIC, the timer. Every step that can fail is an
//! [`InitError`] with an `error:` line and a distinct exit status.

use core::cell::UnsafeCell;

use cadence_core::time::TickRate;

use crate::dt::{DtError, Facts, Region};
use crate::exit::ExitCode;
use crate::gic::{self, GicError};
use crate::mmu::{self, MapError, MmuRegs, Tables};
use crate::timer::{self, GenericClock, TimerError};

/// Page tables reserved for the identity map (16 × 4 KiB: `virt`'s map uses 5, and up to
/// 3 more for the stacks' guard pages).
const TABLES: usize = 16;
/// The heap's size.
pub const HEAP_SIZE: u64 = 16 << 20;
/// The DMA range's sizes (rings and packet pools), largest first: the first that fits
/// around the image, the heap, the tree and the initial RAM disk is taken. 96 MiB holds
/// four lanes' default pools (4 × 4096 × 2 KiB) and the rings on a 256 MiB `virt`.
pub const DMA_SIZES: [u64; 3] = [96 << 20, 64 << 20, 32 << 20];
/// How long a GIC register may stay busy: 10 ms of counter ticks.
const GIC_DEADLINE_MS: u64 = 10;

/// The identity map, written by the boot core before any other core runs and read-only
/// afterwards.
struct Shared(UnsafeCell<Tables<TABLES>>);
// SAFETY: written only by the boot core in `init` before secondaries start (they only
// load its address into TTBR0); never written after.
unsafe impl Sync for Shared {}
static MAP: Shared = Shared(UnsafeCell::new(Tables::new()));

unsafe extern "C" {
    static __image_start: u8;
    static __image_end: u8;
}

/// Why bring-up stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitError {
    Dt(DtError),
    Map(MapError),
    /// The image does not lie in the tree's RAM.
    ImageOutsideRam,
    /// The tree's initial RAM disk does not lie in its RAM.
    InitrdOutsideRam,
    /// No room for the heap in RAM.
    NoHeap,
    Timer(TimerError),
    Gic(GicError),
}

impl InitError {
    /// The exit status: the tree's faults are configuration (35), the rest runtime (37).
    pub const fn exit_code(self) -> ExitCode {
        match self {
            InitError::Dt(_) | InitError::ImageOutsideRam | InitError::InitrdOutsideRam | InitError::Timer(_) => {
                ExitCode::ConfigError
            }
            InitError::Map(_) | InitError::NoHeap | InitError::Gic(_) => ExitCode::RuntimeFailure,
        }
    }
}

impl core::fmt::Display for InitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            InitError::Dt(e) => e.fmt(f),
            InitError::Map(e) => e.fmt(f),
            InitError::ImageOutsideRam => f.write_str("the image does not lie in the device tree's RAM"),
            InitError::InitrdOutsideRam => f.write_str("the initial RAM disk does not lie in the device tree's RAM"),
            InitError::NoHeap => f.write_str("no room for the heap and the DMA range in the device tree's RAM"),
            InitError::Timer(e) => e.fmt(f),
            InitError::Gic(e) => e.fmt(f),
        }
    }
}

/// What bring-up found and set up.
#[derive(Debug, Clone, Copy)]
pub struct Platform {
    pub facts: Facts,
    pub clock: GenericClock,
    /// CNTFRQ_EL0 as read (the clock's rate may come from the tree instead).
    pub cntfrq: u64,
    pub heap: Region,
    /// RAM for DMA ([`crate::dma::DmaAllocator`]), above the heap.
    pub dma: Region,
    /// The initial RAM disk (`/chosen/linux,initrd-*`; size 0: none), kept out of the
    /// heap and the DMA range.
    pub initrd: Region,
    /// The registers every core loads to use the identity map.
    pub mmu: MmuRegs,
    /// Page tables the map uses.
    pub tables: usize,
}

/// Whether the DMA range was handed out ([`Platform::take_dma`]).
static DMA_TAKEN: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

impl Platform {
    /// Enumerates the PCIe bus behind the tree's ECAM window and assigns BARs
    /// ([`crate::pcie::enumerate`]); call once.
    pub fn pci(&self) -> crate::pcie::Bus {
        // SAFETY: `init` mapped the tree's ECAM window and 32-bit window as device memory
        // for good.
        let ecam = unsafe { crate::pcie::Ecam::new(self.facts.ecam, self.facts.buses) };
        crate::pcie::enumerate(ecam, self.facts.mmio32, self.facts.mmio32_bus_offset)
    }

    /// The DMA allocator over [`Platform::dma`]; `None` after the first call.
    pub fn take_dma(&self) -> Option<crate::dma::DmaAllocator> {
        if DMA_TAKEN.swap(true, core::sync::atomic::Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the range was carved for DMA alone (above the heap, clear of the image and
        // the tree) and identity-mapped as RAM; the flag hands it out once.
        Some(unsafe { crate::dma::DmaAllocator::new(self.dma) })
    }

    /// The initial RAM disk's bytes (QEMU's `-initrd`), if the loader placed one.
    pub fn initrd_bytes(&self) -> Option<&'static [u8]> {
        let r = self.initrd;
        if r.size == 0 {
            return None;
        }
        // SAFETY: the range is in the tree's RAM, identity-mapped (`init` refuses a range
        // outside RAM), and nothing in the image writes to it: the heap and the DMA range
        // were carved around it and the image does not overlap a loaded file.
        Some(unsafe { core::slice::from_raw_parts(r.base as usize as *const u8, r.size as usize) })
    }

    /// `ms` milliseconds in counter ticks.
    pub fn clock_ticks_ms(&self, ms: u64) -> u64 {
        self.clock.tick_rate().ticks_from_ms(ms).ticks()
    }
}

/// Brings the boot core up. Prints nothing before the console is known; after that the
/// caller reports errors.
pub fn init(boot: crate::BootArgs) -> Result<Platform, InitError> {
    let blob = boot.dtb().map_err(InitError::Dt)?;
    if let Some(uart) = crate::dt::console(blob) {
        crate::pl011::init(uart.base as usize);
    }
    let facts = crate::dt::parse(blob).map_err(InitError::Dt)?;
    // Linker symbols: only their addresses are taken.
    let start = &raw const __image_start as usize as u64;
    let image = Region { base: start, size: (&raw const __image_end as usize as u64).saturating_sub(start) };
    if image.base < facts.memory.base || image.end() > facts.memory.end() {
        return Err(InitError::ImageOutsideRam);
    }
    // SAFETY: the boot core alone runs; nothing else references the tables yet.
    let map = unsafe { &mut *MAP.0.get() };
    map.map_ram(facts.memory).map_err(InitError::Map)?;
    for dev in [facts.uart, facts.gicd, facts.gicr, facts.ecam, facts.mmio32] {
        if dev.size == 0 {
            continue;
        }
        map.map_device(dev).map_err(InitError::Map)?;
    }
    for guard in crate::stack::guards() {
        map.unmap_page(guard).map_err(InitError::Map)?;
    }
    let regs = MmuRegs { mair: mmu::MAIR, tcr: mmu::tcr(mmu::parange()), ttbr0: map.root(), sctlr: mmu::SCTLR_ON };
    // SAFETY: the map covers RAM (the image, its stack, the tree) and the devices used
    // next; it was written with the MMU and caches off, so it is in memory.
    unsafe { mmu::enable(&regs) };
    // The initial RAM disk (the chain configuration, `-initrd`) stays where the loader put
    // it: neither the heap nor the DMA range may cover it.
    let initrd = crate::dt::initrd(blob).unwrap_or(Region { base: 0, size: 0 });
    if initrd.size > 0 && (initrd.base < facts.memory.base || initrd.end() > facts.memory.end()) {
        return Err(InitError::InitrdOutsideRam);
    }
    let avoid = [facts.dtb, initrd];
    let heap = crate::heap::carve(facts.memory, image, &avoid, HEAP_SIZE).ok_or(InitError::NoHeap)?;
    // SAFETY: the carved block is mapped RAM that holds neither the image nor the tree.
    unsafe { crate::heap::init(heap.base, heap.size as usize) };
    let used = Region { base: image.base, size: heap.end() - image.base };
    let dma = DMA_SIZES
        .iter()
        .find_map(|&size| crate::heap::carve(facts.memory, used, &avoid, size))
        .ok_or(InitError::NoHeap)?;
    let cntfrq = timer::cntfrq();
    let rate: TickRate = timer::rate(cntfrq, facts.timer_hz).map_err(InitError::Timer)?;
    let deadline = rate.ticks_from_ms(GIC_DEADLINE_MS).ticks();
    // SAFETY: GICD and GICR come from the tree and are mapped as device memory; this is
    // the boot core.
    unsafe {
        gic::init_distributor(facts.gicd, deadline).map_err(InitError::Gic)?;
        gic::init_core(facts.gicr, gic::mpidr(), facts.timer_intid, deadline).map_err(InitError::Gic)?;
    }
    Ok(Platform { facts, clock: GenericClock::new(rate), cntfrq, heap, dma, initrd, mmu: regs, tables: map.used() })
}

//! Bringing the platform up after the entry code: memory, ACPI, TSC, PCI.

use crate::acpi::{self, AcpiInfo};
use crate::bootinfo::BootInfo;
use crate::calibrate;
use crate::clock::TscClock;
use crate::cpu::{self, Features};
use crate::dma::DmaAllocator;
use crate::exit::{ExitCode, exit};
use crate::mem::{self, PhysBump, Range};
use crate::pci::{self, Function, MAX_FUNCTIONS, Mechanism1, PciDevice};
use crate::physmem::IdentityMap;
use crate::tsc::Calibration;
use cadence_core::time::TickRate;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, Ordering};

/// Largest heap carved from the managed range.
const HEAP_MAX: u64 = 32 << 20;
/// Smallest heap worth having.
const HEAP_MIN: u64 = 1 << 20;

unsafe extern "C" {
    /// First byte of the image (firmware/link.ld).
    static __kernel_start: u8;
    /// One past the image's last byte, `.bss` included (firmware/link.ld).
    static __kernel_end: u8;
}

/// Why the platform could not come up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum InitError {
    /// `init` was called twice.
    AlreadyInitialized,
    /// The memory map has no usable range big enough for the heap.
    NoUsableMemory,
    /// No TSC frequency source gave a plausible value.
    NoTscSource,
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InitError::AlreadyInitialized => "platform initialized twice",
            InitError::NoUsableMemory => "no usable memory for heap and DMA",
            InitError::NoTscSource => "no plausible TSC frequency source",
        })
    }
}

/// The machine, as the firmware gets it.
#[derive(Debug)]
pub struct Platform {
    /// What the loader said.
    pub boot: &'static BootInfo,
    /// CPU features.
    pub features: Features,
    /// CPU brand string (may be empty).
    pub cpu_brand: heapless::String<48>,
    /// TSC frequency and its sources.
    pub tsc: Calibration,
    /// The TSC as a `Clock` and `DelayNs`.
    pub clock: TscClock,
    /// ACPI, if an RSDP was found.
    pub acpi: Option<AcpiInfo>,
    /// Enabled cores per the MADT (1 without one).
    pub cores: u32,
    /// The physical range heap and DMA memory come from.
    pub managed: Range,
    /// Bytes given to the heap.
    pub heap_bytes: u64,
    /// DMA memory for drivers and the packet pool.
    pub dma: DmaAllocator,
    /// Every PCI function found.
    pub pci: heapless::Vec<PciDevice, MAX_FUNCTIONS>,
    /// PCI functions that did not fit in `pci`.
    pub pci_dropped: usize,
}

impl Platform {
    /// Usable RAM in the memory map, in MiB.
    pub fn mem_mib(&self) -> u64 {
        self.boot.usable_bytes() >> 20
    }

    /// PCI functions with this vendor and device ID, as driver handles.
    pub fn pci_functions(&self, vendor: u16, device: u16) -> impl Iterator<Item = Function> + '_ {
        self.pci.iter().filter(move |d| d.is(vendor, device)).map(|d| Function::new(*d))
    }

    /// The contents of boot module `index`, if it exists and lies in the boot identity map.
    pub fn module(&self, index: usize) -> Option<&'static [u8]> {
        let m = self.boot.modules().get(index)?;
        let end = m.base.checked_add(m.len)?;
        if m.base == 0 || end > IdentityMap::LIMIT {
            return None;
        }
        // SAFETY: the module lies in the identity map (checked) and was excluded from the
        // heap and DMA ranges by `init`, so nothing writes it.
        Some(unsafe { core::slice::from_raw_parts(m.base as usize as *const u8, m.len as usize) })
    }
}

/// Brings up memory (heap + DMA), ACPI, the TSC clock and PCI. Call once, on the BSP.
pub fn init(boot: &'static BootInfo) -> Result<Platform, InitError> {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Ordering::AcqRel) {
        return Err(InitError::AlreadyInitialized);
    }
    let features = cpu::features();

    // Memory: the image and boot modules are off limits.
    let image =
        Range { start: &raw const __kernel_start as u64, end: (&raw const __kernel_end as u64).next_multiple_of(4096) };
    let mut reserved: heapless::Vec<Range, 8> = heapless::Vec::new();
    let _ = reserved.push(image);
    for m in boot.modules() {
        let _ = reserved.push(Range::at(m.base, m.len));
    }
    let managed = mem::largest_free(boot.regions(), &reserved, IdentityMap::LIMIT).ok_or(InitError::NoUsableMemory)?;
    let mut bump = PhysBump::new(managed);
    let heap_bytes = (managed.len() / 4).min(HEAP_MAX) & !0xfff;
    if heap_bytes < HEAP_MIN {
        return Err(InitError::NoUsableMemory);
    }
    let heap_base = bump.alloc(heap_bytes, 4096).ok_or(InitError::NoUsableMemory)?;
    // SAFETY: `[heap_base, +heap_bytes)` is usable RAM below 4 GiB (identity-mapped),
    // outside the image and modules, handed to nobody else; `DONE` makes this run once.
    unsafe { crate::heap::init(heap_base, heap_bytes as usize) };
    let dma_range = Range { start: managed.end - bump.remaining(), end: managed.end };
    // SAFETY: the rest of the managed range, disjoint from the heap, owned by this one
    // allocator.
    let dma = unsafe { DmaAllocator::new(dma_range) };
    crate::sleep::set_watchable(dma_range.start as usize, dma_range.end as usize);

    // SAFETY: the boot identity map is live; firmware tables are read-only to us.
    let phys = unsafe { IdentityMap::new() };
    let acpi = acpi::discover(&phys, boot.rsdp_copy().map(|c| c.bytes()), boot.rsdp_addr()).ok();
    let cores = acpi.as_ref().and_then(|a| a.madt.as_ref()).map_or(1, |m| m.enabled_cpus.max(1));

    let pm = acpi.as_ref().and_then(|a| a.pm_timer);
    let tsc = calibrate::calibrate(&features, pm).map_err(|_| InitError::NoTscSource)?;
    let clock = TscClock::new(TickRate::try_new(tsc.hz).ok_or(InitError::NoTscSource)?);

    let (pci, pci_dropped) = pci::enumerate::<MAX_FUNCTIONS>(&Mechanism1);

    Ok(Platform {
        boot,
        features,
        cpu_brand: cpu::brand(),
        tsc,
        clock,
        acpi,
        cores,
        managed,
        heap_bytes,
        dma,
        pci,
        pci_dropped,
    })
}

/// Reports an initialization failure on COM1 and exits with status 37.
pub fn fail(e: InitError) -> ! {
    let _ = writeln!(crate::serial::emergency_console(), "error: platform init: {e}");
    exit(ExitCode::RuntimeFailure)
}

/// Reports a panic on COM1 (without waiting for the console lock) and exits with
/// status 39. Call it from the firmware's `#[panic_handler]`.
pub fn panic_exit(info: &core::panic::PanicInfo<'_>) -> ! {
    let _ = writeln!(crate::serial::emergency_console(), "\npanic: {info}");
    exit(ExitCode::Panic)
}

//! Cadence's aarch64 platform layer, beside the x86_64 one (`cadence-platform`).
//!
//! A sibling crate rather than an `arch` folder of `cadence-platform`: that crate's
//! bare-metal half (PVH/multiboot2, ACPI, the TSC, LAPIC, port I/O) is x86_64 through and
//! through and its dependency on the `x86_64` crate is unconditional, so the two machines
//! are told apart by crate name and share what is portable through `cadence-core` and
//! `cadence-drivers` (the `Clock`/`Sleeper` contracts, `drivers::hal`).
//!
//! The first target is QEMU's `virt` board (`-M virt,gic-version=3 -cpu cortex-a72`):
//!
//! | module | job |
//! |---|---|
//! | `boot` | the arm64 `Image` header, entry at EL1 (dropping from EL2), FP/SIMD on, boot stack, `.bss` zeroed, the exception vectors |
//! | [`dt`] | the device tree (`fdt` crate) → RAM, console, GICv3, timer, PSCI method, PCIe ECAM, cores; a missing fact is an error with status 35 |
//! | [`exception`] | an exception's syndrome (ESR_EL1 class, ELR, FAR) decoded and reported on the console; the image then exits with [`exit::ExitCode::Panic`] |
//! | [`heap`] | the init-time heap (the x86 platform's `linked_list_allocator`) over RAM carved around the image and the tree |
//! | [`mmu`] | the identity map (RAM normal write-back in 2 MiB/1 GiB blocks, MMIO Device-nGnRE) and turning the MMU on |
//! | `gic` | just enough GICv3 for the virtual timer's PPI to wake `WFI`: distributor enabled, the core's redistributor awake with the PPI in group 1, ICC system registers |
//! | `init` | the boot core's bring-up: tree, identity map and MMU on, console, heap, GIC, timer; `InitError`s with their exit statuses |
//! | `pl011` | the PL011 UART as a text console (`println!`) |
//! | [`timer`] | the generic timer: CNTVCT_EL0 as `core::time::Clock` (rate from CNTFRQ_EL0 or the tree), `WfiSleeper` (virtual timer armed, WFI with IRQs masked) |
//! | `jobs` | a job mailbox per secondary core (the firmware's workers): idle in deadline `WFI` steps, run, report idle |
//! | `fence` | stopping a hung worker's core for good: SGI 8 in Group 0 (FIQ), acknowledged by the vectors, then parked |
//! | `stack` | each core's stack with an unmapped guard page below it and an exception stack below that, which every vector moves to (TPIDR_EL1): an overflow is reported, not silent |
//! | [`psci`], `smp` | PSCI calls over the tree's conduit; secondary cores started with `CPU_ON`, each on its own stack, on the boot core's map and GIC set-up, checked in against a deadline |
//! | `pcie`, `mmio`, `dma` | ECAM configuration access, bus-0 enumeration and BAR assignment from the tree's 32-bit window, `hal::PciFunction`; volatile windows; the DMA allocator (coherent, identity) |
//! | `defmt_log` | (feature `defmt-semihosting`) defmt's global logger over semihosting `SYS_WRITEC`: the human log, off the console |
//! | [`exit`] | leaving QEMU with a status: semihosting `SYS_EXIT_EXTENDED` |
//!
//! Decoding (exception classes, exit statuses) compiles on the host too and is
//! unit-tested there; the modules that execute privileged instructions compile only for
//! `target_arch = "aarch64", target_os = "none"`.
#![cfg_attr(not(test), no_std)]
// Unsafe code lives only in the modules that carry `#[allow(unsafe_code)]` below, each for
// a reason named there.
#![deny(unsafe_code)]

#[allow(unsafe_code)] // `dt::blob_at`: the loader's blob read in place
pub mod dt;
pub mod exception;
#[allow(unsafe_code)] // the semihosting trap
pub mod exit;
#[allow(unsafe_code)] // the global allocator over a carved RAM block
pub mod heap;
#[allow(unsafe_code)] // MAIR/TCR/TTBR0/SCTLR and the TLB
pub mod mmu;

#[allow(unsafe_code)] // the counter and the virtual timer's registers; WFI
pub mod timer;

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // the entry path: assembly, linker symbols, the boot stack
mod boot;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub use boot::current_el;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // the distributor's and redistributors' registers; ICC system registers
pub mod gic;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // the identity map's storage, linker symbols, the bring-up order
mod init;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub use init::{InitError, Platform, init};
#[cfg(all(target_arch = "aarch64", target_os = "none", feature = "defmt-semihosting"))]
#[allow(unsafe_code)] // the semihosting trap; the encoder shared under a flag
mod defmt_log;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // DMA memory handed to devices
pub mod dma;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // the SGI, FIQ unmasking, the acknowledge; the proof a core stopped
pub mod fence;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub mod jobs;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // volatile windows over device registers
pub mod mmio;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // the ECAM window's configuration registers
pub mod pcie;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // volatile access to the UART's registers
pub mod pl011;
#[allow(unsafe_code)] // HVC/SMC calls
pub mod psci;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // per-core stacks and boot blocks, cache cleaning, the secondary entry
pub mod smp;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // the per-core stacks' storage, a linker symbol
pub mod stack;

/// Prints a line on the console (PL011), like `std::println!`.
#[macro_export]
macro_rules! println {
    ($($arg:tt)*) => {
        $crate::pl011::print_line(format_args!($($arg)*))
    };
}

/// What the boot code hands the image's `kmain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootArgs {
    dtb: u64,
    entry_el: u8,
}

impl BootArgs {
    /// The entry's registers, for [`entry!`] only.
    ///
    /// # Safety
    /// `dtb` must be x0 at entry (the loader's device tree, arm64 boot protocol), with
    /// memory identity-mapped; `entry_el` the exception level the core was entered at.
    #[doc(hidden)]
    #[allow(unsafe_code)] // a constructor whose argument the safe `dtb` accessor trusts
    pub const unsafe fn new_unchecked(dtb: u64, entry_el: u8) -> BootArgs {
        BootArgs { dtb, entry_el }
    }

    /// Physical address of the flattened device tree (x0 at entry).
    pub const fn dtb_address(&self) -> u64 {
        self.dtb
    }

    /// The exception level the image was entered at (1 or 2; it runs at 1).
    pub const fn entry_el(&self) -> u8 {
        self.entry_el
    }

    /// The kernel command line (`/chosen/bootargs`), or "".
    pub fn cmdline(&self) -> &'static str {
        self.dtb().ok().and_then(dt::bootargs).unwrap_or("")
    }

    /// The loader's device tree blob.
    pub fn dtb(&self) -> Result<&'static [u8], dt::DtError> {
        // SAFETY: `new_unchecked`'s contract: `dtb` is the loader's blob, identity-mapped;
        // nothing in the image writes to it (the memory map keeps it out of every
        // allocation).
        #[allow(unsafe_code)]
        unsafe {
            dt::blob_at(self.dtb)
        }
    }
}

/// Declares the image's entry: `entry!(kmain)` with `fn kmain(BootArgs) -> !`.
#[macro_export]
macro_rules! entry {
    ($f:path) => {
        #[unsafe(no_mangle)]
        extern "C" fn cadence_aarch64_main(dtb: u64, entry_el: u64) -> ! {
            let f: fn($crate::BootArgs) -> ! = $f;
            // SAFETY: called only by the entry code in `boot`, with x0 as the loader left
            // it and the exception level it read from CurrentEL.
            f(unsafe { $crate::BootArgs::new_unchecked(dtb, entry_el as u8) })
        }
    };
}

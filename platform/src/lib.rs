//! Cadence's x86_64 platform layer: everything that touches the CPU and the machine.
//!
//! `core` decides, `drivers` talk to devices through the traits of
//! [`cadence_drivers::hal`], and this crate owns the machine underneath them:
//!
//! | module | job |
//! |---|---|
//! | `boot` (+ `boot.s`) | PVH note and multiboot2 header, the one 32→64-bit trampoline, the Rust entry |
//! | [`bootinfo`] | PVH `hvm_start_info` and multiboot2 tags → a copied [`bootinfo::BootInfo`] |
//! | `gdt`, `idt` | 64-bit GDT with a double-fault stack, exception handlers that report on COM1 and exit 39, legacy PIC masked |
//! | `paging` | the boot identity map (4 GiB, 2 MiB pages) and on-demand identity maps for BARs above it |
//! | [`mem`], `dma`, `heap` | memory-map carving, the DMA allocator ([`cadence_drivers::hal::DmaAlloc`]), the init-time heap |
//! | [`acpi`] | RSDP discovery, RSDT/XSDT walk, FADT (PM timer) and MADT (cores): pure parsers over bytes |
//! | [`tsc`], `calibrate`, `clock` | TSC frequency from an ordered, cross-checked chain of sources; [`cadence_core::time::Clock`] and `DelayNs` over the TSC |
//! | [`pci`] | configuration mechanism #1 behind one lock, enumeration, BAR sizing, [`cadence_drivers::hal::PciFunction`] |
//! | `serial`, `logger` | 16550 text console on COM1 (`println!`), `defmt` frames on COM2 |
//! | [`cpu`], [`exit`] | CPUID/MSR/TSC/brand string; isa-debug-exit |
//! | `entropy` | the boot nonce: RDRAND, the TSC and the CMOS clock, mixed |
//! | `fence` | stopping a hung core for good (an NMI whose handler halts it), the proof a lane take-over needs |
//! | [`lapic`] | local APIC (x2APIC or xAPIC), EOI, IPIs, timer in TSC-deadline or calibrated one-shot mode |
//! | [`smp`] | cores from the MADT, INIT-SIPI-SIPI through a real-mode trampoline at 0x8000, per-core context/stacks/GDT/TSS, parked APs and a job mailbox |
//! | `sleep` | `HaltSleeper`: [`cadence_core::time::Sleeper`] that halts until a TSC deadline, per-core halted-cycle accounting, optional MONITOR/MWAIT |
//! | `hosted` (Linux only) | the hosted machine layer: packet memory, kernel ring windows, AF_XDP and `TPACKET_V3` sockets, the XDP redirect program, interface facts, TSC clock, `clock_nanosleep` sleeper, pinned threads |
//!
//! Parsing and arithmetic (boot info, ACPI tables, TSC source selection, BAR decoding,
//! memory carving) compile on the host too and are unit-tested there with byte
//! fixtures; the modules that execute privileged instructions compile only for
//! `target_os = "none"`. For `target_os = "linux"` the crate links `std` and adds
//! `hosted`, the same roles played by system calls (see its module docs).
//!
//! # Using it from the firmware
//!
//! ```text
//! cadence_platform::entry!(kmain);
//!
//! fn kmain(boot: &'static cadence_platform::bootinfo::BootInfo) -> ! {
//!     let platform = match cadence_platform::init(boot) {
//!         Ok(p) => p,
//!         Err(e) => cadence_platform::fail(e),
//!     };
//!     cadence_platform::println!("tsc_hz={}", platform.tsc.hz);
//!     cadence_platform::exit::exit(cadence_platform::exit::ExitCode::Success)
//! }
//! ```
//!
//! Before `kmain` runs, the entry code has zeroed `.bss`, switched to long mode with the
//! boot identity map, loaded the GDT and IDT, masked the PIC, set up COM1/COM2 and copied
//! the boot information out of the loader's memory.
#![cfg_attr(not(any(test, target_os = "linux")), no_std)]
// Unsafe code lives only in the modules that carry `#[allow(unsafe_code)]` below, each for
// a reason named there (hardware access, the boot path, system calls).
#![deny(unsafe_code)]

#[cfg(target_os = "none")]
extern crate alloc;

pub mod acpi;
pub mod bootinfo;
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // CPUID, MSRs, control registers
pub mod cpu;
#[allow(unsafe_code)] // the isa-debug-exit port
pub mod exit;
#[cfg(target_os = "linux")]
pub mod hosted;
pub mod lapic;
pub mod mem;
pub mod pci;
#[allow(unsafe_code)] // the boot memory map read from loader memory
pub mod physmem;
pub mod smp;
pub mod tsc;

#[cfg(target_os = "none")]
#[allow(unsafe_code)] // the entry path: assembly, linker symbols, the boot stack
mod boot;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // reads the PIT and the TSC with port I/O
mod calibrate;
#[cfg(target_os = "none")]
pub mod clock;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // physical memory handed to devices
pub mod dma;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // RDRAND and the CMOS clock's ports
pub mod entropy;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // cli; hlt for good in the NMI handler; the proof that a core stopped
pub mod fence;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // loads the GDT and segment registers
mod gdt;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // the global allocator over the boot heap region
pub mod heap;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // loads the IDT; naked interrupt stubs
mod idt;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // early hardware set-up (PIC, serial, paging) before anything else runs
mod init;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // the defmt global logger (critical section, its exported symbols)
mod logger;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // volatile access to mapped device registers
pub mod mmio;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // page tables and CR3
pub mod paging;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // UART port I/O
pub mod serial;
#[cfg(target_os = "none")]
#[allow(unsafe_code)] // sti; hlt / monitor; mwait
pub mod sleep;

#[cfg(target_os = "none")]
pub use init::{InitError, Platform, fail, init, panic_exit};

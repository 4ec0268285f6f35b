//! The Rust side of the entry: what runs between the trampoline (`boot.s`) and the
//! firmware's main function.
//!
//! `__cadence_start64` programs the UARTs, loads the GDT and IDT, masks the PIC, unmaps
//! the guard page below the boot stack, copies
//! the boot information out of the loader's memory into a static, and calls the
//! function the firmware named with [`entry!`](crate::entry).
//!
//! # The boot sequence, from the loader to forwarding
//!
//! 1. QEMU `-kernel` finds the PVH note (`XEN_ELFNOTE_PHYS32_ENTRY`) and enters `_start32`
//!    in 32-bit protected mode; GRUB finds the multiboot2 header and enters the same code.
//!    `tests/tests/grub_multiboot2.rs` boots a GRUB rescue ISO under SeaBIOS and under UEFI
//!    (OVMF with GRUB's EFI build, which exits boot services and enters the same 32-bit
//!    entry): command line, module, memory map and APs all work (`tests/src/grub.rs`).
//!    There is no multiboot1 header (QEMU would prefer it over PVH).
//! 2. `boot.s`: zero `.bss`, identity-map 4 GiB with 2 MiB pages, enable PAE/LME/PG, load
//!    the GDT, jump to 64-bit code, set the boot stack (with a guard page), call the Rust
//!    entry with the boot-info pointer and the loader's magic.
//! 3. Here: GDT with TSS and a double-fault stack, IDT (naked handlers that report the
//!    exception on COM1 and exit 39), PIC masked, COM1/COM2 set up, boot info (PVH
//!    `start_info` or multiboot2 tags) copied into a static, then the firmware's `kmain`
//!    (`firmware/src/image/mod.rs`).
//! 4. `kmain` parses the command line first (a bad key → `error: boot option '…'` and
//!    exit 35), then [`crate::init`]: heap and DMA carved from the largest usable RAM range,
//!    ACPI (RSDP from the boot info or a BIOS scan; FADT for the PM timer, MADT for the core
//!    count), the TSC frequency from the first plausible source of the chain (hypervisor
//!    leaf 0x40000010 → CPUID 0x15 → CPUID 0x16 → ACPI PM timer → PIT channel 2),
//!    cross-checked against the next one ([`crate::tsc`]), PCI enumeration.
//! 5. The firmware prints the banner (`@banner`), makes the packet pool, brings up the NICs
//!    (one `@nic` line each; which ones and in what order: `firmware/src/image/nics.rs`;
//!    exit 37 only when none of those tried came up), then `mode=boot` runs the multi-core
//!    check (`firmware/src/image/cores.rs`, [`crate::smp`]) and exits 33, and
//!    `mode=forward` starts forwarding. Exit statuses and line formats: docs/PROTOCOL.md.

use crate::bootinfo::{self, BootInfo};
use crate::exit::{ExitCode, exit};
use crate::physmem::IdentityMap;
use core::fmt::Write;

core::arch::global_asm!(include_str!("boot.s"), options(att_syntax));

static BOOT_INFO: spin::Once<BootInfo> = spin::Once::new();

unsafe extern "C" {
    /// The 4 KiB below the boot stack (boot.s).
    static cadence_boot_stack_guard: u8;
}

unsafe extern "Rust" {
    /// Defined by the firmware through [`entry!`](crate::entry).
    fn __cadence_main(boot: &'static BootInfo) -> !;
}

/// Called by the trampoline in 64-bit mode with the loader's EAX and EBX.
#[unsafe(no_mangle)]
extern "C" fn __cadence_start64(magic: u32, info: u32) -> ! {
    crate::serial::init();
    crate::gdt::init();
    crate::idt::init();
    // A stack overflow then faults (and ends in the double-fault report on its own
    // stack) instead of silently overwriting the page tables below the stack.
    if let Err(e) = crate::paging::unmap_guard_page(&raw const cadence_boot_stack_guard as u64) {
        let _ = writeln!(crate::serial::emergency_console(), "warning: no stack guard page: {e}");
    }
    // SAFETY: the trampoline's identity map of the first 4 GiB is live, and nothing
    // writes the loader's structures while they are parsed (single core, no allocator yet).
    let mem = unsafe { IdentityMap::new() };
    let boot = match bootinfo::parse(magic, u64::from(info), &mem) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(crate::serial::emergency_console(), "error: boot information: {e}");
            exit(ExitCode::RuntimeFailure)
        }
    };
    let boot = BOOT_INFO.call_once(|| boot);
    // SAFETY: `__cadence_main` is defined by `entry!`, which checks that the named
    // function has the signature declared above.
    unsafe { __cadence_main(boot) }
}

/// Names the firmware's main function: `entry!(kmain)` with
/// `fn kmain(boot: &'static BootInfo) -> !`. It runs on the BSP after the entry code
/// (see the crate docs), with interrupts disabled.
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        #[unsafe(export_name = "__cadence_main")]
        fn __cadence_main(boot: &'static $crate::bootinfo::BootInfo) -> ! {
            let main: fn(&'static $crate::bootinfo::BootInfo) -> ! = $main;
            main(boot)
        }
    };
}

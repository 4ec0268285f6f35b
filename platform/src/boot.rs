//! The Rust side of the entry: what runs between the trampoline (`boot.s`) and the
//! firmware's main function.
//!
//! `__cadence_start64` programs the UARTs, loads the GDT and IDT, masks the PIC, unmaps
//! the guard page below the boot stack, copies
//! the boot information out of the loader's memory into a static, and calls the
//! function the firmware named with [`entry!`](crate::entry).

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

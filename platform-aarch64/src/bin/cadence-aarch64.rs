//! The aarch64 boot-check image: boots on QEMU `virt`, prints what it found, exits 33.
//!
//! On the host this binary is an empty stub (the workspace builds every crate there);
//! `cargo xtask build --arch aarch64` builds the real one for `aarch64-unknown-none`.
#![cfg_attr(all(target_arch = "aarch64", target_os = "none"), no_std, no_main)]

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
mod image {
    use cadence_platform_aarch64::exit::{ExitCode, exit};
    use cadence_platform_aarch64::{BootArgs, entry, pl011, println};

    entry!(kmain);

    fn kmain(boot: BootArgs) -> ! {
        pl011::init(0x0900_0000);
        println!("Cadence aarch64 boot check");
        println!("@boot el={} dtb={:#x}", boot.entry_el, boot.dtb);
        exit(ExitCode::Success)
    }

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        println!("error: panic: {info}");
        exit(ExitCode::Panic)
    }
}

#[cfg(not(all(target_arch = "aarch64", target_os = "none")))]
fn main() {
    eprintln!("cadence-aarch64 is the aarch64-unknown-none image; build it with `cargo xtask build --arch aarch64`");
}

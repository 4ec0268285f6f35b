//! The Cadence unikernel image.
//!
//! Boots (x86_64: PVH or multiboot2, `image/`; aarch64: the arm64 `Image` on QEMU
//! `virt`, `image_aarch64/`; `bare/` is what the two share), reads the boot configuration
//! from the kernel command line ([`cadence_firmware::config`]; on aarch64 the device
//! tree's `/chosen/bootargs`), brings the platform up, prints the banner, probes the NICs,
//! and forwards between its ports through the chain until a STOP control frame or `max_s`
//! (docs/PROTOCOL.md). Exit statuses: 33 success, 35 bad
//! configuration, 37 runtime failure, 39 panic.
//!
//! Built for Linux, the same binary is the hosted dataplane (`hosted/`): 2 to 8 interfaces
//! over AF_XDP or `AF_PACKET`, worker threads, the same forwarding run and lines.
#![cfg_attr(target_os = "none", no_std, no_main)]

/// The machine under the bare-metal image.
#[cfg(all(target_os = "none", target_arch = "x86_64"))]
extern crate cadence_platform as platform;
#[cfg(all(target_os = "none", target_arch = "aarch64"))]
extern crate cadence_platform_aarch64 as platform;

#[cfg(target_os = "none")]
mod bare;
#[cfg(all(target_os = "none", target_arch = "x86_64"))]
mod image;
#[cfg(all(target_os = "none", target_arch = "aarch64"))]
mod image_aarch64;

#[cfg(target_os = "linux")]
mod hosted;

/// The hosted build: the same dataplane as a Linux process (`hosted/`).
#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    hosted::main()
}

#[cfg(not(any(target_os = "none", target_os = "linux")))]
fn main() {
    eprintln!("cadence runs bare metal (`cargo xtask build`) or on Linux (the hosted build)");
    std::process::exit(2);
}

//! The Cadence unikernel image.
//!
//! Boots (PVH or multiboot2), reads the boot configuration from the kernel command
//! line ([`cadence_firmware::config`]), brings the platform up, prints the banner,
//! probes the virtio-net functions, and forwards port 0 ↔ port 1 until a STOP control
//! frame or `max_s` (docs/PROTOCOL.md). Exit statuses: 33 success, 35 bad
//! configuration, 37 runtime failure, 39 panic.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
mod image;

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("cadence-firmware is a bare-metal image: build it with `cargo xtask build`");
    std::process::exit(2);
}

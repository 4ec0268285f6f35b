//! Building and provisioning, shared by `cargo xtask`, the test harness and the bench lab:
//! the firmware image and the hosted binary with a nested cargo ([`image`]), the pinned Rust
//! toolchain ([`toolchain`]) and the nightly one for Miri and fuzzing ([`nightly`]), and the
//! machine's packages — QEMU, GRUB's tools, iproute2, tshark, a C++ compiler — from apt
//! ([`provision`]).
#![forbid(unsafe_code)]

pub mod aarch64;
pub mod image;
pub mod nightly;
pub mod provision;
pub mod toolchain;
pub mod workspace;

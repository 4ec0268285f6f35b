//! Cadence's host side: building the image, provisioning and driving QEMU, the
//! firmware ↔ host protocol (`docs/PROTOCOL.md`), traffic generation and checking, and
//! defmt decoding. The `xtask` binary is the CLI over it; the `cadence-tests` crate's
//! end-to-end tests use it directly.

pub mod accel;
pub mod bench;
pub mod chain;
pub mod ctl;
pub mod defmt;
pub mod image;
pub mod netns;
pub mod nightly;
pub mod pcap;
pub mod peers;
pub mod profile;
pub mod protocol;
pub mod provision;
pub mod qemu;
pub mod rig;
pub mod run;
pub mod tap;
pub mod tasks;
pub mod toolchain;
pub mod traffic;
pub mod verify;

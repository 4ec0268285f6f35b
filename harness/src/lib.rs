//! Cadence under test, for `tests/` and `cargo xtask run`: boot the image in QEMU (or start
//! the hosted build in a network namespace), push traffic through it, check every frame that
//! comes back, read what it printed.
//!
//! - [`qemu`]: the QEMU launcher; [`accel`]: TCG or KVM; [`tap`] and [`netns`]: the host ends
//!   of tap netdevs and veth pairs.
//! - [`rig`]: a booted dataplane with its ports, traffic and management channel.
//! - [`traffic`]: the generator, the frame-by-frame checker and what a chain makes of each
//!   frame ([`traffic::expect`]).
//! - [`protocol`]: the firmware's machine lines (`@ready`, `@stats`, `@summary`, …) parsed.
//! - [`ovs`]: Open vSwitch in a run directory of its own; [`rack`]: a rack of servers behind
//!   it with the rack controller (issue 30).
//! - [`pcap`] and [`defmt`]: capture files and the image's defmt log decoded.
//!
//! `unsafe` is denied but in [`tap`] (the `ioctl`s and raw sockets of a tap interface) and
//! [`interrupt`] (a SIGINT handler).
#![deny(unsafe_code)]

pub mod accel;
pub mod defmt;
mod host_port;
pub mod hosts;
#[allow(unsafe_code)] // signal(2): a SIGINT handler that sets a flag
pub mod interrupt;
pub mod netns;
pub mod ovs;
pub mod pcap;
pub mod protocol;
pub mod qemu;
pub mod rack;
pub mod rig;
#[allow(unsafe_code)] // SIOCGIFFLAGS/SIOCSIFFLAGS and an AF_PACKET socket on the tap interface
pub mod tap;
pub mod traffic;

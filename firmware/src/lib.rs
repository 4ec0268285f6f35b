//! The parts of Cadence's image that do not touch a machine, shared by the bare-metal
//! image and the hosted Linux build and testable on the host: the boot configuration
//! ([`config`]) and the forwarding run over any [`forward::Machine`] ([`forward`]). The
//! entry points and machine wiring are in `main.rs` (`image/` on bare metal, `hosted/` on
//! Linux).
#![cfg_attr(not(test), no_std)]
// No unsafe code: the one exception is the host tests' fake machine, which vouches that its
// fenced worker thread has stopped (`cadence_core::sync::Fenced::new`), as a platform does.
#![deny(unsafe_code)]

extern crate alloc;

pub mod config;
pub mod forward;

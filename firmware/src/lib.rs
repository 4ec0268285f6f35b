//! Pure parts of the Cadence image, testable on the host: the boot configuration
//! ([`config`]). The bare-metal entry point and wiring are in `main.rs`.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

pub mod config;

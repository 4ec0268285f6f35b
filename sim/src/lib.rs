//! Cadence's discrete-event simulator (host only).
//!
//! It runs the very controllers of `cadence-core` in virtual time, so a behaviour the
//! simulator shows is the behaviour the firmware runs.
//!
//! - [`metronome`]: M workers sharing N receive queues through `cadence_core::metronome`.
//! - [`sweep`]: the Metronome load sweep and its figures ([`run_metronome_sweep`], the entry
//!   point of `cargo xtask sim metronome`).
//! - [`netblaze`]: NetBlaze (`cadence_core::netblaze`'s mappers and predictor) against the
//!   paper's baselines on bursty traces ([`netblaze::run_study`], the entry point of `cargo
//!   xtask sim netblaze`): traces (synthetic presets or a pcap, `netblaze::pcap`), NetBlaze
//!   against four baselines (static RSS, Metron-, Quadrant- and Dyssect-like), and the rack
//!   ingress step (`cadence_core::netblaze::IngressMapper`).
//! - [`plot`]: a tiny hand-written SVG line plot.
//! - [`rng`]: seeded random streams.

pub mod metronome;
pub mod netblaze;
pub mod plot;
pub mod rng;
pub mod sweep;

pub use sweep::{SweepSummary, run_metronome_sweep};

//! NetBlaze in virtual time (issue 11; docs/NETBLAZE.md).
//!
//! The decisions are `cadence_core::netblaze`'s — the core mapper every epoch, the server
//! mapper every period, the capacity predictor read from the profile file that `cargo xtask
//! profile` measured — driven here over a model of one server's cores in virtual time:
//!
//! - [`trace`]: the seeded trace generator (presets "campus" and "backbone") and in-memory
//!   traces; [`pcap`]: replaying a capture (classic pcap and pcapng).
//! - [`engine`]: cores, queues, per-packet service times from the profile, per-flow order,
//!   latency per 1-second window.
//! - [`policies`]: NetBlaze and the baselines (static RSS, Metron-, Quadrant-, Dyssect-like).
//! - [`study`]: the comparison, its CSV and SVG files, and the rack-scale ingress study.

pub mod engine;
pub mod pcap;
pub mod policies;
pub mod study;
pub mod trace;

pub use study::{Row, StudyOptions, StudySummary, run_study};

//! Cadence's operator tool, as a library and as the `cadence-ctl` binary an operator runs
//! beside a dataplane:
//!
//! - [`ctl`]: the management channel's client and relay (`cadence-ctl ctl …`).
//! - [`chain`]: chain files (TOML) checked and converted into the text form the dataplane
//!   reads (`cadence-ctl chain …`).
//! - [`openflow`], [`rack`]: the rack controller, NetBlaze's ingress mapper programming Open
//!   vSwitch over OpenFlow 1.3 (issue 30).
//! - [`profile`]: NetBlaze's capacity predictor measured on the chain's real code
//!   (`cadence-ctl profile …`).
//!
//! `unsafe` is denied but for one call: `profile` reads the TSC (`_rdtsc`), the clock its
//! cycle counts are in.
#![deny(unsafe_code)]

pub mod chain;
pub mod cli;
pub mod ctl;
pub mod openflow;
#[allow(unsafe_code)] // `_rdtsc`: the cycle counter profiles are measured in
pub mod profile;
pub mod rack;

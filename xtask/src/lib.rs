//! `cargo xtask`: build, run, test. The library behind the `xtask` binary: the steps of
//! `cargo xtask test` ([`tasks`]), the verification that needs no QEMU ([`verify`]: loom,
//! Miri, fuzzing), and `cargo xtask run` ([`run`]: the README's main job, over
//! `cadence-harness`; [`topology`]: real hosts around the hosted build; [`rack`]: a rack of
//! hosted servers behind Open vSwitch). Building and provisioning are `cadence-build`'s; the operator's tools
//! are `cadence-ctl`'s; the bench lab is `cadence-bench`'s.
#![forbid(unsafe_code)]

pub mod rack;
pub mod run;
pub mod tasks;
pub mod topology;
pub mod verify;

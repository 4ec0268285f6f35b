//! Instructions per NetBlaze core-mapper decision, for a noisy machine: `CoreMapper::decide`
//! on the `netblaze` bench's overloaded backlog (chain 1's profile, 100 flows, 1393 packets: a
//! whale of 700 and 99 flows of 7, 8 free auxiliary cores) a fixed number of times, so that
//! `valgrind --tool=cachegrind` counts the same instructions on every run.
//!
//! ```text
//! cargo build --release -p cadence-core --example decidecount
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/decidecount 2000
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/decidecount 4000
//! ```
//!
//! Instructions per decision = (Ir at 4000 − Ir at 2000) / 2000 (the difference cancels the
//! set-up, the profile's parse included). docs/PERFORMANCE.md ("NetBlaze decisions") uses it.

use std::hint::black_box;

use cadence_core::netblaze::{AuxCore, CoreMapper, FlowBacklog, NetBlazeConfig, Profile};

const PROFILE: &str = include_str!("../../chains/chain1.profile");

fn main() -> Result<(), String> {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).ok_or("usage: decidecount DECISIONS")?;
    let profile = Profile::parse(PROFILE).map_err(|e| format!("chains/chain1.profile: {e}"))?;
    let params = NetBlazeConfig::default().validate().map_err(|e| format!("{e}"))?;
    let mapper = CoreMapper::new(params);
    let pool = [AuxCore::default(); 8];
    let mut flows: Vec<FlowBacklog> =
        std::iter::once(FlowBacklog::new(700)).chain((1..100).map(|_| FlowBacklog::new(7))).collect();
    let mut aux = pool;
    for _ in 0..n {
        aux.copy_from_slice(&pool);
        black_box(mapper.decide(&profile, black_box(&mut flows), &mut aux));
    }
    Ok(())
}

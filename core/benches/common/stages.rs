//! Pieces the benches share: the TSC as a `Clock`, and the I/O-only baseline stage.

use cadence_core::buf::{Batch, Pool};
use cadence_core::control::Commands;
use cadence_core::stage::{Stage, StageCounters};
use cadence_core::time::{Clock, Instant, TickRate};

use super::tsc::rdtsc;

/// The TSC as the worker's clock (2.6 GHz on this machine kind; only used for stats
/// periods and NF timestamps here).
pub struct Tsc;

impl Clock for Tsc {
    fn now(&self) -> Instant {
        Instant(rdtsc())
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(2_600_000_000).expect("nonzero")
    }
}

/// Moves every frame to the other port untouched: the cost of the loop and the NICs,
/// the baseline every bench measures in the same run.
pub struct IoOnly;

impl Stage for IoOnly {
    fn process(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        input: &mut Batch,
        out: &mut [Batch],
        _counters: &mut StageCounters,
        _now: Instant,
    ) -> Commands {
        let dst = 1 - port;
        while let Some(b) = input.pop() {
            if let Err(b) = out[dst].push(b) {
                let _ = pool.free(b);
            }
        }
        Commands::default()
    }
}

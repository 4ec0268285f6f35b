//! The NF chain of the forwarding run: built once from its [`ChainSpec`], one [`Chain`] per
//! worker; and the NF counters of the stats lines, summed over workers.
//!
//! An empty spec is L2 forwarding port `i` → port `1 - i`.
//!
//! Debug `burn=N` puts [`Burn`] first in every worker's chain: each frame then costs `N`
//! spin-loop iterations on its worker — an expensive chain on demand, so that a test can
//! overload a worker under emulation, where the host cannot deliver frames faster than the
//! guest forwards them.

use alloc::vec::Vec;
use core::fmt::Write;

use alloc::boxed::Box;
use cadence_core::nf::config::{BuildError, ChainFactory, ChainSpec};

use cadence_core::buf::Pool;
use cadence_core::nf::{Chain, Egress, Nf, NfBatch, NfCtx};
use cadence_core::time::TickRate;
use spin::Mutex;

use crate::config::BootConfig;

/// Room for one worker's NF counters (` key=value` pairs).
const COUNTERS_MAX: usize = 2048;

/// One worker's NF counters, as its chain wrote them.
type Text = heapless::String<COUNTERS_MAX>;

/// The built chain plus one counter slot per worker.
pub struct Chains {
    factory: ChainFactory,
    slots: Vec<Mutex<Text>>,
    /// Debug `burn=`: spin-loop iterations per frame (0: off).
    burn: u32,
}

impl core::fmt::Debug for Chains {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Chains").field("workers", &self.slots.len()).finish_non_exhaustive()
    }
}

impl Chains {
    /// Builds every NF's shared state for `workers` workers, timeouts in ticks of the
    /// clock at `rate`; control frames must be signed for the boot nonce `nonce`.
    pub fn build(
        spec: &ChainSpec,
        cfg: &BootConfig,
        own: [[u8; 6]; cadence_core::stage::PORTS],
        workers: usize,
        rate: TickRate,
        nonce: u64,
    ) -> Result<Chains, BuildError> {
        let egress = Egress::new(own, cfg.peer, cfg.control(nonce));
        let factory = spec.build(egress, rate)?;
        Ok(Chains { factory, slots: (0..workers).map(|_| Mutex::new(Text::new())).collect(), burn: cfg.burn })
    }

    /// The chain's shared NF state (the management channel changes its tables).
    pub fn factory(&self) -> &ChainFactory {
        &self.factory
    }

    /// A worker's own chain (with `Burn` first under debug `burn=`).
    pub fn for_worker(&self) -> Chain {
        let mut chain = self.factory.chain_for_worker();
        if self.burn > 0 {
            chain.push_front(Box::new(Burn { spins: self.burn, frames: 0 }));
        }
        chain
    }

    /// Copies worker `w`'s NF counters into its slot; `wait` = also when the reporter
    /// holds it right now (final counters).
    pub fn publish(&self, w: usize, chain: &Chain, wait: bool) {
        if chain.nfs().is_empty() && chain.router().is_none() {
            return;
        }
        let Some(slot) = self.slots.get(w) else { return };
        let guard = if wait { Some(slot.lock()) } else { slot.try_lock() };
        if let Some(mut text) = guard {
            text.clear();
            // A full slot cuts the line short; the counters before it stay right.
            let _ = chain.write_counters(&mut *text);
        }
    }

    /// Writes every NF counter summed over the workers, in the order the chain writes
    /// them (` key=value` pairs; a value that is not a number is taken from the first
    /// worker that has the key).
    pub fn write_summed(&self, w: &mut dyn Write) -> core::fmt::Result {
        if self.factory.is_empty() && self.factory.neigh().is_none() && self.burn == 0 {
            return Ok(());
        }
        let texts: Vec<Text> = self.slots.iter().map(|s| s.lock().clone()).collect();
        let mut sums: Vec<(&str, Result<u64, &str>)> = Vec::new();
        for t in &texts {
            for (k, v) in t.split_ascii_whitespace().filter_map(|kv| kv.split_once('=')) {
                let n = v.parse::<u64>().map_err(|_| v);
                match sums.iter_mut().find(|(key, _)| *key == k) {
                    Some((_, Ok(sum))) => *sum = sum.saturating_add(n.unwrap_or(0)),
                    Some((_, Err(_))) => {}
                    None => sums.push((k, n)),
                }
            }
        }
        for (k, v) in sums {
            match v {
                Ok(n) => write!(w, " {k}={n}")?,
                Err(s) => write!(w, " {k}={s}")?,
            }
        }
        Ok(())
    }
}

/// Debug `burn=N`: every alive frame costs `spins` spin-loop iterations, then goes on
/// unchanged (module docs); counted as `burn_frames`.
struct Burn {
    spins: u32,
    frames: u64,
}

impl Nf for Burn {
    fn name(&self) -> &'static str {
        "burn"
    }

    /// No header: the frame only costs time.
    fn reads(&self) -> cadence_core::parse::Depth {
        cadence_core::parse::Depth::L2
    }

    fn process(&mut self, _ctx: &NfCtx, _pool: &mut Pool<'_>, batch: &mut NfBatch) {
        for _ in batch.alive_mut() {
            for _ in 0..self.spins {
                core::hint::spin_loop();
            }
            self.frames += 1;
        }
    }

    fn write_counters(&self, w: &mut dyn Write) -> core::fmt::Result {
        write!(w, " burn_frames={}", self.frames)
    }
}

/// Debug `stall=W:MS:round`: first in worker `W`'s chain; from `at` on, the first frames it
/// sees make the worker hang right here, in its stage, holding its lane and their batch (an
/// NF stuck in a loop), until the machine fences it.
pub(super) struct Hang<M: 'static> {
    pub(super) at: cadence_core::time::Instant,
    pub(super) worker: usize,
    pub(super) machine: &'static M,
}

impl<M: super::Machine> Nf for Hang<M> {
    fn name(&self) -> &'static str {
        "hang"
    }

    fn process(&mut self, ctx: &NfCtx, _pool: &mut Pool<'_>, batch: &mut NfBatch) {
        if ctx.now >= self.at && !batch.is_empty() {
            self.machine.stall_forever(self.worker);
        }
    }
}

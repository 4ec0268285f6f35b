//! The NF chain of the forwarding run: read from boot module 0 (the text form of
//! `cadence_core::nf::config`, written by `cargo xtask run --chain FILE`), built once,
//! one [`Chain`] per worker; and the NF counters of the stats lines, summed over workers.
//!
//! Without a boot module the chain is empty: L2 forwarding port `i` → port `1 - i`.

extern crate alloc;

use alloc::vec::Vec;
use core::fmt::Write;

use cadence_core::nf::config::{ChainFactory, ChainSpec};
use cadence_core::nf::{Chain, Egress};
use cadence_core::time::TickRate;
use cadence_firmware::config::BootConfig;
use cadence_platform::Platform;
use cadence_platform::exit::{ExitCode, exit};
use cadence_platform::println;
use spin::Mutex;

/// Room for one worker's NF counters (` key=value` pairs).
const COUNTERS_MAX: usize = 2048;

/// One worker's NF counters, as its chain wrote them.
type Text = heapless::String<COUNTERS_MAX>;

/// Reads and checks the chain configuration (boot module 0), prints `@chain`. A bad
/// configuration prints `error: chain config line N: …` and exits 35.
pub fn spec(p: &Platform) -> ChainSpec {
    let spec = match p.module(0) {
        None => ChainSpec::default(),
        Some(bytes) => {
            let parsed = match core::str::from_utf8(bytes) {
                Ok(text) => ChainSpec::parse(text).map_err(|e| {
                    let line = e.line;
                    // `SpecError` says "line N: …"; the message names it once.
                    let mut msg: heapless::String<256> = heapless::String::new();
                    let _ = write!(msg, "{e}");
                    let rest = msg.split_once(": ").map_or(msg.as_str(), |(_, r)| r);
                    println!("error: chain config line {line}: {rest}");
                }),
                Err(e) => {
                    let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
                    println!("error: chain config line {line}: not UTF-8 text");
                    Err(())
                }
            };
            match parsed {
                Ok(s) => s,
                Err(()) => exit(ExitCode::ConfigError),
            }
        }
    };
    let mut names: heapless::String<128> = heapless::String::new();
    for (i, n) in spec.names().enumerate() {
        let _ = write!(names, "{}{n}", if i > 0 { "," } else { "" });
    }
    println!(
        "@chain nfs={} source={}",
        if names.is_empty() { "none" } else { names.as_str() },
        if p.module(0).is_some() { "module" } else { "none" }
    );
    spec
}

/// The built chain plus one counter slot per worker.
pub struct Chains {
    factory: ChainFactory,
    slots: Vec<Mutex<Text>>,
}

impl Chains {
    /// Builds every NF's shared state for `workers` workers, timeouts in ticks of the
    /// clock at `rate`; a failure prints `error: chain: …` and exits 37.
    pub fn build(spec: &ChainSpec, cfg: &BootConfig, own: [[u8; 6]; 2], workers: usize, rate: TickRate) -> Chains {
        let egress = Egress { own_mac: own, peer_mac: cfg.peer, accept_control: cfg.ctl };
        match spec.build(egress, rate) {
            Ok(factory) => Chains { factory, slots: (0..workers).map(|_| Mutex::new(Text::new())).collect() },
            Err(e) => {
                println!("error: chain: {e}");
                exit(ExitCode::RuntimeFailure)
            }
        }
    }

    /// A worker's own chain.
    pub fn for_worker(&self) -> Chain {
        self.factory.chain_for_worker()
    }

    /// Copies worker `w`'s NF counters into its slot; `wait` = also when the reporter
    /// holds it right now (final counters).
    pub fn publish(&self, w: usize, chain: &Chain, wait: bool) {
        if self.factory.is_empty() {
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
        if self.factory.is_empty() {
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

//! The NF chain of the forwarding run, read from boot module 0 (the text form of
//! `cadence_core::nf::config`, written by `cargo xtask run --chain FILE`); the run builds it
//! (`cadence_firmware::forward::Chains`). Without a boot module the chain is empty: L2
//! forwarding port `i` → port `1 - i`.

use core::fmt::Write;

use cadence_core::nf::config::ChainSpec;
use cadence_platform::Platform;
use cadence_platform::exit::{ExitCode, exit};
use cadence_platform::println;

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

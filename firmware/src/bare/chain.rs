//! The NF chain of the forwarding run, read from the boot module (x86_64: PVH module 0;
//! aarch64: the initial RAM disk, `/chosen/linux,initrd-*`; both are QEMU's `-initrd`) in
//! the text form of `cadence_core::nf::config`, written by `cargo xtask run --chain FILE`,
//! and the chain's
//! NetBlaze profile when the module carries one after a `[netblaze.profile]` line
//! (`cadence_core::netblaze::module`); the run builds the chain
//! (`cadence_firmware::forward::Chains`). Without a boot module the chain is empty: L2
//! forwarding port `i` → port `1 - i`.

use core::fmt::Write;

use crate::platform::exit::{ExitCode, exit};
use crate::platform::println;
use cadence_core::netblaze::{Profile, module};
use cadence_core::nf::config::ChainSpec;

/// Reads and checks the chain configuration and its profile (`module`: the boot
/// module's bytes, if there is one), prints `@chain`. A bad configuration prints
/// `error: chain config line N: …` and exits 35.
pub fn spec(module: Option<&[u8]>) -> (ChainSpec, Option<Profile>) {
    let (spec, profile) = match module {
        None => (ChainSpec::default(), None),
        Some(bytes) => {
            let parsed = match core::str::from_utf8(bytes) {
                Ok(text) => module::parse(text).map_err(|e| println!("error: {e}")),
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
        "@chain nfs={} source={} profile={} validate={}",
        if names.is_empty() { "none" } else { names.as_str() },
        if module.is_some() { "module" } else { "none" },
        if profile.is_some() { "module" } else { "none" },
        spec.validate.name()
    );
    (spec, profile)
}

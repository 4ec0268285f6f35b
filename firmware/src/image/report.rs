//! What the image prints on COM1: the banner and the counter lines (docs/PROTOCOL.md).

use cadence_firmware::config::BootConfig;
use cadence_platform::Platform;
use cadence_platform::println;

/// Prints the human banner and the `@banner` line.
pub fn banner(p: &Platform, cfg: &BootConfig) {
    let nics = crate::bare::nics::count(&p.pci, cfg);
    // What people read goes to COM2 (defmt); COM1 gets `@banner`.
    let log = super::log;
    log(format_args!("cpu: {} ({} cores)", p.cpu_brand, p.cores));
    log(format_args!("tsc: {} Hz from {}, checked by {}", p.tsc.hz, p.tsc.source, p.tsc.check_str()));
    log(format_args!(
        "memory: {} MiB usable, heap {} KiB, dma {} KiB free",
        p.mem_mib(),
        p.heap_bytes >> 10,
        p.dma.remaining() >> 10
    ));
    log(format_args!("config: {cfg:?}"));
    println!(
        "@banner version={} cpu=\"{}\" tsc_hz={} tsc_source={} tsc_check={} mem_mib={} cores={} nics={}",
        env!("CARGO_PKG_VERSION"),
        p.cpu_brand,
        p.tsc.hz,
        p.tsc.source,
        p.tsc.check_str(),
        p.mem_mib(),
        p.cores,
        nics
    );
    defmt::info!(
        "booted: tsc_hz={=u64} source={=str} cores={=u32} nics={=usize}",
        p.tsc.hz,
        p.tsc.source.as_str(),
        p.cores,
        nics
    );
}

//! What the image prints on COM1: the banner and the counter lines (docs/PROTOCOL.md).

use cadence_core::worker::{DriverCounters, WorkerStats};
use cadence_firmware::config::BootConfig;
use cadence_platform::Platform;
use cadence_platform::println;

use super::nics::{VIRTIO_NET, VIRTIO_VENDOR};

/// Prints the human banner and the `@banner` line.
pub fn banner(p: &Platform, cfg: &BootConfig) {
    let nics = p.pci.iter().filter(|d| d.is(VIRTIO_VENDOR, VIRTIO_NET)).count();
    println!("cpu: {} ({} cores)", p.cpu_brand, p.cores);
    println!("tsc: {} Hz from {}, checked by {}", p.tsc.hz, p.tsc.source, p.tsc.check_str());
    println!(
        "memory: {} MiB usable, heap {} KiB, dma {} KiB free",
        p.mem_mib(),
        p.heap_bytes >> 10,
        p.dma.remaining() >> 10
    );
    println!("config: {:?}", cfg);
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

/// Prints one `@stats` (or `@summary`) line with every counter.
pub fn counters(tag: &str, t_ms: u64, stats: &WorkerStats, drv: &DriverCounters) {
    cadence_platform::serial::console(|uart| {
        use core::fmt::Write;
        // A console write cannot fail; a lost line is all a failure could cost.
        let _ = write!(uart, "{tag} t_ms={t_ms} ");
        let _ = stats.write_counters(uart, drv);
        let _ = uart.write_str("\n");
    });
}

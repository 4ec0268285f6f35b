//! The forwarding run: port 0 ↔ port 1 through the core worker until STOP or `max_s`.

use cadence_core::buf::Pool;
use cadence_core::forward::{ForwardConfig, Forwarder};
use cadence_core::nic::Port;
use cadence_core::time::{Clock, Instant};
use cadence_core::worker::{DriverCounters, Worker, WorkerConfig};
use cadence_firmware::config::BootConfig;
use cadence_platform::Platform;
use cadence_platform::exit::{ExitCode, exit};
use cadence_platform::println;

use super::nics::{MAX_PORTS, Nic};
use super::report;

/// Extra `tx_burst` attempts for frames a full TX ring did not take, within one poll.
const TX_RETRIES: u32 = 4;
/// How long STOP waits for the TX rings to drain before the summary.
const DRAIN_MS: u64 = 100;

/// Forwards until a STOP control frame (exit 33) or `max_s` (exit 37).
pub fn run(p: &Platform, cfg: &BootConfig, pool: &mut Pool<'static>, ports: &mut heapless::Vec<Nic, MAX_PORTS>) -> ! {
    let [n0, n1] = ports.as_mut_slice() else {
        println!("error: forwarding needs 2 virtio-net NICs, found {}", ports.len());
        exit(ExitCode::RuntimeFailure)
    };
    let own = [n0.mac(), n1.mac()];
    let (Some((rx0, tx0)), Some((rx1, tx1))) = (n0.queue_pair(0), n1.queue_pair(0)) else {
        println!("error: a NIC has no queue pair 0");
        exit(ExitCode::RuntimeFailure)
    };
    let mut rx = [rx0, rx1];
    let mut tx = [tx0, tx1];

    let clock = &p.clock;
    let rate = clock.rate();
    let stage = Forwarder::new(ForwardConfig::new(own, cfg.peer, cfg.ctl));
    let mut worker = Worker::new(stage, WorkerConfig::new(TX_RETRIES, rate.ticks_from_ms(u64::from(cfg.stats_ms))));
    let start = clock.now();
    let deadline = (cfg.max_s > 0).then(|| start.saturating_add(rate.ticks_from_ms(u64::from(cfg.max_s) * 1000)));
    let t_ms = |now: Instant| rate.ns(now.saturating_since(start)) / 1_000_000;
    println!("forward: port 0 <-> port 1, control frames {}", if cfg.ctl { "on" } else { "off" });
    defmt::info!("forwarding started");

    loop {
        let out = worker.poll_once(pool, &mut rx, &mut tx, clock);
        if out.stats_due || out.commands.stats > 0 {
            report::counters("@stats", t_ms(out.now), worker.stats(), &DriverCounters::from_queues(&rx, pool));
        }
        let code = if out.commands.stop {
            println!("forward: STOP received");
            ExitCode::Success
        } else if deadline.is_some_and(|d| out.now >= d) {
            println!("error: max_s={} reached without a STOP control frame", cfg.max_s);
            ExitCode::RuntimeFailure
        } else {
            continue;
        };
        if worker.drain_tx(pool, &mut tx, clock, rate.ticks_from_ms(DRAIN_MS)).is_err() {
            println!("warning: TX rings not drained after {DRAIN_MS} ms");
        }
        let now = clock.now();
        report::counters("@summary", t_ms(now), worker.stats(), &DriverCounters::from_queues(&rx, pool));
        defmt::info!("forwarding done: {=u64} drops", worker.stats().drops_total());
        exit(code)
    }
}

//! `mode=boot`'s multi-core check: start every core, let each sleep on its deadline
//! sleeper a few times, and report (`@cpu` per core, then `@smp`; docs/PROTOCOL.md).
//!
//! Only that the timer fired and woke the core is checked, never how precisely: under
//! QEMU TCG a 1 ms sleep ends 0.1–20 ms late.

use cadence_core::time::{Clock, Duration, Sleeper};
use cadence_platform::Platform;
use cadence_platform::clock::TscClock;
use cadence_platform::println;
use cadence_platform::sleep::{HaltSleeper, SleepConfig};
use cadence_platform::smp::{self, CoreContext, CoreId, Cores, SmpConfig};
use core::sync::atomic::{AtomicU32, Ordering};

/// Sleeps per core.
const SLEEPS: u32 = 5;
/// Length of each sleep.
const SLEEP_US: u64 = 1_000;
/// Hang guard for an AP's check job (TCG on a loaded host is slow; nothing asserts on it).
const JOB_TIMEOUT_MS: u64 = 10_000;

/// Starts the APs and runs the sleep check on every core; `Err` with a message when a
/// core did not come up or did not finish.
pub fn check(p: &Platform) -> Result<Cores, &'static str> {
    let cores = match smp::start_aps(p, &SmpConfig::default()) {
        Ok(c) => c,
        Err(e) => {
            println!("error: smp: {e}");
            return Err("bring-up failed");
        }
    };
    let clock = p.clock;
    let mut launched: heapless::Vec<CoreId, { cadence_platform::acpi::madt::MAX_CPUS }> = heapless::Vec::new();
    for c in cores.iter().skip(1) {
        if !c.is_online() {
            println!("@cpu index={} apic_id={} online=0", c.id(), c.apic_id());
            continue;
        }
        match cores.run(c.id(), move |ctx| sleep_check(ctx, clock)) {
            Ok(()) => {
                let _ = launched.push(c.id());
            }
            Err(e) => println!("error: core {}: {e}", c.id()),
        }
    }
    if let Some(bsp) = cores.get(CoreId::BSP) {
        sleep_check(bsp, clock);
    }
    let mut finished = true;
    for &id in &launched {
        if cores.wait_idle(id, clock.rate().ticks_from_ms(JOB_TIMEOUT_MS)).is_err() {
            println!("error: core {id}: sleep check did not finish");
            finished = false;
        }
    }
    println!(
        "@smp cores={} online={} apic={} timer={}",
        cores.len(),
        cores.online(),
        cores.apic_mode().as_str(),
        cores.timer_kind().as_str()
    );
    defmt::info!("smp: {=usize} of {=usize} cores online", cores.online(), cores.len());
    if cores.online() != cores.len() {
        return Err("not every core came online");
    }
    if !finished || launched.len() + 1 != cores.len() {
        return Err("not every core finished its sleep check");
    }
    Ok(cores)
}

/// Sleeps [`SLEEPS`] × [`SLEEP_US`] on the calling core's deadline sleeper and prints
/// its `@cpu` line.
fn sleep_check(ctx: &'static CoreContext, clock: TscClock) {
    let mut sleeper = match HaltSleeper::new(SleepConfig::default()) {
        Ok(s) => s,
        Err(e) => {
            println!("error: core {}: {e}", ctx.id());
            return;
        }
    };
    let before = ctx.stats();
    let t0 = clock.now();
    let mut early = 0u32;
    for _ in 0..SLEEPS {
        let deadline = clock.now().saturating_add(clock.rate().ticks_from_us(SLEEP_US));
        if sleeper.sleep_until(deadline) < deadline {
            early += 1;
        }
    }
    let t1 = clock.now();
    let after = ctx.stats();
    let mwait = mwait_check(clock);
    let span: Duration = t1.saturating_since(t0);
    println!(
        "@cpu index={} apic_id={} online=1 timer={} sleeps={} fired={} early={} halted_pct={} elapsed_us={} mwait={}",
        ctx.id(),
        ctx.apic_id(),
        sleeper.timer_kind().as_str(),
        after.sleeps - before.sleeps,
        after.timer_irqs - before.timer_irqs,
        early,
        after.halted_permille(t0.ticks(), before.halted_cycles, t1.ticks()) / 10,
        clock.rate().ns(span) / 1_000,
        mwait
    );
}

/// One MONITOR/MWAIT sleep (off by default in the sleeper; exercised here so the path
/// runs somewhere) on a word nobody writes: it must come back, by the 1 ms deadline or
/// earlier (TCG with several vCPUs treats MWAIT as a no-op). `on`, or `off` where the
/// CPU has no MONITOR/MWAIT.
fn mwait_check(clock: TscClock) -> &'static str {
    let mut cfg = SleepConfig::default();
    cfg.mwait = true;
    match HaltSleeper::new(cfg) {
        Ok(mut s) if s.mwait() => {
            let watch = AtomicU32::new(0);
            let deadline = clock.now().saturating_add(clock.rate().ticks_from_us(SLEEP_US));
            s.sleep_until_written(&watch, || watch.load(Ordering::Acquire) == 0, deadline);
            "on"
        }
        _ => "off",
    }
}

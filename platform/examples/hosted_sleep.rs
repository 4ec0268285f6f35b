//! How late does [`NanoSleeper`] wake on this machine, and how much of each sleep is
//! spent off the CPU? Prints, per spin margin and sleep length, the wake-up lateness
//! p50/p99 (from the sleeper's own histogram) and the kernel/spin split.
//!
//! ```text
//! cargo run -p cadence-platform --release --example hosted_sleep [-- MARGIN_US ...]
//! ```
//!
//! The numbers chose `sleep::DEFAULT_SPIN_MARGIN_NS`; rerun it on a new machine.

#[cfg(target_os = "linux")]
fn main() {
    use cadence_core::time::{Clock, Sleeper};
    use cadence_platform::hosted::clock::HostClock;
    use cadence_platform::hosted::sleep::{NanoSleeper, SleepConfig};
    use cadence_platform::hosted::thread::{self, Pin};

    let margins: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let margins = if margins.is_empty() { vec![0, 10, 20, 50, 100] } else { margins };
    let (clock, refused) = HostClock::calibrate();
    println!(
        "clock: {:?} at {} Hz{}",
        clock.source(),
        clock.rate().hz(),
        match refused {
            Some(why) => format!(" (TSC refused: {why})"),
            None => String::new(),
        }
    );
    let cpu = thread::cpus_online() - 1;
    let worker = thread::spawn("cdn-sleep", Pin::Prefer(cpu), move || {
        println!("{:>9} {:>9} {:>6} {:>10} {:>10} {:>8}", "margin_us", "sleep_us", "n", "p50_ns", "p99_ns", "kernel%");
        for &m in &margins {
            for (sleep_us, n) in [(50u64, 4000u32), (200, 4000), (1000, 2000)] {
                let mut s = match NanoSleeper::new(clock, SleepConfig::with_spin_margin_ns(m * 1_000)) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("{e}");
                        return;
                    }
                };
                for _ in 0..n {
                    let d = clock.now().saturating_add(clock.rate().ticks_from_us(sleep_us));
                    s.sleep_until(d);
                }
                let st = s.stats();
                let busy = st.kernel_ns + st.spin_ns;
                println!(
                    "{m:>9} {sleep_us:>9} {n:>6} {:>10} {:>10} {:>7.1}%",
                    st.lateness_p50_ns().unwrap_or(0),
                    st.lateness_p99_ns().unwrap_or(0),
                    100.0 * st.kernel_ns as f64 / busy.max(1) as f64
                );
            }
        }
    });
    match worker {
        Ok(w) => {
            println!("worker {:?}", w.placement());
            let _ = w.join();
        }
        Err(e) => eprintln!("{e}"),
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {}

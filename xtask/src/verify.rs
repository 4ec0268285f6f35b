//! The verification steps of `cargo xtask test` that need no QEMU: the loom models, Miri,
//! the allocation test and a short run of every fuzz target ([`all`]; `cargo xtask verify`
//! runs them together, `cargo xtask loom | miri | fuzz` one at a time).
//!
//! - **loom**: `cargo test -p cadence-core --release --lib -- loom` with `--cfg loom`, in
//!   its own target directory (`target/loom`), so that `core`'s atomics are loom's and every
//!   model (each test whose path contains `loom`) explores its interleavings. The models
//!   need optimisation, not the release profile's LTO, single codegen unit and debug info:
//!   those are turned off for this build (it is a test build, never shipped).
//! - **Miri**: `cargo +nightly miri test --lib` on `cadence-core` and `cadence-drivers`,
//!   the tests of the modules with `unsafe` code ([`MIRI_TESTS`]; Stacked Borrows, isolation
//!   on), both crates at once, each in its own target directory (Miri interprets on one
//!   thread). Heavy tests run reduced under `cfg(miri)`.
//! - **no allocation**: `cargo test -p cadence-core --test no_alloc` (also part of
//!   `cargo test --workspace`, at the end of `cargo xtask test`; here it runs early).
//! - **fuzz**: `cargo +nightly fuzz build`, then each target of [`FUZZ_TARGETS`] for a few
//!   seconds from its committed seed corpus (`fuzz/corpus/<target>`, read only); new inputs
//!   go to `target/fuzz/corpus/<target>`, crashes to `target/fuzz/artifacts/<target>/`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use cadence_build::image;
use cadence_build::nightly;

/// Every fuzz target (`fuzz/fuzz_targets/<name>.rs`), with what it feeds.
pub const FUZZ_TARGETS: [(&str, &str); 11] = [
    ("parse", "core::parse over arbitrary frames"),
    ("chain_config", "core::nf::config::ChainSpec::parse (and build) over arbitrary text"),
    ("boot_cmdline", "firmware::config::BootConfig::parse over arbitrary command lines"),
    ("bootinfo", "platform::bootinfo: PVH start_info and multiboot2 tags over arbitrary memory"),
    ("virtio", "drivers::virtio RX/TX against a device whose used rings the input writes"),
    ("intel_rx", "drivers::intel RX ring with arbitrary descriptor write-back"),
    ("xsk", "drivers::xsk rings with arbitrary kernel-written indices and descriptors"),
    ("tpacket", "drivers::tpacket RX blocks and TX frame statuses written by the input"),
    ("chain", "a whole NF chain (worker loop over software NICs) fed arbitrary frame sequences"),
    ("pcap", "the NetBlaze simulator's capture reader (classic pcap and pcapng) over arbitrary files"),
    ("p4_spec", "core::p4::load (DPDK pipeline specs) and table-file lines over arbitrary text"),
];

/// Every loom model of `cadence-core` (test paths): the step fails when one of them did not
/// run and pass, and when a model ran that is not listed here (add it: the list is what the
/// step promises). docs/VERIFICATION.md says what each proves.
pub const LOOM_MODELS: [&str; 31] = [
    "offload::handoff::loom_handoff::doorbell_never_loses_a_wake_up",
    "offload::handoff::loom_handoff::handoff_loom_bursts_arrive_once_in_order",
    "offload::handoff::loom_handoff::handoff_loom_return_path_frees_each_buffer_once",
    "nf::accounting::loom_ring::accounting_loom_export_ring_full_then_drained_concurrently",
    "nf::accounting::loom_ring::accounting_loom_export_ring_two_producers_one_consumer",
    "nf::lb::loom_maglev::lb_loom_maglev_reader_never_sees_a_torn_table",
    "nf::lb::loom_maglev::lb_loom_maglev_second_writer_is_refused_not_mixed",
    "nf::nat::loom_pool::nat_loom_pool_alloc_release_conserves_ports",
    "nf::nat::loom_pool::nat_loom_pool_three_workers_two_ports",
    "nf::urlfilter::loom_slab::urlfilter_loom_release_then_claim_hands_over_a_clean_window",
    "nf::urlfilter::loom_slab::urlfilter_loom_stale_renewal_detected_and_harmless",
    "nf::urlfilter::loom_slab::urlfilter_loom_two_claims_one_owner",
    "pna::tests::loom_events::pna_loom_event_ring_two_consumers_never_share_an_event",
    "pna::tests::loom_events::pna_loom_event_ring_two_producers_one_consumer",
    "pna::tests::loom_expiry::pna_loom_refresh_between_report_and_take_keeps_the_entry",
    "pna::tests::loom_expiry::pna_loom_sweep_races_the_consumer_and_a_second_taker",
    "pna::tests::loom_expiry::pna_loom_two_sweeps_report_once_and_the_entry_is_taken_once",
    "pna::tests::loom_expiry::pna_loom_update_racing_sweep_and_take_is_never_torn",
    "pna::tests::loom_models::pna_loom_add_after_burst_miss_races",
    "pna::tests::loom_models::pna_loom_delete_vs_lookup_not_stale_after_release",
    "pna::tests::loom_models::pna_loom_insert_vs_lookup_never_torn",
    "pna::tests::loom_models::pna_loom_two_inserters_one_slot_of_capacity",
    "pna::tests::loom_models::pna_loom_update_vs_burst_lookup_never_torn_or_stale",
    "pna::tests::loom_models::pna_loom_writer_between_burst_miss_and_add",
    "sync::guarded::loom_tests::sync_loom_guarded_data_is_reached_only_under_its_lock",
    "sync::loom_lease::lease_loom_a_stopped_holders_lane_is_taken_over_only_when_consistent",
    "sync::loom_swap::swap_loom_readers_never_go_back_and_retired_versions_are_freed",
    "sync::loom_tests::sync_relaxed_lock_is_caught",
    "sync::loom_tests::sync_three_threads_exclusive_and_releases_observed",
    "sync::loom_tests::sync_two_threads_exclusive_and_releases_observed",
    "sync::loom_tests::sync_value_written_under_the_lock_is_seen_by_the_next_holder",
];

/// Seconds each fuzz target runs in `cargo xtask test`.
pub const TEST_SECONDS: u64 = 10;

fn run_timed(step: &str, cmd: &mut Command) -> Result<()> {
    println!("\n==> xtask test: {step} ({cmd:?})");
    let t0 = Instant::now();
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("xtask test: step '{step}' failed ({st})");
    }
    println!("==> {step}: passed in {:.0} s", t0.elapsed().as_secs_f64());
    Ok(())
}

/// The loom step: every loom model of `cadence-core`.
pub fn loom() -> Result<()> {
    let mut cmd = image::cargo();
    cmd.current_dir(image::workspace_root())
        .args(["test", "-p", "cadence-core", "--release", "--lib", "--", "loom"])
        .env("RUSTFLAGS", "--cfg loom")
        .env("CARGO_TARGET_DIR", image::target_dir().join("loom"))
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .stdout(Stdio::piped());
    println!("\n==> xtask test: loom models ({cmd:?})");
    let t0 = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    let mut passed = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line?;
            if let Some(name) = passed_test(&line) {
                passed.push(name.to_string());
            }
            println!("{line}");
        }
    }
    let st = child.wait()?;
    if !st.success() {
        bail!("xtask test: step 'loom models' failed ({st})");
    }
    // A renamed module or a filter that matches less must not quietly run fewer models.
    check_models(&LOOM_MODELS, &passed).context("xtask test: step 'loom models' failed")?;
    println!("==> loom models: all {} passed in {:.0} s", passed.len(), t0.elapsed().as_secs_f64());
    Ok(())
}

/// The test a libtest line says passed (`test PATH ... ok`, or `test PATH - should panic ... ok`).
fn passed_test(line: &str) -> Option<&str> {
    let name = line.strip_prefix("test ")?.strip_suffix(" ... ok")?;
    Some(name.strip_suffix(" - should panic").unwrap_or(name))
}

/// Every model of `want` passed, and nothing else ran.
fn check_models(want: &[&str], passed: &[String]) -> Result<()> {
    let missing: Vec<&str> = want.iter().copied().filter(|w| !passed.iter().any(|p| p == w)).collect();
    let extra: Vec<&str> = passed.iter().map(String::as_str).filter(|p| !want.contains(p)).collect();
    if !missing.is_empty() {
        bail!("{} of {} loom models did not run or pass: {}", missing.len(), want.len(), missing.join(", "));
    }
    if !extra.is_empty() {
        bail!("loom models ran that xtask's LOOM_MODELS does not list (add them): {}", extra.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod loom_list_tests {
    use super::*;

    #[test]
    fn the_loom_step_wants_every_listed_model_and_nothing_unlisted() {
        let all: Vec<String> = LOOM_MODELS.iter().map(|s| s.to_string()).collect();
        assert!(check_models(&LOOM_MODELS, &all).is_ok());
        let one_short = &all[1..];
        let e = check_models(&LOOM_MODELS, one_short).unwrap_err().to_string();
        assert!(e.contains(LOOM_MODELS[0]) && e.contains("1 of"), "{e}");
        assert!(check_models(&LOOM_MODELS, &[]).is_err(), "no model run is a failure");
        let mut more = all.clone();
        more.push("sync::loom_tests::new_model".into());
        assert!(check_models(&LOOM_MODELS, &more).unwrap_err().to_string().contains("new_model"));
        assert_eq!(passed_test("test sync::loom_tests::a ... ok"), Some("sync::loom_tests::a"));
        assert_eq!(passed_test("test sync::loom_tests::a ... FAILED"), None);
        assert_eq!(passed_test("test sync::loom_tests::a ... ignored"), None);
        assert_eq!(passed_test("test sync::loom_tests::b - should panic ... ok"), Some("sync::loom_tests::b"));
    }
}

/// What runs under Miri: per crate, the library tests of the modules that hold `unsafe` code
/// and of those that drive it (libtest filters, `--skip` included). `cadence-core`: `sync`
/// (`TryLock`, `Guarded`, `PacketMem`, `Swap`), `buf` (the pool over `PacketMem`), `softnic`
/// and `worker` (lanes bound to locks by `Guarded`, three workers racing over two lanes),
/// and `pna` (no `unsafe`, but the exact table's lock-free seqlock reads and the add after a
/// burst miss, with two threads racing on crowded buckets, under the data-race detector);
/// `cadence-drivers`: `shm` and the virtio driver against its device model, which writes
/// frames into the pool's memory through its own pointer (`virtio::model::host`, the one
/// `unsafe` of `drivers`). The rest of both crates is safe Rust whose tests run natively;
/// under Miri it would take most of an hour on two cores. Left out here:
/// `unstable_config_generation_times_out` (spins until a clock deadline, two minutes under
/// Miri; no memory access of interest) and `pna::poptrie` (safe, single-threaded, and its
/// tests build direct arrays of 65 536 entries and more, minutes under Miri).
pub const MIRI_TESTS: [(&str, &[&str]); 2] = [
    (
        "cadence-core",
        &[
            "sync::",
            "buf::",
            "softnic::",
            "worker::",
            "pna::",
            "offload::tests::",
            "offload::handoff::tests::handoff_an_aux_core",
            "--skip",
            "pna::poptrie::",
        ],
    ),
    ("cadence-drivers", &["shm::", "virtio::tests::", "--skip", "unstable_config_generation_times_out"]),
];

/// The Miri step: the tests of [`MIRI_TESTS`] under Miri, both crates at once, each in its
/// own target directory (Miri interprets on one thread; the build machine has two cores);
/// each crate's output is printed when it finishes (and kept in `target/miri-logs/`).
pub fn miri() -> Result<()> {
    println!("\n==> xtask test: Miri (nightly toolchain {}, components miri, rust-src)", nightly::channel());
    nightly::ensure_miri().context("xtask test: step 'Miri' failed")?;
    let t0 = Instant::now();
    let logs = image::target_dir().join("miri-logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let mut running = Vec::new();
    for (pkg, filters) in MIRI_TESTS {
        let log = logs.join(format!("{pkg}.log"));
        let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = nightly::cargo();
        cmd.args(["miri", "test", "-p", pkg, "--lib", "--"])
            .args(filters)
            .env("CARGO_TARGET_DIR", image::target_dir().join(format!("miri-{pkg}")))
            .stdout(file.try_clone()?)
            .stderr(file);
        println!("xtask: {cmd:?} > {}", log.display());
        running.push((pkg, log, cmd.spawn().with_context(|| format!("starting {cmd:?}"))?));
    }
    let mut failed = Vec::new();
    for (pkg, log, mut child) in running {
        let st = child.wait()?;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let results: Vec<&str> = text.lines().filter(|l| l.starts_with("test result:")).collect();
        // A renamed module must not turn a filter into a silent no-op.
        let passed: u64 = results
            .iter()
            .filter_map(|l| l.split_whitespace().skip_while(|w| *w != "ok.").nth(1).and_then(|n| n.parse::<u64>().ok()))
            .sum();
        if st.success() && passed == 0 {
            failed.push(format!("{pkg} (no test ran: do the filters of MIRI_TESTS still name modules?)"));
        } else if st.success() {
            println!("Miri ({pkg}): {} ({:.0} s since the step began)", results.join("; "), t0.elapsed().as_secs_f64());
        } else {
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
            failed.push(format!("{pkg} ({st}; log: {})", log.display()));
        }
    }
    if !failed.is_empty() {
        bail!("xtask test: step 'Miri' failed: {}", failed.join(", "));
    }
    println!("==> Miri: passed in {:.0} s", t0.elapsed().as_secs_f64());
    Ok(())
}

fn fuzz_dir() -> PathBuf {
    image::workspace_root().join("fuzz")
}

/// How a fuzz run is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Wall-clock seconds (`-max_total_time`).
    Seconds(u64),
    /// Executions (`-runs`).
    Runs(u64),
}

/// What one fuzz run did (from libFuzzer's last lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FuzzReport {
    /// Executions.
    pub runs: u64,
    /// Seconds it ran.
    pub seconds: u64,
    /// Coverage counters reached (`cov:`).
    pub cov: u64,
}

/// Reads libFuzzer's `Done N runs in S second(s)` and the last `cov: C` of its output.
pub fn parse_fuzz_output(text: &str) -> FuzzReport {
    let mut r = FuzzReport::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Done ") {
            let mut w = rest.split_whitespace();
            r.runs = w.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            r.seconds = w.nth(2).and_then(|n| n.parse().ok()).unwrap_or(0);
        }
        if let Some(i) = line.find("cov: ") {
            r.cov = line[i + 5..].split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(r.cov);
        }
    }
    r
}

/// Builds every fuzz target (`cargo fuzz build`, debug assertions on, no sanitizer: the
/// fuzzed code is safe Rust, whose bounds are checked anyway; Miri covers the unsafe).
pub fn fuzz_build() -> Result<()> {
    let mut cmd = nightly::cargo();
    cmd.args(["fuzz", "build", "--sanitizer", "none", "--debug-assertions", "--fuzz-dir"]).arg(fuzz_dir());
    run_timed("fuzz (build every target)", &mut cmd)
}

/// Runs one target (built already) from its committed corpus; fails on any crash.
pub fn fuzz_run(target: &str, budget: Budget) -> Result<FuzzReport> {
    let base = image::target_dir().join("fuzz");
    let scratch = base.join("corpus").join(target);
    let artifacts = base.join("artifacts").join(target);
    let log = base.join("logs").join(format!("{target}.log"));
    for d in [&scratch, &artifacts] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d)?;
    }
    let seeds = fuzz_dir().join("corpus").join(target);
    let mut cmd = nightly::cargo();
    cmd.args(["fuzz", "run", "--sanitizer", "none", "--debug-assertions", "--fuzz-dir"])
        .arg(fuzz_dir())
        .arg(target)
        .arg(&scratch)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1");
    match budget {
        Budget::Seconds(s) => cmd.arg(format!("-max_total_time={s}")),
        Budget::Runs(n) => cmd.arg(format!("-runs={n}")),
    };
    let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stdout(file.try_clone()?).stderr(file);
    let t0 = Instant::now();
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let report = parse_fuzz_output(&text);
    if !st.success() {
        println!("fuzz {target} ({budget:?}): FAILED");
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        for l in tail.iter().rev() {
            eprintln!("{l}");
        }
        bail!(
            "fuzz target {target} failed ({st}); the input is in {} (log: {}); reproduce with \
             `cargo +nightly fuzz run --fuzz-dir fuzz -s none -a {target} <file>`",
            artifacts.display(),
            log.display()
        );
    }
    println!(
        "fuzz {target} ({budget:?}): {} runs in {:.0} s, cov {} (log: {})",
        report.runs,
        t0.elapsed().as_secs_f64(),
        report.cov,
        log.display()
    );
    Ok(report)
}

/// `cargo xtask fuzz [TARGET]`: provisions nightly and cargo-fuzz, builds, runs `target`
/// (or every target in turn) within `budget`.
pub fn fuzz(target: Option<&str>, budget: Budget) -> Result<()> {
    if let Some(t) = target
        && !FUZZ_TARGETS.iter().any(|(n, _)| *n == t)
    {
        let names: Vec<&str> = FUZZ_TARGETS.iter().map(|(n, _)| *n).collect();
        bail!("no fuzz target {t:?}; the targets are {}", names.join(", "));
    }
    nightly::ensure_cargo_fuzz()?;
    fuzz_build()?;
    let t0 = Instant::now();
    let names: Vec<&str> = FUZZ_TARGETS.iter().map(|(n, _)| *n).filter(|n| target.is_none_or(|t| t == *n)).collect();
    // One libFuzzer process per core: each is single-threaded, and the targets are
    // independent (own scratch corpus, artifacts and log).
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(names.len()).max(1);
    for group in names.chunks(jobs) {
        let results: Vec<Result<FuzzReport>> = std::thread::scope(|s| {
            let handles: Vec<_> = group.iter().map(|name| s.spawn(move || fuzz_run(name, budget))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a fuzz runner thread panicked"))))
                .collect()
        });
        for r in results {
            r?;
        }
    }
    println!("==> fuzz: passed in {:.0} s ({jobs} at a time)", t0.elapsed().as_secs_f64());
    Ok(())
}

/// The fuzz step of `cargo xtask test`: every target for [`TEST_SECONDS`].
pub fn fuzz_step() -> Result<()> {
    println!("\n==> xtask test: fuzz (cargo-fuzz on nightly {}, {TEST_SECONDS} s per target)", nightly::channel());
    fuzz(None, Budget::Seconds(TEST_SECONDS)).context("xtask test: step 'fuzz' failed")
}

/// The allocation step: `core/tests/no_alloc.rs`, the counting-allocator test of the
/// per-packet path (100 000 packets through each kind of chain, no allocation allowed).
pub fn no_alloc() -> Result<()> {
    let mut cmd = image::cargo();
    cmd.current_dir(image::workspace_root()).args(["test", "-p", "cadence-core", "--test", "no_alloc"]);
    run_timed("no allocation per packet", &mut cmd)
}

/// Every verification step of `cargo xtask test`, in its order (`cargo xtask verify` runs
/// exactly these): the loom models, Miri, the allocation test, a short run of every fuzz
/// target. Prints how long each step took.
pub fn all() -> Result<()> {
    type Step = fn() -> Result<()>;
    let steps: [(&str, Step); 4] = [("loom", loom), ("Miri", miri), ("no allocation", no_alloc), ("fuzz", fuzz_step)];
    let mut took = Vec::new();
    let t0 = Instant::now();
    for (name, step) in steps {
        let t = Instant::now();
        step()?;
        took.push(format!("{name} {:.0} s", t.elapsed().as_secs_f64()));
    }
    println!("\n==> verification: {} (total {:.0} s)", took.join(", "), t0.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzer_totals() {
        let out = "#2\tINITED cov: 120 ft: 130 corp: 3/30b exec/s: 0 rss: 40Mb\n\
                   #1048576\tpulse  cov: 312 ft: 900 corp: 80/2Kb lim: 4096 exec/s: 90000 rss: 60Mb\n\
                   #1200000\tDONE   cov: 315 ft: 910 corp: 81/2Kb lim: 4096 exec/s: 100000 rss: 60Mb\n\
                   Done 1200000 runs in 12 second(s)\n";
        assert_eq!(parse_fuzz_output(out), FuzzReport { runs: 1_200_000, seconds: 12, cov: 315 });
    }

    #[test]
    fn every_target_has_a_source_file_and_a_seed_corpus() {
        for (name, _) in FUZZ_TARGETS {
            assert!(fuzz_dir().join("fuzz_targets").join(format!("{name}.rs")).is_file(), "{name}: no source");
            let seeds = std::fs::read_dir(fuzz_dir().join("corpus").join(name)).map(|d| d.count()).unwrap_or(0);
            assert!(seeds > 0, "{name}: no committed seed corpus");
        }
    }
}

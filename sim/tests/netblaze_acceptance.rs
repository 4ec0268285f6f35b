//! Acceptance criteria of issue 11 on a short campus trace (8 simulated seconds, so the test
//! runs in seconds on a 2-core CI machine; the default study runs 60): with a 200 µs SLO,
//! NetBlaze — `cadence_core::netblaze`'s mappers driven in virtual time with the committed
//! Chain 2 profile — meets the SLO in ≥ 99 % of 1-second windows with 0 reorderings; static
//! RSS misses it on the same trace; NetBlaze uses no more core-seconds than any baseline that
//! also meets it; the same seed gives the same CSV.

use std::sync::OnceLock;

use cadence_core::netblaze::{RateCurve, RatePoint};
use cadence_sim::netblaze::study::{Row, StudyOptions, load_profile, rows_to_csv, run_trace};
use cadence_sim::netblaze::trace::{GenConfig, MemTrace, PacketSource, Preset, TraceGen};

const SECONDS: u64 = 8;

fn opts() -> StudyOptions {
    StudyOptions { seconds: SECONDS, presets: vec![Preset::Campus], rack: false, ..StudyOptions::default() }
}

fn campus(seed: u64) -> Vec<Row> {
    let o = StudyOptions { seed, ..opts() };
    let profile = load_profile(&o.profile).expect("profile");
    let make = || -> anyhow::Result<Box<dyn PacketSource>> {
        Ok(Box::new(TraceGen::new(GenConfig::preset(Preset::Campus, seed, SECONDS * 1_000_000_000))?))
    };
    run_trace("campus", &make, &o, &profile).expect("run").0
}

fn rows() -> &'static [Row] {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    ROWS.get_or_init(|| {
        let r = campus(1);
        eprint!("{}", cadence_sim::netblaze::study::rows_to_table(&r));
        r
    })
}

fn row(policy: &str) -> &'static Row {
    rows().iter().find(|r| r.policy == policy).expect("policy row")
}

#[test]
fn netblaze_meets_the_slo_in_99_percent_of_windows_without_reordering() {
    let nb = row("netblaze");
    assert!(nb.windows_ok >= 0.99, "netblaze met the SLO in {:.1} % of windows", 100.0 * nb.windows_ok);
    assert_eq!(nb.reorderings, 0);
    assert_eq!(nb.drops, 0);
}

#[test]
fn static_rss_misses_the_slo_on_the_same_trace() {
    let s = row("static-rss");
    assert!(s.windows_ok < 0.99, "static RSS met the SLO in {:.1} % of windows", 100.0 * s.windows_ok);
    assert_eq!(s.packets, row("netblaze").packets, "same trace");
}

#[test]
fn netblaze_uses_no_more_core_seconds_than_any_baseline_that_meets_the_slo() {
    let nb = row("netblaze");
    for r in rows().iter().filter(|r| r.policy != "netblaze" && r.windows_ok >= 0.99) {
        assert!(
            nb.core_seconds <= r.core_seconds + 1e-9,
            "netblaze {:.3} core-s, {} {:.3}",
            nb.core_seconds,
            r.policy,
            r.core_seconds
        );
    }
}

#[test]
fn same_seed_same_csv() {
    let a = rows_to_csv(rows());
    let b = rows_to_csv(&campus(1));
    assert_eq!(a, b);
}

#[test]
fn an_empty_trace_and_a_profile_epoch_past_the_slo_are_named_errors() {
    let o = opts();
    let profile = load_profile(&o.profile).expect("profile");
    let empty = || -> anyhow::Result<Box<dyn PacketSource>> { Ok(Box::new(MemTrace::default())) };
    let Err(e) = run_trace("empty", &empty, &o, &profile) else { panic!("an empty trace ran") };
    assert!(e.to_string().contains("no packets"), "{e}");
    let tight = StudyOptions { slo_ns: 60_000, ..opts() };
    let Err(e) = run_trace("campus", &empty, &tight, &profile) else { panic!("an epoch past the SLO ran") };
    assert!(e.to_string().contains("not below the SLO"), "{e}");
    let mut slow = profile.clone();
    slow.rate = RateCurve::try_new(vec![RatePoint { flows: 1, pps: 1_000 }]).expect("rate");
    let short = || -> anyhow::Result<Box<dyn PacketSource>> {
        Ok(Box::new(TraceGen::new(GenConfig::preset(Preset::Backbone, 1, 1_000_000_000))?))
    };
    match run_trace("backbone", &short, &o, &slow) {
        Ok(_) => panic!("a profile 1000 times too slow covered the trace"),
        Err(e) => assert!(e.to_string().contains("does not cover"), "{e}"),
    }
}

/// Seconds 20–29 of the same campus trace hold its largest whale (second 28 of the default
/// study): a single flow whose backlog exceeds a core's epoch while a packet of it is always
/// in service. NetBlaze must split it (head here, tail on a booster) even though it is busy;
/// when busy flows could not be split, that second's p99 was 237.6 µs and the study met the
/// SLO in 59 of 60 windows.
#[test]
fn the_campus_whale_in_service_is_split_and_every_window_meets_the_slo() {
    const WHALE_SECONDS: u64 = 30;
    let o = StudyOptions {
        seconds: WHALE_SECONDS,
        policies: vec![cadence_sim::netblaze::policies::Kind::NetBlaze],
        ..opts()
    };
    let profile = load_profile(&o.profile).expect("profile");
    let make = || -> anyhow::Result<Box<dyn PacketSource>> {
        Ok(Box::new(TraceGen::new(GenConfig::preset(Preset::Campus, 1, WHALE_SECONDS * 1_000_000_000))?))
    };
    let rows = run_trace("campus", &make, &o, &profile).expect("run").0;
    let nb = rows.iter().find(|r| r.policy == "netblaze").expect("netblaze row");
    assert!(nb.windows_ok >= 1.0, "netblaze met the SLO in {:.1} % of windows", 100.0 * nb.windows_ok);
    assert_eq!((nb.reorderings, nb.drops), (0, 0));
}

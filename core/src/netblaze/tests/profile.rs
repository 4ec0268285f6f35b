//! The predictor: frontier and rate lookups, and the text form.

use alloc::string::String;
use alloc::vec;

use proptest::prelude::*;

use super::{fixture, frontier};
use crate::netblaze::epoch::Backlog;
use crate::netblaze::profile::{
    Frontier, FrontierError, FrontierPoint, Profile, ProfileErrorKind, RateCurve, RatePoint, WhaleChoice,
};

#[test]
fn lookups_interpolate_and_round_down() {
    let f = frontier(&[(1, 100), (8, 96), (32, 64), (64, 32)]);
    assert_eq!(f.max_packets(0), 100);
    assert_eq!(f.max_packets(1), 100);
    assert_eq!(f.max_packets(8), 96);
    // Between 8:96 and 32:64 — 96 − 32·(20−8)/24 = 80.
    assert_eq!(f.max_packets(20), 80);
    // 96 − 32·9/24 = 84.
    assert_eq!(f.max_packets(17), 84);
    assert_eq!(f.max_packets(64), 32);
    assert_eq!(f.max_packets(65), 0, "past the last point the core cannot finish the epoch");
    assert!(f.contains(Backlog::new(20, 80)));
    assert!(!f.contains(Backlog::new(20, 81)));
    assert!(f.contains(Backlog::EMPTY));
    assert_eq!(f.load_q16(Backlog::new(8, 48)), 1 << 15);
    assert_eq!(f.load_q16(Backlog::new(100, 1)), u32::MAX);
}

#[test]
fn empty_or_non_monotone_frontiers_are_refused() {
    let p = |flows, packets| FrontierPoint { flows, packets };
    assert_eq!(Frontier::try_new(vec![]), Err(FrontierError::Empty));
    assert_eq!(Frontier::try_new(vec![p(1, 10), p(1, 9)]), Err(FrontierError::FlowsNotIncreasing { index: 1 }));
    assert_eq!(Frontier::try_new(vec![p(1, 10), p(2, 11)]), Err(FrontierError::CapacityIncreasing { index: 1 }));
    assert_eq!(Frontier::try_new(vec![p(0, 10)]), Err(FrontierError::Zero { index: 0 }));
    assert_eq!(
        RateCurve::try_new(vec![RatePoint { flows: 5, pps: 1 }, RatePoint { flows: 6, pps: 2 }]),
        Err(FrontierError::CapacityIncreasing { index: 1 })
    );
}

#[test]
fn rate_curve_clamps_at_both_ends() {
    let r =
        RateCurve::try_new(vec![RatePoint { flows: 500, pps: 2_140_000 }, RatePoint { flows: 3000, pps: 1_820_000 }])
            .expect("rate");
    assert_eq!(r.pps(1), 2_140_000);
    assert_eq!(r.pps(500), 2_140_000);
    assert_eq!(r.pps(1750), 1_980_000);
    assert_eq!(r.pps(1_000_000), 1_820_000);
}

#[test]
fn whale_split_picks_a_sufficient_split_or_best_effort() {
    let p = fixture();
    assert_eq!(p.whale_threshold(), 100);
    assert!(!p.is_whale(100));
    assert!(p.is_whale(101));
    // Split 1 finishes min(300, 150) = 150, split 2 min(250, 400) = 250.
    assert_eq!(p.whale_split(140), WhaleChoice::Split { k: 2 });
    assert_eq!(p.whale_split(250), WhaleChoice::Split { k: 2 });
    assert_eq!(p.whale_split(251), WhaleChoice::BestEffort { k: 2 });
}

#[test]
fn text_round_trip() {
    let p = fixture();
    let mut s = String::new();
    p.write(&mut s).expect("write");
    let q = Profile::parse(&s).expect("parse");
    assert_eq!(p, q);
    // Comments, blank lines and trailing comments are fine.
    let with_comments = s.replace("tsc_hz", "# a comment\n\ntsc_hz").replace("epoch_ns=80000", "epoch_ns=80000 # ns");
    assert_eq!(Profile::parse(&with_comments).expect("parse"), p);
}

#[test]
fn text_errors_name_line_and_key() {
    let good = {
        let mut s = String::new();
        fixture().write(&mut s).expect("write");
        s
    };
    let e = Profile::parse("nfs=acl\n").expect_err("no version");
    assert_eq!((e.line, e.kind), (1, ProfileErrorKind::MissingVersion));
    let e = Profile::parse("version=2\n").expect_err("version");
    assert_eq!(e.kind, ProfileErrorKind::UnsupportedVersion);
    let e = Profile::parse(&good.replace("frontier=1:100,8:96", "frontier=1:100,8:196")).expect_err("monotone");
    assert_eq!((e.line, e.key.as_str()), (5, "frontier"));
    assert_eq!(e.kind, ProfileErrorKind::Curve(FrontierError::CapacityIncreasing { index: 1 }));
    assert!(alloc::format!("{e}").contains("not monotone"), "{e}");
    let e = Profile::parse(&good.replace("frontier=1:100,8:96,32:64,64:32", "frontier=")).expect_err("empty");
    assert_eq!(e.kind, ProfileErrorKind::Curve(FrontierError::Empty));
    let e = Profile::parse(&good.replace("rate=", "rote=")).expect_err("unknown");
    assert_eq!((e.kind, e.key.as_str()), (ProfileErrorKind::UnknownKey, "rote"));
    let e =
        Profile::parse("version=1\nnfs=a,b\ntsc_hz=1\nepoch_ns=1\nservice=packet_cycles:1,flow_cycles:1\nrate=1:1\n")
            .expect_err("missing");
    assert_eq!((e.line, e.kind, e.key.as_str()), (0, ProfileErrorKind::Missing, "frontier"));
    let e = Profile::parse(&good.replace("split.2.tail.service", "split.2.tail.xservice")).expect_err("bad split key");
    assert_eq!(e.kind, ProfileErrorKind::UnknownKey);
    let e = Profile::parse(
        &good.lines().filter(|l| !l.starts_with("split.2.tail.service")).collect::<alloc::vec::Vec<_>>().join("\n"),
    )
    .expect_err("incomplete");
    assert_eq!((e.kind, e.key.as_str()), (ProfileErrorKind::SplitIncomplete, "split.2.tail.service"));
    let e = Profile::parse(&good.replace("split.2.", "split.3.")).expect_err("range");
    assert_eq!(e.kind, ProfileErrorKind::SplitOutOfRange);
    let e = Profile::parse(&good.replace("tsc_hz=1000000000", "tsc_hz=1000000000\ntsc_hz=5")).expect_err("dup");
    assert_eq!(e.kind, ProfileErrorKind::Duplicate);
    let e = Profile::parse(&good.replace("service=packet_cycles:100,", "service=packet_cycles:x,")).expect_err("num");
    assert!(matches!(e.kind, ProfileErrorKind::BadValue(_)));
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]
    /// Any sorted non-increasing point list gives a lookup that is non-increasing in flows,
    /// passes through every point and stays between its neighbours.
    #[test]
    fn frontier_interpolation_is_monotone(
        steps in prop::collection::vec((1u32..50, 0u32..40), 1..12),
        start in 1u32..5000,
        probes in prop::collection::vec(0u32..1000, 1..64),
    ) {
        let mut pts = vec![];
        let (mut f, mut p) = (0u32, start + 40 * 12);
        for (df, dp) in steps {
            f += df;
            p = p.saturating_sub(dp).max(1);
            pts.push(FrontierPoint { flows: f, packets: p });
        }
        let fr = Frontier::try_new(pts.clone()).expect("valid");
        for w in 0..fr.max_flows() + 2 {
            prop_assert!(fr.max_packets(w + 1) <= fr.max_packets(w), "not monotone at {w}");
        }
        for pt in &pts {
            prop_assert_eq!(fr.max_packets(pt.flows), pt.packets);
        }
        for x in probes {
            let v = fr.max_packets(x);
            if x > fr.max_flows() { prop_assert_eq!(v, 0); } else { prop_assert!(v >= pts.last().map_or(0, |p| p.packets)); }
        }
        // The same points parse back from text.
        let mut prof = fixture();
        prof.full.frontier = fr.clone();
        let mut s = String::new();
        prof.write(&mut s).expect("write");
        prop_assert_eq!(Profile::parse(&s).expect("parse").full.frontier, fr);
    }

    /// The parser never panics on arbitrary text.
    #[test]
    fn parser_never_panics(s in "(version=1\n)?([a-z_.0-9]{0,12}=[0-9:,a-z_]{0,20}\n){0,8}") {
        let _ = Profile::parse(&s);
    }
}

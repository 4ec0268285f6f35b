//! The server mapper: thresholds, reclaiming with undo, changed entries only.

use std::vec::Vec;

use proptest::prelude::*;

use crate::netblaze::profile::{RateCurve, RatePoint};
use crate::netblaze::server_mapper::ServerMapper;
use crate::netblaze::{NetBlazeConfig, Params};
use crate::rss::BucketLoad;

fn params() -> Params {
    NetBlazeConfig::default().validate().expect("config")
}

/// 1 Mpps per core whatever the flows.
fn flat() -> RateCurve {
    RateCurve::try_new(vec![RatePoint { flows: 1, pps: 1_000_000 }]).expect("rate")
}

fn load(pps: f64) -> BucketLoad {
    BucketLoad { flows: 10.0, pps }
}

fn apply(table: &mut [u16], m: &ServerMapper) {
    for c in m.changes() {
        assert_eq!(table[usize::from(c.bucket)], c.from);
        table[usize::from(c.bucket)] = c.to;
    }
}

fn core_pps(table: &[u16], loads: &[BucketLoad], c: u16) -> f64 {
    table.iter().zip(loads).filter(|(t, _)| **t == c).map(|(_, l)| l.pps).sum()
}

#[test]
fn an_overloaded_core_sheds_its_largest_buckets_to_a_new_core() {
    let mut m = ServerMapper::new(params(), 8, 4);
    let mut table = vec![0u16; 8];
    let mut active = vec![true, false, false, false];
    // 100 + 105 + … + 135 kpps = 940 kpps > 850 kpps.
    let loads: Vec<BucketLoad> = (0..8).map(|i| load(100_000.0 + 5_000.0 * f64::from(i))).collect();
    let out = m.period(&flat(), &loads, &table, &mut active);
    assert_eq!((out.activated, out.active), (1, 2));
    // 940 kpps: the largest bucket (7: 135 kpps) moves, 805 ≤ 850.
    let moved: Vec<u16> = m.changes().iter().map(|c| c.bucket).collect();
    assert_eq!(moved, [7]);
    apply(&mut table, &m);
    assert!(core_pps(&table, &loads, 0) <= 850_000.0);
    assert!(core_pps(&table, &loads, 1) <= 750_000.0);
    // Nothing changes in a steady state.
    let out = m.period(&flat(), &loads, &table, &mut active);
    assert_eq!((out.moved, out.activated, out.released), (0, 0, 0));
    assert!(m.changes().is_empty());
}

#[test]
fn buckets_go_first_fit_onto_cores_below_75_percent() {
    let mut m = ServerMapper::new(params(), 6, 3);
    // Core 0 overloaded (900 k), core 1 at 700 k (adding 100 k: 800 k > 750 k), core 2 at 100 k.
    let table = vec![0, 0, 0, 1, 1, 2];
    let loads =
        vec![load(300_000.0), load(300_000.0), load(300_000.0), load(350_000.0), load(350_000.0), load(100_000.0)];
    let mut active = vec![true, true, true];
    let out = m.period(&flat(), &loads, &table, &mut active);
    assert_eq!(out.activated, 0);
    assert_eq!(m.changes().len(), 1);
    assert_eq!((m.changes()[0].from, m.changes()[0].to), (0, 2));
}

#[test]
fn the_least_loaded_core_is_reclaimed_only_after_4_periods_and_undone_if_it_needs_a_core() {
    let mut m = ServerMapper::new(params(), 4, 3);
    let mut table = vec![0, 0, 1, 2];
    let loads = vec![load(200_000.0), load(200_000.0), load(100_000.0), load(600_000.0)];
    let mut active = vec![true, true, true];
    for _ in 0..5 {
        let out = m.period(&flat(), &loads, &table, &mut active);
        assert_eq!(out.released, 0, "not before it has been active more than 4 periods");
    }
    let out = m.period(&flat(), &loads, &table, &mut active);
    // Core 1 (10 %) empties onto core 0 (400 k + 100 k ≤ 750 k). Core 0 (40 %) would then need
    // room for 500 k: core 2 has 600 k → undone.
    assert_eq!(out.released, 1);
    apply(&mut table, &m);
    assert_eq!(table, [0, 0, 0, 2]);
    assert_eq!(active, [true, false, true]);
    assert_eq!(m.changes().len(), 1);
}

#[test]
fn a_busy_core_is_never_reclaimed() {
    let mut m = ServerMapper::new(params(), 2, 2);
    let table = vec![0, 1];
    let loads = vec![load(600_000.0), load(600_000.0)];
    let mut active = vec![true, true];
    for _ in 0..10 {
        let out = m.period(&flat(), &loads, &table, &mut active);
        assert_eq!((out.released, out.moved), (0, 0));
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]
    /// Whatever the loads: the changes list names exactly the entries whose core differs,
    /// with their old core; no core ends above 85 % unless it holds a single bucket or none
    /// could be activated; every bucket maps to an active core.
    #[test]
    fn changed_entries_only_and_thresholds_hold(
        periods in prop::collection::vec(prop::collection::vec(0.0f64..400_000.0, 32), 1..8),
    ) {
        let mut m = ServerMapper::new(params(), 32, 16);
        let mut table = vec![0u16; 32];
        let mut active = vec![false; 16];
        active[0] = true;
        for pps in periods {
            let loads: Vec<BucketLoad> = pps.iter().map(|&p| load(p)).collect();
            let before = table.clone();
            let out = m.period(&flat(), &loads, &table, &mut active);
            apply(&mut table, &m);
            let changed = before.iter().zip(&table).filter(|(a, b)| a != b).count();
            prop_assert_eq!(changed, m.changes().len());
            prop_assert_eq!(usize::from(out.moved), changed);
            for (b, &c) in table.iter().enumerate() {
                prop_assert!(active[usize::from(c)], "bucket {} on inactive core {}", b, c);
            }
            if out.unplaced == 0 {
                for c in 0..16u16 {
                    let n = table.iter().filter(|&&t| t == c).count();
                    if n > 1 {
                        prop_assert!(core_pps(&table, &loads, c) <= 850_000.0 + 1e-6, "core {} overloaded", c);
                    }
                }
            }
        }
    }
}

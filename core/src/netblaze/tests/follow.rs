//! The follow table against a map.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::netblaze::follow::{Follow, FollowFull, FollowTable};

#[test]
fn a_flow_follows_until_its_last_packet_is_completed() {
    let mut t = FollowTable::with_capacity(4);
    let f = Follow { aux: 2, split_k: 0 };
    t.record(7, f, 10).expect("room");
    assert_eq!(t.lookup(7, |_| 9), Some(f));
    assert_eq!(t.lookup(7, |_| 10), None);
    assert!(t.is_empty());
    assert_eq!(t.lookup(7, |_| 0), None);
}

#[test]
fn a_full_table_refuses() {
    let mut t = FollowTable::with_capacity(4);
    for k in 0..4 {
        t.record(k, Follow { aux: 0, split_k: 0 }, 1).expect("room");
    }
    assert!(!t.has_room());
    assert_eq!(t.record(99, Follow { aux: 0, split_k: 0 }, 1), Err(FollowFull));
    t.record(3, Follow { aux: 1, split_k: 0 }, 5).expect("an update needs no room");
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]
    #[test]
    fn behaves_like_a_map(ops in prop::collection::vec((0u64..24, 0u64..8, any::<bool>()), 1..300)) {
        let mut t = FollowTable::with_capacity(16);
        let mut m: BTreeMap<u64, u64> = BTreeMap::new();
        for (key, until, rec) in ops {
            let key = key.wrapping_mul(0x1000_0000_0000_0001);
            if rec {
                let r = t.record(key, Follow { aux: 1, split_k: 0 }, until);
                if r.is_ok() { m.insert(key, until); } else { prop_assert!(m.len() >= 16 && !m.contains_key(&key)); }
            } else {
                let got = t.lookup(key, |_| 4);
                let want = match m.get(&key) {
                    Some(&u) if u > 4 => Some(Follow { aux: 1, split_k: 0 }),
                    Some(_) => { m.remove(&key); None }
                    None => None,
                };
                prop_assert_eq!(got, want);
            }
            prop_assert_eq!(t.len(), m.len());
        }
    }
}

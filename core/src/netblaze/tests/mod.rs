//! Tests of `core::netblaze`: unit tests next to a small fixture profile, and proptests
//! against reference models (the queues of a dedicated core and its auxiliary cores).

pub(super) mod core_mapper;
mod follow;
mod ingress;
mod profile;
mod server_mapper;

use alloc::vec::Vec;

use super::profile::{Frontier, FrontierPoint, Part, Profile, RateCurve, RatePoint, ServiceCost, SplitProfile};

pub(super) fn frontier(points: &[(u32, u32)]) -> Frontier {
    Frontier::try_new(points.iter().map(|&(flows, packets)| FrontierPoint { flows, packets }).collect())
        .expect("frontier")
}

/// A three-NF profile: 100 packets of one flow per epoch whole; split at 1 gives 150, at 2
/// gives 250 (a split suffices up to 250 packets).
pub(crate) fn fixture() -> Profile {
    let part = |f: &[(u32, u32)]| Part {
        frontier: frontier(f),
        service: ServiceCost { packet_cycles: 100, flow_cycles: 500 },
    };
    Profile {
        nfs: ["acl", "lb", "accounting"].iter().map(|s| (*s).into()).collect::<Vec<_>>(),
        tsc_hz: 1_000_000_000,
        epoch_ns: 80_000,
        full: part(&[(1, 100), (8, 96), (32, 64), (64, 32)]),
        rate: RateCurve::try_new(vec![RatePoint { flows: 1, pps: 1_000_000 }, RatePoint { flows: 1000, pps: 800_000 }])
            .expect("rate"),
        splits: vec![
            SplitProfile { k: 1, head: part(&[(1, 300), (64, 200)]), tail: part(&[(1, 150), (64, 60)]) },
            SplitProfile { k: 2, head: part(&[(1, 250), (64, 100)]), tail: part(&[(1, 400), (64, 300)]) },
        ],
    }
}

use alloc::vec;

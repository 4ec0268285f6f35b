//! The L3 forwarder chain of the benches: 256 × /24 routes (DPDK l3fwd-LPM's setting) over two
//! ports. `cargo xtask peers` gives DPDK's l3fwd the same routes (`xtask/src/peers/l3fwd.rs`).

use std::sync::Arc;

use cadence_core::nf::l3fwd::{L3fwd, L3fwdConfig, L3fwdShared, NextHop, Route4};
use cadence_core::nf::{Chain, Egress, Nf};
use cadence_core::stage::PORTS;

/// The chains' egress: own and peer MACs of the two ports, no control port.
pub const EGRESS: Egress =
    Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1]], None);

/// The L3 forwarder NF: route `i` (0..256) is 10.(i / 16).(i % 16).0/24 via port i % 2, plus
/// 10.1.0.0/16 via port 1 (so the VIP always has a route; its /24, route 16, wins: port 0).
pub fn l3fwd() -> Box<dyn Nf> {
    l3fwd_stride(L3fwdConfig::default().first_stride4)
}

/// [`l3fwd`] with an IPv4 first level of `first_stride4` bits (24: DIR-24-8, `rte_lpm`'s
/// layout, which DPDK's l3fwd uses).
pub fn l3fwd_stride(first_stride4: u8) -> Box<dyn Nf> {
    let mut cfg = L3fwdConfig::default();
    cfg.first_stride4 = first_stride4;
    cfg.next_hops = (0..PORTS as u8).map(|p| NextHop::mac(p, [2, 0, 0, 0, 2, p])).collect();
    cfg.routes4 = (0..256u32)
        .map(|i| Route4 { prefix: [10, (i >> 4) as u8, (i & 15) as u8, 0], len: 24, next_hop: i % 2 })
        .collect();
    cfg.routes4.push(Route4 { prefix: [10, 1, 0, 0], len: 16, next_hop: 1 });
    Box::new(L3fwd::new(Arc::new(L3fwdShared::try_new(&cfg).expect("l3fwd"))))
}

/// [`l3fwd_chain`] with next hops that are gateways (10.255.P.1 behind port P) resolved through
/// the neighbour table, where both are static entries at the MACs of [`l3fwd`]'s next hops.
#[allow(dead_code)] // only ircount's `l3r`
pub fn l3fwd_resolved_chain() -> Chain {
    use cadence_core::neigh::{NeighConfig, NeighShared, PortAddr, Router, StaticNeigh};
    let mut cfg = L3fwdConfig::default();
    cfg.next_hops = (0..PORTS as u8).map(|p| NextHop::gateway(p, [10, 255, p, 1])).collect();
    cfg.routes4 = (0..256u32)
        .map(|i| Route4 { prefix: [10, (i >> 4) as u8, (i & 15) as u8, 0], len: 24, next_hop: i % 2 })
        .collect();
    cfg.routes4.push(Route4 { prefix: [10, 1, 0, 0], len: 16, next_hop: 1 });
    let nf: Box<dyn Nf> = Box::new(L3fwd::new(Arc::new(L3fwdShared::try_new(&cfg).expect("l3fwd"))));
    let mut n = NeighConfig::default();
    n.addrs = (0..PORTS as u8).map(|p| PortAddr { port: p, addr: [10, 255, p, 2], len: 24 }).collect();
    n.statics = (0..PORTS as u8)
        .map(|p| StaticNeigh { port: p, ip: cadence_core::parse::IpAddr::V4([10, 255, p, 1]), mac: [2, 0, 0, 0, 2, p] })
        .collect();
    let shared = Arc::new(NeighShared::try_new(&n, EGRESS.own_mac).expect("neigh"));
    let mut c = Chain::new(vec![nf], EGRESS);
    c.set_router(Some(Router::new(shared)));
    c
}

/// The L3 forwarder as a worker stage.
#[allow(dead_code)] // chains.rs builds its own chains
pub fn l3fwd_chain() -> Chain {
    Chain::new(vec![l3fwd()], EGRESS)
}

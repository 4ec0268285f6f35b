//! A whole NF chain — the real busy-poll step (`Poller::poll_once`) over software NICs, as the
//! firmware runs it — fed arbitrary frame sequences on both ports, with the clock moved by
//! the input so that entries expire, sweeps report them and NAT/Accounting reclaim them.
//! The first byte picks the chain: ACL → LB → Accounting, ACL → UrlFilter → Encrypt,
//! ACL → NAT, L3fwd (with addresses and a neighbour table: static, gateway and directly
//! connected next hops, IPv4 and IPv6, ARP and IPv6 neighbour solicitations and
//! advertisements in the input, frames waiting for answers that may never come), or all of LB, Accounting, NAT, UrlFilter and Encrypt behind the ACL
//! (byte % 5); and how it runs (byte / 5 % 3): wrapped in NetBlaze's stage as the firmware runs
//! it without auxiliary cores (0), or with NetBlaze on and one auxiliary core (1, 2) whose
//! loop the input also drives — a tiny profile and a short epoch, so flows are placed,
//! handed over, followed and given back while the input goes on.
//!
//! Asserted after every step: no panic; every pool buffer is owned by exactly one of the RX
//! rings, the TX rings and the lane's hand-off to the auxiliary core (the worker and the NFs
//! keep none between polls but the neighbour table's waiting frames); no double free; NAT's port pool never hands out a port twice
//! or takes back one it did not give, and never has more ports out than its range. At the
//! end everything comes back.
#![no_main]

use std::sync::Arc;

use cadence_core::buf::{BUF_SIZE, Pool};
use cadence_core::checksum;
use cadence_core::control::ControlAuth;
use cadence_core::nf::accounting::{Accounting, AccountingConfig, AccountingShared};
use cadence_core::nf::acl::{Acl, AclAction, AclConfig, AclRule, AclShared};
use cadence_core::nf::encrypt::{Encrypt, EncryptConfig, EncryptShared};
use cadence_core::neigh::{NeighConfig, NeighShared, PortAddr, PortAddr6, Router};
use cadence_core::nf::l3fwd::{L3fwd, L3fwdConfig, L3fwdShared, NextHop, Route4, Route6};
use cadence_core::nf::lb::{Backend, Lb, LbConfig, LbShared, Vip};
use cadence_core::nf::nat::{Nat, NatConfig, NatShared};
use cadence_core::nf::urlfilter::{UrlFilter, UrlFilterConfig, UrlFilterShared};
use cadence_core::offload::{AuxWorker, LaneConfig, NetBlazeStage, SharedLanes, build, share};
use cadence_core::netblaze::{CoreMapper, NetBlazeConfig, Profile};
use cadence_core::nf::{Chain, Egress, Nf};
use cadence_core::nic::TxQueue;
use cadence_core::parse::IpAddr;
use cadence_core::poll::{PollConfig, Poller};
use cadence_core::softnic::{SoftRxQueue, SoftTxQueue};
use cadence_core::stage::PORTS;
use cadence_core::time::{Clock, Duration, Instant, TickRate};
use cadence_drivers::fuzzing::Input;

const BUFS: usize = 128;
const TIMEOUT: Duration = Duration(50);
const NAT_PORTS: (u16, u16) = (40_000, 40_015);

/// Control frames accepted on port 0 (signed with a fixed key: the input may carry
/// anything there, and a forged one must be dropped, never obeyed).
fn egress() -> Egress {
    Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1]], Some(ControlAuth::new(0, [0x5a; 16], 0x5a5a)))
}

struct StepClock(std::cell::Cell<u64>);

impl Clock for StepClock {
    fn now(&self) -> Instant {
        Instant(self.0.get())
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(1000).expect("nonzero")
    }
}

fn acl() -> Arc<AclShared> {
    let mut deny = AclRule::any(10, AclAction::Deny);
    deny.dport = (23, 23);
    let mut cfg = AclConfig::new(vec![deny], AclAction::Permit);
    cfg.flow_capacity = 64;
    cfg.flow_timeout = TIMEOUT;
    Arc::new(AclShared::try_new(&cfg).expect("acl"))
}

fn lb() -> Arc<LbShared> {
    let mut cfg = LbConfig::default();
    cfg.max_backends = 4;
    cfg.affinity_capacity = 64;
    cfg.affinity_timeout = TIMEOUT;
    let backends = (1..4u8).map(|i| Backend { addr: IpAddr::V4([10, 4, 0, i]), port: None }).collect();
    cfg.vips.push(Vip { addr: IpAddr::V4([10, 1, 0, 1]), port: 80, proto: 6, backends });
    let backends = vec![Backend { addr: IpAddr::V4([10, 4, 1, 1]), port: Some(5353) }];
    cfg.vips.push(Vip { addr: IpAddr::V4([10, 1, 0, 2]), port: 53, proto: 17, backends });
    Arc::new(LbShared::try_new(&cfg).expect("lb"))
}

fn accounting() -> Arc<AccountingShared> {
    let mut cfg = AccountingConfig::default();
    cfg.capacity = 64;
    cfg.idle_timeout = TIMEOUT;
    cfg.export_ring = 8;
    cfg.event_ring = 8;
    Arc::new(AccountingShared::try_new(&cfg).expect("accounting"))
}

fn nat() -> Arc<NatShared> {
    let mut cfg = NatConfig::default();
    cfg.ports = NAT_PORTS;
    cfg.timeout = TIMEOUT;
    Arc::new(NatShared::try_new(&cfg).expect("nat"))
}

fn urlfilter() -> Arc<UrlFilterShared> {
    let mut cfg = UrlFilterConfig::default();
    cfg.banned = vec!["bad.example/x".to_string(), "evil.org".to_string()];
    cfg.window = 128;
    cfg.slabs = 4;
    cfg.flows = 32;
    cfg.inspect_timeout = TIMEOUT;
    cfg.flow_timeout = TIMEOUT;
    cfg.reset = true;
    Arc::new(UrlFilterShared::try_new(&cfg).expect("urlfilter"))
}

fn encrypt() -> Arc<EncryptShared> {
    let mut cfg = EncryptConfig::default();
    cfg.key = [9; 32];
    cfg.udp_flows = 32;
    cfg.udp_idle_timeout = TIMEOUT;
    Arc::new(EncryptShared::try_new(&cfg).expect("encrypt"))
}

fn l3fwd() -> Arc<L3fwdShared> {
    let mut cfg = L3fwdConfig::default();
    cfg.next_hops = (0..PORTS as u8).map(|p| NextHop::mac(p, [2, 0, 0, 0, 2, p])).collect();
    cfg.next_hops.push(NextHop::gateway(1, [10, 2, 0, 3]));
    cfg.next_hops.push(NextHop::direct(1));
    cfg.next_hops.push(NextHop::gateway6(1, v6(0x79, 0xfe)));
    cfg.routes6 = vec![
        Route6 { prefix: v6(0x79, 0), len: 64, next_hop: 3 },
        Route6 { prefix: v6(0x7a, 0), len: 64, next_hop: 4 },
    ];
    cfg.routes4 = vec![
        Route4 { prefix: [10, 0, 0, 0], len: 8, next_hop: 1 },
        Route4 { prefix: [10, 1, 0, 0], len: 16, next_hop: 0 },
        Route4 { prefix: [10, 1, 0, 2], len: 32, next_hop: 1 },
        Route4 { prefix: [10, 2, 0, 0], len: 24, next_hop: 3 },
        Route4 { prefix: [192, 0, 2, 0], len: 24, next_hop: 2 },
    ];
    cfg.max_groups4 = 8;
    cfg.max_groups6 = 16;
    Arc::new(L3fwdShared::try_new(&cfg).expect("l3fwd"))
}

/// `fd<net>::<host>`.
fn v6(net: u8, host: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..2].copy_from_slice(&[0xfd, net]);
    a[15] = host;
    a
}

/// The L3 chain's addresses (10.0.0.254 on port 0, 10.2.0.1 and fd79::1 on port 1) and a
/// small table.
fn neigh() -> Arc<NeighShared> {
    let mut cfg = NeighConfig::default();
    cfg.addrs = vec![
        PortAddr { port: 0, addr: [10, 0, 0, 254], len: 24 },
        PortAddr { port: 1, addr: [10, 2, 0, 1], len: 24 },
    ];
    cfg.addrs6 = vec![PortAddr6 { port: 1, addr: v6(0x79, 1), len: 64 }];
    cfg.capacity = 6;
    cfg.max_waiting = 5;
    cfg.probes = 2;
    cfg.retrans = Duration(20);
    cfg.reachable = Duration(100);
    cfg.stale = Duration(200);
    Arc::new(NeighShared::try_new(&cfg, egress().own_mac).expect("neigh"))
}

/// An ARP request or reply over Ethernet for IPv4 whose addresses come from the input: to
/// or from the chain's addresses, the neighbours it asks for, or others.
fn arp(inp: &mut Input<'_>) -> Vec<u8> {
    let addr = |inp: &mut Input<'_>| match inp.u8() % 4 {
        0 => [10, 0, 0, 254],
        1 => [10, 2, 0, 1],
        2 => [10, 2, 0, inp.u8() % 8],
        _ => [10, 0, 0, inp.u8() % 8],
    };
    let (spa, tpa) = (addr(inp), addr(inp));
    let mut f = vec![0u8; 42];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 3, inp.u8()]);
    f[12..22].copy_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1 + (inp.u8() & 1)]);
    f[22..28].copy_from_slice(&[2, 0, 0, 0, 3, inp.u8()]);
    f[28..32].copy_from_slice(&spa);
    f[38..42].copy_from_slice(&tpa);
    f
}

/// An IPv6 frame for the L3 chain's neighbour discovery, its fields from the input: UDP to
/// `fd79::x` (directly connected) or `fd7a::x` (through the gateway `fd79::fe`), a
/// neighbour solicitation for `fd79::1` or an advertisement for `fd79::x` (to us or to all
/// nodes, flags, target link-layer option or not), hop limit 255 or not, checksum right or
/// not.
fn nd6(inp: &mut Input<'_>) -> Vec<u8> {
    let host = inp.u8() % 8;
    let (src, mut dst, msg): ([u8; 16], [u8; 16], Vec<u8>) = match inp.u8() % 3 {
        0 => {
            let dst = if inp.u8() & 1 == 0 { v6(0x79, host) } else { v6(0x7a, host) };
            (v6(0x78, 2), dst, vec![0x9c, 0x40, 0, 53, 0, 9, 0, 0, inp.u8()])
        }
        1 => {
            let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
            m.extend_from_slice(&v6(0x79, 1));
            if inp.u8() & 1 == 0 {
                m.extend_from_slice(&[1, 1, 2, 0, 0, 0, 4, host]);
            }
            let group = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1];
            (v6(0x79, host), group, m)
        }
        _ => {
            let mut m = vec![136, 0, 0, 0, inp.u8() & 0xe0, 0, 0, 0];
            m.extend_from_slice(&v6(0x79, host));
            match inp.u8() % 3 {
                0 => m.extend_from_slice(&[2, 1, 2, 0, 0, 0, 4, host]),
                1 => m.extend_from_slice(&[2, inp.u8() % 3, 2, 0, 0, 0, 4, host]),
                _ => {}
            }
            let all = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
            (v6(0x79, host), if inp.u8() & 1 == 0 { v6(0x79, 1) } else { all }, m)
        }
    };
    if inp.u8() == 0 {
        dst = v6(0x79, 1);
    }
    let next = if msg.first() == Some(&0x9c) { 17 } else { 58 };
    let mut f = vec![0u8; 54 + msg.len()];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x11]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 4, host]);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&(msg.len() as u16).to_be_bytes());
    f[20] = next;
    f[21] = if inp.u8() % 8 == 0 { inp.u8() } else { 255 };
    f[22..38].copy_from_slice(&src);
    f[38..54].copy_from_slice(&dst);
    f[54..].copy_from_slice(&msg);
    let at = if next == 17 { 54 + 6 } else { 54 + 2 };
    let sum = checksum::l4_checksum_v6(&src, &dst, next, &f[54..]) ^ u16::from(inp.u8() % 16 == 0);
    f[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    f
}

/// An IPv4 TCP or UDP frame whose addresses, ports, flags and payload come from the input
/// (checksums valid), so that the NFs see well-formed flows as well as raw bytes.
fn shaped(inp: &mut Input<'_>) -> Vec<u8> {
    let kind = inp.u8();
    if kind % 4 == 3 {
        return if kind & 4 == 0 { arp(inp) } else { nd6(inp) };
    }
    let tcp = kind & 1 == 0;
    let src = [10, 0, 0, inp.u8() % 8];
    let dst = match inp.u8() % 4 {
        0 => [10, 1, 0, 1],
        1 => [10, 1, 0, 2],
        2 => [192, 0, 2, 1],
        _ => [10, 2, 0, inp.u8() % 4],
    };
    let (sport, dport) = (40_000 + u16::from(inp.u8() % 20), [80u16, 53, 23, 443][inp.below(4)]);
    let payload = match inp.u8() % 3 {
        0 => b"GET /x HTTP/1.1\r\nHost: bad.example\r\n\r\n".to_vec(),
        1 => b"GET / HTTP/1.1\r\nHost: good.example\r\n\r\n".to_vec(),
        _ => {
            let n = inp.below(64);
            inp.bytes(n).to_vec()
        }
    };
    let l4 = if tcp { 20 } else { 8 };
    let mut f = vec![0u8; 34 + l4 + payload.len()];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (20 + l4 + payload.len()) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = if tcp { 6 } else { 17 };
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    let sum = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    if tcp {
        f[38..42].copy_from_slice(&inp.u32().to_be_bytes());
        f[46] = 5 << 4;
        f[47] = inp.u8() & 0x3f;
    } else {
        f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    }
    f[34 + l4..].copy_from_slice(&payload);
    let sum = checksum::l4_checksum_v4(src, dst, f[23], &f[34..]);
    let at = if tcp { 50 } else { 40 };
    f[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    f
}

/// A profile whose one core finishes 8 packets of 1 flow per epoch: almost any burst is
/// outside it, so the decisions place flows on the auxiliary core.
const PROFILE: &str = "version=1\ntsc_hz=1000\nepoch_ns=20000000\nfrontier=1:8,4:4\n\
                       service=packet_cycles:100,flow_cycles:100\nrate=1:400\n";

/// The chain `sel` picks; a second call gives another worker's instances over the same
/// shared tables (what the auxiliary core runs).
struct Nfs {
    sel: u8,
    acl: Arc<AclShared>,
    lb: Arc<LbShared>,
    accounting: Arc<AccountingShared>,
    nat: Arc<NatShared>,
    urlfilter: Arc<UrlFilterShared>,
    encrypt: Arc<EncryptShared>,
    l3fwd: Arc<L3fwdShared>,
    neigh: Arc<NeighShared>,
}

impl Nfs {
    fn chain(&self) -> Chain {
        let acl = || -> Box<dyn Nf> { Box::new(Acl::new(Arc::clone(&self.acl))) };
        let lb = || -> Box<dyn Nf> { Box::new(Lb::new(Arc::clone(&self.lb))) };
        let acc = || -> Box<dyn Nf> { Box::new(Accounting::new(Arc::clone(&self.accounting))) };
        let nat = || -> Box<dyn Nf> { Box::new(Nat::new(Arc::clone(&self.nat))) };
        let uf = || -> Box<dyn Nf> { Box::new(UrlFilter::new(Arc::clone(&self.urlfilter))) };
        let enc = || -> Box<dyn Nf> { Box::new(Encrypt::new(Arc::clone(&self.encrypt))) };
        let nfs: Vec<Box<dyn Nf>> = match self.sel % 5 {
            0 => vec![acl(), lb(), acc()],
            1 => vec![acl(), uf(), enc()],
            2 => vec![acl(), nat()],
            3 => vec![Box::new(L3fwd::new(Arc::clone(&self.l3fwd)))],
            _ => vec![acl(), lb(), acc(), nat(), uf(), enc()],
        };
        let mut c = Chain::new(nfs, egress());
        if self.sel % 5 == 3 {
            c.set_router(Some(Router::new(Arc::clone(&self.neigh))));
        }
        c
    }
    fn exports(&self) -> bool {
        matches!(self.sel % 5, 0 | 4)
    }
    fn nat(&self) -> bool {
        matches!(self.sel % 5, 2 | 4)
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let nfs = Nfs {
        sel,
        acl: acl(),
        lb: lb(),
        accounting: accounting(),
        nat: nat(),
        urlfilter: urlfilter(),
        encrypt: encrypt(),
        l3fwd: l3fwd(),
        neigh: neigh(),
    };
    let exports = nfs.exports().then(|| Arc::clone(&nfs.accounting));
    let nat_shared = nfs.nat().then(|| Arc::clone(&nfs.nat));
    let mut mem = vec![0u8; BUFS * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0x1000_0000, BUFS).expect("pool");
    let mut rx = [SoftRxQueue::new(&mut pool, 16), SoftRxQueue::new(&mut pool, 16)];
    let mut tx = [SoftTxQueue::new(16, false), SoftTxQueue::new(16, false)];
    // NetBlaze on: one lane, one auxiliary core over a view of the lane's pool, both driven
    // by the input on this one thread.
    let mut aux: Option<(AuxWorker<'_>, SharedLanes)> = None;
    let stage = if sel / 5 % 3 == 0 {
        let mut st = NetBlazeStage::off(nfs.chain());
        cadence_core::stage::Stage::enter_lane(&mut st, 0);
        st
    } else {
        let profile = Profile::parse(PROFILE).expect("profile");
        let mut nb = NetBlazeConfig::default();
        nb.epoch_ns = Some(profile.epoch_ns);
        nb.slo_ns = 4 * profile.epoch_ns;
        let params = nb.validate().expect("netblaze parameters");
        let lcfg = LaneConfig { epoch: Duration(20), link_capacity: 32, tracked_flows: 8, follow_flows: 8 };
        let (states, mut ends) = build(1, 1, lcfg).expect("links");
        let lanes: SharedLanes = share(states);
        // SAFETY: `pool` outlives the view (both live to the end of this function, the view
        // inside `aux`, dropped first), and the stage and the auxiliary loop keep the
        // hand-off discipline (a buffer is touched only by the side holding it, passed
        // through the link's Release/Acquire); here they even run on one thread.
        let view = unsafe { pool.view() };
        aux = Some((AuxWorker::new(ends.remove(0), vec![view], nfs.chain()), Arc::clone(&lanes)));
        let mut st = NetBlazeStage::new(nfs.chain(), lanes, CoreMapper::new(params), Arc::new(profile));
        cadence_core::stage::Stage::enter_lane(&mut st, 0);
        st
    };
    let mut poller = Poller::new(stage, PollConfig::default());
    let clock = StepClock(std::cell::Cell::new(1));
    let (first, last) = NAT_PORTS;
    let owned = |rx: &[SoftRxQueue; 2], tx: &[SoftTxQueue; 2], aux: &Option<(AuxWorker<'_>, SharedLanes)>| {
        let handed = aux.as_ref().map_or(0, |(_, lanes)| lanes[0].lock().held());
        rx[0].owned() + rx[1].owned() + tx[0].in_flight() + tx[1].in_flight() + handed + nfs.neigh.waiting()
    };
    while !inp.is_empty() {
        match inp.u8() % 4 {
            0 => {
                let port = inp.below(2);
                let len = inp.below(1600);
                let _ = rx[port].inject(&mut pool, inp.bytes(len));
            }
            1 => {
                let port = inp.below(2);
                let f = shaped(&mut inp);
                let _ = rx[port].inject(&mut pool, &f);
            }
            2 => {
                clock.0.set(clock.0.get() + u64::from(inp.u8()));
                poller.poll_once(&mut pool, &mut rx, &mut tx, &clock);
                // The auxiliary core runs at its own pace: after some polls, not others.
                if let Some((a, _)) = &mut aux
                    && inp.u8() & 1 == 0
                {
                    a.poll_once(clock.now());
                }
            }
            _ => {
                let max = inp.below(20);
                tx[inp.below(2)].transmit(&pool, max, |f| assert!(!f.is_empty()));
                if let Some(s) = &exports {
                    s.drain_exports(|r| assert!(r.packets >= 1, "an exported flow with no packet"));
                }
            }
        }
        assert_eq!(pool.in_use(), owned(&rx, &tx, &aux), "a buffer was lost or duplicated");
        assert_eq!(pool.double_frees(), 0);
        if let Some(s) = &nat_shared {
            assert_eq!(s.pool_anomalies(), 0, "a NAT port handed out or returned twice");
            assert!(s.ports_in_use() <= usize::from(last - first) + 1);
        }
    }
    // Wind down: everything back from the auxiliary core, sent, then every buffer given back.
    for _ in 0..3 {
        for _ in 0..64 {
            // Time goes on: frames waiting for answers that never come fail and are dropped.
            clock.0.set(clock.0.get() + 50);
            if let Some((a, _)) = &mut aux {
                a.poll_once(clock.now());
            }
            poller.poll_once(&mut pool, &mut rx, &mut tx, &clock);
            for q in tx.iter_mut() {
                q.transmit(&pool, usize::MAX, |_| {});
            }
        }
        for q in tx.iter_mut() {
            q.transmit(&pool, usize::MAX, |_| {});
            q.reclaim(&mut pool);
        }
    }
    if let Some((_, lanes)) = &aux {
        assert!(lanes[0].lock().all_reclaimed(), "the auxiliary core gave everything back");
    }
    drop(aux);
    for q in rx.iter_mut() {
        q.release(&mut pool);
    }
    assert_eq!(pool.in_use(), 0, "buffers leaked");
    assert_eq!(pool.double_frees(), 0);
});

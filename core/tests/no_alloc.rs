//! The per-packet path never allocates (after start-up, memory is fixed): a counting global
//! allocator watches the real busy-poll step ([`Poller::poll_once`]) run each shipped kind of
//! chain over software NICs, wrapped in the stage the firmware runs ([`NetBlazeStage`]: off,
//! and for chain 1 also on, with an auxiliary core taking flows from the lane under a
//! new-flow flood and giving them back), and every allocation or deallocation on the test's
//! thread while 100 000 packets go through is a failure, with the backtrace of the first one.
//!
//! The traffic makes the chains do all their per-packet work, not only the hit path: a
//! window of active flows slides over 6 000 flows, so flows keep arriving (add-on-miss:
//! ACL classification, LB backend choice, Accounting records, NAT mappings and ports,
//! URL-filter slab claims and verdicts, Encrypt counters) and going idle; the clock moves
//! 1 000 ticks per poll against timeouts of 40 000, so entries expire, sweeps report them,
//! NAT and Accounting take them back (ports return to the pool, records go to the export
//! ring, which the "control plane" here drains between polls), and URL-filter slabs are
//! reused. HTTP requests (some to banned URLs, which get a TCP reset) go through the URL
//! filter; replies to NAT mappings come back on the outside port. The L3 forwarder with
//! IPv6 next hops in the neighbour table runs over IPv6 flows of its own: every destination
//! is solicited, half of them answer with an advertisement (the wire builds it), the rest
//! fail. Warm-up first (tables,
//! rings and queues are allocated when built; the first packets find them cold), then the
//! counted run.
//!
//! `cargo test -p cadence-core --release --test no_alloc` (also part of `cargo xtask test`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use cadence_core::buf::{BATCH_SIZE, BUF_SIZE, Pool};
use cadence_core::checksum;
use cadence_core::netblaze::{CoreMapper, NetBlazeConfig, Profile};
use cadence_core::nf::accounting::{Accounting, AccountingConfig, AccountingShared};
use cadence_core::nf::acl::{Acl, AclAction, AclConfig, AclRule, AclShared, example_rules};
use cadence_core::nf::encrypt::{Encrypt, EncryptConfig, EncryptShared};
use cadence_core::nf::l3fwd::{L3fwd, L3fwdConfig, L3fwdShared, NextHop, Route4, Route6};
use cadence_core::nf::lb::{Backend, Lb, LbConfig, LbShared, Vip};
use cadence_core::nf::nat::{Nat, NatConfig, NatShared};
use cadence_core::nf::urlfilter::{UrlFilter, UrlFilterConfig, UrlFilterShared};
use cadence_core::nf::{Chain, Egress, Nf};
use cadence_core::offload::{AuxWorker, LaneConfig, NetBlazeStage, SharedLanes, build, share};
use cadence_core::parse::IpAddr;
use cadence_core::poll::{PollConfig, Poller};
use cadence_core::softnic::{SoftRxQueue, SoftTxQueue};
use cadence_core::stage::{PORTS, Stage};
use cadence_core::time::{Clock, Duration, Instant, TickRate};

// ---- the counting allocator ----------------------------------------------------------

/// Counts allocations, reallocations and deallocations made by a thread while it is armed.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static DEALLOCS: AtomicU64 = AtomicU64::new(0);
/// The backtrace of the first counted call (captured with counting off).
static FIRST: Mutex<Option<String>> = Mutex::new(None);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn armed() -> bool {
    ARMED.try_with(Cell::get).unwrap_or(false)
}

fn set_armed(on: bool) {
    let _ = ARMED.try_with(|a| a.set(on));
}

/// Counts one call; the first one also records where it came from.
fn count(counter: &AtomicU64, what: &str) {
    if !armed() {
        return;
    }
    if counter.fetch_add(1, Ordering::Relaxed) == 0 {
        set_armed(false);
        let bt = std::backtrace::Backtrace::force_capture();
        if let Ok(mut first) = FIRST.try_lock() {
            first.get_or_insert_with(|| format!("first {what} during the counted run:\n{bt}"));
        }
        set_armed(true);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counting around it
// neither allocates (the backtrace is taken with counting off) nor unwinds.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(&ALLOCS, "allocation");
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(&ALLOCS, "allocation");
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(&ALLOCS, "reallocation");
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(&DEALLOCS, "deallocation");
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Only one counted run at a time (the counters are global; the flag is per thread).
static SERIAL: Mutex<()> = Mutex::new(());

// ---- traffic -------------------------------------------------------------------------

const VIP: [u8; 4] = [10, 1, 0, 1];
const NAT_EXT: [u8; 4] = [192, 0, 2, 1];
/// Distinct flows the traffic cycles through.
const FLOWS: usize = 6000;
/// Flows active at once (the window slides by 4 flows per batch).
const WINDOW: usize = 512;
/// Idle timeouts of every table, in ticks (the clock moves 1 000 per poll).
const TIMEOUT: u64 = 40_000;
const WARMUP: usize = 20_000;
const COUNTED: usize = 100_000;
const BANNED: &str = "banned.example/secret";

fn ipv4_header(ip: &mut [u8], proto: u8, len: usize, src: [u8; 4], dst: [u8; 4]) {
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    ip[10..12].copy_from_slice(&[0, 0]);
    let sum = checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// An IPv4 TCP (PSH|ACK, `payload`) or UDP frame from `src:sport` to `dst:dport`, checksums valid.
fn frame4(tcp: bool, src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, payload: &[u8]) -> Vec<u8> {
    let l4 = if tcp { 20 } else { 8 };
    let mut f = vec![0u8; 14 + 20 + l4 + payload.len()];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 0]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = 20 + l4 + payload.len();
    ipv4_header(&mut f[14..34], if tcp { 6 } else { 17 }, ip_len, src, dst);
    let seg = &mut f[34..];
    seg[0..2].copy_from_slice(&sport.to_be_bytes());
    seg[2..4].copy_from_slice(&dport.to_be_bytes());
    if tcp {
        seg[4..8].copy_from_slice(&1000u32.to_be_bytes());
        seg[12] = 5 << 4;
        seg[13] = 0x18;
        seg[14..16].copy_from_slice(&8192u16.to_be_bytes());
    } else {
        seg[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    }
    seg[l4..].copy_from_slice(payload);
    let sum = checksum::l4_checksum_v4(src, dst, if tcp { 6 } else { 17 }, seg);
    let at = if tcp { 16 } else { 6 };
    seg[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    f
}

/// One frame per flow, built before anything is counted: TCP to port 80 carrying an HTTP
/// request (one flow in 16 to the banned URL), TCP to the LB's VIP, UDP.
fn frames() -> Vec<Vec<u8>> {
    (0..FLOWS)
        .map(|i| {
            let src = [10, 2, (i >> 8) as u8, i as u8];
            let sport = 1024 + (i % 50_000) as u16;
            let server = [10, 3, (i % 7) as u8, 9];
            match i % 4 {
                0 | 1 => {
                    let url = if i % 16 == 0 { BANNED.to_string() } else { format!("ok{}.example/page{i}", i % 5) };
                    let (host, path) = url.split_once('/').unwrap_or((&url, ""));
                    let req = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: t\r\n\r\n");
                    frame4(true, src, sport, server, 80, req.as_bytes())
                }
                2 => frame4(true, src, sport, VIP, 80, b"0123456789"),
                _ => frame4(false, src, sport, server, 53, b"query-bytes"),
            }
        })
        .collect()
}

/// The IPv6 address `fd00:NET::HOST`.
fn v6(net: u8, host: u16) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0xfd, 0, 0, net]);
    a[14..].copy_from_slice(&host.to_be_bytes());
    a
}

/// One IPv6 UDP frame per flow, from `fd00:2::…` on port 0's side: to 64 hosts of
/// `fd00:3::/64` (directly connected on port 1) and to `fd00:4::/64` (through the gateway
/// `fd00:3::fe`).
fn frames6() -> Vec<Vec<u8>> {
    (0..FLOWS)
        .map(|i| {
            let dst = if i % 8 == 0 { v6(4, i as u16) } else { v6(3, (i % 64) as u16 + 2) };
            let src = v6(2, i as u16);
            let payload = b"query-bytes";
            let mut f = vec![0u8; 14 + 40 + 8 + payload.len()];
            f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 0]);
            f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            f[14] = 0x60;
            f[18..20].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            f[20] = 17;
            f[21] = 64;
            f[22..38].copy_from_slice(&src);
            f[38..54].copy_from_slice(&dst);
            f[54..56].copy_from_slice(&(1024 + i as u16).to_be_bytes());
            f[56..58].copy_from_slice(&53u16.to_be_bytes());
            f[58..60].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            f[62..].copy_from_slice(payload);
            let sum = checksum::l4_checksum_v6(&src, &dst, 17, &f[54..]);
            f[60..62].copy_from_slice(&sum.to_be_bytes());
            f
        })
        .collect()
}

/// The advertisement a neighbour on port 1's link sends for a solicitation `sent` Cadence
/// sent there, in `out` (no allocation): the hosts whose address ends in an even byte
/// answer, the others do not (their entries fail).
fn nd_reply(sent: &[u8], out: &mut [u8; 128]) -> Option<usize> {
    if sent.len() < 86
        || sent[12..14] != [0x86, 0xdd]
        || sent[20] != 58
        || sent[54] != 135
        || !sent[77].is_multiple_of(2)
    {
        return None;
    }
    let target: [u8; 16] = sent[62..78].try_into().ok()?;
    let to: [u8; 16] = sent[22..38].try_into().ok()?;
    let mac = [2, 0, 0, 0, 3, sent[77]];
    let out = &mut out[..86];
    out.fill(0);
    out[0..6].copy_from_slice(&sent[6..12]);
    out[6..12].copy_from_slice(&mac);
    out[12..14].copy_from_slice(&[0x86, 0xdd]);
    out[14] = 0x60;
    out[18..22].copy_from_slice(&[0, 32, 58, 255]);
    out[22..38].copy_from_slice(&target);
    out[38..54].copy_from_slice(&to);
    out[54] = 136;
    out[58] = 0x60; // Solicited, Override
    out[62..78].copy_from_slice(&target);
    out[78..80].copy_from_slice(&[2, 1]);
    out[80..86].copy_from_slice(&mac);
    let sum = checksum::l4_checksum_v6(&target, &to, 58, &out[54..]);
    out[56..58].copy_from_slice(&sum.to_be_bytes());
    Some(86)
}

/// The flow of packet `j` of batch `k`.
fn flow_of(k: usize, j: usize) -> usize {
    let start = k * 4;
    (start + (k * 7 + j * 13) % WINDOW) % FLOWS
}

/// A reply from a NAT'd frame's destination to its translated source, in `out` (same
/// length as the frame; no allocation).
fn nat_reply(sent: &[u8], out: &mut [u8; 128]) -> Option<usize> {
    let n = sent.len();
    if n < 42 || n > out.len() || sent[12..14] != [0x08, 0x00] || sent[23] != 17 {
        return None;
    }
    let out = &mut out[..n];
    out.copy_from_slice(sent);
    out[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x11]);
    out[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
    let (src, dst): ([u8; 4], [u8; 4]) = (sent[30..34].try_into().ok()?, sent[26..30].try_into().ok()?);
    let ip_len = n - 14;
    ipv4_header(&mut out[14..34], 17, ip_len, src, dst);
    out[34..36].copy_from_slice(&sent[36..38]);
    out[36..38].copy_from_slice(&sent[34..36]);
    out[40..42].copy_from_slice(&[0, 0]);
    let sum = checksum::l4_checksum_v4(src, dst, 17, &out[34..]);
    out[40..42].copy_from_slice(&sum.to_be_bytes());
    Some(n)
}

/// A clock the test moves by hand.
struct StepClock(Cell<u64>);

impl Clock for StepClock {
    fn now(&self) -> Instant {
        Instant(self.0.get())
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(1_000_000_000).expect("nonzero")
    }
}

const EGRESS: Egress =
    Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1]], None);

// ---- the chains ----------------------------------------------------------------------

fn acl() -> Box<dyn Nf> {
    let mut rules = example_rules(7, 300);
    let mut permit = AclRule::any(u32::MAX, AclAction::Permit);
    permit.src = None;
    rules.push(permit);
    let mut cfg = AclConfig::new(rules, AclAction::Permit);
    cfg.flow_capacity = 2048;
    cfg.flow_timeout = Duration(TIMEOUT);
    Box::new(Acl::new(Arc::new(AclShared::try_new(&cfg).expect("acl"))))
}

fn lb() -> Box<dyn Nf> {
    let backends = (0..16u8).map(|i| Backend { addr: IpAddr::V4([10, 4, 0, i]), port: None }).collect();
    let mut cfg = LbConfig::default();
    cfg.affinity_capacity = 2048;
    cfg.affinity_timeout = Duration(TIMEOUT);
    cfg.vips.push(Vip { addr: IpAddr::V4(VIP), port: 80, proto: 6, backends });
    Box::new(Lb::new(Arc::new(LbShared::try_new(&cfg).expect("lb"))))
}

fn accounting() -> (Box<dyn Nf>, Arc<AccountingShared>) {
    let mut cfg = AccountingConfig::default();
    cfg.capacity = 2048;
    cfg.idle_timeout = Duration(TIMEOUT);
    cfg.export_ring = 256;
    cfg.event_ring = 256;
    let shared = Arc::new(AccountingShared::try_new(&cfg).expect("accounting"));
    (Box::new(Accounting::new(Arc::clone(&shared))), shared)
}

fn urlfilter() -> Box<dyn Nf> {
    let mut cfg = UrlFilterConfig::default();
    cfg.banned = vec![BANNED.to_string()];
    cfg.slabs = 256;
    cfg.flows = 2048;
    cfg.inspect_timeout = Duration(TIMEOUT);
    cfg.flow_timeout = Duration(TIMEOUT);
    cfg.reset = true;
    Box::new(UrlFilter::new(Arc::new(UrlFilterShared::try_new(&cfg).expect("urlfilter"))))
}

fn encrypt() -> Box<dyn Nf> {
    let mut cfg = EncryptConfig::default();
    cfg.key = [7; 32];
    cfg.udp_flows = 2048;
    cfg.udp_idle_timeout = Duration(TIMEOUT);
    Box::new(Encrypt::new(Arc::new(EncryptShared::try_new(&cfg).expect("encrypt"))))
}

fn nat() -> Box<dyn Nf> {
    let mut cfg = NatConfig::default();
    cfg.external_addr = NAT_EXT;
    cfg.ports = (20_000, 21_023);
    cfg.timeout = Duration(TIMEOUT);
    Box::new(Nat::new(Arc::new(NatShared::try_new(&cfg).expect("nat"))))
}

fn l3fwd() -> Box<dyn Nf> {
    let mut cfg = L3fwdConfig::default();
    cfg.next_hops = (0..PORTS as u8).map(|p| NextHop::mac(p, [2, 0, 0, 0, 2, p])).collect();
    cfg.routes4 = (0..64u32)
        .map(|i| Route4 { prefix: [10, (i >> 4) as u8, (i & 15) as u8, 0], len: 24, next_hop: i % 2 })
        .collect();
    cfg.routes4.push(Route4 { prefix: [10, 0, 0, 0], len: 8, next_hop: 1 });
    Box::new(L3fwd::new(Arc::new(L3fwdShared::try_new(&cfg).expect("l3fwd"))))
}

/// The L3 forwarder with its next hops in the neighbour table: the /24s through two
/// gateways (static entries: the worker's cache), the rest of 10/8 directly connected, where
/// nobody answers: every such destination is asked for (ARP requests from the pool), its
/// frames wait, fail and are dropped, and the table fills up.
fn l3fwd_resolved() -> Chain {
    use cadence_core::neigh::{NeighConfig, NeighShared, PortAddr, Router, StaticNeigh};
    let mut cfg = L3fwdConfig::default();
    cfg.next_hops = (0..2u8).map(|p| NextHop::gateway(p, [192, 0, 2 + p, 1])).collect();
    cfg.next_hops.push(NextHop::direct(1));
    cfg.routes4 = (0..64u32)
        .map(|i| Route4 { prefix: [10, (i >> 4) as u8, (i & 15) as u8, 0], len: 24, next_hop: i % 2 })
        .collect();
    cfg.routes4.push(Route4 { prefix: [10, 0, 0, 0], len: 8, next_hop: 2 });
    let nf: Box<dyn Nf> = Box::new(L3fwd::new(Arc::new(L3fwdShared::try_new(&cfg).expect("l3fwd"))));
    let mut n = NeighConfig::default();
    n.addrs = (0..2u8).map(|p| PortAddr { port: p, addr: [192, 0, 2 + p, 2], len: 24 }).collect();
    n.addrs.push(PortAddr { port: 1, addr: [10, 255, 255, 254], len: 8 });
    n.statics = (0..2u8)
        .map(|p| StaticNeigh {
            port: p,
            ip: cadence_core::parse::IpAddr::V4([192, 0, 2 + p, 1]),
            mac: [2, 0, 0, 0, 2, p],
        })
        .collect();
    n.capacity = 64;
    n.retrans = Duration(TIMEOUT / 64);
    n.stale = Duration(TIMEOUT);
    let mut c = Chain::new(vec![nf], EGRESS);
    c.set_router(Some(Router::new(Arc::new(NeighShared::try_new(&n, EGRESS.own_mac).expect("neigh")))));
    c
}

/// [`l3fwd_resolved`] for IPv6 (over [`frames6`]): `fd00:3::/64` directly connected on port
/// 1, `fd00:4::/64` through the gateway `fd00:3::fe`; each destination is solicited (from
/// the pool), half of them answer (the wire's [`nd_reply`]) and their frames go, the rest
/// wait, fail and are dropped.
fn l3fwd_resolved6() -> Chain {
    use cadence_core::neigh::{NeighConfig, NeighShared, PortAddr6, Router};
    let mut cfg = L3fwdConfig::default();
    cfg.next_hops = vec![NextHop::direct(1), NextHop::gateway6(1, v6(3, 0xfe))];
    cfg.routes6 =
        vec![Route6 { prefix: v6(3, 0), len: 64, next_hop: 0 }, Route6 { prefix: v6(4, 0), len: 64, next_hop: 1 }];
    let nf: Box<dyn Nf> = Box::new(L3fwd::new(Arc::new(L3fwdShared::try_new(&cfg).expect("l3fwd"))));
    let mut n = NeighConfig::default();
    n.addrs6 = vec![PortAddr6 { port: 0, addr: v6(2, 1), len: 64 }, PortAddr6 { port: 1, addr: v6(3, 1), len: 64 }];
    n.capacity = 64;
    n.retrans = Duration(TIMEOUT / 64);
    n.reachable = Duration(TIMEOUT / 4);
    n.stale = Duration(TIMEOUT);
    let mut c = Chain::new(vec![nf], EGRESS);
    c.set_router(Some(Router::new(Arc::new(NeighShared::try_new(&n, EGRESS.own_mac).expect("neigh")))));
    c
}

// ---- the run -------------------------------------------------------------------------

/// What a counted run saw.
struct Outcome {
    allocs: u64,
    deallocs: u64,
    first: Option<String>,
    counters: String,
    forwarded: u64,
    exported: usize,
    /// NetBlaze's counters (`nb_*`).
    netblaze: String,
}

/// Runs `chain` over two software NICs, wrapped as the firmware wraps it when no auxiliary
/// core exists: `WARMUP` packets, then `COUNTED` packets counted.
fn run(chain: Chain, exports: Option<Arc<AccountingShared>>) -> Outcome {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; 4096 * BUF_SIZE].into_boxed_slice());
    let pool = Pool::try_new(mem, 0x1000_0000, 4096).expect("pool");
    let mut stage = NetBlazeStage::off(chain);
    stage.enter_lane(0);
    run_stage(stage, pool, None, exports, FLOWS, &frames())
}

/// [`run`] over [`frames6`].
fn run6(chain: Chain) -> Outcome {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; 4096 * BUF_SIZE].into_boxed_slice());
    let pool = Pool::try_new(mem, 0x1000_0000, 4096).expect("pool");
    let mut stage = NetBlazeStage::off(chain);
    stage.enter_lane(0);
    run_stage(stage, pool, None, None, FLOWS, &frames6())
}

/// NetBlaze's epoch here: 20 polls of the test's clock (1 000 ticks each).
const NB_EPOCH: u64 = 20_000;

/// Runs `chain` wrapped in NetBlaze with one auxiliary core, driven on the test's thread
/// after every poll (so its allocations count too). Chain 1's committed profile at a 1 GHz
/// clock: 32 frames every 1 000 ticks is far outside its frontier, so flows are placed on the
/// auxiliary core every epoch; 64 tracked flows against a window of 512 active ones means
/// untracked arrivals, and the frames injected before each poll are in the ring when an epoch
/// ends — every kind of entry a decision's backlog can hold. The warm-up sends only 16 flows
/// (fewer than are tracked), so that a backlog first holds all of them in the counted run: a
/// vector sized one short would grow there, where it counts.
fn run_netblaze(chain: Chain, exports: Option<Arc<AccountingShared>>) -> (Outcome, String) {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; 4096 * BUF_SIZE].into_boxed_slice());
    let mut pool = Pool::try_new(mem, 0x1000_0000, 4096).expect("pool");
    let mut profile = Profile::parse(include_str!("../../chains/chain1.profile")).expect("chain 1's profile");
    profile.tsc_hz = 1_000_000_000;
    profile.epoch_ns = NB_EPOCH;
    let mut nb = NetBlazeConfig::default();
    nb.epoch_ns = Some(NB_EPOCH);
    let params = nb.validate().expect("netblaze parameters");
    let lcfg = LaneConfig { epoch: Duration(NB_EPOCH), link_capacity: 256, tracked_flows: 64, follow_flows: 1024 };
    let (states, mut ends) = build(1, 1, lcfg).expect("links");
    let lanes: SharedLanes = share(states);
    let views = pool.aux_views(1);
    let aux_chain = Chain::new(vec![acl(), lb(), accounting().0], EGRESS);
    let aux = AuxWorker::with_views(ends.remove(0), views, aux_chain);
    let mut stage = NetBlazeStage::new(chain, Arc::clone(&lanes), CoreMapper::new(params), Arc::new(profile));
    stage.enter_lane(0);
    let o = run_stage(stage, pool, Some((aux, lanes)), exports, 16, &frames());
    let nb = o.netblaze.clone();
    (o, nb)
}

/// Runs `stage` over two software NICs on `pool`: `WARMUP` packets of `warm_flows` distinct
/// flows, then `COUNTED` packets counted; with `aux`, that auxiliary core polls after every
/// poll of the lane.
fn run_stage(
    stage: NetBlazeStage,
    mut pool: Pool<'static>,
    mut aux: Option<(AuxWorker<'static>, SharedLanes)>,
    exports: Option<Arc<AccountingShared>>,
    warm_flows: usize,
    frames: &[Vec<u8>],
) -> Outcome {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rx = [SoftRxQueue::new(&mut pool, 512), SoftRxQueue::new(&mut pool, 512)];
    let mut tx = [SoftTxQueue::new(512, false), SoftTxQueue::new(512, false)];
    let mut poller = Poller::new(stage, PollConfig::default());
    let clock = StepClock(Cell::new(1));
    let mut reply = [0u8; 128];
    let mut replies = [[0u8; 128]; BATCH_SIZE];
    let mut reply_lens = [0usize; BATCH_SIZE];
    let mut exported = 0usize;

    let mut batch_no = 0usize;
    let mut step = |pool: &mut Pool<'_>,
                    rx: &mut [SoftRxQueue; 2],
                    tx: &mut [SoftTxQueue; 2],
                    aux: &mut Option<(AuxWorker<'static>, SharedLanes)>,
                    flows: usize| {
        for j in 0..BATCH_SIZE {
            let _ = rx[0].inject(pool, &frames[flow_of(batch_no, j) % flows]);
        }
        poller.poll_once(pool, rx, tx, &clock);
        if let Some((a, _)) = aux {
            a.poll_once(clock.now());
        }
        // The wires: port 1's frames are what left toward the outside; answer the UDP
        // ones (a NAT's mappings must translate replies back), then mark all sent.
        let mut n_replies = 0;
        tx[1].transmit(pool, usize::MAX, |f| {
            if n_replies < BATCH_SIZE
                && let Some(len) = nat_reply(f, &mut reply).or_else(|| nd_reply(f, &mut reply))
            {
                replies[n_replies][..len].copy_from_slice(&reply[..len]);
                reply_lens[n_replies] = len;
                n_replies += 1;
            }
        });
        tx[0].transmit(pool, usize::MAX, |_| {});
        for (r, len) in replies.iter().zip(reply_lens.iter()).take(n_replies) {
            let _ = rx[1].inject(pool, &r[..*len]);
        }
        // The control plane drains the export ring now and then.
        if batch_no.is_multiple_of(8)
            && let Some(s) = &exports
        {
            exported += s.drain_exports(|_| {});
        }
        clock.0.set(clock.0.get() + 1_000);
        batch_no += 1;
    };

    for _ in 0..WARMUP / BATCH_SIZE {
        step(&mut pool, &mut rx, &mut tx, &mut aux, warm_flows);
    }
    ALLOCS.store(0, Ordering::Relaxed);
    DEALLOCS.store(0, Ordering::Relaxed);
    if let Ok(mut f) = FIRST.lock() {
        *f = None;
    }
    set_armed(true);
    for _ in 0..COUNTED / BATCH_SIZE {
        step(&mut pool, &mut rx, &mut tx, &mut aux, FLOWS);
    }
    set_armed(false);
    let (allocs, deallocs) = (ALLOCS.load(Ordering::Relaxed), DEALLOCS.load(Ordering::Relaxed));
    let first = FIRST.lock().ok().and_then(|mut f| f.take());

    // Wind down: everything back in the pool (what the auxiliary core holds comes back first).
    for _ in 0..64 {
        poller.poll_once(&mut pool, &mut rx, &mut tx, &clock);
        if let Some((a, _)) = &mut aux {
            a.poll_once(clock.now());
        }
        tx[0].transmit(&pool, usize::MAX, |_| {});
        tx[1].transmit(&pool, usize::MAX, |_| {});
        clock.0.set(clock.0.get() + 1_000);
    }
    if let Some((_, lanes)) = &aux {
        assert!(lanes[0].lock().all_reclaimed(), "the auxiliary core gave everything back");
    }
    use cadence_core::nic::TxQueue;
    for q in tx.iter_mut() {
        q.reclaim(&mut pool);
    }
    for q in rx.iter_mut() {
        q.release(&mut pool);
    }
    assert_eq!(pool.in_use(), 0, "buffers leaked");
    let stats = poller.stats();
    let forwarded = stats.ports.iter().map(|p| p.tx).sum();
    let mut counters = String::new();
    poller.stage().chain().write_counters(&mut counters).expect("counters");
    let mut netblaze = String::new();
    poller.stage().counters().write(&mut netblaze).expect("netblaze counters");
    Outcome { allocs, deallocs, first, counters, forwarded, exported, netblaze }
}

/// The value of `key=` in a counters line (0 when absent: the callers require more).
fn counter(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn assert_no_alloc(name: &str, o: &Outcome) {
    eprintln!("{name}: forwarded {} frames; counters:{}", o.forwarded, o.counters);
    assert!(
        o.allocs == 0 && o.deallocs == 0,
        "{name}: {} allocations and {} deallocations while {COUNTED} packets went through\n{}",
        o.allocs,
        o.deallocs,
        o.first.as_deref().unwrap_or("")
    );
    assert!(o.forwarded > (COUNTED / 4) as u64, "{name}: only {} frames forwarded", o.forwarded);
}

#[test]
fn chain1_acl_lb_accounting_never_allocates_per_packet() {
    let (acc, shared) = accounting();
    let o = run(Chain::new(vec![acl(), lb(), acc], EGRESS), Some(shared));
    assert_no_alloc("chain 1", &o);
    assert!(counter(&o.counters, "lb_new_conns") > 0, "{}", o.counters);
    assert!(o.exported > 1000, "expired flows were exported: {}", o.exported);
}

#[test]
fn chain2_acl_urlfilter_encrypt_never_allocates_per_packet() {
    let o = run(Chain::new(vec![acl(), urlfilter(), encrypt()], EGRESS), None);
    assert_no_alloc("chain 2", &o);
    assert!(counter(&o.counters, "urlfilter_blocked") > 0, "{}", o.counters);
}

#[test]
fn acl_nat_never_allocates_per_packet() {
    let o = run(Chain::new(vec![acl(), nat()], EGRESS), None);
    assert_no_alloc("acl > nat", &o);
    assert!(counter(&o.counters, "nat_reclaimed") > 1000, "mappings expired and came back: {}", o.counters);
    assert!(counter(&o.counters, "nat_inbound") > 1000, "replies translated: {}", o.counters);
}

/// The `p4` NF running `chains/p4/router.spec` (every frame's destination routed to port 1
/// by its LPM table, the TTL decremented, the frame re-emitted and parsed again).
fn p4_router() -> Box<dyn Nf> {
    use cadence_core::nf::p4::{P4, P4Config, P4Shared};
    let cfg = P4Config {
        spec: include_str!("../../chains/p4/router.spec").to_string(),
        tables: vec![(
            "routes".to_string(),
            "match 0x0a030000/0xffff0000 action route nexthop_mac 0x020000000b02 port_out 1\n".to_string(),
        )],
    };
    let rate = cadence_core::time::TickRate::try_new(1_000_000_000).expect("rate");
    Box::new(P4::new(Arc::new(P4Shared::try_new(&cfg, rate).expect("p4"))))
}

#[test]
fn a_p4_program_never_allocates_per_packet() {
    let o = run(Chain::new(vec![p4_router()], EGRESS), None);
    assert_no_alloc("p4 router", &o);
    assert!(counter(&o.counters, "p4_tx") > 10_000, "{}", o.counters);
}

#[test]
fn l3fwd_never_allocates_per_packet() {
    let o = run(Chain::new(vec![l3fwd()], EGRESS), None);
    assert_no_alloc("l3fwd", &o);
}

#[test]
fn l3fwd_through_the_neighbour_table_never_allocates_per_packet() {
    let o = run(l3fwd_resolved(), None);
    assert_no_alloc("l3fwd, neighbours", &o);
    assert!(counter(&o.counters, "neigh_arp_requests") > 100, "{}", o.counters);
    assert!(counter(&o.counters, "neigh_table_full") > 0, "{}", o.counters);
}

#[test]
fn ipv6_next_hops_through_the_neighbour_table_never_allocate_per_packet() {
    let o = run6(l3fwd_resolved6());
    assert_no_alloc("l3fwd, IPv6 neighbours", &o);
    assert!(counter(&o.counters, "neigh_nd_solicits") > 100, "{}", o.counters);
    assert!(counter(&o.counters, "neigh_nd_resolved") > 10, "{}", o.counters);
    assert!(counter(&o.counters, "l3fwd_forwarded6") > 10_000, "{}", o.counters);
}

#[test]
fn chain1_with_an_auxiliary_core_under_a_new_flow_flood_never_allocates_per_packet() {
    let (acc, shared) = accounting();
    let (o, nb) = run_netblaze(Chain::new(vec![acl(), lb(), acc], EGRESS), Some(shared));
    assert_no_alloc("chain 1 with NetBlaze", &o);
    eprintln!("netblaze:{nb}");
    // The run did what it is here for: decisions every epoch, flows handed over and back,
    // ring entries in the backlogs (and untracked ones: 512 active flows, 64 tracked).
    assert!(counter(&nb, "nb_epochs") >= ((WARMUP + COUNTED) / BATCH_SIZE) as u64 / 20 - 2, "{nb}");
    assert!(counter(&nb, "nb_handed") > 1000, "flows went to the auxiliary core: {nb}");
    assert!(counter(&nb, "nb_ring") > 0, "frames in the rings joined the backlog: {nb}");
}

//! Two more chains end to end (the template is tests/tests/chains.rs): ACL → NAT
//! (`chains/chain3-nat.toml`) and the L3 forwarder alone (`chains/l3fwd.toml`). Each boots
//! with its chain as boot module 0, sends the standard flows round robin, drains and stops
//! (exit 33); every frame that came back is checked by the host checker against its NF
//! models (`cadence_harness::traffic::expect`), and the firmware's NF counters are compared with the
//! host's counts. The per-flow outcome the chain files describe is asserted on the models
//! first, so that a model and a chain file cannot drift apart silently.
//!
//! Not covered: NAT replies (inbound translation). The generator only sends the standard
//! flows and the checker has no model of a reply to a translated flow.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Result, anyhow};
use cadence_build::image;
use cadence_harness::protocol::{BootOptions, Counters};
use cadence_harness::rig::Rig;
use cadence_harness::traffic::expect::FlowExpect;
use cadence_tests::{BOOT_TIMEOUT, send_paced, start_with, stop_ok};

/// One QEMU at a time: two shared cores.
static SERIAL: Mutex<()> = Mutex::new(());

const FLOWS: u16 = 16;
/// 50 frames per flow.
const FRAMES: u64 = 800;
const PER_FLOW: u64 = FRAMES / FLOWS as u64;
const RATE: u64 = 2000;

/// Boots `file`'s chain, sends [`FRAMES`] frames round robin over the flows, drains,
/// stops; returns the rig and the firmware's `@summary`.
fn run_chain(name: &str, file: &str) -> Result<(Rig, Counters)> {
    let text = cadence_ctl::chain::load(&image::workspace_root().join("chains").join(file))?.text;
    let mut rig = start_with(name, FLOWS, BootOptions::default().set("stats_ms", 0), |c| {
        c.chain_text = Some(text);
        c.pcap = Some(c.out_dir.join("out.pcap"));
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    send_paced(&mut rig, FRAMES, RATE, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    Ok((rig, fw))
}

/// The model's expectation of every flow.
fn model(rig: &Rig) -> Result<Vec<FlowExpect>> {
    let c = rig.checker();
    let e = c.expectations().ok_or_else(|| anyhow!("the checker has no chain expectations"))?;
    Ok(e.flows.clone())
}

/// Flows whose expectation satisfies `pred`, in order.
fn flows_where(m: &[FlowExpect], pred: impl Fn(&FlowExpect) -> bool) -> Vec<u16> {
    (0..FLOWS).filter(|&i| pred(&m[usize::from(i)])).collect()
}

/// Every frame came back as the models expect, nothing else came back, every drop was an
/// expected one; the host's and the firmware's totals agree.
fn clean_run(rig: &Rig, fw: &Counters, nfs: &[&str]) -> Result<()> {
    let c = rig.checker();
    let k = c.classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    assert_eq!(rig.report.chain, nfs, "@chain");
    assert_eq!(k.sent, FRAMES);
    assert_eq!(k.received + k.expected_drops, k.sent, "{k:?}");
    assert_eq!(fw.require("drops")?, k.expected_drops, "{fw:?}");
    assert_eq!(fw.require("p0_tx")? + fw.require("p1_tx")?, k.received, "{fw:?}");
    assert_eq!(rig.pcap_frames(), k.received);
    Ok(())
}

/// The frames of the capture: (flow id, frame), in capture order.
fn captured(rig: &Rig) -> Result<Vec<(u16, Vec<u8>)>> {
    let (_, records) = cadence_harness::pcap::read(&std::fs::read(rig.out_dir.join("out.pcap"))?)?;
    records
        .into_iter()
        .map(|r| {
            let tag = cadence_harness::traffic::frame::read_tag(&r.data)
                .ok_or_else(|| anyhow!("untagged frame in the capture"))?;
            Ok((tag.flow, r.data))
        })
        .collect()
}

#[test]
fn chain3_acl_nat() -> Result<()> {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rig, fw) = run_chain("chain3_nat", "chain3-nat.toml")?;
    clean_run(&rig, &fw, &["acl", "nat"])?;
    let m = model(&rig)?;
    let ext = [192, 0, 2, 1];
    let pool = (40_000u16, 40_099u16);
    // What chains/chain3-nat.toml says each flow undergoes.
    let drop = |r: &'static str| flows_where(&m, move |e| e.drop == Some(r));
    assert_eq!(flows_where(&m, |e| e.snat.is_some()), [0, 1, 8]);
    assert!(m.iter().all(|e| e.snat.is_none_or(|s| s == (ext, pool))), "{m:?}");
    assert_eq!(drop("acl_deny"), [6, 7, 9, 14, 15]);
    assert_eq!(drop("nat_no_mapping"), [4, 5, 12, 13]);
    assert_eq!(drop("nf_unsupported"), [2, 3, 10, 11]);

    // Host side: every frame of flows 0, 1, 8 came back from the external address and a pool
    // port, one per flow (checked frame by frame); all out of port 1.
    let k = rig.checker().classes();
    assert_eq!(k.received, 3 * PER_FLOW, "{k:?}");
    assert_eq!(fw.require("p1_tx")?, 3 * PER_FLOW, "{fw:?}");
    assert_eq!(fw.require("p0_tx")?, 0, "{fw:?}");
    // The capture: one pool port per flow, and no port shared by two flows.
    let mut ports: BTreeMap<u16, BTreeSet<u16>> = BTreeMap::new();
    for (flow, f) in captured(&rig)? {
        assert_eq!(f[26..30], ext, "flow {flow}: source address");
        ports.entry(flow).or_default().insert(u16::from_be_bytes([f[34], f[35]]));
    }
    assert_eq!(ports.keys().copied().collect::<Vec<_>>(), [0, 1, 8], "{ports:?}");
    let all: BTreeSet<u16> = ports.values().flatten().copied().collect();
    assert!(ports.values().all(|s| s.len() == 1), "one port per flow: {ports:?}");
    assert_eq!(all.len(), 3, "a port in two mappings: {ports:?}");
    assert!(all.iter().all(|p| (pool.0..=pool.1).contains(p)), "{ports:?}");

    // Firmware: the ACL and the NAT counted exactly what the models say.
    let denied = 5 * PER_FLOW;
    assert_eq!(fw.require("acl_denied")?, denied, "{fw:?}");
    assert_eq!(fw.require("drop_acl_deny")?, denied, "{fw:?}");
    assert_eq!(fw.require("acl_permitted")?, FRAMES - denied, "{fw:?}");
    assert_eq!(fw.require("acl_cache_add_failed")?, 0, "{fw:?}");
    assert_eq!(fw.require("nat_outbound")?, 3 * PER_FLOW, "{fw:?}");
    assert_eq!(fw.require("nat_mappings")?, 3, "one mapping per translated flow: {fw:?}");
    assert_eq!(fw.require("nat_inbound")?, 0, "{fw:?}");
    assert_eq!(fw.require("nat_no_mapping")?, 4 * PER_FLOW, "{fw:?}");
    assert_eq!(fw.require("drop_nat_no_mapping")?, 4 * PER_FLOW, "{fw:?}");
    assert_eq!(fw.require("nat_unsupported")?, 4 * PER_FLOW, "{fw:?}");
    assert_eq!(fw.require("drop_nf_unsupported")?, 4 * PER_FLOW, "{fw:?}");
    for zero in ["nat_reclaimed", "nat_ports_exhausted", "nat_table_full", "drop_nat_ports_exhausted"] {
        assert_eq!(fw.require(zero)?, 0, "{zero}: {fw:?}");
    }
    Ok(())
}

#[test]
fn l3fwd_alone() -> Result<()> {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rig, fw) = run_chain("l3fwd", "l3fwd.toml")?;
    clean_run(&rig, &fw, &["l3fwd"])?;
    let m = model(&rig)?;
    // What chains/l3fwd.toml says: the egress port and next-hop MAC of each flow.
    let hop = |i: usize| m[i].next_hop.map(|h| (h.port, h.mac[5]));
    let want: [Option<(u8, u8)>; 16] = [
        Some((1, 0x01)), // 0: 10.101.0.0/29
        Some((1, 0x01)), // 1
        Some((1, 0x01)), // 2: fd00:cade:65::/125
        Some((1, 0x01)), // 3
        Some((0, 0x01)), // 4: 10.100.0.0/16
        Some((0, 0x01)), // 5
        Some((0, 0x01)), // 6: fd00:cade:64::/48
        Some((0, 0x01)), // 7
        None,            // 8: 10.101.0.8, no route
        Some((1, 0x09)), // 9: 10.101.0.9/32
        Some((1, 0x0a)), // 10: fd00:cade:65::a/128
        None,            // 11: fd00:cade:65::b, no route
        Some((1, 0x0c)), // 12: 10.100.0.12/30, back out of port 1
        Some((1, 0x0c)), // 13
        Some((0, 0x01)), // 14: fd00:cade:64::/48
        Some((1, 0x0f)), // 15: fd00:cade:64::f/128, back out of port 1
    ];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(hop(i), *w, "flow {i}: {:?}", m[i]);
        assert_eq!(m[i].drop, if w.is_none() { Some("no_route") } else { None }, "flow {i}");
    }
    let c = rig.checker();
    let hairpin =
        c.flows().iter().filter(|f| m[usize::from(f.id)].next_hop.is_some_and(|h| usize::from(h.port) == f.ingress));
    assert_eq!(hairpin.map(|f| f.id).collect::<Vec<_>>(), [12, 13, 15]);
    drop(c);

    // Host side (frame by frame): right port, next-hop MAC, TTL / hop limit 63, valid
    // checksums. Firmware: the same counts.
    let to = |port: u8| want.iter().filter(|w| w.is_some_and(|(p, _)| p == port)).count() as u64 * PER_FLOW;
    assert_eq!(fw.require("p0_tx")?, to(0), "{fw:?}");
    assert_eq!(fw.require("p1_tx")?, to(1), "{fw:?}");
    let no_route = 2 * PER_FLOW;
    assert_eq!(rig.checker().classes().expected_drops, no_route);
    assert_eq!(fw.require("l3fwd_no_route")?, no_route, "{fw:?}");
    assert_eq!(fw.require("drop_no_route")?, no_route, "{fw:?}");
    assert_eq!(fw.require("l3fwd_forwarded4")?, 7 * PER_FLOW, "{fw:?}");
    assert_eq!(fw.require("l3fwd_forwarded6")?, 7 * PER_FLOW, "{fw:?}");
    assert_eq!(fw.require("l3fwd_ttl_expired")?, 0, "{fw:?}");
    assert_eq!(fw.require("drop_ttl_expired")?, 0, "{fw:?}");
    // The capture, independently of the checker: TTL / hop limit 63 on every frame.
    for (flow, f) in captured(&rig)? {
        let ttl = if u16::from_be_bytes([f[12], f[13]]) == 0x86DD { f[21] } else { f[22] };
        assert_eq!(ttl, 63, "flow {flow}");
    }
    Ok(())
}

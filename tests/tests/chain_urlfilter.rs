//! The URL filter end to end (`chains/urlfilter.toml`: `nfs = ["urlfilter"]`, banned
//! `example.com/forbidden` and `ads.example.net`). Six of the eight TCP flows carry an HTTP
//! request head at the start of every segment (`Flow::with_http`; their TCP sequence numbers
//! advance by the payload length, so the filter's reassembly sees one stream that opens with
//! the head); the other two TCP flows and the UDP flows carry the generator's binary filler.
//! Boot, send the flows round robin, drain, stop (exit 33); every frame that came back is
//! checked by the host checker against its model (`cadence_harness::traffic::expect`): the banned
//! flows' frames are expected drops (`url_blocked`), everything else comes back byte for
//! byte. The firmware's drop and UrlFilter counters must equal what the model predicts.
//!
//! Not covered: `reset = true` (the checker has no model of the resets), requests split
//! over several segments (every generated frame ends with its tag, inside the stream).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, anyhow};
use cadence_build::image;
use cadence_harness::protocol::BootOptions;
use cadence_harness::traffic::UrlVerdict::{Allowed, Blocked, NotHttp};
use cadence_harness::traffic::{Flow, FlowExpect};
use cadence_tests::{BOOT_TIMEOUT, send_paced, start_with, stop_ok};

const FLOWS: u16 = 16;
/// 30 frames per flow.
const FRAMES: u64 = 480;
const PER_FLOW: u64 = FRAMES / FLOWS as u64;
const RATE: u64 = 2000;

/// The standard flows; the TCP ones 1..=11 ask for these URLs.
fn flows() -> Vec<Flow> {
    let http: [(u16, &str, &str); 6] = [
        (1, "example.com", "/forbidden/x"),          // v4, banned: example.com/forbidden
        (3, "Example.COM.:8080", "/forbiddenfruit"), // v6, banned: case, dot, port, prefix
        (5, "example.com", "/forbidde"),             // v4, allowed: one byte short
        (7, "ADS.example.net", "/banner.js"),        // v6, banned: the whole host
        (9, "example.org", "/forbidden"),            // v4, allowed: another host
        (11, "ads.example.network", "/x"),           // v6, allowed: the host only starts alike
    ];
    let mut flows = Flow::standard_set(FLOWS);
    for (id, host, path) in http {
        let f = &mut flows[usize::from(id)];
        *f = f.clone().with_http(host, path);
    }
    flows
}

#[test]
fn urlfilter_blocks_banned_requests() -> Result<()> {
    let text = cadence_ctl::chain::load(&image::workspace_root().join("chains").join("urlfilter.toml"))?.text;
    let mut rig = start_with("chain_urlfilter", FLOWS, BootOptions::default().set("stats_ms", 0), |c| {
        c.flows = flows();
        c.chain_text = Some(text);
        c.pcap = Some(c.out_dir.join("out.pcap"));
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    send_paced(&mut rig, FRAMES, RATE, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;

    // The model's verdict per flow, as the chain file and the requests say.
    let m: Vec<FlowExpect> =
        rig.checker().expectations().ok_or_else(|| anyhow!("the checker has no chain expectations"))?.flows.clone();
    let url: Vec<_> = m.iter().map(|e| e.url).collect();
    let tcp = |v| [None, Some(v)];
    let want: Vec<_> = [
        tcp(Blocked),
        tcp(Blocked),
        tcp(Allowed),
        tcp(Blocked),
        tcp(Allowed),
        tcp(Allowed),
        tcp(NotHttp),
        tcp(NotHttp),
    ]
    .concat();
    assert_eq!(url, want);
    let blocked: Vec<u16> = (0..FLOWS).filter(|&i| m[usize::from(i)].drop.is_some()).collect();
    assert_eq!(blocked, [1, 3, 7]);
    assert!(blocked.iter().all(|&i| m[usize::from(i)].drop == Some("url_blocked")), "{m:?}");
    let count = |v| url.iter().filter(|&&u| u == Some(v)).count() as u64;
    let dropped = count(Blocked) * PER_FLOW;

    // Host side: everything else came back exactly once, byte for byte; the banned flows'
    // frames were expected drops and none came back.
    let c = rig.checker();
    let k = c.classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    drop(c);
    assert_eq!(rig.report.chain, ["urlfilter"], "@chain");
    assert_eq!(k.sent, FRAMES);
    assert_eq!(k.expected_drops, dropped, "{k:?}");
    assert_eq!(k.not_dropped, 0, "{k:?}");
    assert_eq!(k.received, FRAMES - dropped, "{k:?}");

    // The capture, independently of the checker: per flow, PER_FLOW frames of every flow but
    // the banned ones; the allowed requests' heads intact.
    let (_, records) = cadence_harness::pcap::read(&std::fs::read(rig.out_dir.join("out.pcap"))?)?;
    let flows = flows();
    let mut per_flow: BTreeMap<u16, u64> = BTreeMap::new();
    for r in &records {
        let tag = cadence_harness::traffic::frame::read_tag(&r.data)
            .ok_or_else(|| anyhow!("untagged frame in the capture"))?;
        let f = &flows[usize::from(tag.flow)];
        *per_flow.entry(tag.flow).or_default() += 1;
        let head = f.http_head();
        let at = 14 + f.kind.l3_len() + f.kind.l4_len();
        assert_eq!(r.data.get(at..at + head.len()), Some(&head[..]), "flow {}", tag.flow);
    }
    let want: BTreeMap<u16, u64> = (0..FLOWS).filter(|i| !blocked.contains(i)).map(|i| (i, PER_FLOW)).collect();
    assert_eq!(per_flow, want);

    // Firmware: the drops are the model's, and the filter counted one verdict per TCP flow.
    assert_eq!(fw.require("drops")?, dropped, "{fw:?}");
    assert_eq!(fw.require("drop_url_blocked")?, dropped, "{fw:?}");
    assert_eq!(fw.require("p0_tx")? + fw.require("p1_tx")?, k.received, "{fw:?}");
    assert_eq!(fw.require("urlfilter_blocked_pkts")?, dropped, "{fw:?}");
    assert_eq!(fw.require("urlfilter_blocked")?, count(Blocked), "{fw:?}");
    assert_eq!(fw.require("urlfilter_allowed")?, count(Allowed), "{fw:?}");
    // Every request on a connection is read: after an allowed flow's head come the
    // generator's tag bytes, not a request, so each allowed flow also ends as `not_http`
    // (allowed: no HTTP ports are listed).
    assert_eq!(fw.require("urlfilter_not_http")?, count(NotHttp) + count(Allowed), "{fw:?}");
    let tcp_flows = flows.iter().filter(|f| f.kind.proto() == 6).count() as u64;
    assert_eq!(fw.require("urlfilter_inspected")?, tcp_flows, "{fw:?}");
    // No SYNs are sent: every connection is picked up mid-stream.
    assert_eq!(fw.require("urlfilter_midstream")?, tcp_flows, "{fw:?}");
    assert_eq!(fw.require("urlfilter_non_tcp")?, (u64::from(FLOWS) - tcp_flows) * PER_FLOW, "{fw:?}");
    for zero in [
        "urlfilter_resets",
        "urlfilter_gave_up",
        "urlfilter_no_host",
        "urlfilter_unframed",
        "urlfilter_switched",
        "urlfilter_discarded",
        "urlfilter_conflicts",
        "urlfilter_lost",
        "urlfilter_undecided_denied",
        "urlfilter_handshakes",
        "urlfilter_slab_exhausted",
        "urlfilter_table_full",
        "urlfilter_untracked",
        "urlfilter_fragments",
    ] {
        assert_eq!(fw.require(zero)?, 0, "{zero}: {fw:?}");
    }
    Ok(())
}

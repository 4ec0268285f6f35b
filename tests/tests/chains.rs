//! NF chains end to end: the chain files of `chains/` compiled by xtask, passed to the
//! image as boot module 0, traffic through them, every frame checked against what the
//! chain's configuration says (xtask's `traffic::expect`), and the firmware's NF counters
//! compared with the host's expectations. Also: a bad chain configuration exits 35 and
//! names the line.

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use cadence_build::image;
use cadence_harness::protocol::{self, BootOptions, Counters};
use cadence_harness::rig::Rig;
use cadence_tests::{BOOT_TIMEOUT, expect_status, start_with, stop_ok};

/// 16 flows: with the chain files, flows 8 and 9 are denied by the ACL and (chain 1)
/// flows 12 and 13 go to VIPs.
const FLOWS: u16 = 16;
const FRAMES: u64 = 3000;
const RATE: u64 = 2000;

fn chain_text(file: &str) -> Result<String> {
    let c = cadence_ctl::chain::load(&image::workspace_root().join("chains").join(file))?;
    Ok(c.text)
}

/// Boots `file`'s chain, sends [`FRAMES`] frames round robin over the flows, drains,
/// stops; returns the rig and the firmware's `@summary`.
fn run_chain(name: &str, file: &str) -> Result<(Rig, Counters)> {
    let text = chain_text(file)?;
    let mut rig = start_with(name, FLOWS, BootOptions::default().set("stats_ms", 0), |c| {
        c.chain_text = Some(text);
        c.pcap = Some(c.out_dir.join("out.pcap"));
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let mut pacer = cadence_harness::traffic::Pacer::new(RATE, Instant::now());
    let mut sent = 0u64;
    while sent < FRAMES {
        for _ in 0..pacer.take(Instant::now()) {
            if sent == FRAMES {
                break;
            }
            let flow = (sent % u64::from(FLOWS)) as u16;
            let len = 60 + (sent * 149 % 1455) as usize;
            rig.send_flow(flow, len)?;
            sent += 1;
        }
        rig.pump(pacer.wait().min(Duration::from_millis(2)));
    }
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    Ok((rig, fw))
}

/// Host and firmware agree on what came through and what was dropped.
fn common_checks(rig: &Rig, fw: &Counters, nfs: &[&str]) -> Result<()> {
    let c = rig.checker();
    let k = c.classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    assert_eq!(rig.report.chain, nfs, "@chain");
    assert_eq!(k.sent, FRAMES);
    // Flows 8 and 9 are denied: expected drops, not losses, and the ACL counted each.
    let denied = c.sent_where(|e| e.drop == Some("acl_deny"));
    assert_eq!(denied, 2 * (FRAMES / u64::from(FLOWS)) + u64::from(FRAMES % 16 > 8) + u64::from(FRAMES % 16 > 9));
    assert_eq!(k.expected_drops, denied);
    assert_eq!(k.received + k.expected_drops, k.sent, "{k:?}");
    assert_eq!(fw.require("acl_denied")?, denied, "{fw:?}");
    assert_eq!(fw.require("drop_acl_deny")?, denied, "{fw:?}");
    assert_eq!(fw.require("acl_permitted")?, k.received, "{fw:?}");
    assert_eq!(fw.require("drops")?, denied, "{fw:?}");
    let tx = fw.require("p0_tx")? + fw.require("p1_tx")?;
    assert_eq!(tx, k.received, "{fw:?}");
    Ok(())
}

#[test]
fn chain1_acl_lb_accounting() -> Result<()> {
    let (rig, fw) = run_chain("chain1", "chain1.toml")?;
    common_checks(&rig, &fw, &["acl", "lb", "accounting"])?;
    let c = rig.checker();
    // Flows 12 and 13 hit a VIP; each frame came back rewritten to one backend per flow
    // (checked frame by frame), and the LB balanced exactly those.
    let vip = c.sent_where(|e| e.backends.is_some() && e.drop.is_none());
    assert!(vip > 0);
    assert_eq!(fw.require("lb_balanced")?, vip, "{fw:?}");
    // Two VIP connections; a miss whose affinity add failed is picked again (same
    // Maglev choice) and counted as new once more.
    assert_eq!(fw.require("lb_new_conns")?, 2, "two VIP flows: {fw:?}");
    assert_eq!(fw.require("lb_affinity_add_failed")?, 0, "{fw:?}");
    assert_eq!(fw.require("acl_cache_add_failed")?, 0, "{fw:?}");
    assert_eq!(fw.require("lb_passed")? + vip, c.classes().received, "{fw:?}");
    // The capture holds every frame that came out, as it came out.
    let (linktype, records) = cadence_harness::pcap::read(&std::fs::read(rig.out_dir.join("out.pcap"))?)?;
    assert_eq!(linktype, cadence_harness::pcap::LINKTYPE_ETHERNET);
    assert_eq!(records.len() as u64, c.classes().received);
    assert_eq!(rig.pcap_frames(), c.classes().received);
    // Accounting saw every permitted frame, 14 flows.
    assert_eq!(fw.require("accounting_packets")?, c.classes().received, "{fw:?}");
    assert_eq!(fw.require("accounting_flows")?, u64::from(FLOWS) - 2, "{fw:?}");
    Ok(())
}

#[test]
fn chain2_acl_urlfilter_encrypt() -> Result<()> {
    let (rig, fw) = run_chain("chain2", "chain2.toml")?;
    common_checks(&rig, &fw, &["acl", "urlfilter", "encrypt"])?;
    let c = rig.checker();
    // Every permitted frame was encrypted (checked: payload differs, decrypts to the
    // original), TCP and UDP alike; nothing was blocked.
    let received = c.classes().received;
    assert_eq!(fw.require("encrypt_tcp")? + fw.require("encrypt_udp")?, received, "{fw:?}");
    assert_eq!(fw.require("drop_url_blocked")?, 0, "{fw:?}");
    Ok(())
}

/// Boots with the chain module `text`, expects exit 35, returns its `error: chain config` line.
fn refused_chain(name: &str, text: String) -> Result<String> {
    let mut rig = start_with(name, 1, BootOptions::default(), |c| c.chain_text = Some(text))?;
    let exit = rig.qemu.wait(BOOT_TIMEOUT)?;
    rig.pump(Duration::from_millis(200));
    expect_status(&rig, exit, protocol::EXIT_BAD_CONFIG)?;
    rig.report
        .errors
        .iter()
        .find(|l| l.starts_with("error: chain config"))
        .cloned()
        .ok_or_else(|| anyhow!("no chain config error\n{}", rig.qemu.diagnostics()))
}

#[test]
fn bad_chain_config_exits_35_naming_the_line() -> Result<()> {
    let text = "version=1\nnf=acl\nacl.default=permit\nacl.rule=prio:1,src:10.0.0.0/33,action:deny\n".to_string();
    let line = refused_chain("chain_bad", text)?;
    assert_eq!(line, "error: chain config line 4: acl.rule.src: expected an IPv4/IPv6 prefix");
    Ok(())
}

#[test]
fn a_non_monotone_netblaze_profile_exits_35_naming_the_modules_line() -> Result<()> {
    // The chain, then the profile after its marker; the rate curve rises with flows (line 8).
    let text = "version=1\nnf=acl\n[netblaze.profile]\nversion=1\ntsc_hz=1000000000\nepoch_ns=80000\n\
                frontier=1:100\nrate=1:400,8:500\nservice=packet_cycles:500,flow_cycles:300\n"
        .to_string();
    let line = refused_chain("chain_bad_profile", text)?;
    assert!(line.starts_with("error: chain config line 8: profile: rate: "), "{line}");
    Ok(())
}

#[test]
fn rings_too_big_for_the_heap_are_a_runtime_error_not_a_panic() -> Result<()> {
    // Both rings at the largest size validation accepts: ~80 MiB of export records and
    // ~64 MiB of expiry events against a 32 MiB heap. Before the rings were allocated
    // fallibly this passed validation and then panicked (exit 39) at the allocation.
    let text = "version=1\nnf=accounting\naccounting.export_ring=1048576\naccounting.event_ring=1048576\n".to_string();
    let mut rig = start_with("chain_oom", 1, BootOptions::default(), |c| c.chain_text = Some(text))?;
    let exit = rig.qemu.wait(BOOT_TIMEOUT)?;
    rig.pump(Duration::from_millis(200));
    expect_status(&rig, exit, protocol::EXIT_RUNTIME_FAILURE)?;
    let line = rig
        .report
        .errors
        .iter()
        .find(|l| l.starts_with("error: chain:"))
        .cloned()
        .ok_or_else(|| anyhow!("no chain error\n{}", rig.qemu.diagnostics()))?;
    assert!(line.contains("accounting") && line.contains("not enough memory"), "{line}");
    Ok(())
}

//! IPFIX export end to end: a chain whose Accounting exports (`accounting.export=ipfix:…`)
//! sends every expired flow as an IPFIX record out of port 1; the rig's collector takes those
//! frames, and Wireshark's decoder (`tshark`, Debian package, a decoder that shares nothing with
//! Cadence) reads them too. Both must give, for every flow the host sent, exactly the packets
//! and IP bytes the host sent.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use cadence_harness::protocol::BootOptions;
use cadence_tests::{BOOT_TIMEOUT, send_paced, start_with, stop_ok};

const FLOWS: u16 = 16;
const FRAMES: u64 = 1600;

#[test]
fn expired_flows_are_exported_as_ipfix_and_decode_to_the_hosts_counts() -> Result<()> {
    let chain = "version=1\nnf=acl\nacl.default=permit\nacl.flow_capacity=4096\nnf=accounting\n\
                 accounting.capacity=4096\naccounting.idle_timeout_ms=300\naccounting.export=ipfix:1:192.0.2.10:4739\n";
    let mut rig =
        start_with("ipfix", FLOWS, BootOptions::default().set("stats_ms", 0), |c| c.chain_text = Some(chain.into()))?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    send_paced(&mut rig, FRAMES, 2000, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 97 % 1400) as usize))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let exported = rig.wait_exports(Duration::from_secs(3), Duration::from_secs(30), &mut |_| {});
    assert_eq!(exported, usize::from(FLOWS), "every flow expired and was exported");
    let fw = stop_ok(&mut rig)?;
    let c = rig.checker();
    let k = c.classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    let summary = cadence_harness::traffic::ipfix::summary(&c).context("a collector")?;
    assert!(summary.errors.is_empty() && summary.mismatches.is_empty(), "{summary:#?}");
    assert_eq!((summary.flows, summary.flows_matching), (u64::from(FLOWS), u64::from(FLOWS)));
    // The dataplane counted what it originated: generated = IPFIX messages.
    assert_eq!(fw.require("generated")?, summary.messages, "{fw:?}");
    assert_eq!(fw.require("accounting_ipfix_records")?, u64::from(FLOWS), "{fw:?}");
    // Wireshark's decoder agrees, flow by flow.
    let col = c.ipfix.as_ref().context("collector")?;
    let dir = cadence_tests::out_dir("ipfix");
    let pcap = dir.join("ipfix.pcap");
    let mut w = cadence_harness::pcap::PcapWriter::create(&pcap)?;
    for f in &col.frames {
        w.write(std::time::SystemTime::now(), f)?;
    }
    w.flush()?;
    let sent: HashMap<(String, u16), (u64, u64)> = c
        .sent_totals()
        .into_iter()
        .map(|(k, p, b)| ((cadence_harness::traffic::ipfix::std_addrs(&k).0.to_string(), k.src_port), (p, b)))
        .collect();
    drop(c);
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-Y", "cflow", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;"])
        .args([
            "-e",
            "cflow.srcaddr",
            "-e",
            "cflow.srcaddrv6",
            "-e",
            "cflow.srcport",
            "-e",
            "cflow.packets",
            "-e",
            "cflow.octets",
        ])
        .output()
        .context("running tshark (Debian package tshark; `cargo xtask test` installs it)")?;
    if !out.status.success() {
        bail!("tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let mut decoded: HashMap<(String, u16), (u64, u64)> = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let cols: Vec<Vec<&str>> = line.split('\t').map(|c| c.split(';').filter(|x| !x.is_empty()).collect()).collect();
        // One frame may carry several records: v4 addresses first, then v6, in record order.
        let addrs: Vec<&str> = cols[0].iter().chain(cols[1].iter()).copied().collect();
        for (i, a) in addrs.iter().enumerate() {
            let e = decoded.entry((a.to_string(), cols[2][i].parse()?)).or_default();
            e.0 += cols[3][i].parse::<u64>()?;
            e.1 += cols[4][i].parse::<u64>()?;
        }
    }
    assert_eq!(decoded, sent, "tshark's reading of the export vs what the host sent");
    Ok(())
}

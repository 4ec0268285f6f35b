//! NAT between two real hosts, and the ICMP errors that cross it (issue 27 item 2: "NAT
//! translates the packet embedded in an ICMP error"): the hosted dataplane with NAT then the
//! L3 forwarder, host A inside (port 0), host B outside (port 1), Cadence's NAT address
//! 10.80.2.1 on no port's subnet (B reaches it through its default route, Cadence):
//!
//! ```text
//!  netns …a (host A)            netns cad… (NAT 10.80.2.1, AF_XDP)             netns …b (host B)
//!  10.80.0.2/24 ═════════ port 0 10.80.0.1/24     port 1 10.80.1.1/24 ═════════ 10.80.1.2/24
//!  default via 10.80.0.1                                                    default via 10.80.1.1
//! ```
//!
//! - `ping` A → B crosses (B sees the NAT address; the echo identifier is mapped).
//! - `traceroute` (UDP) from A: hop 1 is Cadence's own Time Exceeded about the probe NAT
//!   translated, restored to A; hop 2 is B, whose kernel answers the probe to a closed port
//!   with "port unreachable" to the NAT address, quoting the translated probe: Cadence must
//!   restore the quote (and the destination) for A's traceroute to recognise its probe.
//!   Without the translations the errors go to the NAT address (hop 1) or are dropped
//!   (`nat_unsupported`, hop 2), and the hops show `*`.
//! - Path MTU through the NAT: port 1's MTU is 1400; `ping -M do` of 1500 bytes from A gets
//!   Cadence's "fragmentation needed" (mtu = 1400); without Don't Fragment (`-M dont`) the
//!   1500 bytes cross in fragments and B answers; once A has learned the path MTU it
//!   fragments that ping itself, and the NAT translates the fragments.
//! - A datagram from B to the NAT address that no mapping covers: dropped, counted.
//!
//! Assertions are on the tools' output and the dataplane's `@summary` counters.

use std::process::Command;

use anyhow::{Result, bail};
use cadence_build::image::{self, Profile};
use cadence_harness::hosts::{Dataplane, Netns, counter, host, in_ns, run};
use cadence_harness::netns::{IP, VethPairs};

const A: &str = "10.80.0.2";
const B: &str = "10.80.1.2";

#[test]
fn icmp_errors_cross_the_nat_with_the_packet_they_quote() -> Result<()> {
    if !cadence_harness::netns::can_create() {
        bail!("the NAT test needs root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_router_tools()?;
    let bin = image::build_hosted(Profile::Release)?;
    let out = cadence_tests::out_dir("nat_icmp");
    std::fs::create_dir_all(&out)?;
    let veths = VethPairs::create(1)?;
    let na = Netns::new(format!("{}a", veths.netns))?;
    let nb = Netns::new(format!("{}b", veths.netns))?;
    host(&na.0, &veths.host[0], A, "10.80.0.1")?;
    host(&nb.0, &veths.host[1], B, "10.80.1.1")?;
    for i in 0..2 {
        run(Command::new(IP).args(["netns", "exec", &veths.netns, "ethtool", "-K", &veths.dut[i], "tx", "off"]))?;
    }
    let toml = out.join("nat.toml");
    std::fs::write(
        &toml,
        "[chain]\nnfs = [\"nat\", \"l3fwd\"]\n\n\
         [nat]\nexternal = \"10.80.2.1\"\nports = \"20000-20999\"\ninside_port = 0\n\n\
         [[port.addr]]\nport = 0\naddr = \"10.80.0.1/24\"\n[[port.addr]]\nport = 1\naddr = \"10.80.1.1/24\"\n\
         [[port.mtu]]\nport = 1\nmtu = 1400\n\n\
         [[l3fwd.route]]\nprefix = \"10.80.0.0/24\"\nport = 0\nvia = \"direct\"\n\
         [[l3fwd.route]]\nprefix = \"10.80.1.0/24\"\nport = 1\nvia = \"direct\"\n",
    )?;
    let chain = out.join("nat.chain");
    std::fs::write(&chain, cadence_ctl::chain::load(&toml)?.text)?;
    let mut dp = Dataplane::start(&bin, &veths, &chain, &[], &out.join("dataplane.stderr"))?;

    let mut failures = Vec::new();
    let ping = in_ns(&na.0, &["ping", "-n", "-c", "2", "-W", "2", B])?;
    std::fs::write(out.join("ping.txt"), &ping.stdout)?;
    if !ping.status.success() {
        failures.push(format!("ping A -> B through the NAT failed:\n{}", String::from_utf8_lossy(&ping.stdout)));
    }
    let tr = in_ns(&na.0, &["traceroute", "-n", "-q", "1", "-w", "2", "-m", "2", B])?;
    let text = String::from_utf8_lossy(&tr.stdout).into_owned();
    std::fs::write(out.join("traceroute.txt"), &text)?;
    let hop = |n: &str, addr: &str| {
        text.lines().any(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some(n) && w.next() == Some(addr)
        })
    };
    if !hop("1", "10.80.0.1") {
        failures.push(format!("traceroute from A: hop 1 is not Cadence's 10.80.0.1 (its own error):\n{text}"));
    }
    if !hop("2", B) {
        failures.push(format!("traceroute from A: hop 2 is not {B} (the port unreachable did not cross):\n{text}"));
    }
    // Without Don't Fragment, 1500 bytes cross port 1's 1400 in fragments (B reassembles
    // and answers). First: once A's kernel has learned the path MTU below, it fragments
    // itself (and NAT does not translate fragments).
    let frag = in_ns(&na.0, &["ping", "-n", "-c", "1", "-W", "2", "-M", "dont", "-s", "1472", B])?;
    std::fs::write(out.join("ping_frag.txt"), &frag.stdout)?;
    if !frag.status.success() {
        failures.push(format!(
            "1500 bytes without DF did not cross in fragments:\n{}",
            String::from_utf8_lossy(&frag.stdout)
        ));
    }

    // Path MTU through the NAT: port 1's MTU is 1400; Cadence's "fragmentation needed"
    // about the translated packet reaches A.
    let pmtu = in_ns(&na.0, &["ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", B])?;
    let text = String::from_utf8_lossy(&pmtu.stdout).into_owned();
    std::fs::write(out.join("ping_pmtu.txt"), &text)?;
    if !text.lines().any(|l| l.starts_with("From 10.80.0.1 ") && l.contains("Frag needed and DF set (mtu = 1400)")) {
        failures.push(format!("ping -M do -s 1472 from A: no fragmentation needed from 10.80.0.1:\n{text}"));
    }
    // Now A knows the path MTU and fragments the same ping itself: the NAT translates the
    // first fragment by its echo identifier and the later one by its source address.
    let own = in_ns(&na.0, &["ping", "-n", "-c", "1", "-W", "2", "-M", "dont", "-s", "1472", B])?;
    std::fs::write(out.join("ping_frag_by_host.txt"), &own.stdout)?;
    if !own.status.success() {
        failures.push(format!("A's own fragments did not cross the NAT:\n{}", String::from_utf8_lossy(&own.stdout)));
    }
    // B sends a datagram to the NAT address that no mapping covers: dropped as
    // nat_no_mapping (nothing comes back to B).
    let stray = in_ns(&nb.0, &["traceroute", "-n", "-q", "1", "-w", "1", "-m", "1", "10.80.2.1"])?;
    std::fs::write(out.join("stray.txt"), &stray.stdout)?;

    // The management channel lists both hosts as neighbours Cadence resolved.
    let neigh = dp.ctl(1, "show neigh")?;
    std::fs::write(out.join("neigh.txt"), neigh.join("\n"))?;
    for (h, port) in [(A, 0), (B, 1)] {
        if !neigh.iter().any(|l| l.starts_with(&format!("neigh ip:{h},port:{port},")) && !l.contains("state:failed")) {
            failures.push(format!("show neigh lacks {h} on port {port}:\n{}", neigh.join("\n")));
        }
    }
    let summary = dp.stop()?;
    std::fs::write(out.join("summary.txt"), &summary)?;
    if !failures.is_empty() {
        bail!("{}\nsummary: {summary}\n(artifacts in {})", failures.join("\n"), out.display());
    }
    // B's port unreachable, Cadence's time exceeded and fragmentation needed: translated.
    assert!(counter(&summary, "nat_icmp_errors")? >= 3, "{summary}");
    assert!(counter(&summary, "nat_mappings")? >= 2, "an echo and a UDP mapping: {summary}");
    assert!(counter(&summary, "nat_no_mapping")? >= 1, "B's stray datagram: {summary}");
    assert!(counter(&summary, "neigh_fragmented")? >= 1 && counter(&summary, "neigh_fragments")? >= 2, "{summary}");
    assert!(counter(&summary, "nat_fragments")? >= 1, "A's later fragment: {summary}");
    Ok(())
}

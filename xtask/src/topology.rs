//! `cargo xtask run --hosted --topology router`: Cadence as the router of three real Linux
//! hosts, as a user would set it up — the hosted dataplane on three veth pairs, host A
//! (10.78.0.2/24, fd78::2/64) behind port 0, host B (10.78.1.2/24) behind port 1 and host C
//! (10.78.2.2/24) behind port 2, and host D (10.78.3.2/24) on VLAN 100 of port 2's link,
//! each in a network namespace of its own with only an address and a default route via
//! Cadence's interface address (no static neighbours). This kernel has no 802.1Q interfaces,
//! so D's frames are tagged on host C's link by a relay (`hosts::vlan_host`), as a switch's
//! access port would. The chain is `chains/router.toml` unless `--chain` names another with
//! the same addresses (10.78.0.1/24 and fd78::1/64 on port 0, 10.78.1.1/24 on port 1,
//! 10.78.2.1/24 on port 2, 10.78.3.1/24 on its VLAN 100 sub-interface).
//!
//! It runs what a user would try — `ping` across every pair, `ping -6` to Cadence, `traceroute` A → B,
//! a 1 500-byte `ping` with Don't Fragment — prints each tool's output and Cadence's neighbour
//! table (`show neigh` on its management channel), then stops the dataplane and prints its
//! neighbour, ICMP and forwarding counters from `@summary`. The
//! result is OK when every ping that must cross does. Everything it created (namespaces,
//! veths, the dataplane) goes away when it ends. Needs root and iproute2.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, bail};
use cadence_build::image::{self, Profile};
use cadence_harness::hosts::{Dataplane, Netns, host, in_ns, ip, run, vlan_host};
use cadence_harness::netns::{IP, VethPairs};

/// The chain the topology is laid out for.
pub const ROUTER_CHAIN: &str = "chains/router.toml";

const A: &str = "10.78.0.2";
const B: &str = "10.78.1.2";
const C: &str = "10.78.2.2";
const D: &str = "10.78.3.2";
const GW_A6: &str = "fd78::1";

/// Runs the router topology with `chain` (a TOML chain file); `Ok(true)` when every ping that
/// must cross did.
pub fn router(chain: &Path) -> Result<bool> {
    if !cadence_harness::netns::can_create() {
        bail!("--topology needs root and iproute2's `ip`: it creates network namespaces and veth pairs");
    }
    cadence_build::provision::ensure_router_tools()?;
    let bin = image::build_hosted(Profile::Release)?;
    let out = image::target_dir()
        .join("xtask")
        .join("topology")
        .join(crate::run::timestamp_dir_name(std::time::SystemTime::now()));
    std::fs::create_dir_all(&out)?;
    let text = cadence_ctl::chain::load(chain)?.text;
    let chain_file = out.join("router.chain");
    std::fs::write(&chain_file, text)?;

    let veths = VethPairs::create_ports(1, 3)?;
    let na = Netns::new(format!("{}a", veths.netns))?;
    let nb = Netns::new(format!("{}b", veths.netns))?;
    let nc = Netns::new(format!("{}c", veths.netns))?;
    let nd = Netns::new(format!("{}d", veths.netns))?;
    host(&na.0, &veths.host[0], A, "10.78.0.1")?;
    host(&nb.0, &veths.host[1], B, "10.78.1.1")?;
    host(&nc.0, &veths.host[2], C, "10.78.2.1")?;
    let vl = format!("tvl{}", std::process::id() % 100_000);
    let _relay = vlan_host(&nc.0, &veths.host[2], 100, &nd.0, &vl, D, "10.78.3.1")?;
    for d in &veths.dut {
        run(Command::new(IP).args(["netns", "exec", &veths.netns, "ethtool", "-K", d, "tx", "off"]))?;
    }
    let v6 = format!("net.ipv6.conf.{}.disable_ipv6=0", veths.host[0]);
    run(Command::new(IP).args(["netns", "exec", &na.0, "sysctl", "-q", "-w", &v6]))?;
    ip(&["-n", &na.0, "-6", "addr", "add", "fd78::2/64", "dev", &veths.host[0], "nodad"])?;
    let mut dp = Dataplane::start(&bin, &veths, &chain_file, &[], &out.join("dataplane.stderr"))?;
    println!(
        "topology: host A {A} (netns {}) ── port 0 [Cadence] port 1 ── host B {B} (netns {})\n          \
         port 2 ── host C {C} (netns {})\n          \
         port 2, VLAN 100 ── host D {D} (netns {})",
        na.0, nb.0, nc.0, nd.0
    );

    let mut ok = true;
    let steps: [(&str, &str, Vec<&str>, bool); 9] = [
        ("A", &na.0, vec!["ping", "-n", "-c", "3", "-W", "2", B], true),
        ("B", &nb.0, vec!["ping", "-n", "-c", "3", "-W", "2", A], true),
        ("A", &na.0, vec!["ping", "-n", "-c", "3", "-W", "2", C], true),
        ("C", &nc.0, vec!["ping", "-n", "-c", "3", "-W", "2", B], true),
        ("A", &na.0, vec!["ping", "-n", "-c", "3", "-W", "2", D], true),
        ("D", &nd.0, vec!["ping", "-n", "-c", "3", "-W", "2", C], true),
        ("A", &na.0, vec!["ping", "-6", "-n", "-c", "2", "-W", "2", GW_A6], true),
        ("A", &na.0, vec!["traceroute", "-n", "-q", "1", "-w", "2", "-m", "4", B], false),
        ("A", &na.0, vec!["ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", B], false),
    ];
    for (who, ns, args, must) in &steps {
        let o = in_ns(ns, args)?;
        println!("\n{who}$ {}", args.join(" "));
        print!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        if *must && !o.status.success() {
            ok = false;
            println!("(failed)");
        }
    }
    println!("\nCadence's neighbour table (management channel: show neigh):");
    for row in dp.ctl(1, "show neigh")? {
        println!("  {row}");
    }
    let summary = dp.stop()?;
    std::fs::write(out.join("summary.txt"), &summary)?;
    println!("\nCadence's counters (non-zero neighbour, ICMP, forwarding and drop counters):");
    for kv in summary.split_whitespace() {
        let interesting = ["neigh_", "l3fwd_", "drop_", "p0_", "p1_", "p2_"].iter().any(|p| kv.starts_with(p));
        if interesting && !kv.ends_with("=0") {
            println!("  {kv}");
        }
    }
    println!("\nartifacts: {}", out.display());
    println!("RESULT: {}", if ok { "OK" } else { "FAIL (a ping that must cross did not)" });
    Ok(ok)
}

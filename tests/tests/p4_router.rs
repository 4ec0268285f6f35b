//! A P4 program as the router two real hosts use (issue 28 item 3): the shipped example
//! `chains/p4-router.toml` — the `p4` NF alone, running `chains/p4/router.spec` (an IPv4
//! router in the DPDK SWX pipeline language p4c's DPDK backend emits) with the routes of
//! `chains/p4/router_table.txt` — between two Linux hosts, each in a network namespace of its
//! own, with the MACs the table names as next hops:
//!
//! ```text
//!  netns …a (host A)                 netns cad… (hosted dataplane, AF_XDP)        netns …b (host B)
//!  10.0.1.7/24 02:00:00:00:0a:01 ═══ port 0    p4: router.spec    port 1 ═══ 10.0.2.9/24 02:00:00:00:0b:02
//!  default via 10.0.1.1                                                          default via 10.0.2.1
//! ```
//!
//! The program answers no ARP (it drops what is not IPv4), so each host has a static neighbour
//! for its gateway (the dataplane port's MAC). Checked: `ping` A → B succeeds and the replies
//! arrive with TTL 63 (B's 64, decremented once by the program: an L2 chain would leave it);
//! a ping to 192.0.2.1 (no route: the table's default action drops) gets no answer and is
//! counted as `p4_drop`; a ping with TTL 1 is dropped by the program (no ICMP error: the
//! program sends none). The counters: every echo request and reply forwarded by the program
//! (`p4_tx`), no fault of any kind. Then, live through the management channel (hosted):
//! `p4 del routes` of B's prefix stops A's pings, `p4 add routes` brings them back, and `p4 show
//! routes` lists the route, then not, then again.
//!
//! The image does the same (`the_image_runs_the_p4_router_for_two_real_hosts`): the firmware
//! under QEMU (TCG) with virtio-net on tap interfaces moved into the hosts' namespaces, the
//! run ended by a signed STOP control frame from host A's side.
//!
//! Assertions are on `ping`'s output and exit status and on the `@summary` counters; timeouts
//! are hang guards, nothing asserts on time.

use std::process::{Command, Output};
use std::sync::Mutex;

use anyhow::{Result, anyhow, bail};
use cadence_build::image::{self, Profile};
use cadence_harness::hosts::{Dataplane, Netns, counter, host, ip};
use cadence_harness::netns::{IP, VethPairs};
use cadence_tests::mac_text;

const A: &str = "10.0.1.7";
const B: &str = "10.0.2.9";
const GW_A: &str = "10.0.1.1";
const GW_B: &str = "10.0.2.1";
/// The next-hop MACs of `chains/p4/router_table.txt` for 10.0.1.0/24 and 10.0.2.0/24.
const MAC_A: &str = "02:00:00:00:0a:01";
const MAC_B: &str = "02:00:00:00:0b:02";
const UNROUTED: &str = "192.0.2.1";
/// Echo requests per ping.
const COUNT: u64 = 3;

/// One dataplane at a time on a 2-CPU machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn chain_text() -> Result<String> {
    Ok(cadence_ctl::chain::load(&image::workspace_root().join("chains").join("p4-router.toml"))?.text)
}

fn ping(ns: &str, to: &str, extra: &[&str]) -> Result<Output> {
    let count = COUNT.to_string();
    let mut args = vec!["netns", "exec", ns, "ping", "-n", "-c", &count, "-W", "2"];
    args.extend_from_slice(extra);
    args.push(to);
    Ok(Command::new(IP).args(&args).output()?)
}

/// Sets a host end's MAC, moves it into `ns` as a host at `addr` with a default route via
/// `gw`, which is reached at `gw_mac` (static: the program answers no ARP).
fn make_host(ns: &str, ifname: &str, mac: &str, addr: &str, gw: &str, gw_mac: &str) -> Result<()> {
    ip(&["link", "set", ifname, "address", mac])?;
    host(ns, ifname, addr, gw)?;
    ip(&["-n", ns, "neigh", "replace", gw, "lladdr", gw_mac, "dev", ifname, "nud", "permanent"])
}

/// The hosted dataplane (AF_XDP) running `chain` between host A (port 0's side) and host B
/// (port 1's), each in a namespace of its own with a static neighbour for its gateway (the
/// dataplane port's MAC); its standard error in `out`. Returns what must live as long as the
/// run: the veth pairs, A's and B's namespaces, the dataplane.
fn hosted_between_two_hosts(
    out: &std::path::Path,
    chain: &std::path::Path,
) -> Result<(VethPairs, Netns, Netns, Dataplane)> {
    if !cadence_harness::netns::can_create() {
        bail!("the P4 hosted tests need root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_router_tools()?;
    let bin = image::build_hosted(Profile::Release)?;
    let veths = VethPairs::create(1)?;
    let na = Netns::new(format!("{}a", veths.netns))?;
    let nb = Netns::new(format!("{}b", veths.netns))?;
    let (dut0, dut1) = (mac_text(veths.mac_of(true, 0)?), mac_text(veths.mac_of(true, 1)?));
    make_host(&na.0, &veths.host[0], MAC_A, A, GW_A, &dut0)?;
    make_host(&nb.0, &veths.host[1], MAC_B, B, GW_B, &dut1)?;
    let dp = Dataplane::start(&bin, &veths, chain, &[], &out.join("dataplane.stderr"))?;
    Ok((veths, na, nb, dp))
}

/// The pings; returns what failed.
fn exercise(a: &str) -> Result<Vec<String>> {
    let mut failures = Vec::new();
    let o = ping(a, B, &[])?;
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let replies = text.lines().filter(|l| l.contains("bytes from 10.0.2.9")).count() as u64;
    if !o.status.success()
        || replies != COUNT
        || !text.lines().filter(|l| l.contains("bytes from")).all(|l| l.contains("ttl=63"))
    {
        failures.push(format!("ping A -> B: every reply with ttl=63 (decremented by the program), got:\n{text}"));
    }
    let o = ping(a, UNROUTED, &[])?;
    if o.status.success() {
        failures.push(format!("ping to {UNROUTED} (no route) was answered:\n{}", String::from_utf8_lossy(&o.stdout)));
    }
    let o = ping(a, B, &["-t", "1"])?;
    if o.status.success() {
        failures.push(format!("a ping with TTL 1 crossed:\n{}", String::from_utf8_lossy(&o.stdout)));
    }
    Ok(failures)
}

/// The counters every run must show.
fn check_summary(key: &dyn Fn(&str) -> Result<u64>, summary: &str) -> Result<()> {
    // The first ping's requests and replies (2 × COUNT), and the unrouted and TTL-1 pings'
    // requests dropped by the program (IPv6 frames the hosts send are its drops too).
    let tx = key("p4_tx")?;
    if tx < 2 * COUNT {
        bail!("p4_tx={tx}, expected at least {}: {summary}", 2 * COUNT);
    }
    let dropped = key("p4_dropped")?;
    if dropped < 2 * COUNT || key("drop_p4_drop")? != dropped {
        bail!("p4_dropped={dropped}, expected at least {} and equal to drop_p4_drop: {summary}", 2 * COUNT);
    }
    for k in ["p4_bad_port", "p4_truncated", "p4_too_big", "p4_step_limit", "p4_unsupported", "p4_unparsable"] {
        if key(k)? != 0 {
            bail!("{k} is not 0: {summary}");
        }
    }
    if key("drop_p4_fault")? != 0 {
        bail!("faults: {summary}");
    }
    Ok(())
}

#[test]
fn the_p4_router_program_routes_between_two_real_hosts() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = cadence_tests::out_dir("p4_router");
    std::fs::create_dir_all(&out)?;
    let chain = out.join("p4-router.chain");
    std::fs::write(&chain, chain_text()?)?;
    let (_veths, na, _nb, mut dp) = hosted_between_two_hosts(&out, &chain)?;
    let mut failures = exercise(&na.0)?;
    // Live through the management channel: B's route deleted (A's pings go unanswered), then
    // added back (they cross again).
    let route = "match 0x0a000200/0xffffff00";
    // `p4 show routes` lists the table as changed: B's route there, gone, back.
    let shows_b = |dp: &mut Dataplane, id| -> Result<bool> {
        Ok(dp.ctl(id, "p4 show routes")?.iter().any(|l| l.starts_with(&format!("{route} action route "))))
    };
    if !shows_b(&mut dp, 10)? {
        failures.push("`p4 show routes` lacks B's route from the table file".into());
    }
    dp.ctl(1, &format!("p4 del routes {route}"))?;
    if ping(&na.0, B, &[])?.status.success() {
        failures.push("ping A -> B crossed after `p4 del routes` took B's route".into());
    }
    if shows_b(&mut dp, 11)? {
        failures.push("`p4 show routes` still lists B's route after `p4 del routes`".into());
    }
    dp.ctl(2, &format!("p4 add routes {route} action route nexthop_mac 0x020000000b02 port_out 1"))?;
    if !ping(&na.0, B, &[])?.status.success() {
        failures.push("ping A -> B failed after `p4 add routes` put B's route back".into());
    }
    if !shows_b(&mut dp, 12)? {
        failures.push("`p4 show routes` lacks B's route after `p4 add routes`".into());
    }
    let summary = dp.stop()?;
    cadence_tests::report(&out, &summary, &failures)?;
    check_summary(&|k| counter(&summary, k), &summary)?;
    let (changes, refused) = (counter(&summary, "p4_changes")?, counter(&summary, "p4_change_refused")?);
    if (changes, refused) != (2, 0) {
        bail!("p4_changes={changes} p4_change_refused={refused}, expected 2 and 0: {summary}");
    }
    Ok(())
}

/// `p4 learner show` end to end (issue 28): DPDK's learner example (`core/tests/p4/dpdk/
/// learner.spec`, its learner cut to 1 024 entries) as the hosted chain between the same two
/// hosts. Each IPv4 destination the program has not seen is learned with the next value of its
/// `counter` register as the output port (mod 4) and timeout 1 (120 s). Host A pings B and an
/// address no host has; then the management channel lists the learner: both destinations there
/// with `fwd_action` and a port below 4, timeout 1 and at most 120 s left; as many entries as
/// `p4 reg read counter 0` says were learned (the program learns once per miss and counts each
/// learn; nothing expires within the test); an unknown learner refused by name.
#[test]
fn a_p4_learner_learns_what_real_hosts_send_and_the_control_plane_lists_it() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = cadence_tests::out_dir("p4_learner");
    std::fs::create_dir_all(&out)?;
    let spec = std::fs::read_to_string(image::workspace_root().join("core/tests/p4/dpdk/learner.spec"))?
        .replace("size 1048576", "size 1024");
    std::fs::write(out.join("learner.spec"), spec)?;
    std::fs::write(out.join("learner.toml"), "[chain]\nnfs = [\"p4\"]\n\n[p4]\nspec = \"learner.spec\"\n")?;
    let chain = out.join("learner.chain");
    std::fs::write(&chain, cadence_ctl::chain::load(&out.join("learner.toml"))?.text)?;
    let (_veths, na, _nb, mut dp) = hosted_between_two_hosts(&out, &chain)?;
    // Whether the pings cross depends on the ports the counter hands out (the hosts' own
    // IPv6 frames are learned too): only what the learner holds is checked.
    ping(&na.0, B, &[])?;
    ping(&na.0, UNROUTED, &[])?;
    let mut failures = Vec::new();
    let (lines, fields) = dp.ctl_answer(20, "p4 learner show fwd_table")?;
    std::fs::write(out.join("learner_show.txt"), format!("{}\n{fields}\n", lines.join("\n")))?;
    let field = |name: &str| {
        fields.split_whitespace().find_map(|f| f.strip_prefix(name)?.strip_prefix('=')?.parse::<usize>().ok())
    };
    let (entries, instances) = (field("entries"), field("instances"));
    if entries != Some(lines.len()) || instances.is_none_or(|i| i == 0) {
        failures.push(format!("the answer's fields `{fields}` do not count its {} lines", lines.len()));
    }
    for (dst, hex) in [(B, "0x0a000209"), (UNROUTED, "0xc0000201")] {
        let entry = lines.iter().find(|l| l.split_whitespace().nth(2) == Some(hex));
        let ok = entry.is_some_and(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let instance = w.first().and_then(|x| x.strip_prefix("instance=")).and_then(|x| x.parse::<usize>().ok());
            let port = w.get(6).and_then(|x| x.strip_prefix("0x")).and_then(|x| u32::from_str_radix(x, 16).ok());
            let left = w.get(10).and_then(|x| x.parse::<u64>().ok());
            w.len() == 11
                && instance.is_some_and(|i| instances.is_some_and(|n| i < n))
                && w[1..6] == ["match", hex, "action", "fwd_action", "port_out"][..]
                && port.is_some_and(|p| p < 4)
                && w[7..10] == ["timeout", "1", "expires_in_ms"][..]
                && left.is_some_and(|ms| ms > 0 && ms <= 120_000)
        });
        if !ok {
            failures.push(format!("no well-formed entry for {dst} ({hex}) in:\n{}", lines.join("\n")));
        }
    }
    let learned = dp.ctl_answer(21, "p4 reg read counter 0")?.1;
    if learned != format!("value={}", lines.len()) {
        failures.push(format!("the counter says `{learned}` learns, the learner lists {} entries", lines.len()));
    }
    match dp.ctl(22, "p4 learner show nope") {
        Err(e) if e.to_string().contains("bad_argument") => {}
        other => failures.push(format!("an unknown learner was not refused: {other:?}")),
    }
    let summary = dp.stop()?;
    cadence_tests::report(&out, &summary, &failures)?;
    if counter(&summary, "drop_p4_fault")? != 0 {
        bail!("faults: {summary}");
    }
    Ok(())
}

#[test]
fn the_image_runs_the_p4_router_for_two_real_hosts() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !cadence_harness::netns::can_create() {
        bail!("the P4 router test needs root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_router_tools()?;
    let (mut rig, [if_a, if_b]) = cadence_tests::start_on_taps("p4_router_image", chain_text()?)?;
    let out = rig.out_dir.clone();
    let nic = rig.checker().macs().nic;
    let pid = std::process::id();
    let na = Netns::new(format!("cadp4{pid}a"))?;
    let nb = Netns::new(format!("cadp4{pid}b"))?;
    make_host(&na.0, &if_a, MAC_A, A, GW_A, &mac_text(nic[0].0))?;
    make_host(&nb.0, &if_b, MAC_B, B, GW_B, &mac_text(nic[1].0))?;
    let failures = exercise(&na.0)?;
    // STOP from host A's side (the rig's own socket on the tap no longer sees it).
    let fw = cadence_tests::stop_from_netns(&mut rig, &na.0, &if_a)?;
    let summary = format!("{fw:?}");
    cadence_tests::report(&out, &summary, &failures)?;
    check_summary(&|k| fw.require(k).map_err(|e| anyhow!("{e}")), &summary)
}

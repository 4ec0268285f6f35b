//! Cadence as the router two real hosts use (issue 27, milestone 1): the hosted dataplane
//! (the L3 forwarder alone, both subnets directly connected, an address on each port)
//! between two Linux hosts, each in a network namespace of its own with only an address and
//! a default route via Cadence's port address — no static neighbour entries on either side:
//!
//! ```text
//!  netns …a (host A)             netns cad… (hosted dataplane, AF_XDP)          netns …b (host B)
//!  10.78.0.2/24 ══════════ port 0 10.78.0.1/24      port 1 10.78.1.1/24 ══════════ 10.78.1.2/24
//!  default via 10.78.0.1                                                    default via 10.78.1.1
//! ```
//!
//! The hosts' kernels ask for their gateway with ARP (Cadence answers in place), Cadence asks
//! for host B when A's first echo request arrives (the request waits in the neighbour table
//! until B answers), and `ping` must succeed across and to Cadence's own addresses, and
//! `ping -6` from host A (fd78::2/64) to Cadence's IPv6 address fd78::1 (host A solicits
//! it: Cadence answers the neighbour solicitation and the echo requests), and across
//! between A and host B (fd79::2/64, default route via Cadence's port-1 address fd79::1),
//! both ways: both prefixes are routed `via = "direct"`, so Cadence solicits B (neighbour
//! discovery, RFC 4861 §7.2) when A's first echo request arrives and B's advertisement sends
//! it on; A it learned from A's own solicitation for fd78::1 (or asks for it). Bad
//! input: a forged ARP reply nobody asked for (from host A's side, claiming 10.78.0.99) is
//! ignored and counted, and makes no entry — Cadence still asks for 10.78.0.99 when host B
//! pings it (seen on host A's link by a raw-socket listener).
//!
//! ICMP errors (item 2): `traceroute` from A to B (UDP probes, then ICMP with `-I`) lists
//! Cadence's port-0 address as the first hop and B as the second; `ping -t 1` from A to B
//! gets "Time to live exceeded" from 10.78.0.1; a ping to 10.78.9.9 (no route: the chain has
//! no default route) gets "Destination Net Unreachable" from 10.78.0.1; over IPv6 (host A's
//! default route via fd78::1), `ping -t 1` to fd79::2 (routed to port 1) gets "Time
//! exceeded: Hop limit" and a ping to fd7a::9 (no route) "Destination unreachable: No
//! route", both from fd78::1.
//!
//! Path MTU (item 2): port 1's MTU is 1400 (`port.mtu`); `ping -M do` of 1500 bytes from A
//! to B gets "Frag needed and DF set (mtu = 1400)" from 10.78.0.1 and A's kernel then knows
//! the path MTU (its next such ping fails locally with mtu=1400); over IPv6 to fd79::2,
//! "Packet too big: mtu=1400" from fd78::1; 1400 bytes cross.
//!
//! A third port (item 3): the hosted test gives the dataplane a third veth pair with host C
//! (10.78.2.2/24, default via Cadence's port-2 address 10.78.2.1) behind it, no neighbour
//! entry either; A and B each ping C, C pings Cadence's port-2 address, and the `@summary`
//! shows port 2's own counters (`p2_rx`, `p2_tx`) carrying them. The L2 default pairs ports
//! (0 ↔ 1, 2 ↔ 3): the router reaches port 2 by its route alone.
//!
//! A VLAN sub-interface (item 4): the hosted test declares VLAN 100 on port 2 as an interface
//! with 10.78.3.1/24 and puts host D (10.78.3.2/24) on it — a Linux host whose frames cross
//! host C's link tagged (`hosts::vlan_host`; this kernel has no 802.1Q interfaces, so an
//! AF_PACKET relay does the tagging, as a switch's access port would). A pings D, D pings
//! Cadence's VLAN address, A and C; a frame on VLAN 200, which is no sub-interface, is dropped
//! as `drop_vlan_unknown`. The VID in the ACL's key: the chain's ACL denies UDP to port 5001
//! from VLAN 100 only, so D's datagrams to A's port 5001 never reach A (`acl_denied`: 3) while
//! C's, on the same port untagged, do.
//!
//! Jumbo frames (item 5, `jumbo_frames_cross_the_hosted_router_byte_exact_and_path_mtu_discovery_works`):
//! the hosted build on AF_PACKET ports between three hosts whose links have a 9 000-byte MTU;
//! 4 MiB over TCP from A to B (Cadence's ports at 9 000) arrive byte-exact (SHA-256 at both
//! ends) in frames longer than a buffer, and the same to C behind Cadence's port 2 at 1 500
//! after path-MTU discovery ("fragmentation needed" from Cadence).
//!
//! The image does the same (`the_image_on_tap_nics_is_the_same_router_for_two_real_hosts`):
//! the firmware under QEMU (TCG) with three virtio-net NICs on tap interfaces (the third for
//! host C: the image drives every NIC it finds, up to 8), which are moved
//! into the hosts' namespaces once QEMU has made them; the same checks and counters, and
//! the run ended by a signed STOP control frame sent from host A's side. Then jumbo frames
//! through virtio-net (ports 0 and 2 at 9 000 in its chain: mergeable receive buffers in,
//! descriptor chains out): A and C raise their links to 9 000 and 1 MiB crosses A→C
//! byte-exact in jumbo frames (port 2's frames average over 4 000 bytes), and A→B through
//! port 1 at 1 400 after path-MTU discovery.
//!
//! Assertions are on `ping`'s exit status, on what crossed the links, and on the dataplane's
//! `@summary` counters. Timeouts are hang guards; nothing asserts on time.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{ChildStdout, Command, Output, Stdio};
use std::sync::Mutex;

use anyhow::{Context, Result, anyhow, bail};
use cadence_build::image::{self, Profile};
use cadence_harness::hosts::{Dataplane, Kill, Netns, counter, host, in_ns, ip, run, vlan_host};
use cadence_harness::netns::{IP, VethPairs};

const A: &str = "10.78.0.2";
const B: &str = "10.78.1.2";
const GW_A: &str = "10.78.0.1";
const GW_B: &str = "10.78.1.1";
/// Cadence's IPv6 address on port 0, and host A's.
const GW_A6: &str = "fd78::1";
const A6: &str = "fd78::2";
/// An address on A's subnet nobody has; the forged reply claims it.
const GHOST: &str = "10.78.0.99";
/// An address no route of the chain covers.
const UNROUTED: &str = "10.78.9.9";
/// Host B's IPv6 address, behind port 1 (hop-limit-1 pings to it get Time Exceeded), and
/// an IPv6 address no route covers.
const ROUTED6: &str = "fd79::2";
/// Cadence's IPv6 address on port 1.
const GW_B6: &str = "fd79::1";
const UNROUTED6: &str = "fd7a::9";

/// `ping -c COUNT -W 2 to` from namespace `ns`.
fn ping(ns: &str, to: &str, count: u32) -> Result<Output> {
    Command::new(IP)
        .args(["netns", "exec", ns, "ping", "-n", "-c", &count.to_string(), "-W", "2", to])
        .output()
        .context("running ping")
}

/// Python, in a namespace: waits up to 10 s for an ARP request for `argv[2]` on `argv[1]`;
/// prints `asked` when one comes. Prints `listening` once the socket is bound.
const LISTEN: &str = "import socket,sys,time\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x0806))\n\
                      s.bind((sys.argv[1],0x0806))\ns.settimeout(0.5)\nt=socket.inet_aton(sys.argv[2])\n\
                      print('listening',flush=True)\nend=time.time()+10\nwhile time.time()<end:\n    \
                      try: f=s.recv(2048)\n    except socket.timeout: continue\n    \
                      if f[20:22]==b'\\x00\\x01' and f[38:42]==t:\n        print('asked',flush=True); break\n";

/// Starts Python `script` with `args` in namespace `ns` (`what` it is, for the errors) and
/// waits for its first line, which must be `listening`: the child (killed when dropped) and
/// the rest of its output.
fn listener(ns: &str, script: &str, args: &[&str], what: &str) -> Result<(Kill, BufReader<ChildStdout>)> {
    let mut child = Kill(
        Command::new(IP)
            .args(["netns", "exec", ns, "python3", "-c", script])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting the {what}"))?,
    );
    let mut out = BufReader::new(child.0.stdout.take().ok_or_else(|| anyhow!("no {what} stdout"))?);
    let mut first = String::new();
    out.read_line(&mut first)?;
    if first.trim() != "listening" {
        bail!("the {what} did not start: {first:?}");
    }
    Ok((child, out))
}

fn mac_hex(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect()
}

fn ip_hex(a: &str) -> Result<String> {
    let a: std::net::Ipv4Addr = a.parse()?;
    Ok(a.octets().iter().map(|b| format!("{b:02x}")).collect())
}

/// The chain both tests run: the L3 forwarder alone, a chain file as a user writes it.
const ROUTER_TOML: &str = "[chain]\nnfs = [\"l3fwd\"]\nvalidate = \"l3\"\n\n\
     [[port.addr]]\nport = 0\naddr = \"10.78.0.1/24\"\n[[port.addr]]\nport = 1\naddr = \"10.78.1.1/24\"\n\
     [[port.addr]]\nport = 0\naddr = \"fd78::1/64\"\n[[port.addr]]\nport = 1\naddr = \"fd79::1/64\"\n\
     [[port.mtu]]\nport = 1\nmtu = 1400\n\n\
     [neigh]\nretrans_ms = 200\nprobes = 3\n\n\
     [[l3fwd.route]]\nprefix = \"10.78.0.0/24\"\nport = 0\nvia = \"direct\"\n\
     [[l3fwd.route]]\nprefix = \"10.78.1.0/24\"\nport = 1\nvia = \"direct\"\n\
     [[l3fwd.route]]\nprefix = \"fd78::/64\"\nport = 0\nvia = \"direct\"\n\
     [[l3fwd.route]]\nprefix = \"fd79::/64\"\nport = 1\nvia = \"direct\"\n";

/// Host C, on Cadence's third port.
const C: &str = "10.78.2.2";
const GW_C: &str = "10.78.2.1";

/// [`ROUTER_TOML`] with a third port: its address and its directly connected subnet.
fn router3_toml() -> String {
    format!(
        "{ROUTER_TOML}[[port.addr]]\nport = 2\naddr = \"{GW_C}/24\"\n\
         [[l3fwd.route]]\nprefix = \"10.78.2.0/24\"\nport = 2\nvia = \"direct\"\n"
    )
}

/// Host D, on VLAN 100 of port 2 (the hosted test): a sub-interface of Cadence's, as a
/// router's VLAN interface. The chain's text form numbers it 8 (`core::stage::PORTS`).
const D: &str = "10.78.3.2";
const GW_D: &str = "10.78.3.1";
const VID_D: u16 = 100;

/// The UDP port the ACL closes on VLAN 100 only ([`router3_vlan_toml`]).
const UDP_CLOSED_ON_D: u16 = 5001;

/// [`router3_toml`] with VLAN 100 on port 2 as a sub-interface: its address and subnet; and
/// an ACL before the forwarder whose one rule denies UDP to port 5001 from VLAN 100.
fn router3_vlan_toml() -> String {
    let acl = format!(
        "[acl]\ndefault = \"permit\"\n[[acl.rule]]\npriority = 10\nproto = \"udp\"\n\
         dst_port = {UDP_CLOSED_ON_D}\nvlan = {VID_D}\naction = \"deny\"\n"
    );
    format!(
        "{}{acl}[[port.vlan]]\nport = 2\nvid = {VID_D}\n         [[port.addr]]\nport = 2\nvlan = {VID_D}\naddr = \"{GW_D}/24\"\n         [[l3fwd.route]]\nprefix = \"10.78.3.0/24\"\nport = 2\nvlan = {VID_D}\nvia = \"direct\"\n",
        router3_toml().replace("nfs = [\"l3fwd\"]", "nfs = [\"acl\", \"l3fwd\"]")
    )
}

/// Puts host D in namespace `nd` on VLAN 100 of host C's link (`if_c` in `nc`; the relay
/// runs until the guard drops).
fn make_vlan_host(nc: &str, if_c: &str, nd: &str) -> Result<Kill> {
    let vl = format!("cvl{}", std::process::id() % 100_000);
    vlan_host(nc, if_c, VID_D, nd, &vl, D, GW_D)
}

/// Python, in a namespace: prints `listening` once bound to UDP port `argv[1]`, then each
/// datagram's payload as it comes, until three that start with `argv[2]` came or 20 s passed.
const UDP_LISTEN: &str = "import socket,sys,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
                          s.bind(('0.0.0.0',int(sys.argv[1])))\ns.settimeout(0.5)\nprint('listening',flush=True)\n\
                          end=time.time()+20\nn=0\nwhile n<3 and time.time()<end:\n    \
                          try: d=s.recv(2048).decode(errors='replace')\n    except socket.timeout: continue\n    \
                          print(d,flush=True)\n    n+=d.startswith(sys.argv[2])\n";

/// Python, in a namespace: three UDP datagrams `argv[3]` to `argv[1]`, port `argv[2]`.
const UDP_SEND: &str = "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
                        [s.sendto(sys.argv[3].encode(),(sys.argv[1],int(sys.argv[2]))) for _ in range(3)]\n";

/// Sends a frame on VLAN 200 of port 2 (MAC `cmac2`), which is no sub-interface, from host C
/// (`if_c` in `nc`): it must be dropped as `vlan_unknown`. Then A pings D, D pings
/// Cadence's VLAN address, A and C (D: VLAN 100 on port 2, [`make_vlan_host`]); and UDP to
/// A's port 5001 from D (VLAN 100 of port 2) must be denied by the ACL while the same from C
/// (port 2, untagged) reaches A: what failed.
fn exercise_vlan(a: &str, nc: &str, if_c: &str, cmac2: [u8; 6], d: &str) -> Result<Vec<String>> {
    let stray = format!("{}{}8100{:04x}0800{}", mac_hex(cmac2), mac_hex(mac_in(nc, if_c)?), 200, "00".repeat(46));
    run(Command::new(IP).args(["netns", "exec", nc, "python3", "-c", cadence_tests::SEND_FRAME, if_c, &stray]))?;
    let port = UDP_CLOSED_ON_D.to_string();
    let (_listen, heard) = listener(a, UDP_LISTEN, &[&port, "from-c"], "UDP listener")?;
    // D's datagrams first; the pings after them take the same relay, so they were delivered
    // (or dropped) before C's are sent.
    run(Command::new(IP).args(["netns", "exec", d, "python3", "-c", UDP_SEND, A, &port, "from-d"]))?;
    let mut failures =
        three_replies(&[(a, "A", D), (d, "D", GW_D), (d, "D", A), (d, "D", C)], &format!("across VLAN {VID_D}"))?;
    run(Command::new(IP).args(["netns", "exec", nc, "python3", "-c", UDP_SEND, A, &port, "from-c"]))?;
    let got: Vec<String> = heard.lines().map_while(std::result::Result::ok).collect();
    if got.iter().filter(|l| l.starts_with("from-c")).count() != 3 || got.iter().any(|l| l.starts_with("from-d")) {
        failures.push(format!(
            "UDP to A:{port}: three from C (port 2) and none from D (VLAN {VID_D}, denied by the ACL), got {got:?}"
        ));
    }
    Ok(failures)
}

/// Pings across to and from host C (on port 2): what failed.
fn exercise_third_port(a: &str, b: &str, c: &str) -> Result<Vec<String>> {
    three_replies(&[(a, "A", C), (b, "B", C), (c, "C", GW_C), (c, "C", A)], "through port 2")
}

/// Three pings for each (namespace, host name, address); a failure for each that did not get
/// three replies (`how`: the way they go, for the message).
fn three_replies(pings: &[(&str, &str, &str)], how: &str) -> Result<Vec<String>> {
    let mut failures = Vec::new();
    for &(from, name, to) in pings {
        let o = ping(from, to, 3)?;
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        if !o.status.success() || text.lines().filter(|l| l.contains(&format!("bytes from {to}"))).count() != 3 {
            failures.push(format!("ping {name} -> {to} {how}: three replies, got:\n{text}"));
        }
    }
    Ok(failures)
}

/// The two hosts around Cadence: their namespaces, host A's interface (on Cadence's port 0)
/// and MAC, and Cadence's port-0 MAC.
struct Hosts<'a> {
    a: &'a str,
    b: &'a str,
    if_a: &'a str,
    amac: [u8; 6],
    cmac0: [u8; 6],
}

/// Moves the hosts' interfaces into their namespaces as hosts of port 0's and port 1's
/// subnets (IPv4 and IPv6), each with a default route via Cadence and no neighbour entry.
fn make_hosts(a: &str, b: &str, if_a: &str, if_b: &str) -> Result<()> {
    host(a, if_a, A, GW_A)?;
    host(b, if_b, B, GW_B)?;
    // Both hosts speak IPv6 too: an address on Cadence's port subnet (no duplicate address
    // detection, so it is usable at once) and no neighbour entry for Cadence.
    for (ns, ifname, addr, gw) in [(a, if_a, A6, GW_A6), (b, if_b, ROUTED6, GW_B6)] {
        let v6 = format!("net.ipv6.conf.{ifname}.disable_ipv6=0");
        run(Command::new(IP).args(["netns", "exec", ns, "sysctl", "-q", "-w", &v6]))?;
        ip(&["-n", ns, "-6", "addr", "add", &format!("{addr}/64"), "dev", ifname, "nodad"])?;
        ip(&["-n", ns, "-6", "route", "add", "default", "via", gw])?;
    }
    Ok(())
}

/// What a user of the router tries, and bad input: returns what failed (artifacts in `out`).
fn exercise(h: &Hosts<'_>, out: &Path) -> Result<Vec<String>> {
    let (na, nb) = (h.a, h.b);
    // Bad input first: a reply nobody asked for, "10.78.0.99 is at 02:66:…", from A's side
    // to Cadence's port 0.
    let forged = [
        mac_hex(h.cmac0),
        mac_hex(h.amac),
        "0806000108000604".into(),
        "0002".into(),
        "026600000099".into(),
        ip_hex(GHOST)?,
        mac_hex(h.cmac0),
        ip_hex(GW_A)?,
    ]
    .concat();
    run(Command::new(IP).args(["netns", "exec", na, "python3", "-c", cadence_tests::SEND_FRAME, h.if_a, &forged]))?;

    // Across, both ways, and to Cadence's own addresses (its far port's too).
    let mut failures = Vec::new();
    for (ns, to) in
        [(na, B), (nb, A), (na, GW_A), (na, GW_B), (nb, GW_B), (na, GW_A6), (na, ROUTED6), (nb, A6), (nb, GW_B6)]
    {
        let o = ping(ns, to, 3)?;
        std::fs::write(out.join(format!("ping_{ns}_{to}.txt")), &o.stdout)?;
        if !o.status.success() {
            failures.push(format!("ping {to} from {ns} failed:\n{}", String::from_utf8_lossy(&o.stdout)));
        }
    }

    // ICMP errors from Cadence: traceroute (UDP, then ICMP probes) shows its port address
    // as the first hop and B as the second; a ping with TTL 1 gets Time Exceeded; a ping to
    // an unrouted address gets Net Unreachable, each from the ingress port's address.
    for (name, extra) in [("udp", None), ("icmp", Some("-I"))] {
        let mut args = vec!["traceroute", "-n", "-q", "1", "-w", "2", "-m", "3"];
        args.extend(extra);
        args.push(B);
        let o = in_ns(na, &args)?;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        std::fs::write(out.join(format!("traceroute_{name}.txt")), &text)?;
        let hop = |n: &str, addr: &str| {
            text.lines().any(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some(n) && w.next() == Some(addr)
            })
        };
        if !(o.status.success() && hop("1", GW_A) && hop("2", B)) {
            failures.push(format!("traceroute ({name}) from A to B: hop 1 not {GW_A} or hop 2 not {B}:\n{text}"));
        }
    }
    for (to, ttl, from, want) in [
        (B, "1", GW_A, "Time to live exceeded"),
        (UNROUTED, "64", GW_A, "Destination Net Unreachable"),
        (ROUTED6, "1", GW_A6, "Time exceeded: Hop limit"),
        (UNROUTED6, "64", GW_A6, "Destination unreachable: No route"),
    ] {
        let o = in_ns(na, &["ping", "-n", "-c", "1", "-W", "2", "-t", ttl, to])?;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        std::fs::write(out.join(format!("ping_ttl{ttl}_{to}.txt")), &text)?;
        if !text.lines().any(|l| l.starts_with(&format!("From {from} ")) && l.contains(want)) {
            failures.push(format!("ping -t {ttl} {to} from A: no \"{want}\" from {from}:\n{text}"));
        }
    }

    // Path-MTU discovery across port 1's MTU of 1400: a 1500-byte packet with Don't
    // Fragment gets "fragmentation needed" (IPv6: "packet too big") with the MTU from
    // Cadence, after which A's kernel knows the path's MTU (its next try fails locally);
    // 1400 bytes cross.
    for (args, from, want) in [
        (
            vec!["ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", B],
            GW_A,
            "Frag needed and DF set (mtu = 1400)",
        ),
        (
            vec!["ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", "1452", ROUTED6],
            GW_A6,
            "Packet too big: mtu=1400",
        ),
    ] {
        let o = in_ns(na, &args)?;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        std::fs::write(out.join(format!("ping_pmtu_{}.txt", args[args.len() - 1])), &text)?;
        if !text.lines().any(|l| l.starts_with(&format!("From {from} ")) && l.contains(want)) {
            failures.push(format!("ping -M do to {}: no \"{want}\" from {from}:\n{text}", args[args.len() - 1]));
        }
    }
    let again = in_ns(na, &["ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", B])?;
    let text = format!("{}{}", String::from_utf8_lossy(&again.stdout), String::from_utf8_lossy(&again.stderr));
    if again.status.success() || !text.contains("mtu=1400") {
        failures.push(format!("A's kernel did not learn the path MTU of 1400 from Cadence:\n{text}"));
    }
    let fits = in_ns(na, &["ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", "1372", B])?;
    if !fits.status.success() {
        failures.push(format!("1400 bytes did not cross:\n{}", String::from_utf8_lossy(&fits.stdout)));
    }

    // The forged reply made no entry: when B pings the ghost, Cadence asks for it on A's link.
    let (_listen, mut heard) = listener(na, LISTEN, &[h.if_a, GHOST], "ARP listener")?;
    let ghost = ping(nb, GHOST, 1)?;
    let mut asked = String::new();
    heard.read_line(&mut asked)?;
    if ghost.status.success() {
        failures.push(format!("ping {GHOST} (nobody) succeeded: {}", String::from_utf8_lossy(&ghost.stdout)));
    }
    if asked.trim() != "asked" {
        failures.push(format!("Cadence never asked for {GHOST}: the forged reply made an entry? ({asked:?})"));
    }
    Ok(failures)
}

/// What the dataplane's `@summary` must say after [`exercise`] (`key`: a counter by name;
/// `summary`: the line, for the messages).
fn check_summary(key: &dyn Fn(&str) -> Result<u64>, summary: &str) -> Result<()> {
    // Both hosts asked for their gateway and were answered; Cadence learned A from its request
    // and resolved B by asking (or learned it from B's own request, whichever came first).
    assert!(key("neigh_arp_replies")? >= 2, "{summary}");
    assert!(key("neigh_learned")? + key("neigh_resolved")? >= 2, "{summary}");
    assert!(key("neigh_arp_requests")? >= 2, "B, then the ghost: {summary}");
    // 3 + 3 across, 3 + 3 + 3 to Cadence, 3 + 3 over IPv6 (from A and from B) after their
    // solicitations were answered.
    assert!(key("l3fwd_forwarded4")? >= 6, "{summary}");
    assert!(key("neigh_echo_replies")? >= 15, "{summary}");
    // A solicited Cadence (B need not: it learns Cadence from Cadence's own solicitation,
    // RFC 4861 §7.2.3).
    assert!(key("neigh_nd_adverts")? >= 1, "{summary}");
    // IPv6 across, both ways (3 + 3), with B resolved by a solicitation Cadence sent and the
    // advertisement B answered with.
    assert!(key("l3fwd_forwarded6")? >= 6, "{summary}");
    assert!(key("neigh_nd_solicits")? >= 1 && key("neigh_nd_resolved")? >= 1, "{summary}");
    assert_eq!(key("drop_nd_bad")?, 0, "{summary}");
    // The forged reply: ignored and counted.
    assert!(key("neigh_arp_unsolicited")? >= 1 && key("drop_arp_unsolicited")? >= 1, "{summary}");
    // ICMP errors: one per traceroute's first hop, Time Exceeded and Net Unreachable over
    // IPv4 and IPv6;
    // all counted by the forwarder too, none suppressed at the default rate.
    assert!(key("neigh_icmp_errors")? >= 6, "{summary}");
    assert!(key("l3fwd_ttl_expired")? >= 3 && key("l3fwd_no_route")? >= 1, "{summary}");
    assert_eq!(key("neigh_icmp_suppressed")?, 0, "{summary}");
    // Path MTU: the two too-big probes (IPv4, IPv6), each answered.
    assert!(key("neigh_too_big")? >= 2, "{summary}");
    Ok(())
}

/// One dataplane at a time: each test brings its own (QEMU under TCG, or the hosted one)
/// onto a 2-CPU machine.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn two_hosts_ping_each_other_and_cadence_through_it_with_no_static_neighbours() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !cadence_harness::netns::can_create() {
        bail!("the router test needs root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_router_tools()?;
    let bin = image::build_hosted(Profile::Release)?;
    let out = cadence_tests::out_dir("router");
    std::fs::create_dir_all(&out)?;
    let veths = VethPairs::create_ports(1, 3)?;
    let na = Netns::new(format!("{}a", veths.netns))?;
    let nb = Netns::new(format!("{}b", veths.netns))?;
    let nc = Netns::new(format!("{}c", veths.netns))?;
    let nd = Netns::new(format!("{}d", veths.netns))?;
    let (amac, cmac0) = (veths.mac_of(false, 0)?, veths.mac_of(true, 0)?);
    make_hosts(&na.0, &nb.0, &veths.host[0], &veths.host[1])?;
    host(&nc.0, &veths.host[2], C, GW_C)?;
    let _relay = make_vlan_host(&nc.0, &veths.host[2], &nd.0)?;
    for d in &veths.dut {
        run(Command::new(IP).args(["netns", "exec", &veths.netns, "ethtool", "-K", d, "tx", "off"]))?;
    }
    let toml = out.join("router.toml");
    std::fs::write(&toml, router3_vlan_toml())?;
    let chain = out.join("router.chain");
    std::fs::write(&chain, cadence_ctl::chain::load(&toml)?.text)?;
    let dp = Dataplane::start(&bin, &veths, &chain, &[], &out.join("dataplane.stderr"))?;

    let hosts = Hosts { a: &na.0, b: &nb.0, if_a: &veths.host[0], amac, cmac0 };
    let mut failures = exercise(&hosts, &out)?;
    failures.extend(exercise_third_port(&na.0, &nb.0, &nc.0)?);
    failures.extend(exercise_vlan(&na.0, &nc.0, &veths.host[2], veths.mac_of(true, 2)?, &nd.0)?);
    let summary = dp.stop()?;
    cadence_tests::report(&out, &summary, &failures)?;
    check_summary(&|k| counter(&summary, k), &summary)?;
    // Port 2 carried C's traffic both ways: 3 + 3 + 3 echo requests in, their replies out,
    // and C's own ARP for its gateway (port 2's counters are in the line at all only because
    // the dataplane has three ports).
    let (rx2, tx2) = (counter(&summary, "p2_rx")?, counter(&summary, "p2_tx")?);
    assert!(rx2 >= 9 && tx2 >= 9, "port 2: rx {rx2}, tx {tx2}: {summary}");
    assert!(counter(&summary, "p3_rx").is_err(), "a fourth port in the line: {summary}");
    assert_eq!(counter(&summary, "drop_vlan_unknown")?, 1, "the VLAN 200 frame: {summary}");
    assert_eq!(counter(&summary, "acl_denied")?, 3, "D's three datagrams to port 5001: {summary}");
    Ok(())
}

/// The image (QEMU, TCG, virtio-net on tap interfaces) as the same router: QEMU's taps are
/// moved into the hosts' namespaces, and the same checks run; the run is stopped by a
/// control frame sent from host A's side.
#[test]
fn the_image_on_tap_nics_is_the_same_router_for_two_real_hosts() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !cadence_harness::netns::can_create() {
        bail!("the router test needs root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_router_tools()?;
    let toml_dir = cadence_tests::out_dir("router_image_chain");
    std::fs::create_dir_all(&toml_dir)?;
    let toml = toml_dir.join("router.toml");
    std::fs::write(&toml, router3_vlan_toml())?;
    // Ports 0 and 2 (hosts A and C) carry jumbo frames: virtio-net takes them over mergeable
    // receive buffers and sends them as descriptor chains.
    std::fs::write(&toml, router3_vlan_toml() + &jumbo_ports(&[0, 2]))?;
    let text = cadence_ctl::chain::load(&toml)?.text;
    // A third virtio-net NIC on its own tap for host C: the image drives all three.
    let (mut rig, [if_a, if_b]) = cadence_tests::start_on_more_taps("router_image", text, 1)?;
    let (if_a, if_b) = (&if_a, &if_b);
    let if_c = rig.extra_tap_ifnames().first().cloned().ok_or_else(|| anyhow!("no third tap"))?;
    if rig.report.nics.len() != 3 {
        bail!("expected three @nic lines, got {:?}\n{}", rig.report.nics, rig.qemu.diagnostics());
    }
    let out = rig.out_dir.clone();
    let pid = std::process::id();
    let na = Netns::new(format!("cadimg{pid}a"))?;
    let nb = Netns::new(format!("cadimg{pid}b"))?;
    let nc = Netns::new(format!("cadimg{pid}c"))?;
    let nd = Netns::new(format!("cadimg{pid}d"))?;
    make_hosts(&na.0, &nb.0, if_a, if_b)?;
    host(&nc.0, &if_c, C, GW_C)?;
    let _relay = make_vlan_host(&nc.0, &if_c, &nd.0)?;
    let amac = mac_in(&na.0, if_a)?;
    let cmac0 = rig.checker().macs().nic[0].0;
    let hosts = Hosts { a: &na.0, b: &nb.0, if_a, amac, cmac0 };
    let mut failures = exercise(&hosts, &out)?;
    failures.extend(exercise_third_port(&na.0, &nb.0, &nc.0)?);
    // The rig's NIC MACs: 52:54:00:ca:de:0N for port N.
    let cmac2 = [0x52, 0x54, 0x00, 0xca, 0xde, 0x02];
    failures.extend(exercise_vlan(&na.0, &nc.0, &if_c, cmac2, &nd.0)?);
    failures.extend(exercise_jumbo(&na.0, &nb.0, &nc.0, if_a, &if_c, &out, 1 << 20)?);

    // STOP from host A's side (the rig's own socket on the tap no longer sees it).
    let fw = cadence_tests::stop_from_netns(&mut rig, &na.0, if_a)?;
    let summary = format!("{fw:?}");
    cadence_tests::report(&out, &summary, &failures)?;
    check_summary(&|k| fw.require(k), &summary)?;
    // Port 2 carried C's traffic both ways (as in the hosted test).
    let (rx2, tx2) = (fw.require("p2_rx")?, fw.require("p2_tx")?);
    assert!(rx2 >= 9 && tx2 >= 9, "port 2: rx {rx2}, tx {tx2}: {summary}");
    assert_eq!(fw.require("drop_vlan_unknown")?, 1, "the VLAN 200 frame: {summary}");
    assert_eq!(fw.require("acl_denied")?, 3, "D's three datagrams to port 5001: {summary}");
    // The jumbo transfer to C left port 2 in frames far longer than a receive buffer.
    let (tx2_bytes, drops) = (fw.require("p2_tx_bytes")?, fw.require("drop_multi_buffer")?);
    assert!(tx2_bytes / tx2 > 4000, "port 2: {tx2} frames, {tx2_bytes} bytes: {summary}");
    assert_eq!(drops, 0, "{summary}");
    Ok(())
}

/// The image on two igb NICs (QEMU's 82576 on taps) between hosts A and B whose links, like
/// Cadence's ports, have a 9 000-byte MTU: 1 MiB over TCP from A to B byte-exact, in frames
/// received over chained 1 KiB descriptors and sent as descriptor chains (port 1's frames
/// average over 4 000 bytes); ping across first (ARP through the igb ports).
#[test]
fn the_image_on_igb_nics_carries_jumbo_frames_between_two_hosts() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !cadence_harness::netns::can_create() {
        bail!("the router test needs root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_router_tools()?;
    let dir = cadence_tests::out_dir("router_igb_chain");
    std::fs::create_dir_all(&dir)?;
    let toml = dir.join("router.toml");
    std::fs::write(&toml, jumbo_toml(&[0, 1]))?;
    let text = cadence_ctl::chain::load(&toml)?.text;
    let boot = cadence_harness::protocol::BootOptions::default().set("stats_ms", 0);
    let mut rig = cadence_tests::start_with("router_igb", 1, boot, |cfg| {
        cfg.backend = cadence_harness::rig::Backend::Tap { queues: 1 };
        cfg.nic_model = cadence_harness::rig::NicModel::Igb;
        cfg.chain_text = Some(text);
    })?;
    rig.wait_ready(cadence_tests::BOOT_TIMEOUT, &mut |_| {})?;
    if !rig.report.nics.iter().all(|n| n.kind == "igb") || rig.report.nics.len() != 2 {
        bail!("expected two igb NICs, got {:?}\n{}", rig.report.nics, rig.qemu.diagnostics());
    }
    let [if_a, if_b]: [String; 2] =
        rig.tap_ifnames().try_into().map_err(|t: Vec<String>| anyhow!("two taps expected, got {t:?}"))?;
    let out = rig.out_dir.clone();
    let pid = std::process::id();
    let (na, nb) = (Netns::new(format!("cadigb{pid}a"))?, Netns::new(format!("cadigb{pid}b"))?);
    host(&na.0, &if_a, A, GW_A)?;
    host(&nb.0, &if_b, B, GW_B)?;
    let mut failures = Vec::new();
    let p = ping(&na.0, B, 2)?;
    if !p.status.success() {
        failures.push(format!("ping A -> B over igb: {}", String::from_utf8_lossy(&p.stdout)));
    }
    for (ns, ifname) in [(&na.0, &if_a), (&nb.0, &if_b)] {
        ip(&["-n", ns, "link", "set", ifname, "mtu", "9000"])?;
        run(Command::new(IP)
            .args(["netns", "exec", ns, "ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"]))?;
    }
    failures.extend(transfers(&na.0, &[(&nb.0, B, 5301)], &out, 1 << 20)?);
    let fw = cadence_tests::stop_from_netns(&mut rig, &na.0, &if_a)?;
    let summary = format!("{fw:?}");
    cadence_tests::report(&out, &summary, &failures)?;
    let (tx1, tx1_bytes) = (fw.require("p1_tx")?, fw.require("p1_tx_bytes")?);
    assert!(tx1 > 0 && tx1_bytes / tx1 > 4000, "port 1: {tx1} frames, {tx1_bytes} bytes: {summary}");
    assert_eq!(fw.require("p0_rx_err")?, 0, "{summary}");
    Ok(())
}

/// `[[port.mtu]]` records putting `ports` at a 9 000-byte MTU.
fn jumbo_ports(ports: &[u8]) -> String {
    ports.iter().map(|p| format!("[[port.mtu]]\nport = {p}\nmtu = 9000\n")).collect()
}

/// Hosts A and C raise their links (`if_a`, `if_c`) to a 9 000-byte MTU, segments as the
/// wire carries them (no TSO/GSO/GRO): `bytes` over TCP from A to C byte-exact (in jumbo
/// frames, Cadence's ports 0 and 2 at 9 000), and from A to B (behind port 1 at 1 400: A's
/// kernel sends what fits after Cadence's "fragmentation needed"). Returns what failed.
fn exercise_jumbo(a: &str, b: &str, c: &str, if_a: &str, if_c: &str, out: &Path, bytes: usize) -> Result<Vec<String>> {
    for (ns, ifname) in [(a, if_a), (c, if_c)] {
        ip(&["-n", ns, "link", "set", ifname, "mtu", "9000"])?;
        run(Command::new(IP)
            .args(["netns", "exec", ns, "ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"]))?;
    }
    transfers(a, &[(c, C, 5202), (b, B, 5201)], out, bytes)
}

/// TCP bulk transfers of `bytes` from namespace `from` to each `(namespace, address, port)`,
/// what each end printed written to `out/bulk_<address>.txt`: the transfers that were not
/// byte-exact.
fn transfers(from: &str, to: &[(&str, &str, u16)], out: &Path, bytes: usize) -> Result<Vec<String>> {
    let mut failures = Vec::new();
    for &(to_ns, to, port) in to {
        let (sent, got) = bulk(from, to_ns, to, port, bytes)?;
        std::fs::write(out.join(format!("bulk_{to}.txt")), format!("sent {sent}\ngot {got}\n"))?;
        if sent.is_empty() || sent != got || !sent.starts_with(&format!("{bytes} ")) {
            failures.push(format!("TCP A -> {to}: sent {sent:?}, received {got:?}"));
        }
    }
    Ok(failures)
}

/// The chain of the jumbo tests: the L3 forwarder between directly connected subnets, one a
/// port of `ports` (three: A, B, C; two: A, B); ports 0 and 1 at a 9 000-byte MTU, port 2 at
/// Ethernet's 1 500.
fn jumbo_toml(ports: &[u8]) -> String {
    let mut t =
        String::from("[chain]\nnfs = [\"l3fwd\"]\nvalidate = \"l3\"\n\n[neigh]\nretrans_ms = 200\nprobes = 3\n\n");
    for (port, gw) in [(0, GW_A), (1, GW_B), (2, GW_C)].into_iter().filter(|(p, _)| ports.contains(p)) {
        t += &format!(
            "[[port.addr]]\nport = {port}\naddr = \"{gw}/24\"\n\
             [[l3fwd.route]]\nprefix = \"10.78.{port}.0/24\"\nport = {port}\nvia = \"direct\"\n"
        );
    }
    t + &jumbo_ports(&[0, 1])
}

/// Python, in a namespace: accepts one TCP connection on port `argv[1]` (printing `listening`
/// first), reads it to its end, prints the byte count and the SHA-256 of what came.
const TCP_SINK: &str = "import hashlib,socket,sys\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
                        s.bind(('0.0.0.0',int(sys.argv[1])))\ns.listen(1)\ns.settimeout(60)\nprint('listening',flush=True)\n\
                        c,_=s.accept()\nc.settimeout(60)\nh=hashlib.sha256()\nn=0\nwhile True:\n    d=c.recv(65536)\n    \
                        if not d: break\n    h.update(d)\n    n+=len(d)\nc.close()\nprint(n,h.hexdigest(),flush=True)\n";

/// Python, in a namespace: sends `argv[3]` seeded pseudo-random bytes over TCP to `argv[1]`,
/// port `argv[2]`, waits for the far end to close, prints the byte count and their SHA-256.
const TCP_SOURCE: &str = "import hashlib,random,socket,sys\nn=int(sys.argv[3])\ndata=random.Random(27).randbytes(n)\n\
                          s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=60)\ns.sendall(data)\n\
                          s.shutdown(socket.SHUT_WR)\ns.recv(1)\nprint(n,hashlib.sha256(data).hexdigest(),flush=True)\n";

/// A TCP bulk transfer of `bytes` from namespace `from` to `to` (listening in namespace
/// `to_ns`, port `port`): what the sender and the receiver each printed (`count sha256`).
fn bulk(from: &str, to_ns: &str, to: &str, port: u16, bytes: usize) -> Result<(String, String)> {
    let (_sink, mut heard) = listener(to_ns, TCP_SINK, &[&port.to_string()], "TCP sink")?;
    let sent = in_ns(from, &["python3", "-c", TCP_SOURCE, to, &port.to_string(), &bytes.to_string()])?;
    let mut got = String::new();
    heard.read_line(&mut got)?;
    Ok((String::from_utf8_lossy(&sent.stdout).trim().to_string(), got.trim().to_string()))
}

/// Jumbo frames (item 5) with real hosts, on the hosted build's ports, over AF_PACKET and then
/// over AF_XDP: hosts A and B on links of a 9 000-byte MTU (Cadence's ports 0 and 1 at 9 000
/// too) move 4 MiB over TCP byte-exact (SHA-256 on both ends), in frames longer than a buffer
/// (each received over several, sent the same way or whole); host C, also at 9 000 on its link
/// but behind Cadence's port 2 at 1 500, gets the same 4 MiB from A after path-MTU discovery:
/// A's first full-size segments are answered "fragmentation needed" (mtu 1500) and A's kernel
/// sends the rest to fit.
#[test]
fn jumbo_frames_cross_the_hosted_router_byte_exact_and_path_mtu_discovery_works() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !cadence_harness::netns::can_create() {
        bail!("the router test needs root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_router_tools()?;
    let bin = image::build_hosted(Profile::Release)?;
    let out = cadence_tests::out_dir("router_jumbo");
    std::fs::create_dir_all(&out)?;
    let veths = VethPairs::create_ports(1, 3)?;
    let ns: Vec<Netns> =
        ["a", "b", "c"].iter().map(|x| Netns::new(format!("{}{x}", veths.netns))).collect::<Result<_>>()?;
    for ((n, h), (addr, gw)) in ns.iter().zip(&veths.host).zip([(A, GW_A), (B, GW_B), (C, GW_C)]) {
        host(&n.0, h, addr, gw)?;
        ip(&["-n", &n.0, "link", "set", h, "mtu", "9000"])?;
        // Segments as the wire carries them: no TCP or generic segmentation offload on the
        // hosts' links, so every frame is at most the MTU.
        run(Command::new(IP)
            .args(["netns", "exec", &n.0, "ethtool", "-K", h, "tso", "off", "gso", "off", "gro", "off"]))?;
    }
    for d in &veths.dut {
        ip(&["-n", &veths.netns, "link", "set", d, "mtu", "9000"])?;
        run(Command::new(IP).args(["netns", "exec", &veths.netns, "ethtool", "-K", d, "tx", "off", "gro", "off"]))?;
    }
    let toml = out.join("jumbo.toml");
    std::fs::write(&toml, jumbo_toml(&[0, 1, 2]))?;
    let chain = out.join("jumbo.chain");
    std::fs::write(&chain, cadence_ctl::chain::load(&toml)?.text)?;
    // Over AF_PACKET (frames received over several buffers by copy), then over AF_XDP
    // (frames over several UMEM chunks: XDP_USE_SG), the same transfers.
    for (io, base) in [("af_packet", 5100u16), ("af_xdp", 5200)] {
        let dir = out.join(io);
        std::fs::create_dir_all(&dir)?;
        let dp = Dataplane::start_io(&bin, &veths, &chain, io, &[], &dir.join("dataplane.stderr"))?;
        let startup = dp.startup_lines().join("\n");
        let to = [(ns[1].0.as_str(), B, base + 1), (ns[2].0.as_str(), C, base + 2)];
        let failures = transfers(&ns[0].0, &to, &dir, 4 << 20)?;
        let summary = dp.stop()?;
        cadence_tests::report(&dir, &summary, &failures)?;
        // To B, data in jumbo frames: port 1's frames average far above a buffer's 1 984 bytes.
        let (tx1, tx1_bytes) = (counter(&summary, "p1_tx")?, counter(&summary, "p1_tx_bytes")?);
        assert!(tx1 > 0 && tx1_bytes / tx1 > 4000, "{io}: port 1: {tx1} frames, {tx1_bytes} bytes: {summary}");
        assert_eq!(counter(&summary, "drop_multi_buffer")?, 0, "{io}: {summary}");
        // To C: A learned the path MTU from Cadence's answers (in the first run: A's kernel
        // keeps what it learned for the second).
        if io == "af_packet" {
            assert!(counter(&summary, "neigh_too_big")? >= 1, "{summary}");
        } else {
            let sg = "over AF_XDP, frames span several chunks";
            assert!(startup.contains(sg) && startup.contains("kind=af_xdp"), "AF_XDP not multi-buffer:\n{startup}");
        }
    }
    Ok(())
}

/// The MAC of `ifname` in namespace `ns`.
fn mac_in(ns: &str, ifname: &str) -> Result<[u8; 6]> {
    let o = run(Command::new(IP).args(["netns", "exec", ns, "cat", &format!("/sys/class/net/{ifname}/address")]))?;
    let text = String::from_utf8_lossy(&o.stdout);
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next().ok_or_else(|| anyhow!("bad MAC {text:?}"))?, 16)?;
    }
    Ok(mac)
}

//! DPDK 22.11's SWX pipeline through the reference runner (`cadence_bench::swx`, `swx_run.c`),
//! on `dpdk-doc`'s example specs and table files, with every expectation worked out here from
//! the spec's text and the table files — never from DPDK — and the frames built and read with
//! etherparse. The runner is what Cadence's P4 executor will be compared against, so these tests
//! check that it runs DPDK faithfully: each frame comes out (or not) on the port the spec picks,
//! with the bytes the spec writes.
//!
//! `cargo xtask test` installs the packages; the first run fetches DPDK's two internal headers
//! with `apt-get source` (cached in `target/swx/`). Without them these tests fail and say why.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, ensure};
use etherparse::{Ethernet2Header, Ipv4Header, PacketBuilder, UdpHeader};

use cadence_bench::swx::{EXAMPLES, Frame, Job, Mirror, Output, Runner};

fn runner() -> Result<&'static Runner> {
    static R: OnceLock<Result<Runner, String>> = OnceLock::new();
    R.get_or_init(|| Runner::build().map_err(|e| format!("{e:#}"))).as_ref().map_err(|e| anyhow!("{e}"))
}

/// An Ethernet + IPv4 + UDP frame (ports 1000 → 2000) with `n` bytes of payload.
fn udp4(dst_mac: [u8; 6], src_ip: [u8; 4], dst_ip: [u8; 4], ttl: u8, n: usize) -> Vec<u8> {
    udp4_to(dst_mac, src_ip, dst_ip, ttl, n, 2000)
}

/// An Ethernet + IPv4 + UDP frame to UDP port `dport` with `n` bytes of payload.
fn udp4_to(dst_mac: [u8; 6], src_ip: [u8; 4], dst_ip: [u8; 4], ttl: u8, n: usize, dport: u16) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst_mac).ipv4(src_ip, dst_ip, ttl).udp(1000, dport);
    let payload: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let mut v = Vec::with_capacity(b.size(n));
    b.write(&mut v, &payload).expect("frame built");
    v
}

fn on(port: u32, bytes: Vec<u8>) -> Frame {
    Frame { port, bytes }
}

/// The outputs of each input index.
fn by_input(outputs: &[Output]) -> BTreeMap<usize, Vec<&Output>> {
    let mut m: BTreeMap<usize, Vec<&Output>> = BTreeMap::new();
    for o in outputs {
        m.entry(o.input).or_default().push(o);
    }
    m
}

/// The one output of input `i`.
fn single<'a>(m: &BTreeMap<usize, Vec<&'a Output>>, i: usize) -> Result<&'a Output> {
    match m.get(&i).map(Vec::as_slice) {
        Some([o]) => Ok(o),
        other => Err(anyhow!("input {i}: expected one output, got {other:?}")),
    }
}

fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn num(s: &str) -> Result<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .with_context(|| format!("not a number: {s:?}"))
}

/// The entry lines of a table file (DPDK's comments are `;`, `#` and `//`).
fn entry_lines(file: &str) -> Result<Vec<Vec<String>>> {
    let text = std::fs::read_to_string(Path::new(EXAMPLES).join(file)).with_context(|| format!("reading {file}"))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !(l.is_empty() || l.starts_with(';') || l.starts_with('#') || l.starts_with("//")))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect())
}

/// `ARG VALUE` pairs after `action NAME`.
fn action_args(words: &[String]) -> Result<BTreeMap<String, u64>> {
    let at = words.iter().position(|w| w == "action").context("no 'action'")?;
    words[at + 2..]
        .chunks(2)
        .map(|c| Ok((c[0].clone(), num(c.get(1).context("an argument without value")?)?)))
        .collect()
}

#[test]
fn l2fwd_sends_each_frame_back_out_of_its_input_port() -> Result<()> {
    // l2fwd.spec: `rx m.port_in`, `tx m.port_in`, no header touched.
    let frames: Vec<Frame> = (0..8u8)
        .map(|i| on(u32::from(i % 4), udp4([0xaa, 0, 0, 0, 0, i], [10, 0, 0, i], [10, 1, 0, i], 64, 18)))
        .collect();
    let out = runner()?.run(&Job::example("l2fwd", 4), &frames)?;
    let m = by_input(&out);
    ensure!(m.len() == frames.len(), "{} of {} frames came out", m.len(), frames.len());
    for (i, f) in frames.iter().enumerate() {
        let o = single(&m, i)?;
        ensure!(o.port == f.port, "frame {i}: in on {}, out on {}", f.port, o.port);
        ensure!(o.bytes == f.bytes, "frame {i} changed");
    }
    Ok(())
}

#[test]
fn l2fwd_macswp_swaps_the_macs_and_flips_the_port() -> Result<()> {
    // l2fwd_macswp.spec: the table's const default action swaps the Ethernet addresses, then
    // `xor m.port 1` and `tx m.port`.
    let frames: Vec<Frame> = (0..8u8)
        .map(|i| on(u32::from(i % 4), udp4([0xaa, 0, 0, 0, 0, i], [10, 0, 0, i], [10, 1, 0, i], 64, 30)))
        .collect();
    let out = runner()?.run(&Job::example("l2fwd_macswp", 4), &frames)?;
    let m = by_input(&out);
    for (i, f) in frames.iter().enumerate() {
        let o = single(&m, i)?;
        ensure!(o.port == f.port ^ 1, "frame {i}: in on {}, out on {}", f.port, o.port);
        let (eth_in, rest_in) = Ethernet2Header::from_slice(&f.bytes)?;
        let (eth_out, rest_out) = Ethernet2Header::from_slice(&o.bytes)?;
        ensure!(eth_out.destination == eth_in.source && eth_out.source == eth_in.destination, "frame {i}: MACs");
        ensure!(eth_out.ether_type == eth_in.ether_type && rest_out == rest_in, "frame {i}: the rest changed");
    }
    Ok(())
}

/// fib's three table files, read here: the routes of each VRF, the members of each group, and
/// each next hop's (destination MAC, source MAC, ethertype, port).
struct Fib {
    routes: Vec<(u32, u32, u32, u32)>, // vrf, address, mask, group
    groups: BTreeMap<u32, Vec<u32>>,
    hops: BTreeMap<u32, ([u8; 6], [u8; 6], u16, u32)>,
}

impl Fib {
    fn read() -> Result<Self> {
        let mut routes = Vec::new();
        for w in entry_lines("fib_routing_table.txt")? {
            let (addr, mask) = w[2].split_once('/').context("no '/' in the route")?;
            let a = action_args(&w)?;
            routes.push((num(&w[1])? as u32, num(addr)? as u32, num(mask)? as u32, a["nexthop_group_id"] as u32));
        }
        let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for w in entry_lines("fib_nexthop_group_table.txt")? {
            groups.entry(num(&w[1])? as u32).or_default().push(num(&w[3])? as u32);
        }
        let mut hops = BTreeMap::new();
        for w in entry_lines("fib_nexthop_table.txt")? {
            let a = action_args(&w)?;
            let hop = (
                mac(a["ethernet_dst_addr"]),
                mac(a["ethernet_src_addr"]),
                a["ethernet_ethertype"] as u16,
                a["port_out"] as u32,
            );
            hops.insert(num(&w[1])? as u32, hop);
        }
        ensure!(routes.len() >= 16 && groups.len() == 12 && hops.len() == 16, "fib's table files have changed");
        Ok(Self { routes, groups, hops })
    }

    /// The next hops `dst` may leave through in `vrf` (longest prefix; the group's members).
    fn candidates(&self, vrf: u32, dst: u32) -> Vec<u32> {
        let best = self.routes.iter().filter(|r| r.0 == vrf && dst & r.2 == r.1).max_by_key(|r| r.2.count_ones());
        best.and_then(|r| self.groups.get(&r.3)).cloned().unwrap_or_default()
    }
}

fn fib_job() -> Job {
    Job::example("fib", 4)
        .table("routing_table", "fib_routing_table.txt")
        .table("nexthop_group_table", "fib_nexthop_group_table.txt")
        .table("nexthop_table", "fib_nexthop_table.txt")
}

#[test]
fn fib_routes_by_vrf_and_prefix_through_the_groups() -> Result<()> {
    let fib = Fib::read()?;
    // fib.spec: `mov m.vrf_id h.ipv4.src_addr`: the source address is the VRF. VRFs 0–4 have
    // routes; 9 has none (the table's default action drops).
    let mut frames = Vec::new();
    for vrf in [0u32, 1, 2, 3, 4, 9] {
        for top in [0x0au8, 0x46, 0x85, 0xc8] {
            for host in 0..8u8 {
                frames.push(on(0, udp4([2, 0, 0, 0, 0, 2], vrf.to_be_bytes(), [top, 1, host, 7], 17 + host, 22)));
            }
        }
    }
    let out = runner()?.run(&fib_job(), &frames)?;
    let again = runner()?.run(&fib_job(), &frames)?;
    ensure!(out == again, "two runs on the same input differ");
    let m = by_input(&out);
    let mut seen_members: BTreeMap<u32, u32> = BTreeMap::new();
    for (i, f) in frames.iter().enumerate() {
        let (_, l3) = Ethernet2Header::from_slice(&f.bytes)?;
        let (ip_in, payload_in) = Ipv4Header::from_slice(l3)?;
        let want = fib.candidates(u32::from_be_bytes(ip_in.source), u32::from_be_bytes(ip_in.destination));
        if want.is_empty() {
            ensure!(!m.contains_key(&i), "frame {i} (no route) came out: {:?}", m.get(&i));
            continue;
        }
        let o = single(&m, i)?;
        let (eth, l3) = Ethernet2Header::from_slice(&o.bytes)?;
        let hop = want
            .iter()
            .copied()
            .find(|h| fib.hops[h].0 == eth.destination)
            .with_context(|| format!("frame {i}: next hop MAC {:02x?} is none of {want:?}", eth.destination))?;
        *seen_members.entry(hop).or_default() += 1;
        let (dst, src, ethertype, port) = fib.hops[&hop];
        ensure!(eth.source == src && eth.ether_type.0 == ethertype, "frame {i}: next hop {hop}'s header");
        ensure!(o.port == port, "frame {i}: next hop {hop} is on port {port}, went out on {}", o.port);
        ensure!(eth.destination == dst);
        let (ip, payload) = Ipv4Header::from_slice(l3)?;
        ensure!(
            ip.time_to_live == ip_in.time_to_live - 1,
            "frame {i}: TTL {} -> {}",
            ip_in.time_to_live,
            ip.time_to_live
        );
        ensure!(ip.header_checksum == ip.calc_header_checksum(), "frame {i}: IPv4 checksum not updated");
        let unchanged = Ipv4Header { time_to_live: ip_in.time_to_live, header_checksum: ip_in.header_checksum, ..ip };
        ensure!(unchanged == ip_in && payload == payload_in, "frame {i}: more than TTL and checksum changed");
    }
    // The ECMP and WCMP groups spread: every next hop of groups 4–11 was picked at least once.
    for h in 4..12 {
        ensure!(seen_members.contains_key(&h), "next hop {h} never picked: {seen_members:?}");
    }
    Ok(())
}

#[test]
fn vxlan_encapsulates_with_the_table_s_outer_headers() -> Result<()> {
    let mut table: BTreeMap<[u8; 6], BTreeMap<String, u64>> = BTreeMap::new();
    for w in entry_lines("vxlan_table.txt")? {
        table.insert(mac(num(&w[1])?), action_args(&w)?);
    }
    ensure!(table.len() == 16, "vxlan_table.txt has changed: {} entries", table.len());
    // One frame per entry (payload sizes vary the lengths), one whose MAC is in no entry.
    let mut frames: Vec<Frame> = table
        .keys()
        .enumerate()
        .map(|(k, m)| on(0, udp4(*m, [10, 0, 0, k as u8], [10, 9, 0, 1], 32, 10 + 7 * k)))
        .collect();
    frames.push(on(0, udp4([0xaa, 0xbb, 0xcc, 0xdd, 0xff, 0xff], [10, 0, 0, 99], [10, 9, 0, 1], 32, 40)));
    let out = runner()?.run(&Job::example("vxlan", 4).table("vxlan_table", "vxlan_table.txt"), &frames)?;
    let m = by_input(&out);
    ensure!(!m.contains_key(&(frames.len() - 1)), "the frame with no entry came out");
    for (i, f) in frames.iter().enumerate().take(table.len()) {
        let (eth_in, l3) = Ethernet2Header::from_slice(&f.bytes)?;
        let (ip_in, _) = Ipv4Header::from_slice(l3)?;
        let t = &table[&eth_in.destination];
        let o = single(&m, i)?;
        ensure!(u64::from(o.port) == t["port_out"], "frame {i}: port {} not {}", o.port, t["port_out"]);
        let (eth, rest) = Ethernet2Header::from_slice(&o.bytes)?;
        ensure!(eth.destination == mac(t["ethernet_dst_addr"]) && eth.source == mac(t["ethernet_src_addr"]));
        ensure!(u64::from(eth.ether_type.0) == t["ethernet_ethertype"]);
        let (ip, rest) = Ipv4Header::from_slice(rest)?;
        // The spec adds the inner IPv4 total length to the table's 50 (outer IPv4 + UDP + VXLAN
        // + inner Ethernet) and to its checksum, and 30 to UDP's length.
        ensure!(u64::from(ip.total_len) == t["ipv4_total_len"] + u64::from(ip_in.total_len), "frame {i}: outer length");
        ensure!(ip.header_checksum == ip.calc_header_checksum(), "frame {i}: outer IPv4 checksum");
        ensure!(
            ip.source == (t["ipv4_src_addr"] as u32).to_be_bytes()
                && ip.destination == (t["ipv4_dst_addr"] as u32).to_be_bytes()
        );
        ensure!(u64::from(ip.time_to_live) == t["ipv4_ttl"] && u64::from(ip.protocol.0) == t["ipv4_protocol"]);
        let (udp, rest) = UdpHeader::from_slice(rest)?;
        ensure!(u64::from(udp.source_port) == t["udp_src_port"] && udp.destination_port == 4789);
        ensure!(u64::from(udp.length) == t["udp_length"] + u64::from(ip_in.total_len), "frame {i}: UDP length");
        ensure!(usize::from(udp.length) == 8 + rest.len(), "frame {i}: UDP length is not what follows");
        ensure!(udp.checksum == 0);
        let (vxlan, inner) = rest.split_at(8);
        ensure!(u64::from(vxlan[0]) == t["vxlan_flags"], "frame {i}: VXLAN flags");
        let vni = u64::from(u32::from_be_bytes([0, vxlan[4], vxlan[5], vxlan[6]]));
        ensure!(vni == t["vxlan_vni"], "frame {i}: VNI {vni}");
        ensure!(inner == f.bytes.as_slice(), "frame {i}: the inner frame is not the input");
    }
    Ok(())
}

#[test]
fn learner_sends_a_flow_s_later_packets_where_it_learned() -> Result<()> {
    // learner.spec: a miss runs learn_action — port = counter & 3, counter += 1, and the key
    // (the IPv4 destination) is learned with fwd_action(port); a hit runs fwd_action(port). So
    // new flows take ports 0, 1, 2, 3, 0, … and a flow's later packets keep its first port; a
    // second packet that missed would take the next counter value instead.
    let dsts: Vec<[u8; 4]> = (0..6u8).map(|k| [192, 168, 1, k]).collect();
    let mut order: Vec<usize> = (0..5).collect(); // five new flows
    order.extend([0, 1, 2, 3, 4, 4, 2, 0]); // their later packets
    order.push(5); // a sixth new flow
    let frames: Vec<Frame> =
        order.iter().map(|&k| on(0, udp4([2, 0, 0, 0, 0, 9], [10, 0, 0, 1], dsts[k], 64, 26))).collect();
    let out = runner()?.run(&Job::example("learner", 4), &frames)?;
    let m = by_input(&out);
    let mut learned: BTreeMap<usize, u32> = BTreeMap::new();
    let mut counter = 0u32;
    for (i, &k) in order.iter().enumerate() {
        let want = *learned.entry(k).or_insert_with(|| {
            counter += 1;
            (counter - 1) & 3
        });
        let o = single(&m, i)?;
        ensure!(o.port == want, "frame {i} (flow {k}): port {} not {want}", o.port);
        ensure!(o.bytes == frames[i].bytes, "frame {i} changed");
    }
    Ok(())
}

#[test]
fn mirroring_copies_the_marked_frames_to_the_session_s_port() -> Result<()> {
    // mirroring.spec: frames to UDP port 5000 are marked for session 0 (slot 0); every frame
    // leaves on its input port. mirroring.cli's session 0 is port 1, fast clone, whole frames;
    // the second job sends slow clones cut to 64 bytes to port 2.
    let frames: Vec<Frame> = (0..8u8)
        .map(|i| {
            let dport = if i % 2 == 0 { 5000 } else { 5001 };
            on(0, udp4_to([2, 0, 0, 0, 0, 3], [10, 0, 0, i], [10, 1, 0, 1], 64, 40 + usize::from(i), dport))
        })
        .collect();
    for (copy_port, fast, truncate) in [(1u32, true, 0u32), (2, false, 64)] {
        let job = Job::example("mirroring", 4).mirror(Mirror { session: 0, port: copy_port, fast, truncate });
        let out = runner()?.run(&job, &frames)?;
        let m = by_input(&out);
        for (i, f) in frames.iter().enumerate() {
            let outs: Vec<(u32, &[u8])> =
                m.get(&i).map(|v| v.iter().map(|o| (o.port, o.bytes.as_slice())).collect()).unwrap_or_default();
            let cut = if truncate == 0 { f.bytes.len() } else { f.bytes.len().min(truncate as usize) };
            let want: Vec<(u32, &[u8])> = if i % 2 == 0 {
                vec![(0, f.bytes.as_slice()), (copy_port, &f.bytes[..cut])]
            } else {
                vec![(0, f.bytes.as_slice())]
            };
            ensure!(outs == want, "frame {i} (session to port {copy_port}, cut {truncate}): {outs:?}");
        }
    }
    Ok(())
}

/// Every example spec `dpdk-doc` ships, with the table files and mirroring sessions of its CLI
/// script, and the ports its table files use.
fn every_example() -> Vec<(&'static str, Job)> {
    vec![
        ("l2fwd", Job::example("l2fwd", 4)),
        ("l2fwd_macswp", Job::example("l2fwd_macswp", 4)),
        ("fib", fib_job()),
        ("vxlan", Job::example("vxlan", 4).table("vxlan_table", "vxlan_table.txt")),
        ("learner", Job::example("learner", 4)),
        ("selector", Job::example("selector", 4).table("s", "selector.txt")),
        ("varbit", Job::example("varbit", 4)),
        ("registers", Job::example("registers", 4)),
        ("meter", Job::example("meter", 4)),
        (
            "mirroring",
            Job::example("mirroring", 4)
                .mirror(Mirror { session: 0, port: 1, fast: true, truncate: 0 })
                .mirror(Mirror { session: 1, port: 2, fast: false, truncate: 0 })
                .mirror(Mirror { session: 2, port: 3, fast: false, truncate: 64 })
                .mirror(Mirror { session: 3, port: 0, fast: false, truncate: 128 }),
        ),
        ("recirculation", Job::example("recirculation", 4)),
        ("hash_func", Job::example("hash_func", 4)),
    ]
}

#[test]
fn every_example_spec_runs_and_twice_gives_the_same_bytes() -> Result<()> {
    // Varied frames on all four ports: IPv4/UDP of several sizes and destinations, to UDP 5000.
    let frames: Vec<Frame> = (0..24u8)
        .map(|i| {
            let dst = [0x0a + 60 * (i % 4), i, 1, 7];
            let dport = if i % 3 == 0 { 5000 } else { 4000 + u16::from(i) };
            on(
                u32::from(i % 4),
                udp4_to([0xaa, 0xbb, 0xcc, 0xdd, 0, i % 3], [0, 0, 0, i % 5], dst, 64, 18 + 13 * usize::from(i), dport),
            )
        })
        .collect();
    let mut silent = Vec::new();
    for (name, job) in every_example() {
        let a = runner()?.run(&job, &frames).with_context(|| format!("example {name}"))?;
        let b = runner()?.run(&job, &frames).with_context(|| format!("example {name}, again"))?;
        ensure!(a == b, "example {name}: two runs on the same frames differ");
        ensure!(a.iter().all(|o| o.port < job.ports && o.input < frames.len()), "example {name}: {a:?}");
        if a.is_empty() {
            silent.push(name);
        }
    }
    ensure!(silent.is_empty(), "no frame came out of {silent:?}");
    Ok(())
}

#[test]
fn fresh_runs_tell_the_frames_that_read_what_earlier_frames_left() -> Result<()> {
    // A spec that reads a metadata field before writing it: a frame leaves on port 0 when
    // m.seen was 0, on port 1 when an earlier frame on the same pipeline thread set it.
    let dir = std::env::temp_dir().join(format!("cadence-swx-fresh-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let spec = dir.join("stale.spec");
    std::fs::write(
        &spec,
        "struct m_t {\n\tbit<32> port\n\tbit<32> seen\n}\nmetadata instanceof m_t\napply {\n\trx m.port\n\t\
         jmpeq STALE m.seen 1\n\tmov m.seen 1\n\ttx m.port\n\tSTALE : mov m.port 1\n\ttx m.port\n}\n",
    )?;
    let frames: Vec<Frame> = (0..40u8).map(|i| on(0, udp4([2; 6], [1; 4], [2, 0, 0, i], 64, 20))).collect();
    let ports = |fresh: bool| -> Result<Vec<u32>> {
        let out = runner()?.run(&Job { fresh, ..Job::new(&spec, 2) }, &frames)?;
        ensure!(out.len() == frames.len() && out.iter().enumerate().all(|(i, o)| o.input == i));
        Ok(out.iter().map(|o| o.port).collect())
    };
    let (dpdk, fresh) = (ports(false)?, ports(true)?);
    ensure!(fresh.iter().all(|&p| p == 0), "--fresh: a frame saw an earlier one: {fresh:?}");
    ensure!(dpdk.contains(&1), "DPDK's pipeline kept no state from frame to frame: {dpdk:?}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_runt_extracted_past_its_end_is_flagged_not_read() -> Result<()> {
    // `extract` does not check the frame's length: a 10-byte frame loses a 14-byte header that
    // is not emitted again, and its length wraps. The runner reports its length, not its bytes;
    // a long enough frame comes out without the header.
    let dir = std::env::temp_dir().join(format!("cadence-swx-runt-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let spec = dir.join("decap.spec");
    std::fs::write(
        &spec,
        "struct e_t {\n\tbit<48> d\n\tbit<48> s\n\tbit<16> t\n}\nheader eth instanceof e_t\n\
         struct m_t {\n\tbit<32> p\n}\nmetadata instanceof m_t\napply {\n\trx m.p\n\textract h.eth\n\ttx m.p\n}\n",
    )?;
    let frames = [on(0, vec![0x5a; 10]), on(0, (0..60).collect())];
    let out = runner()?.run(&Job::new(&spec, 1), &frames)?;
    let want = vec![
        Output { input: 0, port: 0, bytes: Vec::new(), overrun: Some(10u32.wrapping_sub(14)) },
        Output { input: 1, port: 0, bytes: (14..60).collect(), overrun: None },
    ];
    ensure!(out == want, "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The records of a classic little-endian pcap: (seconds, bytes).
fn read_pcap(data: &[u8]) -> Result<Vec<(u32, Vec<u8>)>> {
    let word = |at: usize| -> Result<u32> {
        let b = data.get(at..at + 4).context("truncated pcap")?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    ensure!(word(0)? == 0xa1b2_c3d4 && word(20)? == 1, "not a microsecond Ethernet pcap");
    let (mut at, mut records) = (24, Vec::new());
    while at < data.len() {
        let (secs, len) = (word(at)?, word(at + 8)? as usize);
        ensure!(word(at + 12)? as usize == len, "captured and original lengths differ");
        records.push((secs, data.get(at + 16..at + 16 + len).context("truncated record")?.to_vec()));
        at += 16 + len;
    }
    Ok(records)
}

#[test]
fn out_pcap_writes_a_file_per_port_stamped_with_the_input_index() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("cadence-swx-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let frames: Vec<Frame> =
        (0..6u8).map(|i| on(u32::from(i % 2), udp4([2; 6], [1; 4], [2, 0, 0, i], 64, usize::from(i)))).collect();
    std::fs::write(dir.join("in.pcap"), cadence_bench::swx::pcap(&frames))?;
    std::fs::write(dir.join("in.ports"), frames.iter().map(|f| format!("{}\n", f.port)).collect::<String>())?;
    let r = runner()?;
    let (mut cmd, _) = r.command();
    let o = cmd
        .arg("--spec")
        .arg(Path::new(EXAMPLES).join("l2fwd_macswp.spec"))
        .args(["--ports", "2", "--in"])
        .arg(dir.join("in.pcap"))
        .arg("--in-ports")
        .arg(dir.join("in.ports"))
        .arg("--out")
        .arg(dir.join("out.txt"))
        .arg("--out-pcap")
        .arg(dir.join("out"))
        .output()?;
    ensure!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = cadence_bench::swx::parse_outputs(&std::fs::read_to_string(dir.join("out.txt"))?)?;
    for port in 0..2u32 {
        let got = read_pcap(&std::fs::read(dir.join(format!("out.port{port}.pcap")))?)?;
        let want: Vec<(u32, Vec<u8>)> =
            records.iter().filter(|r| r.port == port).map(|r| (r.input as u32, r.bytes.clone())).collect();
        ensure!(want.len() == 3 && got == want, "port {port}: the pcap is not the records");
        // l2fwd_macswp sends a frame out of its input port xor 1.
        ensure!(got.iter().all(|(i, _)| frames[*i as usize].port == port ^ 1), "port {port}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_learner_s_file_replaces_its_default_action() -> Result<()> {
    // A learner's table file holds its new default entry: fwd_action(port_out 2) instead of
    // learn_action, so nothing is learned and every frame leaves on port 2; a refused default
    // entry names its file and line.
    let dir = std::env::temp_dir().join(format!("cadence-swx-learner-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (good, bad) = (dir.join("default.txt"), dir.join("bad.txt"));
    std::fs::write(&good, "// the default\naction fwd_action port_out 2\n")?;
    std::fs::write(&bad, "action no_such_action\n")?;
    let frames: Vec<Frame> = (0..6u8).map(|i| on(0, udp4([2; 6], [1; 4], [192, 168, 1, i % 2], 64, 20))).collect();
    let out = runner()?.run(&Job::example("learner", 4).table("fwd_table", &good), &frames)?;
    ensure!(out.len() == frames.len() && out.iter().all(|o| o.port == 2), "{out:?}");
    let e = failure(&Job::example("learner", 4).table("fwd_table", &bad))?;
    ensure!(e.contains("bad.txt line 1: learner fwd_table refused the default entry: action no_such_action"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The runner's error for a job expected to fail.
fn failure(job: &Job) -> Result<String> {
    let frames = [on(0, udp4([2, 0, 0, 0, 0, 2], [0; 4], [10, 0, 0, 1], 64, 18))];
    match runner()?.run(job, &frames) {
        Ok(o) => Err(anyhow!("{} ran ({} outputs) but should have failed", job.spec.display(), o.len())),
        Err(e) => Ok(format!("{e:#}")),
    }
}

#[test]
fn refusals_name_what_failed() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("cadence-swx-refusals-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let spec = |name: &str, text: &str| -> Result<Job> {
        let p = dir.join(name);
        std::fs::write(&p, text)?;
        Ok(Job::new(p, 1))
    };
    // A syntax error: DPDK names the line.
    let e = failure(&spec(
        "syntax.spec",
        "struct m_t {\n\tbot<32> p\n}\nmetadata instanceof m_t\napply {\n\trx m.p\n\ttx m.p\n}\n",
    )?)?;
    ensure!(e.contains("syntax.spec line 2: Invalid struct field statement"), "{e}");
    // An unknown instruction: DPDK reports line 0 and a generic message; the runner says it
    // was the spec.
    let e = failure(&spec(
        "insn.spec",
        "struct m_t {\n\tbit<32> p\n}\nmetadata instanceof m_t\napply {\n\trx m.p\n\tfrobnicate m.p\n\ttx m.p\n}\n",
    )?)?;
    ensure!(e.contains("insn.spec line 0:") && e.contains("codegen refused the spec"), "{e}");
    // A missing spec, a missing table file, a table the spec does not have.
    let e = failure(&Job::example("no_such_spec", 1))?;
    ensure!(e.contains("no_such_spec.spec: No such file or directory"), "{e}");
    let e = failure(&Job::example("fib", 4).table("routing_table", "no_such_table.txt"))?;
    ensure!(e.contains("table file") && e.contains("no_such_table.txt: No such file or directory"), "{e}");
    let e = failure(&Job::example("fib", 4).table("no_such_table", "fib_routing_table.txt"))?;
    ensure!(e.contains("the spec has no table, selector or learner named no_such_table"), "{e}");
    // Bad table lines: an unknown action, a malformed selector line.
    let bad = dir.join("bad_routes.txt");
    std::fs::write(
        &bad,
        "; a comment\nmatch 0 0x00000000/0xC0000000 action nexthop_group_action nexthop_group_id 0\nmatch 0 0x40000000/0xC0000000 action no_such_action\n",
    )?;
    let e = failure(&Job::example("fib", 4).table("routing_table", &bad))?;
    ensure!(e.contains("bad_routes.txt line 3: table routing_table refused the entry: match 0 0x40000000/0xC0000000 action no_such_action"), "{e}");
    let bad = dir.join("bad_groups.txt");
    std::fs::write(&bad, "group 0 member 0 weight 1\ngroup 0 member\n")?;
    let e = failure(&Job::example("fib", 4).table("nexthop_group_table", &bad))?;
    ensure!(e.contains("bad_groups.txt line 2: selector nexthop_group_table: not 'group G member M weight W'"), "{e}");
    // A spec that recirculates every packet forever: the runner gives up and says so.
    let e = failure(&spec(
        "loop.spec",
        "struct m_t {\n\tbit<32> p\n}\nmetadata instanceof m_t\napply {\n\trx m.p\n\trecirculate\n\ttx m.p\n}\n",
    )?)?;
    ensure!(e.contains("frame 0: not done after 1000000 pipeline steps (does the spec loop?)"), "{e}");
    // A `tx` to a port far beyond the configured ones: DPDK does not check; the runner names the
    // frame it crashed on.
    let e = failure(&spec(
        "wild.spec",
        "struct m_t {\n\tbit<32> p\n}\nmetadata instanceof m_t\napply {\n\trx m.p\n\tmov m.p 0x7fffffff\n\ttx m.p\n}\n",
    )?)?;
    ensure!(
        e.contains("the pipeline crashed (signal ")
            && e.contains(") at frame 0: a tx to a port beyond the configured ones"),
        "{e}"
    );
    // EAL refuses its arguments: the runner says it was the EAL.
    let o = std::process::Command::new(&runner()?.bin).args(["--no-such-eal-option", "--", "--ports", "1"]).output()?;
    let e = String::from_utf8_lossy(&o.stderr);
    ensure!(!o.status.success() && e.contains("swx_run: EAL initialisation failed"), "{e}");
    // A frame on an input port the job does not have.
    let frames = [on(0, vec![0; 60]), on(3, vec![0; 60])];
    let e = format!("{:#}", runner()?.run(&Job::example("l2fwd", 2), &frames).err().context("ran on port 3 of 2")?);
    ensure!(e.contains("in.ports line 2: '3' is not an input port below 2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn the_runner_s_record_format_round_trips() -> Result<()> {
    // The pcap the wrapper writes is read back by the runner unchanged: l2fwd's outputs are its
    // inputs, including a runt and a 9000-byte frame.
    let frames = vec![on(0, vec![0xab; 1]), on(0, udp4([2; 6], [1; 4], [2; 4], 1, 9000 - 42)), on(0, vec![7; 60])];
    let out = runner()?.run(&Job::example("l2fwd", 1), &frames)?;
    let got: Vec<(usize, u32, Vec<u8>)> = out.into_iter().map(|o| (o.input, o.port, o.bytes)).collect();
    let want: Vec<(usize, u32, Vec<u8>)> = frames.into_iter().enumerate().map(|(i, f)| (i, 0, f.bytes)).collect();
    ensure!(got == want, "l2fwd changed frames");
    Ok(())
}

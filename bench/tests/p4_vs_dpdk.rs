//! The differential check of issue 28 item 5 (first part): Cadence's P4 executor
//! (`core::p4::exec` over `core::p4::tables::TableSet`) against DPDK 22.11's SWX pipeline
//! (`swx_run`), frame by frame, on the same spec, table files and frames.
//!
//! Per frame: DPDK's outputs (port, bytes) for that input index against Cadence's verdict.
//! Excluded and counted, never compared: frames DPDK leaves undefined — a `--fresh` run gives
//! another output (the frame read what an earlier one left in metadata or header storage), a
//! runt DPDK sent past its buffer (`overrun`) or Cadence found truncated, a frame that read a
//! field of a header that was not valid (`State::read_invalid`: DPDK reads it through the
//! header's pointer into an earlier packet's buffer, which `--fresh` does not reset), and a
//! frame that read metadata it had not written since its `rx` (`State::read_unwritten`: DPDK
//! keeps several packet contexts and clears none, so `--fresh` misses a stale value that
//! happens to be zero; counted with the stale ones). A frame Cadence ends
//! on an instruction it does not run yet (`Fault::Unsupported`, e.g. a selector) is counted as
//! refused by name. Anything else must match, or the test fails naming the spec and frame.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use etherparse::PacketBuilder;

use cadence_bench::swx::{Frame, Job, Output, Runner};
use cadence_core::p4::{self, exec::Fault, exec::State, exec::Verdict, tables::TableSet};

/// A corpus file: under `core/tests/p4`, or `chains/…` (the example chains' own specs).
fn corpus(rel: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if rel.starts_with("chains/") { root.join(rel) } else { root.join("core/tests/p4").join(rel) }
}

/// Ethernet + IPv4 + UDP, `n` payload bytes.
fn udp4(dst_mac: [u8; 6], src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, n: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst_mac).ipv4(src, dst, 64).udp(sport, dport);
    let payload: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let mut v = Vec::with_capacity(b.size(n));
    b.write(&mut v, &payload).expect("frame built");
    v
}

/// The frame mix: IPv4/UDP to addresses that hit and miss the shipped tables (vxlan's MACs,
/// fib's VRFs and prefixes), repeated destinations (learners learn, then hit), TCP-ish and
/// non-IPv4 frames (drops), and a few runts.
fn frames() -> Vec<Frame> {
    let mut v = Vec::new();
    for i in 0..48u8 {
        let dst = [[10, 0, 0, 2], [150, 0, 0, 1], [200, 0, 0, 1], [0x40, 1, 2, 3]][usize::from(i % 4)];
        let mac = [0xaa, 0xbb, 0xcc, 0xdd, 0, i % 6];
        let bytes = udp4(mac, [0, 0, 0, i % 5], dst, 1000 + u16::from(i % 3), 2000, 10 + usize::from(i) * 3);
        v.push(Frame { port: u32::from(i % 4), bytes });
    }
    // Repeats: learners hit what they learned.
    for i in 0..8u8 {
        v.push(Frame {
            port: 0,
            bytes: udp4([0xaa, 0xbb, 0xcc, 0xdd, 0, 1], [0, 0, 0, 1], [10, 0, 0, i % 3], 7, 9, 20),
        });
    }
    // Not IPv4: ARP-typed frame; and IPv6-typed bytes.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 46]);
    v.push(Frame { port: 1, bytes: arp.clone() });
    arp[12..14].copy_from_slice(&[0x86, 0xdd]);
    v.push(Frame { port: 2, bytes: arp });
    // Runts.
    v.push(Frame { port: 0, bytes: vec![0xaa; 20] });
    v.push(Frame {
        port: 3,
        bytes: udp4([0xaa, 0xbb, 0xcc, 0xdd, 0, 2], [1, 1, 1, 1], [10, 0, 0, 2], 1, 2, 0)[..30].to_vec(),
    });
    v
}

#[derive(Debug, Default)]
struct Count {
    compared: usize,
    matched: usize,
    /// Of the matched: sent, and dropped.
    tx: usize,
    drop: usize,
    stale: usize,
    runt: usize,
    /// Frames that read a field of an invalid header (DPDK reads it through a stale pointer).
    invalid: usize,
    refused: BTreeMap<&'static str, usize>,
    /// The output ports of the compared frames that both sent.
    ports: std::collections::BTreeSet<u32>,
    /// The loader's refusal, which names the line and construct.
    loader: Option<String>,
}

fn by_input(outs: &[Output]) -> BTreeMap<usize, Vec<&Output>> {
    let mut m: BTreeMap<usize, Vec<&Output>> = BTreeMap::new();
    for o in outs {
        m.entry(o.input).or_default().push(o);
    }
    m
}

/// Runs one spec both ways; `Err` on the first defined frame that differs.
fn check(runner: &Runner, spec: &str, files: &[(&str, &str)], frames: &[Frame]) -> Result<Count> {
    let spec_path = corpus(spec);
    let text = std::fs::read_to_string(&spec_path)?;
    let program = match p4::load(&text) {
        Ok(p) => p,
        Err(e) => return Ok(Count { loader: Some(e.to_string()), ..Count::default() }),
    };
    let texts: Vec<(&str, String)> =
        files.iter().map(|(t, f)| Ok((*t, std::fs::read_to_string(corpus(f))?))).collect::<Result<_>>()?;
    let texts: Vec<(&str, &str)> = texts.iter().map(|(t, x)| (*t, x.as_str())).collect();
    let mut tables = TableSet::build(&program, &texts).map_err(|e| anyhow!("{spec}: {e}"))?;
    // The NF's way (no read diagnostics) over its own copy of the tables: the same verdict
    // and bytes for every frame, compared or not.
    let mut nf_tables = TableSet::build(&program, &texts).map_err(|e| anyhow!("{spec}: {e}"))?;
    let mut nf_state = State::without_diagnostics(&program);
    let mut nf_out = vec![0u8; 4096];
    let mut job = Job::new(&spec_path, 4);
    for (t, f) in files {
        job.tables.push((t.to_string(), corpus(f)));
    }
    let normal = runner.run(&job, frames).with_context(|| format!("{spec}: DPDK"))?;
    job.fresh = true;
    let fresh = runner.run(&job, frames).with_context(|| format!("{spec}: DPDK --fresh"))?;
    let (normal, fresh) = (by_input(&normal), by_input(&fresh));
    let mut st = State::new(&program);
    let mut out = vec![0u8; 4096];
    let mut c = Count::default();
    for (i, f) in frames.iter().enumerate() {
        let v = st.run_with(&program, &mut tables, &f.bytes, u64::from(f.port), &mut out);
        // The NF's way writes the packet over the frame where the headers fit.
        let mut in_frame = f.bytes.clone();
        let (nf_v, in_place) =
            nf_state.run_in_place(&program, &mut nf_tables, &mut in_frame, u64::from(f.port), &mut nf_out);
        let sent = |v: Verdict, out: &[u8]| match v {
            Verdict::Tx { len, .. } => out.get(..len).map(<[u8]>::to_vec),
            _ => None,
        };
        if nf_v != v || sent(nf_v, if in_place { &in_frame } else { &nf_out }) != sent(v, &out) {
            return Err(anyhow!("{spec}: frame {i}: without diagnostics {nf_v:?}, with them {v:?}"));
        }
        let d = normal.get(&i).cloned().unwrap_or_default();
        if d != fresh.get(&i).cloned().unwrap_or_default() {
            c.stale += 1;
            continue;
        }
        if d.iter().any(|o| o.overrun.is_some()) || v == Verdict::Fault(Fault::Truncated) {
            c.runt += 1;
            continue;
        }
        if st.read_invalid() {
            c.invalid += 1;
            continue;
        }
        if st.read_unwritten() {
            c.stale += 1;
            continue;
        }
        if let Verdict::Fault(Fault::Unsupported(what)) = v {
            *c.refused.entry(what).or_default() += 1;
            continue;
        }
        c.compared += 1;
        let ours: Vec<(u32, &[u8])> = match v {
            Verdict::Tx { port, len } => {
                c.tx += 1;
                c.ports.insert(port as u32);
                vec![(port as u32, &out[..len])]
            }
            Verdict::Drop => {
                c.drop += 1;
                vec![]
            }
            Verdict::Fault(f) => return Err(anyhow!("{spec}: frame {i}: Cadence faulted {f:?}, DPDK sent {d:?}")),
        };
        let theirs: Vec<(u32, &[u8])> = d.iter().map(|o| (o.port, o.bytes.as_slice())).collect();
        if ours != theirs {
            return Err(anyhow!("{spec}: frame {i} differs: Cadence {ours:02x?}, DPDK {theirs:02x?}"));
        }
        c.matched += 1;
    }
    Ok(c)
}

#[test]
fn cadence_runs_the_corpus_as_dpdk_does() -> Result<()> {
    let runner = Runner::build()?;
    let frames = frames();
    let specs: &[(&str, &[(&str, &str)])] = &[
        ("dpdk/l2fwd.spec", &[]),
        ("dpdk/l2fwd_macswp.spec", &[]),
        (
            "dpdk/fib.spec",
            &[
                ("routing_table", "dpdk/fib_routing_table.txt"),
                ("nexthop_group_table", "dpdk/fib_nexthop_group_table.txt"),
                ("nexthop_table", "dpdk/fib_nexthop_table.txt"),
            ],
        ),
        ("dpdk/vxlan.spec", &[("vxlan_table", "dpdk/vxlan_table.txt")]),
        ("dpdk/learner.spec", &[]),
        ("dpdk/selector.spec", &[("s", "dpdk/selector.txt")]),
        ("dpdk/registers.spec", &[]),
        ("dpdk/hash_func.spec", &[]),
        ("p4c/pna-example-pass.p4.spec", &[]),
        ("p4c/pna-add-on-miss.p4.spec", &[]),
        ("p4c/pna-dpdk-add_on_miss0.p4.spec", &[]),
        (
            "p4c/pna-example-tunnel.p4.spec",
            &[("tunnel_encap_set_tunnel_encap", "tables/pna-example-tunnel_set_tunnel_encap.txt")],
        ),
        ("p4c/pna-dpdk-small_sample.p4.spec", &[("ipv4_da", "tables/pna-dpdk-small_sample_ipv4_da.txt")]),
        ("p4c/pna-example-template.p4.spec", &[("ipv4_da_lpm", "tables/pna-example-template_ipv4_da_lpm.txt")]),
        ("p4c/pna-dpdk-add_on_miss1.p4.spec", &[]),
        ("p4c/pna-add_on_miss_action_name.p4.spec", &[]),
        (
            "p4c/pna-example-tcp-connection-tracking.p4.spec",
            &[("set_ct_options", "tables/pna-example-tcp-connection-tracking_set_ct_options.txt")],
        ),
        ("p4c/pna-ipv6-actions.p4.spec", &[]),
        ("p4c/pna-mux-dismantle.p4.spec", &[]),
        ("p4c/pna-subparser.p4.spec", &[]),
        (
            "p4c/pna-example-SelectByDirection.p4.spec",
            &[("ipv4_da_lpm", "tables/pna-example-SelectByDirection_ipv4_da_lpm.txt")],
        ),
        ("p4c/pna-dpdk-table-key-consolidation-learner-1.p4.spec", &[]),
        // The example chain's router (chains/p4-router.toml), which `cargo xtask run` checks
        // frames against through the executor: its routes, drops and TTL rule as DPDK runs them.
        ("chains/p4/router.spec", &[("routes", "chains/p4/router_table.txt")]),
    ];
    // TCP frames with every flag combination of interest (SYN, SYN+ACK, FIN, RST, ACK, none),
    // for the wildcard table on TCP flags; the other specs keep the common mix.
    let mut with_tcp = frames.clone();
    for (i, flags) in [0x02u8, 0x12, 0x01, 0x04, 0x10, 0x00, 0x11, 0x06].into_iter().enumerate() {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [0xaa, 0xbb, 0xcc, 0xdd, 0, 1])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2 + i as u8], 64)
            .tcp(1234, 80, 1000, 512);
        let mut v = Vec::with_capacity(b.size(4));
        b.write(&mut v, &[1, 2, 3, 4]).expect("frame built");
        v[14 + 20 + 13] = flags;
        with_tcp.push(Frame { port: i as u32 % 4, bytes: v });
    }
    // For the selector: frames to group 0 (its group id is the destination MAC's low 32
    // bits, masked to 64 groups; `selector.txt` fills group 0 with members 0..=3 of weights
    // 1, 1, 2, 4, and the member is the output port), over many address pairs, so that the
    // hash spreads them over every member.
    let mut with_groups = frames.clone();
    for i in 0..48u8 {
        let bytes =
            udp4([2, 0, 0, 0, 0, 0x40], [10, 1, i, 1], [10, 2, i.wrapping_mul(7), 3], 1000 + u16::from(i), 53, 8);
        with_groups.push(Frame { port: 0, bytes });
    }
    // For the router: every route of its table file (the hosts' and the rig's, the more
    // specific ones included), the table's drop, no route, and TTLs of 0, 1 and 2.
    let mut with_routes = frames.clone();
    let dsts = [[10, 0, 1, 7], [10, 0, 2, 9], [10, 0, 2, 200], [10, 101, 0, 1], [10, 100, 0, 4], [10, 100, 0, 13]];
    for (i, dst) in dsts.into_iter().chain([[10, 101, 0, 8], [10, 99, 0, 1]]).enumerate() {
        for ttl in [64u8, 2, 1, 0] {
            let mut bytes = udp4([2, 0, 0, 0xca, 0xde, 0], [10, 0, 0, 1], dst, 1000 + i as u16, 53, 18);
            bytes[22] = ttl;
            with_routes.push(Frame { port: i as u32 % 2, bytes });
        }
    }
    let mut failures = Vec::new();
    for (spec, files) in specs {
        let frames = if spec.contains("tcp") {
            &with_tcp
        } else if spec.contains("router") {
            &with_routes
        } else if spec.contains("selector") {
            &with_groups
        } else {
            &frames
        };
        match check(&runner, spec, files, frames) {
            Ok(Count { loader: Some(e), .. }) => {
                println!("{spec}: refused by the loader: {e}");
                if !(e.starts_with("line ") && e.contains('`')) {
                    failures.push(format!("{spec}: a refusal that names no construct: {e}"));
                }
            }
            Ok(c) => {
                println!(
                    "{spec}: {} compared, {} matched ({} tx, {} drop, ports {:?}); excluded {} stale, {} runts, {} invalid-header reads; refused by name {:?}",
                    c.compared, c.matched, c.tx, c.drop, c.ports, c.stale, c.runt, c.invalid, c.refused
                );
                // The selector's hash must have picked every member of group 0 (ports 0..=3),
                // or the comparison says nothing about it.
                if spec.contains("selector") && c.ports.len() < 4 {
                    failures.push(format!("{spec}: only ports {:?}: the frames did not reach every member", c.ports));
                }
                // The router's frames must have left by both ports and been dropped too.
                if spec.contains("router") && (c.ports.len() < 2 || c.drop == 0) {
                    failures
                        .push(format!("{spec}: ports {:?}, {} drops: the routes were not all run", c.ports, c.drop));
                }
            }
            Err(e) => {
                println!("{e:#}");
                failures.push(format!("{e:#}"));
            }
        }
    }
    anyhow::ensure!(failures.is_empty(), "{} specs differ:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}

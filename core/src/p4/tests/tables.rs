//! `TableSet` (Cadence's structures behind the executor's `Tables`) against the test-only
//! linear model `ListTables`: the same frames, the same verdicts, bytes and metadata, per kind
//! (exact, lpm, wildcard, learner).

use super::super::exec::{State, Tables, Verdict};
use super::super::tables::{BuildError, TableSet};
use super::super::*;
use super::exec::{ListTables, corpus, frame};

/// Runs `f` through `p` with both table sets; asserts the same verdict, output and metadata.
fn same(p: &Program, a: &mut TableSet, b: &mut ListTables, sa: &mut State, sb: &mut State, f: &[u8]) -> Verdict {
    let (mut oa, mut ob) = ([0u8; 256], [0u8; 256]);
    let va = sa.run_with(p, a as &mut dyn Tables, f, 0, &mut oa);
    let vb = sb.run_with(p, b as &mut dyn Tables, f, 0, &mut ob);
    assert_eq!(va, vb, "frame {f:02x?}");
    if let Verdict::Tx { len, .. } = va {
        assert_eq!(oa[..len], ob[..len]);
    }
    assert_eq!(sa.meta(), sb.meta());
    va
}

#[test]
fn exact_vxlan_hits_and_misses_as_the_model() {
    let p = load(&corpus("vxlan.spec")).unwrap();
    let text = corpus("vxlan_table.txt");
    let mut a = TableSet::build(&p, &[("vxlan_table", &text)]).unwrap();
    let mut b = ListTables::new(&p, &[("vxlan_table", "vxlan_table.txt")]);
    let (mut sa, mut sb) = (State::new(&p), State::new(&p));
    let mut f = frame();
    let mut hits = 0;
    for last in 0..=40u8 {
        f[..6].copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd, 0x00, last]);
        if matches!(same(&p, &mut a, &mut b, &mut sa, &mut sb, &f), Verdict::Tx { .. }) {
            hits += 1;
        }
    }
    assert!(hits > 0 && hits < 41, "hits and misses: {hits}");
}

#[test]
fn lpm_fib_routes_as_the_model() {
    let p = load(&corpus("fib.spec")).unwrap();
    let (rt, nh) = (corpus("fib_routing_table.txt"), corpus("fib_nexthop_table.txt"));
    let mut a = TableSet::build(&p, &[("routing_table", &rt), ("nexthop_table", &nh)]).unwrap();
    let mut b =
        ListTables::new(&p, &[("routing_table", "fib_routing_table.txt"), ("nexthop_table", "fib_nexthop_table.txt")]);
    let (mut sa, mut sb) = (State::new(&p), State::new(&p));
    let mut f = frame();
    for vrf in 0..6u8 {
        for dst in [[10u8, 0, 0, 2], [150, 0, 0, 1], [200, 0, 0, 1], [0x40, 1, 2, 3], [255, 255, 255, 255]] {
            f[26..30].copy_from_slice(&[0, 0, 0, vrf]);
            f[30..34].copy_from_slice(&dst);
            same(&p, &mut a, &mut b, &mut sa, &mut sb, &f);
        }
    }
    // VRF 3: 0xC0/2 -> group 6 (the longest prefix).
    f[26..30].copy_from_slice(&[0, 0, 0, 3]);
    f[30..34].copy_from_slice(&[200, 0, 0, 1]);
    same(&p, &mut a, &mut b, &mut sa, &mut sb, &f);
    assert_eq!(&sa.meta()[16..20], &6u32.to_le_bytes());
}

const ACL: &str = "\
struct eth_h {
    bit<48> dst
    bit<48> src
    bit<16> type
}
struct ipv4_h {
    bit<8> ver_ihl
    bit<8> tos
    bit<16> len
    bit<16> id
    bit<16> frag
    bit<8> ttl
    bit<8> proto
    bit<16> ck
    bit<32> src
    bit<32> dst
}
struct fwd_t {
    bit<32> port
}
struct meta_t {
    bit<32> port
}
header eth instanceof eth_h
header ipv4 instanceof ipv4_h
metadata instanceof meta_t
action fwd args instanceof fwd_t {
    mov m.port t.port
    return
}
action other args none {
    mov m.port 7
    return
}
table acl {
    key {
        h.ipv4.src wildcard
        h.ipv4.dst wildcard
    }
    actions {
        fwd
        other
    }
    default_action other args none
    size 16
}
apply {
    rx m.port
    extract h.eth
    extract h.ipv4
    table acl
    emit h.eth
    emit h.ipv4
    tx m.port
}
";

const ACL_TABLE: &str = "\
match 0x0a000000/0xff000000 0x00000000/0x00000000 priority 5 action fwd port 1
match 0x0a000001/0xffffffff 0x0a000002/0xffffffff priority 1 action fwd port 2
match 0x00000000/0x00000000 0x0a000002/0xffffffff priority 5 action fwd port 3
";

#[test]
fn wildcard_lowest_priority_then_file_order_as_the_model() {
    let p = load(ACL).unwrap();
    let mut a = TableSet::build(&p, &[("acl", ACL_TABLE)]).unwrap();
    let mut b = ListTables::from_texts(&p, &[("acl", ACL_TABLE)]);
    let (mut sa, mut sb) = (State::new(&p), State::new(&p));
    let mut f = frame();
    let mut port = |src: [u8; 4], dst: [u8; 4]| {
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        match same(&p, &mut a, &mut b, &mut sa, &mut sb, &f) {
            Verdict::Tx { port, .. } => port,
            v => panic!("{v:?}"),
        }
    };
    assert_eq!(port([10, 0, 0, 1], [10, 0, 0, 2]), 2, "priority 1 wins");
    assert_eq!(port([10, 0, 0, 9], [10, 0, 0, 2]), 1, "equal priorities: the file's first");
    assert_eq!(port([11, 0, 0, 9], [10, 0, 0, 2]), 3);
    assert_eq!(port([11, 0, 0, 9], [10, 0, 0, 3]), 7, "miss: the default");
}

#[test]
fn learner_learns_rearms_and_expires() {
    let p = load(&corpus("learner.spec")).unwrap();
    let mut a = TableSet::build(&p, &[]).unwrap();
    let mut b = ListTables::new(&p, &[]);
    let (mut sa, mut sb) = (State::new(&p), State::new(&p));
    let mut f = frame();
    for last in [2u8, 3, 4, 5, 6, 3, 2, 6] {
        f[33] = last;
        same(&p, &mut a, &mut b, &mut sa, &mut sb, &f);
    }
    assert_eq!(a.learned(0), 5);
    // Timeout id 1: 120 s. At 100 s, 10.0.0.3 is rearmed; at 200 s it is still there (rearmed at
    // 100 s), the others expired.
    a.set_time_ns(100_000_000_000);
    f[33] = 3;
    let mut out = [0u8; 256];
    assert_eq!(sa.run_with(&p, &mut a, &f, 0, &mut out), Verdict::Tx { port: 1, len: f.len() });
    a.set_time_ns(200_000_000_000);
    assert_eq!(a.learned(0), 1);
}

#[test]
fn refusals_name_the_table() {
    let p = load(&corpus("vxlan.spec")).unwrap();
    let e = TableSet::build(&p, &[("vxlan_table", "match 0x1 action nosuch\n")]).unwrap_err();
    assert!(e.to_string().starts_with("table `vxlan_table`: line 1"), "{e}");
    let e = TableSet::build(&p, &[("vxlan_table", "action drop\n")]).unwrap_err();
    assert!(e.to_string().starts_with("table `vxlan_table`: a default entry"), "{e}");
    let e = TableSet::build(&p, &[("nope", "")]).unwrap_err();
    assert!(matches!(e, BuildError::Refused { .. }), "{e}");
}

fn p4c(name: &str) -> Program {
    let path = format!("{}/tests/p4/p4c/{name}", env!("CARGO_MANIFEST_DIR"));
    load(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn reads_of_unwritten_metadata_are_flagged() {
    // pna-example-template: a frame that is not IPv4 skips the table and sends to
    // m.pna_main_output_metadata_output_port, which it never wrote.
    let p = p4c("pna-example-template.p4.spec");
    let rt = "match 0x0a000000/0xff000000 action next_hop vport 1\n";
    let mut t = TableSet::build(&p, &[("ipv4_da_lpm", rt)]).unwrap();
    let mut st = State::new(&p);
    let mut out = [0u8; 256];
    let mut f = frame();
    assert_eq!(st.run_with(&p, &mut t, &f, 0, &mut out), Verdict::Tx { port: 1, len: f.len() });
    assert!(!st.read_unwritten() && !st.read_invalid(), "IPv4 hit: the port was written by next_hop");
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    assert_eq!(st.run_with(&p, &mut t, &f, 0, &mut out), Verdict::Tx { port: 1, len: f.len() });
    assert!(st.read_unwritten(), "IPv6-typed: the output port is what the last packet left");
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    st.run_with(&p, &mut t, &f, 0, &mut out);
    assert!(!st.read_unwritten(), "reset by rx");
}

#[test]
fn reads_of_an_invalid_header_are_flagged() {
    // ACL (above) keys on h.ipv4 fields; a frame too short for IPv4 cannot get there, so use a
    // spec that reads h.ipv4 without checking: its key of an IPv6-typed frame.
    let p = load(&ACL.replace(
        "    extract h.ipv4\n",
        "    jmpneq SKIP h.eth.type 0x0800\n    extract h.ipv4\n    SKIP : mov m.port 0\n",
    ))
    .unwrap();
    let mut t = TableSet::build(&p, &[("acl", ACL_TABLE)]).unwrap();
    let mut st = State::new(&p);
    let mut out = [0u8; 256];
    let mut f = frame();
    st.run_with(&p, &mut t, &f, 0, &mut out);
    assert!(!st.read_invalid());
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    st.run_with(&p, &mut t, &f, 0, &mut out);
    assert!(st.read_invalid(), "the acl key reads h.ipv4 of a frame without one");
}

#[test]
fn metadata_no_instruction_writes_is_not_flagged() {
    // A field nothing writes is always zero (in DPDK too): reading it is defined.
    let spec = ACL
        .replace("struct meta_t {\n    bit<32> port\n}", "struct meta_t {\n    bit<32> port\n    bit<32> unused\n}")
        .replace("    mov m.port 7\n", "    mov m.port m.unused\n");
    let p = load(&spec).unwrap();
    let mut t = TableSet::build(&p, &[("acl", ACL_TABLE)]).unwrap();
    let mut st = State::new(&p);
    let mut out = [0u8; 256];
    let mut f = frame();
    f[30..34].copy_from_slice(&[10, 0, 0, 9]);
    f[26..30].copy_from_slice(&[11, 0, 0, 9]);
    assert_eq!(st.run_with(&p, &mut t, &f, 0, &mut out), Verdict::Tx { port: 0, len: f.len() });
    assert!(!st.read_unwritten());
}

/// The member a selector's group table gives for `hash` (group 0).
fn members(t: &mut TableSet, hashes: core::ops::Range<u32>) -> std::vec::Vec<u32> {
    hashes.map(|h| Tables::select(t, 0, 0, h)).collect()
}

/// DPDK's layout of a group (`rte_swx_table_selector.c`, `group_set`): `selector.txt`'s
/// weights 1, 1, 2, 4 over 16 places; weights with a common divisor normalised first, and the
/// remainder of 16 over their sum handed out in member order.
#[test]
fn selector_groups_are_laid_out_as_dpdk_lays_them_out() {
    let p = load(&corpus("selector.spec")).unwrap();
    let text = corpus("selector.txt");
    let mut t = TableSet::build(&p, &[("s", &text)]).unwrap();
    let want: std::vec::Vec<u32> =
        [(0, 2), (1, 2), (2, 4), (3, 8)].iter().flat_map(|&(m, n)| core::iter::repeat_n(m, n)).collect();
    assert_eq!(members(&mut t, 0..16), want);
    // The hash's low bits pick the place: 16 places, so hash 16 + i is place i.
    assert_eq!(members(&mut t, 16..32), want);
    // Another group of the 64 (none here): DPDK's zeros.
    assert_eq!(Tables::select(&mut t, 0, 5, 7), 0);
    // 2, 4, 6: divided by 2 → 1, 2, 3 (sum 6); 16 / 6 = 2 each plus the remainder 4 in order
    // (1 to the first, 2 to the second, 1 to the third): 3, 6, 7 places.
    let mut t = TableSet::build(
        &p,
        &[("s", "group 0 member 0 weight 2\ngroup 0 member 1 weight 4\ngroup 0 member 2 weight 6\n")],
    )
    .unwrap();
    let want: std::vec::Vec<u32> =
        [(0, 3), (1, 6), (2, 7)].iter().flat_map(|&(m, n)| core::iter::repeat_n(m, n)).collect();
    assert_eq!(members(&mut t, 0..16), want);
    // A member named again takes the new weight in its place (DPDK's member add): 3 and 1.
    let mut t = TableSet::build(
        &p,
        &[("s", "group 0 member 0 weight 1\ngroup 0 member 1 weight 1\ngroup 0 member 0 weight 3\n")],
    )
    .unwrap();
    let want: std::vec::Vec<u32> = [(0, 12), (1, 4)].iter().flat_map(|&(m, n)| core::iter::repeat_n(m, n)).collect();
    assert_eq!(members(&mut t, 0..16), want);
}

/// What DPDK's `group_set` refuses is refused at build, naming the selector.
#[test]
fn selector_groups_dpdk_refuses_are_refused() {
    let p = load(&corpus("selector.spec")).unwrap();
    for (text, why) in [
        ("group 0 member 0 weight 9\ngroup 0 member 1 weight 8\n", "more than n_members_per_group_max"),
        ("group 0 member 16 weight 1\n", "past n_members_per_group_max"),
    ] {
        match TableSet::build(&p, &[("s", text)]) {
            Err(BuildError::Refused { table, reason }) => {
                assert_eq!(table, "s");
                assert!(reason.contains(why), "{text:?}: {reason}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

/// A selector whose fields span more than 64 bytes is refused when the spec loads, naming its
/// line, as DPDK refuses it when the pipeline is built.
#[test]
fn a_selector_over_64_bytes_is_refused_at_load() {
    let text = corpus("selector.spec").replace("\tbit<8> protocol\n", "\tbit<8> protocol\n\tbit<512> pad\n");
    let e = load(&text).expect_err("a 73-byte selector span");
    let line = text.lines().position(|l| l.starts_with("selector s")).map_or(0, |i| i + 1);
    assert!(e.to_string().starts_with(&format!("line {line}")), "{e}");
    assert!(e.to_string().contains("64 bytes"), "{e}");
}

//! The executor's first step over frames: extract/emit with validity, ALU, checksums,
//! registers, jumps, default actions of empty tables, and its faults.

use super::super::exec::{Fault, Hit, State, Tables, Verdict};
use super::super::*;

pub(super) fn corpus(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/p4/dpdk/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Ethernet (dst 02:..:01, src 02:..:02, IPv4) + a 20-byte IPv4 header with a correct checksum
/// + 4 bytes of payload.
pub(super) fn frame() -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 24, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    let ck = checksum(&ip);
    ip[10..12].copy_from_slice(&ck.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    f
}

/// The Internet checksum of `b` (RFC 1071), from scratch.
fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))).sum();
    while s >> 16 != 0 {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

#[test]
fn l2fwd_macswp_swaps_and_picks_the_other_port() {
    let p = load(&corpus("l2fwd_macswp.spec")).unwrap();
    let mut st = State::new(&p);
    let f = frame();
    let mut out = [0u8; 128];
    assert_eq!(st.run(&p, &f, 4, &mut out), Verdict::Tx { port: 5, len: f.len() });
    assert_eq!(out[..6], f[6..12]);
    assert_eq!(out[6..12], f[..6]);
    assert_eq!(out[12..f.len()], f[12..]);
}

#[test]
fn l2fwd_passes_the_frame_unchanged() {
    let p = load(&corpus("l2fwd.spec")).unwrap();
    let mut st = State::new(&p);
    let f = frame();
    let mut out = [0u8; 128];
    assert_eq!(st.run(&p, &f, 7, &mut out), Verdict::Tx { port: 7, len: f.len() });
    assert_eq!(out[..f.len()], f[..]);
}

#[test]
fn empty_tables_run_their_default_action() {
    // fib: routing_table is empty, its default action drops.
    let p = load(&corpus("fib.spec")).unwrap();
    let mut st = State::new(&p);
    let mut out = [0u8; 128];
    assert_eq!(st.run(&p, &frame(), 0, &mut out), Verdict::Drop);
    // vxlan too.
    let p = load(&corpus("vxlan.spec")).unwrap();
    let mut st = State::new(&p);
    assert_eq!(st.run(&p, &frame(), 0, &mut out), Verdict::Drop);
}

#[test]
fn registers_count_per_source_address() {
    let p = load(&corpus("registers.spec")).unwrap();
    let mut st = State::new(&p);
    let f = frame();
    let mut out = [0u8; 128];
    for _ in 0..3 {
        assert_eq!(st.run(&p, &f, 2, &mut out), Verdict::Tx { port: 3, len: f.len() });
    }
    // regadd pkt_counters h.ipv4.src_addr 1; regadd byte_counters h.ipv4.src_addr h.ipv4.total_len
    let idx = 0x0a00_0001 & (65536 - 1);
    assert_eq!((st.reg(0, idx), st.reg(1, idx)), (Some(3), Some(3 * 24)));
}

#[test]
fn not_yet_run_instructions_fault_by_name() {
    let p = load(&corpus("hash_func.spec")).unwrap();
    let mut st = State::new(&p);
    let mut out = [0u8; 128];
    let mut f = frame();
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 12, 0, 0]);
    // hash jhash m.hash m.src_addr m.dst_port: 13 bytes of metadata in host order.
    let mut key = vec![];
    key.extend_from_slice(&0x0a00_0001u32.to_le_bytes());
    key.extend_from_slice(&0x0a00_0002u32.to_le_bytes());
    key.push(17);
    key.extend_from_slice(&u16::from_be_bytes([f[34], f[35]]).to_le_bytes());
    key.extend_from_slice(&u16::from_be_bytes([f[36], f[37]]).to_le_bytes());
    let port = u64::from(super::super::hash::jhash(&key, 0) & 3);
    assert_eq!(st.run(&p, &f, 0, &mut out), Verdict::Tx { port, len: f.len() });
    // A selector with no groups picks member 0, as DPDK's zeroed group table does (here the
    // member is the output port).
    let p = load(&corpus("selector.spec")).unwrap();
    let mut st = State::new(&p);
    assert_eq!(st.run(&p, &f, 0, &mut out), Verdict::Tx { port: 0, len: f.len() });
}

const ROUTER: &str = "\
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
struct meta_t {
    bit<32> port
    bit<16> type
    bit<8> ttl
    bit<32> loops
}
header eth instanceof eth_h
header ipv4 instanceof ipv4_h
metadata instanceof meta_t
apply {
    rx m.port
    extract h.eth
    mov m.type h.eth.type
    jmpneq DROP m.type 0x0800
    extract h.ipv4
    jmplt DROP h.ipv4.ttl 2
    cksub h.ipv4.ck h.ipv4.ttl
    sub h.ipv4.ttl 1
    ckadd h.ipv4.ck h.ipv4.ttl
    mov m.ttl h.ipv4.ttl
    jmpeq FULL m.port 9
    jmpeq INVAL m.port 8
    emit h.eth
    emit h.ipv4
    tx 1
    FULL : mov h.ipv4.ck 0
    ckadd h.ipv4.ck h.ipv4
    emit h.eth
    emit h.ipv4
    tx 2
    INVAL : invalidate h.eth
    emit h.eth
    emit h.ipv4
    tx 3
    DROP : drop
}
";

#[test]
fn ttl_decrement_keeps_the_checksum_right_both_ways() {
    let p = load(ROUTER).unwrap();
    let mut st = State::new(&p);
    let f = frame();
    let mut out = [0u8; 128];
    for (port_in, port_out) in [(0, 1), (9, 2)] {
        assert_eq!(st.run(&p, &f, port_in, &mut out), Verdict::Tx { port: port_out, len: f.len() });
        let ip = &out[14..34];
        assert_eq!(ip[8], 63, "ttl");
        assert_eq!(checksum(ip), 0, "header checksum verifies (port {port_in})");
        assert_eq!(&out[34..f.len()], &f[34..]);
    }
    assert_eq!(st.meta()[6], 63, "m.ttl in host order");
}

#[test]
fn validity_decides_what_is_emitted() {
    let p = load(ROUTER).unwrap();
    let mut st = State::new(&p);
    let f = frame();
    let mut out = [0u8; 128];
    assert_eq!(st.run(&p, &f, 8, &mut out), Verdict::Tx { port: 3, len: f.len() - 14 });
    assert_eq!(out[0], 0x45);
    assert!(!st.valid(0) && st.valid(1));
}

#[test]
fn faults_and_drops() {
    let p = load(ROUTER).unwrap();
    let mut st = State::new(&p);
    let f = frame();
    let mut out = [0u8; 128];
    assert_eq!(st.run(&p, &f[..20], 0, &mut out), Verdict::Fault(Fault::Truncated));
    let mut arp = f.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(st.run(&p, &arp, 0, &mut out), Verdict::Drop);
    let mut old = f.clone();
    old[14 + 8] = 1;
    assert_eq!(st.run(&p, &old, 0, &mut out), Verdict::Drop);
    assert_eq!(st.run(&p, &f, 0, &mut out[..10]), Verdict::Fault(Fault::OutputTooSmall));
    let looping = ROUTER.replace("    DROP : drop", "    DROP : add m.loops 1\n    jmp DROP2\n    DROP2 : jmp DROP");
    let p = load(&looping).unwrap();
    let mut st = State::new(&p);
    assert_eq!(st.run(&p, &arp, 0, &mut out), Verdict::Fault(Fault::StepLimit));
}

/// A reference entry: (value, mask, priority, action, args).
type RefEntry = (Vec<u8>, Vec<u8>, u32, ActionId, Vec<u8>);
/// A learned entry: (key, action, args, timeout id).
type Learned = (Vec<u8>, ActionId, Vec<u8>, u64);

/// A reference for [`Tables`]: each table's entries from a table file, matched by a linear
/// scan (value under mask, the lowest priority number wins, the first of equals).
pub(super) struct ListTables {
    /// Per table of the program: (value, mask, priority, action, args).
    tables: Vec<Vec<RefEntry>>,
    /// Per learner: (key, action, args, timeout id), in the order learned.
    learners: Vec<Vec<Learned>>,
    rearms: usize,
}

impl ListTables {
    pub(super) fn new(p: &Program, files: &[(&str, &str)]) -> Self {
        let files: Vec<(&str, String)> = files.iter().map(|(t, f)| (*t, corpus(f))).collect();
        let files: Vec<(&str, &str)> = files.iter().map(|(t, f)| (*t, f.as_str())).collect();
        Self::from_texts(p, &files)
    }

    /// As `new`, with the table files' text.
    pub(super) fn from_texts(p: &Program, files: &[(&str, &str)]) -> Self {
        let mut tables = vec![Vec::new(); p.tables.len()];
        for (table, file) in files {
            let i = p.tables.iter().position(|t| t.name == *table).unwrap();
            for e in entry::parse_file(p, &p.tables[i], file).unwrap() {
                let entry::Entry::Match { key, priority, action, .. } = e else { continue };
                let value = key.iter().flat_map(|k| k.value.clone()).collect();
                let mask =
                    key.iter().flat_map(|k| k.mask.clone().unwrap_or_else(|| vec![0xFF; k.value.len()])).collect();
                tables[i].push((value, mask, priority, action.action, action.args));
            }
        }
        ListTables { tables, learners: vec![Vec::new(); p.learners.len()], rearms: 0 }
    }
}

impl Tables for ListTables {
    fn lookup(&mut self, table: TableRef, key: &[u8]) -> Option<Hit<'_>> {
        match table {
            TableRef::Table(t) => self.tables[usize::from(t)]
                .iter()
                .enumerate()
                .filter(|(_, (v, m, ..))| {
                    v.len() == key.len() && key.iter().zip(v).zip(m).all(|((k, v), m)| k & m == v & m)
                })
                .min_by_key(|(_, e)| e.2)
                .map(|(i, (_, _, _, a, args))| Hit { action: *a, args, entry: i as u32 }),
            TableRef::Learner(l) => self.learners[usize::from(l)]
                .iter()
                .enumerate()
                .find(|(_, e)| e.0 == key)
                .map(|(i, (_, a, args, _))| Hit { action: *a, args, entry: i as u32 }),
            TableRef::Selector(_) => None,
        }
    }

    fn learn(&mut self, l: u16, key: &[u8], action: ActionId, args: &[u8], tid: u64) -> Result<bool, Fault> {
        let list = &mut self.learners[usize::from(l)];
        if list.iter().any(|e| e.0 == key) {
            return Ok(false);
        }
        list.push((key.to_vec(), action, args.to_vec(), tid));
        Ok(true)
    }

    fn rearm(&mut self, _: u16, _: &[u8], _: Option<u64>) -> Result<(), Fault> {
        self.rearms += 1;
        Ok(())
    }
}

#[test]
fn learner_adds_on_miss_then_hits() {
    let p = load(&corpus("learner.spec")).unwrap();
    let mut tables = ListTables::new(&p, &[]);
    let mut st = State::new(&p);
    let mut out = [0u8; 128];
    let mut f = frame();
    let port =
        |st: &mut State, tables: &mut ListTables, f: &[u8], out: &mut [u8]| match st.run_with(&p, tables, f, 0, out) {
            Verdict::Tx { port, .. } => port,
            v => panic!("{v:?}"),
        };
    // New destinations: learn_action sends to (counter & 3) and learns fwd_action with that port.
    for (i, last) in [2u8, 3, 4, 5, 6].into_iter().enumerate() {
        f[33] = last;
        assert_eq!(port(&mut st, &mut tables, &f, &mut out), i as u64 & 3, "new flow {i}");
    }
    assert_eq!(tables.learners[0].len(), 5);
    assert_eq!(tables.learners[0][4].0, [10, 0, 0, 6], "the key: h.ipv4.dst_addr");
    assert_eq!(tables.learners[0][4].2, 0u32.to_le_bytes(), "args from m.fwd_action_arg_port_out: 4 & 3");
    assert_eq!(tables.learners[0][4].3, 1, "m.timeout_id");
    // A known destination hits fwd_action (rearm), same port as learned.
    f[33] = 3;
    assert_eq!(port(&mut st, &mut tables, &f, &mut out), 1);
    assert_eq!((tables.rearms, st.reg(0, 0)), (1, Some(5)));
    // Without a table behind it, `learn` is refused by name.
    assert_eq!(st.run(&p, &f, 0, &mut out), Verdict::Fault(Fault::Unsupported("learn")));
}

#[test]
fn vxlan_encapsulates_with_the_table_file_entries() {
    let p = load(&corpus("vxlan.spec")).unwrap();
    let mut tables = ListTables::new(&p, &[("vxlan_table", "vxlan_table.txt")]);
    let mut st = State::new(&p);
    let mut f = frame();
    f[..6].copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd, 0x00, 0x02]);
    let mut out = [0u8; 256];
    // match 0xaabbccdd0002 action vxlan_encap ethernet_dst_addr 0xa0a1a2a30002 … ipv4_total_len 50
    // … ipv4_hdr_checksum 0xe924 … udp_length 30 … vxlan_vni 2 … port_out 2
    let Verdict::Tx { port, len } = st.run_with(&p, &mut tables, &f, 0, &mut out) else { panic!("sent") };
    assert_eq!((port, len), (2, 14 + 20 + 8 + 8 + f.len()));
    assert_eq!(out[..6], [0xa0, 0xa1, 0xa2, 0xa3, 0x00, 0x02]);
    let outer_ip = &out[14..34];
    assert_eq!(u16::from_be_bytes([outer_ip[2], outer_ip[3]]), 50 + 24, "outer total length");
    assert_eq!(checksum(outer_ip), 0, "the outer header checksum (0xe924 + ckadd of the inner length) verifies");
    assert_eq!(u16::from_be_bytes([out[38], out[39]]), 30 + 24, "UDP length");
    assert_eq!(&out[14 + 20 + 8 + 4..14 + 20 + 8 + 7], &[0, 0, 2], "VNI");
    assert_eq!(out[50..len], f[..]);
    // An address with no entry: the default action drops.
    f[5] = 0x77;
    assert_eq!(st.run_with(&p, &mut tables, &f, 0, &mut out), Verdict::Drop);
}

/// The loader fuses vxlan_encap's runs of `mov h.F t.A` into `MovRun`s (the executor runs
/// those); the test above checks the bytes they write, the differential check holds them
/// to DPDK.
#[test]
fn runs_of_moves_of_action_data_are_fused() {
    let p = load(&corpus("vxlan.spec")).unwrap();
    let a = &p.actions[usize::from(p.action("vxlan_encap").unwrap())];
    let movs = a.instrs.iter().filter(|i| matches!(i, Instr::Mov { .. })).count();
    let runs: Vec<usize> = a
        .run
        .iter()
        .filter_map(|i| match *i {
            Instr::MovRun { run } => Some(p.mov_runs[usize::from(run)].moves.len()),
            _ => None,
        })
        .collect();
    assert!(runs.len() >= 4 && runs.iter().all(|&n| n >= 2), "{runs:?}");
    let left = a.run.iter().filter(|i| matches!(i, Instr::Mov { .. })).count();
    assert_eq!(runs.iter().sum::<usize>() + left, movs, "every mov is run once");
    assert_eq!(a.run.len(), a.instrs.len() - runs.iter().map(|n| n - 1).sum::<usize>());
    // A NoAction keeps its one `return`.
    let l2 = load(&corpus("l2fwd.spec")).unwrap();
    assert_eq!(l2.actions[0].run, l2.actions[0].instrs);
}

#[test]
fn fib_routes_to_the_group_of_the_longest_prefix() {
    let p = load(&corpus("fib.spec")).unwrap();
    let mut tables =
        ListTables::new(&p, &[("routing_table", "fib_routing_table.txt"), ("nexthop_table", "fib_nexthop_table.txt")]);
    let mut st = State::new(&p);
    let mut out = [0u8; 128];
    // The VRF is the whole source address: VRF 3 has /0 -> group 4, 0x80/1 -> 5, 0xC0/2 -> 6.
    let mut f = frame();
    f[26..30].copy_from_slice(&[0, 0, 0, 3]);
    for (dst, group) in [([10, 0, 0, 2], 4u32), ([150, 0, 0, 1], 5), ([200, 0, 0, 1], 6)] {
        f[30..34].copy_from_slice(&dst);
        // The routing table hits; the model has no selector groups, so the selector picks
        // member 0 (DPDK's empty group) and the packet goes on through the next hop table.
        assert!(!matches!(st.run_with(&p, &mut tables, &f, 0, &mut out), Verdict::Fault(_)));
        assert_eq!(&st.meta()[16..20], &group.to_le_bytes(), "m.nexthop_group_id for {dst:?}: the longest prefix");
    }
    // VRF 9 has no route: the default action drops.
    f[26..30].copy_from_slice(&[0, 0, 0, 9]);
    assert_eq!(st.run_with(&p, &mut tables, &f, 0, &mut out), Verdict::Drop);
}

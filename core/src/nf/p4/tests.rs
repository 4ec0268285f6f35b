use super::*;
use crate::nf::config::{ChainSpec, NfSpec, SpecErrorKind};
use crate::nf::testkit::{Out, checksums_ok, frame, run};
use crate::parse::IpAddr;
use crate::time::Instant;
use alloc::string::ToString;
use alloc::vec::Vec;

const ROUTER: &str = include_str!("../../../../chains/p4/router.spec");
const ROUTES: &str = include_str!("../../../../chains/p4/router_table.txt");

fn rate() -> TickRate {
    TickRate::try_new(1_000_000_000).expect("a rate")
}

fn nf(spec: &str, tables: &[(&str, &str)]) -> P4 {
    let cfg = P4Config {
        spec: spec.to_string(),
        tables: tables.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect(),
    };
    P4::new(Arc::new(P4Shared::try_new(&cfg, rate()).expect("the spec loads")))
}

fn udp_to(dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut f = frame(IpAddr::V4([10, 0, 1, 7]), IpAddr::V4(dst), 17, 4000, 53, b"p4 payload");
    f[22] = ttl;
    f[24..26].fill(0);
    let c = crate::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

fn outs(nf: &mut P4, frames: &[Vec<u8>], ingress: u8) -> Vec<Out> {
    run(nf, frames, ingress, Instant(1))
}

/// The router spec: the longest prefix picks port and next-hop MAC, the TTL goes down by one
/// with a checksum a from-scratch sum agrees with, and the payload is untouched.
#[test]
fn the_router_program_routes_by_longest_prefix_and_decrements_the_ttl() {
    let mut r = nf(ROUTER, &[("routes", ROUTES)]);
    let frames = [udp_to([10, 0, 2, 9], 64), udp_to([10, 0, 2, 200], 64), udp_to([10, 0, 1, 3], 9)];
    let out = outs(&mut r, &frames, 0);
    let want = [(1, [2, 0, 0, 0, 0xb, 2], 63), (0, [2, 0, 0, 0, 0xa, 0x80], 63), (0, [2, 0, 0, 0, 0xa, 1], 8)];
    for ((o, f), (port, mac, ttl)) in out.iter().zip(&frames).zip(want) {
        assert_eq!(o.verdict, Verdict::Forward(port));
        assert_eq!(o.frame[0..6], mac, "the next hop's MAC");
        assert_eq!(o.frame[6..12], f[6..12], "the source MAC is the chain's egress to write");
        assert_eq!(o.frame[22], ttl);
        assert!(checksums_ok(&o.frame), "header checksum after the incremental update");
        assert_eq!(o.frame[23..24], f[23..24]);
        assert_eq!(o.frame[34..], f[34..], "the UDP header and payload pass as they were");
    }
    assert_eq!((r.counters().tx, r.counters().dropped), (3, 0));
}

/// No route, a TTL of 1, and a frame that is not IPv4 are the program's drops (`p4_drop`),
/// each counted; a route to a port the chain does not have is `no_route`.
#[test]
fn the_programs_drops_and_a_port_the_chain_lacks_are_counted() {
    let mut r = nf(ROUTER, &[("routes", ROUTES)]);
    let v6 = frame(IpAddr::V6([0xfd; 16]), IpAddr::V6([0xfe; 16]), 17, 1, 2, b"x");
    let out = outs(&mut r, &[udp_to([192, 0, 2, 1], 64), udp_to([10, 0, 2, 9], 1), v6], 1);
    assert!(out.iter().all(|o| o.verdict == Verdict::Drop(DropReason::P4Drop)), "{out:?}");
    assert_eq!((r.counters().tx, r.counters().dropped), (0, 3));
    let far = ROUTES.replace("port_out 1", "port_out 300");
    let mut r = nf(ROUTER, &[("routes", &far)]);
    let out = outs(&mut r, &[udp_to([10, 0, 2, 9], 64)], 0);
    assert_eq!(out[0].verdict, Verdict::Drop(DropReason::NoRoute));
    assert_eq!(r.counters().bad_port, 1);
}

/// A program that reads past the frame's end faults: the frame is dropped as `p4_fault` and
/// counted by kind, and the next frame runs normally.
#[test]
fn a_fault_drops_the_frame_and_counts_its_kind() {
    // Extracts a 16-byte header after Ethernet, IPv4 and UDP: past the end of a short frame.
    let spec = "struct e_h {\n\tbit<48> d\n\tbit<48> s\n\tbit<16> t\n}\n\
                struct skip_h {\n\tbit<64> a\n\tbit<64> b\n\tbit<64> c\n\tbit<64> d\n\tbit<64> e\n\tbit<16> f\n}\n\
                struct tail_h {\n\tbit<64> a\n\tbit<64> b\n}\n\
                header e instanceof e_h\nheader skip instanceof skip_h\nheader tail instanceof tail_h\n\
                struct m_t {\n\tbit<32> port\n}\nmetadata instanceof m_t\n\
                apply {\n\trx m.port\n\textract h.e\n\textract h.skip\n\textract h.tail\n\
                EMIT\n\ttx m.port\n}\n";
    let mut p = nf(&spec.replace("EMIT", "\temit h.e\n\temit h.skip\n\temit h.tail"), &[]);
    let short = frame(IpAddr::V4([10, 0, 0, 1]), IpAddr::V4([10, 0, 0, 2]), 17, 1, 2, b"");
    let long = frame(IpAddr::V4([10, 0, 0, 1]), IpAddr::V4([10, 0, 0, 2]), 17, 1, 2, &[7; 40]);
    let out = outs(&mut p, &[short, long.clone()], 1);
    assert_eq!(out[0].verdict, Verdict::Drop(DropReason::P4Fault));
    assert_eq!((out[1].verdict, &out[1].frame), (Verdict::Forward(1), &long), "rx port, bytes as they came");
    assert_eq!((p.counters().truncated, p.counters().tx), (1, 1));
    // Without the `emit`s the headers are gone (P4: only emitted headers are sent): what is
    // left does not parse, and the NFs after this one could not read it.
    let mut p = nf(&spec.replace("EMIT", ""), &[]);
    let out = outs(&mut p, std::slice::from_ref(&long), 1);
    assert_eq!(out[0].verdict, Verdict::Drop(DropReason::NfUnsupported));
    assert_eq!((p.counters().unparsable, p.counters().tx), (1, 0));
    // With nothing after it that reads the parse (the chain's last NF, no router), the
    // packet is what the program emitted: the bytes after the three extracted headers.
    p.set_parsed_read_after(false);
    let out = outs(&mut p, std::slice::from_ref(&long), 1);
    assert_eq!((out[0].verdict, &out[0].frame[..]), (Verdict::Forward(1), &long[14 + 42 + 16..]));
    assert_eq!((p.counters().unparsable, p.counters().tx), (1, 1));
}

/// The text form carries a spec a line per record and each table file a line per record; a
/// spec line the loader refuses is reported at its own record's line.
#[test]
fn the_text_form_carries_the_spec_and_tables_and_names_a_bad_line() {
    let mut text = String::from("version=1\nnf=p4\n");
    for l in ROUTER.lines() {
        text.push_str("p4.spec=");
        text.push_str(l);
        text.push('\n');
    }
    text.push_str("p4.table=routes\n");
    for l in ROUTES.lines() {
        text.push_str("p4.entry=");
        text.push_str(l);
        text.push('\n');
    }
    let spec = ChainSpec::parse(&text).unwrap();
    let NfSpec::P4(cfg) = &spec.nfs[0] else { panic!("{spec:?}") };
    assert_eq!(cfg.tables.len(), 1);
    assert_eq!(cfg.spec.lines().count(), ROUTER.lines().count(), "blank lines kept: the spec's lines hold");
    // Built into a worker's chain: the frame leaves port 1 with the program's destination MAC
    // and the port's own source MAC; the unrouted one is counted as `p4_drop`.
    let own = [[2, 0, 0, 0, 0, 0xe0], [2, 0, 0, 0, 0, 0xe1]];
    let factory = spec.build(crate::nf::Egress::new(own, [[4; 6]; 2], None), rate()).unwrap();
    let mut chain = factory.chain_for_worker();
    let mut mem = alloc::vec![0u8; 8 * crate::buf::BUF_SIZE];
    let mut pool = crate::buf::Pool::try_new(&mut mem, 0, 8).unwrap();
    let mut input = crate::buf::Batch::new();
    for f in [udp_to([10, 0, 2, 9], 64), udp_to([203, 0, 113, 1], 64)] {
        let b = pool.alloc().unwrap();
        pool.set_len(b, f.len()).unwrap();
        pool.frame_mut(b).copy_from_slice(&f);
        input.push(b).unwrap();
    }
    let mut out = [crate::buf::Batch::new(), crate::buf::Batch::new()];
    let mut counters = crate::stage::StageCounters::default();
    crate::stage::Stage::process(&mut chain, 0, &mut pool, &mut input, &mut out, &mut counters, Instant(5));
    assert_eq!((out[0].len(), out[1].len()), (0, 1));
    let sent = pool.frame(out[1].as_slice()[0]);
    assert_eq!((&sent[0..6], &sent[6..12], sent[22]), (&[2, 0, 0, 0, 0xb, 2][..], &own[1][..], 63));
    assert_eq!(counters.drops_for(DropReason::P4Drop), 1);

    // `sub` misspelt on the spec's line 80: the error names the text form's line 82 (two
    // records before the spec).
    let at = ROUTER.lines().position(|l| l.trim() == "sub h.ipv4.ttl 0x1").unwrap();
    let bad = text.replacen("p4.spec=\tsub h.ipv4.ttl 0x1", "p4.spec=\tsubb h.ipv4.ttl 0x1", 1);
    let e = ChainSpec::parse(&bad).unwrap_err();
    assert_eq!((e.line, e.key), (at + 3, "p4.spec"), "{e}");
    assert!(matches!(e.kind, SpecErrorKind::P4(_)), "{e}");
    // An entry naming an action the table does not have: its own record's line.
    let bad = text.replacen("action route nexthop_mac 0x020000000b02", "action nope nexthop_mac 0x020000000b02", 1);
    let e = ChainSpec::parse(&bad).unwrap_err();
    let line = bad.lines().position(|l| l.contains("action nope")).unwrap() + 1;
    assert_eq!((e.line, e.key), (line, "p4.entry"), "{e}");
    // Entries before any table, and no spec at all.
    let e = ChainSpec::parse("version=1\nnf=p4\np4.entry=match 1\n").unwrap_err();
    assert_eq!((e.line, e.key), (3, "p4.entry"));
    let e = ChainSpec::parse("version=1\nnf=p4\n").unwrap_err();
    assert_eq!(e.kind, SpecErrorKind::P4("no spec"));
}

/// The control plane changes a table while the workers run: each instance applies the
/// changes before its next batch — a route deleted drops, added back forwards, a replaced
/// entry takes its new next hop — and a change its tables cannot take is counted, not lost.
#[test]
fn live_table_changes_reach_every_worker_before_its_next_batch() {
    let cfg = P4Config { spec: ROUTER.to_string(), tables: alloc::vec![("routes".to_string(), ROUTES.to_string())] };
    let shared = Arc::new(P4Shared::try_new(&cfg, rate()).expect("loads"));
    let (mut w0, mut w1) = (P4::new(shared.clone()), P4::new(shared.clone()));
    let to_b = || alloc::vec![udp_to([10, 0, 2, 9], 64)];
    assert_eq!(outs(&mut w0, &to_b(), 0)[0].verdict, Verdict::Forward(1));
    assert_eq!(shared.change("routes", "match 0x0a000200/0xffffff00", false), Ok(1));
    for w in [&mut w0, &mut w1] {
        assert_eq!(outs(w, &to_b(), 0)[0].verdict, Verdict::Drop(DropReason::P4Drop), "deleted on every worker");
    }
    let back = "match 0x0a000200/0xffffff00 action route nexthop_mac 0x020000000c03 port_out 0";
    assert_eq!(shared.change("routes", back, true), Ok(2));
    let out = outs(&mut w1, &to_b(), 0);
    assert_eq!((out[0].verdict, &out[0].frame[0..6]), (Verdict::Forward(0), &[2, 0, 0, 0, 0xc, 3][..]));
    // Replacing the entry of a key: the new action and arguments.
    let again = "match 0x0a000200/0xffffff00 action route nexthop_mac 0x020000000b02 port_out 1";
    assert_eq!(shared.change("routes", again, true), Ok(3));
    assert_eq!(outs(&mut w0, &to_b(), 0)[0].verdict, Verdict::Forward(1));
    assert_eq!((w0.counters().changes, w0.counters().change_refused), (3, 0));
    // A delete of a key no entry has: accepted (it parses) but refused by the tables, counted.
    assert_eq!(shared.change("routes", "match 0x0b000000/0xff000000", false), Ok(4));
    outs(&mut w0, &to_b(), 0);
    assert_eq!((w0.counters().changes, w0.counters().change_refused), (3, 1));
    // Lines the program refuses change nothing: each names what is wrong.
    let bad = [
        ("nope", "match 0x0a000200/0xffffff00", false, "no table `nope`"),
        ("routes", "match 0x0a000200/0xffffff00", true, "needs `action NAME"),
        ("routes", "match 0x0a000200/0xffffff00 action teleport", true, "teleport"),
        ("routes", "match 0x0a000200/0xff00ff00 action drop", true, "prefix"),
    ];
    for (table, line, add, why) in bad {
        let e = shared.change(table, line, add).unwrap_err();
        assert!(e.contains(why), "{table} {line}: {e}");
    }
    assert_eq!(shared.generation(), 4);
}

/// The first instance takes the tables built when the files were checked, the next ones build
/// their own; a change the control plane made before either existed reaches both before their
/// first batch, and a change to one instance's tables is not seen by the other (each worker
/// its own tables, the spare included).
#[test]
fn instances_made_after_a_change_start_from_the_files_and_apply_it() {
    let cfg = P4Config { spec: ROUTER.to_string(), tables: alloc::vec![("routes".to_string(), ROUTES.to_string())] };
    let shared = Arc::new(P4Shared::try_new(&cfg, rate()).expect("loads"));
    assert!(shared.spare.lock().is_some(), "the checked tables are kept for the first instance");
    assert_eq!(shared.change("routes", "match 0x0a000200/0xffffff00", false), Ok(1));
    let mut first = P4::new(shared.clone());
    assert!(shared.spare.lock().is_none(), "the first instance took them");
    let mut second = P4::new(shared.clone());
    let to_b = || alloc::vec![udp_to([10, 0, 2, 9], 64)];
    let to_a = || alloc::vec![udp_to([10, 0, 1, 3], 64)];
    for w in [&mut first, &mut second] {
        assert_eq!(outs(w, &to_b(), 0)[0].verdict, Verdict::Drop(DropReason::P4Drop), "the delete applied");
        assert_eq!(outs(w, &to_a(), 1)[0].verdict, Verdict::Forward(0), "the other routes from the file");
        assert_eq!((w.counters().changes, w.counters().change_refused), (1, 0));
    }
    // Each instance's tables are its own: a learner's or a route's state is not shared.
    if let Some(t) = first.tables.as_mut() {
        let add = TableChange::parse(
            &shared.program,
            "routes",
            "match 0x0a000200/0xffffff00 action route nexthop_mac 0x020000000b02 port_out 1",
            true,
        )
        .expect("parses");
        assert_eq!(t.apply(&add), Ok(()));
    }
    assert_eq!(outs(&mut first, &to_b(), 0)[0].verdict, Verdict::Forward(1));
    assert_eq!(outs(&mut second, &to_b(), 0)[0].verdict, Verdict::Drop(DropReason::P4Drop));
}

/// `p4 default`: every worker's misses run the new default (here a route out of port 0 to a
/// gateway's MAC) from its next batch on; hits are unchanged; a default back to `drop` drops
/// again; a const default, an action the table does not list, or an entry line are refused.
#[test]
fn a_live_default_action_is_what_every_worker_runs_on_a_miss() {
    let cfg = P4Config { spec: ROUTER.to_string(), tables: alloc::vec![("routes".to_string(), ROUTES.to_string())] };
    let shared = Arc::new(P4Shared::try_new(&cfg, rate()).expect("loads"));
    let (mut w0, mut w1) = (P4::new(shared.clone()), P4::new(shared.clone()));
    let nowhere = || alloc::vec![udp_to([192, 0, 2, 1], 64)];
    assert_eq!(outs(&mut w0, &nowhere(), 1)[0].verdict, Verdict::Drop(DropReason::P4Drop));
    let gw = "action route nexthop_mac 0x020000000c09 port_out 0";
    assert_eq!(shared.change_default("routes", gw), Ok(1));
    for w in [&mut w0, &mut w1] {
        let out = outs(w, &nowhere(), 1);
        assert_eq!((out[0].verdict, &out[0].frame[0..6]), (Verdict::Forward(0), &[2, 0, 0, 0, 0xc, 9][..]));
        assert_eq!(out[0].frame[22], 63, "the rest of the program ran");
        // A hit still runs its entry.
        assert_eq!(outs(w, &alloc::vec![udp_to([10, 0, 2, 9], 64)], 0)[0].verdict, Verdict::Forward(1));
    }
    assert_eq!(shared.change_default("routes", "action drop"), Ok(2));
    assert_eq!(outs(&mut w1, &nowhere(), 1)[0].verdict, Verdict::Drop(DropReason::P4Drop));
    for (table, line, why) in [
        ("routes", "action teleport", "teleport"),
        ("routes", "match 0x0a000200/0xffffff00 action drop", "alone"),
        ("nope", "action drop", "no table `nope`"),
    ] {
        let e = shared.change_default(table, line).unwrap_err();
        assert!(e.contains(why), "{table} {line}: {e}");
    }
    // l2fwd.spec's stub table has a const default.
    let l2 = include_str!("../../../tests/p4/dpdk/l2fwd.spec");
    let s = P4Shared::try_new(&P4Config { spec: l2.to_string(), tables: Vec::new() }, rate()).expect("loads");
    assert!(s.change_default("stub", "action NoAction").unwrap_err().contains("const"));
    assert_eq!(shared.generation(), 2);
}

/// The program's registers are one set for every worker: two workers' `regadd`s land in the
/// same counters, the control plane reads what they counted, and a write is what the next
/// packet adds to; an index at or past the array's size and an unknown array are refused.
#[test]
fn registers_are_shared_by_the_workers_and_read_and_written_by_the_control_plane() {
    let cfg = P4Config { spec: include_str!("../../../tests/p4/dpdk/registers.spec").into(), tables: Vec::new() };
    let shared = Arc::new(P4Shared::try_new(&cfg, rate()).expect("the spec loads"));
    let (mut a, mut b) = (P4::new(shared.clone()), P4::new(shared.clone()));
    let f = udp_to([10, 0, 2, 9], 64);
    outs(&mut a, &[f.clone(), f.clone()], 0);
    outs(&mut b, core::slice::from_ref(&f), 1);
    // regadd pkt_counters h.ipv4.src_addr 1; regadd byte_counters h.ipv4.src_addr
    // h.ipv4.total_len: 10.0.1.7 masked to the array's 65 536 registers.
    let at = 0x0107;
    let len = u64::from(u16::from_be_bytes([f[16], f[17]]));
    assert_eq!(shared.reg_read("pkt_counters", at), Ok(3));
    assert_eq!(shared.reg_read("byte_counters", at), Ok(3 * len));
    assert_eq!(shared.reg_read("pkt_counters", at + 1), Ok(0));
    shared.reg_write("pkt_counters", at, 100).unwrap();
    outs(&mut b, &[f], 0);
    assert_eq!(shared.reg_read("pkt_counters", at), Ok(101));
    let past = "regarray pkt_counters: index 65536 is not below its size 65536";
    assert_eq!(shared.reg_read("pkt_counters", 65_536), Err(past.to_string()));
    assert_eq!(shared.reg_write("pkt_counters", 65_536, 1), Err(past.to_string()));
    assert_eq!(shared.reg_read("nope", 0), Err("no regarray nope in the program".to_string()));
}

/// A register array above `MAX_REGISTERS` is refused when the program is configured, by name.
#[test]
fn a_regarray_too_large_is_refused() {
    let spec = include_str!("../../../tests/p4/dpdk/registers.spec")
        .replace("regarray byte_counters size 65536", "regarray byte_counters size 16777217");
    let cfg = P4Config { spec, tables: Vec::new() };
    let why = "regarray byte_counters: size 16777217 is above the 16777216 an array may have";
    match P4Shared::try_new(&cfg, rate()) {
        Err(e @ P4ConfigError::Registers(_)) => assert_eq!(e.to_string(), alloc::format!("p4 {why}")),
        other => panic!("expected the regarray refused, got {other:?}"),
    }
}

/// DPDK's learner example with a learner of 1 024 entries (its 1 M would take each test
/// instance hundreds of MiB).
fn learner_shared() -> Arc<P4Shared> {
    let spec = include_str!("../../../tests/p4/dpdk/learner.spec").replace("size 1048576", "size 1024");
    Arc::new(P4Shared::try_new(&P4Config { spec, tables: Vec::new() }, rate()).expect("the spec loads"))
}

/// `p4 learner show`: each worker's learner, read by the control plane while the worker holds
/// it — the flows that worker learned, with the action and its argument the program chose, the
/// timeout it picked and the time left; expired entries are not shown, a worker gone takes its
/// entries with it, and an unknown learner is refused by name.
#[test]
fn the_control_plane_reads_each_workers_learned_flows() {
    let shared = learner_shared();
    let (mut a, mut b) = (P4::new(shared.clone()), P4::new(shared.clone()));
    // learn_action: port_out = (the shared counter, then incremented) & 3, timeout id 1 (120 s).
    outs(&mut a, &[udp_to([10, 0, 2, 9], 64), udp_to([10, 0, 2, 10], 64), udp_to([10, 0, 2, 9], 64)], 0);
    outs(&mut b, &[udp_to([10, 0, 3, 1], 64)], 1);
    let one_s = Instant(1_000_000_001); // the learners' clock: 1 ns a tick at this rate
    let (mut lines, instances) = shared.learner_show("fwd_table", one_s).expect("a learner");
    lines.sort();
    assert_eq!(instances, 2);
    assert_eq!(
        lines,
        [
            "instance=0 match 0x0a000209 action fwd_action port_out 0x0 timeout 1 expires_in_ms 119000",
            "instance=0 match 0x0a00020a action fwd_action port_out 0x1 timeout 1 expires_in_ms 119000",
            "instance=1 match 0x0a000301 action fwd_action port_out 0x2 timeout 1 expires_in_ms 119000",
        ]
    );
    // Past the 120 s timeout nothing is left to show.
    let later = Instant(121_000_000_001);
    assert_eq!(shared.learner_show("fwd_table", later).map(|(l, _)| l.len()), Ok(0));
    // A worker's NF dropped: its learner goes with it.
    drop(b);
    let (lines, instances) = shared.learner_show("fwd_table", one_s).expect("a learner");
    assert_eq!((lines.len(), instances), (2, 1));
    assert!(lines.iter().all(|l| l.starts_with("instance=0 ")), "{lines:?}");
    assert_eq!(shared.learner_show("nope", one_s), Err("no learner `nope` in the program".to_string()));
}

/// The `p4` NF with its vector loop hidden: the same NF through the chain's batch path (a
/// packet record per frame, `process`, the egress).
struct BatchOnly(P4);

impl Nf for BatchOnly {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn process(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        self.0.process(ctx, pool, batch);
    }
    fn reads(&self) -> Depth {
        self.0.reads()
    }
    fn set_parsed_read_after(&mut self, read: bool) {
        self.0.set_parsed_read_after(read);
    }
    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        self.0.write_counters(w)
    }
}

/// One frame of a mixed batch for the P4 vector path: routed (kinds 0–2, a destination in
/// or out of the routes), a TTL the program drops (3), a bad IPv4 header checksum the chain
/// refuses (4), IPv6 (5: the program drops what is not IPv4), ARP (6: refused), a runt (7),
/// an IPv4 datagram of two bytes after its header (8: the chain checks only to the IP header
/// at this depth; the program reads what it declares).
fn p4_frame(dst: [u8; 4], kind: u8) -> Vec<u8> {
    match kind % 9 {
        3 => udp_to(dst, 1),
        4 => {
            let mut f = udp_to(dst, 64);
            f[24] ^= 0x40;
            f
        }
        5 => frame(
            IpAddr::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            IpAddr::V6([0x20; 16]),
            17,
            1,
            2,
            b"v6",
        ),
        6 => {
            let mut f = udp_to(dst, 64);
            f[12..14].copy_from_slice(&[0x08, 0x06]);
            f
        }
        7 => udp_to(dst, 64)[..20].to_vec(),
        8 => {
            let mut f = udp_to(dst, 64);
            f.truncate(36);
            let total = (f.len() - 14) as u16;
            f[16..18].copy_from_slice(&total.to_be_bytes());
            f[24..26].fill(0);
            let c = crate::checksum::checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            f
        }
        _ => udp_to(dst, 64),
    }
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(crate::testing::proptest_config(48))]

    /// A chain of the `p4` NF alone runs every frame it admits through its vector loop
    /// (`Nf::run_vector`): the same frames leave by the same ports with the same bytes, in the
    /// same order, with the same drops by reason and the same `p4_*` counters as the batch
    /// path of the same NF; for the router (routes, its drops, the chain's refusals) and for
    /// the learner (state learned as the frames come, ports from a counter) alike.
    #[test]
    fn the_p4_vector_path_is_the_batch_path(
        picks in proptest::collection::vec((any::<u8>(), any::<u8>()), 1..=crate::buf::BATCH_SIZE),
        learner in any::<bool>(),
    ) {
        use crate::nf::testkit::run_chain;
        let dsts = [[10, 0, 2, 9], [10, 0, 2, 200], [10, 0, 1, 3], [10, 9, 9, 9], [10, 0, 2, 10]];
        let frames: Vec<Vec<u8>> = picks.iter().map(|&(d, k)| p4_frame(dsts[usize::from(d) % dsts.len()], k)).collect();
        let shared = || if learner { learner_shared() } else {
            let cfg = P4Config { spec: ROUTER.into(), tables: alloc::vec![("routes".into(), ROUTES.into())] };
            Arc::new(P4Shared::try_new(&cfg, rate()).expect("the spec loads"))
        };
        let egress = || crate::nf::Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], crate::nf::Egress::DEFAULT_PEERS, None);
        let mut vector = crate::nf::Chain::new(alloc::vec![Box::new(P4::new(shared()))], egress());
        let mut batch = crate::nf::Chain::new(alloc::vec![Box::new(BatchOnly(P4::new(shared())))], egress());
        vector.set_validate(Depth::L2);
        batch.set_validate(Depth::L2);
        prop_assert!(vector.is_vector() && !batch.is_vector());
        let (a, b) = (run_chain(&mut vector, &frames), run_chain(&mut batch, &frames));
        prop_assert_eq!(a, b);
    }
}

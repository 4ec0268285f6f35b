//! DPDK 22.11's twelve example specs and p4c's `pna-*.p4.spec` outputs (the corpus in
//! `tests/p4/`, README there) through `core::p4::load`: each either loads, with the shape
//! checked for a few, or is refused with the expected message (line and construct). Random
//! mutations of the corpus never panic the loader.

use cadence_core::p4::{self, Instr, MatchKind, Operand, Space, TableRef};
use proptest::prelude::*;

fn read(dir: &str, name: &str) -> String {
    let p = format!("{}/tests/p4/{dir}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).expect("a corpus file")
}

/// Every spec of a corpus folder, sorted.
fn specs(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("{}/tests/p4/{dir}", env!("CARGO_MANIFEST_DIR")))
        .expect("the corpus folder")
        .map(|e| e.expect("a corpus entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".spec"))
        .collect();
    v.sort();
    v
}

/// DPDK 22.11's `examples/pipeline/examples/*.spec`: `None` loads, `Some(msg)` is the refusal.
const DPDK: [(&str, Option<&str>); 12] = [
    ("fib.spec", None),
    ("hash_func.spec", None),
    ("l2fwd.spec", None),
    ("l2fwd_macswp.spec", None),
    ("learner.spec", None),
    ("meter.spec", Some("line 59: instruction `meter` is not supported")),
    ("mirroring.spec", Some("line 74: instruction `mirror` is not supported")),
    ("recirculation.spec", Some("line 72: instruction `recircid` is not supported")),
    ("registers.spec", None),
    ("selector.spec", None),
    ("varbit.spec", Some("line 37: varbit field `options` is not supported")),
    ("vxlan.spec", None),
];

/// p4c's `testdata/p4_16_samples_outputs/pna-*.p4.spec` (p4c 34b86e9bac).
const P4C: [(&str, Option<&str>); 64] = [
    ("pna-action-selector-1.p4.spec", None),
    ("pna-action-selector.p4.spec", None),
    ("pna-add-on-miss.p4.spec", None),
    ("pna-add_on_miss_action_name.p4.spec", None),
    (
        "pna-direction-main-parser-err.p4.spec",
        Some(
            "line 71: instruction `jmpneq`: the first operand of a compare-and-jump must be a field (DPDK 22.11 refuses an immediate there)",
        ),
    ),
    (
        "pna-direction.p4.spec",
        Some(
            "line 73: instruction `jmpneq`: the first operand of a compare-and-jump must be a field (DPDK 22.11 refuses an immediate there)",
        ),
    ),
    ("pna-dpdk-add_on_miss0.p4.spec", None),
    ("pna-dpdk-add_on_miss1.p4.spec", None),
    ("pna-dpdk-bvec_union.p4.spec", None),
    ("pna-dpdk-direct-counter-learner.p4.spec", None),
    ("pna-dpdk-direct-counter.p4.spec", None),
    ("pna-dpdk-direct-meter-learner.p4.spec", Some("line 58: instruction `meter` is not supported")),
    ("pna-dpdk-flatten-local-struct-decl.p4.spec", Some("line 34: statement `rss` is not supported")),
    ("pna-dpdk-header-stack-assignment.p4.spec", None),
    ("pna-dpdk-header-union-stack.p4.spec", None),
    ("pna-dpdk-header-union-stack1.p4.spec", None),
    (
        "pna-dpdk-large-constants.p4.spec",
        Some(
            "line 107: field `h.dpdk_pseudo_header.pseudo` is 32 bits: `mov` between fields wider than 64 bits needs equal widths",
        ),
    ),
    (
        "pna-dpdk-parser-state-err.p4.spec",
        Some(
            "line 178: instruction `jmpgt`: the first operand of a compare-and-jump must be a field (DPDK 22.11 refuses an immediate there)",
        ),
    ),
    ("pna-dpdk-parser-wrong-arith.p4.spec", None),
    ("pna-dpdk-small_sample.p4.spec", None),
    ("pna-dpdk-table-key-consolidation-learner-1.p4.spec", None),
    ("pna-dpdk-table-key-consolidation-learner-3.p4.spec", None),
    ("pna-dpdk-table-key-consolidation-learner-4.p4.spec", None),
    ("pna-dpdk-table-key-consolidation-learner-5.p4.spec", None),
    ("pna-dpdk-table-key-consolidation-learner-6.p4.spec", None),
    ("pna-dpdk-table-key-consolidation-learner-7.p4.spec", None),
    ("pna-dpdk-table-key-use-annon.p4.spec", None),
    ("pna-dpdk-toeplitz-hash-1.p4.spec", None),
    ("pna-dpdk-toeplitz-hash.p4.spec", Some("line 32: statement `rss` is not supported")),
    ("pna-dpdk-union-bmv2.p4.spec", None),
    (
        "pna-dpdk_128bit_odd_size.p4.spec",
        Some("line 36: field `t.x` is 80 bits: `mov` between fields wider than 64 bits needs equal widths"),
    ),
    (
        "pna-elim-hdr-copy-dpdk.p4.spec",
        Some(
            "line 78: instruction `jmpneq`: the first operand of a compare-and-jump must be a field (DPDK 22.11 refuses an immediate there)",
        ),
    ),
    ("pna-example-SelectByDirection.p4.spec", None),
    ("pna-example-SelectByDirection1.p4.spec", None),
    ("pna-example-SelectByDirection2.p4.spec", None),
    ("pna-example-bAnd-in-tableKey.p4.spec", None),
    ("pna-example-dpdk-optional.p4.spec", None),
    ("pna-example-dpdk-varbit-1.p4.spec", Some("line 24: varbit field `data` is not supported")),
    ("pna-example-dpdk-varbit.p4.spec", Some("line 24: varbit field `data` is not supported")),
    ("pna-example-header-union.p4.spec", None),
    ("pna-example-header-union1.p4.spec", None),
    ("pna-example-ipsec.p4.spec", None),
    ("pna-example-mirror-packet-1.p4.spec", Some("line 51: instruction `mirror` is not supported")),
    ("pna-example-mirror-packet.p4.spec", Some("line 50: instruction `mirror` is not supported")),
    ("pna-example-pass-1.p4.spec", Some("line 47: instruction `recircid` is not supported")),
    ("pna-example-pass-2.p4.spec", Some("line 39: instruction `recircid` is not supported")),
    ("pna-example-pass-3.p4.spec", Some("line 49: instruction `recircid` is not supported")),
    ("pna-example-pass-parser.p4.spec", Some("line 52: instruction `recircid` is not supported")),
    ("pna-example-pass.p4.spec", Some("line 47: instruction `recircid` is not supported")),
    ("pna-example-recirculate.p4.spec", Some("line 47: instruction `recircid` is not supported")),
    ("pna-example-tcp-connection-tracking.p4.spec", None),
    ("pna-example-template.p4.spec", None),
    ("pna-example-tunnel.p4.spec", None),
    ("pna-example-varIndex-1.p4.spec", None),
    ("pna-example-varIndex-2.p4.spec", None),
    ("pna-example-varIndex.p4.spec", None),
    ("pna-extract-local-header.p4.spec", None),
    (
        "pna-ipv6-actions.p4.spec",
        Some(
            "line 127: field `h.dpdk_pseudo_header.pseudo` is 32 bits: `mov` between fields wider than 64 bits needs equal widths",
        ),
    ),
    ("pna-issue3041.p4.spec", Some("line 24: varbit field `data` is not supported")),
    ("pna-lookahead-structure-bit-field.p4.spec", None),
    ("pna-lookahead-structure.p4.spec", None),
    (
        "pna-mux-dismantle.p4.spec",
        Some(
            "line 97: instruction `jmpgt`: the first operand of a compare-and-jump must be a field (DPDK 22.11 refuses an immediate there)",
        ),
    ),
    ("pna-subparser.p4.spec", None),
    (
        "pna-too-big-label-name-dpdk.p4.spec",
        Some(
            "line 78: instruction `jmpneq`: the first operand of a compare-and-jump must be a field (DPDK 22.11 refuses an immediate there)",
        ),
    ),
];

fn check(dir: &str, expected: &[(&str, Option<&str>)]) -> (usize, usize) {
    let names = specs(dir);
    let listed: Vec<&str> = expected.iter().map(|e| e.0).collect();
    assert_eq!(names, listed, "the corpus folder and the expectations list the same specs");
    let (mut ok, mut refused) = (0, 0);
    for (name, want) in expected {
        let got = p4::load(&read(dir, name));
        let got = got.map(|_| ()).map_err(|e| e.to_string());
        match want {
            None => {
                assert_eq!(got, Ok(()), "{name}");
                ok += 1;
            }
            Some(msg) => {
                assert_eq!(got, Err((*msg).to_owned()), "{name}");
                refused += 1;
            }
        }
    }
    (ok, refused)
}

#[test]
fn dpdk_examples_load_or_are_refused_by_name() {
    assert_eq!(check("dpdk", &DPDK), (8, 4));
}

#[test]
fn p4c_pna_outputs_load_or_are_refused_by_name() {
    assert_eq!(check("p4c", &P4C), (41, 23));
}

#[test]
fn fib_shape() {
    let p = p4::load(&read("dpdk", "fib.spec")).unwrap();
    assert_eq!((p.headers.len(), p.header_bytes, p.meta_bytes), (2, 14 + 20, 24));
    assert_eq!((p.actions.len(), p.tables.len(), p.selectors.len(), p.learners.len()), (3, 2, 1, 0));
    let rt = p.table("routing_table").unwrap();
    assert_eq!(rt.keys.iter().map(|k| k.kind).collect::<Vec<_>>(), [MatchKind::Exact, MatchKind::Lpm]);
    assert_eq!(rt.keys[1].field, p.field("m.dst_addr").unwrap());
    assert_eq!(rt.size, 1_048_576);
    assert_eq!(p.actions[usize::from(rt.default.action)].name, "drop");
    let sel = p.selector("nexthop_group_table").unwrap();
    assert_eq!((sel.selector.len(), sel.n_groups_max, sel.n_members_per_group_max), (3, 65536, 64));
    assert_eq!(p.apply.len(), 11);
    // mov m.vrf_id h.ipv4.src_addr: metadata offset 8, header ipv4 (after ethernet's 14) + 12.
    assert_eq!(
        p.apply[3],
        Instr::Mov {
            dst: p4::Field { space: Space::Meta, offset: 8, bits: 32 },
            src: Operand::Field(p4::Field { space: Space::Header(1), offset: 14 + 12, bits: 32 }),
        }
    );
    assert_eq!(p.apply[5], Instr::Table { table: TableRef::Table(0) });
    assert_eq!(p.apply[6], Instr::Table { table: TableRef::Selector(0) });
    // nexthop_action: validate, 3 movs from t., cksub, sub, ckadd, mov, return.
    let nh = &p.actions[usize::from(p.action("nexthop_action").unwrap())];
    assert_eq!((nh.instrs.len(), nh.arg_bytes), (9, 6 + 6 + 2 + 4));
    assert_eq!(
        nh.instrs[1],
        Instr::Mov {
            dst: p4::Field { space: Space::Header(0), offset: 0, bits: 48 },
            src: Operand::Field(p4::Field { space: Space::Arg, offset: 0, bits: 48 }),
        }
    );
}

#[test]
fn learner_shape() {
    let p = p4::load(&read("dpdk", "learner.spec")).unwrap();
    let l = p.learner("fwd_table").unwrap();
    assert_eq!((l.keys.len(), l.size, l.timeouts.as_slice()), (1, 1_048_576, &[60, 120, 180][..]));
    let learn = &p.actions[usize::from(p.action("learn_action").unwrap())];
    let fwd = p.action("fwd_action").unwrap();
    assert!(learn.learns);
    assert!(learn.instrs.contains(&Instr::Learn {
        action: fwd,
        args: p.field("m.fwd_action_arg_port_out"),
        timeout_id: p.field("m.timeout_id").unwrap(),
    }));
    assert_eq!(p.regarrays.len(), 1);
    assert!(matches!(learn.instrs[1], Instr::RegRd { array: 0, idx: Operand::Imm(0), .. }));
}

#[test]
fn vxlan_and_add_on_miss_shapes() {
    let p = p4::load(&read("dpdk", "vxlan.spec")).unwrap();
    assert_eq!((p.headers.len(), p.header_bytes), (6, 14 + 20 + 14 + 20 + 8 + 8));
    let t = p.table("vxlan_table").unwrap();
    assert_eq!(p.action_args(t.actions[0].action).len(), 22);
    assert_eq!(p.apply.iter().filter(|i| matches!(i, Instr::Emit { .. })).count(), 6);

    let p = p4::load(&read("p4c", "pna-add-on-miss.p4.spec")).unwrap();
    assert_eq!(p.learners.len(), 2);
    let l = &p.learners[0];
    assert_eq!(l.timeouts, [10, 30, 60, 120, 300, 43200, 120, 120]);
    assert!(l.actions[0].table_only && l.actions[1].default_only);
    // jmpeq MAINPARSERIMPL_PARSE_IPV4 h.ethernet.etherType 0x800 -> instruction 4.
    assert!(matches!(p.apply[2], Instr::JmpCmp { target: 4, b: Operand::Imm(0x800), .. }));
    assert!(matches!(p.apply[5], Instr::JmpValid { target: 8, valid: false, .. }));
}

/// Random edits of a text: delete, duplicate or swap lines, replace a token, change a byte,
/// cut the text.
fn mutate(text: &str, seed: u64, n: u32) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    const TOKENS: [&str; 10] =
        ["0", "h.x.y", "m.zz", "{", "}", "t.a", "-1", "0x1ffffffffffffffff", "bit<7>", "@tableonly"];
    for _ in 0..n {
        if lines.is_empty() {
            break;
        }
        let i = (next() % lines.len() as u64) as usize;
        match next() % 6 {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            2 => {
                let j = (next() % lines.len() as u64) as usize;
                lines.swap(i, j);
            }
            3 => {
                let mut t: Vec<String> = lines[i].split_whitespace().map(str::to_owned).collect();
                if !t.is_empty() {
                    let k = (next() % t.len() as u64) as usize;
                    t[k] = TOKENS[(next() % 10) as usize].into();
                    lines[i] = t.join(" ");
                }
            }
            4 => {
                let mut b = lines[i].clone().into_bytes();
                if !b.is_empty() {
                    let k = (next() % b.len() as u64) as usize;
                    b[k] = (next() % 128) as u8;
                }
                lines[i] = String::from_utf8_lossy(&b).into_owned();
            }
            _ => lines.truncate(i),
        }
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]
    #[test]
    fn mutated_specs_never_panic(file in 0usize..76, seed in any::<u64>(), n in 1u32..6) {
        let (dir, name) = if file < 12 { ("dpdk", DPDK[file].0) } else { ("p4c", P4C[file - 12].0) };
        let text = mutate(&read(dir, name), seed, n);
        if let Err(e) = p4::load(&text) {
            prop_assert!(e.line as usize <= text.split('\n').count());
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

fn dpdk_program(spec: &str) -> p4::Program {
    p4::load(&read("dpdk", spec)).expect("loads")
}

#[test]
fn fib_table_files() {
    use p4::entry::{self, Entry, KeyValue};
    let p = dpdk_program("fib.spec");
    let rt = p.table("routing_table").unwrap();
    let routes = entry::parse_file(&p, rt, &read("dpdk", "fib_routing_table.txt")).unwrap();
    assert_eq!(routes.len(), 18);
    let group = p.action("nexthop_group_action").unwrap();
    // match 0 0x00000000/0xC0000000 action nexthop_group_action nexthop_group_id 0
    let Entry::Match { key, priority, prefix_len, action } = &routes[0] else { panic!("a match entry") };
    assert_eq!(
        key,
        &[
            KeyValue { value: vec![0, 0, 0, 0], mask: None },
            KeyValue { value: vec![0, 0, 0, 0], mask: Some(vec![0xC0, 0, 0, 0]) },
        ]
    );
    assert_eq!((*priority, *prefix_len), (30, Some(2)));
    assert_eq!((action.action, action.args.as_slice()), (group, &0u32.to_le_bytes()[..]));

    let nt = p.table("nexthop_table").unwrap();
    let hops = entry::parse_file(&p, nt, &read("dpdk", "fib_nexthop_table.txt")).unwrap();
    assert!(hops.len() >= 2);
    // match 1 action nexthop_action ethernet_dst_addr 0xaabbcc000001 … port_out 1
    let Entry::Match { key, action, .. } = &hops[1] else { panic!("a match entry") };
    assert_eq!(key[0].value, 1u32.to_be_bytes());
    let mut args = vec![];
    args.extend_from_slice(&0xaabb_cc00_0001u64.to_le_bytes()[..6]);
    args.extend_from_slice(&0xddee_ff00_0001u64.to_le_bytes()[..6]);
    args.extend_from_slice(&0x0800u16.to_le_bytes());
    args.extend_from_slice(&1u32.to_le_bytes());
    assert_eq!(action.args, args);

    let sel = p.selector("nexthop_group_table").unwrap();
    let members = entry::parse_selector_file(sel, &read("dpdk", "fib_nexthop_group_table.txt")).unwrap();
    assert!(members.iter().all(|m| m.weight >= 1 && m.group < sel.n_groups_max));
    assert_eq!(members[0], entry::Member { group: 0, member: 0, weight: 1 });
}

#[test]
fn vxlan_and_selector_table_files() {
    use p4::entry::{self, Entry};
    let p = dpdk_program("vxlan.spec");
    let t = p.table("vxlan_table").unwrap();
    let entries = entry::parse_file(&p, t, &read("dpdk", "vxlan_table.txt")).unwrap();
    assert_eq!(entries.len(), 16);
    let Entry::Match { key, action, .. } = &entries[4] else { panic!("a match entry") };
    assert_eq!(key[0].value, [0xaa, 0xbb, 0xcc, 0xdd, 0x00, 0x04]);
    assert_eq!(action.args.len() as u32, p.actions[usize::from(action.action)].arg_bytes);

    let p = dpdk_program("selector.spec");
    let s = p.selector("s").unwrap();
    let m = entry::parse_selector_file(s, &read("dpdk", "selector.txt")).unwrap();
    assert_eq!(m.iter().map(|m| m.weight).collect::<Vec<_>>(), [1, 1, 2, 4]);
}

#[test]
fn table_file_refusals_name_the_line() {
    use p4::entry;
    let p = dpdk_program("fib.spec");
    let rt = p.table("routing_table").unwrap();
    let nt = p.table("nexthop_table").unwrap();
    let err = |t, line: &str| entry::parse_line(&p, t, line, 7).unwrap_err().to_string();
    assert_eq!(
        err(rt, "match 0 0x0A000000/0xFF00FF00 action drop"),
        "line 7: `0x0A000000/0xFF00FF00`: an `lpm` mask must be a prefix (ones, then zeros)"
    );
    assert_eq!(
        err(rt, "match 0/0xF0 0 action drop"),
        "line 7: `0/0xF0`: a mask on an `exact` key field must be all ones"
    );
    assert_eq!(err(rt, "match 0 action drop"), "line 7: number `action`: expected a number");
    assert_eq!(err(nt, "match 0"), "line 7: `match`: an entry needs `action NAME …` after its key");
    assert_eq!(err(rt, "match 0x100000000 0 action drop"), "line 7: number `0x100000000`: wider than its field");
    assert_eq!(err(rt, "match 0 0 action zap"), "line 7: action `zap` not found");
    assert_eq!(err(rt, "match 0 0 action nexthop_action"), "line 7: `nexthop_action`: not one of the table's actions");
    assert_eq!(
        err(rt, "match 0 0 action nexthop_group_action group 3"),
        "line 7: `group`: not the next argument of the action"
    );
    assert_eq!(
        err(rt, "match 0 0 action nexthop_group_action nexthop_group_id 3 extra"),
        "line 7: `action`: the action needs `NAME VALUE` for each of its arguments, in order, and nothing after"
    );
    assert_eq!(
        err(nt, "bogus 1"),
        "line 7: invalid table entry: expected `match VALUE[/MASK]… [priority N] action NAME ARG VALUE…`"
    );
    assert_eq!(entry::parse_line(&p, nt, "   ; a comment", 1), Ok(None));
    let sel = p.selector("nexthop_group_table").unwrap();
    assert_eq!(
        entry::parse_selector_line(sel, "group 70000 member 0 weight 1", 3).unwrap_err().to_string(),
        "line 3: `70000`: a group id below the selector's `n_groups_max`"
    );
    // A learner's default entry.
    let lp = dpdk_program("learner.spec");
    let l = lp.learner("fwd_table").unwrap();
    let d = entry::parse_learner_default(&lp, l, "action learn_action", 2).unwrap().unwrap();
    assert_eq!(d.action, lp.action("learn_action").unwrap());
    assert_eq!(
        entry::parse_learner_default(&lp, l, "match 1 action fwd_action port_out 1", 2).unwrap_err().to_string(),
        "line 2: `match`: a learner's default entry is `action NAME ARG VALUE …`"
    );
    // A default entry: `action` alone.
    assert!(matches!(entry::parse_line(&p, nt, "action drop", 1), Ok(Some(entry::Entry::Default(_)))));
}

/// Learners that learn (a list; tables stay empty): what every learner spec needs.
#[derive(Default)]
struct Learning {
    entries: Vec<(u16, Vec<u8>, p4::ActionId, Vec<u8>)>,
}

impl p4::exec::Tables for Learning {
    fn lookup(&mut self, table: TableRef, key: &[u8]) -> Option<p4::exec::Hit<'_>> {
        let TableRef::Learner(l) = table else { return None };
        self.entries.iter().position(|e| e.0 == l && e.1 == key).map(|i| p4::exec::Hit {
            action: self.entries[i].2,
            args: &self.entries[i].3,
            entry: i as u32,
        })
    }

    fn learn(&mut self, l: u16, key: &[u8], a: p4::ActionId, args: &[u8], _: u64) -> Result<bool, p4::exec::Fault> {
        self.entries.push((l, key.to_vec(), a, args.to_vec()));
        Ok(true)
    }

    fn rearm(&mut self, _: u16, _: &[u8], _: Option<u64>) -> Result<(), p4::exec::Fault> {
        Ok(())
    }

    fn forget(&mut self, l: u16, key: &[u8]) -> Result<(), p4::exec::Fault> {
        self.entries.retain(|e| !(e.0 == l && e.1 == key));
        Ok(())
    }
}

/// Every spec that loads runs a UDP/IPv4 frame twice with empty tables and learning
/// learners: it ends in `tx`, `drop` or a fault naming what the executor does not run yet —
/// never a panic, never another fault.
#[test]
fn every_loaded_spec_runs_a_frame_with_empty_tables() {
    use p4::exec::{Fault, State, Verdict};
    let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    frame.extend_from_slice(&[0x45, 0, 0, 36, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    frame.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 16, 0, 0]);
    frame.extend_from_slice(&[0; 64]);
    let (mut tx, mut drop, mut unsupported, mut other, mut learned) = (0, 0, 0, 0, 0);
    for (dir, list) in [("dpdk", &DPDK[..]), ("p4c", &P4C[..])] {
        for (name, want) in list {
            if want.is_some() {
                continue;
            }
            let p = p4::load(&read(dir, name)).expect("loads");
            let mut st = State::new(&p);
            let mut tables = Learning::default();
            let mut out = [0u8; 1024];
            let first = st.run_with(&p, &mut tables, &frame, 0, &mut out);
            learned += usize::from(!tables.entries.is_empty());
            let second = st.run_with(&p, &mut tables, &frame, 0, &mut out);
            for v in [first, second] {
                match v {
                    Verdict::Tx { len, .. } => {
                        assert!(len <= out.len());
                        tx += 1;
                    }
                    Verdict::Drop => drop += 1,
                    Verdict::Fault(Fault::Unsupported(what)) => {
                        println!("{name}: {what} not run yet");
                        unsupported += 1;
                    }
                    Verdict::Fault(f) => {
                        println!("{name}: {f:?}");
                        other += 1;
                    }
                }
            }
        }
    }
    println!("runs: tx {tx}, drop {drop}, unsupported {unsupported}, other {other}; specs that learned {learned}");
    // Selectors run (no groups: member 0, as DPDK's zeroed group table), so nothing is left
    // unsupported on this frame.
    assert_eq!((tx, drop, unsupported, other, learned), (80, 18, 0, 0, 11));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]
    /// Table-file lines made of the syntax's own words and of odd numbers never panic the
    /// entry parser, and a refusal names the line it was given.
    #[test]
    fn random_table_file_lines_never_panic(words in proptest::collection::vec(0usize..20, 0..12), no in 1u32..1000) {
        const WORDS: [&str; 20] = [
            "match", "action", "priority", "0", "0x0A000000/0xFF000000", "1/0", "0xFFFFFFFF/0x1", "drop",
            "nexthop_group_action", "nexthop_group_id", "nexthop_action", "port_out", "-1",
            "0x1ffffffffffffffff", "/", "0/", "; comment", "ethernet_dst_addr", "0xaabbccddeeff", "//",
        ];
        let p = p4::load(&read("dpdk", "fib.spec")).expect("loads");
        let line: Vec<&str> = words.iter().map(|&i| WORDS[i]).collect();
        let line = line.join(" ");
        for t in &p.tables {
            if let Err(e) = p4::entry::parse_line(&p, t, &line, no) {
                prop_assert_eq!(e.line, no);
            }
        }
        let sel = &p.selectors[0];
        if let Err(e) = p4::entry::parse_selector_line(sel, &line, no) {
            prop_assert_eq!(e.line, no);
        }
    }
}

//! The loader's refusals, one test per kind: each names the line and the construct.

use super::super::*;

/// A small valid spec: every declaration kind, labels, an action with arguments.
const BASE: &str = "\
struct eth_h {
    bit<48> dst
    bit<48> src
    bit<16> type
}
struct meta_t {
    bit<32> port_in
    bit<32> port_out
    bit<32> tmo
    bit<32> arg0
    bit<128> wide
}
struct fwd_args {
    bit<32> port
}
header eth instanceof eth_h
metadata instanceof meta_t
regarray cnt size 16 initval 0
action fwd args instanceof fwd_args {
    mov m.port_out t.port
    rearm
    return
}
action learn_it args none {
    learn fwd m.arg0 m.tmo
    return
}
action nop args none {
    return
}
table t {
    key {
        h.eth.dst exact
    }
    actions {
        fwd
        nop
    }
    default_action fwd args port 3
    size 1024
}
learner l {
    key {
        m.port_in
    }
    actions {
        fwd @tableonly
        learn_it @defaultonly
    }
    default_action learn_it args none
    size 64
    timeout {
        10
    }
}
apply {
    rx m.port_in
    extract h.eth
    jmpnv END h.eth
    table t
    jmpnh END
    table l
    regadd cnt 0 1
    END : emit h.eth
    tx m.port_out
}
";

/// `BASE` with line `line` (1-based) replaced by `with`.
fn edit(line: usize, with: &str) -> String {
    BASE.lines().enumerate().map(|(i, l)| if i + 1 == line { with } else { l }).collect::<Vec<_>>().join("\n")
}

/// The line (1-based) of `BASE` that contains `needle`.
fn at(needle: &str) -> usize {
    BASE.lines().position(|l| l.contains(needle)).map(|i| i + 1).unwrap()
}

fn refused(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

#[test]
fn base_loads() {
    let p = load(BASE).unwrap();
    assert_eq!((p.header_bytes, p.meta_bytes), (14, 32));
    assert_eq!(p.tables[0].default.args, 3u32.to_le_bytes());
    assert_eq!(p.apply[2], Instr::JmpValid { target: 7, header: 0, valid: false });
    assert_eq!(p.apply[4], Instr::JmpHit { target: 7, hit: false });
}

#[test]
fn unsupported_instructions_are_refused_by_name() {
    let l = at("regadd cnt");
    for (instr, name) in [
        ("mirror m.tmo m.tmo", "mirror"),
        ("recirculate", "recirculate"),
        ("recircid m.tmo", "recircid"),
        ("meter mm m.tmo m.tmo 0 m.tmo", "meter"),
        ("movh m.wide m.tmo", "movh"),
        ("rss h0 m.tmo h.eth.dst h.eth.type", "rss"),
    ] {
        assert_eq!(refused(&edit(l, instr)), format!("line {l}: instruction `{name}` is not supported"));
    }
    assert_eq!(
        refused(&edit(at("extract"), "extract h.eth m.tmo")),
        format!("line {}: instruction `extract (varbit)` is not supported", at("extract"))
    );
    assert_eq!(refused(&edit(l, "frobnicate m.tmo")), format!("line {l}: instruction `frobnicate` not found"));
}

#[test]
fn unsupported_declarations_are_refused_by_name() {
    assert_eq!(refused(&edit(3, "    varbit<320> opts")), "line 3: varbit field `opts` is not supported");
    assert_eq!(refused(&edit(1, "extobj e instanceof x")), "line 1: statement `extobj` is not supported");
    assert_eq!(refused(&edit(1, "rss h0")), "line 1: statement `rss` is not supported");
}

#[test]
fn unknown_names() {
    let l = at("regadd cnt");
    assert_eq!(refused(&edit(l, "mov m.tmo h.eth.foo")), format!("line {l}: field `h.eth.foo` not found"));
    assert_eq!(refused(&edit(l, "mov m.nope 1")), format!("line {l}: field `m.nope` not found"));
    assert_eq!(refused(&edit(l, "emit h.ipv4")), format!("line {l}: header `h.ipv4` not found"));
    assert_eq!(refused(&edit(l, "table nope")), format!("line {l}: table `nope` not found"));
    assert_eq!(refused(&edit(l, "regadd nope 0 1")), format!("line {l}: regarray `nope` not found"));
    assert_eq!(refused(&edit(l, "jmp NOWHERE")), format!("line {l}: label `NOWHERE` not found"));
    assert_eq!(refused(&edit(l, "jmpa END zap")), format!("line {l}: action `zap` not found"));
    let h = at("header eth");
    assert_eq!(refused(&edit(h, "header eth instanceof nope_h")), format!("line {h}: struct `nope_h` not found"));
    let k = at("h.eth.dst exact");
    assert_eq!(refused(&edit(k, "h.eth.zz exact")), format!("line {k}: field `h.eth.zz` not found"));
    let a = at("        nop");
    assert_eq!(refused(&edit(a, "        zap")), format!("line {a}: action `zap` not found"));
    let no_apply: String = BASE.split("apply {").next().unwrap().into();
    assert_eq!(refused(&no_apply), "line 0: block `apply` not found");
    let m = at("metadata instanceof");
    assert_eq!(refused(&edit(m, "")), "line 0: statement `metadata` not found");
}

#[test]
fn widths() {
    assert_eq!(
        refused(&edit(2, "    bit<12> dst")),
        "line 2: number `bit<12>`: a field's width must be a nonzero multiple of 8 bits"
    );
    assert_eq!(
        refused(&edit(2, "    bit<0> dst")),
        "line 2: number `bit<0>`: a field's width must be a nonzero multiple of 8 bits"
    );
    let l = at("regadd cnt");
    assert_eq!(
        refused(&edit(l, "add m.wide 1")),
        format!("line {l}: field `m.wide` is 128 bits: this operand takes at most 64 bits")
    );
    assert_eq!(
        refused(&edit(l, "mov m.wide m.tmo")),
        format!("line {l}: field `m.tmo` is 32 bits: `mov` between fields wider than 64 bits needs equal widths")
    );
    assert_eq!(
        refused(&edit(l, "ckadd h.eth.dst h.eth.type")),
        format!("line {l}: field `h.eth.dst` is 48 bits: a checksum field is 16 bits")
    );
    assert_eq!(
        refused(&edit(l, "mov m.tmo 0x1ffffffffffffffff")),
        format!("line {l}: number `0x1ffffffffffffffff`: not a field and not a 64-bit number")
    );
}

#[test]
fn operand_kinds_and_places() {
    let l = at("regadd cnt");
    let cases = [
        ("mov m.tmo t.port", "action arguments (`t.`) exist only inside an action"),
        (
            "jmpeq END 5 m.tmo",
            "the first operand of a compare-and-jump must be a field (DPDK 22.11 refuses an immediate there)",
        ),
        ("return", "allowed in an action only, not in `apply`"),
        ("learn fwd m.arg0 m.tmo", "allowed in an action only, not in `apply`"),
        ("mov m.tmo", "wrong number of operands"),
        ("tx h.eth.type", "this operand must be a metadata field"),
        ("ckadd m.tmo h.eth.type", "the destination must be a 16-bit header field"),
    ];
    for (instr, rule) in cases {
        let op = instr.split(' ').next().unwrap();
        assert_eq!(refused(&edit(l, instr)), format!("line {l}: instruction `{op}`: {rule}"), "{instr}");
    }
    let a = at("mov m.port_out t.port");
    assert_eq!(
        refused(&edit(a, "    mov t.port 1")),
        format!("line {a}: instruction `mov`: the destination must be a header or metadata field")
    );
    assert_eq!(
        refused(&edit(a, "    extract h.eth")),
        format!("line {a}: instruction `extract`: allowed in `apply` only, not in an action")
    );
    let learn = at("learn fwd m.arg0");
    assert_eq!(
        refused(&edit(learn, "    learn fwd m.wide m.tmo")),
        format!("line {learn}: field `m.wide` is 128 bits: this operand takes at most 64 bits")
    );
    assert_eq!(
        refused(&edit(learn, "    learn fwd m.tmo")),
        format!("line {learn}: instruction `learn`: the learned action has arguments: give their first metadata field")
    );
}

#[test]
fn labels() {
    let l = at("regadd cnt");
    assert_eq!(refused(&edit(l, "END : drop")), format!("line {}: duplicate label `END`", at("END : emit")));
    assert_eq!(
        refused(&edit(l, "SELF : jmp SELF")),
        format!("line {l}: instruction `jmp`: a jump to its own instruction (a loop) is refused")
    );
}

#[test]
fn at_most_64_headers() {
    let h = at("header eth");
    let many: String = (0..64).map(|i| format!("header e{i} instanceof eth_h\n")).collect();
    let text = edit(h, &format!("{many}header eth instanceof eth_h"));
    assert_eq!(refused(&text), format!("line {}: `eth`: a program has at most 64 headers", h + 64));
    let text = edit(h, &many.trim_end().replace("header e63", "header eth"));
    assert!(load(&text).is_ok());
}

#[test]
fn duplicates() {
    let h = at("header eth");
    assert_eq!(refused(&edit(h + 1, "header eth instanceof eth_h")), format!("line {}: duplicate header `eth`", h + 1));
    assert_eq!(refused(&edit(3, "    bit<48> dst")), "line 3: duplicate field `dst`");
    let n = at("action nop");
    assert_eq!(refused(&edit(n, "action fwd args none {")), format!("line {n}: duplicate action `fwd`"));
    let t = at("learner l {");
    assert_eq!(refused(&edit(t, "learner t {")), format!("line {t}: duplicate table `t`"));
}

#[test]
fn table_rules() {
    let d = at("default_action fwd args port 3");
    assert_eq!(
        refused(&edit(d, "    default_action fwd args prt 3")),
        format!("line {d}: `prt`: not the next argument of the default action")
    );
    assert_eq!(
        refused(&edit(d, "    default_action nop args x 3")),
        format!("line {d}: `nop`: arguments given to an action of `args none`")
    );
    assert_eq!(
        refused(&edit(d, "    default_action learn_it args none")),
        format!("line {d}: `learn_it`: the default action is not in the table's `actions`")
    );
    let a = at("        nop");
    assert_eq!(
        refused(&edit(a, "        learn_it")),
        format!("line {a}: `learn_it`: an action that runs `learn` or `forget` belongs to a learner, not a table")
    );
    let k = at("h.eth.dst exact");
    assert_eq!(
        refused(&edit(k, "h.eth.dst range")),
        format!("line {k}: `range`: a match kind is `exact`, `lpm` or `wildcard`")
    );
    let ld = at("default_action learn_it");
    assert_eq!(
        refused(&edit(ld, "    default_action fwd args port 1")),
        format!("line {ld}: `fwd`: a `@tableonly` action cannot be the default action")
    );
    let tm = at("        10");
    assert_eq!(refused(&edit(tm, "        0")), format!("line {tm}: `l`: a learner timeout is at least 1 second"));
}

#[test]
fn apply_rules_and_syntax() {
    let rx = at("rx m.port_in");
    assert_eq!(
        refused(&edit(rx, "    extract h.eth")),
        format!("line {rx}: `apply`: the first instruction of `apply` must be `rx`")
    );
    let tx = at("tx m.port_out");
    assert_eq!(
        refused(&edit(tx, "    emit h.eth")),
        format!("line {}: `apply`: `apply` needs at least one `tx` or `drop`", at("apply {"))
    );
    assert_eq!(refused(&edit(1, "struct eth_h")), "line 1: invalid struct statement: expected `struct NAME {`");
    assert_eq!(refused(&edit(1, "bogus")), "line 1: `bogus`: not a statement of the spec language");
    let long = "x".repeat(64);
    assert_eq!(
        refused(&edit(1, &format!("struct {long} {{"))),
        "line 1: a token of 64 characters or more (DPDK's limit is 63)"
    );
    let cut: String = BASE.lines().take(at("apply {") + 1).collect::<Vec<_>>().join("\n");
    assert_eq!(refused(&cut), format!("line {}: invalid end of text: expected `}}`", at("apply {") + 1));
}

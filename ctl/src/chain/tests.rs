//! TOML → text form → `ChainSpec` round trips, and errors that name file, line and field.

use super::*;
use cadence_core::nf::acl::{AclAction, AclConfig, AclRule, Prefix};
use cadence_core::nf::config::NfSpec;
use cadence_core::nf::encrypt::{ClearPolicy, EncryptConfig};
use cadence_core::nf::l3fwd::{L3fwdConfig, NextHop, Route4, Route6};
use cadence_core::nf::lb::{Backend, LbConfig, Vip};
use cadence_core::parse::IpAddr;

const FULL: &str = r#"
[chain]
nfs = ["acl", "lb", "encrypt", "l3fwd"]

[acl]
default = "deny"
flow_capacity = 1024

[[acl.rule]]
priority = 10
src = "10.0.0.0/8"
dst_port = "80-443"
proto = "tcp"
action = "permit"

[[acl.rule]]
src = "fd00::/16"
dst = "fd00:1::/32"
src_port = 53
proto = "udp"
vlan = 100
action = "permit"

[lb]
max_backends = 16
[[lb.vip]]
addr = "10.1.0.1"
port = 80
proto = "tcp"
backends = ["10.2.0.1", "10.2.0.2:8080"]
[[lb.vip]]
addr = "fd00::80"
port = 443
proto = "udp"
backends = ["[fd00::1]:4443", "fd00::2"]

[encrypt]
key = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
clear = "drop"

[l3fwd]
lpm4 = "poptrie"
first_stride4 = 18

[[l3fwd.route]]
prefix = "10.0.0.0/8"
port = 1
mac = "02:00:00:00:01:01"
[[l3fwd.route]]
prefix = "10.1.0.0/16"
port = 0
mac = "02:00:00:00:01:00"
[[l3fwd.route]]
prefix = "fd00::/8"
port = 1
mac = "02:00:00:00:01:01"
"#;

fn expected_full() -> Vec<NfSpec> {
    let mut acl = AclConfig::new(
        vec![
            AclRule {
                src: Some(Prefix::v4([10, 0, 0, 0], 8)),
                dport: (80, 443),
                proto: Some(6),
                ..AclRule::any(10, AclAction::Permit)
            },
            AclRule {
                src: Some(Prefix::v6([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 16)),
                dst: Some(Prefix::v6([0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 32)),
                sport: (53, 53),
                vlan: Some(100),
                proto: Some(17),
                ..AclRule::any(0, AclAction::Permit)
            },
        ],
        AclAction::Deny,
    );
    acl.flow_capacity = 1024;
    let mut lb = LbConfig::default();
    lb.max_backends = 16;
    let v6 = |last: u8| {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = last;
        IpAddr::V6(a)
    };
    lb.vips = vec![
        Vip {
            addr: IpAddr::V4([10, 1, 0, 1]),
            port: 80,
            proto: 6,
            backends: vec![
                Backend { addr: IpAddr::V4([10, 2, 0, 1]), port: None },
                Backend { addr: IpAddr::V4([10, 2, 0, 2]), port: Some(8080) },
            ],
        },
        Vip {
            addr: v6(0x80),
            port: 443,
            proto: 17,
            backends: vec![Backend { addr: v6(1), port: Some(4443) }, Backend { addr: v6(2), port: None }],
        },
    ];
    let mut enc = EncryptConfig::default();
    enc.key = core::array::from_fn(|i| i as u8);
    enc.clear = ClearPolicy::Drop;
    let mut l3 = L3fwdConfig::default();
    l3.lpm4 = cadence_core::nf::l3fwd::Lpm4Kind::Poptrie;
    l3.first_stride4 = 18;
    l3.next_hops = vec![NextHop::mac(1, [2, 0, 0, 0, 1, 1]), NextHop::mac(0, [2, 0, 0, 0, 1, 0])];
    l3.routes4 = vec![
        Route4 { prefix: [10, 0, 0, 0], len: 8, next_hop: 0 },
        Route4 { prefix: [10, 1, 0, 0], len: 16, next_hop: 1 },
    ];
    let mut fd = [0u8; 16];
    fd[0] = 0xfd;
    l3.routes6 = vec![Route6 { prefix: fd, len: 8, next_hop: 0 }];
    vec![NfSpec::Acl(acl), NfSpec::Lb(lb), NfSpec::Encrypt(enc), NfSpec::L3fwd(l3)]
}

#[test]
fn toml_to_text_to_spec_round_trips() {
    let c = compile("full.toml", FULL).expect("compiles");
    assert_eq!(c.spec.nfs, expected_full(), "text form:\n{}", c.text);
    assert_eq!(c.names(), ["acl", "lb", "encrypt", "l3fwd"]);
    // The text form as documented (docs/PROTOCOL.md): versioned, one record per line.
    let lines: Vec<&str> = c.text.lines().collect();
    assert_eq!(lines[0], "version=1");
    assert_eq!(lines[1], "nf=acl");
    assert_eq!(lines[2], "acl.default=deny");
    assert!(lines.contains(&"acl.rule=prio:10,src:10.0.0.0/8,dport:80-443,proto:tcp,action:permit"), "{}", c.text);
    assert!(lines.contains(&"lb.vip=addr:10.1.0.1,port:80,proto:tcp,backends:10.2.0.1;10.2.0.2:8080"), "{}", c.text);
    // Parsing the text again gives the same spec.
    assert_eq!(ChainSpec::parse(&c.text).expect("reparses"), c.spec);
}

#[test]
fn the_chain_files_compile() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../chains");
    for (f, names) in
        [("chain1.toml", &["acl", "lb", "accounting"][..]), ("chain2.toml", &["acl", "urlfilter", "encrypt"])]
    {
        let c = load(&dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e:#}"));
        assert_eq!(c.names(), names, "{f}");
    }
}

/// `compile` of `src` with `line` replaced by `with` fails with exactly `want`.
fn fails(src: &str, want: &str) {
    match compile("chains/x.toml", src) {
        Ok(c) => panic!("compiled:\n{}\nexpected {want}", c.text),
        Err(e) => assert_eq!(e.to_string(), want),
    }
}

const ACL_HEAD: &str = "[chain]\nnfs = [\"acl\"]\n[acl]\n";

#[test]
fn errors_name_file_line_and_field() {
    let rule = |n: &str| {
        format!(
            "{ACL_HEAD}[[acl.rule]]\naction = \"deny\"\n[[acl.rule]]\naction = \"deny\"\n[[acl.rule]]\naction = \"deny\"\n[[acl.rule]]\n{n}\n"
        )
    };
    // Field values checked by the image's own parser, mapped back to the TOML.
    fails(
        &rule("src = \"10.0.0/33\"\naction = \"deny\""),
        "chains/x.toml:11: acl.rule[3].src: expected an IPv4/IPv6 prefix, got \"10.0.0/33\"",
    );
    fails(
        &rule("dst_port = \"443-80\"\naction = \"deny\""),
        "chains/x.toml:11: acl.rule[3].dst_port: expected a port or port range LO-HI (0..=65535, LO <= HI) or any, got \"443-80\"",
    );
    fails(
        &rule("vlan = 4095\naction = \"deny\""),
        "chains/x.toml:11: acl.rule[3].vlan: expected a VLAN ID 1..=4094 or any, got \"4095\"",
    );
    fails(&rule("action = \"allow\""), "chains/x.toml:11: acl.rule[3].action: expected permit or deny, got \"allow\"");
    fails(
        &rule("proto = \"sctp\"\naction = \"deny\""),
        "chains/x.toml:11: acl.rule[3].proto: expected a protocol (tcp, udp, icmp, icmpv6, any, or 0..=255), got \"sctp\"",
    );
    fails(
        &rule("src = \"10.0.0.1/8\"\naction = \"deny\""),
        "chains/x.toml:11: acl.rule[3].src: expected a prefix without host bits set, got \"10.0.0.1/8\"",
    );
    fails(
        &rule("src = \"10.0.0.0/8\"\ndst = \"fd00::/8\"\naction = \"deny\""),
        "chains/x.toml:12: acl.rule[3].dst: expected a prefix of the same IP version as src, got \"fd00::/8\"",
    );
    fails(
        &format!("{ACL_HEAD}default = \"maybe\"\n"),
        "chains/x.toml:4: acl.default: expected permit or deny, got \"maybe\"",
    );
    // Serde's errors: type, unknown and missing fields.
    let e = compile("chains/x.toml", &rule("priority = \"high\"\naction = \"deny\"")).expect_err("type");
    assert_eq!((e.line, e.field.as_str()), (11, "acl.rule[3].priority"), "{e}");
    let e = compile("chains/x.toml", &rule("srcc = \"10.0.0.0/8\"\naction = \"deny\"")).expect_err("unknown");
    assert_eq!((e.line, e.field.as_str()), (11, "acl.rule[3].srcc"), "{e}");
    assert!(e.message.contains("unknown field"), "{e}");
    let e = compile("chains/x.toml", &rule("priority = 1")).expect_err("missing");
    assert!(e.message.contains("action"), "{e}");
    // Chain-level checks.
    fails("[chain]\nnfs = [\"acl\", \"acl\"]\n", "chains/x.toml:2: chain.nfs[1]: \"acl\" listed twice");
    fails(
        "[chain]\nnfs = [\"firewall\"]\n",
        "chains/x.toml:2: chain.nfs[0]: unknown NF (known: acl, lb, accounting, nat, urlfilter, encrypt, l3fwd, p4), got \"firewall\"",
    );
    fails(
        "[chain]\nnfs = []\nvalidate = \"l7\"\n",
        "chains/x.toml:3: chain.validate: expected l2, l3 or l4, got \"l7\"",
    );
    let e = compile("chains/x.toml", "[chain]\nnfs = []\n[acl]\ndefault = \"deny\"\n").expect_err("unlisted");
    assert!(e.to_string().starts_with("chains/x.toml:3: acl: configured but not in chain.nfs"), "{e}");
    // A value that would break the text form.
    fails(
        &rule("src = \"10.0.0.0/8,x\"\naction = \"deny\""),
        "chains/x.toml:11: acl.rule[3].src: must not contain ',', ';' or a line break, got \"10.0.0.0/8,x\"",
    );
}

#[test]
fn nf_errors_map_to_their_records() {
    let lb = "[chain]\nnfs = [\"lb\"]\n[[lb.vip]]\naddr = \"10.1.0.1\"\nport = 80\nproto = \"tcp\"\nbackends = [\"10.2.0.1\"]\n\
              [[lb.vip]]\naddr = \"10.1.0.2\"\nport = 80\nproto = \"tcp\"\nbackends = [\"10.2.0.1\", \"fd00::1\"]\n";
    let e = compile("c.toml", lb).expect_err("family");
    assert_eq!((e.line, e.field.as_str()), (12, "lb.vip[1].backends"), "{e}");
    assert!(e.message.contains("other IP version"), "{e}");
    let e = compile("c.toml", &lb.replace("\"fd00::1\"", "\"10.2.0.1:99999\"")).expect_err("port");
    assert_eq!((e.line, e.field.as_str()), (12, "lb.vip[1].backends"), "{e}");
    let e =
        compile("c.toml", &lb.replace("proto = \"tcp\"\nbackends = [\"10.2.0.1\", ", "proto = \"sctp\"\nbackends = ["))
            .expect_err("proto");
    assert_eq!((e.line, e.field.as_str()), (11, "lb.vip[1].proto"), "{e}");
    let enc = "[chain]\nnfs = [\"encrypt\"]\n[encrypt]\nkey = \"0011\"\n";
    fails(
        enc,
        "c.toml:4: encrypt.key: expected 64 hex digits (a 32-byte key), got \"0011\""
            .replace("c.toml", "chains/x.toml")
            .as_str(),
    );
    let zero = format!("[chain]\nnfs = [\"encrypt\"]\n[encrypt]\nkey = \"{}\"\n", "0".repeat(64));
    let e = compile("c.toml", &zero).expect_err("zero key");
    assert!(e.message.contains("all zeros"), "{e}");
    let l3 = "[chain]\nnfs = [\"l3fwd\"]\n[[l3fwd.route]]\nprefix = \"10.0.0.0/8\"\nport = 1\nmac = \"02:00:00:00:01:01\"\n\
              [[l3fwd.route]]\nprefix = \"10.0.0.0/8\"\nport = 0\nmac = \"02:00:00:00:01:0g\"\n";
    let e = compile("c.toml", l3).expect_err("mac");
    assert_eq!((e.line, e.field.as_str()), (10, "l3fwd.route[1].mac"), "{e}");
    let e = compile("c.toml", &l3.replace("01:0g", "01:00")).expect_err("duplicate");
    assert_eq!(e.line, 7, "{e}");
    assert!(e.message.contains("duplicate prefix"), "{e}");
}

#[test]
fn path_at_finds_nested_keys() {
    let src = "[chain]\nnfs = [\"acl\"]\n[acl]\n[[acl.rule]]\naction = \"deny\"\n[[acl.rule]]\nsrc = 5\n";
    let at = src.find("5").expect("5");
    assert_eq!(path_at(src, &(at..at + 1)), "acl.rule[1].src");
}

const TIMEOUTS: &str = r#"
[chain]
nfs = ["acl", "lb", "accounting", "nat", "urlfilter", "encrypt"]
[acl]
flow_timeout_ms = 10000
[lb]
affinity_timeout_ms = 300000
[accounting]
idle_timeout_ms = 86400000
[nat]
external = "192.0.2.1"
timeout_ms = 1
[urlfilter]
inspect_timeout_ms = 250
flow_timeout_ms = 60000
handshake_timeout_ms = 40
undecided = "allow"
[encrypt]
key = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
udp_idle_timeout_ms = 1500
"#;

#[test]
fn timeouts_round_trip_in_milliseconds() {
    use cadence_core::nf::config::Timeouts;
    use cadence_core::time::{Duration, TickRate};
    let c = compile("t.toml", TIMEOUTS).expect("compiles");
    let lines: Vec<&str> = c.text.lines().collect();
    for want in [
        "acl.flow_timeout_ms=10000",
        "lb.affinity_timeout_ms=300000",
        "accounting.idle_timeout_ms=86400000",
        "nat.timeout_ms=1",
        "urlfilter.inspect_timeout_ms=250",
        "urlfilter.flow_timeout_ms=60000",
        "urlfilter.handshake_timeout_ms=40",
        "urlfilter.undecided=allow",
        "encrypt.udp_idle_timeout_ms=1500",
    ] {
        assert!(lines.contains(&want), "{want} missing in\n{}", c.text);
    }
    assert_eq!(lines[0], "version=1");
    let none = Timeouts::default();
    assert_eq!(
        c.spec.timeouts,
        [
            Timeouts { flow_ms: Some(10_000), ..none },
            Timeouts { affinity_ms: Some(300_000), ..none },
            Timeouts { idle_ms: Some(86_400_000), ..none },
            Timeouts { nat_ms: Some(1), ..none },
            Timeouts { inspect_ms: Some(250), flow_ms: Some(60_000), handshake_ms: Some(40), ..none },
            Timeouts { udp_idle_ms: Some(1_500), ..none },
        ]
    );
    assert_eq!(ChainSpec::parse(&c.text).expect("reparses"), c.spec);
    // In ticks of a 1 MHz clock (1000 per millisecond).
    let cfg = c.spec.configs(TickRate::try_new(1_000_000).expect("non-zero"));
    let ticks: Vec<Vec<Duration>> = cfg
        .iter()
        .map(|nf| match nf {
            NfSpec::Acl(c) => vec![c.flow_timeout],
            NfSpec::Lb(c) => vec![c.affinity_timeout],
            NfSpec::Accounting(c) => vec![c.idle_timeout],
            NfSpec::Nat(c) => vec![c.timeout],
            NfSpec::UrlFilter(c) => {
                assert_eq!(c.undecided, cadence_core::nf::urlfilter::Undecided::Allow);
                vec![c.inspect_timeout, c.flow_timeout, c.handshake_timeout]
            }
            NfSpec::Encrypt(c) => vec![c.udp_idle_timeout],
            _ => vec![],
        })
        .collect();
    let d = Duration;
    assert_eq!(
        ticks,
        [
            vec![d(10_000_000)],
            vec![d(300_000_000)],
            vec![d(86_400_000_000)],
            vec![d(1_000)],
            vec![d(250_000), d(60_000_000), d(40_000)],
            vec![d(1_500_000)]
        ]
    );
}

#[test]
fn chain_files_without_timeouts_keep_the_defaults() {
    let c = compile("full.toml", FULL).expect("compiles");
    assert!(c.spec.timeouts.iter().all(|t| *t == Default::default()), "{:?}", c.spec.timeouts);
    assert!(!c.text.contains("_ms="), "{}", c.text);
}

#[test]
fn timeout_errors_name_file_line_and_field() {
    // TIMEOUTS with the value on `line` replaced by `v`.
    let at = |line: usize, v: &str| {
        let l: Vec<String> = TIMEOUTS
            .lines()
            .enumerate()
            .map(|(i, l)| match l.split_once(" = ") {
                Some((k, _)) if i + 1 == line => format!("{k} = {v}"),
                _ => l.to_string(),
            })
            .collect();
        l.join("\n")
    };
    fails(
        &at(5, "0"),
        "chains/x.toml:5: acl.flow_timeout_ms: expected milliseconds 1..=86400000 (at most one day), got \"0\"",
    );
    fails(
        &at(9, "86400001"),
        "chains/x.toml:9: accounting.idle_timeout_ms: expected milliseconds 1..=86400000 (at most one day), got \"86400001\"",
    );
    fails(
        &at(14, "0"),
        "chains/x.toml:14: urlfilter.inspect_timeout_ms: expected milliseconds 1..=86400000 (at most one day), got \"0\"",
    );
    fails(
        &at(16, "0"),
        "chains/x.toml:16: urlfilter.handshake_timeout_ms: expected milliseconds 1..=86400000 (at most one day), got \"0\"",
    );
    fails(&at(17, "\"maybe\""), "chains/x.toml:17: urlfilter.undecided: expected deny or allow, got \"maybe\"");
    fails(
        &at(20, "99999999999"),
        "chains/x.toml:20: encrypt.udp_idle_timeout_ms: expected milliseconds 1..=86400000 (at most one day), got \"99999999999\"",
    );
    // Not a number, negative, or a key the NF does not have: serde's errors, at the key.
    let e = compile("chains/x.toml", &at(12, "-5")).expect_err("negative");
    assert_eq!((e.line, e.field.as_str()), (12, "nat.timeout_ms"), "{e}");
    let e = compile("chains/x.toml", &at(7, "\"5s\"")).expect_err("string");
    assert_eq!((e.line, e.field.as_str()), (7, "lb.affinity_timeout_ms"), "{e}");
    let e = compile("chains/x.toml", &TIMEOUTS.replace("[lb]\n", "[lb]\nflow_timeout_ms = 5\n")).expect_err("unknown");
    assert_eq!((e.line, e.field.as_str()), (7, "lb.flow_timeout_ms"), "{e}");
    assert!(e.message.contains("unknown field"), "{e}");
}

/// `[chain] validate` becomes the text form's `validate=` record and the spec's depth.
#[test]
fn validate_reaches_the_text_form() {
    use cadence_core::parse::Depth;
    let c = compile("chains/x.toml", "[chain]\nnfs = [\"l3fwd\"]\nvalidate = \"l3\"\n").expect("compiles");
    assert!(c.text.lines().any(|l| l == "validate=l3"), "{}", c.text);
    assert_eq!(c.spec.validate, Depth::L3);
    let c = compile("chains/x.toml", "[chain]\nnfs = []\n").expect("compiles");
    assert!(!c.text.contains("validate"), "{}", c.text);
    assert_eq!(c.spec.validate, Depth::L4);
}

/// The example router chain compiles, with its addresses and resolved routes.
#[test]
fn the_example_router_chain_compiles() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../chains/router.toml");
    let c = crate::chain::load(&path).expect("chains/router.toml compiles");
    let n = c.spec.neigh.as_ref().expect("a neighbour table");
    assert_eq!((n.cfg.addrs.len(), n.cfg.addrs6.len(), n.cfg.vlans.len()), (4, 1, 1));
    assert!(c.text.lines().any(|l| l == "l3fwd.route=prefix:10.78.2.0/24,port:2,via:direct"), "{}", c.text);
    assert!(c.text.lines().any(|l| l == "l3fwd.route=prefix:10.78.3.0/24,port:8,via:direct"), "{}", c.text);
    assert!(c.text.lines().any(|l| l == "l3fwd.route=prefix:0.0.0.0/0,port:1,via:10.78.1.254"), "{}", c.text);
}

/// `[[port.addr]]`, `[neigh]` and `via` routes reach the text form and the spec; a bad
/// address points at its TOML line and key.
#[test]
fn addresses_neighbours_and_via_routes_reach_the_text_form() {
    let src = "[chain]\nnfs = [\"l3fwd\"]\n\n[[port.addr]]\nport = 0\naddr = \"10.0.0.1/24\"\n\n\
               [neigh]\ncapacity = 64\nretrans_ms = 500\nicmp_rate = 20\n[[neigh.static]]\nport = 1\nip = \"10.0.1.50\"\n\
               mac = \"02:00:00:00:00:50\"\n\n[[l3fwd.route]]\nprefix = \"0.0.0.0/0\"\nport = 1\n\
               via = \"10.0.1.254\"\n[[l3fwd.route]]\nprefix = \"10.0.0.0/24\"\nport = 0\nvia = \"direct\"\n";
    let c = compile("chains/x.toml", src).expect("compiles");
    for line in [
        "port.addr=port:0,addr:10.0.0.1/24",
        "neigh.capacity=64",
        "neigh.retrans_ms=500",
        "neigh.icmp_rate=20",
        "neigh.static=port:1,ip:10.0.1.50,mac:02:00:00:00:00:50",
        "l3fwd.route=prefix:0.0.0.0/0,port:1,via:10.0.1.254",
        "l3fwd.route=prefix:10.0.0.0/24,port:0,via:direct",
    ] {
        assert!(c.text.lines().any(|l| l == line), "{line} missing from\n{}", c.text);
    }
    let n = c.spec.neigh.as_ref().expect("a neighbour table");
    assert_eq!((n.cfg.addrs.len(), n.cfg.capacity, n.retrans_ms), (1, 64, Some(500)));
    let bad = src.replace("10.0.0.1/24", "10.0.0.255/24");
    let e = compile("chains/x.toml", &bad).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (4, "port.addr[0]"), "{e}");
}

/// IPv6 routes resolved through the neighbour table (`via = "direct"`, `via` an IPv6
/// gateway) reach the text form; a gateway of the other IP version points at its route.
#[test]
fn ipv6_via_routes_reach_the_text_form() {
    let src = "[chain]\nnfs = [\"l3fwd\"]\n\n[[port.addr]]\nport = 1\naddr = \"fd78::1/64\"\n\n\
               [[l3fwd.route]]\nprefix = \"fd79::/64\"\nport = 1\nvia = \"direct\"\n\
               [[l3fwd.route]]\nprefix = \"::/0\"\nport = 1\nvia = \"fd78::fe\"\n";
    let c = compile("chains/x.toml", src).expect("compiles");
    for line in [
        "port.addr=port:1,addr:fd78::1/64",
        "l3fwd.route=prefix:fd79::/64,port:1,via:direct",
        "l3fwd.route=prefix:::/0,port:1,via:fd78::fe",
    ] {
        assert!(c.text.lines().any(|l| l == line), "{line} missing from\n{}", c.text);
    }
    let bad = src.replace("fd78::fe", "10.0.0.254");
    let e = compile("chains/x.toml", &bad).unwrap_err();
    assert!(e.to_string().contains("IP version"), "{e}");
    assert_eq!((e.line, e.field.as_str()), (15, "l3fwd.route[1].via"), "{e}");
}

/// `chains/p4-router.toml`: the spec and its table file (paths relative to the chain file)
/// reach the text form a line per record and load as the `p4` NF.
#[test]
fn the_example_p4_chain_compiles() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../chains/p4-router.toml");
    let c = load(&path).expect("chains/p4-router.toml compiles");
    assert_eq!(c.names(), ["p4"]);
    let NfSpec::P4(cfg) = &c.spec.nfs[0] else { panic!("{:?}", c.spec) };
    let spec = std::fs::read_to_string(path.with_file_name("p4/router.spec")).unwrap();
    // Line for line (the text form trims each record's indentation, which the spec ignores).
    assert_eq!(cfg.spec.lines().collect::<Vec<_>>(), spec.lines().map(str::trim).collect::<Vec<_>>());
    assert_eq!(cfg.tables.len(), 1);
    assert_eq!(cfg.tables[0].0, "routes");
    assert!(c.text.lines().any(|l| l == "p4.table=routes"), "{}", c.text);
}

/// A spec or table file the loader refuses: the error names the chain file's line, the key,
/// the file and the construct at its own line; a missing file names its path.
#[test]
fn p4_errors_name_the_file_and_the_construct() {
    let dir = std::env::temp_dir().join(format!("cadence-p4-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../chains/p4/router.spec")).unwrap();
    std::fs::write(dir.join("bad.spec"), good.replace("\tsub h.ipv4.ttl 0x1", "\tmirror h.ipv4.ttl 0x1")).unwrap();
    std::fs::write(dir.join("good.spec"), &good).unwrap();
    std::fs::write(dir.join("bad_table.txt"), "match 0x0a000000/0xff000000 action nope port_out 1\n").unwrap();
    let line = good.lines().position(|l| l == "\tsub h.ipv4.ttl 0x1").unwrap() + 1;
    let chain = |spec: &str, table: &str| {
        let toml = dir.join("c.toml");
        std::fs::write(
            &toml,
            format!("[chain]\nnfs = [\"p4\"]\n[p4]\nspec = \"{spec}\"\n[p4.tables]\nroutes = \"{table}\"\n"),
        )
        .unwrap();
        format!("{:#}", load(&toml).unwrap_err())
    };
    let e = chain("bad.spec", "bad_table.txt");
    assert!(e.contains(":4: p4.spec: bad.spec: p4 spec: line ") && e.contains(&format!("line {line}:")), "{e}");
    assert!(e.contains("mirror"), "{e}");
    let e = chain("good.spec", "bad_table.txt");
    assert!(e.contains(":6: p4.tables.routes: bad_table.txt: p4 tables: table `routes`: line 1:"), "{e}");
    assert!(e.contains("nope"), "{e}");
    let e = chain("missing.spec", "bad_table.txt");
    assert!(e.contains("p4.spec: reading ") && e.contains("missing.spec"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `[[port.vlan]]` sub-interfaces are numbered from `PORTS` in order, and `vlan = V` beside
/// `port` names one in the other records; a VID no `[[port.vlan]]` declares, or a bad one,
/// points at its TOML line and key.
#[test]
fn vlan_sub_interfaces_reach_the_text_form_as_interface_numbers() {
    let src = "[chain]\nnfs = [\"l3fwd\"]\n\n[[port.vlan]]\nport = 1\nvid = 100\n[[port.vlan]]\nport = 0\nvid = 7\n\n\
               [[port.addr]]\nport = 1\nvlan = 100\naddr = \"10.0.5.1/24\"\n\
               [[port.mtu]]\nport = 0\nvlan = 7\nmtu = 1400\n\n\
               [[neigh.static]]\nport = 1\nvlan = 100\nip = \"10.0.5.9\"\nmac = \"02:00:00:00:00:59\"\n\n\
               [[l3fwd.route]]\nprefix = \"10.0.5.0/24\"\nport = 1\nvlan = 100\nvia = \"direct\"\n";
    let c = compile("chains/x.toml", src).expect("compiles");
    let (a, b) = (cadence_core::stage::PORTS, cadence_core::stage::PORTS + 1);
    for line in [
        format!("port.vlan=iface:{a},port:1,vid:100"),
        format!("port.vlan=iface:{b},port:0,vid:7"),
        format!("port.addr=port:{a},addr:10.0.5.1/24"),
        format!("port.mtu=port:{b},mtu:1400"),
        format!("neigh.static=port:{a},ip:10.0.5.9,mac:02:00:00:00:00:59"),
        format!("l3fwd.route=prefix:10.0.5.0/24,port:{a},via:direct"),
    ] {
        assert!(c.text.lines().any(|l| l == line), "{line} missing from\n{}", c.text);
    }
    assert_eq!(c.spec.highest_port().map(|(p, _)| p), Some(1), "sub-interfaces count as their ports");
    // The route names VLAN 100 on port 0: nothing declares it.
    let bad = src.replace("prefix = \"10.0.5.0/24\"\nport = 1", "prefix = \"10.0.5.0/24\"\nport = 0");
    let e = compile("chains/x.toml", &bad).unwrap_err();
    assert_eq!(e.field, "l3fwd.route[0].vlan", "{e}");
    assert!(e.message.contains("port 0 has no sub-interface with vid 100"), "{e}");
    let bad = "[chain]\nnfs = [\"l3fwd\"]\n\n[[port.vlan]]\nport = 1\nvid = 4095\n";
    let e = compile("chains/x.toml", bad).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (4, "port.vlan[0]"), "{e}");
}

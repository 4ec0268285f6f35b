//! Text-form parser tests: every NF's records, and errors that name the line and field.

use alloc::string::ToString;
use alloc::vec;

use super::*;
use crate::nf::acl::{AclAction, AclRule, Prefix};
use crate::nf::lb::{Backend, Vip};
use crate::nf::nat::NatConfig;
use crate::parse::IpAddr;
use crate::time::{Duration, TickRate};

/// 2.5 GHz: 2 500 000 ticks per millisecond.
fn rate() -> TickRate {
    TickRate::try_new(2_500_000_000).expect("non-zero")
}

fn err(text: &str) -> SpecError {
    match ChainSpec::parse(text) {
        Ok(s) => panic!("parsed: {s:?}"),
        Err(e) => e,
    }
}

#[test]
fn parses_every_nf() {
    let text = "# a comment\n\nversion=1\nnf=acl\nacl.default=deny\n\
                acl.rule=prio:7,src:10.0.0.0/8,dst:any,sport:any,dport:80-443,proto:tcp,action:permit\n\
                nf=lb\nlb.vip=addr:10.1.0.1,port:80,proto:tcp,backends:10.2.0.1;10.2.0.2:8080;\n\
                nf=accounting\naccounting.capacity=1024\n\
                nf=nat\nnat.external=192.0.2.7\nnat.ports=20000-29999\nnat.inside_port=1\n\
                nf=urlfilter\nurlfilter.banned=example.com/x\nurlfilter.banned=ads.example.net\nurlfilter.reset=true\nurlfilter.ports=80;8080\n\
                nf=encrypt\nencrypt.key=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n\
                nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/8,port:1,mac:02:00:00:00:01:01\r\n\0\0";
    let s = ChainSpec::parse(text).expect("parses");
    let names: Vec<&str> = s.names().collect();
    assert_eq!(names, ["acl", "lb", "accounting", "nat", "urlfilter", "encrypt", "l3fwd"]);
    let NfSpec::Acl(acl) = &s.nfs[0] else { panic!("acl") };
    assert_eq!(acl.default_action, AclAction::Deny);
    assert_eq!(
        acl.rules,
        [AclRule {
            src: Some(Prefix::v4([10, 0, 0, 0], 8)),
            dport: (80, 443),
            proto: Some(6),
            ..AclRule::any(7, AclAction::Permit)
        }]
    );
    let NfSpec::Lb(lb) = &s.nfs[1] else { panic!("lb") };
    assert_eq!(
        lb.vips,
        [Vip {
            addr: IpAddr::V4([10, 1, 0, 1]),
            port: 80,
            proto: 6,
            backends: vec![
                Backend { addr: IpAddr::V4([10, 2, 0, 1]), port: None },
                Backend { addr: IpAddr::V4([10, 2, 0, 2]), port: Some(8080) }
            ],
        }]
    );
    let NfSpec::Accounting(a) = &s.nfs[2] else { panic!("accounting") };
    assert_eq!(a.export, None, "no export unless asked");
    assert_eq!(a.capacity, 1024);
    let NfSpec::Nat(n) = &s.nfs[3] else { panic!("nat") };
    assert_eq!((n.external_addr, n.ports, n.inside_port), ([192, 0, 2, 7], (20000, 29999), 1));
    let NfSpec::UrlFilter(u) = &s.nfs[4] else { panic!("urlfilter") };
    assert_eq!(u.banned, ["example.com/x", "ads.example.net"]);
    assert!(u.reset);
    assert_eq!(u.ports, [80, 8080]);
    let NfSpec::Encrypt(e) = &s.nfs[5] else { panic!("encrypt") };
    assert_eq!(e.key[31], 0x1f);
    let NfSpec::L3fwd(l) = &s.nfs[6] else { panic!("l3fwd") };
    assert_eq!(l.routes4.len(), 1);
    assert_eq!(l.next_hops[0].mac, [2, 0, 0, 0, 1, 1]);
}

#[test]
fn empty_chain_and_factory() {
    let s = ChainSpec::parse("version=1\n").expect("parses");
    assert!(s.nfs.is_empty());
    let egress = Egress::new([[2; 6]; 2], [[3; 6]; 2], None);
    let f = s.build(egress.clone(), rate()).expect("builds");
    assert!(f.is_empty());
    assert!(f.chain_for_worker().nfs().is_empty());
    let s = ChainSpec::parse("version=1\nnf=acl\nacl.flow_capacity=256\nnf=lb\nlb.affinity_capacity=256\n")
        .expect("parses");
    let f = s.build(egress, rate()).expect("builds");
    let c1 = f.chain_for_worker();
    let c2 = f.chain_for_worker();
    let names: Vec<&str> = c1.nfs().iter().map(|n| n.name()).collect();
    assert_eq!(names, ["acl", "lb"]);
    assert_eq!(c2.nfs().len(), 2);
}

/// `validate=` sets the least depth; each worker's chain checks at least that deep, deeper
/// where its NFs read deeper.
#[test]
fn validate_sets_the_chains_depth() {
    use crate::parse::Depth;
    let egress = Egress::new([[2; 6]; 2], [[3; 6]; 2], None);
    let depth = |text: &str| {
        let s = ChainSpec::parse(text).expect("parses");
        (s.validate, s.build(egress.clone(), rate()).expect("builds").chain_for_worker().depth())
    };
    assert_eq!(depth("version=1\n"), (Depth::L4, Depth::L4));
    assert_eq!(depth("version=1\nvalidate=l2\n"), (Depth::L2, Depth::L2));
    // Anywhere after the version, also inside an NF's records.
    assert_eq!(depth("version=1\nnf=l3fwd\nvalidate=l2\n"), (Depth::L2, Depth::L3));
    assert_eq!(depth("version=1\nvalidate=l3\nnf=l3fwd\n"), (Depth::L3, Depth::L3));
    assert_eq!(depth("version=1\nvalidate=l2\nnf=l3fwd\nnf=acl\nacl.flow_capacity=64\n"), (Depth::L2, Depth::L4));
}

#[test]
fn errors_name_line_key_and_field() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 1, "line 1: expected `version=1` as the first record"),
        ("nf=acl\n", 1, "line 1: expected `version=1` as the first record"),
        ("version=2\n", 1, "line 1: version: unsupported version (this image reads 1)"),
        (
            "version=1\nnf=firewall\n",
            2,
            "line 2: nf: unknown NF (known: acl, lb, accounting, nat, urlfilter, encrypt, l3fwd, p4)",
        ),
        (
            "version=1\nacl.default=permit\n",
            2,
            "line 2: unknown key for the current NF (keys are NAME.KEY after nf=NAME)",
        ),
        (
            "version=1\nnf=acl\nlb.vip=addr:1.2.3.4\n",
            3,
            "line 3: unknown key for the current NF (keys are NAME.KEY after nf=NAME)",
        ),
        ("version=1\nnf=acl\njunk\n", 3, "line 3: expected key=value"),
        ("version=1\nvalidate=l5\n", 2, "line 2: validate: expected l2, l3 or l4"),
        ("version=1\nvalidate=l2\nnf=acl\nvalidate=l3\n", 4, "line 4: validate: given twice"),
        ("version=1\nnf=acl\nacl.default=permit\nacl.default=deny\n", 4, "line 4: acl.default: given twice"),
        (
            "version=1\nnf=acl\n\nacl.rule=src:10.0.0/8,action:deny\n",
            4,
            "line 4: acl.rule.src: expected an IPv4/IPv6 prefix",
        ),
        ("version=1\nnf=acl\nacl.rule=prio:1\n", 3, "line 3: acl.rule.action: missing"),
        ("version=1\nnf=acl\nacl.rule=action:deny,color:red\n", 3, "line 3: acl.rule: unknown field"),
        ("version=1\nnf=acl\nacl.rule=action:deny,action:deny\n", 3, "line 3: acl.rule.action: field given twice"),
        (
            "version=1\nnf=acl\nacl.rule=dport:9-1,action:deny\n",
            3,
            "line 3: acl.rule.dport: expected a port or port range LO-HI (0..=65535, LO <= HI) or any",
        ),
        (
            "version=1\nnf=lb\nlb.vip=addr:10.0.0.1,port:80,proto:tcp,backends:10.0.0.2;fd00::1\n",
            3,
            "line 3: lb.vip.backends: vip 0: backend 1 is of the other IP version",
        ),
        ("version=1\nnf=lb\nlb.vip=addr:10.0.0.1,port:80,proto:icmp\n", 3, "line 3: lb.vip.proto: expected tcp or udp"),
        ("version=1\nnf=encrypt\nencrypt.key=00\n", 3, "line 3: encrypt.key: expected 64 hex digits (a 32-byte key)"),
        ("version=1\nnf=encrypt\n", 2, "line 2: nf: encrypt key: all zeros"),
        ("version=1\nnf=nat\nnat.ports=0-100\n", 3, "line 3: nat.ports: expected a port range without port 0"),
        (
            "version=1\nnf=urlfilter\nurlfilter.banned=ok.example\nurlfilter.banned=bad host\n",
            4,
            "line 4: urlfilter.banned: urlfilter banned[1]: not printable ASCII",
        ),
        (
            "version=1\nnf=acl\nacl.flow_timeout_ms=0\n",
            3,
            "line 3: acl.flow_timeout_ms: expected milliseconds 1..=86400000 (at most one day)",
        ),
        (
            "version=1\nnf=nat\nnat.timeout_ms=86400001\n",
            3,
            "line 3: nat.timeout_ms: expected milliseconds 1..=86400000 (at most one day)",
        ),
        (
            "version=1\nnf=urlfilter\nurlfilter.inspect_timeout_ms=-5\n",
            3,
            "line 3: urlfilter.inspect_timeout_ms: expected milliseconds 1..=86400000 (at most one day)",
        ),
        (
            "version=1\nnf=lb\nlb.affinity_timeout_ms=99999999999999999999999\n",
            3,
            "line 3: lb.affinity_timeout_ms: expected milliseconds 1..=86400000 (at most one day)",
        ),
        (
            "version=1\nnf=accounting\naccounting.idle_timeout_ms=5\naccounting.idle_timeout_ms=6\n",
            4,
            "line 4: accounting.idle_timeout_ms: given twice",
        ),
        (
            "version=1\nnf=encrypt\nencrypt.flow_timeout_ms=5\n",
            3,
            "line 3: unknown key for the current NF (keys are NAME.KEY after nf=NAME)",
        ),
        (
            "version=1\nnf=acl\nacl.flow_timeout=5\n",
            3,
            "line 3: unknown key for the current NF (keys are NAME.KEY after nf=NAME)",
        ),
        (
            "version=1\nnf=l3fwd\nl3fwd.route=prefix:10.0.0.0/8,port:1,mac:02:00:00:00:01:01\nl3fwd.route=prefix:10.0.0.0/8,port:1,mac:02:00:00:00:01:01\n",
            4,
            "line 4: l3fwd.route: l3fwd routes4[1]: duplicate prefix",
        ),
        (
            "version=1\nnf=accounting\naccounting.export=netflow:1:10.0.0.1:2055\n",
            3,
            "line 3: accounting.export: expected ipfix:PORT:IPV4:UDPPORT, e.g. ipfix:1:192.0.2.10:4739",
        ),
        (
            "version=1\nnf=accounting\naccounting.export=ipfix:2:10.0.0.1:4739\n",
            3,
            "line 3: accounting.export: expected ipfix:PORT:IPV4:UDPPORT, e.g. ipfix:1:192.0.2.10:4739",
        ),
        (
            "version=1\nnf=accounting\naccounting.export=ipfix:1:10.0.0.300:4739\n",
            3,
            "line 3: accounting.export: expected ipfix:PORT:IPV4:UDPPORT, e.g. ipfix:1:192.0.2.10:4739",
        ),
        (
            "version=1\nnf=accounting\naccounting.export_src=fd00::1\n",
            3,
            "line 3: accounting.export_src: expected an IPv4 address",
        ),
    ];
    for (text, line, want) in cases {
        let e = err(text);
        assert_eq!(e.line, *line, "{text:?}: {e}");
        assert_eq!(e.to_string(), *want, "{text:?}");
    }
}

#[test]
fn too_many_nfs() {
    let mut t = "version=1\n".to_string();
    for _ in 0..=MAX_NFS {
        t.push_str("nf=accounting\naccounting.capacity=64\n");
    }
    let e = err(&t);
    assert_eq!((e.kind, e.line), (SpecErrorKind::TooManyNfs, 2 + 2 * MAX_NFS));
}

#[test]
fn timeouts_in_ms_become_ticks_at_build() {
    let text = "version=1\nnf=acl\nacl.flow_timeout_ms=10000\nnf=lb\nlb.affinity_timeout_ms=1\n\
                nf=accounting\naccounting.idle_timeout_ms=86400000\n\
                nf=nat\nnat.external=192.0.2.7\nnat.timeout_ms=30000\n\
                nf=urlfilter\nurlfilter.inspect_timeout_ms=250\nurlfilter.flow_timeout_ms=60000\n\
                nf=encrypt\nencrypt.key=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n\
                encrypt.udp_idle_timeout_ms=1500\nnf=l3fwd\n";
    let s = ChainSpec::parse(text).expect("parses");
    // The spec keeps milliseconds; its NF configs keep the NFs' defaults until build.
    assert_eq!(
        s.timeouts,
        [
            Timeouts { flow_ms: Some(10_000), ..Timeouts::default() },
            Timeouts { affinity_ms: Some(1), ..Timeouts::default() },
            Timeouts { idle_ms: Some(MAX_TIMEOUT_MS), ..Timeouts::default() },
            Timeouts { nat_ms: Some(30_000), ..Timeouts::default() },
            Timeouts { inspect_ms: Some(250), flow_ms: Some(60_000), ..Timeouts::default() },
            Timeouts { udp_idle_ms: Some(1_500), ..Timeouts::default() },
            Timeouts::default(),
        ]
    );
    let NfSpec::Acl(acl) = &s.nfs[0] else { panic!("acl") };
    assert_eq!(acl.flow_timeout, AclConfig::default().flow_timeout);
    // At 2.5 GHz a millisecond is 2 500 000 ticks.
    let c = s.configs(rate());
    let NfSpec::Acl(acl) = &c[0] else { panic!("acl") };
    assert_eq!(acl.flow_timeout, Duration(25_000_000_000));
    let NfSpec::Lb(lb) = &c[1] else { panic!("lb") };
    assert_eq!(lb.affinity_timeout, Duration(2_500_000));
    let NfSpec::Accounting(a) = &c[2] else { panic!("accounting") };
    assert_eq!(a.idle_timeout, Duration(216_000_000_000_000));
    let NfSpec::Nat(n) = &c[3] else { panic!("nat") };
    assert_eq!(n.timeout, Duration(75_000_000_000));
    let NfSpec::UrlFilter(u) = &c[4] else { panic!("urlfilter") };
    assert_eq!((u.inspect_timeout, u.flow_timeout), (Duration(625_000_000), Duration(150_000_000_000)));
    let NfSpec::Encrypt(e) = &c[5] else { panic!("encrypt") };
    assert_eq!(e.udp_idle_timeout, Duration(3_750_000_000));
    assert_eq!(c[6], s.nfs[6]);
    // Everything but the timeouts is the parsed config.
    let NfSpec::Nat(parsed) = &s.nfs[3] else { panic!("nat") };
    assert_eq!(NatConfig { timeout: parsed.timeout, ..*n }, *parsed);
    // A clock slower than 1 kHz: a 1 ms timeout is still one tick, not zero (which
    // `validate()` refuses).
    let slow = TickRate::try_new(10).expect("non-zero");
    let NfSpec::Lb(lb) = &s.configs(slow)[1] else { panic!("lb") };
    assert_eq!(lb.affinity_timeout, Duration(1));
    // And the chain builds with them (small tables: the test heap).
    let small = "version=1\nnf=acl\nacl.flow_capacity=256\nacl.flow_timeout_ms=10000\n\
                 nf=lb\nlb.affinity_capacity=256\nlb.affinity_timeout_ms=1\n";
    let egress = Egress::new([[2; 6]; 2], [[3; 6]; 2], None);
    let f = ChainSpec::parse(small).expect("parses").build(egress, slow).expect("builds");
    assert_eq!(f.len(), 2);
}

#[test]
fn text_without_timeouts_keeps_the_nf_defaults() {
    let s = ChainSpec::parse("version=1\nnf=acl\nnf=urlfilter\nnf=nat\n").expect("parses");
    assert_eq!(s.timeouts, [Timeouts::default(); 3]);
    assert_eq!(s.configs(rate()), s.nfs);
    // A spec written by hand, without `timeouts`, too.
    let hand = ChainSpec { nfs: s.nfs.clone(), ..ChainSpec::default() };
    assert_eq!(hand.configs(rate()), s.nfs);
}

#[test]
fn an_ipfix_export_parses_with_its_source() {
    let s = ChainSpec::parse(
        "version=1\nnf=accounting\naccounting.export_src=198.51.100.7\naccounting.export=ipfix:1:192.0.2.10:4739\n",
    )
    .expect("parses");
    let NfSpec::Accounting(a) = &s.nfs[0] else { panic!("accounting") };
    let e = a.export.expect("export");
    assert_eq!((e.port, e.collector, e.udp_port, e.source), (1, [192, 0, 2, 10], 4739, [198, 51, 100, 7]));
    let s = ChainSpec::parse("version=1\nnf=accounting\naccounting.export=ipfix:0:10.1.2.3:9995\n").expect("parses");
    let NfSpec::Accounting(a) = &s.nfs[0] else { panic!("accounting") };
    assert_eq!(a.export.map(|e| e.source), Some(crate::nf::accounting::IpfixExport::DEFAULT_SOURCE));
}

/// `l3fwd.lpm4` picks the IPv4 routes' structure; a bad name, or a direct array too small for
/// the Poptrie, is refused naming the key.
#[test]
fn the_ipv4_routes_structure_is_chosen_by_name() {
    let s = ChainSpec::parse(
        "version=1\nnf=l3fwd\nl3fwd.lpm4=poptrie\nl3fwd.first_stride4=18\nl3fwd.route=prefix:10.0.0.0/8,port:1,mac:02:00:00:00:01:01\n",
    )
    .expect("parses");
    let NfSpec::L3fwd(l) = &s.nfs[0] else { panic!("l3fwd") };
    assert_eq!((l.lpm4, l.first_stride4), (crate::nf::l3fwd::Lpm4Kind::Poptrie, 18));
    let e = err("version=1\nnf=l3fwd\nl3fwd.lpm4=dir\n");
    assert_eq!((e.line, e.to_string().as_str()), (3, "line 3: l3fwd.lpm4: expected trie or poptrie"));
    let e = err("version=1\nnf=l3fwd\nl3fwd.lpm4=poptrie\nl3fwd.lpm4=trie\n");
    assert_eq!(e.line, 4, "{e}");
    let e = err("version=1\nnf=l3fwd\nl3fwd.lpm4=poptrie\nl3fwd.first_stride4=12\n");
    assert!(e.to_string().contains("l3fwd first_stride4 12 is not in 16..=24 (l3fwd.lpm4=poptrie)"), "{e}");
}

#[test]
fn the_highest_port_a_chain_names_comes_with_its_record() {
    let port = |text: &str| ChainSpec::parse(text).expect("chain").highest_port();
    assert_eq!(port("version=1\n"), None);
    assert_eq!(
        port("version=1\nnf=l3fwd\nl3fwd.route=prefix:10.0.0.0/8,port:3,mac:02:00:00:00:01:01\n"),
        Some((3, "l3fwd.route"))
    );
    let nat = "version=1\nnf=nat\nnat.external=192.0.2.7\nnat.ports=20000-29999\nnat.inside_port=1\n";
    assert_eq!(port(nat), Some((1, "nat.inside_port")));
    assert_eq!(port(&std::format!("{nat}port.addr=port:4,addr:10.0.4.1/24\n")), Some((4, "port.addr")));
    assert_eq!(port("version=1\nport.mtu=port:5,mtu:1400\n"), Some((5, "port.mtu")));
    assert_eq!(port("version=1\nneigh.static=port:6,ip:10.0.6.9,mac:02:00:00:00:00:09\n"), Some((6, "neigh.static")));
}

#[test]
fn the_longest_frame_a_port_receives_follows_its_mtus_and_its_sub_interfaces() {
    let spec = |text: &str| ChainSpec::parse(text).expect("chain");
    // No MTU set: Ethernet's 1 500 plus the header and a tag.
    assert_eq!(spec("version=1\n").longest_frame(0), 1518);
    let s = spec("version=1\nport.mtu=port:1,mtu:9000\nport.mtu=port:2,mtu:1400\n");
    assert_eq!((s.longest_frame(0), s.longest_frame(1), s.longest_frame(2)), (1518, 9018, 1418));
    // A sub-interface of port 0 (interface 8) with a jumbo MTU makes port 0 take jumbo frames.
    let s = spec("version=1\nport.vlan=iface:8,port:0,vid:100\nport.mtu=port:8,mtu:9000\n");
    assert_eq!((s.longest_frame(0), s.longest_frame(1)), (9018, 1518));
}

use std::string::String;
use std::vec::Vec;
use std::{format, vec};

use super::*;
use crate::nf::Egress;
use crate::nf::config::ChainSpec;
use crate::stage::PORTS;
use crate::time::TickRate;

fn chain(text: &str) -> ChainFactory {
    let egress =
        Egress { own_mac: [[2, 0, 0, 0, 0, 1]; PORTS], peer_mac: [[2, 0, 0, 0, 0, 2]; PORTS], ..Egress::default() };
    ChainSpec::parse(text).unwrap().build(egress, TickRate::try_new(1_000_000_000).unwrap()).unwrap()
}

/// Runs one request line; returns the data lines and the final line, as the machine prints them.
fn run(m: &mut Manager, c: &ChainFactory, line: &str) -> (Vec<String>, String) {
    let mut data = Vec::new();
    let fin = match parse(line) {
        Err((id, e)) => format!("@ctl id={} {e}", id.map_or("-".into(), |i| format!("{i}"))),
        Ok(req) => {
            let r = m.execute(c, &req.cmd, Instant(0), &mut |a| data.push(format!("@ctl id={} | {a}", req.id)));
            match r {
                Ok(Done::Ok(s)) if s.is_empty() => format!("@ctl id={} ok", req.id),
                Ok(Done::Ok(s)) => format!("@ctl id={} ok {s}", req.id),
                Ok(Done::NotMine) => format!("@ctl id={} machine", req.id),
                Err(e) => format!("@ctl id={} {e}", req.id),
            }
        }
    };
    (data, fin)
}

#[test]
fn lines_are_assembled_bounded_and_checked() {
    let mut lb = LineBuf::new();
    let mut got = Vec::new();
    for &b in b"ctl 1 stats\r\nctl 2 help\n" {
        if let Some(i) = lb.push(b) {
            got.push(format!("{i:?}"));
        }
    }
    assert_eq!(got, ["Line(\"ctl 1 stats\")", "Line(\"ctl 2 help\")"]);
    // Too long: the first MAX_LINE bytes come back, for the id.
    let long = format!("ctl 9 acl add {}\n", "x".repeat(2 * MAX_LINE));
    let mut last = None;
    for &b in long.as_bytes() {
        if let Some(i) = lb.push(b) {
            last = Some(match i {
                Input::TooLong(t) => (t.len(), request_id(t)),
                other => panic!("{other:?}"),
            });
        }
    }
    assert_eq!(last, Some((MAX_LINE, Some(9))));
    let mut r = None;
    for &b in b"ctl 3 \xff\n" {
        if let Some(i) = lb.push(b) {
            r = Some(i == Input::NotText);
        }
    }
    assert_eq!(r, Some(true));
    // And the buffer works again afterwards.
    let mut ok = None;
    for &b in b"ctl 4 stop\n" {
        if let Some(Input::Line(t)) = lb.push(b) {
            ok = parse(t).ok();
        }
    }
    assert_eq!(ok, Some(Request { id: 4, cmd: Command::Stop }));
}

#[test]
fn requests_parse_or_name_what_is_wrong() {
    assert_eq!(parse("ctl 7 show acl").unwrap(), Request { id: 7, cmd: Command::Show(Table::Acl) });
    assert_eq!(parse("ctl 7  rss  move 0 1").unwrap().cmd, Command::RssMove(0, 1));
    let e = |l: &str| parse(l).unwrap_err();
    assert_eq!(e("stats").0, None);
    assert_eq!(e("stats").1.kind, ErrorKind::BadRequest);
    assert_eq!(e("ctl x stats").1.kind, ErrorKind::BadRequest);
    assert_eq!(e("ctl 12345678901 stats").1.kind, ErrorKind::BadRequest);
    assert_eq!(e("ctl 5 frobnicate").1.kind, ErrorKind::UnknownCommand);
    assert_eq!(e("ctl 5").1.kind, ErrorKind::UnknownCommand);
    assert_eq!(e("ctl 5 show tables").1.kind, ErrorKind::BadArgument);
    let r = e("ctl 6 acl add prio:1,src:10.0.0.1/8,action:deny");
    assert_eq!((r.0, r.1.kind), (Some(6), ErrorKind::BadArgument));
    assert!(r.1.msg.starts_with("acl.rule.src:"), "{}", r.1.msg);
    let r = e("ctl 6 acl add prio:1,action:maybe");
    assert!(r.1.msg.starts_with("acl.rule.action: expected permit or deny"), "{}", r.1.msg);
    let r = e("ctl 6 route add prefix:10.0.0.0/8,port:1");
    assert!(r.1.msg.starts_with("l3fwd.route.mac: missing"), "{}", r.1.msg);
    assert_eq!(e("ctl 6 rss move 0 256").1.kind, ErrorKind::BadArgument);
    assert_eq!(e("ctl 6 lb backend add one 10.0.0.1").1.kind, ErrorKind::BadArgument);
    assert_eq!(e("ctl 6 a b c d e f g").1.kind, ErrorKind::BadArgument);
    // A message never carries a quote that would end msg="…".
    let r = e("ctl 6 frob\"nicate");
    assert!(!r.1.msg.contains('"'), "{}", r.1.msg);
}

#[test]
fn acl_rules_are_added_shown_and_removed() {
    let c = chain("version=1\nnf=acl\nacl.default=permit\nacl.rule=prio:5,dport:22,proto:tcp,action:deny\n");
    let mut m = Manager::new();
    let (_, fin) = run(&mut m, &c, "ctl 1 acl add prio:100,dst:10.0.0.2/32,action:deny");
    assert_eq!(fin, "@ctl id=1 ok rule=1 generation=1");
    let (data, fin) = run(&mut m, &c, "ctl 2 show acl");
    assert_eq!(fin, "@ctl id=2 ok");
    assert_eq!(
        data,
        [
            "@ctl id=2 | default=permit rules=2 generation=1 cached_flows=0",
            "@ctl id=2 | rule 0 prio:5,src:any,dst:any,sport:any,dport:22,proto:tcp,action:deny",
            "@ctl id=2 | rule 1 prio:100,src:any,dst:10.0.0.2/32,sport:any,dport:any,proto:any,action:deny",
        ]
    );
    let (_, fin) = run(&mut m, &c, "ctl 3 acl del 0");
    assert_eq!(fin, "@ctl id=3 ok rules=1 generation=2");
    let (_, fin) = run(&mut m, &c, "ctl 4 acl del 1");
    assert_eq!(fin, "@ctl id=4 error=not_found msg=\"acl: no rule 1\"");
    // Nobody reads the old versions: they are freed at the next command.
    assert_eq!(m.collect(), 0);
    // The background merges the changes into new classifiers a step at a time; the answers
    // and the generation stay (no cached verdict is re-decided).
    let acl = c.acl().unwrap().clone();
    // Pending: the added IPv4 rule, and the deleted any-address rule in both families' base.
    assert_eq!(acl.rules().pending(), (1, 2));
    let mut steps = 0;
    while m.background(&c) {
        steps += 1;
        assert!(steps < 100, "the merge ends");
    }
    assert_eq!(acl.rules().pending(), (0, 0));
    assert_eq!(acl.rules().generation(), 2);
    assert_eq!(acl.rules().rules().len(), 1);
    assert!(!m.background(&c), "nothing left to merge");
    // Commands for an NF the chain lacks.
    let (_, fin) = run(&mut m, &c, "ctl 5 route del 10.0.0.0/8");
    assert_eq!(fin, "@ctl id=5 error=no_such_nf msg=\"the chain has no l3fwd\"");
    let (_, fin) = run(&mut m, &c, "ctl 6 stats");
    assert_eq!(fin, "@ctl id=6 machine");
    // A rule of one VLAN: taken (a new VLAN rebuilds the classifiers), shown with its VID; a
    // VID out of range refused by field.
    let (_, fin) = run(&mut m, &c, "ctl 7 acl add prio:7,proto:udp,vlan:100,action:deny");
    assert_eq!(fin, "@ctl id=7 ok rule=1 generation=3");
    assert_eq!(acl.rules().vlans(), &[100]);
    let (data, _) = run(&mut m, &c, "ctl 8 show acl");
    assert_eq!(
        data.last().map(String::as_str),
        Some("@ctl id=8 | rule 1 prio:7,src:any,dst:any,sport:any,dport:any,proto:udp,vlan:100,action:deny")
    );
    let (_, fin) = run(&mut m, &c, "ctl 9 acl add prio:1,vlan:4095,action:deny");
    assert!(fin.starts_with("@ctl id=9 error=bad_argument msg=\"acl.rule.vlan: expected a VLAN ID 1..=4094"), "{fin}");
}

#[test]
fn rows_are_bounded() {
    let c = chain("version=1\nnf=acl\n");
    let mut m = Manager::new();
    for i in 0..SHOW_MAX + 3 {
        let (_, fin) = run(&mut m, &c, &format!("ctl {} acl add prio:{i},dport:{i},action:deny", i + 1));
        assert!(fin.contains(" ok "), "{fin}");
    }
    let (data, _) = run(&mut m, &c, "ctl 99 show acl");
    assert_eq!(data.len(), 1 + SHOW_MAX + 1);
    assert_eq!(data.last().map(String::as_str), Some("@ctl id=99 | more=3"));
}

#[test]
fn routes_and_backends_change_and_show() {
    let c = chain(
        "version=1\nnf=lb\nlb.vip=addr:10.1.0.1,port:80,proto:tcp,backends:10.2.0.1;10.2.0.2\n\
         nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/8,port:1,mac:02:00:00:00:00:10\n",
    );
    let mut m = Manager::new();
    let (_, fin) = run(&mut m, &c, "ctl 1 route add prefix:10.9.0.0/16,port:0,mac:02:00:00:00:00:99");
    assert_eq!(fin, "@ctl id=1 ok routes=2");
    let (_, fin) = run(&mut m, &c, "ctl 2 route add prefix:10.9.0.0/16,port:0,mac:02:00:00:00:00:98");
    assert!(fin.starts_with("@ctl id=2 error=exists"), "{fin}");
    let (_, fin) = run(&mut m, &c, "ctl 3 route add prefix:11.0.0.0/8,port:9,mac:02:00:00:00:00:98");
    assert!(fin.starts_with("@ctl id=3 error=bad_argument"), "{fin}");
    let (data, _) = run(&mut m, &c, "ctl 4 show l3fwd");
    assert_eq!(
        data,
        [
            "@ctl id=4 | routes=2 next_hops=2",
            "@ctl id=4 | route prefix:10.0.0.0/8,port:1,mac:02:00:00:00:00:10",
            "@ctl id=4 | route prefix:10.9.0.0/16,port:0,mac:02:00:00:00:00:99",
        ]
    );
    let (_, fin) = run(&mut m, &c, "ctl 5 route del 10.9.0.0/16");
    assert_eq!(fin, "@ctl id=5 ok routes=1");
    let (_, fin) = run(&mut m, &c, "ctl 6 lb backend add 0 10.2.0.3");
    assert_eq!(fin, "@ctl id=6 ok backends=3");
    let (_, fin) = run(&mut m, &c, "ctl 7 lb backend del 0 10.2.0.1");
    assert_eq!(fin, "@ctl id=7 ok backends=2");
    let (_, fin) = run(&mut m, &c, "ctl 8 lb backend del 0 10.2.0.1");
    assert!(fin.starts_with("@ctl id=8 error=not_found"), "{fin}");
    let (_, fin) = run(&mut m, &c, "ctl 9 lb backend add 3 10.2.0.1");
    assert!(fin.starts_with("@ctl id=9 error=not_found"), "{fin}");
    let (data, _) = run(&mut m, &c, "ctl 10 show lb");
    assert_eq!(data.len(), 1);
    assert!(
        data[0].starts_with("@ctl id=10 | vip 0 addr:10.1.0.1,port:80,proto:tcp,backends:10.2.0.2;10.2.0.3 count=2")
    );
}

#[test]
fn ipv6_routes_via_a_gateway_or_direct_are_added_shown_and_checked() {
    let c = chain("version=1\nnf=l3fwd\nl3fwd.route=prefix:fd79::/64,port:1,via:direct\n");
    let mut m = Manager::new();
    let (_, fin) = run(&mut m, &c, "ctl 1 route add prefix:::/0,port:1,via:fe80::1");
    assert_eq!(fin, "@ctl id=1 ok routes=2");
    let (_, fin) = run(&mut m, &c, "ctl 2 route add prefix:fd7a::/64,port:1,via:10.0.0.1");
    assert!(fin.starts_with("@ctl id=2 error=bad_argument"), "a gateway of the other IP version: {fin}");
    let (_, fin) = run(&mut m, &c, "ctl 3 route add prefix:fd7b::/64,port:1,via:ff02::1");
    assert!(fin.starts_with("@ctl id=3 error="), "a multicast gateway: {fin}");
    let (data, _) = run(&mut m, &c, "ctl 4 show l3fwd");
    assert_eq!(
        data,
        [
            "@ctl id=4 | routes=2 next_hops=2",
            "@ctl id=4 | route prefix:fd79::/64,port:1,via:direct",
            "@ctl id=4 | route prefix:::/0,port:1,via:fe80::1",
        ]
    );
}

#[test]
fn stats_pairs_become_one_json_object() {
    let mut s = String::new();
    write_json(" p0_rx=12 sched=metronome odd=\"x\\ big=99999999999999999999999", &mut s).unwrap();
    assert_eq!(s, r#"{"p0_rx":12,"sched":"metronome","odd":"\"x\\","big":"99999999999999999999999"}"#);
    let mut e = String::new();
    write_json("", &mut e).unwrap();
    assert_eq!(e, "{}");
    let _ = vec![0u8];
}

#[test]
fn the_neighbour_table_is_shown() {
    let c = chain(
        "version=1\nport.addr=port:0,addr:10.0.0.1/24\nneigh.static=port:0,ip:10.0.0.9,mac:02:00:00:00:00:09\n\
         neigh.static=port:1,ip:fd00::9,mac:02:00:00:00:00:99\n\
         nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/24,port:0,via:direct\n",
    );
    let mut m = Manager::new();
    let (data, fin) = run(&mut m, &c, "ctl 1 show neigh");
    assert_eq!(fin, "@ctl id=1 ok");
    assert_eq!(
        data,
        [
            format!("@ctl id=1 | entries=2 waiting=0 capacity={}", crate::miri_or(256, 16)),
            "@ctl id=1 | neigh ip:10.0.0.9,port:0,mac:02:00:00:00:00:09,state:static,queued:0".into(),
            "@ctl id=1 | neigh ip:fd00::9,port:1,mac:02:00:00:00:00:99,state:static,queued:0".into(),
        ]
    );
    let plain = chain("version=1\nnf=l3fwd\nl3fwd.route=prefix:10.0.0.0/24,port:0,mac:02:00:00:00:00:09\n");
    let (_, fin) = run(&mut m, &plain, "ctl 2 show neigh");
    assert_eq!(fin, "@ctl id=2 error=no_such_nf msg=\"the chain has no neighbour table (no port.addr)\"");
}

#[test]
fn neighbours_are_added_and_removed() {
    let c = chain("version=1\nport.addr=port:0,addr:10.0.0.1/24\nport.addr=port:1,addr:fd00::1/64\n");
    let mut m = Manager::new();
    let (_, fin) = run(&mut m, &c, "ctl 1 neigh add port:0,ip:10.0.0.7,mac:02:00:00:00:00:07");
    assert_eq!(fin, "@ctl id=1 ok entries=1");
    let (_, fin) = run(&mut m, &c, "ctl 2 neigh add port:1,ip:fd00::7,mac:02:00:00:00:00:77");
    assert_eq!(fin, "@ctl id=2 ok entries=2");
    let (data, _) = run(&mut m, &c, "ctl 3 show neigh");
    assert_eq!(
        data[1..],
        [
            "@ctl id=3 | neigh ip:10.0.0.7,port:0,mac:02:00:00:00:00:07,state:static,queued:0",
            "@ctl id=3 | neigh ip:fd00::7,port:1,mac:02:00:00:00:00:77,state:static,queued:0",
        ]
    );
    // Our own address, a group MAC, a port out of range, a bad field: refused by name.
    for (line, want) in [
        ("ctl 4 neigh add port:0,ip:10.0.0.1,mac:02:00:00:00:00:01", "error=bad_argument msg=\"neigh: not a neighbour"),
        ("ctl 4 neigh add port:0,ip:10.0.0.8,mac:01:00:5e:00:00:01", "error=bad_argument msg=\"neigh: not a neighbour"),
        (
            "ctl 4 neigh add port:9,ip:10.0.0.8,mac:02:00:00:00:00:08",
            "error=bad_argument msg=\"neigh: port out of range",
        ),
        ("ctl 4 neigh add port:0,ip:10.0.0.8", "error=bad_argument msg=\"neigh.mac: expected"),
    ] {
        let (_, fin) = run(&mut m, &c, line);
        assert!(fin.starts_with(&format!("@ctl id=4 {want}")), "{line}: {fin}");
    }
    let (_, fin) = run(&mut m, &c, "ctl 5 neigh del 10.0.0.7");
    assert_eq!(fin, "@ctl id=5 ok entries=1");
    let (_, fin) = run(&mut m, &c, "ctl 6 neigh del 10.0.0.7");
    assert_eq!(fin, "@ctl id=6 error=not_found msg=\"neigh: no such neighbour\"");
}

/// `p4 add|del TABLE LINE`: the entry's line is the rest of the request, whatever its length;
/// the program checks it now and every worker applies it before its next batch.
#[test]
fn p4_table_entries_are_added_and_deleted_live() {
    let mut text = String::from("version=1\nnf=p4\n");
    for l in include_str!("../../../chains/p4/router.spec").lines() {
        text.push_str(&format!("p4.spec={l}\n"));
    }
    let c = chain(&text);
    let mut m = Manager::new();
    let add = "ctl 4 p4 add routes match 0x0a000200/0xffffff00 action route nexthop_mac 0x020000000b02 port_out 1";
    assert_eq!(run(&mut m, &c, add).1, "@ctl id=4 ok generation=1");
    assert_eq!(run(&mut m, &c, "ctl 5 p4 del routes match 0x0a000200/0xffffff00").1, "@ctl id=5 ok generation=2");
    assert_eq!(c.p4().map(|p| p.generation()), Some(2));
    let (_, e) = run(&mut m, &c, "ctl 6 p4 add routes match 0x0a000200/0xffffff00 action teleport");
    assert_eq!(e, "@ctl id=6 error=bad_argument msg=\"p4 routes: action `teleport` not found\"");
    let (_, e) = run(&mut m, &c, "ctl 7 p4 swap routes match 1");
    assert!(e.contains("expected add, del, default, show, learner or reg"), "{e}");
    let (_, e) = run(&mut m, &c, "ctl 8 p4 add routes");
    assert!(e.contains("expected TABLE and an entry line"), "{e}");
    // A chain without a P4 program says so.
    let (_, e) = run(&mut m, &chain("version=1\nnf=acl\n"), add);
    assert!(e.contains("p4"), "{e}");
    assert_eq!(c.p4().map(|p| p.generation()), Some(2), "refused changes are not logged");
}

/// `p4 show TABLE`: the table file's entries, then the changes (an add of a key replaces its
/// entry, a delete removes it), in table-file syntax; a table the program lacks is refused.
#[test]
fn p4_show_lists_the_table_as_changed() {
    let mut text = String::from("version=1\nnf=p4\n");
    for l in include_str!("../../../chains/p4/router.spec").lines() {
        text.push_str(&format!("p4.spec={l}\n"));
    }
    text.push_str("p4.table=routes\n");
    text.push_str("p4.entry=match 0x0a000100/0xffffff00 action route nexthop_mac 0x020000000a01 port_out 0\n");
    text.push_str("p4.entry=match 0x0a000200/0xffffff00 action route nexthop_mac 0x020000000b02 port_out 1\n");
    let c = chain(&text);
    let mut m = Manager::new();
    let show = |m: &mut Manager| {
        let (lines, fin) = run(m, &c, "ctl 9 p4 show routes");
        let lines: Vec<String> = lines.iter().map(|l| l.trim_start_matches("@ctl id=9 | ").to_string()).collect();
        // Each line reads back: an entry as `p4 add` takes it, the default as `p4 default`.
        let p4 = c.p4().expect("p4");
        for l in &lines {
            let back = match l.strip_prefix("default ") {
                Some(d) => crate::p4::tables::TableChange::parse_default(p4.program(), "routes", d),
                None => crate::p4::tables::TableChange::parse(p4.program(), "routes", l, true),
            };
            assert!(back.is_ok(), "{l}: {back:?}");
        }
        (lines, fin)
    };
    let (lines, fin) = show(&mut m);
    assert_eq!(
        lines,
        [
            "match 0x0a000100/0xffffff00 action route nexthop_mac 0x20000000a01 port_out 0x0",
            "match 0x0a000200/0xffffff00 action route nexthop_mac 0x20000000b02 port_out 0x1",
            "default action drop",
        ]
    );
    assert_eq!(fin, "@ctl id=9 ok entries=3 generation=0");
    // Replace the first route's next hop, delete the second, add a third.
    let changes = [
        "ctl 4 p4 add routes match 0x0a000100/0xffffff00 action route nexthop_mac 0x020000000a99 port_out 1",
        "ctl 5 p4 del routes match 0x0a000200/0xffffff00",
        "ctl 6 p4 add routes match 0x0a000300/0xffffff00 action drop",
        "ctl 7 p4 default routes action route nexthop_mac 0x020000000c03 port_out 0",
    ];
    for l in changes {
        assert!(run(&mut m, &c, l).1.contains(" ok generation="), "{l}");
    }
    let (lines, fin) = show(&mut m);
    assert_eq!(
        lines,
        [
            "match 0x0a000100/0xffffff00 action route nexthop_mac 0x20000000a99 port_out 0x1",
            "match 0x0a000300/0xffffff00 action drop",
            "default action route nexthop_mac 0x20000000c03 port_out 0x0",
        ]
    );
    assert_eq!(fin, "@ctl id=9 ok entries=3 generation=4");
    let (_, e) = run(&mut m, &c, "ctl 12 p4 default routes match 0x0a000300/0xffffff00 action drop");
    assert!(e.contains("error=bad_argument"), "{e}");
    let (_, e) = run(&mut m, &c, "ctl 13 p4 default routes action teleport");
    assert!(e.contains("`teleport`"), "{e}");
    let (_, e) = run(&mut m, &c, "ctl 10 p4 show nosuch");
    assert_eq!(e, "@ctl id=10 error=bad_argument msg=\"p4 no table `nosuch` in the program\"");
    let (_, e) = run(&mut m, &c, "ctl 11 p4 show routes extra");
    assert!(e.contains("expected TABLE alone"), "{e}");
}

/// `p4 learner show LEARNER`: the flows each worker's learner holds, a row each, with the
/// count and the instances read; an unknown learner and a malformed request are refused.
#[cfg(not(loom))] // (the chain test kit is not built under loom)
#[test]
fn p4_learner_show_lists_what_the_workers_learned() {
    let mut text = String::from("version=1\nnf=p4\n");
    let spec = include_str!("../../tests/p4/dpdk/learner.spec").replace("size 1048576", "size 1024");
    for l in spec.lines() {
        text.push_str(&format!("p4.spec={l}\n"));
    }
    let c = chain(&text);
    let mut m = Manager::new();
    let (rows, fin) = run(&mut m, &c, "ctl 1 p4 learner show fwd_table");
    assert_eq!((rows.len(), fin.as_str()), (0, "@ctl id=1 ok entries=0 instances=0"));
    // A worker's chain learns one flow.
    let mut worker = c.chain_for_worker();
    let f = crate::nf::testkit::frame(
        crate::parse::IpAddr::V4([10, 0, 1, 7]),
        crate::parse::IpAddr::V4([10, 0, 2, 9]),
        17,
        4000,
        53,
        b"learn me",
    );
    let _ = crate::nf::testkit::run_chain(&mut worker, &[f]);
    let (rows, fin) = run(&mut m, &c, "ctl 2 p4 learner show fwd_table");
    assert_eq!(fin, "@ctl id=2 ok entries=1 instances=1");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(
        rows[0].starts_with("@ctl id=2 | instance=0 match 0x0a000209 action fwd_action port_out 0x0 timeout 1"),
        "{rows:?}"
    );
    let (_, e) = run(&mut m, &c, "ctl 3 p4 learner show nope");
    assert_eq!(e, "@ctl id=3 error=bad_argument msg=\"p4 learner show: no learner `nope` in the program\"");
    for (i, cmd) in ["p4 learner show", "p4 learner list fwd_table", "p4 learner show a b", "p4 learner show a b c d"]
        .iter()
        .enumerate()
    {
        let (_, e) = run(&mut m, &c, &format!("ctl {} {cmd}", 10 + i));
        assert_eq!(e, format!("@ctl id={} error=bad_argument msg=\"p4 learner: expected show LEARNER\"", 10 + i));
    }
}

/// `p4 reg read|write ARRAY INDEX [VALUE]`: the program's shared registers, numbers in decimal
/// or hex; a bad array, index, number or word count is refused with what is wrong.
#[test]
fn p4_registers_are_read_and_written() {
    let mut text = String::from("version=1\nnf=p4\n");
    for l in include_str!("../../tests/p4/dpdk/registers.spec").lines() {
        text.push_str(&format!("p4.spec={l}\n"));
    }
    let c = chain(&text);
    let mut m = Manager::new();
    assert_eq!(run(&mut m, &c, "ctl 1 p4 reg read pkt_counters 263").1, "@ctl id=1 ok value=0");
    assert_eq!(run(&mut m, &c, "ctl 2 p4 reg write pkt_counters 0x107 0x2a").1, "@ctl id=2 ok value=42");
    assert_eq!(run(&mut m, &c, "ctl 3 p4 reg read pkt_counters 263").1, "@ctl id=3 ok value=42");
    assert_eq!(c.p4().map(|p| p.reg_read("pkt_counters", 263)), Some(Ok(42)));
    let refused = [
        (
            "p4 reg read pkt_counters 65536",
            "p4 reg read: regarray pkt_counters: index 65536 is not below its size 65536",
        ),
        ("p4 reg write nope 1 2", "p4 reg write: no regarray nope in the program"),
        ("p4 reg read pkt_counters x1", "p4 reg read: index 'x1' is not a number"),
        ("p4 reg write pkt_counters 1", "p4 reg write: expected ARRAY INDEX VALUE"),
        ("p4 reg read pkt_counters", "p4 reg read: expected ARRAY INDEX"),
        ("p4 reg peek pkt_counters 1", "p4 reg: expected read or write, got 'peek'"),
    ];
    for (i, (cmd, msg)) in refused.iter().enumerate() {
        let (_, e) = run(&mut m, &c, &format!("ctl {} {cmd}", 10 + i));
        assert_eq!(e, format!("@ctl id={} error=bad_argument msg=\"{msg}\"", 10 + i), "{cmd}");
    }
    // Without a p4 NF in the chain.
    let other = chain("version=1\nnf=acl\nacl.default=permit\n");
    let (_, e) = run(&mut m, &other, "ctl 20 p4 reg read pkt_counters 1");
    assert!(e.starts_with("@ctl id=20 error=no_such_nf"), "{e}");
}

/// Routes and static neighbours may name a declared VLAN sub-interface, and only those.
#[test]
fn routes_and_neighbours_on_sub_interfaces_are_taken_only_where_declared() {
    let (i, j) = (PORTS, PORTS + 1);
    let c = chain(&format!(
        "version=1\nport.vlan=iface:{i},port:1,vid:100\nport.addr=port:{i},addr:10.5.0.1/24\n\
         nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/8,port:1,mac:02:00:00:00:00:10\n"
    ));
    let mut m = Manager::new();
    let (_, fin) = run(&mut m, &c, &format!("ctl 1 route add prefix:10.5.0.0/24,port:{i},via:direct"));
    assert_eq!(fin, "@ctl id=1 ok routes=2");
    let (_, fin) = run(&mut m, &c, &format!("ctl 2 route add prefix:10.6.0.0/24,port:{j},via:direct"));
    assert!(fin.starts_with("@ctl id=2 error=bad_argument"), "{fin}");
    assert!(fin.contains(&format!("port {j} is neither a port nor a declared sub-interface")), "{fin}");
    let (_, fin) = run(&mut m, &c, &format!("ctl 3 neigh add port:{i},ip:10.5.0.9,mac:02:00:00:00:00:59"));
    assert!(fin.starts_with("@ctl id=3 ok"), "{fin}");
    let (_, fin) = run(&mut m, &c, &format!("ctl 4 neigh add port:{j},ip:10.6.0.9,mac:02:00:00:00:00:59"));
    assert!(fin.starts_with("@ctl id=4 error=bad_argument"), "{fin}");
}

#![cfg(not(loom))]

use std::collections::HashMap;
use std::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::nf::testkit::{frame, run};
use crate::parse::IpAddr;
use crate::rand::XorShift64;

fn flow(i: u64) -> FlowKey {
    let v6 = (i + 1).is_multiple_of(5);
    let (src, dst) = if v6 {
        (IpAddr::V6([0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i as u8]), IpAddr::V6([0x20; 16]))
    } else {
        (IpAddr::V4([10, 0, (i >> 8) as u8, i as u8]), IpAddr::V4([10, 9, 9, 9]))
    };
    FlowKey { src, dst, src_port: 1000 + i as u16, dst_port: 80, proto: if i.is_multiple_of(2) { 6 } else { 17 } }
}

fn frame_of(f: &FlowKey, len: usize) -> Vec<u8> {
    frame(f.src, f.dst, f.proto, f.src_port, f.dst_port, &vec![0xab; len])
}

fn ip_len(f: &[u8]) -> u64 {
    u64::from(crate::parse::parse(f).unwrap().l3_len)
}

fn shared(timeout: u64, export_ring: usize) -> Arc<AccountingShared> {
    let cfg = AccountingConfig {
        capacity: crate::testing::miri_or(4096, 64),
        idle_timeout: Duration(timeout),
        export_ring,
        ..AccountingConfig::default()
    };
    Arc::new(AccountingShared::try_new(&cfg).unwrap())
}

/// (packets, bytes, first, last) per flow.
type Totals = HashMap<FlowKey, (u64, u64, u64, u64)>;

fn add(t: &mut Totals, f: FlowKey, bytes: u64, now: u64) {
    let e = t.entry(f).or_insert((0, 0, now, now));
    e.0 += 1;
    e.1 += bytes;
    e.3 = now;
}

/// Drives random traffic; returns the reference totals.
fn drive(acc: &mut Accounting, rng: &mut XorShift64, flows: u64, batches: usize, step: u64, t0: u64) -> (Totals, u64) {
    let mut reference = Totals::new();
    let mut now = t0;
    for _ in 0..batches {
        now += 1 + rng.next_u64() % step;
        let n = 1 + rng.next_u64() % 32;
        let frames: Vec<(FlowKey, Vec<u8>)> = (0..n)
            .map(|_| {
                let f = flow(rng.next_u64() % flows);
                (f, frame_of(&f, (rng.next_u64() % 200) as usize))
            })
            .collect();
        let fs: Vec<Vec<u8>> = frames.iter().map(|(_, b)| b.clone()).collect();
        for o in run(acc, &fs, 0, Instant(now)) {
            assert_eq!(o.verdict, crate::nf::Verdict::Forward(1), "accounting never drops");
        }
        for (f, b) in &frames {
            add(&mut reference, *f, ip_len(b), now);
        }
    }
    (reference, now)
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(16))]
    /// Without expiry the table's records equal a reference map.
    #[test]
    fn accounting_counts_match_reference(seed in any::<u64>(), flows in 1u64..crate::testing::miri_or(80, 12)) {
        let s = shared(u64::MAX / 4, 64);
        let mut acc = Accounting::new(s.clone());
        let mut rng = XorShift64::from_state(seed);
        let (reference, now) = drive(&mut acc, &mut rng, flows, crate::testing::miri_or(40, 6), 10, 0);
        prop_assert_eq!(s.flow_count(Instant(now)), reference.len());
        for (f, &(p, b, first, last)) in &reference {
            let r = s.record(f, Instant(now)).unwrap();
            prop_assert_eq!((r.packets, r.bytes, r.first_seen.0, r.last_seen.0), (p, b, first, last));
        }
        prop_assert_eq!(acc.counters().packets, reference.values().map(|t| t.0).sum::<u64>());
        prop_assert_eq!(acc.counters().unaccounted_packets, 0);
    }

    /// With expiry and exports along the way: per flow, the exported records plus the final
    /// flush add up to the reference totals, never overlap in time, and each expired entry
    /// comes out once.
    #[test]
    fn accounting_expiry_exports_each_flow_once_with_totals(seed in any::<u64>(), flows in 1u64..crate::testing::miri_or(40, 8)) {
        let timeout = 400;
        let s = shared(timeout, crate::testing::miri_or(8192, 256));
        let mut acc = Accounting::new(s.clone());
        let mut rng = XorShift64::from_state(seed);
        let mut reference = Totals::new();
        let mut now = 0;
        // Bursts separated by quiet periods long enough for some flows to expire.
        for _ in 0..crate::testing::miri_or(6, 3) {
            let (t, end) = drive(&mut acc, &mut rng, flows, crate::testing::miri_or(12, 4), 60, now);
            for (f, v) in t {
                let e = reference.entry(f).or_insert((0, 0, v.2, v.3));
                e.0 += v.0;
                e.1 += v.1;
                e.3 = v.3;
            }
            now = end + rng.next_u64() % (2 * timeout);
            acc.maintain(Instant(now), usize::MAX, usize::MAX);
        }
        // Flush: long after the last packet every flow expires.
        now += 2 * timeout;
        while acc.maintain(Instant(now), usize::MAX, usize::MAX) > 0 {}
        prop_assert_eq!(s.flow_count(Instant(now)), 0);
        let mut got: HashMap<FlowKey, Vec<FlowRecord>> = HashMap::new();
        s.drain_exports(|r| got.entry(r.flow).or_default().push(*r));
        prop_assert_eq!(got.len(), reference.len());
        for (f, &(p, b, first, last)) in &reference {
            let recs = &got[f];
            prop_assert_eq!(recs.iter().map(|r| r.packets).sum::<u64>(), p);
            prop_assert_eq!(recs.iter().map(|r| r.bytes).sum::<u64>(), b);
            prop_assert_eq!(recs.first().unwrap().first_seen.0, first);
            prop_assert_eq!(recs.last().unwrap().last_seen.0, last);
            for w in recs.windows(2) {
                // A record is exported only after a full idle period (7/8 of the timeout at least).
                prop_assert!(w[1].first_seen.0 >= w[0].last_seen.0 + timeout * 7 / 8);
            }
        }
        prop_assert_eq!(acc.counters().exported as usize, got.values().map(Vec::len).sum::<usize>());
        prop_assert_eq!((acc.pending(), acc.counters().export_full), (0, 0));
    }
}

#[test]
fn accounting_export_ring_full_defers_and_counts_never_loses() {
    let s = shared(100, 2);
    let mut acc = Accounting::new(s.clone());
    let frames: Vec<Vec<u8>> = (0..10).map(|i| frame_of(&flow(i), 10)).collect();
    run(&mut acc, &frames, 0, Instant(0));
    run(&mut acc, &frames, 0, Instant(5));
    assert_eq!(acc.counters().flows, 10);
    let mut records = Vec::new();
    let mut rounds = 0;
    while records.len() < 10 && rounds < 50 {
        acc.maintain(Instant(1000 + rounds), usize::MAX, usize::MAX);
        s.drain_exports(|r| records.push(*r));
        rounds += 1;
    }
    assert_eq!(records.len(), 10, "every flow exported once the ring was drained");
    assert!(acc.counters().export_full > 0, "the 2-record ring filled up");
    assert_eq!(acc.pending(), 0);
    let mut seen: Vec<FlowKey> = records.iter().map(|r| r.flow).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 10);
    for r in &records {
        assert_eq!((r.packets, r.first_seen, r.last_seen), (2, Instant(0), Instant(5)));
        assert_eq!(r.bytes, 2 * ip_len(&frame_of(&r.flow, 10)));
    }
    let mut w = String::new();
    acc.write_counters(&mut w).unwrap();
    assert!(
        w.starts_with(" accounting_packets=20 accounting_flows=10 accounting_unaccounted=0 accounting_exported=10"),
        "{w}"
    );
}

#[test]
fn a_busy_bucket_at_export_is_retried_not_forgotten() {
    let s = shared(100, 16);
    let mut acc = Accounting::new(s.clone());
    run(&mut acc, &[frame_of(&flow(3), 10)], 0, Instant(0));
    // Expired and reported (sweep only) ...
    acc.maintain(Instant(200), usize::MAX, 0);
    let key = flow(3).words();
    {
        // ... and the report is taken while another writer holds the bucket.
        let _busy = s.flows.table().hold_bucket(&key).unwrap();
        assert_eq!(acc.maintain(Instant(201), 0, usize::MAX), 0);
        assert_eq!((acc.pending(), acc.counters().deferred), (1, 1));
    }
    // A later batch exports it: once, with its counts.
    assert_eq!(acc.maintain(Instant(202), 0, usize::MAX), 1);
    let mut recs = Vec::new();
    s.drain_exports(|r| recs.push(*r));
    assert_eq!(recs.len(), 1);
    assert_eq!((recs[0].flow, recs[0].packets), (flow(3), 1));
    assert_eq!((acc.pending(), s.flow_count(Instant(202))), (0, 0));
}

#[test]
fn a_flow_back_before_its_report_is_taken_keeps_counting_and_is_exported_later() {
    let s = shared(100, 16);
    let mut acc = Accounting::new(s.clone());
    let f = frame_of(&flow(4), 10);
    run(&mut acc, std::slice::from_ref(&f), 0, Instant(0));
    acc.maintain(Instant(200), usize::MAX, 0); // reported, not taken
    run(&mut acc, std::slice::from_ref(&f), 0, Instant(210)); // the flow comes back
    acc.maintain(Instant(211), 0, usize::MAX);
    assert_eq!(acc.counters().exported, 0, "kept: the flow is live");
    assert_eq!(s.record(&flow(4), Instant(211)).unwrap().packets, 2, "no packet lost into an exported record");
    acc.maintain(Instant(500), usize::MAX, usize::MAX);
    let mut recs = Vec::new();
    s.drain_exports(|r| recs.push(*r));
    assert_eq!(recs.iter().map(|r| r.packets).collect::<Vec<_>>(), vec![2]);
}

#[test]
fn accounting_busy_flows_do_not_expire_and_full_tables_count() {
    let s = shared(100, 16);
    let mut acc = Accounting::new(s.clone());
    let f = frame_of(&flow(1), 0);
    let steps = crate::testing::miri_or(40, 8);
    for t in (0..50 * steps).step_by(50) {
        run(&mut acc, std::slice::from_ref(&f), 0, Instant(t));
        acc.maintain(Instant(t), usize::MAX, usize::MAX);
    }
    assert_eq!(acc.counters().exported, 0, "a packet every half timeout keeps the flow alive");
    assert_eq!(s.record(&flow(1), Instant(50 * steps)).unwrap().packets, steps);
    let mut cfg = AccountingConfig { capacity: 3, ..AccountingConfig::default() };
    let mut small = Accounting::new(Arc::new(AccountingShared::try_new(&cfg).unwrap()));
    let frames: Vec<Vec<u8>> = (0..8).map(|i| frame_of(&flow(i), 0)).collect();
    run(&mut small, &frames, 0, Instant(0));
    assert_eq!((small.counters().packets, small.counters().unaccounted_packets), (3, 5));
    cfg.capacity = 0;
    assert_eq!(AccountingShared::try_new(&cfg).err(), Some(AccountingConfigError::ZeroCapacity));
    cfg.capacity = 1;
    cfg.idle_timeout = Duration(0);
    assert_eq!(cfg.validate(), Err(AccountingConfigError::ZeroIdleTimeout));
    cfg.idle_timeout = Duration(10);
    cfg.export_ring = crate::nf::accounting::MAX_RING + 1;
    assert_eq!(cfg.validate(), Err(AccountingConfigError::ZeroRing), "a huge ring is refused, not allocated");
    cfg.export_ring = 0;
    assert_eq!(cfg.validate(), Err(AccountingConfigError::ZeroRing));
}

/// Decodes the data records of one IPFIX export frame (as a collector would, from the
/// templates this exporter uses): (src, dst, sport, dport, proto, packets, octets).
fn decode_ipfix(f: &[u8]) -> Vec<(IpAddr, IpAddr, u16, u16, u8, u64, u64)> {
    let m = &f[ipfix::L2_L4..];
    let len = usize::from(u16::from_be_bytes([m[2], m[3]]));
    let mut at = 16;
    let mut out = Vec::new();
    while at < len {
        let (id, slen) =
            (u16::from_be_bytes([m[at], m[at + 1]]), usize::from(u16::from_be_bytes([m[at + 2], m[at + 3]])));
        let mut r = at + 4;
        while (id == 256 || id == 257) && r < at + slen {
            let a = if id == 256 { 4 } else { 16 };
            let ip = |b: &[u8]| {
                if a == 4 { IpAddr::V4(b.try_into().unwrap()) } else { IpAddr::V6(b.try_into().unwrap()) }
            };
            let (s, d) = (ip(&m[r..r + a]), ip(&m[r + a..r + 2 * a]));
            let q = r + 2 * a;
            let u = |o: usize| u64::from_be_bytes(m[q + o..q + o + 8].try_into().unwrap());
            out.push((
                s,
                d,
                u16::from_be_bytes([m[q], m[q + 1]]),
                u16::from_be_bytes([m[q + 2], m[q + 3]]),
                m[q + 4],
                u(5),
                u(13),
            ));
            r = q + 21;
        }
        at += slen;
    }
    out
}

#[test]
fn expired_flows_leave_as_ipfix_messages_when_export_is_on() {
    let exp = IpfixExport { port: 1, collector: [10, 0, 0, 9], udp_port: 4739, source: [192, 0, 2, 1], domain: 0 };
    let cfg = AccountingConfig {
        capacity: 4096,
        idle_timeout: Duration(100),
        export: Some(exp),
        ..AccountingConfig::default()
    };
    let s = Arc::new(AccountingShared::try_new(&cfg).unwrap());
    let mut acc = Accounting::new(s.clone());
    let frames: Vec<Vec<u8>> = (0..30).map(|i| frame_of(&flow(i), 10 + i as usize)).collect();
    run(&mut acc, &frames, 0, Instant(0));
    run(&mut acc, &frames[..10], 0, Instant(5));
    let mut mem = vec![0u8; 64 * crate::buf::BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();
    let mut got = Vec::new();
    let mut messages = 0;
    // No traffic: generate() alone sweeps (16 of the 2048 buckets a poll), takes the
    // reports and exports, one message a poll.
    for t in 0..400 {
        let mut batch = NfBatch::new();
        acc.generate(&NfCtx { now: Instant(200 + t) }, &mut pool, &mut batch);
        assert!(batch.len() <= 1, "one message per poll");
        for p in batch.pkts() {
            assert_eq!(p.verdict, Verdict::Forward(1));
            got.extend(decode_ipfix(pool.frame(p.buf)));
            messages += 1;
            pool.free(p.buf).unwrap();
        }
    }
    assert_eq!(pool.in_use(), 0);
    assert_eq!(got.len(), 30, "every flow exported once");
    assert_eq!((acc.counters().ipfix_messages, acc.counters().ipfix_records), (messages, 30));
    for (i, f) in (0..30).map(|i| (i, flow(i))) {
        let r = got.iter().find(|r| r.0 == f.src && r.2 == f.src_port).expect("record");
        let per = ip_len(&frame_of(&f, 10 + i as usize));
        let n = if i < 10 { 2 } else { 1 };
        assert_eq!((r.1, r.3, r.4, r.5, r.6), (f.dst, f.dst_port, f.proto, n, n * per), "flow {i}");
    }
    // An empty pool postpones the message; nothing is lost.
    run(&mut acc, &frames[..3], 0, Instant(1000));
    // Expired, swept (the rest of the table, then all of it) and taken onto the export ring.
    let taken: usize = (0..2).map(|k| acc.maintain(Instant(1200 + k), usize::MAX, usize::MAX)).sum();
    assert_eq!(taken, 3);
    let mut tiny = vec![0u8; crate::buf::BUF_SIZE];
    let mut empty = Pool::try_new(&mut tiny, 0, 1).unwrap();
    let hold = empty.alloc().unwrap();
    let mut batch = NfBatch::new();
    acc.generate(&NfCtx { now: Instant(1202) }, &mut empty, &mut batch);
    assert!(batch.is_empty());
    assert_eq!(acc.counters().ipfix_no_buf, 1);
    empty.free(hold).unwrap();
    acc.generate(&NfCtx { now: Instant(1203) }, &mut empty, &mut batch);
    assert_eq!(batch.len(), 1);
    assert_eq!(decode_ipfix(empty.frame(batch.pkts()[0].buf)).len(), 3);
}

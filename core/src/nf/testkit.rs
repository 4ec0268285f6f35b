#![cfg(not(loom))]

//! Test support shared by the NFs' tests (ACL, LB, accounting, NAT): frame builders for any
//! addresses and ports, a one-batch runner, and an independent checksum check. Compiled for
//! `core`'s own tests only: no part of the crate's API.

use std::vec::Vec;

use crate::buf::{BUF_SIZE, Pool};
use crate::nf::{Nf, NfBatch, NfCtx, Pkt, Verdict};
use crate::parse::{self, IpAddr};
use crate::time::Instant;

/// Ethernet + IPv4 or IPv6 (by the address family) + TCP (6) / UDP (17) / raw payload.
pub fn frame(src: IpAddr, dst: IpAddr, proto: u8, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut l4 = Vec::new();
    match proto {
        6 => {
            l4.extend_from_slice(&sport.to_be_bytes());
            l4.extend_from_slice(&dport.to_be_bytes());
            l4.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        }
        17 => {
            l4.extend_from_slice(&sport.to_be_bytes());
            l4.extend_from_slice(&dport.to_be_bytes());
            l4.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            l4.extend_from_slice(&[0, 0]);
        }
        _ => {}
    }
    l4.extend_from_slice(payload);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00]);
            let total = (20 + l4.len()) as u16;
            let mut h = vec![0x45, 0];
            h.extend_from_slice(&total.to_be_bytes());
            h.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
            h.extend_from_slice(&s);
            h.extend_from_slice(&d);
            let c = naive_sum(&h);
            h[10..12].copy_from_slice(&(!c).to_be_bytes());
            if matches!(proto, 6 | 17) {
                let c = !naive_l4_sum(&s, &d, proto, &l4);
                let c = if c == 0 && proto == 17 { 0xFFFF } else { c };
                let at = if proto == 6 { 16 } else { 6 };
                l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
            }
            f.extend_from_slice(&h);
        }
        (s, d) => {
            f.extend_from_slice(&[0x86, 0xDD]);
            let (s, d) = (v6(s), v6(d));
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend_from_slice(&s);
            f.extend_from_slice(&d);
            if matches!(proto, 6 | 17) {
                let c = !naive_l4_sum(&s, &d, proto, &l4);
                let c = if c == 0 { 0xFFFF } else { c };
                let at = if proto == 6 { 16 } else { 6 };
                l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
            }
        }
    }
    f.extend_from_slice(&l4);
    f
}

fn v6(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V6(b) => b,
        IpAddr::V4(b) => {
            let mut o = [0u8; 16];
            o[10] = 0xff;
            o[11] = 0xff;
            o[12..].copy_from_slice(&b);
            o
        }
    }
}

/// RFC 1071 by the book, written apart from `crate::checksum`: sum 16-bit big-endian words
/// (an odd last byte padded with zero) into a wide accumulator, fold carries.
pub fn naive_sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut i = 0;
    while i < data.len() {
        let hi = u64::from(data[i]);
        let lo = if i + 1 < data.len() { u64::from(data[i + 1]) } else { 0 };
        acc += hi << 8 | lo;
        i += 2;
    }
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

/// The one's-complement sum of the pseudo-header (IPv4 or IPv6 by address length) and the
/// segment as it stands (checksum field included).
pub fn naive_l4_sum(src: &[u8], dst: &[u8], proto: u8, seg: &[u8]) -> u16 {
    let mut ph = Vec::new();
    ph.extend_from_slice(src);
    ph.extend_from_slice(dst);
    if src.len() == 4 {
        ph.extend_from_slice(&[0, proto]);
        ph.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    } else {
        ph.extend_from_slice(&(seg.len() as u32).to_be_bytes());
        ph.extend_from_slice(&[0, 0, 0, proto]);
    }
    ph.extend_from_slice(seg);
    naive_sum(&ph)
}

/// Checks a frame's checksums twice: with `crate::checksum` and with the naive sums above.
/// IPv4 header and TCP/UDP (a UDP checksum of 0 over IPv4 means "none" and passes).
pub fn checksums_ok(f: &[u8]) -> bool {
    let Ok(p) = parse::parse(f) else { return false };
    let l3 = usize::from(p.l3_offset);
    let l4 = usize::from(p.l4_offset);
    let end = l3 + usize::from(p.l3_len);
    let seg = &f[l4..end];
    let (src, dst) = match p.l3 {
        parse::L3Kind::Ipv4 => {
            let h = &f[l3..l4];
            if naive_sum(h) != 0xFFFF || !crate::checksum::verify(h) {
                return false;
            }
            (&f[l3 + 12..l3 + 16], &f[l3 + 16..l3 + 20])
        }
        parse::L3Kind::Ipv6 => (&f[l3 + 8..l3 + 24], &f[l3 + 24..l3 + 40]),
    };
    match p.l4 {
        parse::L4Kind::Tcp | parse::L4Kind::Udp => {
            if p.l4 == parse::L4Kind::Udp && src.len() == 4 && seg[6..8] == [0, 0] {
                return true;
            }
            let naive = naive_l4_sum(src, dst, p.ip_proto, seg) == 0xFFFF;
            let lib = match (<[u8; 4]>::try_from(src), <[u8; 4]>::try_from(dst)) {
                (Ok(s), Ok(d)) => crate::checksum::pseudo_header_v4(s, d, p.ip_proto, seg.len() as u16),
                _ => {
                    let (s, d) = (<[u8; 16]>::try_from(src).unwrap(), <[u8; 16]>::try_from(dst).unwrap());
                    crate::checksum::pseudo_header_v6(&s, &d, p.ip_proto, seg.len() as u32)
                }
            }
            .add_bytes(seg)
            .fold()
                == 0xFFFF;
            naive && lib
        }
        _ => true,
    }
}

/// What a packet came out of an NF as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    /// The frame after the NF (rewritten or not).
    pub frame: Vec<u8>,
    /// Its verdict.
    pub verdict: Verdict,
}

/// Runs `nf` over `frames` (each must parse) as one batch (or several of 32) arriving on
/// `ingress` at `now`; returns each frame with its verdict, in order. A frame longer than a
/// buffer goes in over several (`Pool::alloc_frame`) and comes out whole.
pub fn run(nf: &mut dyn Nf, frames: &[Vec<u8>], ingress: u8, now: Instant) -> Vec<Out> {
    let mut outs = Vec::new();
    let n = 32 * crate::buf::MAX_SEGMENTS;
    let mut mem = vec![0u8; n * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, n).unwrap();
    for chunk in frames.chunks(32) {
        let mut batch = NfBatch::new();
        for f in chunk {
            let b = pool.alloc_frame(f).unwrap();
            let parsed = parse::parse(f).expect("test frames parse");
            let pkt = Pkt {
                buf: b,
                parsed,
                ingress,
                vid: 0,
                verdict: Verdict::Forward(1 - ingress.min(1)),
                dst: crate::nf::Dst::Peer,
            };
            batch.push(pkt).unwrap();
        }
        nf.process(&NfCtx { now }, &mut pool, &mut batch);
        for p in batch.pkts() {
            let mut frame = vec![0; pool.frame_len(p.buf)];
            pool.copy_frame(p.buf, &mut frame);
            outs.push(Out { frame, verdict: p.verdict });
            pool.free(p.buf).unwrap();
        }
        batch.clear();
    }
    outs
}

/// Reads the IP header and does nothing: a chain of an NF with a vector loop and this one has
/// no vector path, so it runs every frame through the batch path.
pub struct Passive;

impl Nf for Passive {
    fn name(&self) -> &'static str {
        "passive"
    }
    fn process(&mut self, _ctx: &NfCtx, _pool: &mut Pool<'_>, _batch: &mut NfBatch) {}
    fn reads(&self) -> parse::Depth {
        parse::Depth::L3
    }
}

/// One received batch through `chain` on port 0: each port's frames in order, the drops per
/// reason and the chain's counters.
pub fn run_chain(chain: &mut crate::nf::Chain, frames: &[Vec<u8>]) -> ([Vec<Vec<u8>>; 2], Vec<u64>, String) {
    let (sent, counters, _) = run_chain_on(chain, frames, 0);
    let mut text = String::new();
    chain.write_counters(&mut text).unwrap();
    (sent, counters.drops.to_vec(), text)
}

/// One received batch through `chain` on `port`: each port's frames in order, the stage's
/// counters and the commands the chain returned. Every buffer must be out or back in the pool.
pub fn run_chain_on(
    chain: &mut crate::nf::Chain,
    frames: &[Vec<u8>],
    port: usize,
) -> ([Vec<Vec<u8>>; 2], crate::stage::StageCounters, crate::control::Commands) {
    use crate::buf::Batch;
    use crate::stage::{Stage, StageCounters};
    let n = 32 * crate::buf::MAX_SEGMENTS;
    let mut mem = vec![0u8; n * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, n).unwrap();
    let mut input = Batch::new();
    for f in frames {
        // A frame longer than a buffer goes in over several.
        input.push(pool.alloc_frame(f).unwrap()).unwrap();
    }
    let mut out = [const { Batch::new() }; crate::stage::PORTS];
    let mut counters = StageCounters::default();
    let cmds = chain.process(port, &mut pool, &mut input, &mut out, &mut counters, Instant(7));
    assert!(input.is_empty());
    let whole = |b| {
        let mut f = vec![0; pool.frame_len(b)];
        pool.copy_frame(b, &mut f);
        f
    };
    let sent = [0, 1].map(|p| out[p].as_slice().iter().map(|&b| whole(b)).collect::<Vec<_>>());
    for q in &mut out {
        pool.free_batch(q);
    }
    assert_eq!(pool.in_use(), 0, "every buffer went out or back to the pool");
    (sent, counters, cmds)
}

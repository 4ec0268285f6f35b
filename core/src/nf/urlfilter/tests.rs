use super::http::{Outcome, analyse};
use super::*;
use crate::buf::BUF_SIZE;
use crate::checksum;
use crate::drops::DropReason;
use crate::nf::{Pkt, Verdict};
use crate::parse::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, IpAddr, PROTO_TCP, PROTO_UDP, parse};
use crate::test_frames::{SRC, eth, ipv4, ipv6, udp};
use alloc::string::ToString;
use proptest::prelude::*;

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH_ACK: u8 = 0x18;

/// One TCP connection between the test addresses (client = A, server = B).
#[derive(Clone, Copy)]
struct Conn {
    v6: bool,
    cport: u16,
    sport: u16,
    cisn: u32,
    sisn: u32,
}

impl Conn {
    fn new(cport: u16) -> Self {
        Self { v6: false, cport, sport: 80, cisn: 0xFFFF_FF00, sisn: 7_000 }
    }

    /// A segment; `from_client` picks the direction. Checksums valid.
    fn seg(&self, from_client: bool, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let (sp, dp) = if from_client { (self.cport, self.sport) } else { (self.sport, self.cport) };
        let mut t = Vec::new();
        t.extend_from_slice(&sp.to_be_bytes());
        t.extend_from_slice(&dp.to_be_bytes());
        t.extend_from_slice(&seq.to_be_bytes());
        t.extend_from_slice(&ack.to_be_bytes());
        t.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        t.extend_from_slice(payload);
        let mut f = if self.v6 {
            eth(&[], ETHERTYPE_IPV6, &ipv6(PROTO_TCP, &t))
        } else {
            eth(&[], ETHERTYPE_IPV4, &ipv4(PROTO_TCP, &t))
        };
        if !from_client {
            // Swapping the addresses keeps the IPv4 header checksum (the sum is commutative).
            let (a, n) = if self.v6 { (14 + 8, 16) } else { (14 + 12, 4) };
            let (x, y) = f.split_at_mut(a + n);
            x[a..].swap_with_slice(&mut y[..n]);
        }
        fix_tcp_checksum(&mut f);
        f
    }

    fn syn(&self) -> Vec<u8> {
        self.seg(true, self.cisn, 0, SYN, b"")
    }

    fn syn_ack(&self) -> Vec<u8> {
        self.seg(false, self.sisn, self.cisn.wrapping_add(1), SYN | ACK, b"")
    }

    /// Client data at stream offset `off`.
    fn data(&self, off: usize, bytes: &[u8]) -> Vec<u8> {
        self.seg(true, self.cisn.wrapping_add(1).wrapping_add(off as u32), self.sisn.wrapping_add(1), PSH_ACK, bytes)
    }

    fn reply(&self, bytes: &[u8]) -> Vec<u8> {
        self.seg(false, self.sisn.wrapping_add(1), self.cisn.wrapping_add(1), PSH_ACK, bytes)
    }
}

fn fix_tcp_checksum(f: &mut [u8]) {
    let p = parse(f).unwrap();
    let (l4, end) = (usize::from(p.l4_offset), usize::from(p.l3_offset + p.l3_len));
    f[l4 + 16..l4 + 18].fill(0);
    let c = match (p.flow.src, p.flow.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => checksum::l4_checksum_v4(s, d, PROTO_TCP, &f[l4..end]),
        (IpAddr::V6(s), IpAddr::V6(d)) => checksum::l4_checksum_v6(&s, &d, PROTO_TCP, &f[l4..end]),
        _ => unreachable!(),
    };
    f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
}

/// Frames in, frames out with verdicts; client frames arrive on port 0, server frames on 1.
struct Rig {
    nf: UrlFilter,
    shared: Arc<UrlFilterShared>,
    now: u64,
}

type Out = (Vec<u8>, Verdict, Option<[u8; 6]>);

impl Rig {
    fn new(cfg: &UrlFilterConfig) -> Self {
        let shared = Arc::new(UrlFilterShared::try_new(cfg).unwrap());
        Self { nf: UrlFilter::new(shared.clone()), shared, now: 1 }
    }

    fn send(&mut self, frames: &[Vec<u8>]) -> Vec<Out> {
        frames.chunks(32).flat_map(|c| self.batch(c)).collect()
    }

    fn batch(&mut self, frames: &[Vec<u8>]) -> Vec<Out> {
        let mut mem = vec![0u8; 32 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
        let mut batch = NfBatch::new();
        for f in frames {
            let b = pool.alloc().unwrap();
            pool.set_len(b, f.len()).unwrap();
            pool.frame_mut(b).copy_from_slice(f);
            let parsed = parse(f).unwrap();
            let ingress = if parsed.flow.src_port == 80 || parsed.flow.src_port == 443 { 1 } else { 0 };
            let verdict = Verdict::Forward(1 - ingress);
            batch.push(Pkt { buf: b, parsed, ingress, vid: 0, verdict, dst: crate::nf::Dst::Peer }).unwrap();
        }
        self.nf.process(&NfCtx { now: Instant(self.now) }, &mut pool, &mut batch);
        batch.pkts().iter().map(|p| (pool.frame(p.buf).to_vec(), p.verdict, p.dst.mac())).collect()
    }

    /// [`Rig::batch`] with each frame over buffers of `piece` bytes (the last takes the
    /// rest), as a NIC hands over a jumbo frame; a frame comes back in one piece.
    fn batch_pieces(&mut self, frames: &[Vec<u8>], piece: usize) -> Vec<Out> {
        let mut mem = vec![0u8; 64 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();
        let mut batch = NfBatch::new();
        for f in frames {
            let mut head = None;
            for chunk in f.chunks(piece) {
                let b = pool.alloc().unwrap();
                pool.set_len(b, chunk.len()).unwrap();
                pool.frame_mut(b).copy_from_slice(chunk);
                match head {
                    None => head = Some(b),
                    Some(h) => pool.append_segment(h, b).unwrap(),
                }
            }
            let b = head.unwrap();
            let parsed = parse(f).unwrap();
            let ingress = if parsed.flow.src_port == 80 || parsed.flow.src_port == 443 { 1 } else { 0 };
            let verdict = Verdict::Forward(1 - ingress);
            batch.push(Pkt { buf: b, parsed, ingress, vid: 0, verdict, dst: crate::nf::Dst::Peer }).unwrap();
        }
        self.nf.process(&NfCtx { now: Instant(self.now) }, &mut pool, &mut batch);
        let whole = |b| {
            let mut v = vec![0u8; pool.frame_len(b)];
            pool.copy_frame(b, &mut v);
            v
        };
        batch.pkts().iter().map(|p| (whole(p.buf), p.verdict, p.dst.mac())).collect()
    }

    fn counters(&self) -> UrlFilterCounters {
        *self.nf.counters()
    }
}

fn cfg() -> UrlFilterConfig {
    UrlFilterConfig {
        banned: vec!["example.com/bad".to_string(), "evil.org".to_string(), "Shop.Example.NET/cart/".to_string()],
        window: 512,
        slabs: 8,
        flows: 64,
        inspect_timeout: Duration(1_000),
        flow_timeout: Duration(10_000),
        ..Default::default()
    }
}

const BANNED: &[u8] =
    b"GET /bad/page.html?x=1 HTTP/1.1\r\nUser-Agent: test\r\nHost: Example.COM:8080\r\nAccept: */*\r\n\r\n";
const ALLOWED: &[u8] = b"GET /good/page.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";

fn passed(out: &[Out], input: &[Vec<u8>]) -> bool {
    out.len() == input.len() && out.iter().zip(input).all(|(o, i)| matches!(o.1, Verdict::Forward(_)) && o.0 == *i)
}

#[test]
fn banned_url_split_out_of_order_and_overlapping_is_blocked() {
    let mut r = Rig::new(&cfg());
    let c = Conn::new(40_000);
    let b = BANNED;
    // SYN, SYN-ACK, then the head in pieces: the tail first, a middle piece, then a piece that
    // overlaps both neighbours (the same bytes: a retransmission), then the piece that
    // completes the prefix.
    let frames = vec![
        c.syn(),
        c.syn_ack(),
        c.data(40, &b[40..]),
        c.data(15, &b[15..35]),
        c.data(10, &b[10..40]),
        c.data(0, &b[..10]),
    ];
    let out = r.send(&frames);
    assert!(passed(&out[..5], &frames[..5]), "nothing is held back before the verdict");
    assert_eq!(out[5].1, Verdict::Drop(DropReason::UrlBlocked), "the completing segment is dropped");
    let k = r.counters();
    assert_eq!((k.inspected, k.blocked, k.allowed, k.conflicts), (1, 1, 0, 0));
    assert_eq!(r.shared.slabs_in_use(Instant(r.now)), 0, "the verdict gave the slab back");
    // Every later packet of the connection, either direction, is dropped.
    let later = vec![c.data(0, &b[..10]), c.reply(b"HTTP/1.1 200 OK\r\n\r\n"), c.seg(true, 5, 6, ACK, b"")];
    let out = r.send(&later);
    assert!(out.iter().all(|o| o.1 == Verdict::Drop(DropReason::UrlBlocked)));
    assert_eq!(r.counters().blocked_pkts, 4);
}

/// Different bytes for the same stream offsets (forged first, real after, or the other way
/// round): which copy the server keeps depends on its TCP stack, so the connection is blocked
/// at the conflicting segment (`conflicts`), whatever either copy says.
#[test]
fn a_conflicting_overlap_blocks_the_connection() {
    let mut forged = BANNED[..8].to_vec();
    forged[5] = b'x';
    let allowed_forged = {
        let mut a = ALLOWED[..8].to_vec();
        a[5] = b'x';
        a
    };
    // The banned request and an allowed one, each with a forged copy of its first bytes sent
    // before it: blocked at the conflict either way.
    for (i, (fake, real)) in [(&forged[..], BANNED), (&allowed_forged[..], ALLOWED)].into_iter().enumerate() {
        let mut r = Rig::new(&cfg());
        let c = Conn::new(40_001 + i as u16);
        let frames = vec![c.syn(), c.data(0, fake), c.data(0, real)];
        let out = r.send(&frames);
        let k = r.counters();
        assert_eq!(out[2].1, Verdict::Drop(DropReason::UrlBlocked), "{i}");
        assert_eq!((k.conflicts, k.allowed, k.blocked), (1, 0, 0), "{i}");
    }
}

/// Segments the server's TCP discards are not read: without ACK, or with a bad checksum,
/// a banned request's bytes never reach the stream (forwarded as they are: the server drops
/// them); the real request after them is read.
#[test]
fn segments_the_server_discards_are_not_read() {
    let c = Conn::new(40_050);
    let no_ack = c.seg(true, c.cisn.wrapping_add(1), 0, 0x08, BANNED);
    let mut bad_sum = c.data(0, BANNED);
    let last = bad_sum.len() - 1;
    bad_sum[last] ^= 0x20;
    let mut r = Rig::new(&cfg());
    let frames = vec![c.syn(), c.syn_ack(), no_ack, bad_sum, c.data(0, ALLOWED)];
    let out = r.send(&frames);
    assert!(passed(&out, &frames));
    let k = r.counters();
    assert_eq!((k.discarded, k.blocked, k.allowed), (2, 0, 1), "{k:?}");
}

#[test]
fn allowed_traffic_passes_byte_identical() {
    let mut r = Rig::new(&cfg());
    let c = Conn::new(40_002);
    let mut v6 = Conn::new(40_003);
    v6.v6 = true;
    let tls = Conn::new(40_004);
    let frames = vec![
        c.syn(),
        c.syn_ack(),
        c.data(0, &ALLOWED[..20]),
        c.data(20, &ALLOWED[20..]),
        c.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        c.data(ALLOWED.len(), b"GET /good/2 HTTP/1.1\r\nHost: example.com\r\n\r\n"), // keep-alive: read too
        v6.syn(),
        v6.data(0, b"GET / HTTP/1.1\r\nHost: [2001:db8::2]:80\r\n\r\n"),
        tls.syn(),
        tls.data(0, &[0x16, 3, 1, 0, 0x20, 1, 0, 0]),
    ];
    let out = r.send(&frames);
    assert!(passed(&out, &frames));
    let k = r.counters();
    assert_eq!((k.inspected, k.allowed, k.not_http, k.blocked), (3, 3, 1, 0));
    // The two HTTP connections keep their slabs for the next request until the client has
    // been quiet for the inspection timeout; the TLS one gave its slab back.
    assert_eq!(r.shared.slabs_in_use(Instant(r.now)), 2);
    assert_eq!(r.shared.slabs_in_use(Instant(r.now + 1_001)), 0);
}

/// Every request on a connection is read: keep-alive and pipelined requests after an allowed
/// one, past `Content-Length` bodies (however long) and chunked bodies — whose contents are
/// never read as requests — while ambiguous framing is undecided, a protocol switch ends the
/// reading, and a head longer than the window cannot be framed.
#[test]
fn every_request_on_a_connection_is_read() {
    const BAN: &[u8] = b"GET /bad HTTP/1.1\r\nHost: example.com\r\n\r\n";
    let run = |c: &UrlFilterConfig, port: u16, parts: &[&[u8]]| {
        let conn = Conn::new(port);
        let mut r = Rig::new(c);
        let mut frames = vec![conn.syn(), conn.syn_ack()];
        let mut at = 0;
        for p in parts {
            frames.push(conn.data(at, p));
            at += p.len();
        }
        let out = r.send(&frames);
        (out, r.counters())
    };
    let cat = |parts: &[&[u8]]| parts.concat();
    let post =
        |len: usize| format!("POST /good HTTP/1.1\r\nHost: example.com\r\nContent-Length: {len}\r\n\r\n").into_bytes();
    // Keep-alive: the second request, in its own segment, is banned.
    let (out, k) = run(&cfg(), 47_000, &[ALLOWED, BAN]);
    assert_eq!((k.allowed, k.blocked), (1, 1));
    assert_eq!(out.last().map(|o| o.1), Some(Verdict::Drop(DropReason::UrlBlocked)));
    // Pipelined: both in one segment.
    let (_, k) = run(&cfg(), 47_001, &[&cat(&[ALLOWED, BAN])]);
    assert_eq!((k.allowed, k.blocked), (1, 1));
    // A body that looks like a banned request is a body; the request after it is read.
    let (out, k) = run(&cfg(), 47_002, &[&cat(&[&post(BAN.len()), BAN, ALLOWED])]);
    assert_eq!((k.allowed, k.blocked), (2, 0), "{k:?}");
    assert!(out.iter().all(|o| matches!(o.1, Verdict::Forward(_))));
    // A body ten times the window, in segments, then a banned request.
    let body = vec![b'x'; 10 * 1024];
    let p = post(body.len());
    let mut parts: Vec<&[u8]> = vec![&p];
    parts.extend(body.chunks(700));
    parts.push(BAN);
    let (_, k) = run(&cfg(), 47_003, &parts);
    assert_eq!((k.allowed, k.blocked), (1, 1), "{k:?}");
    // Chunked: two chunks (one holds a banned request's text), the last chunk, a trailer,
    // then the banned request.
    let chunked = b"POST /good HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    let chunks =
        format!("5;ext=1\r\nhello\r\n{:x}\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n", BAN.len(), String::from_utf8_lossy(BAN))
            .into_bytes();
    let (_, k) = run(&cfg(), 47_004, &[chunked, &chunks[..9], &chunks[9..], ALLOWED]);
    assert_eq!((k.allowed, k.blocked, k.unframed), (2, 0, 0), "{k:?}");
    let (_, k) = run(&cfg(), 47_005, &[&cat(&[chunked, &chunks, BAN])]);
    assert_eq!((k.allowed, k.blocked), (1, 1), "{k:?}");
    // Ambiguous framing (Content-Length and Transfer-Encoding: smuggling) and a chunk-size
    // line that is not one: undecided, denied by default.
    let both = b"POST /good HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (out, k) = run(&cfg(), 47_006, &[both]);
    assert_eq!((k.unframed, k.undecided_denied, k.allowed), (1, 1, 0), "{k:?}");
    assert_eq!(out.last().map(|o| o.1), Some(Verdict::Drop(DropReason::UrlBlocked)));
    let (_, k) = run(&cfg(), 47_007, &[chunked, b"zz\r\n"]);
    assert_eq!((k.unframed, k.undecided_denied), (1, 1), "{k:?}");
    for cl in
        [&b"Content-Length: 3\r\nContent-Length: 4"[..], b"Content-Length: -1", b"Transfer-Encoding: chunked, gzip"]
    {
        let head = cat(&[b"POST /good HTTP/1.1\r\nHost: example.com\r\n", cl, b"\r\n\r\n"]);
        let (_, k) = run(&cfg(), 47_008, &[&head]);
        assert_eq!(k.unframed, 1, "{}", String::from_utf8_lossy(cl));
    }
    // A request to leave HTTP: whether the server agreed is in its answer, which the filter
    // does not read, so what follows is read as a request all the same — a banned one is
    // blocked (a server that did not switch would serve it), and bytes that are not a request
    // (the new protocol's) let the connection go, even on a listed HTTP port.
    let up = b"GET /chat HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    let (_, k) = run(&cfg(), 47_009, &[up, BAN]);
    assert_eq!((k.allowed, k.switched, k.blocked), (1, 0, 1), "{k:?}");
    let listed = UrlFilterConfig { ports: vec![80], ..cfg() };
    for first in [&up[..], b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"] {
        let (out, k) = run(&listed, 47_011, &[first, &[0x16, 3, 1, 0, 5, 1, 2, 3, 4, 5], BAN]);
        assert_eq!((k.allowed, k.switched, k.not_http, k.blocked, k.undecided_denied), (1, 1, 0, 0, 0), "{k:?}");
        assert!(out.iter().all(|o| matches!(o.1, Verdict::Forward(_))));
    }
    // A head longer than the window (its URL allowed): its end cannot be found, so the
    // requests after it could not be read; undecided.
    let c = UrlFilterConfig { window: 128, ..cfg() };
    let long = cat(&[b"GET /good HTTP/1.1\r\nHost: example.com\r\nCookie: ", &[b'c'; 200], b"\r\n\r\n"]);
    let (_, k) = run(&c, 47_010, &[&long, BAN]);
    assert_eq!((k.unframed, k.undecided_denied, k.allowed), (1, 1, 0), "{k:?}");
}

#[test]
fn non_tcp_passes_untouched() {
    let mut r = Rig::new(&cfg());
    let frames = vec![
        eth(&[], ETHERTYPE_IPV4, &ipv4(PROTO_UDP, &udp(5000, 80, b"GET /bad HTTP/1.1\r\nHost: example.com\r\n\r\n"))),
        eth(&[], ETHERTYPE_IPV4, &ipv4(crate::parse::PROTO_ICMP, &crate::test_frames::icmp_echo(b"ping"))),
    ];
    let out = r.send(&frames);
    assert!(passed(&out, &frames));
    assert_eq!(r.counters().non_tcp, 2);
}

#[test]
fn slab_exhaustion_drops_by_default_and_expiry_returns_slabs() {
    let mut c = cfg();
    c.slabs = 1;
    let mut r = Rig::new(&c);
    let (a, b) = (Conn::new(41_000), Conn::new(41_001));
    // Both open (no slab yet); `a`'s first data takes the only slab, `b`'s finds none.
    let out = r.send(&[a.syn(), b.syn(), a.data(0, &ALLOWED[..10]), b.data(0, BANNED)]);
    assert!(out[..3].iter().all(|o| matches!(o.1, Verdict::Forward(_))));
    assert_eq!(out[3].1, Verdict::Drop(DropReason::FlowTableFull));
    assert_eq!((r.counters().slab_exhausted, r.counters().handshakes), (1, 2));
    // `a` goes idle; once its inspection times out the slab is free again, and `b`'s
    // retransmission (its flow still waits for data) gets it.
    r.now += 1_000;
    let out = r.send(&[b.data(0, BANNED)]);
    assert_eq!(out[0].1, Verdict::Drop(DropReason::UrlBlocked));
    assert_eq!((r.counters().inspected, r.counters().blocked), (2, 1));
}

#[test]
fn slab_exhaustion_can_fail_open() {
    let mut c = cfg();
    c.slabs = 1;
    c.on_exhaustion = Exhaustion::Allow;
    c.handshake_timeout = Duration(50);
    let mut r = Rig::new(&c);
    let (a, b) = (Conn::new(41_002), Conn::new(41_003));
    let frames = vec![a.syn(), b.syn(), a.data(0, &ALLOWED[..10]), b.data(0, BANNED)];
    let out = r.send(&frames);
    assert!(passed(&out, &frames), "the second flow passes uninspected");
    assert_eq!((r.counters().slab_exhausted, r.counters().blocked), (1, 0));
    // Failing open leaves no long-lived allow entry: once the handshake timeout has passed
    // (and the first flow's slab is free again), the second flow's next request is read.
    r.now += 1_001;
    let out = r.send(&[b.data(BANNED.len(), BANNED)]);
    assert_eq!(out[0].1, Verdict::Drop(DropReason::UrlBlocked));
    assert_eq!((r.counters().blocked, r.counters().midstream), (1, 1));
}

#[test]
fn flow_table_exhaustion_is_counted() {
    let mut c = cfg();
    c.flows = 8;
    let mut r = Rig::new(&c);
    let frames: Vec<Vec<u8>> = (0..40).map(|i| Conn::new(42_000 + i).syn()).collect();
    let out = r.send(&frames);
    let dropped = out.iter().filter(|o| o.1 == Verdict::Drop(DropReason::FlowTableFull)).count() as u64;
    let k = r.counters();
    assert_eq!(dropped, k.table_full);
    assert_eq!(k.handshakes + dropped, 40);
    assert!(k.handshakes <= 8);
    assert_eq!((k.inspected, k.slab_exhausted), (0, 0), "a SYN claims no slab");
}

/// Spoofed SYNs (never followed by data) fill only flow entries, never slabs, and those for
/// the short handshake timeout: a real client still gets inspected — during the flood, and
/// after it when the table was full.
#[test]
fn a_syn_flood_uses_no_slab_and_its_entries_expire_after_the_handshake_timeout() {
    let mut c = cfg();
    c.slabs = 2;
    c.flows = 64;
    c.handshake_timeout = Duration(100);
    let mut r = Rig::new(&c);
    let spoofed: Vec<Vec<u8>> = (0..20).map(|i| Conn::new(50_000 + i).syn()).collect();
    r.send(&spoofed);
    assert_eq!(r.shared.slabs_in_use(Instant(r.now)), 0, "20 SYNs, 2 slabs: none taken");
    let client = Conn::new(40_100);
    let out = r.send(&[client.syn(), client.data(0, BANNED)]);
    assert_eq!(out[1].1, Verdict::Drop(DropReason::UrlBlocked), "inspected in the middle of the flood");
    // A flood that fills the table: new connections are refused (fail closed) until the
    // handshake timeout frees the entries — far sooner than the inspection timeout would.
    let spoofed: Vec<Vec<u8>> = (0..200).map(|i| Conn::new(51_000 + i).syn()).collect();
    r.send(&spoofed);
    let k = r.counters();
    assert!(k.table_full > 0, "the table filled: {k:?}");
    assert_eq!(k.full_capacity + k.full_bucket + k.full_busy, k.table_full, "{k:?}");
    assert!(k.full_capacity > 0 && k.full_busy == 0, "capacity, not a lock: {k:?}");
    r.now += 100;
    let late = Conn::new(40_101);
    let out = r.send(&[late.syn(), late.data(0, BANNED)]);
    assert_eq!(out[0].1, Verdict::Forward(1), "the spoofed entries expired");
    assert_eq!(out[1].1, Verdict::Drop(DropReason::UrlBlocked));
}

/// An instance that goes away gives its capacity reserve back: the table's used capacity is
/// then the entries still stored, and a new instance can fill the whole table.
#[test]
fn a_dropped_instance_returns_its_reserve_of_flow_capacity() {
    let c = UrlFilterConfig { flows: 64, ..cfg() };
    let mut r = Rig::new(&c);
    r.send(&[Conn::new(40_000).syn()]);
    let table = r.shared.flows.table();
    assert!(table.used_capacity() > 1, "the instance holds a reserve: {}", table.used_capacity());
    let shared = r.shared.clone();
    drop(r);
    assert_eq!(shared.flows.table().used_capacity(), 1, "one entry stored, no reserve held");
    // Instances come and go (a chain rebuilt): the table never shrinks.
    for round in 0..20u16 {
        let mut nf = Rig { nf: UrlFilter::new(shared.clone()), shared: shared.clone(), now: 1 };
        nf.send(&[Conn::new(41_000 + round).syn()]);
    }
    assert_eq!(shared.flows.table().used_capacity(), 21);
    let mut last = Rig { nf: UrlFilter::new(shared.clone()), shared: shared.clone(), now: 1 };
    let rest: Vec<Vec<u8>> = (0..43).map(|i| Conn::new(42_000 + i).syn()).collect();
    last.send(&rest);
    // Every SYN found capacity (a full bucket is the hash's luck, not lost capacity).
    let k = last.counters();
    assert_eq!((k.handshakes + k.full_bucket, k.full_capacity), (43, 0), "{k:?}");
}

/// A flood ten times the flow table's size, spread so that only a quarter of the table is
/// live at any time: the batches' expiry sweep frees the expired handshake entries, so no
/// SYN ever finds the table full, and a client in the middle is inspected.
#[test]
fn a_long_syn_flood_never_fills_the_table() {
    let c = UrlFilterConfig { flows: 64, handshake_timeout: Duration(40), ..cfg() };
    let mut r = Rig::new(&c);
    for round in 0..80u16 {
        let spoofed: Vec<Vec<u8>> = (0..8).map(|i| Conn::new(10_000 + round * 8 + i).syn()).collect();
        r.send(&spoofed);
        r.now += 10;
    }
    assert_eq!(r.counters().handshakes, 640);
    assert_eq!(r.counters().table_full, 0, "{:?}", r.counters());
    let client = Conn::new(40_200);
    let out = r.send(&[client.syn(), client.data(0, BANNED)]);
    assert_eq!(out[1].1, Verdict::Drop(DropReason::UrlBlocked));
}

#[test]
fn reset_rewrites_the_blocked_segment_toward_the_client() {
    let mut c = cfg();
    c.reset = true;
    for v6 in [false, true] {
        let mut r = Rig::new(&c);
        let mut conn = Conn::new(43_000);
        conn.v6 = v6;
        let seg = conn.data(0, BANNED);
        let out = r.send(&[conn.syn(), seg.clone()]);
        let (frame, verdict, mac) = &out[1];
        assert_eq!((*verdict, *mac), (Verdict::Forward(0), Some(SRC)), "back out of the client's port");
        let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
        let Some(etherparse::TransportSlice::Tcp(tcp)) = p.transport else { panic!("not TCP") };
        assert!(tcp.rst() && !tcp.syn() && !tcp.fin());
        assert_eq!((tcp.source_port(), tcp.destination_port()), (80, 43_000));
        assert_eq!(tcp.sequence_number(), conn.sisn.wrapping_add(1), "SEQ = the client's ACK");
        assert!(tcp.payload().is_empty());
        let orig = parse(&seg).unwrap();
        let got = parse(frame).unwrap();
        assert_eq!((got.flow.src, got.flow.dst), (orig.flow.dst, orig.flow.src));
        match p.net {
            Some(etherparse::NetSlice::Ipv4(ip)) => {
                let h = ip.header();
                assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                let want = tcp.to_header().calc_checksum_ipv4(&h.to_header(), tcp.payload()).unwrap();
                assert_eq!(tcp.checksum(), want);
                assert_eq!(frame.len(), 60, "padded to the Ethernet minimum");
            }
            Some(etherparse::NetSlice::Ipv6(ip)) => {
                let h = ip.header().to_header();
                assert_eq!(tcp.checksum(), tcp.to_header().calc_checksum_ipv6(&h, tcp.payload()).unwrap());
                assert_eq!(frame.len(), 14 + 40 + 20);
            }
            _ => panic!("no IP"),
        }
        assert_eq!((r.counters().resets, r.counters().blocked), (1, 1));
    }
}

#[test]
fn window_full_without_request_line_is_undecided_and_denied_unless_allowed() {
    let mut c = cfg();
    c.window = 64;
    c.banned.clear();
    c.banned.push("example.com/bad".to_string());
    let conn = Conn::new(44_000);
    let mut long = b"GET /".to_vec();
    long.resize(100, b'a');
    let frames = vec![conn.syn(), conn.data(0, &long)];
    let mut r = Rig::new(&c);
    let out = r.send(&frames);
    assert_eq!(out[1].1, Verdict::Drop(DropReason::UrlBlocked), "fail closed by default");
    assert_eq!((r.counters().gave_up, r.counters().undecided_denied), (1, 1));
    c.undecided = Undecided::Allow;
    let mut r = Rig::new(&c);
    let out = r.send(&frames);
    assert!(passed(&out, &frames));
    assert_eq!((r.counters().gave_up, r.counters().undecided_denied), (1, 0));
}

/// Headers padded before `Host` past the window: the filter cannot see the host, so the
/// request is undecided — denied by default (it was allowed, uninspected, before).
#[test]
fn a_host_header_pushed_past_the_window_is_denied() {
    let conn = Conn::new(44_001);
    let mut req = b"GET /bad HTTP/1.1\r\n".to_vec();
    for i in 0..40 {
        req.extend_from_slice(format!("X-Pad-{i}: aaaaaaaaaaaaaaaa\r\n").as_bytes());
    }
    req.extend_from_slice(b"Host: example.com\r\n\r\n");
    assert!(req.len() > cfg().window);
    let mut r = Rig::new(&cfg());
    let out = r.send(&[conn.syn(), conn.data(0, &req)]);
    assert_eq!(out[1].1, Verdict::Drop(DropReason::UrlBlocked));
    assert_eq!((r.counters().gave_up, r.counters().undecided_denied, r.counters().allowed), (1, 1, 0));
}

/// RFC 9112 §2.2: servers skip empty lines before the request line, so the filter does too
/// (a CRLF in front made the request "not HTTP" and let it through).
#[test]
fn empty_lines_before_the_request_line_are_skipped() {
    for prefix in [&b"\r\n"[..], b"\r\n\r\n\r\n", b"\n", b"\r\n\n"] {
        let conn = Conn::new(44_100 + prefix.len() as u16);
        let mut req = prefix.to_vec();
        req.extend_from_slice(BANNED);
        let mut r = Rig::new(&cfg());
        let out = r.send(&[conn.syn(), conn.data(0, &req)]);
        assert_eq!(out[1].1, Verdict::Drop(DropReason::UrlBlocked), "{prefix:?}");
        assert_eq!((r.counters().blocked, r.counters().not_http), (1, 0));
    }
    let mut out = [0u8; 256];
    assert_eq!(analyse(b"\r\n\r\n", false, &mut out), Outcome::Wait, "only empty lines so far");
    assert_eq!(analyse(b"\r\n\r\n", true, &mut out), Outcome::GaveUp);
}

/// RFC 3986 §5.4's reference-resolution examples (base `http://a/b/c/d;p?q`), the paths of
/// the merged references: dot-segment removal must give the RFC's results (§5.4.1 normal,
/// §5.4.2 abnormal), with slashes merged on top.
#[test]
fn dot_segments_are_removed_as_rfc_3986_resolves_them() {
    let cases: [(&str, &str); 24] = [
        ("/b/c/g", "/b/c/g"),
        ("/b/c/./g", "/b/c/g"),
        ("/b/c/g/", "/b/c/g/"),
        ("/g", "/g"),
        ("/b/c/.", "/b/c/"),
        ("/b/c/./", "/b/c/"),
        ("/b/c/..", "/b/"),
        ("/b/c/../", "/b/"),
        ("/b/c/../g", "/b/g"),
        ("/b/c/../..", "/"),
        ("/b/c/../../", "/"),
        ("/b/c/../../g", "/g"),
        ("/b/c/../../../g", "/g"),
        ("/b/c/../../../../g", "/g"),
        ("/./g", "/g"),
        ("/../g", "/g"),
        ("/b/c/g.", "/b/c/g."),
        ("/b/c/.g", "/b/c/.g"),
        ("/b/c/g..", "/b/c/g.."),
        ("/b/c/..g", "/b/c/..g"),
        ("/b/c/./../g", "/b/g"),
        ("/b/c/./g/.", "/b/c/g/"),
        ("/b/c/g/./h", "/b/c/g/h"),
        ("/b/c/g/../h", "/b/c/h"),
    ];
    let mut out = [0u8; 64];
    for (path, want) in cases {
        let n = super::http::write_url(b"a", path.as_bytes(), &mut out);
        assert_eq!(core::str::from_utf8(&out[..n]), Ok(format!("a{want}").as_str()), "{path}");
    }
    // Slashes merged, percent-decoding (once), backslashes, the query kept as sent.
    for (path, want) in [
        ("//b///c", "/b/c"),
        ("/%62%61%64", "/bad"),
        ("/%2e%2E/bad", "/bad"),
        ("/x%2f..%2fbad", "/bad"),
        ("/%252e", "/%2e"),
        ("/x\\..\\bad", "/bad"),
        ("/bad%", "/bad%"),
        ("/bad%zz", "/bad%zz"),
        ("/a/../b?x=/../%41", "/b?x=/../%41"),
        ("/", "/"),
        ("", "/"),
    ] {
        let n = super::http::write_url(b"a", path.as_bytes(), &mut out);
        assert_eq!(core::str::from_utf8(&out[..n]), Ok(format!("a{want}").as_str()), "{path}");
    }
}

/// Every way of spelling a banned URL that servers resolve to it is blocked — percent-
/// encoding, dot segments, repeated slashes, backslashes, bare-LF line ends, runs of tabs and
/// spaces in the request line, absolute-form, host case and trailing dot — and spellings of
/// other paths pass. (Patterns: `example.com/bad`, `evil.org`, `shop.example.net/cart/`.)
#[test]
fn spellings_of_a_banned_url_are_blocked_and_other_paths_pass() {
    let blocked: [&[u8]; 16] = [
        b"GET /%62ad HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /b%61d/x HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET //bad HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /./bad HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /x/../bad HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /x/%2e%2e/bad HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /x%2f..%2fbad HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET \\bad HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /bad HTTP/1.1\nHost: example.com\n\n",
        b"GET\t/bad\tHTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET  /bad   HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /bad HTTP/1.1\r\nHost: EXAMPLE.com.\r\n\r\n",
        b"GET http://Example.com/x/../bad HTTP/1.1\r\nHost: other.org\r\n\r\n",
        b"GET /cart/../../cart/pay HTTP/1.1\r\nHost: shop.example.net\r\n\r\n",
        b"GET /c%61rt//pay HTTP/1.1\r\nHost: shop.example.net\r\n\r\n",
        b"GET /bad x HTTP/1.1\r\nHost: example.com\r\n\r\n",
    ];
    let passed_ok: [&[u8]; 5] = [
        b"GET /good/../good HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /bad/../good HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /%2562ad HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET /cart HTTP/1.1\nHost: shop.example.net\n\n",
        b"GET /x?/bad HTTP/1.1\r\nHost: example.com\r\n\r\n",
    ];
    for (i, req) in blocked.iter().chain(&passed_ok).enumerate() {
        let banned = i < blocked.len();
        let conn = Conn::new(44_200 + i as u16);
        let mut r = Rig::new(&cfg());
        let frames = [conn.syn(), conn.data(0, req)];
        let out = r.send(&frames);
        let shown = String::from_utf8_lossy(req).to_string();
        if banned {
            assert_eq!(out[1].1, Verdict::Drop(DropReason::UrlBlocked), "{shown}");
            assert_eq!(r.counters().blocked, 1, "{shown}");
        } else {
            assert!(passed(&out, &frames), "{shown}");
            assert_eq!((r.counters().allowed, r.counters().blocked), (1, 0), "{shown}");
        }
    }
}

/// Two Host headers naming different hosts: servers pick either, so the head is undecided
/// (denied by default); the same host twice is one host.
#[test]
fn two_different_hosts_are_undecided() {
    let mut out = [0u8; 256];
    assert_eq!(analyse(b"GET / HTTP/1.1\r\nHost: a.org\r\nHost: evil.org\r\n\r\n", false, &mut out), Outcome::NoHost);
    assert!(matches!(
        analyse(b"GET /x HTTP/1.1\r\nHost: a.org\r\nHost: A.org.\r\n\r\n", false, &mut out),
        Outcome::Url(7)
    ));
}

/// TCP in IP fragments (the first, carrying a banned request's start, and a later one):
/// dropped as `UrlFragment` by default, counted; passed uninspected with `fragments = pass`.
#[test]
fn tcp_fragments_are_dropped_unless_passed() {
    use crate::test_frames::ipv4_with;
    let tcp = Conn::new(44_900).data(0, BANNED);
    let l4 = &tcp[14 + 20..];
    let first = eth(&[], ETHERTYPE_IPV4, &ipv4_with(PROTO_TCP, &[], 0x2000, &l4[..24]));
    let later = eth(&[], ETHERTYPE_IPV4, &ipv4_with(PROTO_TCP, &[], 3, &l4[24..]));
    for (c, dropped) in [(cfg(), true), (UrlFilterConfig { fragments: Fragments::Pass, ..cfg() }, false)] {
        let mut r = Rig::new(&c);
        let frames = [first.clone(), later.clone()];
        let out = r.send(&frames);
        assert_eq!(r.counters().fragments, 2);
        if dropped {
            assert!(
                out.iter().all(|o| o.1 == Verdict::Drop(DropReason::UrlFragment)),
                "{:?}",
                out.iter().map(|o| o.1).collect::<Vec<_>>()
            );
        } else {
            assert!(passed(&out, &frames));
        }
        assert_eq!(r.counters().inspected, 0);
    }
}

/// On a port declared as HTTP (`ports`), a stream that is not an HTTP request is undecided
/// (denied by default); with no ports listed (every TCP connection inspected) it passes.
#[test]
fn not_http_on_a_listed_port_is_denied_and_elsewhere_allowed() {
    let tls = [0x16u8, 3, 1, 0, 0x20, 1, 0, 0];
    let conn = Conn::new(44_200);
    let frames = vec![conn.syn(), conn.data(0, &tls)];
    let mut c = cfg();
    c.ports = vec![80];
    let mut r = Rig::new(&c);
    let out = r.send(&frames);
    assert_eq!(out[1].1, Verdict::Drop(DropReason::UrlBlocked));
    assert_eq!((r.counters().not_http, r.counters().undecided_denied), (1, 1));
    let mut r = Rig::new(&cfg());
    let out = r.send(&frames);
    assert!(passed(&out, &frames));
    assert_eq!((r.counters().not_http, r.counters().undecided_denied), (1, 0));
}

#[test]
fn request_heads_are_read_as_rfc_9112_says() {
    let mut out = [0u8; 256];
    let mut url = |s: &[u8], full: bool| match analyse(s, full, &mut out) {
        Outcome::Url(n) => Ok(String::from_utf8(out[..n].to_vec()).unwrap()),
        o => Err(o),
    };
    assert_eq!(
        url(b"GET /a?b HTTP/1.1\r\nHost:  WWW.Example.com.:80 \r\n\r\n", false),
        Ok("www.example.com/a?b".into())
    );
    assert_eq!(url(b"GET http://u@Evil.org:81 HTTP/1.1\r\nHost: other\r\n\r\n", false), Ok("evil.org/".into()));
    assert_eq!(url(b"CONNECT evil.org:443 HTTP/1.1\r\n\r\n", false), Ok("evil.org/".into()));
    assert_eq!(url(b"OPTIONS * HTTP/1.1\r\nhost: h\r\n\r\n", false), Ok("h/".into()));
    assert_eq!(url(b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", false), Ok("[::1]/".into()));
    assert_eq!(url(b"GET / HTTP/1.0\r\nAccept: x\r\n\r\n", false), Err(Outcome::NoHost));
    assert_eq!(url(b"GET / HTTP/1.1\r\nHost: a", false), Err(Outcome::Wait));
    assert_eq!(url(b"GET / HTTP/1.1\r\nHost: a\r\nX: y", true), Ok("a/".into()));
    assert_eq!(url(b"GET / HTTP/1.1\r\nX: y", true), Err(Outcome::GaveUp));
    assert_eq!(url(b"GE", false), Err(Outcome::Wait));
    assert_eq!(url(b"\x16\x03\x01", false), Err(Outcome::NotHttp));
    assert_eq!(url(b"GET /x FTP/1\r\n", false), Err(Outcome::NotHttp));
    assert_eq!(url(&[b'A'; 40], false), Err(Outcome::NotHttp));
}

#[test]
fn config_errors_name_the_pattern() {
    let mut c = cfg();
    c.banned.push("bad host/x".to_string());
    assert_eq!(c.validate(), Err(UrlFilterConfigError::BannedByte { index: 3 }));
    c.banned[3] = "/path-only".to_string();
    assert_eq!(c.validate(), Err(UrlFilterConfigError::BannedEmpty { index: 3 }));
    c.banned[3] = "host:80/x".to_string();
    assert_eq!(c.validate(), Err(UrlFilterConfigError::BannedPort { index: 3 }));
    assert_eq!(c.validate().unwrap_err().to_string(), "urlfilter banned[3]: has a port");
    let mut c = cfg();
    c.window = 32;
    assert_eq!(c.validate(), Err(UrlFilterConfigError::Window));
    let mut c = cfg();
    c.flows = 4;
    assert_eq!(UrlFilterShared::try_new(&c).unwrap_err(), UrlFilterConfigError::Flows);
    let mut c = cfg();
    c.inspect_timeout = Duration(0);
    assert_eq!(c.validate(), Err(UrlFilterConfigError::InspectTimeout));
    let mut c = cfg();
    c.handshake_timeout = Duration(0);
    assert_eq!(c.validate(), Err(UrlFilterConfigError::HandshakeTimeout));
}

#[test]
fn write_counters_names_every_counter() {
    let r = Rig::new(&cfg());
    let mut s = String::new();
    r.nf.write_counters(&mut s).unwrap();
    assert!(s.starts_with(" urlfilter_inspected=0 urlfilter_allowed=0 urlfilter_blocked=0"));
    assert_eq!(s.matches(" urlfilter_").count(), 25);
    assert_eq!(r.nf.name(), "urlfilter");
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(96))]

    /// Any segmentation and order of the same request (with duplicates and overlaps, the SYN
    /// first) gives the same verdict.
    #[test]
    fn segmentation_and_order_do_not_change_the_verdict(
        which in 0usize..4,
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..12),
        extra in proptest::collection::vec((any::<proptest::sample::Index>(), 1usize..40), 0..6),
        order in any::<proptest::sample::Index>(),
        isn in any::<u32>(),
        v6 in any::<bool>(),
    ) {
        let requests: [(&[u8], bool); 4] = [
            (BANNED, true),
            (ALLOWED, false),
            (b"POST /cart/checkout HTTP/1.1\r\nContent-Length: 0\r\nHost: shop.example.net\r\n\r\n", true),
            (b"GET http://evil.org.example.com/ HTTP/1.1\r\nHost: evil.org\r\n\r\n", false),
        ];
        let (req, banned) = requests[which];
        let mut conn = Conn::new(45_000);
        conn.cisn = isn;
        conn.v6 = v6;
        // Segments between sorted cut points, plus overlapping copies of random ranges.
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(req.len())).collect();
        points.extend([0, req.len()]);
        points.sort_unstable();
        points.dedup();
        let mut segs: Vec<(usize, usize)> = points.windows(2).map(|w| (w[0], w[1])).collect();
        for (at, len) in &extra {
            let a = at.index(req.len());
            segs.push((a, (a + len).min(req.len())));
        }
        // A random rotation and interleaving of the segments.
        let n = segs.len();
        let k = order.index(n);
        segs.rotate_left(k);
        if k % 2 == 1 {
            segs.reverse();
        }
        let mut frames = vec![conn.syn(), conn.syn_ack()];
        frames.extend(segs.iter().map(|&(a, b)| conn.data(a, &req[a..b])));
        let mut r = Rig::new(&cfg());
        let out = r.send(&frames);
        let k = r.counters();
        prop_assert_eq!(k.blocked, u64::from(banned));
        prop_assert_eq!(k.allowed, u64::from(!banned));
        // An allowed connection keeps its slab for its next request; a blocked one does not.
        prop_assert_eq!(r.shared.slabs_in_use(Instant(r.now)), usize::from(!banned));
        if banned {
            prop_assert!(out.iter().any(|o| o.1 == Verdict::Drop(DropReason::UrlBlocked)));
        } else {
            prop_assert!(passed(&out, &frames));
        }
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(64))]

    /// Any run of requests on one connection — allowed or banned paths, no body, a
    /// `Content-Length` body or a chunked one (bodies that spell a banned request included),
    /// cut into segments anywhere, in order: the filter allows exactly the requests before the
    /// first banned one and blocks that one.
    #[test]
    fn a_connection_is_blocked_at_its_first_banned_request(
        reqs in proptest::collection::vec((any::<bool>(), 0u8..3, 0usize..300, 1usize..4), 1..5),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..10),
    ) {
        const TRAP: &[u8] = b"GET /bad HTTP/1.1\r\nHost: example.com\r\n\r\n";
        let mut stream = Vec::new();
        for &(banned, body, len, chunks) in &reqs {
            let path = if banned { "/bad/x" } else { "/good" };
            let data: Vec<u8> = TRAP.iter().copied().cycle().take(len).collect();
            let framing = match body {
                0 => String::new(),
                1 => format!("Content-Length: {}\r\n", data.len()),
                _ => "Transfer-Encoding: chunked\r\n".into(),
            };
            stream.extend_from_slice(format!("POST {path} HTTP/1.1\r\nHost: example.com\r\n{framing}\r\n").as_bytes());
            match body {
                0 => {}
                1 => stream.extend_from_slice(&data),
                _ => {
                    for c in data.chunks(data.len().div_ceil(chunks).max(1)) {
                        stream.extend_from_slice(format!("{:X}\r\n", c.len()).as_bytes());
                        stream.extend_from_slice(c);
                        stream.extend_from_slice(b"\r\n");
                    }
                    stream.extend_from_slice(b"0\r\n\r\n");
                }
            }
        }
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len())).collect();
        points.extend([0, stream.len()]);
        points.sort_unstable();
        points.dedup();
        let conn = Conn::new(48_000);
        let mut frames = vec![conn.syn(), conn.syn_ack()];
        frames.extend(points.windows(2).map(|w| conn.data(w[0], &stream[w[0]..w[1]])));
        let c = UrlFilterConfig { window: 2048, ..cfg() };
        let mut r = Rig::new(&c);
        r.send(&frames);
        let k = r.counters();
        let first_banned = reqs.iter().position(|q| q.0);
        prop_assert_eq!(k.blocked, u64::from(first_banned.is_some()), "{:?}", k);
        prop_assert_eq!(k.allowed, first_banned.unwrap_or(reqs.len()) as u64, "{:?}", k);
        prop_assert_eq!((k.unframed, k.not_http, k.undecided_denied), (0, 0, 0));
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(64))]

    /// Arbitrary segments (flags, numbers, payload bytes) never panic the filter, and what
    /// it forwards — resets included — still parses with valid checksums.
    #[test]
    fn arbitrary_segments_never_panic(
        segs in proptest::collection::vec(
            (any::<u8>(), any::<u32>(), any::<u32>(), any::<bool>(), 0u16..4, proptest::collection::vec(any::<u8>(), 0..crate::testing::miri_or(200, 40))),
            1..crate::testing::miri_or(48, 6),
        ),
        v6 in any::<bool>(),
    ) {
        let c = UrlFilterConfig { reset: true, window: 64, slabs: 2, flows: 8, ..cfg() };
        let mut r = Rig::new(&c);
        let frames: Vec<Vec<u8>> = segs
            .iter()
            .map(|(flags, seq, ack, from_client, port, data)| {
                let mut conn = Conn::new(46_000 + port);
                conn.v6 = v6;
                let mut d = data.clone();
                if data.len() % 3 == 0 {
                    d.splice(0..0, b"GET /bad HTTP/1.1\r\nHost: evil.org\r\n".iter().copied());
                }
                conn.seg(*from_client, *seq, *ack, *flags, &d)
            })
            .collect();
        for (frame, verdict, _) in r.send(&frames) {
            if let Verdict::Forward(_) = verdict {
                let p = parse(&frame).unwrap();
                let l4 = usize::from(p.l4_offset);
                let end = usize::from(p.l3_offset + p.l3_len);
                let sum = match (p.flow.src, p.flow.dst) {
                    (IpAddr::V4(s), IpAddr::V4(d)) => checksum::l4_checksum_v4(s, d, PROTO_TCP, &frame[l4..end]),
                    (IpAddr::V6(s), IpAddr::V6(d)) => checksum::l4_checksum_v6(&s, &d, PROTO_TCP, &frame[l4..end]),
                    _ => unreachable!(),
                };
                prop_assert_eq!(sum, 0);
            }
        }
    }
}

/// A flood in full batches (32 SYNs each, as a worker that was descheduled catches up) ten
/// times the table's size, 5/8 of the table live at any time: the sweep grows with the
/// batches' new flows, so expired entries never hold the capacity and no SYN finds the table
/// full (with a fixed 16 buckets per batch, a sweep of the table took a table's worth of adds
/// and this flood was refused in the thousands).
#[test]
fn a_flood_in_full_batches_never_fills_the_table() {
    let c = UrlFilterConfig { flows: 1024, handshake_timeout: Duration(200), ..cfg() };
    let mut r = Rig::new(&c);
    let mut rng = 0x1234_5678_9abc_def1u64;
    for _ in 0..320 {
        let frames: Vec<Vec<u8>> = (0..32)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let x = rng;
                let mut f = Conn::new(1024 + (x as u16 % 60_000)).syn();
                f[26..30].copy_from_slice(&[198, 18 + (x >> 20) as u8 % 2, (x >> 24) as u8, (x >> 32) as u8 | 1]);
                f[24..26].fill(0);
                let sum = checksum::checksum(&f[14..34]);
                f[24..26].copy_from_slice(&sum.to_be_bytes());
                fix_tcp_checksum(&mut f);
                f
            })
            .collect();
        r.send(&frames);
        r.now += 10;
    }
    // 640 live entries on 512 buckets: a bucket is full now and then (the hash's luck, each
    // SYN refused as the table's reason says), the capacity never.
    let k = r.counters();
    assert_eq!((k.full_capacity, k.full_busy), (0, 0), "{k:?}");
    assert_eq!(k.handshakes + k.full_bucket, 320 * 32, "{k:?}");
    assert!(k.full_bucket < 32, "{k:?}");
}

/// A request in one TCP segment over several buffers (a jumbo frame, its Host line in the
/// second buffer) is read whole — checksum over every buffer, payload across them: banned,
/// the segment is dropped (or, with `reset`, turned into a reset of the first buffer's headers
/// alone); allowed, it passes whole.
#[test]
fn a_request_over_several_buffers_is_read_whole() {
    let pad = std::format!("X-Pad: {}\r\n", "a".repeat(1200));
    let req = |path: &str| std::format!("GET {path} HTTP/1.1\r\n{pad}Host: example.com\r\n\r\n").into_bytes();
    for (path, reset, want) in [("/bad/x", false, "drop"), ("/bad/x", true, "reset"), ("/good/x", false, "pass")] {
        let cfg = UrlFilterConfig { window: 4096, reset, ..cfg() };
        let mut r = Rig::new(&cfg);
        let c = Conn::new(41_000);
        r.send(&[c.syn(), c.syn_ack()]);
        let f = c.data(0, &req(path));
        let out = r.batch_pieces(core::slice::from_ref(&f), 700);
        let k = r.counters();
        match want {
            "drop" => {
                assert_eq!(out[0].1, Verdict::Drop(DropReason::UrlBlocked), "{path}");
                assert_eq!(k.blocked, 1);
            }
            "reset" => {
                assert_eq!(out[0].1, Verdict::Forward(0), "back to the client");
                assert!(out[0].0.len() <= 60, "a reset of {} bytes: the other buffers went back", out[0].0.len());
                assert_eq!(k.resets, 1);
            }
            _ => {
                assert!(passed(&out, core::slice::from_ref(&f)), "{path}: {:?}", out[0].1);
                assert_eq!(k.allowed, 1);
            }
        }
        assert_eq!(k.discarded, 0, "the checksum over every buffer holds");
    }
}

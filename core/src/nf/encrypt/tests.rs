use super::*;
use crate::buf::{BUF_SIZE, Batch};
use crate::checksum;
use crate::nf::{Chain, Egress};
use crate::parse::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, IpAddr, L3Kind, PROTO_UDP, parse};
use crate::stage::{Stage, StageCounters};
use crate::test_frames::{eth, icmp_echo, ipv4, ipv6, tcp4, tcp6, udp, udp4};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use chacha20::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use proptest::prelude::*;

/// The RustCrypto implementation, as the reference.
type Reference = chacha20::ChaCha20;

const KEY: [u8; 32] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
    31,
];

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// RFC 8439 §2.4.2: key 00..1f, nonce 00:00:00:00:00:00:00:4a:00:00:00:00, initial block
/// counter 1, the "sunscreen" plaintext.
#[test]
fn rfc8439_2_4_2_test_vector() {
    let nonce = [0, 0, 0, 0, 0, 0, 0, 0x4a, 0, 0, 0, 0];
    let mut buf = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, \
sunscreen would be it."
        .to_vec();
    let want = hex("6e2e359a2568f98041ba0728dd0d6981 e97e7aec1d4360c20a27afccfd9fae0b f91b65c5524733ab8f593dabcd62b357
         1639d624e65152ab8f530c359f0861d8 07ca0dbf500d6a6156a38e088a22b65e 52bc514d16ccf806818ce91ab7793736
         5af90bbf74a35be6b40b8eedf2785e42 874d");
    let mut theirs = buf.clone();
    assert!(ChaCha20::new(&KEY, &nonce).apply(64, &mut buf)); // block counter 1
    assert_eq!(buf, want);
    let mut c = Reference::new(&KEY.into(), &nonce.into());
    c.try_seek(64u64).unwrap();
    c.try_apply_keystream(&mut theirs).unwrap();
    assert_eq!(theirs, want);
}

/// RFC 8439 §A.1 test vectors #1 and #2 (all-zero key and nonce, block counters 0 and 1),
/// which are also §A.2 test vector #1's ciphertext of 64 zero bytes.
#[test]
fn rfc8439_a1_block_vectors() {
    let mut ks = [0u8; 128];
    assert!(ChaCha20::new(&[0; 32], &[0; 12]).apply(0, &mut ks));
    let b0 = hex("76b8e0ada0f13d90405d6ae55386bd28 bdd219b8a08ded1aa836efcc8b770dc7
         da41597c5157488d7724e03fb8d84a37 6a43b8f41518a11cc387b669b2ee6586");
    let b1 = hex("9f07e7be5551387a98ba977c732d080d cb0f29a048e3656912c6533e32ee7aed
         29b721769ce64e43d57133b074d839d5 31ed1f28510afb45ace10a1f4b794d6f");
    assert_eq!(&ks[..64], &b0[..]);
    assert_eq!(&ks[64..], &b1[..]);
}

/// RFC 8439 §2.3.2: the block function with key 00..1f, nonce 00:00:00:09:00:00:00:4a:00:00:00:00,
/// block counter 1.
#[test]
fn rfc8439_2_3_2_block_vector() {
    let nonce = [0, 0, 0, 9, 0, 0, 0, 0x4a, 0, 0, 0, 0];
    let want = hex("10f1e7e4d13b5915500fdd1fa32071c4 c7d1f4c733c068030422aa9ac3d46c4e
         d2826446079faa0914c2d705d98b02a2 b5129cd1de164eb9cbd083e8a2503c4e");
    assert_eq!(ChaCha20::new(&KEY, &nonce).block(1).to_vec(), want);
}

#[test]
fn keystream_stops_at_the_end_of_the_counter_space() {
    let c = ChaCha20::new(&KEY, &[0; 12]);
    let mut buf = [1u8; 8];
    assert!(!c.apply((1u64 << 38) - 4, &mut buf), "would need block 2^32");
    assert_eq!(buf, [1; 8], "nothing changed");
    assert!(c.apply((1u64 << 38) - 8, &mut buf));
}

fn cfg() -> EncryptConfig {
    EncryptConfig { key: KEY, ..Default::default() }
}

fn shared(c: &EncryptConfig) -> Arc<EncryptShared> {
    Arc::new(EncryptShared::try_new(c).unwrap())
}

/// Fills in the TCP/UDP checksum of a frame built with a zero one.
fn with_l4_checksum(mut f: Vec<u8>) -> Vec<u8> {
    let p = parse(&f).unwrap();
    let (l4, end) = (usize::from(p.l4_offset), usize::from(p.l3_offset + p.l3_len));
    let at = l4 + if p.l4 == L4Kind::Tcp { 16 } else { 6 };
    f[at..at + 2].fill(0);
    let mut c = l4_sum(&f, &p);
    if p.l4 == L4Kind::Udp && c == 0 {
        // RFC 768: a computed 0 is sent as all ones (0 means "no checksum", which IPv6 does
        // not allow); the proptest below found a frame whose sum came to 0.
        c = 0xFFFF;
    }
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
    let _ = end;
    f
}

/// The checksum over the pseudo-header and segment as it stands (0 when the field is right).
fn l4_sum(f: &[u8], p: &crate::parse::Parsed) -> u16 {
    let l4 = usize::from(p.l4_offset);
    let end = if p.l4 == L4Kind::Udp {
        l4 + usize::from(u16::from_be_bytes([f[l4 + 4], f[l4 + 5]]))
    } else {
        usize::from(p.l3_offset + p.l3_len)
    };
    let seg = &f[l4..end];
    match (p.flow.src, p.flow.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => checksum::l4_checksum_v4(s, d, p.ip_proto, seg),
        (IpAddr::V6(s), IpAddr::V6(d)) => checksum::l4_checksum_v6(&s, &d, p.ip_proto, seg),
        _ => unreachable!(),
    }
}

fn checksum_ok(f: &[u8]) -> bool {
    let p = parse(f).unwrap();
    let l4 = usize::from(p.l4_offset);
    if p.l4 == L4Kind::Udp && p.l3 == L3Kind::Ipv4 && f[l4 + 6..l4 + 8] == [0, 0] {
        return true;
    }
    l4_sum(f, &p) == 0
}

fn set_tcp(mut f: Vec<u8>, seq: u32, flags: u8) -> Vec<u8> {
    let l4 = usize::from(parse(&f).unwrap().l4_offset);
    f[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
    f[l4 + 13] = flags;
    with_l4_checksum(f)
}

const EGRESS: Egress =
    Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1]], None);

/// Runs `frames` through `chain` (received on port 0); returns what left on port 1, with the
/// stage counters.
fn through(chain: &mut Chain, frames: &[Vec<u8>]) -> (Vec<Vec<u8>>, StageCounters) {
    let mut mem = vec![0u8; 64 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();
    let mut sent = Vec::new();
    let mut counters = StageCounters::default();
    for chunk in frames.chunks(32) {
        let mut input = Batch::new();
        for f in chunk {
            let b = pool.alloc().unwrap();
            pool.set_len(b, f.len()).unwrap();
            pool.frame_mut(b).copy_from_slice(f);
            input.push(b).unwrap();
        }
        let mut out = [const { Batch::new() }; crate::stage::PORTS];
        chain.process(0, &mut pool, &mut input, &mut out, &mut counters, Instant(5));
        sent.extend(out[1].as_slice().iter().map(|&b| pool.frame(b).to_vec()));
        for q in &mut out {
            pool.free_batch(q);
        }
    }
    assert_eq!(pool.in_use(), 0);
    (sent, counters)
}

fn chain(c: &EncryptConfig) -> Chain {
    Chain::new(vec![Box::new(Encrypt::new(shared(c)))], EGRESS)
}

fn payload(f: &[u8]) -> &[u8] {
    let p = parse(f).unwrap();
    &f[usize::from(p.payload_offset)..usize::from(p.payload_offset + p.payload_len)]
}

fn sample_frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    // Under Miri the keystream block boundaries only (ChaCha20 is slow to interpret).
    let lens: &[usize] = if crate::testing::MIRI { &[1, 63, 64, 65] } else { &[1, 2, 3, 63, 64, 65, 200, 1001] };
    for &len in lens {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        v.push(set_tcp(tcp4(1234, 80, &data), 1000 + len as u32, 0x18));
        v.push(set_tcp(tcp6(1234, 443, &data), 0xFFFF_FFF0, 0x18));
        v.push(with_l4_checksum(udp4(5000, 53, &data)));
        v.push(with_l4_checksum(eth(&[], ETHERTYPE_IPV6, &ipv6(PROTO_UDP, &udp(5000, 53, &data)))));
        v.push(udp4(6000, 53, &data)); // UDP over IPv4 without a checksum
    }
    // The same UDP flow again: the second datagram uses another nonce.
    v.push(with_l4_checksum(udp4(5000, 53, b"again")));
    v
}

#[test]
fn encrypt_then_decrypt_restores_every_payload() {
    let frames = sample_frames();
    let c = cfg();
    let (enc, k1) = through(&mut chain(&c), &frames);
    assert_eq!(enc.len(), frames.len());
    assert_eq!(k1.drops_total(), 0);
    for (e, f) in enc.iter().zip(&frames) {
        assert_eq!(e[12..payload_offset(f)], f[12..payload_offset(f)], "headers other than the checksum keep");
        assert_ne!(payload(e), payload(f), "payload is encrypted");
        assert!(checksum_ok(e), "valid checksum after encryption");
    }
    let (dec, _) = through(&mut chain(&c), &enc);
    for (d, f) in dec.iter().zip(&frames) {
        assert_eq!(d[12..], f[12..], "byte-exact after decryption, checksum included");
    }
}

fn payload_offset(f: &[u8]) -> usize {
    let p = parse(f).unwrap();
    // Everything before the checksum field is untouched.
    usize::from(p.l4_offset) + if p.l4 == L4Kind::Tcp { 16 } else { 6 }
}

#[test]
fn tcp_keystream_is_positioned_by_sequence_number() {
    let c = cfg();
    let s = shared(&c);
    let data = vec![0u8; 100];
    let f = set_tcp(tcp4(1234, 80, &data), 5000, 0x18);
    let (enc, _) = through(&mut Chain::new(vec![Box::new(Encrypt::new(s.clone()))], EGRESS), std::slice::from_ref(&f));
    let p = parse(&f).unwrap();
    let fl = p.flow;
    let id = s.flow_id(&fl.words());
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(&id.to_be_bytes());
    let mut ks = vec![0u8; 100];
    let mut cipher = Reference::new(&KEY.into(), &nonce.into());
    cipher.try_seek(5000u64).unwrap();
    cipher.try_apply_keystream(&mut ks).unwrap();
    assert_eq!(payload(&enc[0]), &ks[..]);
}

#[test]
fn resegmented_tcp_decrypts_across_the_sequence_wrap() {
    let c = cfg();
    let data: Vec<u8> = (0..120u8).collect();
    let base = u32::MAX - 49; // bytes 50.. sit past the wrap
    let whole = set_tcp(tcp4(40000, 80, &data), base, 0x18);
    let (enc, _) = through(&mut chain(&c), &[whole]);
    let ct = payload(&enc[0]).to_vec();
    // Cut the ciphertext into three differently placed segments (one with SYN: its data
    // starts at seq + 1) and decrypt each on its own.
    let parts = [(0usize, 30usize, 0x18u8), (30, 75, 0x18), (75, 120, 0x18)];
    let mut frames = Vec::new();
    for (a, b, fl) in parts {
        frames.push(set_tcp(tcp4(40000, 80, &ct[a..b]), base.wrapping_add(a as u32), fl));
    }
    let syn_seq = base.wrapping_add(10).wrapping_sub(1);
    frames.push(set_tcp(tcp4(40000, 80, &ct[10..20]), syn_seq, 0x02));
    let (dec, _) = through(&mut chain(&c), &frames);
    let mut got: Vec<u8> = dec[..3].iter().flat_map(|f| payload(f).to_vec()).collect();
    assert_eq!(got, data);
    got = payload(&dec[3]).to_vec();
    assert_eq!(got, data[10..20]);
    assert!(dec.iter().all(|f| checksum_ok(f)));
}

#[test]
fn empty_payloads_and_other_protocols_pass_untouched() {
    let frames = vec![
        set_tcp(tcp4(1, 2, b""), 77, 0x02),
        with_l4_checksum(udp4(1, 2, b"")),
        eth(&[], ETHERTYPE_IPV4, &ipv4(crate::parse::PROTO_ICMP, &icmp_echo(b"ping"))),
    ];
    let c = cfg();
    let mut e = Encrypt::new(shared(&c));
    let mut ch = Chain::new(Vec::new(), EGRESS);
    let (plain, _) = through(&mut ch, &frames);
    let mut only = Chain::new(vec![Box::new(Encrypt::new(shared(&c)))], EGRESS);
    let (out, k) = through(&mut only, &frames);
    assert_eq!(out, plain, "byte-identical to an empty chain's output");
    assert_eq!(k.drops_total(), 0);
    // The counters of an instance that saw them.
    run_nf(&mut e, &frames);
    assert_eq!((e.counters().empty, e.counters().clear_passed), (2, 1));
    let mut s = String::new();
    e.write_counters(&mut s).unwrap();
    assert!(s.starts_with(" encrypt_tcp=0 encrypt_udp=0 encrypt_bytes=0 encrypt_empty=2 encrypt_clear_passed=1"));
}

fn run_nf(nf: &mut Encrypt, frames: &[Vec<u8>]) -> Vec<Verdict> {
    let mut mem = vec![0u8; 64 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();
    let mut batch = NfBatch::new();
    for f in frames {
        let b = pool.alloc().unwrap();
        pool.set_len(b, f.len()).unwrap();
        pool.frame_mut(b).copy_from_slice(f);
        let parsed = parse(f).unwrap();
        batch
            .push(crate::nf::Pkt {
                buf: b,
                parsed,
                ingress: 0,
                vid: 0,
                verdict: Verdict::Forward(1),
                dst: crate::nf::Dst::Peer,
            })
            .unwrap();
    }
    nf.process(&NfCtx { now: Instant(1) }, &mut pool, &mut batch);
    batch.pkts().iter().map(|p| p.verdict).collect()
}

#[test]
fn clear_policy_drop_and_udp_table_full() {
    let mut c = cfg();
    c.clear = ClearPolicy::Drop;
    c.udp_flows = 1;
    let mut e = Encrypt::new(shared(&c));
    let frames = vec![
        eth(&[], ETHERTYPE_IPV4, &ipv4(crate::parse::PROTO_ICMP, &icmp_echo(b"ping"))),
        udp4(1, 2, b"first flow"),
        udp4(1, 2, b"first flow again"),
        udp4(3, 4, b"second flow: no room"),
    ];
    let v = run_nf(&mut e, &frames);
    assert_eq!(
        v,
        [
            Verdict::Drop(DropReason::NfUnsupported),
            Verdict::Forward(1),
            Verdict::Forward(1),
            Verdict::Drop(DropReason::FlowTableFull)
        ]
    );
    assert_eq!((e.counters().clear_dropped, e.counters().flow_table_full, e.counters().udp), (1, 1, 2));
}

#[test]
fn config_is_validated() {
    assert_eq!(EncryptConfig::default().validate(), Err(EncryptConfigError::ZeroKey));
    let mut c = cfg();
    c.udp_flows = 0;
    assert_eq!(EncryptShared::try_new(&c).unwrap_err(), EncryptConfigError::UdpFlows);
    let mut c = cfg();
    c.udp_idle_timeout = Duration(0);
    assert_eq!(c.validate(), Err(EncryptConfigError::UdpIdleTimeout));
    assert_eq!(EncryptConfigError::ZeroKey.to_string(), "encrypt key: all zeros");
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(64))]

    #[test]
    fn keystream_matches_the_reference_crate(
        key in any::<[u8; 32]>(),
        nonce in any::<[u8; 12]>(),
        pos in 0u64..(1 << 33),
        len in 0usize..300,
    ) {
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut ours = data.clone();
        prop_assert!(ChaCha20::new(&key, &nonce).apply(pos, &mut ours));
        let mut theirs = data;
        let mut c = Reference::new(&key.into(), &nonce.into());
        c.try_seek(pos).unwrap();
        c.try_apply_keystream(&mut theirs).unwrap();
        prop_assert_eq!(ours, theirs);
    }

    #[test]
    fn round_trip_restores_random_packets(
        pkts in proptest::collection::vec(
            (any::<bool>(), any::<bool>(), any::<u16>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..crate::testing::miri_or(300, 40))),
            1..crate::testing::miri_or(40, 4),
        ),
        key in any::<[u8; 32]>().prop_filter("nonzero", |k| *k != [0; 32]),
    ) {
        let frames: Vec<Vec<u8>> = pkts
            .iter()
            .map(|(is_tcp, v6, port, seq, data)| match (is_tcp, v6) {
                (true, false) => set_tcp(tcp4(*port, 80, data), *seq, 0x18),
                (true, true) => set_tcp(tcp6(*port, 80, data), *seq, 0x10),
                (false, false) => with_l4_checksum(udp4(*port, 53, data)),
                (false, true) => with_l4_checksum(eth(&[], ETHERTYPE_IPV6, &ipv6(PROTO_UDP, &udp(*port, 53, data)))),
            })
            .collect();
        let mut c = cfg();
        c.key = key;
        let (enc, _) = through(&mut chain(&c), &frames);
        prop_assert!(enc.iter().all(|f| checksum_ok(f)));
        let (dec, _) = through(&mut chain(&c), &enc);
        prop_assert_eq!(dec.len(), frames.len());
        for (d, f) in dec.iter().zip(&frames) {
            prop_assert_eq!(&d[12..], &f[12..]);
        }
    }
}

/// Runs `frame` through `chain` held over buffers of the `pieces` lengths (the last takes the
/// rest; the first holds every header), as a NIC hands a jumbo frame over; returns the frame
/// that left on port 1, in one piece.
fn through_pieces(chain: &mut Chain, frame: &[u8], pieces: &[usize]) -> Vec<u8> {
    let mut mem = vec![0u8; 64 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();
    let (mut at, mut head) = (0, None);
    for (i, &n) in pieces.iter().enumerate() {
        let n = if i + 1 == pieces.len() { frame.len() - at } else { n };
        assert!(n <= crate::buf::MAX_FRAME, "piece {i} of {n} bytes, frame {}", frame.len());
        let b = pool.alloc().unwrap();
        pool.set_len(b, n).unwrap();
        pool.frame_mut(b).copy_from_slice(&frame[at..at + n]);
        at += n;
        match head {
            None => head = Some(b),
            Some(h) => pool.append_segment(h, b).unwrap(),
        }
    }
    let mut input = Batch::new();
    input.push(head.unwrap()).unwrap();
    let mut out = [const { Batch::new() }; crate::stage::PORTS];
    let mut counters = StageCounters::default();
    chain.process(0, &mut pool, &mut input, &mut out, &mut counters, Instant(5));
    assert_eq!((out[1].len(), counters.drops_total()), (1, 0), "{counters:?}");
    let b = out[1].as_slice()[0];
    let mut v = vec![0u8; pool.frame_len(b)];
    assert_eq!(pool.copy_frame(b, &mut v), Some(v.len()));
    for q in &mut out {
        pool.free_batch(q);
    }
    assert_eq!((pool.in_use(), pool.double_frees()), (0, 0));
    v
}

/// A payload over several buffers (a jumbo frame) is transformed exactly as in one piece:
/// the keystream goes on across the buffers (through the sequence-space wrap for TCP), the
/// checksum is patched right whatever the pieces' lengths (odd ones too), the same bytes come
/// out for two different cuts, the TCP keystream is the reference crate's at the segment's
/// sequence number, and a second pass restores the frame.
#[test]
fn jumbo_payloads_over_several_buffers_are_transformed_as_in_one_piece() {
    let c = cfg();
    let data: Vec<u8> = (0..5000usize).map(|i| (i * 13 + 7) as u8).collect();
    let base = u32::MAX - 2500; // the wrap falls inside the second buffer
    let frames = [
        set_tcp(tcp4(40000, 80, &data), base, 0x18),
        set_tcp(tcp6(40001, 443, &data), 77, 0x18),
        with_l4_checksum(udp4(5000, 53, &data)),
    ];
    for f in &frames {
        let a = through_pieces(&mut chain(&c), f, &[1984, 1984, 0]);
        let b = through_pieces(&mut chain(&c), f, &[1001, 997, 1333, 7, 0]);
        assert_eq!(a, b, "two cuts, the same bytes");
        assert_ne!(payload(&a), payload(f), "payload is encrypted");
        assert_eq!(a[12..payload_offset(f)], f[12..payload_offset(f)], "headers other than the checksum keep");
        assert!(checksum_ok(&a), "valid checksum after encryption");
        let back = through_pieces(&mut chain(&c), &a, &[1500, 1984, 0]);
        assert_eq!(back[12..], f[12..], "byte-exact after decryption");
    }
    // TCP: the reference keystream from the sequence number, restarting at 0 past the wrap.
    let s = shared(&c);
    let a = through_pieces(
        &mut Chain::new(vec![Box::new(Encrypt::new(s.clone()))], EGRESS),
        &frames[0],
        &[1001, 1984, 1984, 0],
    );
    let id = s.flow_id(&parse(&frames[0]).unwrap().flow.words());
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(&id.to_be_bytes());
    let mut ks = vec![0u8; data.len()];
    let split = (u64::from(u32::MAX) - u64::from(base) + 1) as usize;
    let mut cipher = Reference::new(&KEY.into(), &nonce.into());
    cipher.try_seek(u64::from(base)).unwrap();
    cipher.try_apply_keystream(&mut ks[..split]).unwrap();
    let mut cipher = Reference::new(&KEY.into(), &nonce.into());
    cipher.try_apply_keystream(&mut ks[split..]).unwrap();
    let got: Vec<u8> = payload(&a).iter().zip(&data).map(|(x, y)| x ^ y).collect();
    assert_eq!(got, ks);
}

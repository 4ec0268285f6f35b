use proptest::prelude::*;
use std::vec::Vec;

use super::*;

const KEY: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
const NONCE: u64 = 0x0123_4567_89ab_cdef;

#[test]
fn siphash_matches_the_papers_vectors() {
    // Appendix A of the SipHash paper: key 00..0f, message 00..0e.
    let msg: Vec<u8> = (0u8..15).collect();
    assert_eq!(siphash24(&KEY, &msg), 0xa129_ca61_49be_45e5);
    // The reference implementation's vectors.h, first entry (empty message).
    assert_eq!(siphash24(&KEY, &[]), 0x726f_db47_dd0e_0e31);
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]
    /// Any key, any message up to 100 bytes: the same as an independent implementation.
    #[test]
    fn siphash_agrees_with_the_siphasher_crate(key in any::<[u8; 16]>(), msg in proptest::collection::vec(any::<u8>(), 0..100)) {
        use core::hash::Hasher;
        let mut h = siphasher::sip::SipHasher24::new_with_key(&key);
        h.write(&msg);
        prop_assert_eq!(siphash24(&key, &msg), h.finish());
    }
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&CONTROL_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize(f.len().max(60), 0);
    f
}

#[test]
fn a_signed_frame_on_the_control_port_is_obeyed_once() {
    let auth = ControlAuth::new(0, KEY, NONCE);
    let stop = frame(&signed_payload(&KEY, NONCE, 1, Command::Stop));
    assert_eq!(parse_control(&stop).map(|f| (f.counter, f.command)), Some((1, Command::Stop)));
    assert_eq!(auth.check(0, &stop), Ok(Command::Stop));
    // The same frame again is a replay; so is any lower counter.
    assert_eq!(auth.check(0, &stop), Err(Rejected::Replayed));
    // A copy shares the counter (every worker has one).
    let other = auth.clone();
    assert_eq!(other.check(0, &stop), Err(Rejected::Replayed));
    let mv = frame(&signed_payload(&KEY, NONCE, 7, Command::RssMove { from: 1, to: 0 }));
    assert_eq!(other.check(0, &mv), Ok(Command::RssMove { from: 1, to: 0 }));
    let stats = frame(&signed_payload(&KEY, NONCE, 5, Command::Stats));
    assert_eq!(auth.check(0, &stats), Err(Rejected::Replayed), "counters only go up");
    let restore = frame(&signed_payload(&KEY, NONCE, 8, Command::RssRestore));
    assert_eq!(auth.check(0, &restore), Ok(Command::RssRestore));
}

#[test]
fn anything_else_is_rejected_with_its_reason() {
    let auth = ControlAuth::new(1, KEY, NONCE);
    let good = frame(&signed_payload(&KEY, NONCE, 1, Command::Stop));
    assert_eq!(auth.check(0, &good), Err(Rejected::WrongPort));
    // Another key.
    let mut other_key = KEY;
    other_key[3] ^= 1;
    assert_eq!(auth.check(1, &frame(&signed_payload(&other_key, NONCE, 2, Command::Stop))), Err(Rejected::BadTag));
    // A flipped bit anywhere in the signed part or the tag.
    let p = signed_payload(&KEY, NONCE, 3, Command::Stats);
    for i in 0..p.len() {
        let mut q = p.clone();
        q[i] ^= 0x10;
        let r = auth.check(1, &frame(&q));
        assert!(matches!(r, Err(Rejected::BadTag | Rejected::Malformed)), "byte {i}: {r:?}");
    }
    // The old unsigned format (magic + command byte) and a truncated frame.
    let mut old = CONTROL_MAGIC.to_vec();
    old.push(1);
    assert_eq!(auth.check(1, &frame(&old)), Err(Rejected::Malformed));
    let full = frame(&signed_payload(&KEY, NONCE, 4, Command::Stop));
    assert_eq!(auth.check(1, &full[..14 + 20]), Err(Rejected::Malformed));
    // None of that moved the counter: the good frame still works.
    assert_eq!(auth.check(1, &good), Ok(Command::Stop));
}

/// A frame signed for another boot (or another instance: same key, another nonce) is refused
/// whatever its counter — a STOP captured before a restart stops nothing after it — and the
/// first format (`CADENCE!`, no nonce) is malformed.
#[test]
fn a_frame_signed_for_another_boot_or_instance_is_refused() {
    let before_restart = ControlAuth::new(0, KEY, NONCE);
    let captured = frame(&signed_payload(&KEY, NONCE, 1_000, Command::Stop));
    assert_eq!(before_restart.check(0, &captured), Ok(Command::Stop));
    // The restart: a fresh counter (it lives in RAM) and a fresh nonce.
    let after_restart = ControlAuth::new(0, KEY, NONCE ^ 0x8000_0000_0000_0001);
    assert_eq!(after_restart.check(0, &captured), Err(Rejected::OtherBoot));
    assert_eq!(after_restart.nonce(), NONCE ^ 0x8000_0000_0000_0001);
    // Its own frames still work, from any counter.
    let own = frame(&signed_payload(&KEY, after_restart.nonce(), 1, Command::Stop));
    assert_eq!(after_restart.check(0, &own), Ok(Command::Stop));
    // The nonce is in the signed bytes: changing it in a captured frame breaks the tag.
    let mut edited = captured.clone();
    edited[14 + 8..14 + 16].copy_from_slice(&after_restart.nonce().to_be_bytes());
    assert_eq!(ControlAuth::new(0, KEY, after_restart.nonce()).check(0, &edited), Err(Rejected::BadTag));
    // The first format: magic `CADENCE!`, counter, command, tag.
    let mut v1 = b"CADENCE!".to_vec();
    v1.extend_from_slice(&5u64.to_be_bytes());
    v1.push(1);
    let tag = siphash24(&KEY, &v1);
    v1.extend_from_slice(&tag.to_be_bytes());
    assert_eq!(after_restart.check(0, &frame(&v1)), Err(Rejected::Malformed));
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]
    /// Arbitrary bytes after the EtherType never panic and are never obeyed.
    #[test]
    fn arbitrary_payloads_are_never_obeyed(payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let auth = ControlAuth::new(0, KEY, NONCE);
        prop_assert!(auth.check(0, &frame(&payload)).is_err());
    }
}

#[test]
fn control_frames_parse() {
    use crate::control::{parse_control, signed_payload};
    use crate::parse::TPID_8021Q;
    use crate::test_frames::{CTL_KEY, control, eth, udp4};
    let cmd = |f: &[u8]| parse_control(f).map(|c| c.command);
    assert_eq!(cmd(&control(1)), Some(Command::Stop));
    assert_eq!(cmd(&control(2)), Some(Command::Stats));
    let p = signed_payload(&CTL_KEY, crate::test_frames::CTL_NONCE, 9, Command::RssMove { from: 1, to: 2 });
    assert_eq!(cmd(&eth(&[], CONTROL_ETHERTYPE, &p)), Some(Command::RssMove { from: 1, to: 2 }));
    assert_eq!(cmd(&control(9)), None, "unknown command byte");
    assert_eq!(cmd(&control(1)[..22]), None);
    let mut bad = control(1);
    bad[14] = b'X';
    assert_eq!(cmd(&bad), None);
    let p = signed_payload(&CTL_KEY, crate::test_frames::CTL_NONCE, 10, Command::Stats);
    assert_eq!(cmd(&eth(&[(TPID_8021Q, 5)], CONTROL_ETHERTYPE, &p)), Some(Command::Stats));
    assert_eq!(cmd(&udp4(1, 2, &[])), None);
}

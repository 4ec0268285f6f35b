//! Host-only cross-check of the two sides of the protocol: the frames `xtask` generates,
//! its malformed frames and its control frames, run through `cadence-core`'s parser and
//! control-frame reader. A disagreement here would make the QEMU tests fail for the
//! wrong reason.

use cadence_core::control::{Command, ControlAuth, Rejected, parse_control};
use cadence_core::drops::DropReason;
use cadence_core::parse::parse;
use cadence_harness::protocol::{Control, control_frame, unsigned_control_frame};
use cadence_harness::traffic::malformed::Malformed;
use cadence_harness::traffic::{Checker, Flow, Macs};

#[test]
fn generated_frames_parse() {
    let mut c = Checker::new(Flow::standard_set(8), Macs::DEFAULT, std::time::Instant::now());
    for i in 0..2000usize {
        let (_, f) = c.next_frame((i % 8) as u16, 60 + i * 149 % 1455).expect("flow");
        assert!(parse(&f).is_ok(), "frame {i} ({} B): {:?}", f.len(), parse(&f).err());
        assert!(parse_control(&f).is_none());
    }
}

#[test]
fn malformed_frames_are_rejected_for_their_reason() {
    let m = Macs::DEFAULT;
    for (i, kind) in Malformed::ALL.iter().enumerate() {
        let f = kind.build(m.nic[0], m.peer[0], i as u32);
        let got = parse(&f).map(|_| ()).map_err(|e| DropReason::from(e).as_str());
        assert_eq!(got, Err(kind.reason()), "{kind:?}");
    }
}

#[test]
fn control_frames_are_understood_and_authenticated() {
    // xtask signs with the `siphasher` crate, the image checks with its own SipHash: the two
    // must agree, and the image must refuse what is not signed with its key.
    let m = Macs::DEFAULT;
    let key = *b"0123456789abcdef";
    let nonce = 0x1122_3344_5566_7788;
    let auth = ControlAuth::new(0, key, nonce);
    let f = |cmd, counter| control_frame(m.nic[0], m.peer[0], cmd, &key, nonce, counter);
    assert_eq!(parse_control(&f(Control::Stop, 1)).map(|c| (c.counter, c.command)), Some((1, Command::Stop)));
    assert_eq!(auth.check(0, &f(Control::Stats, 2)), Ok(Command::Stats));
    assert_eq!(auth.check(0, &f(Control::RssMove { from: 3, to: 1 }, 3)), Ok(Command::RssMove { from: 3, to: 1 }));
    assert_eq!(auth.check(0, &f(Control::RssRestore, 4)), Ok(Command::RssRestore));
    assert_eq!(auth.check(0, &f(Control::Stop, 4)), Err(Rejected::Replayed));
    assert_eq!(auth.check(1, &f(Control::Stop, 5)), Err(Rejected::WrongPort));
    let other = control_frame(m.nic[0], m.peer[0], Control::Stop, b"fedcba9876543210", nonce, 6);
    assert_eq!(auth.check(0, &other), Err(Rejected::BadTag));
    let other_boot = control_frame(m.nic[0], m.peer[0], Control::Stop, &key, nonce + 1, 6);
    assert_eq!(auth.check(0, &other_boot), Err(Rejected::OtherBoot));
    assert_eq!(auth.check(0, &unsigned_control_frame(m.nic[0], m.peer[0], Control::Stop)), Err(Rejected::Malformed));
    assert_eq!(auth.check(0, &f(Control::Stop, 7)), Ok(Command::Stop));
}

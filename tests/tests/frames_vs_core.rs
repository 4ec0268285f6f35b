//! Host-only cross-check of the two sides of the protocol: the frames `xtask` generates,
//! its malformed frames and its control frames, run through `cadence-core`'s parser and
//! control-frame reader. A disagreement here would make the QEMU tests fail for the
//! wrong reason.

use cadence_core::forward::{Command, DropReason, parse_control};
use cadence_core::parse::parse;
use xtask::protocol::{Control, control_frame};
use xtask::traffic::malformed::Malformed;
use xtask::traffic::{Checker, Flow, Macs};

#[test]
fn generated_frames_parse() {
    let mut c = Checker::new(Flow::standard_set(8), Macs::DEFAULT, std::time::Instant::now());
    for i in 0..2000usize {
        let (_, f) = c.next_frame((i % 8) as u16, 60 + i * 149 % 1455).expect("flow");
        assert!(parse(&f).is_ok(), "frame {i} ({} B): {:?}", f.len(), parse(&f).err());
        assert_eq!(parse_control(&f), None);
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
fn control_frames_are_understood() {
    let m = Macs::DEFAULT;
    assert_eq!(parse_control(&control_frame(m.nic[0], m.peer[0], Control::Stop)), Some(Command::Stop));
    assert_eq!(parse_control(&control_frame(m.nic[1], m.peer[1], Control::Stats)), Some(Command::Stats));
    assert_eq!(
        parse_control(&xtask::protocol::rss_move_frame(m.nic[0], m.peer[0], 3, 1)),
        Some(Command::RssMove { from: 3, to: 1 })
    );
}

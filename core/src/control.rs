//! Control frames (docs/PROTOCOL.md, "Control frames"): the commands a host sends the
//! dataplane in-band, and who may send them.
//!
//! A control frame is an Ethernet frame with EtherType 0x88B5 whose payload is
//!
//! ```text
//! "CADENCE2" (8) | boot nonce: u64 BE (8) | counter: u64 BE (8) | command byte (+ argument bytes) | tag: u64 BE (8)
//! ```
//!
//! `tag` is SipHash-2-4 (Aumasson & Bernstein 2012) under the 128-bit key given at boot
//! (`ctl_key=`) over everything before it, from the magic to the last argument byte. A frame
//! is accepted only when it arrives on the control port given at boot (`ctl=port:N`), its
//! tag is right, it names this boot's nonce, and its counter is above every counter accepted
//! before (one counter for the whole dataplane, shared by every worker).
//!
//! **Why a boot nonce.** The counter alone lives in RAM and starts from 0 at every boot, and
//! nothing else in the signed bytes says which dataplane the frame is for: a STOP captured
//! once would stop the dataplane again after every restart, and any other instance that
//! shares the key. So each boot draws a 64-bit nonce (the platform's: RDRAND mixed with the
//! TSC and the real-time clock on bare metal, `getrandom(2)` hosted), announces it on
//! `@ready` (`ctl_nonce=`), and accepts only frames signed over it: a frame of another boot
//! or another instance fails, whatever its counter ([`Rejected::OtherBoot`]). The nonce is
//! not secret — the key is — only fresh; a sender reads it from `@ready` (the rig does) and
//! starts its counter anywhere. Other designs weighed: a persistent counter needs storage the
//! image does not have; binding to the destination MAC and an instance id stops
//! cross-instance replays but not replays across restarts of the same one.
//!
//! Everything else with EtherType 0x88B5 is dropped and counted as
//! [`DropReason::CtlRejected`](crate::drops::DropReason::CtlRejected); with control off
//! (`ctl=off`) such frames are `unsupported_ethertype`, like any other unknown EtherType.

use alloc::sync::Arc;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::parse;

/// EtherType of Cadence control frames (IEEE 802 local experimental 1).
pub const CONTROL_ETHERTYPE: u16 = 0x88B5;
/// The 8 bytes that open a control frame's payload (the `2`: the format with a boot nonce;
/// the first format, `CADENCE!` without one, is refused as malformed).
pub const CONTROL_MAGIC: [u8; 8] = *b"CADENCE2";
/// Bytes of the authentication tag at the end of the signed part.
pub const TAG_LEN: usize = 8;

/// A command carried by a control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Command {
    /// Byte 0x01: flush TX, print `@summary`, stop.
    Stop,
    /// Byte 0x02: print one `@stats` line now.
    Stats,
    /// Byte 0x03 followed by two bytes `from`, `to`: steer every RSS bucket of receive
    /// queue `from` to queue `to`, live (the old queue is drained past the switch before
    /// the new one serves those buckets).
    RssMove {
        /// The queue that gives up its buckets.
        from: u8,
        /// The queue that takes them.
        to: u8,
    },
    /// Byte 0x04: undo the last RSS_MOVE (its buckets go back, with the same drain).
    RssRestore,
}

impl Command {
    /// The command of a command byte and its argument bytes, if they name one; and how
    /// many bytes it took.
    pub fn from_bytes(bytes: &[u8]) -> Option<(Self, usize)> {
        match *bytes {
            [1, ..] => Some((Command::Stop, 1)),
            [2, ..] => Some((Command::Stats, 1)),
            [3, from, to, ..] => Some((Command::RssMove { from, to }, 3)),
            [4, ..] => Some((Command::RssRestore, 1)),
            _ => None,
        }
    }

    /// The command byte and its arguments (at most 3 bytes; the rest of the array is 0).
    pub fn to_bytes(self) -> ([u8; 3], usize) {
        match self {
            Command::Stop => ([1, 0, 0], 1),
            Command::Stats => ([2, 0, 0], 1),
            Command::RssMove { from, to } => ([3, from, to], 3),
            Command::RssRestore => ([4, 0, 0], 1),
        }
    }
}

/// The control commands seen while processing (reported up to the firmware).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Commands {
    /// A STOP frame was seen.
    pub stop: bool,
    /// STATS frames seen (one `@stats` line each).
    pub stats: u32,
    /// The last RSS_MOVE seen (`from`, `to`).
    pub rss_move: Option<(u8, u8)>,
    /// An RSS_RESTORE was seen.
    pub rss_restore: bool,
}

impl Commands {
    /// Notes one command.
    pub fn record(&mut self, c: Command) {
        match c {
            Command::Stop => self.stop = true,
            Command::Stats => self.stats = self.stats.saturating_add(1),
            Command::RssMove { from, to } => self.rss_move = Some((from, to)),
            Command::RssRestore => self.rss_restore = true,
        }
    }

    /// Adds the commands of `other`.
    pub fn merge(&mut self, other: Commands) {
        self.stop |= other.stop;
        self.stats = self.stats.saturating_add(other.stats);
        self.rss_move = other.rss_move.or(self.rss_move);
        self.rss_restore |= other.rss_restore;
    }

    /// Whether no command was seen.
    pub fn is_empty(&self) -> bool {
        !self.stop && self.stats == 0 && self.rss_move.is_none() && !self.rss_restore
    }
}

/// A control frame whose format is right (its tag not checked yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlFrame<'a> {
    /// The boot nonce the sender signed for.
    pub nonce: u64,
    /// The sender's counter.
    pub counter: u64,
    /// The command.
    pub command: Command,
    /// The tag the frame carries.
    pub tag: u64,
    /// The signed bytes (magic through the last argument byte).
    pub signed: &'a [u8],
}

/// The control frame in `frame`: EtherType 0x88B5 (after any VLAN tags), the magic, a
/// counter, a known command and a tag. `None` if the format is wrong. No check of who
/// sent it: see [`ControlAuth::check`].
pub fn parse_control(frame: &[u8]) -> Option<ControlFrame<'_>> {
    let l2 = parse::parse_l2(frame).ok()?;
    if l2.ethertype != CONTROL_ETHERTYPE {
        return None;
    }
    let payload = frame.get(usize::from(l2.len)..)?;
    if payload.get(..CONTROL_MAGIC.len())? != CONTROL_MAGIC {
        return None;
    }
    let nonce = u64::from_be_bytes(payload.get(8..16)?.try_into().ok()?);
    let counter = u64::from_be_bytes(payload.get(16..24)?.try_into().ok()?);
    let (command, n) = Command::from_bytes(payload.get(24..)?)?;
    let end = 24 + n;
    let tag = u64::from_be_bytes(payload.get(end..end + TAG_LEN)?.try_into().ok()?);
    Some(ControlFrame { nonce, counter, command, tag, signed: payload.get(..end)? })
}

/// The payload of a control frame (everything after the EtherType) for `command` with
/// `counter`, for the boot whose nonce is `nonce`, signed under `key`: what a sender puts
/// after the Ethernet header.
pub fn signed_payload(key: &[u8; 16], nonce: u64, counter: u64, command: Command) -> heapless::Vec<u8, 48> {
    let mut p: heapless::Vec<u8, 48> = heapless::Vec::new();
    let (cmd, n) = command.to_bytes();
    // Cannot fail: 8 + 8 + 8 + 3 + 8 < 48.
    let _ = p.extend_from_slice(&CONTROL_MAGIC);
    let _ = p.extend_from_slice(&nonce.to_be_bytes());
    let _ = p.extend_from_slice(&counter.to_be_bytes());
    let _ = p.extend_from_slice(&cmd[..n]);
    let tag = siphash24(key, &p);
    let _ = p.extend_from_slice(&tag.to_be_bytes());
    p
}

/// Why a control frame was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Rejected {
    /// It arrived on a port that is not the control port.
    WrongPort,
    /// Its format is wrong (truncated, unknown command).
    Malformed,
    /// Its tag does not match.
    BadTag,
    /// Signed for another boot or another instance (its nonce is not this boot's).
    OtherBoot,
    /// Its counter is not above the last accepted one (a replay, or out of order).
    Replayed,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rejected::WrongPort => "not on the control port",
            Rejected::Malformed => "malformed",
            Rejected::BadTag => "bad authentication tag",
            Rejected::OtherBoot => "signed for another boot or instance (nonce)",
            Rejected::Replayed => "counter not above the last accepted one",
        })
    }
}

/// Who may send control frames: one port, one key, this boot's nonce, and the highest
/// counter accepted so far (shared by every worker's copy).
#[derive(Clone)]
pub struct ControlAuth {
    port: usize,
    key: [u8; 16],
    nonce: u64,
    last: Arc<AtomicU64>,
}

impl fmt::Debug for ControlAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("ControlAuth")
            .field("port", &self.port)
            .field("nonce", &self.nonce)
            .field("last", &self.last.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl PartialEq for ControlAuth {
    fn eq(&self, other: &Self) -> bool {
        self.port == other.port
            && self.key == other.key
            && self.nonce == other.nonce
            && Arc::ptr_eq(&self.last, &other.last)
    }
}

impl Eq for ControlAuth {}

impl ControlAuth {
    /// Control frames accepted on `port` under `key` for the boot whose nonce is `nonce`,
    /// counters from 1.
    pub fn new(port: usize, key: [u8; 16], nonce: u64) -> Self {
        Self { port, key, nonce, last: Arc::new(AtomicU64::new(0)) }
    }

    /// The control port.
    pub fn port(&self) -> usize {
        self.port
    }

    /// This boot's nonce (what `@ready` announces as `ctl_nonce`).
    pub fn nonce(&self) -> u64 {
        self.nonce
    }

    /// The command of `frame` (EtherType 0x88B5) received on `port`, if it may be obeyed.
    /// An accepted frame raises the shared counter, so it is accepted once.
    pub fn check(&self, port: usize, frame: &[u8]) -> Result<Command, Rejected> {
        if port != self.port {
            return Err(Rejected::WrongPort);
        }
        let f = parse_control(frame).ok_or(Rejected::Malformed)?;
        // Not constant time: the tag is 64 bits and a mismatch only drops the frame; the
        // early exit leaks how many leading bytes matched of a tag that changes with every
        // counter, which does not help forge the next one.
        if siphash24(&self.key, f.signed) != f.tag {
            return Err(Rejected::BadTag);
        }
        if f.nonce != self.nonce {
            return Err(Rejected::OtherBoot);
        }
        let mut last = self.last.load(Ordering::Acquire);
        loop {
            if f.counter <= last {
                return Err(Rejected::Replayed);
            }
            match self.last.compare_exchange_weak(last, f.counter, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(f.command),
                Err(now) => last = now,
            }
        }
    }
}

/// SipHash-2-4 of `data` under `key` (the 128-bit key as 16 bytes, little-endian halves),
/// as specified in "SipHash: a fast short-input PRF" (Aumasson, Bernstein), §2.
pub fn siphash24(key: &[u8; 16], data: &[u8]) -> u64 {
    let k0 = u64::from_le_bytes([key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7]]);
    let k1 = u64::from_le_bytes([key[8], key[9], key[10], key[11], key[12], key[13], key[14], key[15]]);
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let round = |v: &mut [u64; 4]| {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    };
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let m = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    // The last block: the remaining bytes, and the length's low byte in the top byte.
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = data.len() as u8;
    let m = u64::from_le_bytes(last);
    v[3] ^= m;
    round(&mut v);
    round(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// What a frame whose EtherType the parser does not forward is: a control command to obey,
/// or a drop with its reason (a rejected control frame, or just an unknown EtherType).
pub fn control_verdict(
    control: Option<&ControlAuth>,
    port: usize,
    frame: &[u8],
) -> Result<Command, crate::drops::DropReason> {
    use crate::drops::DropReason;
    let is_control = crate::parse::parse_l2(frame).is_ok_and(|l2| l2.ethertype == CONTROL_ETHERTYPE);
    match control {
        Some(auth) if is_control => auth.check(port, frame).map_err(|_| DropReason::CtlRejected),
        _ => Err(DropReason::UnsupportedEthertype),
    }
}

#[cfg(test)]
mod tests;

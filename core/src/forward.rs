//! The forwarding stage: drop reasons, the [`Stage`] contract, and the two-port L2
//! [`Forwarder`] with its control frames (docs/PROTOCOL.md, "Forwarding" and
//! "Control frames").
//!
//! A [`Stage`] takes a batch received on one port and empties it: every frame either
//! moves to the output batch of some port, or is returned to the pool and counted
//! under one [`DropReason`] (or as a consumed control frame). Stages are the unit
//! later NF chains compose: a chain is a `Stage` whose `process` runs its NFs in turn
//! over the batch before handing survivors on. The worker loop ([`crate::worker`])
//! only sees this trait.

use crate::buf::{Batch, PacketBuf, Pool};
use crate::parse::{self, EthernetFrame, ParseError};
use crate::time::Instant;
use core::fmt;

/// Why a frame was dropped. Every drop on the per-packet path is counted under one of
/// these; [`DropReason::as_str`] is the name used in stats lines and JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than an Ethernet header (with its VLAN tags).
    Runt = 0,
    /// Neither IPv4 nor IPv6 after the VLAN tags (ARP, random bytes, …).
    UnsupportedEthertype,
    /// The IP header (or an IPv6 extension header) does not fit in the frame.
    TruncatedL3,
    /// The IP version field disagrees with the EtherType.
    BadIpVersion,
    /// IPv4 IHL below 5 (20 bytes), or more IPv6 extension headers than the parser
    /// skips ([`crate::parse::MAX_EXT_HEADERS`]).
    BadIpHeaderLen,
    /// The IP total/payload length is below the header or beyond the frame.
    BadIpTotalLen,
    /// The IPv4 header checksum is wrong.
    BadIpChecksum,
    /// The TCP/UDP/ICMP header does not fit in the IP payload.
    TruncatedL4,
    /// TCP data offset below 5 or beyond the segment; UDP length inconsistent.
    BadL4Len,
    /// The TX ring stayed full: the frame could not be sent.
    TxFull,
    /// An ACL rule denied the flow.
    AclDeny,
    /// No route (L3 forwarder) or no egress port for the frame.
    NoRoute,
    /// IPv4 TTL / IPv6 hop limit would reach 0.
    TtlExpired,
    /// NAT found no free port for a new mapping.
    NatPortsExhausted,
    /// NAT saw an inbound frame that matches no mapping.
    NatNoMapping,
    /// The URL filter blocked the connection.
    UrlBlocked,
    /// The load balancer has no live backend for the VIP.
    LbNoBackend,
    /// A per-flow table had no room for a new flow.
    FlowTableFull,
    /// The NF does not handle this kind of frame (e.g. NAT on a non-IPv4 frame).
    NfUnsupported,
    /// A control frame (EtherType 0x88B5) that may not be obeyed: not on the control port,
    /// not signed with the boot key, or replayed (`crate::control`).
    CtlRejected,
}

impl DropReason {
    /// Number of reasons (size of a per-reason counter array).
    pub const COUNT: usize = 20;

    /// Every reason, in counter order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::Runt,
        DropReason::UnsupportedEthertype,
        DropReason::TruncatedL3,
        DropReason::BadIpVersion,
        DropReason::BadIpHeaderLen,
        DropReason::BadIpTotalLen,
        DropReason::BadIpChecksum,
        DropReason::TruncatedL4,
        DropReason::BadL4Len,
        DropReason::TxFull,
        DropReason::AclDeny,
        DropReason::NoRoute,
        DropReason::TtlExpired,
        DropReason::NatPortsExhausted,
        DropReason::NatNoMapping,
        DropReason::UrlBlocked,
        DropReason::LbNoBackend,
        DropReason::FlowTableFull,
        DropReason::NfUnsupported,
        DropReason::CtlRejected,
    ];

    /// Index into a per-reason counter array.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name, used in `@stats`/`@summary` lines (`drop_<name>=N`) and JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::Runt => "runt",
            DropReason::UnsupportedEthertype => "unsupported_ethertype",
            DropReason::TruncatedL3 => "truncated_l3",
            DropReason::BadIpVersion => "bad_ip_version",
            DropReason::BadIpHeaderLen => "bad_ip_header_len",
            DropReason::BadIpTotalLen => "bad_ip_total_len",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::TruncatedL4 => "truncated_l4",
            DropReason::BadL4Len => "bad_l4_len",
            DropReason::TxFull => "tx_full",
            DropReason::AclDeny => "acl_deny",
            DropReason::NoRoute => "no_route",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NatPortsExhausted => "nat_ports_exhausted",
            DropReason::NatNoMapping => "nat_no_mapping",
            DropReason::UrlBlocked => "url_blocked",
            DropReason::LbNoBackend => "lb_no_backend",
            DropReason::FlowTableFull => "flow_table_full",
            DropReason::NfUnsupported => "nf_unsupported",
            DropReason::CtlRejected => "ctl_rejected",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Ports of the L2 forwarder.
pub const PORTS: usize = 2;

pub use crate::control::{CONTROL_ETHERTYPE, CONTROL_MAGIC, Command, Commands, ControlAuth, Rejected};

/// Counters every stage keeps: drops by reason and consumed control frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StageCounters {
    /// Drops per reason, indexed by [`DropReason::index`].
    pub drops: [u64; DropReason::COUNT],
    /// Control frames consumed.
    pub ctl: u64,
    /// Frames the stage originated itself ([`Stage::idle`]: e.g. IPFIX export messages):
    /// conservation is `rx + generated = tx + drops + ctl`.
    pub generated: u64,
}

impl StageCounters {
    /// Counts `n` drops for `reason`.
    #[inline]
    pub fn count_drop(&mut self, reason: DropReason, n: u64) {
        if let Some(c) = self.drops.get_mut(reason.index()) {
            *c = c.saturating_add(n);
        }
    }

    /// Drops counted for `reason`.
    pub fn drops_for(&self, reason: DropReason) -> u64 {
        self.drops.get(reason.index()).copied().unwrap_or(0)
    }

    /// Drops over every reason.
    pub fn drops_total(&self) -> u64 {
        self.drops.iter().fold(0u64, |a, &d| a.saturating_add(d))
    }

    /// Adds `other`'s counters to these (summing cores).
    pub fn merge(&mut self, other: &StageCounters) {
        for (a, b) in self.drops.iter_mut().zip(other.drops.iter()) {
            *a = a.saturating_add(*b);
        }
        self.ctl = self.ctl.saturating_add(other.ctl);
        self.generated = self.generated.saturating_add(other.generated);
    }
}

/// One step of the pipeline.
///
/// Contract:
/// - `process` receives `input`, frames received on `port`, and leaves it empty.
/// - Each frame ends in exactly one place: pushed onto `out[p]` (to be sent on port
///   `p`, in the order of `input` for frames with the same `p`), or returned to
///   `pool` and counted in `counters` (a drop under one reason, or a control frame).
/// - When `out[p]` is full, or `p >= out.len()`, the frame is freed and counted as
///   [`DropReason::TxFull`]: the caller should hand in output batches with room.
/// - Never panics and never allocates.
pub trait Stage {
    /// Processes one batch received on `port` at time `now`; returns the control
    /// commands seen.
    fn process(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        input: &mut Batch,
        out: &mut [Batch],
        counters: &mut StageCounters,
        now: Instant,
    ) -> Commands;

    /// Called once per poll, after the received batches: the stage may do bounded
    /// housekeeping and originate frames of its own (pushed onto `out[p]`, counted in
    /// `counters.generated`; what finds no room is freed and counted as `TxFull`), e.g. an
    /// NF exporting records. The default does nothing. Same rules as `process`: never
    /// panics, never allocates.
    fn idle(&mut self, pool: &mut Pool<'_>, out: &mut [Batch], counters: &mut StageCounters, now: Instant) {
        let _ = (pool, out, counters, now);
    }
}

/// Configuration of the [`Forwarder`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForwardConfig {
    /// The MAC of each port: the source MAC of frames sent on it.
    pub own_mac: [[u8; 6]; PORTS],
    /// The next hop behind each port: the destination MAC of frames sent on it.
    pub peer_mac: [[u8; 6]; PORTS],
    /// Who may send control frames (`ctl=port:N`, `ctl_key=`); `None` (`ctl=off`): they
    /// are dropped as [`DropReason::UnsupportedEthertype`].
    pub control: Option<ControlAuth>,
}

impl ForwardConfig {
    /// The default peers of docs/PROTOCOL.md (`peer0`, `peer1`).
    pub const DEFAULT_PEERS: [[u8; 6]; PORTS] = [[0x02, 0, 0, 0, 0x01, 0x00], [0x02, 0, 0, 0, 0x01, 0x01]];

    /// A configuration with the ports' own MACs and their peers.
    pub const fn new(own_mac: [[u8; 6]; PORTS], peer_mac: [[u8; 6]; PORTS], control: Option<ControlAuth>) -> Self {
        Self { own_mac, peer_mac, control }
    }
}

impl Default for ForwardConfig {
    fn default() -> Self {
        Self::new([[0; 6]; PORTS], Self::DEFAULT_PEERS, None)
    }
}

/// What a frame whose EtherType the parser does not forward is: a control command to obey,
/// or a drop with its reason (a rejected control frame, or just an unknown EtherType).
pub fn control_verdict(control: Option<&ControlAuth>, port: usize, frame: &[u8]) -> Result<Command, DropReason> {
    let is_control = parse::parse_l2(frame).is_ok_and(|l2| l2.ethertype == CONTROL_ETHERTYPE);
    match control {
        Some(auth) if is_control => auth.check(port, frame).map_err(|_| DropReason::CtlRejected),
        _ => Err(DropReason::UnsupportedEthertype),
    }
}

/// What the forwarder decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict {
    /// Send it on this port.
    Forward(usize),
    /// Consume it as this control command.
    Control(Command),
    /// Drop it.
    Drop(DropReason),
}

/// The two-port L2 forwarder: a frame received on port `i` that parses leaves on
/// port `1 - i` with destination MAC `peer_mac[1 - i]` and source MAC
/// `own_mac[1 - i]`; nothing else changes.
#[derive(Debug, Clone)]
pub struct Forwarder {
    cfg: ForwardConfig,
}

impl Forwarder {
    /// A forwarder with `cfg`.
    pub const fn new(cfg: ForwardConfig) -> Self {
        Self { cfg }
    }

    /// The configuration.
    pub fn config(&self) -> &ForwardConfig {
        &self.cfg
    }

    /// Decides what happens to `frame`, received on `port`.
    pub fn classify(&self, port: usize, frame: &[u8]) -> Verdict {
        match parse::parse(frame) {
            Ok(_) if port < PORTS => Verdict::Forward(PORTS - 1 - port),
            // Nowhere to send it: the caller named a port this stage does not have.
            Ok(_) => Verdict::Drop(DropReason::TxFull),
            Err(ParseError::UnsupportedEthertype) => match control_verdict(self.cfg.control.as_ref(), port, frame) {
                Ok(c) => Verdict::Control(c),
                Err(r) => Verdict::Drop(r),
            },
            Err(e) => Verdict::Drop(e.into()),
        }
    }

    fn rewrite(&self, pool: &mut Pool<'_>, b: PacketBuf, to: usize) {
        if let (Ok(mut eth), Some(&dst), Some(&src)) =
            (EthernetFrame::try_new(pool.frame_mut(b)), self.cfg.peer_mac.get(to), self.cfg.own_mac.get(to))
        {
            eth.set_dst(dst);
            eth.set_src(src);
        }
    }
}

/// Returns `b` to the pool (a refused free is counted by the pool itself).
fn release(pool: &mut Pool<'_>, b: PacketBuf) {
    let _ = pool.free(b);
}

impl Stage for Forwarder {
    fn process(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        input: &mut Batch,
        out: &mut [Batch],
        counters: &mut StageCounters,
        _now: Instant,
    ) -> Commands {
        let mut cmds = Commands::default();
        for &b in input.as_slice() {
            match self.classify(port, pool.frame(b)) {
                Verdict::Forward(to) => {
                    self.rewrite(pool, b, to);
                    let pushed = out.get_mut(to).map(|o| o.push(b));
                    if !matches!(pushed, Some(Ok(()))) {
                        release(pool, b);
                        counters.count_drop(DropReason::TxFull, 1);
                    }
                }
                Verdict::Control(c) => {
                    release(pool, b);
                    counters.ctl = counters.ctl.saturating_add(1);
                    cmds.record(c);
                }
                Verdict::Drop(r) => {
                    release(pool, b);
                    counters.count_drop(r, 1);
                }
            }
        }
        input.clear();
        cmds
    }
}

#[cfg(test)]
mod tests;

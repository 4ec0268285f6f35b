//! Network functions and chains.
//!
//! A [`Chain`] is a [`Stage`]: for each received batch it parses every frame once (a frame
//! that does not parse is dropped and counted, a signed control frame on the control port is
//! consumed), hands the surviving packets to each [`Nf`] in order, and sends what is still
//! alive out of the port its verdict names, with the egress MAC rewrite (destination = the
//! port's peer unless an NF set one, source = the port's own MAC). The chain with no NFs is
//! the L2 forwarder: a frame received on port `i` that parses leaves on port `1 - i`, only
//! its MACs rewritten.
//!
//! An NF sees an [`NfBatch`]: up to 32 [`Pkt`]s, each with its buffer, the parse result
//! and a [`Verdict`]. It works on the packets whose verdict is still `Forward`, may rewrite
//! their frames in place (through the pool) and may set `Drop(reason)`; it never
//! reorders, never removes a packet itself and never panics. Per-flow state lives in
//! `core::pna` tables shared by every worker core (a flow is handled by one core at a
//! time: RSS keeps it on one lane, and one worker holds a lane at a time); an NF instance
//! is per worker and holds its core's `pna` lane handles.
//!
//! The vector loop: a chain of one NF that has one ([`Nf::run_vector`]; the L3 forwarder, the
//! ACL, the `p4` NF) hands it each run of common IPv4 frames (and of common IPv6 frames, for an
//! NF whose loop takes them: the ACL; of every frame the chain admits, for one that reads the
//! frame itself: the `p4` NF) straight from the received batch, and the NF checks, decides,
//! rewrites and queues each for TX in one pass ([`VectorTx`]) — no [`Pkt`] built or read back;
//! every other frame takes the batch path, in arrival order.
//!
//! Chains can be cut at a position ([`Chain::split_off`]) so that a booster core runs the
//! tail of a chain for a whale flow (NetBlaze).
//!
//! This module holds the NF's side (the [`Nf`] trait, [`NfBatch`], [`Pkt`], [`VectorTx`],
//! [`Egress`]); `chain.rs` holds [`Chain`] and its phases.
//!
//! # From a file to a worker's chain
//!
//! A chain is configured in TOML (`chains/*.toml`); the host tool deserializes it (every
//! leaf with its span), writes the compact text form of [`config`] (docs/PROTOCOL.md) and
//! runs this crate's parser over it, mapping its errors (line, key, field) back to the TOML
//! file. The text goes to QEMU as `-initrd`, i.e. PVH boot module 0 (with an optional
//! NetBlaze profile after it, `crate::netblaze::module`). The image parses it with
//! [`config::ChainSpec::parse`] (no_std; errors name line and field → exit 35) right after
//! the banner and prints `@chain`; the forwarding run builds it once
//! ([`config::ChainSpec::build`]`(egress, tick rate)` → [`config::ChainFactory`]: the
//! timeouts converted from ms to clock ticks, every NF's `XxxShared` tables, `Arc`ed) and
//! gives each worker [`config::ChainFactory::chain_for_worker`] (per-worker NF instances)
//! as its stage. An empty chain is L2 forwarding. Each worker formats its chain's counters
//! into its slot when it publishes; the reporter sums them per key into
//! `@stats`/`@summary`. The host's checker derives from the same `ChainSpec` what each
//! generated flow should undergo (independent models of ACL, LB, NAT, L3fwd; Encrypt frames
//! are decrypted with the NF itself) and compares every frame with that
//! (`tests/tests/chains.rs`, `chain_nat_l3fwd.rs`, `chain_urlfilter.rs`).
//!
//! # Live changes
//!
//! The management channel ([`crate::manage`]) changes tables while the chain runs.
//! Tables that change are behind [`crate::sync::Swap`]: the ACL's `AclRules` (rule list,
//! classifiers, generation; cached verdicts carry the generation that made them and are
//! decided again when it changed) and the L3 forwarder's `L3Tables` (route list and tries,
//! rebuilt fallibly); each NF instance holds a `Reader` and calls `get` once per batch. LB
//! backends change through `LbShared::add_backend` / `delete_backend` (the Maglev seqlock
//! table). Record syntax is shared with the chain parser (`nf::config::sections::{acl_rule,
//! route, backend}`) and written back by `nf::config::text`. `tests/tests/mgmt.rs` changes
//! an ACL rule and a route mid-stream and checks frame by frame that each flow switched once
//! per change, inside the window between request and reply.
//!
//! # Frames addressed to the dataplane
//!
//! A chain with addresses (`port.addr=` records, [`crate::neigh`]) holds a
//! [`crate::neigh::Router`]: [`Chain::admit`] answers an ARP request for a port's address and
//! an ICMP echo request to any of them in place, as a packet with [`Verdict::Reply`] that no
//! NF sees and that leaves by its ingress port; ARP it learns from is consumed (`ctl`). The
//! egress resolves [`Dst::Via`] (the L3 forwarder's gateway or directly connected next hops)
//! through the worker's cache of the neighbour table; a miss hands the frame to the table
//! to wait for the answer, and [`Stage::idle`] sends what waited on this lane once it came.
//! A packet the L3 forwarder dropped for TTL expiry or no route becomes, in the egress, the
//! ICMP (ICMPv6) error that says so, sent back out of its ingress port
//! (`crate::neigh::icmp`; only dropped packets take that out-of-line path).
//! A chain without addresses pays one `Option` check per batch for all of this.
//!
//! # Frames the dataplane originates
//!
//! [`Stage::idle`] runs once per poll after the received batches ([`Chain`]'s `idle` calls every
//! NF's [`Nf::generate`], then the same egress as forwarded frames) and counts them as
//! `generated`. Accounting uses it to keep sweeping when no traffic comes and, with
//! `accounting.export=ipfix:…`, to send expired records as IPFIX messages
//! (`accounting/ipfix.rs`: RFC 7011 encoder; one message per poll at most). The host's
//! collector checks every exported flow against the host's counts; `tests/tests/ipfix.rs`
//! also decodes the export with `tshark`.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::buf::{BATCH_SIZE, Batch, PacketBuf, Pool};
use crate::control::{Commands, ControlAuth, control_verdict};
use crate::drops::DropReason;
use crate::neigh::{ArpAction, Emit, Miss, Router, echo, icmp};
use crate::parse::{self, Depth, IpAddr, L3Kind, ParseError, Parsed};
use crate::rss::BucketMeter;
use crate::stage::{PORTS, Stage, StageCounters};
use crate::time::Instant;

pub mod accounting;
pub mod acl;
mod chain;
pub mod config;
pub mod encrypt;
pub mod frag;
pub mod l3fwd;
pub mod lb;
pub mod nat;
pub mod p4;
pub mod urlfilter;

pub use chain::Chain;

/// [`parse::parse_to`] of the frame that starts in `b`, over every buffer it spans (a frame
/// of several buffers, `crate::buf`: [`parse::parse_segmented`]).
#[inline(always)]
pub(crate) fn parse_frame(pool: &Pool<'_>, b: PacketBuf, depth: Depth) -> Result<Parsed, ParseError> {
    if pool.is_segmented(b) {
        return parse_segmented_frame(pool, b, depth);
    }
    parse::parse_to(pool.frame(b), depth)
}

/// [`parse::check_to`] of the frame that starts in `b`, over every buffer it spans.
#[inline(always)]
pub(crate) fn check_frame(pool: &Pool<'_>, b: PacketBuf, depth: Depth) -> Result<(), ParseError> {
    // At `L2` only the link header is read: the first buffer's bytes are enough.
    if depth != Depth::L2 && pool.is_segmented(b) {
        return parse_segmented_frame(pool, b, depth).map(|_| ());
    }
    parse::check_to(pool.frame(b), depth)
}

#[cold]
#[inline(never)]
fn parse_segmented_frame(pool: &Pool<'_>, b: PacketBuf, depth: Depth) -> Result<Parsed, ParseError> {
    parse::parse_segmented(pool.frame(b), pool.frame_len(b), depth)
}

/// What happens to a packet when the chain is done with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict {
    /// Send it on this port (still alive: later NFs see it).
    Forward(u8),
    /// Drop it, counted under this reason (later NFs skip it).
    Drop(DropReason),
    /// Send it out of this port as it is, past every NF: a reply the chain built in place
    /// from a frame addressed to the dataplane itself (ARP, ICMP echo; `crate::neigh`),
    /// to its [`Pkt::dst`].
    Reply(u8),
}

/// One packet in an [`NfBatch`].
#[derive(Debug, Clone, Copy)]
pub struct Pkt {
    /// Its buffer.
    pub buf: PacketBuf,
    /// The parse result (offsets stay valid: NFs rewrite fields, never header lengths).
    pub parsed: Parsed,
    /// The interface it arrived on: a port, or a VLAN sub-interface (`crate::vlan`).
    pub ingress: u8,
    /// The VLAN ID of the sub-interface it arrived on, whose tag came off at admission (0:
    /// it arrived on a port); [`Pkt::vlan`] is the VID it arrived with either way.
    pub vid: u16,
    /// What happens to it.
    pub verdict: Verdict,
    /// Its destination MAC at egress: the port's peer unless an NF chose one (the L3
    /// forwarder's next hop) or a neighbour to look up.
    pub dst: Dst,
}

/// Where a packet's destination MAC comes from at egress (7 bytes: a packet carries one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Dst {
    /// The egress port's peer (`Egress::peer_mac`).
    Peer,
    /// This MAC (an NF's choice: a static next hop, the sender of a request answered).
    Mac([u8; 6]),
    /// The MAC of this IPv4 neighbour, from the neighbour table (`crate::neigh`; set by the
    /// L3 forwarder for a gateway, or [`l3fwd::VIA_DESTINATION`] for a directly connected
    /// destination: the packet's own, IPv4 or IPv6). A chain without addresses sends it to
    /// the peer.
    Via([u8; 4]),
    /// The MAC of this IPv6 gateway, from the neighbour table (set by the L3 forwarder for an
    /// IPv6 route `via:` a gateway). A chain without addresses sends it to the peer.
    Via6([u8; 16]),
}

impl Dst {
    /// The MAC an NF chose, if it chose one.
    pub fn mac(self) -> Option<[u8; 6]> {
        if let Dst::Mac(m) = self { Some(m) } else { None }
    }
}

impl Pkt {
    /// The VLAN ID it arrived with (0: none): its sub-interface's, or the outer tag it still
    /// carries (a chain without sub-interfaces leaves tags on).
    #[inline]
    pub fn vlan(&self) -> u16 {
        // The outer tag's slot is zero when the frame has none (`parse::L2::vlans`): no
        // branch on the tag count.
        match self.vid {
            0 => self.parsed.l2.vlans.first().map_or(0, crate::parse::VlanTag::vid),
            v => v,
        }
    }

    /// The neighbour a [`Dst::Via`] of `via` names: the gateway, or for
    /// [`l3fwd::VIA_DESTINATION`] the packet's own destination (IPv4 or IPv6).
    #[inline]
    pub fn neighbour(&self, via: [u8; 4]) -> IpAddr {
        if via != l3fwd::VIA_DESTINATION {
            return IpAddr::V4(via);
        }
        self.parsed.flow.dst
    }

    /// Marks a packet the chain took before the NFs (an IPv6 neighbour advertisement the
    /// table learned from): a reply with no destination MAC, which no other packet is (a
    /// reply always has one); `Chain::answer_local` frees it at once.
    fn mark_taken(&mut self) {
        (self.verdict, self.dst) = (Verdict::Reply(self.ingress), Dst::Peer);
    }

    /// Whether [`Pkt::mark_taken`] marked it.
    fn taken(&self) -> bool {
        matches!((self.verdict, self.dst), (Verdict::Reply(_), Dst::Peer))
    }

    /// The neighbour its [`Dst::Via`] or [`Dst::Via6`] names, if it names one.
    pub fn dst_neighbour(&self) -> Option<IpAddr> {
        match self.dst {
            Dst::Via(via) => Some(self.neighbour(via)),
            Dst::Via6(via) => Some(IpAddr::V6(via)),
            Dst::Peer | Dst::Mac(_) => None,
        }
    }

    /// Whether the packet is still to be forwarded.
    pub fn alive(&self) -> bool {
        matches!(self.verdict, Verdict::Forward(_))
    }
}

/// The packets of one received batch, in arrival order.
#[derive(Debug, Default)]
pub struct NfBatch {
    pkts: heapless::Vec<Pkt, BATCH_SIZE>,
}

impl NfBatch {
    /// An empty batch.
    pub const fn new() -> Self {
        Self { pkts: heapless::Vec::new() }
    }

    /// Appends a packet; gives it back if the batch is full.
    pub fn push(&mut self, p: Pkt) -> Result<(), Pkt> {
        self.pkts.push(p)
    }

    /// All packets, dead or alive, in order.
    pub fn pkts(&self) -> &[Pkt] {
        &self.pkts
    }

    /// All packets, to set verdicts.
    pub fn pkts_mut(&mut self) -> &mut [Pkt] {
        &mut self.pkts
    }

    /// The packets still alive, mutably, in order.
    pub fn alive_mut(&mut self) -> impl Iterator<Item = &mut Pkt> {
        self.pkts.iter_mut().filter(|p| p.alive())
    }

    /// Packets in the batch.
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Empties the batch (the caller has taken the buffers).
    pub fn clear(&mut self) {
        self.pkts.clear();
    }
}

/// What an NF's vector loop ([`Nf::run_vector`], issue 25) sends through: the chain's output
/// batches, its drop counters and each port's link header, and what the chain checks.
///
/// The vector loop is the whole path of a common IPv4 frame — untagged, no options, not a
/// fragment, checked to the chain's depth by [`parse::ipv4_dst`] — (and, for an NF whose loop
/// takes them ([`Nf::vector_v6`]), of a common IPv6 frame: untagged, no extension header,
/// checked by [`parse::ipv6_flow`]; for an NF that reads the frame itself ([`Nf::vector_any`]),
/// of every frame the chain admits, [`VectorTx::admits`]) from the received batch to an output
/// batch in one pass:
/// one look at the frame's memory, no parse result built or read back. A chain of one NF that
/// has a vector loop ([`Nf::vector_v4`]) and no meter gives it each run of common frames;
/// every other frame takes the batch path, in arrival order.
#[derive(Debug)]
pub struct VectorTx<'a> {
    macs: &'a [[u8; 12]; PORTS],
    out: &'a mut [Batch],
    counters: &'a mut StageCounters,
    l4: bool,
    depth: Depth,
    ingress: u8,
}

impl VectorTx<'_> {
    /// The port the frames came in on.
    #[inline(always)]
    pub fn ingress(&self) -> u8 {
        self.ingress
    }

    /// Whether the batch path would admit `frame` (`parse::parse_to` at the chain's depth
    /// accepts it: at `L2` that is the IP header's checks too, as a packet record needs them):
    /// what [`Nf::vector_any`]'s loop takes.
    #[inline(always)]
    pub fn admits(&self, frame: &[u8]) -> bool {
        Self::admits_at(frame, self.depth)
    }

    /// [`VectorTx::admits`] for a chain checking to `depth` (the chain's own test of where a
    /// run of such frames ends).
    #[inline(always)]
    pub(super) fn admits_at(frame: &[u8], depth: Depth) -> bool {
        parse::check_to(frame, depth.max(Depth::L3)).is_ok()
    }

    /// The port a frame leaves by when the NF does not route it (the batch path's
    /// `Verdict::Forward` default: its pair, [`crate::stage::pair_of`]).
    #[inline(always)]
    pub fn default_out(&self) -> u8 {
        crate::stage::pair_of(self.ingress)
    }

    /// Whether the chain checks the transport header too (its depth is `L4`): the loop takes
    /// a frame only if `parse::ipv4_dst::<true>` does.
    #[inline(always)]
    pub fn l4(&self) -> bool {
        self.l4
    }

    /// The link header of a frame leaving on port `to`: destination `dst` (or the port's peer
    /// if `None`), source the port's own MAC; `None` if the chain has no port `to` (the
    /// frame is then dropped as `NoRoute`, as the batch path's egress does).
    #[inline(always)]
    pub fn link_header(&self, to: u8, dst: Option<[u8; 6]>) -> Option<[u8; 12]> {
        match dst {
            Some(d) => self.link_header_to(to, d),
            None => self.macs.get(usize::from(to)).copied(),
        }
    }

    /// [`VectorTx::link_header`] with destination `dst`.
    #[inline(always)]
    pub fn link_header_to(&self, to: u8, dst: [u8; 6]) -> Option<[u8; 12]> {
        let mut head = *self.macs.get(usize::from(to))?;
        if let Some(h) = head.first_chunk_mut::<6>() {
            *h = dst;
        }
        Some(head)
    }

    /// Queues `b` (its link header written) for port `to`; no output batch for `to`, or a full
    /// one, drops and counts it as `TxFull`.
    #[inline(always)]
    pub fn push(&mut self, pool: &mut Pool<'_>, b: PacketBuf, to: u8) {
        let r = match self.out.get_mut(usize::from(to)) {
            Some(q) => q.push(b),
            None => Err(b),
        };
        if let Err(b) = r {
            self.drop(pool, b, DropReason::TxFull);
        }
    }

    /// Frees `b` and counts the drop under `reason`.
    #[inline(always)]
    pub fn drop(&mut self, pool: &mut Pool<'_>, b: PacketBuf, reason: DropReason) {
        Chain::drop_inline(pool, self.counters, b, reason);
    }
}

/// What every NF call gets besides the packets.
#[derive(Debug, Clone, Copy)]
pub struct NfCtx {
    /// The time of this batch (for expiry and timestamps).
    pub now: Instant,
}

/// One network function.
///
/// Contract: `process` looks only at packets that are alive, may rewrite their frames
/// through `pool` (keeping header lengths, so `parsed` stays valid) and may set their
/// verdict (to drop, or to another egress port); it never panics, never allocates, and
/// counts what it does in its own counters.
pub trait Nf: Send {
    /// A short name (`acl`, `lb`, …) for reports.
    fn name(&self) -> &'static str;
    /// Processes the alive packets of `batch`.
    fn process(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch);
    /// How deep the NF reads a packet's headers (`Pkt::parsed`): the chain parses every frame
    /// at least this deep. The default is everything, the transport header included.
    fn reads(&self) -> Depth {
        Depth::L4
    }
    /// Whether the NF has a vector loop ([`Nf::run_vector`]): for common IPv4 frames, and for
    /// more if [`Nf::vector_v6`] or [`Nf::vector_any`] say so. The default
    /// is no.
    fn vector_v4(&self) -> bool {
        false
    }
    /// Whether the vector loop takes this received batch's common frames: asked once per
    /// batch of an NF whose [`Nf::vector_v4`] says yes; an NF whose loop applies only in some
    /// states (the ACL, while its cross tables answer) says no otherwise, and the whole batch
    /// takes the batch path. The default is yes.
    fn vector_ready(&mut self) -> bool {
        true
    }
    /// Whether the NF's vector loop takes every frame that passes the chain's checks
    /// ([`VectorTx::admits`], at any depth, `L2` included), not only the
    /// common IPv4 and IPv6 ones: an NF that reads the frame itself (the `p4` NF). Asked only
    /// of an NF whose [`Nf::vector_v4`] says yes. The default is no.
    fn vector_any(&self) -> bool {
        false
    }
    /// Whether the NF's vector loop also takes common IPv6 frames: untagged, the transport
    /// header right after the fixed header (`parse::ipv6_flow` at the chain's depth). Asked
    /// only of an NF whose [`Nf::vector_v4`] says yes. The default is no.
    fn vector_v6(&self) -> bool {
        false
    }
    /// The vector loop (see [`VectorTx`]): takes frames from the front of `input` while each is
    /// a common IPv4 frame (`parse::ipv4_dst` at [`VectorTx::l4`]'s depth) or, if
    /// [`Nf::vector_v6`] says yes, a common IPv6 frame, or, if [`Nf::vector_any`] says yes,
    /// any frame that passes the chain's checks, and treats each exactly
    /// as [`Nf::process`] followed by the chain's egress would — the same verdict, rewrite,
    /// link header and counters — sending or dropping it through `tx`. Returns how many frames
    /// it took; it may stop before any frame (the chain then takes that frame by the batch
    /// path). Called only if [`Nf::vector_v4`] says yes, for a chain of this NF alone; the
    /// default takes none.
    fn run_vector(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, input: &[PacketBuf], tx: &mut VectorTx<'_>) -> usize {
        let _ = (ctx, pool, input, tx);
        0
    }
    /// Once per poll, with or without traffic: bounded housekeeping (expiry sweeps) and frames
    /// the NF originates itself (export messages), appended to `batch` as packets with a
    /// `Forward` verdict (alive). The default does nothing.
    fn generate(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        let _ = (ctx, pool, batch);
    }
    /// An ICMP error the chain built in place (`b`, the whole frame) about a packet that went
    /// through this NF on its way out (time exceeded, no route, too big: `Chain` egress): the
    /// NF undoes what it did to the quoted packet, as it would for the same error arriving
    /// from the network — NAT restores the inside host as the error's destination and in the
    /// quote, so that an inside host's traceroute and path-MTU discovery work through it.
    /// Called in reverse chain order, only for those rare errors. The default leaves it.
    fn own_error(&mut self, _pool: &mut Pool<'_>, _b: PacketBuf, _now: Instant) {}

    /// Whether anything after this NF reads `Pkt::parsed` (a later NF of the chain, or the
    /// chain's router at egress); the chain says so whenever its make-up changes, and an NF
    /// is told `true` until then. An NF that rewrites headers freely (`p4`) parses its output
    /// again only when it is read. The default ignores it.
    fn set_parsed_read_after(&mut self, _read: bool) {}

    /// Writes this NF's own counters as ` key=value` pairs (each with a leading space,
    /// keys prefixed with the NF's name), for the stats lines.
    fn write_counters(&self, w: &mut dyn core::fmt::Write) -> core::fmt::Result {
        let _ = w;
        Ok(())
    }
}

/// Egress settings of a chain: per port, its own MAC and its default next hop; and who may
/// send control frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// The MAC of each port (source MAC of frames sent on it).
    pub own_mac: [[u8; 6]; PORTS],
    /// The default next hop behind each port (destination MAC unless an NF set one).
    pub peer_mac: [[u8; 6]; PORTS],
    /// Who may send control frames (`ctl=port:N`, `ctl_key=`); `None` (`ctl=off`): they are
    /// dropped as [`DropReason::UnsupportedEthertype`].
    pub control: Option<ControlAuth>,
    /// The chain's VLAN sub-interfaces ([`crate::vlan`]; set by the chain build from
    /// `port.vlan`): frames for them get their tag and leave by their port.
    pub vlans: crate::vlan::VlanMap,
}

impl Egress {
    /// The default peers of docs/PROTOCOL.md (`peerN`: `02:00:00:00:01:0N` for port `N`).
    pub const DEFAULT_PEERS: [[u8; 6]; PORTS] = {
        let mut p = [[0x02, 0, 0, 0, 0x01, 0x00]; PORTS];
        let mut i = 0;
        while i < PORTS {
            p[i][5] = i as u8;
            i += 1;
        }
        p
    };

    /// The first ports' own MACs and peers (as many as given, at most [`PORTS`]; the other
    /// ports keep a zero own MAC and their default peer), and who may send control frames.
    pub const fn new<const A: usize, const B: usize>(
        own: [[u8; 6]; A],
        peer: [[u8; 6]; B],
        control: Option<ControlAuth>,
    ) -> Self {
        let (mut own_mac, mut peer_mac) = ([[0; 6]; PORTS], Self::DEFAULT_PEERS);
        let mut i = 0;
        while i < PORTS {
            if i < A {
                own_mac[i] = own[i];
            }
            if i < B {
                peer_mac[i] = peer[i];
            }
            i += 1;
        }
        Self { own_mac, peer_mac, control, vlans: crate::vlan::VlanMap::EMPTY }
    }
}

impl Default for Egress {
    /// Zero own MACs, the default peers, control off.
    fn default() -> Self {
        Self::new([[0; 6]; PORTS], Self::DEFAULT_PEERS, None)
    }
}

#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

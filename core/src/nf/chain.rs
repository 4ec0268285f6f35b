//! [`Chain`]: the NFs in order as one [`Stage`], with the egress (link headers, the router's
//! answers, the neighbour table) and the phases a stage that splits the chain across cores
//! drives (see [`Chain`]'s doc). The NF trait, the batch and the packet are in the parent
//! module.

use super::*;
use crate::vlan;
/// NFs in order, run as one [`Stage`].
///
/// # Phases
///
/// [`Stage::process`] runs a received batch through the whole chain at once. A stage that
/// wraps the chain and sends some flows elsewhere (NetBlaze's, [`crate::offload`]) parses the
/// frames itself and drives the chain through its phases instead, in this order and with the
/// same pool and counters throughout:
///
/// 1. [`Chain::begin`] empties the chain's batch.
/// 2. [`Chain::admit`], once per frame kept here, with the frame's parse result: the frame
///    joins the batch, or is dropped by reason, or is taken as a control frame.
/// 3. Then exactly one of:
///    - [`Chain::run_admitted`]: the meter, every NF and the egress (what `process` does);
///    - [`Chain::run_head`] with split point `k`: the meter and NFs `0..k`; each surviving
///      frame is handed to the caller with its verdict port (it goes to the core that runs
///      the tail), the dropped ones are freed and counted. The batch is empty afterwards.
///
/// On the core that runs a tail: [`Chain::begin`], then [`Chain::admit_tail`] per frame (with
/// the verdict port and MAC choice its head made), then [`Chain::run_tail`] from the same `k`:
/// NFs `k..` and the egress. Every phase leaves each frame either in the chain's batch, on an
/// output batch, handed to the caller, or freed and counted — never lost.
pub struct Chain {
    nfs: Vec<Box<dyn Nf>>,
    egress: Egress,
    batch: NfBatch,
    /// Per-bucket load for the server mapper ([`Chain::set_meter`]); `None`: not measured.
    meter: Option<BucketMeter>,
    /// What the configuration asks to be validated at least ([`Chain::set_validate`]).
    validate: Depth,
    /// How deep every frame is checked and parsed: the deepest of `validate`, what each NF
    /// reads and what the meter needs (the 5-tuple).
    depth: Depth,
    /// Whether the NF's vector loop takes common IPv4 frames (see [`VectorTx`]), and the
    /// frames `vector6` and `vector_any` add.
    vector: bool,
    /// Whether common IPv6 frames take it too ([`Nf::vector_v6`]).
    vector6: bool,
    /// Whether every frame that passes the chain's checks takes it ([`Nf::vector_any`]).
    vector_any: bool,
    /// Each port's link header as the egress writes it: the peer's MAC, then the port's own.
    macs: [[u8; 12]; PORTS],
    /// The ports' addresses and the neighbour table (`crate::neigh`); `None`: the chain
    /// answers nothing and every frame's destination is the NF's choice or the port's peer.
    router: Option<Router>,
}

impl core::fmt::Debug for Chain {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let names: heapless::Vec<&str, 16> = self.nfs.iter().map(|n| n.name()).take(16).collect();
        f.debug_struct("Chain").field("nfs", &names).field("egress", &self.egress).finish_non_exhaustive()
    }
}

impl Chain {
    /// A chain of `nfs` with `egress` settings. With no NFs it forwards port `i` →
    /// port `1 - i`, like the L2 forwarder.
    pub fn new(nfs: Vec<Box<dyn Nf>>, egress: Egress) -> Self {
        let mut c = Self {
            nfs,
            egress,
            batch: NfBatch::new(),
            meter: None,
            validate: Depth::L4,
            depth: Depth::L4,
            vector: false,
            vector6: false,
            vector_any: false,
            macs: [[0; 12]; PORTS],
            router: None,
        };
        for ((m, peer), own) in c.macs.iter_mut().zip(&c.egress.peer_mac).zip(&c.egress.own_mac) {
            m[..6].copy_from_slice(peer);
            m[6..].copy_from_slice(own);
        }
        c.set_depth();
        c
    }

    /// Checks every frame at least to `validate` (a chain file's `validate`; the default,
    /// [`Depth::L4`], makes every check of [`parse::parse`]). The chain checks deeper if an
    /// NF reads deeper or the meter is on: a chain of the L3 forwarder alone with `L3` does
    /// not look at transport headers; the empty chain with `L2` forwards any IP frame whose
    /// link header is whole, as a switch does.
    pub fn set_validate(&mut self, validate: Depth) {
        self.validate = validate;
        self.set_depth();
    }

    /// How deep the chain checks and parses each frame (see [`Chain::set_validate`]).
    pub fn depth(&self) -> Depth {
        self.depth
    }

    fn set_depth(&mut self) {
        let reads = self.nfs.iter().map(|n| n.reads()).max().unwrap_or(Depth::L2);
        let meter = if self.meter.is_some() { Depth::L4 } else { Depth::L2 };
        self.depth = self.validate.max(reads).max(meter);
        let (n, router) = (self.nfs.len(), self.router.is_some());
        for (i, nf) in self.nfs.iter_mut().enumerate() {
            nf.set_parsed_read_after(i + 1 < n || router);
        }
        // Not with addresses: frames for the chain itself and next hops through the neighbour
        // table are the batch path's (`crate::neigh`).
        let any = self.nfs.iter().all(|n| n.vector_any());
        self.vector = self.meter.is_none()
            && self.router.is_none()
            && (self.depth >= Depth::L3 || any)
            && self.nfs.len() == 1
            && self.nfs.iter().all(|n| n.vector_v4());
        self.vector6 = self.vector && self.nfs.iter().all(|n| n.vector_v6());
        self.vector_any = self.vector && any;
    }

    /// Whether the chain hands frames to its NF's vector loop ([`VectorTx`]).
    pub fn is_vector(&self) -> bool {
        self.vector
    }

    /// Measures every parsed frame's RSS bucket into `meter` from now on (`None`: stops).
    /// A chain with a meter parses every frame, also with no NFs (the L2 forwarder otherwise
    /// only checks them).
    pub fn set_meter(&mut self, meter: Option<BucketMeter>) {
        self.meter = meter;
        self.set_depth();
    }

    /// The per-bucket meter, if one is set.
    pub fn meter(&self) -> Option<&BucketMeter> {
        self.meter.as_ref()
    }

    /// The per-bucket meter, to record frames the chain does not see (NetBlaze hands some to
    /// auxiliary cores, [`crate::offload`]).
    pub fn meter_mut(&mut self) -> Option<&mut BucketMeter> {
        self.meter.as_mut()
    }

    /// Puts `nf` before the chain's first NF (a platform's own stage of the chain, such as
    /// the firmware's debug `burn`).
    pub fn push_front(&mut self, nf: Box<dyn Nf>) {
        self.nfs.insert(0, nf);
        self.set_depth();
    }

    /// Gives the chain the ports' addresses and the neighbour table: it answers ARP and ICMP
    /// echo for its addresses and resolves [`Dst::Via`] at egress (`crate::neigh`).
    pub fn set_router(&mut self, router: Option<Router>) {
        self.router = router;
        self.set_depth();
    }

    /// The chain's handle on the neighbour table, if it has one.
    pub fn router(&self) -> Option<&Router> {
        self.router.as_ref()
    }

    /// The NFs, in order.
    pub fn nfs(&self) -> &[Box<dyn Nf>] {
        &self.nfs
    }

    /// Cuts the chain before NF `at`: `self` keeps NFs `..at`, the returned chain runs
    /// `at..` (for a booster core). `at` past the end gives an empty
    /// tail.
    pub fn split_off(&mut self, at: usize) -> Chain {
        let at = at.min(self.nfs.len());
        let mut tail = Chain::new(self.nfs.split_off(at), self.egress.clone());
        tail.set_validate(self.validate);
        tail.set_router(self.router.as_ref().map(|r| Router::new(alloc::sync::Arc::clone(r.shared()))));
        self.set_depth();
        tail
    }

    /// Writes every NF's counters (see [`Nf::write_counters`]).
    pub fn write_counters(&self, w: &mut dyn core::fmt::Write) -> core::fmt::Result {
        for nf in &self.nfs {
            nf.write_counters(w)?;
        }
        match &self.router {
            Some(r) => r.write_counters(w),
            None => Ok(()),
        }
    }

    /// A frame that did not parse: a control frame (another ethertype) becomes a command if
    /// the egress settings accept it from `port`; everything else is dropped by reason.
    fn refuse(
        egress: &Egress,
        pool: &mut Pool<'_>,
        counters: &mut StageCounters,
        commands: &mut Commands,
        port: usize,
        b: PacketBuf,
        e: ParseError,
    ) {
        if e != ParseError::UnsupportedEthertype {
            return Self::drop_frame(pool, counters, b, e.into());
        }
        match control_verdict(egress.control.as_ref(), port, pool.frame(b)) {
            Ok(c) => {
                commands.record(c);
                counters.ctl += 1;
                let _ = pool.free(b);
            }
            Err(reason) => Self::drop_frame(pool, counters, b, reason),
        }
    }

    /// Empties the chain's batch before [`Chain::admit`]s (for a caller that parsed the frames
    /// itself: NetBlaze's lane stage).
    pub fn begin(&mut self) {
        self.batch.clear();
    }

    /// One frame received on `port` at `now` with its parse result: into the chain's batch
    /// if it parsed, else dropped by reason, taken as a control frame (into `commands`) or,
    /// with a router, handled as ARP (a reply joins the batch). Packets addressed to the
    /// dataplane are answered when the batch runs ([`Chain::run_admitted`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn admit(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        counters: &mut StageCounters,
        commands: &mut Commands,
        b: PacketBuf,
        parsed: Result<parse::Parsed, ParseError>,
        now: Instant,
    ) {
        // A chain with sub-interfaces takes the tag off a tagged frame first (`crate::vlan`).
        if !self.egress.vlans.is_empty()
            && port < PORTS
            && let Some(vid) = vlan::tag_of(pool.frame(b))
        {
            return self.admit_tagged(port, pool, counters, commands, b, vid, now);
        }
        self.admit_on((port, 0), crate::stage::pair_of(port as u8), pool, counters, commands, b, parsed, now);
    }

    /// A tagged frame received on `port` of a chain with sub-interfaces: VID 0 (priority
    /// only) stays on the port, a declared (port, VID) goes on as received on its
    /// sub-interface, anything else is dropped as `vlan_unknown`; the tag comes off first
    /// and the frame is parsed again.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn admit_tagged(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        counters: &mut StageCounters,
        commands: &mut Commands,
        b: PacketBuf,
        vid: u16,
        now: Instant,
    ) {
        let iface = if vid == 0 { Some(port as u8) } else { self.egress.vlans.iface(port as u8, vid) };
        let Some(iface) = iface else {
            return Self::drop_frame(pool, counters, b, DropReason::VlanUnknown);
        };
        if !vlan::pop(pool, b) {
            return Self::drop_frame(pool, counters, b, DropReason::Runt);
        }
        let parsed = super::parse_frame(pool, b, self.depth);
        let default_out = crate::stage::pair_of(port as u8);
        self.admit_on((usize::from(iface), vid), default_out, pool, counters, commands, b, parsed, now);
    }

    /// [`Chain::admit`] of an untagged frame received on interface `port` (a port, or a
    /// sub-interface whose tag `vid` came off), whose default egress is `default_out`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn admit_on(
        &mut self,
        (port, vid): (usize, u16),
        default_out: u8,
        pool: &mut Pool<'_>,
        counters: &mut StageCounters,
        commands: &mut Commands,
        b: PacketBuf,
        parsed: Result<parse::Parsed, ParseError>,
        now: Instant,
    ) {
        match parsed {
            Ok(_) if port >= PORTS && self.egress.vlans.of(port).is_none() => {
                Self::drop_frame(pool, counters, b, DropReason::TxFull)
            }
            Ok(parsed) => {
                let pkt = Pkt {
                    buf: b,
                    parsed,
                    ingress: port as u8,
                    vid,
                    verdict: Verdict::Forward(default_out),
                    dst: Dst::Peer,
                };
                if let Err(p) = self.batch.push(pkt) {
                    // Cannot happen: a batch never holds more than BATCH_SIZE frames.
                    Self::drop_frame(pool, counters, p.buf, DropReason::TxFull);
                }
            }
            Err(ParseError::UnsupportedEthertype)
                if self.router.is_some() && pool.frame(b).get(12..14) == Some(&[0x08, 0x06]) =>
            {
                self.arp(port, pool, counters, b, now)
            }
            Err(e) => Self::refuse(&self.egress, pool, counters, commands, port, b, e),
        }
    }

    /// With a router, before the NFs: every admitted packet addressed to one of the
    /// dataplane's own addresses is answered ([`Chain::local`]). Without one: one branch per
    /// batch.
    /// A neighbour advertisement the table took leaves the batch here (freed, counted as
    /// `ctl`, as ARP it learns from is).
    #[inline]
    fn answer_local(&mut self, pool: &mut Pool<'_>, counters: &mut StageCounters, now: Instant) {
        if let Some(r) = &mut self.router {
            for p in self.batch.pkts_mut().iter_mut().filter(|p| p.alive()) {
                Self::local(r, pool, p, now);
            }
            if r.take_consumed() {
                Self::take_consumed(&mut self.batch, pool, counters);
            }
        }
    }

    /// Frees the packets of `batch` that [`Chain::local6`] marked as taken (counted as `ctl`).
    #[cold]
    #[inline(never)]
    fn take_consumed(batch: &mut NfBatch, pool: &mut Pool<'_>, counters: &mut StageCounters) {
        batch.pkts.retain(|p| {
            let taken = p.taken();
            if taken {
                counters.ctl += 1;
                let _ = pool.free(p.buf);
            }
            !taken
        });
    }

    /// A packet for one of the dataplane's own IPv4 addresses: an ICMP echo request becomes
    /// its reply in place (out of the ingress port, to the sender's MAC), anything else is
    /// dropped as [`DropReason::LocalUnsupported`]. Other packets are left alone.
    #[inline]
    fn local(r: &mut Router, pool: &mut Pool<'_>, p: &mut Pkt, now: Instant) {
        let dst = match &p.parsed.flow.dst {
            IpAddr::V4(d) => *d,
            IpAddr::V6(d) => return Self::local6(r, pool, p, *d, now),
        };
        if !r.is_own(dst) {
            return;
        }
        let (ip, l4) = (usize::from(p.parsed.l3_offset), usize::from(p.parsed.l4_offset));
        let frame = pool.frame_mut(p.buf);
        let echo = p.parsed.l3 == L3Kind::Ipv4
            && p.parsed.ip_proto == 1
            && p.parsed.fragment == parse::Fragment::Whole
            && echo::reply_in_place(frame, ip, l4);
        let src: Option<[u8; 6]> = frame.get(6..12).and_then(|m| m.try_into().ok());
        match (echo, src) {
            (true, Some(src)) => {
                r.count_echo();
                p.dst = Dst::Mac(src);
                p.verdict = Verdict::Reply(p.ingress);
            }
            _ => p.verdict = Verdict::Drop(DropReason::LocalUnsupported),
        }
    }

    /// [`Chain::local`] for IPv6: a neighbour solicitation for one of the ingress port's
    /// addresses or an echo request to one of them is answered in place, a neighbour
    /// advertisement to one of our addresses or to all nodes (`ff02::1`) is taken by the
    /// neighbour table ([`Router::answer6`], [`crate::neigh::nd`]); anything else to our
    /// addresses (or to their solicited-node multicast addresses) is dropped as
    /// [`DropReason::LocalUnsupported`].
    #[cold]
    fn local6(r: &mut Router, pool: &mut Pool<'_>, p: &mut Pkt, dst: [u8; 16], now: Instant) {
        let icmp = p.parsed.ip_proto == crate::neigh::nd::ICMPV6 && p.parsed.fragment == parse::Fragment::Whole;
        let (ip, l4) = (usize::from(p.parsed.l3_offset), usize::from(p.parsed.l4_offset));
        let advert = icmp && pool.frame(p.buf).get(l4) == Some(&crate::neigh::nd::NA);
        let to_all = dst == crate::neigh::nd::ALL_NODES && advert;
        if !(to_all || r.is_local6(&dst)) {
            return;
        }
        let len = (ip + usize::from(p.parsed.l3_len)).saturating_sub(l4);
        let action = match icmp {
            true => r.answer6(pool.frame_mut(p.buf), (ip, l4, len), p.ingress, now),
            false => ArpAction::Drop(DropReason::LocalUnsupported),
        };
        match action {
            ArpAction::Reply(to) => {
                p.dst = Dst::Mac(to);
                p.verdict = Verdict::Reply(p.ingress);
            }
            // Marked, and freed by `answer_local` once the batch has been looked at (the
            // router remembers that one was).
            ArpAction::Consumed => p.mark_taken(),
            ArpAction::Drop(reason) => p.verdict = Verdict::Drop(reason),
        }
    }

    /// An ARP frame on `port` (a chain with a router): a reply built in place joins the
    /// batch, the rest is consumed (counted as `ctl`) or dropped by reason.
    fn arp(&mut self, port: usize, pool: &mut Pool<'_>, counters: &mut StageCounters, b: PacketBuf, now: Instant) {
        let Some(r) = &mut self.router else { return Self::drop_frame(pool, counters, b, DropReason::ArpBad) };
        match r.arp(pool, b, port as u8, now) {
            ArpAction::Reply(to) => {
                let pkt = Pkt {
                    buf: b,
                    parsed: link_only(),
                    ingress: port as u8,
                    vid: 0,
                    verdict: Verdict::Reply(port as u8),
                    dst: Dst::Mac(to),
                };
                if let Err(p) = self.batch.push(pkt) {
                    Self::drop_frame(pool, counters, p.buf, DropReason::TxFull);
                }
            }
            ArpAction::Consumed => {
                counters.ctl += 1;
                let _ = pool.free(b);
            }
            ArpAction::Drop(reason) => Self::drop_frame(pool, counters, b, reason),
        }
    }

    /// Runs the admitted frames through the meter, the NFs and the egress.
    #[inline]
    pub fn run_admitted(&mut self, pool: &mut Pool<'_>, out: &mut [Batch], counters: &mut StageCounters, now: Instant) {
        if !self.batch.is_empty() {
            self.record_meter(now);
        }
        self.answer_local(pool, counters, now);
        self.run_tail(0, pool, out, counters, now);
    }

    /// Every admitted frame in its RSS bucket (after the parse loop, which stays the same
    /// with the meter off).
    #[inline]
    fn record_meter(&mut self, now: Instant) {
        if let Some(m) = &mut self.meter {
            for p in self.batch.pkts() {
                m.record(&p.parsed.flow, now);
            }
        }
    }

    /// NFs `from..to` (clamped to the chain) over the admitted frames.
    #[inline]
    fn run_nfs(&mut self, pool: &mut Pool<'_>, from: usize, to: usize, now: Instant) {
        let ctx = NfCtx { now };
        let to = to.min(self.nfs.len());
        for nf in self.nfs.get_mut(from.min(to)..to).unwrap_or(&mut []) {
            if self.batch.pkts().iter().any(Pkt::alive) {
                nf.process(&ctx, pool, &mut self.batch);
            }
        }
    }

    /// A whale's head (NetBlaze's split at `k`): the admitted frames through the meter and
    /// NFs `0..k`; each frame still alive goes to `hand` with the interface it arrived on (a
    /// sub-interface's tag is off by now), its verdict's port and the destination MAC an NF
    /// chose (the caller hands it to the core that runs the tail, see
    /// [`Chain::admit_tail`]); the dropped ones are freed and counted here.
    pub fn run_head(
        &mut self,
        k: usize,
        pool: &mut Pool<'_>,
        counters: &mut StageCounters,
        now: Instant,
        mut hand: impl FnMut(&mut Pool<'_>, PacketBuf, u8, u8, Option<[u8; 6]>),
    ) {
        if self.batch.is_empty() {
            return;
        }
        self.record_meter(now);
        self.answer_local(pool, counters, now);
        self.run_nfs(pool, 0, k, now);
        if let Some(r) = &mut self.router {
            r.begin_batch();
        }
        for p in self.batch.pkts() {
            match (p.verdict, p.dst) {
                (Verdict::Drop(reason), ..) => Self::drop_frame(pool, counters, p.buf, reason),
                // The tail's core holds no lane to queue on: only a cached neighbour goes.
                (Verdict::Forward(to), Dst::Via(_) | Dst::Via6(_)) => {
                    match self.router.as_ref().and_then(|r| Self::cached(r, p, to)) {
                        Some(mac) => hand(pool, p.buf, p.ingress, to, Some(mac)),
                        None => Self::drop_frame(pool, counters, p.buf, DropReason::NeighUnresolved),
                    }
                }
                (Verdict::Forward(to) | Verdict::Reply(to), dst) => hand(pool, p.buf, p.ingress, to, dst.mac()),
            }
        }
        self.batch.clear();
    }

    /// One frame whose head ran on another core ([`Chain::run_head`]), received on interface
    /// `port` (a sub-interface's: the frame arrived with its VID, whose tag the head took off):
    /// into the chain's batch with the head's verdict (`to`) and, if the head chose one
    /// (`dst_set`), the destination MAC the frame carries; a frame that no longer parses is
    /// dropped by reason.
    pub fn admit_tail(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        counters: &mut StageCounters,
        b: PacketBuf,
        to: u8,
        dst_set: bool,
    ) {
        let parsed = match super::parse_frame(pool, b, Depth::L4) {
            Ok(p) => p,
            Err(e) => return Self::drop_frame(pool, counters, b, e.into()),
        };
        let dst_mac = dst_set.then(|| pool.frame(b).get(..6).and_then(|d| d.try_into().ok())).flatten();
        let dst = dst_mac.map_or(Dst::Peer, Dst::Mac);
        let vid = self.egress.vlans.of(port).map_or(0, |(_, vid)| vid);
        let pkt = Pkt { buf: b, parsed, ingress: port as u8, vid, verdict: Verdict::Forward(to), dst };
        if let Err(p) = self.batch.push(pkt) {
            Self::drop_frame(pool, counters, p.buf, DropReason::TxFull);
        }
    }

    /// The tail: NFs `from..` over the admitted frames, then the egress.
    #[inline]
    pub fn run_tail(
        &mut self,
        from: usize,
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        now: Instant,
    ) {
        if self.batch.is_empty() {
            return;
        }
        self.run_nfs(pool, from, usize::MAX, now);
        self.egress(pool, out, counters, now);
    }

    /// Frees `b` and counts the drop.
    pub(super) fn drop_frame(pool: &mut Pool<'_>, counters: &mut StageCounters, b: PacketBuf, reason: DropReason) {
        Self::drop_inline(pool, counters, b, reason);
    }

    /// [`Chain::drop_frame`], inlined: for the loops that drop per packet (the egress
    /// without a router, a vector loop's `VectorTx::drop`), where a call per drop shows.
    #[inline(always)]
    pub(super) fn drop_inline(pool: &mut Pool<'_>, counters: &mut StageCounters, b: PacketBuf, reason: DropReason) {
        let _ = pool.free(b);
        counters.count_drop(reason, 1);
    }
}

impl Stage for Chain {
    fn process(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        input: &mut Batch,
        out: &mut [Batch],
        counters: &mut StageCounters,
        now: Instant,
    ) -> Commands {
        let mut commands = Commands::default();
        self.batch.clear();
        // With no NF (the L2 forwarder) a frame that parses goes straight to `send`: the
        // per-packet batch of parse results would only be written and read back, and only
        // whether the frame parses matters (`parse::check_to`, the same checks). One loop per
        // depth, so that the depth is not decided again per frame.
        if self.nfs.is_empty() && self.meter.is_none() && self.router.is_none() {
            match self.depth {
                Depth::L2 => self.forward_checked(Depth::L2, port, pool, input, out, counters, &mut commands),
                Depth::L3 => self.forward_checked(Depth::L3, port, pool, input, out, counters, &mut commands),
                Depth::L4 => self.forward_checked(Depth::L4, port, pool, input, out, counters, &mut commands),
            }
            input.clear();
            return commands;
        }
        if self.vector && self.nfs.first_mut().is_some_and(|nf| nf.vector_ready()) {
            self.process_vector(port, pool, input, out, counters, &mut commands, now);
            input.clear();
            return commands;
        }
        let depth = self.depth;
        // Tags are looked for only in a chain with sub-interfaces, decided once per batch.
        if self.egress.vlans.is_empty() && port < PORTS {
            let default_out = crate::stage::pair_of(port as u8);
            for &b in input.as_slice() {
                let parsed = super::parse_frame(pool, b, depth);
                self.admit_on((port, 0), default_out, pool, counters, &mut commands, b, parsed, now);
            }
        } else {
            let default_out = crate::stage::pair_of(port as u8);
            for &b in input.as_slice() {
                // A tagged frame is parsed once, after its tag is off (`admit_tagged`).
                if port < PORTS
                    && let Some(vid) = vlan::tag_of(pool.frame(b))
                {
                    self.admit_tagged(port, pool, counters, &mut commands, b, vid, now);
                    continue;
                }
                let parsed = super::parse_frame(pool, b, depth);
                self.admit_on((port, 0), default_out, pool, counters, &mut commands, b, parsed, now);
            }
        }
        input.clear();
        self.run_admitted(pool, out, counters, now);
        commands
    }

    fn idle(&mut self, pool: &mut Pool<'_>, out: &mut [Batch], counters: &mut StageCounters, now: Instant) {
        self.batch.clear();
        if let Some(r) = &mut self.router {
            let egress = &self.egress;
            r.housekeep(pool, now, &mut |pool, b, e| Self::emit(egress, pool, out, counters, b, e));
        }
        let ctx = NfCtx { now };
        for nf in &mut self.nfs {
            nf.generate(&ctx, pool, &mut self.batch);
        }
        if self.batch.is_empty() {
            return;
        }
        counters.generated = counters.generated.saturating_add(self.batch.len() as u64);
        self.egress(pool, out, counters, now);
    }

    fn enter_lane(&mut self, lane: usize) {
        if let Some(r) = &mut self.router {
            r.set_lane(lane);
        }
    }
}

/// The parse result a frame the chain answers without parsing it as IP (an ARP reply)
/// carries in the batch: its link header only; no NF reads it ([`Verdict::Reply`]).
fn link_only() -> Parsed {
    let none = IpAddr::V4([0; 4]);
    Parsed {
        l2: parse::L2 { vlans: Default::default(), vlan_count: 0, ethertype: 0x0806, len: 14 },
        l3: L3Kind::Ipv4,
        l3_offset: 14,
        l3_len: 0,
        l4_offset: 14,
        ip_proto: 0,
        fragment: parse::Fragment::Whole,
        l4: parse::L4Kind::Unparsed,
        flow: parse::FlowKey { src: none, dst: none, src_port: 0, dst_port: 0, proto: 0 },
        payload_offset: 14,
        payload_len: 0,
    }
}

impl Chain {
    /// The L2 forwarder's loop: each frame of `input` checked to `depth` (a constant at each
    /// call site once inlined) and sent out of the other port, or refused by reason.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn forward_checked(
        &self,
        depth: Depth,
        port: usize,
        pool: &mut Pool<'_>,
        input: &Batch,
        out: &mut [Batch],
        counters: &mut StageCounters,
        commands: &mut Commands,
    ) {
        // The port's pair and its link header (the peer's MAC, the port's own), once per batch.
        let to = (port < PORTS).then(|| usize::from(crate::stage::pair_of(port as u8)));
        let head = to.and_then(|t| self.macs.get(t)).copied();
        for &b in input.as_slice() {
            match (super::check_frame(pool, b, depth), to, head) {
                (Ok(()), Some(to), Some(head)) => Self::send_head(pool, out, counters, b, to, head),
                // Nowhere to send it: the caller named a port the chain does not have.
                (Ok(()), _, _) => Self::drop_frame(pool, counters, b, DropReason::TxFull),
                (Err(e), _, _) => Self::refuse(&self.egress, pool, counters, commands, port, b, e),
            }
        }
    }

    /// Writes `head` (destination and source MAC) into `buf`'s first 12 bytes and queues it
    /// on port `to`; an output slice without that port drops and counts it (`TxFull`).
    #[inline(always)]
    fn send_head(
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        buf: PacketBuf,
        to: usize,
        head: [u8; 12],
    ) {
        let Some(q) = out.get_mut(to) else {
            Self::drop_frame(pool, counters, buf, DropReason::TxFull);
            return;
        };
        if let Some(m) = pool.frame_mut(buf).first_chunk_mut::<12>() {
            *m = head;
        }
        if let Err(b) = q.push(buf) {
            Self::drop_frame(pool, counters, b, DropReason::TxFull);
        }
    }

    /// The vector path over one received batch: the NF's vector loop takes each run of
    /// common frames (IPv4, IPv6 if its loop takes them, every frame the chain admits if it
    /// takes those), the batch path each run of the others ([`Chain::admit`], then the
    /// NF's `process` and the egress), so frames leave in the order they came.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn process_vector(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        input: &Batch,
        out: &mut [Batch],
        counters: &mut StageCounters,
        commands: &mut Commands,
        now: Instant,
    ) {
        self.batch.clear();
        if port >= PORTS {
            // Nowhere to send anything: the caller named a port the chain does not have.
            for &b in input.as_slice() {
                Self::drop_frame(pool, counters, b, DropReason::TxFull);
            }
            return;
        }
        let (l4, depth, ctx) = (self.depth == Depth::L4, self.depth, NfCtx { now });
        let mut rest = input.as_slice();
        while !rest.is_empty() {
            let took = match self.nfs.first_mut() {
                Some(nf) => {
                    let mut tx = VectorTx { macs: &self.macs, out, counters, l4, depth, ingress: port as u8 };
                    nf.run_vector(&ctx, pool, rest, &mut tx)
                }
                None => 0,
            };
            rest = rest.get(took..).unwrap_or(&[]);
            // The frame the loop left (if any) and every following one up to the next common
            // frame: the batch path. Each round takes at least one frame.
            let mut first = true;
            while let Some((&b, after)) = rest.split_first() {
                let frame = pool.frame(b);
                let common = if self.vector_any {
                    VectorTx::admits_at(frame, depth)
                } else {
                    if l4 { parse::ipv4_dst::<true>(frame) } else { parse::ipv4_dst::<false>(frame) }.is_some()
                        || (self.vector6
                            && if l4 { parse::ipv6_flow::<true>(frame) } else { parse::ipv6_flow::<false>(frame) }
                                .is_some())
                };
                if common && !first {
                    break;
                }
                first = false;
                let parsed = super::parse_frame(pool, b, depth);
                self.admit(port, pool, counters, commands, b, parsed, now);
                rest = after;
            }
            self.run_admitted(pool, out, counters, now);
        }
    }

    /// Sends every alive packet of the batch to its output port (MAC rewrite: the NF's next
    /// hop, the neighbour [`Dst::Via`] names, or the port's peer as destination, the port's
    /// own MAC as source), drops and counts the rest, and empties the batch. A neighbour not
    /// in the worker's cache takes the slow path ([`Router::miss`]): the frame may wait for
    /// its answer.
    fn egress(&mut self, pool: &mut Pool<'_>, out: &mut [Batch], counters: &mut StageCounters, now: Instant) {
        let egress = &self.egress;
        // Without a router the loop is what it always was: decided once per batch.
        let Some(r) = &mut self.router else {
            for p in self.batch.pkts() {
                match p.verdict {
                    Verdict::Drop(reason) => Self::drop_inline(pool, counters, p.buf, reason),
                    Verdict::Forward(to) | Verdict::Reply(to) => {
                        Self::send(egress, pool, out, counters, p.buf, usize::from(to), p.dst.mac())
                    }
                }
            }
            self.batch.clear();
            return;
        };
        r.begin_batch();
        // A chain with VLAN sub-interfaces sends through `send_any`; one without does not
        // look (decided once per batch: two copies of the loop).
        if egress.vlans.is_empty() {
            Self::egress_routed::<false>(egress, r, &mut self.nfs, &self.batch, pool, out, counters, now);
        } else {
            Self::egress_routed::<true>(egress, r, &mut self.nfs, &self.batch, pool, out, counters, now);
        }
        self.batch.clear();
    }

    /// [`Chain::egress`] with a router; `VLANS`: the chain has sub-interfaces.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn egress_routed<const VLANS: bool>(
        egress: &Egress,
        r: &mut Router,
        nfs: &mut [Box<dyn Nf>],
        batch: &NfBatch,
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        now: Instant,
    ) {
        for p in batch.pkts() {
            let to = match p.verdict {
                Verdict::Drop(reason @ (DropReason::TtlExpired | DropReason::NoRoute)) => {
                    Self::icmp_error(egress, r, nfs, pool, out, counters, p, reason, now);
                    continue;
                }
                Verdict::Drop(reason) => {
                    Self::drop_frame(pool, counters, p.buf, reason);
                    continue;
                }
                Verdict::Forward(to) | Verdict::Reply(to) => to,
            };
            let ip_len = pool.frame_len(p.buf).saturating_sub(usize::from(p.parsed.l3_offset));
            if let Some(mtu) = r.too_big(to, ip_len) {
                Self::too_big(egress, r, nfs, pool, out, counters, p, to, mtu, now);
                continue;
            }
            Self::forward::<VLANS>(egress, r, pool, out, counters, p, p.buf, to, now);
        }
    }

    /// A packet the L3 forwarder dropped for TTL (hop limit) expiry or no route, in a chain
    /// with a router: becomes the ICMP (ICMPv6) error that says so, in place, sent back out
    /// of its ingress port to the frame's source MAC ([`Router::icmp_error`],
    /// [`Router::icmp_error6`], `crate::neigh::icmp`); dropped by `reason` when none may be
    /// sent. Out of line: the egress loop pays nothing more for the packets it sends.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn icmp_error(
        egress: &Egress,
        r: &mut Router,
        nfs: &mut [Box<dyn Nf>],
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        p: &Pkt,
        reason: DropReason,
        now: Instant,
    ) {
        let kind = match reason {
            DropReason::TtlExpired => icmp::Kind::TimeExceeded,
            _ => icmp::Kind::NetUnreachable,
        };
        if !Self::answer(egress, r, nfs, pool, out, counters, p, kind, now) {
            Self::drop_frame(pool, counters, p.buf, reason);
        }
    }

    /// Turns `p` into the ICMP (ICMPv6) error `kind` in place ([`Router::icmp_error`],
    /// [`Router::icmp_error6`]), hands it to the NFs ([`Nf::own_error`]) and sends it back out
    /// of the ingress port to the frame's source MAC; `false` (the buffer untouched, still
    /// the caller's) when no error may be sent.
    #[allow(clippy::too_many_arguments)]
    fn answer(
        egress: &Egress,
        r: &mut Router,
        nfs: &mut [Box<dyn Nf>],
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        p: &Pkt,
        kind: icmp::Kind,
        now: Instant,
    ) -> bool {
        let ip = usize::from(p.parsed.l3_offset);
        let sent = match p.parsed.l3 {
            L3Kind::Ipv4 => r.icmp_error(pool, p.buf, ip, p.ingress, kind, now),
            L3Kind::Ipv6 => {
                let later = p.parsed.fragment == parse::Fragment::Later;
                let at = (ip, p.parsed.ip_proto, usize::from(p.parsed.l4_offset), later);
                r.icmp_error6(pool, p.buf, at, p.ingress, kind, now)
            }
        };
        let Some(mac) = sent else { return false };
        Self::own_error(nfs, pool, p.buf, now);
        Self::send_any(egress, pool, out, counters, p.buf, usize::from(p.ingress), Some(mac));
        true
    }

    /// A packet longer than its egress port's MTU (counted, `neigh_too_big`): IPv4 without
    /// Don't Fragment is cut into fragments that fit ([`frag`]), each sent on as the packet
    /// would have been (the extra ones counted as generated); otherwise answered as path-MTU
    /// discovery asks — IPv4 with Don't Fragment gets ICMP "fragmentation needed" (RFC 1191),
    /// IPv6 ICMPv6 "packet too big" (RFC 8201), each carrying `mtu`, in place and back out of
    /// the ingress port — or dropped as `too_big` (no error allowed, or no buffer for a
    /// fragment).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn too_big(
        egress: &Egress,
        r: &mut Router,
        nfs: &mut [Box<dyn Nf>],
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        p: &Pkt,
        to: u8,
        mtu: u16,
        now: Instant,
    ) {
        r.count_too_big();
        let ip = usize::from(p.parsed.l3_offset);
        let df = pool.frame(p.buf).get(ip + 6).is_some_and(|f| f & 0x40 != 0);
        if p.parsed.l3 == L3Kind::Ipv4 && !df {
            // May be fragmented: each fragment goes on as the packet would have.
            let Some(frags) = frag::fragment4(pool, p.buf, ip, mtu) else {
                // (The pool ran short, or the header is malformed; a jumbo frame counted apart.)
                let why = if pool.is_segmented(p.buf) { DropReason::MultiBuffer } else { DropReason::TooBig };
                return Self::drop_frame(pool, counters, p.buf, why);
            };
            r.count_fragmented(frags.len());
            counters.generated = counters.generated.saturating_add(frags.len() as u64 - 1);
            for b in frags {
                Self::forward::<true>(egress, r, pool, out, counters, p, b, to, now);
            }
            return;
        }
        if !Self::answer(egress, r, nfs, pool, out, counters, p, icmp::Kind::TooBig(mtu), now) {
            Self::drop_frame(pool, counters, p.buf, DropReason::TooBig);
        }
    }

    /// Hands an ICMP error the chain built to the NFs, last first ([`Nf::own_error`]).
    fn own_error(nfs: &mut [Box<dyn Nf>], pool: &mut Pool<'_>, b: PacketBuf, now: Instant) {
        for nf in nfs.iter_mut().rev() {
            nf.own_error(pool, b, now);
        }
    }

    /// Sends `b` (the packet `p`, or a fragment of it) out of `to` to its next hop: the NF's
    /// MAC, the port's peer, or the neighbour [`Dst::Via`] / [`Dst::Via6`] names (a miss takes
    /// the table's slow path).
    /// `VLANS`: `to` may be a sub-interface ([`Chain::send_any`]).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn forward<const VLANS: bool>(
        egress: &Egress,
        r: &mut Router,
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        p: &Pkt,
        b: PacketBuf,
        to: u8,
        now: Instant,
    ) {
        let dst = match p.dst {
            Dst::Via(_) | Dst::Via6(_) => match Self::cached(r, p, to) {
                Some(mac) => Some(mac),
                None => return Self::egress_miss(egress, r, pool, out, counters, p, b, to, now),
            },
            Dst::Mac(m) => Some(m),
            Dst::Peer => None,
        };
        if VLANS {
            Self::send_any(egress, pool, out, counters, b, usize::from(to), dst);
        } else {
            Self::send(egress, pool, out, counters, b, usize::from(to), dst);
        }
    }

    /// The MAC of `p`'s [`Dst::Via`] or [`Dst::Via6`] neighbour behind `to` if the worker has
    /// it cached.
    fn cached(r: &Router, p: &Pkt, to: u8) -> Option<[u8; 6]> {
        match p.dst_neighbour()? {
            IpAddr::V4(ip) => r.lookup(ip, to),
            IpAddr::V6(ip) => r.lookup6(&ip, to),
        }
    }

    /// A packet whose neighbour is not in the worker's cache: the table's slow path (it may
    /// send it, keep it waiting, or drop it).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn egress_miss(
        egress: &Egress,
        r: &mut Router,
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        p: &Pkt,
        b: PacketBuf,
        to: u8,
        now: Instant,
    ) {
        let Some(ip) = p.dst_neighbour() else {
            return Self::drop_frame(pool, counters, b, DropReason::NeighUnresolved);
        };
        let mut emit = |pool: &mut Pool<'_>, b, e| Self::emit(egress, pool, out, counters, b, e);
        match r.miss(pool, b, ip, to, now, &mut emit) {
            Miss::Send(mac) => Self::send_any(egress, pool, out, counters, b, usize::from(to), Some(mac)),
            Miss::Queued => {}
            Miss::Drop(reason) => Self::drop_frame(pool, counters, b, reason),
        }
    }

    /// What the neighbour table asks of a frame: send it (a request it made counts as
    /// generated) or drop it.
    fn emit(
        egress: &Egress,
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        b: PacketBuf,
        e: Emit,
    ) {
        match e {
            Emit::Send { port, mac, generated } => {
                if generated {
                    counters.generated = counters.generated.saturating_add(1);
                }
                Self::send_any(egress, pool, out, counters, b, usize::from(port), Some(mac));
            }
            Emit::Drop(reason) => Self::drop_frame(pool, counters, b, reason),
        }
    }

    /// Sends `buf` out of port `to`: destination `dst_mac` or the port's peer, source the
    /// port's own MAC; a port the chain or the caller does not have drops and counts it.
    #[inline(always)]
    fn send(
        egress: &Egress,
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        buf: PacketBuf,
        to: usize,
        dst_mac: Option<[u8; 6]>,
    ) {
        let (Some(&own), Some(&peer)) = (egress.own_mac.get(to), egress.peer_mac.get(to)) else {
            Self::drop_frame(pool, counters, buf, DropReason::NoRoute);
            return;
        };
        // The caller's output slice has no batch for this port (the Stage contract).
        let Some(q) = out.get_mut(to) else {
            Self::drop_frame(pool, counters, buf, DropReason::TxFull);
            return;
        };
        // Destination and source are the frame's first 12 bytes: one write of both.
        if let Some(macs) = pool.frame_mut(buf).first_chunk_mut::<12>() {
            let (dst, src) = macs.split_at_mut(6);
            dst.copy_from_slice(&dst_mac.unwrap_or(peer));
            src.copy_from_slice(&own);
        }
        if let Err(b) = q.push(buf) {
            Self::drop_frame(pool, counters, b, DropReason::TxFull);
        }
    }

    /// [`Chain::send`] for a chain with a router, whose interfaces past the ports are VLAN
    /// sub-interfaces: their frames get the tag and leave by their port ([`Chain::tag_for`]).
    #[inline(always)]
    fn send_any(
        egress: &Egress,
        pool: &mut Pool<'_>,
        out: &mut [Batch],
        counters: &mut StageCounters,
        buf: PacketBuf,
        to: usize,
        dst_mac: Option<[u8; 6]>,
    ) {
        if to < PORTS {
            return Self::send(egress, pool, out, counters, buf, to, dst_mac);
        }
        match Self::tag_for(egress, pool, buf, to) {
            Ok(port) => Self::send(egress, pool, out, counters, buf, port, dst_mac),
            Err(reason) => Self::drop_frame(pool, counters, buf, reason),
        }
    }

    /// [`Chain::send`] to interface `to` past the ports: a declared sub-interface's tag is
    /// pushed ([`vlan::push`]) and its port returned; anything else is `NoRoute` (a frame with
    /// no headroom for the tag, which no driver delivers, `TxFull`).
    #[cold]
    #[inline(never)]
    fn tag_for(egress: &Egress, pool: &mut Pool<'_>, buf: PacketBuf, to: usize) -> Result<usize, DropReason> {
        let (port, vid) = egress.vlans.of(to).ok_or(DropReason::NoRoute)?;
        let port = usize::from(port);
        if port >= PORTS {
            return Err(DropReason::NoRoute);
        }
        if !vlan::push(pool, buf, vid) {
            return Err(DropReason::TxFull);
        }
        Ok(port)
    }
}

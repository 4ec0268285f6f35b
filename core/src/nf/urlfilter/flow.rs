//! The per-packet path of the URL filter: flow lookup, flow creation, reassembly, verdicts.

use super::http::{self, Outcome};
use super::rst;
use super::{
    ACK, Exhaustion, FIN, FlowState, Fragments, PROFILE_FLOW, PROFILE_HANDSHAKE, PROFILE_INSPECT, Phase, RST, Reading,
    SYN, Seg, Undecided, UrlFilter, UrlFilterCounters, UrlFilterShared,
};
use crate::buf::Pool;
use crate::checksum;
use crate::drops::DropReason;
use crate::nf::encrypt::KEY_WORDS;
use crate::nf::{Pkt, Verdict};
use crate::parse::{Fragment, IpAddr, L4Kind, PROTO_TCP};
use crate::pna::AddStatus;
use crate::pna::NotDone;
use crate::pna::exact::Local;
use crate::pna::p4::{Applied, EntryRef};
use crate::time::Instant;

/// Everything one packet needs besides the instance's buffers.
struct Step<'a, 'p, 'm> {
    shared: &'a UrlFilterShared,
    lane: &'a mut Local,
    counters: &'a mut UrlFilterCounters,
    pool: &'a mut Pool<'m>,
    p: &'p mut Pkt,
    now: Instant,
    seg: Seg,
    /// Whether the sender is the first endpoint of the canonical key.
    sender_first: bool,
    /// Room for the TCP segment of a frame over several buffers ([`segment`]).
    linear: &'a mut [u8],
}

/// The packet's TCP segment (header and payload): in its buffer, or — a frame over several
/// buffers (a jumbo frame) — copied into `linear` first, so that it is read as one piece.
/// `None` when the IP length runs past the frame (the parser has ruled that out).
fn segment<'s>(pool: &'s Pool<'_>, p: &Pkt, linear: &'s mut [u8]) -> Option<&'s [u8]> {
    let pr = p.parsed;
    let (l4, end) = (usize::from(pr.l4_offset), usize::from(pr.l3_offset) + usize::from(pr.l3_len));
    if !pool.is_segmented(p.buf) {
        return pool.frame(p.buf).get(l4..end);
    }
    let out = linear.get_mut(..end.checked_sub(l4)?)?;
    pool.copy_out(p.buf, l4, out).then_some(&*out)
}

/// Whether a TCP segment `seg` (header and payload) of the packet parsed as `pr` has the right
/// checksum (the pseudo-header and the whole segment sum to zero).
fn tcp_checksum_ok(pr: &crate::parse::Parsed, seg: &[u8]) -> bool {
    let sum = match (pr.flow.src, pr.flow.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => checksum::l4_checksum_v4(s, d, PROTO_TCP, seg),
        (IpAddr::V6(s), IpAddr::V6(d)) => checksum::l4_checksum_v6(&s, &d, PROTO_TCP, seg),
        _ => return false,
    };
    sum == 0
}

impl UrlFilter {
    /// Handles one alive packet.
    pub(super) fn packet(&mut self, now: Instant, pool: &mut Pool<'_>, p: &mut Pkt) {
        let Self { shared, lane, cursor, stream, url, linear, counters, .. } = self;
        let shared = &**shared;
        let pr = p.parsed;
        // A fragment of TCP, first or later (a later one carries no TCP header: its `l4` is
        // unparsed, but its IP protocol says TCP).
        if pr.fragment != Fragment::Whole && pr.flow.proto == PROTO_TCP {
            counters.fragments += 1;
            if shared.fragments == Fragments::Drop {
                p.verdict = Verdict::Drop(DropReason::UrlFragment);
            }
            return;
        }
        if pr.l4 != L4Kind::Tcp {
            counters.non_tcp += 1;
            return;
        }
        let f = pr.flow;
        if !shared.ports.is_empty() && !shared.ports.iter().any(|&x| x == f.dst_port || x == f.src_port) {
            counters.untracked += 1;
            return;
        }
        let l4 = usize::from(pr.l4_offset);
        let h = pool.frame(p.buf).get(l4..l4 + 14).unwrap_or(&[]);
        let word = |at: usize| h.get(at..at + 4).map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
        let seg = Seg { seq: word(4), ack: word(8), flags: h.get(13).copied().unwrap_or(0) };
        let sender_first = (f.src, f.src_port) <= (f.dst, f.dst_port);
        let tcp = crate::parse::FlowKey { proto: PROTO_TCP, ..f };
        let key: [u64; KEY_WORDS] = if sender_first { tcp.words() } else { tcp.reversed().words() };
        let mut st = Step { shared, lane, counters, pool, p, now, seg, sender_first, linear };
        // Miss → add → hit; an add that lost a race to another core (KeyExists) looks again.
        for _ in 0..3 {
            match shared.flows.apply(st.lane, &key, now) {
                Applied::Hit { action, entry } => return st.hit(action, &entry, cursor, stream, url),
                Applied::Miss { miss, .. } => {
                    let syn = seg.flags & SYN != 0;
                    let ack = seg.flags & ACK != 0;
                    if syn {
                        // A new connection: the client and offset 0 from the handshake; a flow
                        // entry that waits for data, no slab (module docs).
                        let (client_is_sender, base) =
                            if ack { (false, seg.ack) } else { (true, seg.seq.wrapping_add(1)) };
                        let client_first = client_is_sender == sender_first;
                        let state = FlowState { base, ..FlowState::verdict(Phase::Await, client_first) };
                        match shared.flows.add_entry(st.lane, &miss, &state, PROFILE_HANDSHAKE, now) {
                            AddStatus::Success => {
                                st.counters.handshakes += 1;
                                return;
                            }
                            AddStatus::NotDone(NotDone::KeyExists) => continue,
                            AddStatus::NotDone(why) => {
                                st.counters.count_full(why);
                                return st.exhausted(&miss, client_first);
                            }
                        }
                    }
                    if seg.flags & (RST | FIN) != 0 || pr.payload_len == 0 {
                        st.counters.untracked += 1;
                        return;
                    }
                    // Data of a flow not seen opening: the sender is the client, this segment
                    // starts the stream.
                    let client_first = sender_first;
                    let Some(slab) = shared.slabs.claim(cursor, now, shared.inspect_timeout) else {
                        st.counters.slab_exhausted += 1;
                        return st.exhausted(&miss, client_first);
                    };
                    let state = FlowState {
                        phase: Phase::Inspect,
                        client_first,
                        slab,
                        base: seg.seq,
                        read: Reading::Head,
                        switching: false,
                    };
                    match shared.flows.add_entry(st.lane, &miss, &state, PROFILE_INSPECT, now) {
                        AddStatus::Success => {
                            st.counters.inspected += 1;
                            st.counters.midstream += 1;
                        }
                        AddStatus::NotDone(NotDone::KeyExists) => shared.slabs.release(slab),
                        AddStatus::NotDone(why) => {
                            shared.slabs.release(slab);
                            st.counters.count_full(why);
                            return st.exhausted(&miss, client_first);
                        }
                    }
                }
            }
        }
    }
}

impl UrlFilterCounters {
    /// A new flow the table refused, by the table's reason.
    fn count_full(&mut self, why: NotDone) {
        self.table_full += 1;
        match why {
            NotDone::TableFull => self.full_capacity += 1,
            NotDone::BucketFull => self.full_bucket += 1,
            _ => self.full_busy += 1,
        }
    }
}

impl Step<'_, '_, '_> {
    /// No slab or no flow entry for a new flow.
    fn exhausted(&mut self, miss: &crate::pna::exact::Miss<KEY_WORDS>, client_first: bool) {
        match self.shared.on_exhaustion {
            Exhaustion::Drop => self.p.verdict = Verdict::Drop(DropReason::FlowTableFull),
            Exhaustion::Allow => {
                let allow = FlowState::verdict(Phase::Allow, client_first);
                // Short-lived (the handshake timeout, restarted by the flow's packets): once the
                // pressure is over, the flow's next request is picked up and read; a flood's
                // entries never outlast it by more than that.
                let _ = self.shared.flows.add_entry(self.lane, miss, &allow, PROFILE_HANDSHAKE, self.now);
            }
        }
    }

    fn hit(
        &mut self,
        st: FlowState,
        entry: &EntryRef<KEY_WORDS>,
        cursor: &mut usize,
        stream: &mut [u8],
        url: &mut [u8],
    ) {
        let from_client = self.sender_first == st.client_first;
        let flows = &self.shared.flows;
        match st.phase {
            // The handshake's other packets, and the server's, pass; the client's renew it.
            Phase::Await if !from_client => {}
            Phase::Await if self.p.parsed.payload_len == 0 => {
                let _ = flows.restart_expire_timer(self.lane, entry, self.now);
            }
            // The client's first data: now the flow needs a slab.
            Phase::Await => {
                let shared = self.shared;
                let Some(slab) = shared.slabs.claim(cursor, self.now, shared.inspect_timeout) else {
                    self.counters.slab_exhausted += 1;
                    return match shared.on_exhaustion {
                        // This segment is dropped; the flow keeps waiting, and the client's
                        // retransmission tries for a slab again.
                        Exhaustion::Drop => self.p.verdict = Verdict::Drop(DropReason::FlowTableFull),
                        Exhaustion::Allow => {
                            let _ = flows.update(
                                self.lane,
                                entry,
                                &FlowState::verdict(Phase::Allow, st.client_first),
                                self.now,
                            );
                            // Short-lived, as in `exhausted`.
                            let _ = flows.set_entry_expire_time(self.lane, entry, PROFILE_HANDSHAKE, self.now);
                        }
                    };
                };
                let inspect = FlowState { phase: Phase::Inspect, slab, ..st };
                if flows.update(self.lane, entry, &inspect, self.now).is_err() {
                    // The entry went away under us (expired and taken by a sweep): the next
                    // segment starts over.
                    shared.slabs.release(slab);
                    return;
                }
                let _ = flows.set_entry_expire_time(self.lane, entry, PROFILE_INSPECT, self.now);
                self.counters.inspected += 1;
                self.inspect(inspect, entry, stream, url);
            }
            Phase::Allow => {
                let _ = flows.restart_expire_timer(self.lane, entry, self.now);
            }
            Phase::Block => {
                let _ = flows.restart_expire_timer(self.lane, entry, self.now);
                self.block(from_client);
            }
            // The server's packets pass and leave the inspection timer alone (it runs with the
            // slab's lease, which only the client's packets renew).
            Phase::Inspect if !from_client => {}
            Phase::Inspect => self.inspect(st, entry, stream, url),
        }
    }

    /// A packet of a blocked flow: dropped, or (from the client, with `reset`) turned into a
    /// reset toward the client.
    fn block(&mut self, from_client: bool) {
        if self.shared.reset && from_client && self.seg.flags & RST == 0 {
            let frame = self.pool.frame_mut(self.p.buf);
            let mac: [u8; 6] = frame.get(6..12).and_then(|m| m.try_into().ok()).unwrap_or([0; 6]);
            if let Some(len) = rst::rewrite(frame, &mut self.p.parsed)
                && self.pool.set_len(self.p.buf, len).is_ok()
            {
                // The reset is the first buffer's headers alone: a jumbo segment's other
                // buffers go back.
                self.pool.trim_segments(self.p.buf);
                self.counters.resets += 1;
                self.p.dst = crate::nf::Dst::Mac(mac);
                self.p.verdict = Verdict::Forward(self.p.ingress);
                return;
            }
        }
        self.counters.blocked_pkts += 1;
        self.p.verdict = Verdict::Drop(DropReason::UrlBlocked);
    }

    /// Moves the flow to `phase` and gives its slab back.
    fn finish(&mut self, st: FlowState, entry: &EntryRef<KEY_WORDS>, phase: Phase) {
        let flows = &self.shared.flows;
        let _ = flows.update(self.lane, entry, &FlowState::verdict(phase, st.client_first), self.now);
        let _ = flows.set_entry_expire_time(self.lane, entry, PROFILE_FLOW, self.now);
        self.shared.slabs.release(st.slab);
    }

    /// A stream the filter could not read a URL from: [`Undecided`] says (module docs).
    fn undecided(&mut self, st: FlowState, entry: &EntryRef<KEY_WORDS>) {
        match self.shared.undecided {
            Undecided::Allow => self.finish(st, entry, Phase::Allow),
            Undecided::Deny => {
                self.counters.undecided_denied += 1;
                self.finish(st, entry, Phase::Block);
                self.block(true);
            }
        }
    }

    /// A client packet of a flow under inspection.
    fn inspect(&mut self, st: FlowState, entry: &EntryRef<KEY_WORDS>, stream: &mut [u8], url: &mut [u8]) {
        let shared = self.shared;
        if !shared.slabs.renew(st.slab, self.now, shared.inspect_timeout) {
            // The slab went to another flow: this one cannot be read any more.
            self.counters.lost += 1;
            let phase = match shared.undecided {
                Undecided::Deny => {
                    self.counters.undecided_denied += 1;
                    Phase::Block
                }
                Undecided::Allow => Phase::Allow,
            };
            let _ = shared.flows.update(self.lane, entry, &FlowState::verdict(phase, st.client_first), self.now);
            let _ = shared.flows.set_entry_expire_time(self.lane, entry, PROFILE_FLOW, self.now);
            if phase == Phase::Block {
                self.block(true);
            }
            return;
        }
        let _ = shared.flows.restart_expire_timer(self.lane, entry, self.now);
        let pr = self.p.parsed;
        if pr.payload_len == 0 {
            return;
        }
        // Only bytes the server's TCP would accept go into the stream: a segment without ACK
        // (except data on a SYN) or with a bad checksum is discarded by the receiver, so a
        // filter that read it would read a stream the server never sees (insertion).
        let seg = segment(self.pool, self.p, self.linear);
        let Some(seg) = seg.filter(|s| self.seg.flags & (ACK | SYN) != 0 && tcp_checksum_ok(&pr, s)) else {
            self.counters.discarded += 1;
            return;
        };
        // Place the payload by sequence number; bytes before offset 0 are cut off.
        let start = self.seg.seq.wrapping_add(u32::from(self.seg.flags & SYN != 0));
        let rel = start.wrapping_sub(st.base);
        let (skip, off) = if (rel as i32) < 0 { (rel.wrapping_neg() as usize, 0) } else { (0, rel as usize) };
        // The payload's place in the segment.
        let po = usize::from(pr.payload_offset).saturating_sub(usize::from(pr.l4_offset));
        let data = seg.get(po + skip..po + usize::from(pr.payload_len)).unwrap_or(&[]);
        if data.is_empty() || off >= shared.slabs.window() {
            return;
        }
        let (_, grew, conflict) = shared.slabs.write_checked(st.slab, off, data);
        if conflict {
            // Different bytes for the same stream offsets: which copy the server keeps depends
            // on its TCP stack (and on timing), so no reading of the stream can be trusted.
            self.counters.conflicts += 1;
            self.finish(st, entry, Phase::Block);
            return self.block(true);
        }
        if !grew {
            return;
        }
        // Every request on the connection (keep-alive, pipelining): read what stream offset 0
        // starts, then move offset 0 past it and read on, until the bytes run out.
        let mut st = st;
        loop {
            let n = shared.slabs.read_prefix(st.slab, stream);
            let full = n >= shared.slabs.window();
            let s = stream.get(..n).unwrap_or(&[]);
            let next = match st.read {
                Reading::Head => match http::analyse(s, full, url) {
                    Outcome::Wait => return,
                    Outcome::NotHttp if st.switching => {
                        // The protocol the last request asked for: let the connection go.
                        self.counters.switched += 1;
                        self.finish(st, entry, Phase::Allow);
                        return;
                    }
                    Outcome::NotHttp => {
                        self.counters.not_http += 1;
                        // Not HTTP at all: allowed, unless the port was declared an HTTP port.
                        if shared.ports.is_empty() {
                            self.finish(st, entry, Phase::Allow);
                        } else {
                            self.undecided(st, entry);
                        }
                        return;
                    }
                    Outcome::GaveUp => {
                        self.counters.gave_up += 1;
                        return self.undecided(st, entry);
                    }
                    Outcome::NoHost => {
                        self.counters.no_host += 1;
                        return self.undecided(st, entry);
                    }
                    Outcome::Url(k) => {
                        if shared.banned(url.get(..k).unwrap_or(&[])) {
                            self.counters.blocked += 1;
                            self.finish(st, entry, Phase::Block);
                            return self.block(true);
                        }
                        match http::next_request(s, full) {
                            // Allowed, once its head is complete (counted then).
                            http::Next::Wait => return,
                            http::Next::At(x) => (x, Reading::Head, false),
                            http::Next::Chunked(x) => (x as u64, Reading::Chunk, false),
                            http::Next::Switch(x) => (x as u64, Reading::Head, true),
                            http::Next::Unframed => {
                                self.counters.unframed += 1;
                                return self.undecided(st, entry);
                            }
                        }
                    }
                },
                Reading::Chunk => match http::chunk(s, full) {
                    http::Chunk::Wait => return,
                    http::Chunk::Data(x) => (x, Reading::Chunk, false),
                    http::Chunk::Last(x) => (x as u64, Reading::Trailers, false),
                    http::Chunk::Bad => {
                        self.counters.unframed += 1;
                        return self.undecided(st, entry);
                    }
                },
                Reading::Trailers => match http::trailers(s) {
                    Some(x) => (x as u64, Reading::Head, false),
                    None if full => {
                        self.counters.unframed += 1;
                        return self.undecided(st, entry);
                    }
                    None => return,
                },
            };
            let (x, read, switching) = next;
            if st.read == Reading::Head {
                self.counters.allowed += 1;
            }
            if x >= 1 << 30 {
                // A body past a gigabyte: beyond what sequence numbers place safely.
                self.counters.unframed += 1;
                return self.undecided(st, entry);
            }
            shared.slabs.consume(st.slab, x as usize);
            st = FlowState { base: st.base.wrapping_add(x as u32), read, switching, ..st };
            if shared.flows.update(self.lane, entry, &st, self.now).is_err() {
                return;
            }
        }
    }
}

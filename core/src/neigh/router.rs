//! One worker's handle on the neighbour table ([`Router`]): its cache of resolved neighbours
//! (the fast path), the slow path of a miss, ARP and IPv6 neighbour discovery received,
//! housekeeping (`crate::neigh` module docs).

use alloc::sync::Arc;
use core::fmt;
use core::sync::atomic::Ordering;

use super::arp::{self, Arp};
use super::table::{Entry, Table, Waiting};
use super::{NeighShared, State};
use crate::buf::{HEADROOM, PacketBuf, Pool};
use crate::drops::DropReason;
use crate::parse::IpAddr;
use crate::time::Instant;

mod errors;

/// Entries of a worker's cache of resolved neighbours (a power of two).
const CACHE: usize = 64;
/// Entries of a worker's cache of resolved IPv6 neighbours (a power of two; kept apart so
/// that the IPv4 lookup stays one compare of one word).
const CACHE6: usize = 16;

/// What one worker's neighbour handling counted (summed over workers in the reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NeighCounters {
    /// New entries from ARP frames addressed to us.
    pub learned: u64,
    /// Existing entries refreshed or changed by ARP.
    pub updated: u64,
    /// Incomplete entries an answer resolved.
    pub resolved: u64,
    /// ARP requests for our addresses answered.
    pub arp_replies: u64,
    /// ARP requests sent (misses, retransmissions).
    pub arp_requests: u64,
    /// ARP replies nobody asked for (ignored).
    pub arp_unsolicited: u64,
    /// A new neighbour refused: the table was full.
    pub table_full: u64,
    /// Frames queued for a neighbour being resolved.
    pub queued: u64,
    /// Queued frames sent once their neighbour answered.
    pub dequeued: u64,
    /// ICMP (and ICMPv6) echo requests to our addresses answered.
    pub echo_replies: u64,
    /// IPv6 neighbour solicitations for our addresses answered.
    pub nd_adverts: u64,
    /// IPv6 neighbour solicitations sent (misses, retransmissions).
    pub nd_solicits: u64,
    /// IPv6 neighbours resolved by an advertisement (or a solicitation from them; also in
    /// `resolved`).
    pub nd_resolved: u64,
    /// IPv6 neighbour advertisements for an address with no entry (ignored).
    pub nd_unsolicited: u64,
    /// No buffer for an ARP request.
    pub no_buf: u64,
    /// ICMP errors sent (time exceeded, destination unreachable; [`super::icmp`]).
    pub icmp_errors: u64,
    /// ICMP errors not sent: the port's token bucket was empty.
    pub icmp_suppressed: u64,
    /// Packets longer than their egress port's MTU (`port.mtu`): fragmented, answered with
    /// an ICMP error, or dropped as `too_big`.
    pub too_big: u64,
    /// Of those, IPv4 packets without Don't Fragment cut into fragments.
    pub fragmented: u64,
    /// The fragments they were cut into.
    pub fragments: u64,
}

/// What the chain does with an ARP frame ([`Router::arp`]) or an IPv6 packet addressed to
/// the dataplane ([`Router::answer6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpAction {
    /// The frame is now the reply: send it out of its ingress port to this MAC.
    Reply([u8; 6]),
    /// Taken (learned from, a gratuitous update, an advertisement): free it, counted as
    /// consumed.
    Consumed,
    /// Drop it by this reason.
    Drop(DropReason),
}

/// What [`Router::miss`] and [`Router::housekeep`] ask the chain to do with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// Send it out of `port` to `mac` (`generated`: a request the dataplane made, counted as
    /// generated; otherwise a frame that waited for its neighbour).
    Send {
        /// The port.
        port: u8,
        /// Its destination MAC.
        mac: [u8; 6],
        /// Whether the dataplane originated it.
        generated: bool,
    },
    /// Free it, counted under this reason.
    Drop(DropReason),
}

/// The broadcast MAC ARP requests go to.
pub const BROADCAST: [u8; 6] = [0xFF; 6];

/// What became of a frame whose neighbour is not in the worker's cache ([`Router::miss`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// The neighbour is known after all: send to this MAC.
    Send([u8; 6]),
    /// The frame waits in the table (it is no longer the caller's).
    Queued,
    /// Drop it by this reason.
    Drop(DropReason),
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// [`slot_key`] of the neighbour; 0 (no valid key) when empty.
    key: u64,
    mac: [u8; 6],
}

/// An IPv6 neighbour in a worker's cache.
#[derive(Debug, Clone, Copy, Default)]
struct Slot6 {
    addr: [u8; 16],
    /// The port plus one; 0 when empty.
    port: u16,
    mac: [u8; 6],
}

#[inline(always)]
fn slot6_of(ip: &[u8; 16]) -> usize {
    let low = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]) ^ u32::from_be_bytes([ip[8], ip[9], ip[10], ip[11]]);
    (low.wrapping_mul(0x9E37_79B1) >> 28) as usize % CACHE6
}

/// A cache key: address, port and a valid bit in one word (one compare per lookup).
#[inline(always)]
fn slot_key(ip: [u8; 4], port: u8) -> u64 {
    1 << 40 | u64::from(port) << 32 | u64::from(u32::from_be_bytes(ip))
}

/// One worker's handle on the neighbour table: its cache of resolved neighbours, the lane
/// it holds, its counters.
#[derive(Debug)]
pub struct Router {
    shared: Arc<NeighShared>,
    /// The ports' MTUs (`NeighConfig::mtu`), kept here for the egress's per-packet check.
    mtu: [u16; crate::vlan::IFACES],
    generation: u64,
    cache: [Slot; CACHE],
    cache6: [Slot6; CACHE6],
    /// [`Router::answer6`] took a packet of the current batch (the chain frees it).
    consumed: bool,
    lane: Option<u16>,
    counters: NeighCounters,
}

#[inline(always)]
fn slot_of(ip: [u8; 4]) -> usize {
    (u32::from_be_bytes(ip).wrapping_mul(0x9E37_79B1) >> 26) as usize % CACHE
}

impl Router {
    /// A worker's handle on `shared` (no lane until [`Router::set_lane`]).
    pub fn new(shared: Arc<NeighShared>) -> Self {
        let mtu = shared.cfg.mtu;
        Self {
            shared,
            mtu,
            generation: u64::MAX,
            cache: [Slot::default(); CACHE],
            cache6: [Slot6::default(); CACHE6],
            consumed: false,
            lane: None,
            counters: Default::default(),
        }
    }

    /// Counts a packet cut into `n` fragments.
    pub fn count_fragmented(&mut self, n: usize) {
        self.counters.fragmented += 1;
        self.counters.fragments += n as u64;
    }

    /// Counts a packet longer than its egress port's MTU.
    pub fn count_too_big(&mut self) {
        self.counters.too_big += 1;
    }

    /// `port`'s MTU if an IP packet of `ip_len` bytes is longer than it.
    #[inline(always)]
    pub fn too_big(&self, port: u8, ip_len: usize) -> Option<u16> {
        let mtu = self.mtu.get(usize::from(port)).copied().unwrap_or(super::DEFAULT_MTU);
        (ip_len > usize::from(mtu)).then_some(mtu)
    }

    /// The shared table.
    pub fn shared(&self) -> &Arc<NeighShared> {
        &self.shared
    }

    /// This worker's counters.
    pub fn counters(&self) -> &NeighCounters {
        &self.counters
    }

    /// The lane whose pool and rings the next batches use (`Stage::enter_lane`).
    pub fn set_lane(&mut self, lane: usize) {
        self.lane = u16::try_from(lane).ok();
    }

    /// Once per batch: drops the cache if the table's resolved mappings changed.
    #[inline]
    pub fn begin_batch(&mut self) {
        let g = self.shared.generation.load(Ordering::Acquire);
        if g != self.generation {
            self.cache = [Slot::default(); CACHE];
            self.cache6 = [Slot6::default(); CACHE6];
            self.generation = g;
        }
    }

    /// The fast path: the MAC of `ip` behind `port`, if this worker has it cached.
    #[inline(always)]
    pub fn lookup(&self, ip: [u8; 4], port: u8) -> Option<[u8; 6]> {
        let s = self.cache.get(slot_of(ip))?;
        (s.key == slot_key(ip, port)).then_some(s.mac)
    }

    /// The MAC of the IPv6 neighbour `ip` behind `port`, if this worker has it cached.
    #[inline]
    pub fn lookup6(&self, ip: &[u8; 16], port: u8) -> Option<[u8; 6]> {
        let s = self.cache6.get(slot6_of(ip))?;
        (s.port == u16::from(port) + 1 && s.addr == *ip).then_some(s.mac)
    }

    /// Whether [`Router::answer6`] took a packet since the last call (the caller frees the
    /// packets it marked).
    #[inline]
    pub fn take_consumed(&mut self) -> bool {
        core::mem::take(&mut self.consumed)
    }

    /// Whether `ip` is one of the dataplane's own addresses.
    #[inline]
    pub fn is_own(&self, ip: [u8; 4]) -> bool {
        self.shared.is_own(ip)
    }

    /// Whether `ip` is one of our IPv6 addresses or its solicited-node multicast address.
    #[inline]
    pub fn is_local6(&self, ip: &[u8; 16]) -> bool {
        !self.shared.cfg.addrs6.is_empty() && self.shared.is_local6(ip)
    }

    /// The IPv6 packet at `ip` (ICMPv6 at `icmp`, `len` bytes) of `frame`, received on `port`
    /// and addressed to us (or to all nodes): a solicitation for one of the port's addresses
    /// or an echo request becomes its answer in place (counted; a solicitation with a source
    /// link-layer address teaches us its sender, `NeighShared::solicited_by`); an
    /// advertisement resolves or updates the entry of its target (RFC 4861 §7.2.5; one we
    /// have no entry for is ignored, counted, `nd_unsolicited`; one §7.1.2 discards is
    /// `nd_bad`); anything else is `local_unsupported`.
    pub fn answer6(
        &mut self,
        frame: &mut [u8],
        (ip, icmp, len): (usize, usize, usize),
        port: u8,
        now: Instant,
    ) -> ArpAction {
        let shared = Arc::clone(&self.shared);
        if frame.get(icmp) == Some(&super::nd::NA) {
            let Some(a) = super::nd::Advert::parse(frame, ip, icmp, len) else {
                return ArpAction::Drop(DropReason::NdBad);
            };
            return match shared.advertised(port, &a, now, &mut self.counters) {
                Ok(()) => {
                    self.consumed = true;
                    ArpAction::Consumed
                }
                Err(reason) => {
                    if reason == DropReason::NdUnsolicited {
                        self.counters.nd_unsolicited += 1;
                    }
                    ArpAction::Drop(reason)
                }
            };
        }
        let Some(&own_mac) = shared.own_mac.get(usize::from(port)) else {
            return ArpAction::Drop(DropReason::LocalUnsupported);
        };
        let heard = super::nd::solicitor(frame, ip, icmp, len);
        match super::nd::reply_in_place(frame, ip, icmp, len, own_mac, |a| shared.owned_by6(port, a)) {
            Some(super::nd::Answer::Advertisement(to)) => {
                self.counters.nd_adverts += 1;
                if let Some((src, mac)) = heard {
                    shared.solicited_by(port, src, mac, now, &mut self.counters);
                }
                ArpAction::Reply(to)
            }
            Some(super::nd::Answer::EchoReply(to)) => {
                self.counters.echo_replies += 1;
                ArpAction::Reply(to)
            }
            None => ArpAction::Drop(DropReason::LocalUnsupported),
        }
    }

    /// Counts an ICMP echo answered.
    pub fn count_echo(&mut self) {
        self.counters.echo_replies += 1;
    }

    /// Builds a request for `ip` out of `port` in a fresh buffer of `pool`: an ARP request
    /// (broadcast) for IPv4, a neighbour solicitation (to the solicited-node multicast
    /// address, [`super::nd::solicit`]) for IPv6. Returns it and its destination MAC (`None`:
    /// no buffer, or the port has no address of the family to ask from).
    fn request(&mut self, pool: &mut Pool<'_>, port: u8, ip: IpAddr) -> Option<(PacketBuf, [u8; 6])> {
        let own_mac = *self.shared.own_mac.get(usize::from(port))?;
        let src = match ip {
            IpAddr::V4(ip) => IpAddr::V4(self.shared.source_for(port, ip)?),
            IpAddr::V6(ip) => IpAddr::V6(self.shared.source_for6(port, &ip)?),
        };
        let Some(b) = pool.alloc() else {
            self.counters.no_buf += 1;
            return None;
        };
        let built = match (src, ip) {
            (IpAddr::V4(from), IpAddr::V4(ip)) => {
                pool.set_frame(b, HEADROOM, arp::MIN_FRAME_LEN).is_ok()
                    && arp::request(pool.frame_mut(b), own_mac, from, ip)
                    && {
                        self.counters.arp_requests += 1;
                        true
                    }
            }
            (IpAddr::V6(from), IpAddr::V6(ip)) => {
                pool.set_frame(b, HEADROOM, super::nd::NS_FRAME_LEN).is_ok()
                    && super::nd::solicit(pool.frame_mut(b), own_mac, from, ip)
                    && {
                        self.counters.nd_solicits += 1;
                        true
                    }
            }
            _ => false,
        };
        if !built {
            let _ = pool.free(b);
            return None;
        }
        let to = match ip {
            IpAddr::V4(_) => BROADCAST,
            IpAddr::V6(ip) => super::nd::multicast_mac(&super::nd::solicited_node(&ip)),
        };
        Some((b, to))
    }

    /// The slow path for `buf`, to go to `ip` behind `port`: the table's entry if it is
    /// usable (cached from now on); else the frame waits (a new incomplete entry asks at
    /// once, an incomplete one asks again when `retrans` has passed — each request goes to
    /// `emit` with its port). Takes the lock.
    pub fn miss(
        &mut self,
        pool: &mut Pool<'_>,
        buf: PacketBuf,
        ip: IpAddr,
        port: u8,
        now: Instant,
        emit: &mut dyn FnMut(&mut Pool<'_>, PacketBuf, Emit),
    ) -> Miss {
        let shared = Arc::clone(&self.shared);
        let mut t = shared.table.lock();
        let found = t.find(ip);
        if let Some(e) = found.and_then(|i| t.entries.get(i))
            && e.state.usable()
        {
            if e.port != port {
                // Known behind another port than the route names: a configuration at odds
                // with the network; not guessed at.
                return Miss::Drop(DropReason::NeighUnresolved);
            }
            let mac = e.mac;
            drop(t);
            match ip {
                IpAddr::V4(ip) => {
                    if let Some(s) = self.cache.get_mut(slot_of(ip)) {
                        *s = Slot { key: slot_key(ip, port), mac };
                    }
                }
                IpAddr::V6(addr) => {
                    if let Some(s) = self.cache6.get_mut(slot6_of(&addr)) {
                        *s = Slot6 { addr, port: u16::from(port) + 1, mac };
                    }
                }
            }
            return Miss::Send(mac);
        }
        // Nothing to ask from: the port has no address of the family (RFC 4861 §7.2.2 asks
        // from one of the outgoing interface's addresses).
        let sourced = match ip {
            IpAddr::V4(a) => shared.source_for(port, a).is_some(),
            IpAddr::V6(a) => shared.source_for6(port, &a).is_some(),
        };
        // Waiting needs the lane whose pool the buffer is of.
        let (true, Some(lane)) = (sourced, self.lane) else { return Miss::Drop(DropReason::NeighUnresolved) };
        let i = match found {
            Some(i) => i,
            None if t.entries.len() >= shared.cfg.capacity => {
                self.counters.table_full += 1;
                return Miss::Drop(DropReason::NeighUnresolved);
            }
            None => {
                t.entries.push(Entry {
                    ip,
                    port,
                    mac: [0; 6],
                    state: State::Incomplete,
                    since: Instant(0),
                    probes: 0,
                    queue: heapless::Vec::new(),
                });
                t.entries.len() - 1
            }
        };
        let Table { entries, waiting } = &mut *t;
        let Some(e) = entries.get_mut(i) else { return Miss::Drop(DropReason::NeighUnresolved) };
        let retrans = shared.cfg.retrans;
        let due = e.probes == 0 || now.saturating_since(e.since) >= retrans;
        // A failed neighbour is asked again at most once per `retrans`.
        if e.state == State::Failed && !due {
            return Miss::Drop(DropReason::NeighUnresolved);
        }
        // Bounded per neighbour and over the table: waiting frames hold a lane's buffers.
        if *waiting >= shared.cfg.max_waiting || e.queue.push(Waiting { lane, buf }).is_err() {
            return Miss::Drop(DropReason::NeighQueueFull);
        }
        *waiting += 1;
        self.counters.queued += 1;
        if e.state == State::Failed {
            (e.state, e.probes) = (State::Incomplete, 0);
        }
        if due {
            (e.since, e.probes) = (now, e.probes.saturating_add(1));
            drop(t);
            if let Some((r, mac)) = self.request(pool, port, ip) {
                emit(pool, r, Emit::Send { port, mac, generated: true });
            }
        }
        Miss::Queued
    }

    /// An ARP frame `buf` received on `port`: answer a request for one of the port's
    /// addresses in place, learn from frames addressed to us, update an existing entry from a
    /// gratuitous announcement; ignore (and count) replies nobody asked for and frames for
    /// addresses we do not own.
    pub fn arp(&mut self, pool: &mut Pool<'_>, buf: PacketBuf, port: u8, now: Instant) -> ArpAction {
        let Some(a) = Arp::parse(pool.frame(buf)) else { return ArpAction::Drop(DropReason::ArpBad) };
        let shared = Arc::clone(&self.shared);
        let for_us = shared.owned_by(port, a.tpa);
        if !for_us {
            // Gratuitous: refreshes an entry we have, never makes one (RFC 5227 §2.4: hosts
            // update caches from announcements; a router need not learn every host).
            if a.is_gratuitous() && shared.learn(port, IpAddr::V4(a.spa), a.sha, false, now, &mut self.counters) {
                return ArpAction::Consumed;
            }
            return ArpAction::Drop(DropReason::ArpNotOurs);
        }
        match a.op {
            arp::OP_REQUEST => {
                shared.learn(port, IpAddr::V4(a.spa), a.sha, true, now, &mut self.counters);
                let Some(&own) = shared.own_mac.get(usize::from(port)) else {
                    return ArpAction::Drop(DropReason::ArpBad);
                };
                match arp::reply_in_place(pool.frame_mut(buf), &a, own) {
                    Some(to) => {
                        self.counters.arp_replies += 1;
                        ArpAction::Reply(to)
                    }
                    None => ArpAction::Drop(DropReason::ArpBad),
                }
            }
            _ => {
                // A reply: only one we asked for (an entry exists and is not static) counts.
                let asked = {
                    let t = shared.table.lock();
                    let e = t.find(IpAddr::V4(a.spa)).and_then(|i| t.entries.get(i));
                    e.is_some_and(|e| e.state != State::Static)
                };
                if asked && shared.learn(port, IpAddr::V4(a.spa), a.sha, false, now, &mut self.counters) {
                    ArpAction::Consumed
                } else {
                    self.counters.arp_unsolicited += 1;
                    ArpAction::Drop(DropReason::ArpUnsolicited)
                }
            }
        }
    }

    /// Housekeeping, once per poll on the lane this worker holds: sends or drops (through
    /// `emit`) the frames of this lane whose neighbour answered or failed; at most once per
    /// `retrans` over all workers, ages the table and asks incomplete neighbours again.
    pub fn housekeep(
        &mut self,
        pool: &mut Pool<'_>,
        now: Instant,
        emit: &mut dyn FnMut(&mut Pool<'_>, PacketBuf, Emit),
    ) {
        let Some(lane) = self.lane else { return };
        self.age(pool, now, emit);
        self.flush(lane, pool, emit);
    }

    /// Sends or drops the frames of `lane` whose neighbour answered or failed.
    fn flush(&mut self, lane: u16, pool: &mut Pool<'_>, emit: &mut dyn FnMut(&mut Pool<'_>, PacketBuf, Emit)) {
        let bit = 1u64 << (lane % 64);
        let shared = &self.shared;
        if shared.ready.load(Ordering::Acquire) & bit != 0 {
            shared.ready.fetch_and(!bit, Ordering::AcqRel);
            let mut t = shared.table.lock();
            let Table { entries, waiting } = &mut *t;
            for e in entries.iter_mut().filter(|e| e.state != State::Incomplete) {
                let mac = e.state.usable().then_some(e.mac);
                let port = e.port;
                let mut other = 0u64;
                e.queue.retain(|w| {
                    if w.lane != lane {
                        other |= 1 << (w.lane % 64);
                        return true;
                    }
                    *waiting = waiting.saturating_sub(1);
                    match mac {
                        Some(mac) => {
                            self.counters.dequeued += 1;
                            emit(pool, w.buf, Emit::Send { port, mac, generated: false });
                        }
                        None => emit(pool, w.buf, Emit::Drop(DropReason::NeighUnresolved)),
                    }
                    false
                });
                if other != 0 {
                    shared.ready.fetch_or(other, Ordering::Release);
                }
            }
        }
    }

    /// At most once per `retrans` over all workers: ages the table, asks incomplete
    /// neighbours again.
    fn age(&mut self, pool: &mut Pool<'_>, now: Instant, emit: &mut dyn FnMut(&mut Pool<'_>, PacketBuf, Emit)) {
        let shared = &self.shared;
        // One relaxed load per poll when nothing is due.
        if now.ticks() < shared.next_age.load(Ordering::Relaxed) {
            return;
        }
        let retrans = shared.cfg.retrans;
        let mut asks: heapless::Vec<(IpAddr, u8), 8> = heapless::Vec::new();
        {
            let Some(mut t) = shared.table.try_lock() else { return };
            if now.ticks() < shared.next_age.load(Ordering::Relaxed) {
                return;
            }
            shared.next_age.store(now.saturating_add(retrans).ticks(), Ordering::Relaxed);
            let (reachable, stale, probes) = (shared.cfg.reachable, shared.cfg.stale, shared.cfg.probes);
            for e in t.entries.iter_mut() {
                let age = now.saturating_since(e.since);
                match e.state {
                    State::Reachable if age >= reachable => (e.state, e.since) = (State::Stale, now),
                    State::Incomplete if age >= retrans && e.probes >= probes => {
                        (e.state, e.since) = (State::Failed, now);
                        shared.mark_ready(e);
                    }
                    State::Incomplete if age >= retrans && !asks.is_full() => {
                        let _ = asks.push((e.ip, e.port));
                        (e.since, e.probes) = (now, e.probes.saturating_add(1));
                    }
                    _ => {}
                }
            }
            // Stale and failed entries past `stale` go (a failed one once its frames are out).
            let before = t.entries.len();
            t.entries.retain(|e| {
                let age = now.saturating_since(e.since);
                !(age >= stale && (e.state == State::Stale || (e.state == State::Failed && e.queue.is_empty())))
            });
            if t.entries.len() != before {
                shared.bump();
            }
        }
        for (ip, port) in asks {
            if let Some((r, mac)) = self.request(pool, port, ip) {
                emit(pool, r, Emit::Send { port, mac, generated: true });
            }
        }
    }

    /// Writes the counters as ` neigh_…=N` pairs.
    pub fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        write!(
            w,
            " neigh_learned={} neigh_updated={} neigh_resolved={} neigh_arp_replies={} neigh_arp_requests={} \
             neigh_arp_unsolicited={} neigh_table_full={} neigh_queued={} neigh_dequeued={} neigh_echo_replies={} \
             neigh_no_buf={} neigh_nd_adverts={} neigh_icmp_errors={} neigh_icmp_suppressed={} neigh_too_big={} \
             neigh_fragmented={} neigh_fragments={} neigh_nd_solicits={} neigh_nd_resolved={} \
             neigh_nd_unsolicited={}",
            c.learned,
            c.updated,
            c.resolved,
            c.arp_replies,
            c.arp_requests,
            c.arp_unsolicited,
            c.table_full,
            c.queued,
            c.dequeued,
            c.echo_replies,
            c.no_buf,
            c.nd_adverts,
            c.icmp_errors,
            c.icmp_suppressed,
            c.too_big,
            c.fragmented,
            c.fragments,
            c.nd_solicits,
            c.nd_resolved,
            c.nd_unsolicited
        )
    }
}

//! The ICMP (ICMPv6) errors a [`Router`] builds in place for what the L3 forwarder drops
//! (`crate::neigh::icmp`).

use super::Router;
use crate::buf::{PacketBuf, Pool};
use crate::neigh::icmp;
use crate::time::Instant;

impl Router {
    /// The IPv4 packet at `ip` of `b`, received on `ingress` and dropped by the L3
    /// forwarder: becomes the ICMP error `kind` in place ([`icmp`]) if the rules allow
    /// one, the port has an address to send it from and its token bucket a token. Returns
    /// the MAC to send it to (the frame's source, out of `ingress`); `None`: the frame is
    /// still the dropped packet (suppressions counted).
    pub fn icmp_error(
        &mut self,
        pool: &mut Pool<'_>,
        b: PacketBuf,
        ip: usize,
        ingress: u8,
        kind: icmp::Kind,
        now: Instant,
    ) -> Option<[u8; 6]> {
        let frame = pool.frame(b);
        if !icmp::may_answer(frame, ip) {
            return None;
        }
        let to: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
        let src: [u8; 4] = frame.get(ip + 12..ip + 16)?.try_into().ok()?;
        let dst: [u8; 4] = frame.get(ip + 16..ip + 20)?.try_into().ok()?;
        // Nor to (or from) the broadcast address of one of the ports' subnets (a directed
        // broadcast, RFC 1812 §4.3.2.7; `may_answer` sees only the limited one).
        if self.shared.is_subnet_broadcast(dst) || self.shared.is_subnet_broadcast(src) {
            return None;
        }
        let from = self.shared.source_for(ingress, src)?;
        if !self.shared.icmp_allow(ingress, now) {
            self.counters.icmp_suppressed += 1;
            return None;
        }
        // The error quotes the packet's front, which is in its first buffer: the rest goes.
        pool.trim_segments(b);
        let (off, len) = (pool.frame_offset(b), pool.len(b));
        let n = icmp::error_in_place(pool.raw_mut(b).get_mut(off..)?, ip, len, kind, from)?;
        pool.set_len(b, n).ok()?;
        self.counters.icmp_errors += 1;
        Some(to)
    }

    /// [`Router::icmp_error`] for the IPv6 packet at `ip` of `b` whose upper-layer header
    /// (`proto`) is at `l4` (`later`: a fragment other than the first): an ICMPv6 error
    /// from the ingress port's IPv6 address (the one whose prefix holds the sender, else the
    /// port's first), the same bucket as IPv4's.
    #[allow(clippy::too_many_arguments)]
    pub fn icmp_error6(
        &mut self,
        pool: &mut Pool<'_>,
        b: PacketBuf,
        (ip, proto, l4, later): (usize, u8, usize, bool),
        ingress: u8,
        kind: icmp::Kind,
        now: Instant,
    ) -> Option<[u8; 6]> {
        let frame = pool.frame(b);
        if !icmp::may_answer6(frame, ip, proto, l4, later) {
            return None;
        }
        let to: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
        let src: [u8; 16] = frame.get(ip + 8..ip + 24)?.try_into().ok()?;
        let from = self.shared.source_for6(ingress, &src)?;
        if !self.shared.icmp_allow(ingress, now) {
            self.counters.icmp_suppressed += 1;
            return None;
        }
        pool.trim_segments(b);
        let (off, len) = (pool.frame_offset(b), pool.len(b));
        let n = icmp::error6_in_place(pool.raw_mut(b).get_mut(off..)?, ip, len, kind, from)?;
        pool.set_len(b, n).ok()?;
        self.counters.icmp_errors += 1;
        Some(to)
    }
}

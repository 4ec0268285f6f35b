//! Why frames are dropped: one [`DropReason`] per cause, declared once (the enum, its
//! counter order, [`DropReason::ALL`], [`DropReason::COUNT`] and the stable names all come
//! from the one list below).

use core::fmt;

/// Declares [`DropReason`] from `Variant = "name"` lines (with their docs).
macro_rules! drop_reasons {
    ($($(#[$doc:meta])* $v:ident = $name:literal,)+) => {
        /// Why a frame was dropped. Every drop on the per-packet path is counted under one of
        /// these; [`DropReason::as_str`] is the name used in stats lines and JSON.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[repr(u8)]
        pub enum DropReason {
            $($(#[$doc])* $v,)+
        }

        impl DropReason {
            /// Number of reasons (size of a per-reason counter array).
            pub const COUNT: usize = [$($name),+].len();

            /// Every reason, in counter order.
            pub const ALL: [DropReason; Self::COUNT] = [$(DropReason::$v,)+];

            /// Stable snake_case name, used in `@stats`/`@summary` lines (`drop_<name>=N`) and JSON.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(DropReason::$v => $name,)+
                }
            }
        }
    };
}

drop_reasons! {
    /// Shorter than an Ethernet header (with its VLAN tags).
    Runt = "runt",
    /// Neither IPv4 nor IPv6 after the VLAN tags (ARP on a chain without addresses, random
    /// bytes, …).
    UnsupportedEthertype = "unsupported_ethertype",
    /// The IP header (or an IPv6 extension header) does not fit in the frame.
    TruncatedL3 = "truncated_l3",
    /// The IP version field disagrees with the EtherType.
    BadIpVersion = "bad_ip_version",
    /// IPv4 IHL below 5 (20 bytes), or more IPv6 extension headers than the parser
    /// skips ([`crate::parse::MAX_EXT_HEADERS`]).
    BadIpHeaderLen = "bad_ip_header_len",
    /// The IP total/payload length is below the header or beyond the frame.
    BadIpTotalLen = "bad_ip_total_len",
    /// The IPv4 header checksum is wrong.
    BadIpChecksum = "bad_ip_checksum",
    /// The TCP/UDP/ICMP header does not fit in the IP payload.
    TruncatedL4 = "truncated_l4",
    /// TCP data offset below 5 or beyond the segment; UDP length inconsistent.
    BadL4Len = "bad_l4_len",
    /// The TX ring stayed full: the frame could not be sent.
    TxFull = "tx_full",
    /// An ACL rule denied the flow.
    AclDeny = "acl_deny",
    /// No route (L3 forwarder) or no egress port for the frame.
    NoRoute = "no_route",
    /// IPv4 TTL / IPv6 hop limit would reach 0.
    TtlExpired = "ttl_expired",
    /// NAT found no free port for a new mapping.
    NatPortsExhausted = "nat_ports_exhausted",
    /// NAT saw an inbound frame that matches no mapping.
    NatNoMapping = "nat_no_mapping",
    /// The URL filter blocked the connection.
    UrlBlocked = "url_blocked",
    /// A TCP fragment the URL filter could not read (`urlfilter.fragments = drop`, the
    /// default): its stream would reach the server uninspected.
    UrlFragment = "url_fragment",
    /// The load balancer has no live backend for the VIP.
    LbNoBackend = "lb_no_backend",
    /// A per-flow table had no room for a new flow.
    FlowTableFull = "flow_table_full",
    /// The NF does not handle this kind of frame (e.g. NAT on a non-IPv4 frame).
    NfUnsupported = "nf_unsupported",
    /// A control frame (EtherType 0x88B5) that may not be obeyed: not on the control port,
    /// not signed with the boot key, or replayed (`crate::control`).
    CtlRejected = "ctl_rejected",
    /// A packet of a flow NetBlaze moved to an auxiliary core found no room in the hand-off
    /// link: it may not run here before its flow's earlier packets there
    /// (`crate::offload`).
    HandoffFull = "handoff_full",
    /// The next hop's MAC could not be resolved: its neighbour entry failed, the neighbour
    /// table was full, or the frame was on a core that holds no lane (`crate::neigh`).
    NeighUnresolved = "neigh_unresolved",
    /// The frames waiting for a neighbour's answer already filled its queue
    /// (`crate::neigh::QUEUE`).
    NeighQueueFull = "neigh_queue_full",
    /// An ARP frame that is not ARP for IPv4 over Ethernet (or is VLAN-tagged), with a
    /// chain that has addresses.
    ArpBad = "arp_bad",
    /// An 802.1Q-tagged frame whose (port, VLAN ID) is no sub-interface of a chain that has
    /// sub-interfaces (`crate::vlan`).
    VlanUnknown = "vlan_unknown",
    /// A frame over several buffers (a jumbo frame, `crate::buf`) that was to be cut into IPv4
    /// fragments and could not be: the lane's pool had too few buffers for them.
    MultiBuffer = "multi_buffer",
    /// An ARP request or announcement for an address the dataplane does not own (and no
    /// entry of ours to update).
    ArpNotOurs = "arp_not_ours",
    /// An ARP reply nobody asked for: ignored, no entry made.
    ArpUnsolicited = "arp_unsolicited",
    /// An IPv4 packet for one of the dataplane's own addresses that it does not answer
    /// (anything but an ICMP echo request).
    LocalUnsupported = "local_unsupported",
    /// An IP packet longer than its egress port's MTU (`port.mtu`) that could not go: IPv4
    /// with Don't Fragment set or IPv6 for which no ICMP "fragmentation needed" / ICMPv6
    /// "packet too big" may be sent (those sent take the frame), or IPv4 without Don't
    /// Fragment when the pool had no buffer for a fragment.
    TooBig = "too_big",
    /// An IPv6 neighbour advertisement to the dataplane that RFC 4861 §7.1.2 discards (hop
    /// limit not 255, bad checksum or code, too short, a multicast target, Solicited set
    /// towards a multicast address, an option of length zero), or one for an entry being
    /// resolved that carries no link-layer address.
    NdBad = "nd_bad",
    /// An IPv6 neighbour advertisement for an address the table has no entry for (nobody
    /// asked): ignored, no entry made.
    NdUnsolicited = "nd_unsolicited",
    /// A P4 program dropped the packet (`drop`; `crate::nf::p4`).
    P4Drop = "p4_drop",
    /// A P4 program faulted on the packet (an `extract` past the frame's end, a runaway loop,
    /// an output larger than a buffer, an instruction the executor does not run): counted by
    /// kind in the `p4_` counters.
    P4Fault = "p4_fault",
}

impl DropReason {
    /// Index into a per-reason counter array.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn names_indices_and_display_agree() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert_eq!(format!("{r}"), r.as_str());
        }
        let mut names: std::vec::Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT, "names are unique");
    }
}

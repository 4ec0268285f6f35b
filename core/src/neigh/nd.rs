//! IPv6 neighbour discovery (RFC 4861) and the dataplane's own IPv6 addresses: neighbour
//! solicitations for them answered in place (§7.2.4), ICMPv6 echo requests answered
//! (RFC 4443 §4.2), solicitations sent to resolve a next hop ([`solicit`], §7.2.2) and the
//! advertisements that answer them read ([`Advert::parse`], §7.1.2).
//!
//! §7.2.2: "the node … sends a Neighbor Solicitation … to the solicited-node multicast address
//! corresponding to the target address … If the source address of the packet prompting the
//! solicitation is the same as one of the addresses assigned to the outgoing interface, that
//! address SHOULD be placed in the IP Source Address of the outgoing solicitation. Otherwise,
//! any one of the addresses assigned to the interface should be used." (the chain uses the
//! egress port's address whose prefix covers the target, else the port's first). §4.3: the
//! source link-layer address option is included when the source is not unspecified; §7.1.1:
//! the hop limit is 255. The Ethernet destination of the solicited-node address is
//! `33:33` and its last four bytes (RFC 2464 §7).
//!
//! RFC 4861 §7.1.1, a node MUST silently discard a solicitation unless "the IP Hop Limit
//! field has a value of 255", "the ICMP checksum is valid", "ICMP Code is 0", "ICMP length
//! (derived from the IP length) is 24 or more octets", "Target Address is not a multicast
//! address", and "if the IP source address is the unspecified address, the IP destination
//! address is a solicited-node multicast address" (duplicate address detection: not answered
//! here). §7.2.4: "the node sends a Neighbor Advertisement … the Target Address of the
//! advertisement is copied from the Target Address of the solicitation … If the source of
//! the solicitation is not the unspecified address, the node MUST set the Solicited flag …
//! and unicast the advertisement to the Source Address of the solicitation. If the
//! solicitation's IP Destination Address is not a multicast address, the Target Link-Layer
//! Address option MAY be omitted". The advertisement keeps the solicitation's length: a
//! source link-layer option becomes our target link-layer option, a solicitation without one
//! (a unicast probe) gets an advertisement without one. Flags: Router (we route),
//! Solicited, Override.

use crate::checksum;

/// ICMPv6 (IPv6 next header 58).
pub const ICMPV6: u8 = 58;
const NS: u8 = 135;
/// ICMPv6 type of a neighbour advertisement.
pub const NA: u8 = 136;
/// Hop limit of every neighbour discovery message (RFC 4861 §7.1).
pub const ND_HOP_LIMIT: u8 = 255;
/// Bytes of an Ethernet + IPv6 + neighbour solicitation with a source link-layer address
/// option (14 + 40 + 24 + 8): what [`solicit`] writes.
pub const NS_FRAME_LEN: usize = 86;
const ECHO_REQUEST: u8 = 128;
const ECHO_REPLY: u8 = 129;
/// All nodes on the link, `ff02::1` (RFC 4291 §2.7.1): where unsolicited advertisements go.
pub const ALL_NODES: [u8; 16] = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
/// Hop limit of an echo reply.
pub const REPLY_HOP_LIMIT: u8 = 64;

/// The solicited-node multicast address of `a` (RFC 4291 §2.7.1): `ff02::1:ffXX:XXXX`.
pub fn solicited_node(a: &[u8; 16]) -> [u8; 16] {
    let mut s = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0];
    s[13..].copy_from_slice(&a[13..]);
    s
}

/// The Ethernet address of the IPv6 multicast address `a` (RFC 2464 §7): `33:33` and its
/// last four bytes.
pub fn multicast_mac(a: &[u8; 16]) -> [u8; 6] {
    [0x33, 0x33, a[12], a[13], a[14], a[15]]
}

/// Writes into `frame` (at least [`NS_FRAME_LEN`] bytes; the rest is left alone) a
/// neighbour solicitation for `target` from `src` (an address of the egress port) and
/// `own_mac`: to the target's solicited-node multicast address and its Ethernet address,
/// hop limit 255, with the source link-layer address option (RFC 4861 §4.3, §7.2.2).
/// `false` if the frame is too short.
pub fn solicit(frame: &mut [u8], own_mac: [u8; 6], src: [u8; 16], target: [u8; 16]) -> bool {
    let Some(f) = frame.get_mut(..NS_FRAME_LEN) else { return false };
    let dst = solicited_node(&target);
    f.fill(0);
    f[..6].copy_from_slice(&multicast_mac(&dst));
    f[6..12].copy_from_slice(&own_mac);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..22].copy_from_slice(&[0, 32, ICMPV6, ND_HOP_LIMIT]);
    f[22..38].copy_from_slice(&src);
    f[38..54].copy_from_slice(&dst);
    f[54] = NS;
    f[62..78].copy_from_slice(&target);
    f[78..80].copy_from_slice(&[1, 1]); // source link-layer address, 8 bytes
    f[80..86].copy_from_slice(&own_mac);
    let c = checksum::l4_checksum_v6(&src, &dst, ICMPV6, &f[54..]);
    f[56..58].copy_from_slice(&c.to_be_bytes());
    true
}

/// A neighbour advertisement that RFC 4861 §7.1.2 accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advert {
    /// The address it advertises.
    pub target: [u8; 16],
    /// The Solicited flag: an answer to a solicitation.
    pub solicited: bool,
    /// The Override flag: the link-layer address replaces a cached one.
    pub override_: bool,
    /// The target link-layer address option, if given.
    pub mac: Option<[u8; 6]>,
}

impl Advert {
    /// The advertisement (ICMPv6 type [`NA`]) at `icmp` (`len` bytes) of the IPv6 packet at
    /// `ip` of `frame`, if valid. §7.1.2, a node MUST silently discard an advertisement
    /// unless "the IP Hop Limit field has a value of 255", "the ICMP checksum is valid",
    /// "ICMP Code is 0", "ICMP length (derived from the IP length) is 24 or more octets",
    /// "Target Address is not a multicast address", "if the IP Destination Address is a
    /// multicast address the Solicited flag is zero", "all included options have a length
    /// that is greater than zero". `None`: discarded.
    pub fn parse(frame: &[u8], ip: usize, icmp: usize, len: usize) -> Option<Advert> {
        let (src, dst) = (a16(frame, ip + 8)?, a16(frame, ip + 24)?);
        let msg = frame.get(icmp..icmp + len)?;
        let (&ty, &code, &flags) = (msg.first()?, msg.get(1)?, msg.get(4)?);
        let target = a16(msg, 8)?;
        let solicited = flags & 0x40 != 0;
        if ty != NA
            || *frame.get(ip + 7)? != ND_HOP_LIMIT
            || code != 0
            || len < 24
            || target[0] == 0xff
            || (dst[0] == 0xff && solicited)
            || checksum::l4_checksum_v6(&src, &dst, ICMPV6, msg) != 0
        {
            return None;
        }
        let mut mac = None;
        let mut at = 24;
        while at < len {
            let (&kind, &units) = (msg.get(at)?, msg.get(at + 1)?);
            let n = usize::from(units) * 8;
            if n == 0 || at + n > len {
                return None;
            }
            // Target link-layer address (type 2) of Ethernet: one unit, six bytes.
            if kind == 2 && units == 1 {
                mac = msg.get(at + 2..at + 8).and_then(|m| m.try_into().ok());
            }
            at += n;
        }
        Some(Advert { target, solicited, override_: flags & 0x20 != 0, mac })
    }
}

/// The sender and its link-layer address of a solicitation that [`reply_in_place`] would
/// answer (RFC 4861 §7.2.3: "the recipient SHOULD create or update the Neighbor Cache entry
/// for the IP Source Address of the solicitation" when it carries a source link-layer
/// address option and its source is not unspecified), read before the answer overwrites it.
pub fn solicitor(frame: &[u8], ip: usize, icmp: usize, len: usize) -> Option<([u8; 16], [u8; 6])> {
    let src = a16(frame, ip + 8)?;
    let msg = frame.get(icmp..icmp + len)?;
    if msg.first() != Some(&NS) || len != 32 || msg.get(24..26) != Some(&[1, 1]) || src == [0; 16] {
        return None;
    }
    Some((src, msg.get(26..32)?.try_into().ok()?))
}

/// What [`reply_in_place`] made of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A neighbour advertisement for our address, to this MAC.
    Advertisement([u8; 6]),
    /// An echo reply, to this MAC.
    EchoReply([u8; 6]),
}

fn a16(f: &[u8], at: usize) -> Option<[u8; 16]> {
    f.get(at..at + 16).and_then(|s| s.try_into().ok())
}

/// Answers, in place, the IPv6 packet at `ip` (its ICMPv6 message at `icmp`, `len` bytes)
/// of `frame` if it is a solicitation for one of our addresses (`own`) or an echo request to
/// one of them; `None` (frame untouched) otherwise. `own_mac` is the ingress port's MAC.
pub fn reply_in_place(
    frame: &mut [u8],
    ip: usize,
    icmp: usize,
    len: usize,
    own_mac: [u8; 6],
    own: impl Fn(&[u8; 16]) -> bool,
) -> Option<Answer> {
    let (src, dst) = (a16(frame, ip + 8)?, a16(frame, ip + 24)?);
    let hop = *frame.get(ip + 7)?;
    let sender: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
    let msg = frame.get(icmp..icmp + len)?;
    let (&ty, &code) = (msg.first()?, msg.get(1)?);
    if code != 0 || len < 8 || checksum::l4_checksum_v6(&src, &dst, ICMPV6, msg) != 0 {
        return None;
    }
    match ty {
        NS => {
            let target = a16(msg, 8)?;
            // §7.1.1; an unspecified source is duplicate address detection: not answered.
            if hop != 255 || len < 24 || !own(&target) || src == [0; 16] || src[0] == 0xff {
                return None;
            }
            // Options: none, or exactly one source link-layer address (type 1, 8 bytes).
            let with_option = match len {
                24 => false,
                32 if msg.get(24..26) == Some(&[1, 1]) => true,
                _ => return None,
            };
            let msg = frame.get_mut(icmp..icmp + len)?;
            msg[0] = NA;
            msg[2..4].fill(0);
            msg[4..8].copy_from_slice(&[0xE0, 0, 0, 0]); // Router, Solicited, Override
            if with_option {
                msg[24] = 2; // target link-layer address
                msg[26..32].copy_from_slice(&own_mac);
            }
            frame.get_mut(ip + 8..ip + 24)?.copy_from_slice(&target);
            frame.get_mut(ip + 24..ip + 40)?.copy_from_slice(&src);
            let c = checksum::l4_checksum_v6(&target, &src, ICMPV6, frame.get(icmp..icmp + len)?);
            frame.get_mut(icmp + 2..icmp + 4)?.copy_from_slice(&c.to_be_bytes());
            Some(Answer::Advertisement(sender))
        }
        ECHO_REQUEST if own(&dst) => {
            // RFC 4443 §4.2: the reply's source is the request's destination (ours, unicast).
            let old = u16::from_be_bytes([ty, code]);
            let c = u16::from_be_bytes([*msg.get(2)?, *msg.get(3)?]);
            let c = checksum::update16(c, old, u16::from_be_bytes([ECHO_REPLY, 0]));
            *frame.get_mut(icmp)? = ECHO_REPLY;
            frame.get_mut(icmp + 2..icmp + 4)?.copy_from_slice(&c.to_be_bytes());
            // Swapped addresses leave the pseudo-header's sum as it was.
            frame.get_mut(ip + 8..ip + 24)?.copy_from_slice(&dst);
            frame.get_mut(ip + 24..ip + 40)?.copy_from_slice(&src);
            *frame.get_mut(ip + 7)? = REPLY_HOP_LIMIT;
            Some(Answer::EchoReply(sender))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    const OURS: [u8; 16] = [0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const HOST: [u8; 16] = [0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    const HOST_MAC: [u8; 6] = [2, 0xaa, 0, 0, 0, 1];
    const OWN_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x10];

    /// Ethernet + IPv6 + an ICMPv6 message (checksum filled in), hop limit `hop`.
    fn frame(dst: [u8; 16], hop: u8, msg: &[u8]) -> Vec<u8> {
        let mut f = std::vec![0u8; 54 + msg.len()];
        f[..6].copy_from_slice(&[0x33, 0x33, 0xff, 0, 0, 1]);
        f[6..12].copy_from_slice(&HOST_MAC);
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&(msg.len() as u16).to_be_bytes());
        f[20] = ICMPV6;
        f[21] = hop;
        f[22..38].copy_from_slice(&HOST);
        f[38..54].copy_from_slice(&dst);
        f[54..].copy_from_slice(msg);
        let c = checksum::l4_checksum_v6(&HOST, &dst, ICMPV6, &f[54..]);
        f[56..58].copy_from_slice(&c.to_be_bytes());
        f
    }

    fn ns(with_option: bool) -> Vec<u8> {
        let mut m = std::vec![NS, 0, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&OURS);
        if with_option {
            m.extend_from_slice(&[1, 1]);
            m.extend_from_slice(&HOST_MAC);
        }
        m
    }

    fn own(a: &[u8; 16]) -> bool {
        *a == OURS
    }

    #[test]
    fn a_solicitation_for_our_address_becomes_its_advertisement() {
        for with_option in [true, false] {
            let mut f = frame(solicited_node(&OURS), 255, &ns(with_option));
            let len = f.len() - 54;
            assert_eq!(reply_in_place(&mut f, 14, 54, len, OWN_MAC, own), Some(Answer::Advertisement(HOST_MAC)));
            assert_eq!((&f[22..38], &f[38..54]), (&OURS[..], &HOST[..]));
            assert_eq!((f[54], f[58]), (NA, 0xE0));
            assert_eq!(&f[62..78], &OURS);
            if with_option {
                assert_eq!(&f[78..80], &[2, 1]);
                assert_eq!(&f[80..86], &OWN_MAC);
            }
            assert_eq!(checksum::l4_checksum_v6(&OURS, &HOST, ICMPV6, &f[54..]), 0, "checksum");
            // And an independent parser reads a neighbour advertisement.
            let p = etherparse::SlicedPacket::from_ethernet(&f).expect("etherparse reads it");
            assert!(matches!(
                p.transport,
                Some(etherparse::TransportSlice::Icmpv6(ref i))
                    if matches!(i.icmp_type(), etherparse::Icmpv6Type::NeighborAdvertisement(_))
            ));
        }
    }

    #[test]
    fn solicitations_that_rfc_4861_discards_are_left_alone() {
        let other = {
            let mut m = ns(true);
            m[8 + 15] = 9;
            m
        };
        let mut dad = frame(solicited_node(&OURS), 255, &ns(false));
        dad[22..38].fill(0);
        let c = checksum::l4_checksum_v6(&[0; 16], &solicited_node(&OURS), ICMPV6, &{
            let mut m = dad[54..].to_vec();
            m[2..4].fill(0);
            m
        });
        dad[56..58].copy_from_slice(&c.to_be_bytes());
        let mut bad_sum = frame(solicited_node(&OURS), 255, &ns(true));
        bad_sum[60] ^= 1;
        for (why, mut f) in [
            ("hop limit 254", frame(solicited_node(&OURS), 254, &ns(true))),
            ("not our address", frame(solicited_node(&OURS), 255, &other)),
            ("duplicate address detection", dad),
            ("bad checksum", bad_sum),
        ] {
            let before = f.clone();
            let len = f.len() - 54;
            assert_eq!(reply_in_place(&mut f, 14, 54, len, OWN_MAC, own), None, "{why}");
            assert_eq!(f, before, "{why}");
        }
    }

    #[test]
    fn an_echo_request_to_our_address_is_answered_with_a_valid_checksum() {
        let mut f = frame(OURS, 64, &[ECHO_REQUEST, 0, 0, 0, 0x12, 0x34, 0, 1, b'p', b'i', b'n', b'g']);
        let len = f.len() - 54;
        assert_eq!(reply_in_place(&mut f, 14, 54, len, OWN_MAC, own), Some(Answer::EchoReply(HOST_MAC)));
        assert_eq!((&f[22..38], &f[38..54], f[54], f[21]), (&OURS[..], &HOST[..], ECHO_REPLY, REPLY_HOP_LIMIT));
        assert_eq!(checksum::l4_checksum_v6(&OURS, &HOST, ICMPV6, &f[54..]), 0);
        assert_eq!(&f[58..66], &[0x12, 0x34, 0, 1, b'p', b'i', b'n', b'g']);
        // Not to us: left alone.
        let mut g = frame(HOST, 64, &[ECHO_REQUEST, 0, 0, 0, 0, 1, 0, 1]);
        let len = g.len() - 54;
        assert_eq!(reply_in_place(&mut g, 14, 54, len, OWN_MAC, own), None);
    }

    /// An advertisement from HOST for HOST (Solicited, Override) to `dst`, with `options`.
    fn advert(dst: [u8; 16], hop: u8, flags: u8, options: &[u8]) -> Vec<u8> {
        let mut m = std::vec![NA, 0, 0, 0, flags, 0, 0, 0];
        m.extend_from_slice(&HOST);
        m.extend_from_slice(options);
        frame(dst, hop, &m)
    }

    #[test]
    fn a_built_solicitation_reads_back_and_sums_to_zero() {
        let mut f = [0xEE; NS_FRAME_LEN + 4];
        assert!(solicit(&mut f, OWN_MAC, OURS, HOST));
        let group = solicited_node(&HOST);
        assert_eq!((&f[..6], &f[6..12]), (&multicast_mac(&group)[..], &OWN_MAC[..]));
        assert_eq!(&f[..6], &[0x33, 0x33, 0xff, 0, 0, 2]);
        assert_eq!((f[20], f[21], &f[38..54]), (ICMPV6, ND_HOP_LIMIT, &group[..]));
        assert_eq!(checksum::l4_checksum_v6(&OURS, &group, ICMPV6, &f[54..NS_FRAME_LEN]), 0);
        assert_eq!(&f[NS_FRAME_LEN..], &[0xEE; 4], "nothing written past the frame");
        assert!(!solicit(&mut [0; NS_FRAME_LEN - 1], OWN_MAC, OURS, HOST));
    }

    #[test]
    fn advertisements_that_rfc_4861_discards_do_not_parse() {
        let tlla = [2, 1, 2, 0xaa, 0, 0, 0, 1];
        let ok = advert(OURS, 255, 0x60, &tlla);
        let len = ok.len() - 54;
        let a = Advert::parse(&ok, 14, 54, len).expect("valid");
        assert_eq!(a, Advert { target: HOST, solicited: true, override_: true, mac: Some(HOST_MAC) });
        let without = advert(OURS, 255, 0x40, &[]);
        assert_eq!(Advert::parse(&without, 14, 54, 24).map(|a| (a.mac, a.override_)), Some((None, false)));
        let mut bad_sum = ok.clone();
        bad_sum[60] ^= 1;
        let mut multicast_target = advert(OURS, 255, 0x60, &tlla);
        multicast_target[62] = 0xff;
        let c = checksum::l4_checksum_v6(&HOST, &OURS, ICMPV6, &{
            let mut m = multicast_target[54..].to_vec();
            m[2..4].fill(0);
            m
        });
        multicast_target[56..58].copy_from_slice(&c.to_be_bytes());
        for (why, f) in [
            ("hop limit 254", advert(OURS, 254, 0x60, &tlla)),
            ("solicited, to a multicast address", advert(solicited_node(&OURS), 255, 0x60, &tlla)),
            ("an option of length zero", advert(OURS, 255, 0x60, &[2, 0, 0, 0, 0, 0, 0, 0])),
            ("an option past the end", advert(OURS, 255, 0x60, &[2, 2, 0, 0, 0, 0, 0, 0])),
            ("bad checksum", bad_sum),
            ("multicast target", multicast_target),
        ] {
            assert_eq!(Advert::parse(&f, 14, 54, f.len() - 54), None, "{why}");
        }
        // Unsolicited to all nodes is fine.
        let all = advert(ALL_NODES, 255, 0x20, &tlla);
        assert!(Advert::parse(&all, 14, 54, all.len() - 54).is_some());
    }
}

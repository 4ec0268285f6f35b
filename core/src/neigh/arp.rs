//! ARP over Ethernet for IPv4 (RFC 826): the one packet layout the dataplane reads and
//! writes, checked once ([`Arp::parse`]) so that the builders cannot fail.
//!
//! ```text
//!  0      6      12    14    16    18   19   20    22     28     32     38     42
//!  | dst  | src  |0806 |htype|ptype|hlen|plen| oper | sha  | spa  | tha  | tpa  |
//! ```
//!
//! RFC 826 ("Packet Reception"): "?Do I have the hardware type in ar$hrd? … ?Do I speak the
//! protocol in ar$pro? … ?Am I the target protocol address? Yes: … If the opcode is
//! ares_op$REQUEST … Swap hardware and protocol fields, putting the local hardware and
//! protocol addresses in the sender fields. Set the ar$op field to ares_op$REPLY. Send the
//! packet to the (new) target hardware address on the same hardware on which the request
//! was received." [`reply_in_place`] is that paragraph.

/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// Bytes of an Ethernet + ARP (IPv4) frame without padding.
pub const ARP_FRAME_LEN: usize = 42;
/// Bytes a frame is padded to on the wire (the Ethernet minimum without the FCS).
pub const MIN_FRAME_LEN: usize = 60;
/// `ar$op` of a request.
pub const OP_REQUEST: u16 = 1;
/// `ar$op` of a reply.
pub const OP_REPLY: u16 = 2;

/// The fields of an ARP packet for IPv4 over Ethernet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Arp {
    /// `ar$op`: [`OP_REQUEST`] or [`OP_REPLY`].
    pub op: u16,
    /// Sender hardware address.
    pub sha: [u8; 6],
    /// Sender protocol address.
    pub spa: [u8; 4],
    /// Target hardware address.
    pub tha: [u8; 6],
    /// Target protocol address.
    pub tpa: [u8; 4],
}

fn arr<const N: usize>(f: &[u8], at: usize) -> Option<[u8; N]> {
    f.get(at..at + N).and_then(|s| s.try_into().ok())
}

impl Arp {
    /// Reads an untagged Ethernet frame carrying ARP for IPv4 over Ethernet; `None` for
    /// anything else (another EtherType, a VLAN tag, other hardware or protocol types or
    /// lengths, an opcode other than request or reply, a frame too short).
    pub fn parse(frame: &[u8]) -> Option<Arp> {
        let head: [u8; 10] = arr(frame, 12)?;
        // EtherType 0806, htype 1 (Ethernet), ptype 0800, hlen 6, plen 4.
        if head[..8] != [0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4] {
            return None;
        }
        let op = u16::from_be_bytes([head[8], head[9]]);
        if op != OP_REQUEST && op != OP_REPLY {
            return None;
        }
        Some(Arp { op, sha: arr(frame, 22)?, spa: arr(frame, 28)?, tha: arr(frame, 32)?, tpa: arr(frame, 38)? })
    }

    /// Gratuitous: the sender announces its own address (`spa == tpa`), RFC 5227 §3.
    pub fn is_gratuitous(&self) -> bool {
        self.spa == self.tpa
    }
}

/// Writes the ARP body (bytes 12..42: EtherType and the ARP packet) of `arp` into `frame`.
/// The MACs (bytes 0..12) are the egress's. `false` if the frame is shorter than 42 bytes.
fn write(frame: &mut [u8], arp: &Arp) -> bool {
    let Some(body) = frame.get_mut(12..ARP_FRAME_LEN) else { return false };
    body[..8].copy_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4]);
    body[8..10].copy_from_slice(&arp.op.to_be_bytes());
    body[10..16].copy_from_slice(&arp.sha);
    body[16..20].copy_from_slice(&arp.spa);
    body[20..26].copy_from_slice(&arp.tha);
    body[26..30].copy_from_slice(&arp.tpa);
    true
}

/// Turns the request `req` held in `frame` into the reply from `own_mac` (RFC 826, module
/// docs): the sender fields become the target fields, ours the sender, `ar$op` = reply.
/// Returns where it goes (the requester's MAC), or `None` if the frame is too short (it
/// cannot be: `req` came from it).
pub fn reply_in_place(frame: &mut [u8], req: &Arp, own_mac: [u8; 6]) -> Option<[u8; 6]> {
    let reply = Arp { op: OP_REPLY, sha: own_mac, spa: req.tpa, tha: req.sha, tpa: req.spa };
    write(frame, &reply).then_some(req.sha)
}

/// Writes a broadcast request "who has `target`? tell `own_ip`" from `own_mac` into `frame`
/// (at least [`MIN_FRAME_LEN`] bytes: the rest is zero padding), MACs included. `false` if
/// the frame is too short.
pub fn request(frame: &mut [u8], own_mac: [u8; 6], own_ip: [u8; 4], target: [u8; 4]) -> bool {
    let Some(f) = frame.get_mut(..MIN_FRAME_LEN) else { return false };
    f.fill(0);
    f[..6].copy_from_slice(&[0xFF; 6]);
    f[6..12].copy_from_slice(&own_mac);
    write(f, &Arp { op: OP_REQUEST, sha: own_mac, spa: own_ip, tha: [0; 6], tpa: target })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request in the layout Linux sends on a veth (42 bytes, unpadded): 10.0.0.2 at
    /// 02:aa:00:00:00:01 asks for 10.0.0.1. Written by hand from RFC 826; the real exchange
    /// with Linux hosts is `tests/tests/router.rs`.
    const LINUX_REQUEST: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0xaa, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x01, 0x08, 0x00,
        0x06, 0x04, 0x00, 0x01, 0x02, 0xaa, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x0a, 0x00, 0x00, 0x01,
    ];

    #[test]
    fn a_linux_request_parses_and_its_reply_swaps_the_fields() {
        let req = Arp::parse(&LINUX_REQUEST).expect("parses");
        assert_eq!(
            req,
            Arp { op: OP_REQUEST, sha: [2, 0xaa, 0, 0, 0, 1], spa: [10, 0, 0, 2], tha: [0; 6], tpa: [10, 0, 0, 1] }
        );
        assert!(!req.is_gratuitous());
        let mut f = LINUX_REQUEST;
        let own = [2, 0xbb, 0, 0, 0, 9];
        assert_eq!(reply_in_place(&mut f, &req, own), Some([2, 0xaa, 0, 0, 0, 1]));
        let rep = Arp::parse(&f).expect("the reply parses");
        assert_eq!(rep, Arp { op: OP_REPLY, sha: own, spa: [10, 0, 0, 1], tha: req.sha, tpa: [10, 0, 0, 2] });
    }

    #[test]
    fn a_built_request_is_padded_and_reads_back() {
        let mut f = [0xEE; 64];
        assert!(request(&mut f, [2, 0, 0, 0, 0, 1], [10, 0, 0, 1], [10, 0, 0, 7]));
        assert_eq!(&f[..6], &[0xFF; 6]);
        assert!(f[ARP_FRAME_LEN..MIN_FRAME_LEN].iter().all(|&b| b == 0));
        let a = Arp::parse(&f).expect("parses");
        assert_eq!((a.op, a.spa, a.tpa, a.tha), (OP_REQUEST, [10, 0, 0, 1], [10, 0, 0, 7], [0; 6]));
        assert!(!request(&mut [0; 59], [0; 6], [0; 4], [0; 4]));
    }

    #[test]
    fn other_frames_are_refused() {
        let mut f = LINUX_REQUEST;
        f[21] = 3; // RARP request opcode
        assert_eq!(Arp::parse(&f), None);
        let mut f = LINUX_REQUEST;
        f[19] = 16; // plen of IPv6
        assert_eq!(Arp::parse(&f), None);
        assert_eq!(Arp::parse(&LINUX_REQUEST[..41]), None);
        let mut f = LINUX_REQUEST;
        f[12..14].copy_from_slice(&[0x81, 0x00]); // a VLAN tag
        assert_eq!(Arp::parse(&f), None);
    }
}

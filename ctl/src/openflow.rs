//! OpenFlow 1.3 (wire version 0x04), the part the rack controller ([`crate::rack`]) speaks to
//! the top-of-rack switch: hello, echo, features, flow-mod, barrier, error, packet-in,
//! packet-out, and the flow-stats multipart exchange that reads the table back.
//!
//! Layouts are those of the OpenFlow Switch Specification 1.3.5 (§7): every message starts
//! with `ofp_header` (version, type, length, xid; big-endian), a match is `ofp_match` of type
//! OXM (`OFPMT_OXM` = 1) padded to 8 bytes, instructions and actions are TLVs. Only the OXM
//! fields the controller writes are built (`IN_PORT`, `ETH_TYPE`, `IPV4_DST` with or without a
//! mask); a match read back keeps every field as raw [`Oxm`]s. The unit tests check the bytes
//! against the spec's sizes and against what `ovs-ofctl -O OpenFlow13` sends and prints (the
//! rack test reads our flow-mods back with `ovs-ofctl dump-flows`).
//!
//! Decoding is total: a short or inconsistent message is an [`Error`], never a panic.

use std::fmt;

/// The wire version of OpenFlow 1.3.
pub const VERSION: u8 = 0x04;
/// `OFPP_CONTROLLER`: the port that means "to the controller as a packet-in".
pub const PORT_CONTROLLER: u32 = 0xffff_fffd;
/// `OFPP_ANY`: no port (a wildcard in requests).
pub const PORT_ANY: u32 = 0xffff_ffff;
/// `OFPG_ANY`.
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// `OFP_NO_BUFFER`.
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const CML_NO_BUFFER: u16 = 0xffff;
/// `OFPTT_ALL`.
pub const TABLE_ALL: u8 = 0xff;

/// Message types (`ofp_type`).
pub mod ty {
    /// `OFPT_HELLO`.
    pub const HELLO: u8 = 0;
    /// `OFPT_ERROR`.
    pub const ERROR: u8 = 1;
    /// `OFPT_ECHO_REQUEST`.
    pub const ECHO_REQUEST: u8 = 2;
    /// `OFPT_ECHO_REPLY`.
    pub const ECHO_REPLY: u8 = 3;
    /// `OFPT_FEATURES_REQUEST`.
    pub const FEATURES_REQUEST: u8 = 5;
    /// `OFPT_FEATURES_REPLY`.
    pub const FEATURES_REPLY: u8 = 6;
    /// `OFPT_PACKET_IN`.
    pub const PACKET_IN: u8 = 10;
    /// `OFPT_PACKET_OUT`.
    pub const PACKET_OUT: u8 = 13;
    /// `OFPT_FLOW_MOD`.
    pub const FLOW_MOD: u8 = 14;
    /// `OFPT_GROUP_MOD`.
    pub const GROUP_MOD: u8 = 15;
    /// `OFPT_MULTIPART_REQUEST`.
    pub const MULTIPART_REQUEST: u8 = 18;
    /// `OFPT_MULTIPART_REPLY`.
    pub const MULTIPART_REPLY: u8 = 19;
    /// `OFPT_BARRIER_REQUEST`.
    pub const BARRIER_REQUEST: u8 = 20;
    /// `OFPT_BARRIER_REPLY`.
    pub const BARRIER_REPLY: u8 = 21;
}

/// `OFPMP_FLOW`: individual flow statistics.
const MP_FLOW: u16 = 1;
/// `OFPMPF_REPLY_MORE`.
const MPF_MORE: u16 = 1;
/// `OFPIT_APPLY_ACTIONS`.
const IT_APPLY_ACTIONS: u16 = 4;
/// `OFPAT_OUTPUT`.
const AT_OUTPUT: u16 = 0;
/// `OFPXMC_OPENFLOW_BASIC`.
const OXM_BASIC: u16 = 0x8000;
/// OXM field numbers (`oxm_ofb_match_fields`).
const OXM_IN_PORT: u8 = 0;
const OXM_ETH_TYPE: u8 = 5;
const OXM_IPV4_DST: u8 = 12;

/// A decoding failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Fewer bytes than the layout needs.
    Short(&'static str),
    /// A version other than 1.3 in a header.
    Version(u8),
    /// A length field that does not fit the message.
    Length(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Short(what) => write!(f, "OpenFlow {what}: too short"),
            Error::Version(v) => write!(f, "OpenFlow version {v:#04x}, not 1.3 (0x04)"),
            Error::Length(what) => write!(f, "OpenFlow {what}: bad length"),
        }
    }
}

impl std::error::Error for Error {}

fn u16_at(b: &[u8], at: usize, what: &'static str) -> Result<u16, Error> {
    b.get(at..at + 2).map(|s| u16::from_be_bytes([s[0], s[1]])).ok_or(Error::Short(what))
}

fn u32_at(b: &[u8], at: usize, what: &'static str) -> Result<u32, Error> {
    b.get(at..at + 4).map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]])).ok_or(Error::Short(what))
}

fn u64_at(b: &[u8], at: usize, what: &'static str) -> Result<u64, Error> {
    let s = b.get(at..at + 8).ok_or(Error::Short(what))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_be_bytes(a))
}

/// `ofp_header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `ofp_type`.
    pub ty: u8,
    /// Whole message length, header included.
    pub len: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// Parses the 8-byte header at the start of `b` (the version must be 1.3, the length at
    /// least 8).
    pub fn parse(b: &[u8]) -> Result<Self, Error> {
        let h = b.get(..8).ok_or(Error::Short("header"))?;
        if h[0] != VERSION {
            return Err(Error::Version(h[0]));
        }
        let len = u16::from_be_bytes([h[2], h[3]]);
        if len < 8 {
            return Err(Error::Length("header"));
        }
        Ok(Self { ty: h[1], len, xid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]) })
    }
}

/// A message: header fields and a body, encoded with its length filled in.
fn message(ty: u8, xid: u32, body: &[u8]) -> Vec<u8> {
    let len = (8 + body.len()) as u16;
    let mut m = Vec::with_capacity(8 + body.len());
    m.extend_from_slice(&[VERSION, ty]);
    m.extend_from_slice(&len.to_be_bytes());
    m.extend_from_slice(&xid.to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// `OFPT_HELLO` without elements.
pub fn hello(xid: u32) -> Vec<u8> {
    message(ty::HELLO, xid, &[])
}

/// `OFPT_ECHO_REPLY` carrying the request's payload.
pub fn echo_reply(xid: u32, payload: &[u8]) -> Vec<u8> {
    message(ty::ECHO_REPLY, xid, payload)
}

/// `OFPT_ECHO_REQUEST`.
pub fn echo_request(xid: u32) -> Vec<u8> {
    message(ty::ECHO_REQUEST, xid, &[])
}

/// `OFPT_FEATURES_REQUEST`.
pub fn features_request(xid: u32) -> Vec<u8> {
    message(ty::FEATURES_REQUEST, xid, &[])
}

/// `OFPT_BARRIER_REQUEST`.
pub fn barrier_request(xid: u32) -> Vec<u8> {
    message(ty::BARRIER_REQUEST, xid, &[])
}

/// One OXM TLV of a match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oxm {
    /// `oxm_class`.
    pub class: u16,
    /// `oxm_field`.
    pub field: u8,
    /// Value then mask (when `has_mask`), as on the wire.
    pub value: Vec<u8>,
    /// `oxm_hasmask`.
    pub has_mask: bool,
}

/// A match: the OXM fields in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Match(pub Vec<Oxm>);

impl Match {
    /// Matches everything.
    pub fn any() -> Self {
        Self(Vec::new())
    }

    /// IPv4 with the destination in `prefix/len` (an exact `IPV4_DST` at /32, none at /0).
    pub fn ipv4_dst(prefix: u32, len: u8) -> Self {
        let mut m = vec![Oxm {
            class: OXM_BASIC,
            field: OXM_ETH_TYPE,
            value: 0x0800u16.to_be_bytes().to_vec(),
            has_mask: false,
        }];
        let len = len.min(32);
        if len == 32 {
            m.push(Oxm {
                class: OXM_BASIC,
                field: OXM_IPV4_DST,
                value: prefix.to_be_bytes().to_vec(),
                has_mask: false,
            });
        } else if len > 0 {
            let mask = u32::MAX << (32 - u32::from(len));
            let mut v = (prefix & mask).to_be_bytes().to_vec();
            v.extend_from_slice(&mask.to_be_bytes());
            m.push(Oxm { class: OXM_BASIC, field: OXM_IPV4_DST, value: v, has_mask: true });
        }
        Self(m)
    }

    /// `IN_PORT`.
    pub fn in_port(port: u32) -> Self {
        Self(vec![Oxm { class: OXM_BASIC, field: OXM_IN_PORT, value: port.to_be_bytes().to_vec(), has_mask: false }])
    }

    /// The IPv4 destination prefix this match is for: `(prefix, len)`, when it matches IPv4
    /// on a destination (prefix or exact) and nothing else.
    pub fn as_ipv4_dst(&self) -> Option<(u32, u8)> {
        let mut ipv4 = false;
        let mut dst = None;
        for o in &self.0 {
            match (o.class, o.field, o.has_mask, o.value.as_slice()) {
                (OXM_BASIC, OXM_ETH_TYPE, false, [0x08, 0x00]) => ipv4 = true,
                (OXM_BASIC, OXM_IPV4_DST, false, v @ [_, _, _, _]) => {
                    dst = Some((u32::from_be_bytes([v[0], v[1], v[2], v[3]]), 32));
                }
                (OXM_BASIC, OXM_IPV4_DST, true, v @ [_, _, _, _, _, _, _, _]) => {
                    let mask = u32::from_be_bytes([v[4], v[5], v[6], v[7]]);
                    // Only a contiguous mask is a prefix.
                    if mask.leading_ones() + mask.trailing_zeros() != 32 {
                        return None;
                    }
                    dst = Some((u32::from_be_bytes([v[0], v[1], v[2], v[3]]) & mask, mask.leading_ones() as u8));
                }
                _ => return None,
            }
        }
        if ipv4 { dst } else { None }
    }

    /// `ofp_match` on the wire, padded to a multiple of 8.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let fields: usize = self.0.iter().map(|o| 4 + o.value.len()).sum();
        let len = 4 + fields;
        out.extend_from_slice(&1u16.to_be_bytes()); // OFPMT_OXM
        out.extend_from_slice(&(len as u16).to_be_bytes());
        for o in &self.0 {
            out.extend_from_slice(&o.class.to_be_bytes());
            out.push((o.field << 1) | u8::from(o.has_mask));
            out.push(o.value.len() as u8);
            out.extend_from_slice(&o.value);
        }
        out.resize(out.len() + (len.div_ceil(8) * 8 - len), 0);
    }

    /// Parses an `ofp_match` at the start of `b`; returns it and its padded size.
    pub fn parse(b: &[u8]) -> Result<(Self, usize), Error> {
        if u16_at(b, 0, "match")? != 1 {
            return Err(Error::Length("match type (not OXM)"));
        }
        let len = usize::from(u16_at(b, 2, "match")?);
        if len < 4 || b.len() < len.div_ceil(8) * 8 {
            return Err(Error::Length("match"));
        }
        let mut at = 4;
        let mut fields = Vec::new();
        while at < len {
            let class = u16_at(b, at, "oxm")?;
            let fh = *b.get(at + 2).ok_or(Error::Short("oxm"))?;
            let vlen = usize::from(*b.get(at + 3).ok_or(Error::Short("oxm"))?);
            let value = b.get(at + 4..at + 4 + vlen).ok_or(Error::Short("oxm value"))?;
            if at + 4 + vlen > len {
                return Err(Error::Length("oxm"));
            }
            fields.push(Oxm { class, field: fh >> 1, value: value.to_vec(), has_mask: fh & 1 == 1 });
            at += 4 + vlen;
        }
        Ok((Self(fields), len.div_ceil(8) * 8))
    }
}

/// An `OFPAT_OUTPUT` action to `port` (the whole packet when it is the controller).
fn output_action(port: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&AT_OUTPUT.to_be_bytes());
    out.extend_from_slice(&16u16.to_be_bytes());
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&CML_NO_BUFFER.to_be_bytes());
    out.extend_from_slice(&[0; 6]);
}

/// `OFPT_FLOW_MOD` with command `OFPFC_ADD` into table 0: `matching` at `priority`, an
/// apply-actions instruction outputting to `port`, tagged with `cookie`, no timeouts,
/// `OFPFF_CHECK_OVERLAP` off (the controller adds non-overlapping prefixes itself) and
/// `OFPFF_SEND_FLOW_REM` off.
pub fn flow_add(xid: u32, cookie: u64, priority: u16, matching: &Match, port: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(96);
    b.extend_from_slice(&cookie.to_be_bytes());
    b.extend_from_slice(&0u64.to_be_bytes()); // cookie_mask
    b.push(0); // table_id
    b.push(0); // OFPFC_ADD
    b.extend_from_slice(&0u16.to_be_bytes()); // idle_timeout
    b.extend_from_slice(&0u16.to_be_bytes()); // hard_timeout
    b.extend_from_slice(&priority.to_be_bytes());
    b.extend_from_slice(&NO_BUFFER.to_be_bytes());
    b.extend_from_slice(&PORT_ANY.to_be_bytes()); // out_port (ignored by ADD)
    b.extend_from_slice(&GROUP_ANY.to_be_bytes()); // out_group
    b.extend_from_slice(&0u16.to_be_bytes()); // flags
    b.extend_from_slice(&[0; 2]);
    matching.encode(&mut b);
    b.extend_from_slice(&IT_APPLY_ACTIONS.to_be_bytes());
    b.extend_from_slice(&24u16.to_be_bytes()); // 8 + one 16-byte output action
    b.extend_from_slice(&[0; 4]);
    output_action(port, &mut b);
    message(ty::FLOW_MOD, xid, &b)
}

/// `OFPT_FLOW_MOD` (`OFPFC_ADD`, table 0) like [`flow_add`], whose action is `OFPAT_GROUP`
/// to `group`.
pub fn flow_add_group(xid: u32, cookie: u64, priority: u16, matching: &Match, group: u32) -> Vec<u8> {
    let mut m = flow_add(xid, cookie, priority, matching, 0);
    // Replace the 16-byte output action with an 8-byte group action (type 22).
    m.truncate(m.len() - 16);
    let n = m.len();
    m[n - 6..n - 4].copy_from_slice(&16u16.to_be_bytes()); // the instruction's length
    m.extend_from_slice(&22u16.to_be_bytes());
    m.extend_from_slice(&8u16.to_be_bytes());
    m.extend_from_slice(&group.to_be_bytes());
    let len = m.len() as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

/// `OFPT_GROUP_MOD` adding group `group` of type `OFPGT_SELECT` with one bucket per port
/// (weight 1, no watch), each outputting to its port: the switch picks a bucket per flow
/// (OVS: a hash of the packet's fields), what ECMP does.
pub fn group_add_select(xid: u32, group: u32, ports: &[u32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 32 * ports.len());
    b.extend_from_slice(&0u16.to_be_bytes()); // OFPGC_ADD
    b.push(1); // OFPGT_SELECT
    b.push(0);
    b.extend_from_slice(&group.to_be_bytes());
    for &p in ports {
        b.extend_from_slice(&32u16.to_be_bytes()); // ofp_bucket (16) + one output action (16)
        b.extend_from_slice(&1u16.to_be_bytes()); // weight
        b.extend_from_slice(&PORT_ANY.to_be_bytes()); // watch_port
        b.extend_from_slice(&GROUP_ANY.to_be_bytes()); // watch_group
        b.extend_from_slice(&[0; 4]);
        output_action(p, &mut b);
    }
    message(ty::GROUP_MOD, xid, &b)
}

/// `OFPT_PACKET_OUT` of `data` (no switch buffer) as if it came in on `in_port`, out of
/// `port`.
pub fn packet_out(xid: u32, in_port: u32, port: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(32 + data.len());
    b.extend_from_slice(&NO_BUFFER.to_be_bytes());
    b.extend_from_slice(&in_port.to_be_bytes());
    b.extend_from_slice(&16u16.to_be_bytes()); // actions_len
    b.extend_from_slice(&[0; 6]);
    output_action(port, &mut b);
    b.extend_from_slice(data);
    message(ty::PACKET_OUT, xid, &b)
}

/// `OFPT_MULTIPART_REQUEST` of type `OFPMP_FLOW` for every flow of every table.
pub fn flow_stats_request(xid: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(48);
    b.extend_from_slice(&MP_FLOW.to_be_bytes());
    b.extend_from_slice(&0u16.to_be_bytes()); // flags
    b.extend_from_slice(&[0; 4]);
    b.push(TABLE_ALL);
    b.extend_from_slice(&[0; 3]);
    b.extend_from_slice(&PORT_ANY.to_be_bytes());
    b.extend_from_slice(&GROUP_ANY.to_be_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&0u64.to_be_bytes()); // cookie
    b.extend_from_slice(&0u64.to_be_bytes()); // cookie_mask
    Match::any().encode(&mut b);
    message(ty::MULTIPART_REQUEST, xid, &b)
}

/// `OFPT_FEATURES_REPLY`: the switch's datapath id.
pub fn parse_features_reply(msg: &[u8]) -> Result<u64, Error> {
    u64_at(msg, 8, "features reply")
}

/// `OFPT_ERROR`: `(type, code)`.
pub fn parse_error(msg: &[u8]) -> Result<(u16, u16), Error> {
    Ok((u16_at(msg, 8, "error")?, u16_at(msg, 10, "error")?))
}

/// An `OFPT_PACKET_IN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    /// `buffer_id` (`NO_BUFFER` when the packet is all in `data`).
    pub buffer_id: u32,
    /// `total_len`: the frame's length on the switch.
    pub total_len: u16,
    /// `reason`.
    pub reason: u8,
    /// `table_id`.
    pub table_id: u8,
    /// `cookie` of the flow entry that sent it.
    pub cookie: u64,
    /// The match carrying the packet's pipeline fields (`IN_PORT` at least).
    pub matching: Match,
    /// The frame.
    pub data: Vec<u8>,
}

impl PacketIn {
    /// The ingress port (`IN_PORT` of the match).
    pub fn in_port(&self) -> Option<u32> {
        self.matching.0.iter().find(|o| o.class == OXM_BASIC && o.field == OXM_IN_PORT && !o.has_mask).and_then(|o| {
            let v: [u8; 4] = o.value.as_slice().try_into().ok()?;
            Some(u32::from_be_bytes(v))
        })
    }
}

/// Parses an `OFPT_PACKET_IN` (the whole message, header included).
pub fn parse_packet_in(msg: &[u8]) -> Result<PacketIn, Error> {
    let buffer_id = u32_at(msg, 8, "packet-in")?;
    let total_len = u16_at(msg, 12, "packet-in")?;
    let reason = *msg.get(14).ok_or(Error::Short("packet-in"))?;
    let table_id = *msg.get(15).ok_or(Error::Short("packet-in"))?;
    let cookie = u64_at(msg, 16, "packet-in")?;
    let (matching, mlen) = Match::parse(msg.get(24..).ok_or(Error::Short("packet-in"))?)?;
    // Two bytes of padding, then the frame.
    let data = msg.get(24 + mlen + 2..).ok_or(Error::Short("packet-in data"))?.to_vec();
    Ok(PacketIn { buffer_id, total_len, reason, table_id, cookie, matching, data })
}

/// One entry of a flow-stats reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats {
    /// `table_id`.
    pub table_id: u8,
    /// `priority`.
    pub priority: u16,
    /// `cookie`.
    pub cookie: u64,
    /// `packet_count`.
    pub packets: u64,
    /// The match.
    pub matching: Match,
    /// The output ports of its apply-actions instructions, in order.
    pub outputs: Vec<u32>,
}

/// Parses an `OFPT_MULTIPART_REPLY` of type `OFPMP_FLOW`: its entries and whether more
/// replies follow (`OFPMPF_REPLY_MORE`).
pub fn parse_flow_stats_reply(msg: &[u8]) -> Result<(Vec<FlowStats>, bool), Error> {
    if u16_at(msg, 8, "multipart reply")? != MP_FLOW {
        return Err(Error::Length("multipart reply type (not OFPMP_FLOW)"));
    }
    let more = u16_at(msg, 10, "multipart reply")? & MPF_MORE != 0;
    let mut at = 16;
    let mut out = Vec::new();
    while at < msg.len() {
        let e = &msg[at..];
        let len = usize::from(u16_at(e, 0, "flow stats")?);
        if len < 56 || len > e.len() {
            return Err(Error::Length("flow stats"));
        }
        let e = &e[..len];
        let table_id = e[2];
        let priority = u16_at(e, 12, "flow stats")?;
        let cookie = u64_at(e, 24, "flow stats")?;
        let packets = u64_at(e, 32, "flow stats")?;
        let (matching, mlen) = Match::parse(&e[48..])?;
        let mut outputs = Vec::new();
        let mut i = 48 + mlen;
        while i < len {
            let ity = u16_at(e, i, "instruction")?;
            let ilen = usize::from(u16_at(e, i + 2, "instruction")?);
            if ilen < 8 || i + ilen > len {
                return Err(Error::Length("instruction"));
            }
            if ity == IT_APPLY_ACTIONS {
                let mut a = i + 8;
                while a < i + ilen {
                    let aty = u16_at(e, a, "action")?;
                    let alen = usize::from(u16_at(e, a + 2, "action")?);
                    if alen < 8 || a + alen > i + ilen {
                        return Err(Error::Length("action"));
                    }
                    if aty == AT_OUTPUT {
                        outputs.push(u32_at(e, a + 4, "output action")?);
                    }
                    a += alen;
                }
            }
            i += ilen;
        }
        out.push(FlowStats { table_id, priority, cookie, packets, matching, outputs });
        at += len;
    }
    Ok((out, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn fixed_messages_are_the_spec_sizes() {
        // ofp_header is 8 bytes; hello, features request and barrier are a bare header.
        assert_eq!(hello(7), hex("04 00 0008 00000007"));
        assert_eq!(features_request(1), hex("04 05 0008 00000001"));
        assert_eq!(barrier_request(2), hex("04 14 0008 00000002"));
        assert_eq!(echo_reply(3, b"ab"), hex("04 03 000a 00000003 6162"));
        assert_eq!(Header::parse(&hex("04 15 0008 0000002a")), Ok(Header { ty: ty::BARRIER_REPLY, len: 8, xid: 42 }));
        assert_eq!(Header::parse(&hex("01 00 0008 00000000")), Err(Error::Version(1)));
        assert_eq!(Header::parse(&hex("04 00 0004 00000000")), Err(Error::Length("header")));
        assert_eq!(Header::parse(&hex("04 00")), Err(Error::Short("header")));
    }

    #[test]
    fn flow_mod_is_the_layout_ovs_ofctl_sends() {
        // `ovs-ofctl ofp-print` of these bytes: "OFPT_FLOW_MOD (OF1.3) (xid=0x5): ADD
        // priority=100,ip,nw_dst=10.1.2.0/24 cookie:0xcade actions=output:3". ofp_flow_mod's 48
        // fixed bytes, the OXM match (eth_type, masked ipv4_dst:
        // 4 + 6 + 12 = 22, padded to 24), one apply-actions instruction with one output action.
        let m = flow_add(5, 0xcade, 100, &Match::ipv4_dst(0x0a01_0203, 24), 3);
        let want = hex(
            "04 0e 0060 00000005  000000000000cade 0000000000000000  00 00 0000 0000 0064 ffffffff ffffffff ffffffff 0000 0000 \
             0001 0016 80000a02 0800 80001908 0a010200 ffffff00 0000 \
             0004 0018 00000000 0000 0010 00000003 ffff 000000000000",
        );
        assert_eq!(m, want);
        // A /32 is an exact IPV4_DST (no mask bit), a /0 no destination at all.
        let mut b = Vec::new();
        Match::ipv4_dst(0x0a01_0203, 32).encode(&mut b);
        assert_eq!(b, hex("0001 0012 80000a02 0800 80001804 0a010203 000000000000"));
        b.clear();
        Match::any().encode(&mut b);
        assert_eq!(b, hex("0001 0004 00000000"));
    }

    #[test]
    fn select_group_and_a_flow_to_it() {
        // `ovs-ofctl ofp-print`: "OFPT_GROUP_MOD (OF1.3) (xid=0x7): ADD
        // group_id=1,type=select,bucket=actions=output:2,bucket=actions=output:3".
        let g = group_add_select(7, 1, &[2, 3]);
        let bucket = |p: &str| format!("0020 0001 ffffffff ffffffff 00000000 0000 0010 {p} ffff 000000000000");
        let want = format!("04 0f 0050 00000007 0000 01 00 00000001 {} {}", bucket("00000002"), bucket("00000003"));
        assert_eq!(g, hex(&want));
        // "OFPT_FLOW_MOD (OF1.3) (xid=0x8): ADD priority=1,ip cookie:0xcade actions=group:1".
        let f = flow_add_group(8, 0xcade, 1, &Match::ipv4_dst(0, 0), 1);
        let want = hex(
            "04 0e 0050 00000008  000000000000cade 0000000000000000  00 00 0000 0000 0001 ffffffff ffffffff ffffffff 0000 0000 \
             0001 000a 80000a02 0800 000000000000 \
             0004 0010 00000000 0016 0008 00000001",
        );
        assert_eq!(f, want);
    }

    #[test]
    fn a_match_reads_back_as_its_prefix() {
        for (p, l) in [(0x0a01_0200, 24), (0x0a00_0000, 8), (0x0a01_0203, 32)] {
            let mut b = Vec::new();
            Match::ipv4_dst(p, l).encode(&mut b);
            let (m, n) = Match::parse(&b).unwrap();
            assert_eq!(n, b.len());
            assert_eq!(m.as_ipv4_dst(), Some((p, l)));
        }
        // Not a prefix: no IPv4 ethertype, a non-contiguous mask, or another field too.
        assert_eq!(Match::in_port(1).as_ipv4_dst(), None);
        let odd = Match(vec![
            Oxm { class: OXM_BASIC, field: OXM_ETH_TYPE, value: vec![8, 0], has_mask: false },
            Oxm { class: OXM_BASIC, field: OXM_IPV4_DST, value: hex("0a000000 ff00ff00"), has_mask: true },
        ]);
        assert_eq!(odd.as_ipv4_dst(), None);
        // A match that claims more bytes than there are is an error, not a panic.
        assert_eq!(Match::parse(&hex("0001 0030 80000a02 0800")), Err(Error::Length("match")));
        assert!(Match::parse(&hex("0001 000c 80000a08 0800 0000")).is_err());
    }

    #[test]
    fn packet_in_and_out() {
        // `ovs-ofctl ofp-print`: "OFPT_PACKET_IN (OF1.3) (xid=0x0): cookie=0x0 total_len=4
        // in_port=2 (via no_match) data_len=4 (unbuffered)". OF1.3 packet-in (spec §7.4.1): buffer_id, total_len, reason, table_id, cookie, a match
        // with IN_PORT (4 + 8 = 12, padded to 16), 2 bytes of pad, the frame.
        let msg = hex(
            "04 0a 002e 00000000  ffffffff 0004 00 00 0000000000000000  0001 000c 80000004 00000002 00000000  0000  deadbeef",
        );
        let p = parse_packet_in(&msg).unwrap();
        assert_eq!(p.buffer_id, NO_BUFFER);
        assert_eq!(p.total_len, 4);
        assert_eq!(p.in_port(), Some(2));
        assert_eq!(p.data, hex("deadbeef"));
        assert!(parse_packet_in(&msg[..30]).is_err());
        // `ovs-ofctl ofp-print`: "OFPT_PACKET_OUT (OF1.3) (xid=0x9): in_port=2 actions=output:3
        // data_len=4". Packet-out: buffer_id, in_port, actions_len, 6 pad, the action, the frame.
        assert_eq!(
            packet_out(9, 2, 3, &hex("deadbeef")),
            hex(
                "04 0d 002c 00000009 ffffffff 00000002 0010 000000000000 0000 0010 00000003 ffff 000000000000 deadbeef"
            )
        );
    }

    #[test]
    fn flow_stats_request_and_reply() {
        // ofp_multipart_request (16) + ofp_flow_stats_request (32) + an empty match (8).
        let r = flow_stats_request(4);
        assert_eq!(r.len(), 56);
        assert_eq!(&r[..16], hex("04 12 0038 00000004 0001 0000 00000000").as_slice());
        // A reply with one entry: priority 100, cookie 0xcade, 7 packets, our match and output.
        let mut entry = hex(
            "0000 00 00 0000000a 00000000 0064 0000 0000 0000 00000000 000000000000cade 0000000000000007 0000000000000100",
        );
        Match::ipv4_dst(0x0a01_0200, 24).encode(&mut entry);
        entry.extend(hex("0004 0018 00000000 0000 0010 00000003 ffff 000000000000"));
        let n = entry.len() as u16;
        entry[..2].copy_from_slice(&n.to_be_bytes());
        let mut body = hex("0001 0001 00000000");
        body.extend(&entry);
        let msg = message(ty::MULTIPART_REPLY, 4, &body);
        let (e, more) = parse_flow_stats_reply(&msg).unwrap();
        assert!(more);
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].priority, e[0].cookie, e[0].packets), (100, 0xcade, 7));
        assert_eq!(e[0].matching.as_ipv4_dst(), Some((0x0a01_0200, 24)));
        assert_eq!(e[0].outputs, vec![3]);
        // An entry longer than the message is an error.
        let mut bad = msg.clone();
        bad[16..18].copy_from_slice(&0x0400u16.to_be_bytes());
        assert_eq!(parse_flow_stats_reply(&bad), Err(Error::Length("flow stats")));
    }

    #[test]
    fn error_message() {
        // OFPET_FLOW_MOD_FAILED (5) / OFPFMFC_TABLE_FULL (1), with the offending bytes after.
        assert_eq!(parse_error(&hex("04 01 0010 00000005 0005 0001 04 0e 0060 00000005")), Ok((5, 1)));
        assert!(parse_error(&hex("04 01 0008 00000005")).is_err());
    }
}

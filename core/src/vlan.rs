//! 802.1Q VLAN sub-interfaces (issue 27 item 4): a port and a VLAN ID make an interface of
//! its own, with its own addresses, MTU, neighbours and routes, exactly as a port does.
//!
//! Interfaces are numbered as ports are: `0..PORTS` are the ports themselves (untagged
//! frames, and priority-tagged ones, VID 0), `PORTS..IFACES` the sub-interfaces a chain
//! declares (`port.vlan=iface:N,port:P,vid:V`; the chain TOML's `[[port.vlan]]` numbers them
//! from [`PORTS`] in order). Everything above the link layer — the neighbour table, ARP, IPv6
//! neighbour discovery, ICMP, the L3 forwarder's routes — sees interface numbers only; the
//! tag exists at the edges:
//!
//! - **receive**: a chain with sub-interfaces looks at a frame's first EtherType; an 802.1Q
//!   tag (TPID 0x8100) whose (port, VID) is declared is popped in place ([`pop`]: the MACs
//!   move 4 bytes up, the frame starts 4 bytes later) and the frame continues as received on
//!   the sub-interface; VID 0 (priority only) continues on the port; any other tag is dropped
//!   as `vlan_unknown`. A chain without sub-interfaces does not look (a tagged frame goes
//!   through its NFs with the tag, as before).
//! - **transmit**: a frame sent to a sub-interface gets the tag back ([`push`]: the frame
//!   starts 4 bytes earlier, in the buffer's headroom; PCP and DEI 0) and goes out of the
//!   sub-interface's port, with that port's MAC as source.
//!
//! Facts (IEEE 802.1Q-2018 §9.6): the tag is TPID 0x8100 then the TCI — PCP bits 15..13, DEI
//! bit 12, VID bits 11..0; VID 0 means "no VLAN, priority only", VID 4095 is reserved, so a
//! sub-interface has VID 1..=4094. Only one tag is taken off (no QinQ).

use core::fmt;

use crate::buf::{PacketBuf, Pool};
use crate::stage::PORTS;

/// Most VLAN sub-interfaces a dataplane has.
pub const VLANS: usize = 8;
/// Most interfaces: the ports, then the sub-interfaces.
pub const IFACES: usize = PORTS + VLANS;
/// The 802.1Q tag protocol identifier.
pub const TPID: u16 = 0x8100;
/// Bytes of one tag.
pub const TAG_LEN: usize = 4;

/// One sub-interface: interface `iface` is VLAN `vid` on port `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Vlan {
    /// Its interface number, `PORTS..IFACES`.
    pub iface: u8,
    /// The port it is on, below [`PORTS`].
    pub port: u8,
    /// Its VLAN ID, 1..=4094.
    pub vid: u16,
}

/// What is wrong with one [`Vlan`] of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum VlanError {
    /// `iface` not `PORTS..IFACES`, or given twice.
    Iface,
    /// `port` not below [`PORTS`].
    Port,
    /// `vid` not 1..=4094, or the same (port, VID) twice.
    Vid,
}

impl fmt::Display for VlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Iface => write!(f, "iface not {PORTS}..{IFACES}, or given twice"),
            Self::Port => write!(f, "port not below {PORTS}"),
            Self::Vid => f.write_str("vid not 1..=4094, or the same port and vid twice"),
        }
    }
}

/// The sub-interfaces of a chain, by interface and by (port, VID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VlanMap {
    /// Slot `i`: interface `PORTS + i` as (port, VID); VID 0: not declared.
    slots: [(u8, u16); VLANS],
    /// Any declared.
    any: bool,
}

impl VlanMap {
    /// No sub-interface.
    pub const EMPTY: VlanMap = VlanMap { slots: [(0, 0); VLANS], any: false };

    /// The map of `vlans`; the error names the first bad one by index.
    pub fn new(vlans: &[Vlan]) -> Result<Self, (usize, VlanError)> {
        let mut m = VlanMap::default();
        for (i, v) in vlans.iter().enumerate() {
            let slot = usize::from(v.iface).checked_sub(PORTS).filter(|&s| s < VLANS);
            let Some(slot) = slot.filter(|&s| m.slots[s].1 == 0) else {
                return Err((i, VlanError::Iface));
            };
            if usize::from(v.port) >= PORTS {
                return Err((i, VlanError::Port));
            }
            if !(1..=4094).contains(&v.vid) || m.iface(v.port, v.vid).is_some() {
                return Err((i, VlanError::Vid));
            }
            m.slots[slot] = (v.port, v.vid);
            m.any = true;
        }
        Ok(m)
    }

    /// Whether the chain has no sub-interface (receive does not look for tags).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        !self.any
    }

    /// Interface `iface` as (port, VID) if it is a declared sub-interface.
    #[inline]
    pub fn of(&self, iface: usize) -> Option<(u8, u16)> {
        let s = *self.slots.get(iface.checked_sub(PORTS)?)?;
        (s.1 != 0).then_some(s)
    }

    /// The sub-interface of VLAN `vid` on `port`, if declared.
    #[inline]
    pub fn iface(&self, port: u8, vid: u16) -> Option<u8> {
        let s = self.slots.iter().position(|&(p, v)| v != 0 && p == port && v == vid)?;
        Some((PORTS + s) as u8)
    }

    /// The port interface `iface` sends on: itself for a port, its port for a declared
    /// sub-interface.
    #[inline]
    pub fn port_of(&self, iface: usize) -> Option<usize> {
        if iface < PORTS { Some(iface) } else { self.of(iface).map(|(p, _)| usize::from(p)) }
    }

    /// Whether `iface` is a port or a declared sub-interface.
    pub fn exists(&self, iface: usize) -> bool {
        self.port_of(iface).is_some()
    }

    /// The declared sub-interfaces.
    pub fn iter(&self) -> impl Iterator<Item = Vlan> + '_ {
        (0..VLANS).filter_map(|s| {
            let (port, vid) = self.slots[s];
            (vid != 0).then_some(Vlan { iface: (PORTS + s) as u8, port, vid })
        })
    }
}

/// The VID of `frame`'s outer 802.1Q tag (`None`: untagged, or too short to hold one).
#[inline]
pub fn tag_of(frame: &[u8]) -> Option<u16> {
    let t = frame.get(12..16)?;
    (u16::from_be_bytes([t[0], t[1]]) == TPID).then(|| u16::from_be_bytes([t[2], t[3]]) & 0x0fff)
}

/// Takes `b`'s outer 802.1Q tag off in place: the 12 bytes of MACs move up over it and the
/// frame starts [`TAG_LEN`] bytes later. `false` (untouched) when the frame holds no tag
/// and an EtherType after it.
pub fn pop(pool: &mut Pool<'_>, b: PacketBuf) -> bool {
    let (off, len) = (pool.frame_offset(b), pool.len(b));
    if len < 12 + TAG_LEN + 2 || tag_of(pool.frame(b)).is_none() {
        return false;
    }
    pool.frame_mut(b).copy_within(0..12, TAG_LEN);
    pool.set_frame(b, off + TAG_LEN, len - TAG_LEN).is_ok()
}

/// Puts an 802.1Q tag for `vid` (PCP and DEI 0) in front of `b`'s EtherType: the frame
/// starts [`TAG_LEN`] bytes earlier, in the buffer's headroom, and its MACs move down with
/// it. `false` (untouched) when there is no headroom or the frame is shorter than its MACs.
pub fn push(pool: &mut Pool<'_>, b: PacketBuf, vid: u16) -> bool {
    let (off, len) = (pool.frame_offset(b), pool.len(b));
    let Some(start) = off.checked_sub(TAG_LEN) else { return false };
    if len < 12 || pool.set_frame(b, start, len + TAG_LEN).is_err() {
        return false;
    }
    let f = pool.frame_mut(b);
    f.copy_within(TAG_LEN..TAG_LEN + 12, 0);
    if let Some(t) = f.get_mut(12..16) {
        t[..2].copy_from_slice(&TPID.to_be_bytes());
        t[2..].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{BUF_SIZE, HEADROOM};

    fn vlan(iface: usize, port: u8, vid: u16) -> Vlan {
        Vlan { iface: iface as u8, port, vid }
    }

    #[test]
    fn the_map_finds_sub_interfaces_both_ways_and_refuses_bad_ones_by_index() {
        let m = VlanMap::new(&[vlan(PORTS, 0, 100), vlan(PORTS + 3, 2, 100)]).unwrap();
        assert!(!m.is_empty());
        assert_eq!(m.of(PORTS), Some((0, 100)));
        assert_eq!(m.of(PORTS + 3), Some((2, 100)));
        assert_eq!(m.of(PORTS + 1), None, "not declared");
        assert_eq!(m.of(1), None, "a port is not a sub-interface");
        assert_eq!(m.of(IFACES), None);
        assert_eq!(m.iface(0, 100), Some(PORTS as u8));
        assert_eq!(m.iface(2, 100), Some((PORTS + 3) as u8));
        assert_eq!(m.iface(1, 100), None);
        assert_eq!((m.port_of(1), m.port_of(PORTS + 3), m.port_of(PORTS + 1)), (Some(1), Some(2), None));
        assert_eq!(m.iter().collect::<alloc::vec::Vec<_>>(), [vlan(PORTS, 0, 100), vlan(PORTS + 3, 2, 100)]);
        assert!(VlanMap::new(&[]).unwrap().is_empty());
        for (bad, want) in [
            (alloc::vec![vlan(PORTS - 1, 0, 5)], (0, VlanError::Iface)),
            (alloc::vec![vlan(IFACES, 0, 5)], (0, VlanError::Iface)),
            (alloc::vec![vlan(PORTS, 0, 5), vlan(PORTS, 1, 6)], (1, VlanError::Iface)),
            (alloc::vec![vlan(PORTS, PORTS as u8, 5)], (0, VlanError::Port)),
            (alloc::vec![vlan(PORTS, 0, 0)], (0, VlanError::Vid)),
            (alloc::vec![vlan(PORTS, 0, 4095)], (0, VlanError::Vid)),
            (alloc::vec![vlan(PORTS, 0, 7), vlan(PORTS + 1, 0, 7)], (1, VlanError::Vid)),
        ] {
            assert_eq!(VlanMap::new(&bad), Err(want), "{bad:?}");
        }
    }

    #[test]
    fn pop_then_push_gives_the_frame_back_and_each_refuses_what_it_cannot_do() {
        let mut mem = alloc::vec![0u8; 4 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 4).unwrap();
        let tagged = crate::test_frames::eth(&[(TPID, 0x6064)], 0x0800, &[0x45, 1, 2, 3]);
        let b = pool.alloc().unwrap();
        pool.set_frame(b, HEADROOM, tagged.len()).unwrap();
        pool.frame_mut(b).copy_from_slice(&tagged);
        assert_eq!(tag_of(pool.frame(b)), Some(0x064), "PCP 3 is not part of the VID");
        assert!(pop(&mut pool, b));
        assert_eq!((pool.frame_offset(b), pool.len(b)), (HEADROOM + TAG_LEN, tagged.len() - TAG_LEN));
        let mut untagged = tagged[..12].to_vec();
        untagged.extend_from_slice(&tagged[16..]);
        assert_eq!(pool.frame(b), &untagged[..]);
        assert_eq!(tag_of(pool.frame(b)), None);
        assert!(!pop(&mut pool, b), "no tag left");
        assert!(push(&mut pool, b, 0x064));
        let mut want = tagged.clone();
        want[14] &= 0x0f; // PCP and DEI are not kept
        assert_eq!(pool.frame(b), &want[..]);
        assert_eq!(pool.frame_offset(b), HEADROOM);
        // No headroom: refused, untouched.
        pool.set_frame(b, 2, untagged.len()).unwrap();
        let before = pool.frame(b).to_vec();
        assert!(!push(&mut pool, b, 5));
        assert_eq!((pool.frame_offset(b), pool.frame(b)), (2, &before[..]));
        // Too short to hold a tag and an EtherType.
        pool.set_frame(b, HEADROOM, 15).unwrap();
        pool.frame_mut(b)[12..14].copy_from_slice(&TPID.to_be_bytes());
        assert!(!pop(&mut pool, b));
        assert_eq!(pool.len(b), 15);
    }
}

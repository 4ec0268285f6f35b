//! What a buffer handed to an auxiliary core carries in the pool's opaque metadata bytes
//! ([`crate::buf::OPAQUE`]): where its frame goes when the auxiliary core gives it back
//! ([`set_out`]), and, for a frame whose chain head ran on the dedicated core, where its tail
//! starts ([`set_tail`]).
//!
//! Layout of the three bytes: `[out, tail_from, tail_port]`. `out` is the port plus one (0:
//! none, the frame was dropped — what the pool's zeroing means); `tail_from` is the tail's
//! first NF (0: no mark); `tail_port` is the head's verdict port in bits 0..=6 and, in bit 7,
//! whether the head chose the destination MAC.

use crate::buf::{PacketBuf, Pool};

/// What a core running a chain's tail needs of a frame whose head ran on another core
/// (NetBlaze's whale split, [`super::stage`]): kept in the buffer's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TailMark {
    /// The tail's first NF (1 ..: the head ran NFs `0..from`).
    pub from: u8,
    /// The port the head's verdict sends the frame to (0..=127).
    pub port: u8,
    /// The head chose the frame's destination MAC (written in the frame already).
    pub dst_set: bool,
}

/// Says where `b`'s frame goes when its holder gives it back (a port below 255; `None`:
/// nowhere, it was dropped). Zero again when the buffer is allocated or a view frees it.
#[inline]
pub fn set_out(pool: &mut Pool<'_>, b: PacketBuf, port: Option<u8>) {
    let mut o = pool.opaque(b);
    o[0] = encode(port, None)[0];
    pool.set_opaque(b, o);
}

/// Where `b`'s holder said it goes ([`set_out`]).
#[inline]
pub fn out(pool: &Pool<'_>, b: PacketBuf) -> Option<u8> {
    pool.opaque(b)[0].checked_sub(1)
}

/// Sets both of `b`'s marks at once ([`set_out`] and [`set_tail`] in one write): a frame whose
/// head ran here, handed over with the interface it arrived on (a port, or a VLAN
/// sub-interface: its tail runs as the head did, with the VID, `nf::Chain::admit_tail`).
#[inline]
pub fn set(pool: &mut Pool<'_>, b: PacketBuf, out: Option<u8>, tail: Option<TailMark>) {
    pool.set_opaque(b, encode(out, tail));
}

/// The three bytes of an output port and a tail mark (module docs).
#[inline]
fn encode(out: Option<u8>, tail: Option<TailMark>) -> [u8; 3] {
    let o = out.filter(|&p| p != u8::MAX).map_or(0, |p| p + 1);
    match tail {
        Some(t) if t.from > 0 => [o, t.from, (t.port & 0x7F) | if t.dst_set { 0x80 } else { 0 }],
        _ => [o, 0, 0],
    }
}

/// Marks `b` as a frame whose chain head ran here and whose tail runs on the core it is
/// handed to; `None` (or a mark with `from` 0) clears it. A port above 127 is cut to its
/// low 7 bits. Zero again when the buffer is allocated.
#[inline]
pub fn set_tail(pool: &mut Pool<'_>, b: PacketBuf, tail: Option<TailMark>) {
    let mut o = pool.opaque(b);
    let [_, from, port] = encode(None, tail);
    (o[1], o[2]) = (from, port);
    pool.set_opaque(b, o);
}

/// `b`'s tail mark ([`set_tail`]).
#[inline]
pub fn tail(pool: &Pool<'_>, b: PacketBuf) -> Option<TailMark> {
    let [_, from, port] = pool.opaque(b);
    (from > 0).then_some(TailMark { from, port: port & 0x7F, dst_set: port & 0x80 != 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BUF_SIZE;

    #[test]
    fn a_tail_mark_and_an_out_port_round_trip_per_buffer_and_alloc_clears_them() {
        let mut mem = vec![0u8; 4 * BUF_SIZE];
        let mut p = Pool::try_new(&mut mem, 0, 4).unwrap();
        let (a, b) = (p.alloc().unwrap(), p.alloc().unwrap());
        assert_eq!((tail(&p, a), out(&p, a)), (None, None));
        let mark = TailMark { from: 2, port: 1, dst_set: true };
        set_tail(&mut p, a, Some(mark));
        set_out(&mut p, a, Some(0));
        assert_eq!((tail(&p, a), tail(&p, b), out(&p, a), out(&p, b)), (Some(mark), None, Some(0), None));
        // The largest port that fits; 255 is no port.
        set_out(&mut p, b, Some(254));
        assert_eq!(out(&p, b), Some(254));
        set_out(&mut p, b, Some(255));
        assert_eq!(out(&p, b), None);
        // A port beyond 7 bits is cut to them; `from` 0 is no mark; the out port is kept.
        set_out(&mut p, b, Some(3));
        set_tail(&mut p, b, Some(TailMark { from: 1, port: 0xFF, dst_set: false }));
        assert_eq!(tail(&p, b), Some(TailMark { from: 1, port: 0x7F, dst_set: false }));
        set_tail(&mut p, b, Some(TailMark { from: 0, port: 1, dst_set: true }));
        assert_eq!((tail(&p, b), out(&p, b)), (None, Some(3)));
        set_tail(&mut p, a, None);
        assert_eq!(tail(&p, a), None);
        set_tail(&mut p, a, Some(mark));
        p.free(a).unwrap();
        let again = p.alloc().unwrap();
        assert_eq!(again, a);
        assert_eq!((tail(&p, again), out(&p, again)), (None, None), "alloc resets the marks");
        // Both at once is the same as one after the other.
        set(&mut p, again, Some(1), Some(mark));
        set_out(&mut p, b, Some(1));
        set_tail(&mut p, b, Some(mark));
        assert_eq!(p.opaque(again), p.opaque(b));
        assert_eq!((out(&p, again), tail(&p, again)), (Some(1), Some(mark)));
    }
}

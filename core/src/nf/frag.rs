//! IPv4 fragmentation at the egress (RFC 791 §3.2 "Fragmentation and reassembly", RFC 1812
//! §5.2.6): a packet longer than its egress port's MTU without Don't Fragment is cut into
//! fragments that fit, in the pool's buffers, without allocation.
//!
//! - The first fragment stays in the packet's own buffer: its header (options included) and
//!   the first `⌊(MTU − IHL) / 8⌋ × 8` bytes of data, More Fragments set.
//! - Each later fragment is a new buffer: the frame's link header as it was (the egress
//!   rewrites the MACs), the IP header with only the options whose *copied* flag is set
//!   (RFC 791: "the copied flag ... indicates that this option is copied into all fragments")
//!   padded to a 4-byte multiple, and the next data.
//! - Offsets continue the packet's own (a fragment is fragmented again the same way), and the
//!   last piece keeps the packet's More Fragments flag. Identification, TOS, TTL and protocol
//!   are kept; each header's checksum is computed anew.
//! - A packet over several buffers (a jumbo frame) is read across them. The first fragment is
//!   the packet cut short where its data ends (`Pool::truncate_frame`: the buffers after that
//!   are freed); a later fragment longer than a buffer (an egress MTU above 1 966) spans
//!   several new ones, its headers in the first.
//! - A buffer short (the lane's pool empty) fails the whole packet: nothing is sent, the buffers
//!   taken are given back, the caller drops the packet.

use crate::buf::{PacketBuf, Pool};
use crate::checksum;

/// Most fragments one packet is cut into: a 9 000-byte packet (the largest `port.mtu`, a
/// jumbo frame over several buffers) over an MTU of 1 280, the smallest, takes eight.
pub const MAX_FRAGMENTS: usize = 8;

/// The fragments of a packet, the first in the packet's own buffer.
pub type Fragments = heapless::Vec<PacketBuf, MAX_FRAGMENTS>;

/// The options of `opts` (an IPv4 header's option bytes) that go into every fragment, padded
/// with End of Option List to a multiple of 4; `None` if the options are malformed.
fn copied_options(opts: &[u8]) -> Option<heapless::Vec<u8, 40>> {
    let mut out = heapless::Vec::new();
    let mut at = 0;
    while let Some(&ty) = opts.get(at) {
        match ty {
            0 => break,
            1 => at += 1,
            _ => {
                let len = usize::from(*opts.get(at + 1)?);
                let opt = opts.get(at..at + len).filter(|_| len >= 2)?;
                if ty & 0x80 != 0 {
                    out.extend_from_slice(opt).ok()?;
                }
                at += len;
            }
        }
    }
    while out.len() % 4 != 0 {
        out.push(0).ok()?;
    }
    Some(out)
}

/// Cuts the IPv4 packet at `l3` of `b` into fragments of at most `mtu` bytes of IP; returns
/// them (the first is `b`, cut short), or `None` (nothing changed, nothing held) if the packet
/// is not IPv4, has a malformed header, has nothing to cut, or the pool ran out of buffers.
pub fn fragment4(pool: &mut Pool<'_>, b: PacketBuf, l3: usize, mtu: u16) -> Option<Fragments> {
    // The packet may span buffers (a jumbo frame): its header is in the first, its data is
    // read across them ([`Pool::copy_out`]).
    let whole = pool.frame_len(b).checked_sub(l3)?;
    let frame = pool.frame(b);
    let h = frame.get(l3..)?;
    let (&vihl, _) = h.split_first()?;
    let ihl = usize::from(vihl & 0x0F) * 4;
    let total = usize::from(u16::from_be_bytes([*h.get(2)?, *h.get(3)?]));
    if vihl >> 4 != 4 || ihl < 20 || total < ihl || total > whole || h.len() < ihl {
        return None;
    }
    let fo = u16::from_be_bytes([*h.get(6)?, *h.get(7)?]);
    let (more, base) = (fo & 0x2000 != 0, usize::from(fo & 0x1FFF) * 8);
    let opts = copied_options(h.get(20..ihl)?)?;
    let ihl2 = 20 + opts.len();
    let mtu = usize::from(mtu);
    let (first, later) = (mtu.saturating_sub(ihl) / 8 * 8, mtu.saturating_sub(ihl2) / 8 * 8);
    let data = total - ihl;
    if total <= mtu || first == 0 || later == 0 || h.len() < ihl || l3 + ihl2 > crate::buf::MAX_FRAME {
        return None;
    }
    let mut frags = Fragments::new();
    frags.push(b).ok()?;
    let mut at = first;
    while at < data {
        let n = later.min(data - at);
        // The fragment: headers and as much data as the first buffer holds, the rest of its
        // data over more buffers.
        let room = crate::buf::MAX_FRAME - (l3 + ihl2);
        let Some(nb) = pool.alloc() else { return give_back(pool, &frags) };
        if frags.push(nb).is_err() || pool.set_len(nb, l3 + ihl2 + n.min(room)).is_err() {
            let _ = pool.free(nb);
            return give_back(pool, &frags);
        }
        // The link header and the fixed header from the packet, then this piece.
        let mut head = [0u8; 64 + 20];
        let (link, fixed) = head.split_at_mut(l3.min(64));
        let src = pool.frame(b);
        link.copy_from_slice(src.get(..link.len())?);
        fixed.get_mut(..20)?.copy_from_slice(src.get(l3..l3 + 20)?);
        let last = at + n == data;
        let dst = pool.frame_mut(nb);
        dst.get_mut(..l3)?.copy_from_slice(head.get(..l3)?);
        let ip = dst.get_mut(l3..l3 + ihl2)?;
        ip.get_mut(..20)?.copy_from_slice(head.get(l3..l3 + 20)?);
        ip.get_mut(20..ihl2)?.copy_from_slice(&opts);
        header(ip, ihl2, n, base + at, !last || more)?;
        let mut put = 0;
        let mut into = nb;
        while put < n {
            let k = if put == 0 { n.min(room) } else { (n - put).min(crate::buf::MAX_FRAME) };
            if put > 0 {
                let Some(more_buf) = pool.alloc() else { return give_back(pool, &frags) };
                if pool.set_len(more_buf, k).is_err() || pool.append_segment(nb, more_buf).is_err() {
                    let _ = pool.free(more_buf);
                    return give_back(pool, &frags);
                }
                into = more_buf;
            }
            let from = if put == 0 { l3 + ihl2 } else { 0 };
            let mut piece = [0u8; crate::buf::MAX_FRAME];
            let piece = piece.get_mut(..k)?;
            if !pool.copy_out(b, l3 + ihl + at + put, piece) {
                return give_back(pool, &frags);
            }
            pool.frame_mut(into).get_mut(from..from + k)?.copy_from_slice(piece);
            put += k;
        }
        at += n;
    }
    // The first fragment is the packet cut short: its header in the first buffer, its data in
    // as many of the packet's buffers as it takes; the others go.
    let first_ip = pool.frame_mut(b).get_mut(l3..l3 + ihl)?;
    header(first_ip, ihl, first, base, true)?;
    if !pool.truncate_frame(b, l3 + ihl + first) {
        return give_back(pool, &frags);
    }
    Some(frags)
}

/// Sets a fragment's IHL, total length, flags and offset (`offset` in bytes), and its checksum.
fn header(ip: &mut [u8], ihl: usize, data: usize, offset: usize, more: bool) -> Option<()> {
    *ip.get_mut(0)? = 0x40 | (ihl / 4) as u8;
    ip.get_mut(2..4)?.copy_from_slice(&((ihl + data) as u16).to_be_bytes());
    let df = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x4000;
    let fo = df | if more { 0x2000 } else { 0 } | (offset / 8) as u16 & 0x1FFF;
    ip.get_mut(6..8)?.copy_from_slice(&fo.to_be_bytes());
    ip.get_mut(10..12)?.fill(0);
    let c = checksum::checksum(ip.get(..ihl)?);
    ip.get_mut(10..12)?.copy_from_slice(&c.to_be_bytes());
    Some(())
}

/// Frees the buffers taken for later fragments (all but the packet's own); `None`.
fn give_back(pool: &mut Pool<'_>, frags: &Fragments) -> Option<Fragments> {
    for &f in frags.iter().skip(1) {
        let _ = pool.free(f);
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::buf::BUF_SIZE;
    use std::vec::Vec;

    /// A frame with an IPv4 UDP datagram of `ip_len` bytes of IP and header options `opts`.
    fn packet(ip_len: usize, opts: &[u8]) -> Vec<u8> {
        let ihl = 20 + opts.len();
        let mut f = std::vec![0u8; 14 + ip_len];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x40 | (ihl / 4) as u8;
        f[16..18].copy_from_slice(&(ip_len as u16).to_be_bytes());
        f[18..20].copy_from_slice(&[0xBE, 0xEF]);
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 2]);
        f[30..34].copy_from_slice(&[10, 0, 1, 2]);
        f[34..34 + opts.len()].copy_from_slice(opts);
        for (i, b) in f[14 + ihl..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let c = checksum::checksum(&f[14..14 + ihl]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    }

    fn cut(f: &[u8], mtu: u16, buffers: usize) -> (Option<Vec<Vec<u8>>>, usize) {
        let mut mem = std::vec![0u8; buffers * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, buffers).unwrap();
        let b = pool.alloc().unwrap();
        pool.set_len(b, f.len()).unwrap();
        pool.frame_mut(b).copy_from_slice(f);
        let out = fragment4(&mut pool, b, 14, mtu).map(|fs| fs.iter().map(|&x| pool.frame(x).to_vec()).collect());
        (out, pool.in_use())
    }

    /// [`cut`] for a packet over several buffers (`alloc_frame`): the fragments whole, the
    /// buffers of each, and the pool's buffers in use after.
    fn cut_jumbo(f: &[u8], mtu: u16, buffers: usize) -> Option<(Vec<Vec<u8>>, Vec<usize>, usize)> {
        let mut mem = std::vec![0u8; buffers * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, buffers).unwrap();
        let b = pool.alloc_frame(f).unwrap();
        let held = pool.in_use();
        let Some(fs) = fragment4(&mut pool, b, 14, mtu) else {
            assert_eq!(pool.in_use(), held, "a failed cut keeps only the packet");
            return None;
        };
        let whole = |x| {
            let mut v = std::vec![0u8; pool.frame_len(x)];
            pool.copy_frame(x, &mut v).unwrap();
            v
        };
        let out = fs.iter().map(|&x| whole(x)).collect();
        let counts = fs.iter().map(|&x| pool.segments(x).count()).collect();
        let in_use = pool.in_use();
        for &x in &fs {
            pool.free(x).unwrap();
        }
        assert_eq!((pool.in_use(), pool.double_frees()), (0, 0));
        Some((out, counts, in_use))
    }

    /// A jumbo packet toward an MTU above a buffer's 1 966 bytes of IP: fragments of several
    /// buffers each (the first the packet's own buffers cut short, the rest new), reassembling
    /// to the datagram; a pool too small for them fails the packet and keeps nothing.
    #[test]
    fn a_jumbo_packet_is_cut_into_fragments_longer_than_a_buffer() {
        let f = packet(9000, &[]);
        for (mtu, n) in [(4000u16, 3usize), (8000, 2), (1500, 7)] {
            let (frags, counts, in_use) = cut_jumbo(&f, mtu, 32).expect("cut");
            assert_eq!(frags.len(), n, "mtu {mtu}");
            assert!(frags.iter().all(|x| x.len() - 14 <= usize::from(mtu)), "mtu {mtu}");
            assert_eq!(reassemble(&frags), f[34..].to_vec(), "mtu {mtu}");
            let want: Vec<usize> = frags.iter().map(|x| x.len().div_ceil(crate::buf::MAX_FRAME)).collect();
            assert_eq!(counts, want, "mtu {mtu}: each fragment over as many buffers as it fills");
            assert_eq!(in_use, counts.iter().sum::<usize>(), "mtu {mtu}: the packet's spare buffers went back");
        }
        // Five buffers hold the packet; two more are not enough for 4 000-byte fragments.
        assert!(cut_jumbo(&f, 4000, 7).is_none());
    }

    /// Reassembles fragments as a receiver would (by offset), checking each header.
    fn reassemble(frags: &[Vec<u8>]) -> Vec<u8> {
        let mut data = Vec::new();
        for (i, f) in frags.iter().enumerate() {
            let p = etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).expect("a valid header");
            let h = p.to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum(), "fragment {i}");
            assert_eq!(usize::from(h.total_len), f.len() - 14);
            assert_eq!(h.fragment_offset.value() as usize * 8, data.len(), "fragment {i} follows the last");
            assert_eq!(h.more_fragments, i + 1 < frags.len());
            assert_eq!(h.identification, 0xBEEF);
            data.extend_from_slice(&f[14 + h.header_len()..]);
        }
        data
    }

    #[test]
    fn a_datagram_is_cut_into_fragments_that_fit_and_reassemble() {
        for (len, mtu) in [(1500, 1400), (1500, 1280), (1281, 1280), (1984 - 14, 1280)] {
            let f = packet(len, &[]);
            let (frags, _) = cut(&f, mtu, 8);
            let frags = frags.expect("cut");
            assert!(frags.iter().all(|x| x.len() - 14 <= usize::from(mtu)), "{len} over {mtu}");
            assert!(frags[..frags.len() - 1].iter().all(|x| (x.len() - 34) % 8 == 0));
            assert_eq!(reassemble(&frags), f[34..].to_vec(), "{len} over {mtu}");
        }
        // Nothing to cut: left alone.
        assert!(cut(&packet(1400, &[]), 1400, 4).0.is_none());
    }

    #[test]
    fn only_copied_options_go_into_later_fragments() {
        // Record Route (7, not copied, 7 bytes) then a copied option (0x94: router alert,
        // 4 bytes), NOP, EOL: IHL 32 first, 24 (router alert padded) after.
        let opts = [7, 7, 4, 0, 0, 0, 0, 0x94, 4, 0, 0, 1, 0];
        let mut o = opts.to_vec();
        o.resize(12, 0);
        let f = packet(1500, &o);
        let (frags, _) = cut(&f, 1400, 8);
        let frags = frags.expect("cut");
        assert_eq!(frags[0][14] & 0x0F, 8, "the first keeps every option");
        assert_eq!(&frags[0][34..46], &o[..]);
        assert_eq!(frags[1][14] & 0x0F, 6);
        assert_eq!(&frags[1][34..38], &[0x94, 4, 0, 0]);
        assert_eq!(reassemble(&frags), f[14 + 32..].to_vec());
    }

    #[test]
    fn an_empty_pool_fails_the_packet_and_keeps_nothing() {
        let f = packet(1500, &[]);
        let (frags, in_use) = cut(&f, 1400, 1);
        assert!(frags.is_none());
        assert_eq!(in_use, 1, "only the packet's own buffer, untouched");
    }

    #[test]
    fn a_fragment_is_fragmented_again_at_its_offset() {
        let mut f = packet(1500, &[]);
        f[20..22].copy_from_slice(&(0x2000u16 | 100).to_be_bytes()); // MF, offset 800
        f[24..26].fill(0);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let frags = cut(&f, 1400, 8).0.expect("cut");
        let offs: Vec<(u16, bool)> = frags
            .iter()
            .map(|x| {
                let h = etherparse::Ipv4HeaderSlice::from_slice(&x[14..]).unwrap().to_header();
                (h.fragment_offset.value(), h.more_fragments)
            })
            .collect();
        assert_eq!(offs, [(100, true), (100 + 1376 / 8, true)], "the last keeps MF");
    }
}

//! `core::parse::parse` over arbitrary frames: never panics, and what it reports lies inside
//! the frame (offsets, lengths, payload) and agrees with itself, so that the NFs' accessors,
//! which trust it, cannot index out of bounds; the shallower depths (`parse::Depth`) refuse
//! what they refuse for the same reason as the full parse; the vector loops' parses
//! (`ipv4_flow`, `ipv6_flow`) take a frame only with the flow key the full parse gives it.
#![no_main]

use cadence_core::parse::{self, Depth, L4Kind};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The shallower depths (`validate=l2|l3`): a refusal at one depth is the same refusal at
    // every deeper one; the IP-header-only parse has the same bounds and no transport header.
    let at = [Depth::L2, Depth::L3, Depth::L4].map(|d| parse::check_to(data, d));
    for (i, shallow) in at.iter().enumerate() {
        for deep in &at[i..] {
            if let Err(e) = shallow {
                assert_eq!(deep, &Err(*e), "a refusal changed with depth");
            }
        }
    }
    if let Ok(p3) = parse::parse_to(data, Depth::L3) {
        assert_eq!(p3.l4, L4Kind::Unparsed);
        assert!(usize::from(p3.l3_offset) + usize::from(p3.l3_len) <= data.len(), "IP length past the frame");
        assert!(usize::from(p3.payload_offset) + usize::from(p3.payload_len) <= data.len(), "payload past the frame");
    }
    // The vector loops' parses: a frame they take parses, with the same flow key, at the
    // same depth.
    for (flow, depth) in [
        (parse::ipv4_flow::<true>(data), Depth::L4),
        (parse::ipv4_flow::<false>(data), Depth::L3),
        (parse::ipv6_flow::<true>(data), Depth::L4),
        (parse::ipv6_flow::<false>(data), Depth::L3),
    ] {
        if let Some(f) = flow {
            assert_eq!(parse::parse_to(data, depth).map(|p| p.flow), Ok(f), "a vector parse took a frame otherwise judged");
        }
    }
    let Ok(p) = parse::parse(data) else { return };
    let n = data.len();
    let l3 = usize::from(p.l3_offset);
    let l4 = usize::from(p.l4_offset);
    let pay = usize::from(p.payload_offset);
    assert_eq!(l3, p.l2_len(), "l3_offset is the link header's length");
    assert!(l3 <= l4 && l4 <= pay, "offsets out of order: {l3} {l4} {pay}");
    assert!(l3 + usize::from(p.l3_len) <= n, "IP length past the frame");
    assert!(pay + usize::from(p.payload_len) <= n, "payload past the frame");
    assert!(pay + usize::from(p.payload_len) <= l3 + usize::from(p.l3_len), "payload past the IP packet");
    match p.l4 {
        L4Kind::Tcp => assert!(l4 + 20 <= pay, "TCP header shorter than 20 bytes"),
        L4Kind::Udp => assert_eq!(l4 + 8, pay, "UDP header is 8 bytes"),
        _ => {}
    }
    // Parsing is a function of the bytes.
    assert_eq!(parse::parse(data).ok(), Some(p));
});

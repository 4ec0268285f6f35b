//! The simulator's capture reader (`cadence_sim::netblaze::pcap::read`, classic pcap and
//! pcapng) over arbitrary files: a named error or a trace, never a panic; a trace it returns
//! holds at least one packet, every packet names a flow it lists, and time never runs back.
#![no_main]

use cadence_sim::netblaze::pcap;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok((trace, _skipped)) = pcap::read(data) else { return };
    let flows = trace.flows.len();
    assert!(flows > 0, "a trace without flows");
    assert!(!trace.packets.is_empty(), "a trace without packets");
    for w in trace.packets.windows(2) {
        assert!(w[0].t_ns <= w[1].t_ns, "time ran back");
    }
    for p in &trace.packets {
        assert!((p.flow as usize) < flows, "packet of flow {} of {flows}", p.flow);
    }
});

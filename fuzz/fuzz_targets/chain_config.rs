//! `core::nf::config::ChainSpec::parse` over arbitrary text (the chain text form the image
//! reads from boot module 0): never panics; an error names a line of the text; a spec that
//! parsed builds (tables, automata, tries) or says which NF could not be built — small specs
//! only: capacities are capped here so that a run measures parsing, not the allocator —
//! and the chain it builds takes a frame.
#![no_main]

use cadence_core::nf::Egress;
use cadence_core::nf::config::{ChainSpec, NfSpec};
use cadence_core::time::TickRate;

/// Whether building `nf` stays small (about 16 MiB at most).
fn small(nf: &NfSpec) -> bool {
    const CAP: usize = 1 << 14;
    match nf {
        NfSpec::Acl(c) => c.flow_capacity <= CAP && c.rules.len() <= 4096,
        NfSpec::Lb(c) => c.affinity_capacity <= CAP && c.max_backends <= 1024,
        NfSpec::Accounting(c) => c.capacity <= CAP && c.export_ring <= CAP && c.event_ring <= CAP,
        NfSpec::Nat(_) => true,
        NfSpec::UrlFilter(c) => c.flows <= CAP && c.slabs.saturating_mul(c.window) <= 4 << 20,
        NfSpec::Encrypt(c) => c.udp_flows <= CAP,
        NfSpec::L3fwd(c) => c.first_stride4 <= 20 && c.max_groups4 <= CAP && c.max_groups6 <= CAP,
        _ => false,
    }
}

const EGRESS: Egress = Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1]], None);

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = core::str::from_utf8(data) else { return };
    let spec = match ChainSpec::parse(text) {
        Err(e) => {
            assert!(
                e.line >= 1 && e.line <= text.split('\n').count().max(1),
                "{e} (of {} lines)",
                text.lines().count()
            );
            assert!(!e.to_string().is_empty());
            return;
        }
        Ok(spec) => spec,
    };
    assert_eq!(spec.names().count(), spec.nfs.len());
    let rate = TickRate::try_new(1_000_000_000).expect("nonzero");
    let configs = spec.configs(rate);
    assert_eq!(configs.len(), spec.nfs.len());
    if !configs.iter().all(small) {
        return;
    }
    match spec.build(EGRESS, rate) {
        Err(e) => assert!(e.index < spec.nfs.len() && !e.to_string().is_empty()),
        Ok(factory) => {
            assert_eq!(factory.len(), spec.nfs.len());
            let chain = factory.chain_for_worker();
            assert_eq!(chain.nfs().len(), spec.nfs.len());
        }
    }
});

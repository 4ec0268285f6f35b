//! The P4 programs `cargo xtask peers` times on both sides (issue 28 item 6, the `p4` group):
//! each a spec, its table files and a set of frames that exercises it (written as a pcap that
//! DPDK's `swx_run --bench` and Cadence's `peers p4` both read), the frames chosen so that
//! every output leaves by port 0 or 1 (Cadence's chain has two ports) except where said.
//!
//! - `l2fwd`: DPDK's `l2fwd.spec` (no header parsed, back out of the input port);
//! - `fib`: DPDK's `fib.spec` with its three table files (VRF from the source address, an LPM
//!   route, a next-hop group selector, the next hop's MACs and port): VRF 0 and destinations in
//!   0.0.0.0/2 and 64.0.0.0/2 (groups 0 and 1, next hops on ports 0 and 1);
//! - `learner`: DPDK's `learner.spec` (a learner keyed by the destination address, learning on
//!   a miss with a port from a register counter): 64 destinations, learned in the first pass
//!   and hit after; the learned ports run 0..=3, so half the flows leave by ports 2 and 3,
//!   which DPDK sends and Cadence's two-port chain drops (`no_route`);
//! - `vxlan`: DPDK's `vxlan.spec` with `vxlan_table.txt` (an exact match on the destination
//!   MAC, then the frame encapsulated in Ethernet/IPv4/UDP/VXLAN): the table's entries on ports
//!   0 and 1;
//! - `router`: `chains/p4/router.spec` with its routes (LPM, TTL, incremental checksum): the
//!   rig's two /16s.

use std::path::{Path, PathBuf};

use cadence_build::workspace::workspace_root;

/// One program and its traffic.
#[derive(Debug, Clone)]
pub struct P4Set {
    /// The figure's `size=` (`l2fwd`, `fib`, …).
    pub label: &'static str,
    pub spec: PathBuf,
    /// `(table name, file)` in load order.
    pub tables: Vec<(String, PathBuf)>,
    /// Output ports DPDK's pipeline gets (its drop port comes after them).
    pub ports: u32,
    /// The frames, all entering port 0, cycled by both sides.
    pub frames: Vec<Vec<u8>>,
}

/// The labels of [`p4_sets`], in order (the comparisons name them).
pub const P4_LABELS: [&str; 5] = ["l2fwd", "fib", "learner", "vxlan", "router"];

/// Ethernet + IPv4 (header checksum set) + UDP (no checksum), 64 bytes on the wire without FCS
/// (18 payload bytes).
pub fn udp4(dst_mac: [u8; 6], src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    let sum = f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

fn dpdk(name: &str) -> PathBuf {
    workspace_root().join("core/tests/p4/dpdk").join(name)
}

fn table(name: &str, file: &Path) -> (String, PathBuf) {
    (name.to_string(), file.to_path_buf())
}

/// The sets, in [`P4_LABELS`]' order.
pub fn p4_sets() -> Vec<P4Set> {
    let mac = [0xaa, 0xbb, 0xcc, 0xdd, 0, 0];
    let n = 64u8;
    let l2fwd = (0..n).map(|i| udp4(mac, [10, 0, 0, 1], [10, 1, 0, i], 1000 + u16::from(i), 53)).collect();
    // VRF 0 (source 0.0.0.0); destinations alternately in 0.0.0.0/2 and 64.0.0.0/2.
    let fib = (0..n).map(|i| udp4(mac, [0, 0, 0, 0], [(i % 2) * 64 + 1, i, 0, 1], 1000, 53)).collect();
    let learner = (0..n).map(|i| udp4(mac, [10, 0, 0, 1], [10, 2, i, 9], 1000, 53)).collect();
    // vxlan_table.txt: destination MAC aa:bb:cc:dd:00:0k leaves by port k % 4.
    let vxlan = (0..n)
        .map(|i| {
            let k = [0u8, 1, 4, 5, 8, 9, 12, 13][usize::from(i % 8)];
            udp4([0xaa, 0xbb, 0xcc, 0xdd, 0, k], [10, 0, 0, 1], [10, 3, 0, i], 1000, 53)
        })
        .collect();
    let router = (0..n).map(|i| udp4(mac, [10, 0, 0, 1], [10, 100 + (i % 2), 0, i / 2], 1000, 53)).collect();
    let chains = workspace_root().join("chains/p4");
    vec![
        P4Set { label: P4_LABELS[0], spec: dpdk("l2fwd.spec"), tables: vec![], ports: 2, frames: l2fwd },
        P4Set {
            label: P4_LABELS[1],
            spec: dpdk("fib.spec"),
            tables: vec![
                table("routing_table", &dpdk("fib_routing_table.txt")),
                table("nexthop_group_table", &dpdk("fib_nexthop_group_table.txt")),
                table("nexthop_table", &dpdk("fib_nexthop_table.txt")),
            ],
            ports: 4,
            frames: fib,
        },
        P4Set { label: P4_LABELS[2], spec: dpdk("learner.spec"), tables: vec![], ports: 4, frames: learner },
        P4Set {
            label: P4_LABELS[3],
            spec: dpdk("vxlan.spec"),
            tables: vec![table("vxlan_table", &dpdk("vxlan_table.txt"))],
            ports: 4,
            frames: vxlan,
        },
        P4Set {
            label: P4_LABELS[4],
            spec: chains.join("router.spec"),
            tables: vec![table("routes", &chains.join("router_table.txt"))],
            ports: 2,
            frames: router,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frames_are_valid_ipv4_udp() {
        for s in p4_sets() {
            assert_eq!(s.frames.len(), 64, "{}", s.label);
            for f in &s.frames {
                let p = cadence_core::parse::parse(f).expect("parses");
                assert_eq!(p.flow.proto, 17, "{}", s.label);
            }
            assert!(s.spec.is_file(), "{}", s.spec.display());
            assert!(s.tables.iter().all(|(_, f)| f.is_file()), "{}", s.label);
        }
    }
}

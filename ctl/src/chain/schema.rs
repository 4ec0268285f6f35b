//! The TOML schema of a chain file (`chains/*.toml`), as serde types. Every leaf keeps
//! its span, so that errors found later (by the text-form parser) point at the line.
//!
//! ```toml
//! [chain]
//! nfs = ["acl", "lb", "accounting"]     # in order; every NF below must be listed
//! validate = "l4"                       # optional: l2 | l3 | l4 (default), how deep every
//!                                       # frame is checked at least (docs/PROTOCOL.md)
//!
//! [acl]
//! default = "permit"                    # permit | deny (no rule matched)
//! flow_capacity = 65536                 # optional
//! flow_timeout_ms = 10000               # optional; a flow is reclassified after this
//! #   Timeouts (`*_timeout_ms`) are milliseconds, 1..=86400000 (one day); absent: the
//! #   NF's default. [lb] affinity_timeout_ms, [accounting] idle_timeout_ms,
//! #   [nat] timeout_ms, [urlfilter] inspect_timeout_ms, flow_timeout_ms and handshake_timeout_ms,
//! #   [encrypt] udp_idle_timeout_ms.
//! [[acl.rule]]
//! priority = 10                         # higher wins; ties: the earlier rule
//! src = "10.0.0.0/8"                    # optional prefixes, IPv4 or IPv6 (default any)
//! dst = "10.101.0.0/16"
//! src_port = "1024-65535"               # optional: a port, "LO-HI" (default any)
//! dst_port = 80
//! proto = "tcp"                         # optional: tcp, udp, icmp, icmpv6, number (default any)
//! vlan = 100                            # optional: only frames that arrived with this VID
//! action = "deny"                       # permit | deny
//!
//! [[lb.vip]]
//! addr = "10.100.0.13"                  # the service: address, port, tcp|udp
//! port = 20013
//! proto = "tcp"
//! backends = ["10.200.0.1", "10.200.0.2:8080", "[fd00::1]:80"]   # no port: the VIP's
//!
//! [accounting]                          # every field optional
//! capacity = 8192                       # flows in the table
//! export_ring = 4096                    # expired records kept for export
//! export = "ipfix:1:192.0.2.10:4739"    # send them as IPFIX out of port 1 to this collector
//! export_src = "192.0.2.1"              # the exporter's source address (default 192.0.2.1)
//!
//! [nat]
//! external = "192.0.2.1"                # the external IPv4 address
//! ports = "20000-29999"                 # the port pool
//! inside_port = 0                       # frames entering this port are outbound
//!
//! [urlfilter]
//! banned = ["example.com/forbidden", "ads.example.net"]   # host[/path] prefixes
//! reset = false                         # answer blocked segments with a TCP reset
//! ports = [80, 8080]                    # inspected server ports (default: every TCP port)
//!
//! [encrypt]
//! key = "000102…1f"                     # 64 hex digits (ChaCha20 key); encrypting twice decrypts
//! clear = "pass"                        # pass | drop: what cannot be encrypted (not TCP/UDP)
//!
//! [[l3fwd.route]]
//! prefix = "10.0.0.0/8"
//! port = 1
//! mac = "02:00:00:00:01:01"             # or via = "10.1.0.254" (a gateway of the prefix's IP
//!                                       # version: via = "fe80::1" for an IPv6 prefix) or
//!                                       # via = "direct" (directly connected): the MAC from the
//!                                       # neighbour table (ARP, IPv6 neighbour discovery)
//!
//! [[port.addr]]                         # the ports' own IPv4/IPv6 addresses (any of port/neigh
//! port = 0                              # gives the chain a neighbour table: ARP and ping
//! addr = "10.0.0.1/24"                  # answered, `via` next hops resolved)
//!
//! [[port.vlan]]                         # an 802.1Q sub-interface: VLAN 100 on port 1, an
//! port = 1                              # interface with its own addresses, MTU, neighbours
//! vid = 100                             # and routes; name it with `vlan = 100` beside
//!                                       # `port = 1` in port.addr, port.mtu, neigh.static and
//!                                       # l3fwd.route (the text form numbers sub-interfaces
//!                                       # from 8, in this order)
//!
//! [[port.mtu]]                          # the longest IP packet a port sends (1280..=9000,
//! port = 1                              # default 1500): longer ones get ICMP "fragmentation
//! mtu = 1400                            # needed" / "packet too big" (path-MTU discovery)
//!
//! [neigh]                               # every field optional
//! capacity = 256                        # entries, static ones included
//! probes = 3                            # requests before an entry fails
//! max_waiting = 64                      # frames waiting for answers, over the table
//! reachable_ms = 30000                  # then stale; removed after stale_ms more
//! stale_ms = 60000
//! retrans_ms = 1000                     # between two requests for one address
//! [[neigh.static]]
//! port = 1
//! ip = "10.0.1.50"                     # IPv4 or IPv6
//! mac = "02:00:00:00:00:50"
//! ```
//!

use serde::Deserialize;
use toml::Spanned;

/// A whole chain file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainFile {
    pub chain: Spanned<ChainTable>,
    pub acl: Option<Spanned<AclTable>>,
    pub lb: Option<Spanned<LbTable>>,
    pub accounting: Option<Spanned<AccountingTable>>,
    pub nat: Option<Spanned<NatTable>>,
    pub urlfilter: Option<Spanned<UrlFilterTable>>,
    pub encrypt: Option<Spanned<EncryptTable>>,
    pub l3fwd: Option<Spanned<L3fwdTable>>,
    pub p4: Option<Spanned<P4Table>>,
    pub port: Option<Spanned<PortTable>>,
    pub neigh: Option<Spanned<NeighTable>>,
}

/// `[port]`: its `[[port.addr]]`, `[[port.mtu]]` and `[[port.vlan]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortTable {
    #[serde(default)]
    pub addr: Vec<Spanned<PortAddrTable>>,
    #[serde(default)]
    pub mtu: Vec<Spanned<PortMtuTable>>,
    #[serde(default)]
    pub vlan: Vec<Spanned<PortVlanTable>>,
}

/// `[[port.vlan]]`: VLAN `vid` on `port` is an interface of its own.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortVlanTable {
    pub port: Spanned<u8>,
    pub vid: Spanned<u16>,
}

/// `[[port.mtu]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortMtuTable {
    pub port: Spanned<u8>,
    /// The sub-interface (`[[port.vlan]]`) of `port` with this VLAN ID, instead of the port.
    pub vlan: Option<Spanned<u16>>,
    pub mtu: Spanned<u16>,
}

/// `[[port.addr]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortAddrTable {
    pub port: Spanned<u8>,
    /// The sub-interface (`[[port.vlan]]`) of `port` with this VLAN ID, instead of the port.
    pub vlan: Option<Spanned<u16>>,
    pub addr: Spanned<String>,
}

/// `[neigh]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighTable {
    pub capacity: Option<Spanned<u64>>,
    pub probes: Option<Spanned<u64>>,
    pub max_waiting: Option<Spanned<u64>>,
    pub reachable_ms: Option<Spanned<u64>>,
    pub stale_ms: Option<Spanned<u64>>,
    pub retrans_ms: Option<Spanned<u64>>,
    pub icmp_rate: Option<Spanned<u64>>,
    pub icmp_burst: Option<Spanned<u64>>,
    #[serde(default, rename = "static")]
    pub statics: Vec<Spanned<NeighStaticTable>>,
}

/// `[[neigh.static]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighStaticTable {
    pub port: Spanned<u8>,
    /// The sub-interface (`[[port.vlan]]`) of `port` with this VLAN ID, instead of the port.
    pub vlan: Option<Spanned<u16>>,
    pub ip: Spanned<String>,
    pub mac: Spanned<String>,
}

/// `[chain]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainTable {
    pub nfs: Vec<Spanned<String>>,
    /// How deep every frame is checked at least: `"l2"`, `"l3"` or `"l4"` (default).
    pub validate: Option<Spanned<String>>,
}

/// A port or a port range: `80` or `"80-443"` / `"any"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PortSpec {
    Port(u16),
    Text(String),
}

impl PortSpec {
    /// The text form.
    pub fn text(&self) -> String {
        match self {
            PortSpec::Port(p) => p.to_string(),
            PortSpec::Text(s) => s.clone(),
        }
    }
}

/// `[acl]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclTable {
    pub default: Option<Spanned<String>>,
    pub flow_capacity: Option<Spanned<u64>>,
    pub sweep_buckets: Option<Spanned<u64>>,
    /// Milliseconds (1..=86 400 000, as every `*_timeout_ms`).
    pub flow_timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    pub rule: Vec<Spanned<AclRuleTable>>,
}

/// `[[acl.rule]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclRuleTable {
    pub priority: Option<Spanned<u32>>,
    pub src: Option<Spanned<String>>,
    pub dst: Option<Spanned<String>>,
    pub src_port: Option<Spanned<PortSpec>>,
    pub dst_port: Option<Spanned<PortSpec>>,
    pub proto: Option<Spanned<String>>,
    /// The VLAN ID a frame must have arrived with (1..=4094).
    pub vlan: Option<Spanned<u16>>,
    pub action: Spanned<String>,
}

/// `[l3fwd]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L3fwdTable {
    pub lpm4: Option<Spanned<String>>,
    pub first_stride4: Option<Spanned<u8>>,
    pub max_groups4: Option<Spanned<u64>>,
    pub max_groups6: Option<Spanned<u64>>,
    #[serde(default)]
    pub route: Vec<Spanned<L3fwdRouteTable>>,
}

/// `[[l3fwd.route]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L3fwdRouteTable {
    pub prefix: Spanned<String>,
    pub port: Spanned<u8>,
    /// The sub-interface (`[[port.vlan]]`) of `port` with this VLAN ID, instead of the port.
    pub vlan: Option<Spanned<u16>>,
    pub mac: Option<Spanned<String>>,
    pub via: Option<Spanned<String>>,
}

/// `[lb]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LbTable {
    pub max_backends: Option<Spanned<u64>>,
    pub affinity_capacity: Option<Spanned<u64>>,
    pub sweep_buckets: Option<Spanned<u64>>,
    pub affinity_timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    pub vip: Vec<Spanned<LbVipTable>>,
}

/// `[[lb.vip]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LbVipTable {
    pub addr: Spanned<String>,
    pub port: Spanned<u16>,
    pub proto: Spanned<String>,
    /// `"10.2.0.1"`, `"10.2.0.2:8080"`, `"[fd00::1]:80"`.
    pub backends: Spanned<Vec<String>>,
}

/// `[encrypt]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncryptTable {
    /// 64 hex digits.
    pub key: Spanned<String>,
    pub udp_flows: Option<Spanned<u64>>,
    /// `pass` or `drop`: packets that cannot be encrypted (not TCP/UDP, fragments).
    pub clear: Option<Spanned<String>>,
    pub udp_idle_timeout_ms: Option<Spanned<u64>>,
}

/// `[accounting]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountingTable {
    pub capacity: Option<Spanned<u64>>,
    pub export_ring: Option<Spanned<u64>>,
    pub event_ring: Option<Spanned<u64>>,
    pub sweep_buckets: Option<Spanned<u64>>,
    pub exports_per_batch: Option<Spanned<u64>>,
    pub idle_timeout_ms: Option<Spanned<u64>>,
    /// `ipfix:PORT:IP:UDPPORT`: send expired records as IPFIX out of a port.
    pub export: Option<Spanned<String>>,
    /// The exporter's source IPv4 address.
    pub export_src: Option<Spanned<String>>,
}

/// `[nat]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatTable {
    pub external: Option<Spanned<String>>,
    pub ports: Option<Spanned<PortSpec>>,
    pub inside_port: Option<Spanned<u8>>,
    pub sweep_buckets: Option<Spanned<u64>>,
    pub reclaims_per_batch: Option<Spanned<u64>>,
    pub timeout_ms: Option<Spanned<u64>>,
}

/// `[urlfilter]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlFilterTable {
    #[serde(default)]
    pub banned: Vec<Spanned<String>>,
    pub ports: Option<Spanned<Vec<u16>>>,
    pub reset: Option<Spanned<bool>>,
    /// `drop` or `allow`.
    pub on_exhaustion: Option<Spanned<String>>,
    /// `deny` or `allow`: streams the filter cannot read a URL from.
    pub undecided: Option<Spanned<String>>,
    /// `drop` or `pass`: TCP in IP fragments.
    pub fragments: Option<Spanned<String>>,
    pub window: Option<Spanned<u64>>,
    pub slabs: Option<Spanned<u64>>,
    pub flows: Option<Spanned<u64>>,
    pub inspect_timeout_ms: Option<Spanned<u64>>,
    pub flow_timeout_ms: Option<Spanned<u64>>,
    pub handshake_timeout_ms: Option<Spanned<u64>>,
}

/// `[p4]`: a P4 program as p4c's DPDK backend emits it (a DPDK SWX pipeline spec) and the
/// initial entries of its tables and selectors (DPDK's table-file syntax). Paths are relative
/// to the chain file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4Table {
    /// The spec file.
    pub spec: Spanned<String>,
    /// Table or selector name → its table file.
    #[serde(default)]
    pub tables: std::collections::BTreeMap<String, Spanned<String>>,
}

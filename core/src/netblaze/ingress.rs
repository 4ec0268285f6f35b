//! The ingress mapper (seed paper §3.4): rack scale, run by the
//! ToR's controller, simulated here (`cargo xtask sim netblaze`, docs/NETBLAZE.md "Ingress at
//! rack scale").
//!
//! Flows are grouped by destination prefix of length `k` (IPv4; `2^k` possible aggregates).
//! A packet of a known aggregate goes to its server. The first packet of a new aggregate
//! steers it to the active server with the most dedicated cores that is still under the
//! threshold τ (ties: the lower index); if there is none, a new server is recruited; if the
//! rack has none left, the active server with the fewest dedicated cores takes it (counted as
//! an overflow). Servers report their dedicated core counts ([`IngressMapper::report`]);
//! aggregates are never moved between servers (that would need cross-server state migration,
//! which NetBlaze does not do).

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

/// The knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct IngressConfig {
    /// Destination prefix length `k` (0..=32).
    pub prefix_len: u8,
    /// τ: a server takes new aggregates while it has fewer dedicated cores than this.
    pub tau: u16,
}

impl Default for IngressConfig {
    /// `/24` aggregates, τ = 6.
    fn default() -> Self {
        Self { prefix_len: 24, tau: 6 }
    }
}

/// How a packet was steered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Steer {
    /// A known aggregate.
    Known(u16),
    /// A new aggregate onto an active server under τ.
    New(u16),
    /// A new aggregate onto a newly recruited server.
    Recruited(u16),
    /// A new aggregate while every server is busy and none is left to recruit.
    Overflow(u16),
}

impl Steer {
    /// The server.
    pub const fn server(self) -> u16 {
        match self {
            Steer::Known(s) | Steer::New(s) | Steer::Recruited(s) | Steer::Overflow(s) => s,
        }
    }
}

/// One server as the ingress mapper sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServerView {
    /// Serving the chain.
    pub active: bool,
    /// Dedicated cores it last reported.
    pub dedicated: u16,
}

/// Aggregates → servers.
#[derive(Debug, Clone)]
pub struct IngressMapper {
    cfg: IngressConfig,
    routes: BTreeMap<u32, u16>,
    servers: Vec<ServerView>,
}

impl IngressMapper {
    /// A rack of `servers` servers, none active yet (`prefix_len` is capped at 32, τ at
    /// least 1).
    pub fn new(cfg: IngressConfig, servers: usize) -> Self {
        let cfg = IngressConfig { prefix_len: cfg.prefix_len.min(32), tau: cfg.tau.max(1) };
        Self { cfg, routes: BTreeMap::new(), servers: vec![ServerView::default(); servers] }
    }

    /// The aggregate of an IPv4 destination (its top `k` bits).
    pub fn aggregate(&self, dst: u32) -> u32 {
        match self.cfg.prefix_len {
            0 => 0,
            k => dst >> (32 - u32::from(k)),
        }
    }

    /// The first address of aggregate `agg` (its `k` bits at the top).
    pub fn prefix(&self, agg: u32) -> u32 {
        match self.cfg.prefix_len {
            0 => 0,
            k => agg.checked_shl(32 - u32::from(k)).unwrap_or(0),
        }
    }

    /// The prefix length `k`.
    pub fn prefix_len(&self) -> u8 {
        self.cfg.prefix_len
    }

    /// Restores a decision made before (a controller rebuilding its state from the switch's
    /// table): aggregate `agg` is on `server`, which is active. An aggregate already routed
    /// keeps its server (never moved); `false` when it was, or `server` is not in the rack.
    pub fn restore(&mut self, agg: u32, server: u16) -> bool {
        if self.routes.contains_key(&agg) {
            return false;
        }
        let Some(s) = self.servers.get_mut(usize::from(server)) else { return false };
        s.active = true;
        s.dedicated = s.dedicated.max(1);
        self.routes.insert(agg, server);
        true
    }

    /// The server of aggregate `agg`, if it has one.
    pub fn route(&self, agg: u32) -> Option<u16> {
        self.routes.get(&agg).copied()
    }

    /// The aggregates installed, each with its server, in aggregate order.
    pub fn assigned(&self) -> impl Iterator<Item = (u32, u16)> + '_ {
        self.routes.iter().map(|(&a, &s)| (a, s))
    }

    /// A server's report of its dedicated cores.
    pub fn report(&mut self, server: usize, dedicated: u16) {
        if let Some(s) = self.servers.get_mut(server) {
            s.dedicated = dedicated;
        }
    }

    /// The servers.
    pub fn servers(&self) -> &[ServerView] {
        &self.servers
    }

    /// Aggregates installed (the ToR's table entries).
    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    /// Steers a packet to `dst` (module docs). `None` only for a rack without servers.
    pub fn steer(&mut self, dst: u32) -> Option<Steer> {
        let agg = self.aggregate(dst);
        if let Some(&s) = self.routes.get(&agg) {
            return Some(Steer::Known(s));
        }
        let tau = self.cfg.tau;
        let under = self
            .servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.active && s.dedicated < tau)
            .max_by(|a, b| a.1.dedicated.cmp(&b.1.dedicated).then(b.0.cmp(&a.0)))
            .map(|(i, _)| i);
        let steer = if let Some(i) = under {
            Steer::New(i as u16)
        } else if let Some(i) = self.servers.iter().position(|s| !s.active) {
            if let Some(s) = self.servers.get_mut(i) {
                s.active = true;
                s.dedicated = s.dedicated.max(1);
            }
            Steer::Recruited(i as u16)
        } else {
            let i = self
                .servers
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.dedicated.cmp(&b.1.dedicated).then(a.0.cmp(&b.0)))
                .map(|(i, _)| i)?;
            Steer::Overflow(i as u16)
        };
        self.routes.insert(agg, steer.server());
        Some(steer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restored_aggregates_stay_where_they_were() {
        let mut m = IngressMapper::new(IngressConfig { prefix_len: 24, tau: 2 }, 3);
        let agg = m.aggregate(0x0a01_0203);
        assert_eq!(m.prefix(agg), 0x0a01_0200);
        assert!(m.restore(agg, 2));
        assert!(!m.restore(agg, 0), "never moved");
        assert_eq!(m.route(agg), Some(2));
        assert_eq!(m.route(agg + 1), None);
        assert!(!m.restore(7, 9), "no such server");
        assert_eq!(m.steer(0x0a01_02ff), Some(Steer::Known(2)));
        assert!(m.servers()[2].active);
        // A new aggregate joins the restored (active, under τ) server before recruiting.
        assert_eq!(m.steer(0x0a09_0001), Some(Steer::New(2)));
        assert_eq!(m.assigned().collect::<Vec<_>>(), vec![(agg, 2), (m.aggregate(0x0a09_0001), 2)]);
    }
}

//! Random ACL rule sets (and traces) for tests and benches.

use alloc::vec::Vec;

use super::{AclAction, AclRule, Prefix};
use crate::parse::{FlowKey, IpAddr};
use crate::rand::XorShift64;

/// A random rule set for tests and benches: `n` rules from `seed` (xorshift), IPv4 mostly, with
/// /8–/32 prefixes inside 10.0.0.0/8 and 192.168.0.0/16, some IPv6 rules, port ranges, TCP/UDP,
/// random priorities and actions. The same seed gives the same rules.
pub fn example_rules(seed: u64, n: usize) -> Vec<AclRule> {
    let mut rng = XorShift64::from_state(seed | 1);
    let mut next = move || rng.next_u64();
    let mut rules = Vec::with_capacity(n);
    for _ in 0..n {
        let r = next();
        let v4 = |x: u64, len: u8| {
            let base: u32 = if x & 1 == 0 {
                0x0a00_0000 | (x as u32 >> 8 & 0x00ff_ffff)
            } else {
                0xc0a8_0000 | (x as u32 >> 16 & 0xffff)
            };
            let m = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
            Prefix::v4((base & m).to_be_bytes(), len)
        };
        let lens = [0u8, 8, 16, 20, 24, 24, 28, 32];
        let (sl, dl) = (lens[(r & 7) as usize], lens[(r >> 3 & 7) as usize]);
        let (src, dst) = if r >> 6 & 15 == 0 {
            let p = |x: u64, len: u8| {
                let a = 0x2001_0db8u128 << 96 | u128::from(x & 0xffff) << 64;
                let m = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len)) };
                Prefix::v6((a & m).to_be_bytes(), len)
            };
            (Some(p(next(), sl * 2)), Some(p(next(), dl * 2)))
        } else {
            (Some(v4(next(), sl)).filter(|_| sl > 0), Some(v4(next(), dl)))
        };
        let port = |x: u64| -> (u16, u16) {
            match x % 4 {
                0 => (0, u16::MAX),
                1 => {
                    let p = (x >> 8) as u16 % 1024;
                    (p, p)
                }
                2 => (1024, u16::MAX),
                _ => {
                    let a = (x >> 8) as u16 % 2048;
                    (a, a.saturating_add((x >> 24) as u16 % 512))
                }
            }
        };
        let rp = next();
        rules.push(AclRule {
            priority: (rp % 1000) as u32,
            src,
            dst,
            sport: port(rp >> 10),
            dport: port(rp >> 30),
            proto: [None, Some(6), Some(17)][(r >> 12) as usize % 3],
            vlan: None,
            action: if r >> 20 & 3 == 0 { AclAction::Permit } else { AclAction::Deny },
        });
    }
    rules
}

/// The seed of the ACL sets `cargo xtask peers` measures (Cadence's bench and the files it
/// writes for `dpdk-test-acl` generate the same sets from it).
pub const CLASSBENCH_SEED: u64 = 33;
/// Keys of each trace `cargo xtask peers` measures.
pub const CLASSBENCH_KEYS: usize = 100_000;

/// The address family of a ClassBench-style set ([`classbench_rules`], [`classbench_rules6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn bits(self) -> u32 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// The network `len` bits of an address of this family.
    fn mask(self, len: u8) -> u128 {
        mask_top(self.bits(), u32::from(len).min(self.bits()))
    }

    /// A random address (all bits drawn).
    fn random(self, rng: &mut XorShift64) -> u128 {
        match self {
            Family::V4 => u128::from(rng.next_u64() as u32),
            Family::V6 => u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64()),
        }
    }

    /// The bits of an address kept from its network ("near the network").
    fn near(self) -> u32 {
        match self {
            Family::V4 => 8,
            Family::V6 => 32,
        }
    }

    /// Prefix lengths, drawn uniformly: peaks where real sets have them.
    fn lens(self) -> [u8; 16] {
        match self {
            Family::V4 => [8, 12, 16, 16, 19, 21, 23, 24, 24, 24, 26, 28, 30, 32, 32, 32],
            Family::V6 => [16, 24, 32, 32, 40, 44, 48, 48, 56, 64, 64, 64, 80, 96, 128, 128],
        }
    }

    fn addr(self, a: u128) -> IpAddr {
        match self {
            Family::V4 => IpAddr::V4((a as u32).to_be_bytes()),
            Family::V6 => IpAddr::V6(a.to_be_bytes()),
        }
    }

    /// The address and length of `p` (of this family; any other: everything, /0).
    fn of(self, p: Option<Prefix>) -> (u128, u8) {
        match (self, p) {
            (Family::V4, Some(Prefix { addr: IpAddr::V4(a), len })) => (u128::from(u32::from_be_bytes(a)), len.min(32)),
            (Family::V6, Some(Prefix { addr: IpAddr::V6(a), len })) => (u128::from_be_bytes(a), len.min(128)),
            _ => (0, 0),
        }
    }
}

/// The top `len` of `bits` bits set.
fn mask_top(bits: u32, len: u32) -> u128 {
    let width = u128::MAX >> (128 - bits);
    width & !width.checked_shr(len).unwrap_or(0)
}

/// A ClassBench-style IPv4 rule set of `n` rules from `seed` (the same seed, the same rules),
/// the sets the ACL is checked and timed on beside DPDK's `rte_acl` (`cadence-bench`'s
/// `classbench`). Not tuned to one set: prefix lengths from /0 to /32 with peaks at /16, /24
/// and /32, addresses drawn around sixteen shared networks so that rules overlap and nest, port
/// fields any / an exact well-known port / the unprivileged range / arbitrary ranges, protocols
/// TCP / UDP / any. Every rule has priority 1 and action deny: among equal priorities the
/// earlier rule wins, which is DPDK's line order, so a rule's id is its 0-based line.
pub fn classbench_rules(seed: u64, n: usize) -> Vec<AclRule> {
    classbench_set(Family::V4, seed, n)
}

/// The IPv6 twin of [`classbench_rules`]: prefixes /0–/128 with peaks at /32, /48, /64 and
/// /128, around sixteen shared /32 networks; ports and protocols drawn alike.
pub fn classbench_rules6(seed: u64, n: usize) -> Vec<AclRule> {
    classbench_set(Family::V6, seed, n)
}

fn classbench_set(family: Family, seed: u64, n: usize) -> Vec<AclRule> {
    let mut rng = XorShift64::new(seed);
    let nets: Vec<u128> = (0..16).map(|_| family.random(&mut rng)).collect();
    let lens = family.lens();
    const WELL_KNOWN: [u16; 10] = [20, 21, 22, 23, 25, 53, 80, 123, 443, 8080];
    let prefix = |rng: &mut XorShift64, any_in: u64| -> Option<Prefix> {
        if rng.next_u64() % 100 < any_in {
            return None;
        }
        let len = lens.get(rng.below(lens.len())).copied().unwrap_or(32);
        let base = nets.get(rng.below(nets.len())).copied().unwrap_or(0);
        // Near the network: its top bits kept, the rest drawn.
        let keep = mask_top(family.bits(), family.near());
        let a = (base & keep) | (family.random(rng) & !keep);
        let a = a & family.mask(len);
        Some(match family.addr(a) {
            IpAddr::V4(b) => Prefix::v4(b, len),
            IpAddr::V6(b) => Prefix::v6(b, len),
        })
    };
    let port = |rng: &mut XorShift64, any_in: u64| -> (u16, u16) {
        let r = rng.next_u64() % 100;
        if r < any_in {
            (0, u16::MAX)
        } else if r < any_in + (100 - any_in) / 3 {
            let p = WELL_KNOWN.get(rng.below(WELL_KNOWN.len())).copied().unwrap_or(80);
            (p, p)
        } else if r < any_in + (100 - any_in) / 2 {
            (1024, u16::MAX)
        } else {
            let lo = rng.next_u64() as u16;
            (lo, lo.saturating_add((rng.next_u64() % 4096) as u16))
        }
    };
    (0..n)
        .map(|_| {
            let (src, dst) = (prefix(&mut rng, 25), prefix(&mut rng, 5));
            let (sport, dport) = (port(&mut rng, 70), port(&mut rng, 25));
            let proto = match rng.next_u64() % 10 {
                0..=4 => Some(6),
                5..=7 => Some(17),
                _ => None,
            };
            let any_port = (0, u16::MAX);
            // No catch-all rule: one near the top would make every rule after it unreachable
            // (real sets end with their default, if they have one). Such a draw gets a
            // destination network (drawn only then, so other sets are unchanged).
            let dst = if src.is_none() && dst.is_none() && sport == any_port && dport == any_port && proto.is_none() {
                prefix(&mut rng, 0)
            } else {
                dst
            };
            AclRule { priority: 1, src, dst, sport, dport, proto, vlan: None, action: AclAction::Deny }
        })
        .collect()
}

/// `n` flow keys from `seed` for `rules` (of [`classbench_rules`] or [`classbench_rules6`]:
/// the keys are of the rules' family): nine in ten fall inside a random rule (so that late
/// rules are reached), the rest are uniform.
pub fn classbench_trace(seed: u64, rules: &[AclRule], n: usize) -> Vec<FlowKey> {
    let v6 = |p: &Option<Prefix>| matches!(p, Some(Prefix { addr: IpAddr::V6(_), .. }));
    let family = if rules.iter().any(|r| v6(&r.src) || v6(&r.dst)) { Family::V6 } else { Family::V4 };
    let mut rng = XorShift64::new(seed ^ 0x7A3C_E5B1_0000_0001);
    (0..n)
        .map(|_| {
            let r = rng.next_u64();
            let protos = [6u8, 17, 1];
            let any_proto = |rng: &mut XorShift64| protos.get(rng.below(protos.len())).copied().unwrap_or(6);
            let (src, dst, sport, dport, proto) = match rules.get(rng.below(rules.len().max(1))) {
                Some(rule) if !r.is_multiple_of(10) => {
                    let addr =
                        |rng: &mut XorShift64, (a, len): (u128, u8)| a | (family.random(rng) & !family.mask(len));
                    let port = |rng: &mut XorShift64, (lo, hi): (u16, u16)| {
                        lo.wrapping_add((rng.next_u64() % (u64::from(hi.saturating_sub(lo)) + 1)) as u16)
                    };
                    let proto = rule.proto.unwrap_or_else(|| any_proto(&mut rng));
                    (
                        addr(&mut rng, family.of(rule.src)),
                        addr(&mut rng, family.of(rule.dst)),
                        port(&mut rng, rule.sport),
                        port(&mut rng, rule.dport),
                        proto,
                    )
                }
                _ => (
                    family.random(&mut rng),
                    family.random(&mut rng),
                    rng.next_u64() as u16,
                    rng.next_u64() as u16,
                    any_proto(&mut rng),
                ),
            };
            FlowKey { src: family.addr(src), dst: family.addr(dst), src_port: sport, dst_port: dport, proto }
        })
        .collect()
}

//! Random ACL rule sets for tests and benches.

use alloc::vec::Vec;

use super::{AclAction, AclRule, Prefix};
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
            action: if r >> 20 & 3 == 0 { AclAction::Permit } else { AclAction::Deny },
        });
    }
    rules
}

//! Value syntax of the chain text form: records of `name:value` fields, lists, numbers,
//! ranges, addresses, prefixes, MACs and hex keys. Every parser returns the expectation
//! it failed as a `&'static str`, which the caller wraps with the line and field.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The IPv4-mapped IPv6 prefix `::ffff:0:0/96` (IPv4 addresses are stored this way).
pub const V4_MAPPED: u128 = 0xffff << 32;

/// An address as a left-aligned 128-bit value: IPv6 as is, IPv4 as IPv4-mapped IPv6.
pub fn ip_to_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => V4_MAPPED | u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address of a 128-bit value (IPv4-mapped values come back as IPv4).
pub fn u128_to_ip(a: u128) -> IpAddr {
    if a >> 32 == 0xffff { IpAddr::V4(Ipv4Addr::from(a as u32)) } else { IpAddr::V6(Ipv6Addr::from(a)) }
}

/// Parses an IPv4 or IPv6 address.
pub fn ip(s: &str) -> Result<IpAddr, &'static str> {
    s.parse().map_err(|_| "an IPv4/IPv6 address")
}

/// Parses an IPv4 address.
pub fn ipv4(s: &str) -> Result<Ipv4Addr, &'static str> {
    s.parse().map_err(|_| "an IPv4 address")
}

/// Parses `ADDR/LEN` (or a bare address: a host prefix, or `any` = `::/0`) into a
/// 128-bit prefix `(value, length)`; IPv4 prefixes become IPv4-mapped (`/n` → `/96+n`).
/// Bits past the length must be zero.
pub fn prefix128(s: &str) -> Result<(u128, u8), &'static str> {
    const E: &str = "an IPv4/IPv6 prefix";
    if s == "any" {
        return Ok((0, 0));
    }
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr = ip(a).map_err(|_| E)?;
    let (v, max, off) = match addr {
        IpAddr::V4(_) => (ip_to_u128(addr), 32u8, 96u8),
        IpAddr::V6(_) => (ip_to_u128(addr), 128, 0),
    };
    let len = match len {
        Some(l) => dec_u8(l).ok().filter(|&n| n <= max).ok_or(E)?,
        None => max,
    };
    let total = off + len;
    let host_bits = if total == 0 { u128::MAX } else { u128::MAX.checked_shr(u32::from(total)).unwrap_or(0) };
    if v & host_bits != 0 && total < 128 {
        return Err("a prefix without host bits set");
    }
    Ok((v, total))
}

/// Writes a 128-bit prefix back in its text form (IPv4-mapped ones as IPv4).
pub fn write_prefix128(w: &mut dyn core::fmt::Write, (v, len): (u128, u8)) -> core::fmt::Result {
    if len == 0 && v == 0 {
        return w.write_str("any");
    }
    if len >= 96 && v >> 32 == 0xffff {
        write!(w, "{}/{}", Ipv4Addr::from(v as u32), len - 96)
    } else {
        write!(w, "{}/{}", Ipv6Addr::from(v), len)
    }
}

fn dec_u64(s: &str, max: u64) -> Result<u64, ()> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    s.parse::<u64>().ok().filter(|&n| n <= max).ok_or(())
}

fn dec_u8(s: &str) -> Result<u8, ()> {
    dec_u64(s, u64::from(u8::MAX)).map(|n| n as u8)
}

/// A decimal `u16`.
pub fn u16_dec(s: &str) -> Result<u16, &'static str> {
    dec_u64(s, u64::from(u16::MAX)).map(|n| n as u16).map_err(|_| "an integer 0..=65535")
}

/// A decimal `u32`.
pub fn u32_dec(s: &str) -> Result<u32, &'static str> {
    dec_u64(s, u64::from(u32::MAX)).map(|n| n as u32).map_err(|_| "an integer 0..=4294967295")
}

/// A decimal `u64`.
pub fn u64_dec(s: &str) -> Result<u64, &'static str> {
    dec_u64(s, u64::MAX).map_err(|_| "an unsigned integer")
}

/// A decimal `usize`.
pub fn usize_dec(s: &str) -> Result<usize, &'static str> {
    dec_u64(s, usize::MAX as u64).map(|n| n as usize).map_err(|_| "an unsigned integer")
}

/// A port range `LO-HI`, a single port `P`, or `any` (`0-65535`).
pub fn port_range(s: &str) -> Result<(u16, u16), &'static str> {
    const E: &str = "a port or port range LO-HI (0..=65535, LO <= HI) or any";
    if s == "any" {
        return Ok((0, u16::MAX));
    }
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let lo = u16_dec(a).map_err(|_| E)?;
    let hi = u16_dec(b).map_err(|_| E)?;
    if lo > hi {
        return Err(E);
    }
    Ok((lo, hi))
}

/// A protocol: `tcp`, `udp`, `icmp`, `icmpv6`, a number 0..=255, or `any` (`None`).
pub fn proto(s: &str) -> Result<Option<u8>, &'static str> {
    Ok(Some(match s {
        "any" => return Ok(None),
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        "icmpv6" => 58,
        n => dec_u8(n).map_err(|_| "a protocol (tcp, udp, icmp, icmpv6, any, or 0..=255)")?,
    }))
}

/// The text form of a protocol (names for the known ones).
pub fn proto_name(p: Option<u8>) -> ProtoName {
    ProtoName(p)
}

/// Display helper of [`proto_name`].
#[derive(Debug, Clone, Copy)]
pub struct ProtoName(Option<u8>);

impl core::fmt::Display for ProtoName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            None => f.write_str("any"),
            Some(6) => f.write_str("tcp"),
            Some(17) => f.write_str("udp"),
            Some(1) => f.write_str("icmp"),
            Some(58) => f.write_str("icmpv6"),
            Some(n) => write!(f, "{n}"),
        }
    }
}

/// A MAC `xx:xx:xx:xx:xx:xx` (hex digits, either case).
pub fn mac(s: &str) -> Result<[u8; 6], &'static str> {
    const E: &str = "a MAC address xx:xx:xx:xx:xx:xx";
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for o in &mut out {
        let p = parts.next().ok_or(E)?;
        if p.len() != 2 {
            return Err(E);
        }
        *o = u8::from_str_radix(p, 16).map_err(|_| E)?;
    }
    if parts.next().is_some() {
        return Err(E);
    }
    Ok(out)
}

/// Exactly `N` bytes as `2N` hex digits.
pub fn hex<const N: usize>(s: &str) -> Result<[u8; N], &'static str> {
    let mut out = [0u8; N];
    if s.len() != 2 * N || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("hex digits of the right length");
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2).ok_or("hex digits")?, 16).map_err(|_| "hex digits")?;
    }
    Ok(out)
}

/// `true`/`false` (also `1`/`0`, `on`/`off`).
pub fn boolean(s: &str) -> Result<bool, &'static str> {
    match s {
        "true" | "1" | "on" => Ok(true),
        "false" | "0" | "off" => Ok(false),
        _ => Err("true or false"),
    }
}

/// The `name:value` fields of one record value (`a:1,b:2`), in order. A value may hold
/// `:` itself (IPv6, MACs): a field splits at its first `:` only. Fields are separated
/// by `,`, so values must not contain one (lists inside a field use `;`).
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    rest: &'a str,
}

impl<'a> Fields<'a> {
    /// The fields of `s` (empty string: no fields).
    pub fn new(s: &'a str) -> Self {
        Self { rest: s }
    }
}

impl<'a> Iterator for Fields<'a> {
    /// `Ok((name, value))`, or `Err(raw)` for an item without `:`.
    type Item = Result<(&'a str, &'a str), &'a str>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let (item, rest) = self.rest.split_once(',').unwrap_or((self.rest, ""));
        self.rest = rest;
        Some(item.split_once(':').ok_or(item))
    }
}

/// The items of a `;`-separated list (empty string: no items).
pub fn list(s: &str) -> impl Iterator<Item = &str> {
    s.split(';').filter(|i| !i.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(prefix128("10.0.0.0/8"), Ok((V4_MAPPED | 0x0a00_0000, 104)));
        assert_eq!(prefix128("10.1.2.3"), Ok((V4_MAPPED | 0x0a01_0203, 128)));
        assert_eq!(prefix128("any"), Ok((0, 0)));
        assert_eq!(prefix128("0.0.0.0/0"), Ok((V4_MAPPED, 96)));
        assert_eq!(prefix128("fd00::/8"), Ok((0xfd << 120, 8)));
        assert_eq!(prefix128("::/0"), Ok((0, 0)));
        for bad in ["10.0.0/8", "10.0.0.0/33", "10.0.0.1/8", "fd00::/129", "x", "10.0.0.0/", "10.0.0.0/-1"] {
            assert!(prefix128(bad).is_err(), "{bad}");
        }
        let mut s = heapless::String::<64>::new();
        for p in ["10.0.0.0/8", "fd00::/8", "any", "1.2.3.4/32", "0.0.0.0/0"] {
            s.clear();
            write_prefix128(&mut s, prefix128(p).expect("prefix")).expect("fits");
            assert_eq!(prefix128(&s), prefix128(p), "{p} -> {s}");
        }
    }

    #[test]
    fn scalars() {
        assert_eq!(port_range("80-443"), Ok((80, 443)));
        assert_eq!(port_range("53"), Ok((53, 53)));
        assert_eq!(port_range("any"), Ok((0, 65535)));
        for bad in ["443-80", "65536", "-1", "", "1-2-3", "+5"] {
            assert!(port_range(bad).is_err(), "{bad}");
        }
        assert_eq!(proto("tcp"), Ok(Some(6)));
        assert_eq!(proto("any"), Ok(None));
        assert_eq!(proto("47"), Ok(Some(47)));
        assert!(proto("256").is_err());
        assert_eq!(mac("02:00:00:CA:de:10"), Ok([2, 0, 0, 0xca, 0xde, 0x10]));
        for bad in ["02:00:00:ca:de", "02:00:00:ca:de:10:11", "2:00:00:ca:de:10", "zz:00:00:ca:de:10"] {
            assert!(mac(bad).is_err(), "{bad}");
        }
        assert_eq!(hex::<2>("0aFf"), Ok([0x0a, 0xff]));
        assert!(hex::<2>("0aF").is_err());
        assert!(hex::<2>("+aFf").is_err());
        assert_eq!(u16_dec("65535"), Ok(65535));
        assert!(u16_dec("65536").is_err());
        assert!(u32_dec("").is_err());
        assert_eq!(
            u128_to_ip(ip_to_u128(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)))),
            IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))
        );
    }

    #[test]
    fn fields_split_at_the_first_colon() {
        let f: heapless::Vec<_, 8> = Fields::new("addr:fd00::1,port:80,bad,mac:02:00:00:00:00:01").collect();
        assert_eq!(f[0], Ok(("addr", "fd00::1")));
        assert_eq!(f[1], Ok(("port", "80")));
        assert_eq!(f[2], Err("bad"));
        assert_eq!(f[3], Ok(("mac", "02:00:00:00:00:01")));
        assert_eq!(Fields::new("").count(), 0);
        let l: heapless::Vec<_, 4> = list("a;b;;c").collect();
        assert_eq!(&l[..], &["a", "b", "c"]);
    }
}

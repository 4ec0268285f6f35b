//! The text form written back: ACL rules, routes and backends in exactly the record syntax
//! their parsers read (`acl.rule=…`, `l3fwd.route=…`, a `backends:` entry), so what the
//! management channel shows can be pasted into a chain file or an `acl add`.

use core::fmt;

use super::values;
use crate::nf::acl::{AclAction, AclRule, Prefix};
use crate::nf::l3fwd::{NextHop, Resolve};
use crate::nf::lb::Backend;
use crate::parse::IpAddr;

/// An address.
#[derive(Debug, Clone, Copy)]
pub struct Addr(pub IpAddr);

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{}", core::net::Ipv4Addr::from(a)),
            IpAddr::V6(a) => write!(f, "{}", core::net::Ipv6Addr::from(a)),
        }
    }
}

/// An address and port: `IPv4:PORT` or `[IPv6]:PORT`.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint(pub IpAddr, pub u16);

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(_) => write!(f, "{}:{}", Addr(self.0), self.1),
            IpAddr::V6(_) => write!(f, "[{}]:{}", Addr(self.0), self.1),
        }
    }
}

/// A prefix `ADDR/LEN`, or `any` for `None`.
#[derive(Debug, Clone, Copy)]
pub struct PrefixText(pub Option<Prefix>);

impl fmt::Display for PrefixText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("any"),
            Some(p) => write!(f, "{}/{}", Addr(p.addr), p.len),
        }
    }
}

/// A port range: `any`, `P` or `LO-HI`.
#[derive(Debug, Clone, Copy)]
pub struct Ports(pub (u16, u16));

impl fmt::Display for Ports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            (0, u16::MAX) => f.write_str("any"),
            (a, b) if a == b => write!(f, "{a}"),
            (a, b) => write!(f, "{a}-{b}"),
        }
    }
}

/// A MAC `xx:xx:xx:xx:xx:xx`.
#[derive(Debug, Clone, Copy)]
pub struct MacText(pub [u8; 6]);

impl fmt::Display for MacText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// An `acl.rule` value.
#[derive(Debug, Clone, Copy)]
pub struct RuleText<'a>(pub &'a AclRule);

impl fmt::Display for RuleText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        let action = match r.action {
            AclAction::Permit => "permit",
            AclAction::Deny => "deny",
        };
        write!(
            f,
            "prio:{},src:{},dst:{},sport:{},dport:{},proto:{},",
            r.priority,
            PrefixText(r.src),
            PrefixText(r.dst),
            Ports(r.sport),
            Ports(r.dport),
            values::proto_name(r.proto)
        )?;
        if let Some(v) = r.vlan {
            write!(f, "vlan:{v},")?;
        }
        write!(f, "action:{action}")
    }
}

/// An `l3fwd.route` value.
#[derive(Debug, Clone, Copy)]
pub struct RouteText(pub Prefix, pub NextHop);

impl fmt::Display for RouteText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "prefix:{},port:{},", PrefixText(Some(self.0)), self.1.port)?;
        match self.1.resolve {
            Resolve::Static => write!(f, "mac:{}", MacText(self.1.mac)),
            Resolve::Gateway(a) => write!(f, "via:{}", core::net::Ipv4Addr::from(a)),
            Resolve::Gateway6(a) => write!(f, "via:{}", core::net::Ipv6Addr::from(a)),
            Resolve::Direct => f.write_str("via:direct"),
        }
    }
}

/// A backend: `IP`, `IPv4:PORT` or `[IPv6]:PORT`.
#[derive(Debug, Clone, Copy)]
pub struct BackendText(pub Backend);

impl fmt::Display for BackendText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.port {
            None => write!(f, "{}", Addr(self.0.addr)),
            Some(p) => write!(f, "{}", Endpoint(self.0.addr, p)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::format;

    use super::super::sections;
    use super::*;

    #[test]
    fn rules_routes_and_backends_round_trip_through_their_parsers() {
        for text in [
            "prio:10,src:10.0.0.0/8,dst:any,sport:any,dport:80-443,proto:tcp,action:deny",
            "prio:0,src:any,dst:fd00::/8,sport:53,dport:any,proto:any,action:permit",
            "prio:4294967295,src:1.2.3.4/32,dst:5.6.7.0/24,sport:1-2,dport:0,proto:47,action:permit",
            "prio:3,src:any,dst:any,sport:any,dport:any,proto:any,vlan:100,action:deny",
        ] {
            let r = sections::acl_rule(text).unwrap();
            assert_eq!(format!("{}", RuleText(&r)), text);
        }
        let r = sections::acl_rule("action:deny,dst:192.0.2.0/24").unwrap();
        assert_eq!(sections::acl_rule(&format!("{}", RuleText(&r))).unwrap(), r);
        for text in [
            "prefix:10.1.0.0/16,port:1,mac:02:00:00:00:00:99",
            "prefix:2001:db8::/32,port:0,mac:0a:0b:0c:0d:0e:0f",
            "prefix:10.1.0.0/16,port:1,via:10.1.0.254",
            "prefix:::/0,port:1,via:fe80::1",
            "prefix:fd79::/64,port:1,via:direct",
        ] {
            let (p, h) = sections::route(text).unwrap();
            assert_eq!(format!("{}", RouteText(p, h)), text);
        }
        for text in ["10.2.0.1", "10.2.0.1:8080", "[fd00::1]:80", "fd00::1"] {
            assert_eq!(format!("{}", BackendText(sections::backend(text).unwrap())), text);
        }
    }
}

//! The NFs of the chain benches, configured as the shipped `chains/chain1.toml` and
//! `chain2.toml` are: ACL with 1500 generated rules, a load balancer with one VIP of 100
//! backends, accounting, a URL filter with 10 banned URLs, encryption.

// Each bench uses some of these.
#![allow(dead_code)]

use std::sync::Arc;

use cadence_core::nf::Nf;
use cadence_core::nf::accounting::{Accounting, AccountingConfig, AccountingShared};
use cadence_core::nf::acl::{Acl, AclAction, AclConfig, AclShared, example_rules};
use cadence_core::nf::encrypt::{Encrypt, EncryptConfig, EncryptShared};
use cadence_core::nf::lb::{Backend, Lb, LbConfig, LbShared, Vip};
use cadence_core::nf::urlfilter::{UrlFilter, UrlFilterConfig, UrlFilterShared};
use cadence_core::parse::IpAddr;

use super::frames::VIP;

/// Flows each per-flow table holds (the shipped chain files' setting).
pub const FLOW_CAPACITY: usize = 8192;

/// ACL: 1500 generated rules and a permit for the benches' flows at the end.
pub fn acl() -> Box<dyn Nf> {
    // Rules from the generator plus a permit for the bench's source range at the top, so
    // every flow is classified against 1500 rules and then passes.
    let mut rules = example_rules(7, 1500);
    let mut permit = cadence_core::nf::acl::AclRule::any(u32::MAX, AclAction::Permit);
    permit.proto = Some(6);
    permit.dport = (80, 80);
    rules.push(permit);
    let mut cfg = AclConfig::new(rules, AclAction::Permit);
    cfg.flow_capacity = FLOW_CAPACITY;
    let shared = Arc::new(AclShared::try_new(&cfg).expect("acl"));
    Box::new(Acl::new(shared))
}

/// Load balancer: one VIP (the benches' destination), 100 backends.
pub fn lb() -> Box<dyn Nf> {
    let backends = (0..100u8).map(|i| Backend { addr: IpAddr::V4([10, 3, 0, i]), port: None }).collect();
    let mut cfg = LbConfig::default();
    cfg.affinity_capacity = FLOW_CAPACITY;
    cfg.vips.push(Vip { addr: IpAddr::V4(VIP), port: 80, proto: 6, backends });
    Box::new(Lb::new(Arc::new(LbShared::try_new(&cfg).expect("lb"))))
}

/// Accounting of every flow.
pub fn accounting() -> Box<dyn Nf> {
    let mut cfg = AccountingConfig::default();
    cfg.capacity = FLOW_CAPACITY;
    Box::new(Accounting::new(Arc::new(AccountingShared::try_new(&cfg).expect("accounting"))))
}

/// URL filter: 10 banned URLs.
pub fn urlfilter() -> Box<dyn Nf> {
    let mut cfg = UrlFilterConfig::default();
    cfg.banned = (0..10).map(|i| format!("banned{i}.example/path")).collect();
    cfg.flows = FLOW_CAPACITY;
    Box::new(UrlFilter::new(Arc::new(UrlFilterShared::try_new(&cfg).expect("urlfilter"))))
}

/// Encryption with a fixed key.
pub fn encrypt() -> Box<dyn Nf> {
    let mut cfg = EncryptConfig::default();
    cfg.key = [7; 32];
    cfg.udp_flows = FLOW_CAPACITY;
    Box::new(Encrypt::new(Arc::new(EncryptShared::try_new(&cfg).expect("encrypt"))))
}

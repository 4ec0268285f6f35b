//! The ingress mapper.

use crate::netblaze::ingress::{IngressConfig, IngressMapper, Steer};

#[test]
fn aggregates_fill_the_busiest_server_under_tau_then_recruit() {
    let mut m = IngressMapper::new(IngressConfig { prefix_len: 24, tau: 4 }, 3);
    let ip = |a: u8, b: u8, c: u8, d: u8| u32::from_be_bytes([a, b, c, d]);
    assert_eq!(m.steer(ip(10, 0, 0, 1)), Some(Steer::Recruited(0)));
    assert_eq!(m.steer(ip(10, 0, 0, 99)), Some(Steer::Known(0)), "same /24");
    assert_eq!(m.steer(ip(10, 0, 1, 1)), Some(Steer::New(0)));
    m.report(0, 4);
    assert_eq!(m.steer(ip(10, 0, 2, 1)), Some(Steer::Recruited(1)), "server 0 reached tau");
    m.report(1, 2);
    assert_eq!(m.steer(ip(10, 0, 3, 1)), Some(Steer::New(1)));
    m.report(1, 4);
    assert_eq!(m.steer(ip(10, 0, 4, 1)), Some(Steer::Recruited(2)));
    m.report(2, 5);
    assert_eq!(m.steer(ip(10, 0, 5, 1)), Some(Steer::Overflow(0)), "the least busy takes the overflow");
    assert_eq!(m.routes(), 6);
    assert_eq!(m.aggregate(ip(10, 0, 5, 7)), 0x0a_00_05);
}

#[test]
fn prefix_zero_is_one_aggregate_and_an_empty_rack_steers_nothing() {
    let mut m = IngressMapper::new(IngressConfig { prefix_len: 0, tau: 1 }, 1);
    assert_eq!(m.steer(1), Some(Steer::Recruited(0)));
    assert_eq!(m.steer(u32::MAX), Some(Steer::Known(0)));
    let mut e = IngressMapper::new(IngressConfig::default(), 0);
    assert_eq!(e.steer(1), None);
}

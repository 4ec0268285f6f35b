//! The ACL's configuration ([`AclConfig`]) and why one is refused ([`AclConfigError`], naming
//! the rule and the field).

use alloc::vec::Vec;
use core::fmt;

use super::{AclAction, AclRule, MAX_RULES, MAX_VLANS};
use crate::pna::exact::TableConfigError;
use crate::time::Duration;

/// Which field of a rule is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AclField {
    /// The source prefix.
    Src,
    /// The destination prefix.
    Dst,
    /// The source port range.
    SrcPort,
    /// The destination port range.
    DstPort,
    /// The VLAN ID.
    Vlan,
}

impl fmt::Display for AclField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AclField::Src => "src",
            AclField::Dst => "dst",
            AclField::SrcPort => "sport",
            AclField::DstPort => "dport",
            AclField::Vlan => "vlan",
        })
    }
}

/// Why an ACL configuration was refused (rule indices count from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AclConfigError {
    /// More than [`MAX_RULES`] rules.
    TooManyRules {
        /// How many were given.
        count: usize,
    },
    /// A prefix length beyond 32 (IPv4) or 128 (IPv6).
    BadPrefixLen {
        /// The rule's index.
        rule: usize,
        /// `Src` or `Dst`.
        field: AclField,
    },
    /// A prefix with address bits set beyond its length.
    HostBitsSet {
        /// The rule's index.
        rule: usize,
        /// `Src` or `Dst`.
        field: AclField,
    },
    /// An IPv4 source with an IPv6 destination or the other way round (could never match).
    FamilyMismatch {
        /// The rule's index.
        rule: usize,
    },
    /// A port range whose start is above its end.
    EmptyPortRange {
        /// The rule's index.
        rule: usize,
        /// `SrcPort` or `DstPort`.
        field: AclField,
    },
    /// A VLAN ID outside 1..=4094.
    BadVlan {
        /// The rule's index.
        rule: usize,
    },
    /// The rules name more than [`MAX_VLANS`] distinct VLAN IDs.
    TooManyVlans {
        /// How many they name.
        count: usize,
    },
    /// `flow_capacity` is zero.
    ZeroFlowCapacity,
    /// `flow_timeout` is zero.
    ZeroFlowTimeout,
    /// The flow table could not be built.
    FlowTable(TableConfigError),
    /// A management command named a rule that does not exist.
    NoSuchRule {
        /// The rule id given.
        rule: usize,
    },
}

impl fmt::Display for AclConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyRules { count } => write!(f, "{count} rules, at most {MAX_RULES}"),
            Self::BadPrefixLen { rule, field } => write!(f, "rule {rule}: {field} prefix length too long"),
            Self::HostBitsSet { rule, field } => write!(f, "rule {rule}: {field} has bits set beyond its length"),
            Self::FamilyMismatch { rule } => write!(f, "rule {rule}: src and dst are of different IP versions"),
            Self::EmptyPortRange { rule, field } => write!(f, "rule {rule}: {field} range is empty"),
            Self::BadVlan { rule } => write!(f, "rule {rule}: vlan not 1..=4094"),
            Self::TooManyVlans { count } => write!(f, "the rules name {count} VLAN IDs, at most {MAX_VLANS}"),
            Self::ZeroFlowCapacity => f.write_str("flow_capacity is zero"),
            Self::ZeroFlowTimeout => f.write_str("flow_timeout is zero"),
            Self::FlowTable(e) => write!(f, "flow table: {e}"),
            Self::NoSuchRule { rule } => write!(f, "no rule {rule}"),
        }
    }
}

/// An ACL's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AclConfig {
    /// The rules (rule id = index).
    pub rules: Vec<AclRule>,
    /// The action for flows no rule matches.
    pub default_action: AclAction,
    /// Flow cache capacity (flows).
    pub flow_capacity: usize,
    /// How long a cached verdict lives, in clock ticks, counted from classification.
    pub flow_timeout: Duration,
    /// Flow-cache buckets each batch sweeps for expired entries (0: only lazy reclamation).
    pub sweep_buckets: usize,
    /// Sends every packet through the flow cache. Off (the default), an IPv4 packet skips the
    /// cache while the rules' cross tables answer IPv4 keys (the classifiers' module doc): there
    /// classifying it costs less than a cache hit.
    pub always_cache: bool,
}

impl Default for AclConfig {
    /// No rules, default permit, 65 536 flows, a timeout of 2^34 ticks (about 8 s at 2 GHz),
    /// 16 buckets swept per batch.
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            default_action: AclAction::Permit,
            flow_capacity: crate::miri_or(1 << 16, 64),
            flow_timeout: Duration(1 << 34),
            sweep_buckets: 16,
            always_cache: false,
        }
    }
}

impl AclConfig {
    /// `rules` with `default_action`, the other fields as in [`Default`].
    pub fn new(rules: Vec<AclRule>, default_action: AclAction) -> Self {
        Self { rules, default_action, ..Self::default() }
    }

    /// Checks every rule and knob; the first problem found is returned.
    pub fn validate(&self) -> Result<(), AclConfigError> {
        if self.rules.len() > MAX_RULES {
            return Err(AclConfigError::TooManyRules { count: self.rules.len() });
        }
        for (i, r) in self.rules.iter().enumerate() {
            check_rule(i, r)?;
        }
        let count = vlan_count(&self.rules);
        if count > MAX_VLANS {
            return Err(AclConfigError::TooManyVlans { count });
        }
        if self.flow_capacity == 0 {
            return Err(AclConfigError::ZeroFlowCapacity);
        }
        if self.flow_timeout.ticks() == 0 {
            return Err(AclConfigError::ZeroFlowTimeout);
        }
        Ok(())
    }
}

/// Checks one rule (`i`: its position, for the error).
pub(super) fn check_rule(i: usize, r: &AclRule) -> Result<(), AclConfigError> {
    for (p, field) in [(r.src, AclField::Src), (r.dst, AclField::Dst)] {
        let Some(p) = p else { continue };
        if p.len > p.max_len() {
            return Err(AclConfigError::BadPrefixLen { rule: i, field });
        }
        let (a, len) = p.mapped();
        let host = if len == 0 { a } else { a & !(u128::MAX << (128 - u32::from(len))) };
        if host != 0 {
            return Err(AclConfigError::HostBitsSet { rule: i, field });
        }
    }
    if let (Some(s), Some(d)) = (r.src, r.dst)
        && core::mem::discriminant(&s.addr) != core::mem::discriminant(&d.addr)
    {
        return Err(AclConfigError::FamilyMismatch { rule: i });
    }
    if r.sport.0 > r.sport.1 {
        return Err(AclConfigError::EmptyPortRange { rule: i, field: AclField::SrcPort });
    }
    if r.dport.0 > r.dport.1 {
        return Err(AclConfigError::EmptyPortRange { rule: i, field: AclField::DstPort });
    }
    if r.vlan.is_some_and(|v| !(1..=4094).contains(&v)) {
        return Err(AclConfigError::BadVlan { rule: i });
    }
    Ok(())
}

/// How many distinct VLAN IDs `rules` name.
pub(super) fn vlan_count(rules: &[AclRule]) -> usize {
    vlans_of(rules).len()
}

/// The distinct VLAN IDs `rules` name, increasing.
pub(super) fn vlans_of(rules: &[AclRule]) -> Vec<u16> {
    let mut v: Vec<u16> = rules.iter().filter_map(|r| r.vlan).collect();
    v.sort_unstable();
    v.dedup();
    v
}

//! Epoch accounting (seed paper §3.2 "Determining queue occupancy").
//!
//! Each dedicated core counts, per epoch, the packets and the new flows that arrived
//! ([`EpochCounters`]) and, at the epoch's end, its backlog ⟨flows, packets⟩ ([`Backlog`]):
//! the packets queued and not yet started and the distinct flows they belong to.

/// ⟨flows, packets⟩: a backlog, or a group of flows handed to a core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Backlog {
    /// Distinct flows.
    pub flows: u32,
    /// Packets.
    pub packets: u32,
}

impl Backlog {
    /// Nothing queued.
    pub const EMPTY: Backlog = Backlog { flows: 0, packets: 0 };

    /// ⟨flows, packets⟩.
    pub const fn new(flows: u32, packets: u32) -> Self {
        Self { flows, packets }
    }

    /// One flow with `packets` packets (none if `packets` is 0).
    pub const fn flow(packets: u32) -> Self {
        Self { flows: if packets > 0 { 1 } else { 0 }, packets }
    }

    /// The sum (saturating).
    #[must_use]
    pub const fn plus(self, other: Backlog) -> Backlog {
        Backlog { flows: self.flows.saturating_add(other.flows), packets: self.packets.saturating_add(other.packets) }
    }

    /// The difference (saturating at zero).
    #[must_use]
    pub const fn minus(self, other: Backlog) -> Backlog {
        Backlog { flows: self.flows.saturating_sub(other.flows), packets: self.packets.saturating_sub(other.packets) }
    }

    /// Whether nothing is queued.
    pub const fn is_empty(self) -> bool {
        self.packets == 0
    }
}

/// What one dedicated core counts during an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EpochCounters {
    /// Packets that arrived.
    pub packets: u32,
    /// Of those, the first packets of flows new to this core in this epoch.
    pub new_flows: u32,
}

impl EpochCounters {
    /// Counts one arriving packet; `new_flow` when its flow had no packet yet this epoch.
    pub fn record(&mut self, new_flow: bool) {
        self.packets = self.packets.saturating_add(1);
        if new_flow {
            self.new_flows = self.new_flows.saturating_add(1);
        }
    }

    /// The counts so far, and a fresh epoch.
    pub fn take(&mut self) -> EpochCounters {
        core::mem::take(self)
    }

    /// The arrivals as ⟨flows, packets⟩.
    pub const fn arrivals(&self) -> Backlog {
        Backlog { flows: self.new_flows, packets: self.packets }
    }
}

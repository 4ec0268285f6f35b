//! [`AuxWorker`]: an auxiliary core's loop (the module docs of [`crate::offload`]).

use alloc::sync::Arc;
use alloc::vec::Vec;

use super::handoff::AuxEnd;
use super::marks::{self, TailMark};
use crate::buf::{BATCH_SIZE, Batch, PacketBuf, Pool};
use crate::nf::Chain;
use crate::stage::{PORTS, Stage, StageCounters};
use crate::sync::Doorbell;
use crate::time::Instant;
use crate::vlan::IFACES;

/// What an auxiliary core's loop did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AuxStats {
    /// Frames received from the lanes and given back.
    pub frames: u64,
    /// Polls ([`AuxWorker::poll_once`]) and those that received anything.
    pub polls: u64,
    /// See `polls`.
    pub busy_polls: u64,
}

/// One link of an auxiliary core: its end, the view of the lane's pool, and what it could
/// not give back yet (never anything, by the link's credit rule; kept rather than lost).
struct AuxLink<'m> {
    end: AuxEnd,
    view: Pool<'m>,
    unreturned: Batch,
}

/// An auxiliary core's loop (module docs): its chain over the frames the lanes hand it.
pub struct AuxWorker<'m> {
    links: Vec<AuxLink<'m>>,
    chain: Chain,
    counters: StageCounters,
    stats: AuxStats,
    by_port: [Batch; PORTS],
    /// This burst's whale frames: (buffer, tail mark, ingress port).
    tails: Vec<(PacketBuf, TailMark, usize)>,
    out: [Batch; PORTS],
    scratch: Batch,
    /// What it sleeps on when idle long ([`super::LaneState::bell`]); `None`: it never does.
    bell: Option<Arc<Doorbell>>,
}

impl core::fmt::Debug for AuxWorker<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AuxWorker").field("links", &self.links.len()).field("stats", &self.stats).finish()
    }
}

impl AuxWorker<'static> {
    /// [`AuxWorker::new`] over views made by [`Pool::aux_views`] (lanes whose pools live as
    /// long as the program).
    pub fn with_views(ends: Vec<AuxEnd>, views: Vec<crate::buf::AuxView>, chain: Chain) -> Self {
        AuxWorker::new(ends, views.into_iter().map(crate::buf::AuxView::into_pool).collect(), chain)
    }
}

impl<'m> AuxWorker<'m> {
    /// An auxiliary core over `ends[k]` and `views[k]` (lane `k`'s end of the link to this
    /// core and a [`Pool::view`] of lane `k`'s pool), running `chain`.
    pub fn new(ends: Vec<AuxEnd>, views: Vec<Pool<'m>>, chain: Chain) -> Self {
        let links = ends.into_iter().zip(views).map(|(end, view)| AuxLink { end, view, unreturned: Batch::new() });
        Self {
            links: links.collect(),
            chain,
            counters: StageCounters::default(),
            stats: AuxStats::default(),
            by_port: [const { Batch::new() }; PORTS],
            tails: Vec::with_capacity(BATCH_SIZE),
            out: [const { Batch::new() }; PORTS],
            scratch: Batch::new(),
            bell: None,
        }
    }

    /// One burst from every link: processed and given back (module docs). Returns the
    /// frames processed.
    pub fn poll_once(&mut self, now: Instant) -> usize {
        let mut total = 0;
        for link in self.links.iter_mut() {
            if !link.unreturned.is_empty() {
                link.end.give_back_batch(&mut link.unreturned);
                if !link.unreturned.is_empty() {
                    continue;
                }
            }
            let got = &mut link.unreturned;
            let n = link.end.receive(got);
            if n == 0 {
                continue;
            }
            total += n;
            self.tails.clear();
            for &b in got.as_slice() {
                let p = marks::out(&link.view, b).map_or(0, usize::from);
                if let Some(mark) = marks::tail(&link.view, b) {
                    // A whale's frame whose head ran on its lane, with the interface it
                    // arrived on (a port or a sub-interface).
                    self.tails.push((b, mark, if p < IFACES { p } else { 0 }));
                } else if let Some(batch) = self.by_port.get_mut(if p < PORTS { p } else { 0 }) {
                    let _ = batch.push(b);
                }
            }
            for (p, batch) in self.by_port.iter_mut().enumerate() {
                if !batch.is_empty() {
                    // Control frames never come here (they do not parse): no commands.
                    let _ = self.chain.process(p, &mut link.view, batch, &mut self.out, &mut self.counters, now);
                }
            }
            // The tails, one pass per split point.
            while let Some(from) = self.tails.first().map(|t| t.1.from) {
                self.chain.begin();
                for &(b, mark, p) in self.tails.iter().filter(|t| t.1.from == from) {
                    self.chain.admit_tail(p, &mut link.view, &mut self.counters, b, mark.port, mark.dst_set);
                }
                self.chain.run_tail(usize::from(from), &mut link.view, &mut self.out, &mut self.counters, now);
                self.tails.retain(|t| t.1.from != from);
            }
            // Where each frame goes: a port, or nowhere (the chain dropped it; the view kept it
            // aside, and it goes back with the rest, in the order received).
            for &b in got.as_slice() {
                marks::set_out(&mut link.view, b, None);
            }
            for (p, batch) in self.out.iter_mut().enumerate() {
                for &b in batch.as_slice() {
                    marks::set_out(&mut link.view, b, Some(p as u8));
                }
                batch.clear();
            }
            while link.view.take_released(&mut self.scratch) > 0 {
                self.scratch.clear();
            }
            link.end.give_back_batch(got);
        }
        self.stats.polls += 1;
        self.stats.busy_polls += u64::from(total > 0);
        self.stats.frames += total as u64;
        total
    }

    /// The same, with its doorbell ([`super::LaneState::bell`]): the lanes ring it after each
    /// hand-off, so the core may sleep on it ([`crate::time::Sleeper::sleep_until_rung`]).
    #[must_use]
    pub fn with_bell(mut self, bell: Arc<Doorbell>) -> Self {
        self.bell = Some(bell);
        self
    }

    /// Its doorbell, if it has one.
    pub fn bell(&self) -> Option<&Doorbell> {
        self.bell.as_deref()
    }

    /// Frames waiting in the hand-off rings (0: nothing to do; a lower bound).
    pub fn pending(&self) -> usize {
        self.links.iter().map(|l| l.end.pending()).sum()
    }

    /// Frames received and not given back yet.
    pub fn held(&self) -> usize {
        self.links.iter().map(|l| l.end.held()).sum()
    }

    /// Where a hand-off writes, when this core serves a single lane (a sleeper that watches
    /// memory wakes on it); `None` with several.
    pub fn wake_address(&self) -> Option<crate::nic::WakeAddr> {
        match self.links.as_slice() {
            [one] => Some(one.end.wake_address()),
            _ => None,
        }
    }

    /// The chain's drop counters (published as a worker's: conservation sums them).
    pub fn counters(&self) -> &StageCounters {
        &self.counters
    }

    /// The chain (its NF counters).
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// The loop's counters.
    pub fn stats(&self) -> &AuxStats {
        &self.stats
    }
}

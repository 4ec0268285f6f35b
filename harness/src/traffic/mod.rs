//! Host traffic: frames, the generator, the sink/checker and latency statistics.

pub mod checker;
pub mod expect;
pub mod frame;
pub mod generator;
pub mod ipfix;
pub mod malformed;
pub mod stats;

pub use checker::{Checker, Classes, Macs, Verdict};
pub use expect::{Expectations, FlowExpect, UrlVerdict};
pub use frame::{Flow, FlowKind};
pub use generator::{Pacer, Sizes};
pub use stats::{Latencies, LatencySummary};

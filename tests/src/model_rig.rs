//! Bringing the Intel drivers up over the register-level models: one host (DMA
//! memory, the packet pool, a fake clock) and any number of model ports on it. Shared
//! by the driver tests (`tests/ixgbe_model.rs`, `tests/i40e_model.rs`) and the
//! forwarding bench (`benches/intel_forward.rs`), so that the bench measures the same
//! bring-up the tests check.

use std::rc::Rc;

use cadence_core::buf::{BUF_SIZE, Pool};
use cadence_drivers::i40e::{self, I40e};
use cadence_drivers::ixgbe::{self, Ixgbe};

use crate::ixgbe_model::{self, Ixgbe82599};
use crate::model_host::{FakeClock, FakeDma, Host, POOL_BASE, Region, Window};
use crate::xl710_model::{self, Xl710};

/// The ixgbe driver over an 82599 model.
pub type IxgbeNic = Ixgbe<Window<ixgbe_model::Device>, Region>;
/// The i40e driver over an XL710 model.
pub type I40eNic = I40e<Window<xl710_model::Device>, Region>;

/// One host with its pool, on which model ports are brought up.
#[derive(Debug)]
pub struct ModelRig {
    /// Memory shared by the drivers and the models.
    pub host: Rc<Host>,
    /// The drivers' DMA allocator.
    pub dma: FakeDma,
    /// The bring-up's clock (10 µs per read).
    pub clock: FakeClock,
    /// The packet pool, over the host's pool memory.
    pub pool: Pool<'static>,
}

impl ModelRig {
    /// A host with a pool of `buffers` packet buffers.
    pub fn new(buffers: usize) -> Self {
        let host = Host::new(buffers * BUF_SIZE);
        let pool = Pool::try_with_mem(host.pool_mem(), POOL_BASE, buffers).expect("pool");
        Self { dma: host.dma(), host, clock: FakeClock::new(), pool }
    }

    /// An 82599 model with MAC `mac` and the ixgbe driver brought up over it; panics
    /// when the bring-up fails or the model saw a violation.
    pub fn ixgbe_port(&mut self, mac: [u8; 6], cfg: &ixgbe::Config) -> (Ixgbe82599, IxgbeNic) {
        let model = Ixgbe82599::new(&self.host, mac);
        let nic = Ixgbe::try_new(&model.pci(), &mut self.dma, &self.clock, &mut self.pool, cfg).expect("init");
        model.assert_clean();
        (model, nic)
    }

    /// The i40e driver brought up over `model`.
    pub fn try_i40e(&mut self, model: &Xl710, cfg: &i40e::Config) -> Result<I40eNic, i40e::InitError> {
        I40e::try_new(&model.pci(), &mut self.dma, &self.clock, &mut self.pool, cfg)
    }

    /// An XL710 model of PF `pf` with MAC `mac` and the i40e driver brought up over
    /// it; panics when the bring-up fails or the model saw a violation.
    pub fn i40e_port(&mut self, mac: [u8; 6], pf: usize, cfg: &i40e::Config) -> (Xl710, I40eNic) {
        let model = Xl710::with_pf(&self.host, mac, pf);
        let nic = self.try_i40e(&model, cfg).expect("init");
        model.assert_clean();
        (model, nic)
    }
}

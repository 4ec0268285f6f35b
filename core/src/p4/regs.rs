//! A program's register arrays (`regarray NAME size N initval V`): 64-bit registers shared by
//! every worker that runs the program, as a PNA pipeline has one instance of each `Register`
//! extern — so a counter that `regadd` keeps counts every worker's packets, and the control
//! plane (`p4 reg read|write`) reads and writes the one value the packets see.
//!
//! Each register is an `AtomicU64` used with `Relaxed` ordering: `regrd` is a load, `regwr` a
//! store and `regadd` a `fetch_add` (no update is lost between workers; a `regrd` followed by
//! a `regwr` is two accesses, as on a pipeline of several stages). An array of `N` registers
//! holds `N` rounded up to a power of two, and the data path masks its index with it (an index
//! past `N` wraps, never faults); the control plane refuses an index of `N` or more.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use super::Program;

/// The most registers one array may declare (2^24: 128 MiB).
pub const MAX_REGISTERS: u32 = 1 << 24;

/// The register arrays of one program.
#[derive(Debug, Default)]
pub struct Registers {
    arrays: Vec<Box<[AtomicU64]>>,
    /// Each array's declared size.
    sizes: Vec<u32>,
}

impl Registers {
    /// Every array of `p` at its `initval`; `Err` names the first array larger than
    /// [`MAX_REGISTERS`] or whose memory cannot be allocated, and says which.
    pub fn try_new(p: &Program) -> Result<Self, String> {
        let mut arrays = Vec::with_capacity(p.regarrays.len());
        for r in &p.regarrays {
            if r.size > MAX_REGISTERS {
                return Err(format!(
                    "regarray {}: size {} is above the {MAX_REGISTERS} an array may have",
                    r.name, r.size
                ));
            }
            let n = (r.size as usize).next_power_of_two();
            let mut v = Vec::new();
            v.try_reserve_exact(n)
                .map_err(|_| format!("regarray {}: its {n} registers cannot be allocated", r.name))?;
            v.extend((0..n).map(|_| AtomicU64::new(r.initval)));
            arrays.push(v.into_boxed_slice());
        }
        Ok(Self { arrays, sizes: p.regarrays.iter().map(|r| r.size).collect() })
    }

    #[inline]
    fn slot(&self, a: u16, i: u64) -> Option<&AtomicU64> {
        let r = self.arrays.get(usize::from(a))?;
        r.get(i as usize & r.len().saturating_sub(1))
    }

    /// `regrd`: register `i` (masked) of array `a`; 0 for an array the program lacks.
    #[inline]
    pub fn read(&self, a: u16, i: u64) -> u64 {
        self.slot(a, i).map_or(0, |r| r.load(Ordering::Relaxed))
    }

    /// `regwr`: sets register `i` (masked) of array `a` to `v`.
    #[inline]
    pub fn write(&self, a: u16, i: u64, v: u64) {
        if let Some(r) = self.slot(a, i) {
            r.store(v, Ordering::Relaxed);
        }
    }

    /// `regadd`: adds `v` (wrapping) to register `i` (masked) of array `a`.
    #[inline]
    pub fn add(&self, a: u16, i: u64, v: u64) {
        if let Some(r) = self.slot(a, i) {
            r.fetch_add(v, Ordering::Relaxed);
        }
    }

    /// Register `i` of array `a` if `i` is below the array's declared size (no masking:
    /// `State::reg`'s read).
    pub fn get(&self, a: u16, i: u64) -> Option<u64> {
        (i < u64::from(*self.sizes.get(usize::from(a))?)).then(|| self.read(a, i))
    }
}

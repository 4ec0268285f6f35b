//! Which pool buffers the kernel holds for one queue: a bit per buffer.

use alloc::vec::Vec;

use cadence_core::buf::PacketBuf;

/// A set of pool buffer indices, sized once for the pool (≤ 65536 buffers: 8 KiB).
#[derive(Debug)]
pub(crate) struct Owned {
    words: Vec<u64>,
    capacity: usize,
    count: usize,
}

impl Owned {
    /// An empty set for a pool of `capacity` buffers (allocates; init time only).
    pub(crate) fn new(capacity: usize) -> Self {
        Self { words: alloc::vec![0; capacity.div_ceil(64)], capacity, count: 0 }
    }

    /// Buffers in the set.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Whether `b`'s index is one this set can hold (it belongs to a pool this size).
    pub(crate) fn fits(&self, b: PacketBuf) -> bool {
        b.index() < self.capacity
    }

    fn bit(&self, b: PacketBuf) -> Option<(usize, u64)> {
        self.fits(b).then(|| (b.index() / 64, 1u64 << (b.index() % 64)))
    }

    /// Whether `b` is in the set.
    pub(crate) fn contains(&self, b: PacketBuf) -> bool {
        self.bit(b).and_then(|(w, m)| self.words.get(w).map(|x| x & m != 0)).unwrap_or(false)
    }

    /// Adds `b`; false if it was already there or does not fit.
    pub(crate) fn insert(&mut self, b: PacketBuf) -> bool {
        let Some((w, m)) = self.bit(b) else { return false };
        let Some(x) = self.words.get_mut(w) else { return false };
        if *x & m != 0 {
            return false;
        }
        *x |= m;
        self.count += 1;
        true
    }

    /// Removes `b`; false if it was not there.
    pub(crate) fn remove(&mut self, b: PacketBuf) -> bool {
        let Some((w, m)) = self.bit(b) else { return false };
        let Some(x) = self.words.get_mut(w) else { return false };
        if *x & m == 0 {
            return false;
        }
        *x &= !m;
        self.count -= 1;
        true
    }

    /// Empties the set, calling `f` with the index of each buffer it held, in order.
    pub(crate) fn take_all(&mut self, mut f: impl FnMut(usize)) {
        for (w, x) in self.words.iter_mut().enumerate() {
            let mut bits = core::mem::take(x);
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                f(w * 64 + i);
            }
        }
        self.count = 0;
    }
}

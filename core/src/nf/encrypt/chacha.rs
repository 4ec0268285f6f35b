//! The ChaCha20 keystream of RFC 8439 §2.3–§2.4 (IETF variant: 32-bit block counter, 96-bit
//! nonce), written from the RFC, portable and scalar.
//!
//! Why not the `chacha20` crate in the data path: it picks its SSE2/AVX2 backends by run-time
//! CPU detection, so their code is compiled into every build unless the build sets
//! `--cfg chacha20_backend="soft"`; on `x86_64-unknown-none` (soft-float, no SSE) an
//! unoptimized build then stops in LLVM ("Do not know how to split the result of this
//! operator"). This module never needs SIMD registers, and the tests check it against the
//! crate (a dev-dependency) and against the RFC's vectors.

/// RFC 8439 §2.3: "The first four words (0-3) are constants: 0x61707865, 0x3320646e,
/// 0x79622d32, 0x6b206574."
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// RFC 8439 §2.1, the quarter round on words `a`, `b`, `c`, `d` of the state.
#[inline(always)]
fn quarter(s: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(16);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(12);
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(8);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(7);
}

/// A key and nonce, ready to produce keystream blocks.
#[derive(Clone)]
pub(crate) struct ChaCha20 {
    init: [u32; 16],
}

impl ChaCha20 {
    /// RFC 8439 §2.3: constants, the key as eight little-endian words, the block counter
    /// (set per block), the nonce as three little-endian words.
    pub(crate) fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Self {
        let mut init = [0u32; 16];
        init[..4].copy_from_slice(&SIGMA);
        for (w, c) in init[4..12].iter_mut().zip(key.chunks_exact(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        for (w, c) in init[13..].iter_mut().zip(nonce.chunks_exact(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Self { init }
    }

    /// RFC 8439 §2.3: the serialized block `counter` (20 rounds = 10 column/diagonal double
    /// rounds, then the initial state added word by word).
    pub(crate) fn block(&self, counter: u32) -> [u8; 64] {
        let mut s = self.init;
        s[12] = counter;
        let input = s;
        for _ in 0..10 {
            quarter(&mut s, 0, 4, 8, 12);
            quarter(&mut s, 1, 5, 9, 13);
            quarter(&mut s, 2, 6, 10, 14);
            quarter(&mut s, 3, 7, 11, 15);
            quarter(&mut s, 0, 5, 10, 15);
            quarter(&mut s, 1, 6, 11, 12);
            quarter(&mut s, 2, 7, 8, 13);
            quarter(&mut s, 3, 4, 9, 14);
        }
        let mut out = [0u8; 64];
        for ((o, w), i) in out.chunks_exact_mut(4).zip(s.iter()).zip(input.iter()) {
            o.copy_from_slice(&w.wrapping_add(*i).to_le_bytes());
        }
        out
    }

    /// XORs `data` with the keystream from byte `pos` on (block `pos / 64`, offset
    /// `pos % 64`); `false` (nothing changed) if that would run past block 2^32 - 1.
    pub(crate) fn apply(&self, pos: u64, data: &mut [u8]) -> bool {
        let last = pos.saturating_add(data.len() as u64).saturating_sub(1) / 64;
        if last > u64::from(u32::MAX) {
            return false;
        }
        let mut block = (pos / 64) as u32;
        let mut off = (pos % 64) as usize;
        let mut ks = self.block(block);
        for d in data.iter_mut() {
            if off == 64 {
                block = block.wrapping_add(1);
                ks = self.block(block);
                off = 0;
            }
            *d ^= ks[off];
            off += 1;
        }
        true
    }
}

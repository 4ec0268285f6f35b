//! The two hash functions DPDK 22.11's pipeline registers for the `hash` instruction (and for
//! tables' `hash` statement): `jhash` is `rte_jhash` (Bob Jenkins' lookup3 `hashlittle`, its
//! 32-bit words read little-endian, the tail zero-padded), `crc32` is `rte_hash_crc` (CRC-32C,
//! Castagnoli, reflected, no initial or final inversion). The `hash` instruction calls both
//! with seed 0 over the raw bytes of a struct (`__instr_hash_func_exec`).

/// `rte_jhash(data, data.len(), initval)`.
pub fn jhash(data: &[u8], initval: u32) -> u32 {
    const GOLDEN_RATIO: u32 = 0xdead_beef;
    let mut a = GOLDEN_RATIO.wrapping_add(data.len() as u32).wrapping_add(initval);
    let (mut b, mut c) = (a, a);
    let word = |w: &[u8]| {
        let mut x = [0u8; 4];
        for (d, s) in x.iter_mut().zip(w) {
            *d = *s;
        }
        u32::from_le_bytes(x)
    };
    let mut rest = data;
    while rest.len() > 12 {
        let (block, tail) = rest.split_at(12);
        a = a.wrapping_add(word(block.get(0..4).unwrap_or(&[])));
        b = b.wrapping_add(word(block.get(4..8).unwrap_or(&[])));
        c = c.wrapping_add(word(block.get(8..12).unwrap_or(&[])));
        mix(&mut a, &mut b, &mut c);
        rest = tail;
    }
    if rest.is_empty() {
        // "zero length strings require no mixing"
        return c;
    }
    a = a.wrapping_add(word(rest.get(0..rest.len().min(4)).unwrap_or(&[])));
    b = b.wrapping_add(word(rest.get(4..rest.len().clamp(4, 8)).unwrap_or(&[])));
    c = c.wrapping_add(word(rest.get(8..rest.len().clamp(8, 12)).unwrap_or(&[])));
    fin(&mut a, &mut b, &mut c);
    c
}

fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn fin(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// `rte_hash_crc(data, data.len(), init)`: CRC-32C updates from `init`, no inversions.
pub fn crc32c(data: &[u8], init: u32) -> u32 {
    const POLY: u32 = 0x82F6_3B78; // CRC-32C, reflected
    let mut crc = init;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ POLY } else { crc >> 1 };
        }
    }
    crc
}

/// `_mm_crc32_u64(crc, v)`: CRC-32C of `v`'s 8 bytes (little-endian) from `crc`'s low 32 bits.
fn crc32_u64(crc: u64, v: u64) -> u64 {
    u64::from(crc32c(&v.to_le_bytes(), crc as u32))
}

/// The hash of DPDK 22.11's selector table (`rte_swx_table_selector.c`, `hash`, seed 0) over
/// `key`: 8, 16, 32 or 64 bytes (the selector's field span, already masked and zero-padded),
/// read as little-endian 64-bit words; any other length hashes to 0, as there.
pub fn selector_hash(key: &[u8]) -> u32 {
    let k = |i: usize| -> u64 {
        let mut w = [0u8; 8];
        if let Some(b) = key.get(i * 8..i * 8 + 8) {
            w.copy_from_slice(b);
        }
        u64::from_le_bytes(w)
    };
    let seed = 0u64;
    let h = match key.len() {
        8 => crc32_u64(seed, k(0)),
        16 => {
            let k0 = k(0);
            crc32_u64(k0, seed) ^ crc32_u64(k0 >> 32, k(1))
        }
        32 => {
            let (k0, k2) = (k(0), k(2));
            let (crc0, crc1) = (crc32_u64(k0, seed), crc32_u64(k0 >> 32, k(1)));
            let (crc2, crc3) = (crc32_u64(k2, k(3)), k2 >> 32);
            crc32_u64(crc0, crc1) ^ crc32_u64(crc2, crc3)
        }
        64 => {
            let (k0, k2, k5) = (k(0), k(2), k(5));
            let (crc0, crc1) = (crc32_u64(k0, seed), crc32_u64(k0 >> 32, k(1)));
            let (crc2, crc3) = (crc32_u64(k2, k(3)), crc32_u64(k2 >> 32, k(4)));
            let (crc4, crc5) = (crc32_u64(k5, k(6)), crc32_u64(k5 >> 32, k(7)));
            crc32_u64(crc0, (crc1 << 32) ^ crc2) ^ crc32_u64(crc3, (crc4 << 32) ^ crc5)
        }
        _ => 0,
    };
    h as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lookup3.c's own self-test values (`driver5`), which `rte_jhash` keeps.
    #[test]
    fn jhash_matches_lookup3() {
        assert_eq!(jhash(b"", 0), 0xdead_beef);
        assert_eq!(jhash(b"", 0xdead_beef), 0xbd5b_7dde);
        assert_eq!(jhash(b"Four score and seven years ago", 0), 0x1777_0551);
        assert_eq!(jhash(b"Four score and seven years ago", 1), 0xcd62_8161);
    }

    /// The CRC-32C check value of "123456789" is 0xE3069283 with the usual inversions;
    /// without them (as `rte_hash_crc`) from an all-ones start it is its complement.
    #[test]
    fn crc32c_matches_the_check_value() {
        assert_eq!(!crc32c(b"123456789", 0xFFFF_FFFF), 0xE306_9283);
        assert_eq!(crc32c(b"", 7), 7);
    }
}

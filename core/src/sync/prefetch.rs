//! Software prefetch for burst table lookups (`pna::exact`).
//!
//! Why `unsafe`: stable Rust offers prefetch only as `core::arch::x86_64::_mm_prefetch`, which
//! is a `#[target_feature(enable = "sse")]` function and therefore needs an `unsafe` call from
//! code compiled without that attribute. A prefetch is a pure hint — it cannot fault, even on a
//! bad address, and changes no architectural state — so wrapping it in a safe function over a
//! reference is sound. Without it a burst can only overlap its cache misses through ordinary
//! loads, which stall retirement; with it the header and slot lines of 32 keys are in flight at
//! once. On targets without SSE (the soft-float `x86_64-unknown-none`) it compiles to nothing.

/// Hints the CPU to bring the cache line holding `*p` into all cache levels.
#[inline(always)]
pub fn prefetch<T>(p: &T) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    // SAFETY: `_mm_prefetch` needs SSE, which this cfg proves the build enables; PREFETCHT0 is a
    // hint that never faults and writes nothing, and `p` is a valid reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>((p as *const T).cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = p;
}

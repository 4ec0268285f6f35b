//! [`Field`]: a bit field of one register type, declared once (offset and width), and
//! [`Value`]: a value of one register type, changed only through its fields.

use core::fmt;
use core::marker::PhantomData;

use super::{Register, Word};

/// Bits `offset ..= offset + width - 1` of register `R`. Every mask is derived from the
/// declaration; nothing is typed by hand.
pub struct Field<R> {
    offset: u32,
    width: u32,
    _r: PhantomData<fn() -> R>,
}

impl<R> Clone for Field<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for Field<R> {}
impl<R> PartialEq for Field<R> {
    fn eq(&self, o: &Self) -> bool {
        self.offset == o.offset && self.width == o.width
    }
}
impl<R> Eq for Field<R> {}
impl<R: Register> fmt::Debug for Field<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.width == 1 {
            write!(f, "{}[{}]", R::NAME, self.offset)
        } else {
            write!(f, "{}[{}:{}]", R::NAME, self.offset + self.width - 1, self.offset)
        }
    }
}

impl<R: Register> Field<R> {
    /// `width` bits at `offset`. Fails to compile (these are consts) when the field is
    /// empty or does not fit the register.
    pub const fn new(offset: u32, width: u32) -> Self {
        assert!(width >= 1, "empty field");
        assert!(offset + width <= <R::Value as Word>::BITS, "field outside its register");
        Self { offset, width, _r: PhantomData }
    }

    /// One bit at `offset`.
    pub const fn bit(offset: u32) -> Self {
        Self::new(offset, 1)
    }

    /// Bits `hi:lo` as a datasheet writes them (`lo` empty: the one bit `hi`); what
    /// [`crate::registers!`] expands to.
    pub const fn hi_lo(hi: u32, lo: &[u32]) -> Self {
        assert!(lo.len() <= 1, "a field is hi or hi:lo");
        if let [lo] = lo {
            assert!(hi >= *lo, "field written lo:hi, not hi:lo");
            Self::new(*lo, hi - *lo + 1)
        } else {
            Self::new(hi, 1)
        }
    }
}

impl<R> Field<R> {
    /// Lowest bit.
    pub const fn offset(self) -> u32 {
        self.offset
    }

    /// Width in bits.
    pub const fn width(self) -> u32 {
        self.width
    }

    /// The largest value the field holds.
    pub const fn max(self) -> u64 {
        if self.width >= 64 { u64::MAX } else { (1u64 << self.width) - 1 }
    }

    /// The field's bits in place.
    pub const fn mask(self) -> u64 {
        self.max() << self.offset
    }

    /// A value of `R` with this field holding `v` (truncated to the field's width) and
    /// every other bit 0.
    pub const fn value(self, v: u64) -> Value<R> {
        Value::new(0).with(self, v)
    }
}

/// A value of register `R`: what [`super::Regs::read`] returns and
/// [`super::Regs::write`] takes. Fields of other registers do not apply to it.
pub struct Value<R> {
    bits: u64,
    _r: PhantomData<fn() -> R>,
}

impl<R> Clone for Value<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for Value<R> {}
impl<R> PartialEq for Value<R> {
    fn eq(&self, o: &Self) -> bool {
        self.bits == o.bits
    }
}
impl<R> Eq for Value<R> {}
impl<R: Register> fmt::Debug for Value<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({:#x})", R::NAME, self.bits)
    }
}
impl<R> Default for Value<R> {
    fn default() -> Self {
        Self::new(0)
    }
}

impl<R> Value<R> {
    /// The value whose bits are `bits` (for registers that hold one number: an
    /// address, a length, a tail index).
    #[inline]
    pub const fn new(bits: u64) -> Self {
        Self { bits, _r: PhantomData }
    }

    /// All bits, zero-extended.
    #[inline]
    pub const fn bits(self) -> u64 {
        self.bits
    }

    /// Field `f`'s value.
    #[inline]
    pub const fn get(self, f: Field<R>) -> u64 {
        (self.bits & f.mask()) >> f.offset
    }

    /// Whether any bit of field `f` is set (for one-bit fields: the flag).
    #[inline]
    pub const fn is_set(self, f: Field<R>) -> bool {
        self.bits & f.mask() != 0
    }

    /// This value with field `f` holding `v` (truncated to its width), every other
    /// bit kept.
    #[inline]
    pub const fn with(self, f: Field<R>, v: u64) -> Self {
        Self::new((self.bits & !f.mask()) | ((v << f.offset) & f.mask()))
    }

    /// This value with every bit of `f` set.
    #[inline]
    pub const fn set(self, f: Field<R>) -> Self {
        Self::new(self.bits | f.mask())
    }

    /// This value with every bit of `f` clear.
    #[inline]
    pub const fn clear(self, f: Field<R>) -> Self {
        Self::new(self.bits & !f.mask())
    }

    /// This value with `f` set when `on`, clear otherwise.
    #[inline]
    pub const fn set_if(self, f: Field<R>, on: bool) -> Self {
        if on { self.set(f) } else { self.clear(f) }
    }
}

impl<R: Register> Value<R> {
    /// The value as the register's own width (high bits beyond it dropped).
    #[inline]
    pub fn raw(self) -> R::Value {
        <R::Value as Word>::from_u64(self.bits)
    }
}

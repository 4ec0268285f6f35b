//! Declared register bit fields (STYLE habit 3): a field names its offset and width
//! once, and every mask is derived from that, never typed by hand.

use crate::hal::Mmio;

/// A bit field of a 32-bit register: `BITS` bits starting at bit `OFFSET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Field {
    /// Lowest bit of the field.
    pub offset: u32,
    /// Width in bits (1..=32).
    pub bits: u32,
}

impl Field {
    /// A field of `bits` bits at `offset`. Panics at compile time (these are consts)
    /// when the field does not fit in 32 bits.
    pub const fn new(offset: u32, bits: u32) -> Self {
        assert!(bits >= 1 && offset + bits <= 32, "field outside a 32-bit register");
        Self { offset, bits }
    }

    /// A one-bit field.
    pub const fn bit(offset: u32) -> Self {
        Self::new(offset, 1)
    }

    /// The field's bits within the register.
    pub const fn mask(self) -> u32 {
        (u32::MAX >> (32 - self.bits)) << self.offset
    }

    /// The field's value in `reg`.
    pub const fn get(self, reg: u32) -> u32 {
        (reg & self.mask()) >> self.offset
    }

    /// Whether any bit of the field is set in `reg` (for one-bit fields: the flag).
    pub const fn is_set(self, reg: u32) -> bool {
        reg & self.mask() != 0
    }

    /// `reg` with the field replaced by `value` (truncated to the field's width),
    /// every other bit kept.
    pub const fn set(self, reg: u32, value: u32) -> u32 {
        (reg & !self.mask()) | ((value << self.offset) & self.mask())
    }

    /// The field holding `value`, every other bit 0 (for writes of whole registers).
    pub const fn val(self, value: u32) -> u32 {
        self.set(0, value)
    }
}

/// Register access on a BAR window: `read` / `write` / `modify` (STYLE habit 9). Read-
/// modify-writes keep the bits they do not name, reserved bits included.
#[derive(Debug, Clone, Copy)]
pub struct Regs<'a, W> {
    bar: &'a W,
}

impl<'a, W: Mmio> Regs<'a, W> {
    /// Registers of `bar`.
    pub const fn new(bar: &'a W) -> Self {
        Self { bar }
    }

    /// The window these registers live in.
    pub const fn bar(&self) -> &'a W {
        self.bar
    }

    /// Reads the register at `off`.
    #[inline]
    pub fn read(&self, off: usize) -> u32 {
        self.bar.read32(off)
    }

    /// Writes the whole register at `off`.
    #[inline]
    pub fn write(&self, off: usize, v: u32) {
        self.bar.write32(off, v)
    }

    /// Read-modify-write of the register at `off`.
    #[inline]
    pub fn modify(&self, off: usize, f: impl FnOnce(u32) -> u32) {
        let v = self.read(off);
        self.write(off, f(v));
    }

    /// Sets field `f` of the register at `off` to `value`, keeping the other bits.
    pub fn set_field(&self, off: usize, f: Field, value: u32) {
        self.modify(off, |r| f.set(r, value));
    }

    /// Sets every bit of the one-bit fields `fs` at `off`.
    pub fn set_bits(&self, off: usize, fs: &[Field]) {
        self.modify(off, |r| fs.iter().fold(r, |r, f| r | f.mask()));
    }

    /// Clears every bit of the fields `fs` at `off`.
    pub fn clear_bits(&self, off: usize, fs: &[Field]) {
        self.modify(off, |r| fs.iter().fold(r, |r, f| r & !f.mask()));
    }

    /// Whether one-bit field `f` reads as set at `off`.
    pub fn is_set(&self, off: usize, f: Field) -> bool {
        f.is_set(self.read(off))
    }
}

#[cfg(test)]
mod tests {
    use super::Field;

    #[test]
    fn masks_come_from_offset_and_width() {
        let bsize = Field::new(0, 7);
        assert_eq!(bsize.mask(), 0x7F);
        let desctype = Field::new(25, 3);
        assert_eq!(desctype.mask(), 0x0E00_0000);
        assert_eq!(desctype.val(1), 0x0200_0000);
        assert_eq!(desctype.set(0xFFFF_FFFF, 1), 0xF3FF_FFFF);
        assert_eq!(desctype.get(0x0400_0000), 2);
        assert_eq!(Field::new(0, 32).mask(), u32::MAX);
        assert_eq!(Field::bit(31).val(1), 0x8000_0000);
        // Values wider than the field are truncated, never spill into neighbours.
        assert_eq!(Field::new(8, 4).val(0x1F), 0xF00);
    }
}

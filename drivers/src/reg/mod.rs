//! Typed registers (STYLE habit 3; issue 15 item 3): a register is declared once — name,
//! offset, width, access and bit fields, with [`registers!`](crate::registers) — and the type system
//! carries the rest.
//!
//! - Every register is a zero-sized type (`CTRL`), so a value read from it is a
//!   [`Value<CTRL>`] and only [`Field<CTRL>`]s apply to it. Testing a bit of STATUS
//!   against CTRL does not compile.
//! - Its access ([`Ro`], [`Rc`], [`Wo`], [`Rw`]) decides which of [`Regs::read`],
//!   [`Regs::write`] and [`Regs::modify`] take it. Writing a read-only register does not
//!   compile; neither does a read-modify-write of a clear-on-read counter.
//! - Arrays are indexed ([`Array::at`]), and per-queue blocks of registers are placed at
//!   a base chosen at run time ([`Block`], [`BlockArray`]): no `BASE + 4 * i` by hand.
//! - Fields declare their bit range once, in the datasheet's `hi:lo` notation; every
//!   mask is derived from it. Writes through [`Regs::modify`] keep every bit they do not
//!   name (reserved bits included).
//!
//! Ownership is carried by who holds the window: a port owns its BAR's [`Regs`], each
//! ring owns the window of its own tail register and nothing else.
//!
//! The same [`Field`] describes bit fields of descriptor words (a descriptor is a
//! [`Block`] of "registers" in DMA memory) and of CPU registers (the platform's local
//! APIC and MSRs): it is the one register-field type of the workspace.
//!
//! Why not `volatile-register`'s `RO`/`RW` blocks accessed in place: drivers reach the
//! device through [`crate::hal::Mmio`] so that the same code runs against the
//! register-level models of `tests/`, and in-place `repr(C)` blocks would need a raw
//! pointer into the BAR. The declarations here give the same guarantees (offset, width
//! and access fixed once, checked at compile time) over that trait. `volatile-register`
//! stays for virtio's layout structs. The local APIC's declarations are in
//! `platform/src/lapic/regs.rs` (spaces `Lapic` and `Msr`).
//!
//! Datasheet delays that are not waits for a condition ("wait 1 ms after CTRL.RST") go
//! through `embedded_hal::delay::DelayNs`: [`crate::hal::ClockDelay`] implements it over any
//! `cadence_core::time::Clock` (the image's TSC clock, the tests' fake clocks); waits for a
//! condition use `cadence_core::time::poll_until` with a deadline.
//!
//! ```
//! use cadence_drivers::reg::{Place, Regs, Value};
//! use cadence_drivers::registers;
//!
//! registers! {
//!     /// A control register.
//!     pub CTL: Rw<u32> @ 0x00 {
//!         /// Enable.
//!         EN: 0,
//!         /// A 4-bit mode.
//!         MODE: 7:4,
//!     }
//!     /// A status register.
//!     pub STAT: Ro<u32> @ 0x04 {
//!         /// Ready.
//!         READY: 0,
//!     }
//!     /// Eight table entries.
//!     pub TABLE: Rw<u32> @ 0x10 [8; stride 4] {}
//! }
//!
//! fn bring_up<W: cadence_drivers::hal::Mmio>(r: &Regs<'_, W>) -> bool {
//!     r.modify(CTL, |v| v.set(CTL::EN).with(CTL::MODE, 3));
//!     if let Some(t) = TABLE.at(7) {
//!         r.write(t, Value::new(0x0302_0100));
//!     }
//!     r.read(STAT).is_set(STAT::READY)
//! }
//! assert_eq!(CTL::MODE.mask(), 0xF0);
//! assert_eq!(TABLE.at(7).map(|t| t.offset()), Some(0x2C));
//! assert!(TABLE.at(8).is_none());
//! ```
//!
//! Writing a read-only register does not compile (the error codes are checked by a nightly
//! rustdoc; a stable one checks only that compilation fails):
//!
//! ```compile_fail,E0277
//! use cadence_drivers::reg::{Regs, Value};
//! cadence_drivers::registers! {
//!     /// A status register.
//!     pub STAT: Ro<u32> @ 0x04 {}
//! }
//! fn f<W: cadence_drivers::hal::Mmio>(r: &Regs<'_, W>) {
//!     r.write(STAT, Value::new(1));
//! }
//! ```
//!
//! Nor does testing a field against another register:
//!
//! ```compile_fail,E0308
//! use cadence_drivers::reg::Regs;
//! cadence_drivers::registers! {
//!     /// A control register.
//!     pub CTL: Rw<u32> @ 0x00 { EN: 0 }
//!     /// A status register.
//!     pub STAT: Ro<u32> @ 0x04 { READY: 0 }
//! }
//! fn f<W: cadence_drivers::hal::Mmio>(r: &Regs<'_, W>) -> bool {
//!     r.read(STAT).is_set(CTL::EN)
//! }
//! ```
//!
//! Nor a read-modify-write of a clear-on-read counter, nor using an array without an
//! index:
//!
//! ```compile_fail,E0277
//! use cadence_drivers::reg::Regs;
//! cadence_drivers::registers! {
//!     /// A counter that clears when read.
//!     pub GPRC: Rc<u32> @ 0x4074 {}
//! }
//! fn f<W: cadence_drivers::hal::Mmio>(r: &Regs<'_, W>) {
//!     r.modify(GPRC, |v| v);
//! }
//! ```
//!
//! ```compile_fail,E0271
//! use cadence_drivers::reg::{Regs, Value};
//! cadence_drivers::registers! {
//!     /// Eight table entries.
//!     pub TABLE: Rw<u32> @ 0x10 [8; stride 4] {}
//! }
//! fn f<W: cadence_drivers::hal::Mmio>(r: &Regs<'_, W>) {
//!     r.write(TABLE, Value::new(0));
//! }
//! ```

mod field;
mod macros;

use core::fmt;
use core::marker::PhantomData;

use crate::hal::Mmio;

pub use field::{Field, Value};

/// A register's width: the integer a read returns.
pub trait Word: Copy + Eq + fmt::Debug + 'static {
    /// Bits in the word.
    const BITS: u32;
    /// The word, zero-extended.
    fn to_u64(self) -> u64;
    /// The low [`Word::BITS`] bits of `v`.
    fn from_u64(v: u64) -> Self;
    /// Reads the word at `off` of `m`.
    fn read<M: Mmio + ?Sized>(m: &M, off: usize) -> Self;
    /// Writes the word at `off` of `m`.
    fn write<M: Mmio + ?Sized>(m: &M, off: usize, v: Self);
}

impl Word for u8 {
    const BITS: u32 = 8;
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(v: u64) -> Self {
        v as u8
    }
    fn read<M: Mmio + ?Sized>(m: &M, off: usize) -> Self {
        m.read8(off)
    }
    fn write<M: Mmio + ?Sized>(m: &M, off: usize, v: Self) {
        m.write8(off, v)
    }
}

impl Word for u16 {
    const BITS: u32 = 16;
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(v: u64) -> Self {
        v as u16
    }
    fn read<M: Mmio + ?Sized>(m: &M, off: usize) -> Self {
        m.read16(off)
    }
    fn write<M: Mmio + ?Sized>(m: &M, off: usize, v: Self) {
        m.write16(off, v)
    }
}

impl Word for u32 {
    const BITS: u32 = 32;
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(v: u64) -> Self {
        v as u32
    }
    #[inline]
    fn read<M: Mmio + ?Sized>(m: &M, off: usize) -> Self {
        m.read32(off)
    }
    #[inline]
    fn write<M: Mmio + ?Sized>(m: &M, off: usize, v: Self) {
        m.write32(off, v)
    }
}

/// 64-bit registers are accessed as two dwords, low half first ([`Mmio::read64`]): the
/// order the Intel NICs' 36- and 48-bit counters need (the low read latches the high).
impl Word for u64 {
    const BITS: u32 = 64;
    fn to_u64(self) -> u64 {
        self
    }
    fn from_u64(v: u64) -> Self {
        v
    }
    #[inline]
    fn read<M: Mmio + ?Sized>(m: &M, off: usize) -> Self {
        m.read64(off)
    }
    #[inline]
    fn write<M: Mmio + ?Sized>(m: &M, off: usize, v: Self) {
        m.write64(off, v)
    }
}

/// Access: read only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ro {}
/// Access: read only, and a read clears it (statistics counters): readable, never
/// read-modify-written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rc {}
/// Access: write only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wo {}
/// Access: read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rw {}

/// Accesses that allow a read.
pub trait Readable {}
impl Readable for Ro {}
impl Readable for Rc {}
impl Readable for Rw {}

/// Accesses that allow a write.
pub trait Writable {}
impl Writable for Wo {}
impl Writable for Rw {}

/// Accesses that allow a read-modify-write (the read has no side effect).
pub trait Modifiable: Readable + Writable {}
impl Modifiable for Rw {}

/// The space of registers at fixed offsets of a device's register window (BAR 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bar {}

/// Shape: one register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Single {}
/// Shape: an array of registers ([`Array`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Many {}

/// A register type, as [`registers!`](crate::registers) declares it.
pub trait Register: Copy + 'static {
    /// [`Ro`], [`Rc`], [`Wo`] or [`Rw`].
    type Access;
    /// Its width.
    type Value: Word;
    /// Where [`Register::OFFSET`] counts from: [`Bar`], or a block type ([`Block`]).
    type Space;
    /// [`Single`] or [`Many`].
    type Shape;
    /// Byte offset (of element 0, for an array) within its space.
    const OFFSET: usize;
    /// The datasheet's name, for messages.
    const NAME: &'static str;
}

/// An array of registers: element `i` at `OFFSET + i * STRIDE`, `i < COUNT`.
pub trait Array: Register<Shape = Many> {
    /// Elements.
    const COUNT: usize;
    /// Bytes between elements.
    const STRIDE: usize;

    /// Element `i`, or `None` past the end.
    #[inline]
    fn at(self, i: usize) -> Option<At<Self>> {
        (i < Self::COUNT).then(|| At::new(Self::OFFSET + i * Self::STRIDE))
    }

    /// Every element, in order.
    fn iter(self) -> impl Iterator<Item = At<Self>> {
        (0..Self::COUNT).map(|i| At::new(Self::OFFSET + i * Self::STRIDE))
    }
}

/// A place in a window that holds a register of type [`Place::Reg`]: a single [`Bar`]
/// register (the register type itself), an array element or a register of a placed
/// block ([`At`]).
pub trait Place: Copy {
    /// The register found there.
    type Reg: Register;
    /// Its byte offset in the window.
    fn offset(self) -> usize;
}

impl<R: Register<Space = Bar, Shape = Single>> Place for R {
    type Reg = R;
    #[inline]
    fn offset(self) -> usize {
        R::OFFSET
    }
}

/// Register `R` at a known offset: an array element or a register of a placed block.
pub struct At<R> {
    off: usize,
    _r: PhantomData<fn() -> R>,
}

impl<R> At<R> {
    const fn new(off: usize) -> Self {
        Self { off, _r: PhantomData }
    }
}

impl<R> Clone for At<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for At<R> {}
impl<R: Register> fmt::Debug for At<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{:#x}", R::NAME, self.off)
    }
}
impl<R> PartialEq for At<R> {
    fn eq(&self, o: &Self) -> bool {
        self.off == o.off
    }
}
impl<R> Eq for At<R> {}

impl<R: Register> Place for At<R> {
    type Reg = R;
    #[inline]
    fn offset(self) -> usize {
        self.off
    }
}

/// A block of registers of space `S` (a queue's register block, a descriptor) placed at
/// byte `base` of its window.
pub struct Block<S> {
    base: usize,
    _s: PhantomData<fn() -> S>,
}

impl<S> Clone for Block<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for Block<S> {}
impl<S> fmt::Debug for Block<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Block@{:#x}", self.base)
    }
}
impl<S> PartialEq for Block<S> {
    fn eq(&self, o: &Self) -> bool {
        self.base == o.base
    }
}
impl<S> Eq for Block<S> {}

impl<S> Block<S> {
    /// The block at byte `base` (for descriptors: `index * descriptor length`).
    #[inline]
    pub const fn at(base: usize) -> Self {
        Self { base, _s: PhantomData }
    }

    /// Where the block starts.
    pub const fn base(self) -> usize {
        self.base
    }

    /// Register `r` of this block.
    #[inline]
    pub fn reg<R: Register<Space = S, Shape = Single>>(self, r: R) -> At<R> {
        let _ = r;
        At::new(self.base + R::OFFSET)
    }
}

/// `count` blocks of space `S`, `stride` bytes apart from `base` (per-queue register
/// blocks).
pub struct BlockArray<S> {
    base: usize,
    stride: usize,
    count: usize,
    _s: PhantomData<fn() -> S>,
}

impl<S> Clone for BlockArray<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for BlockArray<S> {}
impl<S> fmt::Debug for BlockArray<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlockArray@{:#x}+{:#x}*{}", self.base, self.stride, self.count)
    }
}

impl<S> BlockArray<S> {
    /// The blocks.
    pub const fn new(base: usize, stride: usize, count: usize) -> Self {
        Self { base, stride, count, _s: PhantomData }
    }

    /// Blocks in the array.
    pub const fn len(self) -> usize {
        self.count
    }

    /// Whether the array has no blocks.
    pub const fn is_empty(self) -> bool {
        self.count == 0
    }

    /// Block `i`, or `None` past the end.
    #[inline]
    pub const fn at(self, i: usize) -> Option<Block<S>> {
        if i < self.count { Some(Block::at(self.base + i * self.stride)) } else { None }
    }
}

/// Typed access to the registers of one window: `read` / `write` / `modify` (STYLE
/// habit 9), each only for the accesses its register allows.
pub struct Regs<'a, W: ?Sized> {
    win: &'a W,
}

impl<W: ?Sized> Clone for Regs<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<W: ?Sized> Copy for Regs<'_, W> {}
impl<W: ?Sized> fmt::Debug for Regs<'_, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Regs")
    }
}

impl<'a, W: Mmio + ?Sized> Regs<'a, W> {
    /// The registers of `win`.
    #[inline]
    pub const fn new(win: &'a W) -> Self {
        Self { win }
    }

    /// The window.
    pub const fn window(&self) -> &'a W {
        self.win
    }

    /// Reads the register at `p`.
    #[inline]
    pub fn read<P: Place>(&self, p: P) -> Value<P::Reg>
    where
        <P::Reg as Register>::Access: Readable,
    {
        Value::new(<<P::Reg as Register>::Value as Word>::read(self.win, p.offset()).to_u64())
    }

    /// Writes `v` to the whole register at `p`.
    #[inline]
    pub fn write<P: Place>(&self, p: P, v: Value<P::Reg>)
    where
        <P::Reg as Register>::Access: Writable,
    {
        <<P::Reg as Register>::Value as Word>::write(self.win, p.offset(), v.raw());
    }

    /// Read-modify-write of the register at `p`: every bit `f` does not change is
    /// written back as read (reserved bits included).
    #[inline]
    pub fn modify<P: Place>(&self, p: P, f: impl FnOnce(Value<P::Reg>) -> Value<P::Reg>)
    where
        <P::Reg as Register>::Access: Modifiable,
    {
        let v = self.read(p);
        self.write(p, f(v));
    }

    /// Whether field `f` of the register at `p` reads non-zero (for one-bit fields: the
    /// flag).
    #[inline]
    pub fn is_set<P: Place>(&self, p: P, f: Field<P::Reg>) -> bool
    where
        <P::Reg as Register>::Access: Readable,
    {
        self.read(p).is_set(f)
    }
}

#[cfg(test)]
mod tests;

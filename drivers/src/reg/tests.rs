use core::cell::RefCell;

use super::*;
use crate::registers;

registers! {
    /// A control register with a one-bit and a multi-bit field.
    pub CTL: Rw<u32> @ 0x00 {
        /// Enable.
        EN: 0,
        /// Bits 11:8.
        MODE: 11:8,
        /// The top bit.
        TOP: 31,
    }
    /// A read-only status register.
    pub STAT: Ro<u32> @ 0x04 { READY: 3 }
    /// A 64-bit counter.
    pub CNT: Rc<u64> @ 0x08 { LOW48: 47:0 }
    /// Four table registers.
    pub TBL: Rw<u32> @ 0x40 [4; stride 0x10] {}
    /// A register of a queue block.
    pub QCTL: Rw<u32> @ 0x28 in QueueSpace { ENABLE: 25 }
}

/// The space of [`QCTL`].
pub enum QueueSpace {}

/// A register file that logs accesses.
struct File {
    words: RefCell<[u32; 64]>,
    log: RefCell<alloc::vec::Vec<(bool, usize)>>,
}

impl File {
    fn new() -> Self {
        Self { words: RefCell::new([0; 64]), log: RefCell::new(alloc::vec::Vec::new()) }
    }
}

impl Mmio for File {
    fn read8(&self, _: usize) -> u8 {
        unreachable!()
    }
    fn read16(&self, _: usize) -> u16 {
        unreachable!()
    }
    fn read32(&self, off: usize) -> u32 {
        self.log.borrow_mut().push((false, off));
        self.words.borrow()[off / 4]
    }
    fn write8(&self, _: usize, _: u8) {
        unreachable!()
    }
    fn write16(&self, _: usize, _: u16) {
        unreachable!()
    }
    fn write32(&self, off: usize, v: u32) {
        self.log.borrow_mut().push((true, off));
        self.words.borrow_mut()[off / 4] = v;
    }
    fn len(&self) -> usize {
        256
    }
}

#[test]
fn fields_come_from_their_declaration() {
    assert_eq!(CTL::EN.mask(), 1);
    assert_eq!(CTL::MODE.mask(), 0xF00);
    assert_eq!((CTL::MODE.offset(), CTL::MODE.width(), CTL::MODE.max()), (8, 4, 15));
    assert_eq!(CTL::TOP.mask(), 0x8000_0000);
    assert_eq!(CNT::LOW48.mask(), (1 << 48) - 1);
    assert_eq!(QCTL::ENABLE.value(1).bits(), 1 << 25);
    // Values wider than the field are cut, never spill into neighbours.
    assert_eq!(CTL::MODE.value(0x1F).bits(), 0xF00);
    let v = Value::<CTL>::new(0xFFFF_FFFF).with(CTL::MODE, 2).clear(CTL::EN);
    assert_eq!(v.bits(), 0xFFFF_F2FE);
    assert_eq!(v.get(CTL::MODE), 2);
    assert!(v.is_set(CTL::TOP) && !v.is_set(CTL::EN));
    assert_eq!(v.set_if(CTL::EN, true).bits(), 0xFFFF_F2FF);
    assert_eq!(v.raw(), 0xFFFF_F2FE_u32);
    assert_eq!(alloc::format!("{:?}", CTL::MODE), "CTL[11:8]");
}

#[test]
fn accesses_go_to_the_declared_offsets() {
    let f = File::new();
    let r = Regs::new(&f);
    r.write(CTL, CTL::MODE.value(5));
    r.modify(CTL, |v| v.set(CTL::EN));
    assert_eq!(f.words.borrow()[0], 0x501);
    f.words.borrow_mut()[1] = 1 << 3;
    assert!(r.is_set(STAT, STAT::READY));
    // A 64-bit register reads the low dword first.
    f.words.borrow_mut()[2] = 7;
    f.words.borrow_mut()[3] = 1;
    f.log.borrow_mut().clear();
    assert_eq!(r.read(CNT).get(CNT::LOW48), (1 << 32) | 7);
    assert_eq!(f.log.borrow().as_slice(), &[(false, 8), (false, 12)]);
    // Arrays by index, bounded.
    assert_eq!(TBL.at(3).map(Place::offset), Some(0x70));
    assert!(TBL.at(4).is_none());
    assert_eq!(TBL.iter().map(Place::offset).collect::<alloc::vec::Vec<_>>(), [0x40, 0x50, 0x60, 0x70]);
    // Blocks placed at run time.
    let blocks = BlockArray::<QueueSpace>::new(0x80, 0x40, 2);
    let q1 = blocks.at(1).map(|b| b.reg(QCTL));
    assert_eq!(q1.map(Place::offset), Some(0xE8));
    assert!(blocks.at(2).is_none());
    if let Some(q1) = q1 {
        r.modify(q1, |v| v.set(QCTL::ENABLE));
        assert!(r.read(q1).is_set(QCTL::ENABLE));
    }
    assert_eq!(f.words.borrow()[0xE8 / 4], 1 << 25);
}

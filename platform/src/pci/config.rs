//! Configuration mechanism #1 (PCI 3.0 §3.2.2.3.2): write the address to CONFIG_ADDRESS
//! (0xCF8), then access CONFIG_DATA (0xCFC). The two steps must not interleave with
//! another core's, so every access holds the one lock (with interrupts off).

use super::{Bdf, ConfigAccess};
use x86_64::instructions::port::Port;

const CONFIG_ADDRESS: u16 = 0xcf8;
const CONFIG_DATA: u16 = 0xcfc;

static LOCK: spin::Mutex<()> = spin::Mutex::new(());

/// Port-I/O configuration access; zero-sized, all instances share one lock.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mechanism1;

fn locked<R>(f: impl FnOnce() -> R) -> R {
    x86_64::instructions::interrupts::without_interrupts(|| {
        let _guard = LOCK.lock();
        f()
    })
}

impl ConfigAccess for Mechanism1 {
    fn read32(&self, bdf: Bdf, off: u8) -> u32 {
        locked(|| {
            // SAFETY: 0xCF8/0xCFC are the host bridge's configuration ports; the lock
            // keeps the address/data pair together. Config reads have no memory effects.
            unsafe {
                Port::<u32>::new(CONFIG_ADDRESS).write(bdf.config_address(off));
                Port::<u32>::new(CONFIG_DATA).read()
            }
        })
    }

    fn write32(&self, bdf: Bdf, off: u8, val: u32) {
        locked(|| {
            // SAFETY: as in `read32`. Callers own the function's registers they write
            // (BAR sizing restores them; drivers program their own device).
            unsafe {
                Port::<u32>::new(CONFIG_ADDRESS).write(bdf.config_address(off));
                Port::<u32>::new(CONFIG_DATA).write(val);
            }
        })
    }
}

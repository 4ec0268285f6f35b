//! `core::p4::load` over arbitrary text (a DPDK pipeline spec, as p4c's DPDK backend emits):
//! never panics; an error names a line of the text (0: the text as a whole) and formats; a
//! program that loaded is consistent — every header inside the header storage, every jump
//! target inside its instruction list, every table's default action one of its actions —
//! and a table-file line parsed against each of its tables never panics either; the program
//! runs over the input's own bytes as a frame (a few ports) without panicking, sending at
//! most what fits the output buffer.
#![no_main]

use cadence_core::p4::exec::{Fault, Hit, State, Tables, Verdict};
use cadence_core::p4::{ActionId, TableRef};
use cadence_core::p4::{self, Instr, Program, Space};

/// The jump target of `i`, if it jumps.
fn target(i: &Instr) -> Option<u32> {
    match *i {
        Instr::Jmp { target }
        | Instr::JmpValid { target, .. }
        | Instr::JmpHit { target, .. }
        | Instr::JmpAction { target, .. }
        | Instr::JmpCmp { target, .. } => Some(target),
        _ => None,
    }
}

/// Learners that learn, at most 64 entries (tables stay empty).
#[derive(Default)]
struct Learning {
    entries: Vec<(u16, Vec<u8>, ActionId, Vec<u8>)>,
}

impl Tables for Learning {
    fn lookup(&mut self, table: TableRef, key: &[u8]) -> Option<Hit<'_>> {
        let TableRef::Learner(l) = table else { return None };
        let i = self.entries.iter().position(|e| e.0 == l && e.1 == key)?;
        let e = &self.entries[i];
        Some(Hit { action: e.2, args: &e.3, entry: i as u32 })
    }

    fn learn(&mut self, l: u16, key: &[u8], a: ActionId, args: &[u8], _: u64) -> Result<bool, Fault> {
        if self.entries.len() >= 64 {
            return Ok(false);
        }
        self.entries.push((l, key.to_vec(), a, args.to_vec()));
        Ok(true)
    }

    fn rearm(&mut self, _: u16, _: &[u8], _: Option<u64>) -> Result<(), Fault> {
        Ok(())
    }

    fn forget(&mut self, l: u16, key: &[u8]) -> Result<(), Fault> {
        self.entries.retain(|e| !(e.0 == l && e.1 == key));
        Ok(())
    }
}

fn consistent(p: &Program) {
    for h in &p.headers {
        assert!(h.offset + h.bytes <= p.header_bytes);
    }
    let lists = core::iter::once(&p.apply).chain(p.actions.iter().map(|a| &a.instrs));
    for list in lists {
        for i in list {
            if let Some(t) = target(i) {
                assert!((t as usize) < list.len());
            }
            if let Instr::Mov { dst, .. } = i {
                match dst.space {
                    Space::Header(h) => assert!((h as usize) < p.headers.len()),
                    Space::Meta => assert!(dst.offset + dst.bits / 8 <= p.meta_bytes),
                    Space::Arg => panic!("a mov into an action argument loaded"),
                }
            }
        }
    }
    assert!(matches!(p.apply.first(), Some(Instr::Rx { .. })));
    for t in &p.tables {
        assert!(t.actions.iter().any(|a| a.action == t.default.action));
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = core::str::from_utf8(data) else { return };
    match p4::load(text) {
        Err(e) => {
            assert!(e.line as usize <= text.split('\n').count(), "{e}");
            assert!(!e.to_string().is_empty());
        }
        Ok(p) => {
            consistent(&p);
            // The last line of the text doubles as a table-file line for every table.
            let line = text.lines().last().unwrap_or("");
            for t in &p.tables {
                let _ = p4::entry::parse_line(&p, t, line, 1);
            }
            // Small register arrays only: a spec may declare 2^32 registers.
            if p.regarrays.iter().all(|r| r.size <= 1 << 16) {
                let mut st = State::new(&p);
                let mut tables = Learning::default();
                let mut out = [0u8; 512];
                for port in [0, 1, u64::MAX] {
                    if let Verdict::Tx { len, .. } = st.run_with(&p, &mut tables, data, port, &mut out) {
                        assert!(len <= out.len());
                    }
                }
            }
        }
    }
});

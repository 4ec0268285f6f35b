//! An exact table or a learner of a P4 program on [`ExactTable`], in the narrowest key width
//! that holds its key: 1, 2, 4 or 8 words. All keys of a table are as wide as its key fields,
//! so the width decides nothing but cost — a lookup hashes, compares and copies (into the
//! entry's handle) only the words the key has: a 4-byte next-hop id or a 6-byte MAC is one
//! word, not eight.

use alloc::sync::{Arc, Weak};

use super::{DATA_WORDS, INDEX_WORD, KEY_WORDS};
use crate::pna::IdleTimeout;
use crate::pna::exact::{EntryHandle, ExactConfig, ExactTable, Local, Lookup};
use crate::time::{Duration, Instant};

/// Data words of an entry: the action's argument data, then its index ([`INDEX_WORD`]).
const DW: usize = DATA_WORDS + 1;

/// One width's table, its worker-local state and the entry the last lookup hit. The table is
/// the worker's; the control plane reads it through a [`KeyedView`] (a learner's entries,
/// `p4 learner show`), which does not keep it alive.
pub(super) struct Ex<const KW: usize> {
    table: Arc<ExactTable<KW, DW>>,
    local: Local,
    /// The entry the last lookup hit (a learner's `rearm`).
    last: Option<EntryHandle<KW>>,
}

/// An exact table or learner in one of four key widths.
pub(super) enum Keyed {
    W1(Ex<1>),
    W2(Ex<2>),
    W4(Ex<4>),
    W8(Ex<8>),
}

/// Runs `$e` with `$x` bound to the table of whichever width `$s` has.
macro_rules! each {
    ($s:expr, $x:ident => $e:expr) => {
        match $s {
            Keyed::W1($x) => $e,
            Keyed::W2($x) => $e,
            Keyed::W4($x) => $e,
            Keyed::W8($x) => $e,
        }
    };
}

/// The key bytes packed big-endian into `KW` words (the last word zero-padded).
#[inline]
fn pack<const KW: usize>(key: &[u8]) -> [u64; KW] {
    let mut w = [0u64; KW];
    for (x, c) in w.iter_mut().zip(key.chunks(8)) {
        *x = match c.first_chunk::<8>() {
            Some(b) => u64::from_be_bytes(*b),
            None => c.iter().enumerate().fold(0, |v, (i, &b)| v | u64::from(b) << (56 - 8 * i)),
        };
    }
    w
}

/// An entry's action data back into bytes (the inverse of [`data`]: byte `i` is bits
/// `8 (i % 8)..` of word `i / 8`), a word at a time.
fn unpack(buf: &mut [u8], params: &[u64]) {
    for (c, w) in buf.chunks_mut(8).zip(params.iter().copied().chain(core::iter::repeat(0))) {
        match c.first_chunk_mut::<8>() {
            Some(d) => *d = w.to_le_bytes(),
            None => {
                for (i, b) in c.iter_mut().enumerate() {
                    *b = (w >> (8 * i)) as u8;
                }
            }
        }
    }
}

/// An entry's data: the action's argument bytes, then its index.
pub(super) fn data(args: &[u8], index: u32) -> [u64; DW] {
    let mut d = [0u64; DW];
    for (i, b) in args.iter().enumerate().take(DATA_WORDS * 8) {
        if let Some(x) = d.get_mut(i / 8) {
            *x |= u64::from(*b) << (8 * (i % 8));
        }
    }
    if let Some(x) = d.get_mut(INDEX_WORD) {
        *x = u64::from(index);
    }
    d
}

impl<const KW: usize> Ex<KW> {
    fn new(cfg: ExactConfig) -> Option<Self> {
        let table = ExactTable::try_new(cfg).ok()?;
        let local = table.local();
        Some(Ex { table: Arc::new(table), local, last: None })
    }

    #[inline]
    fn lookup(&mut self, key: &[u8], now: Instant, buf: &mut [u8]) -> Option<(u8, u32)> {
        match self.table.lookup(&mut self.local, &pack(key), now) {
            Lookup::Hit(h) => {
                unpack(buf, &h.params);
                self.last = Some(h.handle);
                Some((h.action, h.params.get(INDEX_WORD).copied().unwrap_or(0) as u32))
            }
            Lookup::Miss(_) => {
                self.last = None;
                None
            }
        }
    }
}

/// What the control plane reads of a worker's exact table or learner: a weak reference, so a
/// worker's tables go when the worker's NF does, whoever still holds the view.
pub(super) enum KeyedView {
    W1(Weak<ExactTable<1, DW>>),
    W2(Weak<ExactTable<2, DW>>),
    W4(Weak<ExactTable<4, DW>>),
    W8(Weak<ExactTable<8, DW>>),
}

/// One entry as the control plane sees it: the key bytes (the table's width, zero-padded past
/// the key), the action, its argument bytes and the expiry deadline.
pub(super) struct Seen<'a> {
    pub key: &'a [u8],
    pub action: u8,
    pub args: &'a [u8],
    /// The expire profile (the learner's timeout id).
    pub profile: u8,
    pub deadline: Option<Instant>,
}

impl KeyedView {
    /// Whether the table still exists.
    pub(super) fn alive(&self) -> bool {
        match self {
            KeyedView::W1(t) => t.strong_count() > 0,
            KeyedView::W2(t) => t.strong_count() > 0,
            KeyedView::W4(t) => t.strong_count() > 0,
            KeyedView::W8(t) => t.strong_count() > 0,
        }
    }

    /// Calls `f` for each entry present at `now`, bucket by bucket (each bucket a consistent
    /// snapshot; the worker may change the table meanwhile, as for every control-plane read
    /// of an [`ExactTable`]). `false` if the table is gone (its worker's NF dropped).
    pub(super) fn for_each(&self, now: Instant, mut f: impl FnMut(&Seen<'_>)) -> bool {
        fn walk<const KW: usize>(t: &Weak<ExactTable<KW, DW>>, now: Instant, f: &mut dyn FnMut(&Seen<'_>)) -> bool {
            let Some(t) = t.upgrade() else { return false };
            t.for_each(now, |e| {
                let mut key = [0u8; KEY_WORDS * 8];
                for (c, w) in key.chunks_exact_mut(8).zip(e.key) {
                    c.copy_from_slice(&w.to_be_bytes());
                }
                let mut args = [0u8; DATA_WORDS * 8];
                unpack(&mut args, &e.params);
                f(&Seen {
                    key: key.get(..KW * 8).unwrap_or(&[]),
                    action: e.action,
                    args: &args,
                    profile: e.profile,
                    deadline: e.deadline,
                });
            });
            true
        }
        match self {
            KeyedView::W1(t) => walk(t, now, &mut f),
            KeyedView::W2(t) => walk(t, now, &mut f),
            KeyedView::W4(t) => walk(t, now, &mut f),
            KeyedView::W8(t) => walk(t, now, &mut f),
        }
    }
}

impl Keyed {
    /// The control plane's view of this table ([`KeyedView`]).
    pub(super) fn view(&self) -> KeyedView {
        match self {
            Keyed::W1(x) => KeyedView::W1(Arc::downgrade(&x.table)),
            Keyed::W2(x) => KeyedView::W2(Arc::downgrade(&x.table)),
            Keyed::W4(x) => KeyedView::W4(Arc::downgrade(&x.table)),
            Keyed::W8(x) => KeyedView::W8(Arc::downgrade(&x.table)),
        }
    }

    /// A table of `size` entries for keys of `key_bytes` (`None`: wider than [`KEY_WORDS`]
    /// words, or no memory); `learner`: add-on-miss with expiry.
    pub(super) fn new(size: u32, key_bytes: usize, learner: bool) -> Option<Keyed> {
        let mut cfg = ExactConfig::new(size.max(1) as usize);
        cfg.add_on_miss = learner;
        cfg.idle_timeout = if learner { IdleTimeout::AutoDelete } else { IdleTimeout::NoTimeout };
        Some(match key_bytes.div_ceil(8) {
            0 | 1 => Keyed::W1(Ex::new(cfg)?),
            2 => Keyed::W2(Ex::new(cfg)?),
            3 | 4 => Keyed::W4(Ex::new(cfg)?),
            w if w <= KEY_WORDS => Keyed::W8(Ex::new(cfg)?),
            _ => return None,
        })
    }

    /// Entries stored plus reserves held (0: nothing was ever added).
    pub(super) fn used_capacity(&self) -> usize {
        each!(self, x => x.table.used_capacity())
    }

    /// Live entries at `now`.
    pub(super) fn count(&self, now: Instant) -> usize {
        each!(self, x => x.table.count(now))
    }

    /// Sets expire profile `i` (a learner's timeout).
    pub(super) fn set_expire_profile(&self, i: u8, d: Duration) {
        each!(self, x => x.table.set_expire_profile(i, d))
    }

    /// The hit's action and index, its data unpacked into `buf`; `None` on a miss. The hit
    /// is remembered for [`Keyed::rearm`].
    #[inline]
    pub(super) fn lookup(&mut self, key: &[u8], now: Instant, buf: &mut [u8]) -> Option<(u8, u32)> {
        each!(self, x => x.lookup(key, now, buf))
    }

    /// Adds an entry; whether it was added.
    pub(super) fn insert(&mut self, key: &[u8], action: u8, d: &[u64; DW], profile: u8, now: Instant) -> bool {
        each!(self, x => x.table.insert(&mut x.local, &pack(key), action, d, profile, now).is_success())
    }

    /// Replaces an entry's action and data; whether there was one.
    pub(super) fn modify(&mut self, key: &[u8], action: u8, d: &[u64; DW], now: Instant) -> bool {
        each!(self, x => x.table.modify(&mut x.local, &pack(key), action, d, now).is_ok())
    }

    /// Deletes an entry; whether there was one. The remembered hit is forgotten.
    pub(super) fn delete(&mut self, key: &[u8], now: Instant) -> bool {
        each!(self, x => {
            x.last = None;
            x.table.delete(&mut x.local, &pack(key), now).is_ok()
        })
    }

    /// Whether the last lookup hit (and no delete came since).
    pub(super) fn has_hit(&self) -> bool {
        each!(self, x => x.last.is_some())
    }

    /// Restarts the expiry of the entry the last lookup hit (with `profile` if given); an
    /// entry gone since is left, as DPDK. A learner is written by its own worker only (each
    /// worker has its own; the control plane only reads it), so a restart without a new
    /// profile is the table's lock-free one.
    pub(super) fn rearm(&mut self, profile: Option<u8>, now: Instant) {
        each!(self, x => {
            if let Some(h) = x.last {
                let _ = match profile {
                    Some(p) => x.table.set_entry_expire_time(&mut x.local, &h, p, now),
                    None => x.table.restart_expire_timer_sole_writer(&mut x.local, &h, now),
                };
            }
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Every width class stores, finds, replaces and deletes by the whole key (keys that
    /// differ only in their last byte stay apart), and its data comes back as it went in; a
    /// key wider than 64 bytes gets no table.
    #[test]
    fn each_width_keeps_keys_apart_and_data_whole() {
        for bytes in [0usize, 4, 8, 9, 16, 17, 32, 33, 64] {
            let mut t = Keyed::new(64, bytes, false).expect("a table");
            let width = match &t {
                Keyed::W1(_) => 8,
                Keyed::W2(_) => 16,
                Keyed::W4(_) => 32,
                Keyed::W8(_) => 64,
            };
            assert!(width >= bytes && (bytes <= 8 || width < 2 * bytes), "{bytes} bytes in {width}");
            let key =
                |last: u8| -> Vec<u8> { (0..bytes).map(|i| if i + 1 == bytes { last } else { i as u8 }).collect() };
            let args: Vec<u8> = (0..DATA_WORDS as u8 * 8).map(|i| i ^ 0x5A).collect();
            let now = Instant(0);
            assert!(t.insert(&key(1), 3, &data(&args, 7), 0, now));
            let mut buf = [0u8; DATA_WORDS * 8];
            assert_eq!(t.lookup(&key(1), now, &mut buf), Some((3, 7)));
            assert_eq!(&buf[..], &args[..]);
            if bytes > 0 {
                assert_eq!(t.lookup(&key(2), now, &mut buf), None, "{bytes}: the last byte is part of the key");
                assert!(!t.has_hit());
            }
            assert!(t.modify(&key(1), 4, &data(&[], 9), now));
            assert_eq!(t.lookup(&key(1), now, &mut buf), Some((4, 9)));
            assert!(t.has_hit());
            assert!(t.delete(&key(1), now));
            assert!(!t.delete(&key(1), now));
            assert_eq!(t.lookup(&key(1), now, &mut buf), None);
        }
        assert!(Keyed::new(64, 65, false).is_none());
    }
}

//! [`Pool::view`]: a second pool over another pool's buffers, for a core that takes buffers
//! over by hand-off (NetBlaze's auxiliary cores).
//!
//! A lane's pool has one owner, the core serving the lane. An auxiliary core that runs the
//! chain on frames the lane handed it needs their bytes and metadata (offset, length) — a
//! per-buffer view of the lane's pool. The view holds aliases of the owner's region
//! ([`PacketMem::alias`]) and metadata table ([`MetaTable::alias`]), both raw pointers from
//! which each side makes a reference to one buffer's bytes or record at a time, so the owner
//! working on buffer `i` aliases nothing the auxiliary core holds for buffer `j`. What keeps
//! the two off the *same* buffer is the hand-off discipline — the same one a NIC keeps
//! (`packet_mem`'s module docs): a buffer handed over is touched only by the side holding it,
//! and passes between sides only through the hand-off link's `Release`/`Acquire` pairs
//! (`crate::offload::handoff`). The owner keeps the buffer allocated while it is away, so its
//! allocator never hands it out; the view allocates nothing, and its `free` only keeps a
//! buffer aside for the holder to give back.

use alloc::vec::Vec;

use super::Pool;

/// A view of a lane's pool that only an auxiliary core's loop can use
/// ([`crate::offload::AuxWorker::with_views`]): the holder cannot reach its pool, so
/// it touches exactly the buffers the hand-off link gives that loop.
pub struct AuxView(Pool<'static>);

impl core::fmt::Debug for AuxView {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AuxView")
    }
}

impl AuxView {
    /// The view, for the auxiliary loop.
    pub(crate) fn into_pool(self) -> Pool<'static> {
        self.0
    }
}

impl Pool<'static> {
    /// Views of this pool for `n` auxiliary cores, for a pool that lives as long as the
    /// program's packet memory: its metadata table is made permanent first (never freed), so
    /// no view can outlive what it aliases, whatever is dropped when. The hand-off discipline
    /// is kept by the only code that holds both sides of a buffer — NetBlaze's lane stage,
    /// which touches no buffer it handed over until the link gives it back, and the
    /// auxiliary loop, which touches only what it received and gives it back in one push
    /// ([`crate::offload`]) — as a driver keeps it for the buffers a device holds
    /// ([`crate::sync::PacketMem`]).
    pub fn aux_views(&mut self, n: usize) -> Vec<AuxView> {
        self.make_meta_permanent();
        // SAFETY: the memory is `'static` and the metadata table is now never freed, so the
        // views outlive nothing they alias; the discipline is the lane stage's and the
        // auxiliary loop's, the only users of an `AuxView` (doc comment above).
        (0..n).map(|_| AuxView(unsafe { self.view() })).collect()
    }
}

impl<'m> Pool<'m> {
    /// A second pool over the same buffers and metadata that owns none of them, for a core
    /// that takes buffers over from this pool's core (module docs). A view reads and writes
    /// the frames and metadata of the buffers its side holds like any pool; `alloc` gives
    /// nothing; `free` keeps the buffer aside for [`Pool::take_released`];
    /// its holder marks where a frame given back should be sent in the buffer's opaque bytes
    /// ([`Pool::set_opaque`]).
    ///
    /// # Safety
    /// This pool outlives the view, and the two keep to the hand-off discipline: a buffer is
    /// touched (frame or metadata) only by the side holding it, and passes between the sides
    /// only through a `Release` store the other side reads with `Acquire` (the hand-off
    /// link). In particular the owner touches no buffer it handed over until the link gives
    /// it back, and the view's side none it gave back.
    pub unsafe fn view(&self) -> Pool<'m> {
        let (mem, meta, links) = self.view_parts();
        // SAFETY: the caller's contract is `alias`'s for all three: the owner outlives the
        // view and each buffer's bytes, record and link are touched through one side at a
        // time.
        let (mem, meta, links) = unsafe { (mem.alias(), meta.alias(), links.alias()) };
        Pool::from_view_parts(mem, meta, links, self.phys_base())
    }
}

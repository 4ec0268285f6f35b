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
//! (`netblaze::handoff`). The owner keeps the buffer allocated while it is away, so its
//! allocator never hands it out; the view allocates nothing, and its `free` only keeps a
//! buffer aside for the holder to give back.

use alloc::vec::Vec;

use crate::buf::Pool;

/// A view of a lane's pool that only an auxiliary core's loop can use
/// ([`crate::netblaze::lane::AuxWorker::with_views`]): the holder cannot reach its pool, so
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
    /// ([`crate::netblaze::lane`]) — as a driver keeps it for the buffers a device holds
    /// ([`super::packet_mem`]).
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
    /// [`Pool::set_out`] says where a frame given back should be sent.
    ///
    /// # Safety
    /// This pool outlives the view, and the two keep to the hand-off discipline: a buffer is
    /// touched (frame or metadata) only by the side holding it, and passes between the sides
    /// only through a `Release` store the other side reads with `Acquire` (the hand-off
    /// link). In particular the owner touches no buffer it handed over until the link gives
    /// it back, and the view's side none it gave back.
    pub unsafe fn view(&self) -> Pool<'m> {
        let (mem, meta) = self.view_parts();
        // SAFETY: the caller's contract is `alias`'s for both: the owner outlives the view
        // and each buffer's bytes and record are touched through one side at a time.
        let (mem, meta) = unsafe { (mem.alias(), meta.alias()) };
        Pool::from_view_parts(mem, meta, self.phys_base())
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use crate::buf::{BATCH_SIZE, BUF_SIZE, Batch, PacketBuf, Pool};
    use crate::netblaze::handoff::try_link;

    fn pool(mem: &mut [u8], n: usize) -> Pool<'_> {
        Pool::try_new(mem, 0, n).expect("pool")
    }

    /// An auxiliary core runs "its chain" on frames handed over, through a view of the lane's
    /// pool: reads and rewrites them (a byte bumped, the length cut by one), drops every fifth
    /// (the view's `free` keeps it aside) and marks the rest with an output port; the lane routes
    /// what comes back in order — the frames marked for port 1 onto its "transmit" path (taken),
    /// the others freed. Every frame processed once and seen rewritten, each port's frames in
    /// hand-off order, the drops freed, the pool full at the end. Miri runs it (data races and
    /// aliasing between the pool and its view).
    #[test]
    fn handoff_an_aux_core_processes_frames_through_a_view_and_the_lane_routes_them_back() {
        use std::sync::atomic::{
            AtomicBool,
            Ordering::{Acquire, Release},
        };
        const N: u32 = crate::testing::miri_or(5_000, 150);
        let mut mem = vec![0u8; 64 * BUF_SIZE];
        let mut pool = pool(&mut mem, 64);
        // SAFETY: `pool` outlives the view (the scope below ends before it), and the test keeps
        // the hand-off discipline: the main thread touches a buffer before `hand_off` and after
        // `reclaim_with` gives it back, the aux thread between `receive` and `give_back`.
        let mut view = unsafe { pool.view() };
        assert!(view.is_view() && !pool.is_view());
        let (mut d, mut a) = try_link(16).expect("link");
        let done = AtomicBool::new(false);
        /// Sets `done` however the main thread leaves (a failed assertion too), so the aux
        /// thread ends and the scope reports the failure instead of hanging.
        struct Done<'a>(&'a AtomicBool);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(true, Release);
            }
        }
        let (ports, routed, freed) = std::thread::scope(|s| {
            let done = &done;
            let finish = Done(done);
            let aux = s.spawn(move || {
                let (mut got, mut back) = (Batch::new(), Batch::new());
                loop {
                    let finished = done.load(Acquire);
                    a.receive(&mut got);
                    if got.is_empty() {
                        if finished && a.pending() == 0 {
                            break;
                        }
                        std::thread::yield_now();
                        continue;
                    }
                    for &b in got.as_slice() {
                        let f = view.frame_mut(b);
                        let seq = u32::from_be_bytes([f[0], f[1], f[2], f[3]]);
                        if seq % 5 == 4 {
                            view.free(b).expect("a view keeps a dropped buffer aside");
                            continue;
                        }
                        f[4] = f[4].wrapping_add(1);
                        let len = view.len(b);
                        view.set_len(b, len - 1).expect("shorter fits");
                        view.set_out(b, Some((seq % 2) as u8));
                        back.push(b).expect("room: one batch in, one out");
                    }
                    got.clear();
                    let n = back.len();
                    assert_eq!(a.give_back_batch(&mut back), n, "room for what aux holds");
                    view.take_released(&mut back);
                    let n = back.len();
                    assert_eq!(a.give_back_batch(&mut back), n);
                }
                assert_eq!((a.held(), view.released()), (0, 0));
                assert_eq!(view.alloc(), None, "a view owns no buffer");
            });
            let mut ports: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
            let (mut seq, mut routed, mut freed) = (0u32, 0usize, 0usize);
            let route = |p: &mut Pool<'_>, b: PacketBuf, ports: &mut [Vec<u32>; 2]| -> bool {
                let f = p.frame(b);
                let s = u32::from_be_bytes([f[0], f[1], f[2], f[3]]);
                let Some(port) = p.out(b) else {
                    assert_eq!(s % 5, 4, "only the dropped frames come back without a port");
                    return false;
                };
                assert_ne!(s % 5, 4, "a dropped frame came back marked");
                assert_eq!((f.len(), f[4]), (59, (s as u8).wrapping_add(1)), "frame {s} rewritten once");
                assert_eq!(u32::from(port), s % 2);
                ports[usize::from(port)].push(s);
                if port == 1 {
                    // "Transmitted" right away: the caller took it, and it frees it itself.
                    p.free(b).expect("own buffer");
                    return true;
                }
                false
            };
            while seq < N || d.outstanding() > 0 {
                let r = d.reclaim_with(&mut pool, |p, b| route(p, b, &mut ports));
                (routed, freed) = (routed + r.routed, freed + r.freed);
                assert_eq!(r.refused, 0);
                let mut batch = Vec::new();
                while seq < N
                    && batch.len() < BATCH_SIZE
                    && let Some(b) = pool.alloc()
                {
                    pool.set_frame(b, crate::buf::HEADROOM, 60).expect("fits");
                    let f = pool.frame_mut(b);
                    f[..4].copy_from_slice(&seq.to_be_bytes());
                    f[4] = seq as u8;
                    batch.push(b);
                    seq += 1;
                }
                let n = d.hand_off(&batch);
                // What the link did not take is "processed here": put back, numbers reused.
                for b in batch[n..].iter().rev() {
                    pool.free(*b).expect("local free");
                    seq -= 1;
                }
                if n == 0 {
                    std::thread::yield_now();
                }
            }
            drop(finish);
            aux.join().expect("aux thread");
            (ports, routed, freed)
        });
        let expect = |port: u32| (0..N).filter(|s| s % 5 != 4 && s % 2 == port).collect::<Vec<_>>();
        assert_eq!(ports[0], expect(0), "port 0's frames, each once, in hand-off order");
        assert_eq!(ports[1], expect(1), "port 1's frames, each once, in hand-off order");
        assert_eq!(routed, ports[1].len());
        let drops = (0..N).filter(|s| s % 5 == 4).count();
        assert_eq!(freed, ports[0].len() + drops, "port 0's frames and the drops freed");
        assert_eq!(pool.available(), pool.capacity(), "no buffer leaked");
        assert_eq!(pool.double_frees(), 0, "no buffer freed twice");
    }
}

//! The hosted layer against the real kernel: `TPACKET_V3` and AF_XDP sockets, the XDP
//! redirect program and interface facts on a veth pair in a network namespace of the
//! test's own (root only; see `netns`). The ring consumers and producers here are the
//! smallest that prove the set-up; the real ones are the drivers crate's.
#![cfg(target_os = "linux")]

mod netns;

use cadence_drivers::hal::{Kick, Mmio};
use cadence_drivers::xsk::arrival;
use cadence_platform::hosted::bpf::{AttachMode, Attached, IngressDrop, XdpProgram};
use cadence_platform::hosted::clock::clock_ns;
use cadence_platform::hosted::iface;
use cadence_platform::hosted::mem::packet_memory;
use cadence_platform::hosted::packet::{PacketConfig, PacketSocket, abi as pk};
use cadence_platform::hosted::xdp::{
    BindMode, CHUNK_SIZE, DataPath, RingOffsets, Umem, UmemRegion, XdpCall, XdpError, XskConfig, XskSocket, abi as xa,
};
use core::sync::atomic::{Ordering, fence};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// An Ethernet frame from `src` to `dst`, EtherType 0x88B5 (IEEE 802 local
/// experimental), carrying `tag`, padded to 60 bytes.
fn frame(dst: [u8; 6], src: [u8; 6], tag: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(tag);
    f.resize(f.len().max(60), 0);
    f
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A plain `AF_PACKET` socket bound to `ifname` (the "other side" of each test).
fn raw_socket(ifname: &str) -> OwnedFd {
    let index = iface::ifindex(ifname).expect("interface index");
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (libc::ETH_P_ALL as u16).to_be() as i32) };
    assert!(fd >= 0, "socket(AF_PACKET): {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let addr = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: (libc::ETH_P_ALL as u16).to_be(),
        sll_ifindex: index as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `addr` is a valid sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(fd.as_raw_fd(), (&raw const addr).cast(), size_of::<libc::sockaddr_ll>() as libc::socklen_t)
    };
    assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
    let tv = libc::timeval { tv_sec: 0, tv_usec: 100_000 };
    // SAFETY: `tv` is a valid timeval of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    fd
}

fn send_raw(fd: &OwnedFd, bytes: &[u8]) {
    // SAFETY: `bytes` is valid for reads of its length; the socket is bound, so no address.
    let n = unsafe { libc::send(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), 0) };
    assert_eq!(n, bytes.len() as isize, "send: {}", std::io::Error::last_os_error());
}

/// Receives on `fd` until a frame holding `tag` arrives, or `timeout`.
fn recv_tagged(fd: &OwnedFd, tag: &[u8], timeout: Duration) -> Option<Vec<u8>> {
    let end = Instant::now() + timeout;
    let mut buf = [0u8; 2048];
    while Instant::now() < end {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n > 0 && contains(&buf[..n as usize], tag) {
            return Some(buf[..n as usize].to_vec());
        }
    }
    None
}

/// An IPv4/UDP frame from `src` to `dst` (to 10.9.9.9, a host nobody in the namespace is),
/// valid header checksum, carrying `tag`.
fn ipv4_frame(dst: [u8; 6], src: [u8; 6], tag: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + tag.len()) as u16;
    let mut ip = [0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 9, 9, 1, 10, 9, 9, 9];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let sum = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum::<u32>();
    let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x30, 0x39, 0x30, 0x39]);
    f.extend_from_slice(&(8 + tag.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(tag);
    f.resize(f.len().max(60), 0);
    f
}

/// IPv4 packets this namespace's stack received (`/proc/net/snmp`, `Ip: … InReceives`).
fn ip_in_receives() -> u64 {
    let snmp = std::fs::read_to_string("/proc/net/snmp").expect("/proc/net/snmp");
    let mut ip = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (ip.next().unwrap_or_default(), ip.next().unwrap_or_default());
    let at = names.split_whitespace().position(|n| n == "InReceives").expect("InReceives");
    values.split_whitespace().nth(at).and_then(|v| v.parse().ok()).expect("a count")
}

fn mac(ifname: &str) -> [u8; 6] {
    iface::query(ifname).expect("interface facts").mac
}

// ---------------------------------------------------------------------------------------
// Interface facts
// ---------------------------------------------------------------------------------------

#[test]
fn interface_facts_of_a_veth() {
    netns::run("interface_facts_of_a_veth", (3, 2), || {
        let va = iface::query("va").unwrap();
        println!("hosted: {va:?}");
        assert_eq!(va.driver, "veth");
        assert_eq!((va.rx_queues, va.tx_queues), (3, 2));
        assert_eq!(va.mtu, 1500);
        assert!(va.up);
        assert_eq!(va.index, iface::ifindex("va").unwrap());
        let sys = std::fs::read_to_string("/sys/class/net/va/address").unwrap();
        let hex: Vec<String> = va.mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex.join(":"), sys.trim());
        // veth reports 10000 Mb/s on recent kernels, "unknown" (-1) on older ones.
        assert!(matches!(va.speed_mbps, None | Some(10_000)), "{:?}", va.speed_mbps);
        assert!(matches!(iface::query("eth-nope"), Err(iface::IfError::NotFound(_))));
    });
}

// ---------------------------------------------------------------------------------------
// AF_PACKET, TPACKET_V3
// ---------------------------------------------------------------------------------------

/// Walks the RX blocks the kernel has handed over, returning each to the kernel, until
/// a frame holding `tag` is seen or `timeout` passes.
fn tpacket_v3_find(rx: &impl Mmio, block_size: usize, blocks: usize, tag: &[u8], timeout: Duration) -> bool {
    tpacket_v3_time(rx, block_size, blocks, tag, timeout).is_some()
}

/// [`tpacket_v3_find`], returning the frame's `tp_sec`/`tp_nsec` in nanoseconds.
fn tpacket_v3_time(rx: &impl Mmio, block_size: usize, blocks: usize, tag: &[u8], timeout: Duration) -> Option<u64> {
    let end = Instant::now() + timeout;
    let mut b = 0;
    while Instant::now() < end {
        let base = b * block_size;
        if rx.read32(base + pk::BLOCK_STATUS) & pk::TP_STATUS_USER == 0 {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        fence(Ordering::Acquire);
        let mut found = None;
        let mut pkt = base + rx.read32(base + pk::BLOCK_FIRST_PKT) as usize;
        for _ in 0..rx.read32(base + pk::BLOCK_NUM_PKTS) {
            let snap = rx.read32(pkt + 12) as usize;
            let mac = rx.read16(pkt + 24) as usize;
            let bytes: Vec<u8> = (0..snap).map(|i| rx.read8(pkt + mac + i)).collect();
            if contains(&bytes, tag) {
                // tp_sec at 4, tp_nsec at 8.
                found = Some(u64::from(rx.read32(pkt + 4)) * 1_000_000_000 + u64::from(rx.read32(pkt + 8)));
            }
            pkt += rx.read32(pkt) as usize;
        }
        fence(Ordering::Release);
        rx.write32(base + pk::BLOCK_STATUS, pk::TP_STATUS_KERNEL);
        if found.is_some() {
            return found;
        }
        b = (b + 1) % blocks;
    }
    None
}

#[test]
fn packet_v3_receives_and_transmits_over_veth() {
    netns::run("packet_v3_receives_and_transmits_over_veth", (1, 1), || {
        let cfg = PacketConfig::default();
        let mut sock = PacketSocket::open("va", &cfg, None).unwrap();
        let g = sock.geometry();
        let rings = sock.take_rings().unwrap();
        assert!(sock.take_rings().is_none(), "rings are handed out once");
        assert_eq!(rings.rx.len(), g.rx.bytes());
        assert_eq!(rings.tx.len(), g.tx.bytes());
        assert_eq!(rings.tx.cpu_address(0), Some(rings.rx.as_ptr() as usize + g.rx.bytes()), "TX follows RX");
        let peer = raw_socket("vb");

        // RX: a frame sent on vb lands in one of va's blocks.
        let tag = b"cadence-tpacket-v3-rx";
        let sent = clock_ns(libc::CLOCK_REALTIME);
        send_raw(&peer, &frame(mac("va"), mac("vb"), tag));
        let t =
            tpacket_v3_time(&rings.rx, g.rx.block_size as usize, g.rx.block_nr as usize, tag, Duration::from_secs(3))
                .expect("the frame sent on vb never reached va's TPACKET_V3 RX ring");
        // The header's time is CLOCK_REALTIME (what the driver's arrival stamp assumes),
        // taken between the send and the find.
        let found = clock_ns(libc::CLOCK_REALTIME);
        assert!((sent..=found).contains(&t), "tp_sec/tp_nsec {t} outside CLOCK_REALTIME [{sent}, {found}]");

        // TX: a frame put in slot 0 and kicked leaves va and arrives on vb.
        let tag = b"cadence-tpacket-v3-tx";
        let f = frame(mac("vb"), mac("va"), tag);
        assert_eq!(rings.tx.read32(20), pk::TP_STATUS_AVAILABLE);
        for (i, b) in f.iter().enumerate() {
            rings.tx.write8(pk::TX_DATA_OFFSET + i, *b);
        }
        rings.tx.write32(16, f.len() as u32); // tp_len
        fence(Ordering::Release);
        rings.tx.write32(20, pk::TP_STATUS_SEND_REQUEST);
        sock.kick().kick_tx().unwrap();
        let got = recv_tagged(&peer, tag, Duration::from_secs(3)).expect("the TX ring frame never reached vb");
        assert_eq!(got, f);
        let end = Instant::now() + Duration::from_secs(1);
        while rings.tx.read32(20) != pk::TP_STATUS_AVAILABLE && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(rings.tx.read32(20), pk::TP_STATUS_AVAILABLE, "the kernel gives the slot back");
        assert_eq!(sock.kick().kick_rx(), Ok(()));

        // PACKET_IGNORE_OUTGOING: our own TX frame did not come back on RX.
        assert!(!tpacket_v3_find(
            &rings.rx,
            g.rx.block_size as usize,
            g.rx.block_nr as usize,
            tag,
            Duration::from_millis(50)
        ));
        let st = sock.stats().unwrap();
        println!("hosted: tpacket stats {st:?}");
        assert!(st.packets >= 1 && st.drops == 0, "{st:?}");
        let again = sock.stats().unwrap();
        assert!(again.packets >= st.packets, "stats accumulate across reads");

        // Two lanes: one hash-fanout group.
        let lanes = PacketSocket::open_lanes("va", 2, &cfg).unwrap();
        assert_eq!(lanes.len(), 2);
        assert!(lanes[0].fanout_group().is_some());
        assert_eq!(lanes[0].fanout_group(), lanes[1].fanout_group());
        println!("hosted: fanout group {:?}", lanes[0].fanout_group());
    });
}

// ---------------------------------------------------------------------------------------
// AF_XDP
// ---------------------------------------------------------------------------------------

/// Posts `chunks` to a fill ring (a minimal producer).
fn fill(ring: &impl Mmio, o: &RingOffsets, size: u32, chunks: std::ops::Range<u64>) {
    let mut prod = ring.read32(o.producer);
    for c in chunks {
        let slot = (prod & (size - 1)) as usize;
        ring.write64(o.desc + slot * xa::UMEM_ENTRY, c * u64::from(CHUNK_SIZE));
        prod = prod.wrapping_add(1);
    }
    fence(Ordering::Release);
    ring.write32(o.producer, prod);
}

/// Consumes RX descriptors until one's frame holds `tag`; returns its address.
fn xsk_find(ring: &impl Mmio, o: &RingOffsets, size: u32, umem: &[u8], tag: &[u8], timeout: Duration) -> Option<u64> {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        let cons = ring.read32(o.consumer);
        if ring.read32(o.producer) == cons {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        fence(Ordering::Acquire);
        let d = o.desc + (cons & (size - 1)) as usize * xa::DESC_ENTRY;
        let (addr, len) = (ring.read64(d), ring.read32(d + 8) as usize);
        let bytes = &umem[addr as usize..addr as usize + len];
        let hit = contains(bytes, tag);
        fence(Ordering::Release);
        ring.write32(o.consumer, cons.wrapping_add(1));
        if hit {
            return Some(addr);
        }
    }
    None
}

#[test]
fn xdp_copy_mode_receives_over_veth() {
    netns::run("xdp_copy_mode_receives_over_veth", (1, 1), || {
        let mem = packet_memory(2 << 20, true).unwrap();
        println!("hosted: UMEM {} bytes on {}", mem.len(), mem.pages());
        let umem = UmemRegion::of(&mem);
        let buf: &'static mut [u8] = mem.into_slice();

        let prog = XdpProgram::attach("va", 1, AttachMode::Auto).unwrap();
        // veth has native XDP: Auto attaches in the driver, no fallback needed.
        assert_eq!(prog.attached(), Attached::Driver);
        let cfg = XskConfig::with_ring_size(64).mode(BindMode::Copy);
        let sock = XskSocket::open("va", 0, Umem::Register(umem), &cfg).unwrap();
        assert_eq!(sock.data_path(), DataPath::Copy);
        assert!(sock.need_wakeup());
        let (o, n) = (sock.offsets(), sock.sizes());
        println!("hosted: xsk offsets {o:?} sizes {n:?}");
        let rings = sock.rings().unwrap();
        assert_eq!(rings.rx.len(), o.rx.desc + 64 * xa::DESC_ENTRY);
        assert_eq!(rings.fill.len(), o.fill.desc + 64 * xa::UMEM_ENTRY);
        for r in [o.fill, o.comp, o.rx, o.tx] {
            assert!(r.producer < r.desc && r.consumer < r.desc && r.flags < r.desc, "{r:?}");
        }
        fill(&rings.fill, &o.fill, n.fill, 0..32);
        prog.register(0, &sock).unwrap();

        let tag = b"cadence-xsk-copy-rx";
        let sent_ns = clock_ns(libc::CLOCK_MONOTONIC);
        send_raw(&raw_socket("vb"), &frame(mac("va"), mac("vb"), tag));
        let addr = xsk_find(&rings.rx, &o.rx, n.rx, buf, tag, Duration::from_secs(3))
            .expect("the frame sent on vb never reached va's AF_XDP RX ring");
        let found_ns = clock_ns(libc::CLOCK_MONOTONIC);
        // Copy mode: the frame starts XDP_PACKET_HEADROOM into a chunk we posted.
        assert_eq!(addr % u64::from(CHUNK_SIZE), xa::XDP_PACKET_HEADROOM as u64);
        assert!(addr < 32 * u64::from(CHUNK_SIZE));
        // The program's arrival stamp came along in front of the frame (copy mode copies
        // the XDP metadata): the magic, and a CLOCK_MONOTONIC reading between the send and
        // the find.
        let a = addr as usize;
        let word = |at: usize| u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap());
        let meta = a - arrival::META_LEN;
        assert_eq!(word(meta + arrival::MAGIC), arrival::ARRIVAL_MAGIC, "no arrival stamp in front of the frame");
        let stamp = word(meta + arrival::STAMP);
        assert!((sent_ns..=found_ns).contains(&stamp), "stamp {stamp} outside [{sent_ns}, {found_ns}]");
        let st = sock.stats().unwrap();
        println!("hosted: xsk stats {st:?}");
        assert_eq!((st.rx_dropped, st.rx_invalid_descs, st.rx_ring_full), (0, 0, 0));
        prog.unregister(0).unwrap();
    });
}

/// A frame on a queue no socket owns (a NIC with more receive queues than lanes) is dropped
/// and counted in the program — never passed to the kernel's stack, which would let it skip
/// the chain (it used to be: `XDP_PASS`).
#[test]
fn xdp_frames_no_socket_owns_are_dropped_and_counted_not_passed_to_the_stack() {
    netns::run("xdp_frames_no_socket_owns_are_dropped_and_counted_not_passed_to_the_stack", (1, 1), || {
        let prog = XdpProgram::attach("va", 1, AttachMode::Auto).unwrap();
        let tap = raw_socket("va");
        let before = ip_in_receives();
        let vb = raw_socket("vb");
        for i in 0..20u8 {
            send_raw(&vb, &ipv4_frame(mac("va"), mac("vb"), &[b'u', b'n', b'o', b'w', b'n', i]));
        }
        // Queue 0's slot is empty: all 20 dropped in the driver, counted.
        let end = Instant::now() + Duration::from_secs(3);
        while prog.unowned().unwrap() < 20 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(prog.unowned().unwrap(), 20);
        assert!(recv_tagged(&tap, b"unown", Duration::from_millis(300)).is_none(), "a tap on va saw a frame");
        assert_eq!(ip_in_receives(), before, "the stack got frames no lane owns");
        // The control: without the program the same frames do reach the stack (the check
        // above can see them).
        drop(prog);
        send_raw(&vb, &ipv4_frame(mac("va"), mac("vb"), b"stack"));
        let end = Instant::now() + Duration::from_secs(3);
        while ip_in_receives() == before && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(ip_in_receives() > before, "the stack never counts a frame: the check above proves nothing");
    });
}

/// With `AF_PACKET` the kernel's stack gets every frame the dataplane reads, unless the tcx
/// ingress program drops them — after the packet taps have seen them.
#[test]
fn tcx_ingress_drop_keeps_frames_from_the_stack_but_not_from_packet_sockets() {
    netns::run("tcx_ingress_drop_keeps_frames_from_the_stack_but_not_from_packet_sockets", (1, 1), || {
        let tap = raw_socket("va");
        let vb = raw_socket("vb");
        let before = ip_in_receives();
        let drop = IngressDrop::attach("va").unwrap();
        send_raw(&vb, &ipv4_frame(mac("va"), mac("vb"), b"tcx-dropped"));
        assert!(recv_tagged(&tap, b"tcx-dropped", Duration::from_secs(3)).is_some(), "the tap must still see it");
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(ip_in_receives(), before, "the stack got a frame the tcx program drops");
        drop_and_check(drop, &tap, &vb, before);
    });
}

/// Unlinked, the frames reach the stack again (the control of the test above).
fn drop_and_check(drop: IngressDrop, tap: &OwnedFd, vb: &OwnedFd, before: u64) {
    std::mem::drop(drop);
    send_raw(vb, &ipv4_frame(mac("va"), mac("vb"), b"tcx-gone"));
    assert!(recv_tagged(tap, b"tcx-gone", Duration::from_secs(3)).is_some());
    let end = Instant::now() + Duration::from_secs(3);
    while ip_in_receives() == before && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ip_in_receives() > before, "the stack never counts a frame: the check above proves nothing");
}

#[test]
fn xdp_zero_copy_is_refused_on_veth_and_auto_falls_back_to_copy() {
    netns::run("xdp_zero_copy_is_refused_on_veth_and_auto_falls_back_to_copy", (1, 1), || {
        let mem = packet_memory(1 << 20, false).unwrap();
        let umem = UmemRegion::of(&mem);
        let zc = XskConfig::with_ring_size(64).mode(BindMode::ZeroCopy);
        let e = XskSocket::open("va", 0, Umem::Register(umem), &zc).unwrap_err();
        println!("hosted: zero-copy on veth: {e}");
        match &e {
            XdpError::Sys { call: XdpCall::Bind, errno, .. } => assert_eq!(errno.raw(), libc::EOPNOTSUPP, "{e}"),
            other => panic!("expected a bind refusal, got {other}"),
        }
        assert!(e.to_string().starts_with("AF_XDP bind on va queue 0: EOPNOTSUPP"), "{e}");
        let auto = XskSocket::open("va", 0, Umem::Register(umem), &zc.mode(BindMode::Auto)).unwrap();
        assert_eq!(auto.data_path(), DataPath::Copy, "veth has no zero-copy: auto must fall back to copy");
        // The queue is taken now: a second socket on it is refused, with a hint.
        let busy = XskSocket::open("va", 0, Umem::Register(umem), &zc.mode(BindMode::Copy)).unwrap_err();
        println!("hosted: second socket on the queue: {busy}");
        assert!(matches!(busy, XdpError::Sys { call: XdpCall::Bind, .. }), "{busy}");
        // A queue the interface does not have.
        let e = XskSocket::open("vb", 5, Umem::Register(umem), &zc.mode(BindMode::Copy)).unwrap_err();
        println!("hosted: missing queue: {e}");
        assert!(matches!(e, XdpError::Sys { call: XdpCall::Bind, .. }), "{e}");
    });
}

#[test]
fn xdp_shared_umem_across_the_veth_pair() {
    netns::run("xdp_shared_umem_across_the_veth_pair", (1, 1), || {
        let mem = packet_memory(2 << 20, true).unwrap();
        let umem = UmemRegion::of(&mem);
        let buf: &'static mut [u8] = mem.into_slice();
        // Chunk 40 holds the frame to send, at Cadence's usual 64-byte headroom.
        let tag = b"cadence-xsk-shared-umem";
        let f = frame(mac("va"), mac("vb"), tag);
        let tx_addr = 40 * CHUNK_SIZE as usize + 64;
        buf[tx_addr..tx_addr + f.len()].copy_from_slice(&f);

        let prog_a = XdpProgram::attach("va", 1, AttachMode::Auto).unwrap();
        let prog_b = XdpProgram::attach("vb", 1, AttachMode::Auto).unwrap();
        let cfg = XskConfig::with_ring_size(64).mode(BindMode::Auto);
        let a = XskSocket::open("va", 0, Umem::Register(umem), &cfg).unwrap();
        let b = XskSocket::open("vb", 0, Umem::SharedWith(&a), &cfg).unwrap();
        assert_eq!(b.umem(), a.umem());
        assert_eq!(b.data_path(), a.data_path(), "a sharing socket inherits the owner's mode");
        assert!(matches!(XskSocket::open("va", 0, Umem::SharedWith(&a), &cfg), Err(XdpError::SameQueue)));
        let (ra, rb) = (a.rings().unwrap(), b.rings().unwrap());
        let (oa, ob, na, nb) = (a.offsets(), b.offsets(), a.sizes(), b.sizes());
        fill(&ra.fill, &oa.fill, na.fill, 0..16);
        fill(&rb.fill, &ob.fill, nb.fill, 16..32);
        prog_a.register(0, &a).unwrap();
        prog_b.register(0, &b).unwrap();

        // vb's socket transmits from the shared UMEM; va's socket receives into it.
        let d = ob.tx.desc + (rb.tx.read32(ob.tx.producer) & (nb.tx - 1)) as usize * xa::DESC_ENTRY;
        rb.tx.write64(d, tx_addr as u64);
        rb.tx.write32(d + 8, f.len() as u32);
        rb.tx.write32(d + 12, 0);
        fence(Ordering::Release);
        rb.tx.write32(ob.tx.producer, rb.tx.read32(ob.tx.producer).wrapping_add(1));
        b.kick().kick_tx().unwrap();

        let got = xsk_find(&ra.rx, &oa.rx, na.rx, buf, tag, Duration::from_secs(3))
            .expect("the frame sent from vb's AF_XDP TX ring never reached va's RX ring");
        assert!(got < 16 * u64::from(CHUNK_SIZE), "received into one of va's fill chunks");
        let end = Instant::now() + Duration::from_secs(3);
        while rb.comp.read32(ob.comp.producer) == rb.comp.read32(ob.comp.consumer) && Instant::now() < end {
            let _ = b.kick().kick_tx();
            std::thread::sleep(Duration::from_millis(1));
        }
        fence(Ordering::Acquire);
        let c = ob.comp.desc + (rb.comp.read32(ob.comp.consumer) & (nb.comp - 1)) as usize * xa::UMEM_ENTRY;
        assert_eq!(rb.comp.read64(c), tx_addr as u64, "the completion ring returns the sent address");
        let (sa, sb) = (a.stats().unwrap(), b.stats().unwrap());
        println!("hosted: shared UMEM {} / va {sa:?} / vb {sb:?}", a.data_path());
        assert_eq!((sb.tx_invalid_descs, sa.rx_dropped), (0, 0));
    });
}

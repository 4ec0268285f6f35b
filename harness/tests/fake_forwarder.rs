//! The generator and the checker against a fake forwarder: a thread that receives frames
//! on two UDP sockets (the "NICs"), applies the PROTOCOL.md rewrite (out of port 1 - i,
//! dst = peer, src = that NIC's MAC) and sends them out of the other socket — with
//! optional faults. Proves the checker accepts a clean run and catches each fault.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use cadence_core::rand::XorShift64;
use cadence_harness::traffic::frame::read_tag;
use cadence_harness::traffic::{Checker, Classes, Flow, Macs, Sizes};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// Every 50th frame vanishes.
    Drop,
    /// Every 50th frame is sent twice.
    Duplicate,
    /// Frame 5 of flow 0 is held back until frame 6 of flow 0 went out.
    Reorder,
    /// Every 50th frame gets a payload bit flipped.
    Corrupt,
    /// Every 50th frame goes back out of its ingress port.
    Misdirect,
    /// Every 50th frame keeps its old source MAC.
    WrongMac,
}

fn tag_of(f: &[u8]) -> Option<(u16, u32)> {
    read_tag(f).map(|t| (t.flow, t.seq))
}

/// Fake forwarder over UDP: `nic[i]` is where the host sends port-i frames to; it sends
/// its output to `host[i]`.
fn fake_forwarder(
    nic: [UdpSocket; 2],
    host: [std::net::SocketAddr; 2],
    macs: Macs,
    fault: Fault,
    stop: Arc<AtomicBool>,
) {
    for s in &nic {
        s.set_nonblocking(true).ok();
    }
    let mut n = 0u64;
    let mut held: Option<(usize, Vec<u8>)> = None;
    let mut buf = vec![0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let mut idle = true;
        for (port, s) in nic.iter().enumerate() {
            let Ok(len) = s.recv(&mut buf) else { continue };
            idle = false;
            n += 1;
            let out = 1 - port;
            let mut f = buf[..len].to_vec();
            f[0..6].copy_from_slice(&macs.peer[out].0);
            f[6..12].copy_from_slice(&macs.nic[out].0);
            let nth = n.is_multiple_of(50);
            let mut dest = out;
            match fault {
                Fault::Drop if nth => continue,
                Fault::Corrupt if nth => {
                    let i = f.len() - 20;
                    f[i] ^= 0x10;
                }
                Fault::Misdirect if nth => dest = port,
                Fault::WrongMac if nth => f[6..12].copy_from_slice(&macs.nic[port].0),
                Fault::Reorder if tag_of(&f) == Some((0, 5)) => {
                    held = Some((dest, f));
                    continue;
                }
                _ => {}
            }
            nic[dest].send_to(&f, host[dest]).ok();
            if fault == Fault::Duplicate && nth {
                nic[dest].send_to(&f, host[dest]).ok();
            }
            if let Some((d, h)) = held.take_if(|_| tag_of(&f) == Some((0, 6))) {
                nic[d].send_to(&h, host[d]).ok();
            }
        }
        if idle {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn run(fault: Fault, frames: u32) -> Result<Classes> {
    let macs = Macs::DEFAULT;
    let host = [UdpSocket::bind("127.0.0.1:0")?, UdpSocket::bind("127.0.0.1:0")?];
    let nic = [UdpSocket::bind("127.0.0.1:0")?, UdpSocket::bind("127.0.0.1:0")?];
    let nic_addr = [nic[0].local_addr()?, nic[1].local_addr()?];
    let host_addr = [host[0].local_addr()?, host[1].local_addr()?];
    let stop = Arc::new(AtomicBool::new(false));
    let fwd = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || fake_forwarder(nic, host_addr, macs, fault, stop))
    };
    let checker = Arc::new(Mutex::new(Checker::new(Flow::standard_set(8), macs, Instant::now())));
    let mut sinks = Vec::new();
    for (port, s) in host.iter().enumerate() {
        let s = s.try_clone()?;
        s.set_read_timeout(Some(Duration::from_millis(20)))?;
        let (c, st) = (Arc::clone(&checker), Arc::clone(&stop));
        sinks.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 2048];
            while !st.load(Ordering::Relaxed) {
                if let Ok(n) = s.recv(&mut buf)
                    && let Ok(mut c) = c.lock()
                {
                    c.receive(port, &buf[..n]);
                }
            }
        }));
    }
    let mut rng = XorShift64::new(7);
    let sizes = Sizes::Range { min: 60, max: 1514 };
    for i in 0..frames {
        let (port, f) = {
            let mut c = checker.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            let flow = rng.below(8) as u16;
            c.next_frame(flow, sizes.draw(&mut rng)).ok_or_else(|| anyhow::anyhow!("flow"))?
        };
        host[port].send_to(&f, nic_addr[port])?;
        if i % 32 == 31 {
            std::thread::sleep(Duration::from_millis(1)); // stay within socket buffers
        }
    }
    // Drain: until nothing new arrives for 300 ms (20 s hang guard).
    let total = |c: &Classes| c.received + c.duplicated + c.corrupted + c.misdirected + c.bad_rewrite + c.unexpected;
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut last, mut since) = (u64::MAX, Instant::now());
    while Instant::now() < deadline {
        let c = checker.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.classes();
        if total(&c) != last {
            (last, since) = (total(&c), Instant::now());
        } else if since.elapsed() > Duration::from_millis(300) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = fwd.join();
    for s in sinks {
        let _ = s.join();
    }
    let c = checker.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.classes();
    Ok(c)
}

const N: u32 = 1000;

#[test]
fn clean_forwarder_passes() -> Result<()> {
    let c = run(Fault::None, N)?;
    assert!(c.clean(), "{c:?}");
    assert_eq!((c.sent, c.received), (u64::from(N), u64::from(N)));
    Ok(())
}

#[test]
fn detects_loss() -> Result<()> {
    let c = run(Fault::Drop, N)?;
    assert_eq!(c.lost, u64::from(N / 50), "{c:?}");
    assert_eq!(c.received, u64::from(N - N / 50));
    assert_eq!(c.failures(), vec![format!("lost={}", N / 50)]);
    Ok(())
}

#[test]
fn detects_duplication() -> Result<()> {
    let c = run(Fault::Duplicate, N)?;
    assert_eq!(c.duplicated, u64::from(N / 50), "{c:?}");
    assert_eq!((c.received, c.lost), (u64::from(N), 0));
    Ok(())
}

#[test]
fn detects_reordering() -> Result<()> {
    let c = run(Fault::Reorder, N)?;
    assert_eq!(c.reordered, 1, "{c:?}");
    assert_eq!(c.failures(), vec!["reordered=1".to_string()]);
    assert_eq!((c.received, c.lost, c.duplicated), (u64::from(N), 0, 0));
    Ok(())
}

#[test]
fn detects_corruption() -> Result<()> {
    let c = run(Fault::Corrupt, N)?;
    assert_eq!(c.corrupted, u64::from(N / 50), "{c:?}");
    assert_eq!(c.lost, u64::from(N / 50), "a corrupted frame never arrived intact");
    Ok(())
}

#[test]
fn detects_misdirection() -> Result<()> {
    let c = run(Fault::Misdirect, N)?;
    assert_eq!(c.misdirected, u64::from(N / 50), "{c:?}");
    assert_eq!(c.received, u64::from(N - N / 50));
    Ok(())
}

#[test]
fn detects_wrong_macs() -> Result<()> {
    let c = run(Fault::WrongMac, N)?;
    assert_eq!(c.bad_rewrite, u64::from(N / 50), "{c:?}");
    assert_eq!(c.received, u64::from(N - N / 50));
    assert!(!c.clean());
    Ok(())
}

//! The host's end of the rig's ports: a UDP socket facing QEMU's dgram netdev or a packet
//! socket on a tap interface ([`HostPort`]), and the receiver thread that feeds what comes
//! back to the capture and the checker ([`receive_loop`]).

use std::fs::File;
use std::io::BufWriter;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;

use crate::pcap::PcapWriter;
use crate::tap::{self, PacketSocket};
use crate::traffic::Checker;

/// The host end of one port.
#[derive(Debug)]
pub(crate) enum HostPort {
    /// A UDP socket connected to QEMU's dgram netdev at `target`.
    Udp { sock: UdpSocket, target: SocketAddr },
    /// A packet socket on the tap interface `ifname`.
    Tap { sock: PacketSocket, ifname: String },
}

impl HostPort {
    pub(crate) fn try_clone(&self) -> std::io::Result<HostPort> {
        Ok(match self {
            HostPort::Udp { sock, target } => HostPort::Udp { sock: sock.try_clone()?, target: *target },
            HostPort::Tap { sock, ifname } => HostPort::Tap { sock: sock.try_clone()?, ifname: ifname.clone() },
        })
    }

    pub(crate) fn recv(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            HostPort::Udp { sock, .. } => sock.recv(buf),
            HostPort::Tap { sock, .. } => sock.recv(buf),
        }
    }

    pub(crate) fn send(&self, frame: &[u8]) -> std::io::Result<usize> {
        match self {
            HostPort::Udp { sock, .. } => sock.send(frame),
            HostPort::Tap { sock, .. } => sock.send(frame),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            HostPort::Udp { target, .. } => target.to_string(),
            HostPort::Tap { ifname, .. } => format!("tap {ifname}"),
        }
    }
}

/// A UDP socket on the loopback with large buffers, the host end of a QEMU dgram netdev.
pub(crate) fn host_socket() -> Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    // Large buffers: the sink must never be where frames get lost.
    let _ = s.set_recv_buffer_size(8 << 20);
    let _ = s.set_send_buffer_size(4 << 20);
    let addr: SocketAddr = "127.0.0.1:0".parse()?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// The capture every receiver appends to.
pub(crate) type SharedPcap = Mutex<Option<PcapWriter<BufWriter<File>>>>;

/// One port's receiver thread: every frame into the capture, then to the checker (a tap
/// interface's own IPv6/ARP noise is counted apart), until `stop`.
pub(crate) fn receive_loop(
    port: usize,
    s: &HostPort,
    checker: &Mutex<Checker>,
    stop: &AtomicBool,
    noise: &[AtomicU64; 2],
    pcap: &SharedPcap,
) {
    let mut buf = vec![0u8; 65536];
    let tap = matches!(s, HostPort::Tap { .. });
    while !stop.load(Ordering::Relaxed) {
        let got = s.recv(&mut buf);
        if let Ok(n) = got
            && let Some(w) = pcap.lock().unwrap_or_else(|p| p.into_inner()).as_mut()
        {
            // A capture that cannot be written must not stop the checking.
            let _ = w.write(std::time::SystemTime::now(), &buf[..n]);
        }
        match got {
            Ok(n) if tap && tap::is_host_noise(&buf[..n]) => {
                noise[port].fetch_add(1, Ordering::Relaxed);
            }
            Ok(n) => {
                let mut c = checker.lock().unwrap_or_else(|p| p.into_inner());
                c.receive(port, &buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

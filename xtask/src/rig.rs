//! The two-port rig: the image in QEMU with two virtio-net NICs on `dgram` backends, two
//! host UDP sockets (one per port), receiver threads feeding the [`Checker`], and the
//! COM1 machine lines parsed into a [`Report`]. `cargo xtask run` and the end-to-end
//! tests both drive the firmware through this.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::protocol::{self, BootOptions, Control, MachineLine, Report};
use crate::qemu::{DgramNic, Exit, Qemu, QemuConfig, free_udp_port};
use crate::traffic::{Checker, Flow, Macs};

/// How to start a rig.
#[derive(Debug, Clone)]
pub struct RigConfig {
    pub image: PathBuf,
    /// Artifacts go here (created): `com1.log`, `com2.defmt`.
    pub out_dir: PathBuf,
    pub macs: Macs,
    pub flows: Vec<Flow>,
    /// Boot options on top of `ctl=on peer0=… peer1=…`.
    pub boot: BootOptions,
    pub smp: u32,
    pub kvm: bool,
    /// How long to wait for the `@nic` lines.
    pub boot_timeout: Duration,
}

impl RigConfig {
    /// Defaults: the standard MACs, `flows` standard flows, TCG, one core, 60 s to boot.
    pub fn new(image: PathBuf, out_dir: PathBuf, flows: u16) -> RigConfig {
        RigConfig {
            image,
            out_dir,
            macs: Macs::DEFAULT,
            flows: Flow::standard_set(flows),
            boot: BootOptions::default(),
            smp: 1,
            kvm: false,
            boot_timeout: Duration::from_secs(60),
        }
    }
}

/// A running rig.
#[derive(Debug)]
pub struct Rig {
    pub qemu: Qemu,
    pub qemu_config: QemuConfig,
    pub report: Report,
    checker: Arc<Mutex<Checker>>,
    socks: [UdpSocket; 2],
    targets: [SocketAddr; 2],
    stop: Arc<AtomicBool>,
    receivers: Vec<JoinHandle<()>>,
    pub out_dir: PathBuf,
    /// Frames handed to the host sockets per port (generated and raw).
    pub sent_per_port: [u64; 2],
}

fn host_socket() -> Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    // Large buffers: the sink must never be where frames get lost.
    let _ = s.set_recv_buffer_size(8 << 20);
    let _ = s.set_send_buffer_size(4 << 20);
    let addr: SocketAddr = "127.0.0.1:0".parse()?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

impl Rig {
    /// Starts QEMU and the receivers; does not wait for the firmware (see
    /// [`Rig::wait_ready`]).
    pub fn start(cfg: &RigConfig) -> Result<Rig> {
        std::fs::create_dir_all(&cfg.out_dir).with_context(|| format!("creating {}", cfg.out_dir.display()))?;
        let socks = [host_socket()?, host_socket()?];
        let mut nics = Vec::new();
        let mut targets = Vec::new();
        for (i, s) in socks.iter().enumerate() {
            let qemu_port = free_udp_port()?;
            let host_port = s.local_addr()?.port();
            nics.push(DgramNic { mac: cfg.macs.nic[i], qemu_port, host_port });
            let t: SocketAddr = format!("127.0.0.1:{qemu_port}").parse()?;
            // Connected: only QEMU's datagrams are accepted.
            s.connect(t)?;
            s.set_read_timeout(Some(Duration::from_millis(50)))?;
            targets.push(t);
        }
        let targets: [SocketAddr; 2] = [targets[0], targets[1]];
        let boot =
            BootOptions::default().set("ctl", "on").set("peer0", cfg.macs.peer[0]).set("peer1", cfg.macs.peer[1]);
        let mut boot_all = boot;
        for (k, v) in &cfg.boot.0 {
            boot_all = boot_all.set(k, v);
        }
        let qemu_config = QemuConfig {
            image: cfg.image.clone(),
            append: boot_all,
            nics,
            com2: cfg.out_dir.join("com2.defmt"),
            smp: cfg.smp,
            kvm: cfg.kvm,
            extra_args: vec![],
        };
        std::fs::write(cfg.out_dir.join("qemu.cmdline"), qemu_config.display() + "\n")?;
        let checker = Arc::new(Mutex::new(Checker::new(cfg.flows.clone(), cfg.macs, Instant::now())));
        let stop = Arc::new(AtomicBool::new(false));
        let mut receivers = Vec::new();
        for (port, s) in socks.iter().enumerate() {
            let s = s.try_clone()?;
            let (c, st) = (Arc::clone(&checker), Arc::clone(&stop));
            receivers.push(std::thread::spawn(move || receive_loop(port, &s, &c, &st)));
        }
        let qemu = Qemu::spawn(&qemu_config, Some(cfg.out_dir.join("com1.log")))?;
        Ok(Rig {
            qemu,
            qemu_config,
            report: Report::default(),
            checker,
            socks,
            targets,
            stop,
            receivers,
            out_dir: cfg.out_dir.clone(),
            sent_per_port: [0; 2],
        })
    }

    /// The checker (locked).
    pub fn checker(&self) -> MutexGuard<'_, Checker> {
        self.checker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the COM1 lines available within `timeout` into the report; returns them
    /// with their parsed form.
    pub fn pump(&mut self, timeout: Duration) -> Vec<(String, Option<MachineLine>)> {
        let mut out = Vec::new();
        let deadline = Instant::now() + timeout;
        while let Some(l) = self.qemu.next_line(deadline.saturating_duration_since(Instant::now())) {
            let m = self.report.feed(&l);
            out.push((l, m));
            if Instant::now() >= deadline {
                break;
            }
        }
        out
    }

    /// Waits until the banner and all `@nic` lines are there; calls `echo` for every COM1
    /// line meanwhile. Fails when QEMU exits or the timeout passes first.
    pub fn wait_ready(&mut self, timeout: Duration, echo: &mut dyn FnMut(&str)) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            for (l, _) in self.pump(Duration::from_millis(50)) {
                echo(&l);
            }
            if let Some(b) = &self.report.banner
                && b.nics > 0
                && self.report.nics.len() as u64 >= b.nics
            {
                return Ok(());
            }
            if let Some(e) = self.qemu.try_exit()? {
                for (l, _) in self.pump(Duration::from_millis(100)) {
                    echo(&l);
                }
                bail!("the firmware exited before it was ready (status {:?})\n{}", e.status, self.qemu.diagnostics());
            }
            if Instant::now() >= deadline {
                bail!("no @banner and @nic lines within {timeout:?}\n{}", self.qemu.diagnostics());
            }
        }
    }

    /// Sends a raw frame into `port`.
    pub fn send_raw(&mut self, port: usize, frame: &[u8]) -> Result<()> {
        let s = self.socks.get(port).ok_or_else(|| anyhow!("no port {port}"))?;
        let mut refused = 0;
        loop {
            match s.send(frame) {
                Ok(_) => break,
                // A connected UDP socket reports an earlier ICMP port unreachable (QEMU
                // not listening yet, or gone) on the next call, once: try again.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && refused < 3 => refused += 1,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(e) => return Err(e).with_context(|| format!("sending to {}", self.targets[port])),
            }
        }
        self.sent_per_port[port] += 1;
        Ok(())
    }

    /// Generates, registers and sends frame `len` of `flow`.
    pub fn send_flow(&mut self, flow: u16, len: usize) -> Result<()> {
        let (port, f) = self.checker().next_frame(flow, len).ok_or_else(|| anyhow!("no flow {flow}"))?;
        self.send_raw(port, &f)
    }

    /// Waits until nothing is in flight, or `idle` passes without progress, or `max`
    /// passes; pumps COM1 meanwhile (lines go to `echo`).
    pub fn drain(&mut self, idle: Duration, max: Duration, echo: &mut dyn FnMut(&str)) -> u64 {
        let start = Instant::now();
        let mut last = self.checker().in_flight();
        let mut last_change = Instant::now();
        loop {
            for (l, _) in self.pump(Duration::from_millis(20)) {
                echo(&l);
            }
            let now = self.checker().in_flight();
            if now == 0 || start.elapsed() >= max || last_change.elapsed() >= idle {
                return now;
            }
            if now != last {
                last = now;
                last_change = Instant::now();
            }
        }
    }

    /// Sends STOP (again every 2 s) until QEMU exits or `timeout` passes (then kills it).
    /// Pumps COM1 until the end, so the report has `@summary`.
    pub fn stop(&mut self, timeout: Duration, echo: &mut dyn FnMut(&str)) -> Result<Exit> {
        let m = self.checker().macs();
        let stop = protocol::control_frame(m.nic[0], m.peer[0], Control::Stop);
        let deadline = Instant::now() + timeout;
        let exit = loop {
            self.send_raw(0, &stop)?;
            let resend = Instant::now() + Duration::from_secs(2);
            let mut done = None;
            while Instant::now() < resend.min(deadline) {
                for (l, _) in self.pump(Duration::from_millis(20)) {
                    echo(&l);
                }
                if let Some(e) = self.qemu.try_exit()? {
                    done = Some(e);
                    break;
                }
            }
            if let Some(e) = done {
                break e;
            }
            if Instant::now() >= deadline {
                break self.qemu.kill()?;
            }
        };
        for (l, _) in self.pump(Duration::from_millis(100)) {
            echo(&l);
        }
        self.shutdown_receivers();
        Ok(exit)
    }

    /// Stops the receiver threads.
    pub fn shutdown_receivers(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for r in self.receivers.drain(..) {
            let _ = r.join();
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.shutdown_receivers();
    }
}

fn receive_loop(port: usize, s: &UdpSocket, checker: &Mutex<Checker>, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        match s.recv(&mut buf) {
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

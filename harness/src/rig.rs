//! The two-port rig: the image in QEMU with two virtio-net NICs, one host endpoint per
//! port, receiver threads feeding the [`Checker`], and the COM1 machine lines parsed into
//! a [`Report`]. `cargo xtask run` and the end-to-end tests both drive the firmware
//! through this.
//!
//! Backends ([`Backend`]):
//! - `Dgram` (the default): `-netdev dgram` on loopback, a connected host UDP socket per
//!   port. One queue pair per NIC; no privileges needed.
//! - `Tap { queues }`: `-netdev tap,queues=N,vhost=off` with `mq=on,rss=on` on the
//!   device, so virtio-net offers `MQ`/`RSS` with N queue pairs and QEMU steers received
//!   frames by the guest's RSS configuration. Needs root: QEMU creates the interfaces
//!   (unique names, [`tap::unique_ifname`]); the rig disables IPv6 on them, brings them
//!   up and talks to each through an `AF_PACKET` socket. Frames the host kernel itself
//!   sends (IPv6/ARP/LLDP noise, none expected with IPv6 off) are counted in
//!   [`Rig::host_noise`] instead of reaching the checker. The interfaces vanish with QEMU.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::host_port::{HostPort, SharedPcap, host_socket, receive_loop};
use crate::pcap::PcapWriter;
use crate::protocol::{self, BootOptions, Control, Mac, MachineLine, Report};
use crate::qemu::{DgramNic, Exit, Qemu, QemuConfig, QemuNic, TapNic, free_udp_port};
use crate::tap::{self, PacketSocket};
use crate::traffic::{Checker, Expectations, Flow, Macs};

/// How the rig connects the two NICs to the host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Backend {
    /// `-netdev dgram` over loopback UDP: one queue pair per NIC.
    #[default]
    Dgram,
    /// `-netdev tap` with `queues` queue pairs per NIC (`mq=on,rss=on` when more than
    /// one). Needs root.
    Tap {
        /// Queue pairs each NIC offers.
        queues: u16,
    },
    /// No QEMU: the hosted dataplane (`RigConfig::image` is the hosted binary) runs in a
    /// network namespace of its own on two veth pairs ([`crate::netns`]); the host ends
    /// carry the generator and checker through `AF_PACKET` sockets. Needs root.
    Veth {
        /// RX/TX queues per veth (= lanes).
        queues: u16,
        /// The hosted binary's port I/O: `af_xdp`, `af_packet` or `auto`.
        io: &'static str,
        /// More hosted-only command-line arguments (e.g. `--cpus 1`).
        args: Vec<String>,
    },
}

/// How long the rig waits for QEMU to create a tap interface.
const TAP_TIMEOUT: Duration = Duration::from_secs(10);
/// Receive timeout of the host endpoints (how often receivers look for shutdown).
const READ_TIMEOUT: Duration = Duration::from_millis(50);

/// How to start a rig.
#[derive(Debug, Clone)]
pub struct RigConfig {
    pub image: PathBuf,
    /// Artifacts go here (created): `com1.log`, `com2.defmt`.
    pub out_dir: PathBuf,
    pub macs: Macs,
    pub flows: Vec<Flow>,
    /// Boot options on top of `ctl=port:0 ctl_key=… peer0=… peer1=…`.
    pub boot: BootOptions,
    pub smp: u32,
    pub kvm: bool,
    /// How long to wait for the `@nic` lines.
    pub boot_timeout: Duration,
    /// How the NICs reach the host (default [`Backend::Dgram`]).
    pub backend: Backend,
    /// The NIC model on dgram backends (default [`NicModel::VirtioNet`]).
    pub nic_model: NicModel,
    /// A chain configuration in the text form (`core::nf::config`), written to
    /// `out_dir/chain.txt` and passed as boot module 0 (`-initrd`); `None` boots the plain
    /// L2 forwarder.
    pub chain_text: Option<String>,
    /// Record every frame that comes out of the image (both ports) to this pcap file.
    pub pcap: Option<PathBuf>,
    /// The control key the dataplane gets (`ctl_key=`) and the rig signs its control
    /// frames with; fresh and random for every rig.
    pub ctl_key: [u8; 16],
    /// The machine QEMU emulates (`image` must be built for it).
    pub arch: crate::qemu::Arch,
    /// [`Backend::Tap`] only: this many more virtio-net NICs after the two the checker
    /// models (ports 2, 3, …), on tap interfaces the rig creates and raises but does not
    /// open ([`Rig::extra_tap_ifnames`]: for real hosts in namespaces); MAC
    /// `52:54:00:ca:de:0N` for port N. Default 0.
    pub extra_taps: usize,
    /// More QEMU arguments, after the rest (e.g. `-global virtio-net-pci.mrg_rxbuf=off`: a
    /// device without a feature). Default none.
    pub qemu_args: Vec<String>,
}

/// Which device QEMU emulates for each NIC (dgram and tap backends; a tap igb has one queue pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NicModel {
    /// Modern virtio-net (`virtio-net-pci,disable-legacy=on`).
    #[default]
    VirtioNet,
    /// Intel 82576 (`igb`, QEMU >= 8.0), driven by `cadence_drivers::igb`.
    Igb,
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
            backend: Backend::Dgram,
            nic_model: NicModel::VirtioNet,
            chain_text: None,
            pcap: None,
            ctl_key: protocol::random_ctl_key(),
            arch: crate::qemu::Arch::X86_64,
            extra_taps: 0,
            qemu_args: Vec::new(),
        }
    }
}

/// A running rig.
#[derive(Debug)]
pub struct Rig {
    /// The dataplane process: QEMU, or the hosted binary with [`Backend::Veth`].
    pub qemu: Qemu,
    /// QEMU's configuration (`None` for the hosted dataplane).
    pub qemu_config: Option<QemuConfig>,
    /// The dataplane's command line, for logs and the JSON summary.
    pub cmdline: String,
    /// The namespace and veths of [`Backend::Veth`]; dropped (deleted) after the process.
    pub veths: Option<crate::netns::VethPairs>,
    pub report: Report,
    checker: Arc<Mutex<Checker>>,
    ports: Vec<HostPort>,
    host_noise: Arc<[AtomicU64; 2]>,
    stop: Arc<AtomicBool>,
    receivers: Vec<JoinHandle<()>>,
    pub out_dir: PathBuf,
    /// Frames handed to the host sockets per port (generated and raw).
    pub sent_per_port: [u64; 2],
    /// The capture of `RigConfig::pcap`, shared with the receivers.
    pcap: Arc<SharedPcap>,
    /// The control key and the counter of the next control frame.
    ctl_key: [u8; 16],
    ctl_counter: u64,
    /// The management socket served for `cargo xtask ctl` ([`Rig::serve_ctl`]).
    relay: Option<cadence_ctl::ctl::Relay>,
    /// The tap interfaces of `RigConfig::extra_taps`, in port order.
    extra_taps: Vec<String>,
}

impl Rig {
    /// Starts QEMU and the receivers; does not wait for the firmware (see
    /// [`Rig::wait_ready`]).
    pub fn start(cfg: &RigConfig) -> Result<Rig> {
        std::fs::create_dir_all(&cfg.out_dir).with_context(|| format!("creating {}", cfg.out_dir.display()))?;
        if let Backend::Veth { queues, io, args } = &cfg.backend {
            return Self::start_hosted(cfg, *queues, io, args);
        }
        let mut ports = Vec::new();
        let mut nics: Vec<QemuNic> = Vec::new();
        let mut ifnames = Vec::new();
        let mut extra_taps = Vec::new();
        if cfg.extra_taps > 0 && !matches!(cfg.backend, Backend::Tap { .. }) {
            bail!("extra_taps needs the tap backend");
        }
        match cfg.backend {
            Backend::Dgram => {
                for i in 0..2 {
                    let sock = host_socket()?;
                    let qemu_port = free_udp_port()?;
                    let host_port = sock.local_addr()?.port();
                    let nic = DgramNic { mac: cfg.macs.nic[i], qemu_port, host_port };
                    nics.push(match cfg.nic_model {
                        NicModel::VirtioNet => nic.into(),
                        NicModel::Igb => QemuNic::IgbDgram(nic),
                    });
                    let target: SocketAddr = format!("127.0.0.1:{qemu_port}").parse()?;
                    // Connected: only QEMU's datagrams are accepted.
                    sock.connect(target)?;
                    sock.set_read_timeout(Some(READ_TIMEOUT))?;
                    ports.push(HostPort::Udp { sock, target });
                }
            }
            Backend::Tap { queues } => {
                let igb = cfg.nic_model == NicModel::Igb;
                for i in 0..2 {
                    let ifname = tap::unique_ifname(i);
                    nics.push(
                        TapNic { mac: cfg.macs.nic[i], ifname: ifname.clone(), queues: queues.max(1), igb }.into(),
                    );
                    ifnames.push(ifname);
                }
                for port in 2..2 + cfg.extra_taps {
                    let ifname = tap::unique_ifname(port);
                    let mac = Mac([0x52, 0x54, 0x00, 0xca, 0xde, port as u8]);
                    nics.push(TapNic { mac, ifname: ifname.clone(), queues: queues.max(1), igb }.into());
                    extra_taps.push(ifname);
                }
            }
            Backend::Veth { .. } => unreachable!("handled by start_hosted"),
        }
        let boot_all = boot_options(cfg);
        let mut extra_args = vec![];
        if let Some(p) = write_chain(cfg)? {
            // QEMU hands an `-initrd` to a PVH kernel as module 0 of `hvm_start_info`, and
            // to an arm64 `Image` in RAM named by `/chosen/linux,initrd-start`/`-end`.
            extra_args.extend(["-initrd".to_string(), p.display().to_string()]);
        }
        extra_args.extend(cfg.qemu_args.iter().cloned());
        let pcap = open_pcap(cfg)?;
        let qemu_config = QemuConfig {
            image: cfg.image.clone(),
            append: boot_all,
            nics,
            com2: cfg.out_dir.join("com2.defmt"),
            smp: cfg.smp,
            kvm: cfg.kvm.then(crate::accel::detect),
            extra_args,
            // The command line holds the control key: in a file only we can read, not in
            // QEMU's arguments (`ps`) or the logs.
            cmdline_file: Some(cfg.out_dir.join("cmdline.ini")),
            arch: cfg.arch,
        };
        std::fs::write(cfg.out_dir.join("qemu.cmdline"), qemu_config.display() + "\n")?;
        // The operator's copy of the key (`ctl.key`, 0600): control frames need it.
        crate::qemu::write_private(&cfg.out_dir.join("ctl.key"), &(protocol::ctl_key_hex(&cfg.ctl_key) + "\n"))?;
        let checker = new_checker(cfg);
        let stop = Arc::new(AtomicBool::new(false));
        let host_noise = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let mut receivers = Vec::new();
        let spawn_receivers = |ports: &[HostPort], receivers: &mut Vec<JoinHandle<()>>| -> Result<()> {
            for (port, p) in ports.iter().enumerate() {
                let p = p.try_clone()?;
                let (c, st, noise) = (Arc::clone(&checker), Arc::clone(&stop), Arc::clone(&host_noise));
                let pcap = Arc::clone(&pcap);
                receivers.push(std::thread::spawn(move || receive_loop(port, &p, &c, &st, &noise, &pcap)));
            }
            Ok(())
        };
        // Dgram: the host sockets exist before QEMU sends anything.
        spawn_receivers(&ports, &mut receivers)?;
        let mut qemu = Qemu::spawn(&qemu_config, Some(cfg.out_dir.join("com1.log")))?;
        // Tap: QEMU creates the interfaces; make them quiet, raise them, open them. The
        // firmware transmits nothing before the host sends, so nothing is missed.
        for (i, ifname) in ifnames.into_iter().chain(extra_taps.iter().cloned()).enumerate() {
            let ready = tap::prepare(&ifname, TAP_TIMEOUT, &mut || matches!(qemu.try_exit(), Ok(None)));
            if let Err(e) = ready {
                let _ = qemu.kill();
                bail!("{e:#}\n{}", qemu.diagnostics());
            }
            if i < 2 {
                let sock = PacketSocket::bind(&ifname, READ_TIMEOUT)?;
                ports.push(HostPort::Tap { sock, ifname });
            }
        }
        if matches!(cfg.backend, Backend::Tap { .. }) {
            spawn_receivers(&ports, &mut receivers)?;
        }
        Ok(Rig {
            qemu,
            cmdline: qemu_config.display(),
            qemu_config: Some(qemu_config),
            veths: None,
            report: Report::default(),
            checker,
            ports,
            host_noise,
            stop,
            receivers,
            out_dir: cfg.out_dir.clone(),
            sent_per_port: [0; 2],
            pcap,
            ctl_key: cfg.ctl_key,
            ctl_counter: 1,
            relay: None,
            extra_taps,
        })
    }

    /// The hosted dataplane on veths (see [`Backend::Veth`]).
    fn start_hosted(cfg: &RigConfig, queues: u16, io: &str, args: &[String]) -> Result<Rig> {
        let veths = crate::netns::VethPairs::create(queues)?;
        // The dataplane's ports carry the NIC MACs the checker expects, the host ends the
        // peers' MACs the dataplane writes as destination.
        for i in 0..2 {
            veths.set_mac(true, i, cfg.macs.nic[i].0)?;
            veths.set_mac(false, i, cfg.macs.peer[i].0)?;
        }
        let mut cmd = std::process::Command::new(crate::netns::IP);
        cmd.args(["netns", "exec", &veths.netns]).arg(&cfg.image);
        cmd.args(["--port0", &veths.dut[0], "--port1", &veths.dut[1], "--io", io]);
        if let Some(p) = write_chain(cfg)? {
            cmd.arg("--chain").arg(p);
        }
        cmd.args(args);
        // The key from a file only we read (`--ctl-key-file`), not the arguments (`ps`).
        let key_file = cfg.out_dir.join("ctl.key");
        crate::qemu::write_private(&key_file, &(protocol::ctl_key_hex(&cfg.ctl_key) + "\n"))?;
        cmd.arg("--ctl-key-file").arg(&key_file);
        cmd.args(boot_options(cfg).0.iter().filter(|(k, _)| k != "ctl_key").map(|(k, v)| format!("{k}={v}")));
        let cmdline = format!("{cmd:?}");
        std::fs::write(cfg.out_dir.join("hosted.cmdline"), format!("{cmdline}\n"))?;
        let pcap = open_pcap(cfg)?;
        let checker = new_checker(cfg);
        let stop = Arc::new(AtomicBool::new(false));
        let host_noise = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        // The host ends exist before the dataplane starts: open them first, so nothing
        // it sends is missed.
        let mut ports = Vec::new();
        let mut receivers = Vec::new();
        for (port, ifname) in veths.host.iter().enumerate() {
            let sock = PacketSocket::bind(ifname, READ_TIMEOUT)?;
            let p = HostPort::Tap { sock: sock.try_clone()?, ifname: ifname.clone() };
            let (c, st, noise, pc) =
                (Arc::clone(&checker), Arc::clone(&stop), Arc::clone(&host_noise), Arc::clone(&pcap));
            receivers.push(std::thread::spawn(move || receive_loop(port, &p, &c, &st, &noise, &pc)));
            ports.push(HostPort::Tap { sock, ifname: ifname.clone() });
        }
        let qemu = Qemu::spawn_hosted(cmd, Some(cfg.out_dir.join("com1.log")))?;
        Ok(Rig {
            qemu,
            qemu_config: None,
            cmdline,
            veths: Some(veths),
            report: Report::default(),
            checker,
            ports,
            host_noise,
            stop,
            receivers,
            out_dir: cfg.out_dir.clone(),
            sent_per_port: [0; 2],
            pcap,
            ctl_key: cfg.ctl_key,
            ctl_counter: 1,
            relay: None,
            extra_taps: Vec::new(),
        })
    }

    /// Frames per port that the host kernel put on a tap interface (and the firmware
    /// forwarded back), kept away from the checker; always 0 with `Dgram`.
    pub fn host_noise(&self) -> [u64; 2] {
        [self.host_noise[0].load(Ordering::Relaxed), self.host_noise[1].load(Ordering::Relaxed)]
    }

    /// The tap interface names of the ports (empty with `Dgram`).
    pub fn tap_ifnames(&self) -> Vec<String> {
        self.ports
            .iter()
            .filter_map(|p| match p {
                HostPort::Tap { ifname, .. } => Some(ifname.clone()),
                HostPort::Udp { .. } => None,
            })
            .collect()
    }

    /// The tap interfaces of `RigConfig::extra_taps` (ports 2, 3, …), raised, not opened.
    pub fn extra_tap_ifnames(&self) -> &[String] {
        &self.extra_taps
    }

    /// The checker (locked).
    pub fn checker(&self) -> MutexGuard<'_, Checker> {
        self.checker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the COM1 lines available within `timeout` into the report; returns them
    /// with their parsed form.
    pub fn pump(&mut self, timeout: Duration) -> Vec<(String, Option<MachineLine>)> {
        let mut out = Vec::new();
        self.relay_requests();
        let deadline = Instant::now() + timeout;
        while let Some(l) = self.qemu.next_line(deadline.saturating_duration_since(Instant::now())) {
            if let (Some(r), true) = (self.relay.as_mut(), l.starts_with("@ctl ")) {
                r.broadcast(&l);
            }
            let m = self.report.feed(&l);
            out.push((l, m));
            if Instant::now() >= deadline {
                break;
            }
        }
        out
    }

    /// Serves the management channel on the Unix socket `path` for `cargo xtask ctl`:
    /// while the rig pumps, clients' request lines go to the dataplane and every `@ctl`
    /// line comes back to them.
    pub fn serve_ctl(&mut self, path: &std::path::Path) -> Result<()> {
        self.relay = Some(cadence_ctl::ctl::Relay::bind(path)?);
        Ok(())
    }

    fn relay_requests(&mut self) {
        let Some(r) = self.relay.as_mut() else { return };
        for line in r.poll() {
            // A dataplane that exited cannot take it; the client times out and says so.
            let _ = self.qemu.send_input(&format!("{line}\n"));
        }
    }

    /// Sends the management command `cmd` (one line, without `ctl ID`); returns its id.
    /// The reply is gathered while the rig pumps ([`Rig::ctl_reply`]).
    pub fn ctl_send(&mut self, cmd: &str) -> Result<u32> {
        let id = cadence_ctl::ctl::fresh_id();
        self.qemu.send_input(&cadence_ctl::ctl::request(id, cmd)?)?;
        Ok(id)
    }

    /// The whole reply to request `id`, once it has come.
    pub fn ctl_reply(&mut self, id: u32) -> Option<cadence_ctl::ctl::Reply> {
        self.report.ctl.take(id)
    }

    /// Sends `cmd` and pumps until its reply came (at most `timeout`).
    pub fn ctl(&mut self, cmd: &str, timeout: Duration) -> Result<cadence_ctl::ctl::Reply> {
        let id = self.ctl_send(cmd)?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.ctl_reply(id) {
                return Ok(r);
            }
            if Instant::now() >= deadline {
                bail!("no reply to `{cmd}` within {timeout:?}\n{}", self.qemu.diagnostics());
            }
            self.pump(Duration::from_millis(20));
        }
    }

    /// Waits until the banner and all `@nic` lines are there; calls `echo` for every COM1
    /// line meanwhile. Fails when QEMU exits or the timeout passes first.
    pub fn wait_ready(&mut self, timeout: Duration, echo: &mut dyn FnMut(&str)) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            for (l, _) in self.pump(Duration::from_millis(50)) {
                echo(&l);
            }
            // `@ready` comes once every lane's receive rings are filled: frames sent
            // earlier could find a NIC without buffers (igb drops them; virtio-net holds
            // them back).
            if let Some(b) = &self.report.banner
                && b.nics > 0
                && self.report.nics.len() as u64 >= b.nics
                && self.report.ready
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
                bail!("no @banner, @nic and @ready lines within {timeout:?}\n{}", self.qemu.diagnostics());
            }
        }
    }

    /// Sends a raw frame into `port`.
    pub fn send_raw(&mut self, port: usize, frame: &[u8]) -> Result<()> {
        let s = self.ports.get(port).ok_or_else(|| anyhow!("no port {port}"))?;
        let mut refused = 0;
        loop {
            match s.send(frame) {
                Ok(_) => break,
                // A connected UDP socket reports an earlier ICMP port unreachable (QEMU
                // not listening yet, or gone) on the next call, once: try again.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && refused < 3 => refused += 1,
                // A full socket buffer (UDP), or a tap queue the kernel cannot take more
                // into right now (ENOBUFS): wait a little and try again.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS) => {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(e) => return Err(e).with_context(|| format!("sending to {}", s.describe())),
            }
        }
        self.sent_per_port[port] += 1;
        Ok(())
    }

    /// Sends `frame` into `port` over and over at `rate` frames/s (token bucket), on a thread
    /// of its own, until `until` is set; the thread returns how many it sent. For floods:
    /// the frames are not registered with the checker (send one the chain drops — an
    /// ACL-denied flow's, a malformed one — or expect them as unexpected). A rate the host
    /// can just sustain floods best: a sender that takes a whole core starves QEMU's own
    /// thread, which then delivers less.
    pub fn flood(&self, port: usize, frame: Vec<u8>, rate: u64, until: Arc<AtomicBool>) -> Result<JoinHandle<u64>> {
        let s = self.ports.get(port).ok_or_else(|| anyhow!("no port {port}"))?.try_clone()?;
        Ok(std::thread::spawn(move || {
            let mut pacer = crate::traffic::Pacer::new(rate, Instant::now());
            let mut sent = 0u64;
            while !until.load(Ordering::Relaxed) {
                for _ in 0..pacer.take(Instant::now()) {
                    // A full socket or tap queue drops it: a flood does not wait.
                    if s.send(&frame).is_ok() {
                        sent += 1;
                    }
                }
                std::thread::sleep(pacer.wait().max(Duration::from_micros(50)));
            }
            sent
        }))
    }

    /// A signed control frame for port 0 (the control port) with the next counter, for this
    /// boot (the nonce `@ready` announced; an error before `@ready`).
    pub fn control_frame(&mut self, cmd: Control) -> Result<Vec<u8>> {
        let nonce = self.report.ctl_nonce.ok_or_else(|| {
            anyhow!("no ctl_nonce on @ready yet: control frames are signed for one boot\n{}", self.qemu.diagnostics())
        })?;
        let m = self.checker().macs();
        let counter = self.ctl_counter;
        self.ctl_counter += 1;
        Ok(protocol::control_frame(m.nic[0], m.peer[0], cmd, &self.ctl_key, nonce, counter))
    }

    /// The control key the dataplane was given.
    pub fn ctl_key(&self) -> [u8; 16] {
        self.ctl_key
    }

    /// Sends a signed control frame into port 0.
    pub fn send_control(&mut self, cmd: Control) -> Result<()> {
        let f = self.control_frame(cmd)?;
        self.send_raw(0, &f)
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

    /// With an IPFIX collector: waits until every flow the host sent on (and the chain does
    /// not drop) has been exported, or `idle` passes without a new record, or `max` passes
    /// (the flows must go idle for their timeout first); pumps COM1 meanwhile. Returns the
    /// flows exported.
    pub fn wait_exports(&mut self, idle: Duration, max: Duration, echo: &mut dyn FnMut(&str)) -> usize {
        let start = Instant::now();
        let mut last = (0usize, Instant::now());
        loop {
            for (l, _) in self.pump(Duration::from_millis(20)) {
                echo(&l);
            }
            let c = self.checker();
            let exported = c.ipfix.as_ref().map_or(0, |col| col.totals().len());
            let want = c.forwarded_flows();
            drop(c);
            if exported >= want || start.elapsed() >= max {
                return exported;
            }
            if exported != last.0 {
                last = (exported, Instant::now());
            } else if exported > 0 && last.1.elapsed() >= idle {
                return exported;
            }
        }
    }

    /// Sends STOP (again every 2 s) until QEMU exits or `timeout` passes (then kills it).
    /// Pumps COM1 until the end, so the report has `@summary`.
    pub fn stop(&mut self, timeout: Duration, echo: &mut dyn FnMut(&str)) -> Result<Exit> {
        let deadline = Instant::now() + timeout;
        let exit = loop {
            // A fresh counter each time: a resent copy of an accepted STOP would be a replay.
            self.send_control(Control::Stop)?;
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

    /// Stops the receiver threads (and flushes the pcap capture).
    pub fn shutdown_receivers(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for r in self.receivers.drain(..) {
            let _ = r.join();
        }
        if let Some(w) = self.pcap.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = w.flush();
        }
    }

    /// Frames recorded in the pcap capture (0 without one).
    pub fn pcap_frames(&self) -> u64 {
        self.pcap.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map_or(0, PcapWriter::frames)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.shutdown_receivers();
    }
}

/// `ctl=port:0 ctl_key=… peer0=… peer1=…` plus the configuration's boot options.
fn boot_options(cfg: &RigConfig) -> BootOptions {
    let mut all = BootOptions::default()
        .set("ctl", "port:0")
        .set("ctl_key", protocol::ctl_key_hex(&cfg.ctl_key))
        .set("peer0", cfg.macs.peer[0])
        .set("peer1", cfg.macs.peer[1]);
    for (k, v) in &cfg.boot.0 {
        all = all.set(k, v);
    }
    all
}

/// Writes the chain text to `out_dir/chain.txt`; its path, if there is a chain.
fn write_chain(cfg: &RigConfig) -> Result<Option<PathBuf>> {
    let Some(text) = &cfg.chain_text else { return Ok(None) };
    let p = cfg.out_dir.join("chain.txt");
    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
    Ok(Some(p))
}

fn open_pcap(cfg: &RigConfig) -> Result<Arc<SharedPcap>> {
    let pcap = match &cfg.pcap {
        Some(p) => Some(PcapWriter::create(p)?),
        None => None,
    };
    Ok(Arc::new(Mutex::new(pcap)))
}

/// The checker for the configuration's flows, with the chain's expectations.
fn new_checker(cfg: &RigConfig) -> Arc<Mutex<Checker>> {
    let mut checker = Checker::new(cfg.flows.clone(), cfg.macs, Instant::now());
    // A text the dataplane will refuse (a test of that) gets no expectations; a NetBlaze
    // profile after the chain (`[netblaze.profile]`) is the dataplane's, not the checker's.
    let spec = |text: &str| cadence_core::netblaze::module::parse(text).map(|(spec, _)| spec);
    if let Some(Ok(spec)) = cfg.chain_text.as_deref().map(spec) {
        checker = checker.with_expectations(Expectations::new(&spec, &cfg.flows));
        // An Accounting NF that exports IPFIX: the rig is its collector.
        checker.ipfix = spec.nfs.iter().find_map(|nf| match nf {
            cadence_core::nf::config::NfSpec::Accounting(a) => {
                a.export.map(|e| crate::traffic::ipfix::Collector::new(e.collector, e.udp_port))
            }
            _ => None,
        });
    }
    Arc::new(Mutex::new(checker))
}

//! The QEMU launcher: command line, spawn, COM1 captured live through a pipe
//! (`-serial stdio`), COM2 to a file, wait with a timeout, kill, exit status.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::protocol::{BootOptions, Mac};
use cadence_build::provision::{QEMU, QEMU_AARCH64};

/// The machine QEMU emulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arch {
    /// `qemu-system-x86_64 -machine q35`: the image boots by PVH, COM1 and COM2.
    #[default]
    X86_64,
    /// `qemu-system-aarch64 -M virt,gic-version=3 -cpu cortex-a72` (TCG): the arm64
    /// `Image` by `-kernel`, the PL011 as COM1, semihosting for the exit status and for
    /// defmt (written to the COM2 file).
    Aarch64,
}

impl Arch {
    /// The QEMU binary.
    pub const fn qemu(self) -> &'static str {
        match self {
            Arch::X86_64 => QEMU,
            Arch::Aarch64 => QEMU_AARCH64,
        }
    }
}

/// One NIC: a modern virtio-net device on a `dgram` netdev (one UDP datagram = one
/// Ethernet frame without FCS). One queue pair only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DgramNic {
    pub mac: Mac,
    /// 127.0.0.1 port QEMU binds (the host sends frames here).
    pub qemu_port: u16,
    /// 127.0.0.1 port of the host socket (QEMU sends the NIC's TX frames here).
    pub host_port: u16,
}

/// One NIC: a modern virtio-net device on a `tap` netdev with `queues` queues
/// (only tap, vhost-user and vDPA give virtio-net more than one
/// queue pair). QEMU creates the interface `ifname` itself (needs root / CAP_NET_ADMIN)
/// and removes it when it exits; `vhost=off` keeps RSS in QEMU (software RSS, no eBPF).
/// With more than one queue the device gets `mq=on,rss=on` and `2·queues + 2` MSI-X
/// vectors (one per virtqueue, the control queue and configuration changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapNic {
    pub mac: Mac,
    /// Interface name (at most 15 bytes).
    pub ifname: String,
    /// Queue pairs the device offers (`max_virtqueue_pairs`), 1 or more.
    pub queues: u16,
    /// An Intel 82576 (`igb`, one queue pair here) instead of virtio-net.
    pub igb: bool,
}

/// The link speed every virtio-net device reports (`VIRTIO_NET_F_SPEED_DUPLEX`): 1 Gb/s,
/// about what QEMU's software backends carry. The image takes its Metronome ring bound
/// from it (docs/PROTOCOL.md, `line_mbps`); QEMU's default is "unknown".
pub const VIRTIO_SPEED: &str = "speed=1000,duplex=full,";

/// A NIC and its QEMU backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QemuNic {
    Dgram(DgramNic),
    Tap(TapNic),
    /// An Intel 82576 (`-device igb`, QEMU >= 8.0) on a `dgram` netdev, at PCI slot
    /// `4 + 2i`.
    IgbDgram(DgramNic),
}

impl From<DgramNic> for QemuNic {
    fn from(n: DgramNic) -> QemuNic {
        QemuNic::Dgram(n)
    }
}

impl From<TapNic> for QemuNic {
    fn from(n: TapNic) -> QemuNic {
        QemuNic::Tap(n)
    }
}

impl QemuNic {
    /// The `-netdev` and `-device` arguments of NIC `i` (netdev id `n<i>`).
    pub fn args(&self, i: usize) -> [String; 4] {
        let (netdev, device) = match self {
            QemuNic::Dgram(n) => (
                format!(
                    "dgram,id=n{i},local.type=inet,local.host=127.0.0.1,local.port={},\
                     remote.type=inet,remote.host=127.0.0.1,remote.port={}",
                    n.qemu_port, n.host_port
                ),
                format!("virtio-net-pci,disable-legacy=on,netdev=n{i},{VIRTIO_SPEED}mac={}", n.mac),
            ),
            QemuNic::IgbDgram(n) => (
                format!(
                    "dgram,id=n{i},local.type=inet,local.host=127.0.0.1,local.port={},\
                     remote.type=inet,remote.host=127.0.0.1,remote.port={}",
                    n.qemu_port, n.host_port
                ),
                // Each igb PF reserves the slots of its 8 VFs (devfn + 0x80, stride 2):
                // PFs two slots apart (4, 6) keep the VF ranges from overlapping.
                format!("igb,netdev=n{i},mac={},addr={:#x}", n.mac, 4 + 2 * i),
            ),
            QemuNic::Tap(t) if t.igb => (
                format!("tap,id=n{i},ifname={},script=no,downscript=no,vhost=off", t.ifname),
                // PFs two slots apart, as for the dgram igb NICs above.
                format!("igb,netdev=n{i},mac={},addr={:#x}", t.mac, 4 + 2 * i),
            ),
            QemuNic::Tap(t) => {
                let q = t.queues.max(1);
                let mq = if q > 1 { format!("mq=on,rss=on,vectors={},", 2 * u32::from(q) + 2) } else { String::new() };
                (
                    format!("tap,id=n{i},ifname={},script=no,downscript=no,queues={q},vhost=off", t.ifname),
                    format!("virtio-net-pci,disable-legacy=on,netdev=n{i},{mq}{VIRTIO_SPEED}mac={}", t.mac),
                )
            }
        };
        ["-netdev".into(), netdev, "-device".into(), device]
    }
}

/// Everything QEMU is started with.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    pub image: PathBuf,
    pub append: BootOptions,
    pub nics: Vec<QemuNic>,
    /// File COM2 (defmt) is written to.
    pub com2: PathBuf,
    pub smp: u32,
    /// KVM (with the CPU model [`crate::accel::Kvm::qemu_args`] picks for its kind)
    /// instead of TCG with `-cpu max`; `Some(Kvm::Unusable)` counts as TCG.
    pub kvm: Option<crate::accel::Kvm>,
    /// More arguments, appended last.
    pub extra_args: Vec<String>,
    /// Where the kernel command line goes instead of `-append`: a QEMU configuration file
    /// (`-readconfig`, `[machine] append = "…"`) that only the owner may read, so a
    /// `ctl_key=` in it stays out of the process listing and the logs
    /// ([`QemuConfig::write_cmdline_file`]). `None`: `-append`.
    pub cmdline_file: Option<PathBuf>,
    /// The machine.
    pub arch: Arch,
}

impl QemuConfig {
    /// The file the kernel command line goes in, when set and when the line fits QEMU's
    /// config-file reader (it reads lines of at most 1023 bytes: a longer command line — only
    /// a test's, past the image's own 1024-byte limit — goes with `-append`).
    fn cmdline_via_file(&self) -> Option<&PathBuf> {
        const QEMU_CONFIG_LINE: usize = 1023;
        let line = "  append = \"\"\n".len() + self.append.to_cmdline().len();
        self.cmdline_file.as_ref().filter(|_| line <= QEMU_CONFIG_LINE)
    }

    /// Writes the kernel command line into [`QemuConfig::cmdline_file`] (mode 0600), if it
    /// goes there.
    pub fn write_cmdline_file(&self) -> Result<()> {
        let Some(path) = self.cmdline_via_file() else { return Ok(()) };
        let line = self.append.to_cmdline();
        if line.contains(['"', '\\', '\n']) {
            bail!("boot options with quotes, backslashes or newlines cannot go in a QEMU config file: {line}");
        }
        write_private(path, &format!("[machine]\n  append = \"{line}\"\n"))
    }

    /// The arguments of `qemu-system-x86_64` (or `qemu-system-aarch64`, [`Arch`]).
    pub fn args(&self) -> Vec<String> {
        let mut a = match self.arch {
            Arch::X86_64 => self.x86_args(),
            Arch::Aarch64 => self.aarch64_args(),
        };
        for (i, n) in self.nics.iter().enumerate() {
            a.extend(n.args(i));
        }
        a.push("-kernel".into());
        a.push(self.image.display().to_string());
        match self.cmdline_via_file() {
            Some(p) => {
                a.push("-readconfig".into());
                a.push(p.display().to_string());
            }
            None => {
                a.push("-append".into());
                a.push(self.append.to_cmdline());
            }
        }
        a.extend(self.extra_args.iter().cloned());
        a
    }

    /// The Arm machine: `virt` with GICv3, TCG on a Cortex-A72 (an ARMv8.0 core, as
    /// SmartNICs have), the PL011 on stdio, semihosting for the exit status
    /// (`SYS_EXIT_EXTENDED`) and the defmt log (`SYS_WRITEC` to the COM2 file).
    fn aarch64_args(&self) -> Vec<String> {
        [
            "-M",
            "virt,gic-version=3",
            "-cpu",
            "cortex-a72",
            "-m",
            "256M",
            "-smp",
            &self.smp.to_string(),
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
            "-chardev",
            &format!("file,id=defmt,path={}", self.com2.display()),
            "-semihosting-config",
            "enable=on,target=native,chardev=defmt",
            "-serial",
            "stdio",
        ]
        .map(String::from)
        .to_vec()
    }

    fn x86_args(&self) -> Vec<String> {
        let mut a: Vec<String> = ["-machine", "q35"].map(String::from).to_vec();
        match self.kvm.as_ref().and_then(crate::accel::Kvm::qemu_args) {
            Some(kvm) => a.extend(kvm.map(String::from)),
            None => a.extend(["-cpu", "max"].map(String::from)),
        }
        a.extend(
            [
                "-m",
                "256M",
                "-smp",
                &self.smp.to_string(),
                "-display",
                "none",
                "-monitor",
                "none",
                "-no-reboot",
                "-device",
                "isa-debug-exit,iobase=0xf4,iosize=0x04",
                "-serial",
                "stdio",
                "-serial",
                &format!("file:{}", self.com2.display()),
            ]
            .map(String::from),
        );
        a
    }

    /// The command line as one shell-ish string (for logs).
    pub fn display(&self) -> String {
        let mut s = self.arch.qemu().to_string();
        for a in self.args() {
            if a.contains(' ') || a.contains('"') || a.is_empty() {
                s.push_str(&format!(" '{a}'"));
            } else {
                s.push(' ');
                s.push_str(&a);
            }
        }
        s
    }
}

/// Writes `text` to `path`, readable and writable by its owner only (a key, or a command line
/// that holds one): created with mode 0600, or truncated and set to 0600.
pub fn write_private(path: &std::path::Path, text: &str) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// A free UDP port on 127.0.0.1 (bound and released; QEMU binds it right after).
pub fn free_udp_port() -> Result<u16> {
    let s = UdpSocket::bind("127.0.0.1:0").context("binding a probe socket")?;
    Ok(s.local_addr()?.port())
}

/// How QEMU ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// The exit status (`None`: killed by a signal, e.g. by us after a timeout).
    pub status: Option<i32>,
    /// We killed it because it ran past the timeout.
    pub timed_out: bool,
}

/// A running dataplane process: QEMU with the image, or the hosted binary (whose exit
/// codes are mapped onto the image's, [`crate::protocol::hosted_exit_status`]). Its
/// stdout is the image's COM1.
#[derive(Debug)]
pub struct Qemu {
    child: Child,
    /// What it is, for messages: `QEMU` or `the hosted dataplane`.
    what: &'static str,
    /// The hosted binary: exit codes 0/1/2/101 are reported as 33/37/35/39.
    hosted: bool,
    lines_rx: Receiver<String>,
    com1: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
    exit: Option<Exit>,
    /// The management input: QEMU's COM1 receiver (`-serial stdio`) or the hosted
    /// binary's stdin.
    stdin: Option<ChildStdin>,
}

impl Qemu {
    /// Starts QEMU. COM1 lines are kept in memory, handed out by
    /// [`Qemu::next_line`], and appended to `com1_log` when given.
    pub fn spawn(cfg: &QemuConfig, com1_log: Option<PathBuf>) -> Result<Qemu> {
        cfg.write_cmdline_file()?;
        let qemu = cfg.arch.qemu();
        let mut cmd = Command::new(qemu);
        cmd.args(cfg.args());
        Self::spawn_process(cmd, "QEMU", false, com1_log)
            .with_context(|| format!("starting {qemu} (is it installed? `cargo xtask test` installs it)"))
    }

    /// Starts the hosted dataplane with `cmd` (its stdout plays COM1).
    pub fn spawn_hosted(cmd: Command, com1_log: Option<PathBuf>) -> Result<Qemu> {
        Self::spawn_process(cmd, "the hosted dataplane", true, com1_log)
    }

    fn spawn_process(mut cmd: Command, what: &'static str, hosted: bool, com1_log: Option<PathBuf>) -> Result<Qemu> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {cmd:?}"))?;
        let stdout = child.stdout.take().context("stdout")?;
        let stdin = child.stdin.take();
        let mut stderr_pipe = child.stderr.take().context("stderr")?;
        let (tx, lines_rx) = mpsc::channel();
        let com1 = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut log = match com1_log {
            Some(p) => Some(std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?),
            None => None,
        };
        let c1 = Arc::clone(&com1);
        let out_reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut buf = Vec::new();
            // Lines are split on '\n'; bytes that are not UTF-8 are replaced.
            while r.read_until(b'\n', &mut buf).map(|n| n > 0).unwrap_or(false) {
                let line = String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_string();
                buf.clear();
                if let Some(f) = log.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
                if let Ok(mut v) = c1.lock() {
                    v.push(line.clone());
                }
                let _ = tx.send(line);
            }
        });
        let e1 = Arc::clone(&stderr);
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr_pipe.read_to_string(&mut s);
            if let Ok(mut e) = e1.lock() {
                e.push_str(&s);
            }
        });
        Ok(Qemu {
            child,
            what,
            hosted,
            lines_rx,
            com1,
            stderr,
            readers: vec![out_reader, err_reader],
            exit: None,
            stdin,
        })
    }

    /// The next COM1 line, waiting at most `timeout`; `None` on timeout or when COM1
    /// closed (QEMU exited and every line was handed out).
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines_rx.recv_timeout(timeout).ok()
    }

    /// Writes `text` to the dataplane's management input (COM1's receiver, the hosted
    /// binary's stdin).
    pub fn send_input(&mut self, text: &str) -> Result<()> {
        let what = self.what;
        let stdin = self.stdin.as_mut().with_context(|| format!("{what} has no management input"))?;
        stdin.write_all(text.as_bytes()).and_then(|()| stdin.flush()).with_context(|| format!("writing to {what}"))
    }

    /// Every COM1 line so far.
    pub fn com1(&self) -> Vec<String> {
        self.com1.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// QEMU's own stderr (complete once it exited).
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The process id (QEMU's, or the hosted dataplane's: `ip netns exec` execs it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether QEMU has exited; the exit when it has.
    pub fn try_exit(&mut self) -> Result<Option<Exit>> {
        if let Some(e) = self.exit {
            return Ok(Some(e));
        }
        if let Some(st) = self.child.try_wait()? {
            let e = Exit { status: self.status_of(st.code()), timed_out: false };
            self.finish(e);
            return Ok(Some(e));
        }
        Ok(None)
    }

    /// The image's exit status for what the process returned.
    fn status_of(&self, code: Option<i32>) -> Option<i32> {
        if self.hosted { code.map(crate::protocol::hosted_exit_status) } else { code }
    }

    fn finish(&mut self, e: Exit) {
        self.exit = Some(e);
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }

    /// Waits for QEMU to exit; kills it after `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Result<Exit> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(e) = self.try_exit()? {
                return Ok(e);
            }
            if Instant::now() >= deadline {
                return self.kill();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills QEMU (if still running) and reaps it.
    pub fn kill(&mut self) -> Result<Exit> {
        if let Some(e) = self.try_exit()? {
            return Ok(e);
        }
        let _ = self.child.kill();
        let st = self.child.wait()?;
        let e = Exit { status: self.status_of(st.code()), timed_out: true };
        self.finish(e);
        Ok(e)
    }

    /// A short description of how it ended plus the last COM1 lines and stderr, for
    /// error messages.
    pub fn diagnostics(&self) -> String {
        let com1 = self.com1();
        let tail = &com1[com1.len().saturating_sub(15)..];
        let what = self.what;
        let mut s = match self.exit {
            Some(Exit { timed_out: true, .. }) => format!("{what} ran past its timeout and was killed"),
            Some(Exit { status, .. }) => format!(
                "{what} exited with status {} ({})",
                status.map_or("none".to_string(), |c| c.to_string()),
                crate::protocol::describe_exit(status)
            ),
            None => format!("{what} is still running"),
        };
        s.push_str(&format!("\n--- last COM1 lines ({} in all) ---\n", com1.len()));
        for l in tail {
            s.push_str(l);
            s.push('\n');
        }
        let err = self.stderr();
        if !err.trim().is_empty() {
            s.push_str(&format!("--- {what} stderr ---\n"));
            s.push_str(err.trim_end());
            s.push('\n');
        }
        s
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Boots `image` with `append` and no NICs' traffic, waits for it to exit (at most
/// `timeout`), and returns the exit and COM1. For boot-option tests.
pub fn boot_and_wait(cfg: &QemuConfig, timeout: Duration) -> Result<(Exit, Vec<String>, String)> {
    let mut q = Qemu::spawn(cfg, None)?;
    let e = q.wait(timeout)?;
    if e.timed_out {
        bail!("{}", q.diagnostics());
    }
    Ok((e, q.com1(), q.stderr()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line() {
        let cfg = QemuConfig {
            image: "/x/cadence".into(),
            append: BootOptions::default().set("mode", "boot").set("ctl", "on"),
            nics: vec![
                DgramNic { mac: Mac([0x52, 0x54, 0, 0xca, 0xde, 0]), qemu_port: 4000, host_port: 4001 }.into(),
                DgramNic { mac: Mac([0x52, 0x54, 0, 0xca, 0xde, 1]), qemu_port: 4002, host_port: 4003 }.into(),
            ],
            com2: "/out/com2.defmt".into(),
            smp: 1,
            kvm: None,
            extra_args: vec![],
            cmdline_file: None,
            arch: Arch::X86_64,
        };
        let s = cfg.display();
        for part in [
            "-machine q35 -cpu max -m 256M -smp 1 -display none",
            "-no-reboot -device isa-debug-exit,iobase=0xf4,iosize=0x04 -serial stdio -serial file:/out/com2.defmt",
            "-netdev dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=4000,remote.type=inet,remote.host=127.0.0.1,remote.port=4001",
            "-device virtio-net-pci,disable-legacy=on,netdev=n0,speed=1000,duplex=full,mac=52:54:00:ca:de:00",
            "-device virtio-net-pci,disable-legacy=on,netdev=n1,speed=1000,duplex=full,mac=52:54:00:ca:de:01",
            "-kernel /x/cadence -append 'mode=boot ctl=on'",
        ] {
            assert!(s.contains(part), "missing {part:?} in {s}");
        }
        let pvm = crate::accel::Kvm::EmulatesRing0 { why: String::new() };
        let kvm = QemuConfig { kvm: Some(pvm), smp: 2, ..cfg.clone() }.display();
        assert!(
            kvm.contains("-accel kvm -cpu EPYC,+tsc-deadline,+invtsc")
                && !kvm.contains("-cpu max")
                && kvm.contains("-smp 2"),
            "{kvm}"
        );
        let hw = QemuConfig { kvm: Some(crate::accel::Kvm::Hardware), ..cfg.clone() }.display();
        assert!(hw.contains("-accel kvm -cpu host,+tsc-deadline,+invtsc"), "{hw}");
        let tcg = QemuConfig { kvm: Some(crate::accel::Kvm::Unusable), ..cfg }.display();
        assert!(tcg.contains("-cpu max") && !tcg.contains("-accel"), "{tcg}");
    }

    #[test]
    fn tap_command_line() {
        let mac = Mac([0x52, 0x54, 0, 0xca, 0xde, 0]);
        let mq = QemuNic::from(TapNic { mac, ifname: "cad123_00".into(), queues: 4, igb: false }).args(0).join(" ");
        assert_eq!(
            mq,
            "-netdev tap,id=n0,ifname=cad123_00,script=no,downscript=no,queues=4,vhost=off \
             -device virtio-net-pci,disable-legacy=on,netdev=n0,mq=on,rss=on,vectors=10,speed=1000,duplex=full,mac=52:54:00:ca:de:00"
        );
        let one = QemuNic::from(TapNic { mac, ifname: "t".into(), queues: 1, igb: false }).args(3).join(" ");
        assert_eq!(
            one,
            "-netdev tap,id=n3,ifname=t,script=no,downscript=no,queues=1,vhost=off \
             -device virtio-net-pci,disable-legacy=on,netdev=n3,speed=1000,duplex=full,mac=52:54:00:ca:de:00"
        );
    }

    /// With a command-line file, the key stays out of the arguments (and so out of `ps`) and
    /// the file is the owner's alone.
    #[test]
    fn a_command_line_file_keeps_the_key_out_of_the_arguments() -> Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("cadence-qemu-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("cmdline.ini");
        let cfg = QemuConfig {
            image: "/x/cadence".into(),
            append: BootOptions::default().set("ctl", "port:0").set("ctl_key", "00112233445566778899aabbccddeeff"),
            nics: vec![],
            com2: "/out/com2.defmt".into(),
            smp: 1,
            kvm: None,
            extra_args: vec![],
            cmdline_file: Some(file.clone()),
            arch: Arch::X86_64,
        };
        let args = cfg.args().join(" ");
        assert!(!args.contains("00112233") && !args.contains("-append"), "{args}");
        assert!(args.contains(&format!("-readconfig {}", file.display())), "{args}");
        cfg.write_cmdline_file()?;
        let text = std::fs::read_to_string(&file)?;
        assert_eq!(text, "[machine]\n  append = \"ctl=port:0 ctl_key=00112233445566778899aabbccddeeff\"\n");
        assert_eq!(std::fs::metadata(&file)?.permissions().mode() & 0o777, 0o600);
        let bad = QemuConfig { append: BootOptions::default().set("x", "a\"b"), ..cfg.clone() };
        assert!(bad.write_cmdline_file().is_err());
        // Past what QEMU's config reader takes on one line: -append.
        let long = QemuConfig { append: BootOptions::default().set("x", "0".repeat(1100)), ..cfg };
        assert!(long.args().join(" ").contains("-append x=000"));
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    #[test]
    fn free_ports_are_distinct_enough() -> Result<()> {
        let a = free_udp_port()?;
        let b = free_udp_port()?;
        assert!(a > 0 && b > 0);
        Ok(())
    }
}

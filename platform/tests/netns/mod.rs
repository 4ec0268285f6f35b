//! A network namespace with a veth pair of its own, for the hosted integration tests.
//!
//! Each test runs twice: the parent (the test harness) checks that it is root, creates
//! `cdn-<pid>-<test>` with `ip netns add`, a veth pair `va`/`vb` inside it (IPv6 off so
//! the kernel sends no router solicitations), and re-runs its own test binary for that
//! one test through `ip netns exec` — which also remounts /sys for the namespace — with
//! `CADENCE_NETNS` set; the child sees the variable and runs the body. The namespace
//! (and the veths in it) is deleted when the parent's guard drops, on success or panic.

use std::process::Command;

/// The environment variable that marks the child.
const CHILD: &str = "CADENCE_NETNS";

/// Runs `body` inside a fresh namespace holding `va`/`vb` (`queues` RX and TX queues
/// each end), as test `name` of this binary.
pub fn run(name: &str, queues: (u32, u32), body: fn()) {
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    require_root(name);
    let ns = Netns::create(name, queues);
    let exe = std::env::current_exe().expect("own test binary");
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, &ns.name)
        .output()
        .expect("running `ip netns exec`");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "test body in namespace {} failed ({}):\n{text}", ns.name, out.status);
    assert!(text.contains("1 passed"), "the child ran no test (filter `{name}`):\n{text}");
    // Show the child's report lines (stats, modes) in the parent's captured output.
    for line in text.lines() {
        if let Some(i) = line.find("hosted:") {
            println!("{}", &line[i..]);
        }
    }
}

fn require_root(name: &str) {
    // SAFETY: geteuid takes no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "test {name} needs root: it creates a network namespace, veth interfaces, AF_PACKET/AF_XDP \
         sockets and an XDP program (run `sudo -E cargo test -p cadence-platform`; CI runs as root)"
    );
}

struct Netns {
    name: String,
}

impl Netns {
    fn create(test: &str, (rxq, txq): (u32, u32)) -> Self {
        let short: String = test.chars().filter(char::is_ascii_alphanumeric).take(24).collect();
        let name = format!("cdn-{}-{short}", std::process::id());
        ip(&["netns", "add", &name]);
        let ns = Self { name };
        let n = ns.name.as_str();
        for key in ["all", "default"] {
            let sysctl = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            sh(Command::new("ip").args(["netns", "exec", n, "sysctl", "-qw", &sysctl]));
        }
        let (rxq, txq) = (rxq.to_string(), txq.to_string());
        let q = ["numrxqueues", &rxq, "numtxqueues", &txq];
        let mut add = vec!["-n", n, "link", "add", "va"];
        add.extend(q);
        add.extend(["type", "veth", "peer", "name", "vb"]);
        add.extend(q);
        ip(&add);
        for dev in ["lo", "va", "vb"] {
            ip(&["-n", n, "link", "set", dev, "up"]);
        }
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

fn ip(args: &[&str]) {
    sh(Command::new("ip").args(args));
}

fn sh(cmd: &mut Command) {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}")).expect("the command runs");
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

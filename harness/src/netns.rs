//! The hosted rig's wiring: a network namespace of its own for the dataplane, and two
//! veth pairs whose far ends stay with the host (the generator and checker).
//!
//! ```text
//!  host (xtask)                         netns cad<pid>_<n> (the hosted dataplane)
//!  gen0 (AF_PACKET: inject, check) ════ dut0  port 0
//!  gen1 (AF_PACKET: inject, check) ════ dut1  port 1
//! ```
//!
//! Every interface gets IPv6 disabled and no address, so the kernels on either side send
//! nothing of their own into the test; all four are up. `lanes` > 1 gives each veth that
//! many RX/TX queues (a veth's RX queue is the sender's TX queue, which the kernel picks
//! per flow). Needs root (`CAP_NET_ADMIN`, `CAP_SYS_ADMIN` for namespaces) and iproute2's
//! `ip`. Everything is removed on drop (deleting the namespace deletes the dut ends, and
//! with them their peers).

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result, bail};

pub use cadence_build::provision::IP;

/// One namespace and two veth pairs.
#[derive(Debug)]
pub struct VethPairs {
    /// The namespace the dataplane runs in.
    pub netns: String,
    /// Host ends, port `p`'s at index `p`.
    pub host: Vec<String>,
    /// Dataplane ends (inside `netns`), as `host`.
    pub dut: Vec<String>,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new(IP).args(args).output().with_context(|| {
        format!("running `{IP} {}` (iproute2; `cargo xtask test` installs it as root on Debian)", args.join(" "))
    })?;
    if !out.status.success() {
        bail!("`{IP} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Writes `1` to `disable_ipv6` of `ifname`, in namespace `netns` when given.
fn disable_ipv6(netns: Option<&str>, ifname: &str) -> Result<()> {
    if !Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(()); // no IPv6 in this kernel, no IPv6 noise either
    }
    let key = format!("net.ipv6.conf.{ifname}.disable_ipv6=1");
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new(IP);
            c.args(["netns", "exec", ns, "sysctl", "-q", "-w", &key]);
            c
        }
        None => {
            let mut c = Command::new("sysctl");
            c.args(["-q", "-w", &key]);
            c
        }
    };
    let out = cmd.output().context("running sysctl")?;
    if !out.status.success() {
        bail!("sysctl -w {key} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

impl VethPairs {
    /// Creates the namespace and the pairs, with `queues` RX/TX queues per veth.
    pub fn create(queues: u16) -> Result<VethPairs> {
        Self::create_ports(queues, 2)
    }

    /// As [`VethPairs::create`], with `ports` pairs (a dataplane of that many ports, 1..=8).
    pub fn create_ports(queues: u16, ports: usize) -> Result<VethPairs> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        if !(1..=8).contains(&ports) {
            bail!("{ports} veth pairs: 1..=8");
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % 100;
        let id = std::process::id();
        let netns = format!("cad{id}_{n:02}");
        let host: Vec<String> = (0..ports).map(|p| format!("cg{id}_{n:02}{p}")).collect();
        let dut: Vec<String> = (0..ports).map(|p| format!("cd{id}_{n:02}{p}")).collect();
        for name in host.iter().chain(&dut) {
            if name.len() > 15 {
                bail!("interface name {name} is longer than 15 bytes");
            }
        }
        ip(&["netns", "add", &netns])?;
        // From here on, Drop cleans up whatever was made.
        let pairs = VethPairs { netns, host, dut };
        let q = queues.max(1).to_string();
        for i in 0..ports {
            ip(&[
                "link",
                "add",
                &pairs.host[i],
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                &pairs.dut[i],
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                &pairs.netns,
            ])?;
            disable_ipv6(None, &pairs.host[i])?;
            disable_ipv6(Some(&pairs.netns), &pairs.dut[i])?;
            ip(&["link", "set", &pairs.host[i], "up"])?;
            ip(&["-n", &pairs.netns, "link", "set", &pairs.dut[i], "up"])?;
        }
        ip(&["-n", &pairs.netns, "link", "set", "lo", "up"])?;
        Ok(pairs)
    }

    /// The MAC address of a host or dataplane end.
    pub fn mac_of(&self, dut: bool, port: usize) -> Result<[u8; 6]> {
        let (ns, name) = if dut { (Some(self.netns.as_str()), &self.dut[port]) } else { (None, &self.host[port]) };
        let mut cmd = Command::new(IP);
        if let Some(ns) = ns {
            cmd.args(["-n", ns]);
        }
        let out = cmd.args(["-br", "link", "show", name]).output().context("running ip link show")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mac = text.split_whitespace().nth(2).context("no MAC in `ip -br link show`")?;
        mac.parse::<crate::protocol::Mac>().map(|m| m.0).map_err(|e| anyhow::anyhow!("bad MAC {mac} of {name}: {e}"))
    }

    /// Sets the MAC address of a dataplane (`dut`) or host end.
    pub fn set_mac(&self, dut: bool, port: usize, mac: [u8; 6]) -> Result<()> {
        let m = crate::protocol::Mac(mac).to_string();
        if dut {
            ip(&["-n", &self.netns, "link", "set", &self.dut[port], "address", &m])
        } else {
            ip(&["link", "set", &self.host[port], "address", &m])
        }
    }

    /// Deletes a dataplane end (and with it its host peer): a veth that vanishes mid-run.
    pub fn delete_dut(&self, port: usize) -> Result<()> {
        ip(&["-n", &self.netns, "link", "del", &self.dut[port]])
    }
}

impl Drop for VethPairs {
    fn drop(&mut self) {
        // Deleting the namespace destroys the dut ends, and a veth dies with its peer.
        let _ = Command::new(IP).args(["netns", "del", &self.netns]).output();
        for h in &self.host {
            if Path::new("/sys/class/net").join(h).exists() {
                let _ = Command::new(IP).args(["link", "del", h]).output();
            }
        }
    }
}

/// Whether this process can make namespaces and veths (root).
pub fn can_create() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
        && Command::new(IP).arg("-V").output().is_ok_and(|o| o.status.success())
}

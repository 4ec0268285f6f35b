//! Open vSwitch as the rack's top-of-rack switch (issue 30), started in a run directory of
//! its own and stopped on drop.
//!
//! What works on these machines (Debian 12's `openvswitch-switch` 3.1, no OVS kernel
//! module): `ovsdb-server` on a fresh database (`ovsdb-tool create` from
//! `/usr/share/openvswitch/vswitch.ovsschema`) and `ovs-vswitchd`, both detached with pid
//! files, every path (`OVS_RUNDIR`, `OVS_DBDIR`, `OVS_LOGDIR`, `OVS_SYSCONFDIR`) in the run
//! directory, so nothing touches the system's `/var/run/openvswitch` or a system service;
//! a bridge with `datapath_type=netdev` (the userspace datapath: vswitchd logs that the
//! `ovs_datapath` netlink family is missing and carries on) whose ports are veths (opened
//! as raw sockets by the netdev datapath); `protocols=OpenFlow13`; `fail_mode=secure` (no
//! learning-switch fallback while the controller is away). `ovs-ofctl -O OpenFlow13 … unix:RUN/BR.mgmt`
//! reads the table directly. `ovs-vsctl del-controller` flushes the flow table (a bridge
//! left without a primary controller starts empty); pointing the bridge at another target
//! keeps it. The daemons run in the root namespace; the rack's hosts are in
//! namespaces of their own behind veths.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::hosts::run;

/// A running OVS (ovsdb-server + ovs-vswitchd) with one bridge; both daemons are stopped
/// on drop.
#[derive(Debug)]
pub struct Ovs {
    dir: PathBuf,
    /// The bridge.
    pub bridge: String,
}

/// Whether OVS's tools are installed.
pub fn present() -> bool {
    cadence_build::provision::ovs_present()
}

impl Ovs {
    /// Starts the daemons in `dir` (emptied first) with bridge `bridge`.
    pub fn start(dir: &Path, bridge: &str) -> Result<Self> {
        if !present() {
            bail!(
                "Open vSwitch is not installed (packages: {}; `cargo xtask test` installs it as root on Debian)",
                cadence_build::provision::OVS_PACKAGES.join(" ")
            );
        }
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let dir = std::path::absolute(dir)?;
        let me = Self { dir: dir.clone(), bridge: bridge.to_string() };
        let db = dir.join("conf.db");
        run(Command::new("ovsdb-tool").arg("create").arg(&db).arg("/usr/share/openvswitch/vswitch.ovsschema"))?;
        run(me
            .env(&mut Command::new("ovsdb-server"))
            .arg(&db)
            .arg(format!("--remote=punix:{}", dir.join("db.sock").display()))
            .arg(format!("--pidfile={}", dir.join("ovsdb-server.pid").display()))
            .arg(format!("--unixctl={}", dir.join("ovsdb-server.ctl").display()))
            .arg(format!("--log-file={}", dir.join("ovsdb-server.log").display()))
            .arg("--detach"))?;
        me.vsctl(&["--no-wait", "init"])?;
        run(me
            .env(&mut Command::new("ovs-vswitchd"))
            .arg(format!("unix:{}", dir.join("db.sock").display()))
            .arg(format!("--pidfile={}", dir.join("ovs-vswitchd.pid").display()))
            .arg(format!("--unixctl={}", dir.join("ovs-vswitchd.ctl").display()))
            .arg(format!("--log-file={}", dir.join("ovs-vswitchd.log").display()))
            .arg("--detach"))?;
        me.vsctl(&[
            "add-br",
            bridge,
            "--",
            "set",
            "bridge",
            bridge,
            "datapath_type=netdev",
            "protocols=OpenFlow13",
            "fail_mode=secure",
        ])?;
        Ok(me)
    }

    fn env<'a>(&self, c: &'a mut Command) -> &'a mut Command {
        for v in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            c.env(v, &self.dir);
        }
        c
    }

    /// `ovs-vsctl ARGS` against this database (a 10 s timeout), which must succeed.
    pub fn vsctl(&self, args: &[&str]) -> Result<String> {
        let db = format!("--db=unix:{}", self.dir.join("db.sock").display());
        let o = run(self.env(&mut Command::new("ovs-vsctl")).arg(db).arg("--timeout=10").args(args))?;
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// `ovs-ofctl -O OpenFlow13 CMD unix:…/BRIDGE.mgmt ARGS`, which must succeed.
    pub fn ofctl(&self, cmd: &str, args: &[&str]) -> Result<String> {
        let mgmt = format!("unix:{}", self.dir.join(format!("{}.mgmt", self.bridge)).display());
        let o = run(self.env(&mut Command::new("ovs-ofctl")).args(["-O", "OpenFlow13", cmd, &mgmt]).args(args))?;
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Adds interface `ifname` (already up, in the root namespace) as OpenFlow port `ofport`.
    pub fn add_port(&self, ifname: &str, ofport: u32) -> Result<()> {
        self.vsctl(&[
            "add-port",
            &self.bridge,
            ifname,
            "--",
            "set",
            "interface",
            ifname,
            &format!("ofport_request={ofport}"),
        ])
        .map(|_| ())
    }

    /// Points the bridge at a controller listening on `127.0.0.1:port`.
    pub fn set_controller(&self, port: u16) -> Result<()> {
        self.vsctl(&["set-controller", &self.bridge, &format!("tcp:127.0.0.1:{port}")]).map(|_| ())
    }

    /// The run directory (logs, database, sockets).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills a daemon by its pid file and waits (up to 5 s) for it to go.
    fn kill(&self, name: &str) {
        let Ok(pid) = std::fs::read_to_string(self.dir.join(format!("{name}.pid"))) else { return };
        let pid = pid.trim().to_string();
        let _ = Command::new("kill").arg(&pid).output();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            // A detached daemon is not our child; a zombie's status file says so.
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "));
            if zombie {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        let _ = self.vsctl(&["--if-exists", "del-br", &self.bridge]);
        self.kill("ovs-vswitchd");
        self.kill("ovsdb-server");
    }
}

/// The context of a failure of OVS: the tail of vswitchd's log.
pub fn log_tail(ovs: &Ovs) -> String {
    let log = std::fs::read_to_string(ovs.dir().join("ovs-vswitchd.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Context for an error.
pub fn with_log<T>(r: Result<T>, ovs: &Ovs) -> Result<T> {
    r.with_context(|| format!("ovs-vswitchd.log:\n{}", log_tail(ovs)))
}

//! The operator's commands, one definition for the `cadence-ctl` binary and for `cargo xtask
//! ctl | chain | profile` (which flattens [`Cmd`] into its own).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

/// An operator's command.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Send one management command to a running dataplane and print the reply: to a
    /// `cargo xtask run` in progress (it serves target/cadence-ctl.sock), or to an image
    /// started by hand with `-serial unix:PATH,server=on,wait=off` (`--socket PATH`).
    /// Commands: stats, show acl|lb|nat|accounting|l3fwd|neigh|rss, acl add RULE, acl del ID,
    /// route add prefix:P,port:N,mac:M, route del P, lb backend add|del VIP BACKEND,
    /// rss move FROM TO, rss restore, stop, help (docs/PROTOCOL.md).
    Ctl {
        /// The socket (default: target/cadence-ctl.sock of this checkout).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Seconds to wait for the reply.
        #[arg(long, default_value_t = 10)]
        timeout: u64,
        /// The command and its arguments.
        #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
        command: Vec<String>,
    },
    /// Check a chain file (TOML) and print its text form: what the image gets as boot
    /// module 0 and the hosted binary reads with `--chain`.
    Chain {
        /// The chain file.
        file: PathBuf,
    },
    /// Run the rack controller (NetBlaze's ingress mapper) for an Open vSwitch bridge: it
    /// listens for the bridge (`ovs-vsctl set-controller BR tcp:ADDR`, with
    /// `protocols=OpenFlow13 fail_mode=secure`), rebuilds its state from the bridge's table,
    /// and installs one entry per destination aggregate (docs/NETBLAZE.md "The rack on Open
    /// vSwitch"). Servers' reports come on standard input as `SERVER @report …` lines (the
    /// server's index, then the line its dataplane printed with `report_ms=`); events are
    /// printed as `@rack …` lines. Stop it with Ctrl-C: the entries stay in the switch, and the
    /// next run continues from them.
    Rack {
        /// Address to listen on for the switch.
        #[arg(long, default_value = "127.0.0.1:6653")]
        listen: String,
        /// The switch's OpenFlow port of each server, in server order (repeat the option).
        #[arg(long = "server-port", required = true)]
        server_ports: Vec<u32>,
        /// Destination prefix length of an aggregate.
        #[arg(long, default_value_t = 24)]
        prefix_len: u8,
        /// τ: a server takes new aggregates while it reports fewer dedicated cores.
        #[arg(long, default_value_t = 6)]
        tau: u16,
        /// Priority of the aggregate entries (the default entry is at 0).
        #[arg(long, default_value_t = 100)]
        priority: u16,
        /// The baseline instead of the mapper: an OpenFlow `select` group over the servers'
        /// ports (a hash per flow, what ECMP does) takes all IPv4.
        #[arg(long)]
        select: bool,
    },
    /// Measure NetBlaze's capacity predictor of a chain on this machine (the chain's real
    /// code over software NICs, timed with the TSC) and write the profile file
    /// (docs/PROTOCOL.md "NetBlaze profile"). A debug build runs a release build of itself.
    Profile {
        /// The chain file (TOML).
        #[arg(long)]
        chain: PathBuf,
        /// Output file (default: the chain file with `.profile`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Epoch length in µs the frontiers are for ((SLO − 40)/2: 80 for a 200 µs SLO).
        #[arg(long, default_value_t = 80)]
        epoch_us: u64,
        /// Generated rules added to the chain's ACL (the paper's ACL holds 1.5k rules).
        #[arg(long, default_value_t = 1500)]
        acl_rules: usize,
        /// Epochs measured per grid point (median).
        #[arg(long, default_value_t = 9)]
        reps: usize,
    },
}

/// Runs `cmd`; the exit status says whether the dataplane (or the check) said yes.
pub fn run(cmd: Cmd) -> Result<ExitCode> {
    match cmd {
        Cmd::Ctl { socket, timeout, command } => {
            let path = socket.unwrap_or_else(crate::ctl::default_socket);
            let mut client = crate::ctl::Client::connect(&path)?;
            let reply = client.request(&command.join(" "), Duration::from_secs(timeout))?;
            for d in &reply.data {
                println!("{d}");
            }
            match &reply.result {
                Ok(s) if s.is_empty() => println!("ok"),
                Ok(s) => println!("ok {s}"),
                Err((name, msg)) => {
                    eprintln!("error={name}: {msg}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        Cmd::Rack { listen, server_ports, prefix_len, tau, priority, select } => {
            if prefix_len > 32 {
                bail!("--prefix-len {prefix_len}: an IPv4 prefix length is 0..=32");
            }
            let mut ingress = cadence_core::netblaze::IngressConfig::default();
            (ingress.prefix_len, ingress.tau) = (prefix_len, tau);
            let cfg = crate::rack::RackConfig { server_ports, ingress, priority, select_baseline: select };
            let mut c = crate::rack::Controller::new(cfg)?;
            let listener = std::net::TcpListener::bind(&listen).with_context(|| format!("--listen {listen}"))?;
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in std::io::stdin().lines().map_while(Result::ok) {
                    if let Some(r) = crate::rack::parse_input(&line)
                        && tx.send(r).is_err()
                    {
                        break;
                    }
                }
            });
            println!("@rack listening addr={listen}");
            let stop = std::sync::atomic::AtomicBool::new(false);
            c.serve(&listener, &rx, &stop, &mut |e| println!("{}", crate::rack::event_line(&e)))?;
        }
        Cmd::Chain { file } => {
            let c = crate::chain::load(&file)?;
            print!("{}", c.text);
        }
        Cmd::Profile { chain, out, epoch_us, acl_rules, reps } => {
            if cfg!(debug_assertions) {
                // Measure optimized code: run this command again from a release build.
                let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
                let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
                let mut cmd = std::process::Command::new(cargo);
                cmd.current_dir(root)
                    .args(["run", "--release", "--quiet", "-p", "cadence-ctl", "--", "profile", "--chain"])
                    .arg(std::path::absolute(&chain).unwrap_or(chain))
                    .args(["--epoch-us", &epoch_us.to_string(), "--acl-rules", &acl_rules.to_string()])
                    .args(["--reps", &reps.to_string()]);
                if let Some(o) = &out {
                    cmd.arg("--out").arg(std::path::absolute(o).unwrap_or(o.clone()));
                }
                let status = cmd.status().context("running the release build")?;
                if !status.success() {
                    bail!("cadence-ctl profile (release) failed: {status}");
                }
                return Ok(ExitCode::SUCCESS);
            }
            let opts = crate::profile::ProfileOptions { chain, epoch_us, acl_rules, reps };
            let p = crate::profile::profile(&opts, &mut |line| eprintln!("{line}"))?;
            let text = crate::profile::render(&p, &opts, &crate::profile::today())?;
            let out = out.unwrap_or_else(|| crate::profile::default_out(&opts.chain));
            std::fs::write(&out, &text).with_context(|| format!("writing {}", out.display()))?;
            print!("{text}");
            eprintln!("wrote {}", out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `cadence-ctl`: the operator's tool beside a running dataplane (`cargo install --path ctl`).

use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "cadence-ctl", about = "Cadence's operator tool: management commands, chain files, NetBlaze profiles")]
struct Cli {
    #[command(subcommand)]
    cmd: cadence_ctl::cli::Cmd,
}

fn main() -> ExitCode {
    match cadence_ctl::cli::run(Cli::parse().cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

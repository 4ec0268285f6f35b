//! `cadence-sim metronome --out DIR`: runs the Metronome sweep and writes CSV and SVG files.

use std::path::PathBuf;

use anyhow::{Context, bail};

fn usage() -> &'static str {
    "usage: cadence-sim metronome [--out DIR]   (default DIR: target/sim/metronome)\n       \
     cadence-sim netblaze [--out DIR] [--seconds N] [--seed N] [--slo-us N] [--profile FILE] [--preset campus|backbone] [--no-rack]"
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(cmd) = args.next() else { bail!(usage()) };
    match cmd.as_str() {
        "metronome" => {
            let mut out = PathBuf::from("target/sim/metronome");
            while let Some(a) = args.next() {
                match a.as_str() {
                    "--out" => out = PathBuf::from(args.next().context("--out needs a directory")?),
                    _ => bail!("unknown argument {a:?}\n{}", usage()),
                }
            }
            let summary = cadence_sim::run_metronome_sweep(&out)?;
            println!(
                "variant                  M  load   cpu(cores)  vacation(us)  T_S(us)  busy-tries  p99 lat(us)  drops"
            );
            for r in &summary.rows {
                println!(
                    "{:<24} {:>1}  {:.2}   {:>9.4}  {:>12.2}  {:>7.2}  {:>9.2}%  {:>11.1}  {}",
                    r.variant.name,
                    r.workers,
                    r.load,
                    r.cpu_cores,
                    r.vacation_mean_us,
                    r.short_timeout_mean_us,
                    100.0 * r.busy_try_ratio,
                    r.latency_p99_us,
                    r.dropped
                );
            }
            for f in &summary.files {
                println!("wrote {}", f.display());
            }
            Ok(())
        }
        "netblaze" => {
            let mut out = PathBuf::from("target/sim/netblaze");
            let mut opts = cadence_sim::netblaze::StudyOptions::default();
            while let Some(a) = args.next() {
                let mut val = || args.next().with_context(|| format!("{a} needs a value"));
                match a.as_str() {
                    "--out" => out = PathBuf::from(val()?),
                    "--seconds" => opts.seconds = val()?.parse().context("--seconds")?,
                    "--seed" => opts.seed = val()?.parse().context("--seed")?,
                    "--slo-us" => opts.slo_ns = val()?.parse::<u64>().context("--slo-us")? * 1000,
                    "--profile" => opts.profile = PathBuf::from(val()?),
                    "--preset" => {
                        opts.presets = match val()?.as_str() {
                            "campus" => vec![cadence_sim::netblaze::trace::Preset::Campus],
                            "backbone" => vec![cadence_sim::netblaze::trace::Preset::Backbone],
                            p => bail!("unknown preset {p:?}"),
                        }
                    }
                    "--no-rack" => opts.rack = false,
                    _ => bail!("unknown argument {a:?}\n{}", usage()),
                }
            }
            let t0 = std::time::Instant::now();
            let s = cadence_sim::netblaze::run_study(&out, &opts)?;
            print!("{}", cadence_sim::netblaze::study::rows_to_table(&s.rows));
            for l in &s.rack {
                println!("{l}");
            }
            for f in &s.files {
                println!("wrote {}", f.display());
            }
            println!("({:.1} s)", t0.elapsed().as_secs_f64());
            Ok(())
        }
        "-h" | "--help" | "help" => {
            println!("{}", usage());
            Ok(())
        }
        _ => bail!("unknown command {cmd:?}\n{}", usage()),
    }
}

//! Toolchain provisioning: the targets and components that `rust-toolchain.toml` lists.
//!
//! rustup installs what the toolchain file lists only when auto-install is on; these
//! machines run with `RUSTUP_AUTO_INSTALL=0`, older rustups never did it, and a machine
//! may have been set up before the file named a target. So the project's own commands
//! (`cargo xtask build | run | test`, and every image build) look for each listed target
//! and component and add what is missing with `rustup target add` / `rustup component
//! add`, the same way [`crate::provision`] installs QEMU. Without rustup they say exactly
//! what is missing and fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::workspace;

/// The toolchain file, relative to the workspace root.
pub const FILE: &str = "rust-toolchain.toml";

/// What the toolchain file asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Wanted {
    #[serde(default)]
    pub channel: Option<String>,
    #[serde(default)]
    pub targets: Vec<String>,
    #[serde(default)]
    pub components: Vec<String>,
}

#[derive(Deserialize)]
struct File {
    toolchain: Wanted,
}

/// Parses the toolchain file's text.
pub fn parse(text: &str) -> Result<Wanted> {
    let f: File = toml::from_str(text).with_context(|| format!("{FILE}: no [toolchain] table"))?;
    Ok(f.toolchain)
}

/// Reads `<root>/rust-toolchain.toml`.
pub fn wanted() -> Result<Wanted> {
    let path = workspace::workspace_root().join(FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("parsing {}", path.display()))
}

/// What is installed, as rustup lists it (`rustup target list --installed`,
/// `rustup component list --installed`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installed {
    pub targets: Vec<String>,
    /// Component names as rustup prints them, e.g. `clippy-x86_64-unknown-linux-gnu`.
    pub components: Vec<String>,
    /// The host triple rustup appends to host-dependent components' names.
    pub host: String,
}

/// What to add (pure; unit-tested).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Missing {
    pub targets: Vec<String>,
    pub components: Vec<String>,
}

impl Missing {
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty() && self.components.is_empty()
    }
}

/// Compares what is wanted with what rustup lists. A component is installed when rustup
/// lists it as `<name>-<host triple>` (host-dependent ones: rustfmt, clippy) or by its
/// bare name (host-independent ones: rust-src).
pub fn missing(want: &Wanted, have: &Installed) -> Missing {
    let has_component =
        |c: &str| have.components.iter().any(|h| h == c || h.strip_suffix(&have.host) == Some(&format!("{c}-")));
    Missing {
        targets: want.targets.iter().filter(|t| !have.targets.contains(t)).cloned().collect(),
        components: want.components.iter().filter(|c| !has_component(c)).cloned().collect(),
    }
}

fn lines(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out).lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect()
}

/// The toolchain cargo runs us under: rustup's proxies export `RUSTUP_TOOLCHAIN` to their
/// children; otherwise the one rustup resolves in the workspace (the toolchain file).
fn active_toolchain() -> Result<String> {
    if let Some(tc) = std::env::var("RUSTUP_TOOLCHAIN").ok().filter(|t| !t.is_empty()) {
        return Ok(tc);
    }
    let out = rustup().args(["show", "active-toolchain"]).output().context("running rustup show active-toolchain")?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.split_whitespace().next() {
        Some(tc) if out.status.success() => Ok(tc.to_string()),
        _ => bail!(
            "rustup has no toolchain for {} (rustup show active-toolchain: {}): run `rustup toolchain install` in {}",
            FILE,
            String::from_utf8_lossy(&out.stderr).trim(),
            workspace::workspace_root().display()
        ),
    }
}

/// The cargo to nest: `$CARGO` (set by cargo for `cargo run` and tests) or `cargo`,
/// pinned to the workspace's toolchain ([`pin`]) so that a dependency's
/// own `rust-toolchain` file cannot pick another compiler for that dependency.
pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    pin(&mut c);
    c
}

/// Pins a nested cargo to the workspace's toolchain by exporting `RUSTUP_TOOLCHAIN`.
///
/// Cargo runs `rustc` through rustup's proxy with the crate's own directory as the
/// working directory, and rustup honours a toolchain file found there: some published
/// crates (`x86_64`, `linked_list_allocator`) ship `rust-toolchain` naming `nightly`, so a
/// cargo started without `RUSTUP_TOOLCHAIN` (by its path, not through the proxy) compiles
/// those crates with another toolchain, one that lacks the bare-metal target (E0463,
/// "can't find crate for `core`"). rustup's `cargo` proxy exports the variable; this does
/// the same when nothing did. Without rustup there is nothing to pin.
pub fn pin(cmd: &mut Command) {
    if std::env::var_os("RUSTUP_TOOLCHAIN").is_some_and(|t| !t.is_empty()) {
        return;
    }
    static WORKSPACE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let tc = WORKSPACE.get_or_init(|| if has_rustup() { active_toolchain().ok() } else { None });
    if let Some(tc) = tc {
        cmd.env("RUSTUP_TOOLCHAIN", tc);
    }
}

fn rustup() -> Command {
    let mut c = Command::new("rustup");
    c.current_dir(workspace::workspace_root());
    c
}

fn has_rustup() -> bool {
    rustup().arg("--version").output().is_ok_and(|o| o.status.success())
}

fn list(toolchain: &str, what: &str) -> Result<Vec<String>> {
    let out = rustup()
        .args([what, "list", "--installed", "--toolchain", toolchain])
        .output()
        .with_context(|| format!("running rustup {what} list"))?;
    if !out.status.success() {
        bail!(
            "rustup {what} list --installed --toolchain {toolchain} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(lines(&out.stdout))
}

/// The host triple (`rustc -vV`).
fn host_triple() -> Result<String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .current_dir(workspace::workspace_root())
        .output()
        .context("running rustc -vV")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|h| h.trim().to_string())
        .context("rustc -vV printed no host line")
}

/// What rustup says is installed in `toolchain`.
pub fn installed(toolchain: &str) -> Result<Installed> {
    Ok(Installed {
        targets: list(toolchain, "target")?,
        components: list(toolchain, "component")?,
        host: host_triple()?,
    })
}

/// Without rustup: a target is there when the sysroot has its `libcore`.
fn sysroot_has_target(target: &str) -> bool {
    let out = Command::new("rustc").args(["--print", "target-libdir", "--target", target]).output();
    let Ok(out) = out else { return false };
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    out.status.success() && has_libcore(&dir)
}

fn has_libcore(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .is_ok_and(|rd| rd.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().starts_with("libcore-")))
}

/// Without rustup: a component is there when its tool answers `--version`.
fn tool_runs(component: &str) -> bool {
    let mut cmd = match component {
        "clippy" => {
            let mut c = cargo();
            c.arg("clippy");
            c
        }
        "rustfmt" => Command::new("rustfmt"),
        other => Command::new(other),
    };
    cmd.arg("--version").output().is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed ({st})");
    }
    Ok(())
}

/// Makes sure every target and component of the toolchain file is installed, adding the
/// missing ones with rustup. Returns what it added.
pub fn ensure() -> Result<Missing> {
    let want = wanted()?;
    if !has_rustup() {
        let gone = Missing {
            targets: want.targets.iter().filter(|t| !sysroot_has_target(t)).cloned().collect(),
            components: want.components.iter().filter(|c| !tool_runs(c)).cloned().collect(),
        };
        if gone.is_empty() {
            return Ok(Missing::default());
        }
        bail!(
            "the Rust toolchain lacks {} and rustup is not available to add them: install them with your \
             toolchain's installer (the rust-std package for each target; rustfmt/clippy), or install rustup \
             (https://rustup.rs) and run the command again",
            describe(&gone)
        );
    }
    let tc = active_toolchain()?;
    let have = installed(&tc)?;
    let need = missing(&want, &have);
    if need.is_empty() {
        return Ok(need);
    }
    eprintln!("xtask: toolchain {tc} lacks {} ({FILE} lists them); adding", describe(&need));
    if !need.targets.is_empty() {
        run(rustup().args(["target", "add", "--toolchain", &tc]).args(&need.targets))
            .context("adding the toolchain's targets")?;
    }
    if !need.components.is_empty() {
        run(rustup().args(["component", "add", "--toolchain", &tc]).args(&need.components))
            .context("adding the toolchain's components")?;
    }
    let after = missing(&want, &installed(&tc)?);
    if !after.is_empty() {
        bail!("rustup finished but toolchain {tc} still lacks {}", describe(&after));
    }
    Ok(need)
}

fn describe(m: &Missing) -> String {
    let mut parts = Vec::new();
    if !m.targets.is_empty() {
        parts.push(format!("target {}", m.targets.join(", ")));
    }
    if !m.components.is_empty() {
        parts.push(format!("component {}", m.components.join(", ")));
    }
    parts.join(" and ")
}

/// The fresh-machine check of `cargo xtask test`: removes the bare-metal target and
/// rustfmt from the toolchain, runs the README's first command (`cargo xtask run`, short)
/// exactly as a user would, and checks that it passed and that both came back.
pub fn fresh_machine_check() -> Result<()> {
    let tc = active_toolchain()?;
    let want = wanted()?;
    let before = missing(&want, &installed(&tc)?);
    if !before.is_empty() {
        bail!("toolchain {tc} lacks {} before the check; `cargo xtask test` should have added it", describe(&before));
    }
    run(rustup().args(["target", "remove", "--toolchain", &tc, workspace::TARGET]))?;
    run(rustup().args(["component", "remove", "--toolchain", &tc, "rustfmt"]))?;
    let removed = missing(&want, &installed(&tc)?);
    let expect = Missing { targets: vec![workspace::TARGET.to_string()], components: vec!["rustfmt".to_string()] };
    if removed != expect {
        bail!("after removing {}, rustup reports {} missing", describe(&expect), describe(&removed));
    }
    // Exactly as a user's shell runs it: `cargo` from PATH (rustup's proxy, which resolves
    // the toolchain file), with nothing inherited from this cargo.
    let mut cmd = Command::new("cargo");
    cmd.current_dir(workspace::workspace_root()).args(["xtask", "run", "--seconds", "2", "--rate", "500"]);
    for var in ["RUSTUP_TOOLCHAIN", "RUSTC", "CARGO", "CARGO_TARGET_DIR"] {
        cmd.env_remove(var);
    }
    let ran = run(&mut cmd);
    // Whatever happened, leave the toolchain whole for the steps after this one.
    let restored = ensure();
    ran.context("`cargo xtask run` on a toolchain without the bare-metal target and rustfmt")?;
    let added = restored?;
    if !added.is_empty() {
        bail!("`cargo xtask run` passed but did not add {} itself", describe(&added));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_projects_file() {
        let w = wanted().unwrap();
        assert_eq!(w.channel.as_deref(), Some("stable"));
        assert!(w.targets.contains(&workspace::TARGET.to_string()), "{w:?}");
        assert!(w.components.contains(&"rustfmt".to_string()) && w.components.contains(&"clippy".to_string()));
    }

    #[test]
    fn parse_errors_name_the_table() {
        let e = parse("[other]\nx = 1\n").unwrap_err();
        assert!(format!("{e:#}").contains("[toolchain]"), "{e:#}");
        assert_eq!(parse("[toolchain]\nchannel = \"1.95\"\n").unwrap().targets, Vec::<String>::new());
    }

    #[test]
    fn finds_what_is_missing() {
        let want = Wanted {
            channel: None,
            targets: vec!["x86_64-unknown-none".into()],
            components: vec!["rustfmt".into(), "clippy".into(), "rust-src".into()],
        };
        let full = Installed {
            targets: vec!["x86_64-unknown-linux-gnu".into(), "x86_64-unknown-none".into()],
            components: vec![
                "cargo-x86_64-unknown-linux-gnu".into(),
                "clippy-x86_64-unknown-linux-gnu".into(),
                "rust-src".into(),
                "rustfmt-x86_64-unknown-linux-gnu".into(),
            ],
            host: "x86_64-unknown-linux-gnu".into(),
        };
        assert!(missing(&want, &full).is_empty());
        let bare = Installed {
            targets: vec!["x86_64-unknown-linux-gnu".into()],
            components: vec![
                "rust-std-x86_64-unknown-linux-gnu".into(),
                "rustfmt-preview-x86_64-unknown-linux-gnu".into(),
                "clippy-aarch64-unknown-linux-gnu".into(),
            ],
            host: "x86_64-unknown-linux-gnu".into(),
        };
        assert_eq!(
            missing(&want, &bare),
            Missing {
                targets: vec!["x86_64-unknown-none".into()],
                components: vec!["rustfmt".into(), "clippy".into(), "rust-src".into()],
            }
        );
        // Only whole names count: `rust-std` is not `rust-src`, `rustfmt-preview` is not
        // `rustfmt`, and another host's clippy is not this host's.
        let m = missing(&want, &Installed { components: vec!["rust-std".into()], ..full.clone() });
        assert_eq!(m.components, vec!["rustfmt".to_string(), "clippy".into(), "rust-src".into()]);
    }
}

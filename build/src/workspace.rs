//! Where the workspace is: its root, its target directory, and the bare-metal target the
//! image is built for.

use std::path::{Path, PathBuf};

/// The bare-metal target.
pub const TARGET: &str = "x86_64-unknown-none";
/// The workspace root (this crate lives one level below it).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The cargo target directory: `CARGO_TARGET_DIR` or `<root>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => {
            let d = PathBuf::from(d);
            if d.is_absolute() { d } else { workspace_root().join(d) }
        }
        _ => workspace_root().join("target"),
    }
}

//! The module map of `src/lib.rs` is also the crate's layering: a module uses only the modules
//! listed above it, so no two modules import each other, directly or around a loop.
//!
//! This test reads the map's table from `lib.rs` and every non-test source file of each
//! module, and fails on any `crate::<module>` path (outside comments) that names a module
//! listed below the file's own. Test files (`tests.rs`, `tests/`, `loom_*.rs`, `testkit.rs`,
//! inline `#[cfg(test)] mod tests`) may reach anywhere and are skipped.

use std::fs;
use std::path::{Path, PathBuf};

/// The modules in the order of `lib.rs`'s table (`//! | [`name`] | ... |` rows).
fn layers(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| l.strip_prefix("//! | [`"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect()
}

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether `rel` (a path under `src/`) is test code.
fn is_test(rel: &Path) -> bool {
    rel.components().any(|c| {
        let s = c.as_os_str().to_string_lossy();
        s == "tests" || s == "tests.rs" || s == "testkit.rs" || s == "testing.rs" || s.starts_with("loom_")
    }) || rel == Path::new("test_frames.rs")
}

/// The `crate::<name>` paths of `text` outside comments and before an inline test module,
/// with their 1-based lines.
fn uses(text: &str) -> Vec<(usize, String)> {
    let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or(text);
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            out.push((i + 1, name));
        }
    }
    out
}

#[test]
fn every_module_uses_only_the_modules_listed_above_it_in_lib_rs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let order = layers(&lib);
    assert!(order.len() >= 20, "lib.rs's module table not found: {order:?}");
    // Every declared module is on the map, and every row names a declared module.
    let declared: Vec<&str> =
        lib.lines().filter_map(|l| l.trim().strip_prefix("pub mod ")).map(|l| l.trim_end_matches(';')).collect();
    let mut on_map = order.clone();
    on_map.sort();
    let mut decl: Vec<String> = declared.iter().map(|s| (*s).to_owned()).collect();
    decl.sort();
    assert_eq!(on_map, decl, "lib.rs's table must list every public module once");

    let rank = |m: &str| order.iter().position(|o| o == m);
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src");
        if is_test(rel) {
            continue;
        }
        let top = rel.components().next().map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned());
        let Some(own) = top.as_deref().and_then(rank) else { continue };
        let text = fs::read_to_string(f).expect("source");
        for (line, name) in uses(&text) {
            if rank(&name).is_some_and(|r| r > own) {
                wrong.push(format!("{}:{line}: uses crate::{name}, listed below it", rel.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layering of lib.rs:\n{}", wrong.join("\n"));
}

#[test]
fn the_check_finds_an_upward_use_and_ignores_comments_and_tests() {
    let text = "use crate::buf::Pool;\n// crate::worker in a comment\nfn f() { crate::nf::x(); } // crate::manage\n#[cfg(test)]\nmod tests {\n use crate::worker;\n}\n";
    let found: Vec<_> = uses(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(found, ["buf", "nf"]);
    assert!(is_test(Path::new("nf/tests.rs")) && is_test(Path::new("sync/loom_lease.rs")));
    assert!(!is_test(Path::new("nf/mod.rs")));
    assert_eq!(layers("//! | [`a`] | x |\n//! | [`b`] | y |\n"), ["a", "b"]);
}

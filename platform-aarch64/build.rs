//! Links the boot-check image with `link.ld` when building for bare-metal aarch64.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo:rerun-if-changed=link.ld");
    let os = std::env::var("CARGO_CFG_TARGET_OS");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH");
    if os.as_deref() == Ok("none") && arch.as_deref() == Ok("aarch64") {
        println!("cargo:rustc-link-arg-bins=-T{dir}/link.ld");
    }
}

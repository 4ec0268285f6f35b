//! Links the bare-metal image: x86_64 with `link.ld` (defmt's `defmt.x` comes from
//! `.cargo/config.toml`), aarch64 with the aarch64 platform's `link.ld` (the arm64 `Image`
//! layout) and `defmt.x`.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo:rerun-if-changed=link.ld");
    println!("cargo:rerun-if-changed=../platform-aarch64/link.ld");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("none") {
        return;
    }
    match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => println!("cargo:rustc-link-arg-bins=-T{dir}/link.ld"),
        Ok("aarch64") => {
            println!("cargo:rustc-link-arg-bins=-T{dir}/../platform-aarch64/link.ld");
            println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
        }
        _ => {}
    }
}

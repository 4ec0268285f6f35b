//! (being written)
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("cadence-firmware is a bare-metal image: build it with `cargo xtask build`");
    std::process::exit(2);
}

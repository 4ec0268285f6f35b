//! `firmware::config::BootConfig::parse` over arbitrary command lines: never panics, errors
//! format, and a line that parsed parses the same way again with its tokens reordered
//! (options are independent `key=value` pairs; duplicates are refused either way).
#![no_main]

use cadence_firmware::config::BootConfig;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(line) = core::str::from_utf8(data) else { return };
    match BootConfig::parse(line) {
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty());
        }
        Ok(cfg) => {
            let mut tokens: Vec<&str> = line.split_ascii_whitespace().collect();
            tokens.reverse();
            let again = tokens.join(" ");
            let cfg2 = BootConfig::parse(&again).expect("the same options in another order");
            assert_eq!(format!("{cfg:?}"), format!("{cfg2:?}"), "order changed the result");
            let (mbps, why) = cfg.line_rate_mbps(Some(10_000));
            assert!(mbps > 0 && !why.is_empty());
        }
    }
});

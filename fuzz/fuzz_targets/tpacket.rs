//! `cadence_drivers::fuzzing::tpacket`: the fuzzer plays the device (or kernel) side of the
//! rings; the harness asserts buffer conservation and well-formed frames after every step
//! (see its docs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cadence_drivers::fuzzing::tpacket(data));

#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nvfp4_model::fuzzing::encoders(data));

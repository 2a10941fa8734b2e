//! `copy`'s reader and writer over random rows (see `harness::copy`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::copy(data);
});

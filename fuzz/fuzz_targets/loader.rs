//! The row decoder over random rows written straight into the tables (see `harness::loader`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::loader(data);
});

//! `store-repair`'s steps over random damage (see `harness::repair`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::repair(data);
});

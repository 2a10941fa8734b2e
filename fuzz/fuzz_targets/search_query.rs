//! A search query from any bytes (see `harness::search_query`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::search_query(data);
});

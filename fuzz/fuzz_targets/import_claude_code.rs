//! The claude_code importer over arbitrary bytes (see `harness::import`).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::import(session_store::import::Format::ClaudeCode, data);
});

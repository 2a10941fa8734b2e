//! Integration tests, compiled as one crate: each module covers one failure class against
//! real SQLite files in a temporary directory.

mod broken_db;
mod cli;
mod compaction;
mod compaction_kill;
mod contention;
mod corrupt_file;
mod crash;
mod disk_full;
mod fault_support;
mod forensics;
mod fork;
#[path = "../fuzz/harness.rs"]
mod fuzz_harness;
mod fuzz_targets;
mod hostile;
mod idempotency;
mod import_fixtures;
mod last_turns;
mod lossless;
mod manage_cli;
mod migration_kill;
mod pages;
mod prompt_cache;
mod provider_transcripts;
mod read_only;
mod regression;
mod repair;
mod repair_blackbox;
mod repair_cli;
mod repair_fuzz;
mod responses_gemini;
mod retention;
mod revert;
mod search;
mod self_contained;
mod store;
mod store_props;
mod turn_fixtures;
mod turn_properties;
mod usage;
mod util;
mod views;
mod views_props;

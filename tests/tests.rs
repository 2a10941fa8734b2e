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
mod idempotency;
mod import_fixtures;
mod last_turns;
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
mod revert;
mod store;
mod store_props;
mod turn_fixtures;
mod turn_properties;
mod util;

//! Integration tests, compiled as one crate: each module covers one failure class against
//! real SQLite files in a temporary directory.

mod backends;
mod broken_db;
mod cli;
mod compaction;
mod compaction_kill;
mod conformance;
mod contention;
mod corrupt_file;
mod crash;
mod disk_full;
mod fault_support;
mod forensics;
mod import_fixtures;
mod migration_kill;
mod pages;
mod postgres_cli;
mod provider_transcripts;
mod read_only;
mod regression;
mod repair;
mod repair_blackbox;
mod repair_cli;
mod repair_fuzz;
mod revert;
mod self_contained;
mod store;
mod store_props;
mod turn_fixtures;
mod turn_properties;
mod util;

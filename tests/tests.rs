//! Integration tests, compiled as one crate: each module covers one failure class against
//! real SQLite files in a temporary directory.

mod cli;
mod compaction;
mod import_fixtures;
mod pages;
mod provider_transcripts;
mod regression;
mod revert;
mod store;
mod store_props;
mod turn_fixtures;
mod turn_properties;
mod util;

mod broken_db;
mod forensics;
mod repair;
mod repair_cli;

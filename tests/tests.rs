//! Integration tests, compiled as one crate: each module covers one failure class against
//! real SQLite files in a temporary directory.

mod cli;
mod import_fixtures;
mod provider_transcripts;
mod regression;
mod store;
mod store_props;
mod util;

//! Integration tests.
mod compaction;
mod revert;
mod turn_fixtures;

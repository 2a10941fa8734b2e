//! Integration tests.
mod compaction;
mod pages;
mod revert;
mod turn_fixtures;
mod turn_properties;

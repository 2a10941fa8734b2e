//! Integration tests.
mod cli;
mod import_fixtures;

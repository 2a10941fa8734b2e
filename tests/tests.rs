//! Integration tests.
mod broken_db;
mod repair;
mod repair_cli;

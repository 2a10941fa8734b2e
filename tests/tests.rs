//! Integration tests.
mod broken_db;
mod forensics;
mod repair;
mod repair_cli;

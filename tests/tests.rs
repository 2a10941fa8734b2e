//! Integration tests.
mod broken_db;
mod repair;

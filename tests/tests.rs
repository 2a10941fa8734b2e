//! Integration tests, compiled as one crate (one binary, one link).

mod contention;
mod crash;
mod disk_full;
mod fault_support;
mod migration_kill;
mod read_only;

//! Integration tests, compiled as one crate: each module covers one failure class against
//! real SQLite files in a temporary directory.

mod contention;
mod crash;
mod disk_full;
mod fault_support;
mod migration_kill;
mod read_only;
mod regression;
mod store;
mod store_props;
mod util;

//! The storage layer: the only place that talks SQL.
//!
//! A [`Store`] owns r2d2 pools of SQLite connections to one file (or, with the `postgres`
//! feature, of PostgreSQL connections). Every SQLite connection runs in WAL mode with
//! `foreign_keys=ON` (but for the appends that prove their keys themselves, `pool.rs`),
//! `synchronous=NORMAL` (or `FULL`, [`Durability`]) and a busy timeout; every write is one
//! `BEGIN IMMEDIATE` transaction, so two writers queue on the lock instead of failing on the
//! read-to-write upgrade, and a reader never sees half of a write.

use std::path::Path;
use std::sync::Arc;

use crate::error::{OpenError, Result};
use engine::Engine;
use pool::SqliteEngine;

mod apply;
mod budget;
mod bundle;
mod compaction;
mod copy;
mod encode;
mod engine;
mod export;
pub mod file;
mod fork;
mod handle;
mod idempotency;
mod import;
mod memory;
mod options;
mod orphans;
mod overview;
#[cfg(feature = "postgres")]
mod pg;
mod pool;
mod raw;
mod read;
pub mod repair;
mod reports;
mod retention;
mod revert;
mod rows;
mod schema;
mod search;
mod snippet;
mod sql;
mod sqlite;
mod stream;
mod subagents;
mod terms;
mod time;
mod transcript;
mod turns;
mod url;
mod usage;
mod views;
mod write;
mod writer;

pub use bundle::{validate_bundle, BUNDLE_FORMAT, BUNDLE_VERSION};
pub use compaction::CompactionOutcome;
pub use copy::CopyReport;
pub(crate) use encode::MAX_JSON_DEPTH;
pub use export::ExportOptions;
pub use fork::Forked;
pub use handle::Store;
pub use import::{BranchSession, ImportSummary, ImportedSessions};
pub use options::{ConnectionSettings, Durability, StoreOptions};
pub use overview::{OverviewRow, SessionHealth, SessionRow};
pub use raw::StoredPart;
pub use read::ReadableSession;
pub use reports::{
    Lineage, ObjectSize, Reclaimed, SearchHit, SearchOptions, SessionOverview, SessionSize,
    SizeReport,
};
pub use retention::Deleted;
pub use revert::Reverted;
pub use schema::{latest_schema_version, schema_version};
pub use search::search_notes;
pub use stream::OpenMessage;
pub use terms::MAX_SEARCH_TERMS;
pub use time::clock;
pub use transcript::TranscriptFormat;
pub use url::{is_url as is_database_url, redact as redact_database_url};
pub use usage::{SessionUsage, TokenTotals, TurnUsage};

impl Store {
    /// Opens (or creates) the database at `path` and brings it to the current schema.
    ///
    /// `path` is a file path, never an SQLite URI: `:memory:`, `file:...`, a directory, a
    /// FIFO, a device or a file in a missing folder is refused at once with
    /// [`crate::Error::InvalidPath`], and nothing is created. A path that exists but is not SQLite,
    /// or a database whose migration history is not a prefix of ours, is refused before
    /// anything is written to it. A new database is created and migrated under a temporary
    /// name and then put in place, so a failure (a full disk) leaves no file behind. Errors
    /// come back at once with their cause, never after the pool's connection timeout.
    ///
    /// A `postgres://` or `postgresql://` URL opens that PostgreSQL database instead (the
    /// same tables, migrated with the PostgreSQL dialect of the same history). A build
    /// without the cargo feature `postgres` refuses one with [`crate::Error::FeatureMissing`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        Self::open_with(path, &StoreOptions::default())
    }

    /// [`Store::open`] with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: &StoreOptions) -> Result<Self, OpenError> {
        let engine: Arc<dyn Engine> = match path.as_ref().to_str().filter(|p| is_database_url(p)) {
            Some(url) => open_postgres(url, options),
            None => {
                SqliteEngine::open(path.as_ref(), options).map(|e| Arc::new(e) as Arc<dyn Engine>)
            }
        }
        .map_err(OpenError::from_open)?;
        Ok(Self { engine })
    }
}

/// The PostgreSQL engine on `url`.
#[cfg(feature = "postgres")]
fn open_postgres(url: &str, options: &StoreOptions) -> Result<Arc<dyn Engine>> {
    Ok(Arc::new(pg::PgStore::open(url, options)?))
}

/// A build without the PostgreSQL engine: a URL is refused, naming the missing feature.
#[cfg(not(feature = "postgres"))]
fn open_postgres(url: &str, _options: &StoreOptions) -> Result<Arc<dyn Engine>> {
    Err(crate::error::Error::FeatureMissing {
        feature: "postgres",
        what: format!("opening {}", redact_database_url(url)),
    })
}

#[cfg(all(test, not(feature = "postgres")))]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn a_build_without_postgres_refuses_urls_by_the_missing_feature() {
        for url in [
            "postgres://u:secret@127.0.0.1/db",
            "postgresql://127.0.0.1:5432/db?sslmode=disable",
        ] {
            let error = Store::open(url).expect_err(url);
            assert!(
                matches!(
                    &error,
                    OpenError::FeatureMissing {
                        feature: "postgres",
                        ..
                    }
                ),
                "{url}: {error:?}"
            );
            let text = error.to_string();
            assert!(text.contains("`postgres`"), "{text}");
            assert!(!text.contains("secret"), "{text}");
            let inspected = repair::inspect_database_url(url).expect_err(url);
            assert!(matches!(inspected, Error::FeatureMissing { .. }), "{url}");
        }
    }
}

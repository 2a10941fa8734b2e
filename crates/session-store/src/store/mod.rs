//! The storage layer: the only place that talks SQL.
//!
//! A [`Store`] owns an r2d2 pool of SQLite connections to one file. Every connection runs in
//! WAL mode with `foreign_keys=ON`, `synchronous=NORMAL` (or `FULL`, [`Durability`]) and a busy timeout; every write is
//! one `BEGIN IMMEDIATE` transaction, so two writers queue on the lock instead of failing on
//! the read-to-write upgrade, and a reader never sees half of a write.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use r2d2::ManageConnection;
use r2d2::Pool;
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::error::{Error, Result};
use engine::Engine;
use sql::Sql;

mod apply;
mod budget;
mod bundle;
mod compaction;
mod copy;
mod engine;
pub mod file;
mod fork;
mod idempotency;
mod import;
mod overview;
#[cfg(feature = "postgres")]
mod pg;
mod raw;
mod read;
pub mod repair;
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
pub use fork::{Forked, Lineage};
pub use import::{ImportSummary, ImportedSessions};
pub use overview::{OverviewRow, SessionHealth, SessionOverview, SessionRow};
pub use raw::StoredPart;
pub use read::ReadableSession;
pub use retention::{Deleted, ObjectSize, Reclaimed, SessionSize, SizeReport};
pub use revert::Reverted;
pub use search::{search_notes, SearchHit, SearchOptions, MAX_SEARCH_TERMS};
pub use stream::OpenMessage;
pub use transcript::TranscriptFormat;
pub use usage::{SessionUsage, TokenTotals, TurnUsage};
mod export;
pub use export::ExportOptions;

pub use file::PathProblem;
pub use schema::{latest_schema_version, schema_version};
pub use url::{is_url as is_database_url, redact as redact_database_url};

/// How a [`Store`] opens its file.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// How long a connection waits for another's write lock before `SQLITE_BUSY` (on
    /// PostgreSQL: for a session's row lock, as `lock_timeout`, and for a connection).
    pub busy_timeout: Duration,
    /// The most connections the pool opens at once.
    pub max_connections: u32,
    /// Open without write access: no migration runs, and every write fails with a typed
    /// error (`Error::is_read_only`).
    pub read_only: bool,
    /// Caps the file at this many pages (SQLite `PRAGMA max_page_count`) on every connection
    /// of the pool: a write that needs more fails with a typed error (`Error::is_full`) and
    /// leaves nothing behind, as on a full disk. `None` keeps SQLite's own limit. A quota,
    /// and the way the disk-full tests reach the store's connections.
    /// Ignored on PostgreSQL (quotas are the server's).
    pub max_page_count: Option<u64>,
    /// What a commit promises on power loss (SQLite's `synchronous` on every pooled
    /// connection). PostgreSQL keeps the server's own setting for both.
    pub durability: Durability,
}

/// What a commit promises if the machine loses power right after it returns.
///
/// Both settings keep the file consistent (WAL): the difference is only whether the latest
/// commits can be lost. A process that dies (a crash, SIGKILL) loses nothing under either.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// SQLite `synchronous=NORMAL` in WAL mode: the WAL is synced at checkpoints, not at
    /// each commit, so the latest commits may be lost on power loss. The default.
    #[default]
    Normal,
    /// SQLite `synchronous=FULL`: the WAL is synced at every commit, so an acknowledged
    /// write survives power loss.
    Full,
}

impl Durability {
    /// The SQLite `synchronous` value this setting runs with.
    pub fn synchronous(self) -> &'static str {
        match self {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        }
    }
}

impl std::str::FromStr for Durability {
    type Err = String;

    /// `full` or `normal` (any case), as the CLIs' `--durability` takes it.
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "full" => Ok(Durability::Full),
            "normal" => Ok(Durability::Normal),
            other => Err(format!("durability {other:?}: expected full or normal")),
        }
    }
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(30),
            max_connections: 8,
            read_only: false,
            max_page_count: None,
            durability: Durability::Normal,
        }
    }
}

/// What [`Store::connection_settings`] reads back from a pooled connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// `PRAGMA journal_mode` (`wal`).
    pub journal_mode: String,
    /// `PRAGMA foreign_keys`.
    pub foreign_keys: bool,
    /// `PRAGMA synchronous` as a number (`1` is NORMAL, `2` FULL).
    pub synchronous: String,
    /// `PRAGMA busy_timeout` in milliseconds.
    pub busy_timeout_ms: u64,
}

/// A session database: one SQLite file, or a PostgreSQL database named by a `postgres://`
/// URL (with the cargo feature `postgres`), migrated to the current schema, behind a pool.
///
/// `Store` is `Send + Sync` and cheap to clone; clones share the pool. Every operation is
/// written once over the engine seam (`store/engine.rs`).
#[derive(Clone, Debug)]
pub struct Store {
    engine: Arc<dyn Engine>,
}

impl Store {
    /// Opens (or creates) the database at `path` and brings it to the current schema.
    ///
    /// `path` is a file path, never an SQLite URI: `:memory:`, `file:...`, a directory, a
    /// FIFO, a device or a file in a missing folder is refused at once with
    /// [`Error::InvalidPath`], and nothing is created. A path that exists but is not SQLite,
    /// or a database whose migration history is not a prefix of ours, is refused before
    /// anything is written to it. A new database is created and migrated under a temporary
    /// name and then put in place, so a failure (a full disk) leaves no file behind. Errors
    /// come back at once with their cause, never after the pool's connection timeout.
    ///
    /// A `postgres://` or `postgresql://` URL opens that PostgreSQL database instead (the
    /// same tables, migrated with the PostgreSQL dialect of the same history). A build
    /// without the cargo feature `postgres` refuses one with [`Error::FeatureMissing`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, &StoreOptions::default())
    }

    /// [`Store::open`] with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: &StoreOptions) -> Result<Self> {
        let engine: Arc<dyn Engine> = match path.as_ref().to_str().filter(|p| is_database_url(p)) {
            Some(url) => open_postgres(url, options)?,
            None => Arc::new(SqliteEngine::open(path.as_ref(), options)?),
        };
        Ok(Self { engine })
    }

    /// The database file; for a PostgreSQL store, its URL without the password.
    pub fn path(&self) -> &Path {
        self.engine.location()
    }

    /// True when this store is a PostgreSQL database (opened on a `postgres://` URL).
    pub fn is_postgres(&self) -> bool {
        self.engine.name() == "postgres"
    }

    /// The settings a pooled connection runs with, read back from SQLite
    /// ([`Error::Unsupported`] on PostgreSQL).
    pub fn connection_settings(&self) -> Result<ConnectionSettings> {
        self.engine.connection_settings()
    }

    /// Runs `f` in one write transaction of the engine (SQLite: `BEGIN IMMEDIATE`) and
    /// commits if it returns `Ok`.
    ///
    /// Dropping the transaction on `Err` rolls everything back, so a refused or failed write
    /// leaves no trace.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut &mut dyn Sql) -> Result<T>) -> Result<T> {
        engine::run(|work| self.engine.run_write(work), f)
    }

    /// Runs `f` inside one read transaction, so all its queries see the same snapshot.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&mut &mut dyn Sql) -> Result<T>) -> Result<T> {
        engine::run(|work| self.engine.run_read(work), f)
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
    Err(Error::FeatureMissing {
        feature: "postgres",
        what: format!("opening {}", redact_database_url(url)),
    })
}

/// The SQLite engine: an r2d2 pool of connections to one file.
#[derive(Clone, Debug)]
pub(crate) struct SqliteEngine {
    pool: Pool<SqliteConnectionManager>,
    path: PathBuf,
}

impl SqliteEngine {
    /// Opens (or creates) the file and migrates it: see [`Store::open`].
    fn open(path: &Path, options: &StoreOptions) -> Result<Self> {
        let path = path.to_path_buf();
        let usage = if options.read_only {
            file::Use::Existing
        } else {
            file::Use::OpenOrCreate
        };
        let found = file::check_path(&path, usage)?;
        let access = if options.read_only {
            file::read_only_access(&path)?
        } else {
            file::Access::Plain
        };
        if found == file::Found::Missing {
            file::create_database(&path, options.max_page_count)?;
        } else {
            // Before any pragma writes to the file: refuse a foreign migration history.
            let (target, flags) = match &access {
                file::Access::Plain => (path.clone(), file::flags(options.read_only)),
                immutable => immutable.target(&path),
            };
            let conn = Connection::open_with_flags(&target, flags)?;
            schema::pending_migrations(&conn).map_err(|e| not_a_database(e, &path))?;
        }
        let manager = connection_manager(&path, &access, options);
        // The first connection is opened here, not through the pool: the pool retries a
        // failing open until its connection timeout and then reports only that it timed out.
        let mut first = manager.connect()?;
        if options.read_only {
            schema::require_current(&first)?;
        } else {
            schema::migrate(&mut first)?;
            views::refresh(&mut first)?;
        }
        drop(first);
        let pool = Pool::builder()
            .max_size(options.max_connections.max(1))
            // No idle connection kept warm: a background top-up still opening when the process
            // exits would keep SQLite from checkpointing and removing the WAL on the last close.
            .min_idle(Some(0))
            // A pooled SQLite connection does not go stale like a network one; checking it
            // on every checkout ran an empty batch per call (~3% of an append, issue 16).
            .test_on_check_out(false)
            .connection_timeout(options.busy_timeout + Duration::from_secs(5))
            .build(manager)?;
        Ok(Self { pool, path })
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The pool.
    pub(crate) fn pool(&self) -> &Pool<SqliteConnectionManager> {
        &self.pool
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction and commits if it returns `Ok`.
    ///
    /// Dropping the transaction on `Err` rolls everything back, so a refused or failed write
    /// leaves no trace.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.pool.get()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// Runs `f` inside one read transaction, so all its queries see the same snapshot.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let mut conn = self.pool.get()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let value = f(&tx)?;
        tx.finish()?;
        Ok(value)
    }

    /// The settings a pooled connection runs with, read back from SQLite.
    fn connection_settings(&self) -> Result<ConnectionSettings> {
        let conn = self.pool.get()?;
        let pragma = |name: &str| -> Result<String> {
            Ok(
                conn.query_row(&format!("SELECT * FROM pragma_{name}"), [], |row| {
                    row.get::<_, rusqlite::types::Value>(0).map(|v| match v {
                        rusqlite::types::Value::Integer(i) => i.to_string(),
                        rusqlite::types::Value::Text(t) => t,
                        other => format!("{other:?}"),
                    })
                })?,
            )
        };
        Ok(ConnectionSettings {
            journal_mode: pragma("journal_mode")?,
            foreign_keys: pragma("foreign_keys")? == "1",
            synchronous: pragma("synchronous")?,
            busy_timeout_ms: pragma("busy_timeout")?.parse().unwrap_or(0),
        })
    }
}

/// SQLite says `NotADatabase` only once it reads a page; name the file when it does.
fn not_a_database(error: Error, path: &Path) -> Error {
    match &error {
        _ if error.sqlite().and_then(rusqlite::Error::sqlite_error_code)
            == Some(rusqlite::ErrorCode::NotADatabase) =>
        {
            Error::NotADatabase {
                path: path.to_path_buf(),
            }
        }
        _ => error,
    }
}

fn connection_manager(
    path: &Path,
    access: &file::Access,
    options: &StoreOptions,
) -> SqliteConnectionManager {
    // Never SQLITE_OPEN_URI (a path is a path; the one exception is the immutable URI
    // `file::read_only_access` builds) and never CREATE: a database is only created by
    // `file::create_database`, all-or-nothing.
    let (target, flags) = match access {
        file::Access::Plain => (path.to_path_buf(), file::flags(options.read_only)),
        immutable => immutable.target(path),
    };
    let busy_timeout = options.busy_timeout;
    let read_only = options.read_only;
    let max_page_count = options.max_page_count;
    let durability = options.durability;
    SqliteConnectionManager::file(target)
        .with_flags(flags)
        .with_init(move |conn| {
            configure(conn, busy_timeout, read_only, durability)?;
            if let Some(pages) = max_page_count {
                let pages = i64::try_from(pages).unwrap_or(i64::MAX);
                conn.pragma_update(None, "max_page_count", pages)?;
            }
            Ok(())
        })
}

/// Per-connection settings; WAL is persistent in the file, the others are per connection.
fn configure(
    conn: &mut Connection,
    busy_timeout: Duration,
    read_only: bool,
    durability: Durability,
) -> rusqlite::Result<()> {
    conn.busy_timeout(busy_timeout)?;
    if !read_only {
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(mode, "journal_mode stayed {mode}, not WAL");
        }
    }
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "synchronous", durability.synchronous())?;
    // Every statement the store runs stays prepared on every pooled connection: an append
    // alone runs a dozen, and rusqlite's default cache of 16 evicted them when reads ran
    // on the same connection (issue 16, BENCHMARKS.md).
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Reads map the file instead of copying each page into SQLite's cache (issue 16).
    conn.pragma_update(None, "mmap_size", MMAP_SIZE)?;
    Ok(())
}

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 64;

/// Bytes of the database file each connection reads through a memory map.
const MMAP_SIZE: i64 = 256 * 1024 * 1024;

/// The store's clock, for tools that need `now` (export at this moment, backup names) but
/// may not read the clock themselves (`clippy.toml`).
pub fn clock() -> DateTime<Utc> {
    now()
}

/// The store's clock; history logic never reads it (it takes `now` as a parameter).
#[allow(clippy::disallowed_methods)]
pub(crate) fn now() -> DateTime<Utc> {
    Utc::now()
}

/// Timestamps are stored as RFC 3339 in UTC with microseconds, e.g. `2026-11-25T21:42:30.123456Z`.
pub(crate) fn format_time(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Parses a stored timestamp: RFC 3339, or a time without offset, read as UTC: SQLite's own
/// `YYYY-MM-DD HH:MM:SS[.fff]` (what `datetime('now')` writes in a hand-made row) or ISO
/// 8601's `YYYY-MM-DDTHH:MM:SS[.ffffff]` (what Python's `datetime.utcnow().isoformat()` writes).
pub(crate) fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(time.with_timezone(&Utc));
    }
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(text, format).ok())
        .map(|naive| naive.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_times_parse_back_exactly() {
        let now = now();
        let text = format_time(now);
        assert!(text.ends_with('Z'));
        let back = parse_time(&text).expect("parses");
        assert_eq!(back.timestamp_micros(), now.timestamp_micros());
        assert!(parse_time("2026-01-02 03:04:05").is_some());
        assert!(parse_time("yesterday").is_none());
    }

    #[cfg(not(feature = "postgres"))]
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
                    Error::FeatureMissing {
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

    #[test]
    fn times_without_offset_from_other_writers_parse_as_utc() {
        let expected = parse_time("2026-01-02T03:04:05.123456Z");
        assert!(expected.is_some());
        assert_eq!(parse_time("2026-01-02T03:04:05.123456"), expected);
        assert_eq!(parse_time("2026-01-02 03:04:05.123456"), expected);
    }
}

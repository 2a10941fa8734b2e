//! The SQLite file behind a pool ([`SqliteEngine`]): opening, migrating and configuring its
//! connections, and its transactions. What it does as an engine is in `sqlite.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use r2d2::{ManageConnection, Pool};
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, TransactionBehavior};

use super::file::{self, not_a_database};
use super::memory::{CallMemory, TailMemory};
use super::options::{ConnectionSettings, Durability, StoreOptions};
use super::{schema, views};
use crate::error::Result;
use crate::model::SessionId;

/// The SQLite engine: two r2d2 pools of connections to one file, one for reads and one for
/// write transactions, which holds one connection.
#[derive(Clone, Debug)]
pub(crate) struct SqliteEngine {
    pool: Pool<SqliteConnectionManager>,
    /// The write transactions' connections: the same settings without the memory map. In a
    /// write transaction SQLite reads a mapped page by first searching the WAL's index for
    /// it (`walFindFrame`) and then mapping it, where an unmapped connection finds the page
    /// in its own cache: 4% of an append's instructions (BENCHMARKS.md). Each also keeps
    /// what its own appends wrote ([`Writer`]).
    writers: Pool<Writers>,
    path: PathBuf,
}

impl SqliteEngine {
    /// Opens (or creates) the file and migrates it: see [`Store::open`](crate::Store::open).
    pub(super) fn open(path: &Path, options: &StoreOptions) -> Result<Self> {
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
        let manager = connection_manager(&path, &access, options, Mapped::Yes);
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
        let pool = pool_of(manager, options.max_connections, options)?;
        // SQLite writes one transaction at a time: a second write connection would only wait
        // in SQLite's busy handler (sleeps of up to 100 ms) where the pool hands the one
        // connection over as it comes back, and one connection's memory of the tails it wrote
        // (`memory.rs`) then serves every thread of the process.
        let writers = pool_of(
            Writers(connection_manager(&path, &access, options, Mapped::No)),
            1,
            options,
        )?;
        Ok(Self {
            pool,
            writers,
            path,
        })
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The pool.
    pub(crate) fn pool(&self) -> &Pool<SqliteConnectionManager> {
        &self.pool
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction, on a connection of the write pool, and
    /// commits if it returns `Ok`.
    ///
    /// An `Err` (or a panic) rolls everything back, so a refused or failed write leaves no
    /// trace. `BEGIN IMMEDIATE` and `COMMIT` are cached statements, not parsed again for every
    /// write as rusqlite's `Transaction` does (2% of an append's instructions). The
    /// connection forgets the tails its appends left (`store/memory.rs`): this write may
    /// change any of them.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let mut writer = self.writers.get()?;
        writer.memory = None;
        writer.enforce_foreign_keys(true)?;
        let open = begin(&writer.conn)?;
        let value = f(open.0)?;
        open.commit()?;
        Ok(value)
    }

    /// [`SqliteEngine::write`] for the store's writes through [`Sql`](super::sql::Sql) (a
    /// streamed part, a cancel, an import...): `f` also gets the call ids the connection
    /// keeps (`store/memory.rs`), which stay only if the transaction commits.
    pub(crate) fn write_keeping_calls<T>(
        &self,
        f: impl FnOnce(&Connection, &mut CallMemory) -> Result<T>,
    ) -> Result<T> {
        let mut writer = self.writers.get()?;
        writer.memory = None;
        writer.enforce_foreign_keys(true)?;
        let mut calls = writer.calls.take().unwrap_or_default();
        let open = begin(&writer.conn)?;
        let value = f(open.0, &mut calls)?;
        open.commit()?;
        writer.calls = Some(calls);
        Ok(value)
    }

    /// [`SqliteEngine::write`] for an append to `session`: `f` also gets the tails this
    /// connection's earlier appends left, still true if no other connection wrote since
    /// (`PRAGMA data_version`, read under the write lock), and the call ids it keeps; what it
    /// keeps in either stays only if the transaction commits.
    ///
    /// An append that takes its session's remembered tail runs without SQLite's foreign-key
    /// checks ([`Writer::enforce_foreign_keys`]): each row it inserts names its session, which
    /// the append's closing `UPDATE` of the session row finds or the append fails, or a
    /// message the append inserted before it; and it takes no path that deletes (a remembered
    /// tail is the state an append wrote: no revert to forget, no open message to settle),
    /// so no cascade is due. Every other write, and an append whose tail another connection
    /// may have changed, runs with them.
    pub(crate) fn append<T>(
        &self,
        session: &SessionId,
        f: impl FnOnce(&Connection, &mut TailMemory, &mut CallMemory) -> Result<T>,
    ) -> Result<T> {
        let mut writer = self.writers.get()?;
        let memory = writer.memory.take().unwrap_or_default();
        let mut calls = writer.calls.take().unwrap_or_default();
        let remembered = memory.remembers(session);
        writer.enforce_foreign_keys(!remembered)?;
        let mut open = begin(&writer.conn)?;
        let mut memory = memory.since(data_version(open.0)?);
        if remembered && !memory.remembers(session) {
            // Another connection wrote since: this append reads its tail, with the checks.
            drop(open);
            writer.enforce_foreign_keys(true)?;
            open = begin(&writer.conn)?;
            memory = memory.since(data_version(open.0)?);
        }
        let value = f(open.0, &mut memory, &mut calls)?;
        open.commit()?;
        writer.memory = Some(memory);
        writer.calls = Some(calls);
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
    pub(super) fn connection_settings(&self) -> Result<ConnectionSettings> {
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

/// A `BEGIN IMMEDIATE` transaction on `conn`, rolled back unless committed.
fn begin(conn: &Connection) -> Result<RollbackUnlessCommitted<'_>> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    Ok(RollbackUnlessCommitted(conn))
}

/// The file's `PRAGMA data_version` as `conn` sees it: it moves when another connection
/// commits.
fn data_version(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("PRAGMA data_version")?
        .query_row([], |row| row.get(0))?)
}

/// A connection of the write pool: the SQLite connection, with what its own appends wrote
/// (`None` after any other write: forgotten).
pub(crate) struct Writer {
    conn: Connection,
    memory: Option<TailMemory>,
    /// The call ids of the sessions it appended to (`None` after a write that failed).
    calls: Option<CallMemory>,
    /// Whether SQLite enforces foreign keys on the connection now (`PRAGMA foreign_keys`,
    /// on as configured; off only for the appends [`SqliteEngine::append`] describes).
    foreign_keys: bool,
}

impl Writer {
    /// Turns SQLite's foreign-key checks on or off for the next transaction (the pragma is a
    /// no-op inside one); a statement only when that changes.
    fn enforce_foreign_keys(&mut self, on: bool) -> Result<()> {
        if self.foreign_keys != on {
            self.conn
                .pragma_update(None, "foreign_keys", on)
                .map_err(crate::Error::from)?;
            self.foreign_keys = on;
        }
        Ok(())
    }
}

/// The write pool's connections: [`SqliteConnectionManager`]'s, each a [`Writer`].
#[derive(Debug)]
struct Writers(SqliteConnectionManager);

impl ManageConnection for Writers {
    type Connection = Writer;
    type Error = rusqlite::Error;

    fn connect(&self) -> rusqlite::Result<Writer> {
        Ok(Writer {
            conn: self.0.connect()?,
            memory: None,
            calls: None,
            foreign_keys: true,
        })
    }

    fn is_valid(&self, writer: &mut Writer) -> rusqlite::Result<()> {
        self.0.is_valid(&mut writer.conn)
    }

    fn has_broken(&self, writer: &mut Writer) -> bool {
        self.0.has_broken(&mut writer.conn)
    }
}

impl RollbackUnlessCommitted<'_> {
    /// Commits the transaction.
    fn commit(self) -> Result<()> {
        self.0.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

/// The write transaction of [`SqliteEngine::write`] until it commits: dropped earlier (an
/// error, a refusal, a panic), it rolls back, so nothing of the write is kept and the
/// connection goes back to the pool outside any transaction.
struct RollbackUnlessCommitted<'a>(&'a Connection);

impl Drop for RollbackUnlessCommitted<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            if let Err(error) = self.0.execute_batch("ROLLBACK") {
                tracing::warn!(%error, "rolling back a failed write failed");
            }
        }
    }
}

/// A pool of `manager`'s connections, at most `connections`, opened as needed.
fn pool_of<M: ManageConnection>(
    manager: M,
    connections: u32,
    options: &StoreOptions,
) -> Result<Pool<M>> {
    Ok(Pool::builder()
        .max_size(connections.max(1))
        // No idle connection kept warm: a background top-up still opening when the process
        // exits would keep SQLite from checkpointing and removing the WAL on the last close.
        .min_idle(Some(0))
        // A pooled SQLite connection does not go stale like a network one; checking it
        // on every checkout ran an empty batch per call (~3% of an append, issue 16).
        .test_on_check_out(false)
        .connection_timeout(options.busy_timeout + Duration::from_secs(5))
        .build(manager)?)
}

/// Whether a connection reads the file through a memory map ([`MMAP_SIZE`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mapped {
    Yes,
    No,
}

fn connection_manager(
    path: &Path,
    access: &file::Access,
    options: &StoreOptions,
    mapped: Mapped,
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
            if mapped == Mapped::Yes {
                // Reads map the file instead of copying each page into SQLite's cache
                // (issue 16).
                conn.pragma_update(None, "mmap_size", MMAP_SIZE)?;
            }
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
    // One plan per statement whatever its bound values (the query planner's stability
    // guarantee), as PostgreSQL's kept plan: every statement names its session and reads by
    // its keys. Without it, on a file analysed by a SQLite built with STAT4 (this one, by
    // `ANALYZE` or `PRAGMA optimize`), each statement that compares a bound value with an
    // indexed column was prepared again on every run (last turns 2.7x slower).
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    // Every statement the store runs stays prepared on every pooled connection: an append
    // alone runs a dozen, and rusqlite's default cache of 16 evicted them when reads ran
    // on the same connection (issue 16, BENCHMARKS.md).
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 64;

/// Bytes of the database file each connection reads through a memory map.
const MMAP_SIZE: i64 = 256 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NewMessage, SessionId};
    use crate::store::sqlite::SqliteTx;

    /// One plan per statement whatever its values: on a file analysed with STAT4 samples
    /// (`ANALYZE` through this SQLite), a statement that binds a session id is not
    /// prepared again for each new id.
    #[test]
    fn a_statement_keeps_its_plan_for_every_session_on_an_analysed_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.db");
        drop(SqliteEngine::open(&path, &StoreOptions::default()).expect("create"));
        let mut conn = Connection::open(&path).expect("open");
        configure(
            &mut conn,
            Duration::from_secs(5),
            false,
            Durability::default(),
        )
        .expect("configure");
        conn.execute_batch(
            "WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < 29)
             INSERT INTO sessions (id, created_at, updated_at)
             SELECT 'resident-' || n, 'now', 'now' FROM g;
             WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < 2999)
             INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             SELECT 'resident-' || (n / 100), n % 100 + 1, (n % 100) / 2 + 1, 'user', 'now'
             FROM g;
             INSERT INTO parts (message_id, ordinal, kind, text)
             SELECT id, 0, 'text', 'resident' FROM messages;
             ANALYZE;",
        )
        .expect("resident sessions, analysed");
        let samples: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_stat4", [], |row| row.get(0))
            .expect("stat4");
        assert!(samples > 0, "ANALYZE left no STAT4 samples");
        let mut statement = conn
            .prepare(crate::store::rows::SELECT_MESSAGES_BY_TURN)
            .expect("prepare");
        for session in 0..10 {
            let session = format!("resident-{session}");
            let mut rows = statement
                .query(rusqlite::params![session, 1, 5])
                .expect("query");
            while rows.next().expect("row").is_some() {}
        }
        assert_eq!(
            statement.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "prepared again for new values"
        );
    }

    /// An append leaves the tail it wrote with its connection, and any other write forgets
    /// it: the memory is used, and only while it is true (`store/memory.rs`).
    #[test]
    fn an_append_leaves_its_tail_remembered_and_any_other_write_forgets_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine =
            SqliteEngine::open(&dir.path().join("s.db"), &StoreOptions::default()).expect("open");
        let session = SessionId::new("s");
        engine
            .write(|conn| {
                conn.execute(
                    "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 'x', 'x')",
                    [],
                )?;
                Ok(())
            })
            .expect("create");
        let append = |text: &str| {
            engine
                .append(&session, |conn, memory, calls| {
                    let messages = [NewMessage::user(text)];
                    crate::store::write::append_in(
                        &mut SqliteTx::remembering(conn, memory, calls),
                        &session,
                        &messages,
                    )
                })
                .expect("append")
        };
        let remembers = || {
            let writer = engine.writers.get().expect("the one connection");
            writer
                .memory
                .as_ref()
                .is_some_and(|m| m.remembers(&session))
        };
        append("one");
        assert!(remembers());
        assert_eq!(append("two")[0].seq, 2);
        assert!(remembers());
        engine.write(|_| Ok(())).expect("another write");
        assert!(!remembers());
        assert_eq!(append("three")[0].seq, 3);
        assert!(remembers());
    }
}

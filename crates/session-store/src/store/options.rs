//! How a [`Store`](super::Store) opens its database: [`StoreOptions`], and the
//! [`ConnectionSettings`] it reads back.

use std::time::Duration;

/// How a [`Store`](crate::Store) opens its file.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// How long a connection waits for another's write lock before `SQLITE_BUSY` (on
    /// PostgreSQL: for a session's row lock, as `lock_timeout`, and for a pooled connection,
    /// though never less than 5 s nor more than 10 s).
    pub busy_timeout: Duration,
    /// The most connections the pool opens at once. On SQLite this bounds the reads; writes,
    /// which SQLite runs one at a time, share one connection per store (threads queue for it;
    /// a wait past `busy_timeout` is [`crate::Error::is_busy`]).
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

/// What [`Store::connection_settings`](crate::Store::connection_settings) reads back from a pooled connection.
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

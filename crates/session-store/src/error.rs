//! The crate's one error type.

use std::path::PathBuf;

use chrono::{DateTime, Utc};

use crate::history::pairing::Refusal;
use crate::model::SessionId;

/// Everything the session store can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path exists but is not an SQLite database.
    #[error("{path} is not an SQLite database")]
    NotADatabase {
        /// The file that was refused.
        path: PathBuf,
    },
    /// The path cannot name a database or backup file: an SQLite URI or `:memory:`, a
    /// directory, FIFO or device, a file in a missing folder, or (for a backup) the
    /// database itself or one of its side files. Refused before anything is opened or created.
    #[error("{path}: not usable as a database file")]
    InvalidPath {
        /// The path that was refused.
        path: PathBuf,
        /// Why.
        #[source]
        problem: PathProblem,
    },
    /// The path could not be read or created.
    #[error("cannot open {path}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A WAL database that cannot be read without write access: its `-wal` holds commits
    /// not yet in the file, and the `-shm` SQLite needs to read them is missing in a folder
    /// it cannot write (a read-only mount, another user's folder). Reading the file alone
    /// would miss those commits.
    #[error("cannot read {path} without write access: its -wal holds commits not yet in the file and the -shm SQLite needs to read them is missing (its owner can run `PRAGMA wal_checkpoint(TRUNCATE)`, or copy the database with its -wal somewhere writable)")]
    UnreadableWal {
        /// The database.
        path: PathBuf,
    },
    /// The database records a migration that this build does not know (it was written by a
    /// newer version).
    #[error("database schema is newer than this build: migration V{version}__{name} is unknown here (latest known: V{latest_known})")]
    FutureSchema {
        /// The unknown migration's version.
        version: i64,
        /// Its name.
        name: String,
        /// The newest version this build carries.
        latest_known: i64,
    },
    /// The database records a migration whose name or content differs from ours.
    #[error("migration history diverges at V{version}: database has {theirs:?}, this build has {ours:?}")]
    DivergentSchema {
        /// The version that differs.
        version: i64,
        /// What the database recorded (name and checksum).
        theirs: String,
        /// What this build carries (name and checksum).
        ours: String,
    },
    /// Applying the embedded migrations failed.
    #[error("migration failed")]
    Migration(#[source] StorageError),
    /// No session with this id.
    #[error("unknown session {0}")]
    UnknownSession(SessionId),
    /// A session with this id already exists.
    #[error("session {0} already exists")]
    SessionExists(SessionId),
    /// A message was refused by the pairing rules; nothing was written.
    #[error("message {index} of the append to session {session} refused")]
    Refused {
        /// The session appended to.
        session: SessionId,
        /// Position of the refused message in the append (0 for a single message).
        index: usize,
        /// What was wrong.
        #[source]
        reason: Refusal,
    },
    /// An append's idempotency key is already stored in the session for a different message,
    /// or a batch mixes replayed and new messages out of order; nothing was written.
    #[error("idempotency key {key:?} of session {session}: {detail}")]
    IdempotencyConflict {
        /// The session appended to.
        session: SessionId,
        /// The key at fault.
        key: String,
        /// What does not match.
        detail: String,
    },
    /// A stored row that no valid writer produces and the reader cannot interpret.
    #[error("corrupt row in {table} (id {row_id}): {detail}")]
    CorruptRow {
        /// The table.
        table: &'static str,
        /// The row's id.
        row_id: i64,
        /// What is wrong with it.
        detail: String,
    },
    /// A mend left the session still breaking a rule; it was rolled back.
    #[error("mending session {session} left {remaining} problem(s), first: {first}; rolled back")]
    RepairIncomplete {
        /// The session.
        session: SessionId,
        /// How many violations were left.
        remaining: usize,
        /// The first one, for people.
        first: String,
    },
    /// A backup copy could not be made or failed its integrity check.
    #[error("backup {path} failed: {detail}")]
    BackupFailed {
        /// The copy (or its temporary name).
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A revert would take back part of the compacted head but not all of what the latest
    /// remaining summary covers; nothing was changed. Revert to a turn where a compaction
    /// ended, or to turn 0.
    #[error("reverting session {session} to turn {turn} would leave compacted turns without their summary (remaining summary covers through turn {summarised_through:?})")]
    RevertSplitsCompaction {
        /// The session.
        session: SessionId,
        /// The turn asked for.
        turn: i64,
        /// The last turn the latest remaining summary covers, if any remains.
        summarised_through: Option<i64>,
    },
    /// A fork (or another cut by turn) named a turn the session does not have; nothing was
    /// written. A session with `turns` turns can be cut at `0..=turns` (`turns` copies all).
    #[error("session {session} has no turn {turn} to cut at (it has {turns} turn(s): cut at 0..={turns})")]
    NoSuchTurn {
        /// The session.
        session: SessionId,
        /// The turn asked for.
        turn: i64,
        /// How many turns the session has.
        turns: i64,
    },
    /// A compaction summary must hold non-whitespace text: it is all the provider will see of
    /// the compacted turns.
    #[error("empty compaction summary for session {session}")]
    EmptySummary {
        /// The session.
        session: SessionId,
    },
    /// A part's JSON (a call's input, a media source, result blocks, provider metadata) nests
    /// deeper than the store's JSON reader follows: written, it would read back as a string,
    /// not as what was sent. Refused, nothing written.
    #[error("the {field} of a {kind} part nests JSON {depth} levels deep; the store reads back at most {limit}")]
    JsonTooDeep {
        /// The part's kind (`tool_use`, `image`, ...).
        kind: &'static str,
        /// Which of its values: `input`, `provider_metadata`.
        field: &'static str,
        /// How deep it nests (at least `limit + 1`).
        depth: usize,
        /// The deepest nesting the store reads back (127, `serde_json`'s reader's limit).
        limit: usize,
    },
    /// A new session's id the store cannot keep on every engine (longer than
    /// [`crate::MAX_ID_BYTES`], or holding a NUL character): refused on every engine,
    /// nothing written.
    #[error("a session id {reason}")]
    InvalidSessionId {
        /// What is wrong with it (the id itself may be too long to print).
        reason: String,
    },
    /// A time the store cannot keep as given (a completion's time outside the years 0 to
    /// 9999; a message's is [`crate::Refusal::TimeOutOfRange`]): refused on every engine,
    /// nothing written.
    #[error("the {what} {time:?} is outside the years 0 to 9999 the store keeps times in")]
    TimeOutOfRange {
        /// Which time (`completion time`).
        what: &'static str,
        /// The time given.
        time: DateTime<Utc>,
    },
    /// A text of a session (its title, a compaction summary) holds a NUL character
    /// (U+0000), which PostgreSQL cannot keep: refused on every engine, nothing written.
    #[error("the {field} of session {session} holds a NUL character (U+0000), which the store cannot keep on every engine")]
    NulInSessionText {
        /// The session (`new` for one an import was about to create).
        session: SessionId,
        /// `title` or `compaction summary`.
        field: &'static str,
    },
    /// `PRAGMA quick_check` found the file damaged (flipped bytes, truncated pages).
    #[error("{path} is corrupt: {detail}")]
    CorruptDatabase {
        /// The damaged file.
        path: PathBuf,
        /// What SQLite's check reported first.
        detail: String,
    },
    /// A copied session did not read back from the destination as it was in the source.
    #[error("copy of session {session} does not read back the same: {detail}")]
    CopyMismatch {
        /// The session.
        session: SessionId,
        /// What differs.
        detail: String,
    },
    /// A row of a session being copied broke a constraint of the destination's schema (a
    /// value outside the contract, written into the source by hand). That session was not
    /// written; the sessions copied before it stay copied, as after any failed write.
    #[error("copy of session {session} refused by the destination: {detail}")]
    CopyRowRefused {
        /// The session.
        session: SessionId,
        /// The destination's reason.
        detail: String,
    },
    /// `copy` refused before writing anything: the destination holds sessions of these ids
    /// with other rows than the source's (a session it holds with the same rows is skipped).
    #[error("{}", copy_conflict(first, detail, sessions.len()))]
    CopyConflict {
        /// The first of them.
        first: SessionId,
        /// Where the first one differs.
        detail: String,
        /// Every session held differently.
        sessions: Vec<SessionId>,
    },
    /// `copy` to PostgreSQL refused before writing anything: a text of the source holds a
    /// NUL character (U+0000), which PostgreSQL's text cannot keep.
    #[error("session {session}: {place} holds a NUL character (U+0000), which PostgreSQL cannot keep; nothing was copied")]
    NulInCopiedText {
        /// The session.
        session: SessionId,
        /// Where: message seq, part ordinal and column.
        place: String,
    },
    /// `copy` to PostgreSQL refused before writing anything: an id of the source (the
    /// session's, a call's, a key) is longer than [`crate::MAX_ID_BYTES`], which the store
    /// refuses on every write and PostgreSQL's indexes cannot keep past about 2.7 KB.
    #[error("session {session}: {place} is {bytes} bytes long, more than the {max} an id may be on every engine; nothing was copied", max = crate::MAX_ID_BYTES)]
    LongIdInCopiedRow {
        /// The session.
        session: SessionId,
        /// Where: message seq, part ordinal and column.
        place: String,
        /// The id's length in bytes.
        bytes: usize,
    },
    /// An operation this backend does not have (e.g. a file backup of a PostgreSQL store).
    #[error("{operation} is not supported on a {backend} store")]
    Unsupported {
        /// What was asked.
        operation: &'static str,
        /// `sqlite` or `postgres`.
        backend: &'static str,
    },
    /// The session's last message is still streaming in from a writer that is still there
    /// ([`crate::Store::begin_message`]); nothing was written. Finish or drop that message
    /// first.
    #[error("session {session} has message {seq} still streaming in from a live writer")]
    MessageOpen {
        /// The session.
        session: SessionId,
        /// The open message's `seq`.
        seq: i64,
    },
    /// A push or finish on a streamed message that is no longer open under this handle (it
    /// was interrupted, reverted or deleted meanwhile); nothing was written.
    #[error(
        "message {seq} of session {session} is no longer open for this writer (it is {state})"
    )]
    MessageNotOpen {
        /// The session.
        session: SessionId,
        /// The message's `seq` when it began.
        seq: i64,
        /// What it is now: `complete`, `interrupted`, another writer's, or `gone`.
        state: String,
    },
    /// A search query holds more distinct terms than
    /// [`crate::MAX_SEARCH_TERMS`]: every term is required, so cutting the
    /// query would change what it finds.
    #[error("the search query holds more than {max} distinct terms; use fewer words")]
    TooManySearchTerms {
        /// The most distinct terms a query may hold.
        max: usize,
    },
    /// A sum of a session's token counts is above `i64::MAX`: the total is refused rather
    /// than wrapped, clamped or reported as an engine's bare overflow.
    #[error("usage of session {session}: the sum of {field} over {over} is above {max}", max = i64::MAX)]
    UsageOverflow {
        /// The session summed.
        session: SessionId,
        /// The count that overflowed (`input_tokens`, ...).
        field: &'static str,
        /// What was summed: `turn N` or `the whole session`.
        over: String,
    },
    /// This build lacks the cargo feature an operation needs (a `postgres://` URL in a build
    /// without `postgres`); nothing was opened or written.
    #[error("{what} needs the cargo feature `{feature}`, which this build of session-store lacks")]
    FeatureMissing {
        /// The cargo feature (`postgres`).
        feature: &'static str,
        /// What was asked (the URL is shown without its password).
        what: String,
    },
    /// The tokio runtime shut down before the blocking task of an `AsyncStore`
    /// operation ran to its end (cargo feature `tokio`); whether a write committed is not
    /// known.
    #[error("the runtime shut down before the store operation finished")]
    TaskCancelled,
    /// The storage engine underneath failed (SQLite, PostgreSQL, the connection pool, a
    /// migration); ask [`Error::is_busy`], [`Error::is_full`] or [`Error::is_read_only`] what
    /// kind.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A JSON value could not be encoded.
    #[error("json")]
    Json(#[from] serde_json::Error),
    /// A transcript was refused by its importer; nothing was written.
    #[error("import refused")]
    Import(#[from] crate::import::ImportError),
    /// A session bundle that cannot be restored as it is (`import --format bundle`): not a
    /// bundle, a line that is not what it should be, rows missing or left over. Nothing was
    /// written.
    #[error("bundle refused at line {line}: {detail}")]
    Bundle {
        /// The line of the bundle (from 1; the line after the last one when rows are missing).
        line: usize,
        /// What is wrong with it.
        detail: String,
    },
}

impl Error {
    /// True when SQLite gave up waiting for a lock held by another connection (or, in the
    /// process, by another write on the store's write connection).
    pub fn is_busy(&self) -> bool {
        self.storage().is_some_and(StorageError::is_busy)
    }

    /// True when the database could not be reached: the PostgreSQL server refused or dropped
    /// the connection, is shutting down or starting up, or no connection could be had within
    /// the pool's bounded wait (`StoreOptions::busy_timeout`, at most 10 s). Nothing is wrong
    /// with the data or the request: retry later, with a growing pause. A failed call that
    /// was not a write changed nothing; a write whose commit was cut off may or may not have
    /// landed, so give appends an idempotency key
    /// ([`crate::NewMessage::with_idempotency_key`]) and retrying them is safe. The pool
    /// drops broken connections and opens new ones once the server is back, in the same
    /// process. Never true for SQLite, whose file is always at hand.
    pub fn is_unreachable(&self) -> bool {
        self.storage()
            .is_some_and(|storage| storage.0.is_unreachable())
    }

    /// True when the disk (or `PRAGMA max_page_count`) has no room for the write.
    pub fn is_full(&self) -> bool {
        self.sqlite_code() == Some(rusqlite::ErrorCode::DiskFull)
    }

    /// True when the database cannot be written (read-only file or connection).
    pub fn is_read_only(&self) -> bool {
        self.storage().is_some_and(StorageError::is_read_only)
    }

    /// The refusal, when the error is a refused append.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Error::Refused { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// True when a row broke a constraint of the schema (NOT NULL, CHECK, UNIQUE, a foreign
    /// key), on either engine.
    pub(crate) fn is_constraint(&self) -> bool {
        self.sqlite_code() == Some(rusqlite::ErrorCode::ConstraintViolation)
            || self
                .postgres_state()
                .is_some_and(|code| code.starts_with("23"))
    }

    /// The error and every cause under it, joined with `: ` (an engine's own message, such
    /// as which constraint failed, sits in the source chain, not in `Display`).
    pub(crate) fn with_causes(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(error) = cause {
            let next = error.to_string();
            if !text.ends_with(&next) {
                text.push_str(": ");
                text.push_str(&next);
            }
            cause = error.source();
        }
        text
    }

    fn sqlite_code(&self) -> Option<rusqlite::ErrorCode> {
        self.storage().and_then(StorageError::sqlite_code)
    }

    /// The SQLite error underneath, if that is what failed.
    pub(crate) fn sqlite(&self) -> Option<&rusqlite::Error> {
        self.storage().and_then(StorageError::sqlite)
    }

    fn postgres_state(&self) -> Option<&str> {
        self.storage().and_then(StorageError::postgres_state)
    }

    /// The engine's failure, when that is what this is.
    fn storage(&self) -> Option<&StorageError> {
        match self {
            Error::Storage(storage) => Some(storage),
            _ => None,
        }
    }
}

/// A failure of the storage engine underneath the store. Opaque on purpose, so that no
/// third-party type is part of this crate's API: its message names the engine, and its
/// source is the engine's own error.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct StorageError(Engine);

impl StorageError {
    /// The SQLite error underneath, if that is what failed.
    fn sqlite(&self) -> Option<&rusqlite::Error> {
        match &self.0 {
            Engine::Sqlite(e) => Some(e),
            _ => None,
        }
    }

    /// SQLite's primary result code, if SQLite failed.
    fn sqlite_code(&self) -> Option<rusqlite::ErrorCode> {
        self.sqlite().and_then(rusqlite::Error::sqlite_error_code)
    }

    /// PostgreSQL's SQLSTATE (`55P03` lock not available, `25006` read-only transaction),
    /// when the error is PostgreSQL's.
    #[cfg(feature = "postgres")]
    fn postgres_state(&self) -> Option<&str> {
        match &self.0 {
            Engine::Postgres(e) => e.code().map(postgres::error::SqlState::code),
            _ => None,
        }
    }

    /// A build without PostgreSQL has no PostgreSQL error.
    #[cfg(not(feature = "postgres"))]
    fn postgres_state(&self) -> Option<&str> {
        None
    }

    /// SQLite gave up waiting for a lock, or PostgreSQL for a row lock; or the wait for the
    /// SQLite store's one write connection, which another write of the process held past the
    /// busy timeout, ran out (the same lock, taken in the process).
    fn is_busy(&self) -> bool {
        matches!(self.0, Engine::Pool(_))
            || self.sqlite_code().is_some_and(|code| {
                matches!(
                    code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                )
            })
            || self.postgres_state() == Some("55P03")
    }

    /// The database cannot be written.
    fn is_read_only(&self) -> bool {
        self.sqlite_code() == Some(rusqlite::ErrorCode::ReadOnly)
            || self.postgres_state() == Some("25006")
    }
}

#[derive(Debug, thiserror::Error)]
enum Engine {
    #[error("sqlite")]
    Sqlite(#[source] rusqlite::Error),
    #[error("connection pool")]
    Pool(#[source] r2d2::Error),
    #[cfg(feature = "postgres")]
    #[error("postgres")]
    Postgres(#[source] postgres::Error),
    /// No PostgreSQL connection within the pool's wait: the server is down or every
    /// connection stayed busy.
    #[cfg(feature = "postgres")]
    #[error("the PostgreSQL server could not be reached")]
    PostgresPool(#[source] r2d2::Error),
    // `Error::Migration` already says "migration failed": refinery's message follows it.
    #[error(transparent)]
    Migration(refinery::Error),
}

impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Self {
        Error::Storage(StorageError(Engine::Sqlite(error)))
    }
}

#[cfg(feature = "postgres")]
impl From<postgres::Error> for Error {
    fn from(error: postgres::Error) -> Self {
        Error::Storage(StorageError(Engine::Postgres(error)))
    }
}

impl Engine {
    /// See [`Error::is_unreachable`].
    fn is_unreachable(&self) -> bool {
        match self {
            #[cfg(feature = "postgres")]
            Engine::PostgresPool(_) => true,
            #[cfg(feature = "postgres")]
            Engine::Postgres(error) => postgres_unreachable(error),
            _ => false,
        }
    }
}

/// A PostgreSQL error that says the server is not there (rather than refusing the request):
/// a closed connection, an I/O error underneath (refused, reset, timed out), or a state of
/// class 08 (connection exception) or 57P01-57P03 (shutting down, starting up).
#[cfg(feature = "postgres")]
pub(crate) fn postgres_unreachable(error: &postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    if let Some(code) = error.code().map(postgres::error::SqlState::code) {
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
}

#[cfg(feature = "postgres")]
impl Error {
    /// A PostgreSQL pool that gave no connection in time ([`Error::is_unreachable`]).
    pub(crate) fn postgres_pool(error: r2d2::Error) -> Self {
        Error::Storage(StorageError(Engine::PostgresPool(error)))
    }
}

impl From<r2d2::Error> for Error {
    fn from(error: r2d2::Error) -> Self {
        Error::Storage(StorageError(Engine::Pool(error)))
    }
}

impl From<refinery::Error> for Error {
    fn from(error: refinery::Error) -> Self {
        Error::Migration(StorageError(Engine::Migration(error)))
    }
}

/// What opening a database fails with: [`crate::Store::open`], its siblings
/// (`open_with`, `open_readable`, `open_readable_with`) and `AsyncStore::open`. Every
/// variant is about the path, the file or its schema; none is about a session.
///
/// It converts into the umbrella [`Error`], each variant into the variant of the same name
/// (with the same message), so `?` takes it in a function that returns [`crate::Result`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// See [`Error::NotADatabase`].
    #[error("{path} is not an SQLite database")]
    NotADatabase {
        /// The file that was refused.
        path: PathBuf,
    },
    /// See [`Error::InvalidPath`].
    #[error("{path}: not usable as a database file")]
    InvalidPath {
        /// The path that was refused.
        path: PathBuf,
        /// Why.
        #[source]
        problem: PathProblem,
    },
    /// See [`Error::Io`].
    #[error("cannot open {path}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// See [`Error::UnreadableWal`].
    #[error("cannot read {path} without write access: its -wal holds commits not yet in the file and the -shm SQLite needs to read them is missing (its owner can run `PRAGMA wal_checkpoint(TRUNCATE)`, or copy the database with its -wal somewhere writable)")]
    UnreadableWal {
        /// The database.
        path: PathBuf,
    },
    /// See [`Error::FutureSchema`].
    #[error("database schema is newer than this build: migration V{version}__{name} is unknown here (latest known: V{latest_known})")]
    FutureSchema {
        /// The unknown migration's version.
        version: i64,
        /// Its name.
        name: String,
        /// The newest version this build carries.
        latest_known: i64,
    },
    /// See [`Error::DivergentSchema`].
    #[error("migration history diverges at V{version}: database has {theirs:?}, this build has {ours:?}")]
    DivergentSchema {
        /// The version that differs.
        version: i64,
        /// What the database recorded (name and checksum).
        theirs: String,
        /// What this build carries (name and checksum).
        ours: String,
    },
    /// See [`Error::Migration`].
    #[error("migration failed")]
    Migration(#[source] StorageError),
    /// See [`Error::FeatureMissing`]: a `postgres://` URL in a build without PostgreSQL.
    #[error("{what} needs the cargo feature `{feature}`, which this build of session-store lacks")]
    FeatureMissing {
        /// The cargo feature (`postgres`).
        feature: &'static str,
        /// What was asked (the URL is shown without its password).
        what: String,
    },
    /// See [`Error::TaskCancelled`] (`AsyncStore::open`).
    #[error("the runtime shut down before the store operation finished")]
    TaskCancelled,
    /// The storage engine underneath failed while opening; ask [`OpenError::is_busy`],
    /// [`OpenError::is_read_only`] or [`OpenError::is_unreachable`] what kind.
    #[error(transparent)]
    Storage(StorageError),
    /// A failure of another kind met while opening (none is known; kept whole rather than
    /// renamed).
    #[error(transparent)]
    Other(Box<Error>),
}

impl OpenError {
    /// True when SQLite gave up waiting for a lock (another process holds the file), or a
    /// PostgreSQL lock wait ran out: try again.
    pub fn is_busy(&self) -> bool {
        self.storage().is_some_and(StorageError::is_busy)
    }

    /// True when the database cannot be written (read-only file, folder or connection).
    pub fn is_read_only(&self) -> bool {
        self.storage().is_some_and(StorageError::is_read_only)
    }

    /// True when the PostgreSQL server could not be reached (see [`Error::is_unreachable`]).
    pub fn is_unreachable(&self) -> bool {
        self.storage()
            .is_some_and(|storage| storage.0.is_unreachable())
    }

    /// True when the disk (or `StoreOptions::max_page_count`) had no room to create or
    /// migrate the database.
    pub fn is_full(&self) -> bool {
        self.sqlite_code() == Some(rusqlite::ErrorCode::DiskFull)
    }

    /// SQLite's primary result code, when SQLite failed.
    pub(crate) fn sqlite_code(&self) -> Option<rusqlite::ErrorCode> {
        self.storage().and_then(StorageError::sqlite_code)
    }

    fn storage(&self) -> Option<&StorageError> {
        match self {
            OpenError::Storage(storage) => Some(storage),
            _ => None,
        }
    }

    /// The open path's failure as what it is. Opening meets only the kinds above; a
    /// failure of any other kind (none is known) is kept whole in [`OpenError::Other`].
    pub(crate) fn from_open(error: Error) -> Self {
        match error {
            Error::NotADatabase { path } => OpenError::NotADatabase { path },
            Error::InvalidPath { path, problem } => OpenError::InvalidPath { path, problem },
            Error::Io { path, source } => OpenError::Io { path, source },
            Error::UnreadableWal { path } => OpenError::UnreadableWal { path },
            Error::FutureSchema {
                version,
                name,
                latest_known,
            } => OpenError::FutureSchema {
                version,
                name,
                latest_known,
            },
            Error::DivergentSchema {
                version,
                theirs,
                ours,
            } => OpenError::DivergentSchema {
                version,
                theirs,
                ours,
            },
            Error::Migration(storage) => OpenError::Migration(storage),
            Error::FeatureMissing { feature, what } => OpenError::FeatureMissing { feature, what },
            Error::TaskCancelled => OpenError::TaskCancelled,
            Error::Storage(storage) => OpenError::Storage(storage),
            other => OpenError::Other(Box::new(other)),
        }
    }
}

impl From<OpenError> for Error {
    fn from(error: OpenError) -> Self {
        match error {
            OpenError::NotADatabase { path } => Error::NotADatabase { path },
            OpenError::InvalidPath { path, problem } => Error::InvalidPath { path, problem },
            OpenError::Io { path, source } => Error::Io { path, source },
            OpenError::UnreadableWal { path } => Error::UnreadableWal { path },
            OpenError::FutureSchema {
                version,
                name,
                latest_known,
            } => Error::FutureSchema {
                version,
                name,
                latest_known,
            },
            OpenError::DivergentSchema {
                version,
                theirs,
                ours,
            } => Error::DivergentSchema {
                version,
                theirs,
                ours,
            },
            OpenError::Migration(storage) => Error::Migration(storage),
            OpenError::FeatureMissing { feature, what } => Error::FeatureMissing { feature, what },
            OpenError::TaskCancelled => Error::TaskCancelled,
            OpenError::Storage(storage) => Error::Storage(storage),
            OpenError::Other(error) => *error,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The words of [`Error::CopyConflict`].
fn copy_conflict(first: &SessionId, detail: &str, count: usize) -> String {
    let others = match count {
        0 | 1 => String::new(),
        2 => " (and 1 more session)".to_owned(),
        n => format!(" (and {} more sessions)", n - 1),
    };
    format!(
        "the destination holds session {first} with other rows ({detail}){others}; \
         nothing was copied"
    )
}

/// Why a path cannot be used as a database (or backup) file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathProblem {
    /// The empty path (SQLite would open a private temporary database).
    #[error("the path is empty")]
    Empty,
    /// `:memory:`, an in-memory database that keeps nothing.
    #[error("\":memory:\" is an in-memory database, not a file")]
    Memory,
    /// An SQLite URI (`file:...`); paths are never read as URIs.
    #[error("SQLite URIs (file:...) are not accepted; give a file path")]
    Uri,
    /// The path exists but is not a regular file.
    #[error("is a {kind}, not a regular file")]
    NotRegularFile {
        /// What it is instead: `directory`, `FIFO`, `character device`, ...
        kind: &'static str,
    },
    /// The folder the file would be created in does not exist.
    #[error("folder {folder} does not exist")]
    NoFolder {
        /// The missing folder.
        folder: PathBuf,
    },
    /// A backup path that is the database itself or one of its side files
    /// (`-journal`, `-wal`, `-shm`), which SQLite creates and deletes on its own.
    #[error("is the database {database} or one of its side files")]
    DatabaseOrSideFile {
        /// The database being backed up.
        database: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every open failure, one per variant that carries no engine error.
    fn open_failures() -> Vec<OpenError> {
        vec![
            OpenError::NotADatabase {
                path: "notes.txt".into(),
            },
            OpenError::InvalidPath {
                path: ":memory:".into(),
                problem: PathProblem::Memory,
            },
            OpenError::Io {
                path: "/root/s.db".into(),
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            },
            OpenError::UnreadableWal {
                path: "ro.db".into(),
            },
            OpenError::FutureSchema {
                version: 99,
                name: "later".into(),
                latest_known: 15,
            },
            OpenError::DivergentSchema {
                version: 2,
                theirs: "a".into(),
                ours: "b".into(),
            },
            OpenError::FeatureMissing {
                feature: "postgres",
                what: "opening postgres://h/db".into(),
            },
            OpenError::TaskCancelled,
            OpenError::Other(Box::new(Error::UnknownSession(SessionId::new("s")))),
        ]
    }

    #[test]
    fn an_open_error_says_what_the_umbrella_error_says_and_converts_both_ways() {
        for (open, expected) in open_failures().into_iter().zip(open_failures()) {
            let shown = open.to_string();
            let umbrella = Error::from(open);
            assert_eq!(umbrella.to_string(), shown, "{expected:?}");
            let back = OpenError::from_open(umbrella);
            assert_eq!(back.to_string(), shown, "{expected:?}");
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&expected),
                "{expected:?}"
            );
        }
    }

    #[test]
    fn a_failure_open_never_meets_is_kept_whole_not_renamed() {
        let open = OpenError::from_open(Error::UnknownSession(SessionId::new("s")));
        assert!(
            matches!(&open, OpenError::Other(inner) if matches!(**inner, Error::UnknownSession(_)))
        );
        assert!(matches!(Error::from(open), Error::UnknownSession(_)));
    }
}

//! The PostgreSQL backend: the same operations as the SQLite half of `store/`, over the same
//! tables (migrations in `migrations-postgres/`), calling the same pure history functions.
//!
//! A [`PgStore`] owns an r2d2 pool of `postgres` clients. Every write is one transaction that
//! first takes the session's row lock ([`lock_session`], or an append's own read of the
//! tail), so writers of one session queue on that lock and `seq` never collides, while
//! writers of different sessions run side by side; the pairing check runs inside that
//! transaction, after the lock, against what is committed. An append to a session the store
//! appended to last is one statement that takes the lock itself, without waiting, and writes
//! only while the session row is the version that append left ([`PgStore::append`]). Every
//! read is one `REPEATABLE READ READ ONLY` transaction: all its queries see one snapshot, as
//! a SQLite read transaction does.
//!
//! A `Store` opened on a `postgres://` (or `postgresql://`) URL runs on this engine
//! (`engine.rs`, the seam's PostgreSQL side).

use std::time::Duration;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use postgres::types::ToSql;
use postgres::{Client, IsolationLevel, NoTls, Row, Statement, Transaction};
use r2d2::{Pool, PooledConnection};
use r2d2_postgres::PostgresConnectionManager;

use super::StoreOptions;
use crate::error::{Error, Result};
use crate::history::tail::TailState;
use crate::model::SessionId;
use crate::store::encode::{row_version, GUARD_CALLS, ONE_STATEMENT, ONE_STATEMENT_WROTE};
use crate::store::engine::Work;
use crate::store::write::{Remembered, TailRow};
use remembered::{Kept, Tails};

mod copy;
mod engine;
pub(crate) mod fork;
pub(crate) mod read;
mod remembered;
mod retention;
pub(crate) mod rows;
pub(crate) mod schema;
mod search;
mod sql;
pub(crate) mod write;

/// A pooled connection with the statements it has prepared: each statement is parsed once
/// per connection instead of once per call (a round trip saved on every query).
pub(crate) struct Connection {
    client: Client,
    statements: Statements,
}

/// A connection's prepared statements: by their PostgreSQL text, and the statements shared
/// with SQLite by their shared text (plain, and with `RETURNING id`), so that a shared
/// statement is put into PostgreSQL's spelling ([`sql::pg_statement`]) once per connection,
/// not on every run.
#[derive(Default)]
struct Statements {
    by_text: HashMap<String, Statement>,
    shared: [HashMap<String, Statement>; 2],
}

/// r2d2_postgres's manager, with a statement cache beside each client and the store's busy
/// timeout as the connection's `lock_timeout` (a writer waits that long for a session's row
/// lock, as a SQLite writer waits for the file's, then fails with `Error::is_busy`).
#[derive(Debug)]
pub(crate) struct Manager {
    inner: PostgresConnectionManager<NoTls>,
    lock_timeout_ms: u128,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Connection;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Connection, postgres::Error> {
        let mut client = self.inner.connect()?;
        client.batch_execute(&format!("SET lock_timeout = {}", self.lock_timeout_ms))?;
        Ok(Connection {
            client,
            statements: Statements::default(),
        })
    }

    fn is_valid(&self, conn: &mut Connection) -> Result<(), postgres::Error> {
        self.inner.is_valid(&mut conn.client)
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        self.inner.has_broken(&mut conn.client)
    }
}

/// A transaction and its connection's statement cache: the same query methods as
/// `postgres::Transaction`, taking SQL text. Or, for a one-statement append
/// ([`PgStore::append`]), a connection outside a transaction that runs that one statement
/// and refuses every other, before sending it.
pub(crate) struct Tx<'a> {
    tx: Runner<'a>,
    statements: &'a mut Statements,
    /// The tail and row version an append wrote, for the store to keep once it commits.
    /// (An append writes one session: the one [`PgStore::append`] was given.)
    kept: Option<Kept>,
    /// The one-statement append under way, if this is one.
    one: Option<OneStatement>,
}

/// Where a [`Tx`]'s statements run.
enum Runner<'a> {
    /// In a transaction.
    Transaction(Transaction<'a>),
    /// Outside one: each statement commits alone (a one-statement append).
    Alone(&'a mut Client),
}

/// Forwards a query method to the transaction or the connection.
macro_rules! forward {
    ($runner:expr, $method:ident ( $($arg:expr),* )) => {
        match $runner {
            $crate::store::pg::Runner::Transaction(tx) => tx.$method($($arg),*),
            $crate::store::pg::Runner::Alone(client) => client.$method($($arg),*),
        }
    };
}
pub(crate) use forward;

/// Writes a new version of session `$1`'s row ([`row_version!`]), and with it takes the
/// row's lock: how every write to a session's rows starts, so a one-statement append that
/// checks the version an earlier append left no longer holds ([`PgStore::append`]).
macro_rules! new_row_version {
    () => {
        "UPDATE sessions SET tail_state = tail_state WHERE id = $1"
    };
}

/// What a one-statement append came to ([`PgStore::one_statement`]).
enum Alone {
    /// Its statement wrote the message, with the tail and row version to keep (where the
    /// statement reported one).
    Wrote(Option<Kept>),
    /// Nothing was written: the tail did not hold, or the append needed another statement.
    Missed,
}

/// A one-statement append's state ([`PgStore::append`]).
struct OneStatement {
    /// The remembered tail it starts from, offered once ([`crate::store::sql::Sql::remembered_tail`]).
    kept: Option<Kept>,
    /// Whether its one statement has run.
    ran: bool,
    /// Whether its one statement wrote the message (committed: the append is in, and is
    /// never run again).
    wrote: bool,
    /// Whether a statement was refused: the append did not fit one statement (its tail
    /// did not hold, or it needs another statement), and nothing was sent.
    refused: bool,
}

type Params<'p> = [&'p (dyn ToSql + Sync)];

impl Tx<'_> {
    /// Lets `sql` run: always in a transaction; outside one, only the append's one
    /// statement ([`ONE_STATEMENT`]), once. A refused statement is not sent.
    fn admit(&mut self, sql: &str) -> Result<()> {
        let Some(one) = &mut self.one else {
            return Ok(());
        };
        if one.ran || !sql.starts_with(ONE_STATEMENT) {
            one.refused = true;
            return Err(Error::Unsupported {
                operation: "a second statement in a one-statement append",
                backend: "postgres",
            });
        }
        one.ran = true;
        Ok(())
    }

    fn statement(&mut self, sql: &str) -> Result<Statement> {
        self.admit(sql)?;
        if let Some(statement) = self.statements.by_text.get(sql) {
            return Ok(statement.clone());
        }
        let statement = forward!(&mut self.tx, prepare(sql))?;
        self.statements
            .by_text
            .insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// The prepared statement of `shared`, a statement in SQLite's spelling, with
    /// `RETURNING id` when `returning`: spelled for PostgreSQL and prepared on its first run
    /// on this connection, then found by the shared text.
    fn shared(&mut self, shared: &str, returning: bool) -> Result<Statement> {
        self.admit(shared)?;
        let cache = &self.statements.shared[usize::from(returning)];
        if let Some(statement) = cache.get(shared) {
            return Ok(statement.clone());
        }
        let mut text = sql::pg_statement(shared);
        if returning {
            text = format!("{} RETURNING id", text.trim_end());
        }
        let statement = forward!(&mut self.tx, prepare(&text))?;
        self.statements.shared[usize::from(returning)].insert(shared.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Every row the shared statement `shared` returns ([`Tx::shared`]).
    pub(crate) fn query_shared(&mut self, shared: &str, params: &Params<'_>) -> Result<Vec<Row>> {
        let statement = self.shared(shared, false)?;
        let rows = forward!(&mut self.tx, query(&statement, params))?;
        if let Some(one) = &mut self.one {
            // The one statement ran: whether its message went in, as it says.
            let wrote = rows
                .first()
                .map(|row| row.try_get::<_, Option<i64>>(ONE_STATEMENT_WROTE));
            one.wrote = matches!(wrote, Some(Ok(Some(1))));
        }
        Ok(rows)
    }

    /// Every row `sql` returns.
    pub(crate) fn query(&mut self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>> {
        let statement = self.statement(sql)?;
        Ok(forward!(&mut self.tx, query(&statement, params))?)
    }

    /// The one row `sql` returns.
    pub(crate) fn query_one(&mut self, sql: &str, params: &Params<'_>) -> Result<Row> {
        let statement = self.statement(sql)?;
        Ok(forward!(&mut self.tx, query_one(&statement, params))?)
    }

    /// The row `sql` returns, if any.
    pub(crate) fn query_opt(&mut self, sql: &str, params: &Params<'_>) -> Result<Option<Row>> {
        let statement = self.statement(sql)?;
        Ok(forward!(&mut self.tx, query_opt(&statement, params))?)
    }

    /// Runs `COPY ... FROM STDIN` (`sql`) with `data` in its format; how many rows it wrote.
    pub(crate) fn copy_in(&mut self, sql: &str, data: &[u8]) -> Result<u64> {
        use std::io::Write;
        self.admit(sql)?;
        let mut writer = forward!(&mut self.tx, copy_in(sql))?;
        let written = writer.write_all(data);
        // A broken stream fails `finish` with the server's error; else the writer's own.
        let rows = writer.finish()?;
        match written {
            Ok(()) => Ok(rows),
            Err(error) => Err(
                match error.into_inner().map(|e| e.downcast::<postgres::Error>()) {
                    Some(Ok(error)) => Error::from(*error),
                    Some(Err(other)) => Error::Io {
                        path: std::path::PathBuf::from(sql),
                        source: std::io::Error::other(other),
                    },
                    None => Error::Io {
                        path: std::path::PathBuf::from(sql),
                        source: std::io::Error::other("COPY FROM STDIN failed"),
                    },
                },
            ),
        }
    }

    /// Runs `sql`; how many rows it changed.
    pub(crate) fn execute(&mut self, sql: &str, params: &Params<'_>) -> Result<u64> {
        let statement = self.statement(sql)?;
        Ok(forward!(&mut self.tx, execute(&statement, params))?)
    }
}

/// A pooled PostgreSQL store.
#[derive(Clone)]
pub(crate) struct PgStore {
    pool: Pool<Manager>,
    /// The URL without its password, for messages.
    shown: String,
    /// Every transaction starts `READ ONLY`: a write fails (`Error::is_read_only`).
    read_only: bool,
    /// The tails this store's appends left ([`PgStore::append`]).
    tails: Arc<Mutex<Tails>>,
    /// Set once the server failed a one-statement append that then went in as a
    /// transaction (a distributed engine that does not take the statement): this store's
    /// appends are transactions from then on.
    alone_refused: Arc<AtomicBool>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("url", &self.shown).finish()
    }
}

impl PgStore {
    /// Connects to `url` and migrates (unless `read_only`, which requires the current schema).
    pub(crate) fn open(url: &str, options: &StoreOptions) -> Result<Self> {
        let mut config: postgres::Config = url.parse()?;
        // Opening a connection is not a lock wait: a short busy timeout must not cut it off
        // on a loaded server (it did, at 200 ms, as a pool timeout instead of a busy error).
        config.connect_timeout(CONNECT_TIMEOUT);
        if config.get_application_name().is_none() {
            config.application_name("session-store");
        }
        // One direct connection first: a refused connection (wrong password, no server) fails
        // here at once with its cause, where the pool would retry until its timeout. It
        // runs the migrations, then closes.
        let mut first = config.connect(NoTls)?;
        if options.read_only {
            schema::require_current(&mut first)?;
        } else {
            schema::migrate(&mut first)?;
        }
        drop(first);
        let manager = Manager {
            inner: PostgresConnectionManager::new(config, NoTls),
            lock_timeout_ms: options.busy_timeout.as_millis().max(1),
        };
        let pool = Pool::builder()
            .max_size(options.max_connections.max(1))
            .min_idle(Some(0))
            // No query on every checkout: a connection the server dropped fails its BEGIN,
            // and `run` takes a new one then (validated on error, not on every use).
            .test_on_check_out(false)
            // Bounded: while the server is down a call fails after this wait, typed
            // (`Error::is_unreachable`), instead of hanging.
            .connection_timeout(options.busy_timeout.clamp(CONNECT_TIMEOUT, POOL_WAIT))
            .build(manager)?;
        Ok(Self {
            pool,
            shown: super::url::redact(url),
            read_only: options.read_only,
            tails: Arc::default(),
            alone_refused: Arc::default(),
        })
    }

    /// The URL without its password.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// Runs `f` in one read-write transaction and commits if it returns `Ok`. Callers that
    /// touch a session take its row lock first ([`lock_session`]).
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        self.transaction(false, f)
    }

    /// [`PgStore::write`], or with `rollback` the same work rolled back at the end.
    pub(crate) fn transaction<T>(
        &self,
        rollback: bool,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        let mode = Mode::Write {
            read_only: self.read_only,
            rollback,
        };
        self.run(mode, f)
    }

    /// A pooled connection, or [`Error::is_unreachable`] once the pool's bounded wait is over.
    fn checkout(&self) -> Result<PooledConnection<Manager>> {
        self.pool.get().map_err(Error::postgres_pool)
    }

    /// Runs `f` in one transaction of `mode`. A pooled connection the server has dropped
    /// (a restart, an idle timeout) fails its BEGIN, before anything of `f` ran: it is left
    /// to the pool to discard, and `f` runs again on the next connection. Every idle
    /// connection may have been dropped at once (a restart drops them all), so this goes on
    /// past each of them: at most one more time than the pool holds connections.
    fn run<T, F: FnOnce(&mut Tx<'_>) -> Result<T>>(&self, mode: Mode, f: F) -> Result<T> {
        let mut f = f;
        for _ in 0..self.pool.max_size() {
            let mut conn = self.checkout()?;
            match run_on(&mut conn, mode, f) {
                Ok(result) => return result,
                Err((error, back)) if crate::error::postgres_unreachable(&error) => f = back,
                Err((error, _)) => return Err(error.into()),
            }
        }
        let mut conn = self.checkout()?;
        run_on(&mut conn, mode, f).unwrap_or_else(|(error, _)| Err(error.into()))
    }

    /// Runs `work`, an append to `session`, and keeps the tail it wrote with the session row's
    /// version it left ([`remembered`]).
    ///
    /// When this store's last append to the session left a tail, and the append
    /// `fits_one_statement`, `work` runs first on a connection outside a transaction, where
    /// its one statement ([`ONE_STATEMENT`]) takes the session's lock and writes only while
    /// the session row is still the version that append left: no other writer has written
    /// the session since (every write to a session's rows writes its row,
    /// [`lock_session`]). One round trip, where a transaction takes four. If the tail did
    /// not hold, or the append needs more than that statement, nothing was written, and
    /// `work` runs again in a transaction ([`PgStore::write`]), on the tail read under the
    /// lock. A server that fails the one statement where the transaction then succeeds
    /// does not take it (a distributed engine may not): the store stops trying.
    pub(crate) fn append(
        &self,
        session: &SessionId,
        fits_one_statement: bool,
        work: Work<'_>,
    ) -> Result<()> {
        let alone = fits_one_statement && !self.alone_refused.load(Ordering::Relaxed);
        let hint = alone.then(|| self.tails().take(session)).flatten();
        let mut failed_alone = false;
        if let Some(hint) = hint {
            let version = hint.version;
            match self.one_statement(hint, work) {
                Ok(Alone::Wrote(kept)) => {
                    if let Some(kept) = kept {
                        self.tails().keep(session, kept, true);
                    }
                    return Ok(());
                }
                Ok(Alone::Missed) => self.tails().missed(session),
                // The connection failed: the statement may or may not have committed. A
                // new version of the session row fences it off (it can no longer hold);
                // where the row has moved on, the append may have gone in, and the caller
                // is told, as of a lost commit.
                Err(error) if error.is_unreachable() => {
                    if !self.fence(session, version)? {
                        return Err(error);
                    }
                }
                // The server failed the statement, which wrote nothing: the transaction
                // answers (with the same error, where the append is at fault).
                Err(_) => failed_alone = true,
            }
        }
        let kept = self.write(|tx| {
            work(tx)?;
            Ok(tx.kept.take())
        })?;
        if let Some(kept) = kept {
            self.tails().keep(session, kept, false);
        }
        if failed_alone {
            tracing::warn!(
                "the server failed a one-statement append that went in as a transaction: \
                 this store's appends are transactions from now on"
            );
            self.alone_refused.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The store's remembered tails (a poisoned lock still holds only hints).
    fn tails(&self) -> std::sync::MutexGuard<'_, Tails> {
        self.tails
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// [`PgStore::append`]'s one statement: `work` on a connection outside a transaction,
    /// offered `hint`. An error only where nothing was written, or where the statement wrote
    /// and `work` failed after it (the append is in: it must not run again).
    fn one_statement(&self, hint: Kept, work: Work<'_>) -> Result<Alone> {
        let mut conn = self.checkout()?;
        let Connection { client, statements } = &mut *conn;
        let mut tx = Tx {
            tx: Runner::Alone(client),
            statements,
            kept: None,
            one: Some(OneStatement {
                kept: Some(hint),
                ran: false,
                wrote: false,
                refused: false,
            }),
        };
        let done = work(&mut tx);
        let (wrote, refused) = tx
            .one
            .as_ref()
            .map_or((false, false), |one| (one.wrote, one.refused));
        match done {
            Ok(()) if wrote => Ok(Alone::Wrote(tx.kept.take())),
            Err(error) if wrote => Err(error),
            // Nothing was written (the one statement is the only one sent, and it said so).
            Ok(()) => Ok(Alone::Missed),
            _ if refused => Ok(Alone::Missed),
            // Taken without waiting, the lock was another writer's: it writes the session now.
            Err(error) if error.is_busy() => Ok(Alone::Missed),
            Err(error) => Err(error),
        }
    }

    /// Writes a new version of `session`'s row where it is still `version`: a one-statement
    /// append that checks for `version` can no longer write. Whether it was.
    fn fence(&self, session: &SessionId, version: i64) -> Result<bool> {
        let fenced = self.write(|tx| {
            tx.execute(
                concat!(new_row_version!(), " AND ", row_version!(), " = $2"),
                &[&session.as_str(), &version],
            )
        })?;
        Ok(fenced == 1)
    }

    /// Runs `sql` on a pooled connection outside any transaction (what `VACUUM` needs).
    pub(crate) fn outside_transaction(&self, sql: &str) -> Result<()> {
        if self.read_only {
            // The server's own refusal (`Error::is_read_only`): a write that changes no row
            // is still refused in a read-only transaction.
            self.write(|tx| tx.execute("UPDATE sessions SET id = id WHERE false", &[]))?;
        }
        let mut conn = self.checkout()?;
        conn.client.batch_execute(sql)?;
        Ok(())
    }

    /// Runs `f` in one `REPEATABLE READ READ ONLY` transaction: one snapshot for all its
    /// queries.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        self.run(Mode::Read, f)
    }
}

/// How long a new connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a call waits for a pooled connection (never longer than the busy timeout).
const POOL_WAIT: Duration = Duration::from_secs(10);

/// What kind of transaction [`PgStore::run`] opens.
#[derive(Clone, Copy)]
enum Mode {
    /// `REPEATABLE READ READ ONLY`: one snapshot.
    Read,
    /// Read-write (unless the store is read-only), committed or rolled back at the end.
    Write { read_only: bool, rollback: bool },
}

/// Begins a transaction of `mode` on `conn` and runs `f` in it. A BEGIN that fails hands
/// `f` back with the error, so the caller may try another connection.
#[allow(clippy::type_complexity)]
fn run_on<T, F: FnOnce(&mut Tx<'_>) -> Result<T>>(
    conn: &mut Connection,
    mode: Mode,
    f: F,
) -> std::result::Result<Result<T>, (postgres::Error, F)> {
    let Connection { client, statements } = conn;
    let builder = match mode {
        Mode::Read => client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true),
        Mode::Write { read_only, .. } => client.build_transaction().read_only(read_only),
    };
    let tx = match builder.start() {
        Ok(tx) => tx,
        Err(error) => return Err((error, f)),
    };
    let mut tx = Tx {
        tx: Runner::Transaction(tx),
        statements,
        kept: None,
        one: None,
    };
    let finish = |value: T, tx: Tx<'_>| -> Result<T> {
        let Runner::Transaction(transaction) = tx.tx else {
            return Ok(value);
        };
        match mode {
            Mode::Write { rollback: true, .. } => transaction.rollback()?,
            _ => transaction.commit()?,
        }
        Ok(value)
    };
    Ok(f(&mut tx).and_then(|value| finish(value, tx)))
}

/// Takes the session's row lock for the rest of the transaction; [`Error::UnknownSession`]
/// when there is no such session. Every write to a session's rows starts here (an append
/// with its own lock, [`remembered_tail`] or [`tail_row`]), so writers of one session run
/// one after another and each sees what the previous one committed.
///
/// The lock is taken by writing a new version of the row (its `xmin` changes, as an
/// append's own update of the row changes it): a one-statement append that remembered the
/// version an earlier append left ([`PgStore::append`]) then no longer holds.
pub(crate) fn lock_session(tx: &mut Tx<'_>, session: &SessionId) -> Result<()> {
    nameable(session)?;
    tx.query_opt(
        concat!(new_row_version!(), " RETURNING 1"),
        &[&session.as_str()],
    )?
    .map(|_| ())
    .ok_or_else(|| Error::UnknownSession(session.clone()))
}

/// Fails with [`Error::UnknownSession`] for an id that holds a NUL character: PostgreSQL's
/// text cannot, so no session has it (the server would fail the statement that binds it),
/// as SQLite finds no session by it.
pub(crate) fn nameable(session: &SessionId) -> Result<()> {
    match session.as_str().contains('\0') {
        true => Err(Error::UnknownSession(session.clone())),
        false => Ok(()),
    }
}

/// Fails with [`Error::UnknownSession`] unless the session exists (reads).
pub(crate) fn require_session(tx: &mut Tx<'_>, session: &SessionId) -> Result<()> {
    nameable(session)?;
    tx.query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&session.as_str()])?
        .map(|_| ())
        .ok_or_else(|| Error::UnknownSession(session.clone()))
}

/// [`crate::store::sql::Sql::tail_row`] on PostgreSQL, one statement: for a write (`Some`
/// of the append's call ids, [`TailRow::taken`] for them), the session's row lock and then
/// its tail read from what is committed; for a read, the same columns in the read's
/// snapshot (`session_store_tail`, `migrations-postgres/V20`). Only the session's own rows are read, each by a key of the
/// session's: the state is checked against the session's last seq, its largest part id and
/// its open block's part count (no trigger clears it on an insert: a part inserted since
/// raises the one or the other).
pub(crate) fn tail_row(
    tx: &mut Tx<'_>,
    session: &SessionId,
    for_write: Option<&[&str]>,
) -> Result<Option<TailRow>> {
    if nameable(session).is_err() {
        return Ok(None);
    }
    let sql = "SELECT tail_state, last_seq, open_messages, last_part, block_parts, taken
               FROM session_store_tail($1, $2, $3)";
    let (calls, lock) = (for_write.unwrap_or_default(), for_write.is_some());
    let Some(row) = tx.query_opt(sql, &[&session.as_str(), &calls, &lock])? else {
        return Ok(None);
    };
    Ok(Some(TailRow {
        state: row.try_get(0)?,
        last_seq: row.try_get(1)?,
        parts_max: Some(row.try_get(3)?),
        block_parts: Some(row.try_get(4)?),
        open_messages: row.try_get(2)?,
        taken: match for_write {
            Some(_) => Some(row.try_get(5)?),
            None => None,
        },
    }))
}

/// [`crate::store::sql::Sql::remembered_tail`] on PostgreSQL: the session's lock, with the
/// tail state its row keeps, unproved: the append's first insert checks it
/// ([`crate::store::write::TailCheck`]). `None` (read the tail): more call ids than a check asks about, no such
/// session, or a state that is missing or unreadable.
pub(crate) fn remembered_tail(
    tx: &mut Tx<'_>,
    session: &SessionId,
    calls: &[&str],
) -> Result<Option<Remembered>> {
    if calls.len() > GUARD_CALLS {
        return Ok(None);
    }
    if nameable(session).is_err() {
        return Ok(None);
    }
    // A one-statement append: the tail this store's last append left, with the row version
    // its statement checks under the lock.
    if let Some(one) = &mut tx.one {
        return Ok(one.kept.take().map(|kept| Remembered {
            tail: kept.tail,
            taken: Vec::new(),
            unproved: true,
            version: Some(kept.version),
        }));
    }
    let Some(row) = tx.query_opt(
        "SELECT tail_state FROM sessions WHERE id = $1 FOR UPDATE",
        &[&session.as_str()],
    )?
    else {
        return Ok(None);
    };
    let state: Option<String> = row.try_get(0)?;
    let Some(tail) = state.as_deref().and_then(TailState::decode) else {
        return Ok(None);
    };
    Ok(Some(Remembered {
        tail,
        taken: Vec::new(),
        unproved: true,
        version: None,
    }))
}

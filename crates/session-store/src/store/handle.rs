//! The [`Store`](crate::Store) handle: an engine behind the seam, and the transactions every operation
//! runs in. The operations are written in the files named after them (`write.rs`,
//! `export.rs`, ...) as methods of [`Store`](crate::Store); opening one is in `store/mod.rs`.

use std::path::Path;
use std::sync::Arc;

use super::engine::{self, Engine};
use super::options::ConnectionSettings;
use super::sql::Sql;
use crate::error::Result;
use crate::model::SessionId;

/// A session database: one SQLite file, or a PostgreSQL database named by a `postgres://`
/// URL (with the cargo feature `postgres`), migrated to the current schema, behind a pool.
///
/// `Store` is `Send + Sync` and cheap to clone; clones share the pool. Every operation is
/// written once over the engine seam (`store/engine.rs`).
#[derive(Clone, Debug)]
pub struct Store {
    pub(super) engine: Arc<dyn Engine>,
}

impl Store {
    /// The database file; for a PostgreSQL store, its URL without the password.
    pub fn path(&self) -> &Path {
        self.engine.location()
    }

    /// [`crate::Error::UnknownSession`] for an id this store's engine cannot hold
    /// ([`Engine::names_no_session`]), before an operation binds it.
    pub(crate) fn nameable(&self, session: &SessionId) -> Result<()> {
        match self.engine.names_no_session(session) {
            true => Err(crate::Error::UnknownSession(session.clone())),
            false => Ok(()),
        }
    }

    /// True when this store is a PostgreSQL database (opened on a `postgres://` URL).
    pub fn is_postgres(&self) -> bool {
        self.engine.name() == "postgres"
    }

    /// The settings a pooled connection runs with, read back from SQLite
    /// ([`Error::Unsupported`](crate::Error::Unsupported) on PostgreSQL).
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

    /// [`Store::write`] for an append to `session`, on a transaction that may remember the tails earlier
    /// appends wrote ([`Engine::run_append`](super::engine::Engine::run_append)).
    pub(crate) fn append_write<T>(
        &self,
        session: &SessionId,
        fits_one_statement: bool,
        f: impl FnMut(&mut &mut dyn Sql) -> Result<T>,
    ) -> Result<T> {
        engine::run_again(
            |work| self.engine.run_append(session, fits_one_statement, work),
            f,
        )
    }

    /// Runs `f` inside one read transaction, so all its queries see the same snapshot.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&mut &mut dyn Sql) -> Result<T>) -> Result<T> {
        engine::run(|work| self.engine.run_read(work), f)
    }
}

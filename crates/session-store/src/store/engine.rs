//! The engine seam: what a backend gives [`Store`](super::Store), which is written once over
//! it. An engine opens transactions (a read that sees one snapshot, a write that commits or
//! leaves nothing), each handed out as an [`Sql`] transaction that the operations of `store/`
//! run their statements in; and it does the few things that are its own: full-text search
//! (FTS5 or `tsvector`), sizes and reclaiming space (a file or the server's relations),
//! listings ordered by its collation, and a session's rows read and written whole for a copy.
//!
//! Engines: SQLite ([`super::SqliteEngine`], always built) and PostgreSQL (`store/pg/`, behind
//! the cargo feature `postgres`).

use std::fmt::Debug;
use std::path::Path;

use super::options::ConnectionSettings;
use super::reports::SessionRows;
use super::reports::{Lineage, Reclaimed, SearchHit, SearchOptions, SessionOverview, SizeReport};
use super::sql::Sql;
use crate::error::{Error, Result};
use crate::model::{SessionId, SessionInfo};

/// Work run in one transaction: statements through the [`Sql`] transaction it is given.
pub(crate) type Work<'w> = &'w mut dyn FnMut(&mut dyn Sql) -> Result<()>;

/// A backend of [`super::Store`]. Object safe: a store holds one as `Arc<dyn Engine>`.
pub(crate) trait Engine: Debug + Send + Sync {
    /// The database file; for PostgreSQL, the URL without its password.
    fn location(&self) -> &Path;

    /// The backend's name in messages (`sqlite`, `postgres`).
    fn name(&self) -> &'static str;

    /// Runs `work` in one read transaction: all its queries see one snapshot.
    fn run_read(&self, work: Work<'_>) -> Result<()>;

    /// Runs `work` in one write transaction and commits if it returns `Ok`; on `Err` nothing
    /// of it stays.
    fn run_write(&self, work: Work<'_>) -> Result<()>;

    /// [`Engine::run_write`] for an append to `session` (`Store::append_batch`): where the engine keeps
    /// what its own appends wrote (SQLite, `store/memory.rs`; PostgreSQL,
    /// `store/pg/remembered.rs`), `work`'s transaction offers it ([`Sql::remembered_tail`]).
    /// An append that `fits_one_statement` ([`super::encode::fits_one_statement`]) may run
    /// as that one statement outside a transaction, where the engine can (PostgreSQL).
    fn run_append(
        &self,
        session: &SessionId,
        fits_one_statement: bool,
        work: Work<'_>,
    ) -> Result<()> {
        let _ = (session, fits_one_statement);
        self.run_write(work)
    }

    /// Runs `work` in one write transaction and rolls it back at the end: a dry run.
    /// `operation` names it for the refusal of an engine that does not (SQLite: a mend is
    /// rehearsed on a copy of the file instead).
    fn run_rolled_back(&self, operation: &'static str, work: Work<'_>) -> Result<()> {
        let _ = work;
        Err(Error::Unsupported {
            operation,
            backend: self.name(),
        })
    }

    /// The settings of a pooled connection (SQLite's pragmas).
    fn connection_settings(&self) -> Result<ConnectionSettings> {
        Err(Error::Unsupported {
            operation: "an SQLite-only operation (reading connection settings)",
            backend: self.name(),
        })
    }

    /// A consistent, verified copy of the whole database in the file `dest`.
    fn backup_to(&self, dest: &Path) -> Result<()> {
        let _ = dest;
        Err(Error::Unsupported {
            operation: "a file backup",
            backend: self.name(),
        })
    }

    /// `Store::search_index_behind`: the full-text index misses parts written since its
    /// last catch-up (both engines index lazily, before a search; a read-only store cannot).
    fn search_index_behind(&self) -> Result<bool> {
        Ok(false)
    }

    /// True when a text column keeps a NUL character (SQLite's do; PostgreSQL refuses one).
    fn keeps_nul_in_text(&self) -> bool {
        true
    }

    /// True when `session` cannot name a session of this engine's (PostgreSQL: an id with a
    /// NUL character, which its text cannot hold; the server would fail the statement that
    /// binds it). An operation on it answers as for an unknown session, without a statement.
    fn names_no_session(&self, _session: &SessionId) -> bool {
        false
    }

    /// `Store::orphan_rows`: rows pointing at a missing row (none where the engine always
    /// enforces its foreign keys).
    fn orphan_rows(&self) -> Result<Vec<super::orphans::OrphanRow>> {
        Ok(Vec::new())
    }

    /// `Store::mend_orphan_rows`.
    fn mend_orphan_rows(&self) -> Result<Vec<super::orphans::OrphanMend>> {
        Ok(Vec::new())
    }

    /// `Store::search`: the engine's full-text index.
    fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>>;

    /// `Store::list_sessions` (every session, or only `only`), in the engine's byte order.
    fn list_sessions(&self, only: Option<&SessionId>) -> Result<Vec<SessionInfo>>;

    /// `Store::sessions` / `Store::session_overview`.
    fn overviews(&self, only: Option<&SessionId>) -> Result<Vec<SessionOverview>>;

    /// `Store::sessions_with_prefix`.
    fn sessions_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<SessionId>>;

    /// `Store::lineage`.
    fn lineage(&self) -> Result<Vec<Lineage>>;

    /// `Store::size_report`: a file, or the server's relations.
    fn size_report(&self, top: usize) -> Result<SizeReport>;

    /// `Store::reclaim_space` / `Store::vacuum`.
    fn reclaim(&self, always_full: bool) -> Result<Reclaimed>;

    /// `Store::bytes_on_disk`.
    fn bytes_on_disk(&self) -> u64;

    /// Every row of `session`, read in one snapshot (a copy's source).
    fn session_rows(&self, session: &SessionId) -> Result<SessionRows>;

    /// Writes a session's rows in one transaction (a copy's destination).
    fn put_session_rows(&self, session: &SessionId, rows: &SessionRows) -> Result<()>;
}

/// Runs `f` as an engine's [`Work`] (called once), giving back what it returns.
pub(crate) fn run<T>(
    transaction: impl FnOnce(Work<'_>) -> Result<()>,
    f: impl FnOnce(&mut &mut dyn Sql) -> Result<T>,
) -> Result<T> {
    let mut f = Some(f);
    run_again(transaction, move |db| match f.take() {
        Some(f) => f(db),
        None => Err(Error::Unsupported {
            operation: "a unit of work its engine ran twice",
            backend: "engine",
        }),
    })
}

/// [`run`] for work an engine may run more than once (a one-statement append that did not
/// hold runs again in a transaction): what its last run returned.
pub(crate) fn run_again<T>(
    transaction: impl FnOnce(Work<'_>) -> Result<()>,
    mut f: impl FnMut(&mut &mut dyn Sql) -> Result<T>,
) -> Result<T> {
    let mut value = None;
    transaction(&mut |mut db: &mut dyn Sql| {
        value = Some(f(&mut db)?);
        Ok(())
    })?;
    value.ok_or(Error::Unsupported {
        operation: "a transaction its engine never ran",
        backend: "engine",
    })
}

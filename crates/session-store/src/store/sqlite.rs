//! The SQLite engine behind the seam (`store/engine.rs`): its transactions, and its own
//! operations, each written next to the rest of its subject (search in `search.rs`, sizes in
//! `retention.rs`, a copy's rows in `copy.rs`, ...) as a method of [`SqliteEngine`].

use std::path::Path;

use rusqlite::{params_from_iter, Connection, OptionalExtension};

use super::engine::{Engine, Work};
use super::memory::{CallMemory, TailMemory};
use super::options::ConnectionSettings;
use super::pool::SqliteEngine;
use super::reports::SessionRows;
use super::reports::{Lineage, Reclaimed, SearchHit, SearchOptions, SessionOverview, SizeReport};
use super::rows::{Cells, Loaded, Range, Unreadable};
use super::sql::{Sql, Value};
use super::write::{AppendedCalls, Remembered, Run, TailRow};
use crate::error::Result;
use crate::history::tail::TailState;
use crate::model::{Message, SessionId, SessionInfo};

impl Engine for SqliteEngine {
    fn location(&self) -> &Path {
        self.path()
    }

    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn search_index_behind(&self) -> Result<bool> {
        self.read(super::search::index_behind)
    }

    fn run_read(&self, work: Work<'_>) -> Result<()> {
        self.read(|conn| work(&mut SqliteTx::of(conn)))
    }

    fn run_write(&self, work: Work<'_>) -> Result<()> {
        self.write_keeping_calls(|tx, calls| work(&mut SqliteTx::keeping_calls(tx, calls)))
    }

    fn run_append(&self, session: &SessionId, _: bool, work: Work<'_>) -> Result<()> {
        self.append(session, |tx, memory, calls| {
            work(&mut SqliteTx::remembering(tx, memory, calls))
        })
    }

    fn connection_settings(&self) -> Result<ConnectionSettings> {
        SqliteEngine::connection_settings(self)
    }

    fn backup_to(&self, dest: &Path) -> Result<()> {
        super::file::backup_database(self.path(), dest)
    }

    fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        SqliteEngine::search(self, query, options)
    }

    fn orphan_rows(&self) -> Result<Vec<super::orphans::OrphanRow>> {
        SqliteEngine::orphan_rows(self)
    }

    fn mend_orphan_rows(&self) -> Result<Vec<super::orphans::OrphanMend>> {
        SqliteEngine::mend_orphan_rows(self)
    }

    fn list_sessions(&self, only: Option<&SessionId>) -> Result<Vec<SessionInfo>> {
        SqliteEngine::list_sessions(self, only)
    }

    fn overviews(&self, only: Option<&SessionId>) -> Result<Vec<SessionOverview>> {
        SqliteEngine::overviews(self, only)
    }

    fn sessions_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<SessionId>> {
        SqliteEngine::sessions_with_prefix(self, prefix, limit)
    }

    fn lineage(&self) -> Result<Vec<Lineage>> {
        SqliteEngine::lineage(self)
    }

    fn size_report(&self, top: usize) -> Result<SizeReport> {
        SqliteEngine::size_report(self, top)
    }

    fn reclaim(&self, always_full: bool) -> Result<Reclaimed> {
        SqliteEngine::reclaim(self, always_full)
    }

    fn bytes_on_disk(&self) -> u64 {
        SqliteEngine::bytes_on_disk(self)
    }

    fn session_rows(&self, session: &SessionId) -> Result<SessionRows> {
        SqliteEngine::session_rows(self, session)
    }

    fn put_session_rows(&self, session: &SessionId, rows: &SessionRows) -> Result<()> {
        SqliteEngine::put_session_rows(self, session, rows)
    }
}

/// An SQLite transaction as the operations of `store/` run their statements in ([`Sql`]);
/// an append's ([`Engine::run_append`]) also holds what the connection remembers of the tails
/// its own appends wrote, and every write of the store's the call ids it keeps
/// (`store/memory.rs`).
pub(crate) struct SqliteTx<'c> {
    conn: &'c Connection,
    memory: Option<&'c mut TailMemory>,
    calls: Option<&'c mut CallMemory>,
}

impl<'c> SqliteTx<'c> {
    /// The transaction open on `conn`, with no memory.
    pub(crate) fn of(conn: &'c Connection) -> Self {
        Self {
            conn,
            memory: None,
            calls: None,
        }
    }

    /// A write's transaction open on `conn`, with the call ids the connection keeps.
    pub(crate) fn keeping_calls(conn: &'c Connection, calls: &'c mut CallMemory) -> Self {
        Self {
            conn,
            memory: None,
            calls: Some(calls),
        }
    }

    /// An append's transaction open on `conn`, with what the connection remembers.
    pub(crate) fn remembering(
        conn: &'c Connection,
        memory: &'c mut TailMemory,
        calls: &'c mut CallMemory,
    ) -> Self {
        Self {
            conn,
            memory: Some(memory),
            calls: Some(calls),
        }
    }
}

impl std::ops::Deref for SqliteTx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Sql for SqliteTx<'_> {
    fn run(&mut self, sql: &str, params: &[Value<'_>]) -> Result<u64> {
        let changed = self
            .prepare_cached(sql)?
            .execute(params_from_iter(params))?;
        Ok(changed as u64)
    }

    fn insert(&mut self, sql: &str, params: &[Value<'_>]) -> Result<i64> {
        self.prepare_cached(sql)?
            .execute(params_from_iter(params))?;
        Ok(self.last_insert_rowid())
    }

    fn int_table(&mut self, sql: &str, params: &[Value<'_>], width: usize) -> Result<Vec<i64>> {
        let mut statement = self.prepare_cached(sql)?;
        let mut rows = statement.query(params_from_iter(params))?;
        let mut cells = Vec::new();
        while let Some(row) = rows.next()? {
            for at in 0..width {
                cells.push(row.get(at)?);
            }
        }
        Ok(cells)
    }

    fn optional_int(&mut self, sql: &str, params: &[Value<'_>]) -> Result<Option<i64>> {
        Ok(self
            .prepare_cached(sql)?
            .query_row(params_from_iter(params), |row| row.get(0))
            .optional()?
            .flatten())
    }

    fn each_row(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        each: &mut dyn FnMut(&dyn Cells) -> Result<()>,
    ) -> Result<()> {
        let mut statement = self.prepare_cached(sql)?;
        let mut rows = statement.query(params_from_iter(params))?;
        while let Some(row) = rows.next()? {
            each(row)?;
        }
        Ok(())
    }

    fn load_messages(&mut self, session: &SessionId, range: Range) -> Result<Vec<Message>> {
        super::rows::load_messages(self, session, range)
    }

    fn session_ids(&mut self) -> Result<Vec<SessionId>> {
        let mut statement = self.prepare_cached("SELECT id FROM sessions ORDER BY id")?;
        let ids = statement
            .query_map([], |row| row.get::<_, String>(0))?
            .map(|id| id.map(SessionId::new))
            .collect::<rusqlite::Result<_>>()?;
        Ok(ids)
    }

    fn require_session(&mut self, session: &SessionId) -> Result<()> {
        super::write::require_session(self, session)
    }

    fn lock_session(&mut self, session: &SessionId) -> Result<()> {
        super::write::require_session(self, session)
    }

    fn tail_row(&mut self, session: &SessionId, _for_write: bool) -> Result<Option<TailRow>> {
        super::write::sqlite_tail_row(self, session)
    }

    fn remembered_tail(
        &mut self,
        session: &SessionId,
        calls: &[&str],
    ) -> Result<Option<Remembered>> {
        let Some(tail) = self.memory.as_deref_mut().and_then(|m| m.take(session)) else {
            return Ok(None);
        };
        // `data_version` proved the memory current: nothing to check.
        let run = Run {
            epoch: Some(tail.epoch),
            last_seq: tail.last_seq,
            except_seq: None,
            remembered: true,
        };
        let taken = match calls.is_empty() {
            true => Vec::new(),
            false => {
                let memory = self.calls.as_deref_mut();
                super::write::sqlite_calls_used(self.conn, memory, session, &run, calls)?
            }
        };
        Ok(Some(Remembered {
            tail,
            taken,
            unproved: false,
            version: None,
        }))
    }

    fn remember_tail(&mut self, session: &SessionId, tail: TailState, _version: Option<i64>) {
        if let Some(memory) = self.memory.as_deref_mut() {
            memory.keep(session, tail);
        }
    }

    /// Always: from the ids the write connection keeps, or read from the rows when the
    /// transaction has none of them (SQLite has no index of every call id).
    fn calls_used(
        &mut self,
        session: &SessionId,
        run: &Run,
        calls: &[&str],
    ) -> Result<Option<Vec<String>>> {
        let memory = self.calls.as_deref_mut();
        super::write::sqlite_calls_used(self.conn, memory, session, run, calls).map(Some)
    }

    fn remember_calls(&mut self, session: &SessionId, appended: &AppendedCalls<'_>) {
        if let Some(memory) = self.calls.as_deref_mut() {
            super::write::sqlite_remember_calls(memory, session, appended);
        }
    }

    fn load_for_check(
        &mut self,
        session: &SessionId,
    ) -> Result<std::result::Result<Loaded, Unreadable>> {
        super::rows::load_for_check(self, session)
    }

    fn columns(&mut self, table: &str) -> Result<Vec<String>> {
        super::fork::columns_of(self, table)
    }

    fn link_call(&mut self, session: &SessionId, call: &str, child: &SessionId) -> Result<()> {
        super::import::link_call(self, session, call, child)
    }
}

//! The SQLite engine behind the seam (`store/engine.rs`): its transactions, and its own
//! operations, each written next to the rest of its subject (search in `search.rs`, sizes in
//! `retention.rs`, a copy's rows in `copy.rs`, ...) as a method of [`SqliteEngine`].

use std::path::Path;

use super::copy::SessionRows;
use super::engine::{Engine, Work};
use super::sql::Sql;
use super::{
    ConnectionSettings, Lineage, Reclaimed, SearchHit, SearchOptions, SessionOverview, SizeReport,
    SqliteEngine,
};
use crate::error::Result;
use crate::model::{SessionId, SessionInfo};

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
        self.read(|conn| work(&mut { conn } as &mut dyn Sql))
    }

    fn run_write(&self, work: Work<'_>) -> Result<()> {
        self.write(|tx| work(&mut { &**tx } as &mut dyn Sql))
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

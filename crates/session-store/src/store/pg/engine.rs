//! The PostgreSQL engine behind the seam (`store/engine.rs`): its transactions, and its own
//! operations (in the modules beside this one).

use std::path::Path;

use super::PgStore;
use crate::error::Result;
use crate::model::{SessionId, SessionInfo};
use crate::store::engine::{Engine, Work};
use crate::store::reports::SessionRows;
use crate::store::reports::{
    Lineage, Reclaimed, SearchHit, SearchOptions, SessionOverview, SizeReport,
};

impl Engine for PgStore {
    fn location(&self) -> &Path {
        Path::new(self.shown())
    }

    fn name(&self) -> &'static str {
        "postgres"
    }

    fn run_read(&self, work: Work<'_>) -> Result<()> {
        self.read(|tx| work(tx))
    }

    fn run_write(&self, work: Work<'_>) -> Result<()> {
        self.transaction(false, |tx| work(tx))
    }

    fn run_append(
        &self,
        session: &SessionId,
        fits_one_statement: bool,
        work: Work<'_>,
    ) -> Result<()> {
        self.append(session, fits_one_statement, work)
    }

    fn run_rolled_back(&self, _operation: &'static str, work: Work<'_>) -> Result<()> {
        self.transaction(true, |tx| work(tx))
    }

    fn keeps_nul_in_text(&self) -> bool {
        false
    }

    fn search_index_behind(&self) -> Result<bool> {
        PgStore::search_index_behind(self)
    }

    fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        PgStore::search(self, query, options)
    }

    fn list_sessions(&self, only: Option<&SessionId>) -> Result<Vec<SessionInfo>> {
        PgStore::list_sessions(self, only)
    }

    fn names_no_session(&self, session: &SessionId) -> bool {
        super::nameable(session).is_err()
    }

    fn overviews(&self, only: Option<&SessionId>) -> Result<Vec<SessionOverview>> {
        PgStore::overviews(self, only)
    }

    fn sessions_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<SessionId>> {
        PgStore::sessions_with_prefix(self, prefix, limit)
    }

    fn lineage(&self) -> Result<Vec<Lineage>> {
        PgStore::lineage(self)
    }

    fn size_report(&self, top: usize) -> Result<SizeReport> {
        PgStore::size_report(self, top)
    }

    fn reclaim(&self, always_full: bool) -> Result<Reclaimed> {
        PgStore::reclaim(self, always_full)
    }

    fn bytes_on_disk(&self) -> u64 {
        PgStore::bytes_on_disk(self).unwrap_or(0)
    }

    fn session_rows(&self, session: &SessionId) -> Result<SessionRows> {
        self.read_session_rows(session)
    }

    fn put_session_rows(&self, session: &SessionId, rows: &SessionRows) -> Result<()> {
        self.write_session_rows(session, rows)
    }
}

//! [`Sql`] on a PostgreSQL transaction: the shared statements in `$n` spelling.

use super::Tx;
use crate::error::Result;
use crate::history::tail::TailState;
use crate::model::{Message, SessionId};
use crate::store::rows::{Cells, Loaded, Range, Unreadable};
use crate::store::sql::{dollar_placeholders, int_at, Sql, Value};

/// The joins of a message's parts or usage rows that the shared statements write in SQLite's
/// schema (where those rows name their message only), each with its twin along the session
/// as PostgreSQL's keys run (`migrations-postgres/V18`): both sides of the join in one
/// session, which a distributed engine routes to that session's shard.
const JOINS_ALONG_SESSION: [(&str, &str); 3] = [
    (
        "JOIN parts p ON p.message_id = m.id",
        "JOIN parts p ON p.session_id = m.session_id AND p.message_id = m.id",
    ),
    (
        "JOIN messages m ON m.id = p.message_id",
        "JOIN messages m ON m.session_id = p.session_id AND m.id = p.message_id",
    ),
    (
        "JOIN messages m ON m.id = u.message_id",
        "JOIN messages m ON m.session_id = u.session_id AND m.id = u.message_id",
    ),
];

/// A shared statement in PostgreSQL's spelling: `$n` placeholders, and its joins of parts
/// and usage to their message along the session ([`JOINS_ALONG_SESSION`]).
pub(crate) fn pg_statement(sql: &str) -> String {
    let mut out = dollar_placeholders(sql);
    for (plain, keyed) in JOINS_ALONG_SESSION {
        if out.contains(plain) {
            out = out.replace(plain, keyed);
        }
    }
    out
}
use crate::store::write::{Remembered, TailRow};

impl Sql for Tx<'_> {
    fn run(&mut self, sql: &str, params: &[Value<'_>]) -> Result<u64> {
        let statement = self.shared(sql, false)?;
        Ok(super::forward!(
            &mut self.tx,
            execute(&statement, &pg_params(params))
        )?)
    }

    fn insert(&mut self, sql: &str, params: &[Value<'_>]) -> Result<i64> {
        let statement = self.shared(sql, true)?;
        Ok(super::forward!(&mut self.tx, query_one(&statement, &pg_params(params)))?.try_get(0)?)
    }

    fn insert_rows(&mut self, sql: &str, params: &[Value<'_>]) -> Result<i64> {
        let statement = self.shared(sql, true)?;
        let mut last = 0;
        for row in super::forward!(&mut self.tx, query(&statement, &pg_params(params)))? {
            last = last.max(row.try_get::<_, i64>(0)?);
        }
        Ok(last)
    }

    fn rows_carry_session(&self) -> bool {
        true
    }

    fn parts_rewritten(&mut self, session: &SessionId, parts: &[i64]) -> Result<()> {
        if !parts.is_empty() {
            self.execute(
                "UPDATE parts SET search_document = NULL WHERE session_id = $1 AND id = ANY($2)",
                &[&session.as_str(), &parts],
            )?;
        }
        Ok(())
    }

    fn int_table(&mut self, sql: &str, params: &[Value<'_>], width: usize) -> Result<Vec<i64>> {
        let mut cells = Vec::new();
        for row in self.query_shared(sql, &pg_params(params))? {
            for at in 0..width {
                cells.push(int_at(&row, at)?.unwrap_or_default());
            }
        }
        Ok(cells)
    }

    fn optional_int(&mut self, sql: &str, params: &[Value<'_>]) -> Result<Option<i64>> {
        let statement = self.shared(sql, false)?;
        match super::forward!(&mut self.tx, query_opt(&statement, &pg_params(params)))? {
            Some(row) => int_at(&row, 0),
            None => Ok(None),
        }
    }

    fn each_row(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        each: &mut dyn FnMut(&dyn Cells) -> Result<()>,
    ) -> Result<()> {
        for row in self.query_shared(sql, &pg_params(params))? {
            each(&row)?;
        }
        Ok(())
    }

    fn load_messages(&mut self, session: &SessionId, range: Range) -> Result<Vec<Message>> {
        super::rows::load_messages(self, session, range)
    }

    fn session_ids(&mut self) -> Result<Vec<SessionId>> {
        super::read::session_ids(self)
    }

    fn require_session(&mut self, session: &SessionId) -> Result<()> {
        super::require_session(self, session)
    }

    fn lock_session(&mut self, session: &SessionId) -> Result<()> {
        super::lock_session(self, session)
    }

    fn tail_row(&mut self, session: &SessionId, for_write: bool) -> Result<Option<TailRow>> {
        super::tail_row(self, session, for_write.then_some(&[]))
    }

    fn tail_row_for_append(
        &mut self,
        session: &SessionId,
        calls: &[&str],
    ) -> Result<Option<TailRow>> {
        super::tail_row(self, session, Some(calls))
    }

    fn remembered_tail(
        &mut self,
        session: &SessionId,
        calls: &[&str],
    ) -> Result<Option<Remembered>> {
        super::remembered_tail(self, session, calls)
    }

    fn remember_tail(&mut self, _session: &SessionId, tail: TailState, version: Option<i64>) {
        if let Some(version) = version {
            self.kept = Some(super::Kept { tail, version });
        }
    }

    fn load_for_check(
        &mut self,
        session: &SessionId,
    ) -> Result<std::result::Result<Loaded, Unreadable>> {
        super::rows::load_for_check(self, session)
    }

    fn columns(&mut self, table: &str) -> Result<Vec<String>> {
        super::fork::columns(self, table)
    }

    fn copy_fork(
        &mut self,
        fork: &SessionId,
        source: &SessionId,
        cut: i64,
        at_turn: i64,
    ) -> Result<Option<[usize; 2]>> {
        super::fork::copy_fork(self, fork, source, cut, at_turn).map(Some)
    }

    fn link_call(&mut self, session: &SessionId, call: &str, child: &SessionId) -> Result<()> {
        super::write::link_call(self, session, call, child)
    }
}

fn pg_params<'v>(params: &'v [Value<'_>]) -> Vec<&'v (dyn postgres::types::ToSql + Sync)> {
    params.iter().map(Value::pg).collect()
}

impl Value<'_> {
    /// The value as PostgreSQL binds it.
    pub(crate) fn pg(&self) -> &(dyn postgres::types::ToSql + Sync) {
        match self {
            Value::Int(value) => value,
            Value::Text(value) => value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_of_parts_and_usage_run_along_the_session() {
        assert_eq!(
            pg_statement(
                "SELECT 1 FROM parts p JOIN messages m ON m.id = p.message_id WHERE m.session_id = ?1"
            ),
            "SELECT 1 FROM parts p JOIN messages m ON m.session_id = p.session_id \
             AND m.id = p.message_id WHERE m.session_id = $1"
        );
        assert_eq!(
            pg_statement("SELECT 1 FROM messages m LEFT JOIN parts p ON p.message_id = m.id"),
            "SELECT 1 FROM messages m LEFT JOIN parts p ON p.session_id = m.session_id \
             AND p.message_id = m.id"
        );
        assert_eq!(
            pg_statement("SELECT 1 FROM usage u JOIN messages m ON m.id = u.message_id"),
            "SELECT 1 FROM usage u JOIN messages m ON m.session_id = u.session_id \
             AND m.id = u.message_id"
        );
        let keyed = "SELECT 1 FROM messages m JOIN parts p ON p.session_id = m.session_id AND p.message_id = m.id";
        assert_eq!(pg_statement(keyed), keyed);
    }
}

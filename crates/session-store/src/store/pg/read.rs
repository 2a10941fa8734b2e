//! PostgreSQL reads: whole sessions, the session list, overviews and id prefixes. Text
//! keys sort with `COLLATE "C"` (bytes), as SQLite sorts them, whatever the database's
//! collation.

use crate::error::{Error, Result};
use crate::model::{SessionId, SessionInfo};
use crate::store::reports::SessionOverview;
use crate::store::time::parse_time;

use postgres::types::ToSql;

use super::{PgStore, Tx};
use crate::store::sql::{dollar_placeholders, one_or_every_session};
use crate::store::write::pending_listed;

/// The parameters of [`one_or_every_session`]'s statement: the session's id, or nothing.
fn session_param<'a>(id: &'a Option<&'a str>) -> Vec<&'a (dyn ToSql + Sync)> {
    id.iter().map(|id| id as &(dyn ToSql + Sync)).collect()
}

/// True when `only` names a session no row can hold ([`super::nameable`]): a listing of it
/// is empty.
fn names_none(only: Option<&SessionId>) -> bool {
    only.is_some_and(|session| super::nameable(session).is_err())
}

impl PgStore {
    pub(crate) fn list_sessions(&self, only: Option<&SessionId>) -> Result<Vec<SessionInfo>> {
        if names_none(only) {
            return Ok(Vec::new());
        }
        self.read(|tx| {
            let sql = one_or_every_session(
                "SELECT s.id, s.created_at, s.updated_at,
                        (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)
                 FROM sessions s {only} ORDER BY s.created_at COLLATE \"C\", s.id COLLATE \"C\"",
                only,
            );
            let id = only.map(SessionId::as_str);
            let rows = tx.query(&dollar_placeholders(&sql), &session_param(&id))?;
            let mut sessions = Vec::with_capacity(rows.len());
            for row in &rows {
                let id: String = row.try_get(0)?;
                let time = |at: usize| -> Result<_> {
                    let text: String = row.try_get(at)?;
                    parse_time(&text).ok_or_else(|| Error::CorruptRow {
                        table: "sessions",
                        row_id: 0,
                        detail: format!("session {id}: timestamp {text:?} is not RFC 3339"),
                    })
                };
                sessions.push(SessionInfo {
                    created_at: time(1)?,
                    updated_at: time(2)?,
                    message_count: row.try_get(3)?,
                    id: SessionId::new(id),
                });
            }
            Ok(sessions)
        })
    }

    pub(crate) fn overviews(&self, only: Option<&SessionId>) -> Result<Vec<SessionOverview>> {
        if names_none(only) {
            return Ok(Vec::new());
        }
        self.read(|tx| {
            let sql = one_or_every_session(
                "SELECT s.id, s.created_at, s.updated_at, s.title,
                        COUNT(m.id),
                        COUNT(DISTINCT m.turn_index),
                        COUNT(DISTINCT CASE WHEN m.compacted <> 0 THEN m.turn_index END)
                 FROM sessions s LEFT JOIN messages m ON m.session_id = s.id
                 {only}
                 GROUP BY s.id
                 ORDER BY s.created_at COLLATE \"C\", s.id COLLATE \"C\"",
                only,
            );
            let id = only.map(SessionId::as_str);
            let rows = tx.query(&dollar_placeholders(&sql), &session_param(&id))?;
            let mut found = Vec::with_capacity(rows.len());
            for row in &rows {
                let time = |at: usize| -> Result<_> {
                    Ok(row
                        .try_get::<_, Option<String>>(at)?
                        .as_deref()
                        .and_then(parse_time))
                };
                found.push(SessionOverview {
                    id: SessionId::new(row.try_get::<_, String>(0)?),
                    created_at: time(1)?,
                    updated_at: time(2)?,
                    title: row.try_get(3)?,
                    messages: row.try_get(4)?,
                    turns: row.try_get(5)?,
                    compacted_turns: row.try_get(6)?,
                    pending: Vec::new(),
                });
            }
            for overview in &mut found {
                overview.pending = pending_listed(tx, &overview.id)?;
            }
            Ok(found)
        })
    }

    pub(crate) fn sessions_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<SessionId>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|tx| {
            // `starts_with` compares characters, whatever the database's collation.
            tx.query(
                "SELECT id FROM sessions WHERE starts_with(id, $1) ORDER BY id COLLATE \"C\" LIMIT $2",
                &[&prefix, &limit],
            )?
            .iter()
            .map(|row| Ok(SessionId::new(row.try_get::<_, String>(0)?)))
            .collect()
        })
    }
}

/// Every session id, in id order.
pub(crate) fn session_ids(tx: &mut Tx<'_>) -> Result<Vec<SessionId>> {
    tx.query("SELECT id FROM sessions ORDER BY id COLLATE \"C\"", &[])?
        .iter()
        .map(|row| Ok(SessionId::new(row.try_get::<_, String>(0)?)))
        .collect()
}

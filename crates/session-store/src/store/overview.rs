//! Session listings that count instead of loading: [`Store::session_overviews`] answers
//! "what is in this database" with SQL aggregates per session (messages, turns, compacted
//! turns) and the session's tail (pending calls), never reading a message's parts;
//! [`Store::session_row`] adds a session's health (the contract's check) to make the row
//! `session-store sessions --json` prints ([`SessionRow`]); and [`Store::sessions_with_prefix`]
//! finds the sessions a short id prefix names.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde::Serialize;

use super::handle::Store;
use super::pool::SqliteEngine;
use super::reports::SessionOverview;
use super::sql::one_or_every_session;
use super::time::format_time;
use super::time::parse_time;
use super::write::pending_listed;
use crate::error::{Error, Result};
use crate::history::rules::HealthRule;
use crate::model::SessionId;

/// A session's listing as a JSON object: the [`SessionOverview`] with its timestamps written
/// as every JSON shape writes them (RFC 3339, microseconds, `Z`; `null` when unreadable) and
/// its pending calls counted. The first fields of a [`SessionRow`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OverviewRow {
    /// The session's id.
    pub id: String,
    /// Its title, if any.
    pub title: Option<String>,
    /// When it was created.
    pub created_at: Option<String>,
    /// When it last changed.
    pub updated_at: Option<String>,
    /// How many messages it holds.
    pub messages: i64,
    /// How many turns.
    pub turns: i64,
    /// How many turns hold a compacted message.
    pub compacted_turns: i64,
    /// How many calls wait for a result at its end.
    pub pending: usize,
    /// Their ids.
    pub pending_tool_use_ids: Vec<String>,
}

impl From<&SessionOverview> for OverviewRow {
    fn from(o: &SessionOverview) -> Self {
        Self {
            id: o.id.as_str().to_owned(),
            title: o.title.clone(),
            created_at: o.created_at.map(format_time),
            updated_at: o.updated_at.map(format_time),
            messages: o.messages,
            turns: o.turns,
            compacted_turns: o.compacted_turns,
            pending: o.pending.len(),
            pending_tool_use_ids: o.pending.clone(),
        }
    }
}

/// What the contract's check says about a listed session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionHealth {
    /// It breaks no rule.
    Ok,
    /// It breaks the rules its row names.
    Broken,
    /// A row of it cannot be read (`unreadable_row`).
    Unreadable,
}

/// One row of `session-store sessions --json` (and of the Python `Store.sessions()`): the
/// [`OverviewRow`], then `health`, the `rules` broken (sorted, each once) and, for an
/// unreadable session, why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionRow {
    /// The counts.
    #[serde(flatten)]
    pub overview: OverviewRow,
    /// `ok`, `broken` or `unreadable`.
    pub health: SessionHealth,
    /// The rules broken (`["unreadable_row"]` for an unreadable session).
    pub rules: Vec<&'static str>,
    /// Why a row cannot be read, for an unreadable session.
    pub unreadable: Option<String>,
}

impl SessionRow {
    /// The health as the table shows it: `ok`, or the rules broken, comma-separated.
    pub fn health_label(&self) -> String {
        match self.health {
            SessionHealth::Ok => "ok".to_owned(),
            _ => self.rules.join(","),
        }
    }
}

// One pass over the messages index per session; `compacted` is read from the row. No parts.
const OVERVIEWS: &str = "
    SELECT s.id, s.created_at, s.updated_at, {title},
           COUNT(m.id),
           COUNT(DISTINCT m.turn_index),
           COUNT(DISTINCT CASE WHEN m.compacted <> 0 THEN m.turn_index END)
    FROM sessions s LEFT JOIN messages m ON m.session_id = s.id
    {only}
    GROUP BY s.id
    ORDER BY s.created_at, s.id";

const HAS_TITLE: &str = "SELECT 1 FROM pragma_table_info('sessions') WHERE name = 'title'";

// `id` is the primary key: a range on it reads only the matching entries. U+10FFFF sorts
// after every character an id can continue with (TEXT compares as UTF-8 bytes).
const WITH_PREFIX: &str = "
    SELECT id FROM sessions WHERE id >= ?1 AND id < ?1 || char(1114111) ORDER BY id LIMIT ?2";

impl Store {
    /// Every session, oldest first, with its counts; see [`SessionOverview`]. One snapshot.
    ///
    /// Cost: one aggregate query over the `messages` rows (never the parts), plus the tail
    /// of each session (its last messages) for the pending calls.
    pub fn session_overviews(&self) -> Result<Vec<SessionOverview>> {
        self.engine.overviews(None)
    }

    /// One session's [`SessionOverview`], or `None` when it does not exist.
    pub fn session_overview(&self, session: &SessionId) -> Result<Option<SessionOverview>> {
        Ok(self.engine.overviews(Some(session))?.pop())
    }

    /// The listing row of a session from [`Store::session_overviews`], with its health: the
    /// contract's check of that session alone (every message read once). `None` when the
    /// session was deleted since the overview was read.
    pub fn session_row(&self, overview: &SessionOverview) -> Result<Option<SessionRow>> {
        let row = |health, rules, unreadable| SessionRow {
            overview: OverviewRow::from(overview),
            health,
            rules,
            unreadable,
        };
        if overview.created_at.is_none() || overview.updated_at.is_none() {
            let why = "created_at or updated_at is not an RFC 3339 timestamp".to_owned();
            return Ok(Some(row(
                SessionHealth::Unreadable,
                vec![HealthRule::UnreadableRow.as_str()],
                Some(why),
            )));
        }
        let report = match self.check(std::slice::from_ref(&overview.id), &Default::default()) {
            Ok(report) => report,
            Err(Error::UnknownSession(_)) => return Ok(None),
            Err(error @ Error::CorruptRow { .. }) => {
                return Ok(Some(row(
                    SessionHealth::Unreadable,
                    vec![HealthRule::UnreadableRow.as_str()],
                    Some(error.to_string()),
                )))
            }
            Err(error) => return Err(error),
        };
        // The check reports a row outside the contract as a problem of its own.
        if let Some(unreadable) = report
            .violations
            .iter()
            .find(|v| v.rule == HealthRule::UnreadableRow)
        {
            return Ok(Some(row(
                SessionHealth::Unreadable,
                vec![HealthRule::UnreadableRow.as_str()],
                Some(unreadable.detail.clone()),
            )));
        }
        let rules: BTreeSet<&'static str> =
            report.violations.iter().map(|v| v.rule.as_str()).collect();
        let health = if rules.is_empty() {
            SessionHealth::Ok
        } else {
            SessionHealth::Broken
        };
        Ok(Some(row(health, rules.into_iter().collect(), None)))
    }

    /// The ids that start with `prefix`, in id order, at most `limit` of them: an exact id
    /// comes back alone only if no longer id shares it as a prefix, so callers that accept
    /// a prefix check for an exact match first.
    pub fn sessions_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<SessionId>> {
        self.engine.sessions_with_prefix(prefix, limit)
    }
}

impl SqliteEngine {
    /// [`Store::session_overviews`] on SQLite.
    pub(super) fn overviews(&self, only: Option<&SessionId>) -> Result<Vec<SessionOverview>> {
        self.read(|conn| overviews(conn, only))
    }

    /// [`Store::sessions_with_prefix`] on SQLite.
    pub(super) fn sessions_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<SessionId>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(WITH_PREFIX)?;
            let ids = stmt
                .query_map(rusqlite::params![prefix, limit], |row| {
                    row.get::<_, String>(0)
                })?
                .map(|id| id.map(SessionId::new))
                .collect::<rusqlite::Result<_>>()?;
            Ok(ids)
        })
    }
}

fn overviews(conn: &Connection, only: Option<&SessionId>) -> Result<Vec<SessionOverview>> {
    let has_title = conn.prepare_cached(HAS_TITLE)?.exists([])?;
    let sql = OVERVIEWS.replace("{title}", if has_title { "s.title" } else { "NULL" });
    let mut stmt = conn.prepare_cached(&one_or_every_session(&sql, only))?;
    let mut rows = stmt.query(rusqlite::params_from_iter(only.map(SessionId::as_str)))?;
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        // Any value that is not an RFC 3339 text (NULL, a number, a blob) is no time.
        let time = |at: usize| -> Result<Option<DateTime<Utc>>> {
            Ok(match row.get_ref(at)? {
                ValueRef::Text(text) => std::str::from_utf8(text).ok().and_then(parse_time),
                _ => None,
            })
        };
        found.push(SessionOverview {
            created_at: time(1)?,
            updated_at: time(2)?,
            title: row.get(3)?,
            messages: row.get(4)?,
            turns: row.get(5)?,
            compacted_turns: row.get(6)?,
            pending: Vec::new(),
            id: SessionId::new(id),
        });
    }
    drop(rows);
    for overview in &mut found {
        overview.pending = pending_listed(&mut super::sqlite::SqliteTx::of(conn), &overview.id)?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{NewMessage, Part};

    fn memory_store() -> Result<(tempfile::TempDir, Store)> {
        let dir = tempfile::tempdir().map_err(|e| crate::Error::Io {
            path: std::path::PathBuf::new(),
            source: e,
        })?;
        let store = Store::open(dir.path().join("s.db"))?;
        Ok((dir, store))
    }

    /// [`Store::session_overview`] finds its session by the primary key: a filter that also
    /// served every session (`?1 IS NULL OR s.id = ?1`) read every session's row to return
    /// one.
    #[test]
    fn one_session_s_overview_is_read_by_its_key() {
        crate::store::sql::assert_one_session_by_key(&OVERVIEWS.replace("{title}", "s.title"));
    }

    #[test]
    fn overviews_count_messages_turns_and_pending_calls() -> Result<()> {
        let (_dir, store) = memory_store()?;
        let empty = store.create_session()?;
        let busy = store.create_session()?;
        store.append(&busy, NewMessage::user("one"))?;
        store.append(&busy, NewMessage::assistant(vec![Part::text("ok")]))?;
        store.append(&busy, NewMessage::user("two"))?;
        store.append(
            &busy,
            NewMessage::assistant(vec![Part::tool_use("c1", "bash", json!({}))]),
        )?;
        let all = store.session_overviews()?;
        assert_eq!(all.len(), 2);
        let of = |id: &SessionId| all.iter().find(|o| &o.id == id).cloned();
        let empty = of(&empty).expect("listed");
        assert_eq!((empty.messages, empty.turns), (0, 0));
        let busy_view = of(&busy).expect("listed");
        assert_eq!(
            (
                busy_view.messages,
                busy_view.turns,
                busy_view.compacted_turns
            ),
            (4, 2, 0)
        );
        assert_eq!(busy_view.pending, ["c1"]);
        assert_eq!(store.session_overview(&busy)?, Some(busy_view));
        Ok(())
    }

    #[test]
    fn a_prefix_names_the_sessions_that_start_with_it() -> Result<()> {
        let (_dir, store) = memory_store()?;
        for id in ["abcd-1", "abcd-2", "abce-1"] {
            store.create_session_with_id(&SessionId::new(id))?;
        }
        let names = |p: &str| -> Result<Vec<String>> {
            Ok(store
                .sessions_with_prefix(p, 10)?
                .into_iter()
                .map(|id| id.as_str().to_owned())
                .collect())
        };
        assert_eq!(names("abcd")?, ["abcd-1", "abcd-2"]);
        assert_eq!(names("abce")?, ["abce-1"]);
        assert_eq!(names("abcd-2")?, ["abcd-2"]);
        assert!(names("x")?.is_empty());
        assert_eq!(store.sessions_with_prefix("ab", 2)?.len(), 2);
        Ok(())
    }
}

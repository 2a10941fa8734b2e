//! Reading sessions back: whole sessions and the session list.

use super::handle::Store;
use super::pool::SqliteEngine;
use super::rows::{
    select_for, session_row_problem, Columns, Decoder, Range, Unreadable, MESSAGE_COLUMNS,
    SESSION_ROW,
};
use super::sql::{one_or_every_session, values, Sql};
use super::time::parse_time;
use crate::error::{Error, Result};
use crate::history::rules::Problem;
use crate::model::{Message, SessionId, SessionInfo};

/// What [`Store::readable_messages`] could read of a session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadableSession {
    /// Every message inside the contract, in `seq` order, without its unreadable parts.
    pub messages: Vec<Message>,
    /// Each row left out (rule `unreadable_row`), with where it is as far as that is known:
    /// `message_id`, `seq` and `turn` are `None` when the row does not say.
    pub unreadable: Vec<Problem>,
}

/// `message_count` is kept on write (the store's appends and other inserts add to it, a
/// trigger takes deleted messages off) and checked here by two index probes per session:
/// seqs are distinct integers, so when the lowest is 1 and the highest is the count, no
/// message another writer inserted is missing from it. Otherwise (such an insert, or a
/// gap) the session's messages are counted.
const LIST_SESSIONS: &str = "
    SELECT s.id, s.created_at, s.updated_at,
           CASE WHEN s.message_count = (SELECT MAX(seq) FROM messages WHERE session_id = s.id)
                 AND (SELECT MIN(seq) FROM messages WHERE session_id = s.id) = 1
                THEN s.message_count
                ELSE (SELECT COUNT(*) FROM messages WHERE session_id = s.id) END
    FROM sessions s {only} ORDER BY s.created_at, s.id";

impl Store {
    /// Every message of the session, in `seq` order, with its parts in ordinal order.
    pub fn messages(&self, session: &SessionId) -> Result<Vec<Message>> {
        self.read(|db| {
            db.require_session(session)?;
            db.load_messages(session, Range::All)
        })
    }

    /// Every message of the session that can be read, and each row outside the contract
    /// that was left out: what a person can still see of a session [`Store::messages`]
    /// refuses with [`Error::CorruptRow`]. Equal to [`Store::messages`] with no
    /// `unreadable` rows when the session is healthy.
    pub fn readable_messages(&self, session: &SessionId) -> Result<ReadableSession> {
        let (messages, unreadable) = self.read(|db| {
            db.require_session(session)?;
            load_readable(db, session)
        })?;
        Ok(ReadableSession {
            messages,
            unreadable: unreadable.iter().map(|u| u.violation(session)).collect(),
        })
    }

    /// One session's summary line, or `None` when it does not exist.
    pub fn session(&self, session: &SessionId) -> Result<Option<SessionInfo>> {
        Ok(self.list_sessions(Some(session))?.pop())
    }

    /// Every session, oldest first.
    ///
    /// A session whose row holds a timestamp that is not one is left out (with a warning in
    /// the log) rather than failing the whole list: [`Store::check`] reports it under the
    /// rule `unreadable_row`, and [`Store::session`] fails for it with [`Error::CorruptRow`].
    pub fn sessions(&self) -> Result<Vec<SessionInfo>> {
        self.list_sessions(None)
    }

    fn list_sessions(&self, only: Option<&SessionId>) -> Result<Vec<SessionInfo>> {
        self.engine.list_sessions(only)
    }

    /// True when a session with this id exists.
    pub fn has_session(&self, session: &SessionId) -> Result<bool> {
        if self.engine.names_no_session(session) {
            return Ok(false);
        }
        self.read(|db| {
            Ok(db
                .optional_int(
                    "SELECT 1 FROM sessions WHERE id = ?1",
                    &values![session.as_str()],
                )?
                .is_some())
        })
    }
}

impl SqliteEngine {
    /// [`Store::sessions`] and [`Store::session`] on SQLite.
    pub(super) fn list_sessions(&self, only: Option<&SessionId>) -> Result<Vec<SessionInfo>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(&one_or_every_session(LIST_SESSIONS, only))?;
            let mut rows = stmt.query(rusqlite::params_from_iter(only.map(SessionId::as_str)))?;
            let mut sessions = Vec::new();
            while let Some(row) = rows.next()? {
                let id: String = row.get(0)?;
                let time = |at: usize| -> Result<_> {
                    let text: Option<String> = row.get_ref(at)?.as_str().ok().map(str::to_owned);
                    text.as_deref()
                        .and_then(parse_time)
                        .ok_or_else(|| Error::CorruptRow {
                            table: "sessions",
                            row_id: 0,
                            detail: format!("session {id}: timestamp {text:?} is not one"),
                        })
                };
                let (created_at, updated_at) = match (time(1), time(2)) {
                    (Ok(created_at), Ok(updated_at)) => (created_at, updated_at),
                    (Err(e), _) | (_, Err(e)) => {
                        if only.is_some() {
                            return Err(e);
                        }
                        tracing::warn!(session = %id, error = %e, "unreadable session row left out");
                        continue;
                    }
                };
                sessions.push(SessionInfo {
                    created_at,
                    updated_at,
                    message_count: row.get(3)?,
                    id: SessionId::new(id),
                });
            }
            Ok(sessions)
        })
    }
}

/// Everything of a session that can be read, on either engine: every message and part
/// inside the contract, in `seq` order, and each row outside it (the session row's
/// timestamps included), which is left out: an unreadable message with its parts, an
/// unreadable part from its message.
pub(crate) fn load_readable(
    sql: &mut impl Sql,
    session: &SessionId,
) -> Result<(Vec<Message>, Vec<Unreadable>)> {
    let mut unreadable = Vec::new();
    sql.each_row(SESSION_ROW, &values![session.as_str()], &mut |row| {
        unreadable.extend(session_row_problem(row, 0, 1));
        Ok(())
    })?;
    let mut decoder = Decoder::new(Columns::find(|name| {
        MESSAGE_COLUMNS.iter().position(|column| *column == name)
    })?);
    let (sql_text, first, last) = select_for(Range::All);
    sql.each_row(
        sql_text,
        &values![session.as_str(), first, last],
        &mut |row| {
            unreadable.extend(decoder.push_readable(row)?);
            Ok(())
        },
    )?;
    Ok((decoder.finish().messages, unreadable))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Store::session`] finds its session by the primary key: a filter that also served
    /// the whole list (`?1 IS NULL OR s.id = ?1`) read every session's row to return one.
    #[test]
    fn one_session_s_row_is_read_by_its_key() {
        crate::store::sql::assert_one_session_by_key(LIST_SESSIONS);
    }
}

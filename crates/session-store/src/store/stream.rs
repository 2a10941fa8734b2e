//! Streaming writes: an assistant message stored part by part while the model still sends
//! it ([`Store::begin_message`], [`OpenMessage::push`], [`OpenMessage::finish`]), and the
//! interruption of one whose writer went away.
//!
//! Each call is one transaction, written once over [`Sql`] for both engines. The open
//! message is a `messages` row with `state = 'open'` and the handle's token in `writer`
//! ([`super::writer`]). A part is one row, inserted whole: a reader sees a part entirely or
//! not at all. Every other write to the session first asks [`settle_in`]: an open message
//! whose writer is still there refuses the write ([`Error::MessageOpen`]); one whose
//! writer is gone is marked `interrupted` and its unanswered calls get tombstones
//! ([`pairing::interruption`]), then the write goes on.

use super::encode::insert_part;
use super::handle::Store;
use super::rows::Range;
use super::sql::{int_at, text_at, values, Sql};
use super::time::{format_time, now};
use super::write::{append_in, stored_tail};
use super::writer;
use crate::error::{Error, Result};
use crate::history::grammar::{Resume, Walk};
use crate::history::pairing;
use crate::history::rules::{HealthRule, Problem};
use crate::history::turns::next_turn_index;
use crate::model::{Appended, Part, Role, SessionId};

/// An assistant message being stored while it streams in: each [`OpenMessage::push`] is
/// committed (durable as the store's [`crate::Durability`] promises) when it returns;
/// [`OpenMessage::finish`] marks it complete. Dropped unfinished, the message is marked
/// `interrupted` at once (its calls answered with tombstones); if the process dies
/// instead, the next write to the session does that.
#[derive(Debug)]
pub struct OpenMessage {
    store: Store,
    session: SessionId,
    appended: Appended,
    token: String,
    parts: usize,
    done: bool,
}

impl Store {
    /// Begins an assistant message that will be stored part by part while it streams in.
    ///
    /// Refused like an append ([`Error::Refused`]: only an assistant message streams, and
    /// not while a call is pending); [`Error::MessageOpen`] while another writer's message
    /// of the session is still streaming. The message's `seq` and `turn_index` are assigned
    /// now: it is the session's last message until it is finished.
    pub fn begin_message(&self, session: &SessionId, role: Role) -> Result<OpenMessage> {
        let token = writer::register();
        let begun = self.write(|tx| begin_in(tx, session, role, &token));
        match begun {
            Ok(appended) => Ok(OpenMessage {
                store: self.clone(),
                session: session.clone(),
                appended,
                token,
                parts: 0,
                done: false,
            }),
            Err(error) => {
                writer::release(&token);
                Err(error)
            }
        }
    }

    /// Marks `interrupted` every open message of the session whose writer went away, and
    /// answers their calls with tombstones; [`Error::MessageOpen`] when a live writer still
    /// streams one. What every write to a session does first; `store-repair` calls it too.
    pub fn settle_open_messages(&self, session: &SessionId) -> Result<bool> {
        self.write(|tx| {
            tx.lock_session(session)?;
            settle_in(tx, session)
        })
    }
}

impl OpenMessage {
    /// The `seq`, `turn_index` and row id the message was given when it began.
    pub fn appended(&self) -> &Appended {
        &self.appended
    }

    /// The session it belongs to.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// How many parts are stored so far.
    pub fn len(&self) -> usize {
        self.parts
    }

    /// True before the first part is stored.
    pub fn is_empty(&self) -> bool {
        self.parts == 0
    }

    /// Stores the next part; committed when this returns. The message with this part added
    /// is checked as an append of it whole would be (the streaming rule of
    /// `history/pairing.rs`): a refused part ([`Error::Refused`]) writes nothing and the
    /// message stays open.
    /// [`Error::MessageNotOpen`] when the message was interrupted meanwhile.
    pub fn push(&mut self, part: Part) -> Result<()> {
        let (session, appended, token) = (&self.session, &self.appended, &self.token);
        self.store
            .write(|tx| push_in(tx, session, appended, token, &part))?;
        self.parts += 1;
        Ok(())
    }

    /// Marks the message complete. A message without parts cannot be: it is refused
    /// ([`crate::Refusal::EmptyMessage`]) and, the handle being gone, marked `interrupted`.
    pub fn finish(mut self) -> Result<Appended> {
        let (session, appended, token) = (&self.session, &self.appended, &self.token);
        self.store
            .write(|tx| finish_in(tx, session, appended, token))?;
        self.done = true;
        writer::release(&self.token);
        Ok(self.appended.clone())
    }
}

impl Drop for OpenMessage {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        writer::release(&self.token);
        // Best effort: if this fails (the database went away), the next write to the session
        // finds the writer gone and does the same.
        if let Err(error) = self.store.settle_open_messages(&self.session) {
            tracing::warn!(session = %self.session, %error, "could not mark a dropped message interrupted");
        }
    }
}

/// No `ORDER BY` (the few rows are sorted by their callers): with one, SQLite's planner
/// walked the session's `(session_id, seq)` index to skip a sort, reading every message of
/// the session on every write, instead of probing the partial index `messages_open`.
const OPEN_MESSAGES: &str =
    "SELECT seq, writer FROM messages WHERE session_id = ?1 AND state = 'open'";
/// Unordered like [`OPEN_MESSAGES`], for the same reason.
const OPEN_ROWS: &str = "
    SELECT id, seq, turn_index, writer FROM messages
    WHERE session_id = ?1 AND state = 'open'";
const INTERRUPT: &str =
    "UPDATE messages SET state = 'interrupted', writer = NULL WHERE session_id = ?1 AND state = 'open'";
const INSERT_OPEN: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at, state, writer)
    VALUES (?1, ?2, ?3, ?4, 0, ?5, 'open', ?6)";
const MESSAGE_STATE: &str = "SELECT state, writer FROM messages WHERE id = ?1 AND session_id = ?2";
const CALL_USED_ELSEWHERE: &str = "
    SELECT 1 FROM parts p JOIN messages m ON m.id = p.message_id
    WHERE p.tool_use_id = ?1 AND p.kind = 'tool_use' AND m.session_id = ?2 AND m.id <> ?3 LIMIT 1";
const PARTS_OF: &str = "SELECT COUNT(*) FROM parts WHERE message_id = ?1";
const COMPLETE: &str = "UPDATE messages SET state = 'complete', writer = NULL WHERE id = ?1";
const TOUCH: &str = "UPDATE sessions SET updated_at = ?2, tail_state = NULL WHERE id = ?1";
const TOUCH_COUNTED: &str = "
    UPDATE sessions SET updated_at = ?2, tail_state = NULL, message_count = message_count + 1
    WHERE id = ?1";

/// [`Store::settle_open_messages`] in the caller's write transaction (which holds the
/// session's lock), on either engine: true when it interrupted a message.
pub(crate) fn settle_in(db: &mut impl Sql, session: &SessionId) -> Result<bool> {
    let mut open: Vec<(i64, Option<String>)> = Vec::new();
    db.each_row(OPEN_MESSAGES, &values![session.as_str()], &mut |r| {
        open.push((int_at(r, 0)?.unwrap_or(0), text_at(r, 1)?));
        Ok(())
    })?;
    if open.is_empty() {
        return Ok(false);
    }
    open.sort_unstable_by_key(|(seq, _)| *seq);
    if let Some((seq, _)) = open.iter().find(|(_, w)| !writer::is_gone(w.as_deref())) {
        return Err(Error::MessageOpen {
            session: session.clone(),
            seq: *seq,
        });
    }
    db.run(INTERRUPT, &values![session.as_str()])?;
    let walk = Walk::resume(stored_tail(db, session)?.resume);
    if let Some(tombstones) = pairing::interruption(&walk) {
        append_in(db, session, &[tombstones])?;
    }
    Ok(true)
}

/// The check's finding for each open message of the session whose writer is gone (rule
/// `abandoned_message`), on either engine; read-only.
pub(crate) fn abandoned_in(db: &mut impl Sql, session: &SessionId) -> Result<Vec<Problem>> {
    let mut found = Vec::new();
    db.each_row(OPEN_ROWS, &values![session.as_str()], &mut |r| {
        let writer = text_at(r, 3)?;
        if writer::is_gone(writer.as_deref()) {
            let seq = int_at(r, 1)?.unwrap_or(0);
            found.push(Problem {
                session_id: session.clone(),
                rule: HealthRule::AbandonedMessage,
                turn: int_at(r, 2)?,
                message_id: int_at(r, 0)?,
                seq: Some(seq),
                part: None,
                tool_use_id: None,
                detail: format!(
                    "message {seq} is still open but its writer is gone; it is to be marked \
                     interrupted and its calls answered with tombstones"
                ),
            });
        }
        Ok(())
    })?;
    found.sort_unstable_by_key(|problem| problem.seq);
    Ok(found)
}

/// [`Store::begin_message`] in the caller's write transaction, on either engine.
fn begin_in(db: &mut impl Sql, session: &SessionId, role: Role, token: &str) -> Result<Appended> {
    db.lock_session(session)?;
    settle_in(db, session)?;
    let position = stored_tail(db, session)?;
    let walk = Walk::resume(position.resume);
    pairing::check_begin(&walk, role).map_err(|reason| Error::Refused {
        session: session.clone(),
        index: 0,
        reason,
    })?;
    if !position.from_stored_state {
        super::write::forget_reverts(db, session)?;
    }
    let seq = position.last_seq + 1;
    let turn_index = next_turn_index(position.last_user_turn, role);
    let now = format_time(now());
    let id = db.insert(
        INSERT_OPEN,
        &values![
            session.as_str(),
            seq,
            turn_index,
            role.as_str(),
            now.as_str(),
            token
        ],
    )?;
    db.run(TOUCH_COUNTED, &values![session.as_str(), now.as_str()])?;
    Ok(Appended {
        id,
        seq,
        turn_index,
    })
}

/// Fails with [`Error::MessageNotOpen`] unless the message is open under `token`.
fn require_open(
    db: &mut impl Sql,
    session: &SessionId,
    message: &Appended,
    token: &str,
) -> Result<()> {
    db.lock_session(session)?;
    let mut found: Option<(Option<String>, Option<String>)> = None;
    db.each_row(
        MESSAGE_STATE,
        &values![message.id, session.as_str()],
        &mut |r| {
            found = Some((text_at(r, 0)?, text_at(r, 1)?));
            Ok(())
        },
    )?;
    let state = match found {
        Some((Some(state), Some(writer))) if state == "open" && writer == token => return Ok(()),
        Some((Some(state), _)) if state == "open" => "another writer's".to_owned(),
        Some((state, _)) => state.unwrap_or_else(|| "unknown".to_owned()),
        None => "gone".to_owned(),
    };
    Err(Error::MessageNotOpen {
        session: session.clone(),
        seq: message.seq,
        state,
    })
}

/// [`OpenMessage::push`] in the caller's write transaction, on either engine.
fn push_in(
    db: &mut impl Sql,
    session: &SessionId,
    message: &Appended,
    token: &str,
    part: &Part,
) -> Result<()> {
    require_open(db, session, message, token)?;
    let so_far = db
        .load_messages(session, Range::Seqs(message.seq, message.seq))?
        .pop()
        .map(|m| m.parts)
        .unwrap_or_default();
    let taken = match part.call_id() {
        Some(id)
            if db
                .optional_int(
                    CALL_USED_ELSEWHERE,
                    &values![id, session.as_str(), message.id],
                )?
                .is_some() =>
        {
            vec![id.to_owned()]
        }
        _ => Vec::new(),
    };
    let before = Resume {
        messages: usize::try_from(message.seq - 1).unwrap_or_default(),
        taken,
        ..Resume::default()
    };
    pairing::check_push(before, &so_far, part).map_err(|reason| Error::Refused {
        session: session.clone(),
        index: 0,
        reason,
    })?;
    let ordinal = i64::try_from(so_far.len()).unwrap_or(i64::MAX);
    insert_part(db, message.id, ordinal, part)?;
    let now = format_time(now());
    db.run(TOUCH, &values![session.as_str(), now.as_str()])?;
    Ok(())
}

/// [`OpenMessage::finish`] in the caller's write transaction, on either engine.
fn finish_in(
    db: &mut impl Sql,
    session: &SessionId,
    message: &Appended,
    token: &str,
) -> Result<()> {
    require_open(db, session, message, token)?;
    if db
        .optional_int(PARTS_OF, &values![message.id])?
        .unwrap_or(0)
        == 0
    {
        return Err(Error::Refused {
            session: session.clone(),
            index: 0,
            reason: pairing::Refusal::EmptyMessage,
        });
    }
    db.run(COMPLETE, &values![message.id])?;
    let now = format_time(now());
    db.run(TOUCH, &values![session.as_str(), now.as_str()])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan SQLite chooses for `sql` on the migrated schema, one line per step.
    fn plan(conn: &rusqlite::Connection, sql: &str) -> Vec<String> {
        let mut statement = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("explain");
        let rows = statement
            .query_map([Some("s")], |row| row.get::<_, String>(3))
            .expect("plan");
        rows.collect::<rusqlite::Result<_>>().expect("plan rows")
    }

    /// Every write to a session asks for its open messages first: the partial index
    /// `messages_open` answers that with one probe, whatever the session's length. A plan
    /// that walks the session's `(session_id, seq)` index instead reads every message of the
    /// session on every append (quadratic in its length).
    #[test]
    fn the_open_message_probe_of_every_write_uses_the_partial_index() {
        let mut conn = rusqlite::Connection::open_in_memory().expect("open");
        crate::store::schema::migrate(&mut conn).expect("migrate");
        for sql in [OPEN_MESSAGES, OPEN_ROWS, INTERRUPT] {
            let steps = plan(&conn, sql);
            assert!(
                steps.iter().any(|step| step.contains("messages_open")),
                "{sql}: {steps:?}"
            );
            assert!(
                !steps.iter().any(|step| step.contains("SCAN")
                    || step.contains("sqlite_autoindex_messages")
                    || step.contains("TEMP B-TREE")),
                "{sql}: {steps:?}"
            );
        }
    }
}

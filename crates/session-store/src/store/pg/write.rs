//! The PostgreSQL write path: sessions and appends, checked by the same grammar walk as
//! `store/write.rs` inside the transaction that writes, after the session's row lock.

use std::collections::HashSet;

use super::Tx;

use super::rows::{insert_message, load_messages, Range};
use super::{lock_session, require_session, PgStore};
use crate::error::{Error, Result};
use crate::history::grammar::Walk;
use crate::history::pairing;
use crate::history::turns::next_turn_index;
use serde_json::Value;

use crate::model::{Appended, NewMessage, Part, Role, SessionId};
use crate::store::import::{Compaction, ImportTarget};
use crate::store::{format_time, now};

impl PgStore {
    pub(crate) fn create_session_with_id(&self, id: &SessionId) -> Result<()> {
        self.write(|tx| {
            let now = format_time(now());
            let inserted = tx.execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES ($1, $2, $2) ON CONFLICT (id) DO NOTHING",
                &[&id.as_str(), &now],
            )?;
            if inserted == 0 {
                return Err(Error::SessionExists(id.clone()));
            }
            Ok(())
        })
    }

    pub(crate) fn append_batch(
        &self,
        session: &SessionId,
        messages: &[NewMessage],
    ) -> Result<Vec<Appended>> {
        self.write(|tx| {
            lock_session(tx, session)?;
            append_in(tx, session, messages)
        })
    }

    pub(crate) fn cancel_pending(&self, session: &SessionId, reason: &str) -> Result<Vec<String>> {
        self.write(|tx| {
            lock_session(tx, session)?;
            let position = stored_tail(tx, session)?;
            let walk = Walk::resume(position.resume);
            let Some(message) = pairing::tombstones(&walk, reason) else {
                return Ok(Vec::new());
            };
            let ids = message
                .parts
                .iter()
                .filter_map(Part::answers)
                .map(str::to_owned)
                .collect();
            append_in(tx, session, &[message])?;
            Ok(ids)
        })
    }

    pub(crate) fn pending_tool_uses(&self, session: &SessionId) -> Result<Vec<String>> {
        self.read(|tx| {
            require_session(tx, session)?;
            Ok(Walk::resume(tail_of(tx, session)?.resume).pending())
        })
    }

    pub(crate) fn import_session(&self, messages: &[NewMessage]) -> Result<SessionId> {
        let id = SessionId::random();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES ($1, $2, $2)",
                &[&id.as_str(), &format_time(now())],
            )?;
            lock_session(tx, &id)?;
            append_in(tx, &id, messages)
        })?;
        Ok(id)
    }
}

/// Validates `messages` against the session's tail, then inserts them. The caller holds the
/// session's row lock in its transaction.
pub(crate) fn append_in(
    tx: &mut Tx<'_>,
    session: &SessionId,
    messages: &[NewMessage],
) -> Result<Vec<Appended>> {
    if messages.is_empty() {
        return Err(Error::Refused {
            session: session.clone(),
            index: 0,
            reason: pairing::Refusal::EmptyMessage,
        });
    }
    // A retry: the messages whose keys are stored come back as stored; the rest goes on.
    let replayed = replayed(tx, session, messages)?;
    if replayed.len() == messages.len() {
        return Ok(replayed);
    }
    let skip = replayed.len();
    let messages = &messages[skip..];
    let mut position = stored_tail(tx, session)?;
    let refused = |index, reason| Error::Refused {
        session: session.clone(),
        index: skip + index,
        reason,
    };
    let mut resume = std::mem::take(&mut position.resume);
    resume.taken = used_tool_use_ids(tx, session, messages)?;
    let mut walk = Walk::resume(resume);
    for (index, message) in messages.iter().enumerate() {
        pairing::check_append(&mut walk, message).map_err(|reason| refused(index, reason))?;
    }
    // An append ends the chance to undo earlier reverts of the session (a state the row
    // kept proves there are none, see `Position::from_stored_state`).
    if !position.from_stored_state {
        forget_reverts(tx, session)?;
    }
    let now = now();
    let mut appended = replayed;
    appended.reserve(messages.len());
    for message in messages {
        position.last_seq += 1;
        let turn_index = next_turn_index(position.last_user_turn, message.role);
        if message.role == Role::User {
            position.last_user_turn = Some(turn_index);
        }
        let created_at = format_time(message.created_at.unwrap_or(now));
        let id = insert_message(
            tx,
            session,
            position.last_seq,
            turn_index,
            message,
            &created_at,
        )?;
        if let Some(usage) = message.usage.as_ref().filter(|u| !u.is_empty()) {
            let count = |n: Option<u64>| n.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
            tx.execute(
                "INSERT INTO usage (message_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &id,
                    &usage.model,
                    &count(usage.input_tokens),
                    &count(usage.output_tokens),
                    &count(usage.cache_read_tokens),
                    &count(usage.cache_write_tokens),
                ],
            )?;
        }
        if let Some(key) = &message.idempotency_key {
            tx.execute(
                "INSERT INTO idempotency_keys (session_id, key, message_id) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, key) DO UPDATE SET message_id = EXCLUDED.message_id",
                &[&session.as_str(), key, &id],
            )?;
        }
        appended.push(Appended {
            id,
            seq: position.last_seq,
            turn_index,
        });
    }
    // The message inserts' trigger cleared the row's tail state; the walk that checked the
    // append states the new one.
    let tail = position.after(&walk, messages);
    tx.execute(
        "UPDATE sessions SET updated_at = $2, tail_state = $3 WHERE id = $1",
        &[&session.as_str(), &format_time(now), &tail.encode()],
    )?;
    Ok(appended)
}

/// The messages at the start of `messages` whose keys the session already stores, as they
/// were stored (as `store/idempotency.rs` decides it): [`Error::IdempotencyConflict`] when a
/// stored key names a message with other content, when a replayed message follows a new one,
/// or when one key appears twice in the batch.
fn replayed(
    tx: &mut Tx<'_>,
    session: &SessionId,
    messages: &[NewMessage],
) -> Result<Vec<Appended>> {
    if messages.iter().all(|m| m.idempotency_key.is_none()) {
        return Ok(Vec::new());
    }
    let conflict = |key: &str, detail: &str| Error::IdempotencyConflict {
        session: session.clone(),
        key: key.to_owned(),
        detail: detail.to_owned(),
    };
    let mut seen = HashSet::new();
    let mut replayed = Vec::new();
    let mut new_seen = false;
    for message in messages {
        let Some(key) = message.idempotency_key.as_deref() else {
            new_seen = true;
            continue;
        };
        if !seen.insert(key) {
            return Err(conflict(key, "appears twice in one append"));
        }
        let stored = tx.query_opt(
            "SELECT m.id, m.seq, m.turn_index FROM idempotency_keys k JOIN messages m ON m.id = k.message_id
             WHERE k.session_id = $1 AND k.key = $2",
            &[&session.as_str(), &key],
        )?;
        let Some(row) = stored else {
            new_seen = true;
            continue;
        };
        if new_seen {
            return Err(conflict(
                key,
                "already stored, but follows a message of the append that is new",
            ));
        }
        let stored = Appended {
            id: row.try_get(0)?,
            seq: row.try_get(1)?,
            turn_index: row.try_get(2)?,
        };
        let turn = load_messages(
            tx,
            session,
            Range::Turns(stored.turn_index, stored.turn_index),
        )?;
        let same = turn
            .iter()
            .find(|m| m.id == stored.id)
            .is_some_and(|m| m.role == message.role && m.parts == message.parts);
        if !same {
            return Err(conflict(key, "already names a message with other content"));
        }
        replayed.push(stored);
    }
    Ok(replayed)
}

/// Deletes the session's reverts (and, by cascade, the rows they hold).
pub(crate) fn forget_reverts(tx: &mut Tx<'_>, session: &SessionId) -> Result<()> {
    tx.execute(
        "DELETE FROM reverts WHERE session_id = $1",
        &[&session.as_str()],
    )?;
    Ok(())
}

pub(crate) use crate::store::write::{stored_tail, tail_of};

/// The tool_use ids of `messages` that the session already uses.
fn used_tool_use_ids(
    tx: &mut Tx<'_>,
    session: &SessionId,
    messages: &[NewMessage],
) -> Result<Vec<String>> {
    let ids: Vec<&str> = messages
        .iter()
        .flat_map(|m| m.parts.iter().filter_map(Part::call_id))
        .collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let taken: HashSet<String> = tx
        .query(
            "SELECT DISTINCT p.tool_use_id FROM parts p JOIN messages m ON m.id = p.message_id
             WHERE p.tool_use_id = ANY($1) AND p.kind = 'tool_use' AND m.session_id = $2",
            &[&ids, &session.as_str()],
        )?
        .iter()
        .map(|row| row.try_get::<_, String>(0))
        .collect::<Result<_, _>>()?;
    Ok(ids
        .into_iter()
        .filter(|id| taken.contains(*id))
        .map(str::to_owned)
        .collect())
}

/// [`crate::Store::import`] and [`crate::Store::import_reader`] on PostgreSQL: the import
/// logic of `store/import.rs`, the same rows, in the caller's transaction.
impl ImportTarget for Tx<'_> {
    fn create_session(
        &mut self,
        created: &str,
        title: Option<&str>,
        parent: Option<&SessionId>,
    ) -> Result<SessionId> {
        let id = SessionId::random();
        self.execute(
            "INSERT INTO sessions (id, created_at, updated_at, title, parent_id) VALUES ($1, $2, $2, $3, $4)",
            &[&id.as_str(), &created, &title, &parent.map(SessionId::as_str)],
        )?;
        lock_session(self, &id)?;
        Ok(id)
    }

    fn set_title(&mut self, session: &SessionId, title: &str) -> Result<()> {
        self.execute(
            "UPDATE sessions SET title = $2 WHERE id = $1",
            &[&session.as_str(), &title],
        )?;
        Ok(())
    }

    fn append(&mut self, session: &SessionId, messages: &[NewMessage]) -> Result<Vec<Appended>> {
        append_in(self, session, messages)
    }

    fn compact(&mut self, session: &SessionId, c: &Compaction<'_>) -> Result<()> {
        self.execute(
            "UPDATE messages SET compacted = 1 WHERE session_id = $1 AND seq < $2 AND compacted = 0",
            &[&session.as_str(), &c.seq],
        )?;
        self.execute(
            "INSERT INTO summaries
                (session_id, first_turn, last_turn, compacted_from_turn, through_seq, text, created_at)
             VALUES ($1, 0, $2, $3, $4, $5, $6)",
            &[
                &session.as_str(),
                &c.last_turn,
                &c.compacted_from,
                &c.through_seq,
                &c.text,
                &c.created,
            ],
        )?;
        Ok(())
    }

    fn link_call(&mut self, session: &SessionId, call: &str, child: &SessionId) -> Result<()> {
        link_call(self, session, call, child)
    }
}

/// Records the child session on the call that spawned it (`session_store.child_session` in
/// the call's provider metadata), as SQLite's `json_set` does.
fn link_call(tx: &mut Tx<'_>, session: &SessionId, call: &str, child: &SessionId) -> Result<()> {
    let rows = tx.query(
        "SELECT p.id, p.provider_metadata FROM parts p JOIN messages m ON m.id = p.message_id
         WHERE m.session_id = $1 AND p.kind = 'tool_use' AND p.tool_use_id = $2",
        &[&session.as_str(), &call],
    )?;
    for row in &rows {
        let part: i64 = row.try_get(0)?;
        let raw: Option<String> = row.try_get(1)?;
        let mut metadata = raw
            .as_deref()
            .and_then(|raw| serde_json::from_str::<Value>(raw).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        if let Some(object) = metadata.as_object_mut() {
            let entry = object
                .entry("session_store")
                .or_insert_with(|| Value::Object(Default::default()));
            if !entry.is_object() {
                *entry = Value::Object(Default::default());
            }
            if let Some(inner) = entry.as_object_mut() {
                inner.insert(
                    "child_session".to_owned(),
                    Value::String(child.as_str().to_owned()),
                );
            }
        }
        tx.execute(
            "UPDATE parts SET provider_metadata = $2 WHERE id = $1",
            &[&part, &serde_json::to_string(&metadata)?],
        )?;
    }
    Ok(())
}

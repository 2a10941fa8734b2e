//! Idempotent appends: a caller's key per message (`NewMessage::idempotency_key`), kept in
//! the `idempotency_keys` table (migration V9) beside the message it named.
//!
//! A retry after an ambiguous failure (a timeout, or a crash between the commit and the
//! caller hearing of it) carries the same keys. Inside the append's own `BEGIN IMMEDIATE`
//! transaction, before the pairing check, the keys already stored are looked up: those
//! messages are not stored again, the append returns them as they were stored. A batch may
//! replay a prefix of itself (the part an earlier attempt stored) and append the rest.

use std::collections::HashSet;

use rusqlite::{params, Connection, OptionalExtension};

use super::rows::{load_messages, Range};
use crate::error::{Error, Result};
use crate::model::{Appended, NewMessage, SessionId};

const STORED_KEY: &str = "
    SELECT m.id, m.seq, m.turn_index FROM idempotency_keys k JOIN messages m ON m.id = k.message_id
    WHERE k.session_id = ?1 AND k.key = ?2";

/// `OR REPLACE`: a key row whose message another writer deleted without the cascade is stale.
const RECORD_KEY: &str =
    "INSERT OR REPLACE INTO idempotency_keys (session_id, key, message_id) VALUES (?1, ?2, ?3)";

/// The messages at the start of `messages` whose keys the session already stores, as they
/// were stored. Fails with [`Error::IdempotencyConflict`] when a stored key names a message
/// with other content, when a replayed message follows a new one, or when one key appears
/// twice in the batch.
pub(crate) fn replayed(
    conn: &Connection,
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
    let mut stmt = conn.prepare_cached(STORED_KEY)?;
    for message in messages {
        let Some(key) = message.idempotency_key.as_deref() else {
            new_seen = true;
            continue;
        };
        if !seen.insert(key) {
            return Err(conflict(key, "appears twice in one append"));
        }
        let stored = stmt
            .query_row(params![session.as_str(), key], |row| {
                Ok(Appended {
                    id: row.get(0)?,
                    seq: row.get(1)?,
                    turn_index: row.get(2)?,
                })
            })
            .optional()?;
        match stored {
            None => new_seen = true,
            Some(_) if new_seen => {
                return Err(conflict(
                    key,
                    "already stored, but follows a message of the append that is new",
                ))
            }
            Some(stored) => {
                if !same_content(conn, session, &stored, message)? {
                    return Err(conflict(key, "already names a message with other content"));
                }
                replayed.push(stored);
            }
        }
    }
    Ok(replayed)
}

/// True when the stored message has the role and parts of `message`.
fn same_content(
    conn: &Connection,
    session: &SessionId,
    stored: &Appended,
    message: &NewMessage,
) -> Result<bool> {
    let turn = load_messages(
        conn,
        session,
        Range::Turns(stored.turn_index, stored.turn_index),
    )?;
    Ok(turn
        .iter()
        .find(|m| m.id == stored.id)
        .is_some_and(|m| m.role == message.role && m.parts == message.parts))
}

/// Records the key of a message just stored as `message_id`, if it has one.
pub(crate) fn record(
    conn: &Connection,
    session: &SessionId,
    message: &NewMessage,
    message_id: i64,
) -> Result<()> {
    if let Some(key) = &message.idempotency_key {
        conn.prepare_cached(RECORD_KEY)?
            .execute(params![session.as_str(), key, message_id])?;
    }
    Ok(())
}

//! Idempotent appends: a caller's key per message (`NewMessage::idempotency_key`), kept in
//! the `idempotency_keys` table (migration V9) beside the message it named.
//!
//! A retry after an ambiguous failure (a timeout, or a crash between the commit and the
//! caller hearing of it) carries the same keys. Inside the append's own transaction, before
//! the pairing check, the keys already stored are looked up: those messages are not stored
//! again, the append returns them as they were stored. A batch may replay a prefix of itself
//! (the part an earlier attempt stored) and append the rest. PostgreSQL's one-statement
//! append reads nothing first: its statement writes the key row with the message, and only
//! where the session stores none of its key ([`stored_key!`]); a retry of a stored key
//! writes nothing there, and replays in a transaction.

use std::collections::HashSet;

use super::rows::Range;
use super::sql::{values, Sql};
use crate::error::{Error, Result};
use crate::model::{Appended, NewMessage, SessionId};

/// The rows of a stored key (`?1` the session; the key's placeholder follows): a key row
/// names a message of its session. One whose message is gone (deleted by another writer
/// without the cascade) is not stored, and [`record_key!`]'s upsert takes it over.
macro_rules! stored_key {
    () => {
        "FROM idempotency_keys k
         JOIN messages km ON km.session_id = k.session_id AND km.id = k.message_id
         WHERE k.session_id = ?1 AND k.key = "
    };
}
pub(crate) use stored_key;

/// How a key row is written (`?1` the session; the key and the message's id are what
/// follows, `VALUES` or a `SELECT`): an upsert, since a stale row ([`stored_key!`]) names
/// the new message instead.
macro_rules! record_key {
    ($values:literal) => {
        concat!(
            "INSERT INTO idempotency_keys (session_id, key, message_id) ",
            $values,
            " ON CONFLICT (session_id, key) DO UPDATE SET message_id = excluded.message_id"
        )
    };
}
pub(crate) use record_key;

const STORED_KEY: &str = concat!("SELECT km.id, km.seq, km.turn_index ", stored_key!(), "?2");

const RECORD_KEY: &str = record_key!("VALUES (?1, ?2, ?3)");

/// The messages at the start of `messages` whose keys the session already stores, as they
/// were stored. Fails with [`Error::IdempotencyConflict`] when a stored key names a message
/// with other content, when a replayed message follows a new one, or when one key appears
/// twice in the batch. On either engine.
pub(crate) fn replayed(
    db: &mut impl Sql,
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
        let stored = db
            .int_rows(STORED_KEY, &values![session.as_str(), key])?
            .first()
            .map(|&[id, seq, turn_index]| Appended {
                id,
                seq,
                turn_index,
            });
        match stored {
            None => new_seen = true,
            Some(_) if new_seen => {
                return Err(conflict(
                    key,
                    "already stored, but follows a message of the append that is new",
                ))
            }
            Some(stored) => {
                if !same_content(db, session, &stored, message)? {
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
    db: &mut impl Sql,
    session: &SessionId,
    stored: &Appended,
    message: &NewMessage,
) -> Result<bool> {
    let turn = db.load_messages(session, Range::Turns(stored.turn_index, stored.turn_index))?;
    Ok(turn
        .iter()
        .find(|m| m.id == stored.id)
        .is_some_and(|m| m.role == message.role && m.parts == message.parts))
}

/// Records the key of a message just stored as `message_id`, if it has one. On either engine.
pub(crate) fn record(
    db: &mut impl Sql,
    session: &SessionId,
    message: &NewMessage,
    message_id: i64,
) -> Result<()> {
    if let Some(key) = &message.idempotency_key {
        db.run(RECORD_KEY, &values![session.as_str(), key, message_id])?;
    }
    Ok(())
}

//! Parts as stored, their JSON columns left as text: for callers that keep JSON of their own
//! in `provider_metadata` (the Python adapters keep each SDK item there) and read it back
//! without the store decoding it into [`crate::Part`]s first.

use super::handle::Store;
use super::sql::{int_at, text_at, values, Sql};
use crate::error::Result;
use crate::model::SessionId;

/// One part as its row holds it, with its message's place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredPart {
    /// Its message's `seq`.
    pub seq: i64,
    /// Its message's `turn_index`.
    pub turn_index: i64,
    /// Its message's role, as stored.
    pub role: String,
    /// Its kind, as stored (`text`, `tool_use`, ...).
    pub kind: String,
    /// `parts.text` of an error result (`is_error`), which is what tells a tombstone
    /// ([`crate::request::is_tombstone`]); `None` for every other part, whose text is not
    /// read (a caller that keeps its own JSON has the text there).
    pub error_text: Option<String>,
    /// `parts.tool_use_id`: a tool_use's id, or the id a tool_result answers.
    pub tool_use_id: Option<String>,
    /// `parts.is_error`.
    pub is_error: bool,
    /// `parts.provider_metadata`, the JSON text as stored.
    pub provider_metadata: Option<String>,
}

/// The parts of every turn from that of the message `?2` places before the latest one (all of
/// them when the session has fewer), in message and part order, through the `(session_id,
/// turn_index, seq)` index; that message is found on the `(session_id, seq)` key (seqs are
/// dense; where another writer left a gap, an earlier message and so more turns are read).
const STORED_PARTS: &str = "
    SELECT m.seq, m.turn_index, m.role, p.kind, CASE WHEN p.is_error <> 0 THEN p.text END,
           p.tool_use_id, p.is_error,
           p.provider_metadata
    FROM messages m JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1
      AND m.turn_index >= COALESCE((
          SELECT turn_index FROM messages
          WHERE session_id = ?1
            AND seq <= (SELECT MAX(seq) FROM messages WHERE session_id = ?1) - ?2
          ORDER BY seq DESC LIMIT 1), 0)
    ORDER BY m.turn_index, m.seq, m.id, p.ordinal";

impl Store {
    /// The parts of the whole turns that hold the session's latest `messages` messages
    /// (every part with `None`), as stored: nothing is decoded, so a row another writer broke
    /// comes back as it is. [`crate::Error::UnknownSession`] when there is no such session.
    pub fn stored_parts(
        &self,
        session: &SessionId,
        messages: Option<usize>,
    ) -> Result<Vec<StoredPart>> {
        // How far before the latest message the earliest one wanted is.
        let offset = messages.map_or(i64::MAX, |n| {
            i64::try_from(n.saturating_sub(1)).unwrap_or(i64::MAX)
        });
        self.read(|db| stored_parts_in(db, session, offset))
    }
}

/// [`Store::stored_parts`] in the caller's transaction, on either engine.
fn stored_parts_in(db: &mut impl Sql, session: &SessionId, offset: i64) -> Result<Vec<StoredPart>> {
    let mut parts = Vec::new();
    db.each_row(
        STORED_PARTS,
        &values![session.as_str(), offset],
        &mut |row| {
            parts.push(StoredPart {
                seq: int_at(row, 0)?.unwrap_or_default(),
                turn_index: int_at(row, 1)?.unwrap_or_default(),
                role: text_at(row, 2)?.unwrap_or_default(),
                kind: text_at(row, 3)?.unwrap_or_default(),
                error_text: text_at(row, 4)?,
                tool_use_id: text_at(row, 5)?,
                is_error: int_at(row, 6)?.unwrap_or_default() != 0,
                provider_metadata: text_at(row, 7)?,
            });
            Ok(())
        },
    )?;
    // No rows: an empty session, or none at all (asked only then: one query on the usual path).
    if parts.is_empty() {
        db.require_session(session)?;
    }
    Ok(parts)
}

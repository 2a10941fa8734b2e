//! Rows to values and back: the one place that knows how a [`Part`] maps onto `parts` columns.

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, Row};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::{Message, NewMessage, Part, PartKind, Role, SessionId};

/// Which messages of a session to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Range {
    /// The whole session.
    All,
    /// Messages whose `turn_index` lies in `[first, last]`.
    Turns(i64, i64),
    /// Messages the provider sees: `compacted = 0`.
    Visible,
}

const SELECT_MESSAGES: &str = "
    SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at,
           p.id, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND m.seq BETWEEN ?2 AND ?3
    ORDER BY m.seq, p.ordinal";

/// `m.id` in the `ORDER BY` is the index's own last column: with it SQLite sees that the
/// `(session_id, turn_index, seq)` walk yields each message once and keeps the join in index
/// order; without it the rows went through a temporary B-tree to be sorted by ordinal.
const SELECT_MESSAGES_BY_TURN: &str = "
    SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at,
           p.id, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND m.turn_index BETWEEN ?2 AND ?3
    ORDER BY m.turn_index, m.seq, m.id, p.ordinal";

const SELECT_VISIBLE_MESSAGES: &str = "
    SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at,
           p.id, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND m.compacted = 0 AND ?2 <= ?3
    ORDER BY m.seq, p.ordinal";

/// Loads messages with their parts, in `seq` order, in one query.
pub(crate) fn load_messages(
    conn: &Connection,
    session: &SessionId,
    range: Range,
) -> Result<Vec<Message>> {
    let (sql, first, last) = match range {
        Range::All => (SELECT_MESSAGES, i64::MIN, i64::MAX),
        Range::Turns(first, last) => (SELECT_MESSAGES_BY_TURN, first, last),
        Range::Visible => (SELECT_VISIBLE_MESSAGES, i64::MIN, i64::MAX),
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params![session.as_str(), first, last])?;
    let mut messages: Vec<Message> = Vec::new();
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        if messages.last().is_none_or(|m| m.id != id) {
            messages.push(message_from_row(row)?);
        }
        if let Some(part) = part_from_row(row, 6)? {
            if let Some(message) = messages.last_mut() {
                message.parts.push(part);
            }
        }
    }
    Ok(messages)
}

/// Decodes the message columns 0..=5 (id, seq, turn_index, role, compacted, created_at).
pub(crate) fn message_from_row(row: &Row<'_>) -> Result<Message> {
    let id: i64 = row.get(0)?;
    let role: String = row.get(3)?;
    let created_at: String = row.get(5)?;
    let corrupt = |detail: String| Error::CorruptRow {
        table: "messages",
        row_id: id,
        detail,
    };
    Ok(Message {
        id,
        seq: row.get(1)?,
        turn_index: row.get(2)?,
        role: role.parse::<Role>().map_err(|e| corrupt(e.to_string()))?,
        compacted: row.get::<_, i64>(4)? != 0,
        created_at: super::parse_time(&created_at)
            .ok_or_else(|| corrupt(format!("created_at {created_at:?} is not RFC 3339")))?,
        parts: Vec::new(),
    })
}

/// Decodes the part columns starting at `at` (id, kind, text, tool_use_id, tool_name, input,
/// is_error, provider_metadata); `None` for a message without parts (LEFT JOIN).
///
/// Lenient with NULLs written by other code: a missing text is `""`, a missing input `{}`.
pub(crate) fn part_from_row(row: &Row<'_>, at: usize) -> Result<Option<Part>> {
    let Some(part_id) = row.get::<_, Option<i64>>(at)? else {
        return Ok(None);
    };
    let kind: String = row.get(at + 1)?;
    let kind = kind.parse::<PartKind>().map_err(|e| Error::CorruptRow {
        table: "parts",
        row_id: part_id,
        detail: e.to_string(),
    })?;
    let text = text_at(row, at + 2)?.unwrap_or_default();
    let tool_use_id = text_at(row, at + 3)?.unwrap_or_default();
    let provider_metadata = text_at(row, at + 7)?.map(|raw| json_or_string(&raw));
    Ok(Some(match kind {
        PartKind::Text => Part::Text {
            text,
            provider_metadata,
        },
        PartKind::Reasoning => Part::Reasoning {
            text,
            provider_metadata,
        },
        PartKind::RedactedReasoning => Part::RedactedReasoning {
            data: text,
            provider_metadata,
        },
        PartKind::ToolUse => Part::ToolUse {
            id: tool_use_id,
            name: text_at(row, at + 4)?.unwrap_or_default(),
            input: text_at(row, at + 5)?.map_or_else(
                || Value::Object(Default::default()),
                |raw| json_or_string(&raw),
            ),
            provider_metadata,
        },
        PartKind::ToolResult => Part::ToolResult {
            tool_use_id,
            content: text,
            is_error: flag_at(row, at + 6)?,
            provider_metadata,
        },
    }))
}

/// A text column as another writer may have filled it: SQLite keeps bytes as a BLOB (read
/// as UTF-8, lossily, like text that is not valid UTF-8) and numbers as numbers.
fn text_at(row: &Row<'_>, at: usize) -> Result<Option<String>> {
    Ok(match row.get_ref(at)? {
        ValueRef::Null => None,
        // `str::from_utf8` first: its validation is several times faster than the lossy
        // decoder's, which took a quarter of a load's instructions (issue 16, callgrind).
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => Some(match std::str::from_utf8(bytes) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(bytes).into_owned(),
        }),
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(x) => Some(x.to_string()),
    })
}

/// A 0/1 flag as another writer may have stored it: a number, or text such as `true`.
fn flag_at(row: &Row<'_>, at: usize) -> Result<bool> {
    Ok(match row.get_ref(at)? {
        ValueRef::Null | ValueRef::Blob(_) => false,
        ValueRef::Integer(n) => n != 0,
        ValueRef::Real(x) => x != 0.0,
        ValueRef::Text(text) => matches!(
            String::from_utf8_lossy(text)
                .trim()
                .to_ascii_lowercase()
                .as_str(),
            "1" | "true" | "yes"
        ),
    })
}

/// Stored JSON, or the raw text as a JSON string when another writer stored something else.
fn json_or_string(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

const INSERT_MESSAGE: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
    VALUES (?1, ?2, ?3, ?4, 0, ?5)";

const INSERT_PART: &str = "
    INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// Inserts one message and its parts; returns the new `messages.id`.
pub(crate) fn insert_message(
    conn: &Connection,
    session: &SessionId,
    seq: i64,
    turn_index: i64,
    message: &NewMessage,
    created_at: &str,
) -> Result<i64> {
    conn.prepare_cached(INSERT_MESSAGE)?.execute(params![
        session.as_str(),
        seq,
        turn_index,
        message.role.as_str(),
        created_at
    ])?;
    let message_id = conn.last_insert_rowid();
    for (ordinal, part) in message.parts.iter().enumerate() {
        insert_part(conn, message_id, ordinal as i64, part)?;
    }
    Ok(message_id)
}

/// Inserts one part at `ordinal` of message `message_id`.
pub(crate) fn insert_part(
    conn: &Connection,
    message_id: i64,
    ordinal: i64,
    part: &Part,
) -> Result<()> {
    let metadata = part
        .provider_metadata()
        .map(serde_json::to_string)
        .transpose()?;
    let (text, tool_use_id, tool_name, input, is_error): (
        Option<&str>,
        Option<&str>,
        Option<&str>,
        Option<String>,
        bool,
    ) = match part {
        Part::Text { text, .. } | Part::Reasoning { text, .. } => {
            (Some(text), None, None, None, false)
        }
        Part::RedactedReasoning { data, .. } => (Some(data), None, None, None, false),
        Part::ToolUse {
            id, name, input, ..
        } => (
            None,
            Some(id),
            Some(name),
            Some(serde_json::to_string(input)?),
            false,
        ),
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => (Some(content), Some(tool_use_id), None, None, *is_error),
    };
    conn.prepare_cached(INSERT_PART)?.execute(params![
        message_id,
        ordinal,
        part.kind().as_str(),
        text,
        tool_use_id,
        tool_name,
        input,
        is_error,
        metadata
    ])?;
    Ok(())
}

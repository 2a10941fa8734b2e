//! Rows to values and back for PostgreSQL: the same mapping of a [`Part`] onto `parts` columns
//! as `store/rows.rs`, with PostgreSQL's placeholders and typed columns.

use postgres::Row;

use super::Tx;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::{Message, Part, PartKind, Role, SessionId};
use crate::store::parse_time;

/// Which messages of a session to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Range {
    /// The whole session.
    All,
    /// Messages whose `turn_index` lies in `[first, last]`.
    Turns(i64, i64),
    /// Messages the provider sees: `compacted = 0`, and system messages always.
    Visible,
}

const COLUMNS: &str = "
    SELECT m.id, m.seq, m.turn_index, m.role, m.compacted, m.created_at, m.model,
           p.id, p.kind, p.text, p.tool_use_id, p.tool_name, p.input, p.is_error, p.provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id";

/// Loads messages with their parts, in `seq` order, in one query.
pub(crate) fn load_messages(
    tx: &mut Tx<'_>,
    session: &SessionId,
    range: Range,
) -> Result<Vec<Message>> {
    let rows = match range {
        Range::All => tx.query(
            &format!("{COLUMNS} WHERE m.session_id = $1 ORDER BY m.seq, p.ordinal"),
            &[&session.as_str()],
        )?,
        Range::Turns(first, last) => tx.query(
            &format!(
                "{COLUMNS} WHERE m.session_id = $1 AND m.turn_index BETWEEN $2 AND $3 ORDER BY m.turn_index, m.seq, p.ordinal"
            ),
            &[&session.as_str(), &first, &last],
        )?,
        Range::Visible => tx.query(
            &format!(
                "{COLUMNS} WHERE m.session_id = $1 AND (m.compacted = 0 OR m.role = 'system') ORDER BY m.seq, p.ordinal"
            ),
            &[&session.as_str()],
        )?,
    };
    let mut messages: Vec<Message> = Vec::new();
    for row in &rows {
        let id: i64 = row.try_get(0)?;
        if messages.last().is_none_or(|m| m.id != id) {
            messages.push(message_from_row(row)?);
        }
        if let Some(part) = part_from_row(row, 7, false)? {
            if let Some(message) = messages.last_mut() {
                message.parts.push(part);
            }
        }
    }
    Ok(messages)
}

/// Decodes the message columns 0..=6 (id, seq, turn_index, role, compacted, created_at, model).
pub(crate) fn message_from_row(row: &Row) -> Result<Message> {
    let id: i64 = row.try_get(0)?;
    let role: String = row.try_get(3)?;
    let created_at: String = row.try_get(5)?;
    let corrupt = |detail: String| Error::CorruptRow {
        table: "messages",
        row_id: id,
        detail,
    };
    Ok(Message {
        id,
        seq: row.try_get(1)?,
        turn_index: row.try_get(2)?,
        role: role.parse::<Role>().map_err(|e| corrupt(e.to_string()))?,
        compacted: row.try_get::<_, i64>(4)? != 0,
        created_at: parse_time(&created_at)
            .ok_or_else(|| corrupt(format!("created_at {created_at:?} is not RFC 3339")))?,
        model: row.try_get(6)?,
        parts: Vec::new(),
    })
}

/// Decodes the part columns from `at` (id, kind, text, tool_use_id, tool_name, input,
/// is_error, provider_metadata) as `store/rows.rs` does; `None` for a message without parts
/// (LEFT JOIN). `for_check` reads as the health check does: a tool_use's input is its raw
/// text, and no provider metadata.
pub(crate) fn part_from_row(row: &Row, at: usize, for_check: bool) -> Result<Option<Part>> {
    let Some(part_id) = row.try_get::<_, Option<i64>>(at)? else {
        return Ok(None);
    };
    let kind: String = row.try_get(at + 1)?;
    let kind = kind.parse::<PartKind>().map_err(|e| Error::CorruptRow {
        table: "parts",
        row_id: part_id,
        detail: e.to_string(),
    })?;
    let text_at = |i: usize| row.try_get::<_, Option<String>>(at + i);
    let title = text_at(2)?;
    let text = title.clone().unwrap_or_default();
    let tool_use_id = text_at(3)?.unwrap_or_default();
    let name = text_at(4)?.unwrap_or_default();
    let raw_input = text_at(5)?;
    let json_input = raw_input.as_deref().map(json_or_string);
    let block = || {
        json_input
            .clone()
            .unwrap_or_else(|| Value::Object(Default::default()))
    };
    let provider_metadata = if for_check {
        None
    } else {
        text_at(7)?.map(|raw| json_or_string(&raw))
    };
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
            name,
            input: if for_check {
                Value::String(raw_input.clone().unwrap_or_default())
            } else {
                block()
            },
            provider_metadata,
        },
        PartKind::ToolResult => Part::ToolResult {
            tool_use_id,
            content: text,
            is_error: row.try_get::<_, Option<i64>>(at + 6)?.unwrap_or(0) != 0,
            blocks: json_input.clone(),
            provider_metadata,
        },
        PartKind::Image => Part::Image {
            source: block(),
            title,
            provider_metadata,
        },
        PartKind::Document => Part::Document {
            source: block(),
            title,
            provider_metadata,
        },
        PartKind::ServerToolUse => Part::ServerToolUse {
            id: tool_use_id,
            name,
            input: block(),
            provider_metadata,
        },
        PartKind::ServerToolResult => Part::ServerToolResult {
            tool_use_id,
            block: block(),
            provider_metadata,
        },
        PartKind::Opaque => Part::Opaque {
            block: block(),
            provider_metadata,
        },
    }))
}

/// Stored JSON, or the raw text as a JSON string when another writer stored something else.
fn json_or_string(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

pub(crate) use crate::store::rows::insert_message;

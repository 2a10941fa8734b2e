//! Messages and parts to rows: the one row encoder, for either engine (through [`Sql`]).
//! [`super::rows`] reads them back.

use serde_json::Value;

use super::sql::{values, Sql};
use crate::error::{Error, Result};
use crate::model::{NewMessage, Part, SessionId};

const INSERT_MESSAGE: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at, model)
    VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6)";

const INSERT_PART: &str = "
    INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// How many parts one `INSERT` writes at most: a message's parts go in as few statements as
/// this allows, since each statement is one savepoint, at which FTS5 flushes its pending
/// terms as a new segment (V8's index triggers): one flush per statement instead of per part.
const PARTS_PER_INSERT: usize = 8;

/// The columns of a part row after `message_id` and `ordinal`.
struct PartRow<'a> {
    kind: &'static str,
    text: Option<&'a str>,
    tool_use_id: Option<&'a str>,
    tool_name: Option<&'a str>,
    input: Option<String>,
    is_error: bool,
    metadata: Option<String>,
}

impl PartRow<'_> {
    /// The row's values, `message_id` and `ordinal` first, in `INSERT_PART`'s order.
    fn values(&self, message_id: i64, ordinal: i64) -> [super::sql::Value<'_>; 9] {
        values![
            message_id,
            ordinal,
            self.kind,
            self.text,
            self.tool_use_id,
            self.tool_name,
            self.input.as_deref(),
            self.is_error,
            self.metadata.as_deref(),
        ]
    }
}

/// `INSERT_PART` for `rows` rows (2 to [`PARTS_PER_INSERT`]), built once per process: the
/// text is the statement cache's key, and formatting it on every append cost more than the
/// cache lookup it feeds (issue 16).
fn insert_parts_sql(rows: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let texts = SQL.get_or_init(|| (0..=PARTS_PER_INSERT).map(parts_sql).collect());
    &texts[rows.min(PARTS_PER_INSERT)]
}

/// `INSERT_PART`'s text for `rows` rows.
fn parts_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata) VALUES ",
    );
    for row in 0..rows {
        let first = row * 9 + 1;
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..9 {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("?{}", first + column));
        }
        sql.push(')');
    }
    sql
}

/// Inserts one message and its parts; returns the new `messages.id`. Either engine.
pub(crate) fn insert_message(
    db: &mut impl Sql,
    session: &SessionId,
    seq: i64,
    turn_index: i64,
    message: &NewMessage,
    created_at: &str,
) -> Result<i64> {
    let message_id = db.insert(
        INSERT_MESSAGE,
        &values![
            session.as_str(),
            seq,
            turn_index,
            message.role.as_str(),
            created_at,
            message.model.as_deref(),
        ],
    )?;
    let rows = message
        .parts
        .iter()
        .map(part_row)
        .collect::<Result<Vec<_>>>()?;
    for (chunk, rows) in rows.chunks(PARTS_PER_INSERT).enumerate() {
        let first = chunk * PARTS_PER_INSERT;
        if let [row] = rows {
            db.run(INSERT_PART, &row.values(message_id, first as i64))?;
            continue;
        }
        let mut params = Vec::with_capacity(rows.len() * 9);
        for (offset, row) in rows.iter().enumerate() {
            params.extend(row.values(message_id, (first + offset) as i64));
        }
        db.run(insert_parts_sql(rows.len()), &params)?;
    }
    Ok(message_id)
}

/// Inserts one part at `ordinal` of message `message_id`; returns its id. Either engine.
pub(crate) fn insert_part(
    db: &mut impl Sql,
    message_id: i64,
    ordinal: i64,
    part: &Part,
) -> Result<i64> {
    let row = part_row(part)?;
    db.insert(INSERT_PART, &row.values(message_id, ordinal))
}

/// How deep stored JSON may nest: what `serde_json`'s reader (every read of a row) follows.
pub(crate) const MAX_JSON_DEPTH: usize = 127;

/// How deep `value` nests (a scalar is 0, `[]` is 1), counted without recursion.
fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    deepest
}

/// Refuses a part whose JSON would not read back as written ([`Error::JsonTooDeep`]).
fn check_depth(part: &Part) -> Result<()> {
    let values: [(&'static str, Option<&Value>); 2] = [
        ("input", part_json(part)),
        ("provider_metadata", part.provider_metadata()),
    ];
    for (field, value) in values {
        let depth = value.map_or(0, json_depth);
        if depth > MAX_JSON_DEPTH {
            return Err(Error::JsonTooDeep {
                kind: part.kind().as_str(),
                field,
                depth,
                limit: MAX_JSON_DEPTH,
            });
        }
    }
    Ok(())
}

/// The JSON a part keeps in its `input` column, when it has one.
fn part_json(part: &Part) -> Option<&Value> {
    match part {
        Part::ToolUse { input, .. } | Part::ServerToolUse { input, .. } => Some(input),
        Part::ToolResult { blocks, .. } => blocks.as_ref(),
        Part::Image { source, .. } | Part::Document { source, .. } => Some(source),
        Part::ServerToolResult { block, .. } | Part::Opaque { block, .. } => Some(block),
        _ => None,
    }
}

/// A part's columns.
fn part_row(part: &Part) -> Result<PartRow<'_>> {
    check_depth(part)?;
    let metadata = part
        .provider_metadata()
        .map(serde_json::to_string)
        .transpose()?;
    let json = |value: &Value| serde_json::to_string(value);
    // text, tool_use_id, tool_name, input (JSON), is_error
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
        }
        | Part::ServerToolUse {
            id, name, input, ..
        } => (None, Some(id), Some(name), Some(json(input)?), false),
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            blocks,
            ..
        } => (
            Some(content),
            Some(tool_use_id),
            None,
            blocks.as_ref().map(serde_json::to_string).transpose()?,
            *is_error,
        ),
        Part::Image { source, title, .. } | Part::Document { source, title, .. } => {
            (title.as_deref(), None, None, Some(json(source)?), false)
        }
        Part::ServerToolResult {
            tool_use_id, block, ..
        } => (None, Some(tool_use_id), None, Some(json(block)?), false),
        Part::Opaque { block, .. } => (None, None, None, Some(json(block)?), false),
    };
    Ok(PartRow {
        kind: part.kind().as_str(),
        text,
        tool_use_id,
        tool_name,
        input,
        is_error,
        metadata,
    })
}

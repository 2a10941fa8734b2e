//! Messages and parts to rows: the one row encoder, for either engine (through [`Sql`]).
//! [`super::rows`] reads them back.

use serde_json::Value;

use super::sql::{values, Sql, Value as Bound};
use crate::error::{Error, Result};
use crate::model::{NewMessage, Part, SessionId};

const INSERT_MESSAGE: &str = "
    INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at, model)
    VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6)";

/// A part's columns as the store writes them; a schema whose rows carry their session
/// ([`Sql::rows_carry_session`]) takes `session_id` after them.
const PART_COLUMNS: &str =
    "message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata";

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
    /// The row's values, `message_id` and `ordinal` first, in [`PART_COLUMNS`]' order, then
    /// the session where the schema's rows carry it (`session`).
    fn push_values<'v>(
        &'v self,
        message_id: i64,
        ordinal: i64,
        session: Option<&'v str>,
        out: &mut Vec<Bound<'v>>,
    ) {
        out.extend(values![message_id, ordinal]);
        self.push_columns(out);
        if let Some(session) = session {
            out.push(Bound::from(session));
        }
    }

    /// The row's own columns, `kind` to `provider_metadata`, in [`PART_COLUMNS`]' order.
    fn push_columns<'v>(&'v self, out: &mut Vec<Bound<'v>>) {
        out.extend(values![
            self.kind,
            self.text,
            self.tool_use_id,
            self.tool_name,
            self.input.as_deref(),
            self.is_error,
            self.metadata.as_deref(),
        ]);
    }
}

/// The part INSERT for `rows` rows (1 to [`PARTS_PER_INSERT`]), with `session_id` when
/// `keyed`, built once per process: the text is the statement cache's key, and formatting it
/// on every append cost more than the cache lookup it feeds (issue 16).
fn insert_parts_sql(rows: usize, keyed: bool) -> &'static str {
    static SQL: std::sync::OnceLock<[Vec<String>; 2]> = std::sync::OnceLock::new();
    let texts = SQL.get_or_init(|| {
        [false, true].map(|keyed| {
            (0..=PARTS_PER_INSERT)
                .map(|rows| parts_sql(rows, keyed))
                .collect()
        })
    });
    &texts[usize::from(keyed)][rows.min(PARTS_PER_INSERT)]
}

/// The part INSERT's text for `rows` rows (`session_id` last when `keyed`).
fn parts_sql(rows: usize, keyed: bool) -> String {
    let width = if keyed { 10 } else { 9 };
    // SQLite (the unkeyed schema): a constraint this insert breaks rolls back the whole
    // write, as any failed write is, so SQLite keeps no statement journal for it.
    let verb = if keyed {
        "INSERT"
    } else {
        "INSERT OR ROLLBACK"
    };
    let mut sql = format!("{verb} INTO parts ({PART_COLUMNS}");
    if keyed {
        sql.push_str(", session_id");
    }
    sql.push_str(") VALUES ");
    for row in 0..rows {
        let first = row * width + 1;
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..width {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("?{}", first + column));
        }
        sql.push(')');
    }
    sql
}

/// What [`insert_message`] wrote.
pub(crate) struct InsertedMessage {
    /// The new `messages.id`.
    pub(crate) id: i64,
    /// The largest id its parts took (`None`: it has none).
    pub(crate) last_part: Option<i64>,
    /// Whether the session row was written in the same statement ([`Touch`]).
    pub(crate) touched: bool,
}

/// The session row's update at the end of an append (`updated_at`, the new tail state, the
/// message count), written by the statement of the append's last message where the engine
/// writes a message with its parts in one statement (PostgreSQL): one round trip less.
pub(crate) struct Touch<'a> {
    /// The new `updated_at`.
    pub(crate) now: &'a str,
    /// The new tail state without its largest part id ([`crate::history::TailState::encode_open_ended`]),
    /// which the statement appends.
    pub(crate) tail_head: &'a str,
    /// How many messages the append inserted.
    pub(crate) messages: i64,
    /// The largest part id before this message's parts (the state keeps the larger).
    pub(crate) parts_before: i64,
}

/// Inserts one message and its parts. Either engine.
pub(crate) fn insert_message(
    db: &mut impl Sql,
    session: &SessionId,
    seq: i64,
    turn_index: i64,
    message: &NewMessage,
    created_at: &str,
    touch: Option<&Touch<'_>>,
) -> Result<InsertedMessage> {
    let message_values = values![
        session.as_str(),
        seq,
        turn_index,
        message.role.as_str(),
        created_at,
        message.model.as_deref(),
    ];
    let rows = message
        .parts
        .iter()
        .map(part_row)
        .collect::<Result<Vec<_>>>()?;
    let keyed = db.rows_carry_session();
    if keyed && (1..=PARTS_PER_INSERT).contains(&rows.len()) {
        return insert_message_with_parts(db, &message_values, &rows, touch);
    }
    let message_id = db.insert(INSERT_MESSAGE, &message_values)?;
    let session_value = keyed.then_some(session.as_str());
    let mut last_part = None;
    for (chunk, rows) in rows.chunks(PARTS_PER_INSERT).enumerate() {
        let first = chunk * PARTS_PER_INSERT;
        let mut params = Vec::with_capacity(rows.len() * 10);
        for (offset, row) in rows.iter().enumerate() {
            row.push_values(
                message_id,
                (first + offset) as i64,
                session_value,
                &mut params,
            );
        }
        let last = db.insert_rows(insert_parts_sql(rows.len(), keyed), &params)?;
        last_part = last_part.max(Some(last));
    }
    Ok(InsertedMessage {
        id: message_id,
        last_part,
        touched: false,
    })
}

/// The message and its parts in one statement (one round trip), where rows carry their
/// session ([`Sql::rows_carry_session`]: PostgreSQL, whose data-modifying `WITH` gives the
/// parts the message's new id): `rows` (1 to [`PARTS_PER_INSERT`]) after the message's
/// [`INSERT_MESSAGE`] values, and the session row's update when `touch`; the message's id and
/// its parts' largest.
fn insert_message_with_parts(
    db: &mut impl Sql,
    message_values: &[Bound<'_>],
    rows: &[PartRow<'_>],
    touch: Option<&Touch<'_>>,
) -> Result<InsertedMessage> {
    let mut params = Vec::with_capacity(message_values.len() + rows.len() * 8 + 4);
    params.extend_from_slice(message_values);
    for (ordinal, row) in rows.iter().enumerate() {
        params.extend(values![ordinal as i64]);
        row.push_columns(&mut params);
    }
    if let Some(touch) = touch {
        params.extend(values![
            touch.now,
            touch.tail_head,
            touch.messages,
            touch.parts_before
        ]);
    }
    let sql = message_with_parts_sql(rows.len(), touch.is_some());
    let ids = db.int_table(sql, &params, 2)?;
    match ids.as_slice() {
        [id, last_part] => Ok(InsertedMessage {
            id: *id,
            last_part: Some(*last_part),
            touched: touch.is_some(),
        }),
        _ => Err(crate::Error::CorruptRow {
            table: "messages",
            row_id: 0,
            detail: "the insert of a message with its parts returned no ids".to_owned(),
        }),
    }
}

/// [`insert_message_with_parts`]'s statement for `rows` parts, with the session row's
/// update when `touch` (its four values after the parts'), built once per process.
fn message_with_parts_sql(rows: usize, touch: bool) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<[String; 2]>> = std::sync::OnceLock::new();
    let texts = SQL.get_or_init(|| {
        (0..=PARTS_PER_INSERT)
            .map(|rows| [false, true].map(|touch| message_with_parts_text(rows, touch)))
            .collect()
    });
    &texts[rows.min(PARTS_PER_INSERT)][usize::from(touch)]
}

/// The text of [`message_with_parts_sql`].
fn message_with_parts_text(rows: usize, touch: bool) -> String {
    let values: Vec<String> = (0..rows)
        .map(|row| {
            let at = 7 + row * 8;
            format!(
                "(CAST(?{} AS BIGINT), ?{}, ?{}, ?{}, ?{}, ?{}, CAST(?{} AS BIGINT), ?{})",
                at,
                at + 1,
                at + 2,
                at + 3,
                at + 4,
                at + 5,
                at + 6,
                at + 7
            )
        })
        .collect();
    // The session row: its tail state ends with the session's largest part id, the
    // larger of the one before and the largest these parts took.
    let at = 7 + rows * 8;
    let session = if touch {
        format!(
            ", s AS (UPDATE sessions SET updated_at = ?{at},
                     tail_state = CAST(?{} AS TEXT)
                         || CAST(GREATEST(CAST(?{} AS BIGINT), (SELECT MAX(id) FROM p)) AS TEXT)
                         || ']',
                     message_count = message_count + CAST(?{} AS BIGINT)
                     WHERE id = ?1 RETURNING 1)",
            at + 1,
            at + 3,
            at + 2
        )
    } else {
        String::new()
    };
    format!(
        "WITH m AS ({INSERT_MESSAGE} RETURNING id),
         p AS (INSERT INTO parts ({PART_COLUMNS}, session_id)
               SELECT m.id, v.ordinal, v.kind, v.text, v.tool_use_id, v.tool_name,
                      v.input, v.is_error, v.metadata, ?1
               FROM m, (VALUES {}) AS v (ordinal, kind, text, tool_use_id,
                    tool_name, input, is_error, metadata)
               RETURNING id){session}
         SELECT (SELECT id FROM m), (SELECT MAX(id) FROM p)",
        values.join(", ")
    )
}

/// Inserts one part at `ordinal` of `session`'s message `message_id`; returns its id.
/// Either engine.
pub(crate) fn insert_part(
    db: &mut impl Sql,
    session: &SessionId,
    message_id: i64,
    ordinal: i64,
    part: &Part,
) -> Result<i64> {
    let row = part_row(part)?;
    let keyed = db.rows_carry_session();
    let mut params = Vec::with_capacity(10);
    row.push_values(
        message_id,
        ordinal,
        keyed.then_some(session.as_str()),
        &mut params,
    );
    db.insert(insert_parts_sql(1, keyed), &params)
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

//! Rows to values and back: the one place that knows how a [`Message`] and its [`Part`]s map
//! onto the `messages` and `parts` columns.
//!
//! There is one row decoder, used by every read (export, `messages`, turns and pages, the
//! check and the mend of `store-repair`), so what one command reads every command reads. It
//! decodes by column name (the statement's columns are looked up once, by the aliases below),
//! and it has one leniency:
//!
//! - lenient where other writers differ harmlessly: a NULL text or id is `""`, a BLOB text is
//!   read as UTF-8 (lossily), a number in a text column is its decimal text, a flag may be
//!   `1`/`0`, a real, or text such as `true`; a timestamp may lack its offset (read as UTC);
//!   stored JSON that does not parse is kept as a JSON string;
//! - strict where a value is outside the contract: a role or part kind the contract does not
//!   name, a `created_at` that is not a timestamp, a `seq` or `turn_index` that is not an
//!   integer. Such a row makes its session [`Unreadable`]: reads of that session fail with
//!   [`Error::CorruptRow`], and the check reports it under the rule `unreadable_row`, while
//!   every other session reads as before.

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, Row, Statement};
use serde_json::Value;

use super::time::parse_time;
use crate::error::{Error, Result};
use crate::history::rules::{HealthRule, Problem};
use crate::model::{Message, Part, PartKind, Role, SessionId};

/// Which messages of a session to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Range {
    /// The whole session.
    All,
    /// Messages whose `turn_index` lies in `[first, last]`.
    Turns(i64, i64),
    /// Messages the provider sees: `compacted = 0`.
    Visible,
    /// Messages whose `seq` lies in `[first, last]`.
    Seqs(i64, i64),
}

/// The message and part columns every load selects, under the names the decoder reads.
macro_rules! message_columns {
    () => {
        "m.id AS message_id, m.seq AS seq, m.turn_index AS turn_index, m.role AS role,
         m.compacted AS compacted, m.created_at AS created_at, m.model AS model, m.state AS state,
         p.id AS part_id, p.kind AS kind, p.text AS text, p.tool_use_id AS tool_use_id,
         p.tool_name AS tool_name, p.is_error AS is_error"
    };
}

pub(crate) const SELECT_MESSAGES: &str = concat!(
    "SELECT ",
    message_columns!(),
    ", p.input AS input, p.provider_metadata AS provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND m.seq BETWEEN ?2 AND ?3
    ORDER BY m.seq, p.ordinal"
);

/// `m.id` in the `ORDER BY` is the index's own last column: with it SQLite sees that the
/// `(session_id, turn_index, seq)` walk yields each message once and keeps the join in index
/// order; without it the rows went through a temporary B-tree to be sorted by ordinal.
pub(crate) const SELECT_MESSAGES_BY_TURN: &str = concat!(
    "SELECT ",
    message_columns!(),
    ", p.input AS input, p.provider_metadata AS provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND m.turn_index BETWEEN ?2 AND ?3
    ORDER BY m.turn_index, m.seq, m.id, p.ordinal"
);

pub(crate) const SELECT_VISIBLE_MESSAGES: &str = concat!(
    "SELECT ",
    message_columns!(),
    ", p.input AS input, p.provider_metadata AS provider_metadata
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1 AND (m.compacted = 0 OR m.role = 'system') AND m.seq BETWEEN ?2 AND ?3
    ORDER BY m.seq, p.ordinal"
);

// For the check and the mend: the same decoder over fewer columns. The tool_use input stays
// raw text (only a tool_use that becomes text shows it) and provider metadata is not read (the
// mend never rewrites either; it updates single columns), which keeps the check close to the
// speed of a plain scan.
pub(crate) const SELECT_FOR_CHECK: &str = concat!(
    "SELECT ",
    message_columns!(),
    ", p.input AS raw_input
    FROM messages m LEFT JOIN parts p ON p.message_id = m.id
    WHERE m.session_id = ?1
    ORDER BY m.seq, p.ordinal"
);

pub(crate) const SESSION_ROW: &str =
    "SELECT created_at AS created_at, updated_at AS updated_at FROM sessions WHERE id = ?1";

/// A row outside the contract: its session cannot be read (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unreadable {
    /// `sessions`, `messages`, `parts` or `usage`.
    pub table: &'static str,
    /// The row's id (0 for a `sessions` row, whose id is text; a `usage` row's message's).
    pub row_id: i64,
    /// The message the row is or belongs to, when there is one.
    pub message_id: Option<i64>,
    /// That message's `seq`, when it can be read.
    pub seq: Option<i64>,
    /// That message's contract turn, when the roles before it could all be read.
    pub turn: Option<i64>,
    /// What is wrong with it.
    pub detail: String,
}

impl Unreadable {
    /// The error a read of the session fails with.
    pub(crate) fn into_error(self) -> Error {
        Error::CorruptRow {
            table: self.table,
            row_id: self.row_id,
            detail: self.detail,
        }
    }

    /// The check's finding: rule `unreadable_row`, the session left as it is.
    pub(crate) fn violation(&self, session: &SessionId) -> Problem {
        let (table, id) = (self.table, self.row_id);
        let row = match table {
            "sessions" => format!("the {table} row"),
            "usage" => format!("the usage row of message {id}"),
            _ => format!("{table} row {id}"),
        };
        Problem {
            session_id: session.clone(),
            rule: HealthRule::UnreadableRow,
            turn: self.turn,
            message_id: self.message_id,
            seq: self.seq,
            part: None,
            tool_use_id: None,
            detail: format!(
                "{row} is outside the contract ({}); the session is left as it is",
                self.detail
            ),
        }
    }
}

/// A session as loaded: messages plus the `parts.id` of each part.
#[derive(Clone, Debug, Default)]
pub(crate) struct Loaded {
    /// The messages in `seq` order, parts in ordinal order.
    pub messages: Vec<Message>,
    /// `parts.id` of every part, message by message.
    pub part_ids: Vec<Vec<i64>>,
}

/// Where the decoder finds each column in one statement (looked up by name once).
pub(crate) struct Columns {
    message_id: usize,
    seq: usize,
    turn_index: usize,
    role: usize,
    compacted: usize,
    created_at: usize,
    model: usize,
    state: usize,
    part_id: usize,
    kind: usize,
    text: usize,
    tool_use_id: usize,
    tool_name: usize,
    is_error: usize,
    /// The tool_use input, parsed as JSON.
    input: Option<usize>,
    /// The tool_use input, kept as the text stored.
    raw_input: Option<usize>,
    provider_metadata: Option<usize>,
}

impl Columns {
    fn of(stmt: &Statement<'_>) -> Result<Self> {
        Self::find(|name| stmt.column_index(name).ok())
    }

    /// The columns by name; `position` says where a name is, if the statement selects it.
    pub(crate) fn find(position: impl Fn(&str) -> Option<usize>) -> Result<Self> {
        // A statement of ours without a column the decoder reads: SQLite's own error for it.
        let at = |name: &str| {
            position(name)
                .ok_or_else(|| Error::from(rusqlite::Error::InvalidColumnName(name.to_owned())))
        };
        Ok(Self {
            message_id: at("message_id")?,
            seq: at("seq")?,
            turn_index: at("turn_index")?,
            role: at("role")?,
            compacted: at("compacted")?,
            created_at: at("created_at")?,
            model: at("model")?,
            state: at("state")?,
            part_id: at("part_id")?,
            kind: at("kind")?,
            text: at("text")?,
            tool_use_id: at("tool_use_id")?,
            tool_name: at("tool_name")?,
            is_error: at("is_error")?,
            input: position("input"),
            raw_input: position("raw_input"),
            provider_metadata: position("provider_metadata"),
        })
    }
}

/// One row's values as the decoder reads them: SQLite's dynamic values, or PostgreSQL's
/// typed columns seen as the same kinds, so both engines share one decoder and one leniency.
pub(crate) trait Cells {
    /// The value at column `at`; `Err` says why it cannot be read.
    fn cell(&self, at: usize) -> std::result::Result<ValueRef<'_>, String>;

    /// The name of column `at` (its alias in the statement), when the engine's row says.
    fn column_name(&self, _at: usize) -> Option<String> {
        None
    }
}

impl Cells for Row<'_> {
    fn cell(&self, at: usize) -> std::result::Result<ValueRef<'_>, String> {
        self.get_ref(at).map_err(|e| e.to_string())
    }

    fn column_name(&self, at: usize) -> Option<String> {
        self.as_ref().column_name(at).ok().map(str::to_owned)
    }
}

/// The statement and bounds a [`Range`] loads with (`?1` session, `?2`..`?3` the bounds).
pub(crate) fn select_for(range: Range) -> (&'static str, i64, i64) {
    match range {
        Range::All => (SELECT_MESSAGES, i64::MIN, i64::MAX),
        Range::Turns(first, last) => (SELECT_MESSAGES_BY_TURN, first, last),
        Range::Visible => (SELECT_VISIBLE_MESSAGES, i64::MIN, i64::MAX),
        Range::Seqs(first, last) => (SELECT_MESSAGES, first, last),
    }
}

/// Reads load rows one at a time into a [`Loaded`] session: every engine's rows go through
/// this one decoder.
pub(crate) struct Decoder {
    columns: Columns,
    loaded: Loaded,
    /// A message row found unreadable: the rows of its parts are passed over.
    skipped: Option<i64>,
    /// A message before the current one was passed over: the contract turns are unknown.
    turns_unknown: bool,
}

impl Decoder {
    /// A decoder for rows with these columns.
    pub(crate) fn new(columns: Columns) -> Self {
        Self {
            columns,
            loaded: Loaded::default(),
            skipped: None,
            turns_unknown: false,
        }
    }

    /// The contract turn of a message of `role` after those decoded so far, when known.
    fn turn_after(&self, role: Option<Role>) -> Option<i64> {
        if self.turns_unknown {
            return None;
        }
        let roles = self.loaded.messages.iter().map(|m| m.role).chain(role);
        crate::history::turns::turn_indexes(roles).last().copied()
    }

    /// [`Decoder::push`] that goes on past a row outside the contract: an unreadable message
    /// is left out with its parts, an unreadable part is left out of its message. Returns
    /// the row left out, once per row.
    pub(crate) fn push_readable(
        &mut self,
        row: &(impl Cells + ?Sized),
    ) -> Result<Option<Unreadable>> {
        let id = integer(row, self.columns.message_id).map_err(|detail| Error::CorruptRow {
            table: "messages",
            row_id: 0,
            detail,
        })?;
        if self.skipped == Some(id) {
            return Ok(None);
        }
        match self.push(row)? {
            Ok(()) => Ok(None),
            Err(unreadable) => {
                if unreadable.table == "messages" {
                    self.skipped = Some(id);
                    self.turns_unknown = true;
                }
                Ok(Some(unreadable))
            }
        }
    }

    /// Adds one row; `Err(Unreadable)` at the first row outside the contract.
    pub(crate) fn push(
        &mut self,
        row: &(impl Cells + ?Sized),
    ) -> Result<std::result::Result<(), Unreadable>> {
        let id = integer(row, self.columns.message_id).map_err(|detail| Error::CorruptRow {
            table: "messages",
            row_id: 0,
            detail,
        })?;
        if self.loaded.messages.last().is_none_or(|m| m.id != id) {
            match decode_message(row, &self.columns, id) {
                Ok(message) => self.loaded.messages.push(message),
                Err(detail) => {
                    let role = text(row, self.columns.role)
                        .ok()
                        .flatten()
                        .and_then(|role| role.parse::<Role>().ok());
                    return Ok(Err(Unreadable {
                        table: "messages",
                        row_id: id,
                        message_id: Some(id),
                        seq: integer(row, self.columns.seq).ok(),
                        turn: role.and_then(|role| self.turn_after(Some(role))),
                        detail,
                    }));
                }
            }
            self.loaded.part_ids.push(Vec::new());
        }
        match decode_part(row, &self.columns) {
            Ok(None) => {}
            Ok(Some((part_id, part))) => {
                let loaded = &mut self.loaded;
                if let (Some(message), Some(ids)) =
                    (loaded.messages.last_mut(), loaded.part_ids.last_mut())
                {
                    message.parts.push(part);
                    ids.push(part_id);
                }
            }
            Err((part_id, detail)) => {
                return Ok(Err(Unreadable {
                    table: "parts",
                    row_id: part_id,
                    message_id: Some(id),
                    seq: self.loaded.messages.last().map(|m| m.seq),
                    turn: self.turn_after(None),
                    detail,
                }))
            }
        }
        Ok(Ok(()))
    }

    /// The session decoded so far.
    pub(crate) fn finish(self) -> Loaded {
        self.loaded
    }
}

/// The session row's timestamps, when one of them is not a timestamp (`created_at` and
/// `updated_at` at the columns given).
pub(crate) fn session_row_problem(
    row: &(impl Cells + ?Sized),
    created_at: usize,
    updated_at: usize,
) -> Option<Unreadable> {
    [(created_at, "created_at"), (updated_at, "updated_at")]
        .into_iter()
        .find_map(|(at, column)| time_of(row, at, column).err())
        .map(|detail| Unreadable {
            table: "sessions",
            row_id: 0,
            message_id: None,
            seq: None,
            turn: None,
            detail,
        })
}

/// Loads messages with their parts, in `seq` order, in one query. A row outside the contract
/// fails the load with [`Error::CorruptRow`].
pub(crate) fn load_messages(
    conn: &Connection,
    session: &SessionId,
    range: Range,
) -> Result<Vec<Message>> {
    let (sql, first, last) = select_for(range);
    let mut stmt = conn.prepare_cached(sql)?;
    let loaded = decode_rows(&mut stmt, params![session.as_str(), first, last])?;
    loaded
        .map(|loaded| loaded.messages)
        .map_err(Unreadable::into_error)
}

/// The whole session for the check and the mend, with part ids; the inner `Err` is the first
/// row outside the contract (the session row's timestamps included).
pub(crate) fn load_for_check(
    conn: &Connection,
    session: &SessionId,
) -> Result<std::result::Result<Loaded, Unreadable>> {
    if let Some(unreadable) = session_row(conn, session)? {
        return Ok(Err(unreadable));
    }
    let mut stmt = conn.prepare_cached(SELECT_FOR_CHECK)?;
    decode_rows(&mut stmt, params![session.as_str()])
}

/// The names [`SELECT_MESSAGES`] selects, in its order: where the decoder finds each column
/// of a row handed over by `Sql::each_row`, on either engine.
pub(crate) const MESSAGE_COLUMNS: [&str; 16] = [
    "message_id",
    "seq",
    "turn_index",
    "role",
    "compacted",
    "created_at",
    "model",
    "state",
    "part_id",
    "kind",
    "text",
    "tool_use_id",
    "tool_name",
    "is_error",
    "input",
    "provider_metadata",
];

/// The session row's timestamps, when one of them is not a timestamp.
fn session_row(conn: &Connection, session: &SessionId) -> Result<Option<Unreadable>> {
    let mut stmt = conn.prepare_cached(SESSION_ROW)?;
    let mut rows = stmt.query([session.as_str()])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let (created_at, updated_at) = (
        row.as_ref().column_index("created_at")?,
        row.as_ref().column_index("updated_at")?,
    );
    Ok(session_row_problem(row, created_at, updated_at))
}

fn decode_rows(
    stmt: &mut Statement<'_>,
    params: impl rusqlite::Params,
) -> Result<std::result::Result<Loaded, Unreadable>> {
    let mut decoder = Decoder::new(Columns::of(stmt)?);
    let mut rows = stmt.query(params)?;
    while let Some(row) = rows.next()? {
        if let Err(unreadable) = decoder.push(row)? {
            return Ok(Err(unreadable));
        }
    }
    Ok(Ok(decoder.finish()))
}

/// Decodes the message columns; `Err` says what is outside the contract.
fn decode_message(
    row: &(impl Cells + ?Sized),
    columns: &Columns,
    id: i64,
) -> std::result::Result<Message, String> {
    let role = text(row, columns.role)?.unwrap_or_default();
    Ok(Message {
        id,
        seq: integer(row, columns.seq).map_err(|e| format!("seq: {e}"))?,
        turn_index: integer(row, columns.turn_index).map_err(|e| format!("turn_index: {e}"))?,
        role: role.parse::<Role>().map_err(|e| e.to_string())?,
        compacted: flag(row, columns.compacted)?,
        created_at: time_of(row, columns.created_at, "created_at")?,
        model: text(row, columns.model)?,
        state: match text(row, columns.state)? {
            Some(state) => state.parse().map_err(|e| format!("state: {e}"))?,
            None => crate::model::MessageState::Complete,
        },
        parts: Vec::new(),
    })
}

/// Decodes the part columns; `None` for a message without parts (LEFT JOIN), `Err` with the
/// part's id when a value is outside the contract.
fn decode_part(
    row: &(impl Cells + ?Sized),
    columns: &Columns,
) -> std::result::Result<Option<(i64, Part)>, (i64, String)> {
    let part_id = match row.cell(columns.part_id) {
        Ok(ValueRef::Null) => return Ok(None),
        Ok(ValueRef::Integer(id)) => id,
        Ok(other) => return Err((0, format!("part id {other:?} is not an integer"))),
        Err(e) => return Err((0, e)),
    };
    let cells = PartCells {
        row,
        columns,
        part_id,
    };
    let kind = text(row, columns.kind)
        .map_err(|e| cells.fail(e))?
        .unwrap_or_default();
    let kind = kind
        .parse::<PartKind>()
        .map_err(|e| cells.fail(e.to_string()))?;
    let common = Common {
        text: cells.text_at(columns.text)?,
        tool_use_id: cells.text_at(columns.tool_use_id)?,
        provider_metadata: cells.json_at(columns.provider_metadata)?,
    };
    Ok(Some((part_id, cells.part(kind, common)?)))
}

/// The columns every kind of part reads, decoded before the kind's own.
struct Common {
    text: String,
    tool_use_id: String,
    provider_metadata: Option<Value>,
}

/// One part row's cells, read with each error tagged with the part's id.
struct PartCells<'r, R: Cells + ?Sized> {
    row: &'r R,
    columns: &'r Columns,
    part_id: i64,
}

/// A decoding error of one part: its id and what was wrong.
type PartError = (i64, String);

impl<R: Cells + ?Sized> PartCells<'_, R> {
    /// `detail` tagged with the part's id.
    fn fail(&self, detail: String) -> PartError {
        (self.part_id, detail)
    }

    /// The text column at `at`, empty when NULL.
    fn text_at(&self, at: usize) -> std::result::Result<String, PartError> {
        text(self.row, at)
            .map(Option::unwrap_or_default)
            .map_err(|e| self.fail(e))
    }

    /// The JSON column at `at` (a string when not JSON); `None` when NULL or not selected.
    fn json_at(&self, at: Option<usize>) -> std::result::Result<Option<Value>, PartError> {
        match at {
            None => Ok(None),
            Some(at) => Ok(text(self.row, at)
                .map_err(|e| self.fail(e))?
                .map(|raw| json_or_string(&raw))),
        }
    }

    /// The `input` column of a media, server-tool or opaque block: its JSON, `{}` when NULL.
    fn block(&self) -> std::result::Result<Value, PartError> {
        Ok(self
            .json_at(self.columns.input.or(self.columns.raw_input))?
            .unwrap_or_else(|| Value::Object(Default::default())))
    }

    /// A tool call's input: the JSON column, else the raw text as a string, else `{}`.
    fn tool_input(&self) -> std::result::Result<Value, PartError> {
        Ok(match (self.columns.input, self.columns.raw_input) {
            (Some(at), _) => self
                .json_at(Some(at))?
                .unwrap_or_else(|| Value::Object(Default::default())),
            (None, Some(at)) => Value::String(self.text_at(at)?),
            (None, None) => Value::Object(Default::default()),
        })
    }

    /// The part of `kind`, from the `common` columns and the kind's own.
    fn part(&self, kind: PartKind, common: Common) -> std::result::Result<Part, PartError> {
        let Common {
            text: text_value,
            tool_use_id,
            provider_metadata,
        } = common;
        let columns = self.columns;
        Ok(match kind {
            PartKind::Text => Part::Text {
                text: text_value,
                provider_metadata,
            },
            PartKind::Reasoning => Part::Reasoning {
                text: text_value,
                provider_metadata,
            },
            PartKind::RedactedReasoning => Part::RedactedReasoning {
                data: text_value,
                provider_metadata,
            },
            PartKind::ToolUse => {
                let input = self.tool_input()?;
                Part::ToolUse {
                    id: tool_use_id,
                    name: self.text_at(columns.tool_name)?,
                    input,
                    provider_metadata,
                }
            }
            PartKind::ToolResult => Part::ToolResult {
                tool_use_id,
                content: text_value,
                is_error: flag(self.row, columns.is_error).map_err(|e| self.fail(e))?,
                blocks: self.json_at(columns.input.or(columns.raw_input))?,
                provider_metadata,
            },
            PartKind::Image | PartKind::Document => self.media(kind, provider_metadata)?,
            PartKind::ServerToolUse => Part::ServerToolUse {
                id: tool_use_id,
                name: self.text_at(columns.tool_name)?,
                input: self.block()?,
                provider_metadata,
            },
            PartKind::ServerToolResult => Part::ServerToolResult {
                tool_use_id,
                block: self.block()?,
                provider_metadata,
            },
            PartKind::Opaque => Part::Opaque {
                block: self.block()?,
                provider_metadata,
            },
        })
    }

    /// An image or document part (`kind`): its source block and its title (the text column,
    /// NULL kept as `None`).
    fn media(
        &self,
        kind: PartKind,
        provider_metadata: Option<Value>,
    ) -> std::result::Result<Part, PartError> {
        let source = self.block()?;
        let title = text(self.row, self.columns.text).map_err(|e| self.fail(e))?;
        Ok(if kind == PartKind::Image {
            Part::Image {
                source,
                title,
                provider_metadata,
            }
        } else {
            Part::Document {
                source,
                title,
                provider_metadata,
            }
        })
    }
}

/// A text column as another writer may have filled it: SQLite keeps bytes as a BLOB (read
/// as UTF-8, lossily, like text that is not valid UTF-8) and numbers as numbers.
pub(crate) fn text(
    row: &(impl Cells + ?Sized),
    at: usize,
) -> std::result::Result<Option<String>, String> {
    Ok(match row.cell(at)? {
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

/// An integer column (`seq`, `turn_index`): an integer, or a real with no fraction.
pub(crate) fn integer(row: &(impl Cells + ?Sized), at: usize) -> std::result::Result<i64, String> {
    match row.cell(at)? {
        ValueRef::Integer(n) => Ok(n),
        ValueRef::Real(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Ok(x as i64),
        other => Err(format!("{} is not an integer", describe(other))),
    }
}

/// A 0/1 flag as another writer may have stored it: a number, or text such as `true`.
fn flag(row: &(impl Cells + ?Sized), at: usize) -> std::result::Result<bool, String> {
    Ok(match row.cell(at)? {
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

/// A timestamp column: RFC 3339, or a time without offset read as UTC (see `parse_time`).
fn time_of(
    row: &(impl Cells + ?Sized),
    at: usize,
    column: &str,
) -> std::result::Result<chrono::DateTime<chrono::Utc>, String> {
    let value = row.cell(at)?;
    let parsed = match value {
        ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok().and_then(parse_time),
        _ => None,
    };
    parsed.ok_or_else(|| format!("{column} {} is not a timestamp", describe(value)))
}

/// A stored value for a message, cut short.
fn describe(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Null => "NULL".to_owned(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(x) => x.to_string(),
        ValueRef::Text(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            let short: String = text.chars().take(40).collect();
            format!("{short:?}")
        }
        ValueRef::Blob(bytes) => format!("a {}-byte BLOB", bytes.len()),
    }
}

/// Stored JSON, or the raw text as a JSON string when another writer stored something else.
fn json_or_string(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

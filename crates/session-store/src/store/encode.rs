//! Messages and parts to rows: the one row encoder, for either engine (through [`Sql`]).
//! [`super::rows`] reads them back.

use serde_json::Value;

use super::idempotency::{record_key, stored_key};
use super::sql::{values, Sql, Value as Bound};
use crate::error::{Error, Result};
use crate::model::{NewMessage, Part, SessionId};
use crate::store::write::TailCheck;

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
    /// The session row's version (`xmin`) that statement left, where it reports one
    /// (PostgreSQL, with [`Touch`]).
    pub(crate) version: Option<i64>,
    /// Whether the message's usage row went in with it.
    pub(crate) with_usage: bool,
    /// Whether the message's idempotency key row went in with it.
    pub(crate) with_key: bool,
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

/// The columns of an appended message's row that the append assigns.
pub(crate) struct MessageRow<'a> {
    /// The message's `seq`.
    pub(crate) seq: i64,
    /// Its `turn_index`.
    pub(crate) turn_index: i64,
    /// Its `created_at`, formatted.
    pub(crate) created_at: &'a str,
}

/// The session row's version on PostgreSQL (its `xmin`, the transaction that wrote it) as a
/// number: what a one-statement append checks and every write to a session's rows changes
/// ([`Remembered::version`](crate::store::write::Remembered::version)).
macro_rules! row_version {
    () => {
        "CAST(CAST(xmin AS TEXT) AS BIGINT)"
    };
}
#[cfg(feature = "postgres")]
pub(crate) use row_version;

/// How many call ids a [`Guard`] asks about: an append of more reads its tail instead.
pub(crate) const GUARD_CALLS: usize = 8;

/// A remembered tail's [`TailCheck`] with the append's call ids (at most [`GUARD_CALLS`]):
/// the append's first insert writes only where it holds (PostgreSQL).
pub(crate) struct Guard<'a> {
    /// What the tail says of the session's rows.
    pub(crate) check: &'a TailCheck,
    /// The append's call ids, none of which the session may use.
    pub(crate) calls: &'a [&'a str],
}

impl Guard<'_> {
    /// The guard's values, bound after the statement's others in [`guard_condition`]'s
    /// order.
    fn push_values<'v>(&'v self, out: &mut Vec<Bound<'v>>) {
        let check = self.check;
        out.extend(values![
            check.last_seq,
            check.parts_max,
            check.block_after,
            check.block_parts
        ]);
        out.extend(self.calls.iter().map(|&call| Bound::from(call)));
        if let Some(version) = check.version {
            out.extend(values![version]);
        }
    }
}

/// The start of the text of an append that is one statement ([`fits_one_statement`]): the
/// message, its parts and the session row, on a remembered tail whose row version the
/// statement checks under the session's lock. A PostgreSQL connection outside a
/// transaction runs this statement and no other (`store/pg/mod.rs`).
pub(crate) const ONE_STATEMENT: &str = "/* one-statement append */ ";

/// The column of [`ONE_STATEMENT`]'s row that says whether the message went in (1) or not
/// (0): the engine reads it before it hands the row back.
#[cfg(feature = "postgres")]
pub(crate) const ONE_STATEMENT_WROTE: usize = 2;

/// Whether an append of `messages` can be one statement where the engine writes a message
/// with its parts (and its usage and idempotency key rows) in one (PostgreSQL): one message
/// of 1 to [`PARTS_PER_INSERT`] parts and at most [`GUARD_CALLS`] calls. A key the session
/// already stores fails that statement's guard: the retry replays in a transaction.
pub(crate) fn fits_one_statement(messages: &[NewMessage]) -> bool {
    let [message] = messages else {
        return false;
    };
    parts_fit_one_insert(message.parts.len())
        && message.parts.iter().filter_map(Part::call_id).count() <= GUARD_CALLS
}

/// Whether a message of `parts` parts goes in with them in one statement, where the engine
/// writes rows with their session ([`insert_message_with_parts`]).
fn parts_fit_one_insert(parts: usize) -> bool {
    (1..=PARTS_PER_INSERT).contains(&parts)
}

/// The condition a [`Guard`] puts on the insert of an append's first message, its values
/// bound from `?{at}` on and the session as `?1`: each part read by a key of the session's
/// (its last seq and part id, the open messages, the block's parts by part id, each call
/// id), so the cost does not grow with the session. A plan made on nearly empty tables
/// (the statement cache keeps it) costs every index that starts with the session alike:
/// the block's count asks for the primary key's order, which only that key gives without a
/// sort (without it, plans read every part of the session through another index and
/// filtered). The count's range is bounded on both sides (above by the largest part id,
/// which the check asks for anyway): PostgreSQL estimates a range with one unknown bound at
/// a third of the session's parts, so on tables that hold data the kept plan looked dearer
/// than a plan for each run's values, and the server planned the statement again on every
/// append (0.3-0.4 ms each; `an_append_is_planned_once_per_connection_on_tables_that_hold_data`).
///
/// With a row version ([`TailCheck::version`], its value after the call ids') the statement
/// also takes the session's lock, without waiting (a writer holding it fails the statement,
/// which wrote nothing), and holds only while the row is still that version: no writer has
/// written the session since the tail was remembered.
fn guard_condition(at: usize, calls: usize, versioned: bool) -> String {
    let version = if versioned {
        format!(
            concat!(
                "
         AND EXISTS (SELECT 1 FROM sessions WHERE id = ?1
                     AND ",
                row_version!(),
                " = CAST(?{} AS BIGINT)
                     FOR UPDATE NOWAIT)"
            ),
            at + 4 + calls
        )
    } else {
        String::new()
    };
    // Each call id probed alone: a generic plan for an `IN` list scans every call of the
    // session and filters.
    let calls: String = (0..calls)
        .map(|c| {
            format!(
                "
         AND NOT EXISTS (SELECT 1 FROM parts WHERE session_id = ?1 AND kind = 'tool_use'
                         AND tool_use_id = ?{})",
                at + 4 + c
            )
        })
        .collect();
    format!(
        "(SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?1) = CAST(?{} AS BIGINT)
         AND (SELECT COALESCE(MAX(id), 0) FROM parts WHERE session_id = ?1) = CAST(?{} AS BIGINT)
         AND NOT EXISTS (SELECT 1 FROM messages WHERE session_id = ?1 AND state = 'open')
         AND (SELECT COUNT(*) FROM (SELECT id FROM parts
                                    WHERE session_id = ?1 AND id > CAST(?{} AS BIGINT)
                                      AND id <= CAST(?{} AS BIGINT)
                                    ORDER BY session_id, id) AS block)
             = CAST(?{} AS BIGINT){calls}{version}",
        at,
        at + 1,
        at + 2,
        at + 1,
        at + 3,
    )
}

/// Whether `guard` holds for `session`, asked alone (a first message that does not go in
/// with its parts in one statement). A guard with a row version never holds alone: only the
/// one statement that also inserts checks it ([`fits_one_statement`]), and without it the
/// append runs in a transaction.
fn guard_holds(db: &mut impl Sql, session: &SessionId, guard: &Guard<'_>) -> Result<bool> {
    if guard.check.version.is_some() {
        return Ok(false);
    }
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let texts = SQL.get_or_init(|| {
        (0..=GUARD_CALLS)
            .map(|calls| format!("SELECT 1 WHERE {}", guard_condition(2, calls, false)))
            .collect()
    });
    let sql = &texts[guard.calls.len().min(GUARD_CALLS)];
    let mut params = values![session.as_str()].to_vec();
    guard.push_values(&mut params);
    Ok(db.optional_int(sql, &params)?.is_some())
}

/// Inserts one message and its parts, and its usage row (`usage`, from
/// [`super::usage::usage_values`]) where the engine writes them in one statement
/// ([`InsertedMessage::with_usage`]). Either engine. `None`, with nothing written: `guard`
/// did not hold.
pub(crate) fn insert_message(
    db: &mut impl Sql,
    session: &SessionId,
    row: MessageRow<'_>,
    message: &NewMessage,
    (touch, guard): (Option<&Touch<'_>>, Option<&Guard<'_>>),
    usage: Option<&[Bound<'_>; 5]>,
) -> Result<Option<InsertedMessage>> {
    let message_values = values![
        session.as_str(),
        row.seq,
        row.turn_index,
        message.role.as_str(),
        row.created_at,
        message.model.as_deref(),
    ];
    let rows = message
        .parts
        .iter()
        .map(part_row)
        .collect::<Result<Vec<_>>>()?;
    let keyed = db.rows_carry_session();
    if keyed && parts_fit_one_insert(rows.len()) {
        let beside = Beside {
            touch,
            usage,
            key: message.idempotency_key.as_deref(),
        };
        return insert_message_with_parts(db, &message_values, &rows, beside, guard);
    }
    if let Some(guard) = guard {
        if !guard_holds(db, session, guard)? {
            return Ok(None);
        }
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
    Ok(Some(InsertedMessage {
        id: message_id,
        last_part,
        touched: false,
        version: None,
        with_usage: false,
        with_key: false,
    }))
}

/// What [`insert_message_with_parts`]'s statement writes beside the message and its parts.
struct Beside<'a> {
    /// The session row's update.
    touch: Option<&'a Touch<'a>>,
    /// The usage row's values ([`super::usage::usage_values`]).
    usage: Option<&'a [Bound<'a>; 5]>,
    /// The message's idempotency key.
    key: Option<&'a str>,
}

/// The message and its parts in one statement (one round trip), where rows carry their
/// session ([`Sql::rows_carry_session`]: PostgreSQL, whose data-modifying `WITH` gives the
/// parts the message's new id): `rows` (1 to [`PARTS_PER_INSERT`]) after the message's
/// [`INSERT_MESSAGE`] values, what goes `beside` them (the session row's update, the usage
/// row, the key row), and the message only where `guard` holds; the message's id and its
/// parts' largest (`None`: the guard did not hold, and nothing was written).
fn insert_message_with_parts(
    db: &mut impl Sql,
    message_values: &[Bound<'_>],
    rows: &[PartRow<'_>],
    beside: Beside<'_>,
    guard: Option<&Guard<'_>>,
) -> Result<Option<InsertedMessage>> {
    let Beside { touch, usage, key } = beside;
    let mut params = Vec::with_capacity(message_values.len() + rows.len() * 8 + 16);
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
    if let Some(usage) = usage {
        params.extend_from_slice(usage);
    }
    if let Some(key) = key {
        params.extend(values![key]);
    }
    if let Some(guard) = guard {
        guard.push_values(&mut params);
    }
    let sql = message_with_parts_sql(
        Shape {
            rows: rows.len(),
            touch: touch.is_some(),
            usage: usage.is_some(),
            key: key.is_some(),
        },
        guard.map(|g| (g.calls.len(), g.check.version.is_some())),
    );
    let ids = db.int_table(sql, &params, 4)?;
    match ids.as_slice() {
        [_, _, 0, _] => Ok(None),
        [id, last_part, _, version] => Ok(Some(InsertedMessage {
            id: *id,
            last_part: Some(*last_part),
            touched: touch.is_some(),
            // No transaction has the id 0 (PostgreSQL's invalid one): no version reported.
            version: (*version != 0).then_some(*version),
            with_usage: usage.is_some(),
            with_key: key.is_some(),
        })),
        _ => Err(crate::Error::CorruptRow {
            table: "messages",
            row_id: 0,
            detail: "the insert of a message with its parts returned no ids".to_owned(),
        }),
    }
}

/// What [`insert_message_with_parts`]'s statement writes beside the message: `rows` parts,
/// the session row's update (`touch`, its four values after the parts'), the usage row
/// (`usage`, its five values next) and the idempotency key row (`key`, its value next).
#[derive(Clone, Copy)]
struct Shape {
    rows: usize,
    touch: bool,
    usage: bool,
    key: bool,
}

/// [`insert_message_with_parts`]'s statement for `shape`, the message's insert conditioned
/// on [`guard_condition`] for `guard`'s call ids (and row version, when its `bool` says so)
/// when `Some` (its values last), each text built once per process, on its first use. The
/// statement returns the message's id, its parts' largest, whether it went in, and the
/// session row's new version (NULL without `touch`).
fn message_with_parts_sql(shape: Shape, guard: Option<(usize, bool)>) -> &'static str {
    const GUARDS: usize = 1 + 2 * (GUARD_CALLS + 1);
    const TEXTS: usize = (PARTS_PER_INSERT + 1) * 8 * GUARDS;
    static SQL: [std::sync::OnceLock<String>; TEXTS] =
        [const { std::sync::OnceLock::new() }; TEXTS];
    let shape = Shape {
        rows: shape.rows.min(PARTS_PER_INSERT),
        ..shape
    };
    let guard = guard.map(|(calls, versioned)| (calls.min(GUARD_CALLS), versioned));
    let guarded = guard.map_or(0, |(calls, versioned)| {
        1 + usize::from(versioned) * (GUARD_CALLS + 1) + calls
    });
    let written = ((shape.rows * 2 + usize::from(shape.touch)) * 2 + usize::from(shape.usage)) * 2
        + usize::from(shape.key);
    SQL[written * GUARDS + guarded].get_or_init(|| message_with_parts_text(shape, guard))
}

/// The text of [`message_with_parts_sql`].
fn message_with_parts_text(shape: Shape, guard: Option<(usize, bool)>) -> String {
    let Shape {
        rows,
        touch,
        usage,
        key,
    } = shape;
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
    // larger of the one before and the largest these parts took; written only with the
    // message.
    let at = 7 + rows * 8;
    let session = if touch {
        format!(
            ", s AS (UPDATE sessions SET updated_at = ?{at},
                     tail_state = CAST(?{} AS TEXT)
                         || CAST(GREATEST(CAST(?{} AS BIGINT), (SELECT MAX(id) FROM p)) AS TEXT)
                         || ']',
                     message_count = message_count + CAST(?{} AS BIGINT)
                     WHERE id = ?1 AND EXISTS (SELECT 1 FROM m)
                     RETURNING {} AS version)",
            at + 1,
            at + 3,
            at + 2,
            row_version!()
        )
    } else {
        String::new()
    };
    let at_usage = at + if touch { 4 } else { 0 };
    let usage_row = if usage {
        format!(
            ", u AS (INSERT INTO usage (message_id, model, input_tokens, output_tokens,
                                        cache_read_tokens, cache_write_tokens, session_id)
                     SELECT m.id, ?{at_usage}, CAST(?{} AS BIGINT), CAST(?{} AS BIGINT),
                            CAST(?{} AS BIGINT), CAST(?{} AS BIGINT), ?1
                     FROM m)",
            at_usage + 1,
            at_usage + 2,
            at_usage + 3,
            at_usage + 4
        )
    } else {
        String::new()
    };
    let at_key = at_usage + if usage { 5 } else { 0 };
    let key_row = if key {
        format!(
            concat!(", k AS (", record_key!("SELECT ?1, ?{}, m.id FROM m"), ")"),
            at_key
        )
    } else {
        String::new()
    };
    let message = match guard {
        Some((calls, versioned)) => {
            let at = at_key + usize::from(key);
            // Outside a transaction (a versioned guard) no replay read ran first: a key the
            // session stores fails the statement, and the retry replays in a transaction.
            let new_key = if key && versioned {
                format!(
                    concat!(
                        "\n         AND NOT EXISTS (SELECT 1 ",
                        stored_key!(),
                        "?{})"
                    ),
                    at_key
                )
            } else {
                String::new()
            };
            format!(
                "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at, model)
                 SELECT ?1, CAST(?2 AS BIGINT), CAST(?3 AS BIGINT), ?4, 0, ?5, ?6
                 WHERE {}{new_key}",
                guard_condition(at, calls, versioned)
            )
        }
        None => INSERT_MESSAGE.to_owned(),
    };
    // The one statement of an append says so ([`ONE_STATEMENT`]): it writes the session row
    // and holds only on the session row's version.
    let one = if touch && guard.is_some_and(|(_, versioned)| versioned) {
        ONE_STATEMENT
    } else {
        ""
    };
    let version = if touch {
        "(SELECT version FROM s)"
    } else {
        "CAST(NULL AS BIGINT)"
    };
    format!(
        "{one}WITH m AS ({message} RETURNING id),
         p AS (INSERT INTO parts ({PART_COLUMNS}, session_id)
               SELECT m.id, v.ordinal, v.kind, v.text, v.tool_use_id, v.tool_name,
                      v.input, v.is_error, v.metadata, ?1
               FROM m, (VALUES {}) AS v (ordinal, kind, text, tool_use_id,
                    tool_name, input, is_error, metadata)
               RETURNING id){session}{usage_row}{key_row}
         SELECT (SELECT id FROM m), (SELECT MAX(id) FROM p), (SELECT COUNT(*) FROM m),
                {version}",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Usage;

    fn calls(count: usize) -> NewMessage {
        NewMessage::assistant(
            (0..count)
                .map(|c| Part::tool_use(format!("toolu_{c}"), "bash", serde_json::json!({})))
                .collect(),
        )
    }

    #[test]
    fn an_append_fits_one_statement_alone_with_nothing_beside_its_parts() {
        assert!(fits_one_statement(&[NewMessage::user("hi")]));
        assert!(fits_one_statement(&[calls(GUARD_CALLS)]));
        // More parts than one insert writes, or calls than the check probes.
        assert!(!fits_one_statement(&[calls(GUARD_CALLS + 1)]));
        let many = NewMessage::assistant(vec![Part::text("x"); PARTS_PER_INSERT + 1]);
        assert!(!fits_one_statement(&[many]));
        assert!(!fits_one_statement(&[NewMessage::assistant(Vec::new())]));
        // Its usage and key rows go in with it; one message only.
        assert!(fits_one_statement(&[
            NewMessage::user("hi").with_usage(Usage::new(1, 2))
        ]));
        assert!(fits_one_statement(&[
            NewMessage::user("hi").with_idempotency_key("k")
        ]));
        assert!(!fits_one_statement(&[
            NewMessage::user("a"),
            NewMessage::user("b")
        ]));
        assert!(!fits_one_statement(&[]));
    }

    #[test]
    fn only_the_statement_that_checks_the_row_version_and_writes_the_row_is_one_statement() {
        for rows in 1..=PARTS_PER_INSERT {
            for (usage, key) in [(false, false), (true, false), (false, true), (true, true)] {
                for calls in 0..=GUARD_CALLS {
                    for (touch, versioned) in [(true, true), (true, false), (false, true)] {
                        let shape = Shape {
                            rows,
                            touch,
                            usage,
                            key,
                        };
                        let text = message_with_parts_sql(shape, Some((calls, versioned)));
                        assert_eq!(
                            text.starts_with(ONE_STATEMENT),
                            touch && versioned,
                            "{rows} parts, {calls} calls, touch {touch}, versioned {versioned}"
                        );
                        assert_eq!(text.contains("xmin AS TEXT) AS BIGINT) = CAST"), versioned);
                        assert_eq!(text.contains("INSERT INTO usage"), usage);
                        assert_eq!(text.contains("INSERT INTO idempotency_keys"), key);
                        // Only a statement no replay read ran before asks for the key.
                        assert_eq!(
                            text.contains("FROM idempotency_keys k"),
                            key && versioned,
                            "{text}"
                        );
                    }
                }
                let shape = Shape {
                    rows,
                    touch: true,
                    usage,
                    key,
                };
                assert!(!message_with_parts_sql(shape, None).starts_with(ONE_STATEMENT));
            }
        }
    }

    /// Every placeholder of every text is numbered from 1 to the number of values bound, each
    /// used: the values of the parts, the session row, the usage row and the guard follow
    /// one another without a gap or an overlap.
    #[test]
    fn every_statement_binds_each_of_its_values_once_in_order() {
        for rows in 1..=PARTS_PER_INSERT {
            for (touch, usage, key) in (0..8).map(|b| (b & 1 != 0, b & 2 != 0, b & 4 != 0)) {
                let guards = (0..=GUARD_CALLS).flat_map(|c| [Some((c, false)), Some((c, true))]);
                for guard in std::iter::once(None).chain(guards) {
                    let shape = Shape {
                        rows,
                        touch,
                        usage,
                        key,
                    };
                    let text = message_with_parts_sql(shape, guard);
                    let (calls, versioned) = guard.unwrap_or_default();
                    let bound = 6
                        + rows * 8
                        + if touch { 4 } else { 0 }
                        + if usage { 5 } else { 0 }
                        + usize::from(key)
                        + if guard.is_some() { 4 } else { 0 }
                        + calls
                        + usize::from(versioned);
                    let used: std::collections::BTreeSet<usize> = text
                        .split('?')
                        .skip(1)
                        .filter_map(|rest| {
                            let digits: String =
                                rest.chars().take_while(char::is_ascii_digit).collect();
                            digits.parse().ok()
                        })
                        .collect();
                    assert_eq!(
                        used,
                        (1..=bound).collect(),
                        "{rows} parts, touch {touch}, usage {usage}, key {key}, \
                         {calls} calls, versioned {versioned}"
                    );
                }
            }
        }
    }
}

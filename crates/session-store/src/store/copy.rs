//! Copying sessions between stores, whatever their backends (`session-store copy --from A
//! --to B`): every row of each session (the session row with its thinking latch, messages,
//! parts, summaries, reverts with their moved rows, the repair log) read in one snapshot of
//! the source and written in one transaction of the destination, row for row. Row ids are
//! the destination's own; the references between rows follow them. Rows are copied as they
//! are, healthy or not (a copy is not a mend), and each copied session is verified: every
//! row read back from the destination equals the source's (ids aside), or the copy fails
//! with [`Error::CopyMismatch`].
//!
//! A copy can be run again: a session the destination already holds with the same rows
//! (ids aside) is skipped and named in the report, so a copy killed half-way finishes when
//! it is rerun. Every session is compared with the destination before the first is written:
//! when one is held with other rows ([`Error::CopyConflict`]), or has a text the destination
//! cannot keep ([`Error::NulInCopiedText`]), nothing at all is written. A copy to a file that
//! does not exist yet builds it under a temporary name and puts it in place only once every
//! session is copied and verified ([`Store::copy_to_path`]), so a failed copy leaves no file.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde::Serialize;

use super::handle::Store;
use super::pool::SqliteEngine;
use super::reports::{Cell, SessionRows};
use crate::error::{Error, Result};
use crate::model::SessionId;

/// A column's type in both dialects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// INTEGER / BIGINT.
    Int,
    /// TEXT.
    Text,
}

/// A column whose value is the id of a row of another table (remapped on the way).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reference {
    pub(crate) column: &'static str,
    pub(crate) table: &'static str,
}

/// How one table is copied: its columns (the first is `id`), which of the session's rows
/// (a `WHERE` clause with the session id as its one parameter, `{p}`), and its references.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Table {
    pub(crate) name: &'static str,
    pub(crate) columns: &'static [(&'static str, Kind)],
    pub(crate) filter: &'static str,
    pub(crate) references: &'static [Reference],
    /// The id is the session's own text key, kept as is (only `sessions`).
    pub(crate) keeps_id: bool,
    /// The table has no id column at all (`usage`, `reverted_usage`): every column is copied.
    pub(crate) no_id: bool,
}

use Kind::{Int, Text};

/// Every table a session's rows live in, parents first.
pub(crate) const TABLES: &[Table] = &[
    Table {
        name: "sessions",
        columns: &[
            ("id", Text),
            ("created_at", Text),
            ("updated_at", Text),
            ("thinking_latched", Int),
            ("last_completion_at", Text),
            ("parent_id", Text),
            ("forked_at_turn", Int),
            ("title", Text),
            ("thinking_stripped_through", Int),
            ("parent_tool_use_id", Text),
            ("state", Text),
            ("source_thread_id", Text),
            ("source_parent_thread_id", Text),
        ],
        filter: "id = {p}",
        references: &[],
        keeps_id: true,
        no_id: false,
    },
    Table {
        name: "messages",
        columns: &[
            ("id", Int),
            ("session_id", Text),
            ("seq", Int),
            ("turn_index", Int),
            ("role", Text),
            ("compacted", Int),
            ("created_at", Text),
            ("model", Text),
            ("state", Text),
            ("writer", Text),
        ],
        filter: "session_id = {p} ORDER BY seq",
        references: &[],
        keeps_id: false,
        no_id: false,
    },
    Table {
        name: "parts",
        columns: &[
            ("id", Int),
            ("message_id", Int),
            ("ordinal", Int),
            ("kind", Text),
            ("text", Text),
            ("tool_use_id", Text),
            ("tool_name", Text),
            ("input", Text),
            ("is_error", Int),
            ("provider_metadata", Text),
        ],
        filter: "message_id IN (SELECT id FROM messages WHERE session_id = {p}) ORDER BY id",
        references: &[Reference {
            column: "message_id",
            table: "messages",
        }],
        keeps_id: false,
        no_id: false,
    },
    Table {
        name: "usage",
        columns: &[
            ("message_id", Int),
            ("model", Text),
            ("input_tokens", Int),
            ("output_tokens", Int),
            ("cache_read_tokens", Int),
            ("cache_write_tokens", Int),
        ],
        filter: "message_id IN (SELECT id FROM messages WHERE session_id = {p}) ORDER BY message_id",
        references: &[Reference {
            column: "message_id",
            table: "messages",
        }],
        keeps_id: false,
        no_id: true,
    },
    Table {
        name: "idempotency_keys",
        columns: &[
            ("session_id", Text),
            ("key", Text),
            ("message_id", Int),
        ],
        filter: "session_id = {p} ORDER BY key",
        references: &[Reference {
            column: "message_id",
            table: "messages",
        }],
        keeps_id: false,
        no_id: true,
    },
    Table {
        name: "reverts",
        columns: &[
            ("id", Int),
            ("session_id", Text),
            ("from_turn", Int),
            ("from_seq", Int),
            ("created_at", Text),
        ],
        filter: "session_id = {p} ORDER BY id",
        references: &[],
        keeps_id: false,
        no_id: false,
    },
    Table {
        name: "reverted_messages",
        columns: &[
            ("id", Int),
            ("revert_id", Int),
            ("original_id", Int),
            ("session_id", Text),
            ("seq", Int),
            ("turn_index", Int),
            ("role", Text),
            ("compacted", Int),
            ("created_at", Text),
            ("model", Text),
            ("state", Text),
            ("writer", Text),
        ],
        filter: "session_id = {p} ORDER BY id",
        references: &[Reference {
            column: "revert_id",
            table: "reverts",
        }],
        keeps_id: false,
        no_id: false,
    },
    Table {
        name: "reverted_parts",
        columns: &[
            ("id", Int),
            ("reverted_message_id", Int),
            ("ordinal", Int),
            ("kind", Text),
            ("text", Text),
            ("tool_use_id", Text),
            ("tool_name", Text),
            ("input", Text),
            ("is_error", Int),
            ("provider_metadata", Text),
        ],
        filter: "reverted_message_id IN (SELECT id FROM reverted_messages WHERE session_id = {p}) ORDER BY id",
        references: &[Reference {
            column: "reverted_message_id",
            table: "reverted_messages",
        }],
        keeps_id: false,
        no_id: false,
    },
    Table {
        name: "reverted_usage",
        columns: &[
            ("reverted_message_id", Int),
            ("model", Text),
            ("input_tokens", Int),
            ("output_tokens", Int),
            ("cache_read_tokens", Int),
            ("cache_write_tokens", Int),
        ],
        filter: "reverted_message_id IN (SELECT id FROM reverted_messages WHERE session_id = {p}) ORDER BY reverted_message_id",
        references: &[Reference {
            column: "reverted_message_id",
            table: "reverted_messages",
        }],
        keeps_id: false,
        no_id: true,
    },
    Table {
        name: "summaries",
        columns: &[
            ("id", Int),
            ("session_id", Text),
            ("first_turn", Int),
            ("last_turn", Int),
            ("compacted_from_turn", Int),
            ("through_seq", Int),
            ("text", Text),
            ("created_at", Text),
            ("reverted_by", Int),
        ],
        filter: "session_id = {p} ORDER BY id",
        references: &[Reference {
            column: "reverted_by",
            table: "reverts",
        }],
        keeps_id: false,
        no_id: false,
    },
    Table {
        name: "repair_log",
        columns: &[
            ("id", Int),
            ("session_id", Text),
            ("rule", Text),
            ("action", Text),
            ("message_id", Int),
            ("part_id", Int),
            ("before_json", Text),
            ("after_json", Text),
            ("repaired_at", Text),
        ],
        filter: "session_id = {p} ORDER BY id",
        references: &[
            Reference {
                column: "message_id",
                table: "messages",
            },
            Reference {
                column: "part_id",
                table: "parts",
            },
        ],
        keeps_id: false,
        no_id: false,
    },
];

impl Table {
    /// `SELECT <columns> FROM <table> WHERE <filter>` with `placeholder` for the session id.
    pub(crate) fn select(&self, placeholder: &str) -> String {
        let columns: Vec<&str> = self.columns.iter().map(|(name, _)| *name).collect();
        format!(
            "SELECT {} FROM {} WHERE {}",
            columns.join(", "),
            self.name,
            self.filter.replace("{p}", placeholder)
        )
    }

    /// Whether the column list names its session already (`sessions` is the session: its
    /// `id`).
    pub(crate) fn carries_session(&self) -> bool {
        self.keeps_id || self.columns.iter().any(|(name, _)| *name == "session_id")
    }

    /// [`Table::select`], and where rows carry their session's id whether or not the
    /// column list names it (PostgreSQL, [`super::sql::Sql::rows_carry_session`]) keyed by
    /// it too: one session's rows, read by its key (routed to its shard).
    pub(crate) fn session_select(&self, placeholder: &str, rows_carry_session: bool) -> String {
        if !rows_carry_session || self.carries_session() {
            return self.select(placeholder);
        }
        let columns: Vec<&str> = self.columns.iter().map(|(name, _)| *name).collect();
        format!(
            "SELECT {} FROM {} WHERE session_id = {placeholder} AND {}",
            columns.join(", "),
            self.name,
            self.filter.replace("{p}", placeholder)
        )
    }

    /// True when the destination draws a new id for each row (then references follow it).
    pub(crate) fn generates_id(&self) -> bool {
        !self.keeps_id && !self.no_id
    }

    /// The columns an insert names: all but a generated id.
    pub(crate) fn inserted(&self) -> &'static [(&'static str, Kind)] {
        if self.keeps_id || self.no_id {
            self.columns
        } else {
            &self.columns[1..]
        }
    }

    /// `INSERT INTO <table> (...) VALUES (<placeholders>)`; `placeholder(n)` for the n-th
    /// (1-based) value.
    pub(crate) fn insert(&self, placeholder: impl Fn(usize) -> String) -> String {
        let columns: Vec<&str> = self.inserted().iter().map(|(name, _)| *name).collect();
        let values: Vec<String> = (1..=columns.len()).map(placeholder).collect();
        format!(
            "INSERT INTO {} ({}) VALUES ({})",
            self.name,
            columns.join(", "),
            values.join(", ")
        )
    }
}

/// Old id to new id, per table.
#[derive(Default)]
pub(crate) struct IdMap(HashMap<&'static str, HashMap<i64, i64>>);

impl IdMap {
    /// The values to insert for `row` of `table`: references followed, generated id dropped.
    pub(crate) fn values(&self, table: &Table, row: &[Cell]) -> Vec<Cell> {
        let mut values: Vec<Cell> = row.to_vec();
        for reference in table.references {
            let Some(at) = table
                .columns
                .iter()
                .position(|(name, _)| *name == reference.column)
            else {
                continue;
            };
            if let Cell::Int(old) = values[at] {
                if let Some(new) = self.0.get(reference.table).and_then(|m| m.get(&old)) {
                    values[at] = Cell::Int(*new);
                }
            }
        }
        if table.generates_id() {
            values.remove(0);
        }
        values
    }

    /// Records that `table`'s row `old` is `new` in the destination.
    pub(crate) fn record(&mut self, table: &Table, old: &[Cell], new: i64) {
        if !table.generates_id() {
            return;
        }
        if let Some(Cell::Int(old)) = old.first() {
            self.0.entry(table.name).or_default().insert(*old, new);
        }
    }
}

/// What [`Store::copy_to`] copied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CopyReport {
    /// Sessions copied (and verified).
    pub sessions: usize,
    /// Sessions the destination already held with the same rows: skipped, nothing written.
    pub skipped: Vec<SessionId>,
    /// Rows copied per table, in the order of the schema.
    pub rows: Vec<(String, usize)>,
}

/// A SQLite value as a cell of a column of `kind`: lenient as the readers are (a number in a
/// text column becomes its text, bytes are read as UTF-8), strict where nothing fits.
fn sqlite_cell(value: ValueRef<'_>, kind: Kind, table: &'static str, column: &str) -> Result<Cell> {
    Ok(match (value, kind) {
        (ValueRef::Null, _) => Cell::Null,
        (ValueRef::Integer(n), Int) => Cell::Int(n),
        (ValueRef::Integer(n), Text) => Cell::Text(n.to_string()),
        (ValueRef::Real(x), Text) => Cell::Text(x.to_string()),
        (ValueRef::Text(t) | ValueRef::Blob(t), Text) => {
            Cell::Text(String::from_utf8_lossy(t).into_owned())
        }
        (ValueRef::Text(t), Int) => match String::from_utf8_lossy(t).trim().parse::<i64>() {
            Ok(n) => Cell::Int(n),
            Err(_) => {
                return Err(Error::CorruptRow {
                    table,
                    row_id: 0,
                    detail: format!(
                        "{column} holds {:?}, not an integer",
                        String::from_utf8_lossy(t)
                    ),
                })
            }
        },
        (other, Int) => {
            return Err(Error::CorruptRow {
                table,
                row_id: 0,
                detail: format!("{column} holds {other:?}, not an integer"),
            })
        }
    })
}

/// Reads every row of `session` from a SQLite connection (one snapshot: the caller's).
pub(crate) fn read_sqlite(conn: &Connection, session: &SessionId) -> Result<SessionRows> {
    let mut all = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let mut stmt = conn.prepare(&table.select("?1"))?;
        let mut rows = stmt.query([session.as_str()])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let mut cells = Vec::with_capacity(table.columns.len());
            for (i, (column, kind)) in table.columns.iter().enumerate() {
                cells.push(sqlite_cell(row.get_ref(i)?, *kind, table.name, column)?);
            }
            out.push(cells);
        }
        all.push(out);
    }
    Ok(all)
}

/// Writes `rows` (as [`read_sqlite`] or its PostgreSQL twin read them) into a SQLite
/// connection, in the caller's transaction.
pub(crate) fn write_sqlite(conn: &Connection, rows: &SessionRows) -> Result<()> {
    let mut ids = IdMap::default();
    for (table, table_rows) in TABLES.iter().zip(rows) {
        let sql = table.insert(|n| format!("?{n}"));
        let mut stmt = conn.prepare(&sql)?;
        for row in table_rows {
            let mut row = row.clone();
            if let Some(parent) = lineage_parent(table, &mut row) {
                let present = conn
                    .query_row(
                        "SELECT 1 FROM sessions WHERE id = ?1",
                        [parent.as_str()],
                        |_| Ok(()),
                    )
                    .is_ok();
                if !present {
                    forget_parent(&mut row);
                }
            }
            let row = &row;
            let values: Vec<rusqlite::types::Value> = ids
                .values(table, row)
                .into_iter()
                .map(|cell| match cell {
                    Cell::Null => rusqlite::types::Value::Null,
                    Cell::Int(n) => rusqlite::types::Value::Integer(n),
                    Cell::Text(t) => rusqlite::types::Value::Text(t),
                })
                .collect();
            stmt.execute(rusqlite::params_from_iter(values))?;
            ids.record(table, row, conn.last_insert_rowid());
        }
    }
    Ok(())
}

/// Where the `sessions` row's `parent_id` is, and its value, when `row` is a session with a
/// parent: a fork copied without its parent keeps no lineage (the parent is not there to
/// point at), while one copied after it does.
pub(crate) fn lineage_parent(table: &Table, row: &mut [Cell]) -> Option<String> {
    if table.name != "sessions" {
        return None;
    }
    let at = table
        .columns
        .iter()
        .position(|(name, _)| *name == "parent_id")?;
    match &row[at] {
        Cell::Text(parent) => Some(parent.clone()),
        _ => None,
    }
}

/// Clears a `sessions` row's `parent_id` and `forked_at_turn`.
pub(crate) fn forget_parent(row: &mut [Cell]) {
    let table = &TABLES[0];
    for column in ["parent_id", "forked_at_turn"] {
        if let Some(at) = table.columns.iter().position(|(name, _)| *name == column) {
            row[at] = Cell::Null;
        }
    }
}

/// A session's rows as any store that holds them must read them: ids made local
/// ([`local_ids`]) and each table's rows sorted; so two copies of a session compare equal
/// whatever ids each store drew.
fn comparable_rows(rows: &SessionRows) -> SessionRows {
    let mut out = rows.clone();
    local_ids(&mut out);
    for table_rows in &mut out {
        table_rows.sort();
    }
    out
}

/// Makes a session's row ids its own, whatever database they came from: each table's rows
/// numbered from 1 in the order read, every reference between rows following those numbers
/// (a reference to a row the session does not hold becomes NULL: elsewhere it would name
/// another row), and tables without ids sorted by value. What a bundle writes, and what a
/// copy's verification compares.
pub(crate) fn local_ids(all: &mut [Vec<Vec<Cell>>]) {
    let mut ids: HashMap<&'static str, HashMap<i64, i64>> = HashMap::new();
    for (table, rows) in TABLES.iter().zip(all.iter_mut()) {
        for row in rows.iter_mut() {
            for reference in table.references {
                let Some(at) = table
                    .columns
                    .iter()
                    .position(|(name, _)| *name == reference.column)
                else {
                    continue;
                };
                if let Cell::Int(old) = row[at] {
                    row[at] = ids
                        .get(reference.table)
                        .and_then(|m| m.get(&old))
                        .map_or(Cell::Null, |new| Cell::Int(*new));
                }
            }
        }
        if table.generates_id() {
            let map = ids.entry(table.name).or_default();
            for (local, row) in (1_i64..).zip(rows.iter_mut()) {
                if let Cell::Int(old) = row[0] {
                    map.insert(old, local);
                }
                row[0] = Cell::Int(local);
            }
        } else if table.no_id {
            rows.sort();
        }
    }
}

/// Where two comparable copies of a session first differ, in a few words.
fn first_difference(ours: &SessionRows, theirs: &SessionRows) -> Option<String> {
    TABLES
        .iter()
        .zip(ours.iter().zip(theirs))
        .find(|(_, (a, b))| a != b)
        .map(|(table, (a, b))| {
            if a.len() == b.len() {
                format!("{}: rows differ", table.name)
            } else {
                format!(
                    "{}: {} rows in the source, {} in the destination",
                    table.name,
                    a.len(),
                    b.len()
                )
            }
        })
}

/// The first text of `rows` that PostgreSQL cannot keep, as the error that names the
/// session and where (the message's seq, the part's ordinal, the column): a NUL character
/// in any text ([`Error::NulInCopiedText`]), or an id longer than [`crate::MAX_ID_BYTES`]
/// ([`Error::LongIdInCopiedRow`]: every id is in one of PostgreSQL's B-tree keys, which
/// take about 2.7 KB a row). The store refuses both on every write; rows SQLite already
/// holds (written by other code, or before the limit) may hold either.
fn unkeepable_text(session: &SessionId, rows: &SessionRows) -> Option<Error> {
    let column_at = |table: &Table, name: &str| table.columns.iter().position(|(c, _)| *c == name);
    let int_at =
        |table: &Table, row: &[Cell], name: &str| match column_at(table, name).map(|at| &row[at]) {
            Some(Cell::Int(n)) => Some(*n),
            _ => None,
        };
    let mut seqs: HashMap<i64, i64> = HashMap::new();
    for (table, table_rows) in TABLES.iter().zip(rows) {
        for (position, row) in table_rows.iter().enumerate() {
            if table.name == "messages" {
                if let (Some(id), Some(seq)) = (int_at(table, row, "id"), int_at(table, row, "seq"))
                {
                    seqs.insert(id, seq);
                }
            }
            let Some((at, fault)) = row.iter().enumerate().find_map(|(at, cell)| match cell {
                Cell::Text(t) => text_fault(table.columns[at].0, t).map(|fault| (at, fault)),
                _ => None,
            }) else {
                continue;
            };
            let column = table.columns[at].0;
            let seq_of = |id: Option<i64>| {
                id.and_then(|id| seqs.get(&id))
                    .map_or_else(|| "?".to_owned(), i64::to_string)
            };
            let place = match table.name {
                "messages" => format!(
                    "message seq {}, column {column}",
                    seq_of(int_at(table, row, "id"))
                ),
                "parts" => format!(
                    "message seq {}, part {}, column {column}",
                    seq_of(int_at(table, row, "message_id")),
                    int_at(table, row, "ordinal").map_or_else(|| "?".to_owned(), |n| n.to_string())
                ),
                name => format!("{name} row {}, column {column}", position + 1),
            };
            let session = session.clone();
            return Some(match fault {
                TextFault::Nul => Error::NulInCopiedText { session, place },
                TextFault::LongId(bytes) => Error::LongIdInCopiedRow {
                    session,
                    place,
                    bytes,
                },
            });
        }
    }
    None
}

/// What PostgreSQL cannot keep of a text of the source.
enum TextFault {
    /// A NUL character.
    Nul,
    /// An id (a column named `id`, `key` or `..._id`) of this many bytes, more than
    /// [`crate::MAX_ID_BYTES`].
    LongId(usize),
}

/// [`TextFault`] of the text `value` of `column`, if any.
fn text_fault(column: &str, value: &str) -> Option<TextFault> {
    if value.contains('\0') {
        return Some(TextFault::Nul);
    }
    let is_id = column == "id" || column == "key" || column.ends_with("_id");
    is_id
        .then(|| crate::model::id_too_long(value))
        .flatten()
        .map(TextFault::LongId)
}

/// How the destination holds a session the copy is asked for.
enum Held {
    /// Not at all: it is copied.
    No,
    /// With the same rows: it is skipped.
    Identically,
    /// With other rows: the copy is refused.
    Differently(String),
}

impl SqliteEngine {
    /// Every row of `session`, read in one snapshot.
    pub(super) fn session_rows(&self, session: &SessionId) -> Result<SessionRows> {
        self.read(|conn| {
            super::write::require_session(conn, session)?;
            read_sqlite(conn, session)
        })
    }

    /// Writes a session's rows in one transaction.
    pub(super) fn put_session_rows(&self, session: &SessionId, rows: &SessionRows) -> Result<()> {
        self.write(|tx| {
            write_sqlite(tx, rows)?;
            super::write::recount_messages(&mut super::sqlite::SqliteTx::of(tx), session)
        })
    }
}

impl Store {
    /// Every row of `session`, read in one snapshot.
    fn session_rows(&self, session: &SessionId) -> Result<SessionRows> {
        self.engine.session_rows(session)
    }

    /// Writes a session's rows in one transaction; [`Error::SessionExists`] when the
    /// destination has a session of that id (nothing is written then).
    fn put_session_rows(&self, session: &SessionId, rows: &SessionRows) -> Result<()> {
        if self.has_session(session)? {
            return Err(Error::SessionExists(session.clone()));
        }
        self.engine.put_session_rows(session, rows)
    }

    /// [`Store::copy_to`] the database at `to`: a file path or a PostgreSQL URL. A file that
    /// does not exist yet is built under a temporary name in its folder and appears under
    /// `to` only once every session is copied and verified: a copy that fails (or is killed)
    /// leaves no new file behind. An existing database is copied into as [`Store::copy_to`]
    /// says (resumable, refused before anything is written).
    pub fn copy_to_path(&self, to: &Path, sessions: &[SessionId]) -> Result<CopyReport> {
        let url = to.to_str().is_some_and(super::url::is_url);
        if url
            || super::file::check_path(to, super::file::Use::OpenOrCreate)?
                != super::file::Found::Missing
        {
            return self.copy_to(&Store::open(to)?, sessions);
        }
        super::file::build_database(to, None, |temp| {
            let dest = Store::open(temp)?;
            let report = self.copy_to(&dest, sessions)?;
            drop(dest);
            Ok(report)
        })?
        .ok_or_else(|| Error::Io {
            path: to.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "another process created the database meanwhile; nothing was copied",
            ),
        })
    }

    /// How `dest` holds `session`: not at all, with the same rows as this store (ids aside;
    /// a fork's parent link may be missing there when its parent was not copied), or not.
    fn held_by(&self, dest: &Store, session: &SessionId) -> Result<Held> {
        if !dest.has_session(session)? {
            return Ok(Held::No);
        }
        let theirs = comparable_rows(&dest.session_rows(session)?);
        let mut ours = self.session_rows(session)?;
        if comparable_rows(&ours) == theirs {
            return Ok(Held::Identically);
        }
        if let Some(row) = ours.first_mut().and_then(|rows| rows.first_mut()) {
            if lineage_parent(&TABLES[0], row).is_some() {
                forget_parent(row);
                if comparable_rows(&ours) == theirs {
                    return Ok(Held::Identically);
                }
            }
        }
        Ok(Held::Differently(
            first_difference(&comparable_rows(&ours), &theirs)
                .unwrap_or_else(|| "sessions: the session row differs".to_owned()),
        ))
    }

    /// Copies `sessions` (every session when empty) into `dest`, each in one transaction of
    /// `dest`, and verifies each one read back.
    ///
    /// Resumable: a session `dest` already holds with the same rows is skipped
    /// ([`CopyReport::skipped`]). Every session is compared with `dest` first, and when one
    /// is held there with other rows ([`Error::CopyConflict`], naming them all) or holds a
    /// text `dest` cannot keep ([`Error::NulInCopiedText`]), nothing at all is written. A failure
    /// while writing (a full disk, a lost connection) leaves the sessions copied before it
    /// copied and verified, and a rerun goes on from there.
    pub fn copy_to(&self, dest: &Store, sessions: &[SessionId]) -> Result<CopyReport> {
        // Oldest first: a fork comes after the session it was forked from, so its parent is
        // there to point at when it is written.
        let ids: Vec<SessionId> = if sessions.is_empty() {
            self.sessions()?.into_iter().map(|s| s.id).collect()
        } else {
            sessions.to_vec()
        };
        let mut report = CopyReport {
            sessions: 0,
            skipped: Vec::new(),
            rows: TABLES.iter().map(|t| (t.name.to_owned(), 0)).collect(),
        };
        let mut to_copy = Vec::with_capacity(ids.len());
        let mut differing = Vec::new();
        for session in &ids {
            match self.held_by(dest, session)? {
                Held::No => to_copy.push(session),
                Held::Identically => report.skipped.push(session.clone()),
                Held::Differently(detail) => differing.push((session.clone(), detail)),
            }
        }
        if let Some((first, detail)) = differing.first() {
            return Err(Error::CopyConflict {
                first: first.clone(),
                detail: detail.clone(),
                sessions: differing.into_iter().map(|(session, _)| session).collect(),
            });
        }
        if !dest.engine.keeps_nul_in_text() {
            for session in &to_copy {
                if let Some(place) = unkeepable_text(session, &self.session_rows(session)?) {
                    return Err(place);
                }
            }
        }
        for session in to_copy {
            let rows = self.session_rows(session)?;
            dest.put_session_rows(session, &rows).map_err(|error| {
                if error.is_constraint() {
                    Error::CopyRowRefused {
                        session: session.clone(),
                        detail: error.with_causes(),
                    }
                } else {
                    error
                }
            })?;
            // Verified: the destination reads back every row the source has (ids aside).
            let detail = match self.held_by(dest, session)? {
                Held::Identically => None,
                Held::No => Some("the session does not read back".to_owned()),
                Held::Differently(detail) => Some(detail),
            };
            if let Some(detail) = detail {
                return Err(Error::CopyMismatch {
                    session: session.clone(),
                    detail,
                });
            }
            for ((_, count), table_rows) in report.rows.iter_mut().zip(&rows) {
                *count += table_rows.len();
            }
            report.sessions += 1;
        }
        Ok(report)
    }
}

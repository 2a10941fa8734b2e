//! Session bundles (`session-store export --format bundle`, `import --format bundle`): every
//! row of one session, from every table that holds session data, as JSON Lines, restorable
//! in another database on either engine.
//!
//! The first line is a header: `{"format": "session-store-bundle", "version": 1, "session":
//! id, "rows": {table: count, ...}}`. Then one line per row, `{"table": name, "row": {column:
//! value, ...}}`, tables in [`TABLES`] order (parents first), a table's rows in a fixed order.
//! A blank line holds no row (read past, as in the JSON Lines logs the importers read).
//! The table and column list is `copy`'s ([`TABLES`]): one list says what a session's rows
//! are, for copies and bundles alike, so a column a migration adds there is in both.
//!
//! - Columns are read **by name**. A column the bundle leaves out is left to the database's
//!   default (a bundle from before a migration restores into a database after it); a column
//!   the reader does not know is refused, never dropped.
//! - Row ids are **the bundle's own**: each table's rows are numbered from 1 in the order
//!   written, and every reference between rows uses those numbers, so two bundles of the
//!   same history are identical whatever database they came from, and a restored session's
//!   bundle equals the original's apart from the session id. A reference to a row the session
//!   no longer holds (a repair-log entry about a part since reverted and forgotten) is
//!   written as null: in another database it would name some other row.
//! - The session's own id is written once, in the header; `session_id` columns are not
//!   written and are the new session's id on import. `parent_id` is kept when that session
//!   exists in the destination, else left null (`forked_at_turn` stays).
//! - Import reads and checks the whole bundle before it writes anything (a typed
//!   [`Error::Bundle`] naming the line), then writes every row in one transaction. A row the
//!   row decoder could not read back (a timestamp that is not one) is refused at its line
//!   too: a bundle never writes a session that no command could read.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use serde_json::{json, Map, Value as Json};

use super::copy::{local_ids, Kind, Table, TABLES};
use super::handle::Store;
use super::reports::Cell;
use super::rows::Unreadable;
use super::sql::{int_at, text_at, values, Sql, Value};
use super::write::recount_messages;
use crate::error::{Error, Result};
use crate::history::rules::{check_session, CheckOptions, Problem};
use crate::model::SessionId;

/// The header's `format`.
pub const BUNDLE_FORMAT: &str = "session-store-bundle";
/// The header's `version`: the bundle layout this build writes and reads.
pub const BUNDLE_VERSION: i64 = 1;

/// True for the column that names the row's session: not written, the new id on import.
fn is_session_column(table: &Table, column: &str) -> bool {
    column == "session_id" || (table.name == "sessions" && column == "id")
}

/// Every row of `session`, table by table in [`TABLES`] order.
fn read_rows_in(sql: &mut impl Sql, session: &SessionId) -> Result<Vec<Vec<Vec<Cell>>>> {
    sql.require_session(session)?;
    let mut all = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let mut rows = Vec::new();
        sql.each_row(
            &table.session_select("?1", sql.rows_carry_session()),
            &values![session.as_str()],
            &mut |row| {
                let mut cells = Vec::with_capacity(table.columns.len());
                for (at, (_, kind)) in table.columns.iter().enumerate() {
                    cells.push(match kind {
                        Kind::Int => int_at(row, at)?.map_or(Cell::Null, Cell::Int),
                        Kind::Text => text_at(row, at)?.map_or(Cell::Null, Cell::Text),
                    });
                }
                rows.push(cells);
                Ok(())
            },
        )?;
        all.push(rows);
    }
    Ok(all)
}

/// The bundle's text: the header, then a line per row.
fn bundle_text(session: &SessionId, all: &[Vec<Vec<Cell>>]) -> Result<String> {
    let counts: Map<String, Json> = TABLES
        .iter()
        .zip(all)
        .map(|(table, rows)| (table.name.to_owned(), json!(rows.len())))
        .collect();
    let header = json!({
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "session": session.as_str(),
        "rows": counts,
    });
    let mut out = serde_json::to_string(&header)?;
    out.push('\n');
    for (table, rows) in TABLES.iter().zip(all) {
        for row in rows {
            let mut object = Map::new();
            for ((column, _), cell) in table.columns.iter().zip(row) {
                if is_session_column(table, column) {
                    continue;
                }
                let value = match cell {
                    Cell::Null => Json::Null,
                    Cell::Int(n) => json!(n),
                    Cell::Text(t) => json!(t),
                };
                object.insert((*column).to_owned(), value);
            }
            let line = json!({"table": table.name, "row": object});
            out.push_str(&serde_json::to_string(&line)?);
            out.push('\n');
        }
    }
    Ok(out)
}

/// One checked row of a bundle: its line, table, and the columns it names with their values.
#[derive(Debug)]
struct BundleRow {
    line: usize,
    table: &'static Table,
    cells: Vec<(&'static str, Kind, Cell)>,
}

/// A whole bundle, read and checked.
#[derive(Debug)]
pub(crate) struct Parsed {
    rows: Vec<BundleRow>,
}

fn refuse(line: usize, detail: impl Into<String>) -> Error {
    Error::Bundle {
        line,
        detail: detail.into(),
    }
}

/// Reads and checks a whole bundle: header, every row, references, counts. Writes nothing.
pub(crate) fn parse(input: impl BufRead) -> Result<Parsed> {
    let mut lines = input.lines();
    let header = match lines.next() {
        Some(line) => line.map_err(|e| refuse(1, format!("cannot be read: {e}")))?,
        None => return Err(refuse(1, "the bundle is empty")),
    };
    let expected = parse_header(&header)?;
    let mut state = Checker::default();
    let mut rows = Vec::new();
    let mut end = 2;
    for (at, line) in lines.enumerate() {
        let number = at + 2;
        end = number + 1;
        let line = line.map_err(|e| refuse(number, format!("cannot be read: {e}")))?;
        // A blank line holds no row (an editor's or `echo`'s last newline), as in the
        // JSON Lines logs the importers read.
        if line.trim().is_empty() {
            continue;
        }
        rows.push(state.row(number, &line)?);
    }
    for table in TABLES {
        let want = expected.get(table.name).copied().unwrap_or(0);
        let have = state.counts.get(table.name).copied().unwrap_or(0);
        if want != have {
            return Err(refuse(
                end,
                format!(
                    "the header promises {want} {} row(s), the bundle holds {have}",
                    table.name
                ),
            ));
        }
    }
    if state.counts.get("sessions").copied().unwrap_or(0) != 1 {
        return Err(refuse(end, "a bundle holds exactly one sessions row"));
    }
    Ok(Parsed { rows })
}

/// The header's row counts per table, once its format and version are ours.
fn parse_header(line: &str) -> Result<HashMap<String, usize>> {
    let header: Json = serde_json::from_str(line)
        .map_err(|e| refuse(1, format!("the header is not JSON: {e}")))?;
    if header.get("format").and_then(Json::as_str) != Some(BUNDLE_FORMAT) {
        return Err(refuse(
            1,
            format!("not a session bundle (no \"format\": \"{BUNDLE_FORMAT}\" header)"),
        ));
    }
    match header.get("version").and_then(Json::as_i64) {
        Some(BUNDLE_VERSION) => {}
        Some(other) => {
            return Err(refuse(
                1,
                format!("bundle version {other}; this build reads version {BUNDLE_VERSION}"),
            ))
        }
        None => return Err(refuse(1, "the header has no integer \"version\"")),
    }
    let Some(counts) = header.get("rows").and_then(Json::as_object) else {
        return Err(refuse(1, "the header has no \"rows\" object"));
    };
    let mut expected = HashMap::new();
    for (name, count) in counts {
        if !TABLES.iter().any(|t| t.name == name) {
            return Err(refuse(1, format!("unknown table {name:?} in \"rows\"")));
        }
        let count = count
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| refuse(1, format!("the row count of {name} is not a count")))?;
        expected.insert(name.clone(), count);
    }
    Ok(expected)
}

/// What the rows read so far allow the next one: table order, ids taken, counts.
#[derive(Default)]
struct Checker {
    /// Index in [`TABLES`] of the last row's table.
    table: usize,
    ids: HashMap<&'static str, HashSet<i64>>,
    counts: HashMap<&'static str, usize>,
}

impl Checker {
    /// One row line, checked against the table list and the rows before it.
    fn row(&mut self, number: usize, line: &str) -> Result<BundleRow> {
        let value: Json = serde_json::from_str(line)
            .map_err(|e| refuse(number, format!("not a JSON row: {e}")))?;
        let (Some(name), Some(row), 2) = (
            value.get("table").and_then(Json::as_str),
            value.get("row").and_then(Json::as_object),
            value.as_object().map_or(0, Map::len),
        ) else {
            return Err(refuse(
                number,
                "a row line is {\"table\": name, \"row\": {...}} and nothing else",
            ));
        };
        let Some(index) = TABLES.iter().position(|t| t.name == name) else {
            return Err(refuse(number, format!("unknown table {name:?}")));
        };
        let table = &TABLES[index];
        if index < self.table || (index == 0 && self.counts.contains_key("sessions")) {
            return Err(refuse(
                number,
                format!("{name} row out of order (tables come parents first, one sessions row)"),
            ));
        }
        if index > 0 && !self.counts.contains_key("sessions") {
            return Err(refuse(number, "the sessions row must come first"));
        }
        self.table = index;
        let cells = self.cells(number, table, row)?;
        *self.counts.entry(table.name).or_default() += 1;
        Ok(BundleRow {
            line: number,
            table,
            cells,
        })
    }

    /// A row's columns, by name: known, typed, ids fresh, references to earlier rows.
    fn cells(
        &mut self,
        number: usize,
        table: &'static Table,
        row: &Map<String, Json>,
    ) -> Result<Vec<(&'static str, Kind, Cell)>> {
        let mut cells = Vec::with_capacity(row.len());
        for (column, value) in row {
            let Some(&(name, kind)) = table
                .columns
                .iter()
                .find(|(name, _)| *name == column && !is_session_column(table, name))
            else {
                return Err(refuse(
                    number,
                    format!("{} has no column {column:?} a bundle may set", table.name),
                ));
            };
            let cell = match (value, kind) {
                (Json::Null, _) => Cell::Null,
                (Json::String(text), Kind::Text) => Cell::Text(text.clone()),
                (Json::Number(n), Kind::Int) if n.as_i64().is_some() => {
                    Cell::Int(n.as_i64().unwrap_or_default())
                }
                _ => {
                    let want = if kind == Kind::Int {
                        "an integer"
                    } else {
                        "a string"
                    };
                    return Err(refuse(
                        number,
                        format!("{}.{name} is {want} or null, not {value}", table.name),
                    ));
                }
            };
            if let (Some(reference), Cell::Int(id)) =
                (table.references.iter().find(|r| r.column == name), &cell)
            {
                if !self
                    .ids
                    .get(reference.table)
                    .is_some_and(|s| s.contains(id))
                {
                    return Err(refuse(
                        number,
                        format!(
                            "{}.{name} names {} row {id}, which no line before it holds",
                            table.name, reference.table
                        ),
                    ));
                }
            }
            cells.push((name, kind, cell));
        }
        if table.generates_id() {
            let id = cells.iter().find_map(|(name, _, cell)| match (name, cell) {
                (&"id", Cell::Int(id)) => Some(*id),
                _ => None,
            });
            let Some(id) = id else {
                return Err(refuse(
                    number,
                    format!("{} row without an integer id", table.name),
                ));
            };
            if !self.ids.entry(table.name).or_default().insert(id) {
                return Err(refuse(number, format!("a second {} row {id}", table.name)));
            }
        }
        Ok(cells)
    }
}

/// Writes a checked bundle as a new session, in the caller's transaction; the new id.
fn restore_in(sql: &mut impl Sql, parsed: &Parsed) -> Result<SessionId> {
    let session = SessionId::random();
    let mut ids: HashMap<&'static str, HashMap<i64, i64>> = HashMap::new();
    for row in &parsed.rows {
        let table = row.table;
        let mut columns: Vec<&str> = Vec::with_capacity(row.cells.len() + 1);
        let mut cells: Vec<Cell> = Vec::with_capacity(row.cells.len() + 1);
        let mut kinds: Vec<Kind> = Vec::with_capacity(row.cells.len() + 1);
        if let Some((name, _)) = table
            .columns
            .iter()
            .find(|(name, _)| is_session_column(table, name))
        {
            columns.push(name);
            cells.push(Cell::Text(session.as_str().to_owned()));
            kinds.push(Kind::Text);
        } else if sql.rows_carry_session() {
            // A table whose bundle rows name their message only (`parts`, `usage` and their
            // revert mirrors) carries its session on this engine.
            columns.push("session_id");
            cells.push(Cell::Text(session.as_str().to_owned()));
            kinds.push(Kind::Text);
        }
        for (name, kind, cell) in &row.cells {
            if *name == "id" && table.generates_id() {
                continue;
            }
            let mut cell = cell.clone();
            if let Some(reference) = table.references.iter().find(|r| r.column == *name) {
                if let Cell::Int(local) = cell {
                    let new = ids.get(reference.table).and_then(|m| m.get(&local));
                    cell = new.map_or(Cell::Null, |n| Cell::Int(*n));
                }
            }
            if table.name == "sessions" && *name == "parent_id" {
                cell = parent_if_present(sql, cell)?;
            }
            columns.push(name);
            cells.push(cell);
            kinds.push(*kind);
        }
        let params: Vec<Value<'_>> = cells.iter().zip(&kinds).map(bound).collect();
        let placeholders: Vec<String> = (1..=params.len()).map(|n| format!("?{n}")).collect();
        let statement = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            table.name,
            columns.join(", "),
            placeholders.join(", ")
        );
        let at_line = |error: Error| {
            if error.is_constraint() {
                refuse(
                    row.line,
                    format!("the database refuses the row: {}", error.with_causes()),
                )
            } else {
                error
            }
        };
        if table.generates_id() {
            let new = sql.insert(&statement, &params).map_err(at_line)?;
            if let Some((_, _, Cell::Int(local))) = row.cells.iter().find(|(n, _, _)| *n == "id") {
                ids.entry(table.name).or_default().insert(*local, new);
            }
        } else {
            sql.run(&statement, &params).map_err(at_line)?;
        }
    }
    recount_messages(sql, &session)?;
    let loaded = match sql.load_for_check(&session)? {
        Ok(loaded) => loaded,
        Err(unreadable) => return Err(unreadable_line(parsed, &ids, &unreadable)),
    };
    // The write path never stores a session that breaks the contract, a restore included:
    // a bundle of a broken session is refused (mend it with `store-repair` first).
    let options = CheckOptions::at(super::time::now());
    if let Some(problem) = check_session(&session, &loaded.messages, &options).first() {
        return Err(broken_line(parsed, problem));
    }
    Ok(session)
}

/// The refusal for a restored session that breaks a rule of the contract, at the bundle line
/// of the message at fault (the first message's when the problem names none).
fn broken_line(parsed: &Parsed, problem: &Problem) -> Error {
    let line = parsed
        .rows
        .iter()
        .filter(|row| row.table.name == "messages")
        .find(|row| {
            problem.seq.is_none()
                || row
                    .cells
                    .iter()
                    .any(|(name, _, cell)| *name == "seq" && Some(cell_int(cell)) == problem.seq)
        })
        .map_or(1, |row| row.line);
    refuse(
        line,
        format!(
            "the session breaks the contract ({}): {}; mend the source with store-repair \
             before its bundle is restored",
            problem.rule.as_str(),
            problem.detail
        ),
    )
}

/// The refusal for a restored row the row decoder cannot read (a role or kind outside the
/// contract, a timestamp that is not one), at the bundle line that held it: a bundle never
/// writes a session no command could read.
fn unreadable_line(
    parsed: &Parsed,
    ids: &HashMap<&'static str, HashMap<i64, i64>>,
    unreadable: &Unreadable,
) -> Error {
    let local = ids.get(unreadable.table).and_then(|m| {
        m.iter()
            .find(|(_, new)| **new == unreadable.row_id)
            .map(|(local, _)| *local)
    });
    let line = parsed
        .rows
        .iter()
        .find(|row| {
            row.table.name == unreadable.table
                && (unreadable.table == "sessions"
                    || row
                        .cells
                        .iter()
                        .any(|(n, _, c)| *n == "id" && local == Some(cell_int(c))))
        })
        .map_or(1, |row| row.line);
    refuse(
        line,
        format!(
            "{} row outside the contract: {}",
            unreadable.table, unreadable.detail
        ),
    )
}

/// An integer cell's value (0 for any other cell, which names no row).
fn cell_int(cell: &Cell) -> i64 {
    match cell {
        Cell::Int(n) => *n,
        _ => 0,
    }
}

/// A parent session id, kept when the destination holds that session.
fn parent_if_present(sql: &mut impl Sql, cell: Cell) -> Result<Cell> {
    let Cell::Text(parent) = &cell else {
        return Ok(cell);
    };
    let present = sql
        .optional_int(
            "SELECT 1 FROM sessions WHERE id = ?1",
            &values![parent.as_str()],
        )?
        .is_some();
    Ok(if present { cell } else { Cell::Null })
}

/// A cell bound as its column's kind (a NULL typed for PostgreSQL).
fn bound<'a>((cell, kind): (&'a Cell, &Kind)) -> Value<'a> {
    match (cell, kind) {
        (Cell::Int(n), _) => Value::Int(Some(*n)),
        (Cell::Text(t), _) => Value::Text(Some(t)),
        (Cell::Null, Kind::Int) => Value::Int(None),
        (Cell::Null, Kind::Text) => Value::Text(None),
    }
}

/// The bundle of `session`, read in the caller's snapshot.
fn bundle_in(sql: &mut impl Sql, session: &SessionId) -> Result<String> {
    let mut all = read_rows_in(sql, session)?;
    local_ids(&mut all);
    bundle_text(session, &all)
}

/// Reads and checks a bundle without writing anything: the number of rows it holds.
pub fn validate_bundle(input: impl BufRead) -> Result<usize> {
    Ok(parse(input)?.rows.len())
}

impl Store {
    /// Every row of `session` as a bundle (JSON Lines; see `import_bundle`), read in one
    /// snapshot. [`Error::UnknownSession`] when it does not exist.
    pub fn export_bundle(&self, session: &SessionId) -> Result<String> {
        self.read(|db| bundle_in(db, session))
    }

    /// Restores a bundle as a new session and returns its id. The whole bundle is read and
    /// checked first ([`Error::Bundle`] names the line of the first problem, and nothing is
    /// written), then every row is written in one transaction. The new session's bundle
    /// equals `input` apart from the session id (and `parent_id` when that session is not in
    /// this database).
    pub fn import_bundle(&self, input: impl BufRead) -> Result<SessionId> {
        let parsed = parse(input)?;
        self.write(|db| restore_in(db, &parsed))
    }
}

#[cfg(test)]
mod tests;

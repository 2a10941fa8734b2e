//! Rows that point at a row that is not there ([`OrphanRow`]): left by a connection that did
//! not enforce foreign keys (the `sqlite3` shell's default) before migration V21 made deletes
//! cascade there too, or by rows inserted there that name a parent that never was. They belong
//! to no session a reader sees, and SQLite gives a deleted row's id to the next row it
//! inserts, so the next message the store writes would take a dead message's parts as its own.
//!
//! [`Store::orphan_rows`] lists them (what `PRAGMA foreign_key_check` finds, with tables
//! without rowid addressed by their key). [`Store::mend_orphan_rows`] mends them in one
//! transaction, never deleting a message or a part (the contract's promise for every mend):
//! - a row of a session that is gone (a message, a revert, a summary, a key) gets its session
//!   back: the session row is created again (`session_recreated`), and the session is then
//!   checked and mended like any other;
//! - parts whose message is gone get it back: the message row, under its old id, in a session
//!   of their own, `recovered-rows-<time>` (`message_recreated`; its role `tool` when it holds
//!   a result, else `assistant`), which the check then mends like any other;
//! - every other orphan has what its foreign key declares for a deleted parent (a usage row
//!   or key of a message that is gone, rows a revert set aside whose revert is gone: deleted,
//!   with the rows that point at them; a fork's missing parent: cleared).
//!
//! Every row it adds, changes or removes is logged in `repair_log` (rule `orphan_row`), a
//! removed one with its content. PostgreSQL always enforces its keys and has none.

use std::collections::HashMap;

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::handle::Store;
use super::pool::SqliteEngine;
use super::time::{format_time, now};
use crate::error::Result;

/// The `repair_log.rule` of a row [`Store::mend_orphan_rows`] removed or changed.
pub const ORPHAN_ROW: &str = "orphan_row";

/// A row whose foreign key names a row that is not there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OrphanRow {
    /// Its table.
    pub table: String,
    /// Its address in that table, as a JSON object: `{"rowid": n}`, or the primary key's
    /// columns of a table without rowid (`idempotency_keys`: `session_id` and `key`).
    pub row: serde_json::Value,
    /// The table of the missing row it points at.
    pub parent: String,
}

/// What [`Store::mend_orphan_rows`] did to one row: `session_recreated`,
/// `message_recreated` (a missing parent made again), `deleted` (an orphan, or a row pointing
/// at one) or `set_null` (a `SET NULL` key cleared).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OrphanMend {
    /// The row's table.
    pub table: String,
    /// Its address ([`OrphanRow::row`]).
    pub row: serde_json::Value,
    /// `session_recreated`, `message_recreated`, `deleted` or `set_null`.
    pub action: &'static str,
}

impl Store {
    /// Every row that points at a row that is not there (none on PostgreSQL). Read-only.
    pub fn orphan_rows(&self) -> Result<Vec<OrphanRow>> {
        self.engine.orphan_rows()
    }

    /// Does to every row [`Store::orphan_rows`] finds what its foreign key declares for a
    /// deleted parent, in one write transaction, logging each row removed or changed in
    /// `repair_log` with its content before (rule [`ORPHAN_ROW`]). Returns what it did, in
    /// order; empty when there was nothing to mend.
    pub fn mend_orphan_rows(&self) -> Result<Vec<OrphanMend>> {
        self.engine.mend_orphan_rows()
    }
}

/// The title of the session [`Store::mend_orphan_rows`] gives the messages it creates again.
const RECOVERED_TITLE: &str = "parts store-repair found without their message";

/// One foreign key of the schema (`pragma_foreign_key_list`).
struct Key {
    /// The table that holds it, its column, and the parent's table and column it names.
    child: String,
    column: String,
    parent: String,
    to: String,
    /// `CASCADE` or `SET NULL` (the schema declares no other).
    on_delete: String,
    /// The columns that address a row of `child` ([`address_columns`]).
    address: Vec<String>,
}

const KEYS: &str = "
    SELECT m.name, f.\"from\", f.\"table\", f.\"to\", f.on_delete
    FROM sqlite_master m, pragma_foreign_key_list(m.name) f
    WHERE m.type = 'table' ORDER BY m.name, f.id";

/// Every foreign key of the schema, each with its child table's row address.
fn keys(conn: &Connection) -> Result<Vec<Key>> {
    let mut statement = conn.prepare(KEYS)?;
    let found = statement
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect::<rusqlite::Result<Vec<(String, String, String, String, String)>>>()?;
    found
        .into_iter()
        .map(|(child, column, parent, to, on_delete)| {
            Ok(Key {
                address: address_columns(conn, &child)?,
                child,
                column,
                parent,
                to,
                on_delete,
            })
        })
        .collect()
}

/// An identifier quoted for SQL.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The columns that address a row of `table`: `rowid`, or the primary key of a table without
/// one.
fn address_columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let without_rowid: bool = conn.query_row(
        "SELECT sql LIKE '%WITHOUT ROWID%' FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get(0),
    )?;
    if !without_rowid {
        return Ok(vec!["rowid".to_owned()]);
    }
    let columns = conn
        .prepare("SELECT name FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk")?
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(columns)
}

/// A row of a table, by the values of its [`address_columns`].
struct Address {
    table: String,
    columns: Vec<String>,
    values: Vec<Value>,
}

impl Address {
    /// `WHERE` over the address, its values bound from `?{first}` on.
    fn predicate(&self, first: usize) -> String {
        self.columns
            .iter()
            .enumerate()
            .map(|(at, column)| {
                let column = if column == "rowid" {
                    "rowid".to_owned()
                } else {
                    quoted(column)
                };
                format!("{column} = ?{}", first + at)
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The address as a JSON object (`{"rowid": 6}`).
    fn json(&self) -> serde_json::Value {
        let map = self
            .columns
            .iter()
            .zip(&self.values)
            .map(|(column, value)| (column.clone(), sql_to_json(value)))
            .collect();
        serde_json::Value::Object(map)
    }
}

/// The rows of `key.child` whose `key.column` is `value`, or, with `None`, whose column names
/// a row of `key.parent` that is not there.
fn rows_of(conn: &Connection, key: &Key, value: Option<&Value>) -> Result<Vec<Address>> {
    let columns = &key.address;
    let select: Vec<String> = columns
        .iter()
        .map(|c| {
            if c == "rowid" {
                "c.rowid".to_owned()
            } else {
                format!("c.{}", quoted(c))
            }
        })
        .collect();
    let column = quoted(&key.column);
    let sql = match value {
        Some(_) => format!(
            "SELECT {} FROM {} c WHERE c.{column} = ?1",
            select.join(", "),
            quoted(&key.child)
        ),
        None => format!(
            "SELECT {} FROM {} c WHERE c.{column} IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM {} p WHERE p.{} = c.{column})",
            select.join(", "),
            quoted(&key.child),
            quoted(&key.parent),
            quoted(&key.to)
        ),
    };
    let mut statement = conn.prepare(&sql)?;
    let params: Vec<&Value> = value.into_iter().collect();
    let rows = statement
        .query_map(rusqlite::params_from_iter(params), |r| {
            (0..columns.len())
                .map(|at| r.get::<_, Value>(at))
                .collect::<rusqlite::Result<Vec<_>>>()
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows
        .into_iter()
        .map(|values| Address {
            table: key.child.clone(),
            columns: columns.clone(),
            values,
        })
        .collect())
}

/// Every row that names a missing row, with the key it breaks.
fn dangling<'k>(conn: &Connection, keys: &'k [Key]) -> Result<Vec<(Address, &'k Key)>> {
    let mut found = Vec::new();
    for key in keys {
        found.extend(rows_of(conn, key, None)?.into_iter().map(|row| (row, key)));
    }
    Ok(found)
}

impl SqliteEngine {
    /// [`Store::orphan_rows`] on SQLite.
    pub(super) fn orphan_rows(&self) -> Result<Vec<OrphanRow>> {
        self.read(|conn| {
            let keys = keys(conn)?;
            Ok(dangling(conn, &keys)?
                .into_iter()
                .map(|(row, key)| OrphanRow {
                    table: key.child.clone(),
                    row: row.json(),
                    parent: key.parent.clone(),
                })
                .collect())
        })
    }

    /// [`Store::mend_orphan_rows`] on SQLite, with foreign keys enforced ([`SqliteEngine::write`]):
    /// a row's dependents are removed, and logged, before the row, so no cascade removes a row
    /// unlogged.
    pub(super) fn mend_orphan_rows(&self) -> Result<Vec<OrphanMend>> {
        self.write(|conn| {
            let keys = keys(conn)?;
            let mut mend = Mend {
                conn,
                keys: &keys,
                at: format_time(now()),
                done: Vec::new(),
                readers: HashMap::new(),
            };
            mend.recreate_sessions()?;
            mend.recreate_messages()?;
            // What is left is neither a message nor a part (their only keys name a session and
            // a message, which are there now), and a removed row's dependents go with it, so
            // one pass leaves no orphan; the loop ends on a pass that mends nothing.
            loop {
                let found = dangling(conn, &keys)?;
                let before = mend.done.len();
                for (row, key) in found {
                    // Never reached after the two steps above; were it, a message or part
                    // would stay reported rather than go.
                    if row.table == "messages" || row.table == "parts" {
                        continue;
                    }
                    if key.on_delete == "SET NULL" {
                        mend.set_null(&row, key, None)?;
                    } else {
                        mend.remove(&row, None)?;
                    }
                }
                if mend.done.len() == before {
                    break;
                }
            }
            Ok(mend.done)
        })
    }
}

/// One mend's transaction and what it did so far.
struct Mend<'a> {
    conn: &'a Connection,
    keys: &'a [Key],
    at: String,
    done: Vec<OrphanMend>,
    /// Per table, the statement that reads a row as JSON ([`Mend::content`]), built once.
    readers: HashMap<String, String>,
}

impl Mend<'_> {
    /// Creates again every session a row names by its `session_id` that is not there.
    fn recreate_sessions(&mut self) -> Result<()> {
        let mut missing = std::collections::BTreeSet::new();
        for key in self
            .keys
            .iter()
            .filter(|k| k.parent == "sessions" && k.column == "session_id")
        {
            let sql = format!(
                "SELECT DISTINCT c.session_id FROM {} c
                 WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.session_id)",
                quoted(&key.child)
            );
            let ids = self
                .conn
                .prepare(&sql)?
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            missing.extend(ids);
        }
        for id in missing {
            self.conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)",
                rusqlite::params![id, self.at],
            )?;
            self.recreated("sessions", Value::Text(id), "session_recreated")?;
        }
        Ok(())
    }

    /// Creates again, in a session of their own, every message whose parts are there without
    /// it, under its old id, in the order of those ids.
    fn recreate_messages(&mut self) -> Result<()> {
        let missing = self
            .conn
            .prepare(
                "SELECT p.message_id, MAX(p.kind = 'tool_result') FROM parts p
                 WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = p.message_id)
                 GROUP BY p.message_id ORDER BY p.message_id",
            )?
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        if missing.is_empty() {
            return Ok(());
        }
        let session = format!("recovered-rows-{}", self.at);
        self.conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at, title) VALUES (?1, ?2, ?2, ?3)",
            rusqlite::params![session, self.at, RECOVERED_TITLE],
        )?;
        self.recreated(
            "sessions",
            Value::Text(session.clone()),
            "session_recreated",
        )?;
        for (seq, (id, has_result)) in (1i64..).zip(missing) {
            let role = if has_result { "tool" } else { "assistant" };
            self.conn.execute(
                "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
                 VALUES (?1, ?2, ?3, 0, ?4, ?5)",
                rusqlite::params![id, session, seq, role, self.at],
            )?;
            self.recreated("messages", Value::Integer(id), "message_recreated")?;
        }
        super::write::recount_messages(
            &mut super::sqlite::SqliteTx::of(self.conn),
            &crate::model::SessionId::new(session),
        )
    }

    /// Logs the row of `table` whose `id` is `id`, just created by `action`.
    fn recreated(&mut self, table: &str, id: Value, action: &'static str) -> Result<()> {
        let row = Address {
            table: table.to_owned(),
            columns: vec!["id".to_owned()],
            values: vec![id],
        };
        let after = self.content(&row)?;
        let session = after
            .as_ref()
            .and_then(|content| session_of(table, content));
        let mut before = serde_json::Map::new();
        before.insert("missing".to_owned(), serde_json::Value::Bool(true));
        self.log(&row, session.as_deref(), action, before, after)
    }

    /// Removes the row at `row` (if still there) after the rows that point at it, logging
    /// each; `session`: the session of the row that led here, for rows without their own
    /// `session_id`.
    fn remove(&mut self, row: &Address, session: Option<&str>) -> Result<()> {
        let Some(content) = self.content(row)? else {
            return Ok(());
        };
        let session = session_of(&row.table, &content).or_else(|| session.map(str::to_owned));
        for key in self.keys.iter().filter(|k| k.parent == row.table) {
            let Some(value) = content.get(&key.to) else {
                continue;
            };
            for child in rows_of(self.conn, key, Some(&json_to_sql(value)))? {
                if key.on_delete == "SET NULL" {
                    self.set_null(&child, key, session.as_deref())?;
                } else {
                    self.remove(&child, session.as_deref())?;
                }
            }
        }
        self.conn.execute(
            &format!(
                "DELETE FROM {} WHERE {}",
                quoted(&row.table),
                row.predicate(1)
            ),
            rusqlite::params_from_iter(&row.values),
        )?;
        self.log(row, session.as_deref(), "deleted", content, None)
    }

    /// Clears `key`'s column of the row at `row`, logging the row before and after.
    fn set_null(&mut self, row: &Address, key: &Key, session: Option<&str>) -> Result<()> {
        let Some(before) = self.content(row)? else {
            return Ok(());
        };
        self.conn.execute(
            &format!(
                "UPDATE {} SET {} = NULL WHERE {}",
                quoted(&row.table),
                quoted(&key.column),
                row.predicate(1)
            ),
            rusqlite::params_from_iter(&row.values),
        )?;
        let after = self.content(row)?;
        let session = session_of(&row.table, &before).or_else(|| session.map(str::to_owned));
        self.log(row, session.as_deref(), "set_null", before, after)
    }

    /// The row at `row` as a JSON object of its columns (a BLOB as hex text); `None` when it
    /// is gone.
    fn content(
        &mut self,
        row: &Address,
    ) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
        let reader = match self.readers.get(&row.table) {
            Some(reader) => reader,
            None => {
                let reader = row_reader(self.conn, &row.table)?;
                self.readers.entry(row.table.clone()).or_insert(reader)
            }
        };
        let sql = format!("{reader} WHERE {}", row.predicate(1));
        let text: Option<String> = self
            .conn
            .query_row(&sql, rusqlite::params_from_iter(&row.values), |r| r.get(0))
            .optional()?;
        Ok(text
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| match v {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            }))
    }

    /// One `repair_log` row (rule [`ORPHAN_ROW`]), its `before_json` the row's content with
    /// its table and address; the message and part it names where the row is one or belongs
    /// to one.
    fn log(
        &mut self,
        row: &Address,
        session: Option<&str>,
        action: &'static str,
        mut before: serde_json::Map<String, serde_json::Value>,
        after: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<()> {
        let rowid = row
            .columns
            .iter()
            .position(|c| c == "rowid")
            .and_then(|at| match row.values.get(at) {
                Some(Value::Integer(id)) => Some(*id),
                _ => None,
            });
        let own_id =
            row.columns
                .iter()
                .position(|c| c == "id")
                .and_then(|at| match row.values.get(at) {
                    Some(Value::Integer(id)) => Some(*id),
                    _ => None,
                });
        let message_id = match row.table.as_str() {
            "messages" => rowid.or(own_id),
            _ => before.get("message_id").and_then(serde_json::Value::as_i64),
        };
        let part_id = if row.table == "parts" { rowid } else { None };
        before.insert(
            "table".to_owned(),
            serde_json::Value::from(row.table.as_str()),
        );
        before.insert("address".to_owned(), row.json());
        self.conn.execute(
            super::apply::INSERT_LOG,
            rusqlite::params![
                session.unwrap_or(""),
                ORPHAN_ROW,
                action,
                message_id,
                part_id,
                serde_json::Value::Object(before).to_string(),
                after.map(|a| serde_json::Value::Object(a).to_string()),
                self.at,
            ],
        )?;
        self.done.push(OrphanMend {
            table: row.table.clone(),
            row: row.json(),
            action,
        });
        Ok(())
    }
}

/// The statement that reads a row of `table` as a JSON object of all its columns, a BLOB as
/// hex text (a `WHERE` to add): read from the table itself, not the store's typed lists
/// (`copy::TABLES`), as an orphan may hold cells no typed reader takes and its log must keep
/// them.
fn row_reader(conn: &Connection, table: &str) -> Result<String> {
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let fields: Vec<String> = columns
        .iter()
        .map(|c| {
            let name = quoted(c);
            format!(
                "'{}', CASE typeof({name}) WHEN 'blob' THEN hex({name}) ELSE {name} END",
                c.replace('\'', "''")
            )
        })
        .collect();
    Ok(format!(
        "SELECT json_object({}) FROM {}",
        fields.join(", "),
        quoted(table)
    ))
}

/// The session of a row of `table`, where the row names it (a session's own `id`).
fn session_of(table: &str, content: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    let column = if table == "sessions" {
        "id"
    } else {
        "session_id"
    };
    content
        .get(column)
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

/// A column's value as JSON.
fn sql_to_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Integer(i) => serde_json::Value::from(*i),
        Value::Real(f) => serde_json::Value::from(*f),
        Value::Text(t) => serde_json::Value::from(t.as_str()),
        Value::Blob(b) => serde_json::Value::from(
            b.iter()
                .map(|byte| format!("{byte:02X}"))
                .collect::<String>(),
        ),
    }
}

/// A column's value, read back as JSON, bound again as SQL.
fn json_to_sql(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Integer(i64::from(*b)),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Real(n.as_f64().unwrap_or_default()),
        },
        serde_json::Value::String(s) => Value::Text(s.clone()),
        other => Value::Text(other.to_string()),
    }
}

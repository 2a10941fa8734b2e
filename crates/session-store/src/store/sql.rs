//! One statement, two engines: the few write shapes that SQLite and PostgreSQL run alike,
//! so code that writes rows (inserting messages and parts, applying a mend plan) is written
//! once and runs in either backend's transaction.
//!
//! Statements are written in SQLite's dialect with numbered placeholders (`?1`, `?2`, ...);
//! on PostgreSQL each becomes `$1`, `$2`, ... Values are integers and text (every column the
//! store writes is one of those on both engines, flags included), each with its own NULL, as
//! PostgreSQL binds a NULL with a type.

use rusqlite::types::{ToSqlOutput, ValueRef};

use super::rows::{self, Cells, Loaded, Range, Unreadable};
use super::write::{AppendedCalls, Remembered, Run, TailRow};
use crate::error::Result;
use crate::history::tail::TailState;
use crate::model::{Message, SessionId};

/// A value bound to a placeholder.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    /// An integer column (`BIGINT` on PostgreSQL); flags are `0` / `1`.
    Int(Option<i64>),
    /// A text column.
    Text(Option<&'a str>),
}

impl From<i64> for Value<'_> {
    fn from(value: i64) -> Self {
        Value::Int(Some(value))
    }
}

impl From<Option<i64>> for Value<'_> {
    fn from(value: Option<i64>) -> Self {
        Value::Int(value)
    }
}

impl From<bool> for Value<'_> {
    fn from(value: bool) -> Self {
        Value::Int(Some(i64::from(value)))
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(value: &'a str) -> Self {
        Value::Text(Some(value))
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(value: &'a String) -> Self {
        Value::Text(Some(value))
    }
}

impl<'a> From<Option<&'a str>> for Value<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Value::Text(value)
    }
}

/// `[Value; N]` from a list of anything a [`Value`] is made from.
macro_rules! values {
    ($($value:expr),* $(,)?) => {
        [$($crate::store::sql::Value::from($value)),*]
    };
}
pub(crate) use values;

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Value::Int(value) => value.to_sql(),
            Value::Text(value) => value.to_sql(),
        }
    }
}

/// A transaction of either engine, for the statements of this module's dialect. Object safe:
/// an engine hands its transaction out as `&mut dyn Sql` (`store/engine.rs`), and the
/// operations of `store/` take `&mut impl Sql`, which `&mut dyn Sql` is.
pub(crate) trait Sql {
    /// Runs `sql`; how many rows it changed.
    fn run(&mut self, sql: &str, params: &[Value<'_>]) -> Result<u64>;

    /// Runs an `INSERT` of one row into a table with an `id` key; that row's id.
    fn insert(&mut self, sql: &str, params: &[Value<'_>]) -> Result<i64>;

    /// Runs an `INSERT` of one or more rows into a table with an `id` key; the largest id
    /// it gave (SQLite: the last row's rowid; PostgreSQL: `RETURNING id`).
    fn insert_rows(&mut self, sql: &str, params: &[Value<'_>]) -> Result<i64> {
        self.insert(sql, params)
    }

    /// Whether every table of session data carries its session's id (`session_id`), so a
    /// statement that writes `parts`, `usage`, `reverted_parts` or `reverted_usage` names it
    /// and a join of two of them matches it too ([`keyed`]): PostgreSQL's schema, which a
    /// distributed engine shards by session (`migrations-postgres/V18`). SQLite's rows of
    /// those tables name their message only (one file is never sharded; the column would
    /// cost disk and time on every append).
    fn rows_carry_session(&self) -> bool {
        false
    }

    /// Every row of a query whose first `width` columns are integers, one after another.
    fn int_table(&mut self, sql: &str, params: &[Value<'_>], width: usize) -> Result<Vec<i64>>;

    /// Every row of a query whose `N` columns are integers.
    fn int_rows<const N: usize>(&mut self, sql: &str, params: &[Value<'_>]) -> Result<Vec<[i64; N]>>
    where
        Self: Sized,
    {
        if N == 0 {
            return Ok(Vec::new());
        }
        let cells = self.int_table(sql, params, N)?;
        Ok(cells
            .chunks_exact(N)
            .map(|row| {
                let mut values = [0; N];
                values.copy_from_slice(row);
                values
            })
            .collect())
    }

    /// The first column of the first row of a query, when there is a row and it is not NULL.
    fn optional_int(&mut self, sql: &str, params: &[Value<'_>]) -> Result<Option<i64>>;

    /// Runs a query and hands each row to `each` as [`Cells`] (read them with [`int_at`] and
    /// [`text_at`]).
    fn each_row(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        each: &mut dyn FnMut(&dyn Cells) -> Result<()>,
    ) -> Result<()>;

    /// Messages with their parts, through the one row decoder ([`super::rows::load_messages`]).
    fn load_messages(&mut self, session: &SessionId, range: Range) -> Result<Vec<Message>>;

    /// The id of every session, in id order (bytewise, on both engines).
    fn session_ids(&mut self) -> Result<Vec<SessionId>>;

    /// [`crate::Error::UnknownSession`] unless the session exists.
    fn require_session(&mut self, session: &SessionId) -> Result<()>;

    /// [`Sql::require_session`], and the session's write lock held to the end of the
    /// transaction (SQLite's `BEGIN IMMEDIATE` holds the file's already; PostgreSQL takes the
    /// session row's).
    fn lock_session(&mut self, session: &SessionId) -> Result<()>;

    /// The session's end as its row keeps it ([`TailRow`]), `None` when there is no such
    /// session, in one statement. With `for_write` the session's write lock is taken first
    /// and held to the end of the transaction, in the same round trip (PostgreSQL: the row
    /// lock, then the rest read after it, from what is committed; SQLite's `BEGIN
    /// IMMEDIATE` holds the file's lock already).
    fn tail_row(&mut self, session: &SessionId, for_write: bool) -> Result<Option<TailRow>>;

    /// [`Sql::tail_row`] for a write (the session's lock first), also answering which of
    /// `calls` (the tool_use ids an append brings) the session already uses
    /// ([`TailRow::taken`]) where the engine reads that in the same round trip
    /// (PostgreSQL); elsewhere `taken` is `None` and the append probes them itself.
    fn tail_row_for_append(
        &mut self,
        session: &SessionId,
        calls: &[&str],
    ) -> Result<Option<TailRow>> {
        let _ = calls;
        self.tail_row(session, true)
    }

    /// The tail of `session` an append of `calls` (its tool_use ids) may start from without
    /// reading the session's rows: on SQLite the tail this connection's last append to it
    /// wrote (`store/memory.rs`, proved current by the file's `data_version`); on PostgreSQL
    /// the state the session row keeps, read with the session's lock, which the append's
    /// first insert checks ([`Remembered::unproved`]). `None`: read the tail
    /// ([`Sql::tail_row_for_append`]).
    fn remembered_tail(
        &mut self,
        session: &SessionId,
        calls: &[&str],
    ) -> Result<Option<Remembered>> {
        let _ = (session, calls);
        Ok(None)
    }

    /// Keeps `tail`, which this append wrote for `session`, for [`Sql::remembered_tail`]
    /// once the transaction commits, where the engine remembers tails: SQLite; PostgreSQL
    /// where the append reported the session row's `version` it left
    /// ([`Remembered::version`]).
    fn remember_tail(&mut self, session: &SessionId, tail: TailState, version: Option<i64>) {
        let _ = (session, tail, version);
    }

    /// Which of `calls` (tool_use ids) the session already uses in a message other than
    /// `run.except_seq`, where the engine keeps each session's call ids (SQLite's write
    /// connection, `store/memory.rs`); `None` where it keeps none, and the rows are asked
    /// (PostgreSQL's index of call ids).
    fn calls_used(
        &mut self,
        session: &SessionId,
        run: &Run,
        calls: &[&str],
    ) -> Result<Option<Vec<String>>> {
        let _ = (session, run, calls);
        Ok(None)
    }

    /// After every append: what it wrote to `session`, for the call ids the engine keeps
    /// ([`Sql::calls_used`]).
    fn remember_calls(&mut self, session: &SessionId, appended: &AppendedCalls<'_>) {
        let _ = (session, appended);
    }

    /// After the store rewrote what the parts `parts` of `session` say (a mend turned a
    /// call or a result into text): the engine's search index forgets their old words where
    /// no trigger does. SQLite's triggers keep its index right; PostgreSQL, which has no
    /// trigger (`migrations-postgres/V18`), sets their documents back to NULL for the next
    /// catch-up (`store/pg/search.rs`).
    fn parts_rewritten(&mut self, session: &SessionId, parts: &[i64]) -> Result<()> {
        let _ = (session, parts);
        Ok(())
    }

    /// The whole session for the check and the mend, through the one row decoder; the inner
    /// `Err` is the first row outside the contract.
    fn load_for_check(
        &mut self,
        session: &SessionId,
    ) -> Result<std::result::Result<Loaded, Unreadable>>;

    /// The columns of `table` the store writes, in schema order (columns later migrations
    /// add included; generated ones left out).
    fn columns(&mut self, table: &str) -> Result<Vec<String>>;

    /// Records `child` on the call `call` of `session` that spawned it
    /// (`provider_metadata.session_store.child_session`).
    fn link_call(&mut self, session: &SessionId, call: &str, child: &SessionId) -> Result<()>;

    /// A fork's copy of its source's rows where the engine copies them its own way
    /// ([`super::fork`]): the messages before `cut` (a seq), their parts and usage rows, and
    /// the live summaries of turns before `at_turn`, into the (created, locked) `fork`; how
    /// many messages and summaries it copied. `None` where the shared statements copy them
    /// (SQLite: one `INSERT ... SELECT` per table). PostgreSQL reads the source's rows by its
    /// key and writes the fork's by the fork's, so each statement stays on one session's
    /// shard (`store/pg/fork.rs`).
    fn copy_fork(
        &mut self,
        fork: &SessionId,
        source: &SessionId,
        cut: i64,
        at_turn: i64,
    ) -> Result<Option<[usize; 2]>> {
        let _ = (fork, source, cut, at_turn);
        Ok(None)
    }
}

/// A transaction behind a reference (`&mut dyn Sql` above all) is one too.
impl<S: Sql + ?Sized> Sql for &mut S {
    fn run(&mut self, sql: &str, params: &[Value<'_>]) -> Result<u64> {
        (**self).run(sql, params)
    }

    fn insert(&mut self, sql: &str, params: &[Value<'_>]) -> Result<i64> {
        (**self).insert(sql, params)
    }

    fn insert_rows(&mut self, sql: &str, params: &[Value<'_>]) -> Result<i64> {
        (**self).insert_rows(sql, params)
    }

    fn rows_carry_session(&self) -> bool {
        (**self).rows_carry_session()
    }

    fn parts_rewritten(&mut self, session: &SessionId, parts: &[i64]) -> Result<()> {
        (**self).parts_rewritten(session, parts)
    }

    fn int_table(&mut self, sql: &str, params: &[Value<'_>], width: usize) -> Result<Vec<i64>> {
        (**self).int_table(sql, params, width)
    }

    fn optional_int(&mut self, sql: &str, params: &[Value<'_>]) -> Result<Option<i64>> {
        (**self).optional_int(sql, params)
    }

    fn each_row(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        each: &mut dyn FnMut(&dyn Cells) -> Result<()>,
    ) -> Result<()> {
        (**self).each_row(sql, params, each)
    }

    fn load_messages(&mut self, session: &SessionId, range: Range) -> Result<Vec<Message>> {
        (**self).load_messages(session, range)
    }

    fn session_ids(&mut self) -> Result<Vec<SessionId>> {
        (**self).session_ids()
    }

    fn require_session(&mut self, session: &SessionId) -> Result<()> {
        (**self).require_session(session)
    }

    fn lock_session(&mut self, session: &SessionId) -> Result<()> {
        (**self).lock_session(session)
    }

    fn tail_row(&mut self, session: &SessionId, for_write: bool) -> Result<Option<TailRow>> {
        (**self).tail_row(session, for_write)
    }

    fn tail_row_for_append(
        &mut self,
        session: &SessionId,
        calls: &[&str],
    ) -> Result<Option<TailRow>> {
        (**self).tail_row_for_append(session, calls)
    }

    fn remembered_tail(
        &mut self,
        session: &SessionId,
        calls: &[&str],
    ) -> Result<Option<Remembered>> {
        (**self).remembered_tail(session, calls)
    }

    fn remember_tail(&mut self, session: &SessionId, tail: TailState, version: Option<i64>) {
        (**self).remember_tail(session, tail, version)
    }

    fn calls_used(
        &mut self,
        session: &SessionId,
        run: &Run,
        calls: &[&str],
    ) -> Result<Option<Vec<String>>> {
        (**self).calls_used(session, run, calls)
    }

    fn remember_calls(&mut self, session: &SessionId, appended: &AppendedCalls<'_>) {
        (**self).remember_calls(session, appended)
    }

    fn load_for_check(
        &mut self,
        session: &SessionId,
    ) -> Result<std::result::Result<Loaded, Unreadable>> {
        (**self).load_for_check(session)
    }

    fn columns(&mut self, table: &str) -> Result<Vec<String>> {
        (**self).columns(table)
    }

    fn link_call(&mut self, session: &SessionId, call: &str, child: &SessionId) -> Result<()> {
        (**self).link_call(session, call, child)
    }

    fn copy_fork(
        &mut self,
        fork: &SessionId,
        source: &SessionId,
        cut: i64,
        at_turn: i64,
    ) -> Result<Option<[usize; 2]>> {
        (**self).copy_fork(fork, source, cut, at_turn)
    }
}

/// `plain` on an engine whose rows of `parts`, `usage` and their revert mirrors name their
/// message only (SQLite), `keyed` where they carry their session's id too (PostgreSQL,
/// [`Sql::rows_carry_session`]): the same statement in the two schemas.
pub(crate) fn keyed<'s>(db: &(impl Sql + ?Sized), plain: &'s str, keyed: &'s str) -> &'s str {
    if db.rows_carry_session() {
        keyed
    } else {
        plain
    }
}

/// `sql` over sessions `s` with its `{only}` filled: `WHERE s.id = ?1` for one session (by
/// the primary key; bind it alone), nothing for every session (bind nothing). One text for
/// each, so that neither engine plans one filter that is both (`?1 IS NULL OR s.id = ?1`:
/// no index serves it, so every session was read to return one, and PostgreSQL planned it
/// again on every run).
pub(crate) fn one_or_every_session(sql: &str, only: Option<&SessionId>) -> String {
    sql.replace(
        "{only}",
        if only.is_some() {
            "WHERE s.id = ?1"
        } else {
            ""
        },
    )
}

/// An integer cell (any width on PostgreSQL: `SELECT 1` is an `int4`, a count an `int8`),
/// read with the row decoder's leniency ([`super::rows`]).
pub(crate) fn int_at(row: &(impl Cells + ?Sized), at: usize) -> Result<Option<i64>> {
    match row.cell(at) {
        Ok(ValueRef::Null) => Ok(None),
        _ => rows::integer(row, at)
            .map(Some)
            .map_err(|detail| unreadable(row, at, detail)),
    }
}

/// A text cell, read with the row decoder's leniency (a BLOB as UTF-8, a number as its text).
pub(crate) fn text_at(row: &(impl Cells + ?Sized), at: usize) -> Result<Option<String>> {
    rows::text(row, at).map_err(|detail| unreadable(row, at, detail))
}

/// A cell of one of the store's own queries that is not what the query selects, named by
/// its column (a row edited by hand: `usage.input_tokens` holding text).
fn unreadable(row: &(impl Cells + ?Sized), at: usize, detail: String) -> crate::Error {
    let column = row
        .column_name(at)
        .map_or_else(|| format!("column {at}"), |name| format!("column {name}"));
    crate::Error::CorruptRow {
        table: "(a query of the store)",
        row_id: 0,
        detail: format!("{column}: {detail}"),
    }
}

#[cfg(feature = "postgres")]
/// `?1` -> `$1`: SQLite's numbered placeholders in PostgreSQL's spelling. The statements of
/// this module hold no `?` other than placeholders (no string literal carries one).
pub(crate) fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// The plan SQLite chooses for `sql` on `conn`'s schema, one line per step, every
/// parameter bound to a text.
#[cfg(test)]
pub(crate) fn sqlite_plan(conn: &rusqlite::Connection, sql: &str) -> Vec<String> {
    let mut statement = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("explain");
    let params = (0..statement.parameter_count()).map(|at| format!("p{at}"));
    let rows = statement
        .query_map(rusqlite::params_from_iter(params), |row| {
            row.get::<_, String>(3)
        })
        .expect("plan");
    rows.collect::<rusqlite::Result<_>>().expect("plan rows")
}

/// Asserts that SQLite reads `sql` (a statement of [`one_or_every_session`]) for one session
/// by the primary key, scanning nothing.
#[cfg(test)]
pub(crate) fn assert_one_session_by_key(sql: &str) {
    let mut conn = rusqlite::Connection::open_in_memory().expect("open");
    crate::store::schema::migrate(&mut conn).expect("migrate");
    let one = one_or_every_session(sql, Some(&SessionId::new("s")));
    let steps = sqlite_plan(&conn, &one);
    assert!(
        steps.iter().any(|step| step.starts_with("SEARCH s ")),
        "{steps:?}"
    );
    assert!(!steps.iter().any(|step| step.contains("SCAN")), "{steps:?}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    #[cfg(feature = "postgres")]
    #[test]
    fn numbered_placeholders_become_dollars_and_nothing_else_changes() {
        assert_eq!(
            dollar_placeholders("UPDATE t SET a = ?2, b = '?' WHERE id = ?1 AND c = ?10"),
            "UPDATE t SET a = $2, b = '?' WHERE id = $1 AND c = $10"
        );
    }

    #[test]
    fn the_same_statement_writes_and_reads_back_on_sqlite() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT)")
            .expect("table");
        let mut db = crate::store::sqlite::SqliteTx::of(&conn);
        let id = db
            .insert(
                "INSERT INTO t (n, s) VALUES (?1, ?2)",
                &values![7, None::<&str>],
            )
            .expect("insert");
        assert_eq!(
            db.run("UPDATE t SET n = ?2 WHERE id = ?1", &values![id, true])
                .expect("update"),
            1
        );
        let rows: Vec<[i64; 2]> = db
            .int_rows("SELECT id, n FROM t WHERE s IS NULL", &[])
            .expect("rows");
        assert_eq!(rows, vec![[id, 1]]);
    }
}

//! The forensic views, outside the migration chain.
//!
//! `views.sql` holds every view the store owns (one `CREATE VIEW name AS` per view). A
//! writable open compares what the file records in `store_views` (migration V6: one row per
//! view the store made, with the hash of the SQL it came from) with this build's SQL; when
//! they differ it drops every view it owns, old names included, creates them again and
//! records the new hash, all in one `BEGIN IMMEDIATE` transaction. So a view fix ships as
//! an edit of `views.sql`, never as another migration, and a file always holds the views of
//! the last build that opened it for writing. A read-only open, or a file SQLite cannot
//! write, keeps the views it has.

use crate::fnv;
use std::collections::BTreeSet;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::Result;

/// The views' SQL, in dependency order.
const VIEWS_SQL: &str = include_str!("views.sql");

/// Where the store records the views it made (created by migration V6).
const TABLE: &str = "store_views";

/// The hash `store_views` records for this build's views, [`hash_of`] `views.sql`.
pub(crate) fn definition_hash() -> String {
    hash_of(VIEWS_SQL)
}

/// FNV-1a 64 of SQL text with `\n` line ends (a checkout with `\r\n` gives the same hash),
/// in hex.
fn hash_of(sql: &str) -> String {
    let hash = sql.lines().fold(fnv::OFFSET, |hash, line| {
        fnv::fold(fnv::fold(hash, line.as_bytes()), b"\n")
    });
    format!("{hash:016x}")
}

/// The names of the views `views.sql` creates, in order.
pub(crate) fn view_names() -> Vec<&'static str> {
    VIEWS_SQL
        .lines()
        .filter_map(|line| line.strip_prefix("CREATE VIEW "))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect()
}

/// Brings the views up to date in their own `BEGIN IMMEDIATE` transaction, when they are
/// stale. Checked first without the lock, so an up-to-date file is never written. A file
/// SQLite cannot write (read-only, or write-protected) keeps its views: they are a view for
/// people, and the data is still read right.
pub(crate) fn refresh(conn: &mut Connection) -> Result<()> {
    if !is_stale(conn)? {
        return Ok(());
    }
    let result = (|| -> Result<()> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        refresh_in(&tx)?;
        tx.commit()?;
        Ok(())
    })();
    match result {
        Err(error) if error.is_read_only() => {
            tracing::warn!(%error, "the forensic views are stale but the file cannot be written; kept as they are");
            Ok(())
        }
        other => other,
    }
}

/// Inside the caller's write transaction (a migration's, or [`refresh`]'s): drops every view
/// the store owns and creates this build's, when they are stale. Does nothing on a file
/// without `store_views` (before migration V6).
pub(crate) fn refresh_in(conn: &Connection) -> Result<()> {
    if !is_stale(conn)? {
        return Ok(());
    }
    let mut owned: BTreeSet<String> = recorded(conn)?.into_iter().map(|(name, _)| name).collect();
    owned.extend(view_names().into_iter().map(str::to_owned));
    for name in &owned {
        conn.execute_batch(&format!(
            "DROP VIEW IF EXISTS \"{}\"",
            name.replace('"', "\"\"")
        ))?;
    }
    conn.execute_batch(VIEWS_SQL)?;
    conn.execute(&format!("DELETE FROM {TABLE}"), [])?;
    let hash = definition_hash();
    let mut insert = conn.prepare(&format!("INSERT INTO {TABLE} (name, hash) VALUES (?1, ?2)"))?;
    for name in view_names() {
        insert.execute([name, hash.as_str()])?;
    }
    tracing::info!(hash, "recreated the forensic views");
    Ok(())
}

/// True when the file has `store_views` and its views are not exactly this build's: another
/// hash recorded, another set of names, or one of the views missing.
fn is_stale(conn: &Connection) -> Result<bool> {
    if !table_exists(conn)? {
        return Ok(false);
    }
    let hash = definition_hash();
    let recorded = recorded(conn)?;
    let names: BTreeSet<&str> = view_names().into_iter().collect();
    let recorded_names: BTreeSet<&str> = recorded.iter().map(|(name, _)| name.as_str()).collect();
    if recorded.iter().any(|(_, h)| *h != hash) || recorded_names != names {
        return Ok(true);
    }
    let present: i64 = conn.query_row(
        &format!(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'view'
             AND name IN (SELECT name FROM {TABLE})"
        ),
        [],
        |row| row.get(0),
    )?;
    Ok(usize::try_from(present).ok() != Some(names.len()))
}

fn table_exists(conn: &Connection) -> Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [TABLE],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

fn recorded(conn: &Connection) -> Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare(&format!("SELECT name, hash FROM {TABLE}"))?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_line_ends_but_not_the_sql() {
        assert_eq!(definition_hash().len(), 16);
        assert_eq!(
            hash_of(VIEWS_SQL),
            hash_of(&VIEWS_SQL.replace('\n', "\r\n"))
        );
        assert_ne!(
            hash_of(VIEWS_SQL),
            hash_of(&VIEWS_SQL.replace("one answer", "two answers"))
        );
    }

    #[test]
    fn every_statement_of_views_sql_creates_one_named_view() {
        let names = view_names();
        // A statement ends with `;` at the end of a line (a `;` inside a string does not).
        let statements = VIEWS_SQL
            .lines()
            .filter(|l| !l.trim_start().starts_with("--") && l.trim_end().ends_with(';'))
            .count();
        assert_eq!(names.len(), statements, "one CREATE VIEW per statement");
        assert_eq!(
            names.iter().collect::<BTreeSet<_>>().len(),
            names.len(),
            "no name twice"
        );
        let creates = VIEWS_SQL
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .filter(|l| l.trim_start().to_ascii_uppercase().starts_with("CREATE"))
            .count();
        assert_eq!(
            creates,
            names.len(),
            "every CREATE starts a line as CREATE VIEW"
        );
        for name in [
            "problems",
            "session_turns",
            "tool_calls",
            "tombstones",
            "message_turns",
            "message_parts",
        ] {
            assert!(names.contains(&name), "{name} is missing");
        }
    }
}

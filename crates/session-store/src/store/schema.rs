//! The schema: the embedded migrations from the top-level `migrations/` folder and how they
//! are applied.
//!
//! Migrations are embedded with refinery and recorded in refinery's own
//! `refinery_schema_history` table (same columns, same checksums), but applied here, each in
//! one `BEGIN IMMEDIATE` transaction that re-reads the history first. Refinery's runner uses a
//! deferred transaction, which fails at once with `SQLITE_BUSY_SNAPSHOT` when two processes
//! open a fresh file together; under the write lock the second simply finds the work done.

use refinery::Migration;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::time::{format_time, now};
use crate::error::{Error, Result};

refinery::embed_migrations!("../../migrations");

const HISTORY_TABLE: &str = "refinery_schema_history";

/// The newest schema version this build carries.
pub fn latest_schema_version() -> i64 {
    embedded()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// The schema version recorded in an open database (0 when it has no history).
pub fn schema_version(conn: &Connection) -> Result<i64> {
    if !history_exists(conn)? {
        return Ok(0);
    }
    let version: Option<i64> = conn.query_row(
        &format!("SELECT MAX(version) FROM {HISTORY_TABLE}"),
        [],
        |row| row.get(0),
    )?;
    Ok(version.unwrap_or(0))
}

fn embedded() -> Vec<Migration> {
    let mut migrations = migrations::runner().get_migrations().clone();
    migrations.sort_by_key(Migration::version);
    migrations
}

/// The migrations this database still needs, after checking that what it has applied is a
/// prefix of ours. Reads only.
pub(crate) fn pending_migrations(conn: &Connection) -> Result<Vec<Migration>> {
    unapplied(embedded(), &applied_migrations(conn)?)
}

/// Of `ours` (sorted by version), those not in `applied` (`(version, name, checksum)` as a
/// history table records them), after checking that `applied` is a prefix of `ours`: a
/// version past ours is [`Error::FutureSchema`], another name or checksum is
/// [`Error::DivergentSchema`]. The same judgement for both engines' history tables.
pub(crate) fn unapplied(
    ours: Vec<Migration>,
    applied: &[(i64, String, String)],
) -> Result<Vec<Migration>> {
    let latest_known = ours.last().map_or(0, |m| i64::from(m.version()));
    for (version, name, checksum) in applied {
        let Some(mine) = ours.iter().find(|m| i64::from(m.version()) == *version) else {
            if *version > latest_known {
                return Err(Error::FutureSchema {
                    version: *version,
                    name: name.clone(),
                    latest_known,
                });
            }
            return Err(Error::DivergentSchema {
                version: *version,
                theirs: format!("{name} ({checksum})"),
                ours: "no such migration".to_owned(),
            });
        };
        if mine.name() != name || mine.checksum().to_string() != *checksum {
            return Err(Error::DivergentSchema {
                version: *version,
                theirs: format!("{name} ({checksum})"),
                ours: format!("{} ({})", mine.name(), mine.checksum()),
            });
        }
    }
    Ok(ours
        .into_iter()
        .filter(|m| !applied.iter().any(|(v, _, _)| *v == i64::from(m.version())))
        .collect())
}

/// Fails unless the database is at the current schema (for read-only opens).
pub(crate) fn require_current(conn: &Connection) -> Result<()> {
    let pending = pending_migrations(conn)?;
    match pending.first() {
        None => Ok(()),
        Some(first) => Err(Error::DivergentSchema {
            version: i64::from(first.version()),
            theirs: "not applied (read-only database needs migrating)".to_owned(),
            ours: first.name().to_owned(),
        }),
    }
}

/// Applies every pending migration, each with its history row, all in one IMMEDIATE
/// transaction: a database is migrated all the way or not at all. A migration that fails
/// (a full disk, a kill) leaves the file exactly as it was, never half-migrated, which a
/// database other code wrote could not be mended from.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    // Checked outside any write lock first, so a refused database is never written to.
    if pending_migrations(conn)?.is_empty() {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Again under the lock: another process may have migrated meanwhile.
    let pending = pending_migrations(&tx)?;
    if pending.is_empty() {
        return Ok(());
    }
    ensure_history_table(&tx)?;
    for next in &pending {
        tx.execute_batch(next.sql().unwrap_or_default())?;
        tx.execute(
            &format!(
                "INSERT INTO {HISTORY_TABLE} (version, name, applied_on, checksum) VALUES (?1, ?2, ?3, ?4)"
            ),
            rusqlite::params![
                i64::from(next.version()),
                next.name(),
                format_time(now()),
                next.checksum().to_string()
            ],
        )?;
        // From V6 on, the forensic views change with the schema, in the same transaction.
        super::views::refresh_in(&tx)?;
    }
    tx.commit()?;
    for applied in &pending {
        tracing::info!(
            version = applied.version(),
            name = applied.name(),
            "applied migration"
        );
    }
    Ok(())
}

fn history_exists(conn: &Connection) -> Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [HISTORY_TABLE],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

fn applied_migrations(conn: &Connection) -> Result<Vec<(i64, String, String)>> {
    if !history_exists(conn)? {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare(&format!(
        "SELECT version, COALESCE(name, ''), COALESCE(checksum, '') FROM {HISTORY_TABLE} ORDER BY version"
    ))?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The same table refinery creates, so refinery's own runner agrees with what we recorded.
fn ensure_history_table(conn: &Connection) -> Result<()> {
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
             version int4 PRIMARY KEY,
             name VARCHAR(255),
             applied_on VARCHAR(255),
             checksum VARCHAR(255));"
    ))?;
    Ok(())
}

//! The PostgreSQL schema: migrations from the top-level `migrations-postgres/` folder (the
//! same versions and names as `migrations/`, in PostgreSQL's dialect), recorded in refinery's
//! `refinery_schema_history` table and applied here, each in one transaction begun under an
//! advisory lock that re-reads the history first, so processes that open a fresh database
//! together apply each migration once (`tests/postgres.rs`).

use postgres::{Client, GenericClient};
use refinery::Migration;

use crate::error::{Error, Result};
use crate::store::time::{format_time, now};

mod embedded {
    refinery::embed_migrations!("../../migrations-postgres");
}

const HISTORY_TABLE: &str = "refinery_schema_history";
/// The advisory lock key every migrating process takes (an arbitrary constant).
const MIGRATION_LOCK: i64 = 0x5e55_1011_5701;

fn ours() -> Vec<Migration> {
    let mut migrations = embedded::migrations::runner().get_migrations().clone();
    migrations.sort_by_key(Migration::version);
    migrations
}

fn applied(client: &mut impl GenericClient) -> Result<Vec<(i64, String, String)>> {
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&HISTORY_TABLE])?
        .try_get(0)?;
    if !exists {
        return Ok(Vec::new());
    }
    let rows = client.query(
        &format!(
            "SELECT version::BIGINT, COALESCE(name, ''), COALESCE(checksum, '') FROM {HISTORY_TABLE} ORDER BY version"
        ),
        &[],
    )?;
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect()
}

/// The migrations still to apply, after checking that what is applied is a prefix of ours.
fn pending(client: &mut impl GenericClient) -> Result<Vec<Migration>> {
    crate::store::schema::unapplied(ours(), &applied(client)?)
}

/// Fails unless the database is at the current schema (read-only opens).
pub(crate) fn require_current(client: &mut Client) -> Result<()> {
    match pending(client)?.first() {
        None => Ok(()),
        Some(first) => Err(Error::DivergentSchema {
            version: i64::from(first.version()),
            theirs: "not applied (read-only database needs migrating)".to_owned(),
            ours: first.name().to_owned(),
        }),
    }
}

/// The forensic views (`views.sql`), recreated at open when their text changed.
const VIEWS: &str = include_str!("views.sql");

/// A checksum of [`VIEWS`] (FNV-1a 64), kept as the comment on the view `problems`.
fn views_checksum() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in VIEWS.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("session-store views {hash:016x}")
}

fn views_comment(client: &mut impl GenericClient) -> Result<Option<String>> {
    Ok(client
        .query_one(
            "SELECT obj_description(to_regclass('problems'), 'pg_class')",
            &[],
        )?
        .try_get(0)?)
}

/// (Re)creates the forensic views unless they are this build's already, under the lock.
fn ensure_views(client: &mut Client) -> Result<()> {
    let checksum = views_checksum();
    if views_comment(client)?.as_deref() == Some(checksum.as_str()) {
        return Ok(());
    }
    locked(client, |client| {
        let mut tx = client.transaction()?;
        if views_comment(&mut tx)?.as_deref() != Some(checksum.as_str()) {
            tx.batch_execute(VIEWS)?;
            tx.batch_execute(&format!("COMMENT ON VIEW problems IS '{checksum}'"))?;
            tracing::info!("created the PostgreSQL forensic views");
        }
        tx.commit()?;
        Ok(())
    })
}

/// Runs `f` holding the migration lock (a session-level advisory lock), released after.
///
/// Taken before each transaction begins, not inside it: PostgreSQL reads the catalogs
/// afresh when a transaction starts, while waiting for an advisory lock inside one does not,
/// so a transaction that waited there could still see no history table after the previous
/// holder created it, and apply V1 a second time.
fn locked<T>(client: &mut Client, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])?;
    let result = f(client);
    let unlocked = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
    let value = result?;
    unlocked?;
    Ok(value)
}

/// Applies every pending migration, each with its history row in one transaction under the
/// migration lock, then brings the forensic views up to date.
pub(crate) fn migrate(client: &mut Client) -> Result<()> {
    apply_pending(client)?;
    ensure_views(client)
}

fn apply_pending(client: &mut Client) -> Result<()> {
    if pending(client)?.is_empty() {
        return Ok(());
    }
    locked(client, |client| loop {
        let mut tx = client.transaction()?;
        let Some(next) = pending(&mut tx)?.into_iter().next() else {
            tx.commit()?;
            return Ok(());
        };
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
                 version int4 PRIMARY KEY,
                 name VARCHAR(255),
                 applied_on VARCHAR(255),
                 checksum VARCHAR(255));"
        ))?;
        tx.batch_execute(next.sql().unwrap_or_default())?;
        tx.execute(
            &format!(
                "INSERT INTO {HISTORY_TABLE} (version, name, applied_on, checksum) VALUES ($1, $2, $3, $4)"
            ),
            &[
                &next.version(),
                &next.name(),
                &format_time(now()),
                &next.checksum().to_string(),
            ],
        )?;
        tx.commit()?;
        tracing::info!(
            version = next.version(),
            name = next.name(),
            "applied PostgreSQL migration"
        );
    })
}

/// How many of our migrations the database at `url` still needs, refusing (before anything
/// is written) a history from a newer build or a foreign one. Reads only.
pub(crate) fn pending_at(url: &str) -> Result<usize> {
    let mut client = Client::connect(url, postgres::NoTls)?;
    let mut tx = client.build_transaction().read_only(true).start()?;
    let pending = pending(&mut tx)?.len();
    tx.commit()?;
    Ok(pending)
}

//! A process killed while it migrates a database must leave the schema wholly old or wholly
//! new, never half-built, with every row still there; the next open finishes the job.
//!
//! The database is a large one written by other code that follows the contract: the three
//! tables and their rows, but no migration history and none of the store's indexes. Opening
//! it applies V1, whose index builds over ~100,000 messages take long enough for a random
//! SIGKILL to land inside the migration's transaction; the kill can also fall between two
//! migrations (each has its own transaction), leaving a whole prefix of them applied. The same
//! database at V1, as an older build left it, is then killed while migrating to the latest.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use session_store::Store;

use crate::fault_support::{
    assert_integrity, child, kill_after_ready, marked_work, raw, timed_work, Rng,
};

const DB_ENV: &str = "PROOF_MIGRATION_DB";
const ROUNDS: usize = 8;
const MESSAGES: i64 = 100_000;

/// The child: opens (and so migrates) the database, then exits.
#[test]
#[ignore = "child process of the migration-kill test: does nothing unless spawned by it"]
fn migrating_child() {
    let Some(db) = std::env::var_os(DB_ENV) else {
        return;
    };
    marked_work(|| drop(Store::open(std::path::PathBuf::from(db)).expect("child migrates")));
}

/// The contract's tables as another writer created them (no indexes, no history), filled.
fn foreign_database(path: &Path) {
    let conn = Connection::open(path).expect("create");
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
         CREATE TABLE messages (id INTEGER PRIMARY KEY,
             session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
             seq INTEGER NOT NULL, turn_index INTEGER NOT NULL, role TEXT NOT NULL,
             compacted INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
         CREATE TABLE parts (id INTEGER PRIMARY KEY,
             message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
             ordinal INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT, tool_use_id TEXT,
             tool_name TEXT, input TEXT, is_error INTEGER NOT NULL DEFAULT 0, provider_metadata TEXT);
         BEGIN;
         INSERT INTO sessions
             WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < 99)
             SELECT 'session-' || n, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z' FROM s;
         INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
             WITH RECURSIVE m(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM m WHERE n < {last})
             SELECT n + 1, 'session-' || (n % 100), n / 100 + 1, (n / 100) / 2,
                    CASE (n / 100) % 2 WHEN 0 THEN 'user' ELSE 'assistant' END,
                    '2026-01-01T00:00:00Z'
             FROM m;
         INSERT INTO parts (message_id, ordinal, kind, text)
             SELECT id, 0, 'text', 'message ' || id || ' of ' || session_id FROM messages;
         COMMIT;",
        last = MESSAGES - 1
    ))
    .expect("fill");
}

/// What a migration changes: the schema objects and the recorded versions.
#[derive(Debug, PartialEq, Eq)]
struct SchemaState {
    objects: Vec<(String, String, Option<String>)>,
    versions: Vec<i64>,
}

fn schema_state(conn: &Connection) -> SchemaState {
    // Whitespace in the stored SQL is how each creator wrote it, not part of the schema.
    let squeeze =
        |sql: Option<String>| sql.map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "));
    let objects = conn
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, squeeze(r.get(2)?))))?
                .collect()
        })
        .expect("sqlite_master");
    let has_history: bool = conn
        .query_row(
            "SELECT COUNT(*) > 0 FROM sqlite_master WHERE name = 'refinery_schema_history'",
            [],
            |r| r.get(0),
        )
        .expect("history?");
    let versions = if has_history {
        conn.prepare("SELECT version FROM refinery_schema_history ORDER BY version")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("versions")
    } else {
        Vec::new()
    };
    SchemaState { objects, versions }
}

fn row_counts(conn: &Connection) -> (i64, i64, i64) {
    conn.query_row(
        "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM parts)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .expect("counts")
}

/// Copies a closed database (no WAL left) to `to`.
fn copy_db(from: &Path, to: &Path) {
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", to.display()));
    }
    std::fs::copy(from, to).expect("copy db");
}

/// The same database at V1, as an older build of the store left it: V1 applied with its
/// history row (copied from a migrated database, so name and checksum are the real ones).
fn at_v1(foreign: &Path, migrated: &Path, to: &Path) {
    copy_db(foreign, to);
    let v1: (String, String, String) = raw(migrated)
        .query_row(
            "SELECT name, applied_on, checksum FROM refinery_schema_history WHERE version = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("V1 history row");
    let conn = raw(to);
    conn.execute_batch(include_str!("../migrations/V1__initial_schema.sql"))
        .expect("apply V1");
    conn.execute_batch(
        "CREATE TABLE refinery_schema_history (
             version int4 PRIMARY KEY, name VARCHAR(255), applied_on VARCHAR(255), checksum VARCHAR(255))",
    )
    .expect("history table");
    conn.execute(
        "INSERT INTO refinery_schema_history VALUES (1, ?1, ?2, ?3)",
        rusqlite::params![v1.0, v1.1, v1.2],
    )
    .expect("V1 row");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .expect("checkpoint");
}

/// Kills a migrating child `rounds` times at random points of a full run (`full` long) from
/// `pristine`; returns how many kills left the old schema, the new one, and a whole prefix of
/// the migrations.
fn kill_rounds(
    rng: &mut Rng,
    pristine: &Path,
    victim: &Path,
    new: &SchemaState,
    full: Duration,
    rounds: usize,
) -> (usize, usize, usize) {
    let (old, counts) = {
        let conn = raw(pristine);
        (schema_state(&conn), row_counts(&conn))
    };
    let (mut before, mut after, mut between) = (0, 0, 0);
    for _ in 0..rounds {
        copy_db(pristine, victim);
        // Anywhere in the migration, or just after it.
        let at = Duration::from_micros(rng.below(full.as_micros() as u64 * 5 / 4 + 1));
        kill_after_ready(
            child("migration_kill::migrating_child").env(DB_ENV, victim),
            at,
        );

        let conn = raw(victim);
        assert_integrity(&conn);
        let state = schema_state(&conn);
        if state == old {
            before += 1;
        } else if state == *new {
            after += 1;
        } else {
            // With several migrations, each in its own transaction: a whole prefix applied.
            assert!(
                state.versions.len() < new.versions.len()
                    && new.versions.starts_with(&state.versions)
                    && state.versions.len() > old.versions.len(),
                "half-migrated schema after a kill: {state:#?}"
            );
            between += 1;
        }
        assert_eq!(
            row_counts(&conn),
            counts,
            "rows changed by an interrupted migration"
        );
        drop(conn);

        drop(Store::open(victim).expect("the next open finishes the migration"));
        let conn = raw(victim);
        assert_eq!(schema_state(&conn), *new);
        assert_eq!(row_counts(&conn), counts);
    }
    (before, after, between)
}

#[test]
fn kill_during_migration_leaves_the_old_or_the_new_schema() {
    let mut rng = Rng::from_env("migration_kill");
    let dir = tempfile::tempdir().expect("tempdir");
    let pristine = dir.path().join("pristine.db");
    foreign_database(&pristine);
    let (old, counts) = {
        let conn = raw(&pristine);
        (schema_state(&conn), row_counts(&conn))
    };

    // The finished migration, and how long it takes here (only to aim the kills).
    let done = dir.path().join("done.db");
    copy_db(&pristine, &done);
    let full = timed_work(child("migration_kill::migrating_child").env(DB_ENV, &done));
    let new = schema_state(&raw(&done));
    assert_ne!(old, new, "the migration changed nothing");
    assert_eq!(row_counts(&raw(&done)), counts);

    let victim = dir.path().join("victim.db");
    let (before, after, between) = kill_rounds(&mut rng, &pristine, &victim, &new, full, ROUNDS);
    eprintln!(
        "migration_kill from V0: {ROUNDS} kills over a {full:?} migration: {before} before, {after} after, {between} between"
    );

    // From V1, as an older build left it, to the latest.
    let v1 = dir.path().join("v1.db");
    at_v1(&pristine, &done, &v1);
    assert_eq!(schema_state(&raw(&v1)).versions, [1]);
    copy_db(&v1, &victim);
    let full = timed_work(child("migration_kill::migrating_child").env(DB_ENV, &victim));
    assert_eq!(schema_state(&raw(&victim)), new);
    let (before, after, between) = kill_rounds(&mut rng, &v1, &victim, &new, full, ROUNDS / 2);
    eprintln!(
        "migration_kill from V1: {} kills over a {full:?} migration: {before} before, {after} after, {between} between",
        ROUNDS / 2
    );
}

//! The CHECK constraints on `messages.role` and `parts.kind` (V13): written as `x IN (...)`
//! they made SQLite build a temporary index of the list on every INSERT, about a quarter of an
//! append's instructions. V13 rewrites them in place as chains of `=`. These tests hold the
//! rewrite to what it must keep: a database an older build left at V12, with rows in it,
//! migrates with every row intact and a clean integrity check; on it and on a fresh database
//! the constraints accept and refuse exactly what they did; and no INSERT the store runs
//! opens a temporary b-tree for a constraint again.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use session_store::{NewMessage, Part, Role, Store};

use crate::util::database_at;

const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];
const KINDS: [&str; 10] = [
    "text",
    "reasoning",
    "redacted_reasoning",
    "tool_use",
    "tool_result",
    "image",
    "document",
    "server_tool_use",
    "server_tool_result",
    "opaque",
];

fn fresh(dir: &Path) -> PathBuf {
    let path = dir.join("fresh.db");
    drop(Store::open(&path).expect("open"));
    path
}

/// A database as the last build before V13 left it: V1..V12 applied, with their history
/// rows, and a session of raw rows holding every role and every part kind.
fn at_v12(dir: &Path) -> PathBuf {
    let (old, conn) = database_at(dir, "v12.db", 12);
    conn.execute(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
        [],
    )
    .expect("session");
    for (seq, role) in ROLES.iter().enumerate() {
        conn.execute(
            "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
             VALUES (?1, 's', ?1, 0, ?2, '2026-01-01T00:00:00Z')",
            rusqlite::params![seq as i64 + 1, role],
        )
        .expect("message");
    }
    for (ordinal, kind) in KINDS.iter().enumerate() {
        conn.execute(
            "INSERT INTO parts (message_id, ordinal, kind, text) VALUES (1, ?1, ?2, 'x')",
            rusqlite::params![ordinal as i64, kind],
        )
        .expect("part");
    }
    old
}

fn counts(conn: &Connection) -> (i64, i64) {
    conn.query_row(
        "SELECT (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM parts)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .expect("counts")
}

/// What the constraints accept and refuse, through a plain connection (other code's writes).
fn assert_constraints_hold(path: &Path) {
    let conn = Connection::open(path).expect("raw");
    conn.execute_batch(
        "INSERT OR IGNORE INTO sessions (id, created_at, updated_at) VALUES ('probe', 'x', 'x');",
    )
    .expect("session");
    let message = |seq: i64, role: Option<&str>| {
        conn.execute(
            "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             VALUES ('probe', ?1, 0, ?2, 'x')",
            rusqlite::params![seq, role],
        )
    };
    for (seq, role) in ROLES.iter().enumerate() {
        message(100 + seq as i64, Some(role)).expect("a contract role is accepted");
    }
    for bad in [Some("robot"), Some("User"), Some("user "), Some(""), None] {
        let error = message(200, bad).expect_err("a role outside the contract is refused");
        assert!(
            error.to_string().contains("constraint failed"),
            "{bad:?}: {error}"
        );
    }
    let message_id: i64 = conn
        .query_row(
            "SELECT id FROM messages WHERE session_id = 'probe' ORDER BY seq LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("probe message");
    let part = |ordinal: i64, kind: Option<&str>| {
        conn.execute(
            "INSERT INTO parts (message_id, ordinal, kind) VALUES (?1, ?2, ?3)",
            rusqlite::params![message_id, ordinal, kind],
        )
    };
    for (ordinal, kind) in KINDS.iter().enumerate() {
        part(ordinal as i64, Some(kind)).expect("a contract kind is accepted");
    }
    for bad in [Some("bogus"), Some("Text"), Some("tool_use "), None] {
        let error = part(99, bad).expect_err("a kind outside the contract is refused");
        assert!(
            error.to_string().contains("constraint failed"),
            "{bad:?}: {error}"
        );
    }
    let in_lists: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('messages', 'parts')
               AND (sql LIKE '%role IN (%' OR sql LIKE '%kind IN (%')",
            [],
            |r| r.get(0),
        )
        .expect("schema");
    assert_eq!(in_lists, 0, "the IN-list constraints are rewritten");
}

#[test]
fn a_v12_database_keeps_every_row_and_the_same_constraints_after_v13() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = at_v12(dir.path());
    let before = counts(&Connection::open(&old).expect("raw"));
    assert_eq!(before, (4, 10));
    drop(Store::open(&old).expect("migrates"));
    let conn = Connection::open(&old).expect("raw");
    assert_eq!(counts(&conn), before);
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(integrity, "ok");
    assert_constraints_hold(&old);
    // The store still appends to it.
    let store = Store::open(&old).expect("reopen");
    let session = store.create_session().expect("create");
    store
        .append(&session, NewMessage::user("hello"))
        .expect("append");
}

#[test]
fn a_fresh_database_has_the_same_constraints() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_constraints_hold(&fresh(dir.path()));
}

/// The perf bug class itself: a CHECK that builds a temporary index per statement shows as
/// `OpenEphemeral` in the statement's program. The store's message and part inserts (one
/// row and several) have none.
#[test]
fn the_store_inserts_build_no_temporary_index_for_a_constraint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    let store = Store::open(&path).expect("open");
    let session = store.create_session().expect("create");
    store
        .append(
            &session,
            NewMessage::new(Role::User, vec![Part::text("a"), Part::text("b")]),
        )
        .expect("append");
    drop(store);
    let conn = Connection::open(&path).expect("raw");
    for sql in [
        "INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at, model)
         VALUES ('x', 1, 0, 'user', 0, 'x', NULL)",
        "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
         VALUES (1, 5, 'text', 'x', NULL, NULL, NULL, 0, NULL)",
    ] {
        let ops: Vec<String> = conn
            .prepare(&format!("EXPLAIN {sql}"))
            .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(1))?.collect())
            .expect("explain");
        assert!(
            !ops.iter().any(|op| op == "OpenEphemeral"),
            "{sql}: {ops:?}"
        );
    }
}

//! `store-repair` on databases written by other code (only the contract's minimum tables,
//! plain `CREATE TABLE`, no migration history), in shapes a random black-box search found
//! mishandled: a tool_use outside an assistant message at the very end of a session was
//! taken for a pending call and left in place, although only an assistant message's call can
//! be answered or pending; a tool_use
//! with a NULL id got a tombstone with id '' that no SQL join matches to it.

use std::path::Path;
use std::process::{Command, Output};

use rusqlite::Connection;
use serde_json::Value;

use crate::util::{dump, violations};

const BIN: &str = env!("CARGO_BIN_EXE_store-repair");

/// The contract's tables, column for column, as other code would write them.
const MINIMUM_SCHEMA: &str = "
CREATE TABLE sessions(id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE messages(id INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, turn_index INTEGER NOT NULL, role TEXT NOT NULL,
  compacted INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, UNIQUE(session_id, seq));
CREATE TABLE parts(id INTEGER PRIMARY KEY,
  message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT, tool_use_id TEXT, tool_name TEXT,
  input TEXT, is_error INTEGER NOT NULL DEFAULT 0, provider_metadata TEXT,
  UNIQUE(message_id, ordinal));
INSERT INTO sessions VALUES ('s', '2024-01-01T00:00:00Z', '2024-01-01T00:00:00Z');
";

fn run(db: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec![
        "--db",
        db.to_str().expect("utf-8 path"),
        "--json",
        "--no-backup",
    ];
    args.extend_from_slice(extra);
    let output: Output = Command::new(BIN)
        .args(&args)
        .output()
        .expect("run store-repair");
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().expect("exit code"), report)
}

fn rules(report: &Value) -> Vec<String> {
    report["problems"]
        .as_array()
        .expect("problems list")
        .iter()
        .map(|p| p["rule"].as_str().expect("rule").to_owned())
        .collect()
}

/// Builds the session, checks it is reported as dangling, mends it, and checks the call was
/// kept as text, the session is healthy and a second run changes nothing.
fn mends_trailing_call(rows: &str, role: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("other.db");
    let conn = Connection::open(&db).expect("open");
    conn.execute_batch(MINIMUM_SCHEMA).expect("schema");
    conn.execute_batch(rows).expect("rows");
    drop(conn);

    let (code, report) = run(&db, &["--dry-run"]);
    assert_eq!(code, 1, "{role}: {report}");
    assert!(
        rules(&report).iter().any(|r| r == "dangling_tool_use"),
        "{role}: {report}"
    );

    let (code, report) = run(&db, &[]);
    assert_eq!(code, 0, "{role}: {report}");
    let conn = Connection::open(&db).expect("reopen");
    let misplaced_calls: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM parts p JOIN messages m ON m.id = p.message_id
             WHERE p.kind = 'tool_use' AND m.role <> 'assistant'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(
        misplaced_calls, 0,
        "{role}: a call outside an assistant message is left"
    );
    let kept: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM parts WHERE kind = 'text' AND text LIKE '[tool_use \"last\"%'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(kept, 1, "{role}: the call is kept as text");
    drop(conn);
    assert_eq!(violations(&db), Vec::<String>::new(), "{role}");

    let (code, report) = run(&db, &["--dry-run"]);
    assert_eq!(code, 0, "{role}: {report}");
    let before = dump(&db);
    let (code, _) = run(&db, &[]);
    assert_eq!(code, 0);
    assert_eq!(dump(&db), before, "{role}: a second run changed something");
}

#[test]
fn a_trailing_call_outside_an_assistant_message_is_not_pending() {
    for role in ["user", "system", "tool"] {
        let rows = format!(
            "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES
               (1, 's', 1, 0, 'user', '2024-01-01T00:00:00Z'), (2, 's', 2, 0, 'assistant', '2024-01-01T00:00:00Z'),
               (3, 's', 3, 0, '{role}', '2024-01-01T00:00:00Z');
             INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input) VALUES
               (1, 0, 'text', 'hi', NULL, NULL, NULL),
               (2, 0, 'text', 'ok', NULL, NULL, NULL),
               (3, 0, 'tool_use', NULL, 'last', 'bash', '{{}}');"
        );
        mends_trailing_call(&rows, role);
    }
}

#[test]
fn a_call_in_a_user_message_answered_by_the_block_after_it_is_not_pending() {
    // The "answer" is an orphan (no assistant message before its block): it becomes text,
    // and the call must not stay behind as if it were waiting for one.
    mends_trailing_call(
        "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES
           (1, 's', 10, 0, 'user', '2024-01-01T00:00:00Z'), (2, 's', 20, 0, 'tool', '2024-01-01T00:00:00Z');
         INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input) VALUES
           (1, 0, 'tool_use', NULL, 'last', 'bash', '{}'),
           (2, 0, 'tool_result', 'out', 'last', NULL, NULL);",
        "user",
    );
}

#[test]
fn a_call_without_an_id_gets_one_so_that_its_tombstone_matches_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("other.db");
    let conn = Connection::open(&db).expect("open");
    conn.execute_batch(MINIMUM_SCHEMA).expect("schema");
    conn.execute_batch(
        "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES
           (1, 's', 1, 0, 'user', '2024-01-01T00:00:00Z'), (2, 's', 2, 0, 'assistant', '2024-01-01T00:00:00Z'),
           (3, 's', 3, 0, 'tool', '2024-01-01T00:00:00Z'), (4, 's', 4, 1, 'user', '2024-01-01T00:00:00Z'),
           (5, 's', 5, 1, 'assistant', '2024-01-01T00:00:00Z');
         INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input) VALUES
           (1, 0, 'text', 'hi', NULL, NULL, NULL),
           (2, 0, 'tool_use', NULL, NULL, 'bash', '{}'),
           (3, 0, 'tool_result', 'out', NULL, NULL, NULL),
           (4, 0, 'text', 'again', NULL, NULL, NULL),
           (5, 0, 'tool_use', NULL, NULL, 'bash', '{}');",
    )
    .expect("rows");
    drop(conn);
    assert!(!violations(&db).is_empty());

    let (code, report) = run(&db, &["--dry-run"]);
    assert_eq!(code, 1, "{report}");
    let (code, report) = run(&db, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(violations(&db), Vec::<String>::new());
    let conn = Connection::open(&db).expect("reopen");
    let no_id: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM parts WHERE kind IN ('tool_use', 'tool_result')
             AND COALESCE(tool_use_id, '') = ''",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(no_id, 0, "a call or result without an id is left");
    let kept: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM parts WHERE kind = 'text' AND text LIKE '%' || char(10) || 'out'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(kept, 1, "the result without an id is kept as text");
    drop(conn);
    let (code, report) = run(&db, &["--dry-run"]);
    assert_eq!(code, 0, "{report}");
    let before = dump(&db);
    run(&db, &[]);
    assert_eq!(dump(&db), before, "a second run changed something");
}

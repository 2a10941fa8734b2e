//! Shared helpers: temporary stores, logical dumps, and the contract's invariants as SQL.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use session_store::{Store, StoreOptions};
use tempfile::TempDir;

/// The real transcripts copied into the repository (`tests/fixtures/transcripts/`, sources
/// and licences in its `SOURCES.md` and `LICENSES.md`): tests read nothing outside the
/// repository.
pub fn transcripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts")
}

/// A store in a fresh temporary directory; keep the `TempDir` alive as long as the store.
pub fn temp_store() -> (TempDir, Store, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sessions.db");
    let store = Store::open_with(&path, &StoreOptions::default()).expect("open store");
    (dir, store, path)
}

/// A new session of `store` holding `messages`, appended in one transaction.
pub fn session_with(
    store: &Store,
    messages: Vec<session_store::NewMessage>,
) -> session_store::SessionId {
    let session = store.create_session().expect("session");
    store.append_batch(&session, messages).expect("append");
    session
}

/// A store at `db` (created) holding one session of one exchange, a user's "hello" and the
/// assistant's "hi": the smallest healthy session, for tests that then edit or export it.
pub fn one_exchange(db: &Path) -> (Store, session_store::SessionId) {
    let store = Store::open(db).expect("open");
    let session = session_with(
        &store,
        vec![
            session_store::NewMessage::user("hello"),
            session_store::NewMessage::assistant(vec![session_store::Part::text("hi")]),
        ],
    );
    (store, session)
}

/// Call after dropping a store whose file a test then compares byte for byte. r2d2 closes
/// pooled connections on its worker thread, which may still hold the pool a moment after the
/// store is dropped, and the last close checkpoints the write-ahead log into the file: a
/// checkpoint here first leaves that late close nothing to write.
pub fn settle(path: &Path) {
    Connection::open(path)
        .and_then(|conn| conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())))
        .expect("checkpoint");
}

/// A raw read-only connection beside the store's pool.
/// The shipped migrations, in order (index 0 is V1), as an older build applied them.
const SHIPPED_MIGRATIONS: [&str; 12] = [
    include_str!("../migrations/V1__initial_schema.sql"),
    include_str!("../migrations/V2__turns_compaction_revert.sql"),
    include_str!("../migrations/V3__thinking_latch.sql"),
    include_str!("../migrations/V4__repair_log_and_forensic_views.sql"),
    include_str!("../migrations/V5__dangling_outside_assistant_and_idless_calls.sql"),
    include_str!("../migrations/V6__view_definitions.sql"),
    include_str!("../migrations/V7__part_kinds_model_title.sql"),
    include_str!("../migrations/V8__fork_usage_search.sql"),
    include_str!("../migrations/V9__idempotency_keys_thinking_mark_tool_use_index.sql"),
    include_str!("../migrations/V10__session_tail_state.sql"),
    include_str!("../migrations/V11__search_index.sql"),
    include_str!("../migrations/V12__search_index_deferred.sql"),
];

/// A database at `dir/name` as an older build left it at `version` (1 to 12): V1..V`version`
/// applied, with the history rows this build records for them (copied from a fresh
/// database), and none of the views a later build adds. Returns it open (WAL), for the
/// caller to write rows before `Store::open` migrates it.
pub fn database_at(dir: &Path, name: &str, version: usize) -> (PathBuf, Connection) {
    let current = dir.join(format!("{name}.current.db"));
    drop(Store::open(&current).expect("a current database"));
    let path = dir.join(name);
    let conn = Connection::open(&path).expect("create");
    conn.execute_batch("PRAGMA journal_mode = WAL")
        .expect("wal");
    for sql in &SHIPPED_MIGRATIONS[..version] {
        conn.execute_batch(sql).expect("old migration");
    }
    conn.execute(
        "ATTACH DATABASE ?1 AS current",
        [current.to_str().expect("utf-8")],
    )
    .expect("attach");
    conn.execute_batch(&format!(
        "CREATE TABLE refinery_schema_history AS
             SELECT * FROM current.refinery_schema_history WHERE version <= {version};
         DETACH DATABASE current;"
    ))
    .expect("history");
    (path, conn)
}

pub fn raw(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("raw connection")
}

/// Every row of every table, in a stable order: two dumps are equal iff the contents are.
pub fn dump(path: &Path) -> String {
    dump_in(&raw(path))
}

/// [`dump`] over an open connection.
pub fn dump_in(conn: &Connection) -> String {
    let mut out = String::new();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("list tables");
    for table in tables {
        out.push_str(&format!("-- {table}\n"));
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM \"{table}\" ORDER BY 1"))
            .expect("select");
        let columns = stmt.column_count();
        let mut rows = stmt.query([]).expect("query");
        while let Some(row) = rows.next().expect("row") {
            let values: Vec<String> = (0..columns)
                .map(|i| format!("{:?}", row.get_ref(i).expect("value")))
                .collect();
            out.push_str(&values.join("|"));
            out.push('\n');
        }
    }
    out
}

/// The contract's invariants of a healthy session, one SQL query per rule, each returning
/// a row per violation. Pending tool_uses (no user or assistant message after their
/// assistant message) are legal; a call has one answer (a second result for it in its tool
/// block is an orphan). Written independently of the forensic views, as an oracle.
pub const INVARIANTS: &[(&str, &str)] = &[
    (
        "turn_index_mismatch",
        "WITH c AS (SELECT session_id, seq, turn_index,
                      SUM(role = 'user') OVER (PARTITION BY session_id ORDER BY seq) AS users
                    FROM messages)
         SELECT session_id, seq FROM c WHERE turn_index != MAX(users - 1, 0)",
    ),
    (
        "split_turn_compaction",
        "SELECT session_id, turn_index FROM messages GROUP BY session_id, turn_index
         HAVING MIN(compacted) != MAX(compacted)",
    ),
    (
        "compaction_gap",
        "SELECT session_id, MAX(CASE WHEN compacted = 1 THEN turn_index END) FROM messages
         GROUP BY session_id
         HAVING MAX(CASE WHEN compacted = 1 THEN turn_index END)
              > MIN(CASE WHEN compacted = 0 THEN turn_index END)",
    ),
    (
        "dangling_tool_use",
        "SELECT a.session_id, p.tool_use_id FROM parts p JOIN messages a ON a.id = p.message_id
         WHERE p.kind = 'tool_use'
           AND (a.role <> 'assistant' OR COALESCE(p.tool_use_id, '') = '' OR EXISTS (SELECT 1 FROM messages n WHERE n.session_id = a.session_id AND n.seq > a.seq
                       AND n.role IN ('user', 'assistant'))
           AND NOT EXISTS (
               SELECT 1 FROM messages r JOIN parts q ON q.message_id = r.id
               WHERE r.session_id = a.session_id AND r.role = 'tool' AND r.seq > a.seq
                 AND r.seq < (SELECT MIN(n.seq) FROM messages n WHERE n.session_id = a.session_id
                              AND n.seq > a.seq AND n.role IN ('user', 'assistant'))
                 AND q.kind = 'tool_result' AND q.tool_use_id = p.tool_use_id))",
    ),
    (
        "orphan_tool_result",
        "SELECT r.session_id, q.tool_use_id FROM parts q JOIN messages r ON r.id = q.message_id
         WHERE q.kind = 'tool_result' AND r.role = 'tool'
           AND (COALESCE(q.tool_use_id, '') = '' OR NOT EXISTS (
               SELECT 1 FROM messages a JOIN parts p ON p.message_id = a.id
               WHERE a.session_id = r.session_id AND a.role = 'assistant'
                 AND a.seq = (SELECT MAX(s.seq) FROM messages s WHERE s.session_id = r.session_id
                              AND s.seq < r.seq AND s.role IN ('user', 'assistant'))
                 AND p.kind = 'tool_use' AND p.tool_use_id = q.tool_use_id))
         UNION ALL
         -- A call has one answer: a later result for the same id in the same tool block
         -- (no user or assistant message between the two) answers nothing. (Counted per id:
         -- where one message calls an id twice, the rows differ from the check's, in a session
         -- that breaks duplicate_tool_use_id anyway.)
         SELECT r.session_id, q.tool_use_id FROM parts q JOIN messages r ON r.id = q.message_id
         WHERE q.kind = 'tool_result' AND r.role = 'tool' AND COALESCE(q.tool_use_id, '') <> ''
           AND EXISTS (
               SELECT 1 FROM parts e JOIN messages em ON em.id = e.message_id
               WHERE em.session_id = r.session_id AND em.role = 'tool' AND e.kind = 'tool_result'
                 AND e.tool_use_id = q.tool_use_id
                 AND (em.seq < r.seq OR (em.seq = r.seq AND e.ordinal < q.ordinal))
                 AND NOT EXISTS (SELECT 1 FROM messages s WHERE s.session_id = r.session_id
                                 AND s.seq > em.seq AND s.seq < r.seq AND s.role IN ('user', 'assistant')))",
    ),
    (
        "duplicate_tool_use_id",
        "SELECT m.session_id, p.tool_use_id FROM parts p JOIN messages m ON m.id = p.message_id
         WHERE p.kind = 'tool_use' GROUP BY m.session_id, p.tool_use_id HAVING COUNT(*) > 1",
    ),
    (
        "misplaced_tool_result",
        "SELECT m.session_id, m.seq FROM parts p JOIN messages m ON m.id = p.message_id
         WHERE p.kind = 'tool_result' AND m.role != 'tool'",
    ),
];

/// Every violation of the contract's invariants in the database, as `rule: row`.
pub fn violations(path: &Path) -> Vec<String> {
    violations_in(&raw(path))
}

/// [`violations`] over an open connection (inside the caller's transaction, if any).
pub fn violations_in(conn: &Connection) -> Vec<String> {
    let mut found = Vec::new();
    for (rule, sql) in INVARIANTS {
        let mut stmt = conn.prepare(sql).expect("invariant query");
        let rows: Vec<String> = stmt
            .query_map([], |r| {
                Ok(format!("{:?} {:?}", r.get_ref(0)?, r.get_ref(1)?))
            })
            .expect("run invariant")
            .collect::<Result<_, _>>()
            .expect("rows");
        found.extend(rows.into_iter().map(|row| format!("{rule}: {row}")));
    }
    found
}

/// The SQL statement of the invariants must itself catch each broken shape, or the property
/// tests that rely on it prove nothing.
#[test]
fn invariant_queries_catch_every_broken_shape() {
    let (_dir, store, path) = temp_store();
    drop(store);
    let conn = Connection::open(&path).expect("raw rw");
    conn.execute_batch(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
         -- turn 0: compacted user, uncompacted assistant (split), dangling call d1
         INSERT INTO messages (id, session_id, seq, turn_index, role, compacted, created_at) VALUES
           (1, 's', 1, 0, 'user', 1, 't'), (2, 's', 2, 0, 'assistant', 0, 't'),
         -- turn 1: wrong index 5, results in a user message, orphan result, duplicate id
           (3, 's', 3, 5, 'user', 0, 't'), (4, 's', 4, 1, 'assistant', 0, 't'),
           (5, 's', 5, 1, 'tool', 0, 't'),
         -- turn 2: compacted after an uncompacted turn (gap)
           (6, 's', 6, 2, 'user', 1, 't');
         INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input) VALUES
           (1, 0, 'text', 'hi', NULL, NULL, NULL),
           (2, 0, 'tool_use', NULL, 'd1', 'bash', '{}'),
           (3, 0, 'tool_result', 'x', 'd1', NULL, NULL),
           (4, 0, 'tool_use', NULL, 'd1', 'bash', '{}'),
           (5, 0, 'tool_result', 'y', 'zz', NULL, NULL),
           (5, 1, 'tool_result', 'y', 'd1', NULL, NULL),
           (6, 0, 'text', 'again', NULL, NULL, NULL);",
    )
    .expect("broken rows");
    drop(conn);
    let found = violations(&path);
    for (rule, _) in INVARIANTS {
        assert!(
            found.iter().any(|v| v.starts_with(rule)),
            "{rule} not caught in {found:?}"
        );
    }
}

/// A call has one answer: the oracle calls a second result for it in the same tool block an
/// orphan, and a result for the same id after the next assistant message is not a second
/// answer to the first call (it is an orphan for its own reason, or an answer of a new call).
#[test]
fn invariant_queries_call_a_second_answer_an_orphan() {
    let (_dir, store, path) = temp_store();
    drop(store);
    let conn = Connection::open(&path).expect("raw rw");
    conn.execute_batch(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES
           ('twice', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
           ('once', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
         INSERT INTO messages (id, session_id, seq, turn_index, role, compacted, created_at) VALUES
           (1, 'twice', 1, 0, 'user', 0, 't'), (2, 'twice', 2, 0, 'assistant', 0, 't'),
           (3, 'twice', 3, 0, 'tool', 0, 't'), (4, 'twice', 4, 0, 'system', 0, 't'),
           (5, 'twice', 5, 0, 'tool', 0, 't'),
           (6, 'once', 1, 0, 'user', 0, 't'), (7, 'once', 2, 0, 'assistant', 0, 't'),
           (8, 'once', 3, 0, 'tool', 0, 't');
         INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id) VALUES
           (1, 0, 'text', 'hi', NULL), (2, 0, 'tool_use', NULL, 'a'),
           (3, 0, 'tool_result', 'first', 'a'), (4, 0, 'text', 'note', NULL),
           (5, 0, 'tool_result', 'second', 'a'),
           (6, 0, 'text', 'hi', NULL), (7, 0, 'tool_use', NULL, 'a'),
           (8, 0, 'tool_result', 'only', 'a');",
    )
    .expect("rows");
    drop(conn);
    let found = violations(&path);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("orphan_tool_result: "), "{found:?}");
    let twice = format!("{:?}", rusqlite::types::ValueRef::from("twice"));
    assert!(found[0].contains(&twice), "{found:?}");
}

/// Runs `session-store --db DB ARGS...` as a process, with neither `SESSION_STORE_DB` nor
/// `RUST_LOG` from the environment.
pub fn session_store(db: &Path, args: &[&str]) -> std::process::Output {
    tool(env!("CARGO_BIN_EXE_session-store"), db, args)
}

/// `store-repair --db DB ARGS...` as a process, `$SESSION_STORE_DB` and `$RUST_LOG` unset.
pub fn store_repair(db: &Path, args: &[&str]) -> std::process::Output {
    tool(env!("CARGO_BIN_EXE_store-repair"), db, args)
}

/// One of the binaries, `BIN --db DB ARGS...`, `$SESSION_STORE_DB` and `$RUST_LOG` unset.
fn tool(bin: &str, db: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(bin)
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("SESSION_STORE_DB")
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|error| panic!("{bin} runs: {error}"))
}

/// The stdout of a [`session_store`] run that must succeed (its stderr in the failure).
pub fn session_store_ok(db: &Path, args: &[&str]) -> String {
    let output = session_store(db, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

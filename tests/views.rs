//! The forensic views as the store keeps them: recreated from `store/views.sql` when a
//! writable open finds them made from other SQL (a changed hash, a view dropped or replaced
//! by hand, a view a newer SQL no longer has, a database from before V6), left alone by a
//! read-only open and on a file SQLite cannot write (which still opens); every problem row
//! carrying a `detail` (V5's dangling view gave NULL for exactly the id-less calls it was
//! for); a second answer to one call reported as an orphan, and each result taking one call
//! as the library's walk pairs them; every owned view reading one session through the
//! indexes when asked about one session; and `SELECT * FROM problems` staying linear on one
//! message of thousands of calls (parallel ids, one shared id, no ids), where the old
//! per-part subqueries were quadratic.

use std::path::Path;

use rusqlite::{params, Connection};
use session_store::{latest_schema_version, Store, StoreOptions};

const AT: &str = "2026-01-01T00:00:00.000000Z";

/// A fresh migrated database; the store is closed again.
fn fresh(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("views.db");
    drop(Store::open(&path).expect("open"));
    path
}

/// One part: (kind, tool_use_id).
type RawPart<'a> = (&'a str, Option<&'a str>);
/// One message: (role, parts).
type RawMessage<'a> = (&'a str, &'a [RawPart<'a>]);

/// Writes one session of (role, parts) with raw SQL and the contract's turn indexes; a part is
/// (kind, tool_use_id).
fn session(conn: &Connection, id: &str, messages: &[RawMessage<'_>]) {
    conn.execute(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES (?1, ?2, ?2)",
        params![id, AT],
    )
    .expect("session");
    let mut users = 0i64;
    for (n, (role, parts)) in messages.iter().enumerate() {
        users += i64::from(*role == "user");
        conn.execute(
            "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, n as i64 + 1, (users - 1).max(0), role, AT],
        )
        .expect("message");
        let message = conn.last_insert_rowid();
        for (ordinal, (kind, tool_use_id)) in parts.iter().enumerate() {
            conn.execute(
                "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input)
                 VALUES (?1, ?2, ?3, 'x', ?4, 'bash', '{}')",
                params![message, ordinal as i64, kind, tool_use_id],
            )
            .expect("part");
        }
    }
}

/// (rule, seq, part, detail) of every problem of a session, in order.
fn problems(conn: &Connection, session: &str) -> Vec<(String, i64, Option<i64>, Option<String>)> {
    let mut stmt = conn
        .prepare(
            "SELECT rule, seq, part, detail FROM problems WHERE session_id = ?1
             ORDER BY seq, part, rule",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([session], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .expect("query");
    rows.collect::<rusqlite::Result<_>>().expect("rows")
}

fn recorded_hashes(conn: &Connection) -> Vec<(String, String)> {
    let mut stmt = conn
        .prepare("SELECT name, hash FROM store_views ORDER BY name")
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query");
    rows.collect::<rusqlite::Result<_>>().expect("rows")
}

fn view_sql(conn: &Connection, name: &str) -> Option<String> {
    conn.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?1",
        [name],
        |r| r.get(0),
    )
    .ok()
}

const USE: &str = "tool_use";
const RESULT: &str = "tool_result";
const TEXT: &str = "text";

#[test]
fn a_second_answer_to_one_call_is_an_orphan_and_the_first_one_answers_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    let conn = Connection::open(&path).expect("raw");
    session(
        &conn,
        "twice",
        &[
            ("user", &[(TEXT, None)]),
            ("assistant", &[(USE, Some("a")), (USE, Some("b"))]),
            ("tool", &[(RESULT, Some("a"))]),
            ("system", &[(TEXT, None)]),
            ("tool", &[(RESULT, Some("b")), (RESULT, Some("a"))]),
            ("assistant", &[(TEXT, None)]),
        ],
    );
    let found = problems(&conn, "twice");
    assert_eq!(found.len(), 1, "{found:?}");
    let (rule, seq, part, detail) = &found[0];
    assert_eq!(
        (rule.as_str(), *seq, *part),
        ("orphan_tool_result", 5, Some(1))
    );
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d.contains("answered already")),
        "{detail:?}"
    );
    let answered: Vec<(String, i64)> = conn
        .prepare("SELECT tool_use_id, answered FROM tool_calls ORDER BY part")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("tool_calls");
    assert_eq!(answered, [("a".to_owned(), 1), ("b".to_owned(), 1)]);
}

/// Pairing as the library's walk reads it: each result takes the first call with its id not
/// taken yet, in its tool block or in the user message that closes it; a result with no call
/// left is an orphan. The views and `Store::check` name the same rows.
#[test]
fn each_result_takes_one_call_as_the_walk_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    let conn = Connection::open(&path).expect("raw");
    // One id called twice, answered once, block closed: the second call is dangling.
    session(
        &conn,
        "queue",
        &[
            ("user", &[(TEXT, None)]),
            ("assistant", &[(USE, Some("a")), (USE, Some("a"))]),
            ("tool", &[(RESULT, Some("a"))]),
            ("user", &[(TEXT, None)]),
        ],
    );
    // A result in the closing user message after the call was answered: an orphan too.
    session(
        &conn,
        "user-after-answer",
        &[
            ("user", &[(TEXT, None)]),
            ("assistant", &[(USE, Some("a"))]),
            ("tool", &[(RESULT, Some("a"))]),
            ("user", &[(RESULT, Some("a")), (TEXT, None)]),
        ],
    );
    // The call's only result sits in the user message: misplaced, and the call dangling.
    session(
        &conn,
        "from-user",
        &[
            ("user", &[(TEXT, None)]),
            ("assistant", &[(USE, Some("a"))]),
            ("user", &[(RESULT, Some("a")), (TEXT, None)]),
        ],
    );
    let rows = |session: &str| -> Vec<(String, i64, Option<i64>)> {
        problems(&conn, session)
            .into_iter()
            .map(|(rule, seq, part, _)| (rule, seq, part))
            .collect()
    };
    let row = |rule: &str, seq: i64, part: i64| (rule.to_owned(), seq, Some(part));
    assert_eq!(
        rows("queue"),
        [
            row("dangling_tool_use", 2, 1),
            row("duplicate_tool_use_id", 2, 1)
        ]
    );
    assert_eq!(
        rows("user-after-answer"),
        [
            row("misplaced_tool_result", 4, 0),
            row("orphan_tool_result", 4, 0)
        ]
    );
    assert_eq!(
        rows("from-user"),
        [
            row("dangling_tool_use", 2, 0),
            row("misplaced_tool_result", 3, 0)
        ]
    );
    let detail = &problems(&conn, "from-user")[0].3;
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d.contains("user message")),
        "{detail:?}"
    );

    let store = Store::open(&path).expect("open");
    let report = store
        .check(&[], &session_store::repair::RepairOptions::default())
        .expect("check");
    for session in ["queue", "user-after-answer", "from-user"] {
        let mut library: Vec<(String, i64, Option<i64>)> = report
            .violations
            .iter()
            .filter(|v| v.session_id.as_str() == session)
            .map(|v| {
                (
                    v.rule.to_string(),
                    v.seq.unwrap_or_default(),
                    v.part.map(|p| p as i64),
                )
            })
            .collect();
        library.sort_by(|a, b| (a.1, a.2, &a.0).cmp(&(b.1, b.2, &b.0)));
        assert_eq!(rows(session), library, "{session}");
    }
}

#[test]
fn id_less_and_misplaced_calls_are_dangling_with_a_detail_never_pending() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    let conn = Connection::open(&path).expect("raw");
    // An id-less call answered by an id-less result, then an id-less call at the very end,
    // and a call in a user message at the end: none is answered, none is pending.
    session(
        &conn,
        "idless",
        &[
            ("user", &[(TEXT, None)]),
            ("assistant", &[(USE, None)]),
            ("tool", &[(RESULT, None)]),
            ("assistant", &[(USE, Some(""))]),
        ],
    );
    session(
        &conn,
        "user-call",
        &[("user", &[(TEXT, None), (USE, Some("u"))])],
    );
    let idless = problems(&conn, "idless");
    let rules: Vec<(&str, i64)> = idless.iter().map(|p| (p.0.as_str(), p.1)).collect();
    assert_eq!(
        rules,
        [
            ("dangling_tool_use", 2),
            ("orphan_tool_result", 3),
            ("dangling_tool_use", 4),
        ]
    );
    let user_call = problems(&conn, "user-call");
    assert_eq!(user_call.len(), 1);
    assert_eq!(user_call[0].0, "dangling_tool_use");
    for (rule, seq, _, detail) in idless.iter().chain(&user_call) {
        assert!(
            detail.as_deref().is_some_and(|d| !d.is_empty()),
            "{rule} at seq {seq} has no detail"
        );
    }
    let pending: i64 = conn
        .query_row("SELECT COUNT(*) FROM tool_calls WHERE pending", [], |r| {
            r.get(0)
        })
        .expect("pending");
    assert_eq!(pending, 0);
    let turns_pending: i64 = conn
        .query_row("SELECT SUM(pending_calls) FROM session_turns", [], |r| {
            r.get(0)
        })
        .expect("session_turns");
    assert_eq!(turns_pending, 0);
}

#[test]
fn pending_calls_are_listed_not_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    let conn = Connection::open(&path).expect("raw");
    session(
        &conn,
        "pending",
        &[
            ("user", &[(TEXT, None)]),
            ("assistant", &[(USE, Some("a")), (USE, Some("b"))]),
            ("system", &[(TEXT, None)]),
            ("tool", &[(RESULT, Some("a"))]),
        ],
    );
    assert_eq!(problems(&conn, "pending"), []);
    let state: Vec<(String, i64, i64, i64)> = conn
        .prepare("SELECT tool_use_id, answered, at_end, pending FROM tool_calls ORDER BY part")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect()
        })
        .expect("tool_calls");
    assert_eq!(state, [("a".into(), 1, 1, 0), ("b".into(), 0, 1, 1)]);
    let turns: Vec<(i64, i64)> = conn
        .prepare("SELECT turn, pending_calls FROM session_turns ORDER BY turn")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("session_turns");
    assert_eq!(turns, [(0, 1)]);
}

#[test]
fn views_made_from_other_sql_are_recreated_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    let (hashes, problems_sql) = {
        let conn = Connection::open(&path).expect("raw");
        (recorded_hashes(&conn), view_sql(&conn, "problems"))
    };
    assert!(hashes.len() >= 15, "{hashes:?}");
    assert!(problems_sql.is_some());

    // Another build's views: another hash, one view replaced by hand, one dropped, and a
    // view that build owned but this one does not have.
    {
        let conn = Connection::open(&path).expect("raw");
        conn.execute_batch(
            "UPDATE store_views SET hash = 'from-another-build';
             DROP VIEW problems; CREATE VIEW problems AS SELECT 1 AS stale;
             DROP VIEW tombstones;
             CREATE VIEW retired_view AS SELECT 1 AS gone;
             INSERT INTO store_views (name, hash) VALUES ('retired_view', 'from-another-build');",
        )
        .expect("stale views");
    }
    drop(Store::open(&path).expect("reopen"));
    let conn = Connection::open(&path).expect("raw");
    assert_eq!(recorded_hashes(&conn), hashes);
    assert_eq!(view_sql(&conn, "problems"), problems_sql);
    assert!(view_sql(&conn, "tombstones").is_some());
    assert_eq!(view_sql(&conn, "retired_view"), None);

    // A view dropped by hand while the hash still matches comes back too.
    conn.execute_batch("DROP VIEW session_turns").expect("drop");
    drop(Store::open(&path).expect("reopen"));
    assert!(view_sql(&conn, "session_turns").is_some());
}

#[test]
fn a_read_only_open_keeps_stale_views_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    {
        let conn = Connection::open(&path).expect("raw");
        conn.execute_batch("UPDATE store_views SET hash = 'from-another-build'")
            .expect("stale");
    }
    let bytes = std::fs::read(&path).expect("read");
    let options = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    let store = Store::open_with(&path, &options).expect("read-only open");
    assert!(store.session_ids().expect("reads").is_empty());
    drop(store);
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    let conn = Connection::open(&path).expect("raw");
    assert!(recorded_hashes(&conn)
        .iter()
        .all(|(_, hash)| hash == "from-another-build"));
}

/// Clears the immutable attribute again, even when the test fails, so the tempdir goes away.
struct Immutable<'a>(&'a Path);

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(self.0)
            .status();
    }
}

/// A file SQLite cannot write, opened for writing, with views from another build: the open
/// succeeds (SQLite falls back to reading), reads work, and the views stay as they are.
#[test]
fn a_write_protected_file_with_stale_views_still_opens() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    {
        let conn = Connection::open(&path).expect("raw");
        conn.execute_batch("UPDATE store_views SET hash = 'from-another-build'")
            .expect("stale");
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let writable = || std::fs::OpenOptions::new().write(true).open(&path).is_ok();
    let _guard = if writable() {
        // Root ignores permission bits: the immutable attribute, where it works.
        let set = std::process::Command::new("chattr")
            .arg("+i")
            .arg(&path)
            .status()
            .is_ok_and(|s| s.success());
        let guard = Immutable(&path);
        if !set || writable() {
            eprintln!("a_write_protected_file_with_stale_views_still_opens: cannot write-protect a file here; skipped");
            return;
        }
        Some(guard)
    } else {
        None
    };
    let bytes = std::fs::read(&path).expect("read");
    let store = Store::open(&path).expect("open of a write-protected file");
    assert!(store.session_ids().expect("reads").is_empty());
    drop(store);
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    let conn = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("raw read-only");
    assert!(recorded_hashes(&conn)
        .iter()
        .all(|(_, hash)| hash == "from-another-build"));
}

/// A database as the last build before V6 left it: V1..V5 applied, their views (V5's
/// dangling view gives no detail for an id-less call). Opening it applies V6 and replaces
/// the views in the same transaction.
#[test]
fn a_v5_database_gets_this_builds_views_with_v6() {
    let dir = tempfile::tempdir().expect("tempdir");
    let current = fresh(dir.path());
    let old = dir.path().join("v5.db");
    {
        let (_, conn) = crate::util::database_at(dir.path(), "v5.db", 5);
        session(
            &conn,
            "idless",
            &[
                ("user", &[(TEXT, None)]),
                ("assistant", &[(USE, None)]),
                ("user", &[(TEXT, None)]),
            ],
        );
        let detail: Option<String> = conn
            .query_row("SELECT detail FROM problem_dangling_tool_use", [], |r| {
                r.get(0)
            })
            .expect("V5 view");
        assert_eq!(detail, None, "V5's view, as shipped");
    }
    drop(Store::open(&old).expect("migrates"));
    let conn = Connection::open(&old).expect("raw");
    let version: i64 = conn
        .query_row(
            "SELECT MAX(version) FROM refinery_schema_history",
            [],
            |r| r.get(0),
        )
        .expect("version");
    assert_eq!(version, latest_schema_version());
    assert_eq!(
        recorded_hashes(&conn),
        recorded_hashes(&Connection::open(&current).expect("raw"))
    );
    let found = problems(&conn, "idless");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "dangling_tool_use");
    assert!(found[0].3.as_deref().is_some_and(|d| d.contains("no id")));
}

/// Every view the store owns, asked about one session, reads that session through the
/// indexes: a full scan of a base table would compute every session first (a minute on a
/// database of millions of messages, not a moment). `views.sql` names the base tables
/// `messages m`, `parts p` and `repair_log`.
#[test]
fn every_owned_view_reads_one_session_through_the_indexes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fresh(dir.path());
    let conn = Connection::open(&path).expect("raw");
    let names: Vec<String> = recorded_hashes(&conn).into_iter().map(|(n, _)| n).collect();
    assert!(names.len() >= 15, "{names:?}");
    for view in names {
        let plan: Vec<String> = conn
            .prepare(&format!(
                "EXPLAIN QUERY PLAN SELECT * FROM \"{view}\" WHERE session_id = ?1"
            ))
            .and_then(|mut s| s.query_map(["s"], |r| r.get::<_, String>(3))?.collect())
            .expect("plan");
        let scans: Vec<&String> = plan
            .iter()
            .filter(|d| {
                let mut words = d.split_whitespace();
                words.next() == Some("SCAN")
                    && words
                        .next()
                        .is_some_and(|t| ["messages", "parts", "repair_log", "m", "p"].contains(&t))
            })
            .collect();
        assert!(scans.is_empty(), "{view}: {scans:?}\n{plan:#?}");
    }
}

/// The calls of one assistant message and their results in one tool message, `n` of each,
/// then a user message (so nothing is pending). `id` names the k-th call.
fn one_big_message(path: &Path, n: i64, id: &str) {
    let conn = Connection::open(path).expect("raw");
    conn.execute_batch(&format!(
        "BEGIN;
         INSERT INTO sessions (id, created_at, updated_at) VALUES ('big', '{AT}', '{AT}');
         INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES
             (1, 'big', 1, 0, 'user', '{AT}'), (2, 'big', 2, 0, 'assistant', '{AT}'),
             (3, 'big', 3, 0, 'tool', '{AT}'), (4, 'big', 4, 1, 'user', '{AT}');
         INSERT INTO parts (message_id, ordinal, kind, text) VALUES (1, 0, 'text', 'go'), (4, 0, 'text', 'next');
         INSERT INTO parts (message_id, ordinal, kind, tool_use_id, tool_name, input)
             WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n < {last})
             SELECT 2, n, 'tool_use', {id}, 'bash', '{{}}' FROM k;
         INSERT INTO parts (message_id, ordinal, kind, tool_use_id, text)
             WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n < {last})
             SELECT 3, n, 'tool_result', {id}, 'ok' FROM k;
         COMMIT;",
        last = n - 1
    ))
    .expect("big message");
}

/// The view's count over `path`, and the work SQLite did for it: the virtual machine steps
/// of the one statement (the view is evaluated inside it), which count every row visited
/// and every comparison, the same on every machine and under any load.
fn problems_and_steps(path: &Path) -> (i64, i32) {
    let conn = Connection::open(path).expect("raw");
    let mut stmt = conn
        .prepare("SELECT count(*) FROM problems")
        .expect("prepare");
    let count = stmt.query_row([], |r| r.get(0)).expect("count");
    (count, stmt.get_status(rusqlite::StatementStatus::VmStep))
}

#[test]
fn problems_stay_linear_on_one_message_of_thousands_of_calls() {
    const SMALL: i64 = 2_000;
    const LARGE: i64 = 16_000;
    // (shape, SQL for the k-th id, problems for n calls)
    type Expected = fn(i64) -> i64;
    let shapes: [(&str, &str, Expected); 3] = [
        ("parallel ids", "'call_' || n", |_| 0),
        // Every call after the first reuses the id (each result still takes a call of its own).
        ("one shared id", "'same'", |n| n - 1),
        // No call can be answered, no result answers.
        ("no ids", "NULL", |n| 2 * n),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let template = fresh(dir.path());
    for (shape, id, expected) in shapes {
        let mut steps = Vec::new();
        for n in [SMALL, LARGE] {
            let path = dir
                .path()
                .join(format!("{}-{n}.db", shape.replace(' ', "-")));
            std::fs::copy(&template, &path).expect("copy");
            one_big_message(&path, n, id);
            let (count, step_count) = problems_and_steps(&path);
            assert_eq!(count, expected(n), "{shape}, n = {n}");
            steps.push(f64::from(step_count.max(1)));
        }
        // Eight times the calls: linear work grows 8 times, quadratic 64 times.
        let ratio = steps[1] / steps[0];
        eprintln!("problems over one message, {shape}: VM steps {steps:?}, ratio {ratio:.1}");
        assert!(
            ratio < 16.0,
            "{shape}: {LARGE} calls took {ratio:.1} times the steps of {SMALL}: not linear ({steps:?})"
        );
    }
}

//! The README's forensic queries, run exactly as written against a generated broken database,
//! before and after `store-repair`: a query that no longer parses, a view that drifted from
//! the contract, or an answer that is wrong fails here. Each query runs through the bundled
//! SQLite, and through Debian's stock `sqlite3` shell as well where it is installed (CI),
//! which must give the same rows: a fresh clone with only a Rust toolchain runs this test too.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::broken_db;

/// The ```sql blocks of the README's Forensics section, by their first-line comment.
fn readme_queries() -> BTreeMap<String, String> {
    let readme = include_str!("../README.md");
    let section = readme
        .split("\n## Forensics")
        .nth(1)
        .expect("README has a Forensics section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut queries = BTreeMap::new();
    for block in section.split("```sql\n").skip(1) {
        let sql = block.split("```").next().expect("closed block");
        let title = sql
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("-- "))
            .expect("each query starts with a -- title");
        queries.insert(title.to_owned(), sql.to_owned());
    }
    queries
}

fn query<'a>(queries: &'a BTreeMap<String, String>, title_has: &str) -> &'a str {
    let found: Vec<_> = queries
        .iter()
        .filter(|(title, _)| title.contains(title_has))
        .collect();
    assert_eq!(found.len(), 1, "one README query titled like {title_has:?}");
    found[0].1
}

/// Runs one README query after setting the parameters, through the bundled SQLite and,
/// where it is installed, through the stock `sqlite3` shell as well; both must give the same
/// rows. A fresh clone with only a Rust toolchain runs the bundled half; CI installs the
/// shell and sets `SESSION_STORE_REQUIRE_SQLITE3=1` so that the shell half cannot be skipped
/// there unnoticed.
fn run(db: &Path, sql: &str, session: &str, turn: i64, tool_use_id: &str) -> Vec<Value> {
    let bundled = run_bundled(db, sql, session, turn, tool_use_id);
    if let Some(shell) = run_shell(db, sql, session, turn, tool_use_id) {
        assert_eq!(
            shell, bundled,
            "{sql}\nthe sqlite3 shell and the bundled SQLite disagree"
        );
    }
    bundled
}

/// True when the `sqlite3` shell can be started.
fn shell_installed() -> bool {
    Command::new("sqlite3")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The query through the bundled SQLite, rows shaped like `sqlite3 -json` prints them: one
/// object per row, column names as keys, integers and reals as numbers, NULL as null.
fn run_bundled(db: &Path, sql: &str, session: &str, turn: i64, tool_use_id: &str) -> Vec<Value> {
    let conn = rusqlite::Connection::open(db).expect("open with the bundled SQLite");
    let mut stmt = conn
        .prepare(sql)
        .unwrap_or_else(|e| panic!("{sql}\ndoes not parse: {e}"));
    for index in 1..=stmt.parameter_count() {
        let value: rusqlite::types::Value = match stmt.parameter_name(index) {
            Some(":session") => session.to_owned().into(),
            Some(":turn") => turn.into(),
            Some(":tool_use_id") => tool_use_id.to_owned().into(),
            other => panic!("{sql}\nuses a parameter the README does not set: {other:?}"),
        };
        stmt.raw_bind_parameter(index, value).expect("bind");
    }
    let names: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let mut rows = stmt.raw_query();
    let mut found = Vec::new();
    while let Some(row) = rows.next().unwrap_or_else(|e| panic!("{sql}\nfailed: {e}")) {
        let mut object = serde_json::Map::new();
        for (index, name) in names.iter().enumerate() {
            use rusqlite::types::ValueRef;
            let value = match row.get_ref(index).expect("column") {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => n.into(),
                ValueRef::Real(x) => x.into(),
                ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
                ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned().into(),
            };
            object.insert(name.clone(), value);
        }
        found.push(Value::Object(object));
    }
    found
}

/// The query through the `sqlite3` shell in JSON mode, exactly as a person would type it;
/// `None` when the shell is not installed (and not required).
fn run_shell(
    db: &Path,
    sql: &str,
    session: &str,
    turn: i64,
    tool_use_id: &str,
) -> Option<Vec<Value>> {
    if !shell_installed() {
        assert!(
            std::env::var_os("SESSION_STORE_REQUIRE_SQLITE3").is_none(),
            "SESSION_STORE_REQUIRE_SQLITE3 is set but the sqlite3 shell does not start"
        );
        return None;
    }
    let mut child = Command::new("sqlite3")
        .arg("-json")
        .arg("-bail")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sqlite3 shell starts");
    let script = format!(
        ".parameter set :session '{session}'\n.parameter set :turn {turn}\n.parameter set :tool_use_id '{tool_use_id}'\n{sql}"
    );
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write script");
    let out = child.wait_with_output().expect("sqlite3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "{sql}\nfailed: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.trim().is_empty() {
        return Some(Vec::new());
    }
    match serde_json::from_str::<Value>(&stdout).expect("sqlite3 -json prints JSON") {
        Value::Array(rows) => Some(rows),
        other => panic!("expected rows, got {other}"),
    }
}

fn col(rows: &[Value], name: &str) -> Vec<String> {
    rows.iter()
        .map(|r| match &r[name] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn readme_forensic_queries_answer_the_questions_before_and_after_repair() {
    let queries = readme_queries();
    assert!(
        queries.len() >= 8,
        "the README promises eight or more queries"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    broken_db::build(&db);
    let q = |title: &str, session: &str, turn: i64, id: &str| {
        run(&db, query(&queries, title), session, turn, id)
    };

    // Which sessions are broken: exactly the generated cases, healthy ones absent.
    let broken = q("Which sessions are broken", "", 0, "");
    let pairs: BTreeSet<(String, String)> = col(&broken, "session_id")
        .into_iter()
        .zip(col(&broken, "rule"))
        .collect();
    assert_eq!(pairs, broken_db::expected());

    let one = q(
        "Everything wrong with one session",
        "user-results-and-words",
        0,
        "",
    );
    assert_eq!(
        col(&one, "rule").into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from(["dangling_tool_use".into(), "misplaced_tool_result".into()])
    );

    // Where the compaction cut: seq 6 is the last compacted, seq 7 (mid-turn) the first visible.
    let cuts = q("Where did the compaction cut", "", 0, "");
    let split = cuts
        .iter()
        .find(|r| r["session_id"] == "split-three-tool-turn")
        .expect("the split session has a cut");
    assert_eq!(split["last_compacted_seq"], 6);
    assert_eq!(split["first_visible_seq"], 7);
    let inside = q("cuts that fall inside a turn", "", 0, "");
    assert_eq!(col(&inside, "session_id"), ["split-three-tool-turn"]);
    assert_eq!(inside[0]["first_visible_seq"], 7);

    // Calls that never got a result: the cancelled one is dangling, the last one pending;
    // the call answered after a system message is not listed.
    let calls = q("Which calls never got a result", "", 0, "");
    let states: BTreeMap<String, String> = col(&calls, "tool_use_id")
        .into_iter()
        .zip(col(&calls, "state"))
        .collect();
    assert_eq!(states.get("cancel-b").map(String::as_str), Some("dangling"));
    assert_eq!(states.get("pend-a").map(String::as_str), Some("pending"));
    assert!(!states.contains_key("sys-a"));
    assert!(!states.contains_key("cancel-a"));

    let results = q("Tool results without their call", "", 0, "");
    let ids: BTreeSet<String> = col(&results, "tool_use_id").into_iter().collect();
    assert_eq!(
        ids,
        BTreeSet::from([
            "orphan-gone".into(),
            "empty-a".into(),
            "words-a".into(),
            "words-b".into()
        ])
    );

    // Turn 1 of the split session: its user message through the final answer, seq 3 to 10.
    let turn = q("Show me turn N", "split-three-tool-turn", 1, "");
    let seqs: BTreeSet<String> = col(&turn, "seq").into_iter().collect();
    assert_eq!(seqs.len(), 8);
    assert_eq!(turn[0]["seq"], 3);
    assert_eq!(turn[0]["content"], "do three things");

    let turns = q("The turns of a session", "split-three-tool-turn", 0, "");
    assert_eq!(col(&turns, "compacted_messages"), ["2", "4"]);

    let uses = q("uses one tool_use id", "", 0, "dup-a");
    assert_eq!(uses.len(), 4);

    assert!(q("What did store-repair change", "", 0, "").is_empty());
    assert!(q("Tombstones", "", 0, "").is_empty());
    let health = q("One line per session", "", 0, "");
    assert_eq!(health.len(), broken_db::CASES.len());

    // Mend, then ask again.
    let status = Command::new(env!("CARGO_BIN_EXE_store-repair"))
        .args(["--db", db.to_str().expect("utf-8"), "--no-backup"])
        .stdout(Stdio::null())
        .status()
        .expect("store-repair runs");
    assert!(status.success());
    assert!(q("Which sessions are broken", "", 0, "").is_empty());
    let changes = q("What did store-repair change", "", 0, "");
    let rules: BTreeSet<String> = col(&changes, "rule").into_iter().collect();
    let want: BTreeSet<String> = broken_db::expected().into_iter().map(|(_, r)| r).collect();
    assert!(rules.is_superset(&want), "{rules:?} should cover {want:?}");
    let per_session = q("Repairs per session", "", 0, "");
    assert!(per_session
        .iter()
        .any(|r| r["session_id"] == "cancelled-mid-history" && r["action"] == "tombstone"));
    let tombstones = q("Tombstones", "", 0, "");
    assert_eq!(col(&tombstones, "tool_use_id"), ["cancel-b"]);
    assert_eq!(tombstones[0]["by_repair"], 1);
    let turns = q("The turns of a session", "split-three-tool-turn", 0, "");
    assert_eq!(col(&turns, "compacted"), ["1", "0"]);
    let health = q("One line per session", "", 0, "");
    assert!(health.iter().all(|r| r["problems"] == 0));
}

/// A forensic query about one session must read only that session: on a database of a
/// million messages a view that computes every session first takes a minute, not a moment.
#[test]
fn per_session_queries_of_the_views_never_scan_the_base_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    broken_db::build(&db);
    let conn = rusqlite::Connection::open(&db).expect("open");
    for view in [
        "problems",
        "session_turns",
        "tool_calls",
        "tombstones",
        "message_parts",
        "message_compaction",
    ] {
        let mut stmt = conn
            .prepare(&format!(
                "EXPLAIN QUERY PLAN SELECT * FROM {view} WHERE session_id = ?1"
            ))
            .expect("plan");
        let details: Vec<String> = stmt
            .query_map(["split-three-tool-turn"], |r| r.get::<_, String>(3))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        let full_scans: Vec<&String> = details
            .iter()
            .filter(|d| {
                let mut words = d.split_whitespace();
                words.next() == Some("SCAN")
                    && words.next().is_some_and(|table| {
                        [
                            "messages", "parts", "m", "p", "e", "a", "ap", "r", "rp", "q", "n",
                        ]
                        .contains(&table)
                    })
            })
            .collect();
        assert!(
            full_scans.is_empty(),
            "{view}: {full_scans:?}\n{details:#?}"
        );
    }
}

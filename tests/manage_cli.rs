//! `fork`, `delete`, `prune`, `search`, `usage`, `size` and `sessions --tree` run as a
//! process on real files: what each prints for people and for scripts (`--json`), exit
//! status 2 on an unknown session or a turn that does not exist, and refused or dry runs
//! that leave the database's bytes as they were.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::Connection;
use serde_json::{json, Value};
use session_store::{NewMessage, Part, SessionId, Store, Usage};
use tempfile::TempDir;

fn run(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_session-store"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("session-store runs")
}

fn ok(db: &Path, args: &[&str]) -> String {
    let output = run(db, args);
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn fails(db: &Path, args: &[&str]) -> String {
    let output = run(db, args);
    assert_eq!(output.status.code(), Some(2), "{args:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn bytes(db: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(db).expect("db readable");
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(log) = std::fs::read(&wal) {
        bytes.extend(log);
    }
    bytes
}

/// A database with one session of three turns: a tool call with usage, an answer, and a
/// last question.
fn database() -> (TempDir, PathBuf, SessionId) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    let store = Store::open(&db).expect("store");
    let session = store.create_session().expect("session");
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("look for the manticore"),
                NewMessage::assistant(vec![Part::tool_use(
                    "c1",
                    "find",
                    json!({"name": "manticore"}),
                )])
                .with_usage(
                    Usage::new(120, 15)
                        .cache(900, 0)
                        .model("anthropic/claude-sonnet-4-5"),
                ),
                NewMessage::tool(vec![Part::tool_result("c1", "found in cave 7")]),
                NewMessage::assistant(vec![Part::text("It is in cave 7.")])
                    .with_usage(Usage::new(40, 8)),
                NewMessage::user("and the griffin?"),
                NewMessage::assistant(vec![Part::text("No idea.")]).with_usage(Usage::new(10, 3)),
                NewMessage::user("thanks"),
            ],
        )
        .expect("append");
    drop(store);
    crate::util::settle(&db);
    (dir, db, session)
}

#[test]
fn fork_prints_the_new_id_and_sessions_tree_shows_the_lineage() {
    let (_dir, db, session) = database();
    let fork = ok(&db, &["fork", session.as_str(), "--at-turn", "1"]);
    let fork = fork.trim();
    assert_eq!(fork.len(), 36, "{fork:?}");
    let grandchild = ok(&db, &["fork", fork, "--at-turn", "0"]);
    let tree = ok(&db, &["sessions", "--tree"]);
    assert_eq!(
        tree,
        format!(
            "{session}\n  {fork}\tforked_at_turn=1\n    {}\tforked_at_turn=0\n",
            grandchild.trim()
        )
    );
    let store = Store::open(&db).expect("store");
    assert_eq!(
        store.messages(&SessionId::new(fork)).expect("fork").len(),
        4
    );
}

#[test]
fn a_fork_at_a_turn_that_does_not_exist_exits_2_and_writes_nothing() {
    let (_dir, db, session) = database();
    let before = bytes(&db);
    let stderr = fails(&db, &["fork", session.as_str(), "--at-turn", "4"]);
    assert!(stderr.contains("no turn 4"), "{stderr}");
    fails(&db, &["fork", "no-such-session", "--at-turn", "0"]);
    fails(&db, &["delete", "no-such-session"]);
    fails(&db, &["usage", "no-such-session"]);
    fails(&db, &["search", "cave", "--session", "no-such-session"]);
    assert_eq!(bytes(&db), before);
}

#[test]
fn search_prints_ranked_hits_with_their_place_and_json_for_scripts() {
    let (_dir, db, session) = database();
    let text = ok(&db, &["search", "cave"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines.iter().all(|l| l.starts_with(session.as_str())));
    assert!(
        text.contains("seq=3\ttool/tool_result\tfound in [cave] 7"),
        "{text}"
    );
    let hits: Value =
        serde_json::from_str(&ok(&db, &["search", "manticore", "--json"])).expect("json");
    let kinds: Vec<&str> = hits
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|h| h["kind"].as_str())
        .collect();
    assert_eq!(kinds.len(), 2);
    assert!(kinds.contains(&"tool_use") && kinds.contains(&"text"));
    assert_eq!(hits[0]["session"], json!(session.as_str()));
    // Syntax a person types is text, never an error.
    ok(&db, &["search", "\"cave (7"]);
    assert_eq!(
        ok(
            &db,
            &[
                "search",
                "cave",
                "--session",
                session.as_str(),
                "--limit",
                "1"
            ]
        )
        .lines()
        .count(),
        1
    );
}

#[test]
fn usage_prints_each_turn_and_the_total() {
    let (_dir, db, session) = database();
    let text = ok(&db, &["usage", session.as_str()]);
    assert_eq!(
        text,
        "turn\tmessages\tinput\toutput\tcache_read\tcache_write\tmodels\n\
         0\t2\t160\t23\t900\t0\tanthropic/claude-sonnet-4-5\n\
         1\t1\t10\t3\t-\t-\t\n\
         total\t3\t170\t26\t900\t0\t\n"
    );
    let json: Value =
        serde_json::from_str(&ok(&db, &["usage", session.as_str(), "--json"])).expect("json");
    assert_eq!(json["total"]["input_tokens"], json!(170));
    assert_eq!(json["turns"][1]["cache_read_tokens"], Value::Null);
}

#[test]
fn delete_removes_the_session_and_reports_the_file_shrinking() {
    let (_dir, db, session) = database();
    let text = ok(&db, &["delete", session.as_str()]);
    assert!(
        text.starts_with(&format!(
            "deleted session {session} (7 messages)\ndatabase "
        )),
        "{text}"
    );
    assert_eq!(ok(&db, &["sessions", "--tree"]), "");
    assert_eq!(ok(&db, &["search", "cave"]), "");
}

#[test]
fn prune_dry_run_lists_and_writes_nothing_then_prune_deletes() {
    let (_dir, db, session) = database();
    let store = Store::open(&db).expect("store");
    let recent = store.create_session().expect("recent");
    drop(store);
    let raw = Connection::open(&db).expect("raw");
    raw.execute(
        "UPDATE sessions SET updated_at = '2020-01-01T00:00:00Z' WHERE id = ?1",
        [session.as_str()],
    )
    .expect("age the session");
    // Everything into the file before it is compared: whether this connection's close is
    // the last one (and checkpoints) must not decide what the next process finds.
    raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    drop(raw);
    let before = bytes(&db);
    let dry = ok(&db, &["prune", "--older-than", "30d", "--dry-run"]);
    assert!(
        dry.starts_with(&format!(
            "would delete {session}\tupdated_at=2020-01-01T00:00:00Z\tmessages=7\n"
        )),
        "{dry}"
    );
    assert_eq!(bytes(&db), before, "a dry run writes nothing");
    // Without a terminal, prune deletes only with --yes.
    let refused = fails(&db, &["prune", "--older-than", "4w", "--json"]);
    assert!(refused.contains("--yes"), "{refused}");
    assert_eq!(bytes(&db), before, "a refused prune writes nothing");
    let json: Value = serde_json::from_str(&ok(
        &db,
        &["prune", "--older-than", "4w", "--yes", "--json"],
    ))
    .expect("json");
    assert_eq!(json["deleted"], json!(1));
    assert_eq!(json["sessions"][0]["session"], json!(session.as_str()));
    assert_eq!(ok(&db, &["sessions", "--tree"]), format!("{recent}\n"));
    let stderr = fails(&db, &["prune", "--older-than", "30 days"]);
    assert!(stderr.contains("unknown unit"), "{stderr}");
}

#[test]
fn size_reports_sessions_tool_output_and_reclaims_measured_space() {
    let (_dir, db, session) = database();
    let json: Value = serde_json::from_str(&ok(&db, &["size", "--json"])).expect("json");
    assert_eq!(json["sessions"], json!(1));
    assert_eq!(json["largest"][0]["session"], json!(session.as_str()));
    assert_eq!(json["tool_output_bytes"], json!("found in cave 7".len()));
    assert!(json["search_index_bytes"].as_u64().is_some_and(|n| n > 0));
    let text = ok(&db, &["size", "--reclaim", "--top", "1"]);
    assert!(text.starts_with("reclaimed: "), "{text}");
    assert!(text.contains("largest sessions:"), "{text}");
    let text = ok(&db, &["size", "--vacuum"]);
    assert!(
        text.starts_with("reclaimed: ") && text.contains("(full VACUUM)"),
        "{text}"
    );
    fails(&db, &["size", "--vacuum", "--reclaim"]);
}

//! The storage crate's promises against real files: opening refuses what is not ours without
//! touching it, every part kind round-trips exactly, every refused append leaves the database
//! byte-for-byte as it was, cancellation answers every pending call (also after a reopen), and
//! concurrent writers (threads and processes) never collide on `seq` or lose a write.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use serde_json::json;
use session_store::{Error, NewMessage, OpenError, Part, Refusal, Role, SessionId, Store};

use crate::util::{dump, raw, temp_store, violations};

fn call(id: &str) -> Part {
    Part::tool_use(id, "bash", json!({"cmd": "ls"}))
}

/// A session whose last assistant message has two calls, `a` answered and `b` pending.
fn half_answered(store: &Store) -> SessionId {
    let session = store.create_session().expect("session");
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![call("a"), call("b")]),
                NewMessage::tool(vec![Part::tool_result("a", "ok")]),
            ],
        )
        .expect("valid turn");
    session
}

/// Appends `message`, expects a refusal matching `expected`, and checks nothing changed.
fn assert_refused(
    store: &Store,
    path: &std::path::Path,
    session: &SessionId,
    messages: Vec<NewMessage>,
    expected: impl Fn(&Refusal) -> bool,
) {
    let before = dump(path);
    let error = store
        .append_batch(session, messages)
        .expect_err("must be refused");
    let refusal = error
        .refusal()
        .unwrap_or_else(|| panic!("not a refusal: {error:?}"));
    assert!(expected(refusal), "unexpected refusal: {refusal:?}");
    assert_eq!(dump(path), before, "a refused append changed the database");
}

#[test]
fn open_sets_wal_foreign_keys_synchronous_normal_and_busy_timeout() {
    let (_dir, store, _) = temp_store();
    let settings = store.connection_settings().expect("settings");
    assert_eq!(settings.journal_mode, "wal");
    assert!(settings.foreign_keys);
    assert_eq!(settings.synchronous, "1", "NORMAL");
    assert!(settings.busy_timeout_ms >= 1000);
}

#[test]
fn open_refuses_a_file_that_is_not_sqlite_and_leaves_it_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notes.db");
    let content = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &content).expect("write");
    let error = Store::open(&path).expect_err("refused");
    assert!(matches!(error, OpenError::NotADatabase { .. }), "{error:?}");
    assert_eq!(std::fs::read(&path).expect("read"), content);
    assert!(!dir.path().join("notes.db-wal").exists());
}

#[test]
fn open_refuses_a_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(matches!(
        Store::open(dir.path()),
        Err(OpenError::InvalidPath { .. })
    ));
}

#[test]
fn open_accepts_an_existing_empty_file_as_a_database_without_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").expect("write");
    let store = Store::open(&path).expect("empty file opens");
    assert!(store.sessions().expect("list").is_empty());
}

#[test]
fn reopening_applies_nothing_twice() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("hi"))
        .expect("append");
    drop(store);
    let before = dump(&path);
    let store = Store::open(&path).expect("reopen");
    assert_eq!(dump(&path), before);
    assert_eq!(store.messages(&session).expect("read").len(), 1);
}

/// Records a migration in a closed store's history, then returns the error `Store::open`
/// gives, after checking that opening left the file's bytes as they were.
fn open_with_history_row(version: i64, name: &str) -> Error {
    let (_dir, store, path) = temp_store();
    drop(store);
    let conn = rusqlite::Connection::open(&path).expect("raw rw");
    conn.execute(
        "INSERT OR REPLACE INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (?1, ?2, '2030-01-01T00:00:00Z', '42')",
        rusqlite::params![version, name],
    )
    .expect("insert history");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .expect("checkpoint");
    drop(conn);
    let bytes = std::fs::read(&path).expect("read");
    let error = Store::open(&path).expect_err("refused");
    assert_eq!(
        std::fs::read(&path).expect("read"),
        bytes,
        "opening wrote to the file"
    );
    error.into()
}

#[test]
fn open_refuses_a_database_from_the_future_and_touches_nothing() {
    let error = open_with_history_row(999, "from_the_future");
    assert!(
        matches!(error, Error::FutureSchema { version: 999, .. }),
        "{error:?}"
    );
}

#[test]
fn open_refuses_a_divergent_migration_history_and_touches_nothing() {
    let error = open_with_history_row(1, "somebody_elses_schema");
    assert!(
        matches!(error, Error::DivergentSchema { version: 1, .. }),
        "{error:?}"
    );
}

#[test]
fn every_part_kind_round_trips_exactly() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    let at = Utc
        .with_ymd_and_hms(2026, 11, 25, 12, 0, 0)
        .single()
        .expect("time");
    let assistant = NewMessage::assistant(vec![
        Part::text(""),
        Part::reasoning("first", Some(json!({"anthropic": {"signature": "sig-a"}}))),
        Part::text(""),
        Part::reasoning(
            "second",
            Some(json!({"bedrock": {"signature": "sig-b"}, "z": 1, "a": [1, 2]})),
        ),
        Part::reasoning("third", Some(json!({"vertex": {"signature": "sig-v"}}))),
        Part::reasoning(
            "other",
            Some(json!({"google": {"thoughtSignature": "abc=="}})),
        ),
        Part::RedactedReasoning {
            data: "opaque==".into(),
            provider_metadata: None,
        },
        Part::text("  "),
        Part::ToolUse {
            id: "toolu_1".into(),
            name: "search".into(),
            input: json!({"q": "rust", "nested": {"b": 2, "a": [true, null]}, "empty": {}}),
            provider_metadata: Some(
                json!({"openai": {"extra_content": {"google": {"thought_signature": "x"}}}}),
            ),
        },
    ])
    .at(at);
    let tool = NewMessage::tool(vec![
        Part::tool_error("toolu_1", ""),
        Part::text("trailing text"),
    ])
    .at(at);
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("q").at(at),
                assistant.clone(),
                tool.clone(),
            ],
        )
        .expect("append");
    let stored = store.messages(&session).expect("read");
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[1].parts, assistant.parts);
    assert_eq!(stored[2].parts, tool.parts);
    assert!(stored.iter().all(|m| m.created_at == at));
    // Metadata keeps its key order too (the JSON text is the same).
    let conn = raw(&path);
    let text: String = conn
        .query_row(
            "SELECT provider_metadata FROM parts WHERE text = 'second'",
            [],
            |r| r.get(0),
        )
        .expect("row");
    assert_eq!(text, r#"{"bedrock":{"signature":"sig-b"},"z":1,"a":[1,2]}"#);
    let empty: Option<String> = conn
        .query_row(
            "SELECT text FROM parts WHERE kind = 'text' AND ordinal = 0 AND message_id = ?1",
            [stored[1].id],
            |r| r.get(0),
        )
        .expect("row");
    assert_eq!(empty.as_deref(), Some(""), "'' is a value, not NULL");
}

#[test]
fn store_assigns_seq_and_turn_index_by_the_contract() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    let appended = store
        .append_batch(
            &session,
            vec![
                NewMessage::system("rules"),
                NewMessage::user("one"),
                NewMessage::assistant(vec![call("a")]),
                NewMessage::tool(vec![Part::tool_result("a", "")]),
                NewMessage::assistant(vec![Part::text("done")]),
                NewMessage::user("two"),
            ],
        )
        .expect("append");
    let seqs: Vec<_> = appended.iter().map(|a| (a.seq, a.turn_index)).collect();
    assert_eq!(seqs, [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 1)]);
    let next = store
        .append(&session, NewMessage::user("three"))
        .expect("append");
    assert_eq!((next.seq, next.turn_index), (7, 2));
    assert!(violations(&path).is_empty());
}

#[test]
fn refuses_user_message_while_tool_uses_are_pending() {
    let (_dir, store, path) = temp_store();
    let session = half_answered(&store);
    assert_refused(
        &store,
        &path,
        &session,
        vec![NewMessage::user("next")],
        |r| matches!(r, Refusal::PendingToolUses { ids, role: Role::User } if ids == &["b"]),
    );
}

#[test]
fn refuses_assistant_message_while_tool_uses_are_pending() {
    let (_dir, store, path) = temp_store();
    let session = half_answered(&store);
    assert_refused(
        &store,
        &path,
        &session,
        vec![NewMessage::assistant(vec![Part::text("hm")])],
        |r| matches!(r, Refusal::PendingToolUses { ids, .. } if ids == &["b"]),
    );
}

#[test]
fn accepts_a_system_message_while_tool_uses_are_pending() {
    // A system message never breaks a pair (contract): the write path takes it, the health
    // check calls the session healthy, and the loader sends it after the tool block.
    let (_dir, store, _path) = temp_store();
    let session = half_answered(&store);
    let pending = store.pending_tool_uses(&session).expect("pending");
    store
        .append(&session, NewMessage::system("note"))
        .expect("a system message fits inside a tool block");
    assert_eq!(store.pending_tool_uses(&session).expect("pending"), pending);
    let report = store.check(&[session], &Default::default()).expect("check");
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn refuses_tool_result_that_answers_no_pending_tool_use() {
    let (_dir, store, path) = temp_store();
    let session = half_answered(&store);
    assert_refused(
        &store,
        &path,
        &session,
        vec![NewMessage::tool(vec![Part::tool_result("zzz", "")])],
        |r| matches!(r, Refusal::UnexpectedToolResult { tool_use_id, pending } if tool_use_id == "zzz" && pending == &["b"]),
    );
}

#[test]
fn refuses_tool_result_that_answers_a_tool_use_twice() {
    let (_dir, store, path) = temp_store();
    let session = half_answered(&store);
    assert_refused(
        &store,
        &path,
        &session,
        vec![NewMessage::tool(vec![Part::tool_result("a", "again")])],
        |r| matches!(r, Refusal::DuplicateToolResult { tool_use_id } if tool_use_id == "a"),
    );
}

#[test]
fn refuses_tool_result_in_a_user_message() {
    let (_dir, store, path) = temp_store();
    let session = half_answered(&store);
    let message = NewMessage::new(
        Role::User,
        vec![Part::tool_result("b", "ok"), Part::text("and more")],
    );
    assert_refused(
        &store,
        &path,
        &session,
        vec![message],
        |r| matches!(r, Refusal::MisplacedToolResult { tool_use_id, role: Role::User } if tool_use_id == "b"),
    );
}

#[test]
fn refuses_a_tool_use_id_already_used_in_the_session() {
    let (_dir, store, path) = temp_store();
    let session = half_answered(&store);
    store.cancel_pending(&session, "test").expect("cancel");
    assert_refused(
        &store,
        &path,
        &session,
        vec![NewMessage::assistant(vec![call("a")])],
        |r| matches!(r, Refusal::DuplicateToolUseId { id } if id == "a"),
    );
}

#[test]
fn the_same_tool_use_id_in_another_session_is_fine() {
    let (_dir, store, _) = temp_store();
    half_answered(&store);
    let other = store.create_session().expect("session");
    store
        .append(&other, NewMessage::assistant(vec![call("a")]))
        .expect("ids are per session");
}

#[test]
fn refuses_tool_use_without_id_or_name_or_object_input() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("hi"))
        .expect("user");
    let no_id = NewMessage::assistant(vec![Part::tool_use("", "bash", json!({}))]);
    assert_refused(&store, &path, &session, vec![no_id], |r| {
        matches!(r, Refusal::ToolUseWithoutId { ordinal: 0 })
    });
    let no_name = NewMessage::assistant(vec![Part::tool_use("x", "", json!({}))]);
    assert_refused(
        &store,
        &path,
        &session,
        vec![no_name],
        |r| matches!(r, Refusal::ToolUseWithoutName { id } if id == "x"),
    );
    for input in [json!([1, 2]), json!("ls"), json!(null), json!(3)] {
        let bad = NewMessage::assistant(vec![Part::tool_use("x", "bash", input)]);
        assert_refused(
            &store,
            &path,
            &session,
            vec![bad],
            |r| matches!(r, Refusal::ToolInputNotObject { id } if id == "x"),
        );
    }
}

#[test]
fn refuses_an_empty_message() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    assert_refused(
        &store,
        &path,
        &session,
        vec![NewMessage::new(Role::User, vec![])],
        |r| matches!(r, Refusal::EmptyMessage),
    );
    assert_refused(&store, &path, &session, vec![], |r| {
        matches!(r, Refusal::EmptyMessage)
    });
}

#[test]
fn refuses_an_unknown_session_and_writes_nothing() {
    let (_dir, store, path) = temp_store();
    half_answered(&store);
    let before = dump(&path);
    let ghost = SessionId::new("no-such-session");
    let error = store
        .append(&ghost, NewMessage::user("hi"))
        .expect_err("refused");
    assert!(
        matches!(error, Error::UnknownSession(ref id) if id == &ghost),
        "{error:?}"
    );
    assert!(matches!(
        store.cancel_pending(&ghost, "x"),
        Err(Error::UnknownSession(_))
    ));
    assert!(matches!(
        store.messages(&ghost),
        Err(Error::UnknownSession(_))
    ));
    assert_eq!(dump(&path), before);
}

#[test]
fn a_batch_is_all_or_nothing_and_names_the_message_at_fault() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    let before = dump(&path);
    let error = store
        .append_batch(
            &session,
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![call("a"), call("b")]),
                NewMessage::tool(vec![Part::tool_result("a", "ok")]),
                NewMessage::assistant(vec![Part::text("done")]),
            ],
        )
        .expect_err("b is unanswered when the final answer comes");
    assert!(
        matches!(error, Error::Refused { index: 3, .. }),
        "{error:?}"
    );
    assert_eq!(dump(&path), before);
}

#[test]
fn duplicate_session_ids_are_refused() {
    let (_dir, store, _) = temp_store();
    let id = SessionId::new("fixed");
    store.create_session_with_id(&id).expect("first");
    assert!(matches!(
        store.create_session_with_id(&id),
        Err(Error::SessionExists(_))
    ));
}

#[test]
fn cancel_pending_tombstones_every_pending_call_once() {
    let (_dir, store, path) = temp_store();
    let session = half_answered(&store);
    assert_eq!(store.pending_tool_uses(&session).expect("pending"), ["b"]);
    assert_eq!(
        store
            .cancel_pending(&session, "user pressed stop")
            .expect("cancel"),
        ["b"]
    );
    let messages = store.messages(&session).expect("read");
    let last = messages.last().expect("tombstone message");
    assert_eq!(last.role, Role::Tool);
    match &last.parts[..] {
        [Part::ToolResult {
            tool_use_id,
            content,
            is_error: true,
            ..
        }] => {
            assert_eq!(tool_use_id, "b");
            assert!(
                content.contains("cancelled") && content.contains("user pressed stop"),
                "{content}"
            );
        }
        other => panic!("unexpected tombstone {other:?}"),
    }
    let before = dump(&path);
    assert!(store
        .cancel_pending(&session, "again")
        .expect("cancel")
        .is_empty());
    assert_eq!(dump(&path), before, "nothing pending: nothing written");
    store
        .append(&session, NewMessage::user("next"))
        .expect("healthy again");
    assert!(violations(&path).is_empty());
}

#[test]
fn cancel_pending_after_reopening_the_store() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![call("x"), call("y"), call("z")]),
            ],
        )
        .expect("append");
    drop(store); // the agent crashed here
    let store = Store::open(&path).expect("reopen");
    assert_eq!(
        store.pending_tool_uses(&session).expect("pending"),
        ["x", "y", "z"]
    );
    assert_eq!(
        store
            .cancel_pending(&session, "crash recovery")
            .expect("cancel"),
        ["x", "y", "z"]
    );
    store
        .append(&session, NewMessage::user("resume"))
        .expect("append after recovery");
    assert!(violations(&path).is_empty());
}

fn tool_turn(thread: usize, round: usize) -> Vec<NewMessage> {
    let id = format!("t{thread}-r{round}");
    vec![
        NewMessage::user(format!("thread {thread} round {round}")),
        NewMessage::assistant(vec![Part::tool_use(&id, "bash", json!({"n": round}))]),
        NewMessage::tool(vec![Part::tool_result(&id, "ok")]),
        NewMessage::assistant(vec![Part::text("done")]),
    ]
}

#[test]
fn two_threads_appending_to_one_session_never_collide_or_lose_a_write() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    let store = Arc::new(store);
    let rounds = 40;
    let handles: Vec<_> = (0..2)
        .map(|thread| {
            let store = Arc::clone(&store);
            let session = session.clone();
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for round in 0..rounds {
                    let appended = store
                        .append_batch(&session, tool_turn(thread, round))
                        .expect("append");
                    acknowledged.extend(appended.into_iter().map(|a| a.id));
                }
                acknowledged
            })
        })
        .collect();
    let acknowledged: HashSet<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("thread"))
        .collect();
    let stored = store.messages(&session).expect("read");
    assert_eq!(stored.len(), 2 * rounds * 4);
    assert_eq!(acknowledged.len(), stored.len());
    assert!(stored.iter().all(|m| acknowledged.contains(&m.id)));
    let seqs: Vec<i64> = stored.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=stored.len() as i64).collect::<Vec<_>>());
    assert!(violations(&path).is_empty());
}

const CHILD_DB: &str = "SESSION_STORE_TEST_CHILD_DB";
const CHILD_SESSION: &str = "SESSION_STORE_TEST_CHILD_SESSION";
const CHILD_TAG: &str = "SESSION_STORE_TEST_CHILD_TAG";

/// Entry point of the child processes of `two_processes_appending_to_one_session_...`.
#[test]
#[ignore = "child process entry point, run by two_processes_appending_to_one_session_never_collide"]
fn child_process_appends_tool_turns() {
    let (Ok(db), Ok(session), Ok(tag)) = (
        std::env::var(CHILD_DB),
        std::env::var(CHILD_SESSION),
        std::env::var(CHILD_TAG),
    ) else {
        panic!("run only as a child process");
    };
    let store = Store::open(&db).expect("open");
    let session = SessionId::new(session);
    let tag: usize = tag.parse().expect("tag");
    for round in 0..30 {
        let ids: Vec<String> = store
            .append_batch(&session, tool_turn(tag, round))
            .expect("append")
            .iter()
            .map(|a| a.id.to_string())
            .collect();
        println!("ACK {}", ids.join(" "));
    }
}

#[test]
fn two_processes_appending_to_one_session_never_collide() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    let exe = std::env::current_exe().expect("test binary");
    let running: Vec<_> = (0..2)
        .map(|tag| {
            std::process::Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    "store::child_process_appends_tool_turns",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_DB, &path)
                .env(CHILD_SESSION, session.as_str())
                .env(CHILD_TAG, tag.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    let mut acknowledged = HashSet::new();
    for child in running {
        let output = child.wait_with_output().expect("child");
        assert!(output.status.success(), "child failed: {output:?}");
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            // The harness prints "test name ... " before the child's first line.
            if let Some((_, ids)) = line.split_once("ACK ") {
                acknowledged.extend(ids.split(' ').map(|id| id.parse::<i64>().expect("id")));
            }
        }
    }
    let stored = store.messages(&session).expect("read");
    assert_eq!(acknowledged.len(), 2 * 30 * 4);
    let stored_ids: HashSet<i64> = stored.iter().map(|m| m.id).collect();
    assert!(
        acknowledged.is_subset(&stored_ids),
        "an acknowledged write is missing"
    );
    let seqs: Vec<i64> = stored.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=stored.len() as i64).collect::<Vec<_>>());
    assert!(violations(&path).is_empty(), "{:?}", violations(&path));
}

//! Idempotent appends and the session counters of migration V9. The failures covered: a retry
//! after an ambiguous failure (the commit happened, the caller never heard) storing a message
//! twice; a key reused for another message silently returning the wrong one; and a session
//! listing whose message counts drift from the rows once messages are reverted, restored,
//! deleted or written by another program.

use rusqlite::params;
use serde_json::json;
use session_store::{Error, NewMessage, Part, Store};

use crate::util::{dump, temp_store};

fn count_rows(store: &Store, path: &std::path::Path, session: &str) -> i64 {
    drop(store.sessions().expect("list"));
    crate::util::raw(path)
        .query_row(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?1",
            [session],
            |r| r.get(0),
        )
        .expect("count")
}

#[test]
fn a_retried_append_returns_the_stored_message_instead_of_storing_it_twice() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    let message = NewMessage::user("run the tests").with_idempotency_key("req-1");
    let first = store.append(&session, message.clone()).expect("append");
    let before = dump(&path);
    let retried = store.append(&session, message).expect("retry");
    assert_eq!(retried, first);
    assert_eq!(dump(&path), before, "the retry wrote nothing");
    assert_eq!(store.messages(&session).expect("messages").len(), 1);
}

#[test]
fn a_retried_batch_replays_the_stored_prefix_and_appends_the_rest() {
    let (_dir, store, _path) = temp_store();
    let session = store.create_session().expect("session");
    let call = NewMessage::assistant(vec![Part::tool_use("c1", "ls", json!({}))])
        .with_idempotency_key("a");
    let result = NewMessage::tool(vec![Part::tool_result("c1", "a b")]).with_idempotency_key("b");
    store
        .append(&session, NewMessage::user("list").with_idempotency_key("u"))
        .expect("user");
    let stored = store.append(&session, call.clone()).expect("call");
    // The caller lost the answer to the first call and sends the whole step again.
    let appended = store
        .append_batch(&session, vec![call, result])
        .expect("retry with more");
    assert_eq!(appended[0], stored);
    assert_eq!(appended[1].seq, stored.seq + 1);
    assert_eq!(store.messages(&session).expect("messages").len(), 3);
    assert!(store
        .pending_tool_uses(&session)
        .expect("pending")
        .is_empty());
}

#[test]
fn a_key_that_names_another_message_is_refused_and_nothing_is_written() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("one").with_idempotency_key("k"))
        .expect("append");
    let before = dump(&path);
    let error = store
        .append(&session, NewMessage::user("two").with_idempotency_key("k"))
        .expect_err("conflict");
    assert!(
        matches!(error, Error::IdempotencyConflict { ref key, .. } if key == "k"),
        "{error:?}"
    );
    // A replayed message after a new one in the same batch is refused too.
    let error = store
        .append_batch(
            &session,
            vec![
                NewMessage::assistant(vec![Part::text("new")]),
                NewMessage::user("one").with_idempotency_key("k"),
            ],
        )
        .expect_err("out of order");
    assert!(
        matches!(error, Error::IdempotencyConflict { .. }),
        "{error:?}"
    );
    assert_eq!(dump(&path), before);
}

/// A retry whose texts no engine can keep is refused for those texts, before its keys are
/// looked up: the NUL refusal wins over a replay and over an idempotency conflict, for a
/// part's text, a message's own field and the key itself, alone and inside a batch.
#[test]
fn a_retried_key_with_a_nul_text_is_refused_for_the_nul_before_any_replay() {
    use session_store::Refusal;
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(
            &session,
            NewMessage::user("hello").with_idempotency_key("k"),
        )
        .expect("append");
    let call = NewMessage::assistant(vec![Part::tool_use("c1", "ls", json!({}))])
        .with_idempotency_key("c");
    store.append(&session, call.clone()).expect("call");
    let before = dump(&path);
    let refused = |messages: Vec<NewMessage>| match store
        .append_batch(&session, messages)
        .expect_err("refused")
    {
        Error::Refused { index, reason, .. } => (index, reason),
        other => panic!("not a refusal: {other:?}"),
    };
    let cases: Vec<(Vec<NewMessage>, usize, Refusal)> = vec![
        // The stored key, its text now holding a NUL (other content too).
        (
            vec![NewMessage::user("hel\0lo").with_idempotency_key("k")],
            0,
            Refusal::NulInText {
                ordinal: 0,
                kind: session_store::PartKind::Text,
                field: "text",
            },
        ),
        // The stored key, same parts, a NUL in the message's own model.
        (
            vec![NewMessage::user("hello")
                .by_model("m\0")
                .with_idempotency_key("k")],
            0,
            Refusal::NulInMessageField { field: "model" },
        ),
        // A key holding a NUL is never looked up.
        (
            vec![NewMessage::user("hello").with_idempotency_key("k\0")],
            0,
            Refusal::NulInMessageField {
                field: "idempotency_key",
            },
        ),
        // A batch replaying its stored prefix, then a result holding a NUL.
        (
            vec![
                call.clone(),
                NewMessage::tool(vec![Part::tool_result("c1", "a\0b")]).with_idempotency_key("r"),
            ],
            1,
            Refusal::NulInText {
                ordinal: 0,
                kind: session_store::PartKind::ToolResult,
                field: "content",
            },
        ),
        // A stored key that would conflict, after a message whose text holds a NUL.
        (
            vec![
                NewMessage::tool(vec![Part::tool_result("c1", "\0")]),
                NewMessage::user("other").with_idempotency_key("k"),
            ],
            0,
            Refusal::NulInText {
                ordinal: 0,
                kind: session_store::PartKind::ToolResult,
                field: "content",
            },
        ),
    ];
    for (messages, index, reason) in cases {
        assert_eq!(refused(messages.clone()), (index, reason), "{messages:?}");
    }
    assert_eq!(dump(&path), before, "no refusal wrote anything");
}

#[test]
fn keys_are_per_session_and_a_reverted_message_frees_its_key() {
    let (_dir, store, _path) = temp_store();
    let a = store.create_session().expect("a");
    let b = store.create_session().expect("b");
    let message = NewMessage::user("hello").with_idempotency_key("same");
    store.append(&a, message.clone()).expect("a");
    store
        .append(&b, message.clone())
        .expect("b: another session");
    store.revert_to_turn(&a, 0).expect("revert");
    let again = store.append(&a, message).expect("appended anew");
    assert_eq!(again.seq, 1);
    assert_eq!(store.messages(&a).expect("messages").len(), 1);
}

#[test]
fn session_message_counts_follow_every_write_path() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    for i in 0..3 {
        store
            .append(&session, NewMessage::user(format!("q{i}")))
            .expect("user");
        store
            .append(&session, NewMessage::assistant(vec![Part::text("a")]))
            .expect("assistant");
    }
    let listed = |store: &Store| {
        store
            .session(&session)
            .expect("info")
            .expect("exists")
            .message_count
    };
    assert_eq!(listed(&store), 6);
    store.revert_to_turn(&session, 1).expect("revert");
    assert_eq!(listed(&store), 2);
    store.undo_revert(&session).expect("undo");
    assert_eq!(listed(&store), 6);
    // Another program inserts a row with the contract's columns only.
    let conn = rusqlite::Connection::open(&path).expect("raw");
    conn.execute(
        "INSERT INTO messages (session_id, seq, turn_index, role, created_at)
         VALUES (?1, 7, 3, 'user', '2026-01-01T00:00:00Z')",
        params![session.as_str()],
    )
    .expect("insert");
    assert_eq!(listed(&store), 7);
    assert_eq!(listed(&store), count_rows(&store, &path, session.as_str()));
}

//! Regression tests, one per bug class that real agents shipped. Each says in a comment which
//! failure it guards against; the store must make the broken history impossible to write.

use serde_json::json;
use session_store::{NewMessage, Part, Refusal, Role};

use crate::util::{temp_store, violations};

/// Guards: a cancellation that left a tool_use unanswered (post-mortem 004, root cause 5).
/// The agent persisted the assistant message, was cancelled before the results, and the next
/// user turn produced a history every provider rejects.
#[test]
fn cancellation_between_tool_use_and_result_cannot_leave_it_unanswered() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("run it"))
        .expect("user");
    store
        .append(
            &session,
            NewMessage::assistant(vec![Part::tool_use("toolu_1", "bash", json!({}))]),
        )
        .expect("assistant");
    let refused = store
        .append(&session, NewMessage::user("next"))
        .expect_err("pending call");
    assert!(matches!(
        refused.refusal(),
        Some(Refusal::PendingToolUses { .. })
    ));
    assert_eq!(
        store.cancel_pending(&session, "cancelled").expect("cancel"),
        ["toolu_1"]
    );
    store
        .append(&session, NewMessage::user("next"))
        .expect("user after tombstone");
    assert!(violations(&path).is_empty());
}

/// Guards: tool results stored inside a `user` message (post-mortem 004, root cause 3): a
/// loader later dropped the "empty" user message and orphaned the tool_use.
#[test]
fn tool_results_cannot_be_stored_in_a_user_message() {
    let (_dir, store, _) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![Part::tool_use("t", "bash", json!({}))]),
            ],
        )
        .expect("turn");
    let message = NewMessage::new(
        Role::User,
        vec![Part::text(""), Part::tool_result("t", "ok")],
    );
    let refused = store.append(&session, message).expect_err("misplaced");
    assert!(matches!(
        refused.refusal(),
        Some(Refusal::MisplacedToolResult { .. })
    ));
    // The same results in a tool message with an empty text are stored and kept.
    store
        .append(&session, NewMessage::tool(vec![Part::tool_result("t", "")]))
        .expect("tool message with empty content");
    assert_eq!(store.messages(&session).expect("read").len(), 3);
}

/// Guards: empty text between signed thinking blocks dropped on replay (post-mortem 003).
/// The store keeps an empty text part as an empty text part, at its ordinal.
#[test]
fn empty_text_between_signed_thinking_blocks_is_kept_at_its_position() {
    let (_dir, store, _) = temp_store();
    let session = store.create_session().expect("session");
    let parts = vec![
        Part::reasoning("a", Some(json!({"anthropic": {"signature": "s1"}}))),
        Part::text(""),
        Part::reasoning("b", Some(json!({"anthropic": {"signature": "s2"}}))),
        Part::text("answer"),
    ];
    store
        .append_batch(
            &session,
            vec![NewMessage::user("q"), NewMessage::assistant(parts.clone())],
        )
        .expect("append");
    assert_eq!(store.messages(&session).expect("read")[1].parts, parts);
}

/// Guards: a tool_result whose tool_use is not in the directly preceding assistant message
/// (post-mortem 004, root cause 2): refused on write.
#[test]
fn a_result_for_an_older_call_is_refused() {
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append_batch(
            &session,
            vec![
                NewMessage::user("go"),
                NewMessage::assistant(vec![Part::tool_use("old", "bash", json!({}))]),
                NewMessage::tool(vec![Part::tool_result("old", "ok")]),
                NewMessage::assistant(vec![Part::tool_use("new", "bash", json!({}))]),
            ],
        )
        .expect("turn");
    let refused = store
        .append(
            &session,
            NewMessage::tool(vec![Part::tool_result("old", "late")]),
        )
        .expect_err("orphan");
    assert!(matches!(
        refused.refusal(),
        Some(Refusal::UnexpectedToolResult { .. })
    ));
    assert!(violations(&path).is_empty());
}

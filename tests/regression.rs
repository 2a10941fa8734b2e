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

/// Guards: an OpenAI Responses body whose reasoning item is followed by an item the importer
/// keeps verbatim (a type newer than this build, here one ending in `_output`). The Responses
/// export sent the reasoning before that item, which is not the output it preceded, and broke
/// its own contract (`session-store export --provider responses` exited 2). Found by the
/// import fuzz targets (`fuzz/corpus/import_responses/`, `fuzz/corpus/import_codex/`).
#[test]
fn reasoning_before_a_verbatim_item_that_is_not_an_output_exports_valid_for_every_provider() {
    let body = json!({"instructions": "be brief", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "use shell"}],
         "encrypted_content": "gAAA"},
        {"type": "computer_call_output", "call_id": "c0", "output": "a b"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "again"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "gBBB"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "item_reference", "id": "msg_0"},
    ]});
    let imported =
        session_store::import::import(session_store::import::Format::Responses, &body.to_string())
            .expect("imports");
    let (_dir, store, _path) = temp_store();
    let session = store.import(&imported).expect("stores").session;
    let options = session_store::ExportOptions {
        persist_latch: false,
        ..session_store::ExportOptions::default()
    };
    for provider in session_store::Provider::ALL {
        let exported = store
            .export_now(&session, provider, &options)
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        assert_eq!(
            session_store::request::check(provider, &exported),
            vec![],
            "{provider}: {exported:#}"
        );
        if provider == session_store::Provider::Responses {
            // The first reasoning preceded no output: left out; the second precedes the
            // verbatim web search call, an output item, and goes back.
            let encrypted: Vec<&str> = exported["input"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|item| item["encrypted_content"].as_str())
                .collect();
            assert_eq!(encrypted, ["gBBB"], "{exported:#}");
        }
    }
}

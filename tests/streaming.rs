//! Streaming writes (`Store::begin_message` / `OpenMessage::push` / `finish`): each part is
//! stored when `push` returns, refused exactly where the same message appended whole would
//! be, and a message whose writer went away is marked `interrupted` by the next write to
//! its session (or by `store-repair`), its calls answered with tombstones, every export of
//! it passing the provider checks. The kill test is `stream_kill.rs`.

use serde_json::json;
use session_store::repair::{HealthRule, RepairOptions};
use session_store::request::check as check_request;
use session_store::{
    Error, ExportOptions, MessageState, NewMessage, Part, Provider, Refusal, Role, SessionId, Store,
};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    (dir, store)
}

fn started(store: &Store) -> SessionId {
    let session = store.create_session().expect("session");
    store
        .append(&session, NewMessage::user("list /tmp"))
        .expect("user");
    session
}

/// Every provider's export of the session passes that provider's checks.
pub fn assert_exports_pass(store: &Store, session: &SessionId) {
    let options = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    for provider in Provider::ALL {
        let body = store
            .export_now(session, provider, &options)
            .expect("export");
        let violations = check_request(provider, &body);
        assert!(
            violations.is_empty(),
            "{provider:?}: {violations:#?}\n{body:#}"
        );
    }
}

fn last(store: &Store, session: &SessionId) -> session_store::Message {
    store
        .messages(session)
        .expect("messages")
        .pop()
        .expect("a message")
}

#[test]
fn streamed_parts_read_back_one_by_one_and_finish_complete() {
    let (_dir, store) = store();
    let session = started(&store);
    let mut open = store
        .begin_message(&session, Role::Assistant)
        .expect("begin");
    assert_eq!(last(&store, &session).state, MessageState::Open);
    assert!(last(&store, &session).parts.is_empty());
    let parts = [
        Part::reasoning(
            "look first",
            Some(json!({"anthropic": {"signature": "sig"}})),
        ),
        Part::text("Listing it."),
        Part::tool_use("call_1", "bash", json!({"cmd": "ls /tmp"})),
    ];
    for (count, part) in parts.iter().enumerate() {
        open.push(part.clone()).expect("push");
        let stored = last(&store, &session);
        assert_eq!(stored.parts.len(), count + 1);
        assert_eq!(&stored.parts[count], part);
        assert_eq!(stored.state, MessageState::Open);
        // While it streams, its calls are pending, as for any last assistant message.
        assert_exports_pass(&store, &session);
    }
    let appended = open.finish().expect("finish");
    let stored = last(&store, &session);
    assert_eq!(
        (stored.seq, stored.state),
        (appended.seq, MessageState::Complete)
    );
    assert_eq!(
        store.pending_tool_uses(&session).expect("pending"),
        ["call_1"]
    );
    store
        .append(
            &session,
            NewMessage::tool(vec![Part::tool_result("call_1", "a b c")]),
        )
        .expect("result answers the streamed call");
}

#[test]
fn writes_wait_for_a_live_writer_and_nothing_is_written() {
    let (_dir, store) = store();
    let session = started(&store);
    let mut open = store
        .begin_message(&session, Role::Assistant)
        .expect("begin");
    open.push(Part::text("thinking aloud")).expect("push");
    let before = store.messages(&session).expect("messages");
    for refused in [
        store.append(&session, NewMessage::user("hurry up")).err(),
        store.cancel_pending(&session, "no").err(),
        store.begin_message(&session, Role::Assistant).err(),
    ] {
        assert!(
            matches!(refused, Some(Error::MessageOpen { seq, .. }) if seq == 2),
            "{refused:?}"
        );
    }
    assert_eq!(store.messages(&session).expect("messages"), before);
    open.finish().expect("finish");
    store
        .append(&session, NewMessage::user("thanks"))
        .expect("after finish");
}

#[test]
fn a_dropped_handle_leaves_an_interrupted_message_with_tombstones() {
    for calls in [0usize, 1, 3] {
        let (_dir, store) = store();
        let session = started(&store);
        let mut open = store
            .begin_message(&session, Role::Assistant)
            .expect("begin");
        open.push(Part::reasoning("plan", None)).expect("reasoning");
        for call in 0..calls {
            open.push(Part::tool_use(
                format!("call_{call}"),
                "bash",
                json!({"cmd": "true"}),
            ))
            .expect("call");
        }
        drop(open);
        let messages = store.messages(&session).expect("messages");
        let assistant = &messages[1];
        assert_eq!(assistant.state, MessageState::Interrupted);
        assert_eq!(assistant.parts.len(), calls + 1, "its parts stay");
        if calls > 0 {
            let tombstones = &messages[2];
            assert_eq!(tombstones.role, Role::Tool);
            assert_eq!(tombstones.parts.len(), calls);
            assert!(tombstones.parts.iter().all(|p| matches!(
                p,
                Part::ToolResult { content, is_error: true, .. }
                    if session_store::request::is_tombstone(content, true)
            )));
        } else {
            assert_eq!(messages.len(), 2);
        }
        assert!(store
            .pending_tool_uses(&session)
            .expect("pending")
            .is_empty());
        assert_exports_pass(&store, &session);
        store
            .append(&session, NewMessage::user("go on"))
            .expect("the session goes on");
        assert_exports_pass(&store, &session);
    }
}

#[test]
fn a_streamed_part_is_refused_where_an_append_would_be() {
    let (_dir, store) = store();
    let session = started(&store);
    store
        .append(
            &session,
            NewMessage::assistant(vec![Part::tool_use("used", "bash", json!({}))]),
        )
        .expect("call");
    // Pending: no assistant message may begin.
    let pending = store.begin_message(&session, Role::Assistant).err();
    assert!(
        matches!(&pending, Some(Error::Refused { reason: Refusal::PendingToolUses { ids, .. }, .. }) if ids == &["used"]),
        "{pending:?}"
    );
    store
        .append(
            &session,
            NewMessage::tool(vec![Part::tool_result("used", "ok")]),
        )
        .expect("answer");
    for role in [Role::User, Role::Tool, Role::System] {
        let refused = store.begin_message(&session, role).err();
        assert!(
            matches!(
                refused,
                Some(Error::Refused {
                    reason: Refusal::NotStreamable { .. },
                    ..
                })
            ),
            "{refused:?}"
        );
    }
    let mut open = store
        .begin_message(&session, Role::Assistant)
        .expect("begin");
    open.push(Part::tool_use("fresh", "bash", json!({})))
        .expect("fresh id");
    let before = store.messages(&session).expect("messages");
    let refusals = [
        (
            Part::tool_use("used", "bash", json!({})),
            "an id used earlier",
        ),
        (
            Part::tool_use("fresh", "bash", json!({})),
            "an id of this message",
        ),
        (
            Part::tool_result("fresh", "no"),
            "a result in an assistant message",
        ),
        (
            Part::tool_use("", "bash", json!({})),
            "a call without an id",
        ),
    ];
    for (part, why) in refusals {
        let refused = open.push(part);
        assert!(
            matches!(refused, Err(Error::Refused { .. })),
            "{why}: {refused:?}"
        );
        assert_eq!(store.messages(&session).expect("messages"), before, "{why}");
    }
    assert_eq!(open.len(), 1);
    open.finish().expect("finish");
}

#[test]
fn finishing_an_empty_message_is_refused_and_leaves_it_interrupted() {
    let (_dir, store) = store();
    let session = started(&store);
    let open = store
        .begin_message(&session, Role::Assistant)
        .expect("begin");
    let refused = open.finish();
    assert!(
        matches!(
            refused,
            Err(Error::Refused {
                reason: Refusal::EmptyMessage,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(last(&store, &session).state, MessageState::Interrupted);
    assert_exports_pass(&store, &session);
    store
        .append(&session, NewMessage::user("again"))
        .expect("goes on");
    assert_exports_pass(&store, &session);
}

#[test]
fn an_abandoned_message_is_found_by_the_check_and_settled_by_the_mend() {
    let (dir, store) = store();
    let session = started(&store);
    let mut open = store
        .begin_message(&session, Role::Assistant)
        .expect("begin");
    open.push(Part::tool_use("call_x", "bash", json!({})))
        .expect("call");
    // A writer in a process that is gone: the row names a pid that does not run.
    let raw = rusqlite::Connection::open(dir.path().join("s.db")).expect("raw");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    raw.execute(
        "UPDATE messages SET writer = ?1 WHERE state = 'open'",
        [format!("{}|999999999|1|1", host.trim())],
    )
    .expect("orphan the writer");
    std::mem::forget(open);
    let options = RepairOptions::default();
    let report = store.check(&[], &options).expect("check");
    let rules: Vec<HealthRule> = report.violations.iter().map(|v| v.rule).collect();
    assert_eq!(rules, [HealthRule::AbandonedMessage], "{report:#?}");
    store.repair_session(&session, &options).expect("mend");
    assert_eq!(
        store.messages(&session).expect("messages")[1].state,
        MessageState::Interrupted
    );
    assert!(store
        .check(&[], &options)
        .expect("check")
        .violations
        .is_empty());
    assert!(store
        .pending_tool_uses(&session)
        .expect("pending")
        .is_empty());
    assert_exports_pass(&store, &session);
}

/// The export of `session` as `provider` for `model`, checked by the provider's checks.
fn export_for(
    store: &Store,
    session: &SessionId,
    provider: Provider,
    model: &str,
) -> serde_json::Value {
    let options = ExportOptions {
        persist_latch: false,
        model: Some(model.to_owned()),
        ..ExportOptions::default()
    };
    let body = store
        .export_now(session, provider, &options)
        .expect("export");
    let violations = check_request(provider, &body);
    assert!(violations.is_empty(), "{violations:#?}\n{body:#}");
    body
}

#[test]
fn a_streamed_message_carries_its_model_and_its_signatures_follow_the_model_rule() {
    // (provider, the model that signed, the signed reasoning part, another model).
    let cases = [
        (
            Provider::Anthropic,
            "anthropic/claude-sonnet-4-5",
            Part::Reasoning {
                text: "Check the directory first.".into(),
                provider_metadata: Some(json!({"anthropic": {"signature": "EuYBCkQYAiJA"}})),
            },
            "anthropic/claude-opus-4-1",
        ),
        (
            Provider::Gemini,
            "gemini/gemini-2.5-pro",
            Part::Reasoning {
                text: "Check the directory first.".into(),
                provider_metadata: Some(
                    json!({"gemini": {"thought": true, "thoughtSignature": "CiQBVKhc7g"}}),
                ),
            },
            "gemini/gemini-2.5-flash",
        ),
    ];
    for (provider, signer, signed, other) in cases {
        for model_first in [true, false] {
            let (_dir, store) = store();
            let parts = vec![signed.clone(), Part::text("It holds three files.")];
            let appended = started(&store);
            store
                .append(
                    &appended,
                    NewMessage::assistant(parts.clone()).by_model(signer),
                )
                .expect("append");
            let streamed = started(&store);
            let mut open = store
                .begin_message(&streamed, Role::Assistant)
                .expect("begin");
            if model_first {
                open.set_model(signer).expect("model");
            }
            for part in parts {
                open.push(part).expect("push");
            }
            if !model_first {
                open.set_model(signer).expect("model");
            }
            open.finish().expect("finish");
            assert_eq!(
                last(&store, &streamed).model.as_deref(),
                Some(signer),
                "{provider:?}"
            );
            for target in [signer, other] {
                let (a, s) = (
                    export_for(&store, &appended, provider, target),
                    export_for(&store, &streamed, provider, target),
                );
                assert_eq!(
                    a, s,
                    "{provider:?} for {target}: streamed and appended differ"
                );
                let signature = if provider == Provider::Anthropic {
                    "EuYBCkQYAiJA"
                } else {
                    "CiQBVKhc7g"
                };
                assert_eq!(
                    s.to_string().contains(signature),
                    target == signer,
                    "{provider:?} for {target}: {s:#}"
                );
            }
        }
    }
}

#[test]
fn the_model_of_a_message_no_longer_open_is_not_set() {
    let (dir, store) = store();
    let session = started(&store);
    let mut open = store
        .begin_message(&session, Role::Assistant)
        .expect("begin");
    open.push(Part::text("partial")).expect("push");
    // Interrupted behind the handle's back (as a settle from another process would).
    let raw = rusqlite::Connection::open(dir.path().join("s.db")).expect("raw");
    raw.execute(
        "UPDATE messages SET state = 'interrupted', writer = NULL WHERE state = 'open'",
        [],
    )
    .expect("interrupt");
    match open.set_model("anthropic/claude-sonnet-4-5") {
        Err(Error::MessageNotOpen { state, .. }) => assert_eq!(state, "interrupted"),
        other => panic!("{other:?}"),
    }
    assert_eq!(last(&store, &session).model, None, "nothing written");
}

/// `session-store show` marks a message that is still streaming, and one whose writer went
/// away (its handle dropped unfinished), for messages of text alone, of a call, and of
/// reasoning then text.
#[test]
fn show_marks_open_and_interrupted_messages() {
    const OPEN: &str = "[open: still streaming]";
    const INTERRUPTED: &str = "[interrupted: its writer went away]";
    let cases: Vec<(&str, Vec<Part>)> = vec![
        ("text", vec![Part::text("Looking")]),
        (
            "a call",
            vec![
                Part::text("Listing it."),
                Part::tool_use("call_ls", "ls", json!({"path": "/tmp"})),
            ],
        ),
        (
            "reasoning then text",
            vec![
                Part::reasoning("The user wants a list.", None),
                Part::text("Here"),
            ],
        ),
    ];
    for (case, parts) in cases {
        let (dir, store) = store();
        let db = dir.path().join("s.db");
        let session = started(&store);
        let mut open = store
            .begin_message(&session, Role::Assistant)
            .expect("begin");
        for part in parts {
            open.push(part).expect("push");
        }
        let shown = crate::subagents::cli(&db, &["show", session.as_str()]);
        assert!(shown.contains(OPEN), "{case}: {shown}");
        assert!(!shown.contains(INTERRUPTED), "{case}: {shown}");
        drop(open);
        let shown = crate::subagents::cli(&db, &["show", session.as_str()]);
        assert!(shown.contains(INTERRUPTED), "{case}: {shown}");
        assert!(!shown.contains(OPEN), "{case}: {shown}");
        assert_exports_pass(&store, &session);
    }
}

//! A Claude Code log is a tree, not a list: a rewind (double Esc) or an edited earlier
//! prompt writes a new branch hanging off an earlier `uuid` of the same file, and Claude Code
//! resumes only the chain ending at the latest leaf. Importing the lines in file order sent
//! turns the model never saw together, in a request that passes every structural check.
//! These tests import real logs (`tests/fixtures/transcripts/agent-history/`,
//! `claude-code-log/`) through the streamed path the CLI takes, and read the exported
//! request and the stored sessions.

use std::fs::File;

use serde_json::{json, Value};
use session_store::import::Format;
use session_store::request::check;
use session_store::{ExportOptions, ImportSummary, Provider, SessionId, Store};

use crate::util::{temp_store, transcripts};

fn import(store: &Store, relative: &str) -> ImportSummary {
    let file = File::open(transcripts().join(relative)).expect("fixture");
    store
        .import_reader(Format::ClaudeCode, file)
        .expect("imports")
}

/// The Anthropic request the session exports, checked against the provider's rules, as text.
fn exported(store: &Store, session: &SessionId) -> String {
    let options = ExportOptions {
        persist_latch: false,
        ..ExportOptions::default()
    };
    let body = store
        .export_now(session, Provider::Anthropic, &options)
        .expect("exports");
    assert!(check(Provider::Anthropic, &body).is_empty(), "{body}");
    body.to_string()
}

/// Where each text sits in `text` (panics when one is missing).
fn positions(text: &str, needles: &[&str]) -> Vec<usize> {
    needles
        .iter()
        .map(|n| {
            text.find(n)
                .unwrap_or_else(|| panic!("{n:?} missing: {text}"))
        })
        .collect()
}

#[test]
fn a_rewound_claude_code_log_exports_only_the_branch_claude_code_resumes() {
    let (_dir, store, _) = temp_store();
    let summary = import(&store, "agent-history/claude_forked_session.jsonl");
    let main = exported(&store, &summary.session);
    // The latest leaf (fa5b) is on the MergeSort branch: what Claude Code resumes.
    let at = positions(
        &main,
        &[
            "Help me implement",
            "try MergeSort instead",
            "add type hints",
        ],
    );
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{main}");
    assert!(
        !main.contains("go with QuickSort") && !main.contains("toolu_f001"),
        "the abandoned QuickSort branch was sent with the MergeSort one: {main}"
    );
    // Nothing lost: the QuickSort branch is a fork of the main session after the first turn.
    assert_eq!(summary.branches.len(), 1, "{summary:?}");
    let branch = &summary.branches[0];
    assert_eq!(branch.forked_from.as_ref(), Some(&summary.session));
    assert_eq!(branch.at_turn, Some(1));
    let abandoned = exported(&store, &branch.session);
    positions(
        &abandoned,
        &["Help me implement", "go with QuickSort", "toolu_f001"],
    );
    assert!(!abandoned.contains("MergeSort instead"), "{abandoned}");
    let lineage = store.lineage().expect("lineage");
    let row = lineage
        .iter()
        .find(|l| l.id == branch.session)
        .expect("the branch's lineage");
    assert_eq!(row.parent.as_ref(), Some(&summary.session));
    assert_eq!(row.forked_at_turn, Some(1));
    assert!(summary.children.is_empty(), "a branch is not a sub-agent");
}

#[test]
fn a_compaction_after_a_rewind_continues_the_branch_it_compacted() {
    let (_dir, store, _) = temp_store();
    let summary = import(&store, "claude-code-log/dag_compact_after_rewind.jsonl");
    let main = exported(&store, &summary.session);
    let at = positions(
        &main,
        &[
            "continued from a previous conversation",
            "After compaction",
            "Final answer",
        ],
    );
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{main}");
    // The compacted head is the branch the boundary's logicalParentUuid names.
    let stored: Vec<String> = store
        .messages(&summary.session)
        .expect("messages")
        .iter()
        .map(|m| serde_json::to_string(&m.parts).expect("json"))
        .collect();
    let stored = stored.join("\n");
    assert!(
        stored.contains("Second attempt") && stored.contains("Kept going"),
        "{stored}"
    );
    assert!(!stored.contains("First attempt"), "{stored}");
    assert_eq!(summary.branches.len(), 1, "{summary:?}");
    let branch = &summary.branches[0];
    assert_eq!(branch.forked_from.as_ref(), Some(&summary.session));
    positions(
        &exported(&store, &branch.session),
        &["Start", "First attempt", "First answer"],
    );
}

#[test]
fn a_partial_compactions_kept_messages_are_sent_after_its_summary() {
    let (_dir, store, _) = temp_store();
    let summary = import(
        &store,
        "claude-code-log/dag_compact_after_rewind_preserved.jsonl",
    );
    let main = exported(&store, &summary.session);
    // compactMetadata.preservedMessages keeps b2a, b2u2, b2a2 after the summary (anchor cs).
    let at = positions(
        &main,
        &[
            "continued from a previous conversation",
            "Second answer",
            "Keep going",
            "Kept going",
            "After compaction",
            "Final answer",
        ],
    );
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{main}");
    assert!(!main.contains("First attempt"), "{main}");
    assert_eq!(summary.branches.len(), 1, "{summary:?}");
}

/// Two sessions' lines in one file (hand-written: the public fixture with this shape is under
/// a license the project does not copy): each is a session, none mixed into the other.
#[test]
fn another_sessions_lines_in_a_log_become_a_session_of_their_own() {
    let line = |uuid: &str, parent: Value, session: &str, kind: &str, text: &str| {
        json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": session,
               "timestamp": "2026-07-01T10:00:00Z",
               "message": {"role": kind, "content": [{"type": "text", "text": text}]}})
        .to_string()
    };
    let log = [
        line("m1", Value::Null, "main", "user", "Review the parser."),
        line("m2", json!("m1"), "main", "assistant", "Reviewing."),
        line(
            "o1",
            Value::Null,
            "other",
            "user",
            "An independent session.",
        ),
        line("m3", json!("m2"), "main", "user", "Go on."),
        line("o2", json!("o1"), "other", "assistant", "Other reply."),
    ]
    .join("\n");
    let (dir, store, _) = temp_store();
    let path = dir.path().join("two.jsonl");
    std::fs::write(&path, log).expect("write");
    let summary = store
        .import_reader(Format::ClaudeCode, File::open(&path).expect("open"))
        .expect("imports");
    let main = exported(&store, &summary.session);
    positions(&main, &["Review the parser.", "Reviewing.", "Go on."]);
    assert!(
        !main.contains("independent") && !main.contains("Other reply"),
        "{main}"
    );
    assert_eq!(summary.branches.len(), 1, "{summary:?}");
    let other = &summary.branches[0];
    assert_eq!(other.forked_from, None);
    assert_eq!(other.at_turn, None);
    let text = exported(&store, &other.session);
    positions(&text, &["An independent session.", "Other reply."]);
    let lineage = store.lineage().expect("lineage");
    let row = lineage.iter().find(|l| l.id == other.session).expect("row");
    assert_eq!(row.parent, None);
}

/// A sub-agent's result that answers none of its calls is kept as text: the import says how
/// many (`orphans_as_text` counts the children's too), and the text keeps its line's time.
#[test]
fn a_sidechain_result_answering_nothing_is_counted_and_keeps_its_time() {
    let (_dir, store, _) = temp_store();
    let summary = import(&store, "claude-code-log/sidechain_integrated.jsonl");
    assert_eq!(summary.orphans_as_text, 1, "{summary:?}");
    let messages: Vec<_> = summary
        .children
        .iter()
        .flat_map(|child| store.messages(child).expect("messages"))
        .collect();
    let orphan = messages
        .iter()
        .find(|m| {
            m.parts.iter().any(|p| {
                p.provider_metadata()
                    .is_some_and(|meta| meta["import"]["orphan_tool_result"].is_object())
            })
        })
        .expect("the orphan kept as text");
    assert_eq!(
        orphan
            .created_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "2025-11-19T22:54:57.555Z"
    );
}

//! Streamed imports (`Store::import_reader`): a transcript is appended in batches while it is
//! read (a request body a message at a time, a log a line at a time), so the failures this
//! file guards against are a streamed import that stores something other than what the
//! whole-file importer builds (different rows, order, models, usage, titles, compactions,
//! child sessions), and a refusal found after batches were written that leaves a
//! half-imported session behind. Both backends (PostgreSQL when `SESSION_STORE_TEST_PG` is set).

use std::io::Cursor;

use proptest::prelude::*;
use serde_json::{json, Value};
use session_store::{
    import::{import as import_transcript, Format, ImportError},
    Message, SessionId, Store,
};

use crate::backends::backends;
use crate::import_fixtures::transcripts;

/// What an import stored (title, messages, summaries, then each child's), without the ids
/// and times the store assigns; the child sessions' ids named by their place.
fn stored(store: &Store, session: &SessionId, children: &[SessionId]) -> String {
    let conversation = |id: &SessionId| {
        let title = store
            .session_overviews()
            .expect("overviews")
            .into_iter()
            .find(|o| o.id == *id)
            .and_then(|o| o.title);
        let messages: Vec<_> = store
            .messages(id)
            .expect("messages")
            .into_iter()
            .map(|m: Message| {
                (
                    m.seq,
                    m.turn_index,
                    format!("{:?}", m.role),
                    m.compacted,
                    m.model,
                    serde_json::to_value(&m.parts).expect("parts"),
                )
            })
            .collect();
        let summaries: Vec<_> = store
            .summaries(id)
            .expect("summaries")
            .into_iter()
            .map(|s| {
                (
                    s.first_turn,
                    s.last_turn,
                    s.compacted_from_turn,
                    s.through_seq,
                    s.text,
                )
            })
            .collect();
        format!("{title:?}\n{messages:?}\n{summaries:?}\n")
    };
    let mut out = conversation(session);
    for child in children {
        out.push_str(&conversation(child));
    }
    for (k, child) in children.iter().enumerate() {
        out = out.replace(child.as_str(), &format!("child-{k}"));
    }
    out
}

/// Imports `text` both ways into `store` and checks they stored the same rows.
fn same_both_ways(store: &Store, format: Format, text: &str) {
    let imported = import_transcript(format, text).expect("imports whole");
    let whole = store.import(&imported).expect("stored whole");
    let streamed = store
        .import_reader(format, Cursor::new(text.as_bytes()))
        .expect("streams");
    // Sub-agents, then the log's other conversations (each a session of its own).
    let with_branches = |children: &[session_store::SessionId],
                         branches: &[session_store::BranchSession]| {
        let mut all = children.to_vec();
        all.extend(branches.iter().map(|b| b.session.clone()));
        all
    };
    assert_eq!(
        stored(
            store,
            &streamed.session,
            &with_branches(&streamed.children, &streamed.branches)
        ),
        stored(
            store,
            &whole.session,
            &with_branches(&whole.children, &whole.branches)
        ),
        "{format}"
    );
    assert_eq!(
        streamed
            .branches
            .iter()
            .map(|b| (b.forked_from.is_some(), b.at_turn))
            .collect::<Vec<_>>(),
        whole
            .branches
            .iter()
            .map(|b| (b.forked_from.is_some(), b.at_turn))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        streamed.messages,
        store.messages(&whole.session).expect("messages").len()
    );
    assert_eq!(streamed.tombstoned, imported.tombstoned);
    // The summary counts the children's orphans too.
    let orphans = imported.orphans_as_text
        + imported
            .children
            .iter()
            .map(|c| c.imported.orphans_as_text)
            .sum::<usize>();
    assert_eq!(streamed.orphans_as_text, orphans);
    assert_eq!(streamed.warnings, imported.warnings);
}

/// A body of `turns` tool turns, past several batches.
fn long_body(turns: usize) -> Value {
    let mut messages = Vec::new();
    for n in 0..turns {
        let id = format!("toolu_{n}");
        messages.push(json!({"role": "user", "content": format!("question {n}")}));
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": format!("sig{n}")},
            {"type": "tool_use", "id": id, "name": "read", "input": {"n": n}}],
            "usage": {"input_tokens": n, "output_tokens": 1}}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": format!("result {n}")}]}));
        messages.push(json!({"role": "assistant", "content": format!("answer {n}")}));
    }
    json!({"system": "be brief", "model": "claude-x", "messages": messages})
}

#[test]
fn streamed_transcripts_store_what_the_whole_file_importer_builds() {
    let mut fixtures = transcripts();
    let codex = crate::util::transcripts().join("agentcmd/codex");
    for entry in std::fs::read_dir(&codex).expect("codex folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            fixtures.push((path, Format::Codex));
        }
    }
    assert!(fixtures.len() > 15, "{fixtures:?}");
    for backend in backends() {
        for (path, format) in &fixtures {
            let text = std::fs::read_to_string(path).expect("fixture");
            same_both_ways(&backend.store, *format, &text);
        }
        same_both_ways(
            &backend.store,
            Format::Anthropic,
            &long_body(300).to_string(),
        );
    }
}

#[test]
fn a_refusal_after_batches_were_written_leaves_no_session_behind() {
    let mut body = long_body(300);
    // The last message answers a call nobody made: found long after the first batches.
    body["messages"]
        .as_array_mut()
        .expect("messages")
        .push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "nobody", "content": "x"}]}));
    let text = body.to_string();
    for backend in backends() {
        let err = backend
            .store
            .import_reader(Format::Anthropic, Cursor::new(text.as_bytes()))
            .expect_err("refused");
        let session_store::Error::Import(ImportError::Refused { at, .. }) = &err else {
            panic!("{}: {err:?}", backend.name);
        };
        assert_eq!(at.path, "messages[1200]", "{}", backend.name);
        assert!(
            backend.store.sessions().expect("sessions").is_empty(),
            "{}: a half-imported session was left behind",
            backend.name
        );
    }
    // A log: its 1,201st line holds a message without content.
    let mut log = String::new();
    for n in 0..300 {
        let id = format!("toolu_{n}");
        for line in [
            json!({"type": "user", "uuid": format!("u{n}"), "message": {"role": "user", "content": format!("q {n}")}}),
            json!({"type": "assistant", "uuid": format!("a{n}"), "message": {"id": format!("m{n}"), "role": "assistant",
                "content": [{"type": "tool_use", "id": id, "name": "f", "input": {}}]}}),
            json!({"type": "user", "uuid": format!("r{n}"), "message": {"role": "user",
                "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}}),
            json!({"type": "assistant", "uuid": format!("b{n}"), "message": {"id": format!("n{n}"), "role": "assistant", "content": "done"}}),
        ] {
            log.push_str(&line.to_string());
            log.push('\n');
        }
    }
    log.push_str("{\"type\": \"user\", \"uuid\": \"last\", \"message\": {\"role\": \"user\"}}\n");
    for backend in backends() {
        let err = backend
            .store
            .import_reader(Format::ClaudeCode, Cursor::new(log.as_bytes()))
            .expect_err("refused");
        let session_store::Error::Import(ImportError::Malformed { at, .. }) = &err else {
            panic!("{}: {err:?}", backend.name);
        };
        assert_eq!(at.line, Some(1201), "{}", backend.name);
        assert!(
            backend.store.sessions().expect("sessions").is_empty(),
            "{}: a half-imported log was left behind",
            backend.name
        );
    }
}

#[test]
fn a_body_the_parse_layer_refuses_is_refused_with_the_same_error_streamed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("s.db")).expect("open");
    let cases: [&[u8]; 4] = [
        br#"{"messages": [{"role": "user", "content": "a"}], "messages": []}"#,
        b"{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xe9\"}]}",
        b"{\"messages\": [\n{\"role\": \"user\", \"content\": \"a\"},\n{oops}]}",
        br#"{"messages": [{"role": "robot", "content": "a"}]}"#,
    ];
    for bytes in cases {
        let whole = session_store::import::import_bytes(Format::Anthropic, bytes)
            .expect_err("refused whole");
        let streamed = store
            .import_reader(Format::Anthropic, Cursor::new(bytes))
            .expect_err("refused streamed");
        let session_store::Error::Import(streamed) = streamed else {
            panic!("{streamed:?}");
        };
        assert_eq!(streamed.to_string(), whole.to_string());
        assert_eq!(streamed.location(), whole.location());
    }
    assert!(store.sessions().expect("sessions").is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Any mix of text turns, tool turns and parallel calls, in any body format that has
    /// them, streams into the rows the whole-file importer stores.
    #[test]
    fn streaming_and_whole_file_import_store_the_same_rows(
        turns in prop::collection::vec((0usize..4, 0usize..200), 1..160),
    ) {
        let mut anthropic = Vec::new();
        let mut openai = Vec::new();
        for (n, (calls, size)) in turns.iter().enumerate() {
            let text = "w".repeat(*size);
            anthropic.push(json!({"role": "user", "content": format!("{n} {text}")}));
            openai.push(json!({"role": "user", "content": format!("{n} {text}")}));
            let ids: Vec<String> = (0..*calls).map(|c| format!("c{n}_{c}")).collect();
            if ids.is_empty() {
                anthropic.push(json!({"role": "assistant", "content": text}));
                openai.push(json!({"role": "assistant", "content": text}));
                continue;
            }
            anthropic.push(json!({"role": "assistant", "content": ids.iter()
                .map(|id| json!({"type": "tool_use", "id": id, "name": "f", "input": {"s": text}}))
                .collect::<Vec<_>>()}));
            anthropic.push(json!({"role": "user", "content": ids.iter()
                .map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": text}))
                .collect::<Vec<_>>()}));
            openai.push(json!({"role": "assistant", "content": null, "tool_calls": ids.iter()
                .map(|id| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}))
                .collect::<Vec<_>>()}));
            for id in &ids {
                openai.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("s.db")).expect("open");
        same_both_ways(&store, Format::Anthropic, &json!({"system": "s", "messages": anthropic}).to_string());
        same_both_ways(&store, Format::OpenAi, &json!({"model": "m", "messages": openai}).to_string());
    }
}

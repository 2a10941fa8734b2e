//! Lossless import, storage and export (issue 15): images, documents, server tools,
//! citations, structured tool results, opaque blocks, reused call ids, big numbers and
//! `reasoning_content` used to become placeholder text, be rounded, be refused or dropped.
//! Each test imports a body, stores it in a real SQLite file, exports it again and counts
//! every block type on both sides; the export passes the provider's contract.

use serde_json::{json, Value};
use session_store::import::{import as import_transcript, Format};
use session_store::{
    request::{check_anthropic, check_openai},
    ExportOptions, Part, Provider,
};

use crate::util::{raw, temp_store};

/// Counts of each block `type` (and signatures) anywhere under `messages`.
fn count(body: &Value, kind: &str) -> usize {
    fn walk(value: &Value, kind: &str, n: &mut usize) {
        match value {
            Value::Object(map) => {
                if map.get("type").and_then(Value::as_str) == Some(kind) {
                    *n += 1;
                }
                for (key, v) in map {
                    if key == "signature" && kind == "signature" {
                        *n += 1;
                    }
                    walk(v, kind, n);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, kind, n)),
            _ => {}
        }
    }
    let mut n = 0;
    walk(&body["messages"], kind, &mut n);
    n
}

fn round_trip(format: Format, body: &Value, provider: Provider) -> Value {
    let (_dir, store, _path) = temp_store();
    let imported = import_transcript(format, &body.to_string()).expect("imports");
    let id = store
        .import_session(imported.into_messages())
        .expect("stores");
    store
        .export_now(&id, provider, &ExportOptions::default())
        .expect("exports")
}

fn rich_anthropic_body() -> Value {
    let png = json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="});
    json!({"model": "claude-sonnet-4-5", "system": "be brief", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "what is in these?"},
            {"type": "image", "source": png},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "The sky is blue."},
             "title": "facts", "citations": {"enabled": true}},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "look", "signature": "SIG1"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "sky"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                {"type": "web_search_result", "url": "https://example.com", "title": "Sky", "encrypted_content": "EC"}]},
            {"type": "text", "text": "The sky is blue.", "citations": [
                {"type": "char_location", "cited_text": "The sky is blue.", "document_index": 0,
                 "document_title": "facts", "start_char_index": 0, "end_char_index": 16}]},
            {"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {"n": 12345678901234567890123_u128}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "here"}, {"type": "image", "source": png}]},
        ]},
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "REDACTED"},
            {"type": "compaction", "content": "provider-side summary"},
            {"type": "text", "text": "Done.  "},
        ]},
    ]})
}

#[test]
fn every_anthropic_block_survives_import_storage_and_export() {
    let body = rich_anthropic_body();
    let out = round_trip(Format::Anthropic, &body, Provider::Anthropic);
    for kind in [
        "image",
        "document",
        "server_tool_use",
        "web_search_tool_result",
        "char_location",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "tool_result",
        "compaction",
        "signature",
    ] {
        assert_eq!(count(&out, kind), count(&body, kind), "{kind}: {out:#}");
    }
    assert_eq!(out["system"], json!("be brief"));
    assert_eq!(check_anthropic(&out), vec![], "{out:#}");
    // Rule 7b: the final assistant text loses its trailing whitespace.
    let last = &out["messages"][3]["content"];
    assert_eq!(
        last[last.as_array().map_or(0, Vec::len) - 1]["text"],
        "Done."
    );
}

#[test]
fn big_integers_in_tool_input_keep_their_exact_text() {
    let (_dir, store, path) = temp_store();
    let imported =
        import_transcript(Format::Anthropic, &rich_anthropic_body().to_string()).expect("imports");
    store
        .import_session(imported.into_messages())
        .expect("stores");
    let input: String = raw(&path)
        .query_row(
            "SELECT input FROM parts WHERE kind = 'tool_use'",
            [],
            |row| row.get(0),
        )
        .expect("one tool_use");
    assert_eq!(input, r#"{"n":12345678901234567890123}"#);
}

#[test]
fn the_openai_export_sends_images_and_describes_what_it_cannot_take() {
    let body = rich_anthropic_body();
    let out = round_trip(Format::Anthropic, &body, Provider::OpenAi);
    assert_eq!(check_openai(&out), vec![], "{out:#}");
    assert_eq!(count(&out, "image_url"), 1, "{out:#}");
    let text = out.to_string();
    assert!(text.contains("[server tool call"), "{out:#}");
    assert!(
        !text.contains("provider-side summary"),
        "opaque goes to its provider only"
    );
}

#[test]
fn a_reused_call_id_is_stored_under_a_fresh_id_and_the_original_kept() {
    let call = |args: &str| json!({"id": "call_1", "type": "function", "function": {"name": "f", "arguments": args}});
    let body = json!({"model": "deepseek-reasoner", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "reasoning_content": "think 1", "tool_calls": [call("{}")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "one"},
        {"role": "system", "content": "a note inside nothing"},
        {"role": "assistant", "content": null, "reasoning_content": "think 2", "tool_calls": [call("{\"x\":1}")]},
        {"role": "system", "content": "a system message inside a tool block never breaks the pair"},
        {"role": "tool", "tool_call_id": "call_1", "content": "two"},
        {"role": "assistant", "content": "done"},
    ]});
    let imported = import_transcript(Format::OpenAi, &body.to_string()).expect("imports");
    let ids: Vec<String> = imported
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.tool_use_id().map(str::to_owned))
        .collect();
    assert_eq!(ids, ["call_1", "call_1", "call_1__2", "call_1__2"]);
    let renamed = imported
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .find(|p| matches!(p, Part::ToolUse { id, .. } if id == "call_1__2"));
    assert_eq!(
        renamed.and_then(|p| p.provider_metadata()),
        Some(&json!({"import": {"original_id": "call_1"}}))
    );
    let out = round_trip(Format::OpenAi, &body, Provider::OpenAi);
    assert_eq!(check_openai(&out), vec![], "{out:#}");
    assert_eq!(count_key(&out, "reasoning_content"), 2, "{out:#}");
}

fn count_key(body: &Value, key: &str) -> usize {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m.get(key).is_some())
        .count()
}

#[test]
fn a_stored_part_kind_outside_the_contract_is_refused_by_the_schema() {
    let (_dir, _store, path) = temp_store();
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
         INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES (1, 's', 0, 0, 'user', '2026-01-01T00:00:00Z');
         INSERT INTO parts (message_id, ordinal, kind, input) VALUES (1, 0, 'image', '{}');",
    )
    .expect("image is a kind");
    assert!(conn
        .execute(
            "INSERT INTO parts (message_id, ordinal, kind) VALUES (1, 1, 'video')",
            []
        )
        .is_err());
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(crate::util::transcripts().join(path)).expect("fixture")
}

#[test]
fn a_claude_code_compaction_becomes_a_store_compaction_and_the_export_sends_what_claude_code_sent()
{
    for path in [
        "fasthooks/sample_main_transcript.jsonl",
        "spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
    ] {
        let imported = import_transcript(Format::ClaudeCode, &fixture(path)).expect("imports");
        assert_eq!(imported.compactions.len(), 1, "{path}");
        let summary = imported.compactions[0].summary.clone();
        let (_dir, store, path_db) = temp_store();
        let stored = store.import(&imported).expect("stores");
        let summaries = store.summaries(&stored.session).expect("summaries");
        assert_eq!(summaries.len(), 1, "{path}");
        assert_eq!(summaries[0].text, summary);
        let compacted: i64 = raw(&path_db)
            .query_row(
                "SELECT COUNT(*) FROM messages WHERE compacted = 1",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert!(compacted > 0, "{path}");
        assert!(crate::util::violations(&path_db).is_empty(), "{path}");
        let body = store
            .export_now(
                &stored.session,
                Provider::Anthropic,
                &ExportOptions::default(),
            )
            .expect("exports");
        let first = body["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(first.ends_with(summary.as_str()), "{path}: {first:.200}");
        assert_eq!(check_anthropic(&body), vec![], "{path}");
    }
}

#[test]
fn system_messages_stay_in_what_the_provider_sees_when_their_turn_is_compacted() {
    let (_dir, store, _path) = temp_store();
    let session = store.create_session().expect("session");
    for message in [
        session_store::NewMessage::system("You are a careful agent."),
        session_store::NewMessage::user("one"),
        session_store::NewMessage::assistant(vec![Part::text("1")]),
        session_store::NewMessage::user("two"),
        session_store::NewMessage::assistant(vec![Part::text("2")]),
    ] {
        store.append(&session, message).expect("append");
    }
    let outcome = store
        .compact(&session, 1, "They counted.")
        .expect("compact");
    assert!(!outcome.is_nothing());
    let anthropic = store
        .export_now(&session, Provider::Anthropic, &ExportOptions::default())
        .expect("export");
    assert_eq!(anthropic["system"], json!("You are a careful agent."));
    let openai = store
        .export_now(&session, Provider::OpenAi, &ExportOptions::default())
        .expect("export");
    assert_eq!(openai["messages"][0]["role"], "system");
    assert!(openai["messages"][1]["content"]
        .as_str()
        .is_some_and(|t| t.ends_with("They counted.")));
    assert_eq!(check_openai(&openai), vec![]);
}

#[test]
fn sidechain_lines_become_a_child_session_linked_to_the_task_call() {
    let line = |v: Value| v.to_string();
    let log = [
        line(
            json!({"type": "user", "uuid": "u1", "isSidechain": false, "message": {"role": "user", "content": "research X"}}),
        ),
        line(
            json!({"type": "assistant", "uuid": "a1", "isSidechain": false, "message": {"id": "m1", "role": "assistant",
            "model": "claude-opus-4-6", "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100},
            "content": [{"type": "tool_use", "id": "toolu_task", "name": "Task", "input": {"prompt": "find X", "description": "d"}}]}}),
        ),
        line(
            json!({"type": "user", "uuid": "s1", "isSidechain": true, "agentId": "ag1", "message": {"role": "user", "content": "find X"}}),
        ),
        line(
            json!({"type": "assistant", "uuid": "s2", "isSidechain": true, "agentId": "ag1", "message": {"id": "m2", "role": "assistant",
            "content": [{"type": "text", "text": "X is 42"}]}}),
        ),
        line(
            json!({"type": "user", "uuid": "u2", "isSidechain": false, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_task", "content": "X is 42"}]}}),
        ),
    ]
    .join("\n");
    let imported = import_transcript(Format::ClaudeCode, &log).expect("imports");
    assert_eq!(imported.children.len(), 1);
    assert_eq!(
        imported.children[0].spawned_by.as_deref(),
        Some("toolu_task")
    );
    let usage = imported.messages[1].usage.as_ref().expect("usage");
    assert_eq!(usage.cache_read_tokens, Some(100));
    let (_dir, store, path) = temp_store();
    let stored = store.import(&imported).expect("stores");
    assert_eq!(stored.children.len(), 1);
    let link: String = raw(&path)
        .query_row(
            "SELECT json_extract(provider_metadata, '$.session_store.child_session') FROM parts WHERE tool_use_id = 'toolu_task' AND kind = 'tool_use'",
            [],
            |r| r.get(0),
        )
        .expect("linked");
    assert_eq!(link, stored.children[0].as_str());
    let child = store
        .export_now(
            &stored.children[0],
            Provider::Anthropic,
            &ExportOptions::default(),
        )
        .expect("child exports");
    assert_eq!(child["messages"][0]["content"][0]["text"], "find X");
    let model: String = raw(&path)
        .query_row(
            "SELECT model FROM messages WHERE role = 'assistant' AND model IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .expect("model stored");
    assert_eq!(model, "anthropic/claude-opus-4-6");
}

/// Every Anthropic block of a source, by type (tool_result content searched too), and the
/// citations of its text blocks.
fn block_counts(values: &[&Value]) -> std::collections::BTreeMap<String, usize> {
    fn walk(block: &Value, counts: &mut std::collections::BTreeMap<String, usize>) {
        let Some(kind) = block.get("type").and_then(Value::as_str) else {
            return;
        };
        *counts.entry(kind.to_owned()).or_default() += 1;
        if let Some(citations) = block.get("citations").and_then(Value::as_array) {
            *counts.entry("citation".to_owned()).or_default() += citations.len();
        }
        if kind == "tool_result" {
            for inner in block["content"].as_array().into_iter().flatten() {
                walk(inner, counts);
            }
        }
    }
    let mut counts = std::collections::BTreeMap::new();
    for content in values {
        for block in content.as_array().into_iter().flatten() {
            walk(block, &mut counts);
        }
    }
    // Text is compared elsewhere (blank text is not sent, by rule 7).
    counts.remove("text");
    counts
}

#[test]
fn per_block_type_counts_in_every_fixture_equal_the_counts_in_its_anthropic_export() {
    let (_dir, store, _path) = temp_store();
    let options = ExportOptions {
        persist_latch: false,
        thinking: session_store::request::ThinkingConfig {
            keep_recent: usize::MAX,
            ..session_store::request::ThinkingConfig::default()
        },
        model: None,
    };
    let mut compared = 0;
    for (path, format) in crate::import_fixtures::transcripts() {
        if format == Format::OpenAi {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("fixture");
        let source_values: Vec<Value> = match format {
            Format::ClaudeCode => {
                let lines: Vec<Value> = text
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| serde_json::from_str(l).expect("JSON line"))
                    .filter(|v: &Value| v["type"] == "user" || v["type"] == "assistant")
                    .collect();
                let only_side = lines.iter().all(|v| v["isSidechain"] == true);
                let mut seen = std::collections::HashSet::new();
                lines
                    .into_iter()
                    .filter(|v| only_side || v["isSidechain"] != true)
                    .filter(|v| v["uuid"].as_str().is_none_or(|u| seen.insert(u.to_owned())))
                    .map(|v| v["message"]["content"].clone())
                    .collect()
            }
            _ => {
                let body: Value = serde_json::from_str(&text).expect("JSON");
                body["messages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|m| m["content"].clone())
                    .collect()
            }
        };
        let source = block_counts(&source_values.iter().collect::<Vec<_>>());
        let imported = import_transcript(format, &text).expect("imports");
        let mut tombstones = imported.tombstoned.len();
        // A Claude Code log's abandoned branches are sessions of their own, each repeating
        // the messages it shares with the conversation it left: only its own are counted
        // (every branch of these fixtures leaves at a turn's start).
        let mut parts = Vec::new();
        for child in &imported.children {
            if let Some(branch) = child.branch {
                tombstones += child.imported.tombstoned.len();
                parts.push(child.imported.messages[branch.shared..].to_vec());
            }
        }
        parts.insert(0, imported.into_messages());
        let mut bodies = Vec::new();
        for messages in parts {
            // Stored without the compactions, so the export holds every turn.
            let id = store.import_session(messages).expect("stores");
            let body = store
                .export_now(&id, Provider::Anthropic, &options)
                .expect("exports");
            assert_eq!(check_anthropic(&body), vec![], "{}", path.display());
            bodies.push(body);
        }
        let exported_contents: Vec<&Value> = bodies
            .iter()
            .flat_map(|body| body["messages"].as_array().into_iter().flatten())
            .map(|m| &m["content"])
            .collect();
        let mut exported = block_counts(&exported_contents);
        // Tombstones the import wrote, and those the loader sends for calls still pending.
        let synthetic = exported_contents
            .iter()
            .flat_map(|c| c.as_array().into_iter().flatten())
            .filter(|b| {
                b["type"] == "tool_result"
                    && b["content"]
                        .as_str()
                        .is_some_and(|t| session_store::request::is_tombstone(t, true))
            })
            .count();
        assert!(synthetic >= tombstones, "{}", path.display());
        if let Some(results) = exported.get_mut("tool_result") {
            *results -= synthetic;
        }
        exported.retain(|_, n| *n > 0);
        assert_eq!(exported, source, "{}", path.display());
        compared += source.values().sum::<usize>();
    }
    assert!(compared > 500, "counted only {compared} blocks");
}

mod any_stored_session {
    //! Property: a session written by any code (raw SQL, so the write path's refusals do not
    //! apply), with any mix of the second release's part kinds in any role, exports a body
    //! each of the four providers accepts (Responses and Gemini included: a reasoning item
    //! before a verbatim item that is not an output broke the Responses contract).
    use proptest::prelude::*;
    use serde_json::json;
    use session_store::{request::check as check_request, ExportOptions, Provider, SessionId};

    use crate::util::temp_store;

    /// (kind, text, tool_use_id, tool_name, input, is_error, provider_metadata)
    type Row = (
        &'static str,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        bool,
        Option<String>,
    );

    fn part() -> impl Strategy<Value = Row> {
        let id = prop::sample::select(vec!["a", "b", "srv_1", "srv_2", ""]).prop_map(str::to_owned);
        prop_oneof![
            Just(("text", Some("hi".to_owned()), None, None, None, false, None)),
            Just(("text", Some("trailing  ".to_owned()), None, None, None, false, None)),
            Just(("text", Some(" ".to_owned()), None, None, None, false, None)),
            Just(("reasoning", Some("r".to_owned()), None, None, None, false,
                  Some(json!({"anthropic": {"signature": "S"}}).to_string()))),
            Just(("reasoning", Some("deep".to_owned()), None, None, None, false,
                  Some(json!({"openai": {"field": "reasoning_content"}}).to_string()))),
            id.clone().prop_map(|id| ("tool_use", None, Some(id), Some("bash".to_owned()),
                  Some(r#"{"n":12345678901234567890123}"#.to_owned()), false, None)),
            (id.clone(), any::<bool>()).prop_map(|(id, e)| ("tool_result", Some("ok".to_owned()), Some(id), None,
                  Some(json!([{"type": "text", "text": "ok"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]).to_string()), e, None)),
            Just(("image", None, None, None,
                  Some(json!({"type": "base64", "media_type": "image/png", "data": "AA=="}).to_string()), false, None)),
            Just(("image", Some("a chart".to_owned()), None, None,
                  Some(json!({"type": "url", "url": "https://example.com/c.png"}).to_string()), false, None)),
            Just(("document", Some("doc".to_owned()), None, None,
                  Some(json!({"type": "base64", "media_type": "application/pdf", "data": "JVBE"}).to_string()), false,
                  Some(json!({"anthropic": {"attributes": {"citations": {"enabled": true}}}}).to_string()))),
            id.clone().prop_map(|id| ("server_tool_use", None, Some(id), Some("web_search".to_owned()),
                  Some(r#"{"query":"q"}"#.to_owned()), false, None)),
            id.prop_map(|id| ("server_tool_result", None, Some(id.clone()), None,
                  Some(json!({"type": "web_search_tool_result", "tool_use_id": id, "content": []}).to_string()), false, None)),
            Just(("reasoning", Some("summary".to_owned()), None, None, None, false,
                  Some(json!({"openai": {"encrypted_content": "E", "id": "rs_1"}}).to_string()))),
            Just(("reasoning", Some(String::new()), None, None, None, false,
                  Some(json!({"gemini": {"thoughtSignature": "G"}}).to_string()))),
            (prop::sample::select(vec!["anthropic", "openai", "gemini"]), opaque_block()).prop_map(|(p, block)| ("opaque", None, None, None,
                  Some(block.to_string()), false,
                  Some(json!({"provider": p}).to_string()))),
        ]
    }

    /// Blocks other code keeps verbatim: items and parts each provider makes, and ones that
    /// would break a contract if they went back as they are (a reasoning item without its
    /// content, an output answering nothing, a Gemini part with no or two data fields).
    fn opaque_block() -> impl Strategy<Value = serde_json::Value> {
        prop::sample::select(vec![
            json!({"type": "compaction", "content": "c"}),
            json!({"type": "web_search_call", "id": "ws_1", "status": "completed"}),
            json!({"type": "computer_call_output", "call_id": "c0", "output": "x"}),
            json!({"type": "item_reference", "id": "msg_1"}),
            json!({"type": "reasoning", "summary": []}),
            json!({"type": "function_call", "call_id": "zz"}),
            json!({"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}),
            json!({"executableCode": {"language": "PYTHON", "code": "print(1)"}}),
            json!({"executableCode": {"code": "1"}, "thoughtSignature": "G"}),
            json!({"functionCall": {"name": "f", "args": {}}}),
            json!({"text": " "}),
            json!({"inlineData": {"mimeType": "image/png", "data": "AA=="}, "text": "two"}),
        ])
    }

    fn message() -> impl Strategy<Value = (&'static str, Vec<Row>)> {
        (
            prop::sample::select(vec!["system", "user", "assistant", "tool"]),
            prop::collection::vec(part(), 0..4),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn exports_valid_for_every_provider(messages in prop::collection::vec(message(), 1..10)) {
            let (_dir, store, path) = temp_store();
            let conn = rusqlite::Connection::open(&path).expect("open");
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
                [],
            ).expect("session");
            let mut users = 0i64;
            for (seq, (role, parts)) in messages.iter().enumerate() {
                users += i64::from(*role == "user");
                conn.execute(
                    "INSERT INTO messages (id, session_id, seq, turn_index, role, created_at) VALUES (?1, 's', ?1, ?2, ?3, '2026-01-01T00:00:00Z')",
                    rusqlite::params![seq as i64 + 1, (users - 1).max(0), role],
                ).expect("message");
                for (ordinal, (kind, text, id, name, input, is_error, meta)) in parts.iter().enumerate() {
                    conn.execute(
                        "INSERT INTO parts (message_id, ordinal, kind, text, tool_use_id, tool_name, input, is_error, provider_metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                        rusqlite::params![seq as i64 + 1, ordinal as i64, kind, text, id, name, input, is_error, meta],
                    ).expect("part");
                }
            }
            drop(conn);
            let session = SessionId::new("s");
            let options = ExportOptions { persist_latch: false, ..ExportOptions::default() };
            for provider in Provider::ALL {
                let body = store.export_now(&session, provider, &options).expect("export");
                prop_assert_eq!(check_request(provider, &body), vec![], "{}: {:#}", provider, body);
            }
        }
    }
}

#[test]
fn a_claude_code_log_fills_usage_rows_and_links_its_sub_agents_as_child_sessions() {
    let log = [
        json!({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "research X"}}),
        json!({"type": "assistant", "uuid": "a1", "message": {"id": "m1", "role": "assistant",
            "model": "claude-opus-4-6", "usage": {"input_tokens": 3, "output_tokens": 1}, "content": [{"type": "text", "text": "thinking"}]}}),
        json!({"type": "assistant", "uuid": "a2", "message": {"id": "m1", "role": "assistant",
            "model": "claude-opus-4-6", "usage": {"input_tokens": 10, "output_tokens": 5,
            "cache_read_input_tokens": 100, "cache_creation_input_tokens": 7},
            "content": [{"type": "tool_use", "id": "toolu_task", "name": "Task", "input": {"prompt": "find X"}}]}}),
        json!({"type": "user", "uuid": "s1", "isSidechain": true, "agentId": "ag1", "message": {"role": "user", "content": "find X"}}),
        json!({"type": "assistant", "uuid": "s2", "isSidechain": true, "agentId": "ag1", "message": {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "42"}]}}),
        json!({"type": "user", "uuid": "u2", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "42"}]}}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    let imported = import_transcript(Format::ClaudeCode, &log).expect("imports");
    let (_dir2, store2, path2) = temp_store();
    let stored = store2.import(&imported).expect("stores");
    let conn = raw(&path2);
    let usage: (String, i64, i64, i64, i64) = conn
        .query_row(
            "SELECT model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens FROM usage",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .expect("one usage row per assistant message, the last line's");
    assert_eq!(
        usage,
        ("anthropic/claude-opus-4-6".to_owned(), 10, 5, 100, 7)
    );
    let parent: String = conn
        .query_row(
            "SELECT parent_id FROM sessions WHERE id = ?1",
            [stored.children[0].as_str()],
            |r| r.get(0),
        )
        .expect("child row");
    assert_eq!(parent, stored.session.as_str());
}

#[test]
fn a_system_message_inside_a_tool_block_is_imported_by_every_importer() {
    // OpenAI Chat Completions: a system message between a call and its result.
    let body = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "system", "content": "note"},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]});
    let openai = import_transcript(Format::OpenAi, &body.to_string()).expect("openai imports");
    assert_eq!(openai.messages.len(), 4);
    // Claude Code: `system` lines (hooks, compact boundaries) inside a tool block.
    let log = [
        json!({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "go"}}),
        json!({"type": "assistant", "uuid": "a1", "message": {"id": "m", "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}}),
        json!({"type": "system", "uuid": "x1", "subtype": "stop_hook_summary", "content": "hook"}),
        json!({"type": "user", "uuid": "u2", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    let claude = import_transcript(Format::ClaudeCode, &log).expect("claude code imports");
    assert!(claude.tombstoned.is_empty());
    // Anthropic has no system role in `messages` (its system prompt is top level).
    for imported in [openai, claude] {
        let (_dir, store, _path) = temp_store();
        let id = store.import(&imported).expect("stores").session;
        for provider in [Provider::Anthropic, Provider::OpenAi] {
            let body = store
                .export_now(&id, provider, &ExportOptions::default())
                .expect("exports");
            assert_eq!(check_anthropic_or_openai(provider, &body), vec![]);
        }
    }
}

fn check_anthropic_or_openai(
    provider: Provider,
    body: &Value,
) -> Vec<session_store::request::ProviderViolation> {
    match provider {
        Provider::Anthropic => check_anthropic(body),
        _ => check_openai(body),
    }
}

#[test]
fn a_foreign_database_with_a_kind_outside_the_contract_still_opens_and_keeps_the_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("foreign.db");
    rusqlite::Connection::open(&path)
        .expect("create")
        .execute_batch(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
             CREATE TABLE messages (id INTEGER PRIMARY KEY,
                 session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                 seq INTEGER NOT NULL, turn_index INTEGER NOT NULL, role TEXT NOT NULL,
                 compacted INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
             CREATE TABLE parts (id INTEGER PRIMARY KEY,
                 message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                 ordinal INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT, tool_use_id TEXT,
                 tool_name TEXT, input TEXT, is_error INTEGER NOT NULL DEFAULT 0, provider_metadata TEXT);
             INSERT INTO sessions VALUES ('s', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
             INSERT INTO messages (id, session_id, seq, turn_index, role, created_at)
                 VALUES (7, 's', 1, 0, 'user', '2026-01-01T00:00:00Z');
             INSERT INTO parts (id, message_id, ordinal, kind, text) VALUES (41, 7, 0, 'text', 'hi'), (42, 7, 1, 'video', 'v');",
        )
        .expect("foreign tables");
    let store = session_store::Store::open(&path).expect("opens and migrates");
    let rows: Vec<(i64, String)> = raw(&path)
        .prepare("SELECT id, kind FROM parts ORDER BY id")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()
        })
        .expect("rows");
    assert_eq!(rows, [(41, "text".to_owned()), (42, "video".to_owned())]);
    // New rows are held to the wider CHECK.
    assert!(rusqlite::Connection::open(&path)
        .expect("open")
        .execute(
            "INSERT INTO parts (message_id, ordinal, kind) VALUES (7, 2, 'audio')",
            []
        )
        .is_err());
    drop(store);
}

#[test]
fn v7_after_v8_keeps_the_full_text_index_current() {
    // A database a build migrated to V8 before V7 existed: the rebuild of `parts` runs on a
    // file that already has V8's triggers on it.
    let (_dir, store, path) = temp_store();
    let session = store.create_session().expect("session");
    store
        .append(
            &session,
            session_store::NewMessage::user("before the rebuild"),
        )
        .expect("append");
    let v7 = include_str!("../migrations/V7__part_kinds_model_title.sql");
    let rebuild: String = v7
        .lines()
        .filter(|line| !line.starts_with("ALTER TABLE") || line.contains("RENAME"))
        .collect::<Vec<_>>()
        .join("\n");
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(&format!("BEGIN; {rebuild} COMMIT;"))
        .expect("V7's rebuild on a V8 file");
    let triggers: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'parts'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(triggers, 3);
    drop(conn);
    store
        .append(
            &session,
            session_store::NewMessage::user("after the rebuild"),
        )
        .expect("append");
    let options = session_store::SearchOptions::default();
    for word in ["before", "after"] {
        assert_eq!(
            store.search(word, &options).expect("search").len(),
            1,
            "{word}"
        );
    }
}

#[test]
fn the_cli_imports_a_log_cut_off_mid_line_and_says_so_on_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("cut.jsonl");
    let whole = fixture("spotter/short.jsonl");
    let cut = &whole[..whole.trim_end().len() - 10];
    std::fs::write(&log, cut).expect("write");
    let db = dir.path().join("s.db");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_session-store"))
        .args(["--db"])
        .arg(&db)
        .args(["import", "--format", "claude-code"])
        .arg(&log)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("cut off before its end"), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim().len(),
        36,
        "a session id"
    );
}

#[test]
fn an_assistant_message_of_server_blocks_comes_back_to_anthropic_exactly() {
    // The shapes of a remote MCP call and a web fetch as the Messages API returns them.
    let content = json!([
        {"type": "thinking", "thinking": "search it", "signature": "EvECCkYICBgC"},
        {"type": "mcp_tool_use", "id": "mcptoolu_01", "name": "search_repositories",
         "server_name": "test-server", "input": {"query": "pydantic-ai in:name"}},
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_01", "is_error": false,
         "content": [{"type": "text", "text": "{\"total_count\":461}"}]},
        {"type": "server_tool_use", "id": "srvtoolu_02", "name": "web_fetch",
         "input": {"url": "https://ai.pydantic.dev"}},
        {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_02", "content": {
            "type": "web_fetch_result", "url": "https://ai.pydantic.dev", "retrieved_at": "2025-11-19T00:00:00Z",
            "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Pydantic AI"},
                        "title": "Pydantic AI", "citations": {"enabled": true}}}},
        {"type": "text", "text": "It is an agent framework.", "citations": [
            {"type": "char_location", "cited_text": "Pydantic AI", "document_index": 0,
             "document_title": "Pydantic AI", "start_char_index": 0, "end_char_index": 11}]},
    ]);
    let body = json!({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Tell me about pydantic-ai"}]},
        {"role": "assistant", "content": content},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]});
    let options = ExportOptions {
        persist_latch: false,
        thinking: session_store::request::ThinkingConfig {
            keep_recent: usize::MAX,
            ..session_store::request::ThinkingConfig::default()
        },
        ..ExportOptions::default()
    };
    let (_dir, store, _path) = temp_store();
    let imported = import_transcript(Format::Anthropic, &body.to_string()).expect("imports");
    let id = store.import(&imported).expect("stores").session;
    let out = store
        .export_now(&id, Provider::Anthropic, &options)
        .expect("exports");
    assert_eq!(out["messages"][1]["content"], content, "{out:#}");
    assert_eq!(check_anthropic(&out), vec![]);
    let openai = store
        .export_now(&id, Provider::OpenAi, &options)
        .expect("exports");
    assert_eq!(check_openai(&openai), vec![]);
    let said = openai["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.contains("[server tool call \"mcptoolu_01\"")
            && said.contains("It is an agent framework."),
        "{said}"
    );
}

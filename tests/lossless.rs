//! Lossless import, storage and export (issue 15): images, documents, server tools,
//! citations, structured tool results, opaque blocks, reused call ids, big numbers and
//! `reasoning_content` used to become placeholder text, be rounded, be refused or dropped.
//! Each test imports a body, stores it in a real SQLite file, exports it again and counts
//! every block type on both sides; the export passes the provider's contract.

use serde_json::{json, Value};
use session_store::import::{self, Format};
use session_store::{check_anthropic, check_openai, ExportOptions, Part, Provider};

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
    let imported = import::import(format, &body.to_string()).expect("imports");
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
        import::import(Format::Anthropic, &rich_anthropic_body().to_string()).expect("imports");
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
    let imported = import::import(Format::OpenAi, &body.to_string()).expect("imports");
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

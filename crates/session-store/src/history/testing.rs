//! Test-only builders: histories as plain vectors of stored messages.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};

use crate::history::turns::turn_indexes;
use crate::model::{Message, Part, Role};

/// A fixed instant every test history starts at.
pub(crate) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
        .single()
        .unwrap_or_default()
}

/// Stored messages with `seq` 1.., contract turn indexes, one second apart from [`t0`].
pub(crate) fn history(messages: Vec<(Role, Vec<Part>)>) -> Vec<Message> {
    let turns = turn_indexes(messages.iter().map(|(role, _)| *role));
    messages
        .into_iter()
        .zip(turns)
        .enumerate()
        .map(|(at, ((role, parts), turn_index))| {
            let seq = i64::try_from(at).unwrap_or(i64::MAX) + 1;
            Message {
                id: seq,
                seq,
                turn_index,
                role,
                compacted: false,
                created_at: t0() + Duration::seconds(seq),
                model: None,
                state: crate::model::MessageState::Complete,
                parts,
            }
        })
        .collect()
}

pub(crate) fn user(text: &str) -> (Role, Vec<Part>) {
    (Role::User, vec![Part::text(text)])
}

pub(crate) fn system(text: &str) -> (Role, Vec<Part>) {
    (Role::System, vec![Part::text(text)])
}

pub(crate) fn assistant(parts: Vec<Part>) -> (Role, Vec<Part>) {
    (Role::Assistant, parts)
}

pub(crate) fn tool(parts: Vec<Part>) -> (Role, Vec<Part>) {
    (Role::Tool, parts)
}

pub(crate) fn call(id: &str) -> Part {
    Part::tool_use(id, "bash", json!({"cmd": "ls"}))
}

/// A reasoning part signed under `namespace`.
pub(crate) fn signed(text: &str, namespace: &str, signature: &str) -> Part {
    Part::reasoning(text, Some(json!({ namespace: {"signature": signature} })))
}

/// The `content` array of message `index` of a rendered body.
pub(crate) fn content(body: &Value, index: usize) -> &Vec<Value> {
    static EMPTY: Vec<Value> = Vec::new();
    body["messages"][index]["content"]
        .as_array()
        .unwrap_or(&EMPTY)
}

/// Proptest strategies for raw, possibly broken, histories.
pub(crate) mod arb {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use crate::model::{Part, Role};

    /// Ids from a small pool, so pairs, orphans, dangling calls and repeats all happen.
    fn id() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["a", "b", "c", "a__2", "", "fn.x:0", "fn_x_0"])
            .prop_map(str::to_owned)
    }

    fn text() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", " ", "\n\t", "hi", "a longer text"]).prop_map(str::to_owned)
    }

    fn metadata() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            prop::sample::select(vec!["anthropic", "bedrock", "vertex", "openai"])
                .prop_map(|ns| Some(json!({ ns: {"signature": format!("sig-{ns}")} }))),
            Just(Some(json!({"anthropic": {"signature": ""}}))),
        ]
    }

    /// A text's metadata: none, or block attributes an Anthropic source gave it, in the
    /// shapes Anthropic takes and in shapes it refuses.
    fn text_metadata() -> impl Strategy<Value = Option<Value>> {
        prop::sample::select(vec![
            None,
            Some(json!({"anthropic": {"attributes": {"cache_control": {"type": "ephemeral"}}}})),
            Some(
                json!({"anthropic": {"attributes": {"citations": [{"type": "char_location", "cited_text": "c"}]}}}),
            ),
            Some(
                json!({"anthropic": {"attributes": {"citations": "see above", "cache_control": "ephemeral"}}}),
            ),
            Some(json!({"anthropic": {"citations": [1, 2]}})),
        ])
    }

    fn input() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            json!({"cmd": "ls"}),
            json!({}),
            json!("{\"k\": 1}"),
            json!("not json"),
            json!(null),
            json!([1, 2]),
            json!(3),
        ])
    }

    /// A provider block kept verbatim: with no `id`, a string `id`, or an `id` that is no
    /// string (which no provider takes).
    fn opaque_block() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            json!({"type": "compaction", "content": "c"}),
            json!({"type": "web_search_call", "id": "ws_1"}),
            json!({"type": "reasoignn", "id": [{"type": "summary_text", "text": "done"}]}),
            json!({"type": "compaction", "id": 7}),
            // Attributes in shapes Anthropic refuses, on a block kept verbatim.
            json!({"type": "tMhinking", "thinking": "ok", "citations": "c2ln", "cache_control": "x"}),
            json!({"type": "search_result", "source": "s", "title": "t", "content": [], "citations": [1]}),
            // Types the Responses renderer writes itself, pairing and all.
            json!({"type": "custom_tool_call", "call_id": "z", "name": "n", "input": "i"}),
            json!({"type": "custom_tool_call_output", "call_id": "z", "output": []}),
        ])
    }

    /// Any part, in any message.
    pub(crate) fn part() -> impl Strategy<Value = Part> {
        prop_oneof![
            3 => text().prop_map(Part::text),
            1 => (text(), text_metadata()).prop_map(|(text, provider_metadata)| Part::Text { text, provider_metadata }),
            1 => prop::sample::select(vec![json!({"enabled": true}), json!([]), json!("yes")]).prop_map(|citations| Part::Document {
                source: json!({"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjcK"}),
                title: Some("a.pdf".to_owned()),
                provider_metadata: Some(json!({"anthropic": {"attributes": {"citations": citations}}})),
            }),
            2 => (text(), metadata()).prop_map(|(text, provider_metadata)| Part::Reasoning { text, provider_metadata }),
            1 => prop::sample::select(vec!["", "opaque"]).prop_map(|data| Part::RedactedReasoning { data: data.to_owned(), provider_metadata: None }),
            3 => (id(), prop::sample::select(vec!["bash", ""]), input()).prop_map(|(id, name, input)| Part::tool_use(id, name, input)),
            // A call that came as an OpenAI custom tool call (free-form input), or one whose
            // input no longer has that shape.
            1 => (id(), prop::sample::select(vec![json!({"input": "*** Begin Patch"}), json!({"input": 5})])).prop_map(|(id, input)| Part::ToolUse {
                id,
                name: "apply_patch".to_owned(),
                input,
                provider_metadata: Some(json!({"openai": {"type": "custom_tool_call", "id": "ctc_1"}})),
            }),
            3 => (id(), text(), any::<bool>()).prop_map(|(id, content, is_error)| Part::ToolResult { tool_use_id: id, content, is_error, blocks: None, provider_metadata: None }),
            1 => (id(), text(), any::<bool>()).prop_map(|(id, content, is_error)| Part::ToolResult { tool_use_id: id, content, is_error, blocks: Some(serde_json::json!([{"type": "text", "text": "t"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}])), provider_metadata: None }),
            1 => (id(), any::<bool>()).prop_map(|(id, is_error)| Part::ToolResult { tool_use_id: id, content: "t".into(), is_error, blocks: Some(serde_json::json!([{"type": "text", "text": "t", "citations": "c", "cache_control": "x"}])), provider_metadata: None }),
            // Media whose declared type is not its bytes' (sent under the right one) with
            // attributes Anthropic refuses, a document without a name, an animated GIF.
            1 => (id(), any::<bool>()).prop_map(|(id, is_error)| Part::ToolResult { tool_use_id: id, content: "t".into(), is_error, blocks: Some(serde_json::json!([
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "iVBORw0KGgo="}, "cache_control": "x"},
                {"type": "document", "title": "", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjcK"}, "citations": true},
                {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGODlhAQABAIAAAAAAAP///yH/C05FVFNDQVBFMi4wAwEAAAAh+QQECgAAACwAAAAAAQABAAACAkQBACH5BAQKAAAALAAAAAABAAEAAAICRAEAOw=="}},
            ])), provider_metadata: None }),
            1 => prop::sample::select(vec![
                // A PNG's first bytes; bytes that are no image Anthropic takes.
                serde_json::json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}),
                serde_json::json!({"type": "base64", "media_type": "image/heic", "data": "AA=="}),
                // An animated GIF of two frames: Anthropic takes it, OpenAI only still ones.
                serde_json::json!({"type": "base64", "media_type": "image/gif", "data": "R0lGODlhAQABAIAAAAAAAP///yH/C05FVFNDQVBFMi4wAwEAAAAh+QQECgAAACwAAAAAAQABAAACAkQBACH5BAQKAAAALAAAAAABAAEAAAICRAEAOw=="}),
                serde_json::json!({"type": "url", "url": "https://example.com/a.png"}),
            ]).prop_map(Part::image),
            1 => prop::sample::select(vec![
                serde_json::json!({"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjcK"}),
                serde_json::json!({"type": "text", "media_type": "text/plain", "data": "doc"}),
            ]).prop_map(Part::document),
            2 => prop::sample::select(vec!["srv_a", "srv_b"]).prop_map(|id| Part::server_tool_use(id, "web_search", serde_json::json!({"query": "q"}))),
            2 => prop::sample::select(vec!["srv_a", "srv_b"]).prop_map(|id| Part::server_tool_result(id, serde_json::json!({"type": "web_search_tool_result", "tool_use_id": id, "content": []}))),
            1 => (prop::sample::select(vec!["anthropic", "openai"]), opaque_block()).prop_map(|(p, block)| Part::opaque(p, block)),
        ]
    }

    pub(crate) fn role() -> impl Strategy<Value = Role> {
        prop_oneof![
            1 => Just(Role::System),
            3 => Just(Role::User),
            4 => Just(Role::Assistant),
            3 => Just(Role::Tool),
        ]
    }

    /// A raw message: any role, zero to four parts of any kind.
    pub(crate) fn message() -> impl Strategy<Value = (Role, Vec<Part>)> {
        (role(), prop::collection::vec(part(), 0..4))
    }

    /// A history of up to `max` raw messages.
    pub(crate) fn messages(max: usize) -> impl Strategy<Value = Vec<(Role, Vec<Part>)>> {
        prop::collection::vec(message(), 0..max)
    }
}

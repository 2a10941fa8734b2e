//! Real request bodies recorded by pydantic-ai (`tests/fixtures/transcripts/pydantic-ai/derived`)
//! survive the provider pipeline: converted to stored messages with a tiny test-only
//! converter (results left in user messages, as older code stored them), sanitized and
//! rendered, they pass the contract with every signature, redacted block, tool call and tool
//! result still there. Guards against a loader or renderer that loses or reorders what a
//! provider signed or called.

use std::path::PathBuf;

use serde_json::Value;
use session_store::request::check;
use session_store::request::sanitize;
use session_store::{request::render, Provider};
use session_store::{Message, Part, Role};

fn derived_dir() -> PathBuf {
    crate::util::transcripts().join("pydantic-ai/derived")
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// An Anthropic or OpenAI request body as stored messages (test-only, not the importer).
fn to_messages(body: &Value) -> Vec<Message> {
    let mut raw: Vec<(Role, Vec<Part>)> = Vec::new();
    if let Some(system) = body.get("system") {
        raw.push((Role::System, vec![Part::text(text_of(system))]));
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role: Role = message["role"]
            .as_str()
            .unwrap_or("user")
            .parse()
            .unwrap_or(Role::User);
        let mut parts = Vec::new();
        match &message["content"] {
            Value::String(text) if role == Role::Tool => parts.push(Part::tool_result(
                message["tool_call_id"].as_str().unwrap_or_default(),
                text.clone(),
            )),
            Value::String(text) => parts.push(Part::text(text.clone())),
            Value::Array(blocks) => {
                for block in blocks {
                    let field = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
                    match block["type"].as_str() {
                        Some("text") => parts.push(Part::text(field("text"))),
                        Some("thinking") => parts.push(Part::reasoning(
                            field("thinking"),
                            Some(
                                serde_json::json!({"anthropic": {"signature": field("signature")}}),
                            ),
                        )),
                        Some("redacted_thinking") => parts.push(Part::RedactedReasoning {
                            data: field("data"),
                            provider_metadata: None,
                        }),
                        Some("tool_use") => parts.push(Part::tool_use(
                            field("id"),
                            field("name"),
                            block["input"].clone(),
                        )),
                        Some("tool_result") => parts.push(Part::ToolResult {
                            blocks: None,
                            tool_use_id: field("tool_use_id"),
                            content: text_of(&block["content"]),
                            is_error: block["is_error"].as_bool().unwrap_or(false),
                            provider_metadata: None,
                        }),
                        Some("server_tool_use") => parts.push(Part::server_tool_use(
                            field("id"),
                            field("name"),
                            block["input"].clone(),
                        )),
                        Some(kind) if kind.ends_with("_tool_result") => parts.push(
                            Part::server_tool_result(field("tool_use_id"), block.clone()),
                        ),
                        // e.g. a server-side `compaction` block: kept as its text.
                        _ => parts.push(Part::text(text_of(&block["content"]))),
                    }
                }
            }
            _ => {}
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
            parts.push(Part::tool_use(
                call["id"].as_str().unwrap_or_default(),
                call["function"]["name"].as_str().unwrap_or_default(),
                serde_json::from_str(arguments).unwrap_or(Value::Null),
            ));
        }
        raw.push((role, parts));
    }
    raw.into_iter()
        .enumerate()
        .map(|(at, (role, parts))| Message {
            id: at as i64 + 1,
            seq: at as i64 + 1,
            turn_index: 0,
            role,
            compacted: false,
            created_at: chrono::DateTime::UNIX_EPOCH,
            model: None,
            state: session_store::MessageState::Complete,
            parts,
        })
        .collect()
}

/// Every value of `key` anywhere in `value`, in document order.
fn all(value: &Value, key: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == key {
                    if let Some(s) = v.as_str() {
                        out.push(s.to_owned());
                    }
                }
                all(v, key, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| all(v, key, out)),
        _ => {}
    }
}

fn collect(value: &Value, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    all(value, key, &mut out);
    out
}

#[test]
fn derived_pydantic_ai_requests_render_with_zero_violations() {
    let dir = derived_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut seen = 0;
    for entry in entries {
        let path = entry.expect("dir entry").path();
        let raw = std::fs::read_to_string(&path).expect("read fixture");
        let original: Value = serde_json::from_str(&raw).expect("fixture is JSON");
        let openai_shaped = original["messages"].as_array().is_some_and(|m| {
            m.iter()
                .any(|m| m.get("tool_calls").is_some() || m["content"].is_string())
        });
        let view = sanitize(&to_messages(&original));
        for provider in Provider::ALL {
            let body = render(&view, provider);
            assert_eq!(
                check(provider, &body),
                vec![],
                "{} as {provider}: {body:#}",
                path.display()
            );
        }
        let anthropic = render(&view, Provider::Anthropic);
        let openai = render(&view, Provider::OpenAi);
        for key in ["signature", "data"] {
            assert_eq!(
                collect(&anthropic, key),
                collect(&original["messages"], key),
                "{key} in {}",
                path.display()
            );
        }
        let (ids, answers) = if openai_shaped {
            (collect(&openai, "id"), collect(&openai, "tool_call_id"))
        } else {
            (
                collect(&anthropic, "id"),
                collect(&anthropic, "tool_use_id"),
            )
        };
        assert_eq!(
            ids,
            collect(&original["messages"], "id"),
            "{}",
            path.display()
        );
        assert_eq!(
            answers,
            collect(
                &original["messages"],
                if openai_shaped {
                    "tool_call_id"
                } else {
                    "tool_use_id"
                }
            )
        );
        seen += 1;
    }
    assert_eq!(seen, 6, "all derived fixtures were read");
}

/// A Claude Code session log (JSON Lines) as stored messages: consecutive assistant lines
/// sharing a `message.id` form one message, every user line is one user message (results
/// included, as older code stored them). Test-only; the real importer is `session-store import`.
fn claude_code_messages(jsonl: &str) -> Vec<Message> {
    let mut raw: Vec<(Role, Option<String>, Vec<Part>)> = Vec::new();
    for line in jsonl.lines().filter(|l| !l.trim().is_empty()) {
        let entry: Value = serde_json::from_str(line).expect("JSON line");
        let role = match entry["type"].as_str() {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => continue,
        };
        let id = entry["message"]["id"].as_str().map(str::to_owned);
        let content = &entry["message"]["content"];
        let mut parts = Vec::new();
        match content {
            Value::String(text) => parts.push(Part::text(text.clone())),
            Value::Array(blocks) => {
                for block in blocks {
                    let field = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
                    match block["type"].as_str() {
                        Some("text") => parts.push(Part::text(field("text"))),
                        Some("thinking") => parts.push(Part::reasoning(
                            field("thinking"),
                            Some(
                                serde_json::json!({"anthropic": {"signature": field("signature")}}),
                            ),
                        )),
                        Some("tool_use") => parts.push(Part::tool_use(
                            field("id"),
                            field("name"),
                            block["input"].clone(),
                        )),
                        Some("tool_result") => parts.push(Part::ToolResult {
                            blocks: None,
                            tool_use_id: field("tool_use_id"),
                            content: text_of(&block["content"]),
                            is_error: block["is_error"].as_bool().unwrap_or(false),
                            provider_metadata: None,
                        }),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        match raw.last_mut() {
            Some((Role::Assistant, Some(last), existing))
                if role == Role::Assistant && id.as_ref() == Some(last) =>
            {
                existing.extend(parts)
            }
            _ => raw.push((role, id, parts)),
        }
    }
    raw.into_iter()
        .enumerate()
        .map(|(at, (role, _, parts))| Message {
            id: at as i64 + 1,
            seq: at as i64 + 1,
            turn_index: 0,
            role,
            compacted: false,
            created_at: chrono::DateTime::UNIX_EPOCH,
            model: None,
            state: session_store::MessageState::Complete,
            parts,
        })
        .collect()
}

#[test]
fn claude_code_logs_render_with_zero_violations() {
    let root = crate::util::transcripts();
    let files = [
        "fasthooks/sample_main_transcript.jsonl",
        "fasthooks/sample_agent_sidechain.jsonl",
        "spotter/short.jsonl",
        "spotter/tool_heavy.jsonl",
        "spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        "spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl",
        "spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl",
        "agentcmd/claude/full-session-two.jsonl",
        "agentcmd/claude/full-session-three.jsonl",
        "agentcmd/claude/full-session-five.jsonl",
        "agentcmd/claude/full-session-askuserquestion.jsonl",
    ];
    for file in files {
        let path = root.join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let messages = claude_code_messages(&text);
        let view = sanitize(&messages);
        let anthropic = render(&view, Provider::Anthropic);
        for provider in Provider::ALL {
            let body = render(&view, provider);
            assert_eq!(check(provider, &body), vec![], "{file} as {provider}");
        }
        let signatures: Vec<String> = messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| m.parts.iter().filter_map(session_store::request::signature))
            .map(str::to_owned)
            .collect();
        assert_eq!(collect(&anthropic, "signature"), signatures, "{file}");
        let rendered = anthropic.to_string();
        for part in messages.iter().flat_map(|m| &m.parts) {
            let id = match part {
                Part::ToolUse { id, .. } => id,
                Part::ToolResult { tool_use_id, .. } => tool_use_id,
                _ => continue,
            };
            assert!(rendered.contains(&format!("\"{id}")), "{file}: {id} lost");
        }
    }
}

//! The OpenAI Chat Completions body: `{"messages": [...]}`.
//!
//! - System messages stay in place with role `system` (the view never puts one inside a tool
//!   pair).
//! - An assistant message carries its text as `content` (a string, the text parts joined with
//!   a newline; `null` when it has only tool calls) and its tool_uses as `tool_calls`, each
//!   `{"id", "type": "function", "function": {"name", "arguments"}}` with `arguments` the
//!   input as a JSON string. Reasoning is left out; a message left with nothing is left out.
//! - Each tool_result becomes one `tool` message `{"role": "tool", "tool_call_id", "content"}`.
//! - User messages carry their text as a string.

use serde_json::{json, Map, Value};

use crate::history::blank::is_blank;
use crate::history::render::anthropic::join_text;
use crate::history::sanitize::View;
use crate::model::{Part, Role};

/// Renders `view` as an OpenAI Chat Completions request body.
pub fn render(view: &View) -> Value {
    let mut messages = Vec::new();
    for message in &view.messages {
        match message.role {
            Role::System | Role::User => {
                let text = join_text(&message.parts);
                if !is_blank(&text) {
                    messages.push(json!({"role": message.role.as_str(), "content": text}));
                }
            }
            Role::Assistant => {
                if let Some(rendered) = assistant(&message.parts) {
                    messages.push(rendered);
                }
            }
            Role::Tool => {
                for part in &message.parts {
                    if let Part::ToolResult {
                        tool_use_id,
                        content,
                        ..
                    } = part
                    {
                        messages.push(json!({
                            "role": "tool",
                            "tool_call_id": tool_use_id,
                            "content": content,
                        }));
                    }
                }
            }
        }
    }
    // Moved in, not `json!`: the macro would serialize (deep-copy) every message.
    let mut body = Map::new();
    body.insert("messages".to_owned(), Value::Array(messages));
    Value::Object(body)
}

/// An assistant message: text as `content` (null without text), tool_uses as `tool_calls`;
/// `None` when nothing is left once reasoning is left out.
fn assistant(parts: &[Part]) -> Option<Value> {
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|part| match part {
            // A blank text is the signed-reasoning placeholder; it means nothing here.
            Part::Text { text, .. } if !is_blank(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let calls: Vec<Value> = parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolUse {
                id, name, input, ..
            } => Some(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": input.to_string()},
            })),
            _ => None,
        })
        .collect();
    if texts.is_empty() && calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".to_owned(), json!("assistant"));
    let content = if texts.is_empty() {
        Value::Null
    } else {
        Value::String(texts.join("\n\n"))
    };
    message.insert("content".to_owned(), content);
    if !calls.is_empty() {
        message.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    Some(Value::Object(message))
}

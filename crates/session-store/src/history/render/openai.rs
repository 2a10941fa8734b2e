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

use serde_json::Value;

use crate::history::sanitize::View;

/// Renders `view` as an OpenAI Chat Completions request body.
pub fn render(view: &View) -> Value {
    let _ = view;
    todo!()
}

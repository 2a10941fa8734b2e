//! The Anthropic Messages API body: `{"system": ..., "messages": [...]}`.
//!
//! - `system` is top level: the text of every system message, joined with a blank line, in
//!   order; the key is left out when there is none.
//! - A `tool` message becomes a `user` message of `tool_result` blocks; results come first,
//!   then the text of a following user message, joined into one message (rule 4).
//! - Consecutive messages of one role are joined into one (rule 5), so roles alternate.
//! - tool_use `input` is an object; `thinking` carries `thinking` and `signature` (taken from
//!   the `anthropic`, `bedrock` or `vertex` namespace), `redacted_thinking` carries `data`,
//!   both byte for byte and in place. Reasoning without a signature came from another
//!   provider and cannot be sent back: it is left out.
//! - The first message must be `user` (rule 1; Bedrock enforces it): when the view starts
//!   with an assistant message, a user message holding [`PLACEHOLDER_USER_TEXT`] is put
//!   first. It depends on nothing that follows, so it stays stable as the session grows.

use serde_json::Value;

use crate::history::sanitize::View;

/// The text of the user message put first when a history starts with an assistant message.
pub const PLACEHOLDER_USER_TEXT: &str = "(The conversation so far continues below.)";

/// Renders `view` as an Anthropic Messages request body.
pub fn render(view: &View) -> Value {
    let _ = view;
    todo!()
}

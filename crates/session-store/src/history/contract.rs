//! The providers' request rules (PROVIDER_RULES.md 1-13) as checks over a rendered body.
//!
//! These are library code, not test helpers: the exporter runs them on what it renders, the
//! CLI reports them, and the proptests require zero violations for any history, broken or
//! not. Each [`Violation`] names its [`Rule`] and the JSON pointer of the offending value.
//!
//! Anthropic's server joins consecutive messages of one role before it checks (rule 5), so
//! the Anthropic checks run on the joined messages; paths point at the original block.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::render::Provider;

/// One provider rule, named after what it requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rule {
    /// The body has the provider's shape (object, `messages` array, content of known types).
    Shape,
    /// 1: roles are `user` and `assistant` only (Anthropic); a known role (OpenAI).
    Roles,
    /// 1: the first message is a `user` message (Anthropic).
    FirstMessageUser,
    /// 2: each tool_use is answered by a tool_result in the very next message, a user message.
    ToolUseAnswered,
    /// 3: each tool_result answers a tool_use of the assistant message directly before.
    ToolResultAnswersPrevious,
    /// 4: in a user message every tool_result comes before any other block.
    ToolResultsFirst,
    /// 6 and 13: tool_use (tool call) ids are unique within the request.
    UniqueToolUseIds,
    /// 7: text blocks are non-empty and not whitespace-only, except a single space in an
    /// assistant message with signed thinking.
    NonEmptyText,
    /// 8: a tool_result with `is_error: true` has content.
    ErrorResultContent,
    /// 9: thinking and redacted_thinking appear only in assistant messages.
    ThinkingInAssistant,
    /// 9-10: a thinking block carries its signature, a redacted_thinking block its data.
    ThinkingSigned,
    /// 11: an assistant message with tool_calls is followed by tool messages answering every
    /// call, with nothing else between.
    ToolCallsAnswered,
    /// 12: every tool message answers a call of the assistant message before its block.
    ToolMessageAnswersCall,
    /// 13: `function.arguments` is a string holding JSON.
    ArgumentsJsonString,
}

impl Rule {
    /// The rule's stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Shape => "shape",
            Rule::Roles => "roles",
            Rule::FirstMessageUser => "first_message_user",
            Rule::ToolUseAnswered => "tool_use_answered",
            Rule::ToolResultAnswersPrevious => "tool_result_answers_previous",
            Rule::ToolResultsFirst => "tool_results_first",
            Rule::UniqueToolUseIds => "unique_tool_use_ids",
            Rule::NonEmptyText => "non_empty_text",
            Rule::ErrorResultContent => "error_result_content",
            Rule::ThinkingInAssistant => "thinking_in_assistant",
            Rule::ThinkingSigned => "thinking_signed",
            Rule::ToolCallsAnswered => "tool_calls_answered",
            Rule::ToolMessageAnswersCall => "tool_message_answers_call",
            Rule::ArgumentsJsonString => "arguments_json_string",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule in a rendered body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The rule broken.
    pub rule: Rule,
    /// JSON pointer of the offending value, e.g. `/messages/3/content/0`.
    pub path: String,
    /// What is wrong, with the ids involved.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}: {}", self.rule, self.path, self.detail)
    }
}

/// Every violation of the Anthropic Messages rules (1-10) in `body`.
pub fn check_anthropic(body: &Value) -> Vec<Violation> {
    let _ = body;
    todo!()
}

/// Every violation of the OpenAI Chat Completions rules (11-13) in `body`.
pub fn check_openai(body: &Value) -> Vec<Violation> {
    let _ = body;
    todo!()
}

/// [`check_anthropic`] or [`check_openai`], by provider.
pub fn check(provider: Provider, body: &Value) -> Vec<Violation> {
    match provider {
        Provider::Anthropic => check_anthropic(body),
        Provider::OpenAi => check_openai(body),
    }
}

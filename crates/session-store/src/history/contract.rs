//! The providers' request rules (PROVIDER_RULES.md 1-15) as checks over a rendered body.
//!
//! These are library code, not test helpers: the exporter runs them on what it renders, the
//! CLI reports them, and the proptests require zero violations for any history, broken or
//! not. Each [`ProviderViolation`] names its [`ProviderRule`] and the JSON pointer of the offending value.
//!
//! Anthropic's server joins consecutive messages of one role before it checks (rule 5), so
//! the Anthropic checks run on the joined messages; paths point at the original block.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::blank::is_blank;
use crate::history::render::Provider;
use crate::history::signed::{is_position_validated, signature};
use crate::model::{Message, Part, Role};

mod gemini;
mod responses;
mod signed_by;

pub use gemini::check_gemini;
pub use responses::check_responses;
pub use signed_by::check_signed_by_target;

/// One provider rule, named after what it requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderRule {
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
    /// 7: text blocks are non-empty and not whitespace-only, except a single space between
    /// signed thinking blocks of an assistant message.
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
    /// 9: the thinking blocks of the latest assistant message come back exactly as stored:
    /// same thinking, signature and data, order and count.
    LatestThinkingUnchanged,
    /// 10c: every signature sent was made by the target model.
    SignedByTargetModel,
    /// 14, 15: every function call has exactly one output (Responses: a
    /// `function_call_output` with its `call_id` after it; Gemini: a `functionResponse` in the
    /// very next `user` content).
    FunctionCallAnswered,
    /// 14, 15: every function output answers a call, once (Responses: a `function_call`
    /// before it with its `call_id`; Gemini: a call of the `model` content directly before,
    /// same name, and id where given).
    FunctionOutputAnswersCall,
    /// 14: a reasoning item is followed by the item it preceded (an assistant message or a
    /// function call).
    ReasoningFollowed,
    /// 14: a reasoning item replayed without server-side storage carries its
    /// `encrypted_content`.
    ReasoningEncrypted,
    /// 15: `contents` alternate `user` and `model`.
    ContentsAlternate,
    /// 15: in the current turn, the first function call of each `model` content carries its
    /// `thoughtSignature`; signatures are non-empty strings on `model` parts only.
    ThoughtSignatureOnCall,
    /// 7b: a final assistant message does not end with whitespace.
    FinalAssistantTrailingWhitespace,
    /// Server tools: a server tool result follows the server_tool_use with its id in the same
    /// assistant message, and a server_tool_use without result stands only in the latest
    /// assistant message (a paused turn, or one whose client calls are being answered).
    ServerToolPaired,
}

impl ProviderRule {
    /// The rule's stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderRule::Shape => "shape",
            ProviderRule::Roles => "roles",
            ProviderRule::FirstMessageUser => "first_message_user",
            ProviderRule::ToolUseAnswered => "tool_use_answered",
            ProviderRule::ToolResultAnswersPrevious => "tool_result_answers_previous",
            ProviderRule::ToolResultsFirst => "tool_results_first",
            ProviderRule::UniqueToolUseIds => "unique_tool_use_ids",
            ProviderRule::NonEmptyText => "non_empty_text",
            ProviderRule::ErrorResultContent => "error_result_content",
            ProviderRule::ThinkingInAssistant => "thinking_in_assistant",
            ProviderRule::ThinkingSigned => "thinking_signed",
            ProviderRule::ToolCallsAnswered => "tool_calls_answered",
            ProviderRule::ToolMessageAnswersCall => "tool_message_answers_call",
            ProviderRule::ArgumentsJsonString => "arguments_json_string",
            ProviderRule::LatestThinkingUnchanged => "latest_thinking_unchanged",
            ProviderRule::SignedByTargetModel => "signed_by_target_model",
            ProviderRule::FunctionCallAnswered => "function_call_answered",
            ProviderRule::FunctionOutputAnswersCall => "function_output_answers_call",
            ProviderRule::ReasoningFollowed => "reasoning_followed",
            ProviderRule::ReasoningEncrypted => "reasoning_encrypted",
            ProviderRule::ContentsAlternate => "contents_alternate",
            ProviderRule::ThoughtSignatureOnCall => "thought_signature_on_call",
            ProviderRule::FinalAssistantTrailingWhitespace => "final_assistant_trailing_whitespace",
            ProviderRule::ServerToolPaired => "server_tool_paired",
        }
    }
}

impl std::fmt::Display for ProviderRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule in a rendered body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderViolation {
    /// The rule broken.
    pub rule: ProviderRule,
    /// JSON pointer of the offending value, e.g. `/messages/3/content/0`.
    pub path: String,
    /// What is wrong, with the ids involved.
    pub detail: String,
}

impl std::fmt::Display for ProviderViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}: {}", self.rule, self.path, self.detail)
    }
}

/// Every violation of the Anthropic Messages rules (1-10) in `body`.
///
/// Rule 9's "the latest assistant message's thinking comes back unchanged" needs the original
/// response to check, so it is not checked here; the renderer passes thinking through as it is.
pub fn check_anthropic(body: &Value) -> Vec<ProviderViolation> {
    let mut out = Vec::new();
    let Some(messages) = messages_of(body, &mut out) else {
        return out;
    };
    if let Some(system) = body.get("system") {
        check_system(system, &mut out);
    }
    // Rule 5: check on the messages as the server joins them.
    let mut joined: Vec<Joined<'_>> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let path = format!("/messages/{index}");
        let Some(role) = message.get("role").and_then(Value::as_str) else {
            push(
                &mut out,
                ProviderRule::Shape,
                &path,
                "message without a string role",
            );
            continue;
        };
        if role != "user" && role != "assistant" {
            push(
                &mut out,
                ProviderRule::Roles,
                &format!("{path}/role"),
                format!("role {role:?}: only user and assistant (system is top level)"),
            );
            continue;
        }
        if index == 0 && role != "user" {
            push(
                &mut out,
                ProviderRule::FirstMessageUser,
                &path,
                format!("first message is {role}"),
            );
        }
        let blocks = content_blocks(message, &path, &mut out);
        match joined.last_mut() {
            Some(last) if last.role == role => last.blocks.extend(blocks),
            _ => joined.push(Joined { role, blocks }),
        }
    }
    let mut seen_ids: HashMap<&str, String> = HashMap::new();
    let latest_assistant = joined.iter().rposition(|m| m.role == "assistant");
    for (at, message) in joined.iter().enumerate() {
        check_joined_blocks(message, &mut seen_ids, &mut out);
        check_server_tools(message, Some(at) == latest_assistant, &mut out);
        if message.role == "assistant" {
            check_answered_next(message, joined.get(at + 1), &mut out);
        } else {
            let previous = at.checked_sub(1).and_then(|p| joined.get(p));
            check_results_answer_previous(message, previous, &mut out);
        }
    }
    if let Some(last) = joined.last() {
        check_final_whitespace(last, &mut out);
    }
    out
}

/// Rule 7b: the final message, when it is an assistant message, may not end with whitespace.
fn check_final_whitespace(last: &Joined<'_>, out: &mut Vec<ProviderViolation>) {
    if last.role != "assistant" {
        return;
    }
    let Some((path, block)) = last.blocks.last() else {
        return;
    };
    if block.kind() != Some("text") {
        return;
    }
    if let Some(text) = block.str_field("text") {
        if text.ends_with(char::is_whitespace) {
            push(
                out,
                ProviderRule::FinalAssistantTrailingWhitespace,
                path,
                "final assistant content cannot end with trailing whitespace",
            );
        }
    }
}

/// Server tools within one joined message: only in assistant messages; each result follows
/// its call; a call without result only in the latest assistant message.
fn check_server_tools(message: &Joined<'_>, latest: bool, out: &mut Vec<ProviderViolation>) {
    let mut open: HashMap<&str, &str> = HashMap::new();
    for (path, block) in &message.blocks {
        let Some(kind) = block.kind() else {
            continue;
        };
        let is_call = kind == "server_tool_use" || kind == "mcp_tool_use";
        let is_result = kind != "tool_result"
            && kind.ends_with("_tool_result")
            && block.field("tool_use_id").is_some();
        if !is_call && !is_result {
            continue;
        }
        if message.role != "assistant" {
            push(
                out,
                ProviderRule::Shape,
                path,
                format!("{kind} block in a user message"),
            );
            continue;
        }
        if is_call {
            match block.str_field("id") {
                Some(id) if !id.is_empty() => {
                    open.insert(id, path.as_str());
                }
                _ => push(
                    out,
                    ProviderRule::Shape,
                    path,
                    format!("{kind} without an id"),
                ),
            }
        } else {
            let id = block.str_field("tool_use_id").unwrap_or_default();
            if open.remove(id).is_none() {
                push(
                    out,
                    ProviderRule::ServerToolPaired,
                    path,
                    format!("{kind} for {id:?} follows no server tool call of its message"),
                );
            }
        }
    }
    if !latest {
        let mut unanswered: Vec<(&str, &str)> = open.into_iter().collect();
        unanswered.sort_by_key(|(_, path)| *path);
        for (id, path) in unanswered {
            push(
                out,
                ProviderRule::ServerToolPaired,
                path,
                format!("server tool call {id:?} has no result and its turn is over"),
            );
        }
    }
}

/// One message as the server sees it after joining consecutive messages of one role.
struct Joined<'a> {
    role: &'a str,
    /// (path, block) of every content block, in order.
    blocks: Vec<(String, Block<'a>)>,
}

/// A content block; string content counts as one text block.
enum Block<'a> {
    Value(&'a Value),
    Text(&'a str),
}

impl<'a> Block<'a> {
    fn kind(&self) -> Option<&'a str> {
        match self {
            Block::Value(value) => value.get("type").and_then(Value::as_str),
            Block::Text(_) => Some("text"),
        }
    }

    fn str_field(&self, key: &str) -> Option<&'a str> {
        match self {
            Block::Value(value) => value.get(key).and_then(Value::as_str),
            Block::Text(text) => (key == "text").then_some(*text),
        }
    }

    fn field(&self, key: &str) -> Option<&'a Value> {
        match self {
            Block::Value(value) => value.get(key),
            Block::Text(_) => None,
        }
    }
}

fn push(
    out: &mut Vec<ProviderViolation>,
    rule: ProviderRule,
    path: &str,
    detail: impl Into<String>,
) {
    out.push(ProviderViolation {
        rule,
        path: path.to_owned(),
        detail: detail.into(),
    });
}

fn messages_of<'a>(body: &'a Value, out: &mut Vec<ProviderViolation>) -> Option<&'a Vec<Value>> {
    if !body.is_object() {
        push(out, ProviderRule::Shape, "", "body is not a JSON object");
        return None;
    }
    let messages = body.get("messages").and_then(Value::as_array);
    if messages.is_none() {
        push(
            out,
            ProviderRule::Shape,
            "/messages",
            "body has no messages array",
        );
    }
    messages
}

fn check_system(system: &Value, out: &mut Vec<ProviderViolation>) {
    match system {
        Value::String(_) => {}
        Value::Array(blocks) => {
            for (index, block) in blocks.iter().enumerate() {
                let path = format!("/system/{index}");
                match block.get("text").and_then(Value::as_str) {
                    Some(text) if is_blank(text) => {
                        push(
                            out,
                            ProviderRule::NonEmptyText,
                            &path,
                            "blank system text block",
                        );
                    }
                    Some(_) => {}
                    None => push(out, ProviderRule::Shape, &path, "system block without text"),
                }
            }
        }
        _ => push(
            out,
            ProviderRule::Shape,
            "/system",
            "system is neither a string nor blocks",
        ),
    }
}

fn content_blocks<'a>(
    message: &'a Value,
    path: &str,
    out: &mut Vec<ProviderViolation>,
) -> Vec<(String, Block<'a>)> {
    let content_path = format!("{path}/content");
    match message.get("content") {
        Some(Value::String(text)) => vec![(content_path, Block::Text(text))],
        Some(Value::Array(blocks)) => {
            if blocks.is_empty() {
                push(out, ProviderRule::Shape, &content_path, "empty content");
            }
            blocks
                .iter()
                .enumerate()
                .map(|(index, block)| (format!("{content_path}/{index}"), Block::Value(block)))
                .collect()
        }
        _ => {
            push(
                out,
                ProviderRule::Shape,
                &content_path,
                "content is neither a string nor blocks",
            );
            Vec::new()
        }
    }
}

/// Rules 4 and 6-9 and the block shapes, within one joined message.
fn check_joined_blocks<'a>(
    message: &Joined<'a>,
    seen_ids: &mut HashMap<&'a str, String>,
    out: &mut Vec<ProviderViolation>,
) {
    let assistant = message.role == "assistant";
    // Rule 7's exception: a single space between signed thinking blocks keeps them in place.
    let signed: Vec<usize> = message
        .blocks
        .iter()
        .enumerate()
        .filter(|(_, (_, block))| match block.kind() {
            Some("thinking") => block.str_field("signature").is_some_and(|s| !s.is_empty()),
            Some("redacted_thinking") => true,
            _ => false,
        })
        .map(|(at, _)| at)
        .collect();
    let between_signed = |at: usize| {
        assistant
            && signed.first().is_some_and(|first| *first < at)
            && signed.last().is_some_and(|last| at < *last)
    };
    let mut other_seen = false;
    for (at, (path, block)) in message.blocks.iter().enumerate() {
        let kind = block.kind();
        if kind != Some("tool_result") {
            other_seen = true;
        }
        match kind {
            Some("text") => match block.str_field("text") {
                None => push(out, ProviderRule::Shape, path, "text block without text"),
                Some(" ") if between_signed(at) => {}
                Some("") => {
                    push(out, ProviderRule::NonEmptyText, path, "empty text block");
                }
                Some(text) if is_blank(text) => {
                    push(
                        out,
                        ProviderRule::NonEmptyText,
                        path,
                        "whitespace-only text block",
                    );
                }
                Some(_) => {}
            },
            Some("thinking") | Some("redacted_thinking") => {
                if !assistant {
                    push(
                        out,
                        ProviderRule::ThinkingInAssistant,
                        path,
                        format!("{} block in a user message", kind.unwrap_or_default()),
                    );
                }
                let (field, name) = if kind == Some("thinking") {
                    ("signature", "thinking block without a signature")
                } else {
                    ("data", "redacted_thinking block without data")
                };
                if block.str_field(field).is_none_or(str::is_empty) {
                    push(out, ProviderRule::ThinkingSigned, path, name);
                }
                if kind == Some("thinking") && block.str_field("thinking").is_none() {
                    push(
                        out,
                        ProviderRule::Shape,
                        path,
                        "thinking block without thinking text",
                    );
                }
            }
            Some("tool_use") => {
                if !assistant {
                    push(
                        out,
                        ProviderRule::Shape,
                        path,
                        "tool_use block in a user message",
                    );
                }
                match block.str_field("id") {
                    Some(id) if !id.is_empty() => {
                        if !id
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                        {
                            push(
                                out,
                                ProviderRule::Shape,
                                path,
                                format!("tool_use id {id:?} does not match ^[a-zA-Z0-9_-]+$"),
                            );
                        }
                        if let Some(first) = seen_ids.get(id) {
                            push(
                                out,
                                ProviderRule::UniqueToolUseIds,
                                path,
                                format!("tool_use id {id:?} already used at {first}"),
                            );
                        } else {
                            seen_ids.insert(id, path.clone());
                        }
                    }
                    _ => push(out, ProviderRule::Shape, path, "tool_use without an id"),
                }
                if block.str_field("name").is_none_or(str::is_empty) {
                    push(out, ProviderRule::Shape, path, "tool_use without a name");
                }
                if !block.field("input").is_some_and(Value::is_object) {
                    push(
                        out,
                        ProviderRule::Shape,
                        path,
                        "tool_use input is not an object",
                    );
                }
            }
            Some("tool_result") => {
                if assistant {
                    push(
                        out,
                        ProviderRule::ToolResultAnswersPrevious,
                        path,
                        "tool_result block in an assistant message",
                    );
                } else if other_seen {
                    push(
                        out,
                        ProviderRule::ToolResultsFirst,
                        path,
                        "tool_result after another block of the (joined) user message",
                    );
                }
                if block.str_field("tool_use_id").is_none_or(str::is_empty) {
                    push(
                        out,
                        ProviderRule::Shape,
                        path,
                        "tool_result without tool_use_id",
                    );
                }
                check_result_content(block, path, out);
            }
            Some("image") | Some("document") if assistant => {
                push(
                    out,
                    ProviderRule::Shape,
                    path,
                    format!("{} block in an assistant message", kind.unwrap_or_default()),
                );
            }
            Some(_) => {}
            None => push(
                out,
                ProviderRule::Shape,
                path,
                "content block without a type",
            ),
        }
    }
}

/// Rule 8, and rule 7 for text blocks nested in a result.
fn check_result_content(block: &Block<'_>, path: &str, out: &mut Vec<ProviderViolation>) {
    let is_error = block.field("is_error").and_then(Value::as_bool) == Some(true);
    let has_content = match block.field("content") {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !is_blank(text),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                if item.get("type").and_then(Value::as_str) == Some("text")
                    && item
                        .get("text")
                        .and_then(Value::as_str)
                        .is_none_or(is_blank)
                {
                    push(
                        out,
                        ProviderRule::NonEmptyText,
                        &format!("{path}/content/{index}"),
                        "blank text block in a tool_result",
                    );
                }
            }
            !items.is_empty()
        }
        Some(_) => {
            push(
                out,
                ProviderRule::Shape,
                &format!("{path}/content"),
                "tool_result content is neither a string nor blocks",
            );
            true
        }
    };
    if is_error && !has_content {
        push(
            out,
            ProviderRule::ErrorResultContent,
            path,
            "error tool_result without content",
        );
    }
}

/// The `field` of every `kind` block of `message`, when it has `role` (else none).
fn ids_in<'a>(
    message: Option<&Joined<'a>>,
    role: &str,
    kind: &str,
    field: &str,
) -> HashSet<&'a str> {
    message
        .filter(|message| message.role == role)
        .map(|message| fields_of(message, kind, field).map(|(_, id)| id).collect())
        .unwrap_or_default()
}

/// `(path, field)` of every `kind` block of `message` that has a string `field`.
fn fields_of<'m, 'a>(
    message: &'m Joined<'a>,
    kind: &'m str,
    field: &'m str,
) -> impl Iterator<Item = (&'m str, &'a str)> + 'm {
    message
        .blocks
        .iter()
        .filter(move |(_, block)| block.kind() == Some(kind))
        .filter_map(move |(path, block)| Some((path.as_str(), block.str_field(field)?)))
}

/// Rule 2: every tool_use of `message` is answered in the next message, a user message.
fn check_answered_next(
    message: &Joined<'_>,
    next: Option<&Joined<'_>>,
    out: &mut Vec<ProviderViolation>,
) {
    let answers = ids_in(next, "user", "tool_result", "tool_use_id");
    for (path, id) in fields_of(message, "tool_use", "id") {
        if !answers.contains(id) {
            push(
                out,
                ProviderRule::ToolUseAnswered,
                path,
                format!("tool_use {id:?} has no tool_result in the next message"),
            );
        }
    }
}

/// Rule 3: every tool_result answers a tool_use of the assistant message directly before,
/// once.
fn check_results_answer_previous(
    message: &Joined<'_>,
    previous: Option<&Joined<'_>>,
    out: &mut Vec<ProviderViolation>,
) {
    let calls = ids_in(previous, "assistant", "tool_use", "id");
    let mut answered = HashSet::new();
    for (path, id) in fields_of(message, "tool_result", "tool_use_id") {
        if !calls.contains(id) {
            push(
                out,
                ProviderRule::ToolResultAnswersPrevious,
                path,
                format!(
                    "tool_result for {id:?} answers no tool_use of the previous assistant message"
                ),
            );
        } else if !answered.insert(id) {
            push(
                out,
                ProviderRule::ToolResultAnswersPrevious,
                path,
                format!("tool_use {id:?} is answered twice"),
            );
        }
    }
}

/// Every violation of the OpenAI Chat Completions rules (11-13) in `body`.
pub fn check_openai(body: &Value) -> Vec<ProviderViolation> {
    let mut out = Vec::new();
    let Some(messages) = messages_of(body, &mut out) else {
        return out;
    };
    let mut seen_ids: HashMap<&str, String> = HashMap::new();
    // The open tool block: the assistant's path and its calls not answered yet.
    let mut open: Option<(String, Vec<&str>)> = None;
    for (index, message) in messages.iter().enumerate() {
        let path = format!("/messages/{index}");
        let Some(role) = message.get("role").and_then(Value::as_str) else {
            push(
                &mut out,
                ProviderRule::Shape,
                &path,
                "message without a string role",
            );
            continue;
        };
        if role == "tool" {
            let id = message.get("tool_call_id").and_then(Value::as_str);
            let answered = match (open.as_mut(), id) {
                (Some((_, pending)), Some(id)) => match pending.iter().position(|p| *p == id) {
                    Some(at) => {
                        pending.remove(at);
                        true
                    }
                    None => false,
                },
                _ => false,
            };
            if !answered {
                push(&mut out, ProviderRule::ToolMessageAnswersCall, &path, format!("tool message for {:?} answers no pending call of the assistant message before its block", id.unwrap_or_default()));
            }
            if !message
                .get("content")
                .is_some_and(|c| c.is_string() || c.is_array())
            {
                push(
                    &mut out,
                    ProviderRule::Shape,
                    &format!("{path}/content"),
                    "tool message without content",
                );
            }
            continue;
        }
        // Any other message ends the tool block.
        if let Some((assistant, pending)) = open.take() {
            if !pending.is_empty() {
                push(
                    &mut out,
                    ProviderRule::ToolCallsAnswered,
                    &assistant,
                    format!("tool_calls {pending:?} are not answered before {path}"),
                );
            }
        }
        match role {
            "system" | "developer" | "user" => {}
            "assistant" => {
                let calls = check_tool_calls(message, &path, &mut seen_ids, &mut out);
                let content = message.get("content");
                let has_content = content.is_some_and(|c| !c.is_null());
                if !has_content && calls.is_empty() {
                    push(
                        &mut out,
                        ProviderRule::Shape,
                        &path,
                        "assistant message without content or tool_calls",
                    );
                }
                if !calls.is_empty() {
                    open = Some((path.clone(), calls));
                }
            }
            other => push(
                &mut out,
                ProviderRule::Roles,
                &format!("{path}/role"),
                format!("unknown role {other:?}"),
            ),
        }
    }
    if let Some((assistant, pending)) = open {
        if !pending.is_empty() {
            push(
                &mut out,
                ProviderRule::ToolCallsAnswered,
                &assistant,
                format!("tool_calls {pending:?} are not answered before the end"),
            );
        }
    }
    out
}

/// Rule 13 on one assistant message; returns its call ids.
fn check_tool_calls<'a>(
    message: &'a Value,
    path: &str,
    seen_ids: &mut HashMap<&'a str, String>,
    out: &mut Vec<ProviderViolation>,
) -> Vec<&'a str> {
    let Some(calls) = message.get("tool_calls") else {
        return Vec::new();
    };
    let Some(calls) = calls.as_array() else {
        push(
            out,
            ProviderRule::Shape,
            &format!("{path}/tool_calls"),
            "tool_calls is not an array",
        );
        return Vec::new();
    };
    let mut ids = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let call_path = format!("{path}/tool_calls/{index}");
        match call.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => {
                if let Some(first) = seen_ids.get(id) {
                    push(
                        out,
                        ProviderRule::UniqueToolUseIds,
                        &call_path,
                        format!("tool call id {id:?} already used at {first}"),
                    );
                } else {
                    seen_ids.insert(id, call_path.clone());
                }
                ids.push(id);
            }
            _ => push(
                out,
                ProviderRule::Shape,
                &call_path,
                "tool call without an id",
            ),
        }
        if call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            push(
                out,
                ProviderRule::Shape,
                &format!("{call_path}/function/name"),
                "tool call without a function name",
            );
        }
        let arguments_path = format!("{call_path}/function/arguments");
        match call.pointer("/function/arguments") {
            Some(Value::String(raw)) => {
                if serde_json::from_str::<Value>(raw).is_err() {
                    push(
                        out,
                        ProviderRule::ArgumentsJsonString,
                        &arguments_path,
                        "arguments are not valid JSON",
                    );
                }
            }
            _ => push(
                out,
                ProviderRule::ArgumentsJsonString,
                &arguments_path,
                "arguments are not a string",
            ),
        }
    }
    ids
}

/// Rule 9 against the stored history: the signed thinking and redacted thinking of the latest
/// assistant message in `messages` (what the provider sent) end the thinking blocks of the
/// last assistant message of the Anthropic `body`, byte for byte and in order.
pub fn check_latest_thinking(messages: &[Message], body: &Value) -> Vec<ProviderViolation> {
    let expected: Vec<(&str, &str, &str)> = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .map(|latest| {
            latest
                .parts
                .iter()
                .filter(|part| is_position_validated(part))
                .filter_map(|part| match part {
                    Part::Reasoning { text, .. } => Some((
                        "thinking",
                        text.as_str(),
                        signature(part).unwrap_or_default(),
                    )),
                    Part::RedactedReasoning { data, .. } => {
                        Some(("redacted_thinking", data.as_str(), ""))
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    if expected.is_empty() {
        return Vec::new();
    }
    let messages = body.get("messages").and_then(Value::as_array);
    let last = messages.and_then(|all| {
        all.iter()
            .enumerate()
            .rev()
            .find(|(_, m)| m.get("role").and_then(Value::as_str) == Some("assistant"))
    });
    let (path, actual) = match last {
        Some((index, message)) => {
            let actual: Vec<(&str, &str, &str)> = message
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|block| {
                    let field = |key| block.get(key).and_then(Value::as_str).unwrap_or_default();
                    match field("type") {
                        "thinking" => Some(("thinking", field("thinking"), field("signature"))),
                        "redacted_thinking" => Some(("redacted_thinking", field("data"), "")),
                        _ => None,
                    }
                })
                .collect();
            (format!("/messages/{index}"), actual)
        }
        None => ("/messages".to_owned(), Vec::new()),
    };
    if actual.ends_with(&expected) {
        return Vec::new();
    }
    vec![ProviderViolation {
        rule: ProviderRule::LatestThinkingUnchanged,
        path,
        detail: format!(
            "the latest assistant message's {} thinking blocks are not sent back as stored",
            expected.len()
        ),
    }]
}

/// [`check_anthropic`], [`check_openai`], [`check_responses`] or [`check_gemini`], by
/// provider.
pub fn check(provider: Provider, body: &Value) -> Vec<ProviderViolation> {
    match provider {
        Provider::Anthropic => check_anthropic(body),
        Provider::OpenAi => check_openai(body),
        Provider::Responses => check_responses(body),
        Provider::Gemini => check_gemini(body),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::history::render::{anthropic, openai};
    use crate::history::sanitize::sanitize;
    use crate::history::signed::signature;
    use crate::history::testing::{arb, history};
    use crate::model::{Part, Role};

    fn rules(violations: &[ProviderViolation]) -> Vec<ProviderRule> {
        violations.iter().map(|v| v.rule).collect()
    }

    #[test]
    fn anthropic_rules_are_each_detected() {
        let body = json!({"messages": [
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            {"role": "system", "content": "x"},
            {"role": "user", "content": [
                {"type": "text", "text": " "},
                {"type": "tool_result", "tool_use_id": "nope", "is_error": true},
                {"type": "thinking", "thinking": "t"},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "bash", "input": {}},
                {"type": "tool_use", "id": "a", "name": "bash", "input": "x"},
            ]},
            {"role": "user", "content": ""},
        ]});
        let found = rules(&check_anthropic(&body));
        for rule in [
            ProviderRule::FirstMessageUser,
            ProviderRule::Roles,
            ProviderRule::NonEmptyText,
            ProviderRule::ToolResultAnswersPrevious,
            ProviderRule::ErrorResultContent,
            ProviderRule::ToolResultsFirst,
            ProviderRule::ThinkingInAssistant,
            ProviderRule::ThinkingSigned,
            ProviderRule::UniqueToolUseIds,
            ProviderRule::Shape,
            ProviderRule::ToolUseAnswered,
        ] {
            assert!(found.contains(&rule), "{rule} not found in {found:?}");
        }
    }

    #[test]
    fn joined_user_text_before_results_breaks_results_first() {
        // Rule 5: the server joins the two user messages, so the text comes first.
        let body = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "bash", "input": {}}]},
            {"role": "user", "content": "wait"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
        ]});
        let violations = check_anthropic(&body);
        assert_eq!(rules(&violations), vec![ProviderRule::ToolResultsFirst]);
        assert_eq!(violations[0].path, "/messages/3/content/0");
    }

    #[test]
    fn single_space_is_accepted_only_with_signed_thinking() {
        let signed = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "a", "signature": "s"},
                {"type": "text", "text": " "},
                {"type": "thinking", "thinking": "b", "signature": "t"},
            ]},
        ]});
        assert_eq!(check_anthropic(&signed), vec![]);
        let unsigned = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": " "}, {"type": "text", "text": "x"}]},
        ]});
        assert_eq!(
            rules(&check_anthropic(&unsigned)),
            vec![ProviderRule::NonEmptyText]
        );
    }

    #[test]
    fn single_space_is_accepted_only_between_signed_thinking() {
        for content in [
            json!([{"type": "thinking", "thinking": "a", "signature": "s"}, {"type": "text", "text": " "}]),
            json!([{"type": "text", "text": " "}, {"type": "redacted_thinking", "data": "d"}]),
            json!([{"type": "thinking", "thinking": "a", "signature": "s"}, {"type": "text", "text": " "}, {"type": "tool_use", "id": "x", "name": "n", "input": {}}]),
        ] {
            let body = json!({"messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": content},
            ]});
            let found = rules(&check_anthropic(&body));
            assert!(
                found.contains(&ProviderRule::NonEmptyText),
                "{body}: {found:?}"
            );
        }
    }

    #[test]
    fn openai_rules_are_each_detected() {
        let body = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "bash", "arguments": {"cmd": "ls"}}},
                {"id": "b", "type": "function", "function": {"name": "bash", "arguments": "{"}},
            ]},
            {"role": "system", "content": "between"},
            {"role": "tool", "tool_call_id": "a", "content": "ok"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
            ]},
            {"role": "function", "content": "x"},
            {"role": "assistant", "content": null},
        ]});
        let found = rules(&check_openai(&body));
        for rule in [
            ProviderRule::ArgumentsJsonString,
            ProviderRule::ToolCallsAnswered,
            ProviderRule::ToolMessageAnswersCall,
            ProviderRule::UniqueToolUseIds,
            ProviderRule::Roles,
            ProviderRule::Shape,
        ] {
            assert!(found.contains(&rule), "{rule} not found in {found:?}");
        }
    }

    #[test]
    fn latest_thinking_must_come_back_unchanged() {
        let messages = history(vec![
            (Role::User, vec![Part::text("q")]),
            (
                Role::Assistant,
                vec![
                    Part::reasoning("t", Some(json!({"bedrock": {"signature": "s"}}))),
                    Part::text("a"),
                ],
            ),
        ]);
        let sent = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "text", "text": "a"},
            ]},
        ]});
        assert_eq!(check_latest_thinking(&messages, &sent), vec![]);
        let mut changed = sent.clone();
        changed["messages"][1]["content"][0]["signature"] = json!("other");
        assert_eq!(
            rules(&check_latest_thinking(&messages, &changed)),
            vec![ProviderRule::LatestThinkingUnchanged]
        );
    }

    #[test]
    fn healthy_bodies_pass() {
        let anthropic = json!({"system": "s", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "bash", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "ok"}]},
                {"type": "text", "text": "next"},
            ]},
        ]});
        assert_eq!(check_anthropic(&anthropic), vec![]);
        let openai = json!({"messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "a", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ]});
        assert_eq!(check_openai(&openai), vec![]);
    }

    /// The signatures of the signed reasoning parts of assistant messages, in order.
    fn stored_signatures(messages: &[(Role, Vec<Part>)]) -> Vec<String> {
        messages
            .iter()
            .filter(|(role, _)| *role == Role::Assistant)
            .flat_map(|(_, parts)| parts.iter().filter_map(signature))
            .map(str::to_owned)
            .collect()
    }

    fn rendered_signatures(body: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for message in body["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if let Some(signature) = block.get("signature").and_then(Value::as_str) {
                    out.push(signature.to_owned());
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any stored history, however broken, renders into bodies both providers accept,
        /// and every signed thinking block comes back, in order.
        #[test]
        fn rendered_random_histories_pass_the_contract(raw in arb::messages(14)) {
            let view = sanitize(&history(raw.clone()));
            let a = anthropic::render(&view);
            let o = openai::render(&view);
            prop_assert_eq!(check_anthropic(&a), vec![], "anthropic {:#}", a);
            prop_assert_eq!(check_openai(&o), vec![], "openai {:#}", o);
            prop_assert_eq!(rendered_signatures(&a), stored_signatures(&raw));
            prop_assert_eq!(check_latest_thinking(&history(raw), &a), vec![]);
        }
    }
}

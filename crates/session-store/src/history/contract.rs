//! The providers' request rules (PROVIDER_RULES.md 1-15) as checks over a rendered body.
//!
//! These are library code, not test helpers: the exporter runs them on what it renders, the
//! CLI reports them, and the proptests require zero violations for any history, broken or
//! not. Each [`ProviderViolation`] names its [`ProviderRule`] and the JSON pointer of the offending value.
//!
//! Anthropic's server joins consecutive messages of one role before it checks (rule 5), so
//! the Anthropic checks run on the joined messages; paths point at the original block.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::provider::Provider;
use crate::history::signed::{is_position_validated, signature};
use crate::model::{Message, Part, Role};

mod anthropic;
mod gemini;
#[cfg(test)]
mod reference;
mod responses;
mod signed_by;

pub use anthropic::check_anthropic;
pub(crate) use anthropic::{
    attribute_fault, counted, result_item_fault, source_fit, too_large_among_many, Media,
    SourceFit, CACHE_MARKS_MAX, CHECKED_ATTRIBUTES, MEDIA_BYTES_MAX, MEDIA_MAX,
};
pub use gemini::check_gemini;
pub(crate) use gemini::DATA_KEYS as GEMINI_PART_DATA;
pub use responses::check_responses;
pub(crate) use responses::{item_id_allowed, item_id_fits};
pub use signed_by::check_signed_by_target;
pub(crate) use signed_by::{check_foreign_signatures, foreign_signatures};

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
    /// Anthropic: at most four blocks of a request carry a `cache_control` mark.
    CacheControlLimit,
    /// Anthropic: at most 100 images and documents in a request.
    MediaLimit,
    /// Anthropic: a request is at most 32 MB of JSON.
    RequestTooLarge,
    /// Anthropic: in a request of more than 20 images, no image is over 2000 pixels a side.
    ManyImagesSize,
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
            ProviderRule::CacheControlLimit => "cache_control_limit",
            ProviderRule::MediaLimit => "media_limit",
            ProviderRule::RequestTooLarge => "request_too_large",
            ProviderRule::ManyImagesSize => "many_images_size",
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

/// A `Shape` violation at `path` unless `value` holds a non-empty string at `pointer` (a
/// call's or response's name), and for a call's name where `refused_by` is a provider known
/// to refuse names outside its rule in a request, one that rule takes
/// ([`Provider::tool_name`]): the one check every provider's names go through.
fn require_name(
    value: &Value,
    pointer: &str,
    path: &str,
    (detail, refused_by): (&str, Option<Provider>),
    out: &mut Vec<ProviderViolation>,
) {
    let name = value.pointer(pointer).and_then(Value::as_str);
    let Some(name) = name.filter(|name| !name.is_empty()) else {
        push(out, ProviderRule::Shape, path, detail);
        return;
    };
    if let Some(provider) = refused_by {
        let sendable = provider.tool_name(name);
        if sendable != name {
            push(
                out,
                ProviderRule::Shape,
                path,
                format!("tool name {name:?} is not one {provider} takes (it would be sent as {sendable:?})"),
            );
        }
    }
}

/// A `Shape` violation at `path` when call id `id` is longer than `provider` takes
/// ([`Provider::call_id_max`]): the one check of every provider's id lengths.
fn require_id_length(id: &str, provider: Provider, path: &str, out: &mut Vec<ProviderViolation>) {
    let Some(max) = provider.call_id_max() else {
        return;
    };
    let length = id.chars().count();
    if length > max {
        push(
            out,
            ProviderRule::Shape,
            path,
            format!(
                "call id {id:?} is {length} characters long, more than the {max} {provider} takes"
            ),
        );
    }
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
            check_openai_tool_message(message, &path, open.as_mut(), &mut out);
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
            "system" | "developer" => {}
            "user" => check_openai_images(message, &path, &mut out),
            "assistant" => {
                open = check_openai_assistant(message, &path, &mut seen_ids, &mut out);
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

/// The image parts of a user message at `path`: a `data:` URL's bytes are an image OpenAI
/// takes ([`crate::history::media::image_url_fault`]).
fn check_openai_images(message: &Value, path: &str, out: &mut Vec<ProviderViolation>) {
    let Some(Value::Array(parts)) = message.get("content") else {
        return;
    };
    for (index, part) in parts.iter().enumerate() {
        let url = part.pointer("/image_url/url").and_then(Value::as_str);
        if let Some(fault) = url.and_then(crate::history::media::image_url_fault) {
            push(
                out,
                ProviderRule::Shape,
                &format!("{path}/content/{index}/image_url"),
                fault,
            );
        }
    }
}

/// Rule 12 and the shape of one `tool` message at `path`: it answers (and removes) a
/// pending call of the `open` tool block, and has content.
fn check_openai_tool_message(
    message: &Value,
    path: &str,
    open: Option<&mut (String, Vec<&str>)>,
    out: &mut Vec<ProviderViolation>,
) {
    let id = message.get("tool_call_id").and_then(Value::as_str);
    let answered = match (open, id) {
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
        push(out, ProviderRule::ToolMessageAnswersCall, path, format!("tool message for {:?} answers no pending call of the assistant message before its block", id.unwrap_or_default()));
    }
    if !message
        .get("content")
        .is_some_and(|c| c.is_string() || c.is_array())
    {
        push(
            out,
            ProviderRule::Shape,
            &format!("{path}/content"),
            "tool message without content",
        );
    }
}

/// Rule 13 and the shape of one assistant message at `path`. Returns the tool block it
/// opens (its path and call ids), if it makes calls.
fn check_openai_assistant<'a>(
    message: &'a Value,
    path: &str,
    seen_ids: &mut HashMap<&'a str, String>,
    out: &mut Vec<ProviderViolation>,
) -> Option<(String, Vec<&'a str>)> {
    let calls = check_tool_calls(message, path, seen_ids, out);
    let content = message.get("content");
    let has_content = content.is_some_and(|c| !c.is_null());
    if !has_content && calls.is_empty() {
        push(
            out,
            ProviderRule::Shape,
            path,
            "assistant message without content or tool_calls",
        );
    }
    if calls.is_empty() {
        return None;
    }
    Some((path.to_owned(), calls))
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
                require_id_length(id, Provider::OpenAi, &call_path, out);
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
        require_name(
            call,
            "/function/name",
            &format!("{call_path}/function/name"),
            ("tool call without a function name", Some(Provider::OpenAi)),
            out,
        );
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
            {"role": "user", "content": "next"},
        ]});
        assert_eq!(check_anthropic(&signed), vec![]);
        // Rule 7b: the exception does not extend to the final assistant message.
        let mut last = signed.clone();
        if let Some(list) = last["messages"].as_array_mut() {
            list.pop();
        }
        assert_eq!(
            rules(&check_anthropic(&last)),
            vec![ProviderRule::FinalAssistantTrailingWhitespace]
        );
        let unsigned = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": " "}, {"type": "text", "text": "x"}]},
        ]});
        assert_eq!(
            rules(&check_anthropic(&unsigned)),
            vec![
                ProviderRule::NonEmptyText,
                ProviderRule::FinalAssistantTrailingWhitespace
            ]
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

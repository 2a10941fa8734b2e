//! The Anthropic check as it was before issue 16 (one hashed lookup per field per rule),
//! kept for tests only: a property test holds [`super::check_anthropic`] to it, violation for
//! violation, on rendered and on mutated bodies.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::anthropic::check_attributes;
use super::{messages_of, push, ProviderRule, ProviderViolation};
use crate::history::blank::is_blank;

/// Every violation of the Anthropic Messages rules (1-10) in `body`.
///
/// Rule 9's "the latest assistant message's thinking comes back unchanged" needs the original
/// response to check, so it is not checked here; the renderer passes thinking through as it is.
pub(super) fn check_anthropic(body: &Value) -> Vec<ProviderViolation> {
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
    let whitespace_only = last.blocks.iter().find(|(_, block)| {
        block.kind() == Some("text")
            && block
                .str_field("text")
                .is_some_and(|t| !t.is_empty() && t.trim().is_empty())
    });
    if let Some((path, _)) = whitespace_only {
        push(
            out,
            ProviderRule::FinalAssistantTrailingWhitespace,
            path,
            "final assistant content cannot hold a whitespace-only text block",
        );
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

fn check_system(system: &Value, out: &mut Vec<ProviderViolation>) {
    match system {
        Value::String(_) => {}
        Value::Array(blocks) => {
            for (index, block) in blocks.iter().enumerate() {
                let path = format!("/system/{index}");
                check_attributes("text", |key| block.get(key), &|| path.clone(), out);
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
        check_attributes(
            kind.unwrap_or_default(),
            |key| block.field(key),
            &|| path.clone(),
            out,
        );
        match kind {
            Some("text") => check_text(block, path, between_signed(at), out),
            Some(kind @ ("thinking" | "redacted_thinking")) => {
                check_thinking(block, kind, assistant, path, out);
            }
            Some("tool_use") => check_tool_use(block, assistant, path, seen_ids, out),
            Some("tool_result") => check_tool_result(block, assistant, other_seen, path, out),
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

/// A text block at `path`: rule 7, but for a single space `between_signed` thinking blocks.
fn check_text(
    block: &Block<'_>,
    path: &str,
    between_signed: bool,
    out: &mut Vec<ProviderViolation>,
) {
    match block.str_field("text") {
        None => push(out, ProviderRule::Shape, path, "text block without text"),
        Some(" ") if between_signed => {}
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
    }
}

/// A `thinking` or `redacted_thinking` block (`kind`) at `path`: rule 9 and its shape.
fn check_thinking(
    block: &Block<'_>,
    kind: &str,
    assistant: bool,
    path: &str,
    out: &mut Vec<ProviderViolation>,
) {
    if !assistant {
        push(
            out,
            ProviderRule::ThinkingInAssistant,
            path,
            format!("{kind} block in a user message"),
        );
    }
    let (field, name) = if kind == "thinking" {
        ("signature", "thinking block without a signature")
    } else {
        ("data", "redacted_thinking block without data")
    };
    if block.str_field(field).is_none_or(str::is_empty) {
        push(out, ProviderRule::ThinkingSigned, path, name);
    }
    if kind == "thinking" && block.str_field("thinking").is_none() {
        push(
            out,
            ProviderRule::Shape,
            path,
            "thinking block without thinking text",
        );
    }
}

/// A tool_use block at `path`: its shape, and rule 6 (its id unique in `seen_ids`).
fn check_tool_use<'a>(
    block: &Block<'a>,
    assistant: bool,
    path: &str,
    seen_ids: &mut HashMap<&'a str, String>,
    out: &mut Vec<ProviderViolation>,
) {
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
                seen_ids.insert(id, path.to_owned());
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

/// A tool_result block at `path`: rules 3 and 4 (`other_seen` telling whether another
/// block came first), its id, and rule 8 on its content.
fn check_tool_result(
    block: &Block<'_>,
    assistant: bool,
    other_seen: bool,
    path: &str,
    out: &mut Vec<ProviderViolation>,
) {
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

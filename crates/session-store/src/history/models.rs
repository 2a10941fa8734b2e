//! Signatures of every provider, and the model that made them (PROVIDER_RULES 10c, 14, 15).
//!
//! A reasoning signature is valid only for the model that produced it: Anthropic refuses
//! thinking signed by another model ("Invalid signature in thinking block"), the OpenAI
//! Responses API cannot decrypt another model's `encrypted_content`, and Gemini refuses a
//! `thoughtSignature` another model made. Each lives in a part's provider metadata under its
//! own namespace:
//!
//! | provider | part | metadata |
//! |---|---|---|
//! | Anthropic (Bedrock, Vertex) | reasoning | `{"anthropic": {"signature": "..."}}` (see [`crate::history::signed`]) |
//! | OpenAI Responses | reasoning | `{"openai": {"encrypted_content": "...", "id"?: "rs_...", "summary"?: [...]}}` |
//! | Gemini | the part it came on: text, tool_use, or reasoning | `{"gemini": {"thoughtSignature": "..."}}` |
//!
//! Gemini may put a signature on an empty text part; since the loader drops blank text, the
//! importers keep such a part as a reasoning part (`{"gemini": {"thoughtSignature": ...,
//! "text": true}}`): it renders back as the text part it was, and is thinking for every other
//! purpose (dropped with the message's thinking, never sent to another provider). A Gemini
//! thought summary (`"thought": true`) is a reasoning part with `{"gemini": {"thought": true}}`.
//!
//! [`bind_to_model`] applies rule 10c before the loader runs: an assistant message written by
//! another model than the target loses all its thinking at once (every reasoning and redacted
//! reasoning part, and the Gemini signatures on its other parts). A message whose model was
//! not recorded (rows written before `messages.model` existed) is taken as the target's.

use serde_json::Value;

use crate::model::Part;

/// The provider-metadata namespace of OpenAI (Chat Completions and Responses).
pub const OPENAI: &str = "openai";
/// The provider-metadata namespace of Gemini.
pub const GEMINI: &str = "gemini";
/// The key of a Gemini signature in its namespace, as the API spells it.
pub const THOUGHT_SIGNATURE: &str = "thoughtSignature";
/// The key of an OpenAI Responses reasoning item's encrypted reasoning.
pub const ENCRYPTED_CONTENT: &str = "encrypted_content";
/// The value Google documents for a function call Gemini 3 did not make itself (history from
/// another model): it passes the signature check that a missing signature fails.
pub const FOREIGN_THOUGHT_SIGNATURE: &str = "skip_thought_signature_validator";

/// `metadata[namespace][key]` as a non-empty string.
pub fn meta_str<'a>(metadata: Option<&'a Value>, namespace: &str, key: &str) -> Option<&'a str> {
    metadata?
        .get(namespace)?
        .get(key)?
        .as_str()
        .filter(|value| !value.is_empty())
}

/// `metadata[namespace][key]` is `true`.
pub fn meta_flag(metadata: Option<&Value>, namespace: &str, key: &str) -> bool {
    metadata
        .and_then(|m| m.get(namespace))
        .and_then(|n| n.get(key))
        .and_then(Value::as_bool)
        == Some(true)
}

/// The Gemini `thoughtSignature` a part came with.
pub fn gemini_signature(metadata: Option<&Value>) -> Option<&str> {
    meta_str(metadata, GEMINI, THOUGHT_SIGNATURE)
}

/// The OpenAI Responses `encrypted_content` of a reasoning part.
pub fn encrypted_content(metadata: Option<&Value>) -> Option<&str> {
    meta_str(metadata, OPENAI, ENCRYPTED_CONTENT)
}

/// True for a reasoning part that stands for Gemini content: a thought summary, or a
/// signature that came on a text part.
pub fn is_gemini_reasoning(metadata: Option<&Value>) -> bool {
    metadata.and_then(|m| m.get(GEMINI)).is_some()
}

/// The provider half of `"provider/model"` (`anthropic` in `anthropic/claude-sonnet-4-5`).
pub fn provider_of(model: &str) -> &str {
    model.split_once('/').map_or(model, |(provider, _)| provider)
}

/// The parts without their thinking: reasoning and redacted reasoning left out, Gemini
/// signatures removed from the others. Never empty when `parts` was not: a message made of
/// thinking only keeps an empty text part, which the loader then drops with the message.
pub fn strip_thinking(parts: &[Part]) -> Vec<Part> {
    let mut out: Vec<Part> = parts
        .iter()
        .filter(|part| !matches!(part, Part::Reasoning { .. } | Part::RedactedReasoning { .. }))
        .cloned()
        .map(|mut part| {
            if let Some(metadata) = part_metadata_mut(&mut part) {
                remove_gemini_signature(metadata);
            }
            part
        })
        .collect();
    if out.is_empty() && !parts.is_empty() {
        out.push(Part::text(""));
    }
    out
}

fn part_metadata_mut(part: &mut Part) -> Option<&mut Option<Value>> {
    match part {
        Part::Text {
            provider_metadata, ..
        }
        | Part::ToolUse {
            provider_metadata, ..
        }
        | Part::ToolResult {
            provider_metadata, ..
        } => Some(provider_metadata),
        _ => None,
    }
}

fn remove_gemini_signature(metadata: &mut Option<Value>) {
    let Some(Value::Object(outer)) = metadata.as_mut() else {
        return;
    };
    let Some(Value::Object(gemini)) = outer.get_mut(GEMINI) else {
        return;
    };
    gemini.remove(THOUGHT_SIGNATURE);
    if gemini.is_empty() {
        outer.remove(GEMINI);
    }
    if outer.is_empty() {
        *metadata = None;
    }
}


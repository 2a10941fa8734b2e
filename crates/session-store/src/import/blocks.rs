//! Anthropic content blocks to parts: shared by the Messages body and the Claude Code log,
//! which embeds the same blocks.

use serde_json::{json, Value};

use super::{as_object, metadata, string_field, type_name, ImportError, Location};
use crate::model::Part;

/// One converted block: a part of the message itself, or a tool result that goes into the
/// `tool` message split off the front of a user message.
pub(crate) enum Block {
    /// Stays in its message.
    Part(Part),
    /// A tool_result.
    Result(Part),
}

/// Converts a message's `content`: a string (one text block) or an array of blocks.
pub(crate) fn content_blocks(content: &Value, at: &Location) -> Result<Vec<Block>, ImportError> {
    match content {
        Value::String(text) => Ok(vec![Block::Part(Part::text(text.clone()))]),
        Value::Array(blocks) => blocks
            .iter()
            .enumerate()
            .map(|(index, block)| convert(block, &at.join(&format!("[{index}]"))))
            .collect(),
        other => Err(ImportError::malformed(
            at,
            format!(
                "expected a string or an array of content blocks, found {}",
                type_name(other)
            ),
        )),
    }
}

/// Splits converted blocks into (tool results, the rest), each in source order.
pub(crate) fn split(blocks: Vec<Block>) -> (Vec<Part>, Vec<Part>) {
    let mut results = Vec::new();
    let mut rest = Vec::new();
    for block in blocks {
        match block {
            Block::Result(part) => results.push(part),
            Block::Part(part) => rest.push(part),
        }
    }
    (results, rest)
}

/// Converts one content block.
pub(crate) fn convert(block: &Value, at: &Location) -> Result<Block, ImportError> {
    let object = as_object(block, at, "a content block")?;
    let kind = string_field(object, "type", at)?;
    Ok(match kind {
        "text" => {
            let text = string_field(object, "text", at)?;
            // Citations are part of what the model said; keep them. cache_control is a
            // request-side hint and is not kept.
            let provider_metadata = object
                .get("citations")
                .filter(|c| !c.is_null())
                .map(|c| metadata("anthropic", "citations", c.clone()));
            Block::Part(Part::Text {
                text: text.to_owned(),
                provider_metadata,
            })
        }
        "thinking" => {
            let text = string_field(object, "thinking", at)?;
            let provider_metadata = match object.get("signature") {
                None | Some(Value::Null) => None,
                Some(Value::String(signature)) => Some(metadata(
                    "anthropic",
                    "signature",
                    Value::String(signature.clone()),
                )),
                Some(other) => {
                    return Err(ImportError::malformed(
                        &at.join("signature"),
                        format!("expected a string, found {}", type_name(other)),
                    ))
                }
            };
            Block::Part(Part::Reasoning {
                text: text.to_owned(),
                provider_metadata,
            })
        }
        "redacted_thinking" => Block::Part(Part::RedactedReasoning {
            data: string_field(object, "data", at)?.to_owned(),
            provider_metadata: None,
        }),
        "tool_use" => {
            let id = string_field(object, "id", at)?;
            let name = string_field(object, "name", at)?;
            let input = object.get("input").cloned().unwrap_or_else(|| json!({}));
            if !input.is_object() {
                return Err(ImportError::malformed(
                    &at.join("input"),
                    format!("expected an object, found {}", type_name(&input)),
                ));
            }
            Block::Part(Part::tool_use(id, name, input))
        }
        "tool_result" => {
            let tool_use_id = string_field(object, "tool_use_id", at)?;
            let (content, provider_metadata) =
                result_content(object.get("content"), &at.join("content"))?;
            let is_error = match object.get("is_error") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(ImportError::malformed(
                        &at.join("is_error"),
                        format!("expected a boolean, found {}", type_name(other)),
                    ))
                }
            };
            Block::Result(Part::ToolResult {
                blocks: None,
                tool_use_id: tool_use_id.to_owned(),
                content,
                is_error,
                provider_metadata,
            })
        }
        _ => Block::Part(unknown_block(block, kind)),
    })
}

/// A tool_result's `content`: absent, a string, or an array of blocks.
fn result_content(
    content: Option<&Value>,
    at: &Location,
) -> Result<(String, Option<Value>), ImportError> {
    match content {
        None | Some(Value::Null) => Ok((String::new(), None)),
        Some(Value::String(text)) => Ok((text.clone(), None)),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (index, block) in blocks.iter().enumerate() {
                let at = at.join(&format!("[{index}]"));
                let object = as_object(block, &at, "a content block")?;
                let kind = string_field(object, "type", &at)?;
                if kind == "text" {
                    texts.push(string_field(object, "text", &at)?.to_owned());
                } else {
                    texts.push(describe(block, kind));
                }
            }
            let plain = matches!(blocks.as_slice(), [only] if only.get("type") == Some(&json!("text")) && only.as_object().is_some_and(|o| o.len() == 2));
            let kept =
                (!plain).then(|| metadata("anthropic", "content", Value::Array(blocks.clone())));
            Ok((texts.join("\n"), kept))
        }
        Some(other) => Err(ImportError::malformed(
            at,
            format!(
                "expected a string or an array of content blocks, found {}",
                type_name(other)
            ),
        )),
    }
}

/// A block the store has no part for: text describing it, the block itself in metadata.
pub(crate) fn unknown_block(block: &Value, kind: &str) -> Part {
    Part::Text {
        text: describe(block, kind),
        provider_metadata: Some(metadata("anthropic", "block", block.clone())),
    }
}

/// A short, never blank, human-readable stand-in for a block.
fn describe(block: &Value, kind: &str) -> String {
    let field = |path: &[&str]| -> Option<String> {
        let mut value = block;
        for key in path {
            value = value.get(key)?;
        }
        value.as_str().map(str::to_owned)
    };
    let described = match kind {
        "compaction" => field(&["content"]),
        "image" | "document" => field(&["source", "media_type"])
            .or_else(|| field(&["source", "url"]))
            .or_else(|| field(&["source", "type"]))
            .map(|what| format!("[{kind}: {what}]")),
        _ => None,
    };
    described
        .filter(|text| !crate::history::blank::is_blank(text))
        .unwrap_or_else(|| format!("[{kind} block]"))
}

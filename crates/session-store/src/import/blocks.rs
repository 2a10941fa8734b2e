//! Anthropic content blocks to parts: shared by the Messages body and the Claude Code log,
//! which embeds the same blocks.

use serde_json::{json, Map, Value};

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

/// Converts one content block. Nothing is dropped: what a part does not hold as a field (a
/// text's citations, cache-control marks, ...) is kept as a block attribute under
/// `provider_metadata.anthropic.attributes` and sent back to Anthropic as it came.
pub(crate) fn convert(block: &Value, at: &Location) -> Result<Block, ImportError> {
    let object = as_object(block, at, "a content block")?;
    let kind = string_field(object, "type", at)?;
    let part = match kind {
        "text" => {
            let text = string_field(object, "text", at)?;
            Part::Text {
                text: text.to_owned(),
                provider_metadata: attributes(object, &["type", "text"]),
            }
        }
        "thinking" => thinking(object, at)?,
        "redacted_thinking" => Part::RedactedReasoning {
            data: string_field(object, "data", at)?.to_owned(),
            provider_metadata: attributes(object, &["type", "data"]),
        },
        "tool_use" => tool_use(object, at)?,
        "tool_result" => return Ok(Block::Result(tool_result(object, at)?)),
        "image" | "document" => media(object, kind, at)?,
        // Server tools (web search, web fetch, code execution, remote MCP, tool search): the
        // call and its result both sit in the assistant message.
        "server_tool_use" | "mcp_tool_use" => server_tool_use(object, kind, at)?,
        server_result if is_server_result(server_result, object) => {
            let tool_use_id = string_field(object, "tool_use_id", at)?;
            Part::ServerToolResult {
                tool_use_id: tool_use_id.to_owned(),
                block: block.clone(),
                provider_metadata: None,
            }
        }
        _ => unknown_block(block),
    };
    Ok(Block::Part(part))
}

/// A `thinking` block: its text, with its signature (a string when present) kept in the
/// provider metadata.
fn thinking(object: &Map<String, Value>, at: &Location) -> Result<Part, ImportError> {
    let text = string_field(object, "thinking", at)?;
    let mut provider_metadata = attributes(object, &["type", "thinking", "signature"]);
    match object.get("signature") {
        None | Some(Value::Null) => {}
        Some(Value::String(signature)) => with(
            &mut provider_metadata,
            "signature",
            Value::String(signature.clone()),
        ),
        Some(other) => {
            return Err(ImportError::malformed(
                &at.join("signature"),
                format!("expected a string, found {}", type_name(other)),
            ))
        }
    };
    Ok(Part::Reasoning {
        text: text.to_owned(),
        provider_metadata,
    })
}

/// A `tool_use` block: its id, name and input (an object, `{}` when absent).
fn tool_use(object: &Map<String, Value>, at: &Location) -> Result<Part, ImportError> {
    let id = string_field(object, "id", at)?;
    let name = string_field(object, "name", at)?;
    let input = object.get("input").cloned().unwrap_or_else(|| json!({}));
    if !input.is_object() {
        return Err(ImportError::malformed(
            &at.join("input"),
            format!("expected an object, found {}", type_name(&input)),
        ));
    }
    Ok(Part::ToolUse {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
        provider_metadata: attributes(object, &["type", "id", "name", "input"]),
    })
}

/// A `tool_result` block: the id it answers, its content and its error flag (a boolean,
/// false when absent).
fn tool_result(object: &Map<String, Value>, at: &Location) -> Result<Part, ImportError> {
    let tool_use_id = string_field(object, "tool_use_id", at)?;
    let (content, blocks) = result_content(object.get("content"), &at.join("content"))?;
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
    Ok(Part::ToolResult {
        tool_use_id: tool_use_id.to_owned(),
        content,
        is_error,
        blocks,
        provider_metadata: attributes(object, &["type", "tool_use_id", "content", "is_error"]),
    })
}

/// An `image` or `document` block (`kind`): its source object, and a document's title.
fn media(object: &Map<String, Value>, kind: &str, at: &Location) -> Result<Part, ImportError> {
    let Some(source) = object.get("source").filter(|s| s.is_object()) else {
        return Err(ImportError::malformed(
            &at.join("source"),
            format!("an {kind} block needs a source object"),
        ));
    };
    let title = match object.get("title") {
        Some(Value::String(title)) if kind == "document" => Some(title.clone()),
        _ => None,
    };
    let skip: &[&str] = if title.is_some() {
        &["type", "source", "title"]
    } else {
        &["type", "source"]
    };
    let provider_metadata = attributes(object, skip);
    Ok(if kind == "image" {
        Part::Image {
            source: source.clone(),
            title,
            provider_metadata,
        }
    } else {
        Part::Document {
            source: source.clone(),
            title,
            provider_metadata,
        }
    })
}

/// A `server_tool_use` or `mcp_tool_use` block (`kind`): its id, name and input; an
/// `mcp_tool_use` keeps its type as an attribute.
fn server_tool_use(
    object: &Map<String, Value>,
    kind: &str,
    at: &Location,
) -> Result<Part, ImportError> {
    let id = string_field(object, "id", at)?;
    let name = string_field(object, "name", at)?;
    let input = object.get("input").cloned().unwrap_or_else(|| json!({}));
    let mut provider_metadata = attributes(object, &["id", "name", "input"]);
    if kind == "server_tool_use" {
        // The type is the part's own; only another one is an attribute.
        provider_metadata = attributes(object, &["type", "id", "name", "input"]);
    }
    Ok(Part::ServerToolUse {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
        provider_metadata,
    })
}

/// A server tool's result block: `web_search_tool_result`, `code_execution_tool_result`,
/// `mcp_tool_result`, ... (any `*_tool_result` but a client `tool_result`, with an id).
fn is_server_result(kind: &str, object: &Map<String, Value>) -> bool {
    crate::model::is_server_result_kind(kind) && object.contains_key("tool_use_id")
}

/// The block's keys other than `skip`, as `{"anthropic": {"attributes": {...}}}`; `None`
/// when there are none (or all are null).
fn attributes(object: &Map<String, Value>, skip: &[&str]) -> Option<Value> {
    let rest: Map<String, Value> = object
        .iter()
        .filter(|(key, value)| !skip.contains(&key.as_str()) && !value.is_null())
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    (!rest.is_empty()).then(|| metadata("anthropic", "attributes", Value::Object(rest)))
}

/// Sets `provider_metadata.anthropic.{key}`.
fn with(metadata_slot: &mut Option<Value>, key: &str, value: Value) {
    let extra = metadata("anthropic", key, value);
    match metadata_slot {
        Some(existing) => super::merge_into(existing, extra),
        None => *metadata_slot = Some(extra),
    }
}

/// A tool_result's `content`: absent, a string, or an array of blocks. An array is kept
/// whole (the second value) unless it is one plain text block; the text is its text blocks
/// joined by newlines, other blocks described.
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
            let kept = (!plain).then(|| Value::Array(blocks.clone()));
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

/// A block the store has no kind for (a provider-side `compaction`, a block type newer than
/// this build): kept verbatim as an opaque part, sent back to Anthropic alone.
pub(crate) fn unknown_block(block: &Value) -> Part {
    Part::opaque("anthropic", block.clone())
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

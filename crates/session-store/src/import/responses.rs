//! OpenAI Responses API request bodies: `{"instructions"?, "input": string | [items], "model"?}`.
//!
//! Items, in order (the same items a Codex rollout's `response_item` lines hold, see
//! [`crate::import::codex`]):
//! - `message` (also an item with a `role` and no `type`): `user` becomes a user message,
//!   `system` and `developer` a system message (`developer` tagged
//!   `provider_metadata.openai.role`), `assistant` text of the assistant message being built.
//!   Text parts (`input_text`, `output_text`, `refusal`) become text, `input_image` an image,
//!   `input_file` a document; other parts are kept verbatim for OpenAI alone (opaque).
//! - `reasoning`: a reasoning part, its text the summary texts joined by a blank line, with
//!   `{"openai": {"encrypted_content", "summary", "id"?}}` so it is replayed as it came.
//! - `function_call` (`call_id`, `name`, `arguments` a JSON string), `custom_tool_call`
//!   (`input` a string, kept as `{"input": ...}`) and `local_shell_call` (its `action` as the
//!   input, named `local_shell`): tool_use parts of the assistant message being built; the
//!   kind is kept under `provider_metadata.openai.type` unless it is `function_call`.
//! - `function_call_output`, `custom_tool_call_output`, `local_shell_call_output`: a
//!   tool_result in a tool message. An output that is a list of parts is stored as their
//!   text; a list with an image or a file (a screenshot, Codex's `view_image`) is also kept
//!   as the result's content blocks (`text`, `image`, `document`), which every format
//!   renders, and a list of texts alone under `provider_metadata.openai.output`.
//! - Any other item (`web_search_call`, `image_generation_call`, ...) is kept verbatim in the
//!   assistant message being built (an opaque part), sent back to OpenAI alone.
//!
//! Consecutive reasoning, assistant text and calls form one assistant message; an output or a
//! user or system message closes it. `instructions` becomes the first system message, tagged
//! `provider_metadata.openai.field = "instructions"` so an export sends it back there. The
//! body's `model` is the model of its assistant messages (`openai/{model}`).
//!
//! The body is held to the pairing rules strictly: what the API would reject is refused.

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::history::result_blocks;

use super::json::Top;
use super::stream::Document;
use super::{
    as_object, metadata, string_field, tag, type_name, Assembler, ImportError, Imported, Leniency,
    Location, Rest,
};
use crate::model::{NewMessage, Part, Role};

/// Imports an OpenAI Responses request body.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    super::stream::collect::<Body>(text)
}

/// A body being read, one item at a time ([`super::stream`]).
pub(crate) struct Body {
    items: Items,
}

impl Document for Body {
    const STREAM: &'static str = "input";
    const FIELDS: &'static [&'static str] = &["instructions", "model"];

    fn begin(top: Top) -> Result<Self, ImportError> {
        let root = Location::default();
        if let Some(kind) = top.not_an_object {
            return Err(ImportError::malformed(
                &root,
                format!("expected a Responses request body (an object), found {kind}"),
            ));
        }
        let object = &top.fields;
        let system = match object.get("instructions") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(NewMessage::new(
                Role::System,
                vec![Part::Text {
                    text: text.clone(),
                    provider_metadata: Some(json!({"openai": {"field": "instructions"}})),
                }],
            )),
            Some(other) => {
                return Err(ImportError::malformed(
                    &Location::path("instructions"),
                    format!("expected a string, found {}", type_name(other)),
                ))
            }
        };
        let model = match object.get("model") {
            Some(Value::String(model)) if !model.is_empty() => Some(format!("openai/{model}")),
            _ => None,
        };
        let mut items = Items::new(Leniency::STRICT);
        items.assembler.set_system(system);
        items.model = model;
        match top.stream {
            Some(Value::String(text)) => {
                items.push(&Location::path("input"), NewMessage::user(text))?
            }
            Some(Value::Array(_)) => {}
            Some(other) => {
                return Err(ImportError::malformed(
                    &Location::path("input"),
                    format!(
                        "expected a string or an array of items, found {}",
                        type_name(&other)
                    ),
                ))
            }
            None => return Err(ImportError::malformed(&root, "no \"input\"")),
        }
        Ok(Self { items })
    }

    fn element(&mut self, index: usize, item: Value) -> Result<(), ImportError> {
        self.items
            .item(&Location::path(format!("input[{index}]")), &item, None)
    }

    fn assembler(&mut self) -> &mut Assembler {
        &mut self.items.assembler
    }

    fn finish(mut self) -> Result<Rest, ImportError> {
        self.items.flush()?;
        self.items.assembler.finish_rest(&Location::path("input"))
    }
}

/// Builds messages from Responses items, one at a time (shared with Codex rollouts).
pub(crate) struct Items {
    pub(crate) assembler: Assembler,
    /// The assistant message being built: its parts, where it started, when.
    open: Vec<Part>,
    open_at: Option<(Location, Option<DateTime<Utc>>)>,
    /// The model of the assistant messages from here on (`provider/model`).
    pub(crate) model: Option<String>,
    /// Reading a log (a Codex rollout) rather than a request body: arguments that are not
    /// JSON are kept (wrapped) instead of refused, and a shell output whose
    /// `metadata.exit_code` is not 0 is an error result.
    pub(crate) log: bool,
}

impl Items {
    pub(crate) fn new(leniency: Leniency) -> Self {
        Self {
            assembler: Assembler::new(leniency),
            open: Vec::new(),
            open_at: None,
            model: None,
            log: false,
        }
    }

    /// How many messages were assembled so far (the open assistant message not counted).
    pub(crate) fn len(&self) -> usize {
        self.assembler.len()
    }

    /// Closes the assistant message being built, if any.
    pub(crate) fn flush(&mut self) -> Result<(), ImportError> {
        if self.open.is_empty() {
            return Ok(());
        }
        let parts = std::mem::take(&mut self.open);
        let (at, created_at) = self.open_at.take().unwrap_or_default();
        let mut message = NewMessage::assistant(parts);
        message.created_at = created_at;
        set_model(&mut message, self.model.as_deref());
        self.assembler.push(&at, message)
    }

    /// A user or system message.
    pub(crate) fn push(&mut self, at: &Location, message: NewMessage) -> Result<(), ImportError> {
        self.flush()?;
        self.assembler.push(at, message)
    }

    fn assistant(&mut self, at: &Location, created_at: Option<DateTime<Utc>>, part: Part) {
        if self.open_at.is_none() {
            self.open_at = Some((at.clone(), created_at));
        }
        self.open.push(part);
    }

    /// One item.
    pub(crate) fn item(
        &mut self,
        at: &Location,
        item: &Value,
        created_at: Option<DateTime<Utc>>,
    ) -> Result<(), ImportError> {
        match classify(at, item, self.log)? {
            ItemKind::Message(mut message) => {
                message.created_at = created_at;
                self.push(at, message)
            }
            ItemKind::Assistant(parts) => {
                for part in parts {
                    self.assistant(at, created_at, part);
                }
                Ok(())
            }
            ItemKind::Output(part) => {
                self.flush()?;
                self.assembler.results(at, vec![part], created_at)
            }
        }
    }
}

/// What one input item is.
enum ItemKind {
    /// A user or system message of its own.
    Message(NewMessage),
    /// Parts of the assistant message being built (reasoning, text, calls, server items).
    Assistant(Vec<Part>),
    /// A tool_result, for the tool message after the assistant message.
    Output(Part),
}

/// Reads one input item (`log`: see [`Items::log`]).
fn classify(at: &Location, item: &Value, log: bool) -> Result<ItemKind, ImportError> {
    let object = as_object(item, at, "an input item")?;
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        None if object.contains_key("role") => "message",
        Some(other) => {
            return Err(ImportError::malformed(
                &at.join("type"),
                format!("expected a string, found {}", type_name(other)),
            ))
        }
        None => return Err(ImportError::malformed(at, "an item without a \"type\"")),
    };
    Ok(match kind {
        "message" => message(at, object)?,
        "reasoning" => ItemKind::Assistant(vec![reasoning(object)]),
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            ItemKind::Assistant(vec![call(kind, object, at, log)?])
        }
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            ItemKind::Output(output(kind, object, at, log)?)
        }
        // Server-side items (`web_search_call`, ...) and items newer than this build: kept
        // verbatim, sent back to OpenAI alone.
        _ => ItemKind::Assistant(vec![Part::opaque("openai", item.clone())]),
    })
}

/// A `message` item (or an item with a `role` and no `type`).
fn message(at: &Location, object: &Map<String, Value>) -> Result<ItemKind, ImportError> {
    let role = string_field(object, "role", at)?;
    let mut parts = content(object, at)?;
    match role {
        "user" => Ok(ItemKind::Message(NewMessage::new(
            Role::User,
            non_empty(parts),
        ))),
        "system" | "developer" => {
            if role == "developer" {
                for part in &mut parts {
                    tag(part, json!({"openai": {"role": "developer"}}));
                }
            }
            Ok(ItemKind::Message(NewMessage::new(
                Role::System,
                non_empty(parts),
            )))
        }
        "assistant" => {
            // The item's own fields (`id`, `status`, `phase`) go back on the item its parts
            // are sent in.
            let item: Map<String, Value> = object
                .iter()
                .filter(|(key, _)| !matches!(key.as_str(), "type" | "role" | "content"))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            let mut parts = non_empty(parts);
            if !item.is_empty() {
                for part in &mut parts {
                    tag(
                        part,
                        metadata("openai", "item", Value::Object(item.clone())),
                    );
                }
            }
            Ok(ItemKind::Assistant(parts))
        }
        other => Err(ImportError::malformed(
            &at.join("role"),
            format!("expected user, assistant, system or developer, found {other:?}"),
        )),
    }
}

/// One Responses input item as one message, read the way a request body's items are read: a
/// `user`, `system` or `developer` message item is that message; reasoning, assistant text,
/// a call or a server-side item is an assistant message of its parts; an output is a `tool`
/// message of its one tool_result. Consecutive assistant items of a body make one assistant
/// message; a caller storing items one by one joins them the same way. Pairing is not
/// checked here: the store checks it when the messages are appended.
pub fn item_message(item: &Value) -> Result<NewMessage, ImportError> {
    Ok(match classify(&Location::default(), item, false)? {
        ItemKind::Message(message) => message,
        ItemKind::Assistant(parts) => NewMessage::assistant(parts),
        ItemKind::Output(part) => NewMessage::tool(vec![part]),
    })
}

/// Records who wrote an assistant message (`messages.model`).
pub(crate) fn set_model(message: &mut NewMessage, model: Option<&str>) {
    message.model = model.map(str::to_owned);
}

fn non_empty(parts: Vec<Part>) -> Vec<Part> {
    if parts.is_empty() {
        vec![Part::text("")]
    } else {
        parts
    }
}

/// A message's `content`: a string, or a list of parts.
fn content(object: &Map<String, Value>, at: &Location) -> Result<Vec<Part>, ImportError> {
    let at = at.join("content");
    match object.get("content") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![Part::text(text.clone())]),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| content_part(item, &at.join(&format!("[{index}]"))))
            .collect(),
        Some(other) => Err(ImportError::malformed(
            &at,
            format!(
                "expected a string or an array of parts, found {}",
                type_name(other)
            ),
        )),
    }
}

/// One part of a content list (a message's, or an output's).
fn content_part(item: &Value, at: &Location) -> Result<Part, ImportError> {
    let at = at.clone();
    let object = as_object(item, &at, "a content part")?;
    let kind = string_field(object, "type", &at)?;
    Ok(match kind {
        "input_text" | "text" => Part::text(string_field(object, "text", &at)?),
        // Annotations (url citations), logprobs: kept to go back with the text.
        "output_text" => Part::Text {
            text: string_field(object, "text", &at)?.to_owned(),
            provider_metadata: attributes(object, &["type", "text"]),
        },
        "refusal" => Part::Text {
            text: string_field(object, "refusal", &at)?.to_owned(),
            provider_metadata: Some(json!({"openai": {"refusal": true}})),
        },
        "input_image" => match (
            object.get("image_url").and_then(Value::as_str),
            object.get("file_id").and_then(Value::as_str),
        ) {
            (Some(url), _) => Part::Image {
                source: source_of(url),
                title: None,
                provider_metadata: attributes(object, &["type", "image_url"]),
            },
            (None, Some(id)) => Part::Image {
                source: json!({"type": "file", "file_id": id}),
                title: None,
                provider_metadata: attributes(object, &["type", "file_id"]),
            },
            (None, None) => Part::opaque("openai", item.clone()),
        },
        "input_file" => {
            let title = object
                .get("filename")
                .and_then(Value::as_str)
                .map(str::to_owned);
            match (
                object.get("file_data").and_then(Value::as_str),
                object.get("file_id").and_then(Value::as_str),
            ) {
                (Some(data), _) => Part::Document {
                    source: source_of(data),
                    title,
                    provider_metadata: None,
                },
                (None, Some(id)) => Part::Document {
                    source: json!({"type": "file", "file_id": id}),
                    title,
                    provider_metadata: None,
                },
                (None, None) => Part::opaque("openai", item.clone()),
            }
        }
        // Audio and parts newer than this build: kept verbatim for OpenAI alone.
        _ => Part::opaque("openai", item.clone()),
    })
}

/// A URL or file data as a provider-neutral source: a `data:` URL becomes base64 data with
/// its media type, anything else stays a URL.
fn source_of(url: &str) -> Value {
    if let Some((media_type, data)) = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        return json!({"type": "base64", "media_type": media_type, "data": data});
    }
    json!({"type": "url", "url": url})
}

/// The fields of a content part besides `skip` (`detail`, ...), kept for OpenAI.
fn attributes(object: &Map<String, Value>, skip: &[&str]) -> Option<Value> {
    let rest: Map<String, Value> = object
        .iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!rest.is_empty()).then(|| metadata("openai", "attributes", Value::Object(rest)))
}

/// A reasoning item: the summary as text, everything needed to replay it as metadata.
fn reasoning(object: &Map<String, Value>) -> Part {
    let summary_texts: Vec<&str> = object
        .get("summary")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("text").and_then(Value::as_str))
        .collect();
    let content_texts: Vec<&str> = object
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("text").and_then(Value::as_str))
        .collect();
    let text = if summary_texts.is_empty() {
        content_texts.join("\n\n")
    } else {
        summary_texts.join("\n\n")
    };
    let mut openai = Map::new();
    for key in ["id", "encrypted_content", "summary", "content"] {
        if let Some(value) = object.get(key).filter(|v| !v.is_null()) {
            openai.insert(key.to_owned(), value.clone());
        }
    }
    let provider_metadata = (!openai.is_empty()).then(|| json!({ "openai": openai }));
    Part::Reasoning {
        text,
        provider_metadata,
    }
}

/// The call id of a call or output item (`call_id`, or `id` for a local shell call).
fn call_id<'a>(object: &'a Map<String, Value>, at: &Location) -> Result<&'a str, ImportError> {
    match object.get("call_id").or_else(|| object.get("id")) {
        Some(Value::String(id)) if !id.is_empty() => Ok(id),
        Some(other) if !other.is_string() => Err(ImportError::malformed(
            &at.join("call_id"),
            format!("expected a string, found {}", type_name(other)),
        )),
        _ => Err(ImportError::malformed(at, "missing \"call_id\"")),
    }
}

fn call(
    kind: &str,
    object: &Map<String, Value>,
    at: &Location,
    log: bool,
) -> Result<Part, ImportError> {
    let id = call_id(object, at)?;
    let mut tags = Map::new();
    if kind != "function_call" {
        tags.insert("type".to_owned(), json!(kind));
    }
    if kind != "local_shell_call" {
        if let Some(Value::String(item_id)) = object.get("id") {
            tags.insert("id".to_owned(), json!(item_id));
        }
    }
    let (name, input) = match kind {
        "custom_tool_call" => (
            string_field(object, "name", at)?.to_owned(),
            json!({"input": object.get("input").cloned().unwrap_or(Value::Null)}),
        ),
        "local_shell_call" => (
            "local_shell".to_owned(),
            match object.get("action") {
                Some(Value::Object(action)) => Value::Object(action.clone()),
                other => json!({"action": other.cloned().unwrap_or(Value::Null)}),
            },
        ),
        _ => {
            let name = string_field(object, "name", at)?.to_owned();
            let input = match object.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(Value::String(raw)) if raw.trim().is_empty() => json!({}),
                Some(Value::String(raw)) => match serde_json::from_str::<Value>(raw) {
                    Ok(Value::Object(args)) => Value::Object(args),
                    Ok(other) => {
                        tags.insert("arguments_wrapped".to_owned(), json!(true));
                        json!({ "value": other })
                    }
                    Err(e) if !log => {
                        return Err(ImportError::malformed(
                            &at.join("arguments"),
                            format!("not valid JSON: {e}"),
                        ))
                    }
                    Err(_) => {
                        tags.insert("arguments_raw".to_owned(), json!(true));
                        json!({ "arguments": raw })
                    }
                },
                Some(Value::Object(args)) => Value::Object(args.clone()),
                Some(other) => {
                    return Err(ImportError::malformed(
                        &at.join("arguments"),
                        format!("expected a JSON string, found {}", type_name(other)),
                    ))
                }
            };
            (name, input)
        }
    };
    let mut part = Part::tool_use(id, name, input);
    if !tags.is_empty() {
        tag(&mut part, json!({ "openai": tags }));
    }
    Ok(part)
}

fn output(
    kind: &str,
    object: &Map<String, Value>,
    at: &Location,
    log: bool,
) -> Result<Part, ImportError> {
    let id = call_id(object, at)?;
    let mut tags = Map::new();
    if kind != "function_call_output" {
        tags.insert("type".to_owned(), json!(kind));
    }
    let mut blocks = None;
    let content = match object.get("output") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => {
            let at = at.join("output");
            let parts = items
                .iter()
                .enumerate()
                .map(|(index, item)| content_part(item, &at.join(&format!("[{index}]"))))
                .collect::<Result<Vec<_>, _>>()?;
            // An output with media (a screenshot, Codex's `view_image`) keeps its list as
            // a result's content blocks, which every format renders; a list of texts is
            // kept as it came.
            if result_blocks::holds_media(&parts) {
                blocks = Some(Value::Array(
                    parts.iter().map(result_blocks::to_block).collect(),
                ));
            } else {
                tags.insert("output".to_owned(), Value::Array(items.clone()));
            }
            parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        Some(other) => other.to_string(),
    };
    // A Codex shell output is `{"output": ..., "metadata": {"exit_code": n}}` as a string.
    let is_error = log
        && serde_json::from_str::<Value>(&content)
            .ok()
            .and_then(|v| v.pointer("/metadata/exit_code").and_then(Value::as_i64))
            .is_some_and(|code| code != 0);
    let mut part = Part::ToolResult {
        tool_use_id: id.to_owned(),
        content,
        is_error,
        blocks,
        provider_metadata: None,
    };
    if !tags.is_empty() {
        tag(&mut part, json!({ "openai": tags }));
    }
    Ok(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output list with an image (a screenshot tool, Codex's `view_image`) keeps it as the
    /// result's content blocks; a list of texts is kept as it came, its text the content.
    #[test]
    fn an_output_list_with_an_image_keeps_it_as_the_results_blocks() {
        let png = "data:image/png;base64,iVBORw0KGgo=";
        let body = json!({"input": [
            {"role": "user", "content": "shoot"},
            {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [
                {"type": "input_text", "text": "here"},
                {"type": "input_image", "image_url": png},
                {"type": "input_image", "file_id": "file_1"},
            ]},
            {"type": "function_call_output", "call_id": "c2", "output": [
                {"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"},
            ]},
        ]});
        let imported = import(&body.to_string()).expect("imports");
        let results: Vec<&Part> = imported.messages[2..]
            .iter()
            .flat_map(|m| &m.parts)
            .collect();
        let Part::ToolResult {
            content, blocks, ..
        } = results[0]
        else {
            panic!("{results:?}");
        };
        assert_eq!(content, "here");
        assert_eq!(
            blocks.as_ref(),
            Some(&json!([
                {"type": "text", "text": "here"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
            ]))
        );
        let Part::ToolResult {
            content,
            blocks: None,
            provider_metadata: Some(metadata),
            ..
        } = results[1]
        else {
            panic!("{results:?}");
        };
        assert_eq!(content, "a\nb");
        assert_eq!(metadata["openai"]["output"][1]["text"], "b");
        // A part that is not one at all is refused with its place.
        let broken = json!({"input": [
            {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text"}]},
        ]});
        let refused = import(&broken.to_string()).expect_err("a text part without text");
        assert!(refused.to_string().contains("output"), "{refused}");
    }

    #[test]
    fn items_become_messages_with_reasoning_kept_for_replay() {
        let body = json!({"model": "gpt-5", "instructions": "be brief", "input": [
            {"role": "user", "content": "q"},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": "E"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"a\":1}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        ]});
        let imported = import(&body.to_string()).expect("imports");
        let roles: Vec<Role> = imported.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
        );
        assert_eq!(
            imported.messages[1].parts[0],
            Part::reasoning(
                "think",
                Some(
                    json!({"openai": {"id": "rs_1", "encrypted_content": "E", "summary": [{"type": "summary_text", "text": "think"}]}})
                )
            )
        );
        assert_eq!(imported.messages[1].model.as_deref(), Some("openai/gpt-5"));
        assert!(imported.system.is_some());
    }

    #[test]
    fn an_output_without_its_call_is_refused_at_its_index() {
        let body = json!({"input": [
            {"role": "user", "content": "q"},
            {"type": "function_call_output", "call_id": "zz", "output": "?"},
        ]});
        let err = import(&body.to_string()).expect_err("orphan");
        assert_eq!(err.location().map(|l| l.path.as_str()), Some("input[1]"));
    }
}

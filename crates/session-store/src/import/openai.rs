//! OpenAI Chat Completions request bodies: `{"messages": [...]}`.
//!
//! - `system` and `developer` messages become `system` messages (a developer message's text
//!   parts carry `provider_metadata.openai.role = "developer"`).
//! - `content` is a string, an array of parts, or null/absent. Text parts (and assistant
//!   `refusal` parts) become text; any other part (`image_url`, `input_audio`, `file`) becomes
//!   text describing it, the original part kept under `provider_metadata.openai.part`.
//! - Assistant `tool_calls[].function.arguments` is a JSON string. It is parsed; an empty
//!   string means `{}`; text that is not JSON is refused at its path; JSON that is not an
//!   object (the store keeps inputs as objects) is wrapped as `{"value": ...}` and the part
//!   says so in `provider_metadata.openai.arguments_wrapped = true`.
//! - A tool_call with an empty `id` (Gemini's OpenAI-compatible endpoint sends `id: ''`) gets
//!   the deterministic id `call_{message index}_{call index}`; a `tool` message with an empty
//!   `tool_call_id` answers the first such call of its block that is still unanswered.
//! - `extra_content` on a tool_call (Gemini thought signatures) is kept as that tool_use's
//!   `provider_metadata`; `extra_content` and `thought_signature` on the assistant message
//!   itself are kept under `provider_metadata.openai.message` of its first part.
//! - `reasoning_content` (DeepSeek-style reasoning) becomes a reasoning part before the rest.
//! - The legacy `function_call` field (deprecated, still taken by the API) is a call without
//!   an id (`call_{message index}_{call index}`), and a legacy `function` message answers
//!   it as a `tool` message without an id does; both go out as tool calls and tool messages.
//!
//! The body is held to the pairing rules strictly: what the API would reject is refused.

use serde_json::{json, Map, Value};

use super::json::Top;
use super::stream::Document;
use super::{
    as_object, messages_of, metadata, string_field, tag, type_name, Assembler, ImportError,
    Imported, Leniency, Location, Rest,
};
use crate::model::{NewMessage, Part, Role};

/// Imports an OpenAI Chat Completions request body.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    super::stream::collect::<Body>(text)
}

/// A body being read, one message at a time ([`super::stream`]).
pub(crate) struct Body {
    assembler: Assembler,
    model: Option<String>,
    /// Ids given to calls that came without one, in call order, not yet answered.
    unnamed: Vec<String>,
}

impl Document for Body {
    const STREAM: &'static str = "messages";
    const FIELDS: &'static [&'static str] = &["model"];

    fn begin(top: Top) -> Result<Self, ImportError> {
        messages_of(&top)?;
        Ok(Self {
            assembler: Assembler::new(Leniency::STRICT),
            model: super::model_name("openai", top.fields.get("model")),
            unnamed: Vec::new(),
        })
    }

    fn element(&mut self, index: usize, message: Value) -> Result<(), ImportError> {
        let assembler = &mut self.assembler;
        let at = Location::path(format!("messages[{index}]"));
        let object = as_object(&message, &at, "a message")?;
        let role = string_field(object, "role", &at)?;
        match role {
            "system" | "developer" => {
                let mut parts = content_parts(object, &at, false)?;
                if role == "developer" {
                    for part in &mut parts {
                        tag(part, json!({"openai": {"role": "developer"}}));
                    }
                }
                assembler.push(&at, NewMessage::new(Role::System, non_empty(parts)))?;
            }
            "user" => {
                let parts = content_parts(object, &at, false)?;
                if parts.is_empty() {
                    return Err(ImportError::malformed(&at, "a user message needs content"));
                }
                assembler.push(&at, NewMessage::new(Role::User, parts))?;
            }
            "assistant" => {
                let (parts, named) = assistant_parts(object, index, &at)?;
                self.unnamed = named;
                if parts.is_empty() {
                    return Err(ImportError::malformed(
                        &at,
                        "an assistant message needs content or tool_calls",
                    ));
                }
                let mut message = NewMessage::assistant(parts);
                message.model = self.model.clone();
                message.usage = super::usage::openai(object, &at)?;
                assembler.push(&at, message)?;
            }
            // A legacy `function` message (`name`, `content`, no id) answers the legacy call
            // waiting, as a tool message without an id does.
            "tool" | "function" => self.tool_message(object, &at)?,
            other => {
                return Err(ImportError::malformed(
                    &at.join("role"),
                    format!("expected system, developer, user, assistant or tool, found {other:?}"),
                ))
            }
        }
        Ok(())
    }

    fn assembler(&mut self) -> &mut Assembler {
        &mut self.assembler
    }

    fn finish(self) -> Result<Rest, ImportError> {
        self.assembler.finish_rest(&Location::path("messages"))
    }
}

impl Body {
    /// A `tool` message: its result answers the call its `tool_call_id` names, or (with an
    /// empty id) the first call without an id still waiting; its text parts are the content.
    fn tool_message(
        &mut self,
        object: &Map<String, Value>,
        at: &Location,
    ) -> Result<(), ImportError> {
        let id = match object.get("tool_call_id") {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            None | Some(Value::Null) | Some(Value::String(_)) => {
                if self.unnamed.is_empty() {
                    return Err(ImportError::malformed(
                        &at.join("tool_call_id"),
                        "empty tool_call_id, and no call without an id is waiting for a result",
                    ));
                }
                self.unnamed.remove(0)
            }
            Some(other) => {
                return Err(ImportError::malformed(
                    &at.join("tool_call_id"),
                    format!("expected a string, found {}", type_name(other)),
                ))
            }
        };
        self.unnamed.retain(|waiting| *waiting != id);
        let content = content_parts(object, at, false)?
            .into_iter()
            .map(|part| match part {
                Part::Text { text, .. } => text,
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        self.assembler
            .results(at, vec![Part::tool_result(id, content)], None)?;
        Ok(())
    }
}

/// The `content` of a message as text parts; empty for null or absent content.
fn content_parts(
    object: &Map<String, Value>,
    at: &Location,
    assistant: bool,
) -> Result<Vec<Part>, ImportError> {
    let at = at.join("content");
    match object.get("content") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![Part::text(text.clone())]),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| content_part(item, &at.join(&format!("[{index}]")), assistant))
            .collect(),
        Some(other) => Err(ImportError::malformed(
            &at,
            format!(
                "expected a string, an array of parts or null, found {}",
                type_name(other)
            ),
        )),
    }
}

fn content_part(item: &Value, at: &Location, assistant: bool) -> Result<Part, ImportError> {
    let object = as_object(item, at, "a content part")?;
    let kind = string_field(object, "type", at)?;
    Ok(match kind {
        "text" => Part::text(string_field(object, "text", at)?),
        "refusal" if assistant => Part::Text {
            text: string_field(object, "refusal", at)?.to_owned(),
            provider_metadata: Some(json!({"openai": {"refusal": true}})),
        },
        "image_url" => {
            let image = item.get("image_url");
            let url = image
                .and_then(|i| i.get("url").or(Some(i)))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ImportError::malformed(&at.join("image_url"), "an image_url part needs a url")
                })?;
            let mut rest = image
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            rest.remove("url");
            Part::Image {
                source: source_of(url, None),
                title: None,
                provider_metadata: (!rest.is_empty())
                    .then(|| metadata("openai", "attributes", Value::Object(rest))),
            }
        }
        "file" => {
            let file = item.get("file").and_then(Value::as_object);
            let data = file
                .and_then(|f| f.get("file_data"))
                .and_then(Value::as_str);
            let id = file.and_then(|f| f.get("file_id")).and_then(Value::as_str);
            let title = file
                .and_then(|f| f.get("filename"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            let source = match (data, id) {
                (Some(data), _) => source_of(data, Some("application/pdf")),
                (None, Some(id)) => json!({"type": "file", "file_id": id}),
                (None, None) => return Ok(Part::opaque("openai", item.clone())),
            };
            Part::Document {
                source,
                title,
                provider_metadata: None,
            }
        }
        // Audio and parts newer than this build: kept verbatim for OpenAI alone.
        _ => Part::opaque("openai", item.clone()),
    })
}

/// A URL as a provider-neutral source: a `data:` URL becomes base64 data with its media
/// type, anything else stays a URL. File data given without a `data:` prefix is base64 of
/// `default_type`.
fn source_of(url: &str, default_type: Option<&str>) -> Value {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((media_type, data)) = rest.split_once(";base64,") {
            return json!({"type": "base64", "media_type": media_type, "data": data});
        }
    }
    match default_type {
        Some(media_type) => json!({"type": "base64", "media_type": media_type, "data": url}),
        None => json!({"type": "url", "url": url}),
    }
}

/// An assistant message's parts (reasoning, content, refusal, tool_uses) and the ids given
/// to its calls that had none.
fn assistant_parts(
    object: &Map<String, Value>,
    index: usize,
    at: &Location,
) -> Result<(Vec<Part>, Vec<String>), ImportError> {
    let mut parts = Vec::new();
    match object.get("reasoning_content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => parts.push(Part::reasoning(
            text.clone(),
            Some(json!({"openai": {"field": "reasoning_content"}})),
        )),
        Some(other) => {
            return Err(ImportError::malformed(
                &at.join("reasoning_content"),
                format!("expected a string, found {}", type_name(other)),
            ))
        }
    }
    parts.extend(content_parts(object, at, true)?);
    if let Some(Value::String(refusal)) = object.get("refusal") {
        parts.push(Part::Text {
            text: refusal.clone(),
            provider_metadata: Some(json!({"openai": {"refusal": true}})),
        });
    }
    let mut unnamed = Vec::new();
    match object.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            let at = at.join("tool_calls");
            for (call_index, call) in calls.iter().enumerate() {
                let at = at.join(&format!("[{call_index}]"));
                let (part, was_unnamed) = tool_call(call, index, call_index, &at)?;
                if was_unnamed {
                    unnamed.extend(part.call_id().map(str::to_owned));
                }
                parts.push(part);
            }
        }
        Some(other) => {
            return Err(ImportError::malformed(
                &at.join("tool_calls"),
                format!("expected an array, found {}", type_name(other)),
            ))
        }
    }
    // The legacy `function_call` (`{name, arguments}`, deprecated, still taken): a call
    // without an id, after any tool_calls, which the next `function` message answers.
    if let Some(function) = object.get("function_call").filter(|f| !f.is_null()) {
        let call = json!({"type": "function", "function": function});
        let call_index = parts.iter().filter(|p| p.call_id().is_some()).count();
        let (part, _) = tool_call(&call, index, call_index, &at.join("function_call"))?;
        unnamed.extend(part.call_id().map(str::to_owned));
        parts.push(part);
    }
    let mut extra = Map::new();
    for key in ["extra_content", "thought_signature"] {
        if let Some(value) = object.get(key).filter(|v| !v.is_null()) {
            extra.insert(key.to_owned(), value.clone());
        }
    }
    if !extra.is_empty() {
        if let Some(first) = parts.first_mut() {
            tag(first, metadata("openai", "message", Value::Object(extra)));
        }
    }
    Ok((parts, unnamed))
}

/// One tool_call; the bool says whether it came without an id.
fn tool_call(
    call: &Value,
    message_index: usize,
    call_index: usize,
    at: &Location,
) -> Result<(Part, bool), ImportError> {
    let object = as_object(call, at, "a tool call")?;
    if let Some(kind) = object.get("type").and_then(Value::as_str) {
        if kind != "function" {
            return Err(ImportError::malformed(
                &at.join("type"),
                format!("only function tool calls are supported, found {kind:?}"),
            ));
        }
    }
    let id = match object.get("id") {
        None | Some(Value::Null) => "",
        Some(Value::String(id)) => id.as_str(),
        Some(other) => {
            return Err(ImportError::malformed(
                &at.join("id"),
                format!("expected a string, found {}", type_name(other)),
            ))
        }
    };
    let Some(function) = object.get("function") else {
        return Err(ImportError::malformed(at, "missing \"function\""));
    };
    let fat = at.join("function");
    let function = as_object(function, &fat, "a function")?;
    let name = string_field(function, "name", &fat)?;
    let (input, wrapped) = match function.get("arguments") {
        None | Some(Value::Null) => (json!({}), false),
        Some(Value::String(raw)) if raw.trim().is_empty() => (json!({}), false),
        Some(Value::String(raw)) => match super::json::parse(raw, &fat.join("arguments"), None) {
            Ok(Value::Object(args)) => (Value::Object(args), false),
            Ok(other) => (json!({ "value": other }), true),
            Err(ImportError::Json { source, .. }) => {
                return Err(ImportError::malformed(
                    &fat.join("arguments"),
                    format!("not valid JSON: {source}"),
                ))
            }
            Err(other) => return Err(other),
        },
        // Some clients send the object itself; accept it as what the string would hold.
        Some(Value::Object(args)) => (Value::Object(args.clone()), false),
        Some(other) => {
            return Err(ImportError::malformed(
                &fat.join("arguments"),
                format!("expected a JSON string, found {}", type_name(other)),
            ))
        }
    };
    let unnamed = id.is_empty();
    let id = if unnamed {
        format!("call_{message_index}_{call_index}")
    } else {
        id.to_owned()
    };
    let mut part = Part::tool_use(id, name, input);
    if wrapped {
        tag(&mut part, json!({"openai": {"arguments_wrapped": true}}));
    }
    if let Some(extra) = object.get("extra_content").filter(|v| !v.is_null()) {
        tag(&mut part, extra.clone());
    }
    Ok((part, unnamed))
}

fn non_empty(parts: Vec<Part>) -> Vec<Part> {
    if parts.is_empty() {
        vec![Part::text("")]
    } else {
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::pairing::Refusal;

    fn import_json(body: Value) -> Result<Imported, ImportError> {
        import(&body.to_string())
    }

    /// The legacy `function_call` and `function` role (deprecated, still taken by the API,
    /// written by older agents) were refused; each call is answered by the function message
    /// after it.
    #[test]
    fn legacy_function_calls_are_answered_by_the_function_messages_after_them() {
        let imported = import_json(json!({"messages": [
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"role": "assistant", "content": null,
             "function_call": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"role": "function", "name": "weather", "content": "sunny"},
            {"role": "assistant", "content": "", "function_call": {"name": "weather", "arguments": "{}"}},
            {"role": "function", "name": "weather", "content": "rain"},
            {"role": "assistant", "content": "Sunny in Paris, rain in Rome."},
        ]}))
        .expect("imports");
        let calls: Vec<(&str, &str)> = imported
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::ToolUse { id, name, .. } => Some((id.as_str(), name.as_str())),
                Part::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => Some((tool_use_id.as_str(), content.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            calls,
            [
                ("call_1_0", "weather"),
                ("call_1_0", "sunny"),
                ("call_3_0", "weather"),
                ("call_3_0", "rain")
            ]
        );
        // A function message with no call waiting is refused, as a tool message would be.
        let orphan = import_json(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "function", "name": "weather", "content": "sunny"},
        ]}));
        assert!(orphan.is_err());
    }

    #[test]
    fn tool_calls_become_tool_uses_and_tool_messages_their_results() {
        let imported = import_json(json!({"messages": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "time?"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{\"tz\":\"UTC\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "now", "arguments": ""}},
            ]},
            {"role": "tool", "tool_call_id": "c2", "content": "noon"},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "12:00"}]},
            {"role": "assistant", "content": "It is noon."},
        ]}))
        .expect("imports");
        let roles: Vec<_> = imported.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::Assistant
            ]
        );
        assert_eq!(
            imported.messages[2].parts,
            [
                Part::tool_use("c1", "now", json!({"tz": "UTC"})),
                Part::tool_use("c2", "now", json!({}))
            ]
        );
        assert_eq!(
            imported.messages[4].parts,
            [Part::tool_result("c1", "12:00")]
        );
    }

    #[test]
    fn calls_without_an_id_get_deterministic_ids_and_keep_their_extra_content() {
        let body = json!({"messages": [
            {"role": "user", "content": "time?"},
            {"role": "assistant", "thought_signature": "SIG", "tool_calls": [
                {"id": "", "type": "function", "function": {"name": "now", "arguments": "{}"},
                 "extra_content": {"google": {"thought_signature": "CALLSIG"}}},
            ]},
            {"role": "tool", "tool_call_id": "", "content": "noon"},
        ]});
        let first = import_json(body.clone()).expect("imports");
        let again = import_json(body).expect("imports");
        assert_eq!(first, again, "ids are deterministic");
        assert_eq!(
            first.messages[1].parts,
            [Part::ToolUse {
                id: "call_1_0".into(),
                name: "now".into(),
                input: json!({}),
                provider_metadata: Some(json!({
                    "openai": {"message": {"thought_signature": "SIG"}},
                    "google": {"thought_signature": "CALLSIG"}
                })),
            }]
        );
        assert_eq!(
            first.messages[2].parts,
            [Part::tool_result("call_1_0", "noon")]
        );
    }

    #[test]
    fn arguments_that_are_not_an_object_are_wrapped_and_bad_json_is_refused() {
        let imported = import_json(json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1,2]"}}]},
        ]}))
        .expect("imports");
        assert_eq!(
            imported.messages[1].parts[0],
            Part::ToolUse {
                id: "c".into(),
                name: "f".into(),
                input: json!({"value": [1, 2]}),
                provider_metadata: Some(json!({"openai": {"arguments_wrapped": true}})),
            }
        );
        let err = import_json(json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
        ]}))
        .expect_err("bad JSON");
        assert_eq!(
            err.location().map(|l| l.path.as_str()),
            Some("messages[1].tool_calls[0].function.arguments")
        );
    }

    #[test]
    fn a_tool_message_answering_no_call_is_refused_at_its_index() {
        let err = import_json(json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "hi"},
            {"role": "tool", "tool_call_id": "zzz", "content": "?"},
        ]}))
        .expect_err("orphan");
        assert!(matches!(
            err,
            ImportError::Refused { ref at, reason: Refusal::UnexpectedToolResult { .. } } if at.path == "messages[2]"
        ));
    }
}

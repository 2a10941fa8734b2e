//! Gemini `generateContent` request bodies: `{"systemInstruction"?, "contents": [...]}`.
//!
//! - `systemInstruction` (`{"parts": [{"text"}]}`) becomes the first system message.
//! - A `user` content's `functionResponse` parts become a tool message (in order), the rest
//!   of it a user message after it. A response answers the call with its `id`; without one,
//!   the first unanswered call of the model content before with its name. `response`
//!   `{"output": text}` is stored as the text, `{"error": text}` as an error result; any
//!   other object as its JSON text, the object kept under `provider_metadata.gemini.response`
//!   so it goes back as it came.
//! - A `model` content becomes an assistant message, part for part: text, `functionCall`
//!   as a tool_use (a call without an `id` gets `call_{content}_{part}`, marked
//!   `{"gemini": {"id": false}}` so it goes back without one), `thought: true` text as a
//!   reasoning part (`{"gemini": {"thought": true}}`), and a blank text part carrying a
//!   signature as a reasoning part (`{"gemini": {"text": true}}`; see
//!   [`crate::history::models`]). Every `thoughtSignature` is kept byte for byte under
//!   `provider_metadata.gemini.thoughtSignature` of the part it came on.
//! - `inlineData` and `fileData` parts become images (`image/*`) or documents; other parts
//!   (`executableCode`, ...) are kept verbatim for Gemini alone (opaque).
//! - A body's `model` field, when it has one (the API takes it in the URL), is the model of
//!   its assistant messages (`gemini/{model}`).
//!
//! The body is held to the pairing rules strictly: what the API would reject is refused.

use crate::history::contract::GEMINI_PART_DATA as DATA_KEYS;
use serde_json::{json, Map, Value};

use super::json::Top;
use super::responses::set_model;
use super::stream::Document;
use super::{
    as_object, string_field, type_name, Assembler, ImportError, Imported, Leniency, Location, Rest,
};
use crate::history::blank::is_blank;
use crate::history::models::{GEMINI, THOUGHT_SIGNATURE};
use crate::model::{NewMessage, Part, Role};

/// Imports a Gemini `generateContent` request body.
pub fn import(text: &str) -> Result<Imported, ImportError> {
    super::stream::collect::<Body>(text)
}

/// A body being read, one content at a time ([`super::stream`]).
pub(crate) struct Body {
    assembler: Assembler,
    model: Option<String>,
    /// Calls of the last model content: (id, name, answered).
    calls: Vec<(String, String, bool)>,
}

impl Document for Body {
    const STREAM: &'static str = "contents";
    const FIELDS: &'static [&'static str] = &["systemInstruction", "system_instruction", "model"];

    fn begin(top: Top) -> Result<Self, ImportError> {
        let root = Location::default();
        if let Some(kind) = top.not_an_object {
            return Err(ImportError::malformed(
                &root,
                format!("expected a generateContent request body (an object), found {kind}"),
            ));
        }
        let object = &top.fields;
        let system = match object
            .get("systemInstruction")
            .or_else(|| object.get("system_instruction"))
        {
            None | Some(Value::Null) => None,
            Some(instruction) => {
                let at = Location::path("systemInstruction");
                let parts = parts_of(instruction, &at)?;
                let texts = parts
                    .iter()
                    .enumerate()
                    .map(|(index, part)| {
                        let at = at.join(&format!("parts[{index}]"));
                        string_field(as_object(part, &at, "a part")?, "text", &at).map(Part::text)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (!texts.is_empty()).then(|| NewMessage::new(Role::System, texts))
            }
        };
        let model = match object.get("model") {
            Some(Value::String(model)) if !model.is_empty() => Some(format!(
                "gemini/{}",
                model.strip_prefix("models/").unwrap_or(model)
            )),
            _ => None,
        };
        match &top.stream {
            Some(Value::Array(_)) => {}
            Some(other) => {
                return Err(ImportError::malformed(
                    &Location::path("contents"),
                    format!("expected an array, found {}", type_name(other)),
                ))
            }
            None => return Err(ImportError::malformed(&root, "no \"contents\" array")),
        };
        let mut assembler = Assembler::new(Leniency::STRICT);
        assembler.set_system(system);
        Ok(Self {
            assembler,
            model,
            calls: Vec::new(),
        })
    }

    fn element(&mut self, index: usize, content: Value) -> Result<(), ImportError> {
        let assembler = &mut self.assembler;
        let at = Location::path(format!("contents[{index}]"));
        let object = as_object(&content, &at, "a content")?;
        let role = object.get("role").and_then(Value::as_str).unwrap_or("user");
        let parts = parts_of(&content, &at)?;
        match role {
            "user" => {
                let (mut results, mut rest) = (Vec::new(), Vec::new());
                for (position, part) in parts.iter().enumerate() {
                    let at = at.join(&format!("parts[{position}]"));
                    let object = as_object(part, &at, "a part")?;
                    one_data_field(object, &at)?;
                    match object.get("functionResponse") {
                        Some(response) => {
                            results.push(function_response(response, &at, &mut self.calls)?)
                        }
                        None => rest.push(user_part(object, part, &at)?),
                    }
                }
                if !results.is_empty() {
                    assembler.results(&at, results, None)?;
                }
                if !rest.is_empty() {
                    assembler.push(&at, NewMessage::new(Role::User, rest))?;
                }
            }
            "model" => {
                self.calls.clear();
                let mut out = Vec::with_capacity(parts.len());
                for (position, part) in parts.iter().enumerate() {
                    let at = at.join(&format!("parts[{position}]"));
                    let object = as_object(part, &at, "a part")?;
                    one_data_field(object, &at)?;
                    if object.contains_key("functionResponse") {
                        // Found by the import fuzz target: kept, it went back to Gemini in a
                        // model content, which Gemini refuses.
                        return Err(ImportError::malformed(
                            &at.join("functionResponse"),
                            "a functionResponse belongs in a user content, not a model content",
                        ));
                    }
                    out.push(model_part(
                        object,
                        part,
                        index,
                        position,
                        &at,
                        &mut self.calls,
                    )?);
                }
                let mut message = NewMessage::assistant(out);
                set_model(&mut message, self.model.as_deref());
                assembler.push(&at, message)?;
            }
            other => {
                return Err(ImportError::malformed(
                    &at.join("role"),
                    format!("expected \"user\" or \"model\", found {other:?}"),
                ))
            }
        }
        Ok(())
    }

    fn assembler(&mut self) -> &mut Assembler {
        &mut self.assembler
    }

    fn finish(self) -> Result<Rest, ImportError> {
        self.assembler.finish_rest(&Location::path("contents"))
    }
}

fn parts_of<'a>(content: &'a Value, at: &Location) -> Result<&'a Vec<Value>, ImportError> {
    match content.get("parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => Ok(parts),
        Some(Value::Array(_)) => Err(ImportError::malformed(at, "a content needs parts")),
        Some(other) => Err(ImportError::malformed(
            &at.join("parts"),
            format!("expected an array, found {}", type_name(other)),
        )),
        None => Err(ImportError::malformed(at, "missing \"parts\"")),
    }
}

/// `{"gemini": {...}}` with the part's signature (if any) and `extra`.
fn gemini_meta(object: &Map<String, Value>, extra: &[(&str, Value)]) -> Option<Value> {
    let mut gemini = Map::new();
    for (key, value) in extra {
        gemini.insert((*key).to_owned(), value.clone());
    }
    if let Some(signature) = object.get(THOUGHT_SIGNATURE).filter(|s| !s.is_null()) {
        gemini.insert(THOUGHT_SIGNATURE.to_owned(), signature.clone());
    }
    (!gemini.is_empty()).then(|| json!({ GEMINI: gemini }))
}

/// A part that is not text or a call: inline data or a file as an image (an `image/*` type)
/// or a document; anything else kept verbatim for Gemini alone (opaque).
fn described(object: &Map<String, Value>, part: &Value) -> Part {
    let media = |media_type: &str, source: Value| {
        if media_type.starts_with("image/") {
            Part::Image {
                source,
                title: None,
                provider_metadata: None,
            }
        } else {
            Part::Document {
                source,
                title: None,
                provider_metadata: None,
            }
        }
    };
    let field = |value: Option<&Value>, key: &str| {
        value
            .and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if object.len() == 1 {
        let inline = object.get("inlineData");
        if let (Some(mime), Some(data)) = (field(inline, "mimeType"), field(inline, "data")) {
            return media(
                &mime,
                json!({"type": "base64", "media_type": mime, "data": data}),
            );
        }
        let file = object.get("fileData");
        if let (Some(mime), Some(uri)) = (field(file, "mimeType"), field(file, "fileUri")) {
            return media(
                &mime,
                json!({"type": "url", "url": uri, "media_type": mime}),
            );
        }
    }
    Part::opaque(GEMINI, part.clone())
}

/// Refuses a part that Gemini itself would refuse: one with none, or more than one, of the
/// data fields (`text`, `inlineData`, `functionCall`, ...). Kept, it would be sent back
/// verbatim and break the request (found by the import fuzz target).
fn one_data_field(object: &Map<String, Value>, at: &Location) -> Result<(), ImportError> {
    let found: Vec<&str> = DATA_KEYS
        .iter()
        .copied()
        .filter(|key| object.contains_key(*key))
        .collect();
    if found.len() == 1 {
        return Ok(());
    }
    Err(ImportError::malformed(
        at,
        format!(
            "a part holds exactly one of {} (found {})",
            DATA_KEYS.join(", "),
            if found.is_empty() {
                "none".to_owned()
            } else {
                found.join(", ")
            }
        ),
    ))
}

fn user_part(
    object: &Map<String, Value>,
    part: &Value,
    at: &Location,
) -> Result<Part, ImportError> {
    match object.get("text") {
        Some(Value::String(text)) => Ok(Part::text(text.clone())),
        Some(other) => Err(ImportError::malformed(
            &at.join("text"),
            format!("expected a string, found {}", type_name(other)),
        )),
        None => Ok(described(object, part)),
    }
}

fn model_part(
    object: &Map<String, Value>,
    part: &Value,
    content: usize,
    position: usize,
    at: &Location,
    calls: &mut Vec<(String, String, bool)>,
) -> Result<Part, ImportError> {
    if let Some(call) = object.get("functionCall") {
        let at = at.join("functionCall");
        let call = as_object(call, &at, "a function call")?;
        let name = string_field(call, "name", &at)?;
        let input = match call.get("args") {
            None | Some(Value::Null) => json!({}),
            Some(Value::Object(args)) => Value::Object(args.clone()),
            Some(other) => json!({ "value": other }),
        };
        let (id, extra) = match call.get("id") {
            Some(Value::String(id)) if !id.is_empty() => (id.clone(), Vec::new()),
            _ => (
                format!("call_{content}_{position}"),
                vec![("id", json!(false))],
            ),
        };
        calls.push((id.clone(), name.to_owned(), false));
        return Ok(Part::ToolUse {
            id,
            name: name.to_owned(),
            input,
            provider_metadata: gemini_meta(object, &extra),
        });
    }
    let Some(text) = object.get("text") else {
        return Ok(described(object, part));
    };
    let Some(text) = text.as_str() else {
        return Err(ImportError::malformed(
            &at.join("text"),
            format!("expected a string, found {}", type_name(text)),
        ));
    };
    let thought = object.get("thought").and_then(Value::as_bool) == Some(true);
    let signed = object.get(THOUGHT_SIGNATURE).is_some_and(|s| !s.is_null());
    Ok(if thought {
        Part::Reasoning {
            text: text.to_owned(),
            provider_metadata: gemini_meta(object, &[("thought", json!(true))]),
        }
    } else if signed && is_blank(text) {
        // The loader drops blank text; a signature that came on one is kept as thinking.
        Part::Reasoning {
            text: text.to_owned(),
            provider_metadata: gemini_meta(object, &[("text", json!(true))]),
        }
    } else {
        Part::Text {
            text: text.to_owned(),
            provider_metadata: gemini_meta(object, &[]),
        }
    })
}

fn function_response(
    response: &Value,
    at: &Location,
    calls: &mut [(String, String, bool)],
) -> Result<Part, ImportError> {
    let at = at.join("functionResponse");
    let object = as_object(response, &at, "a function response")?;
    let name = string_field(object, "name", &at)?;
    // By its id; without one, the first unanswered call with its name.
    let id = match object.get("id") {
        Some(Value::String(id)) if !id.is_empty() => {
            if let Some(call) = calls.iter_mut().find(|(call, _, _)| call == id) {
                call.2 = true;
            }
            id.clone()
        }
        _ => match calls
            .iter_mut()
            .find(|(_, call_name, answered)| !*answered && call_name == name)
        {
            Some((id, _, answered)) => {
                *answered = true;
                id.clone()
            }
            // Let the pairing check name the rule.
            None => format!("{name}_unanswered"),
        },
    };
    let body = object.get("response").unwrap_or(&Value::Null);
    let simple = body.as_object().filter(|o| o.len() == 1).and_then(|o| {
        let (key, value) = o.iter().next()?;
        Some((key.as_str(), value.as_str()?))
    });
    Ok(match simple {
        Some(("output", text)) => Part::tool_result(id, text),
        Some(("error", text)) => Part::tool_error(id, text),
        _ => Part::ToolResult {
            tool_use_id: id,
            content: body.to_string(),
            is_error: false,
            blocks: None,
            provider_metadata: body
                .is_object()
                .then(|| json!({ GEMINI: {"response": body} })),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_stay_on_their_parts_and_responses_find_their_calls() {
        let body = json!({"systemInstruction": {"parts": [{"text": "s"}]}, "contents": [
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [
                {"text": "think", "thought": true},
                {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "SIG"},
                {"functionCall": {"name": "f", "args": {"a": 2}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "f", "response": {"output": "1"}}},
                {"functionResponse": {"name": "f", "response": {"result": {"n": 2}}}},
            ]},
            {"role": "model", "parts": [{"text": "done"}, {"text": "", "thoughtSignature": "T"}]},
        ]});
        let imported = import(&body.to_string()).expect("imports");
        let assistant = &imported.messages[1].parts;
        assert_eq!(
            assistant[1],
            Part::ToolUse {
                id: "call_1_1".into(),
                name: "f".into(),
                input: json!({"a": 1}),
                provider_metadata: Some(
                    json!({"gemini": {"id": false, "thoughtSignature": "SIG"}})
                ),
            }
        );
        assert_eq!(
            imported.messages[2].parts[0],
            Part::tool_result("call_1_1", "1")
        );
        assert_eq!(imported.messages[2].parts[1].answers(), Some("call_1_2"));
        assert_eq!(
            imported.messages[3].parts[1],
            Part::Reasoning {
                text: String::new(),
                provider_metadata: Some(json!({"gemini": {"text": true, "thoughtSignature": "T"}})),
            }
        );
    }

    #[test]
    fn a_call_left_unanswered_is_refused() {
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "a", "name": "f"}}]},
            {"role": "user", "parts": [{"text": "never mind"}]},
        ]});
        assert!(matches!(
            import(&body.to_string()),
            Err(ImportError::Refused { .. })
        ));
    }
}

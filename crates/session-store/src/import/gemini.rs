//! Gemini `generateContent` request bodies: `{"systemInstruction"?, "contents": [...]}`.
//!
//! - `systemInstruction` (`{"parts": [{"text"}]}`) becomes the first system message.
//! - A `user` content's `functionResponse` parts become a tool message (in order), the rest
//!   of it a user message after it. A response answers the call with its `id`; without one,
//!   the first unanswered call of the model content before with its name. `response`
//!   `{"output": text}` is stored as the text, `{"error": text}` as an error result; any
//!   other object as its JSON text, the object kept under `provider_metadata.gemini.response`
//!   so it goes back as it came. The images and files of a multimodal response (`parts`,
//!   Gemini 3) are kept as the result's content blocks after its text, which the other
//!   formats render; Gemini is sent the response without them.
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
//! - Every field is read under its JSON name (`functionCall`, `inlineData`, `mimeType`,
//!   `thoughtSignature`, ...) or its proto name (`function_call`, `inline_data`, `mime_type`,
//!   `thought_signature`, ...): the REST API takes both, and clients send either (llm-gemini
//!   sends `function_call` beside `thoughtSignature`). One field spelled both ways in one
//!   object is refused: the two values would have to be one. What is stored is spelled the
//!   JSON way (a part kept verbatim too, at its top level), as the renderer writes it, and a
//!   refusal's path names a field by its JSON name.
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
use crate::history::result_blocks;
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
        let system = match field(object, "systemInstruction", &root)? {
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
                    match field(object, "functionResponse", &at)? {
                        Some(response) => {
                            results.push(function_response(response, &at, &mut self.calls)?)
                        }
                        None => rest.push(user_part(object, &at)?),
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
                    if field(object, "functionResponse", &at)?.is_some() {
                        // Found by the import fuzz target: kept, it went back to Gemini in a
                        // model content, which Gemini refuses.
                        return Err(ImportError::malformed(
                            &at.join("functionResponse"),
                            "a functionResponse belongs in a user content, not a model content",
                        ));
                    }
                    out.push(model_part(object, index, position, &at, &mut self.calls)?);
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

/// The proto name (`snake_case`) of the field whose JSON name (`lowerCamelCase`) is `name`:
/// `functionCall` is `function_call`; a one-word name is the same in both.
fn proto_name(name: &str) -> String {
    let mut proto = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            proto.push('_');
            proto.push(c.to_ascii_lowercase());
        } else {
            proto.push(c);
        }
    }
    proto
}

/// The JSON name of a key spelled either way: `function_call` is `functionCall`.
fn json_name(key: &str) -> String {
    let mut name = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        match c {
            // A leading or doubled `_` is no word break: kept.
            '_' if !name.is_empty() && !upper => upper = true,
            c if upper => {
                name.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => name.push(c),
        }
    }
    if upper {
        name.push('_');
    }
    name
}

/// The field `name` (its JSON name) of a Gemini object, spelled either way: the one reader of
/// a key in this module (see the module docs). Both spellings in one object are refused,
/// naming them.
fn field<'a>(
    object: &'a Map<String, Value>,
    name: &str,
    at: &Location,
) -> Result<Option<&'a Value>, ImportError> {
    let proto = proto_name(name);
    let json = object.get(name);
    if proto == name {
        return Ok(json);
    }
    match (json, object.get(&proto)) {
        (Some(_), Some(_)) => Err(ImportError::malformed(
            at,
            format!("both `{name}` and `{proto}`: one field spelled two ways"),
        )),
        (json, proto) => Ok(json.or(proto)),
    }
}

/// `part` with its top-level keys spelled the JSON way (for a part kept verbatim: the renderer
/// and the contract check know a part by its JSON names). A key spelled both ways is refused
/// by [`field`] before a part gets here.
fn json_spelled(part: &Map<String, Value>) -> Value {
    Value::Object(
        part.iter()
            .map(|(key, value)| (json_name(key), value.clone()))
            .collect(),
    )
}

/// `{"gemini": {...}}` with the part's signature (if any) and `extra`.
fn gemini_meta(
    object: &Map<String, Value>,
    extra: &[(&str, Value)],
    at: &Location,
) -> Result<Option<Value>, ImportError> {
    let mut gemini = Map::new();
    for (key, value) in extra {
        gemini.insert((*key).to_owned(), value.clone());
    }
    if let Some(signature) = field(object, THOUGHT_SIGNATURE, at)?.filter(|s| !s.is_null()) {
        gemini.insert(THOUGHT_SIGNATURE.to_owned(), signature.clone());
    }
    Ok((!gemini.is_empty()).then(|| json!({ GEMINI: gemini })))
}

/// A part that is not text or a call: inline data or a file as an image (an `image/*` type)
/// or a document; anything else kept verbatim for Gemini alone (opaque).
fn described(object: &Map<String, Value>, at: &Location) -> Result<Part, ImportError> {
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
    let text = |value: Option<&Value>, key: &str| -> Result<Option<String>, ImportError> {
        let Some(Value::Object(value)) = value else {
            return Ok(None);
        };
        Ok(field(value, key, at)?
            .and_then(Value::as_str)
            .map(str::to_owned))
    };
    if object.len() == 1 {
        let inline = field(object, "inlineData", at)?;
        if let (Some(mime), Some(data)) = (text(inline, "mimeType")?, text(inline, "data")?) {
            return Ok(media(
                &mime,
                json!({"type": "base64", "media_type": mime, "data": data}),
            ));
        }
        let file = field(object, "fileData", at)?;
        if let (Some(mime), Some(uri)) = (text(file, "mimeType")?, text(file, "fileUri")?) {
            return Ok(media(
                &mime,
                json!({"type": "url", "url": uri, "media_type": mime}),
            ));
        }
    }
    Ok(Part::opaque(GEMINI, json_spelled(object)))
}

/// Refuses a part that Gemini itself would refuse: one with none, or more than one, of the
/// data fields (`text`, `inlineData`, `functionCall`, ...). Kept, it would be sent back
/// verbatim and break the request (found by the import fuzz target).
fn one_data_field(object: &Map<String, Value>, at: &Location) -> Result<(), ImportError> {
    let mut found: Vec<&str> = Vec::new();
    for key in DATA_KEYS {
        if field(object, key, at)?.is_some() {
            found.push(key);
        }
    }
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

fn user_part(object: &Map<String, Value>, at: &Location) -> Result<Part, ImportError> {
    match object.get("text") {
        Some(Value::String(text)) => Ok(Part::text(text.clone())),
        Some(other) => Err(ImportError::malformed(
            &at.join("text"),
            format!("expected a string, found {}", type_name(other)),
        )),
        None => described(object, at),
    }
}

fn model_part(
    object: &Map<String, Value>,
    content: usize,
    position: usize,
    at: &Location,
    calls: &mut Vec<(String, String, bool)>,
) -> Result<Part, ImportError> {
    if let Some(call) = field(object, "functionCall", at)? {
        let call_at = at.join("functionCall");
        let call = as_object(call, &call_at, "a function call")?;
        let name = string_field(call, "name", &call_at)?;
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
            provider_metadata: gemini_meta(object, &extra, at)?,
        });
    }
    let Some(text) = object.get("text") else {
        return described(object, at);
    };
    let Some(text) = text.as_str() else {
        return Err(ImportError::malformed(
            &at.join("text"),
            format!("expected a string, found {}", type_name(text)),
        ));
    };
    let thought = object.get("thought").and_then(Value::as_bool) == Some(true);
    let signed = field(object, THOUGHT_SIGNATURE, at)?.is_some_and(|s| !s.is_null());
    Ok(if thought {
        Part::Reasoning {
            text: text.to_owned(),
            provider_metadata: gemini_meta(object, &[("thought", json!(true))], at)?,
        }
    } else if signed && is_blank(text) {
        // The loader drops blank text; a signature that came on one is kept as thinking.
        Part::Reasoning {
            text: text.to_owned(),
            provider_metadata: gemini_meta(object, &[("text", json!(true))], at)?,
        }
    } else {
        Part::Text {
            text: text.to_owned(),
            provider_metadata: gemini_meta(object, &[], at)?,
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
    let mut result = match simple {
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
    };
    // A multimodal response (Gemini 3) carries its images and files in `parts`: kept as the
    // result's content blocks after its text, so other formats get them.
    let media = response_media(object, &at)?;
    if let (
        Part::ToolResult {
            content, blocks, ..
        },
        false,
    ) = (&mut result, media.is_empty())
    {
        let text = (!content.is_empty()).then(|| Part::text(content.as_str()));
        let parts = text.iter().chain(&media);
        *blocks = Some(Value::Array(parts.map(result_blocks::to_block).collect()));
    }
    Ok(result)
}

/// The images and documents among a function response's `parts`.
fn response_media(object: &Map<String, Value>, at: &Location) -> Result<Vec<Part>, ImportError> {
    let Some(parts) = field(object, "parts", at)? else {
        return Ok(Vec::new());
    };
    let at = at.join("parts");
    let Value::Array(parts) = parts else {
        return Err(ImportError::malformed(&at, "expected an array of parts"));
    };
    let mut media = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let at = at.join(&format!("[{index}]"));
        let part = described(as_object(part, &at, "a part")?, &at)?;
        if result_blocks::is_media(&part) {
            media.push(part);
        }
    }
    Ok(media)
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

    /// A multimodal function response (Gemini 3) keeps its images as the result's content
    /// blocks after its text, whichever way its fields are spelled.
    #[test]
    fn a_function_responses_images_are_kept_as_the_results_blocks() {
        for (parts, inline, mime) in [
            ("parts", "inlineData", "mimeType"),
            ("parts", "inline_data", "mime_type"),
        ] {
            let body = json!({"contents": [
                {"role": "user", "parts": [{"text": "shoot"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "shot", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "shot",
                    "response": {"output": "here"},
                    parts: [{inline: {mime: "image/png", "data": "iVBORw0KGgo="}}]}}]},
                {"role": "model", "parts": [{"text": "a pixel"}]},
            ]});
            let imported = import(&body.to_string()).expect("imports");
            let Part::ToolResult {
                content, blocks, ..
            } = &imported.messages[2].parts[0]
            else {
                panic!("{:?}", imported.messages[2]);
            };
            assert_eq!(content, "here");
            assert_eq!(
                blocks.as_ref(),
                Some(&json!([
                    {"type": "text", "text": "here"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                ]))
            );
        }
        let refused = json!({"contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "shot", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "shot", "response": {}, "parts": "png"}}]},
        ]});
        assert!(import(&refused.to_string()).is_err());
    }

    /// Every field the importer reads is taken under its proto name too, into the messages
    /// the JSON names give; a part kept verbatim is stored spelled the JSON way.
    #[test]
    fn proto_names_read_as_json_names() {
        let spelled = |snake: bool| {
            let k = |camel: &str| {
                if snake {
                    proto_name(camel)
                } else {
                    camel.to_owned()
                }
            };
            let mut inline = Map::new();
            inline.insert(k("mimeType"), json!("image/png"));
            inline.insert("data".into(), json!("iVBORw0KGgo="));
            let mut file = Map::new();
            file.insert(k("mimeType"), json!("application/pdf"));
            file.insert(k("fileUri"), json!("gs://b/f.pdf"));
            let part = |key: &str, value: Value| {
                let mut part = Map::new();
                part.insert(k(key), value);
                Value::Object(part)
            };
            let mut signed = match part(
                "functionCall",
                json!({"name": "f", "args": {"snake_arg": 1}, "id": "c"}),
            ) {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            signed.insert(k("thoughtSignature"), json!("SIG"));
            let mut body = Map::new();
            body.insert(k("systemInstruction"), json!({"parts": [{"text": "s"}]}));
            body.insert(
                "contents".into(),
                json!([
                    {"role": "user", "parts": [{"text": "q"}, part("inlineData", Value::Object(inline)), part("fileData", Value::Object(file))]},
                    {"role": "model", "parts": [
                        part("executableCode", json!({"language": "PYTHON", "code": "print(1)"})),
                        part("codeExecutionResult", json!({"outcome": "OUTCOME_OK", "output": "1"})),
                        Value::Object(signed),
                    ]},
                    {"role": "user", "parts": [part("functionResponse", json!({"name": "f", "id": "c", "response": {"output": "ok"}}))]},
                ]),
            );
            Value::Object(body).to_string()
        };
        let snake = spelled(true);
        assert!(snake.contains("\"system_instruction\"") && snake.contains("\"file_uri\""));
        let from_snake = import(&snake).expect("proto names import");
        let from_camel = import(&spelled(false)).expect("JSON names import");
        assert_eq!(from_snake.messages, from_camel.messages);
        assert_eq!(from_snake.system, from_camel.system);
        assert!(from_snake.system.is_some());
        let user = &from_snake.messages[0].parts;
        assert!(matches!(user[1], Part::Image { .. }), "{user:?}");
        assert!(matches!(user[2], Part::Document { .. }), "{user:?}");
        let model = &from_snake.messages[1].parts;
        assert_eq!(
            model[0],
            Part::opaque(
                GEMINI,
                json!({"executableCode": {"language": "PYTHON", "code": "print(1)"}})
            )
        );
        assert_eq!(
            model[2],
            Part::ToolUse {
                id: "c".into(),
                name: "f".into(),
                input: json!({"snake_arg": 1}),
                provider_metadata: Some(json!({"gemini": {"thoughtSignature": "SIG"}})),
            }
        );
        assert_eq!(from_snake.messages[2].parts, [Part::tool_result("c", "ok")]);
    }

    /// One field spelled both ways in one object is refused (the API would have two values
    /// for one field), naming both; two different data fields stay refused whatever their
    /// spelling.
    #[test]
    fn a_field_spelled_both_ways_or_two_data_fields_are_refused() {
        let refused = |part: Value, expected: &str| {
            let body = json!({"contents": [
                {"role": "user", "parts": [{"text": "q"}]},
                {"role": "model", "parts": [part]},
            ]});
            match import(&body.to_string()) {
                Err(ImportError::Malformed { at, problem }) => {
                    assert_eq!(at.path, "contents[1].parts[0]", "{problem}");
                    assert!(problem.contains(expected), "{problem}");
                }
                other => panic!("{other:?}"),
            }
        };
        let call = json!({"name": "f"});
        refused(
            json!({"functionCall": call, "function_call": call}),
            "both `functionCall` and `function_call`",
        );
        refused(
            json!({"function_call": call, "thoughtSignature": "A", "thought_signature": "B"}),
            "both `thoughtSignature` and `thought_signature`",
        );
        refused(
            json!({"function_call": call, "text": "t"}),
            "(found text, functionCall)",
        );
        refused(
            json!({"inline_data": {"mime_type": "image/png", "data": "x"}, "file_data": {"mime_type": "image/png", "file_uri": "u"}}),
            "(found inlineData, fileData)",
        );
        let body = json!({"systemInstruction": {"parts": [{"text": "a"}]}, "system_instruction": {"parts": [{"text": "b"}]}, "contents": [{"role": "user", "parts": [{"text": "q"}]}]});
        assert!(matches!(
            import(&body.to_string()),
            Err(ImportError::Malformed { .. })
        ));
    }

    #[test]
    fn each_json_name_has_one_proto_name_and_back() {
        for (json_name_, proto) in [
            ("functionCall", "function_call"),
            ("thoughtSignature", "thought_signature"),
            ("codeExecutionResult", "code_execution_result"),
            ("text", "text"),
        ] {
            assert_eq!(proto_name(json_name_), proto);
            assert_eq!(json_name(proto), json_name_);
            assert_eq!(json_name(json_name_), json_name_);
        }
        assert_eq!(json_name("_x"), "_x");
        assert_eq!(json_name("x_"), "x_");
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

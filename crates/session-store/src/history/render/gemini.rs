//! The Gemini `generateContent` body: `{"systemInstruction"?, "contents": [...]}`
//! (PROVIDER_RULES 15).
//!
//! - `systemInstruction` is `{"parts": [{"text"}]}`: the text of every system message, joined
//!   with a blank line, in order (as Anthropic's top-level `system`); left out when there is
//!   none.
//! - `contents` alternate `user` and `model`: consecutive messages of one role are joined
//!   into one content (a tool block and the user message after it become one `user` content,
//!   function responses first). When the view starts with an assistant message, a user
//!   content holding [`crate::history::texts::PLACEHOLDER_USER`] is put first.
//! - An assistant message is a `model` content, parts in order: text as `{"text"}`, a
//!   tool_use as `{"functionCall": {"id"?, "name", "args"}}`, Gemini reasoning as what it was
//!   (`{"text", "thought": true}` for a thought summary, `{"text": ""}` for a signature that
//!   came on an empty text part); each part with the `thoughtSignature` it came with, byte for
//!   byte. Reasoning of other providers and redacted reasoning are left out.
//! - Gemini 3 requires a signature on the first function call of each step; a call another
//!   model made has none, and gets [`FOREIGN_THOUGHT_SIGNATURE`], the value Google documents
//!   for history Gemini did not write.
//! - Each tool_result is a `{"functionResponse": {"id"?, "name", "response"}}` in the next
//!   `user` content, named after its call; `response` is `{"output": content}` (`{"error":
//!   content}` for a failure), or the object a Gemini body carried, when it was imported.
//! - Images and documents with inline data go as `inlineData`, with a URL and a media type as
//!   `fileData`, others (and server tool
//!   parts of another provider) as text saying what they were; a provider block the store
//!   kept verbatim goes back only when Gemini made it, as it came when it is a part Gemini
//!   takes there (one data field, not text or a function call or response), else as text
//!   saying what it was.
//! - A call id is sent unless the call came from a Gemini body without one
//!   (`{"gemini": {"id": false}}`); its response then goes without one too.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use crate::history::blank::is_blank;
use crate::history::contract::GEMINI_PART_DATA;
use crate::history::media::gemini_image_type;
use crate::history::models::{
    gemini_signature, meta_flag, FOREIGN_THOUGHT_SIGNATURE, GEMINI, THOUGHT_SIGNATURE,
};
use crate::history::provider::Provider;
use crate::history::render::anthropic::join_text;
use crate::history::sanitize::View;
use crate::history::texts::{describe, PLACEHOLDER_USER};
use crate::model::{Part, Role};

/// Renders `view` as a Gemini `generateContent` request body.
pub fn render(view: &View) -> Value {
    let mut system = Vec::new();
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    // Call name by view id, and the calls sent without an id.
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut without_id: HashSet<&str> = HashSet::new();
    for message in &view.messages {
        let (role, parts) = match message.role {
            Role::System => {
                let text = join_text(&message.parts);
                if !is_blank(&text) {
                    system.push(text);
                }
                continue;
            }
            Role::User => (
                "user",
                message
                    .parts
                    .iter()
                    .filter_map(|part| match part {
                        Part::Text { text, .. } if !is_blank(text) => Some(json!({"text": text})),
                        Part::Image { .. } | Part::Document { .. } | Part::Opaque { .. } => {
                            media(part, false)
                        }
                        _ => None,
                    })
                    .collect(),
            ),
            Role::Assistant => {
                for part in &message.parts {
                    if let Part::ToolUse {
                        id,
                        name,
                        provider_metadata,
                        ..
                    } = part
                    {
                        names.insert(id, name);
                        if has_no_id(provider_metadata.as_ref()) {
                            without_id.insert(id);
                        }
                    }
                }
                ("model", model_parts(&message.parts))
            }
            Role::Tool => (
                "user",
                message
                    .parts
                    .iter()
                    .filter_map(|part| function_response(part, &names, &without_id))
                    .collect(),
            ),
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    if contents.first().is_some_and(|(role, _)| *role == "model") {
        contents.insert(0, ("user", vec![json!({"text": PLACEHOLDER_USER})]));
    }
    let mut body = Map::new();
    if !system.is_empty() {
        body.insert(
            "systemInstruction".to_owned(),
            json!({"parts": [{"text": system.join("\n\n")}]}),
        );
    }
    let contents = contents
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    body.insert("contents".to_owned(), Value::Array(contents));
    Value::Object(body)
}

/// An image or document: inline data when the source carries it (`inlineData`), else text
/// saying what it was; a provider block only when Gemini made it, verbatim when it is a part
/// Gemini takes in that content ([`verbatim`]), else as text saying what it was.
fn media(part: &Part, model: bool) -> Option<Value> {
    match part {
        Part::Image { source, .. } | Part::Document { source, .. } => {
            let field = |key| source.get(key).and_then(Value::as_str);
            if let (Part::Image { .. }, Some("base64")) = (part, field("type")) {
                // An image goes under the type its bytes are, when Gemini takes it.
                let mime = field("data").and_then(gemini_image_type);
                return Some(match mime {
                    Some(mime) => json!({"inlineData": {"mimeType": mime, "data": field("data")}}),
                    None => json!({"text": describe(part)}),
                });
            }
            match (field("type"), field("media_type")) {
                (Some("base64"), Some(mime)) if field("data").is_some() => {
                    Some(json!({"inlineData": {"mimeType": mime, "data": field("data")}}))
                }
                (Some("url"), Some(mime)) if field("url").is_some() => {
                    Some(json!({"fileData": {"mimeType": mime, "fileUri": field("url")}}))
                }
                _ => Some(json!({"text": describe(part)})),
            }
        }
        Part::Opaque { block, .. } if part.opaque_provider() == Some(GEMINI) => {
            if verbatim(block, model) {
                Some(block.clone())
            } else {
                Some(json!({"text": describe(part)}))
            }
        }
        _ => None,
    }
}

/// True when a block kept verbatim can go back as a part of a `user` (or `model`) content:
/// exactly one data field, and not one this renderer writes from typed parts (text, a
/// function call or response: a verbatim one would escape the pairing), no `thought` and
/// signatures only on a model part. Found by the fuzz targets once Gemini was among their
/// providers: other writers store any block under a Gemini opaque part.
fn verbatim(block: &Value, model: bool) -> bool {
    let Some(object) = block.as_object() else {
        return false;
    };
    let mut data = GEMINI_PART_DATA
        .iter()
        .filter(|key| object.contains_key(**key));
    let one = matches!(
        (data.next(), data.next()),
        (Some(&key), None) if !matches!(key, "text" | "functionCall" | "functionResponse")
    );
    let signature_ok = match object.get(THOUGHT_SIGNATURE) {
        None => true,
        Some(signature) => model && signature.as_str().is_some_and(|s| !s.is_empty()),
    };
    one && signature_ok && !object.contains_key("thought")
}

fn has_no_id(metadata: Option<&Value>) -> bool {
    metadata
        .and_then(|m| m.get(GEMINI))
        .and_then(|g| g.get("id"))
        .and_then(Value::as_bool)
        == Some(false)
}

/// `part` with the signature it came with, if any.
fn signed(mut part: Map<String, Value>, signature: Option<&str>) -> Value {
    if let Some(signature) = signature {
        part.insert(THOUGHT_SIGNATURE.to_owned(), json!(signature));
    }
    Value::Object(part)
}

fn text_part(text: &str) -> Map<String, Value> {
    let mut part = Map::new();
    part.insert("text".to_owned(), json!(text));
    part
}

fn model_parts(parts: &[Part]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut first_call = true;
    for part in parts {
        match part {
            // A blank text is the signed-reasoning placeholder of another provider.
            Part::Text {
                text,
                provider_metadata,
            } if !is_blank(text) => {
                out.push(signed(
                    text_part(text),
                    gemini_signature(provider_metadata.as_ref()),
                ));
            }
            Part::Reasoning {
                text,
                provider_metadata,
            } => {
                let metadata = provider_metadata.as_ref();
                let signature = gemini_signature(metadata);
                if meta_flag(metadata, GEMINI, "thought") {
                    let mut part = text_part(text);
                    part.insert("thought".to_owned(), json!(true));
                    out.push(signed(part, signature));
                } else if signature.is_some() {
                    out.push(signed(text_part(text), signature));
                }
            }
            Part::ToolUse {
                id,
                name,
                input,
                provider_metadata,
            } => {
                let mut call = Map::new();
                if !has_no_id(provider_metadata.as_ref()) {
                    call.insert("id".to_owned(), json!(id));
                }
                call.insert("name".to_owned(), json!(Provider::Gemini.tool_name(name)));
                call.insert("args".to_owned(), input.clone());
                let mut part = Map::new();
                part.insert("functionCall".to_owned(), Value::Object(call));
                let signature = gemini_signature(provider_metadata.as_ref())
                    .or(first_call.then_some(FOREIGN_THOUGHT_SIGNATURE));
                first_call = false;
                out.push(signed(part, signature));
            }
            Part::ServerToolUse { .. } | Part::ServerToolResult { .. } => {
                out.push(json!({"text": describe(part)}));
            }
            Part::Image { .. } | Part::Document { .. } | Part::Opaque { .. } => {
                out.extend(media(part, true));
            }
            Part::Text { .. } | Part::RedactedReasoning { .. } | Part::ToolResult { .. } => {}
        }
    }
    out
}

fn function_response(
    part: &Part,
    names: &HashMap<&str, &str>,
    without_id: &HashSet<&str>,
) -> Option<Value> {
    let Part::ToolResult {
        tool_use_id,
        content,
        is_error,
        provider_metadata,
        ..
    } = part
    else {
        return None;
    };
    let name = names.get(tool_use_id.as_str()).copied().unwrap_or_default();
    let response = match provider_metadata
        .as_ref()
        .and_then(|m| m.get(GEMINI))
        .and_then(|g| g.get("response"))
    {
        Some(Value::Object(original)) => Value::Object(original.clone()),
        _ if *is_error => json!({"error": content}),
        _ => json!({"output": content}),
    };
    let mut body = Map::new();
    if !without_id.contains(tool_use_id.as_str()) {
        body.insert("id".to_owned(), json!(tool_use_id));
    }
    // The call's name as its call was sent (rule 15: the same name).
    body.insert("name".to_owned(), json!(Provider::Gemini.tool_name(name)));
    body.insert("response".to_owned(), response);
    Some(json!({"functionResponse": body}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::contract::check_gemini;
    use crate::history::sanitize::sanitize;
    use crate::history::testing::history;

    /// Gemini takes PNG, JPEG, WebP, HEIC and HEIF images, by what their bytes are ("MIME
    /// type must be image/png, image/jpeg, image/webp, image/heic, or image/heif"; an
    /// `image/jpg` or a GIF kept the session failing): each goes under the type its bytes
    /// are, a GIF is described, and the check names a GIF sent inline.
    #[test]
    fn images_go_under_the_type_their_bytes_are_and_gifs_are_described() {
        let image = |media_type: &str, data: &str| {
            Part::image(json!({"type": "base64", "media_type": media_type, "data": data}))
        };
        let jpeg = "/9j/4AAQSkZJRgAB";
        let gif = "R0lGODlhAQABAAAAACw=";
        let heic = "AAAAGGZ0eXBoZWljAAAA";
        let view = sanitize(&history(vec![(
            Role::User,
            vec![
                Part::text("look"),
                image("image/png", jpeg),
                image("image/jpg", jpeg),
                image("image/gif", gif),
                image("image/heic", heic),
            ],
        )]));
        let body = render(&view);
        assert_eq!(check_gemini(&body), vec![], "{body:#}");
        let parts = &body["contents"][0]["parts"];
        assert_eq!(parts[1]["inlineData"]["mimeType"], "image/jpeg");
        assert_eq!(parts[2]["inlineData"]["mimeType"], "image/jpeg");
        assert!(parts[3]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[image")));
        assert_eq!(parts[4]["inlineData"]["mimeType"], "image/heic");
        let refused = json!({"contents": [{"role": "user", "parts": [
            {"inlineData": {"mimeType": "image/gif", "data": gif}}]}]});
        let named: Vec<String> = check_gemini(&refused)
            .into_iter()
            .map(|violation| violation.path)
            .collect();
        assert_eq!(named, ["/contents/0/parts/0"]);
    }

    #[test]
    fn a_block_kept_verbatim_goes_back_as_it_came_only_when_gemini_takes_it_there() {
        let code = json!({"executableCode": {"language": "PYTHON", "code": "1"}});
        let signed_code = json!({"executableCode": {"code": "1"}, "thoughtSignature": "G"});
        let view = sanitize(&history(vec![
            (
                Role::User,
                vec![
                    Part::text("q"),
                    Part::opaque(GEMINI, code.clone()),
                    Part::opaque(GEMINI, signed_code.clone()),
                    Part::opaque(GEMINI, json!({"functionCall": {"name": "f"}})),
                ],
            ),
            (
                Role::Assistant,
                vec![
                    Part::opaque(GEMINI, signed_code.clone()),
                    Part::opaque(GEMINI, json!({"text": " ", "inlineData": {}})),
                ],
            ),
        ]));
        let body = render(&view);
        assert_eq!(check_gemini(&body), vec![], "{body:#}");
        let user = &body["contents"][0]["parts"];
        assert_eq!(user[1], code);
        assert!(user[2]["text"].is_string(), "{body:#}");
        assert!(user[3]["text"].is_string(), "{body:#}");
        let model = &body["contents"][1]["parts"];
        assert_eq!(model[0], signed_code);
        assert!(model[1]["text"].is_string(), "{body:#}");
    }

    #[test]
    fn signatures_stay_on_their_parts_and_foreign_calls_get_the_documented_value() {
        let signed_call = Part::ToolUse {
            id: "a".into(),
            name: "f".into(),
            input: json!({"x": 1}),
            provider_metadata: Some(json!({"gemini": {"thoughtSignature": "SIG"}})),
        };
        let view = sanitize(&history(vec![
            (Role::System, vec![Part::text("be brief")]),
            (Role::User, vec![Part::text("q")]),
            (
                Role::Assistant,
                vec![signed_call, Part::tool_use("b", "g", json!({}))],
            ),
            (
                Role::Tool,
                vec![Part::tool_result("a", "1"), Part::tool_error("b", "no")],
            ),
            (Role::User, vec![Part::text("and?")]),
            (Role::Assistant, vec![Part::tool_use("c", "f", json!({}))]),
            (Role::Tool, vec![Part::tool_result("c", "2")]),
        ]));
        let body = render(&view);
        assert_eq!(body["systemInstruction"]["parts"][0]["text"], "be brief");
        let contents = body["contents"].as_array().cloned().unwrap_or_default();
        let roles: Vec<&str> = contents
            .iter()
            .map(|c| c["role"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(roles, ["user", "model", "user", "model", "user"]);
        assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "SIG");
        assert!(contents[1]["parts"][1].get("thoughtSignature").is_none());
        assert_eq!(
            contents[2]["parts"][1]["functionResponse"],
            json!({"id": "b", "name": "g", "response": {"error": "no"}})
        );
        assert_eq!(contents[2]["parts"][2]["text"], "and?");
        assert_eq!(
            contents[3]["parts"][0]["thoughtSignature"],
            FOREIGN_THOUGHT_SIGNATURE
        );
    }
}

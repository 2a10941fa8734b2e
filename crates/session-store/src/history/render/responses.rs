//! The OpenAI Responses API body: `{"instructions"?, "input": [...]}` (PROVIDER_RULES 14).
//!
//! - System messages that came in as a Responses body's `instructions` (their first part
//!   says `{"openai": {"field": "instructions"}}`) are joined into `instructions`; every
//!   other system message stays in place as a `system` (or, when it came as one, `developer`)
//!   message item.
//! - A user message is one message item with an `input_text` part per text part.
//! - An assistant message becomes items in part order: consecutive text parts one `assistant`
//!   message item of `output_text` parts, each tool_use a `function_call` (`call_id`, `name`,
//!   `arguments` the input as a JSON string), each reasoning part that carries
//!   `encrypted_content` a `reasoning` item, replayed as stored (`id` and `summary` when they
//!   were stored, else the reasoning text as one `summary_text`). A reasoning item must be
//!   followed by the item it preceded, so reasoning is left out unless the next item its
//!   message renders (other reasoning aside) is an output item, as is reasoning without
//!   `encrypted_content` (another provider's, or one the server kept) and redacted reasoning.
//! - A call that came as a `custom_tool_call` (its free-form input kept as `{"input": text}`)
//!   goes back as one, and its result as a `custom_tool_call_output`; every other call is a
//!   `function_call`.
//! - An item's own `id` goes back only where it begins as its kind's does (`fc`, `ctc`, `rs`:
//!   [`crate::history::contract::item_id_fits`]), and a call's only when the reasoning of
//!   its message before it went back with its id: the API pairs the two.
//! - A call's `name` is one the API takes ([`Provider::tool_name`]).
//! - Each tool_result becomes a `function_call_output` (`call_id`, `output`): its text, or,
//!   when its content list holds an image or a document, that list as input parts.
//! - Images, documents and another provider's server tool parts are sent as text saying
//!   what they were; a provider block the store kept verbatim goes back only when OpenAI
//!   made it: as it came when it is an item of a type this renderer does not write itself
//!   (`web_search_call`, `item_reference`, ...), else as text saying what it was.
//!
//! Which reasoning may be sent (the model that wrote it) is decided before the loader
//! ([`crate::history::models::bind_to_model`]); the view guarantees the pairing.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use crate::history::blank::is_blank;
use crate::history::contract::{item_id_allowed, item_id_fits};
use crate::history::media::openai_image_url;
use crate::history::models::{encrypted_content, meta_str, OPENAI};
use crate::history::provider::Provider;
use crate::history::render::anthropic::join_text;
use crate::history::result_blocks;
use crate::history::sanitize::View;
use crate::history::texts::describe;
use crate::model::{Part, Role};

/// Renders `view` as an OpenAI Responses request body.
pub fn render(view: &View) -> Value {
    let mut instructions = Vec::new();
    let mut input = Vec::new();
    let custom = custom_calls(view);
    for message in &view.messages {
        match message.role {
            Role::System => {
                let text = join_text(&message.parts);
                if is_blank(&text) {
                    continue;
                }
                let first = message.parts.first().and_then(Part::provider_metadata);
                if meta_str(first, OPENAI, "field") == Some("instructions") {
                    instructions.push(text);
                } else {
                    let role = match meta_str(first, OPENAI, "role") {
                        Some("developer") => "developer",
                        _ => "system",
                    };
                    input.push(message_item(role, "input_text", &[text.as_str()]));
                }
            }
            Role::User => {
                let content: Vec<Value> = message.parts.iter().filter_map(user_part).collect();
                if !content.is_empty() {
                    input.push(json!({"type": "message", "role": "user", "content": content}));
                }
            }
            Role::Assistant => assistant(&message.parts, &mut input),
            Role::Tool => {
                for part in &message.parts {
                    if let Part::ToolResult {
                        tool_use_id,
                        content,
                        blocks,
                        ..
                    } = part
                    {
                        let output = blocks
                            .as_ref()
                            .and_then(output_list)
                            .unwrap_or_else(|| json!(content));
                        let kind = match custom.contains(tool_use_id.as_str()) {
                            true => "custom_tool_call_output",
                            false => "function_call_output",
                        };
                        input.push(json!({
                            "type": kind,
                            "call_id": tool_use_id,
                            "output": output,
                        }));
                    }
                }
            }
        }
    }
    let mut body = Map::new();
    if !instructions.is_empty() {
        body.insert(
            "instructions".to_owned(),
            Value::String(instructions.join("\n\n")),
        );
    }
    once_per_item_id(&mut input);
    body.insert("input".to_owned(), Value::Array(input));
    Value::Object(body)
}

/// Sends each item id at most once ("Duplicate item found with id rs_... Remove duplicate
/// items from your input and try again."): ids repeat where the loader renamed a repeated
/// call (its item id kept) or a source item came back twice. A later message, call or
/// reasoning item goes without its id (the calls right after a reasoning item that lost
/// its id lose theirs, which the API pairs with it); a later item kept verbatim goes as
/// text saying what it was.
fn once_per_item_id(input: &mut [Value]) {
    let mut seen: HashSet<String> = HashSet::new();
    let mut unpaired = false;
    for item in input.iter_mut() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        let call = matches!(kind, "function_call" | "custom_tool_call");
        unpaired &= call || kind == "reasoning";
        let Some(id) = item.get("id").and_then(Value::as_str) else {
            continue;
        };
        // Sent as it is: an id not sent before, on an item its reasoning did not lose.
        let dropped = !seen.insert(id.to_owned()) || (call && unpaired);
        match kind {
            _ if !dropped => {}
            "message" | "function_call" | "custom_tool_call" | "reasoning" => {
                unpaired |= kind == "reasoning";
                if let Some(fields) = item.as_object_mut() {
                    fields.shift_remove("id");
                }
            }
            other => {
                let text = format!("[provider item {other} repeated, not sent]");
                *item = message_item("assistant", "output_text", &[&text]);
            }
        }
    }
}

/// The ids of the calls that go back as `custom_tool_call` items ([`custom_input`]), whose
/// results go as `custom_tool_call_output`.
fn custom_calls(view: &View) -> HashSet<&str> {
    view.messages
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .flat_map(|message| &message.parts)
        .filter_map(|part| match part {
            Part::ToolUse {
                id,
                input,
                provider_metadata,
                ..
            } => custom_input(input, provider_metadata.as_ref()).map(|_| id.as_str()),
            _ => None,
        })
        .collect()
}

/// The free-form input of a call that came as a `custom_tool_call` (a tool declared with a
/// grammar or as plain text, Codex's `apply_patch`): kept as `{"input": text}` with its
/// type under `openai.type`, it goes back as such, not as a `function_call`.
fn custom_input<'a>(input: &'a Value, provider_metadata: Option<&Value>) -> Option<&'a str> {
    let kind = provider_metadata.and_then(|m| m.get(OPENAI)?.get("type")?.as_str());
    let fields = input.as_object().filter(|fields| fields.len() == 1);
    match kind {
        Some("custom_tool_call") => fields?.get("input")?.as_str(),
        _ => None,
    }
}

/// A result's content blocks as an output's list of input parts, when they hold an image or
/// a document (the API takes `input_text`, `input_image` and `input_file` there): each as
/// the same part of a user message would go ([`user_part`]); items of other types left out.
/// `None` for blocks of text alone, which go as the result's text.
fn output_list(blocks: &Value) -> Option<Value> {
    let parts: Vec<Part> = blocks
        .as_array()?
        .iter()
        .filter_map(result_blocks::from_block)
        .collect();
    if !result_blocks::holds_media(&parts) {
        return None;
    }
    Some(Value::Array(parts.iter().filter_map(user_part).collect()))
}

/// One part of a user message: text, an image (`input_image`), a document (`input_file`),
/// or a part OpenAI made, as it came.
fn user_part(part: &Part) -> Option<Value> {
    // A document's base64 data as a `data:` URL under its declared type.
    let data_url = |source: &Value| -> Option<String> {
        Some(format!(
            "data:{};base64,{}",
            source.get("media_type").and_then(Value::as_str)?,
            source.get("data").and_then(Value::as_str)?
        ))
    };
    match part {
        Part::Text { text, .. } if !is_blank(text) => {
            Some(json!({"type": "input_text", "text": text}))
        }
        Part::Image {
            source,
            provider_metadata,
            ..
        } => {
            let mut image = Map::new();
            image.insert("type".to_owned(), json!("input_image"));
            if let Some(url) = openai_image_url(source) {
                image.insert("image_url".to_owned(), json!(url));
            } else if let Some(id) = file_id(source) {
                image.insert("file_id".to_owned(), json!(id));
            } else {
                return Some(json!({"type": "input_text", "text": describe(part)}));
            }
            if let Some(Value::Object(attributes)) = provider_metadata
                .as_ref()
                .and_then(|m| m.get(OPENAI))
                .and_then(|o| o.get("attributes"))
            {
                for (key, value) in attributes {
                    image.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            Some(Value::Object(image))
        }
        Part::Document { source, title, .. } => {
            // An empty title names no file ("Missing required parameter").
            let title = title.as_deref().filter(|title| !title.is_empty());
            let mut file = Map::new();
            file.insert("type".to_owned(), json!("input_file"));
            let base64 = source.get("type").and_then(Value::as_str) == Some("base64");
            match (base64.then(|| data_url(source)).flatten(), file_id(source)) {
                (Some(data), _) => {
                    file.insert("file_data".to_owned(), json!(data));
                    // Inline data needs its file's name ("Missing required parameter").
                    let name = title.unwrap_or("document.pdf");
                    file.insert("filename".to_owned(), json!(name));
                }
                (None, Some(id)) => {
                    file.insert("file_id".to_owned(), json!(id));
                }
                (None, None) => return Some(json!({"type": "input_text", "text": describe(part)})),
            }
            if let Some(title) = title {
                file.entry("filename").or_insert_with(|| json!(title));
            }
            Some(Value::Object(file))
        }
        Part::Opaque { block, .. }
            if part.opaque_provider() == Some(OPENAI)
                && block
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|kind| USER_PARTS.contains(&kind)) =>
        {
            Some(block.clone())
        }
        _ => None,
    }
}

/// The content part types of a user message.
const USER_PARTS: &[&str] = &["input_text", "input_image", "input_file", "input_audio"];

fn file_id(source: &Value) -> Option<&str> {
    (source.get("type").and_then(Value::as_str) == Some("file"))
        .then(|| source.get("file_id").and_then(Value::as_str))
        .flatten()
}

fn message_item(role: &str, kind: &str, texts: &[&str]) -> Value {
    let content: Vec<Value> = texts
        .iter()
        .map(|text| json!({"type": kind, "text": text}))
        .collect();
    json!({"type": "message", "role": role, "content": content})
}

/// The item types this renderer writes from typed parts, and the content part types (which
/// are not items): a block kept verbatim with one of these types would escape the pairing
/// and the reasoning rules, so it goes back as text saying what it was.
const NOT_VERBATIM: &[&str] = &[
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "reasoning",
    "input_text",
    "input_image",
    "input_file",
    "input_audio",
    "output_text",
    "output_audio",
    "refusal",
    "summary_text",
    "reasoning_text",
];

/// The type of an item OpenAI made that the store kept verbatim and that goes back as it
/// came, if `part` is one: not a type this renderer writes itself, and with no `id` the API
/// refuses (a block whose `id` is not a string goes back as text saying what it was).
fn verbatim_item(part: &Part) -> Option<&str> {
    let Part::Opaque { block, .. } = part else {
        return None;
    };
    if part.opaque_provider() != Some(OPENAI) {
        return None;
    }
    block.get("type").and_then(Value::as_str).filter(|kind| {
        !kind.is_empty() && !NOT_VERBATIM.contains(kind) && item_id_allowed(block, kind)
    })
}

/// What a part of an assistant message renders as, for the reasoning before it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rendered {
    /// Nothing (blank text, a result, another provider's block) or reasoning: the reasoning
    /// before it precedes whatever comes next.
    Skipped,
    /// An output item (text, a call, a verbatim item OpenAI outputs).
    Output,
    /// An item that is not an output (a verbatim `*_output` or `item_reference`): reasoning
    /// right before it precedes nothing it was made for.
    Input,
}

fn rendered(part: &Part) -> Rendered {
    match part {
        Part::Text { text, .. } if is_blank(text) => Rendered::Skipped,
        Part::Text { .. }
        | Part::ToolUse { .. }
        | Part::ServerToolUse { .. }
        | Part::ServerToolResult { .. }
        | Part::Image { .. }
        | Part::Document { .. } => Rendered::Output,
        Part::Opaque { .. } if part.opaque_provider() != Some(OPENAI) => Rendered::Skipped,
        Part::Opaque { .. } => match verbatim_item(part) {
            Some(kind) if kind.ends_with("_output") || kind == "item_reference" => Rendered::Input,
            // A verbatim output item, or text saying what the block was.
            _ => Rendered::Output,
        },
        Part::Reasoning { .. } | Part::RedactedReasoning { .. } | Part::ToolResult { .. } => {
            Rendered::Skipped
        }
    }
}

/// Renders an assistant message's `parts` as input items: its texts gathered into message
/// items, its calls as `function_call` items, reasoning only where an output item follows.
fn assistant(parts: &[Part], input: &mut Vec<Value>) {
    let followed = followed_by_output(parts);
    let mut pending = Pending::default();
    // A reasoning part of this message before the call went out without its `rs_` id (or
    // not at all): the call's own item id, which the API pairs with that reasoning item, is
    // left out too ("Item 'fc_...' of type 'function_call' was provided without its
    // required 'reasoning' item").
    let mut reasoning_unpaired = false;
    for (ordinal, part) in parts.iter().enumerate() {
        match part {
            Part::Text {
                text,
                provider_metadata,
            } => {
                if !is_blank(text) {
                    // A text of another message item of the source starts a new item.
                    let this = provider_metadata.as_ref();
                    if pending
                        .meta
                        .last()
                        .is_some_and(|last| item_of(*last) != item_of(this))
                    {
                        pending.flush(input);
                    }
                    pending.push(text.clone(), this);
                }
            }
            // Another provider's server tools and media: what they were, as text.
            Part::ServerToolUse { .. }
            | Part::ServerToolResult { .. }
            | Part::Image { .. }
            | Part::Document { .. } => {
                pending.push(describe(part), None);
            }
            Part::Opaque { block, .. } => {
                if verbatim_item(part).is_some() {
                    pending.flush(input);
                    input.push(block.clone());
                } else if part.opaque_provider() == Some(OPENAI) {
                    pending.push(describe(part), None);
                }
            }
            Part::Reasoning {
                text,
                provider_metadata,
            } => {
                let Some(encrypted) = encrypted_content(provider_metadata.as_ref()) else {
                    reasoning_unpaired = true;
                    continue;
                };
                if !followed[ordinal] {
                    reasoning_unpaired = true;
                    continue;
                }
                pending.flush(input);
                let item = reasoning_item(text, provider_metadata.as_ref(), encrypted);
                reasoning_unpaired |= item.get("id").is_none();
                input.push(item);
            }
            Part::RedactedReasoning { .. } => reasoning_unpaired = true,
            Part::ToolResult { .. } => {}
            Part::ToolUse {
                id,
                name,
                input: args,
                provider_metadata,
            } => {
                pending.flush(input);
                let metadata = provider_metadata.as_ref();
                let custom = custom_input(args, metadata);
                let kind = match custom {
                    Some(_) => "custom_tool_call",
                    None => "function_call",
                };
                let item_id = (!reasoning_unpaired)
                    .then(|| call_item_id(kind, metadata))
                    .flatten();
                input.push(match custom {
                    Some(text) => custom_call(id, name, text, item_id),
                    None => function_call(id, name, args, item_id),
                });
            }
        }
    }
    pending.flush(input);
}

/// For each part, whether the first item rendered after it (reasoning aside) is an output
/// item: reasoning is sent only then, since a reasoning item must be followed by the item it
/// preceded (found by the fuzz targets: reasoning before an item kept verbatim that is not
/// an output).
fn followed_by_output(parts: &[Part]) -> Vec<bool> {
    let mut followed = vec![false; parts.len()];
    let mut next_is_output = false;
    for (ordinal, part) in parts.iter().enumerate().rev() {
        followed[ordinal] = next_is_output;
        match rendered(part) {
            Rendered::Skipped => {}
            Rendered::Output => next_is_output = true,
            Rendered::Input => next_is_output = false,
        }
    }
    followed
}

/// The item id the source gave a call (`fc_...`, `ctc_...`), where the API takes it as one
/// for an item of type `kind`.
fn call_item_id<'a>(kind: &str, provider_metadata: Option<&'a Value>) -> Option<&'a str> {
    provider_metadata
        .and_then(|m| m.get(OPENAI)?.get("id")?.as_str())
        .filter(|id| item_id_fits(kind, id))
}

/// A call that came as a `custom_tool_call`, with its free-form `input` and `item_id` when
/// it goes back.
fn custom_call(id: &str, name: &str, input: &str, item_id: Option<&str>) -> Value {
    let mut call = json!({
        "type": "custom_tool_call",
        "call_id": id,
        "name": Provider::Responses.tool_name(name),
        "input": input,
    });
    if let Some(item_id) = item_id {
        call["id"] = json!(item_id);
    }
    call
}

/// A tool call as a `function_call` item, with `item_id` ([`call_item_id`]) when it goes back.
fn function_call(id: &str, name: &str, args: &Value, item_id: Option<&str>) -> Value {
    let mut call = json!({
        "type": "function_call",
        "call_id": id,
        "name": Provider::Responses.tool_name(name),
        "arguments": args.to_string(),
    });
    if let Some(item_id) = item_id {
        call["id"] = json!(item_id);
    }
    call
}

/// The texts of the assistant message item being gathered, each with its part's metadata.
#[derive(Default)]
struct Pending<'a> {
    texts: Vec<String>,
    meta: Vec<Option<&'a Value>>,
}

impl<'a> Pending<'a> {
    fn push(&mut self, text: String, meta: Option<&'a Value>) {
        self.texts.push(text);
        self.meta.push(meta);
    }

    /// The gathered texts as one message item, if any.
    fn flush(&mut self, input: &mut Vec<Value>) {
        if !self.texts.is_empty() {
            let texts: Vec<&str> = self.texts.iter().map(String::as_str).collect();
            let mut item = message_item("assistant", "output_text", &texts);
            restore_item(&mut item, &self.meta);
            input.push(item);
        }
        self.texts.clear();
        self.meta.clear();
    }
}

/// The source's message item a text came in (`openai.item`), if kept.
fn item_of(metadata: Option<&Value>) -> Option<&Value> {
    metadata.and_then(|m| m.get(OPENAI)?.get("item"))
}

/// Puts back what the source's message item held beside its text: the item's own fields
/// (`id`, `status`, `phase`) from its first text, and each `output_text`'s attributes
/// (`annotations`, ...), kept at import under `openai.item` and `openai.attributes`.
fn restore_item(item: &mut Value, metadata: &[Option<&Value>]) {
    if let Some(Value::Object(fields)) = metadata.first().and_then(|m| item_of(*m)) {
        for (key, value) in fields {
            if !matches!(key.as_str(), "type" | "role" | "content") {
                item[key.as_str()] = value.clone();
            }
        }
    }
    let Some(Value::Array(content)) = item.get_mut("content") else {
        return;
    };
    for (part, meta) in content.iter_mut().zip(metadata) {
        let attributes = meta.and_then(|m| m.get(OPENAI)?.get("attributes"));
        if let Some(Value::Object(attributes)) = attributes {
            for (key, value) in attributes {
                if !matches!(key.as_str(), "type" | "text") {
                    part[key.as_str()] = value.clone();
                }
            }
        }
    }
}

fn reasoning_item(text: &str, metadata: Option<&Value>, encrypted: &str) -> Value {
    let openai = metadata.and_then(|m| m.get(OPENAI));
    let mut item = Map::new();
    item.insert("type".to_owned(), json!("reasoning"));
    if let Some(id) = openai
        .and_then(|o| o.get("id"))
        .and_then(Value::as_str)
        .filter(|id| item_id_fits("reasoning", id))
    {
        item.insert("id".to_owned(), json!(id));
    }
    let summary = match openai.and_then(|o| o.get("summary")) {
        Some(Value::Array(summary)) => Value::Array(summary.clone()),
        _ if text.is_empty() => json!([]),
        _ => json!([{"type": "summary_text", "text": text}]),
    };
    item.insert("summary".to_owned(), summary);
    item.insert("encrypted_content".to_owned(), json!(encrypted));
    Value::Object(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::sanitize::sanitize;
    use crate::history::testing::{call, history};

    fn encrypted(text: &str, blob: &str) -> Part {
        Part::reasoning(text, Some(json!({"openai": {"encrypted_content": blob}})))
    }

    #[test]
    fn reasoning_precedes_its_item_and_calls_pair_with_outputs() {
        let view = sanitize(&history(vec![
            (Role::User, vec![Part::text("q")]),
            (
                Role::Assistant,
                vec![encrypted("r1", "E1"), call("c1"), encrypted("late", "E2")],
            ),
            (Role::Tool, vec![Part::tool_result("c1", "ok")]),
            (
                Role::Assistant,
                vec![Part::reasoning("anthropic", None), Part::text("done")],
            ),
        ]));
        let body = render(&view);
        let types: Vec<&str> = body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| item["type"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            types,
            [
                "message",
                "reasoning",
                "function_call",
                "function_call_output",
                "message"
            ]
        );
        assert_eq!(body["input"][1]["encrypted_content"], "E1");
        assert_eq!(body["input"][1]["summary"][0]["text"], "r1");
        assert_eq!(body["input"][2]["arguments"], "{\"cmd\":\"ls\"}");
        assert!(body.get("instructions").is_none());
    }

    /// An image goes under the type its bytes are; bytes that are no image OpenAI takes are
    /// described; the check names such a data URL.
    #[test]
    fn images_go_under_the_type_their_bytes_are_or_are_described() {
        let image = |media_type: &str, data: &str| {
            Part::image(json!({"type": "base64", "media_type": media_type, "data": data}))
        };
        let view = sanitize(&history(vec![(
            Role::User,
            vec![
                image("image/jpeg", "iVBORw0KGgo="),
                image("image/heic", "AA=="),
                // Inline data without a title still goes with a file name.
                Part::document(
                    json!({"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjcK"}),
                ),
            ],
        )]));
        let body = render(&view);
        assert_eq!(crate::history::contract::check_responses(&body), vec![]);
        let content = &body["input"][0]["content"];
        assert_eq!(
            content[0]["image_url"],
            "data:image/png;base64,iVBORw0KGgo="
        );
        assert_eq!(content[1]["type"], "input_text");
        assert_eq!(content[2]["filename"], "document.pdf");
        let refused = json!({"input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/heic;base64,AA=="},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0xLjcK"}]}]});
        let named: Vec<String> = crate::history::contract::check_responses(&refused)
            .into_iter()
            .map(|violation| violation.path)
            .collect();
        assert_eq!(named, ["/input/0/content/0", "/input/0/content/1"]);
    }

    /// The API refuses an item id of the wrong kind ("Expected an ID that begins with 'rs'",
    /// ids SDKs and gateways make up: `__fake_id__`, `item_...`) and a call's `fc_` id
    /// without the reasoning item it came after: such ids are left out, the calls go by their
    /// `call_id`, and an `rs_` reasoning before an `fc_` call keeps both.
    #[test]
    fn item_ids_go_back_only_where_the_api_takes_them() {
        let with_item = |id: &str, item: &str| Part::ToolUse {
            id: id.to_owned(),
            name: "f".to_owned(),
            input: json!({}),
            provider_metadata: Some(json!({"openai": {"id": item}})),
        };
        let reasoning = |id: &str| {
            Part::reasoning(
                "r",
                Some(json!({"openai": {"id": id, "encrypted_content": "E"}})),
            )
        };
        let step = |parts: Vec<Part>, calls: &[&str]| {
            vec![
                (Role::Assistant, parts),
                (
                    Role::Tool,
                    calls.iter().map(|c| Part::tool_result(*c, "ok")).collect(),
                ),
            ]
        };
        let mut messages = vec![(Role::User, vec![Part::text("q")])];
        // Paired: kept.
        messages.extend(step(
            vec![reasoning("rs_1"), with_item("a", "fc_a")],
            &["a"],
        ));
        // An id of the wrong kind, on the call and on the reasoning.
        messages.extend(step(vec![with_item("b", "__fake_id__")], &["b"]));
        messages.extend(step(
            vec![reasoning("item_df7e"), with_item("c", "fc_c")],
            &["c"],
        ));
        // Reasoning that cannot go (no encrypted content) takes its call's id with it.
        messages.extend(step(
            vec![Part::reasoning("r", None), with_item("d", "fc_d")],
            &["d"],
        ));
        // No reasoning at all: the `fc_` id goes back as it came.
        messages.extend(step(vec![with_item("e", "fc_e")], &["e"]));
        let body = render(&sanitize(&history(messages)));
        assert_eq!(crate::history::contract::check_responses(&body), vec![]);
        let ids: Vec<(String, Value)> = body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["type"] != "function_call_output" && item["type"] != "message")
            .map(|item| {
                (
                    item["type"].as_str().unwrap_or_default().to_owned(),
                    item["id"].clone(),
                )
            })
            .collect();
        let (reasoning_kind, call_kind) = ("reasoning".to_owned(), "function_call".to_owned());
        assert_eq!(
            ids,
            [
                (reasoning_kind.clone(), json!("rs_1")),
                (call_kind.clone(), json!("fc_a")),
                (call_kind.clone(), Value::Null),
                (reasoning_kind, Value::Null),
                (call_kind.clone(), Value::Null),
                (call_kind.clone(), Value::Null),
                (call_kind, json!("fc_e")),
            ],
            "{body:#}"
        );
        let refused = json!({"input": [
            {"role": "user", "content": "q"},
            {"type": "reasoning", "id": "item_1", "summary": [], "encrypted_content": "E"},
            {"type": "function_call", "id": "__fake_id__", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
        ]});
        let named: Vec<String> = crate::history::contract::check_responses(&refused)
            .into_iter()
            .map(|violation| violation.path)
            .collect();
        assert_eq!(named, ["/input/1/id", "/input/2/id"]);
    }

    #[test]
    fn a_result_with_media_goes_as_an_output_list_and_text_alone_as_a_string() {
        let result = |blocks: Value| Part::ToolResult {
            tool_use_id: "c".into(),
            content: "here".into(),
            is_error: false,
            blocks: Some(blocks),
            provider_metadata: None,
        };
        let png = "iVBORw0KGgo=";
        let heic = "AAAAGGZ0eXBoZWljAAAAAA==";
        let view = sanitize(&history(vec![
            (Role::User, vec![Part::text("q")]),
            (Role::Assistant, vec![call("c")]),
            (
                Role::Tool,
                vec![result(json!([
                    {"type": "text", "text": "here"},
                    {"type": "text", "text": " "},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/heic", "data": heic}},
                    {"type": "search_result", "source": "s", "title": "t", "content": []},
                ]))],
            ),
            (Role::Assistant, vec![call("d")]),
            (
                Role::Tool,
                vec![Part::ToolResult {
                    tool_use_id: "d".into(),
                    content: "only text".into(),
                    is_error: false,
                    blocks: Some(json!([{"type": "text", "text": "only text"}])),
                    provider_metadata: None,
                }],
            ),
        ]));
        let body = render(&view);
        assert_eq!(
            crate::history::contract::check_responses(&body),
            [],
            "{body:#}"
        );
        assert_eq!(
            body["input"][2]["output"],
            json!([
                {"type": "input_text", "text": "here"},
                {"type": "input_image", "image_url": format!("data:image/png;base64,{png}")},
                {"type": "input_text", "text": "[image (image/heic) not shown]"},
            ])
        );
        assert_eq!(body["input"][4]["output"], json!("only text"));
    }

    /// "Duplicate item found with id ...": a call repeated under the same item id (the
    /// loader renames its call id, not its item id) and an item kept verbatim twice go once.
    #[test]
    fn each_item_id_goes_once() {
        let opaque = |block: Value| Part::opaque(OPENAI, block);
        let with_item_id = |id: &str| Part::ToolUse {
            id: id.into(),
            name: "f".into(),
            input: json!({}),
            provider_metadata: Some(json!({"openai": {"id": "fc_1"}})),
        };
        let view = sanitize(&history(vec![
            (Role::User, vec![Part::text("q")]),
            (Role::Assistant, vec![with_item_id("c")]),
            (Role::Tool, vec![Part::tool_result("c", "ok")]),
            (
                Role::Assistant,
                vec![
                    opaque(json!({"type": "web_search_call", "id": "ws_1"})),
                    with_item_id("c"),
                ],
            ),
            (Role::Tool, vec![Part::tool_result("c", "ok")]),
            (
                Role::Assistant,
                vec![opaque(json!({"type": "web_search_call", "id": "ws_1"}))],
            ),
        ]));
        let body = render(&view);
        assert_eq!(
            crate::history::contract::check_responses(&body),
            [],
            "{body:#}"
        );
        let ids: Vec<(&str, Option<&str>)> = body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| {
                (
                    item["type"].as_str().unwrap_or_default(),
                    item["id"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("message", None),
                ("function_call", Some("fc_1")),
                ("function_call_output", None),
                ("web_search_call", Some("ws_1")),
                ("function_call", None),
                ("function_call_output", None),
                ("message", None),
            ]
        );
    }

    #[test]
    fn a_custom_tool_call_goes_back_as_one_with_its_output() {
        let custom = |id: &str, input: Value| Part::ToolUse {
            id: id.into(),
            name: "apply_patch".into(),
            input,
            provider_metadata: Some(
                json!({"openai": {"type": "custom_tool_call", "id": format!("ctc_{id}")}}),
            ),
        };
        let view = sanitize(&history(vec![
            (Role::User, vec![Part::text("patch it")]),
            (
                Role::Assistant,
                vec![
                    custom("c1", json!({"input": "*** Begin Patch"})),
                    // Its input rewritten into another shape: a function call.
                    custom("c2", json!({"input": "x", "more": 1})),
                    call("c3"),
                ],
            ),
            (
                Role::Tool,
                vec![
                    Part::tool_result("c1", "done"),
                    Part::tool_result("c2", "ok"),
                    Part::tool_result("c3", "ok"),
                ],
            ),
        ]));
        let body = render(&view);
        assert_eq!(
            crate::history::contract::check_responses(&body),
            [],
            "{body:#}"
        );
        let input = body["input"].as_array().expect("input");
        assert_eq!(
            input[1],
            json!({"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch",
                   "input": "*** Begin Patch", "id": "ctc_c1"})
        );
        let kinds: Vec<&str> = input.iter().filter_map(|i| i["type"].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "message",
                "custom_tool_call",
                "function_call",
                "function_call",
                "custom_tool_call_output",
                "function_call_output",
                "function_call_output"
            ]
        );
    }

    #[test]
    fn verbatim_item_with_an_id_the_api_refuses_goes_back_as_text() {
        let opaque = |block: Value| Part::opaque(OPENAI, block);
        let view = sanitize(&history(vec![
            (Role::User, vec![Part::text("q")]),
            (
                Role::Assistant,
                vec![
                    opaque(json!({"type": "reasoignn", "id": [{"type": "summary_text"}]})),
                    opaque(json!({"type": "web_search_call", "id": "ws_1"})),
                    opaque(json!({"type": "compaction", "id": 7})),
                ],
            ),
        ]));
        let body = render(&view);
        assert_eq!(
            crate::history::contract::check_responses(&body),
            [],
            "{body:#}"
        );
        let kinds: Vec<&str> = body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["type"].as_str())
            .collect();
        assert_eq!(kinds, ["message", "message", "web_search_call", "message"]);
    }

    #[test]
    fn reasoning_goes_back_only_before_an_output_item() {
        let opaque = |block: Value| Part::opaque(OPENAI, block);
        let view = sanitize(&history(vec![
            (Role::User, vec![Part::text("q")]),
            (
                Role::Assistant,
                vec![
                    encrypted("r1", "E1"),
                    opaque(json!({"type": "computer_call_output", "call_id": "x"})),
                    Part::text("after"),
                    encrypted("r2", "E2"),
                    encrypted("r3", "E3"),
                    opaque(json!({"type": "web_search_call", "id": "ws"})),
                    opaque(json!({"type": "reasoning", "summary": []})),
                ],
            ),
        ]));
        let body = render(&view);
        let items: Vec<(String, String)> = body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| {
                let kind = item["type"].as_str().unwrap_or_default().to_owned();
                let what = item["encrypted_content"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| item["content"][0]["text"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                (kind, what)
            })
            .collect();
        let expected: Vec<(String, String)> = [
            ("message", "q"),
            ("computer_call_output", ""),
            ("message", "after"),
            ("reasoning", "E2"),
            ("reasoning", "E3"),
            ("web_search_call", ""),
            // The reasoning block kept verbatim goes back as text, not as an item.
            ("message", "[provider block reasoning not sent]"),
        ]
        .iter()
        .map(|(k, w)| ((*k).to_owned(), (*w).to_owned()))
        .collect();
        assert_eq!(items, expected, "{body:#}");
    }

    mod prefix {
        use proptest::prelude::*;

        use super::super::render;
        use crate::history::sanitize::sanitize;
        use crate::history::testing::{arb, history};
        use crate::model::{Part, Role};

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// Appending a turn leaves every item rendered before it byte for byte unchanged
            /// (the prompt cache keeps hitting), whatever the history before.
            #[test]
            fn appending_a_turn_keeps_the_rendered_responses_prefix(
                before in arb::messages(12),
                rest in prop::collection::vec((prop_oneof![Just(Role::User), Just(Role::Assistant), Just(Role::Tool)], prop::collection::vec(arb::part(), 0..4)), 0..6),
            ) {
                let mut after = before.clone();
                after.push((Role::User, vec![Part::text("next question")]));
                after.extend(rest);
                let old = render(&sanitize(&history(before)));
                let new = render(&sanitize(&history(after)));
                let (old, new) = (old["input"].as_array().cloned().unwrap_or_default(), new["input"].as_array().cloned().unwrap_or_default());
                prop_assert!(new.len() >= old.len());
                prop_assert_eq!(&new[..old.len()], &old[..]);
            }
        }
    }
}

//! The Anthropic Messages API body: `{"system": ..., "messages": [...]}`.
//!
//! - `system` is top level: the text of every system message, joined with a blank line, in
//!   order; the key is left out when there is none. When a system text block came with
//!   attributes (a `cache_control` mark), `system` is the list of blocks instead, so they
//!   come back.
//! - A `tool` message becomes a `user` message of `tool_result` blocks; results come first,
//!   then the text of a following user message, joined into one message (rule 4).
//! - Consecutive messages of one role are joined into one (rule 5), so roles alternate.
//! - tool_use `input` is an object; `thinking` carries `thinking` and `signature` (taken from
//!   the `anthropic`, `bedrock` or `vertex` namespace), `redacted_thinking` carries `data`,
//!   both byte for byte and in place. Reasoning without a signature came from another
//!   provider and cannot be sent back: it is left out.
//! - A block the store kept verbatim goes back only when Anthropic made it: as it came when
//!   its type is not one this renderer writes from typed parts, else as text saying what it
//!   was.
//! - At most four `cache_control` marks go (the first ones in request order; rule 10d).
//! - Images and documents go as Anthropic takes them (rules 10e-10h): an image under the
//!   type its bytes are, one it cannot take described; past 100 of them or 24 MB of their
//!   data the oldest described, 20 at a time; past 20 images each over 2000 pixels a side
//!   described.
//! - The first message must be `user` (rule 1; Bedrock enforces it): when the view starts
//!   with an assistant message, a user message holding [`crate::history::texts::PLACEHOLDER_USER`] is put
//!   first. It depends on nothing that follows, so it stays stable as the session grows.

use serde_json::{Map, Value};

use crate::history::blank::is_blank;
use crate::history::contract::{
    attribute_fault, counted, result_item_fault, source_fit, too_large_among_many, Media,
    SourceFit, CACHE_MARKS_MAX, CHECKED_ATTRIBUTES, MEDIA_BYTES_MAX, MEDIA_MAX,
};
use crate::history::provider::Provider;
use crate::history::sanitize::View;
use crate::history::signed::signature_in;
use crate::history::texts::{describe, describe_media_block};
use crate::model::{Part, Role};

/// Renders `view` as an Anthropic Messages request body.
pub fn render(view: &View) -> Value {
    render_owned(view.clone())
}

/// [`render`] over a view the caller gives up: its strings and values move into the body
/// instead of being copied (the export's way, issue 16).
pub(crate) fn render_owned(view: View) -> Value {
    let mut system = Vec::new();
    let mut system_blocks = Vec::new();
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    // A system prompt whose blocks carry attributes (a cache_control mark) goes as blocks,
    // so they come back; otherwise as one string.
    let attributed = view
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .flat_map(|m| &m.parts)
        .any(|p| matches!(p, Part::Text { .. }) && attributes(p.provider_metadata()).is_some());
    for message in view.messages {
        let opens_turn = message.opens_turn;
        let (role, blocks) = match message.role {
            Role::System => {
                let text = join_text(&message.parts);
                if !is_blank(&text) {
                    system.push(text);
                }
                system_blocks.extend(message.parts.iter().filter_map(system_block));
                continue;
            }
            Role::Assistant => ("assistant", assistant_blocks(message.parts)),
            Role::User | Role::Tool => ("user", blocks(message.parts)),
        };
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            // Rule 5: the server joins consecutive messages of one role anyway; joining here
            // keeps roles alternating. A message that opens a turn is not joined, so appending
            // a turn never changes the bytes of the message before it (the server's join of
            // the two is still valid: that message holds results first, then text).
            Some((last_role, last)) if *last_role == role && !opens_turn => {
                last.extend(blocks);
            }
            _ => messages.push((role, blocks)),
        }
    }
    if messages
        .first()
        .is_some_and(|(role, _)| *role == "assistant")
    {
        messages.insert(
            0,
            (
                "user",
                vec![text_block(crate::history::texts::PLACEHOLDER_USER)],
            ),
        );
    }
    trim_final_assistant(&mut messages);
    let mut body = Map::new();
    if attributed && !system_blocks.is_empty() {
        body.insert("system".to_owned(), Value::Array(system_blocks));
    } else if !system.is_empty() {
        body.insert("system".to_owned(), Value::String(system.join("\n\n")));
    }
    let messages = messages
        .into_iter()
        .map(|(role, content)| {
            // Built in place: `json!` would serialize (deep-copy) the whole content list.
            let mut message = Map::with_capacity(2);
            message.insert("role".to_owned(), Value::String(role.to_owned()));
            message.insert("content".to_owned(), Value::Array(content));
            Value::Object(message)
        })
        .collect();
    body.insert("messages".to_owned(), Value::Array(messages));
    let mut body = Value::Object(body);
    let mut counts = counted(&body);
    if describe_oldest_media(&mut body, &counts.media) {
        counts = counted(&body);
    }
    // Marks kept from many requests: the first ones stay, so the bytes before a new one
    // never change.
    for path in counts.cache_marks.iter().skip(CACHE_MARKS_MAX) {
        if let Some(Value::Object(block)) = body.pointer_mut(path) {
            block.remove("cache_control");
        }
    }
    body
}

/// How many of the oldest media blocks are described at a time once a request holds more
/// than [`MEDIA_MAX`]: the request's bytes then change once for every this many new ones, not
/// for each (every change costs the prompt cache its prefix).
const MEDIA_DESCRIBED_STEP: usize = 20;

/// Rules 10e and 10g: past [`MEDIA_MAX`] images and documents (`media`, [`counted`]), or
/// past [`MEDIA_BYTES_MAX`] bytes of their data, the oldest are sent as text saying what they
/// were, in steps of [`MEDIA_DESCRIBED_STEP`], so the latest stay. True when it described
/// any.
fn describe_oldest_media(body: &mut Value, media: &[Media]) -> bool {
    let described = media_described(media);
    // Rule 10h: among more than 20 images, one over 2000 pixels a side is described too.
    let kept = &media[described..];
    let too_large: Vec<String> = too_large_among_many(body, kept)
        .into_iter()
        .map(|m| m.path.clone())
        .collect();
    let paths = media[..described].iter().map(|m| &m.path).chain(&too_large);
    let mut any = false;
    for path in paths {
        if let Some(block) = body.pointer_mut(path) {
            *block = text_block(&describe_media_block(block));
            any = true;
        }
    }
    any
}

/// How many of the oldest of `media` are described: the fewest, in steps of
/// [`MEDIA_DESCRIBED_STEP`], that leave at most [`MEDIA_MAX`] of them holding at most
/// [`MEDIA_BYTES_MAX`]. As a session grows it only grows, and only by whole steps.
fn media_described(media: &[Media]) -> usize {
    let mut bytes: usize = media.iter().map(|m| m.bytes).sum();
    let mut described = 0;
    while described < media.len()
        && (media.len() - described > MEDIA_MAX || bytes > MEDIA_BYTES_MAX)
    {
        let step = (described + MEDIA_DESCRIBED_STEP).min(media.len());
        bytes -= media[described..step]
            .iter()
            .map(|m| m.bytes)
            .sum::<usize>();
        described = step;
    }
    described
}

/// Rule 7b: a final assistant message (a prefill or a continuation) may not end with
/// whitespace. Its last text block loses its trailing whitespace; a block left empty is left
/// out, and a message left empty too. The single space kept between signed thinking blocks
/// is not exempt here: in the final assistant message every whitespace-only text block is
/// left out (the thinking blocks keep their order).
fn trim_final_assistant(messages: &mut Vec<(&'static str, Vec<Value>)>) {
    while let Some((role, blocks)) = messages.last_mut() {
        if *role != "assistant" {
            return;
        }
        blocks.retain(|block| {
            block.get("type").and_then(Value::as_str) != Some("text")
                || !block
                    .get("text")
                    .and_then(Value::as_str)
                    .is_some_and(is_blank)
        });
        let Some(last) = blocks.last_mut() else {
            messages.pop();
            continue;
        };
        if last.get("type").and_then(Value::as_str) != Some("text") {
            return;
        }
        let Some(text) = last.get("text").and_then(Value::as_str) else {
            return;
        };
        let trimmed = text.trim_end();
        if trimmed.len() == text.len() {
            return;
        }
        if is_blank(trimmed) {
            blocks.pop();
            if blocks.is_empty() {
                messages.pop();
            }
            continue;
        }
        let trimmed = trimmed.to_owned();
        if let Some(slot) = last.get_mut("text") {
            *slot = Value::String(trimmed);
        }
        return;
    }
}

/// The text parts of a system message, joined with a blank line; media and server tool
/// parts (which `system` cannot hold) described.
pub(crate) fn join_text(parts: &[Part]) -> String {
    let texts: Vec<String> = parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text, .. } if !is_blank(text) => Some(text.clone()),
            Part::Image { .. }
            | Part::Document { .. }
            | Part::ServerToolUse { .. }
            | Part::ServerToolResult { .. } => Some(crate::history::texts::describe(part)),
            _ => None,
        })
        .collect();
    texts.join("\n\n")
}

fn text_block(text: &str) -> Value {
    text_value(text.to_owned())
}

/// `{"type": "text", "text": text}`, the text moved in.
fn text_value(text: String) -> Value {
    object([
        ("type", Value::String("text".to_owned())),
        ("text", Value::String(text)),
    ])
}

/// An object of `fields` in order, built in place (`json!` would copy every value).
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    let mut object = Map::with_capacity(N);
    for (key, value) in fields {
        object.insert(key.to_owned(), value);
    }
    Value::Object(object)
}

/// A system part as a system block: text with its attributes, what `system` cannot hold
/// described; `None` for what is left out (blank text, reasoning, opaque).
fn system_block(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text, .. } if !is_blank(text) => block(part.clone()),
        Part::Image { .. }
        | Part::Document { .. }
        | Part::ServerToolUse { .. }
        | Part::ServerToolResult { .. } => Some(text_block(&crate::history::texts::describe(part))),
        _ => None,
    }
}

/// An assistant message's blocks: Anthropic takes no image or document from the model, so
/// those are described in text.
fn assistant_blocks(parts: Vec<Part>) -> Vec<Value> {
    parts
        .into_iter()
        .filter_map(|part| match part {
            Part::Image { .. } | Part::Document { .. } => {
                Some(text_value(crate::history::texts::describe(&part)))
            }
            _ => block(part),
        })
        .collect()
}

/// The content blocks of one view message, in part order.
fn blocks(parts: Vec<Part>) -> Vec<Value> {
    parts.into_iter().filter_map(block).collect()
}

/// One part as an Anthropic block, with the block attributes the source gave it (citations,
/// cache-control marks, ...: `provider_metadata.anthropic.attributes`) put back.
fn block(mut part: Part) -> Option<Value> {
    // The metadata is read before the part moves into its block.
    let ours = part.opaque_provider() == Some("anthropic");
    let server_use = matches!(part, Part::ServerToolUse { .. });
    let metadata = part.provider_metadata_mut().take();
    let anthropic = metadata.as_ref().and_then(|m| m.get("anthropic"));
    let signature = match &part {
        Part::Reasoning { .. } => Some(signature_in(metadata.as_ref())?.to_owned()),
        _ => None,
    };
    let mut rendered = bare_block(part, signature, ours)?;
    // Only a block with kept metadata or kept verbatim can carry an attribute to judge.
    let (Value::Object(out), true) = (&mut rendered, anthropic.is_some() || ours) else {
        return Some(rendered);
    };
    if let Some(Value::Object(anthropic)) = anthropic {
        // Citations stored by the first release's importer.
        if let Some(citations) = anthropic.get("citations") {
            out.insert("citations".to_owned(), citations.clone());
        }
        // Attributes add to the block and never replace what it holds (a write may set any
        // metadata: a kept `type` made a text block a tool_use, a kept `text` emptied it),
        // but for the importer's one: a server tool use of another type (`mcp_tool_use`).
        if let Some(Value::Object(attributes)) = anthropic.get("attributes") {
            for (key, value) in attributes {
                let retyped = server_use
                    && key == "type"
                    && value
                        .as_str()
                        .is_some_and(|kind| kind != "tool_use" && kind.ends_with("_tool_use"));
                if retyped || !out.contains_key(key) {
                    out.insert(key.clone(), value.clone());
                }
            }
        }
    }
    drop_refused_attributes(out);
    Some(rendered)
}

/// Leaves out of `block` (kept attributes, or a block kept verbatim) each attribute Anthropic
/// refuses in the shape it has ([`attribute_fault`]).
fn drop_refused_attributes(block: &mut Map<String, Value>) {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let refused = CHECKED_ATTRIBUTES.map(|key| {
        block
            .get(key)
            .is_some_and(|value| attribute_fault(kind, key, value).is_some())
    });
    for (key, refused) in CHECKED_ATTRIBUTES.into_iter().zip(refused) {
        if refused {
            block.shift_remove(key);
        }
    }
}

/// The block attributes an Anthropic source gave a part, kept for Anthropic alone.
pub(crate) fn attributes(metadata: Option<&Value>) -> Option<&Value> {
    metadata?.get("anthropic")?.get("attributes")
}

/// `part` as a bare block, its strings and values moved in; `signature` is a reasoning
/// part's, `ours` whether an opaque part is Anthropic's (both read before the metadata was
/// taken off the part).
fn bare_block(part: Part, signature: Option<String>, ours: bool) -> Option<Value> {
    let string = Value::String;
    Some(match part {
        Part::Text { text, .. } => text_value(text),
        Part::Reasoning { text, .. } => object([
            ("type", string("thinking".to_owned())),
            ("thinking", string(text)),
            ("signature", string(signature?)),
        ]),
        Part::RedactedReasoning { data, .. } => {
            if data.is_empty() {
                return None;
            }
            object([
                ("type", string("redacted_thinking".to_owned())),
                ("data", string(data)),
            ])
        }
        Part::ToolUse {
            id, name, input, ..
        } => object([
            ("type", string("tool_use".to_owned())),
            ("id", string(id)),
            ("name", string(Provider::Anthropic.tool_name_owned(name))),
            ("input", input),
        ]),
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
            blocks,
            ..
        } => {
            let mut result = Map::with_capacity(4);
            result.insert("type".to_owned(), string("tool_result".to_owned()));
            result.insert("tool_use_id".to_owned(), string(tool_use_id));
            // A structured result goes back with the items Anthropic takes; empty content
            // is left out rather than sent as an empty string.
            let items = blocks.map(|blocks| result_items(blocks, is_error));
            match items.filter(|items| !items.is_empty()) {
                Some(items) => {
                    result.insert("content".to_owned(), Value::Array(items));
                }
                _ if !content.is_empty() => {
                    result.insert("content".to_owned(), string(content));
                }
                _ => {}
            }
            if is_error {
                result.insert("is_error".to_owned(), Value::Bool(true));
            }
            Value::Object(result)
        }
        Part::Image { ref source, .. } | Part::Document { ref source, .. }
            if matches!(
                source_fit(media_kind(&part), source),
                SourceFit::Unsendable(_)
            ) =>
        {
            text_value(describe(&part))
        }
        Part::Image { source, .. } => object([
            ("type", string("image".to_owned())),
            ("source", sent_source("image", source)),
        ]),
        Part::Document { source, title, .. } => {
            let mut document = Map::new();
            document.insert("type".to_owned(), string("document".to_owned()));
            document.insert("source".to_owned(), sent_source("document", source));
            if let Some(title) = title {
                document.insert("title".to_owned(), string(title));
            }
            Value::Object(document)
        }
        Part::ServerToolUse {
            id, name, input, ..
        } => object([
            ("type", string("server_tool_use".to_owned())),
            ("id", string(id)),
            ("name", string(name)),
            ("input", input),
        ]),
        Part::ServerToolResult { block, .. } => block,
        Part::Opaque { .. } if !ours => return None,
        Part::Opaque { ref block, .. } if !verbatim(block) => text_value(describe(&part)),
        Part::Opaque { block, .. } => block,
    })
}

/// A structured tool_result's content list (an error result's when `is_error`) as Anthropic
/// takes it ([`result_item_fault`]): media whose source it cannot take, or in an error
/// result, described in a text item; other faulty items (a blank text, an item without a
/// type or of a type a result does not hold) left out; empty when nothing is left, or when
/// the stored value is not a list (the result's plain text goes instead).
fn result_items(blocks: Value, is_error: bool) -> Vec<Value> {
    let Value::Array(items) = blocks else {
        return Vec::new();
    };
    items
        .into_iter()
        .filter_map(|mut item| {
            if result_item_fault(&item, is_error).is_none() {
                return Some(item);
            }
            let kind = match item.get("type").and_then(Value::as_str) {
                Some("image") => "image",
                Some("document") => "document",
                _ => return None,
            };
            let source = item.get_mut("source").map(Value::take).unwrap_or_default();
            let retyped = matches!(source_fit(kind, &source), SourceFit::AsMediaType(_));
            if retyped && !is_error {
                item["source"] = sent_source(kind, source);
                return Some(item);
            }
            let media = match kind {
                "image" => Part::image(source),
                _ => Part::document(source),
            };
            Some(text_value(describe(&media)))
        })
        .map(|mut item| {
            if let Value::Object(fields) = &mut item {
                drop_refused_attributes(fields);
            }
            item
        })
        .collect()
}

/// The block type of an image or a document part.
fn media_kind(part: &Part) -> &'static str {
    match part {
        Part::Document { .. } => "document",
        _ => "image",
    }
}

/// A sendable media `source` ([`source_fit`]) as it is sent: under the `media_type` its data
/// is when it was declared as another.
fn sent_source(kind: &str, mut source: Value) -> Value {
    if let SourceFit::AsMediaType(actual) = source_fit(kind, &source) {
        source["media_type"] = Value::String(actual.to_owned());
    }
    source
}

/// True when a block kept verbatim can go back as it came: it has a type, and not one this
/// renderer writes from typed parts (a verbatim tool_use, thinking or server tool block
/// would escape the pairing and signature rules). Other writers store any block under an
/// Anthropic opaque part; the rest goes back as text saying what it was.
fn verbatim(block: &Value) -> bool {
    block
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|kind| {
            !kind.is_empty()
                && !kind.ends_with("_tool_result")
                && !matches!(
                    kind,
                    "text"
                        | "thinking"
                        | "redacted_thinking"
                        | "tool_use"
                        | "tool_result"
                        | "image"
                        | "document"
                        | "server_tool_use"
                        | "mcp_tool_use"
                )
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::history::contract::{check_anthropic, ProviderRule};
    use crate::history::sanitize::sanitize;
    use crate::history::testing::history;

    fn signed(text: &str) -> Part {
        Part::reasoning(text, Some(json!({"anthropic": {"signature": "S"}})))
    }

    #[test]
    fn a_block_kept_verbatim_goes_back_as_it_came_only_when_its_type_is_not_ours() {
        let compaction = json!({"type": "compaction", "content": "c"});
        let view = sanitize(&history(vec![
            (
                Role::User,
                vec![
                    Part::text("q"),
                    Part::opaque("anthropic", json!({"executableCode": {}})),
                ],
            ),
            (
                Role::Assistant,
                vec![
                    Part::opaque("anthropic", compaction.clone()),
                    Part::opaque("anthropic", json!({"type": "tool_use", "id": "x"})),
                ],
            ),
        ]));
        let body = render(&view);
        assert_eq!(check_anthropic(&body), vec![], "{body:#}");
        assert_eq!(body["messages"][0]["content"][1]["type"], "text");
        assert_eq!(body["messages"][1]["content"][0], compaction);
        assert_eq!(
            body["messages"][1]["content"][1]["text"],
            "[provider block tool_use not sent]"
        );
    }

    /// What the checker names in `body`: each violation's rule and path.
    fn rules_and_paths(body: &Value) -> Vec<(ProviderRule, String)> {
        check_anthropic(body)
            .into_iter()
            .map(|violation| (violation.rule, violation.path))
            .collect()
    }

    /// An image's or a document's source goes back as the block's `source` only when it is
    /// an object with a type; any other source (a write took `null`, a bare string, an
    /// object without a type) is described, and the checker names such a block: Anthropic
    /// refuses the request.
    #[test]
    fn media_whose_source_anthropic_cannot_take_is_described_and_named_by_the_checker() {
        let typed = json!({"type": "url", "url": "https://example.com/a.png"});
        let view = sanitize(&history(vec![(
            Role::User,
            vec![
                Part::text("see"),
                Part::image(json!(null)),
                Part::document(json!("a.pdf")),
                Part::image(json!({"url": "https://example.com/b.png"})),
                Part::image(json!({"type": ""})),
                Part::image(typed.clone()),
            ],
        )]));
        let body = render(&view);
        assert_eq!(check_anthropic(&body), vec![], "{body:#}");
        let content = &body["messages"][0]["content"];
        for at in 1..=4 {
            assert_eq!(content[at]["type"], "text", "{body:#}");
        }
        assert_eq!(content[5], json!({"type": "image", "source": typed}));
        let sent_as_stored = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "see"},
            {"type": "image", "source": null},
            {"type": "document", "source": "a.pdf"},
            {"type": "image"},
        ]}]});
        assert_eq!(
            rules_and_paths(&sent_as_stored),
            [1, 2, 3].map(|at| (ProviderRule::Shape, format!("/messages/0/content/{at}")))
        );
    }

    /// A tool_result's stored content list goes back with only the items Anthropic takes:
    /// an item without a type and a blank text are left out, media whose source it cannot
    /// take described; nothing left, the result's plain text (for an error, the filled-in
    /// error text) goes instead. The checker names each such item as sent before.
    #[test]
    fn a_structured_tool_result_goes_back_with_only_the_items_anthropic_takes() {
        let answered = |blocks: Value, is_error: bool| {
            let result = Part::ToolResult {
                tool_use_id: "c1".into(),
                content: String::new(),
                is_error,
                blocks: Some(blocks),
                provider_metadata: None,
            };
            let view = sanitize(&history(vec![
                (Role::User, vec![Part::text("q")]),
                (Role::Assistant, vec![Part::tool_use("c1", "t", json!({}))]),
                (Role::Tool, vec![result]),
            ]));
            let body = render(&view);
            assert_eq!(check_anthropic(&body), vec![], "{body:#}");
            body["messages"][2]["content"][0].clone()
        };
        let image = json!({"type": "image", "source": {"type": "url", "url": "https://e.x/a.png"}});
        for blocks in [
            json!([null]),
            json!([{"type": "text", "text": " "}]),
            json!("s"),
        ] {
            assert_eq!(answered(blocks, false).get("content"), None);
        }
        assert_eq!(
            answered(json!([]), true)["content"],
            "Tool call failed without output."
        );
        assert_eq!(
            answered(
                json!([{"type": "text", "text": ""}, {"type": "image", "source": null}, image]),
                false
            )["content"],
            json!([{"type": "text", "text": "[image not shown]"}, image])
        );
        let sent_as_stored = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": [
                null, {"type": "text", "text": ""}, {"type": "image", "source": null}, image,
            ]}]},
        ]});
        assert_eq!(
            rules_and_paths(&sent_as_stored),
            [
                (ProviderRule::Shape, 0),
                (ProviderRule::NonEmptyText, 1),
                (ProviderRule::Shape, 2)
            ]
            .map(|(rule, at)| (rule, format!("/messages/2/content/0/content/{at}")))
        );
    }

    /// Anthropic refuses a request with more than four `cache_control` marks ("A maximum of
    /// 4 blocks with cache_control may be provided. Found 5."); marks kept from each turn's
    /// request add up: the first four go (the system's first), later ones are left out, and
    /// the bytes before a new mark do not change as the session grows.
    #[test]
    fn cache_control_marks_beyond_four_are_left_out() {
        let mark = json!({"anthropic": {"attributes": {"cache_control": {"type": "ephemeral"}}}});
        let marked = |text: &str| Part::Text {
            text: text.into(),
            provider_metadata: Some(mark.clone()),
        };
        let mut messages = vec![(Role::System, vec![marked("be brief")])];
        let mut before = None;
        for turn in 0..6 {
            messages.push((Role::User, vec![marked(&format!("q{turn}"))]));
            messages.push((Role::Assistant, vec![Part::text(format!("a{turn}"))]));
            let body = render(&sanitize(&history(messages.clone())));
            assert_eq!(check_anthropic(&body), vec![], "{body:#}");
            let marks = counted(&body).cache_marks;
            assert_eq!(marks.len(), (turn + 2).min(CACHE_MARKS_MAX), "{body:#}");
            assert_eq!(marks[0], "/system/0");
            let text = body["messages"].to_string();
            if let Some(before) = &before {
                let before: &String = before;
                assert!(text.starts_with(&before[..before.len() - 1]), "prefix kept");
            }
            before = Some(text);
        }
        let over = json!({"messages": (0..5).map(|at| json!({
            "role": if at % 2 == 0 { "user" } else { "assistant" },
            "content": [{"type": "text", "text": "t", "cache_control": {"type": "ephemeral"}}],
        })).collect::<Vec<_>>()});
        let named: Vec<_> = check_anthropic(&over)
            .into_iter()
            .map(|violation| (violation.rule, violation.path))
            .collect();
        assert_eq!(
            named,
            [(
                crate::history::contract::ProviderRule::CacheControlLimit,
                "/messages/4/content/0".to_owned()
            )]
        );
    }

    /// Anthropic refuses a request with more than 100 images and documents, and such a
    /// session was dead ("Too much media: 0 document pages + 103 images > 100"): past 100
    /// the oldest are described in text, 20 at a time, tool_result images included; the
    /// latest stay as they were, and the bytes change once per 20 new images.
    #[test]
    fn images_past_one_hundred_are_described_oldest_first() {
        let image = |at: usize| Part::Image {
            source: json!({"type": "url", "url": format!("https://example.com/{at}.png")}),
            title: None,
            provider_metadata: None,
        };
        let mut messages = Vec::new();
        let mut bodies = Vec::new();
        for at in 0..130 {
            if at % 3 == 0 {
                let id = format!("c{at}");
                messages.push((Role::User, vec![Part::text("look")]));
                messages.push((
                    Role::Assistant,
                    vec![Part::tool_use(&id, "shot", json!({}))],
                ));
                let result = Part::ToolResult {
                    tool_use_id: id,
                    content: String::new(),
                    is_error: false,
                    blocks: Some(json!([{"type": "image", "source":
                        {"type": "url", "url": format!("https://example.com/{at}.png")}}])),
                    provider_metadata: None,
                };
                messages.push((Role::Tool, vec![result]));
            } else {
                messages.push((Role::User, vec![Part::text("and this"), image(at)]));
                messages.push((Role::Assistant, vec![Part::text("seen")]));
            }
            bodies.push(render(&sanitize(&history(messages.clone()))));
        }
        for (at, body) in bodies.iter().enumerate() {
            let count = at + 1;
            assert_eq!(check_anthropic(body), vec![], "{count} images");
            let kept = counted(body).media.len();
            let described = count.saturating_sub(MEDIA_MAX).div_ceil(20) * 20;
            assert_eq!(kept, count - described, "{count} images");
            let text = body.to_string();
            assert!(
                text.contains(&format!("https://example.com/{at}.png\"")),
                "latest kept"
            );
            if described > 0 {
                assert!(text.contains("[image from https://example.com/0.png not shown]"));
            }
        }
        // Between two steps the bytes before the new image stay.
        let (a, b) = (
            bodies[120]["messages"].to_string(),
            bodies[129]["messages"].to_string(),
        );
        assert!(b.starts_with(&a[..a.len() - 1]));
        let over = json!({"messages": [{"role": "user", "content": (0..101).map(|_| json!(
            {"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}}
        )).collect::<Vec<_>>()}]});
        let named: Vec<_> = check_anthropic(&over)
            .into_iter()
            .map(|violation| (violation.rule.as_str(), violation.path))
            .collect();
        assert_eq!(
            named,
            [("media_limit", "/messages/0/content/100".to_owned())]
        );
    }

    /// Anthropic refuses a request over 32 MB (413 `request_too_large`), and base64
    /// screenshots get there long before the context window fills: past 24 MB of media data
    /// the oldest are described too, 20 at a time, and the check names a request over 32 MB.
    #[test]
    fn media_past_their_byte_budget_are_described_oldest_first() {
        let media = |sizes: &[usize]| -> Vec<Media> {
            sizes
                .iter()
                .enumerate()
                .map(|(at, bytes)| Media {
                    path: format!("/messages/{at}/content/0"),
                    bytes: *bytes,
                    image: true,
                })
                .collect()
        };
        let mb = 1_000_000;
        assert_eq!(media_described(&media(&[mb; 24])), 0);
        assert_eq!(media_described(&media(&[mb; 25])), 20);
        assert_eq!(media_described(&media(&[mb; 44])), 20);
        assert_eq!(media_described(&media(&[mb; 45])), 40);
        assert_eq!(media_described(&media(&[0; 100])), 0);
        assert_eq!(media_described(&media(&[0; 101])), 20);
        // One image larger than the budget: everything up to it and it go.
        assert_eq!(media_described(&media(&[30 * mb])), 1);
        // Rendered: 30 images of a megabyte each keep the latest 10.
        let data = format!("iVBORw0KGgo{}", "A".repeat(mb - 11));
        let mut messages = Vec::new();
        for _ in 0..30 {
            let image =
                Part::image(json!({"type": "base64", "media_type": "image/png", "data": data}));
            messages.push((Role::User, vec![Part::text("and this"), image]));
            messages.push((Role::Assistant, vec![Part::text("seen")]));
        }
        let body = render(&sanitize(&history(messages)));
        assert_eq!(check_anthropic(&body), vec![]);
        assert_eq!(counted(&body).media.len(), 10);
        assert_eq!(body["messages"][0]["content"][1]["type"], "text");
        assert_eq!(body["messages"][58]["content"][1]["type"], "image");
        let big = json!({"messages": [{"role": "user", "content": "x".repeat(32 * mb)}]});
        let named: Vec<_> = check_anthropic(&big)
            .into_iter()
            .map(|violation| violation.rule.as_str())
            .collect();
        assert_eq!(named, ["request_too_large"]);
    }

    /// Anthropic refuses an error tool_result holding anything but text ("all content must
    /// be type 'text' if 'is_error' is true") and a result item of a type a result does not
    /// hold: an error result's image is described, an unknown item left out, a
    /// `search_result` kept; the check names both.
    #[test]
    fn result_items_are_what_a_result_holds_and_an_error_result_holds_text() {
        let image =
            json!({"type": "image", "source": {"type": "url", "url": "https://example.com/s.png"}});
        let search = json!({"type": "search_result", "source": "https://example.com", "title": "t",
            "content": [{"type": "text", "text": "found"}]});
        let result = |id: &str, is_error: bool| Part::ToolResult {
            tool_use_id: id.into(),
            content: "failed".into(),
            is_error,
            blocks: Some(json!([{"type": "text", "text": "shot"}, image, search,
                {"type": "tool_reference", "tool_name": "x"}])),
            provider_metadata: None,
        };
        let view = sanitize(&history(vec![
            (Role::User, vec![Part::text("q")]),
            (
                Role::Assistant,
                vec![
                    Part::tool_use("a", "shot", json!({})),
                    Part::tool_use("b", "shot", json!({})),
                ],
            ),
            (Role::Tool, vec![result("a", true), result("b", false)]),
        ]));
        let body = render(&view);
        assert_eq!(check_anthropic(&body), vec![], "{body:#}");
        let kinds = |at: usize| -> Vec<String> {
            body["messages"][2]["content"][at]["content"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|item| item["type"].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        assert_eq!(kinds(0), ["text", "text"]);
        assert_eq!(kinds(1), ["text", "image", "search_result"]);
        let refused = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": true,
                "content": [image, {"type": "tool_reference", "tool_name": "x"}]}]},
        ]});
        let named: Vec<_> = check_anthropic(&refused)
            .into_iter()
            .map(|violation| violation.rule.as_str())
            .collect();
        assert_eq!(named, ["error_result_content", "error_result_content"]);
    }

    /// Past 20 images in a request, Anthropic refuses any over 2000 pixels a side (below,
    /// it scales them down), and the session was stuck from there: past 20, such images are
    /// described; at 20 they go as they are; the check names one left in.
    #[test]
    fn among_more_than_twenty_images_the_oversized_are_described() {
        use base64::Engine;
        let png = |side: u32| {
            let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
            bytes.extend(side.to_be_bytes());
            bytes.extend(600u32.to_be_bytes());
            bytes.extend([8, 6, 0, 0, 0]);
            base64::engine::general_purpose::STANDARD.encode(bytes)
        };
        let session = |count: usize| {
            let mut messages = Vec::new();
            for at in 0..count {
                let side = if at % 7 == 0 { 4832 } else { 800 };
                let image = Part::image(
                    json!({"type": "base64", "media_type": "image/png", "data": png(side)}),
                );
                messages.push((Role::User, vec![Part::text("and this"), image]));
                messages.push((Role::Assistant, vec![Part::text("seen")]));
            }
            render(&sanitize(&history(messages)))
        };
        let twenty = session(20);
        assert_eq!(check_anthropic(&twenty), vec![]);
        assert_eq!(counted(&twenty).media.len(), 20);
        let more = session(25);
        assert_eq!(check_anthropic(&more), vec![], "{more:#}");
        // 0, 7, 14 and 21 were the large ones.
        assert_eq!(counted(&more).media.len(), 21);
        assert_eq!(more["messages"][14]["content"][1]["type"], "text");
        assert_eq!(more["messages"][16]["content"][1]["type"], "image");
        let mut left_in = more.clone();
        left_in["messages"][14]["content"][1] = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png(2001)}});
        let named: Vec<_> = check_anthropic(&left_in)
            .into_iter()
            .map(|violation| (violation.rule.as_str(), violation.path))
            .collect();
        assert_eq!(
            named,
            [("many_images_size", "/messages/14/content/1".to_owned())]
        );
    }

    /// Anthropic refuses an image whose declared type is not what its bytes are, or not one
    /// of the four it takes, and users report the session stuck from there: an image goes
    /// under the type its bytes are; one whose bytes are none of the four (HEIC), or a
    /// document that is not a PDF, is described; inside a tool_result too; the check names
    /// the mislabelled one.
    #[test]
    fn images_go_under_the_type_their_bytes_are() {
        use base64::Engine;
        let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let png = encode(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
        let jpeg = encode(b"\xff\xd8\xff\xe0\0\x10JFIF\0\x01");
        let webp = encode(b"RIFF\x10\0\0\0WEBPVP8 ");
        let heic = encode(b"\0\0\0\x18ftypheic\0\0");
        let pdf = encode(b"%PDF-1.7\n%\xe2\xe3");
        let base64 = |media_type: &str, data: &str| json!({"type": "base64", "media_type": media_type, "data": data});
        let sent_as = |part: Part| {
            let view = sanitize(&history(vec![(Role::User, vec![Part::text("see"), part])]));
            let body = render(&view);
            assert_eq!(check_anthropic(&body), vec![], "{body:#}");
            body["messages"][0]["content"][1].clone()
        };
        let image = |media_type: &str, data: &str| Part::image(base64(media_type, data));
        assert_eq!(
            sent_as(image("image/png", &png))["source"]["media_type"],
            "image/png"
        );
        assert_eq!(
            sent_as(image("image/png", &jpeg))["source"]["media_type"],
            "image/jpeg"
        );
        assert_eq!(
            sent_as(image("image/jpg", &jpeg))["source"]["media_type"],
            "image/jpeg"
        );
        assert_eq!(
            sent_as(image("image/png", &webp))["source"]["media_type"],
            "image/webp"
        );
        assert_eq!(sent_as(image("image/heic", &heic))["type"], "text");
        // Over the 5 MB Anthropic takes for one image ("image exceeds 5 MB maximum").
        let big = format!("{png}{}", "A".repeat(5 * 1024 * 1024));
        assert_eq!(sent_as(image("image/png", &big))["type"], "text");
        assert_eq!(sent_as(image("image/png", "not base64!"))["type"], "text");
        let document = |media_type: &str, data: &str| Part::document(base64(media_type, data));
        assert_eq!(
            sent_as(document("application/pdf", &pdf))["type"],
            "document"
        );
        assert_eq!(sent_as(document("application/pdf", &png))["type"], "text");
        assert_eq!(
            sent_as(Part::image(
                json!({"type": "url", "url": "https://example.com/a.png"})
            ))["type"],
            "image"
        );
        let result = Part::ToolResult {
            tool_use_id: "c".into(),
            content: String::new(),
            is_error: false,
            blocks: Some(json!([
                {"type": "image", "source": base64("image/png", &jpeg)},
                {"type": "image", "source": base64("image/heic", &heic)},
            ])),
            provider_metadata: None,
        };
        let view = sanitize(&history(vec![
            (Role::User, vec![Part::text("q")]),
            (
                Role::Assistant,
                vec![Part::tool_use("c", "shot", json!({}))],
            ),
            (Role::Tool, vec![result]),
        ]));
        let body = render(&view);
        assert_eq!(check_anthropic(&body), vec![], "{body:#}");
        let items = &body["messages"][2]["content"][0]["content"];
        assert_eq!(items[0]["source"]["media_type"], "image/jpeg");
        assert_eq!(items[1]["type"], "text");
        let mislabelled = json!({"messages": [{"role": "user", "content": [
            {"type": "image", "source": base64("image/png", &jpeg)}]}]});
        let named: Vec<_> = check_anthropic(&mislabelled)
            .into_iter()
            .map(|violation| violation.detail)
            .collect();
        assert_eq!(
            named,
            ["image block whose data is image/jpeg, not its media_type"]
        );
    }

    /// Block attributes kept in a part's metadata add to its block and never replace what
    /// the block is (a write may set any metadata: a kept `type` made a text block a
    /// tool_use, a kept `text` emptied it).
    #[test]
    fn kept_attributes_never_replace_what_the_block_is() {
        let text = |attributes: Value| Part::Text {
            text: "hi".into(),
            provider_metadata: Some(json!({"anthropic": {"attributes": attributes}})),
        };
        let view = sanitize(&history(vec![(
            Role::User,
            vec![
                text(json!({"type": "tool_use"})),
                text(json!({"text": "", "cache_control": {"type": "ephemeral"}})),
            ],
        )]));
        let body = render(&view);
        assert_eq!(check_anthropic(&body), vec![], "{body:#}");
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "hi"},
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
            ])
        );
        // The importer's own: a server tool use of another type keeps it, and only that.
        let retyped = |kind: &str| {
            let mut call = Part::server_tool_use("mcptoolu_1", "search", json!({}));
            *call.provider_metadata_mut() =
                Some(json!({"anthropic": {"attributes": {"type": kind, "server_name": "s"}}}));
            let view = sanitize(&history(vec![
                (Role::User, vec![Part::text("q")]),
                (Role::Assistant, vec![call]),
            ]));
            render(&view)["messages"][1]["content"][0].clone()
        };
        assert_eq!(retyped("mcp_tool_use")["type"], "mcp_tool_use");
        assert_eq!(retyped("mcp_tool_use")["server_name"], "s");
        assert_eq!(retyped("tool_use")["type"], "server_tool_use");
        assert_eq!(retyped("text")["type"], "server_tool_use");
    }

    #[test]
    fn a_final_assistant_message_never_ends_with_whitespace() {
        for parts in [
            vec![Part::text("Done.  \n")],
            vec![signed("a"), Part::text(" ")],
            vec![signed("a"), Part::text("x"), Part::text(" \t")],
            // The placeholder rule 7 keeps between signed thinking is not allowed in the
            // final assistant message (rule 7b).
            vec![signed("a"), Part::text(""), signed("b")],
            vec![signed("a"), Part::text(" "), signed("b"), Part::text("ok ")],
            vec![signed("a"), Part::text("\n"), signed("b"), Part::text("\t")],
        ] {
            let messages = history(vec![
                (Role::User, vec![Part::text("go")]),
                (Role::Assistant, parts.clone()),
            ]);
            let body = render(&sanitize(&messages));
            assert_eq!(check_anthropic(&body), vec![], "{parts:?}: {body:#}");
        }
        // The check names it in a body that does end so.
        let raw = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "text", "text": "Done. "}]},
        ]});
        let rules: Vec<ProviderRule> = check_anthropic(&raw).into_iter().map(|v| v.rule).collect();
        assert_eq!(rules, [ProviderRule::FinalAssistantTrailingWhitespace]);
        // And a whitespace-only block anywhere in it, even between signed thinking.
        let placeholder = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "a", "signature": "S"},
                {"type": "text", "text": " "},
                {"type": "thinking", "thinking": "b", "signature": "S"},
            ]},
        ]});
        let rules: Vec<ProviderRule> = check_anthropic(&placeholder)
            .into_iter()
            .map(|v| v.rule)
            .collect();
        assert_eq!(rules, [ProviderRule::FinalAssistantTrailingWhitespace]);
        // Not in an earlier assistant message: there the placeholder stands (rule 7).
        let mut earlier = placeholder.clone();
        if let Some(list) = earlier["messages"].as_array_mut() {
            list.push(json!({"role": "user", "content": "next"}));
        }
        assert_eq!(check_anthropic(&earlier), vec![]);
    }

    #[test]
    fn a_paused_turn_keeps_its_unanswered_server_call_and_a_later_turn_describes_it() {
        let paused = vec![
            (Role::User, vec![Part::text("search")]),
            (
                Role::Assistant,
                vec![
                    Part::server_tool_use("srvtoolu_1", "web_search", json!({"query": "q"})),
                    Part::server_tool_result(
                        "srvtoolu_1",
                        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}),
                    ),
                    Part::server_tool_use("srvtoolu_2", "web_search", json!({"query": "r"})),
                ],
            ),
        ];
        let body = render(&sanitize(&history(paused.clone())));
        assert_eq!(body["messages"][1]["content"][2]["type"], "server_tool_use");
        assert_eq!(check_anthropic(&body), vec![]);
        let mut moved_on = paused;
        moved_on.push((Role::User, vec![Part::text("never mind")]));
        let body = render(&sanitize(&history(moved_on)));
        assert_eq!(
            body["messages"][1]["content"][1]["type"],
            "web_search_tool_result"
        );
        assert_eq!(body["messages"][1]["content"][2]["type"], "text");
        assert_eq!(check_anthropic(&body), vec![]);
    }
}
